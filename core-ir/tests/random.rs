//! The Philox random ops (`philox`, `randint4x`, `randint`, `rand`, `randn`) against the
//! CPU Philox4x32 of `rutile_ir::testing::philox`, written from the published algorithm:
//! the same streams for given seeds and offsets, on the interpreter and through the
//! lowering in the SIMT simulator, on a ragged length.

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::{philox, Rng};
use rutile_ir::ScalarType::{self, *};
use rutile_ir::{Kernel, KernelBuilder, Value};

const BLOCK: i32 = 128;
const N: usize = 1000;

/// `out[i] = f(k, offsets[i])` over programs of [`BLOCK`] lanes, the last one masked.
fn kernel(out: ScalarType, f: impl for<'b> Fn(&'b KernelBuilder, Value<'b>) -> Value<'b>) -> Kernel {
    Kernel::build("random", |k| {
        let offsets = k.arg_ptr("offsets", I32);
        let o = k.arg_ptr("out", out);
        let n = k.arg_i32("n");
        let i = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = i.lt(n);
        let off = k.load_masked(offsets + i, mask, 0);
        k.store_masked(o + i, f(k, off), mask);
    })
    .unwrap()
}

/// Runs on the interpreter and on the SIMT simulator (which must agree bit for bit), and
/// returns the interpreter's output.
fn run(kernel: &Kernel, offsets: &[i32], out: ScalarType) -> HostBuffer {
    let args = [
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Ptr { buffer: 1, offset: 0 },
        ArgValue::Int(offsets.len() as i64),
    ];
    let grid = [offsets.len().div_ceil(BLOCK as usize) as u32, 1, 1];
    let fresh = || vec![HostBuffer::from_slice(offsets), HostBuffer::zeros(out, offsets.len())];
    let mut want = fresh();
    interp::run(kernel, grid, &args, &mut want).unwrap();
    for target in [Target::nvidia(4, 48 * 1024), Target::nvidia(1, 48 * 1024)] {
        let tk = lower(kernel, &target, &Specialization::none(args.len())).unwrap();
        let mut got = fresh();
        simt::run_threads(&tk, grid, &args, &mut got).unwrap();
        assert_eq!(got[1].as_bytes(), want[1].as_bytes(), "the lowering disagrees");
    }
    want.pop().unwrap()
}

/// Random offsets over the whole i32 range (negative ones are their u32 bits), and the
/// extremes.
fn offsets() -> Vec<i32> {
    let mut rng = Rng::new(0x0ff5);
    let mut v: Vec<i32> = (0..N).map(|_| rng.next_u64() as i32).collect();
    v[..4].copy_from_slice(&[0, 1, -1, i32::MIN]);
    v
}

#[test]
fn randint4x_is_philox4x32_10_of_the_offset_for_every_seed_type() {
    let offs = offsets();
    // (seed as the kernel sees it, its value as u64 the way Triton converts it).
    type Seed = fn(&KernelBuilder) -> Value<'_>;
    let seeds: [(Seed, u64); 5] = [
        (|k| k.scalar(12345, I32), 12345),
        (|k| k.scalar(-7, I32), (-7i64) as u64),
        (|k| k.scalar(0xdead_beefu32, U32), 0xdead_beef),
        (|k| k.scalar(0x1234_5678_9abc_def0i64, I64), 0x1234_5678_9abc_def0),
        (|k| k.scalar(u64::MAX - 5, U64), u64::MAX - 5),
    ];
    for (seed, value) in seeds {
        for word in 0..4 {
            let kern = kernel(U32, move |k, off| k.randint4x(seed(k), off)[word]);
            let got: Vec<u32> = run(&kern, &offs, U32).to_vec().unwrap();
            for (i, &o) in offs.iter().enumerate() {
                let want = philox::randint4x(value, o as u32)[word];
                assert_eq!(got[i], want, "seed {value:#x}, offset {o}, word {word}");
            }
        }
    }
}

#[test]
fn randint_is_the_first_word_and_u32_offsets_count_alike() {
    let offs = offsets();
    let kern = kernel(U32, |k, off| k.randint(42, off.bitcast(U32)));
    let got: Vec<u32> = run(&kern, &offs, U32).to_vec().unwrap();
    for (i, &o) in offs.iter().enumerate() {
        assert_eq!(got[i], philox::randint4x(42, o as u32)[0]);
    }
    // Integer literal seeds beyond i32 and i64 keep their value.
    for seed in [0x0123_4567_89ab_cdef_u64, u64::MAX - 1] {
        let kern = kernel(U32, move |k, off| k.randint(seed, off));
        let got: Vec<u32> = run(&kern, &offs, U32).to_vec().unwrap();
        for (i, &o) in offs.iter().enumerate() {
            assert_eq!(got[i], philox::randint4x(seed, o as u32)[0], "seed {seed:#x}");
        }
    }
}

