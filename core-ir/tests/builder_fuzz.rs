//! Fuzzing the front door: random sequences of builder calls — well- and ill-typed, with
//! odd shapes, axes, literals and control flow — must never panic. A kernel either builds
//! (and then verifies, lowers and interprets without panicking) or returns errors.
//!
//! Bounded and deterministic (fixed seeds), so it runs in CI; `RUTILE_FUZZ_KERNELS=N` runs
//! more.

use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::ir::ReduceOp;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::{Kernel, KernelBuilder, ScalarType, ScalarType::*, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};

const TYPES: [ScalarType; 8] = [Bool, I8, I32, I64, U32, F16, F32, F64];
const BUFFER_LEN: usize = 4096;

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[rng.below(xs.len() as u64) as usize]
}

/// Dimensions: mostly powers of two, sometimes not, sometimes too many.
fn dims(rng: &mut Rng) -> Vec<u32> {
    let rank = pick(rng, &[0usize, 1, 1, 2, 2, 3, 4]);
    (0..rank).map(|_| pick(rng, &[1u32, 2, 4, 8, 16, 32, 3, 0])).collect()
}

/// One random op on the values built so far; returns the new values it made.
fn step<'b>(k: &'b KernelBuilder, rng: &mut Rng, pool: &[Value<'b>], ptrs: &[Value<'b>], depth: u32) -> Vec<Value<'b>> {
    let v = |rng: &mut Rng| pool[rng.below(pool.len() as u64) as usize];
    let t = |rng: &mut Rng| pick(rng, &TYPES);
    let axis = |rng: &mut Rng| pick(rng, &[0u32, 1, 2, 3, 7]);
    match rng.below(30) {
        0 => vec![k.arange(pick(rng, &[0, -4, 3]), pick(rng, &[1, 8, 64, 100, 0, -8]))],
        1 => vec![k.full(&dims(rng), pick(rng, &[1.5f64, -0.0, 3.0]), t(rng))],
        2 => vec![k.zeros(&dims(rng), t(rng))],
        3 => vec![k.program_id(axis(rng))],
        4 => vec![v(rng) + v(rng), v(rng) - 3, 2.5f32 * v(rng)],
        5 => vec![v(rng) * v(rng), v(rng) / v(rng), v(rng) % 7],
        6 => vec![
            v(rng) & v(rng),
            v(rng) | true,
            v(rng) ^ v(rng),
            v(rng) << 3,
            v(rng) >> v(rng),
        ],
        7 => vec![v(rng).lt(v(rng)), v(rng).eq(1.0), v(rng).ge(v(rng)), -v(rng), !v(rng)],
        8 => vec![
            v(rng).exp(),
            v(rng).sqrt(),
            v(rng).erf(),
            v(rng).abs(),
            v(rng).sigmoid(),
        ],
        9 => vec![v(rng).to(t(rng)), v(rng).bitcast(t(rng))],
        10 => vec![v(rng).expand_dims(axis(rng)), v(rng).reshape(&dims(rng))],
        11 => vec![
            v(rng).trans(),
            v(rng).permute(&[2, 0, 1]),
            v(rng).broadcast_to(&dims(rng)),
        ],
        12 => {
            let op = pick(
                rng,
                &[
                    ReduceOp::Sum,
                    ReduceOp::Max,
                    ReduceOp::Min,
                    ReduceOp::ArgMax,
                    ReduceOp::ArgMin,
                ],
            );
            vec![
                v(rng).reduce_with(op, axis(rng), rng.below(2) == 0),
                v(rng).sum(axis(rng)),
            ]
        }
        13 => vec![
            k.where_(v(rng), v(rng), v(rng)),
            k.minimum(v(rng), v(rng)),
            k.maximum(v(rng), 1),
        ],
        14 => vec![v(rng).fma(v(rng), v(rng)), v(rng).cdiv(v(rng)), v(rng).truediv(3)],
        15 | 16 => {
            let p = pick(rng, ptrs);
            let offs = v(rng);
            vec![k.load(p + offs), k.load_masked(p + offs, v(rng), v(rng))]
        }
        17 | 18 => {
            let p = pick(rng, ptrs);
            let offs = v(rng);
            if rng.below(2) == 0 {
                k.store(p + offs, v(rng));
            } else {
                k.store_masked(p + offs, v(rng), v(rng));
            }
            vec![]
        }
        19 => vec![k.dot(v(rng), v(rng)), k.dot_acc(v(rng), v(rng), v(rng))],
        20 => {
            let p = pick(rng, ptrs);
            let offs = v(rng);
            vec![
                k.atomic_add(p + offs, v(rng), None),
                k.atomic_cas(p + offs, v(rng), 1, Some(v(rng))),
            ]
        }
        21 if depth < 2 => {
            let init = [v(rng), v(rng)];
            let (start, end, step_) = (pick(rng, &[0, 5, -3]), pick(rng, &[4, 0, 9]), pick(rng, &[1, 2, -1, 0]));
            let mut inner = Rng::new(rng.next_u64());
            k.for_range(start, end, step_, &init, |i, c| {
                let mut local = vec![i, c[0], c[1]];
                local.extend(step(k, &mut inner, &local.clone(), ptrs, depth + 1));
                let n = local.len();
                match inner.below(3) {
                    0 => vec![c[0], c[1]],
                    1 => vec![local[n - 1], c[1]],
                    _ => vec![local[inner.below(n as u64) as usize]],
                }
            })
        }
        22 if depth < 2 => {
            let cond = v(rng);
            let (a, b) = (v(rng), v(rng));
            k.if_else(cond, || vec![a], || vec![if rng.below(2) == 0 { a } else { b }])
        }
        23 if depth < 2 => {
            let init = [v(rng)];
            let c = v(rng);
            k.while_loop(&init, |x| x[0].lt(c), |x| vec![x[0] + 1])
        }
        24 => vec![
            v(rng).tanh(),
            k.pow(v(rng), v(rng)),
            k.umulhi(v(rng), v(rng)),
            k.clamp(v(rng), v(rng), 2),
        ],
        25 => {
            let (a, b) = k.split(v(rng));
            vec![
                k.join(v(rng), v(rng)),
                k.interleave(v(rng), v(rng)),
                k.cat(v(rng), v(rng)),
                a,
                b,
            ]
        }
        26 => vec![
            k.rand(v(rng), v(rng)),
            k.randn(pick(rng, &[7i64, -1, 1 << 40]), v(rng)),
            k.randint4x(v(rng), v(rng))[3],
        ],
        27 => {
            k.static_assert(rng.below(4) != 0, "fuzzed");
            k.device_assert(v(rng), "fuzzed");
            vec![]
        }
        _ => vec![v(rng)],
    }
}

