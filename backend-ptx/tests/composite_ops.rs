//! Block kernels using the ops that the builder composes from others (Philox random
//! numbers, `join`, `split`, `interleave`, `cat`, `clamp`, block pointers and tensor
//! descriptors, `asin`, `acos`, `atan`, `atan2`, libdevice's `expm1` to `atanh`, `byte_perm`, the
//! classification functions, `copysign`, `round`) and the math functions `tanh`, `pow` and
//! `umulhi`, lowered for an NVIDIA
//! target and assembled with ptxas for sm_80 and sm_90 (skipped without ptxas unless
//! `RUTILE_REQUIRE_TOOLS=1`).

mod support;

use rutile_ir::target::{Specialization, Target};
use rutile_ir::ScalarType::{self, *};
use rutile_ir::{Kernel, KernelBuilder, Value};
use support::emit_80_90;

/// `out = f(x, y)` over one program of 256 lanes, masked by `n`; `out` holds two elements
/// per lane so that ops doubling the block fit.
fn kernel(
    t: ScalarType,
    out: ScalarType,
    f: impl for<'b> Fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>,
) -> Kernel {
    Kernel::build("composite", |k| {
        let (px, py, po) = (k.arg_ptr("x", t), k.arg_ptr("y", t), k.arg_ptr("out", out));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * 256 + k.arange(0, 256);
        let mask = offs.lt(n);
        let (x, y) = (k.load_masked(px + offs, mask, 0), k.load_masked(py + offs, mask, 0));
        let r = f(k, x, y);
        let len: u32 = r.shape().iter().product();
        let flat = r.reshape(&[len]);
        k.store(po + k.program_id(0) * 512 + k.arange(0, len as i32), flat);
    })
    .unwrap()
}

fn assemble(label: &str, kernel: &Kernel) -> String {
    let t = rutile_ir::lower::lower(kernel, &Target::nvidia(4, 48 * 1024), &Specialization::none(4))
        .unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
    emit_80_90(&t)
}

#[test]
fn random_numbers_pass_ptxas() {
    assemble(
        "randint4x",
        &kernel(I32, U32, |k, x, _| {
            let r = k.randint4x(0x1234_5678_9abc_i64, x);
            r[0] ^ r[1] ^ r[2] ^ r[3]
        }),
    );
    assemble("rand", &kernel(I32, F32, |k, x, y| k.rand(y, x)));
    let ptx = assemble("randn", &kernel(U32, F32, |k, x, _| k.randn(-5, x)));
    assert!(ptx.contains("mul.hi.u32") && ptx.contains("lg2.approx.f32"));
}

#[test]
fn join_split_interleave_and_cat_pass_ptxas() {
    for t in [I8, I64, F16, F32] {
        assemble(
            "join, split, cat",
            &kernel(t, t, |k, x, y| {
                let (a, b) = k.split(k.join(x, y));
                k.cat(b, a)
            }),
        );
        assemble(
            "interleave, clamp",
            &kernel(t, t, |k, x, y| k.interleave(k.clamp(x, y, y), y)),
        );
    }
}

#[test]
fn tanh_pow_and_umulhi_pass_ptxas() {
    for t in [F16, BF16, F32] {
        assemble("tanh", &kernel(t, t, |_, x, _| x.tanh()));
        assemble("pow", &kernel(t, t, |k, x, y| k.pow(x, y)));
    }
    for t in [I32, U32, I64, U64] {
        assemble("umulhi", &kernel(t, t, |k, x, y| k.umulhi(x, y)));
    }
}

#[test]
fn device_print_calls_vprintf_and_passes_ptxas() {
    let kernel = Kernel::build("printing", |k| {
        let x = k.arg_ptr("x", F32);
        let r = k.arange(0, 4).expand_dims(1);
        let c = k.arange(0, 8).expand_dims(0);
        let offs = r * 8 + c;
        let v = k.load(x + offs);
        k.device_print("x 100%", &[v, offs.to(I64), v.gt(0.0f32), v.to(F16), offs.to(U32)]);
        k.device_print("pid", &[k.program_id(0)]);
        k.device_print("done", &[]);
    })
    .unwrap();
    let ptx = assemble("device_print", &kernel);
    if let Ok(path) = std::env::var("RUTILE_PRINT_PTX_TO") {
        std::fs::write(path, &ptx).unwrap();
    }
    assert!(ptx.contains("call (print_retval), vprintf"), "{ptx}");
    assert!(ptx.contains(".local .align 8 .b8 print_buf["), "{ptx}");
    // "%%" keeps the prefix's percent sign literal.
    let format = "pid (%d, %d, %d) idx (%d, %d) x 100%%: %.9g, %lld, %d, %.9g, %u\n";
    let bytes: Vec<String> = format.bytes().map(|b| b.to_string()).collect();
    assert!(ptx.contains(&bytes.join(", ")), "{ptx}");
}

