//! The fused attention tutorial's forward kernel in the interpreter against an f64
//! reference (fp16 inputs, head dimensions 64 and 128, causal and not, sequence lengths that
//! are not multiples of the blocks, several batches and heads), and lowered for targets
//! with and without tensor cores and run in the SIMT simulator against the interpreter.

mod tutorial_support;

use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::seeds::{attention_forward, AttentionMeta};
use rutile_ir::target::Target;
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Expr, Stmt};
use rutile_ir::ScalarType::{F16, F32};
use tutorial_support::{assert_close, buffer_of, ptr, runtime_spec, simulate_on, targets, values};

/// One problem: `z x h` heads of `n` positions of dimension `d`.
#[derive(Clone, Copy, Debug)]
struct Shape {
    z: usize,
    h: usize,
    n: usize,
    d: usize,
}

impl Shape {
    /// `z` batches of `h` heads of `n` positions, dimension `d`.
    const fn new(z: usize, h: usize, n: usize, d: usize) -> Shape {
        Shape { z, h, n, d }
    }
}

const SM_SCALE: f64 = 0.5;

/// Q, K, V (`[z, h, n, d]`, f16, uniform in [-1, 1]), M and Out.
fn buffers(rng: &mut Rng, s: Shape) -> Vec<HostBuffer> {
    let len = s.z * s.h * s.n * s.d;
    vec![
        buffer_of(F16, &rng.f32s(len, -1.0, 1.0)),
        buffer_of(F16, &rng.f32s(len, -1.0, 1.0)),
        buffer_of(F16, &rng.f32s(len, -1.0, 1.0)),
        HostBuffer::zeros(F32, s.z * s.h * s.n),
        HostBuffer::zeros(F16, len),
    ]
}

/// `Q, K, V, sm_scale, M, Out`, the strides of contiguous `[z, h, n, d]` tensors, `Z, H,
/// N_CTX`.
fn args(s: Shape) -> Vec<ArgValue> {
    let strides = [s.h * s.n * s.d, s.n * s.d, s.d, 1];
    let mut args = vec![ptr(0), ptr(1), ptr(2), ArgValue::Float(SM_SCALE), ptr(3), ptr(4)];
    for _ in 0..4 {
        args.extend(strides.iter().map(|&v| ArgValue::Int(v as i64)));
    }
    args.extend([s.z, s.h, s.n].map(|v| ArgValue::Int(v as i64)));
    args
}

/// Runs `meta`'s kernel on random inputs of `shape` in the interpreter and, lowered for
/// each of `targets`, in the simulator, and compares them (`simulate_on`).
fn simulate_attention(at: &str, meta: &AttentionMeta, targets: &[Target], shape: Shape, rng: &mut Rng) {
    let kernel = attention_forward(meta).unwrap();
    let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
    let b = buffers(rng, shape);
    simulate_on(at, &kernel, targets, grid, &args(shape), &b, 2e-3);
}

/// `softmax(Q K^T sm_scale) V` per head in f64, and each query's log-sum-exp of its scaled
/// scores in base 2.
fn reference(q: &[f64], k: &[f64], v: &[f64], s: Shape, causal: bool) -> (Vec<f64>, Vec<f64>) {
    let (n, d) = (s.n, s.d);
    let mut out = vec![0.0; q.len()];
    let mut lse = vec![0.0; s.z * s.h * n];
    for head in 0..s.z * s.h {
        let base = head * n * d;
        for i in 0..n {
            let keys = if causal { i + 1 } else { n };
            let scores: Vec<f64> = (0..keys)
                .map(|j| (0..d).map(|c| q[base + i * d + c] * k[base + j * d + c]).sum::<f64>() * SM_SCALE)
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = weights.iter().sum();
            for c in 0..d {
                out[base + i * d + c] = (0..keys).map(|j| weights[j] * v[base + j * d + c]).sum::<f64>() / sum;
            }
            lse[head * n + i] = (max + sum.ln()) * std::f64::consts::LOG2_E;
        }
    }
    (out, lse)
}

/// The forms both attention tests run at each shape and block: not causal, causal in two
/// stages and in one masked walk, and causal with its programs longest first; each with a
/// label naming it.
fn forms(shape: Shape, block_m: u32, block_n: u32) -> impl Iterator<Item = (AttentionMeta, String)> {
    let forms = [
        (false, true, false),
        (true, true, false),
        (true, false, false),
        (true, true, true),
    ];
    forms.into_iter().map(move |(causal, split_diagonal, longest_first)| {
        let meta = AttentionMeta {
            split_diagonal,
            longest_first,
            ..AttentionMeta::fp16(block_m, block_n, shape.d as u32, causal)
        };
        let at = format!(
            "{shape:?}, blocks {block_m}x{block_n}, causal {causal}, split {split_diagonal}, longest first \
             {longest_first}"
        );
        (meta, at)
    })
}

#[test]
fn attention_matches_the_reference() {
    let mut rng = Rng::new(71);
    let cases = [
        (Shape::new(1, 2, 100, 64), 32, 16),
        (Shape::new(2, 1, 37, 128), 16, 16),
        (Shape::new(1, 1, 128, 64), 64, 32),
        (Shape::new(1, 3, 1, 64), 16, 16),
        (Shape::new(1, 1, 70, 128), 32, 32),
    ];
    for (shape, block_m, block_n) in cases {
        for (meta, at) in forms(shape, block_m, block_n) {
            let causal = meta.causal;
            let mut b = buffers(&mut rng, shape);
            let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
            interp::run(&attention_forward(&meta).unwrap(), grid, &args(shape), &mut b).unwrap();
            let (want, lse) = reference(&values(&b[0]), &values(&b[1]), &values(&b[2]), shape, causal);
            // P is rounded to f16 before P V (as in the tutorial), and the output to f16.
            assert_close(&values(&b[4]), &want, 2e-3, 2e-3, &format!("{at}: Out"));
            assert_close(&values(&b[3]), &lse, 1e-5, 1e-5, &format!("{at}: M"));
        }
    }
}

#[test]
fn causal_attention_needs_block_n_to_divide_block_m() {
    let err = attention_forward(&AttentionMeta::fp16(32, 64, 64, true)).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("block_n must divide block_m, got block_m 32 and block_n 64"),
        "{message}"
    );
    assert!(attention_forward(&AttentionMeta::fp16(32, 64, 64, false)).is_ok());
    let one_walk = AttentionMeta {
        split_diagonal: false,
        ..AttentionMeta::fp16(32, 64, 64, true)
    };
    assert!(attention_forward(&one_walk).is_ok());
}

/// Programs longest first (`AttentionMeta::longest_first`) swap the grid's axes, heads
/// first, and are refused without the causal mask, where every walk is as long.
#[test]
fn longest_first_is_for_causal_attention() {
    let meta = AttentionMeta {
        longest_first: true,
        ..AttentionMeta::fp16(64, 32, 64, true)
    };
    assert_eq!(meta.grid(2, 3, 300), [6, 5, 1]);
    assert_eq!(AttentionMeta::fp16(64, 32, 64, true).grid(2, 3, 300), [5, 6, 1]);
    assert!(attention_forward(&meta).is_ok());
    let err = attention_forward(&AttentionMeta { causal: false, ..meta })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("longest_first orders causal programs") && err.contains("without causal"),
        "{err}"
    );
    // The error names the caller's line, not the builder's.
    assert!(err.contains("tests/attention.rs"), "{err}");
}