#[test]
fn philox_with_a_full_counter_and_other_round_counts() {
    let offs = offsets();
    for rounds in [1, 7, 10] {
        let kern = kernel(U32, move |k, off| {
            let c1 = off * 3 + 1;
            let c2 = off ^ 0x5555;
            let c3 = k.full(&[BLOCK as u32], 99, I32);
            let r = k.philox(0x0bad_cafe_i64, [off, c1, c2, c3], rounds);
            r[0] ^ r[1] ^ r[2] ^ r[3]
        });
        let got: Vec<u32> = run(&kern, &offs, U32).to_vec().unwrap();
        for (i, &o) in offs.iter().enumerate() {
            let c = [
                o as u32,
                o.wrapping_mul(3).wrapping_add(1) as u32,
                (o ^ 0x5555) as u32,
                99,
            ];
            let r = philox::philox4x32(c, philox::key_of_seed(0x0bad_cafe), rounds);
            assert_eq!(got[i], r[0] ^ r[1] ^ r[2] ^ r[3], "offset {o}, {rounds} rounds");
        }
    }
}

#[test]
fn rand_is_uniform_bit_for_bit() {
    let offs: Vec<i32> = (0..N as i32).map(|i| i * 7 + 3).collect();
    let kern = kernel(F32, |k, off| k.rand(2024, off));
    let got: Vec<f32> = run(&kern, &offs, F32).to_vec().unwrap();
    for (i, &o) in offs.iter().enumerate() {
        assert_eq!(got[i].to_bits(), philox::rand(2024, o as u32).to_bits(), "offset {o}");
        assert!((0.0..1.0).contains(&got[i]));
    }
    // A uniform sample: mean 1/2, variance 1/12 (4 and 5 standard errors).
    let mean = got.iter().map(|&v| v as f64).sum::<f64>() / N as f64;
    let var = got.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / N as f64;
    assert!((mean - 0.5).abs() < 4.0 * (1.0 / 12.0 / N as f64).sqrt(), "mean {mean}");
    assert!((var - 1.0 / 12.0).abs() < 0.01, "variance {var}");
}

