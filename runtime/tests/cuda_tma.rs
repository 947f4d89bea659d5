//! Tensor-memory-accelerator copies on a real GPU (sm_90 and later): a per-thread kernel
//! built by hand, emitted by the PTX backend, its tensor maps encoded by
//! `CudaDevice::encode_tensor_map` and passed after its own arguments. Each copy's bytes
//! must land in shared memory swizzled as the 128-byte swizzle says, with zeros outside
//! the tensor.
//!
//! Skipped (passing) without a CUDA device of compute capability 9.0 or newer, unless
//! `RUTILE_REQUIRE` names `cuda`.

mod cuda_support;

use cuda_support::gpu_or_skip;
use rutile::cuda::{CudaBuffer, KernelArg, LaunchConfig, TensorMapElem, TiledTensorMap};
use rutile_ir::ir::CmpOp;
use rutile_ir::thread::{LaunchValue, MBarrier, Memory, Stmt, TensorMap, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType::*;

const BOX: usize = 64;
const THREADS: usize = 128;

/// `tma_boxes(a, b, out, ax, ay, bx, by)`: one program copies the 64x64 f16 box of map 0
/// (over `a`) at `(ax, ay)` into a shared tile (mbarrier phase 0) and writes the tile's
/// bytes as they are to `out[0..4096]`; then the box of map 1 (over `b`) at `(bx, by)` into
/// the same tile (phase 1), to `out[4096..8192]`.
fn tma_boxes() -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("tma_boxes", (THREADS / 32) as u32, 32);
    let a = k.ptr("a", F16);
    let b = k.ptr("b", F16);
    let out = k.ptr("out", F16);
    let coords: Vec<u32> = ["ax", "ay", "bx", "by"].iter().map(|n| k.scalar(n, I32)).collect();
    let bars = k.shared(U64, 1);
    let tile = k.shared(F16, (BOX * BOX) as u32);
    let tid = k.thread_id();
    let zero = k.int(I32, 0);
    let one = k.int(I32, 1);
    let first = k.cmp(CmpOp::Eq, tid, zero);
    let bar = MBarrier {
        alloc: bars,
        index: zero,
    };
    k.push(Stmt::MbarrierInit {
        bar,
        count: 1,
        pred: Some(first),
    });
    k.push(Stmt::Barrier);
    for (phase, parity) in [zero, one].into_iter().enumerate() {
        let x = k.param(coords[2 * phase], I32);
        let y = k.param(coords[2 * phase + 1], I32);
        k.push(Stmt::MbarrierArriveExpectTx {
            bar,
            bytes: (BOX * BOX * 2) as u32,
            pred: Some(first),
        });
        k.push(Stmt::TmaLoad {
            map: phase as u32,
            alloc: tile,
            dst: zero,
            coords: vec![x, y],
            bar,
            pred: Some(first),
        });
        k.push(Stmt::MbarrierWait { bar, parity });
        for r in 0..(BOX * BOX / THREADS) {
            let i = k.int(I32, (r * THREADS) as i64);
            let i = k.bin(rutile_ir::ir::BinaryOp::Add, i, tid);
            let v = k.load(F16, 1, Memory::Shared { alloc: tile }, i, None);
            let o = k.int(I32, (phase * BOX * BOX) as i64);
            let o = k.bin(rutile_ir::ir::BinaryOp::Add, o, i);
            k.store(v, Memory::Global { param: out }, o, None);
        }
        // The next copy overwrites the tile: every thread's reads come first.
        k.push(Stmt::FenceProxyAsync);
        k.push(Stmt::Barrier);
    }
    k.push(Stmt::MbarrierInval { bar, pred: Some(first) });
    let mut t = k.finish_unverified();
    t.shared[tile as usize].align = 1024;
    // The runtime's launch reads these; this test encodes the maps itself.
    for param in [a, b] {
        t.tensor_maps.push(TensorMap {
            param,
            dims: [Some(LaunchValue::Const(1)), Some(LaunchValue::Const(1))],
            stride: LaunchValue::Const(8),
            outer: [None; 3],
            box_dims: [BOX as u32, BOX as u32],
            swizzle: 128,
        });
    }
    rutile_ir::thread::verify(&t).unwrap_or_else(|e| panic!("{e}"));
    t
}