/// Block pointers (a window checked on both dimensions, NaN padding, a store checked on
/// one; advanced by a loop's variable) and tensor descriptors, over a ragged `rows x cols`
/// tensor, on 1, 4 and 8 warps.
#[test]
fn block_pointers_and_tensor_descriptors_pass_ptxas() {
    use rutile_ir::Padding;
    for t in [F16, F32, I64] {
        let kernel = Kernel::build("block_pointers", |k| {
            let (x, y) = (k.arg_ptr("x", t), k.arg_ptr("y", t));
            let (rows, cols, stride) = (k.arg_i32("rows"), k.arg_i32("cols"), k.arg_i32("stride"));
            let pid = k.program_id(0);
            let at = (pid * 16 - 3, k.scalar(0, I32));
            let src = k.make_block_ptr(x, (rows, cols), (stride, 1), at, &[16, 64], &[1, 0]);
            let padding = if t.is_float() { Padding::Nan } else { Padding::Zero };
            let acc = k.zeros(&[16, 64], t);
            let sum = k.for_range(0, cols, 64, &[acc], |c, acc| {
                vec![acc[0] + k.load_block(&src.advance((0, c)), &[0, 1], padding)]
            });
            let dst = k.make_block_ptr(y, (rows, cols), (stride, 1), at, &[16, 64], &[1, 0]);
            k.store_block(&dst, sum[0], &[0]);
            let dx = k.make_tensor_descriptor(x, (rows, cols), (stride, 1), &[8, 32]);
            let dy = k.make_tensor_descriptor(y, (rows, cols), (stride, 1), &[8, 32]);
            dy.store((pid * 8, 64), dx.load((pid * 8, 64)));
        })
        .unwrap();
        for warps in [1, 4, 8] {
            let lowered = rutile_ir::lower::lower(&kernel, &Target::nvidia(warps, 48 * 1024), &Specialization::none(5))
                .unwrap_or_else(|e| panic!("{t}, {warps} warps: {e}"));
            emit_80_90(&lowered);
        }
    }
}

/// `asin`, `acos`, `atan` and `atan2` (compositions of ops) in f32 and f16.
#[test]
fn inverse_trigonometric_functions_pass_ptxas() {
    for t in [F32, F16] {
        assemble("asin", &kernel(t, t, |_, x, _| x.asin()));
        assemble("acos", &kernel(t, t, |_, x, _| x.acos()));
        assemble("atan", &kernel(t, t, |_, x, _| x.atan()));
        assemble("atan2", &kernel(t, t, |k, x, y| k.atan2(x, y)));
    }
}

/// The exponential, logarithmic and hyperbolic functions (`expm1` ... `atanh`), the
/// classification functions, `copysign`, `round`, and the rounding ops `trunc` and `rint`,
/// in f32 and f16 (the classification, rounding and sign in f64 too).
#[test]
fn libdevice_functions_pass_ptxas() {
    type Unary = for<'b> fn(Value<'b>) -> Value<'b>;
    let exp_log: [(&str, Unary); 9] = [
        ("expm1", |x| x.expm1()),
        ("log1p", |x| x.log1p()),
        ("exp10", |x| x.exp10()),
        ("log10", |x| x.log10()),
        ("sinh", |x| x.sinh()),
        ("cosh", |x| x.cosh()),
        ("asinh", |x| x.asinh()),
        ("acosh", |x| x.acosh()),
        ("atanh", |x| x.atanh()),
    ];
    for t in [F32, F16] {
        for (name, f) in exp_log {
            assemble(name, &kernel(t, t, move |_, x, _| f(x)));
        }
    }
    for t in [F32, F16, F64] {
        assemble(
            "classes",
            &kernel(t, t, |k, x, y| {
                let flags = x.isnan() | y.isinf() | (x.isfinite() & y.signbit());
                k.where_(flags, x.copysign(y), x.round() + y.trunc() + x.rint())
            }),
        );
    }
}

