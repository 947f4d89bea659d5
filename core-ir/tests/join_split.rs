//! `join`, `split`, `interleave` and `cat` against references computed here, on random
//! inputs of several types and shapes, on the interpreter and through the lowering in the
//! SIMT simulator (several targets, so that the layouts differ); and their build errors.

use rutile_ir::interp::{self, simt, ArgValue, Element, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::Memory;
use rutile_ir::ScalarType::{self, *};
use rutile_ir::{Kernel, KernelBuilder, Value};

fn targets() -> Vec<Target> {
    let mut small = Target::nvidia(2, 48 * 1024);
    small.warp_size = 8;
    vec![Target::nvidia(1, 48 * 1024), Target::nvidia(4, 48 * 1024), small]
}

/// Runs `kernel` (parameters: the buffers, in order) on one program, in the interpreter and
/// lowered for each target in the simulator (which must agree bit for bit); returns the
/// interpreter's buffers.
fn run(kernel: &Kernel, buffers: Vec<HostBuffer>) -> Vec<HostBuffer> {
    let args: Vec<ArgValue> = (0..buffers.len())
        .map(|b| ArgValue::Ptr { buffer: b, offset: 0 })
        .collect();
    let mut want = buffers.clone();
    interp::run(kernel, [1, 1, 1], &args, &mut want).unwrap();
    for t in targets() {
        let tk = lower(kernel, &t, &Specialization::none(args.len())).unwrap();
        let mut got = buffers.clone();
        simt::run_threads(&tk, [1, 1, 1], &args, &mut got).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.as_bytes(), w.as_bytes(), "warp {} x {}", t.warp_size, t.num_warps);
        }
    }
    want
}

/// Row-major offsets of a block of `dims` (rank 1 or 2).
fn offsets<'b>(k: &'b KernelBuilder, dims: &[u32]) -> Value<'b> {
    match *dims {
        [n] => k.arange(0, n as i32),
        [r, c] => k.arange(0, r as i32).expand_dims(1) * c as i32 + k.arange(0, c as i32).expand_dims(0),
        _ => unreachable!("rank 1 or 2 here"),
    }
}

fn random<T: Element>(rng: &mut Rng, n: usize, f: impl Fn(u64) -> T) -> Vec<T> {
    (0..n).map(|_| f(rng.next_u64())).collect()
}

/// `out = join(a, b)` (and `interleave`, the same elements), `split` back into two blocks.
fn join_split_round_trip<T: Element + Copy + PartialEq + std::fmt::Debug>(
    t: ScalarType,
    dims: &[u32],
    a: Vec<T>,
    b: Vec<T>,
) {
    let n = a.len();
    let kernel = Kernel::build("join_split", |k| {
        let (pa, pb) = (k.arg_ptr("a", t), k.arg_ptr("b", t));
        let (pj, pi) = (k.arg_ptr("joined", t), k.arg_ptr("interleaved", t));
        let (pa2, pb2) = (k.arg_ptr("a2", t), k.arg_ptr("b2", t));
        let offs = offsets(k, dims);
        let (x, y) = (k.load(pa + offs), k.load(pb + offs));
        let j = k.join(x, y);
        assert_eq!(j.shape(), [dims, &[2]].concat());
        let mut jd = dims.to_vec();
        jd.push(2);
        let joffs = match *jd {
            [r, c] => k.arange(0, r as i32).expand_dims(1) * 2 + k.arange(0, c as i32).expand_dims(0),
            [r, c, d] => {
                let rr = k.arange(0, r as i32).expand_dims(1).expand_dims(2) * (c * d) as i32;
                let cc = k.arange(0, c as i32).expand_dims(0).expand_dims(2) * d as i32;
                rr + cc + k.arange(0, d as i32).expand_dims(0).expand_dims(0)
            }
            _ => unreachable!(),
        };
        k.store(pj + joffs, j);
        let mut idims = dims.to_vec();
        *idims.last_mut().unwrap() *= 2;
        k.store(pi + offsets(k, &idims), k.interleave(x, y));
        let (s0, s1) = k.split(j);
        k.store(pa2 + offs, s0);
        k.store(pb2 + offs, s1);
    })
    .unwrap();
    let out = run(
        &kernel,
        vec![
            HostBuffer::from_slice(&a),
            HostBuffer::from_slice(&b),
            HostBuffer::zeros(t, 2 * n),
            HostBuffer::zeros(t, 2 * n),
            HostBuffer::zeros(t, n),
            HostBuffer::zeros(t, n),
        ],
    );
    let want: Vec<T> = (0..2 * n)
        .map(|i| if i % 2 == 0 { a[i / 2] } else { b[i / 2] })
        .collect();
    assert_eq!(out[2].to_vec::<T>().unwrap(), want, "join {t} {dims:?}");
    assert_eq!(out[3].to_vec::<T>().unwrap(), want, "interleave {t} {dims:?}");
    assert_eq!(out[4].to_vec::<T>().unwrap(), a, "split.0 {t} {dims:?}");
    assert_eq!(out[5].to_vec::<T>().unwrap(), b, "split.1 {t} {dims:?}");
}

