//! Division by constant powers of two in loops as shifts and masks
//! (`thread::reduce_constant_divisions`): the rewritten kernel computes in the SIMT
//! simulator what the kernel dividing did, for dividends of both signs and the extremes of
//! each type, and the divisions it does not rewrite stay.

use rutile_ir::interp::simt::run_threads;
use rutile_ir::interp::{ArgValue, HostBuffer};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::thread::{reduce_constant_divisions, Expr, Memory, Stmt, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType::{self, I32, I64, U32, U64};

const OPS: [BinaryOp; 3] = [BinaryOp::Div, BinaryOp::Rem, BinaryOp::CeilDiv];
const THREADS: usize = 64;

/// Thread `t` stores `in[t] op d` for each op into `out[op * THREADS + t]`, in a loop run
/// once (or, with `in_loop` false, outside any loop); the divisor `d`
/// is set as `0 + divisor` (a constant the pass must fold) or, with `then` given, set to
/// `divisor` and then to `then` (a constant where they are equal, as the lowering sets some
/// on both sides of a warp-specialized kernel).
fn kernel(ty: ScalarType, divisor: i64, then: Option<i64>) -> ThreadKernel {
    kernel_in(ty, divisor, then, true)
}

fn kernel_in(ty: ScalarType, divisor: i64, then: Option<i64>, in_loop: bool) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("divide", 2, 32);
    let (input, output) = (k.ptr("in", ty), k.ptr("out", ty));
    let tid = k.thread_id();
    let d = if let Some(then) = then {
        let d = k.int(ty, divisor);
        k.assign(d, Expr::Const(rutile_ir::ir::Literal::Int(then)));
        d
    } else {
        let zero = k.int(ty, 0);
        let c = k.int(ty, divisor);
        k.bin(BinaryOp::Add, zero, c)
    };
    let x = k.load(ty, 1, Memory::Global { param: input }, tid, None)[0];
    let divide = |k: &mut ThreadKernelBuilder| {
        for (i, op) in OPS.into_iter().enumerate() {
            let q = k.bin(op, x, d);
            let base = k.int(I32, (i * THREADS) as i64);
            let at = k.bin(BinaryOp::Add, base, tid);
            k.store(vec![q], Memory::Global { param: output }, at, None);
        }
    };
    if in_loop {
        let trip = k.int(I32, 0);
        let (zero, one) = (k.int(I32, 0), k.int(I32, 1));
        k.assign(trip, Expr::Copy(zero));
        k.while_(
            |k| k.cmp(CmpOp::Lt, trip, one),
            |k| {
                divide(k);
                k.assign(trip, Expr::Binary(BinaryOp::Add, trip, one));
            },
        );
    } else {
        divide(&mut k);
    }
    k.finish()
}

/// Dividends around 0, around multiples of `divisor`, and the type's extremes.
fn dividends(ty: ScalarType, divisor: i64) -> Vec<i64> {
    let (min, max) = match ty {
        I32 => (i32::MIN as i64, i32::MAX as i64),
        U32 => (0, u32::MAX as i64),
        I64 => (i64::MIN, i64::MAX),
        _ => (0, -1), // u64::MAX's bits
    };
    let mut v = vec![min, max, min.wrapping_add(1), max.wrapping_sub(1), 0, 1, -1, 7, -7];
    for m in [1, 2, 3, 5, 1000] {
        for e in [-1, 0, 1] {
            v.push((divisor.wrapping_mul(m)).wrapping_add(e));
            v.push((divisor.wrapping_mul(-m)).wrapping_add(e));
        }
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ divisor as u64;
    while v.len() < THREADS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as i64 >> (x % 40));
    }
    v.truncate(THREADS);
    v
}

fn buffer(ty: ScalarType, v: &[i64]) -> HostBuffer {
    match ty {
        I32 => HostBuffer::from_slice(&v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
        U32 => HostBuffer::from_slice(&v.iter().map(|&x| x as u32).collect::<Vec<_>>()),
        I64 => HostBuffer::from_slice(v),
        _ => HostBuffer::from_slice(&v.iter().map(|&x| x as u64).collect::<Vec<_>>()),
    }
}

fn run(kernel: &ThreadKernel, ty: ScalarType, input: &[i64]) -> Vec<u8> {
    let mut buffers = [buffer(ty, input), HostBuffer::zeros(ty, OPS.len() * THREADS)];
    let args = [
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Ptr { buffer: 1, offset: 0 },
    ];
    run_threads(kernel, [1, 1, 1], &args, &mut buffers).unwrap();
    let [_, out] = buffers;
    out.into_bytes()
}

fn divisions(k: &ThreadKernel) -> usize {
    let mut n = 0;
    k.walk(&mut |s| {
        if let Stmt::Set {
            expr: Expr::Binary(BinaryOp::Div | BinaryOp::Rem | BinaryOp::CeilDiv, ..),
            ..
        } = s
        {
            n += 1;
        }
    });
    n
}

#[test]
fn divisions_by_powers_of_two_become_shifts_with_the_same_results() {
    for ty in [I32, U32, I64, U64] {
        let wide = ty.bits() == 64;
        let top = if ty.is_signed_int() {
            ty.bits() - 2
        } else {
            ty.bits() - 1
        };
        for shift in [0, 1, 3, 6, 7, 16, top] {
            if shift > 31 && !wide {
                continue;
            }
            let divisor = 1i64.wrapping_shl(shift);
            let plain = kernel(ty, divisor, None);
            let mut reduced = plain.clone();
            reduce_constant_divisions(&mut reduced);
            let label = format!("{ty} by {divisor}");
            assert_eq!(divisions(&plain), 3, "{label}");
            assert_eq!(divisions(&reduced), 0, "{label}: a division stayed");
            let input = dividends(ty, divisor);
            assert_eq!(run(&reduced, ty, &input), run(&plain, ty, &input), "{label}");
        }
    }
}

#[test]
fn other_divisors_and_registers_set_to_two_values_stay_divisions() {
    for (ty, divisor, then) in [
        (I32, 3, None),
        (I32, -4, None),
        (I32, i32::MIN as i64, None),
        (I64, i64::MIN, None),
        (U32, 12, None),
        (I32, 1, Some(64)),
    ] {
        let mut k = kernel(ty, divisor, then);
        let before = k.clone();
        reduce_constant_divisions(&mut k);
        assert_eq!(divisions(&k), 3, "{ty} by {divisor}, then {then:?}");
        let input = dividends(ty, divisor);
        assert_eq!(run(&k, ty, &input), run(&before, ty, &input));
    }
    // An unsigned divisor whose top bit alone is set is a power of two of its type.
    let mut k = kernel(U32, 1 << 31, None);
    reduce_constant_divisions(&mut k);
    assert_eq!(divisions(&k), 0);
    // Set twice to the same power of two: a constant.
    let mut k = kernel(I32, 64, Some(64));
    let before = k.clone();
    reduce_constant_divisions(&mut k);
    assert_eq!(divisions(&k), 0);
    let input = dividends(I32, 64);
    assert_eq!(run(&k, I32, &input), run(&before, I32, &input));
    // Outside loops a division runs once a program, and stays.
    let mut k = kernel_in(I32, 64, None, false);
    reduce_constant_divisions(&mut k);
    assert_eq!(divisions(&k), 3);
}