#[test]
fn randn_is_box_muller_of_the_first_two_words() {
    let offs: Vec<i32> = (0..N as i32).map(|i| i - 500).collect();
    let kern = kernel(F32, |k, off| k.randn(-1i64, off));
    let got: Vec<f32> = run(&kern, &offs, F32).to_vec().unwrap();
    for (i, &o) in offs.iter().enumerate() {
        let want = philox::randn(u64::MAX, o as u32);
        // The interpreter rounds each op to f32; the reference stays in f64.
        assert!(
            (got[i] as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
            "offset {o}: {} vs {want}",
            got[i]
        );
    }
    let mean = got.iter().map(|&v| v as f64).sum::<f64>() / N as f64;
    let var = got.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / N as f64;
    assert!(mean.abs() < 4.0 / (N as f64).sqrt(), "mean {mean}");
    assert!((var - 1.0).abs() < 0.15, "variance {var}");
}

#[test]
fn bad_seeds_and_offsets_are_build_errors() {
    let err = |f: for<'b> fn(&'b KernelBuilder, Value<'b>) -> Value<'b>| {
        Kernel::build("bad", |k| {
            let p = k.arg_ptr("p", F32);
            let i = k.arange(0, 16);
            k.store(p + i, f(k, i));
        })
        .unwrap_err()
        .to_string()
    };
    let e = err(|k, i| k.rand(1.5f32, i));
    assert!(
        e.contains("rand") && e.contains("seed must be an integer") && e.contains("f32"),
        "{e}"
    );
    let e = err(|k, i| k.rand(1, i.to(I64)));
    assert!(
        e.contains("rand") && e.contains("i32 or u32") && e.contains("i64"),
        "{e}"
    );
    let e = err(|k, i| k.randn(1, i.to(I16)));
    assert!(e.contains("randn") && e.contains("i16"), "{e}");
    let e = err(|k, i| k.uint_to_uniform_float(i.to(F32)));
    assert!(e.contains("uint_to_uniform_float") && e.contains("f32"), "{e}");
}

/// The dropout's arguments: `x` in buffer 0, the output in buffer 1.
fn dropout_args(n: usize, p: f32, seed: i32) -> [ArgValue; 5] {
    [
        ArgValue::Ptr { buffer: 0, offset: 0 },
        ArgValue::Ptr { buffer: 1, offset: 0 },
        ArgValue::Int(n as i64),
        ArgValue::Float(p as f64),
        ArgValue::Int(seed as i64),
    ]
}

#[test]
fn seeded_dropout_seed_matches_the_reference_through_the_lowering() {
    let n = 3000usize;
    let x = Rng::new(5).f32s(n, -1.0, 1.0);
    let (p, seed) = (0.3f32, -42i32);
    let kern = rutile_ir::seeds::seeded_dropout(256).unwrap();
    let args = dropout_args(n, p, seed);
    let grid = [n.div_ceil(256) as u32, 1, 1];
    let fresh = || vec![HostBuffer::from_slice(&x), HostBuffer::zeros(F32, n)];
    let mut want = fresh();
    interp::run(&kern, grid, &args, &mut want).unwrap();
    let out: Vec<f32> = want[1].to_vec().unwrap();
    for i in 0..n {
        let keep = philox::rand(seed as i64 as u64, i as u32) > p;
        let expected = if keep { x[i] / (1.0 - p) } else { 0.0 };
        assert_eq!(out[i].to_bits(), expected.to_bits(), "element {i}");
    }
    let tk = lower(&kern, &Target::nvidia(4, 48 * 1024), &Specialization::none(args.len())).unwrap();
    let mut got = fresh();
    simt::run_threads(&tk, grid, &args, &mut got).unwrap();
    assert_eq!(got[1].as_bytes(), want[1].as_bytes());
}

/// The dropout whose programs walk blocks: bit for bit the one-block kernel's output on the
/// interpreter for any number of programs (fewer than the blocks, as many, more), and in the
/// simulator lowered with asynchronous copies (the next blocks copied ahead, which the
/// lowering must then contain) and without, on a ragged length whose last block is masked.
#[test]
fn the_dropout_walk_equals_the_one_block_kernel() {
    use rutile_ir::thread::Stmt;
    let (n, block) = (3001usize, 256u32);
    let x = Rng::new(9).f32s(n, -1.0, 1.0);
    let (p, seed) = (0.4f32, 1234i32);
    let args = dropout_args(n, p, seed);
    let fresh = || vec![HostBuffer::from_slice(&x), HostBuffer::zeros(F32, n)];
    let blocks = n.div_ceil(block as usize) as u32;
    let mut want = fresh();
    let one_block = rutile_ir::seeds::seeded_dropout(block).unwrap();
    interp::run(&one_block, [blocks, 1, 1], &args, &mut want).unwrap();
    for stages in [1, 2, 3] {
        let walk = rutile_ir::seeds::seeded_dropout_walk(block, stages).unwrap();
        for programs in [1, 5, blocks, blocks + 3] {
            let mut got = fresh();
            interp::run(&walk, [programs, 1, 1], &args, &mut got).unwrap();
            assert_eq!(
                got[1].as_bytes(),
                want[1].as_bytes(),
                "{stages} stages, {programs} programs"
            );
        }
        for async_copy in [true, false] {
            let target = Target {
                async_copy,
                ..Target::nvidia(2, 48 * 1024)
            };
            // The pointers aligned, the length not (as the runtime specializes this launch).
            let spec = Specialization {
                divisible_by_16: vec![true, true, false, false, false],
                ..Specialization::none(args.len())
            };
            let tk = lower(&walk, &target, &spec).unwrap();
            let mut copies = 0;
            tk.walk(&mut |s| copies += matches!(s, Stmt::AsyncCopy { .. }) as usize);
            assert_eq!(
                copies > 0,
                async_copy && stages > 1,
                "{stages} stages, async copies {async_copy}"
            );
            let mut got = fresh();
            simt::run_threads(&tk, [4, 1, 1], &args, &mut got).unwrap();
            assert_eq!(
                got[1].as_bytes(),
                want[1].as_bytes(),
                "{stages} stages, async copies {async_copy}"
            );
        }
    }
}