#[test]
fn join_interleave_and_split_round_trip() {
    let mut rng = Rng::new(0x501);
    for dims in [vec![64u32], vec![8, 16], vec![4, 2]] {
        let n: u32 = dims.iter().product();
        let n = n as usize;
        let a = random(&mut rng, n, |r| r as i32);
        let b = random(&mut rng, n, |r| (r >> 17) as i32);
        join_split_round_trip(I32, &dims, a, b);
        let mut a = random(&mut rng, n, |r| f32::from_bits(r as u32));
        // Signed zeros, infinities and subnormals survive the split bit for bit.
        a[..4].copy_from_slice(&[-0.0, 0.0, f32::NEG_INFINITY, f32::from_bits(3)]);
        let a: Vec<f32> = a.into_iter().map(|v| if v.is_nan() { 1.5 } else { v }).collect();
        let b = random(&mut rng, n, |r| (r % 1000) as f32 - 500.25);
        join_split_round_trip(F32, &dims, a, b);
        let a = random(&mut rng, n, |r| r as u8);
        let b = random(&mut rng, n, |r| (r >> 9) as u8);
        join_split_round_trip(U8, &dims, a, b);
        let a = random(&mut rng, n, |r| r as i64);
        let b = random(&mut rng, n, |r| r.rotate_left(7) as i64);
        join_split_round_trip(I64, &dims, a, b);
    }
}

#[test]
fn cat_is_the_plain_concatenation_along_the_first_axis() {
    let mut rng = Rng::new(0xca7);
    for dims in [vec![32u32], vec![8, 4]] {
        let n = dims.iter().product::<u32>() as usize;
        let a = random(&mut rng, n, |r| r as i32);
        let b = random(&mut rng, n, |r| (r >> 20) as i32);
        let kernel = Kernel::build("cat", |k| {
            let (pa, pb, po) = (k.arg_ptr("a", I32), k.arg_ptr("b", I32), k.arg_ptr("out", I32));
            let offs = offsets(k, &dims);
            let c = k.cat(k.load(pa + offs), k.load(pb + offs));
            let mut cd = dims.clone();
            cd[0] *= 2;
            k.store(po + offsets(k, &cd), c);
        })
        .unwrap();
        let out = run(
            &kernel,
            vec![
                HostBuffer::from_slice(&a),
                HostBuffer::from_slice(&b),
                HostBuffer::zeros(I32, 2 * n),
            ],
        );
        let want: Vec<i32> = a.iter().chain(&b).copied().collect();
        assert_eq!(out[2].to_vec::<i32>().unwrap(), want, "{dims:?}");
    }
}

#[test]
fn join_of_scalars_and_broadcast_operands() {
    let kernel = Kernel::build("join_broadcast", |k| {
        let o = k.arg_ptr("out", I32);
        let col = k.arange(0, 8) * 10;
        // A scalar joined with a block is broadcast; two scalars give a block of 2.
        let j = k.join(k.scalar(7, I32), col);
        k.store(o + offsets(k, &[16]), j.reshape(&[16]));
        let s = k.join(k.scalar(1, I32), k.scalar(2, I32));
        k.store(o + 16 + k.arange(0, 2), s);
    })
    .unwrap();
    let out = run(&kernel, vec![HostBuffer::zeros(I32, 18)]);
    let want: Vec<i32> = (0..8).flat_map(|i| [7, i * 10]).chain([1, 2]).collect();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), want);
}

#[test]
fn bad_operands_are_build_errors() {
    let err = |f: for<'b> fn(&'b KernelBuilder) -> Value<'b>| {
        Kernel::build("bad", |k| {
            let o = k.arg_ptr("o", I32);
            let v = f(k);
            let n: u32 = v.shape().iter().product();
            k.store(o + k.arange(0, n as i32).reshape(&v.shape()), v);
        })
        .unwrap_err()
        .to_string()
    };
    let e = err(|k| k.join(k.arange(0, 4), k.arange(0, 4).to(F32)));
    assert!(e.contains("join") && e.contains("one element type"), "{e}");
    let e = err(|k| k.join(k.arange(0, 4), k.arange(0, 8)));
    assert!(e.contains("join") && e.contains("cannot be broadcast"), "{e}");
    let e = err(|k| k.join(k.zeros(&[2, 2, 2], I32), k.zeros(&[2, 2, 2], I32)));
    assert!(e.contains("join") && e.contains("rank at most 3"), "{e}");
    let e = err(|k| k.split(k.arange(0, 4)).0);
    assert!(
        e.contains("split") && e.contains("last dimension has size 2") && e.contains("<4xi32>"),
        "{e}"
    );
    let e = err(|k| k.cat(k.arange(0, 4), k.arange(0, 8)));
    assert!(e.contains("cat") && e.contains("one shape"), "{e}");
}