/// Programs longest first by groups of heads (`AttentionMeta::group_heads`): every query
/// block of every head is computed once, as the tutorial's order computes it, bit for bit
/// (the outputs start as NaN, so that a block no program takes shows), with groups of one
/// and two heads of three (the last group holding one), of all three, and as many as there
/// are (0); in the simulator too, lowered for Hopper. A group without `longest_first` is
/// refused.
#[test]
fn longest_first_goes_by_groups_of_heads() {
    let mut rng = Rng::new(80);
    let shape = Shape::new(1, 3, 200, 64);
    let tutorial = AttentionMeta::fp16(64, 32, 64, true);
    let grid = tutorial.grid(1, 3, 200);
    let mut want = buffers(&mut rng, shape);
    for b in &mut want[3..5] {
        *b = buffer_of(b.elem(), &vec![f32::NAN; b.len()]);
    }
    let inputs = want.clone();
    interp::run(&attention_forward(&tutorial).unwrap(), grid, &args(shape), &mut want).unwrap();
    for group_heads in [1, 2, 3, 0] {
        let meta = AttentionMeta {
            longest_first: true,
            group_heads,
            ..tutorial
        };
        let kernel = attention_forward(&meta).unwrap();
        let grid = meta.grid(1, 3, 200);
        let mut got = inputs.clone();
        interp::run(&kernel, grid, &args(shape), &mut got).unwrap();
        let at = format!("groups of {group_heads} heads");
        assert!(values(&got[4]).iter().all(|v| v.is_finite()), "{at}: a block left out");
        assert_eq!(values(&got[4]), values(&want[4]), "{at}: Out");
        assert_eq!(values(&got[3]), values(&want[3]), "{at}: M");
        if group_heads == 2 {
            let b = buffers(&mut rng, shape);
            simulate_on(&at, &kernel, &[hopper_pipelined(4, 2)], grid, &args(shape), &b, 2e-3);
        }
    }
    let err = attention_forward(&AttentionMeta {
        group_heads: 2,
        ..tutorial
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("group_heads") && err.contains("without longest_first"),
        "{err}"
    );
}

/// An NVIDIA target whose warps run `mma.sync`.
fn tensor_cores(num_warps: u32) -> Target {
    Target {
        mma_sync: true,
        async_copy: false,
        num_stages: 1,
        ..Target::nvidia(num_warps, 227 * 1024)
    }
}

/// As the CUDA backend lowers on an H100: `dot`s on warpgroup MMAs where their tiles allow.
fn hopper(num_warps: u32) -> Target {
    Target {
        wgmma: true,
        ..tensor_cores(num_warps)
    }
}

#[test]
fn lowered_attention_matches_the_interpreter() {
    let mut rng = Rng::new(72);
    let mut on = targets();
    on.extend([tensor_cores(4), tensor_cores(1), hopper(4)]);
    for (shape, block_m, block_n) in [
        (Shape::new(1, 2, 50, 64), 32, 16),
        (Shape::new(1, 1, 40, 128), 16, 16),
        // 64-row blocks: both dots on warpgroup MMAs for `hopper(4)`.
        (Shape::new(1, 1, 100, 64), 64, 32),
    ] {
        for (meta, at) in forms(shape, block_m, block_n) {
            let kernel = attention_forward(&meta).unwrap();
            let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
            let b = buffers(&mut rng, shape);
            // The dots sum in another order on the tensor cores, which can round P to
            // another f16: within 2^-9 of the largest output.
            // (64-row blocks need more shared memory than the generic targets give.)
            let on = if block_m == 64 { &on[on.len() - 3..] } else { &on[..] };
            simulate_on(&at, &kernel, on, grid, &args(shape), &b, 2e-3);
        }
    }
}

/// As the CUDA backend lowers on an H100 with its pipeline: operands through a ring of
/// `stages` buffers (TMA where they are boxes), one warpgroup MMA group left in flight.
fn hopper_pipelined(num_warps: u32, stages: u32) -> Target {
    Target {
        tma: true,
        async_copy: true,
        num_stages: stages,
        ..hopper(num_warps)
    }
}

/// The walk rotated by one block (`AttentionMeta::rotate`): the same results as the
/// tutorial's order in the interpreter, and lowered for Hopper's pipeline (the `P V` of
/// one block in flight while the next block's softmax runs) the same in the simulator,
/// which faults a write to `P`'s registers before the MMAs that read them are waited for.
#[test]
fn the_rotated_walk_matches_the_interpreter() {
    // The rotated walk's step: `Q Kᵀ` and the previous block's `P V` are issued back to
    // back (`overlap`: nothing between them reads the scores), one wait retires `Q Kᵀ` and
    // leaves `P V` in flight while the softmax's `exp2`s run, and `P V` is waited for before
    // the yield overwrites the `P` it reads (the ragged walk after it keeps the tutorial's
    // order).
    let shape = Shape::new(1, 1, 256, 64);
    let meta = AttentionMeta {
        rotate: true,
        ..AttentionMeta::fp16(64, 64, 64, false)
    };
    let tk = rutile_ir::lower::lower(
        &attention_forward(&meta).unwrap(),
        &hopper_pipelined(4, 3),
        &runtime_spec(&args(shape)),
    )
    .unwrap();
    let mut steps = Vec::new();
    tk.walk(&mut |s| {
        if let Stmt::While { body, .. } = s {
            let mut step = String::new();
            for s in body {
                match s {
                    Stmt::WgmmaWait { pending } => step.push_str(&format!("wait{pending} ")),
                    Stmt::Set {
                        expr: rutile_ir::thread::Expr::Unary(rutile_ir::ir::UnaryOp::Exp2, _),
                        ..
                    } if !step.ends_with("exp2 ") => step.push_str("exp2 "),
                    _ => {}
                }
            }
            steps.push(step);
        }
    });
    assert_eq!(steps[0], "wait1 exp2 wait0 ", "{steps:?}");
    assert_eq!(steps[1], "wait0 exp2 wait1 ", "{steps:?}");

    let mut rng = Rng::new(73);
    for (shape, block_m, block_n) in [
        (Shape::new(1, 2, 200, 64), 64, 64),
        (Shape::new(1, 1, 130, 64), 64, 32),
        (Shape::new(1, 1, 40, 128), 64, 64),
    ] {
        for (causal, split_diagonal) in [(false, true), (true, true)] {
            let meta = AttentionMeta {
                split_diagonal,
                rotate: true,
                ..AttentionMeta::fp16(block_m, block_n, shape.d as u32, causal)
            };
            let kernel = attention_forward(&meta).unwrap();
            let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
            let mut b = buffers(&mut rng, shape);
            let at = format!("rotated, {shape:?}, blocks {block_m}x{block_n}, causal {causal}");
            let mut plain = b.clone();
            let tutorial = AttentionMeta { rotate: false, ..meta };
            interp::run(&attention_forward(&tutorial).unwrap(), grid, &args(shape), &mut plain).unwrap();
            interp::run(&kernel, grid, &args(shape), &mut b).unwrap();
            assert_close(&values(&b[4]), &values(&plain[4]), 1e-3, 1e-3, &format!("{at}: Out"));
            assert_close(&values(&b[3]), &values(&plain[3]), 1e-6, 1e-6, &format!("{at}: M"));
            let on = [hopper_pipelined(4, 3), hopper_pipelined(4, 2)];
            simulate_on(&at, &kernel, &on, grid, &args(shape), &buffers(&mut rng, shape), 2e-3);
        }
    }
}

#[test]
fn both_dots_run_on_the_tensor_cores() {
    let shape = Shape::new(1, 1, 64, 64);
    for causal in [false, true] {
        let kernel = attention_forward(&AttentionMeta::fp16(64, 32, 64, causal)).unwrap();
        let tk = rutile_ir::lower::lower(&kernel, &tensor_cores(4), &runtime_spec(&args(shape))).unwrap();
        // Q K^T (64 x 32, K = 64) and P V (64 x 64, K = 32) are 64 m16n8k16 `mma`s each,
        // 16 a warp: 32 a walk, and attention walks twice (causal: below the diagonal, then
        // on it; else the whole key blocks, then the ragged last one). Off the tensor cores,
        // a dot has none.
        let mut dots = 0;
        tk.walk(&mut |s| dots += matches!(s, Stmt::Mma { .. }) as usize);
        let walks = 2;
        assert!(dots == 32 * walks, "causal {causal}: {dots} mma statements");
        // On Hopper, warpgroup MMAs: per walk, 4 k16 steps of Q K^T and 2 of P V.
        let tk = rutile_ir::lower::lower(&kernel, &hopper(4), &runtime_spec(&args(shape))).unwrap();
        let mut wgmmas = 0;
        tk.walk(&mut |s| wgmmas += matches!(s, Stmt::Wgmma { .. }) as usize);
        assert!(wgmmas == 6 * walks, "causal {causal}: {wgmmas} wgmma statements");
    }
}

/// Attention of 64 x 64 blocks at head dimension 64 over 256 keys, lowered for `target` as
/// the runtime specializes it.
fn lowered_walk(target: &Target) -> rutile_ir::thread::ThreadKernel {
    let shape = Shape::new(1, 1, 256, 64);
    let kernel = attention_forward(&AttentionMeta::fp16(64, 64, 64, false)).unwrap();
    rutile_ir::lower::lower(&kernel, target, &runtime_spec(&args(shape))).unwrap()
}

/// The running maximum and sum (reductions of each step's scores along their rows) and the
/// accumulator (rescaled, then added to by the second `dot`) are carried in the scores'
/// layout and its slice, so a step exchanges through shared memory only what the `dot`s
/// need: with the loop's values in layouts of their own, each step converted the
/// accumulator and the statistics back and forth, 24 barriers a step on `mma.sync` where
/// now there are 8 (4 on warpgroup MMAs).
#[test]
fn the_walk_keeps_its_statistics_in_the_scores_layout() {
    for target in [tensor_cores(4), hopper(4)] {
        let tk = lowered_walk(&target);
        let mut loops = Vec::new();
        tk.walk(&mut |s| {
            if let Stmt::While { body, .. } = s {
                loops.push(body.iter().filter(|s| matches!(s, Stmt::Barrier)).count());
            }
        });
        // Two walks: the whole key blocks, then the ragged last one.
        assert_eq!(loops.len(), 2, "two walks over the keys");
        let most = if target.wgmma { 4 } else { 8 };
        for barriers in loops {
            assert!(barriers <= most, "wgmma {}: {barriers} barriers a step", target.wgmma);
        }
    }
}

/// `Q` is the same in every step of the walk: it is stored in shared memory once, before
/// the loop, and the loop's `Q Kᵀ` warpgroup MMAs read it there (`lower/hoist.rs`); no
/// store inside the loop writes its buffer.
#[test]
fn q_is_staged_once_before_the_walk() {
    use rutile_ir::thread::{walk_stmts as walk, Memory, WgmmaA};
    let tk = lowered_walk(&hopper(4));
    let stores_to = |stmts: &[Stmt], alloc: u32| {
        let mut n = 0;
        walk(stmts, &mut |s| {
            n += matches!(s, Stmt::Store { mem: Memory::Shared { alloc: a }, .. } if *a == alloc) as usize
        });
        n
    };
    let (position, body) = tk
        .body
        .iter()
        .enumerate()
        .find_map(|(i, s)| match s {
            Stmt::While { body, .. } => Some((i, body)),
            _ => None,
        })
        .expect("the walk over the keys");
    let mut q = None;
    walk(body, &mut |s| {
        if let (
            None,
            Stmt::Wgmma {
                a: WgmmaA::Shared(a), ..
            },
        ) = (q, s)
        {
            q = Some(a.alloc);
        }
    });
    let q = q.expect("Q K^T on warpgroup MMAs");
    assert_eq!(stores_to(body, q), 0, "Q is stored inside the walk");
    assert!(stores_to(&tk.body[..position], q) > 0, "Q is stored before the walk");
}

/// Where the walk is warp-specialized and whole, its producer copies `Q` through TMA into
/// the buffer the `Q Kᵀ` MMAs read (`lower/staged.rs`): the producer issues a box copy into
/// it, the consumers neither load `Q` from global memory nor store it; with
/// `Target::tma_staged_operands` off they do both, and the producer copies nothing into
/// it. With the last values loaded ahead of the rotated walk and `Target::tma_staged_after`,
/// on a plain grid the producer copies those too, and the consumers load nothing from
/// global memory before their epilogue. On a plain grid and a persistent one (where the
/// consumers hand `Q`'s buffer back each tile), both ways simulated equal to the
/// interpreter.
#[test]
fn q_is_copied_by_the_producer_where_the_walk_is_specialized() {
    use rutile_ir::thread::{walk_stmts as walk, Memory, WgmmaA};
    let mut rng = Rng::new(81);
    let shape = Shape::new(1, 3, 256, 128);
    for (persistent, ahead) in [(false, false), (true, false), (false, true), (true, true)] {
        let meta = AttentionMeta {
            rotate: true,
            whole_key_blocks: true,
            last_values_ahead: ahead,
            ..AttentionMeta::fp16(128, 128, 128, false)
        };
        let kernel = attention_forward(&meta).unwrap();
        let mut loads = [0; 2];
        for staged in [true, false] {
            let target = Target {
                tma_outer: true,
                warp_specialize: true,
                persistent,
                tma_staged_operands: staged,
                tma_staged_after: true,
                ..hopper_pipelined(8, 2)
            };
            let at = format!("persistent {persistent}, last values ahead {ahead}, staged {staged}");
            let tk = rutile_ir::lower::lower(&kernel, &target, &runtime_spec(&args(shape))).unwrap();
            let mut sides = None;
            tk.walk(&mut |s| {
                if let Stmt::Specialized { producer, consumer } = s {
                    sides = Some((producer.clone(), consumer.clone()));
                }
            });
            let (producer, consumer) = sides.unwrap_or_else(|| panic!("{at}: no producer"));
            let mut q = None;
            walk(&consumer, &mut |s| {
                if let (
                    None,
                    Stmt::Wgmma {
                        a: WgmmaA::Shared(a), ..
                    },
                ) = (q, s)
                {
                    q = Some(a.alloc);
                }
            });
            let q = q.unwrap_or_else(|| panic!("{at}: no Q K^T on warpgroup MMAs"));
            let (mut copies, mut stores, mut global_loads) = (0, 0, 0);
            walk(&producer, &mut |s| {
                copies += matches!(s, Stmt::TmaLoad { alloc, .. } if *alloc == q) as usize
            });
            walk(&consumer, &mut |s| match s {
                Stmt::Store {
                    mem: Memory::Shared { alloc },
                    ..
                } if *alloc == q => stores += 1,
                Stmt::Load {
                    mem: Memory::Global { .. },
                    ..
                } => global_loads += 1,
                _ => {}
            });
            if staged {
                assert!(copies > 0, "{at}: the producer copies no Q");
                assert_eq!(stores, 0, "{at}: the consumers store Q");
            } else {
                assert_eq!(copies, 0, "{at}: the producer copies Q");
                assert!(stores > 0, "{at}: the consumers store no Q");
            }
            loads[staged as usize] = global_loads;
            if staged && ahead && persistent {
                // The last `P V` reads the copied last values: the consumers hand the
                // buffers back (their last mbarrier arrival) only after it, or the producer
                // would overwrite them with the next tile's while it runs.
                let (mut at_stmt, mut last_wgmma, mut last_arrival) = (0, None, None);
                walk(&consumer, &mut |s| {
                    at_stmt += 1;
                    match s {
                        Stmt::Wgmma { b, .. } => last_wgmma = Some((at_stmt, b.alloc)),
                        Stmt::MbarrierArrive { .. } => last_arrival = Some(at_stmt),
                        _ => {}
                    }
                });
                let (wgmma_at, last_values) = last_wgmma.unwrap_or_else(|| panic!("{at}: no MMAs"));
                let mut copied = false;
                walk(&producer, &mut |s| {
                    copied |= matches!(s, Stmt::TmaLoad { alloc, .. } if *alloc == last_values)
                });
                assert!(copied, "{at}: the producer does not copy the last values");
                assert!(
                    last_arrival.is_some_and(|a| a > wgmma_at),
                    "{at}: the staged buffers are handed back before the last `P V`"
                );
            }
            simulate_attention(&at, &meta, &[target], shape, &mut rng);
        }
        // The consumers' global loads: Q's and the rotated walk's last values' without the
        // copies (16 a thread), the last values' alone with them (8), none where those are
        // copied too (loaded ahead; on a persistent grid handed back after the last `P V`).
        let at = format!("persistent {persistent}, last values ahead {ahead}: global loads {loads:?}");
        if ahead {
            assert!(loads[1] == 0 && loads[0] > 0, "{at}");
        } else {
            assert!(0 < loads[1] && loads[1] < loads[0], "{at}");
        }
    }
}

/// The persistent ping-pong at head dimension 64 with the rotated walk's last values loaded
/// ahead and copied by the producer with `Q` (`Target::tma_staged_after`, as the CUDA
/// runtime launches persistent grids), where a walk follows the specialized one (a ragged
/// last key block, the causal diagonal): the consumers hand the copies back after the last
/// `P V` of the specialized walk, and the walk after it loads its own `Q`. Each
/// configuration that fits shared memory runs equal to the interpreter in the simulator on
/// more tiles than programs.
#[test]
fn the_persistent_ping_pong_copies_the_last_values_before_a_walk_after_it() {
    let mut rng = Rng::new(83);
    let mut ran = 0;
    for (causal, n, bn) in [(false, 200, 128), (false, 200, 64), (true, 256, 64), (true, 200, 64)] {
        let shape = Shape::new(1, 3, n, 64);
        let meta = AttentionMeta {
            rotate: true,
            last_values_ahead: true,
            ..AttentionMeta::fp16(128, bn, 64, causal)
        };
        let target = Target {
            tma_outer: true,
            warp_specialize: true,
            persistent: true,
            tma_staged_after: true,
            ..hopper_pipelined(8, 2)
        };
        let at = format!("causal {causal}, {n} tokens, 128 x {bn}");
        let kernel = attention_forward(&meta).unwrap();
        // The producer's copy statements: the ring's and `Q`'s without the switch, the last
        // values' too with it.
        let mut staged_copies = [0; 2];
        for after in [false, true] {
            let target = Target {
                tma_staged_after: after,
                ..target.clone()
            };
            let tk = match rutile_ir::lower::lower(&kernel, &target, &runtime_spec(&args(shape))) {
                Err(e) if e.to_string().contains("shared memory") => {
                    println!("{at}: {e}");
                    continue;
                }
                Err(e) => panic!("{at}: {e}"),
                Ok(tk) => tk,
            };
            staged_copies[after as usize] = producer_tma_copies(&tk);
        }
        if staged_copies[1] == 0 {
            continue;
        }
        assert!(staged_copies[1] > staged_copies[0], "{at}: copies {staged_copies:?}");
        simulate_attention(&at, &meta, &[target], shape, &mut rng);
        ran += 1;
    }
    println!("{ran} configurations simulated");
    assert!(ran >= 2, "only {ran} configurations fit");
}

/// The TMA copy statements of `tk`'s producer side: the ring's and the staged operands'.
fn producer_tma_copies(tk: &rutile_ir::thread::ThreadKernel) -> usize {
    let mut count = 0;
    tk.walk(&mut |s| {
        if let Stmt::Specialized { producer, .. } = s {
            rutile_ir::thread::walk_stmts(producer, &mut |s| {
                count += matches!(s, Stmt::TmaLoad { .. }) as usize;
            });
        }
    });
    count
}

/// The H100's and H200's f16 x f16 -> f32 cooperative-matrix shapes through Vulkan.
fn h100_coop_shapes() -> [rutile_ir::target::CoopMatrixShape; 2] {
    [(16, 16, 16), (16, 8, 16)].map(|(m, n, k)| rutile_ir::target::CoopMatrixShape {
        m,
        n,
        k,
        ab: F16,
        acc: F32,
    })
}

/// On cooperative matrices (a Vulkan device's 48 KiB of workgroup memory, 64 x 32 blocks on
/// 4 subgroups, what fits there at head dimension 64) a step of the walk moves only the
/// scores out of the matrices, once for both their row maximum and their exponent; the
/// accumulator stays in matrices across the walk, rescaled row by row in place (`coop_mul`
/// by the factors loaded at stride 0), the running statistics stay in the slice of the
/// scores' layout, and Q is stored once before the walk. Without the in-place rescale
/// (`Target::coop_scale` off) the accumulator goes out and back every step. Each step had
/// 20 barriers and 144 shared-memory stores a thread before these; now 8 and 12.
#[test]
fn the_walk_on_cooperative_matrices_moves_only_the_scores() {
    use rutile_ir::thread::Memory;
    let shapes = h100_coop_shapes();
    let shape = Shape::new(1, 1, 256, 64);
    let kernel = attention_forward(&AttentionMeta::fp16(64, 32, 64, false)).unwrap();
    for coop_scale in [true, false] {
        let target = Target {
            reuse_shared: rutile_ir::target::SharedReuse::SameType,
            coop_matrix: shapes.to_vec(),
            coop_scale,
            num_stages: 3,
            ..Target::nvidia(4, 48 * 1024)
        };
        let tk = rutile_ir::lower::lower(&kernel, &target, &runtime_spec(&args(shape))).unwrap();
        let body = tk
            .body
            .iter()
            .find_map(|s| match s {
                Stmt::While { body, .. } => Some(body),
                _ => None,
            })
            .expect("the walk over the keys");
        let count = |f: &dyn Fn(&Stmt) -> bool| body.iter().filter(|s| f(s)).count();
        let barriers = count(&|s| matches!(s, Stmt::Barrier));
        let moved_out = count(&|s| matches!(s, Stmt::CoopStore { .. }));
        let shared_stores = count(&|s| {
            matches!(
                s,
                Stmt::Store {
                    mem: Memory::Shared { .. },
                    ..
                }
            )
        });
        let products = count(&|s| matches!(s, Stmt::CoopMul { .. }));
        let broadcasts = count(&|s| {
            matches!(
                s,
                Stmt::CoopLoad {
                    stride: 0,
                    row_major: false,
                    ..
                }
            )
        });
        // 64 x 32 scores on 4 subgroups of 16 x 16 matrices: two a subgroup.
        if coop_scale {
            assert_eq!(moved_out, 2, "only the scores leave the matrices");
            assert_eq!(
                (products, broadcasts),
                (4, 2),
                "the 64 x 64 accumulator's four matrices a subgroup"
            );
            assert!(barriers <= 8, "{barriers} barriers a step");
            assert!(shared_stores <= 12, "{shared_stores} shared stores a step");
        } else {
            assert_eq!(moved_out, 2 + 4, "the scores, and the accumulator on its way out");
            assert_eq!(products, 0);
        }
    }
}

/// A Vulkan device with cooperative matrices (the H100's f16 x f16 -> f32 shapes, 48 KiB of
/// workgroup memory): the dots whose tiles split over the warps run on them (Q K^T's 16- or
/// 32-column tiles on 16x8 matrices where 16x16 do not split), the scores moved to
/// registers for the online softmax, the accumulator rescaled in place where the target
/// allows and otherwise moved to registers and back each iteration, and the results agree
/// with the interpreter as on the tensor cores.
#[test]
fn attention_on_cooperative_matrices_matches_the_interpreter() {
    let mut rng = Rng::new(73);
    let shapes = h100_coop_shapes();
    // K and V loaded in the step that stores them (one stage), one step ahead, and two
    // (the walk's body unrolled by two).
    let coop = |warps, num_stages, coop_scale| Target {
        reuse_shared: rutile_ir::target::SharedReuse::SameType,
        coop_matrix: shapes.to_vec(),
        coop_scale,
        num_stages,
        ..Target::nvidia(warps, 48 * 1024)
    };
    let shape = Shape::new(1, 2, 50, 64);
    // (The walk rotated by one block too: its carried `P` enters the cooperative matrices
    // from a loop-carried value.)
    let cases = [
        (false, true, false),
        (true, true, false),
        (true, false, false),
        (false, true, true),
        (true, true, true),
    ];
    for (block_m, block_n, warps) in [(32, 16, 4), (32, 32, 2), (16, 16, 1)] {
        for (causal, split_diagonal, rotate) in cases {
            let meta = AttentionMeta {
                split_diagonal,
                rotate,
                ..AttentionMeta::fp16(block_m, block_n, shape.d as u32, causal)
            };
            let kernel = attention_forward(&meta).unwrap();
            let at = format!(
                "blocks {block_m}x{block_n} on {warps} warps, causal {causal}, split {split_diagonal}, rotated {rotate}"
            );
            for scale in [false, true] {
                let tk = rutile_ir::lower::lower(&kernel, &coop(warps, 3, scale), &runtime_spec(&args(shape))).unwrap();
                let (mut mul_adds, mut products) = (0, 0);
                tk.walk(&mut |s| {
                    mul_adds += matches!(s, Stmt::CoopMulAdd { .. }) as usize;
                    products += matches!(s, Stmt::CoopMul { .. }) as usize;
                });
                assert!(mul_adds > 0, "{at}: not on cooperative matrices");
                assert_eq!(
                    products > 0,
                    scale,
                    "{at}: rescaled in matrices only where the target allows"
                );
            }
            let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
            let b = buffers(&mut rng, shape);
            let targets: Vec<Target> = [false, true]
                .into_iter()
                .flat_map(|scale| (1..=3).map(move |stages| coop(warps, stages, scale)))
                .collect();
            simulate_on(&at, &kernel, &targets, grid, &args(shape), &b, 2e-3);
        }
    }
}

/// The three blocks that NVIDIA's Vulkan driver runs wrong on an H200 (one subgroup's 16
/// rows of every query block; the tutorial's host code leaves them out,
/// `known_wrong_on_cooperative_matrices`), lowered exactly as the Vulkan runtime lowers them
/// for that device (subgroups of 32, its six cooperative-matrix shapes, 48 KiB of
/// workgroup memory in one array a type, the accumulator rescaled in place, 8-byte vectors
/// in loops): the simulator, which faults on a read of what another thread (of any warp)
/// wrote since the last barrier, runs them right and without a race (a cooperative load
/// and a cooperative store each count as an invocation of their own there, so exchanges
/// within a subgroup are checked too). What goes wrong is then below rutile's per-thread
/// program: in the SPIR-V it becomes or in the driver (docs/performance.md, "The wrong
/// Vulkan blocks, located").
#[test]
fn the_blocks_nvidias_vulkan_driver_runs_wrong_are_right_in_the_simulator() {
    let mut rng = Rng::new(74);
    let mut shapes = Vec::new();
    for acc in [F16, F32] {
        for (m, n, k) in [(16, 16, 16), (16, 8, 16), (16, 8, 8)] {
            shapes.push(rutile_ir::target::CoopMatrixShape { m, n, k, ab: F16, acc });
        }
    }
    // (block_m, block_n, stages, head dimension, causal, rotated, positions)
    let blocks = [
        (64, 64, 3, 64, true, true, 256),
        (64, 32, 3, 128, false, false, 200),
        (64, 128, 2, 64, false, true, 300),
    ];
    for (block_m, block_n, num_stages, d, causal, rotate, n) in blocks {
        let meta = AttentionMeta {
            rotate,
            whole_key_blocks: n % block_n == 0,
            ..AttentionMeta::fp16(block_m, block_n, d, causal)
        };
        let target = Target {
            max_vector_bytes: 8,
            coop_matrix: shapes.clone(),
            coop_scale: true,
            num_stages,
            ..Target::vulkan(32, 4, 48 * 1024)
        };
        let shape = Shape::new(1, 2, n as usize, d as usize);
        let at = format!("{block_m}x{block_n}, {num_stages} stages, d {d}, causal {causal}, rotated {rotate}");
        simulate_attention(&at, &meta, &[target], shape, &mut rng);
    }
}

/// `P`, the scores' probabilities converted to f16, is in the accumulator layout of `Q Kᵀ`'s
/// warpgroup MMAs, whose registers hold exactly what `P V`'s A operand reads: it goes to the
/// second `dot` from registers (`WgmmaA::Registers`), not through shared memory, so a step
/// of the walk stores only the K and V tiles there.
#[test]
fn p_feeds_the_second_dot_from_registers() {
    use rutile_ir::thread::{walk_stmts, Memory, WgmmaA};
    let tk = lowered_walk(&hopper(4));
    let (mut shared, mut registers, mut written) = (0, 0, Vec::new());
    tk.walk(&mut |s| match s {
        Stmt::Wgmma {
            a: WgmmaA::Shared(_), ..
        } => shared += 1,
        Stmt::Wgmma {
            a: WgmmaA::Registers(_),
            ..
        } => registers += 1,
        Stmt::While { body, .. } => {
            let mut allocs = std::collections::BTreeSet::new();
            walk_stmts(body, &mut |s| {
                if let Stmt::Store {
                    mem: Memory::Shared { alloc },
                    ..
                } = s
                {
                    allocs.insert(*alloc);
                }
            });
            written.push(allocs);
        }
        _ => {}
    });
    // Per step of each of the two walks: Q Kᵀ, 4 k16 steps from shared memory; P V, 4 from
    // registers.
    assert_eq!((shared, registers), (8, 8));
    // A step of either walk stores its K and V tiles and nothing else.
    assert!(
        written.len() == 2 && written.iter().all(|w| w.len() == 2),
        "shared buffers written in a step of each walk: {written:?}"
    );
}

/// With three stages or more, `P V`'s warpgroup MMAs stay in flight into the next step
/// (`wgmma.wait_group 1`), accumulating straight into the carried registers after the
/// rescale; the next step's `Q Kᵀ` waits for them before anything reads the accumulator.
/// Pipelined as on an H100 (copies two stages ahead become one), ragged and causal, the
/// simulator, which lands an MMA's results only at the wait that covers it, matches the
/// interpreter.
#[test]
fn p_v_stays_in_flight_into_the_next_step() {
    let pipelined = |stages| Target {
        async_copy: true,
        num_stages: stages,
        ..hopper(4)
    };
    let in_flight_waits = |target: &Target| {
        let tk = lowered_walk(target);
        let mut waits = Vec::new();
        tk.walk(&mut |s| {
            if let Stmt::While { body, .. } = s {
                for s in body {
                    if let Stmt::WgmmaWait { pending } = s {
                        waits.push(*pending);
                    }
                }
            }
        });
        waits
    };
    // In each of the two walks, Q Kᵀ waits for everything, P V leaves its group in flight;
    // with two stages both wait.
    assert_eq!(in_flight_waits(&pipelined(3)), vec![0, 1, 0, 1]);
    assert_eq!(in_flight_waits(&pipelined(2)), vec![0, 0, 0, 0]);
    // Q Kᵀ starts from zeros: its first k16 step overwrites the accumulator (`scale-d`
    // off) rather than adding to registers set to zero; every other step adds.
    let mut overwrites = Vec::new();
    lowered_walk(&pipelined(3)).walk(&mut |s| {
        if let Stmt::Wgmma { a, accumulate, .. } = s {
            overwrites.push((matches!(a, rutile_ir::thread::WgmmaA::Shared(_)), !accumulate));
        }
    });
    assert_eq!(overwrites.iter().filter(|o| o.1).count(), 2, "{overwrites:?}");
    assert_eq!(overwrites[0], (true, true), "{overwrites:?}");

    let mut rng = Rng::new(73);
    let shape = Shape::new(1, 2, 200, 64);
    for (causal, split_diagonal) in [(false, true), (true, true), (true, false)] {
        let meta = AttentionMeta {
            split_diagonal,
            ..AttentionMeta::fp16(64, 32, 64, causal)
        };
        let kernel = attention_forward(&meta).unwrap();
        let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
        let b = buffers(&mut rng, shape);
        let at = format!("{shape:?}, blocks 64x32, causal {causal}, split {split_diagonal}, 3 stages");
        simulate_on(&at, &kernel, &[pipelined(3)], grid, &args(shape), &b, 2e-3);
    }
}

/// A kernel's loops run one after the other, so the second walk over the keys takes the
/// first one's `dot` operand buffers again: on Vulkan, where each shared buffer is a
/// variable of its own, two walks need no more shared memory than one (a software device
/// allows 32 KiB).
#[test]
fn the_walks_share_their_operand_buffers() {
    let shape = Shape::new(1, 1, 70, 128);
    let bytes = |causal: bool, split_diagonal: bool| {
        let meta = AttentionMeta {
            split_diagonal,
            ..AttentionMeta::fp16(16, 16, 128, causal)
        };
        let kernel = attention_forward(&meta).unwrap();
        let tk =
            rutile_ir::lower::lower(&kernel, &Target::vulkan(32, 4, 32 * 1024), &runtime_spec(&args(shape))).unwrap();
        tk.shared_bytes()
    };
    // Causal in one masked walk; then the two-walk forms (non-causal: whole blocks, then
    // the ragged one; causal: below the diagonal, then on it).
    let one = bytes(true, false);
    for (causal, split) in [(false, true), (true, true)] {
        assert_eq!(bytes(causal, split), one, "causal {causal}, split {split}");
    }
}

/// On cooperative matrices the walk's K and V loads are masked by `start_n + offs_n <
/// N_CTX`, an `arange` plus a scalar against a scalar: the steps whose prefetches hold that
/// in every element run first, in a loop of their own whose loads are unpredicated (what
/// NVIDIA's Vulkan driver makes fastest code of), the rest in the loop after it.
/// (`attention_on_cooperative_matrices_matches_the_interpreter` runs such walks, whole
/// steps and a ragged last one, against the interpreter.)
#[test]
fn the_masked_walk_runs_its_unmasked_steps_first() {
    use rutile_ir::thread::Memory;
    let shapes = h100_coop_shapes();
    let target = Target {
        reuse_shared: rutile_ir::target::SharedReuse::SameType,
        coop_matrix: shapes.to_vec(),
        num_stages: 3,
        ..Target::nvidia(4, 48 * 1024)
    };
    let meta = AttentionMeta {
        split_diagonal: false,
        ..AttentionMeta::fp16(32, 16, 64, true)
    };
    let shape = Shape::new(1, 2, 50, 64);
    let tk = rutile_ir::lower::lower(&attention_forward(&meta).unwrap(), &target, &runtime_spec(&args(shape))).unwrap();
    // Per loop, the predicates of the global loads made directly in its body.
    let mut loops: Vec<Vec<bool>> = Vec::new();
    tk.walk(&mut |s| {
        if let Stmt::While { body, .. } = s {
            loops.push(
                body.iter()
                    .filter_map(|s| match s {
                        Stmt::Load {
                            mem: Memory::Global { .. },
                            pred,
                            ..
                        } => Some(pred.is_some()),
                        _ => None,
                    })
                    .collect(),
            );
        }
    });
    assert!(
        loops.iter().any(|preds| !preds.is_empty() && preds.iter().all(|p| !p)),
        "no loop of unpredicated loads: {loops:?}"
    );
}

/// Where the target lets TMA boxes span a pointer's outer dimensions (`Target::tma_outer`),
/// the walks' K and V tiles are boxes: the head offset `off_z * stride_z + off_h * stride_h`
/// becomes two outer dimensions of their maps (innermost first), the whole blocks' unmasked
/// rows take their extent from the strides at launch, and the ragged block's mask bounds
/// it; and where the target also lets stores span them (`Target::tma_store_outer`), the
/// output's store is one too (bounded by `N_CTX` along its rows), a TMA store of the same
/// rank. Without them none is. Either way the kernel is the interpreter's in the
/// simulator.
#[test]
fn k_and_v_go_through_tma_across_heads() {
    use rutile_ir::thread::LaunchValue::Param;
    let target = |outer| Target {
        tma_outer: outer,
        tma_store_outer: outer,
        ..hopper_pipelined(4, 3)
    };
    let shape = Shape::new(2, 3, 200, 64);
    let spec = runtime_spec(&args(shape));
    let mut rng = Rng::new(74);
    for (causal, split_diagonal) in [(false, true), (true, true), (true, false)] {
        let meta = AttentionMeta {
            split_diagonal,
            ..AttentionMeta::fp16(64, 32, 64, causal)
        };
        let kernel = attention_forward(&meta).unwrap();
        let copies = |t: &Target| {
            let tk = rutile_ir::lower::lower(&kernel, t, &spec).unwrap();
            let (mut ranks, mut stores) = (Vec::new(), Vec::new());
            tk.walk(&mut |s| match s {
                Stmt::TmaLoad { coords, .. } => ranks.push(coords.len()),
                Stmt::TmaStore { coords, .. } => stores.push(coords.len()),
                _ => {}
            });
            (ranks, stores, tk.tensor_maps.clone())
        };
        let at = format!("causal {causal}, split {split_diagonal}");
        let (ranks, stores, _) = copies(&target(false));
        assert!(ranks.is_empty() && stores.is_empty(), "{at}");
        let (ranks, stores, maps) = copies(&target(true));
        assert!(!ranks.is_empty() && ranks.iter().all(|&r| r == 4), "{at}: {ranks:?}");
        assert_eq!(stores, vec![4], "{at}: the output's store");
        let loads_only = Target {
            tma_store_outer: false,
            ..target(true)
        };
        let (ranks_only, stores_only, _) = copies(&loads_only);
        assert!(
            ranks_only == ranks && stores_only.is_empty(),
            "{at}: without `tma_store_outer`"
        );
        // Parameters: Q, K, V, sm_scale, M, Out, then Q's, K's, V's and Out's four strides.
        for m in &maps {
            // (Out's strides follow V's: parameter 5's are 18 to 21.)
            let first = if m.param == 5 { 18 } else { 6 + 4 * m.param };
            assert!([1, 2, 5].contains(&m.param), "{at}: {m:?}");
            assert_eq!(m.stride, Param(first + 2), "{at}: {m:?}");
            assert_eq!(
                m.outer,
                [Some(Param(first + 1)), Some(Param(first)), None],
                "{at}: {m:?}"
            );
            // Along the head dimension (x) the whole row, unmasked, from column 0.
            assert_eq!(m.dims[0], None, "{at}: {m:?}");
        }
        // The whole blocks' rows are unmasked, a masked walk's bounded by N_CTX, and so are
        // the output's.
        let whole_blocks = !causal || split_diagonal;
        assert_eq!(maps.iter().any(|m| m.dims[1].is_none()), whole_blocks, "{at}: {maps:?}");
        assert!(maps.iter().any(|m| m.dims[1] == Some(Param(24))), "{at}: {maps:?}");
        assert!(
            maps.iter().any(|m| m.param == 5 && m.dims[1] == Some(Param(24))),
            "{at}: {maps:?}"
        );
        simulate_attention(&at, &meta, &[target(true)], shape, &mut rng);
    }
}

/// Attention's walk warp-specialized (`Target::warp_specialize`, K and V through TMA across
/// heads): Q is loaded by the consumers before the walk, a producer warpgroup fills the
/// ring, and where the walk is rotated (`P V` in flight beside the softmax) the two consumer
/// warpgroups of a 128-row block take turns at the tensor cores (a wait and a hand-on each
/// step, one hand-on before the walk and one wait after it); the tutorial's order, whose
/// softmax would sit inside a turn, takes none at head dimension 64. Either way the kernel is the interpreter's
/// in the simulator, causal or not (and causal with its programs longest first), at a
/// length that is not a multiple of the blocks, at head dimension 64 on 3 stages and at 128
/// on 2 (as `head_128_specialized_attention_configs` gives the host code).
#[test]
fn the_specialized_walk_takes_turns() {
    // (At 128, 3 heads and 2 query blocks: the grid's axes are not interchangeable.)
    let shapes = [(Shape::new(1, 2, 300, 64), 3), (Shape::new(1, 3, 200, 128), 2)];
    let mut rng = Rng::new(75);
    let forms = [(false, false), (true, false), (true, true)];
    for ((shape, stages), (causal, longest_first)) in shapes.into_iter().flat_map(|s| forms.map(|f| (s, f))) {
        let target = Target {
            tma_outer: true,
            warp_specialize: true,
            ..hopper_pipelined(8, stages)
        };
        let spec = runtime_spec(&args(shape));
        for rotate in [true, false] {
            let meta = AttentionMeta {
                rotate,
                longest_first,
                ..AttentionMeta::fp16(128, 128, shape.d as u32, causal)
            };
            let kernel = attention_forward(&meta).unwrap();
            let tk = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap();
            let (mut specialized, mut waits, mut passes) = (0, 0, 0);
            tk.walk(&mut |s| match s {
                Stmt::Specialized { .. } => specialized += 1,
                Stmt::Turn { wait: true, .. } => waits += 1,
                Stmt::Turn { wait: false, .. } => passes += 1,
                _ => {}
            });
            let at = format!("{shape:?}, causal {causal}, longest first {longest_first}, rotate {rotate}");
            assert_eq!(specialized, 1, "{at}");
            // Q is loaded on the consumers' side, after their `setmaxnreg`, not before the
            // branch (where its registers would be live across it in the entry's budget).
            let global_load = |s: &Stmt| {
                matches!(
                    s,
                    Stmt::Load {
                        mem: rutile_ir::thread::Memory::Global { .. },
                        ..
                    }
                )
            };
            let split = tk
                .body
                .iter()
                .position(|s| matches!(s, Stmt::Specialized { .. }))
                .unwrap();
            assert!(
                !tk.body[..split].iter().any(global_load),
                "{at}: a load before the branch"
            );
            let Stmt::Specialized { consumer, .. } = &tk.body[split] else {
                unreachable!()
            };
            assert!(
                matches!(consumer[0], Stmt::SetMaxRegisters { increase: true, .. }),
                "{at}"
            );
            assert!(
                consumer.iter().any(global_load),
                "{at}: Q is not loaded by the consumers"
            );
            // At head dimension 128 the tutorial's order takes turns too: the rescale of
            // its 64 x 128 accumulator after the MMAs outweighs the softmax between them in
            // the lowering's count of each side's work (`take_turns`).
            let turns = if rotate || shape.d == 128 { 2 } else { 0 };
            assert_eq!((waits, passes), (turns, turns), "{at}");
            if rotate {
                // A turn's barrier counts whole warps: the thread verifier says so.
                let mut bad = tk.clone();
                bad.walk_mut(&mut |s| {
                    if let Stmt::Turn { threads, .. } = s {
                        *threads = 100;
                    }
                });
                let e = rutile_ir::thread::verify(&bad).unwrap_err();
                assert!(
                    e.contains("turn's barrier counts whole warps") && e.contains("100"),
                    "{e}"
                );
            }
            simulate_attention(&at, &meta, std::slice::from_ref(&target), shape, &mut rng);
        }
    }
}

/// A persistent warp-specialized kernel: its last statement splits the producer from the
/// consumers, and each side ends with its own loop over the tiles.
fn assert_each_side_walks_the_tiles(tk: &rutile_ir::thread::ThreadKernel, at: &str) {
    let Some(Stmt::Specialized { producer, consumer }) = tk.body.last() else {
        panic!("{at}: no specialization");
    };
    for side in [producer, consumer] {
        assert!(
            matches!(side.last(), Some(Stmt::While { .. })),
            "{at}: a side without its tile loop"
        );
    }
}

/// The head-128 ping-pong on a persistent grid (`persistent_head_128_specialized_attention_configs`):
/// each side walks the query blocks on its own, as the interpreter computes them, in the
/// simulator on three programs for more tiles than that: without the mask on whole key
/// blocks (128 x 128 rotated, 231408 bytes of shared memory) and, where the walks after the
/// specialized one need buffers of their own, causal and ragged at 128 x 64 on two stages
/// in the tutorial's order (the one configuration that fits). A rotated 128 x 128 walk
/// with the ragged walk does not fit and is refused, saying so.
#[test]
fn the_head_128_ping_pong_walks_a_persistent_grid() {
    let mut rng = Rng::new(79);
    let target = |stages| Target {
        tma_outer: true,
        warp_specialize: true,
        persistent: true,
        ..hopper_pipelined(8, stages)
    };
    let cases = [
        (256, 128, true, false, false, 2),
        (200, 64, false, false, false, 2),
        (200, 64, false, true, false, 2),
        (200, 64, false, true, true, 2),
    ];
    for (n, block_n, rotate, causal, longest_first, stages) in cases {
        let shape = Shape::new(1, 3, n, 128);
        let meta = AttentionMeta {
            rotate,
            longest_first,
            whole_key_blocks: n % block_n as usize == 0 && !causal,
            ..AttentionMeta::fp16(128, block_n, 128, causal)
        };
        let kernel = attention_forward(&meta).unwrap();
        let at = format!("{n} keys, 128 x {block_n}, rotate {rotate}, causal {causal}, longest first {longest_first}");
        let tk = rutile_ir::lower::lower(&kernel, &target(stages), &runtime_spec(&args(shape))).unwrap();
        assert!(tk.persistent.is_some(), "{at}");
        assert_each_side_walks_the_tiles(&tk, &at);
        simulate_attention(&at, &meta, &[target(stages)], shape, &mut rng);
    }
    let ragged = attention_forward(&AttentionMeta {
        rotate: true,
        ..AttentionMeta::fp16(128, 128, 128, false)
    })
    .unwrap();
    let shape = Shape::new(1, 3, 200, 128);
    match rutile_ir::lower::lower(&ragged, &target(2), &runtime_spec(&args(shape))) {
        Err(rutile_ir::lower::LowerError::OutOfSharedMemory { needed, limit, .. }) => assert!(needed > limit),
        other => panic!("the rotated persistent ping-pong with the ragged walk: {other:?}"),
    }
}

/// An H100's target with three programs of 4 warps a thread block beside a producer
/// warpgroup, K and V through TMA across heads, a ring of `stages`.
fn three_programs_a_block(stages: u32) -> Target {
    Target {
        tma_outer: true,
        warp_specialize: true,
        programs_per_block: 3,
        ..hopper_pipelined(4, stages)
    }
}

/// Three programs of 64 query rows a thread block (`Target::programs_per_block`), sharing
/// one producer warpgroup: FlashAttention-3's three consumer warpgroups, from the tutorial's
/// kernel of one warpgroup a program. The producer fills one ring for the three; each group
/// has its own copy of Q's tile in shared memory; the warpgroups take turns round all three;
/// a group past the grid's end (here the second block's third: 5 query blocks) computes the
/// last program again and stores nothing. The kernel is the interpreter's in the simulator.
/// A causal walk, whose key blocks depend on `program_id(0)`, is refused with the reason.
#[test]
fn three_programs_share_a_producer() {
    let shape = Shape::new(1, 2, 300, 64);
    let target = three_programs_a_block(3);
    let spec = runtime_spec(&args(shape));
    let mut rng = Rng::new(76);
    for (bn, rotate) in [(128, true), (64, false)] {
        let meta = AttentionMeta {
            rotate,
            ..AttentionMeta::fp16(64, bn, 64, false)
        };
        let kernel = attention_forward(&meta).unwrap();
        let tk = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap();
        let at = format!("64x{bn}, rotate {rotate}");
        let blocks = tk.block_programs.expect("several programs a block");
        assert_eq!(blocks.programs, 3, "{at}");
        assert_eq!(tk.num_warps, 12, "{at}: three programs' warps");
        assert_eq!(tk.producer_warps, 4, "{at}");
        let (mut budgets, mut waits) = (Vec::new(), 0);
        tk.walk(&mut |s| match s {
            Stmt::SetMaxRegisters { count, .. } => budgets.push(*count),
            Stmt::Turn { wait: true, .. } => waits += 1,
            _ => {}
        });
        // FlashAttention-3's split of the register file: 32 for the producer, 160 for each
        // of the 384 consumer threads.
        assert_eq!(budgets, [32, 160], "{at}");
        assert_eq!(waits, if rotate { 2 } else { 0 }, "{at}: turns");
        let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
        assert_eq!(tk.blocks(grid), [2, grid[1], grid[2]], "{at}");
        // Every global store of the consumers holds only where the group's program is
        // within the grid (`program < rutile_programs_x`): a group past its end computes the
        // last program again (the same values), and must not store them twice.
        let mut within = std::collections::HashSet::new();
        let mut grid_x = None;
        let mut stores = Vec::new();
        tk.walk(&mut |s| match s {
            Stmt::Set { dst, expr } => match *expr {
                Expr::Param(p) if p == blocks.grid_x_param => grid_x = Some(*dst),
                Expr::Compare(CmpOp::Lt, _, g) if Some(g) == grid_x => _ = within.insert(*dst),
                Expr::Binary(BinaryOp::And, _, w) if within.contains(&w) => _ = within.insert(*dst),
                _ => {}
            },
            Stmt::Store {
                mem: rutile_ir::thread::Memory::Global { .. },
                pred,
                ..
            }
            | Stmt::TmaStore { pred, .. } => stores.push(*pred),
            _ => {}
        });
        assert!(!stores.is_empty(), "{at}");
        assert!(
            stores.iter().all(|p| p.is_some_and(|p| within.contains(&p))),
            "{at}: a store not limited to the grid"
        );
        let b = buffers(&mut rng, shape);
        simulate_on(
            &at,
            &kernel,
            std::slice::from_ref(&target),
            grid,
            &args(shape),
            &b,
            2e-3,
        );
    }
    let plain = Target {
        warp_specialize: false,
        ..target.clone()
    };
    let kernel = attention_forward(&AttentionMeta::fp16(64, 64, 64, false)).unwrap();
    let e = rutile_ir::lower::lower(&kernel, &plain, &spec).unwrap_err().to_string();
    assert!(e.contains("programs_per_block = 3 needs warp_specialize"), "{e}");
    let causal = attention_forward(&AttentionMeta::fp16(64, 64, 64, true)).unwrap();
    let e = rutile_ir::lower::lower(&causal, &target, &spec)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("programs_per_block = 3") && e.contains("depend on program_id(0)"),
        "{e}"
    );
}

