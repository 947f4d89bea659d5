//! The matmul seed on f32 inputs at IEEE precision, whose `dot` runs on the CUDA cores
//! (`lower/dot.rs`): its PTX passes `ptxas` for sm_90 at the matmul tutorial's tile shapes
//! (spilling only where listed), and its K loop reads each operand value once, in vectors: a
//! few loads for many multiply-adds (`cargo test -p rutile-ptx --test fma_dot --
//! --nocapture` prints the registers).

mod support;

use rutile_ir::seeds::{self, MatmulMeta};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::{DotPrecision, ScalarType};
use rutile_ptx::{emit, PtxTarget};

/// The PTX of the matmul seed's f32 IEEE kernel with `bm x bn x bk` blocks on `warps` warps
/// and `stages` pipeline stages, for sm_90, row-major operands.
fn ieee_matmul_ptx(bm: u32, bn: u32, bk: u32, warps: u32, stages: u32) -> String {
    let kernel = seeds::matmul(&MatmulMeta {
        input: ScalarType::F32,
        output: ScalarType::F32,
        input_precision: DotPrecision::Ieee,
        ..MatmulMeta::fp16(bm, bn, bk)
    })
    .unwrap();
    let target = Target {
        mma_sync: true,
        async_copy: stages > 1,
        num_stages: stages,
        ..Target::nvidia(warps, 227 * 1024)
    };
    // (`stride_ak`, `stride_bn`, `stride_cn` equal to 1: row-major.)
    let params = kernel.params.len();
    let spec = Specialization {
        equal_to_1: (0..params).map(|i| [7, 9, 11].contains(&i)).collect(),
        ..Specialization::all(params)
    };
    let t = rutile_ir::lower::lower(&kernel, &target, &spec).unwrap();
    emit(&t, &PtxTarget::from_compute_capability(9, 0)).unwrap()
}

#[test]
fn ieee_matmul_reads_vectors_and_passes_ptxas() {
    // (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, bytes ptxas may spill): the matmul
    // tutorial's configurations. With 128 accumulators a thread and 4 steps of A's rows in
    // registers, two of them spill about 1 KB at 255 registers (the autotuner times them
    // like the rest; on an H200 it chose 256 x 128 x 64, which does not spill).
    let configs = [
        (128, 256, 64, 8, 3, 1024),
        (256, 128, 64, 8, 3, 0),
        (128, 256, 32, 8, 3, 0),
        (64, 256, 32, 4, 4, 896),
        (128, 128, 32, 4, 4, 0),
        (128, 64, 32, 4, 4, 0),
        (64, 128, 32, 4, 4, 0),
        (128, 32, 32, 4, 4, 0),
        (64, 32, 32, 4, 5, 0),
        (32, 64, 32, 2, 5, 32),
    ];
    for (bm, bn, bk, warps, stages, may_spill) in configs {
        let label = format!("{bm}x{bn}x{bk}, {warps} warps, {stages} stages");
        let ptx = ieee_matmul_ptx(bm, bn, bk, warps, stages);
        // Each turn of the K loop takes 4 steps: it reads each row of A the thread holds
        // once, as a vector of the 4 steps (the same address for a warp's lanes), and each
        // step each run of 4 columns of B once, as a vector: 128 x 256 on 8 warps, 16 rows
        // and 8 runs for 512 multiply-adds a turn. (Reading both operands for each
        // multiply-add, as before, took two scalar loads each.)
        let fmas = ptx.matches("fma.rn.f32").count();
        let vector_loads = ptx.matches("ld.shared.v4.f32").count();
        let loads = ptx.matches("ld.shared.").count();
        let per_thread = bm * bn / (32 * warps);
        assert_eq!(fmas as u32, 4 * per_thread, "{label}: multiply-adds in the loop's body");
        assert!(!ptx.contains("ld.shared.f32"), "{label}: scalar shared loads");
        assert!(
            vector_loads * 3 <= fmas,
            "{label}: {vector_loads} shared loads for {fmas} multiply-adds"
        );
        assert_eq!(loads, vector_loads, "{label}: shared loads of other widths");
        if let Some((registers, spilled)) = support::ptxas_resources(&ptx, 90) {
            println!("{label}: {registers} registers, {spilled} bytes spilled");
            assert!(spilled <= may_spill, "{label}: {spilled} bytes spilled");
        }
    }
}