/// `join` and `split` keep each element in the thread that loaded it: the new dimension of
/// 2 is held within each thread, so a join and a split move nothing through shared memory
/// (no barrier), and a sum of a joined pair over the block is one exchange between warps
/// (the two barriers of one block reduction), where the pair had first gone through shared
/// memory several times (18 barriers). The results are checked in the simulator by `run`.
#[test]
fn join_and_split_stay_in_each_thread() {
    let barriers = |kernel: &Kernel| {
        let tk = lower(kernel, &Target::nvidia(4, 48 * 1024), &Specialization::none(4)).unwrap();
        let mut n = 0;
        tk.walk(&mut |s| n += matches!(s, rutile_ir::thread::Stmt::Barrier) as usize);
        n
    };
    let n = 1024;
    let round_trip = Kernel::build("join_split_in_threads", |k| {
        let (pa, pb, pc, _) = (
            k.arg_ptr("a", F32),
            k.arg_ptr("b", F32),
            k.arg_ptr("c", F32),
            k.arg_ptr("d", F32),
        );
        let offs = k.arange(0, n);
        let (s0, s1) = k.split(k.join(k.load(pa + offs), k.load(pb + offs)));
        k.store(pc + offs, s0 - s1);
    })
    .unwrap();
    let sums = Kernel::build("joined_sums", |k| {
        let (pa, pb, pc, pd) = (
            k.arg_ptr("a", F32),
            k.arg_ptr("b", F32),
            k.arg_ptr("c", F32),
            k.arg_ptr("d", F32),
        );
        let offs = k.arange(0, n);
        let x = k.load(pa + offs);
        let (s0, s1) = k.split(k.join(x, x * k.load(pb + offs)).sum(0));
        k.store(pc, s0);
        k.store(pd, s1);
    })
    .unwrap();
    assert_eq!(
        barriers(&round_trip),
        0,
        "a join and a split move nothing between threads"
    );
    assert_eq!(barriers(&sums), 2, "one exchange between warps for the pair");
    let mut rng = Rng::new(0x502);
    // Small integers, so that the sums are exact in any order.
    let a: Vec<f32> = random(&mut rng, n as usize, |r| (r % 17) as f32 - 8.0);
    let b: Vec<f32> = random(&mut rng, n as usize, |r| (r % 13) as f32 - 6.0);
    let out = run(
        &round_trip,
        vec![
            HostBuffer::from_slice(&a),
            HostBuffer::from_slice(&b),
            HostBuffer::zeros(F32, n as usize),
            HostBuffer::zeros(F32, 1),
        ],
    );
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x - y).collect();
    assert_eq!(out[2].to_vec::<f32>().unwrap(), want);
    let out = run(
        &sums,
        vec![
            HostBuffer::from_slice(&a),
            HostBuffer::from_slice(&b),
            HostBuffer::zeros(F32, 1),
            HostBuffer::zeros(F32, 1),
        ],
    );
    assert_eq!(out[2].to_vec::<f32>().unwrap(), [a.iter().sum::<f32>()]);
    assert_eq!(
        out[3].to_vec::<f32>().unwrap(),
        [a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>()]
    );
}