/// The tile a copy of the box at `(x0, y0)` of a `rows` x `cols` matrix (row stride
/// `stride`) leaves in shared memory: row `by` of the box is 128 bytes at `128 by`, its
/// 16-byte chunk `c` at chunk `c ^ (by % 8)`; zeros outside the matrix.
fn expected_tile(m: &[u16], rows: usize, cols: usize, stride: usize, x0: i64, y0: i64) -> Vec<u16> {
    let mut tile = vec![0u16; BOX * BOX];
    for by in 0..BOX {
        for bx in 0..BOX {
            let (x, y) = (x0 + bx as i64, y0 + by as i64);
            let v = if (0..cols as i64).contains(&x) && (0..rows as i64).contains(&y) {
                m[y as usize * stride + x as usize]
            } else {
                0
            };
            let byte = 2 * bx;
            let at = by * 128 + ((byte / 16) ^ (by % 8)) * 16 + byte % 16;
            tile[at / 2] = v;
        }
    }
    tile
}

#[test]
fn gpu_tma_boxes_land_swizzled_with_zeros_outside() {
    let Some(dev) = gpu_or_skip("gpu_tma_boxes_land_swizzled_with_zeros_outside") else {
        return;
    };
    let (major, minor) = dev.properties().compute_capability;
    if major < 9 {
        println!("gpu_tma_boxes_land_swizzled_with_zeros_outside: sm_{major}{minor} has no TMA: skipped");
        return;
    }
    let k = tma_boxes();
    let target = rutile_ptx::PtxTarget::from_compute_capability(major, minor);
    let ptx = rutile_ptx::emit(&k, &target).unwrap_or_else(|e| panic!("{e}"));
    let module = dev.load_ptx(&ptx).unwrap_or_else(|e| panic!("{e}\n{ptx}"));
    let function = module.function("tma_boxes").unwrap();

    // `a`: 100 x 150 halves, rows 160 apart (320 bytes); `b`: 70 x 64, rows 64 apart. Values
    // are distinct non-zero bit patterns, so a misplaced element shows.
    let (a_rows, a_cols, a_stride) = (100usize, 150usize, 160usize);
    let (b_rows, b_cols, b_stride) = (70usize, 64usize, 64usize);
    let a: Vec<u16> = (0..a_rows * a_stride).map(|i| (i % 30000 + 1) as u16).collect();
    let b: Vec<u16> = (0..b_rows * b_stride).map(|i| (i % 30000 + 30001) as u16).collect();
    let da = CudaBuffer::from_slice(&dev, &a).unwrap();
    let db = CudaBuffer::from_slice(&dev, &b).unwrap();
    let out = CudaBuffer::<u16>::zeroed(&dev, 2 * BOX * BOX).unwrap();
    let map = |address: u64, rows: usize, cols: usize, stride: usize| {
        let desc = TiledTensorMap::two_d(
            TensorMapElem::F16,
            address,
            [cols as u64, rows as u64],
            2 * stride as u64,
            [BOX as u32, BOX as u32],
            128,
        );
        KernelArg::TensorMap(dev.encode_tensor_map(&desc).unwrap_or_else(|e| panic!("{e}")))
    };
    // Boxes across every edge of `a` and `b` (negative coordinates read zeros too). The
    // first coordinate stays a multiple of 8 halves: a box whose rows start off a 16-byte
    // boundary is an illegal instruction on an H100.
    let cases = [
        ((96, 50), (-8, -3)),
        ((0, 0), (0, 20)),
        ((64, 99), (8, 69)),
        ((144, -63), (56, 0)),
    ];
    for ((ax, ay), (bx, by)) in cases {
        let args = [
            da.arg(),
            db.arg(),
            out.arg(),
            KernelArg::I32(ax),
            KernelArg::I32(ay),
            KernelArg::I32(bx),
            KernelArg::I32(by),
            map(da.device_ptr(), a_rows, a_cols, a_stride),
            map(db.device_ptr(), b_rows, b_cols, b_stride),
        ];
        let config = LaunchConfig::new((1, 1, 1), (THREADS as u32, 1, 1)).with_dynamic_shared(k.shared_bytes());
        // SAFETY: the kernel writes `out` (8192 halves) and reads the two maps' boxes, which
        // the maps clip to the buffers.
        unsafe { dev.launch(&function, &config, &args) }.unwrap_or_else(|e| panic!("{e}"));
        let got = out.download().unwrap();
        let want_a = expected_tile(&a, a_rows, a_cols, a_stride, ax.into(), ay.into());
        let want_b = expected_tile(&b, b_rows, b_cols, b_stride, bx.into(), by.into());
        for (name, got, want) in [("a", &got[..BOX * BOX], &want_a), ("b", &got[BOX * BOX..], &want_b)] {
            if let Some(i) = (0..BOX * BOX).find(|&i| got[i] != want[i]) {
                panic!(
                    "box of `{name}` at ({ax}, {ay}) / ({bx}, {by}): tile element {i} (row {}, column {}) is {:#x}, \
                     expected {:#x}",
                    i / BOX,
                    i % BOX,
                    got[i],
                    want[i]
                );
            }
        }
    }
}
