//! The matmul seed on f32 inputs at input precision tf32, lowered for the tensor cores
//! (`mma.sync.m16n8k8` on tf32, operands rounded with `cvt.rna.tf32.f32`): its PTX passes
//! `ptxas` for sm_80 and sm_90 in several tile shapes, warp counts, operand orders and
//! pipeline depths, and none of them spills (`cargo test -p rutile-ptx --test tf32 --
//! --nocapture` prints their registers).

mod support;

use rutile_ir::seeds::{self, MatmulMeta};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::thread::ThreadKernel;
use rutile_ir::{DotPrecision, ScalarType};
use rutile_ptx::{emit, PtxTarget};

/// The compute capabilities every configuration is assembled for.
const SMS: [u32; 2] = [80, 90];

/// The matmul seed's f32 tf32 kernel with `bm x bn x bk` blocks.
fn tf32_matmul(bm: u32, bn: u32, bk: u32) -> rutile_ir::Kernel {
    matmul_at(DotPrecision::Tf32, bm, bn, bk)
}

/// The matmul seed's f32 kernel at `precision` with `bm x bn x bk` blocks.
fn matmul_at(precision: DotPrecision, bm: u32, bn: u32, bk: u32) -> rutile_ir::Kernel {
    seeds::matmul(&MatmulMeta {
        input: ScalarType::F32,
        output: ScalarType::F32,
        input_precision: precision,
        ..MatmulMeta::fp16(bm, bn, bk)
    })
    .unwrap()
}

/// As the CUDA backend lowers for an H100 (227 KiB of shared memory), with `stages`
/// pipeline buffers (1: no pipeline).
fn target(warps: u32, stages: u32) -> Target {
    Target {
        mma_sync: true,
        async_copy: stages > 1,
        num_stages: stages,
        ..Target::nvidia(warps, 227 * 1024)
    }
}

/// As the runtime specializes a launch whose arguments are all divisible by 16, with unit
/// strides (equal to 1) at parameters `unit` (row-major A and B: `stride_ak`, `stride_bn`,
/// `stride_cn` = 7, 9, 11; column-major: `stride_am`, `stride_bk` = 6, 8).
fn spec(params: usize, unit: &[usize]) -> Specialization {
    Specialization {
        equal_to_1: (0..params).map(|i| unit.contains(&i)).collect(),
        ..Specialization::all(params)
    }
}

/// Emits `t` for `sm`, assembles it with `ptxas -v` and returns the PTX and the bytes
/// spilled (`None` where ptxas is not available).
fn assemble(label: &str, t: &ThreadKernel, sm: u32) -> (String, Option<u32>) {
    let ptx = emit(t, &PtxTarget::from_compute_capability(sm / 10, sm % 10))
        .unwrap_or_else(|e| panic!("{label}: emitting PTX for sm_{sm}: {e}"));
    let resources = support::ptxas_resources(&ptx, sm);
    if let Some((registers, spilled)) = resources {
        println!(
            "{label}, sm_{sm}: {registers} registers, {spilled} bytes spilled, {} bytes shared",
            t.shared_bytes()
        );
    }
    (ptx, resources.map(|(_, spilled)| spilled))
}

