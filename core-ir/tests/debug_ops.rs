//! `static_assert`, `device_assert` and `device_print`: build-time failures, the
//! interpreter's checks and printed lines, and their absence from lowered (GPU) code.

use rutile_ir::interp::{self, capture_prints, simt, ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::*;

#[test]
fn static_assert_fails_the_build_with_its_message() {
    let build = |block: u32| {
        Kernel::build("meta", |k| {
            k.static_assert(
                block.is_power_of_two() && block >= 16,
                "BLOCK must be a power of two >= 16",
            );
            let p = k.arg_ptr("p", I32);
            k.store(p + k.arange(0, 16), k.arange(0, 16));
        })
    };
    assert!(build(64).is_ok());
    let e = build(8).unwrap_err().to_string();
    assert!(
        e.contains("static_assert")
            && e.contains("failed: BLOCK must be a power of two >= 16")
            && e.contains("debug_ops.rs"),
        "{e}"
    );
}

/// `x` must be below `limit` wherever `i < n`; the kernel copies `x` to `out`.
fn asserting_kernel() -> Kernel {
    Kernel::build("asserting", |k| {
        let (x, out) = (k.arg_ptr("x", I32), k.arg_ptr("out", I32));
        let (n, limit) = (k.arg_i32("n"), k.arg_i32("limit"));
        let i = k.program_id(0) * 32 + k.arange(0, 32);
        let mask = i.lt(n);
        let v = k.load_masked(x + i, mask, 0);
        k.device_assert(v.lt(limit) | !mask, "x must stay below the limit");
        k.store_masked(out + i, v, mask);
    })
    .unwrap()
}

fn args(n: usize, limit: i64) -> Vec<ArgValue> {
    vec![
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Ptr { buffer: 1, offset: 0 },
        ArgValue::Int(n as i64),
        ArgValue::Int(limit),
    ]
}

#[test]
fn device_assert_stops_the_interpreter_at_the_first_failing_element() {
    let kernel = asserting_kernel();
    let x: Vec<i32> = (0..100).map(|i| i * 3).collect();
    let mut bufs = vec![HostBuffer::from_slice(&x), HostBuffer::zeros(I32, 100)];
    interp::run(&kernel, [4, 1, 1], &args(100, 1000), &mut bufs).unwrap();
    assert_eq!(bufs[1].to_vec::<i32>().unwrap(), x);
    // 3·i ≥ 200 first at i = 67: program 2, element 3.
    let err = interp::run(&kernel, [4, 1, 1], &args(100, 200), &mut bufs).unwrap_err();
    match &err {
        InterpError::Fault { kind, op, program, .. } => {
            assert_eq!(
                (*kind, *op, *program),
                (FaultKind::AssertionFailed, "device_assert", [2, 0, 0])
            );
        }
        e => panic!("expected an assertion fault, got {e}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("device_assert failed at element (3): x must stay below the limit"),
        "{text}"
    );
}

/// `assume` is checked as `device_assert` is, naming its line, and compiled out the same.
#[test]
fn a_broken_assumption_stops_the_interpreter_and_costs_compiled_code_nothing() {
    let build = |assume: bool| {
        Kernel::build("assuming", |k| {
            let (x, out) = (k.arg_ptr("x", I32), k.arg_ptr("out", I32));
            let stride = k.arg_i32("stride");
            if assume {
                k.assume(stride.gt(0));
                k.assume(k.program_id(0).ge(0));
            }
            let i = k.arange(0, 32);
            k.store(out + i, k.load(x + i * stride));
        })
        .unwrap()
    };
    let (plain, assuming) = (build(false), build(true));
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = |stride: i64| [ptr(0), ptr(1), ArgValue::Int(stride)];
    let x: Vec<i32> = (0..64).collect();
    let mut bufs = vec![HostBuffer::from_slice(&x), HostBuffer::zeros(I32, 32)];
    interp::run(&assuming, [1, 1, 1], &args(2), &mut bufs).unwrap();
    let evens: Vec<i32> = (0..32).map(|i| 2 * i).collect();
    assert_eq!(bufs[1].to_vec::<i32>().unwrap(), evens);
    let text = interp::run(&assuming, [1, 1, 1], &args(0), &mut bufs)
        .unwrap_err()
        .to_string();
    for part in ["an assumption (`assume`) does not hold", file!()] {
        assert!(text.contains(part), "{text:?} does not say {part:?}");
    }
    // The lowered kernels of both are the same statements (the comments naming each op's
    // line aside, and the registers numbered in order of first use).
    let spec = Specialization::none(3);
    let lowered = |k: &Kernel| {
        let text = lower(k, &Target::nvidia(1, 48 * 1024), &spec).unwrap().to_string();
        let mut names: Vec<String> = Vec::new();
        let mut out = String::new();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            // Split into words and what lies between them; rename each register.
            let mut word = String::new();
            for c in line.chars().chain(['\n']) {
                if c.is_ascii_alphanumeric() {
                    word.push(c);
                    continue;
                }
                let register = word.len() > 1 && word.starts_with('r') && word[1..].bytes().all(|b| b.is_ascii_digit());
                if register {
                    let i = names.iter().position(|n| *n == word).unwrap_or(names.len());
                    if i == names.len() {
                        names.push(word.clone());
                    }
                    out.push_str(&format!("v{i}"));
                } else {
                    out.push_str(&word);
                }
                word.clear();
                out.push(c);
            }
        }
        out
    };
    assert_eq!(lowered(&plain), lowered(&assuming));
}

#[test]
fn device_assert_is_compiled_out_of_lowered_code() {
    let kernel = asserting_kernel();
    let t = lower(&kernel, &Target::nvidia(1, 48 * 1024), &Specialization::none(4)).unwrap();
    let x: Vec<i32> = (0..100).collect();
    let mut bufs = vec![HostBuffer::from_slice(&x), HostBuffer::zeros(I32, 100)];
    // The condition fails for most elements; the lowered kernel does not check it.
    simt::run_threads(&t, [4, 1, 1], &args(100, 5), &mut bufs).unwrap();
    assert_eq!(bufs[1].to_vec::<i32>().unwrap(), x);
}

/// The printed lines, sorted: threads print in their own order.
fn sorted(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    lines
}

#[test]
fn lowered_device_print_prints_each_element_once_as_the_interpreter() {
    // A 2-D block loaded along rows, printed with a value in another layout (its
    // transpose's transpose) and a scalar; small blocks on many threads replicate elements.
    let kernel = Kernel::build("printing", |k| {
        let x = k.arg_ptr("x", F32);
        let pid = k.program_id(0);
        let r = k.arange(0, 4).expand_dims(1);
        let c = k.arange(0, 8).expand_dims(0);
        let offs = r * 8 + c;
        let v = k.load(x + pid * 32 + offs);
        k.device_print("v, offs", &[v, offs.trans().trans()]);
        k.device_print("pid", &[pid]);
        k.device_print("no values", &[]);
    })
    .unwrap();
    let x: Vec<f32> = (0..64).map(|i| i as f32 * 0.75 - 3.0).collect();
    let arg = [ArgValue::Ptr { buffer: 0, offset: 0 }];
    let (r, want) = capture_prints(|| interp::run(&kernel, [2, 1, 1], &arg, &mut [HostBuffer::from_slice(&x)]));
    r.unwrap();
    assert_eq!(want.lines().count(), 2 * (32 + 2));
    let mut small = Target::nvidia(2, 48 * 1024);
    small.warp_size = 8;
    for target in [Target::nvidia(1, 48 * 1024), Target::nvidia(4, 48 * 1024), small] {
        let t = lower(&kernel, &target, &Specialization::none(1)).unwrap();
        let (r, got) = capture_prints(|| simt::run_threads(&t, [2, 1, 1], &arg, &mut [HostBuffer::from_slice(&x)]));
        r.unwrap();
        assert_eq!(
            sorted(&got),
            sorted(&want),
            "{} warps of {}",
            target.num_warps,
            target.warp_size
        );
    }
    // Persistent, one launched program walks both tiles and prints each tile's id.
    let persistent = Target {
        persistent: true,
        ..Target::nvidia(4, 48 * 1024)
    };
    let t = lower(&kernel, &persistent, &Specialization::none(1)).unwrap();
    let mut args = arg.to_vec();
    args.extend([2, 1, 1].map(ArgValue::Int));
    let (r, got) = capture_prints(|| simt::run_threads(&t, [1, 1, 1], &args, &mut [HostBuffer::from_slice(&x)]));
    r.unwrap();
    assert_eq!(sorted(&got), sorted(&want), "persistent");
}

#[test]
fn device_print_writes_a_line_per_element_and_program() {
    let kernel = Kernel::build("printing", |k| {
        let x = k.arg_ptr("x", F32);
        let pid = k.program_id(0);
        let r = k.arange(0, 2);
        let c = k.arange(0, 2);
        let offs = pid * 4 + r.expand_dims(1) * 2 + c.expand_dims(0);
        let v = k.load(x + offs);
        k.device_print("x, offs", &[v, offs]);
        k.device_print("pid", &[pid]);
    })
    .unwrap();
    let x = [0.5f32, -1.0, 2.25, 3.0, 4.0, 5.5, -6.0, 7.0];
    let (r, text) = capture_prints(|| {
        let mut bufs = vec![HostBuffer::from_slice(&x)];
        interp::run(&kernel, [2, 1, 1], &[ArgValue::Ptr { buffer: 0, offset: 0 }], &mut bufs)
    });
    r.unwrap();
    let want = "\
pid (0, 0, 0) idx (0, 0) x, offs: 0.5, 0
pid (0, 0, 0) idx (0, 1) x, offs: -1.0, 1
pid (0, 0, 0) idx (1, 0) x, offs: 2.25, 2
pid (0, 0, 0) idx (1, 1) x, offs: 3.0, 3
pid (0, 0, 0) idx () pid: 0
pid (1, 0, 0) idx (0, 0) x, offs: 4.0, 4
pid (1, 0, 0) idx (0, 1) x, offs: 5.5, 5
pid (1, 0, 0) idx (1, 0) x, offs: -6.0, 6
pid (1, 0, 0) idx (1, 1) x, offs: 7.0, 7
pid (1, 0, 0) idx () pid: 1
";
    assert_eq!(text, want);
}

#[test]
fn bad_debug_operands_are_build_errors() {
    let e = Kernel::build("bad", |k| {
        let p = k.arg_ptr("p", I32);
        k.device_assert(k.arange(0, 4), "not a condition");
        k.device_print("pointers", &[p]);
        k.device_print("shapes", &[k.arange(0, 4), k.arange(0, 8)]);
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("device_assert") && e.contains("boolean condition") && e.contains("<4xi32>"),
        "{e}"
    );
    assert!(e.contains("device_print") && e.contains("prints numbers"), "{e}");
    assert!(e.contains("one shape"), "{e}");
}

/// Unsigned values print as the unsigned numbers they are, `u64` above `i64::MAX` included
/// (held as its bits), in the interpreter and in the simulator.
#[test]
fn device_print_writes_large_u64_values_unsigned() {
    let kernel = Kernel::build("printing", |k| {
        let i = k.arange(0, 4);
        let v = (i - 2).to(U64);
        k.device_print("v", &[v, (i - 2).to(U32), (i - 2).to(U16), (i - 2).to(U8)]);
    })
    .unwrap();
    let (r, want) = capture_prints(|| interp::run(&kernel, [1, 1, 1], &[], &mut []));
    r.unwrap();
    assert!(
        want.contains("idx (0) v: 18446744073709551614, 4294967294, 65534, 254"),
        "{want}"
    );
    assert!(want.contains("idx (3) v: 1, 1, 1, 1"), "{want}");
    let t = lower(&kernel, &Target::nvidia(1, 48 * 1024), &Specialization::none(0)).unwrap();
    let (r, got) = capture_prints(|| simt::run_threads(&t, [1, 1, 1], &[], &mut []));
    r.unwrap();
    assert_eq!(sorted(&got), sorted(&want));
}