/// `byte_perm` is one `prmt` (its selector's nibbles kept to three bits, as the op reads
/// them), on both 32-bit types, accepted by `ptxas`; the Vulkan target has no such
/// instruction and gets shifts and masks instead (checked against the interpreter in
/// `core-ir/tests/byte_perm.rs`).
#[test]
fn byte_perm_is_one_prmt() {
    for t in [U32, I32] {
        let kernel = kernel(t, t, |_, x, y| x.byte_perm(y, x ^ y));
        let ptx = assemble("byte_perm", &kernel);
        // (One a thread's element: 256 lanes on 128 threads.)
        assert_eq!(ptx.matches("prmt.b32").count(), 2, "{t}: {ptx}");
        assert_eq!(
            ptx.matches(", 0x7777;").count(),
            2,
            "{t}: the selectors' sign bits cleared: {ptx}"
        );
        let vulkan =
            rutile_ir::lower::lower(&kernel, &Target::vulkan(32, 4, 48 * 1024), &Specialization::none(4)).unwrap();
        let mut kept = false;
        vulkan.walk(&mut |s| {
            kept |= matches!(
                s,
                rutile_ir::thread::Stmt::Set {
                    expr: rutile_ir::thread::Expr::BytePerm(..),
                    ..
                }
            )
        });
        assert!(!kept, "{t}: a byte_perm left for a target without one");
    }
}

/// Every directed-rounding op in every direction, f32 and f64: PTX's own instruction with
/// its rounding modifier (`add.rm.f32`, `fma.rp.f64`, `rcp.rz.f32`, ...), which `ptxas`
/// neither contracts nor rearranges, accepted by `ptxas`.
#[test]
fn directed_rounding_is_ptxs_rounding_modifiers() {
    use rutile_ir::{RoundedOp, Rounding};
    for t in [F32, F64] {
        for op in RoundedOp::ALL {
            for rounding in Rounding::ALL {
                let label = format!("{} {t}", op.name(rounding));
                let ptx = assemble(
                    &label,
                    &kernel(t, t, |k, x, y| {
                        let args = [x.into(), y.into(), (x * 0.5).into()];
                        k.rounded(op, rounding, &args[..op.arity()])
                    }),
                );
                let mode = ["rn", "rz", "rm", "rp"][rounding as usize];
                let name = ["add", "sub", "mul", "div", "rcp", "sqrt", "fma"][op as usize];
                let want = format!("{name}.{mode}.{}", t.name());
                assert!(ptx.contains(&want), "{label}: no `{want}` in\n{ptx}");
            }
        }
    }
}

/// The inexact conversions in a direction are PTX's `cvt` with the rounding modifier
/// (`cvt.rm.f32.f64`, `cvt.rp.f32.s64`, `cvt.rz.f64.u64`, ...), accepted by `ptxas`.
#[test]
fn conversions_in_a_direction_are_cvt_with_its_modifier() {
    use rutile_ir::Rounding;
    let pairs = [
        (I32, F32, "s32"),
        (U32, F32, "u32"),
        (I64, F32, "s64"),
        (U64, F32, "u64"),
        (F64, F32, "f64"),
        (I64, F64, "s64"),
        (U64, F64, "u64"),
    ];
    for (from, to, src) in pairs {
        for rounding in Rounding::ALL {
            let label = format!("{from} to {to} {rounding:?}");
            let ptx = assemble(&label, &kernel(from, to, |_, x, _| x.to_rounded(to, rounding)));
            let mode = ["rn", "rz", "rm", "rp"][rounding as usize];
            let want = format!("cvt.{mode}.{}.{src}", to.name());
            assert!(ptx.contains(&want), "{label}: no `{want}` in\n{ptx}");
        }
    }
}

/// f32 and f64 to f16 and bf16 in a direction (Triton's `fp_downcast_rounding`): f16 by
/// `cvt` with the modifier; bf16, whose `cvt` rounds to nearest or toward zero only, by
/// dropping the f32's low half (an f64 rounded to odd in f32 first) and stepping away from
/// zero where the direction says; accepted by `ptxas`, none of it needing more than sm_70
/// but rounding to nearest (`cvt.rn.bf16.f32`, sm_80).
#[test]
fn conversions_to_half_types_in_a_direction() {
    use rutile_ir::Rounding;
    for from in [F32, F64] {
        for to in [F16, BF16] {
            for rounding in Rounding::ALL {
                let label = format!("{from} to {to} {rounding:?}");
                let ptx = assemble(&label, &kernel(from, to, |_, x, _| x.to_rounded(to, rounding)));
                let mode = ["rn", "rz", "rm", "rp"][rounding as usize];
                let want = match (to, rounding) {
                    (F16, _) => format!("cvt.{mode}.f16.{}", from.name()),
                    (_, Rounding::NearestEven) => "cvt.rn.bf16.f32".to_string(),
                    (_, Rounding::TowardZero) => "and.b32".to_string(),
                    _ => "add.u32".to_string(),
                };
                assert!(ptx.contains(&want), "{label}: no `{want}` in\n{ptx}");
                if from == F64 && to == BF16 {
                    assert!(
                        ptx.contains("cvt.rz.f32.f64"),
                        "{label}: not rounded to odd in f32 first"
                    );
                }
            }
        }
    }
}