/// What three programs a block need of the rotated walk to fit its consumers' 160
/// registers a thread, in each group's loop of the specialized kernel:
/// - the accumulator is rescaled before the step's MMAs are issued, not between `Q K_jᵀ`
///   and `P V` (there, `ptxas` waited for the scores before the rescale, which touches
///   registers an MMA last wrote);
/// - the walk hands on nothing but its state: the last block's V pointers are computed
///   after it, where before each consumer carried the walk's eight V pointer registers
///   through every step for that one load.
#[test]
fn the_consumers_walk_carries_only_its_state() {
    use rutile_ir::thread::{reads, walk_lists, WgmmaA};
    let shape = Shape::new(1, 2, 1000, 64);
    let target = three_programs_a_block(2);
    let meta = AttentionMeta {
        rotate: true,
        ..AttentionMeta::fp16(64, 128, 64, false)
    };
    let tk = rutile_ir::lower::lower(&attention_forward(&meta).unwrap(), &target, &runtime_spec(&args(shape))).unwrap();
    let is_int = |r: rutile_ir::thread::Reg| !tk.regs[r].ty.is_float();
    let mut walks = 0;
    walk_lists(&tk.body, &mut |list| {
        for (i, s) in list.iter().enumerate() {
            let Stmt::While { body, .. } = s else { continue };
            // The rotated walk: its `P V` reads a P that no statement of the step sets before
            // it (the step before's); the ragged last block's walk after it computes its own.
            let Some(pv) = body.iter().position(|s| {
                matches!(
                    s,
                    Stmt::Wgmma {
                        a: WgmmaA::Registers(_),
                        ..
                    }
                )
            }) else {
                continue;
            };
            let Stmt::Wgmma {
                a: WgmmaA::Registers(p),
                ..
            } = &body[pv]
            else {
                unreachable!()
            };
            if body[..pv]
                .iter()
                .any(|s| matches!(s, Stmt::Set { dst, .. } if p.contains(dst)))
            {
                continue;
            }
            walks += 1;
            // Between the first group's commit and the second group's fence: no arithmetic.
            let c1 = body.iter().position(|s| matches!(s, Stmt::WgmmaCommit)).unwrap();
            let f2 = c1 + body[c1..].iter().position(|s| matches!(s, Stmt::WgmmaFence)).unwrap();
            let between: Vec<&Stmt> = body[c1..f2]
                .iter()
                .filter(|s| {
                    matches!(
                        s,
                        Stmt::Set {
                            expr: Expr::Binary(..),
                            ..
                        }
                    ) && !matches!(s, Stmt::Set { dst, .. } if is_int(*dst))
                })
                .collect();
            assert!(
                between.is_empty(),
                "float arithmetic between the step's MMA groups: {between:?}"
            );
            // The integer registers the loop sets that the statements after it read.
            let mut set = std::collections::HashSet::new();
            rutile_ir::thread::walk_stmts(body, &mut |s| {
                if let Stmt::Set { dst, .. } = s {
                    set.insert(*dst);
                }
            });
            let mut read_after = std::collections::BTreeSet::new();
            rutile_ir::thread::walk_stmts(&list[i + 1..], &mut |s| {
                let mut note = |r| {
                    if set.contains(&r) && is_int(r) {
                        read_after.insert(r);
                    }
                };
                match s {
                    Stmt::Set { expr, .. } => rutile_ir::thread::operands(expr).into_iter().for_each(&mut note),
                    _ => reads(s, &mut note),
                }
            });
            // None: the statements after the walk read its state (floats) only.
            assert!(
                read_after.is_empty(),
                "{} integer registers of the walk read after it: {read_after:?}",
                read_after.len()
            );
        }
    });
    assert_eq!(walks, 1, "one walk for the consumers");
}