/// `interleave` (a `join` reshaped) stays in each thread: the reshape merges the last
/// dimension, held whole by every thread, into the one before it without moving anything
/// between threads, for 1-D and 2-D operands; and the interleaved block, checked in the
/// simulator by `run`, is the interpreter's.
#[test]
fn interleave_stays_in_each_thread() {
    let barriers = |kernel: &Kernel| {
        let tk = lower(kernel, &Target::nvidia(4, 48 * 1024), &Specialization::none(3)).unwrap();
        let mut n = 0;
        tk.walk(&mut |s| n += matches!(s, rutile_ir::thread::Stmt::Barrier) as usize);
        n
    };
    let (rows, cols) = (16, 64);
    let interleaved = Kernel::build("interleaved", |k| {
        let (pa, pb, pc) = (k.arg_ptr("a", F32), k.arg_ptr("b", F32), k.arg_ptr("c", F32));
        let (r, c) = (k.arange(0, rows), k.arange(0, cols));
        let at = r.expand_dims(1) * cols + c.expand_dims(0);
        let x = k.interleave(k.load(pa + at), k.load(pb + at)) * 3.0;
        // Summed along the interleaved axis: the merged layout feeds the reduction as it is.
        let out = r * 2 * cols;
        k.store(pc + out, x.sum(1));
        k.store(pc + out + 1, (x * x).sum(1));
    })
    .unwrap();
    // The same sums of one loaded block: whatever barriers they need, the interleave adds
    // none (through shared memory it added two).
    let plain = Kernel::build("plain", |k| {
        let (pa, _, pc) = (k.arg_ptr("a", F32), k.arg_ptr("b", F32), k.arg_ptr("c", F32));
        let (r, c) = (k.arange(0, rows), k.arange(0, 2 * cols));
        let x = k.load(pa + (r.expand_dims(1) * 2 * cols + c.expand_dims(0))) * 3.0;
        let out = r * 2 * cols;
        k.store(pc + out, x.sum(1));
        k.store(pc + out + 1, (x * x).sum(1));
    })
    .unwrap();
    assert_eq!(barriers(&interleaved), barriers(&plain));
    let mut rng = Rng::new(0x503);
    let n = (rows * cols) as usize;
    let a: Vec<f32> = random(&mut rng, n, |r| (r % 17) as f32 - 8.0);
    let b: Vec<f32> = random(&mut rng, n, |r| (r % 13) as f32 - 6.0);
    let out = run(
        &interleaved,
        vec![
            HostBuffer::from_slice(&a),
            HostBuffer::from_slice(&b),
            HostBuffer::zeros(F32, 2 * n),
        ],
    );
    let got = out[2].to_vec::<f32>().unwrap();
    for i in 0..rows as usize {
        let row: Vec<f32> = (0..cols as usize)
            .flat_map(|j| [a[i * cols as usize + j], b[i * cols as usize + j]])
            .map(|v| v * 3.0)
            .collect();
        assert_eq!(got[i * 2 * cols as usize], row.iter().sum::<f32>(), "row {i}");
        assert_eq!(
            got[i * 2 * cols as usize + 1],
            row.iter().map(|v| v * v).sum::<f32>(),
            "row {i}"
        );
    }
}

/// A row's neighbouring pairs split apart (`reshape` to `[rows, cols / 2, 2]`, then
/// `split`) stay in each thread where it loaded whole runs of the row: the reshape splits
/// the row's dimension in the loaded layout, so the pairs' sum over the block stores as
/// much to shared memory as the same sum of the loaded block (the reduction's own exchange
/// between warps); the pairs and their sum, checked in the simulator by `run`, are the
/// interpreter's.
#[test]
fn neighbouring_pairs_split_in_each_thread() {
    let (rows, cols) = (16, 128);
    let shared_stores = |kernel: &Kernel, warps: u32| {
        let tk = lower(kernel, &Target::nvidia(warps, 48 * 1024), &Specialization::all(3)).unwrap();
        let mut n = 0;
        tk.walk(&mut |s| {
            n += matches!(
                s,
                rutile_ir::thread::Stmt::Store {
                    mem: Memory::Shared { .. },
                    ..
                }
            ) as usize
        });
        n
    };
    let paired = |store_pairs: bool| {
        Kernel::build("paired", |k| {
            let (pa, pc, ps) = (k.arg_ptr("a", I32), k.arg_ptr("c", I32), k.arg_ptr("s", I32));
            let x = k.load(pa + offsets(k, &[rows, cols]));
            let (first, second) = k.split(x.reshape(&[rows, cols / 2, 2]));
            let pairs = first * 1000 + second;
            k.store(ps, pairs.sum(1).sum(0));
            if store_pairs {
                k.store(pc + offsets(k, &[rows, cols / 2]), pairs);
            }
        })
        .unwrap()
    };
    let plain = Kernel::build("plain", |k| {
        let (pa, _, ps) = (k.arg_ptr("a", I32), k.arg_ptr("c", I32), k.arg_ptr("s", I32));
        let x = k.load(pa + offsets(k, &[rows, cols]));
        k.store(ps, x.sum(1).sum(0));
    })
    .unwrap();
    for warps in [1, 4] {
        assert_eq!(
            shared_stores(&paired(false), warps),
            shared_stores(&plain, warps),
            "{warps} warps: the reshape or the split moved elements between threads"
        );
    }
    let mut rng = Rng::new(0x504);
    let n = (rows * cols) as usize;
    let a: Vec<i32> = random(&mut rng, n, |r| (r % 1000) as i32 - 500);
    let buffers = vec![
        HostBuffer::from_slice(&a),
        HostBuffer::zeros(I32, n / 2),
        HostBuffer::zeros(I32, 1),
    ];
    let out = run(&paired(true), buffers);
    let pairs: Vec<i32> = a.chunks(2).map(|p| p[0] * 1000 + p[1]).collect();
    assert_eq!(out[2].to_vec::<i32>().unwrap(), [pairs.iter().sum::<i32>()]);
    assert_eq!(out[1].to_vec::<i32>().unwrap(), pairs);
}