/// Builds one random kernel; `Err` with the errors when the builder refused it.
fn random_kernel(seed: u64) -> Result<Kernel, rutile_ir::BuildError> {
    Kernel::build("fuzz", |k| {
        let mut rng = Rng::new(seed);
        let ptrs = vec![k.arg_ptr("a", F32), k.arg_ptr("b", I32), k.arg_ptr("c", F16)];
        let mut pool = vec![k.arg_i32("n"), k.arg_scalar("x", F32), k.arange(0, 16), k.program_id(0)];
        for _ in 0..(4 + rng.below(16)) {
            let made = step(k, &mut rng, &pool, &ptrs, 0);
            pool.extend(made);
        }
    })
}

#[test]
fn the_builder_never_panics() {
    let kernels: u64 = std::env::var("RUTILE_FUZZ_KERNELS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let (mut built, mut refused, mut lowered, mut ran) = (0, 0, 0, 0);
    for seed in 0..kernels {
        let result = catch_unwind(AssertUnwindSafe(|| {
            if seed % 2 == 0 {
                rutile_ir::testing::random_kernel(seed)
            } else {
                random_kernel(seed)
            }
        }));
        let kernel = match result {
            Err(_) => panic!("building random kernel {seed} panicked"),
            Ok(Err(e)) => {
                assert!(!e.diagnostics.is_empty(), "kernel {seed}: an error without diagnostics");
                let text = e.to_string();
                assert!(text.contains(" at ") && text.contains(".rs:"), "kernel {seed}: {text}");
                refused += 1;
                continue;
            }
            Ok(Ok(k)) => k,
        };
        built += 1;
        rutile_ir::verify::verify(&kernel).unwrap_or_else(|e| panic!("kernel {seed} built but does not verify: {e}"));
        // Lowering and interpreting may refuse the kernel (dot, out-of-bounds accesses), but
        // must not panic.
        let lowered_ok = catch_unwind(AssertUnwindSafe(|| {
            rutile_ir::lower::lower(
                &kernel,
                &Target::nvidia(4, 48 * 1024),
                &Specialization::none(kernel.params.len()),
            )
            .is_ok()
        }))
        .unwrap_or_else(|_| panic!("lowering kernel {seed} panicked:\n{kernel}"));
        lowered += lowered_ok as u32;
        let ran_ok = catch_unwind(AssertUnwindSafe(|| {
            let mut buffers = [
                HostBuffer::from_slice(&vec![1.5f32; BUFFER_LEN]),
                HostBuffer::from_slice(&vec![3i32; BUFFER_LEN]),
                HostBuffer::from_slice(&vec![half::f16::from_f32(0.5); BUFFER_LEN]),
            ];
            let args = [
                ArgValue::Ptr { buffer: 0, offset: 0 },
                ArgValue::Ptr { buffer: 1, offset: 0 },
                ArgValue::Ptr { buffer: 2, offset: 0 },
                ArgValue::Int(100),
                ArgValue::Float(0.25),
            ];
            interp::run(&kernel, [2, 1, 1], &args, &mut buffers).is_ok()
        }))
        .unwrap_or_else(|_| panic!("interpreting kernel {seed} panicked:\n{kernel}"));
        ran += ran_ok as u32;
    }
    println!("{kernels} random kernels: {built} built ({lowered} lowered, {ran} ran), {refused} refused with errors");
    assert!(
        built > kernels / 20 && refused > kernels / 20,
        "the generator should make both good and bad kernels"
    );
}