/// `AttentionMeta::whole_key_blocks`: where `N_CTX` is a multiple of `block_n`, the kernel
/// without the ragged walk gives the general kernel's results bit for bit (in the
/// interpreter, rotated or not), has one walk fewer once lowered (three programs a block),
/// and runs in the simulator as in the interpreter. Launched with another `N_CTX` it would
/// leave the last keys out: its `device_assert` stops the interpreter with the reason.
#[test]
fn whole_key_blocks_leave_out_the_ragged_walk() {
    let shape = Shape::new(1, 2, 256, 64);
    let mut rng = Rng::new(77);
    let target = three_programs_a_block(2);
    let spec = runtime_spec(&args(shape));
    for (bn, rotate) in [(128, true), (64, true), (64, false)] {
        let general = AttentionMeta {
            rotate,
            ..AttentionMeta::fp16(64, bn, 64, false)
        };
        let whole = AttentionMeta {
            whole_key_blocks: true,
            ..general
        };
        let at = format!("64x{bn}, rotate {rotate}");
        let kernel = attention_forward(&whole).unwrap();
        let grid = whole.grid(shape.z as u32, shape.h as u32, shape.n as u32);
        let b = buffers(&mut rng, shape);
        let (mut got, mut want) = (b.clone(), b.clone());
        interp::run(&kernel, grid, &args(shape), &mut got).unwrap();
        interp::run(&attention_forward(&general).unwrap(), grid, &args(shape), &mut want).unwrap();
        assert_eq!(values(&got[4]), values(&want[4]), "{at}: Out");
        assert_eq!(values(&got[3]), values(&want[3]), "{at}: M");

        let walks = |meta: &AttentionMeta| {
            let tk = rutile_ir::lower::lower(&attention_forward(meta).unwrap(), &target, &spec).unwrap();
            let mut loops = 0;
            tk.walk(&mut |s| loops += matches!(s, Stmt::While { .. }) as usize);
            loops
        };
        assert_eq!(walks(&whole) + 1, walks(&general), "{at}: the ragged walk");
        simulate_on(
            &at,
            &kernel,
            std::slice::from_ref(&target),
            grid,
            &args(shape),
            &b,
            2e-3,
        );

        let ragged = Shape { n: 200, ..shape };
        let mut b = buffers(&mut rng, ragged);
        let grid = whole.grid(ragged.z as u32, ragged.h as u32, ragged.n as u32);
        let e = interp::run(&kernel, grid, &args(ragged), &mut b)
            .unwrap_err()
            .to_string();
        assert!(e.contains("N_CTX is a multiple of block_n"), "{at}: {e}");
    }
}