#[test]
fn tf32_matmul_passes_ptxas() {
    // (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages).
    let configs = [
        (128, 128, 32, 4, 4),
        (64, 64, 32, 4, 1),
        (64, 32, 32, 2, 3),
        (128, 256, 16, 8, 3),
        (32, 32, 16, 1, 2),
    ];
    let orders = [("row-major", &[7, 9, 11][..]), ("column-major", &[6, 8, 11][..])];
    let mut spilling = Vec::new();
    for (bm, bn, bk, warps, stages) in configs {
        let kernel = tf32_matmul(bm, bn, bk);
        for (order, unit) in orders {
            let label = format!("tf32 matmul {bm}x{bn}x{bk}, {warps} warps, {stages} stages, {order}");
            let t = rutile_ir::lower::lower(&kernel, &target(warps, stages), &spec(kernel.params.len(), unit))
                .unwrap_or_else(|e| panic!("lowering {label}: {e}"));
            for sm in SMS {
                let (ptx, spilled) = assemble(&label, &t, sm);
                support::assert_contains(
                    &ptx,
                    &["mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32"],
                );
                assert!(
                    !ptx.contains("m16n8k16"),
                    "{label}: f32 operands multiplied as 16-bit ones"
                );
                // Row-major A and column-major B are read with `ldmatrix`.
                assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), "{label}");
                assert_eq!(ptx.contains("cp.async"), stages > 1, "{label}: cp.async");
                if let Some(s) = spilled.filter(|&s| s > 0) {
                    spilling.push(format!("{label}, sm_{sm}: {s} bytes"));
                }
            }
        }
    }
    assert!(spilling.is_empty(), "spills: {spilling:?}");
}

/// tf32x3: three times the tf32 `mma`s of the same tile (each fragment split into its tf32
/// rounding and the rest), assembled for sm_80 and sm_90 without spills.
#[test]
fn tf32x3_matmul_passes_ptxas() {
    // (Both parts of the fragments and the accumulator kept through the dot cost
    // registers: 128x128 at 4 warps and 128x256 at 8, 128 accumulators a thread, spill
    // about 2.8 KB for sm_80 and sm_90.)
    let configs = [
        (128, 128, 32, 8, 3),
        (64, 64, 32, 4, 1),
        (64, 128, 32, 8, 3),
        (64, 128, 32, 4, 3),
        (128, 64, 32, 4, 3),
    ];
    let mut spilling = Vec::new();
    for (bm, bn, bk, warps, stages) in configs {
        let label = format!("tf32x3 matmul {bm}x{bn}x{bk}, {warps} warps, {stages} stages");
        let lowered = |precision| {
            let kernel = matmul_at(precision, bm, bn, bk);
            rutile_ir::lower::lower(&kernel, &target(warps, stages), &spec(kernel.params.len(), &[7, 9, 11]))
                .unwrap_or_else(|e| panic!("lowering {label}: {e}"))
        };
        let (t, single) = (lowered(DotPrecision::Tf32x3), lowered(DotPrecision::Tf32));
        for sm in SMS {
            let (ptx, spilled) = assemble(&label, &t, sm);
            let (single, _) = assemble(&label, &single, sm);
            let mmas = |p: &str| p.matches("mma.sync.aligned.m16n8k8").count();
            assert_eq!(mmas(&ptx), 3 * mmas(&single), "{label}");
            if let Some(s) = spilled.filter(|&s| s > 0) {
                spilling.push(format!("{label}, sm_{sm}: {s} bytes"));
            }
        }
    }
    assert!(spilling.is_empty(), "spills: {spilling:?}");
}

/// A target without the tensor cores' tf32 `mma` (sm_75) is told so; the lowering for it
/// keeps `dot` on the CUDA cores, whose PTX assembles.
#[test]
fn tf32_mma_needs_sm_80() {
    let kernel = tf32_matmul(64, 64, 32);
    let params = kernel.params.len();
    let t = rutile_ir::lower::lower(&kernel, &target(4, 1), &spec(params, &[7, 9, 11])).unwrap();
    let err = emit(&t, &PtxTarget::from_compute_capability(7, 5))
        .unwrap_err()
        .to_string();
    assert!(err.contains("sm_80"), "{err}");
    let off = Target {
        mma_sync: false,
        wgmma: false,
        ..target(4, 1)
    };
    let t = rutile_ir::lower::lower(&kernel, &off, &spec(params, &[7, 9, 11])).unwrap();
    for sm in SMS {
        let (ptx, _) = assemble("tf32 matmul on the CUDA cores", &t, sm);
        assert!(!ptx.contains("mma.sync") && !ptx.contains("cvt.rna.tf32"), "sm_{sm}");
        assert!(ptx.contains("fma.rn.f32"), "sm_{sm}");
    }
}