/// The race the persistent lowering avoids, put back by hand: the ragged walk's copies and
/// MMAs moved into the ring's own buffers (what the lowering did when it freed the ring for
/// later walks). From a block's second tile on, the producer's copies for it would be in
/// flight in those buffers while the consumers walk the ragged block: the thread verifier
/// refuses the kernel. (With that check taken out, the simulator faults the copies' race,
/// since it hands the producer its turn at each stage the consumers free.)
#[test]
fn the_ragged_walk_in_the_ring_is_refused() {
    use rutile_ir::thread::{Memory, WgmmaA};
    let target = Target {
        persistent: true,
        programs_per_block: 2,
        ..three_programs_a_block(2)
    };
    let shape = Shape::new(1, 2, 300, 64);
    let meta = AttentionMeta {
        rotate: true,
        ..AttentionMeta::fp16(64, 128, 64, false)
    };
    let kernel = attention_forward(&meta).unwrap();
    let mut tk = rutile_ir::lower::lower(&kernel, &target, &runtime_spec(&args(shape))).unwrap();
    let Some(Stmt::Specialized { producer, consumer }) = tk.body.last_mut() else {
        panic!("no specialization");
    };
    // Each buffer the consumers copy into, to the producer's of the same size.
    let mut filled = Vec::new();
    rutile_ir::thread::walk_stmts(producer, &mut |s| {
        if let Stmt::TmaLoad { alloc, .. } = s {
            filled.push(*alloc);
        }
    });
    let mut to = std::collections::BTreeMap::new();
    rutile_ir::thread::walk_stmts(consumer, &mut |s| {
        if let Stmt::TmaLoad { alloc, .. } = s {
            let same = filled
                .iter()
                .find(|&&f| tk.shared[f as usize] == tk.shared[*alloc as usize]);
            to.insert(*alloc, *same.expect("a ring buffer of the same size"));
        }
    });
    assert!(!to.is_empty(), "the ragged walk copies by TMA");
    let moved = |a: &mut u32| *a = *to.get(a).unwrap_or(a);
    rutile_ir::thread::walk_stmts_mut(consumer, &mut |s| match s {
        Stmt::TmaLoad { alloc, .. }
        | Stmt::Load {
            mem: Memory::Shared { alloc },
            ..
        } => moved(alloc),
        Stmt::Wgmma { a, b, .. } => {
            if let WgmmaA::Shared(m) = a {
                moved(&mut m.alloc);
            }
            moved(&mut b.alloc);
        }
        _ => {}
    });
    let err = rutile_ir::thread::verify(&tk).unwrap_err();
    assert!(err.contains("which the producer fills for the next tile"), "{err}");
}

/// Programs sharing a block on a persistent grid: each side walks the blocks on its own (the
/// producer fetching the next block's keys while the consumers store this one's output),
/// the consumers' program read afresh every block; in the simulator on three programs for
/// four blocks, as the interpreter computes it, with and without the ragged walk. The
/// ragged walk's copies go to buffers of their own, not the ring the producer is filling
/// for the next block (the verifier refuses a kernel whose consumers write what the
/// producer fills): three programs then need more shared memory than a multiprocessor has
/// (refused, saying so), two fit.
#[test]
fn blocks_of_programs_walk_a_persistent_grid() {
    let mut rng = Rng::new(78);
    let three = Target {
        persistent: true,
        ..three_programs_a_block(2)
    };
    let two = Target {
        programs_per_block: 2,
        ..three.clone()
    };
    for (n, whole, target) in [(300, false, &two), (256, true, &three)] {
        let programs = target.programs_per_block;
        let shape = Shape::new(1, 2, n, 64);
        let meta = AttentionMeta {
            rotate: true,
            whole_key_blocks: whole,
            ..AttentionMeta::fp16(64, 128, 64, false)
        };
        let kernel = attention_forward(&meta).unwrap();
        let tk = rutile_ir::lower::lower(&kernel, target, &runtime_spec(&args(shape))).unwrap();
        let at = format!("{n} keys, whole blocks {whole}, {programs} programs a block");
        assert!(tk.persistent.is_some() && tk.block_programs.is_some(), "{at}");
        assert_each_side_walks_the_tiles(&tk, &at);
        let grid = meta.grid(shape.z as u32, shape.h as u32, shape.n as u32);
        let blocks = grid[0].div_ceil(programs);
        assert_eq!(tk.blocks(grid), [blocks, 2, 1], "{at}");
        let b = buffers(&mut rng, shape);
        simulate_on(&at, &kernel, std::slice::from_ref(target), grid, &args(shape), &b, 2e-3);
    }
    let ragged = attention_forward(&AttentionMeta {
        rotate: true,
        ..AttentionMeta::fp16(64, 128, 64, false)
    })
    .unwrap();
    let shape = Shape::new(1, 2, 300, 64);
    match rutile_ir::lower::lower(&ragged, &three, &runtime_spec(&args(shape))) {
        Err(rutile_ir::lower::LowerError::OutOfSharedMemory { needed, limit, .. }) => assert!(needed > limit),
        other => panic!("three persistent programs with the ragged walk: {other:?}"),
    }
}

/// A kernel says what its `dot`s run on: a block whose cooperative-matrix staging does not
/// fit the workgroup memory (128 x 64 at head dimension 64 in 48 KiB) runs them on FMAs, and
/// says why, where a smaller block stays on the matrices; a target without matrix units
/// gives no reason, and one with `mma.sync` runs them there.
#[test]
fn a_lowered_kernel_says_what_its_dots_run_on() {
    use rutile_ir::thread::DotPath;
    let shape = Shape::new(1, 1, 256, 64);
    let coop = |warps| Target {
        reuse_shared: rutile_ir::target::SharedReuse::SameType,
        coop_matrix: h100_coop_shapes().to_vec(),
        coop_scale: true,
        num_stages: 2,
        ..Target::vulkan(32, warps, 48 * 1024)
    };
    let dots = |block_m, block_n, target: &Target| {
        let kernel = attention_forward(&AttentionMeta::fp16(block_m, block_n, 64, false)).unwrap();
        rutile_ir::lower::lower(&kernel, target, &runtime_spec(&args(shape)))
            .unwrap()
            .dots
    };
    assert_eq!(dots(32, 32, &coop(4)), Some(DotPath::CooperativeMatrix));
    let Some(DotPath::Fma { why: Some(why) }) = dots(128, 64, &coop(8)) else {
        panic!("128 x 64 blocks do not fit 48 KiB on cooperative matrices");
    };
    assert!(why.contains("shared memory") && why.contains("49152"), "{why}");
    assert_eq!(
        dots(32, 32, &Target::nvidia(4, 48 * 1024)),
        Some(DotPath::Fma { why: None })
    );
    let ampere = Target {
        mma_sync: true,
        ..Target::nvidia(4, 48 * 1024)
    };
    assert_eq!(dots(32, 32, &ampere), Some(DotPath::Mma));
    // A kernel without a `dot` says nothing.
    let copy = rutile_ir::seeds::vector_add(F32, 1024).unwrap();
    let spec = rutile_ir::target::Specialization::default();
    assert_eq!(rutile_ir::lower::lower(&copy, &coop(4), &spec).unwrap().dots, None);
}

/// The output stored by TMA across heads (`Target::tma_store_outer`) in the
/// warp-specialized walk, rotated and not, causal and not, and on a persistent grid with
/// the operands copied by the producer: one 4-D store a column block,
/// issued by the consumers' first thread, and the kernel the interpreter's in the simulator
/// (which reads the staging tile when the store is issued and faults a write to it before
/// the wait on its reads).
#[test]
fn the_output_leaves_by_tma_across_heads() {
    let shape = Shape::new(2, 3, 200, 64);
    let target = Target {
        tma_outer: true,
        tma_store_outer: true,
        warp_specialize: true,
        ..hopper_pipelined(8, 2)
    };
    let spec = runtime_spec(&args(shape));
    let mut rng = Rng::new(76);
    for (causal, rotate) in [(false, true), (false, false), (true, true)] {
        let meta = AttentionMeta {
            rotate,
            ..AttentionMeta::fp16(128, 128, shape.d as u32, causal)
        };
        let at = format!("causal {causal}, rotate {rotate}");
        assert_eq!(
            tma_stores(&meta, &target, &spec),
            vec![4],
            "{at}: one box of 64 columns, 4-D"
        );
        simulate_attention(&at, &meta, std::slice::from_ref(&target), shape, &mut rng);
    }
    // The persistent head-128 ping-pong with `Q` and the last values copied by the producer
    // (as the CUDA runtime launches it): each tile's store waits for the last one's reads
    // of the staging tile, while the producer copies the next tile's operands.
    let shape = Shape::new(1, 3, 256, 128);
    let meta = AttentionMeta {
        rotate: true,
        whole_key_blocks: true,
        last_values_ahead: true,
        ..AttentionMeta::fp16(128, 128, 128, false)
    };
    let target = Target {
        persistent: true,
        tma_staged_after: true,
        ..target
    };
    let spec = runtime_spec(&args(shape));
    assert_eq!(
        tma_stores(&meta, &target, &spec),
        vec![4, 4],
        "persistent: two boxes of 64 columns"
    );
    simulate_attention("persistent", &meta, &[target], shape, &mut rng);
}

/// The coordinates' counts of the TMA stores of attention `meta` lowered for `target`.
fn tma_stores(meta: &AttentionMeta, target: &Target, spec: &rutile_ir::target::Specialization) -> Vec<usize> {
    let kernel = attention_forward(meta).unwrap();
    let tk = rutile_ir::lower::lower(&kernel, target, spec).unwrap();
    let mut stores = Vec::new();
    tk.walk(&mut |s| {
        if let Stmt::TmaStore { coords, .. } = s {
            stores.push(coords.len());
        }
    });
    stores
}

/// The rotated walk's last values loaded before it (`AttentionMeta::last_values_ahead`):
/// the lowering stores them into a buffer of their own before the walk (the loop's `hoist`),
/// nothing after it, and the last `P V` reads them there; the kernel is the interpreter's
/// in the simulator on one warpgroup, on the warp-specialized ping-pong (persistent too), on
/// three programs a block and on Vulkan's cooperative matrices, with whole key blocks and a
/// ragged last one, causal or not.
#[test]
fn the_last_values_ahead_are_staged_before_the_walk() {
    use rutile_ir::thread::{walk_stmts as walk, Memory};
    let shape = Shape::new(1, 2, 256, 64);
    let meta = |bm, bn, d, causal, whole| AttentionMeta {
        rotate: true,
        last_values_ahead: true,
        whole_key_blocks: whole,
        ..AttentionMeta::fp16(bm, bn, d, causal)
    };
    // On Vulkan's cooperative matrices too (the staged tile is a cooperative operand there).
    let coop = Target {
        reuse_shared: rutile_ir::target::SharedReuse::SameType,
        coop_matrix: h100_coop_shapes().to_vec(),
        coop_scale: true,
        num_stages: 2,
        ..Target::nvidia(4, 48 * 1024)
    };
    let coop_case = (Shape::new(1, 2, 100, 64), meta(32, 32, 64, false, false), vec![coop]);
    // There too the last values are stored before the walk: more stores ahead of it.
    let stores_before_walk = |ahead| {
        let (shape, meta, targets) = &coop_case;
        let kernel = attention_forward(&AttentionMeta {
            last_values_ahead: ahead,
            ..*meta
        })
        .unwrap();
        let tk = rutile_ir::lower::lower(&kernel, &targets[0], &runtime_spec(&args(*shape))).unwrap();
        let walk_at = tk.body.iter().position(|s| matches!(s, Stmt::While { .. })).unwrap();
        let mut n = 0;
        walk(&tk.body[..walk_at], &mut |s| {
            n += matches!(
                s,
                Stmt::Store {
                    mem: Memory::Shared { .. },
                    ..
                }
            ) as usize
        });
        n
    };
    assert!(
        stores_before_walk(true) > stores_before_walk(false),
        "on cooperative matrices, the last values are not stored before the walk"
    );
    let tk = rutile_ir::lower::lower(
        &attention_forward(&meta(64, 64, 64, false, true)).unwrap(),
        &hopper_pipelined(4, 2),
        &runtime_spec(&args(shape)),
    )
    .unwrap();
    let walk_at = tk
        .body
        .iter()
        .position(|s| matches!(s, Stmt::While { .. }))
        .expect("the walk");
    let mut last_values = None;
    walk(&tk.body[walk_at + 1..], &mut |s| {
        if let (None, Stmt::Wgmma { b, .. }) = (last_values, s) {
            last_values = Some(b.alloc);
        }
    });
    let last_values = last_values.expect("the last P V on warpgroup MMAs");
    let stores_to = |stmts: &[Stmt]| {
        let mut n = 0;
        walk(stmts, &mut |s| {
            n += matches!(s, Stmt::Store { mem: Memory::Shared { alloc }, .. } if *alloc == last_values) as usize
        });
        n
    };
    assert!(
        stores_to(&tk.body[..walk_at]) > 0,
        "the last values are stored before the walk"
    );
    assert_eq!(
        stores_to(&tk.body[walk_at..]),
        0,
        "the last values are stored after the walk"
    );
    // Loaded after the walk, they are stored after it.
    let after = rutile_ir::lower::lower(
        &attention_forward(&AttentionMeta {
            last_values_ahead: false,
            ..meta(64, 64, 64, false, true)
        })
        .unwrap(),
        &hopper_pipelined(4, 2),
        &runtime_spec(&args(shape)),
    )
    .unwrap();
    let stores_after_walk = after
        .body
        .iter()
        .position(|s| matches!(s, Stmt::While { .. }))
        .map(|at| {
            let mut n = 0;
            walk(&after.body[at + 1..], &mut |s| {
                n += matches!(
                    s,
                    Stmt::Store {
                        mem: Memory::Shared { .. },
                        ..
                    }
                ) as usize
            });
            n
        });
    assert!(
        stores_after_walk > Some(0),
        "without it the last values are stored after the walk"
    );

    let mut rng = Rng::new(83);
    let ping_pong = |persistent| Target {
        tma_outer: true,
        warp_specialize: true,
        persistent,
        ..hopper_pipelined(8, 2)
    };
    let cases = [
        (
            Shape::new(1, 2, 256, 64),
            meta(64, 64, 64, false, true),
            vec![hopper_pipelined(4, 2), hopper_pipelined(4, 3)],
        ),
        (
            Shape::new(1, 2, 200, 64),
            meta(64, 64, 64, false, false),
            vec![hopper_pipelined(4, 2)],
        ),
        (
            Shape::new(1, 2, 200, 64),
            meta(64, 32, 64, true, false),
            vec![hopper_pipelined(4, 2)],
        ),
        (
            Shape::new(1, 3, 256, 128),
            meta(128, 128, 128, false, true),
            vec![ping_pong(false), ping_pong(true)],
        ),
        (
            Shape::new(1, 2, 300, 64),
            meta(64, 64, 64, false, false),
            vec![three_programs_a_block(2)],
        ),
        (
            Shape::new(1, 2, 256, 64),
            meta(64, 128, 64, false, true),
            vec![three_programs_a_block(2)],
        ),
    ];
    for (shape, meta, targets) in cases.into_iter().chain([coop_case]) {
        let at = format!(
            "last values ahead, {shape:?}, {}x{}, causal {}",
            meta.block_m, meta.block_n, meta.causal
        );
        simulate_attention(&at, &meta, &targets, shape, &mut rng);
    }
    let refused = attention_forward(&AttentionMeta {
        last_values_ahead: true,
        ..AttentionMeta::fp16(64, 64, 64, false)
    });
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("without rotate"), "{message}");
}
