//! The registers warp-specialized kernels move between their warpgroups (`setmaxnreg`):
//! the producer's `setmaxnreg.dec` and the consumers' `setmaxnreg.inc` must fit the
//! registers the thread block holds at entry, since `.inc` takes them from the block's own
//! pool and waits until it has them (a budget past the pool hangs the block on the GPU).

mod support;

use rutile_ir::seeds::{self, AttentionMeta, MatmulMeta};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::{row_major_matmul_args, runtime_spec};
use rutile_ir::thread::ThreadKernel;
use rutile_ptx::{emit, PtxError, PtxTarget};

fn hopper(num_warps: u32, num_stages: u32) -> Target {
    Target {
        mma_sync: true,
        wgmma: true,
        tma: true,
        async_copy: true,
        warp_specialize: true,
        num_stages,
        ..Target::nvidia(num_warps, 227 * 1024)
    }
}

/// The head-64 attention kernel of `programs` 64-row programs a block sharing a producer.
fn attention(programs: u32) -> ThreadKernel {
    let meta = AttentionMeta {
        rotate: true,
        whole_key_blocks: true,
        ..AttentionMeta::fp16(64, 128, 64, false)
    };
    let kernel = seeds::attention_forward(&meta).unwrap();
    let unit = ["stride_qk", "stride_kk", "stride_vn", "stride_on"];
    let spec = Specialization {
        equal_to_1: kernel.params.iter().map(|p| unit.contains(&p.name.as_str())).collect(),
        ..Specialization::all(kernel.params.len())
    };
    let target = Target {
        tma_outer: true,
        programs_per_block: programs,
        ..hopper(4, 2)
    };
    rutile_ir::lower::lower(&kernel, &target, &spec).unwrap()
}

/// The matmul of `block_m x block_n x 64` tiles on `num_warps` consumer warps.
fn matmul(block_m: u32, block_n: u32, num_warps: u32) -> ThreadKernel {
    let kernel = seeds::matmul(&MatmulMeta::fp16(block_m, block_n, 64)).unwrap();
    let args = row_major_matmul_args(4096, 4096, 4096);
    rutile_ir::lower::lower(&kernel, &hopper(num_warps, 3), &runtime_spec(&args)).unwrap()
}

/// Each warpgroup's `setmaxnreg` count in `ptx`: (producer's, consumers').
fn budgets(ptx: &str) -> (u32, u32) {
    let count = |how: &str| -> u32 {
        let at = ptx.find(&format!("setmaxnreg.{how}.sync.aligned.u32 ")).expect(how);
        let rest = &ptx[at..];
        rest[rest.find("u32 ").unwrap() + 4..rest.find(';').unwrap()]
            .parse()
            .unwrap()
    };
    (count("dec"), count("inc"))
}

/// Warp-specialized kernels of several shapes (two to four programs a block, matmul
/// consumers of one, two and four warpgroups): the budgets fit the registers `ptxas` gives
/// each thread at entry, where it honours `setmaxnreg` (it ignores it where it cannot tell
/// them, with a note). Four programs a block (640 threads at 96 registers) asked for 120
/// registers a consumer where 112 fit. (From five programs a block, 80 registers a thread
/// or fewer, `ptxas` refuses the attention kernel: its MMAs need more.)
#[test]
fn setmaxnreg_budgets_fit_the_block() {
    let kernels = (2..=4).map(|p| (format!("{p} programs a block"), attention(p))).chain([
        ("matmul, 4 warps".to_string(), matmul(64, 128, 4)),
        ("matmul, 8 warps".to_string(), matmul(128, 256, 8)),
        ("matmul, 16 warps".to_string(), matmul(256, 128, 16)),
    ]);
    for (label, k) in kernels {
        let ptx = emit(&k, &PtxTarget::from_compute_capability(9, 0)).unwrap();
        let (producer, consumer) = budgets(&ptx);
        let threads = k.threads();
        let producer_threads = k.producer_warps * 32;
        let needed = producer * producer_threads + consumer * (threads - producer_threads);
        println!("{label}: {threads} threads, producer {producer}, consumers {consumer}");
        assert!(consumer <= 256 && consumer % 8 == 0 && producer % 8 == 0, "{label}");
        // The register file, whatever `ptxas` does.
        assert!(needed <= 64 * 1024, "{label}: {needed} registers");
        let Some(report) = support::ptxas_report(&ptx, 90) else {
            continue;
        };
        if report.contains("'setmaxnreg' ignored") {
            continue;
        }
        let (entry, _) = support::ptxas_resources(&ptx, 90).unwrap();
        assert!(
            needed <= entry * threads,
            "{label}: the warpgroups ask for {needed} registers, the block holds {} ({threads} threads at {entry})",
            entry * threads
        );
        assert!(
            producer <= entry && consumer >= entry,
            "{label}: dec to {producer}, inc to {consumer}, entry {entry}"
        );
    }
}

/// A register limit (`maxnreg`) on a warp-specialized kernel is refused with the reason:
/// under it the consumers would wait for registers the block does not have.
#[test]
fn maxnreg_is_refused_with_warp_specialization() {
    let k = matmul(128, 256, 8);
    let err = emit(&k, &PtxTarget::from_compute_capability(9, 0).max_registers(Some(128))).unwrap_err();
    assert!(matches!(err, PtxError::Target { .. }), "{err}");
    assert!(
        err.to_string().contains("maxnreg = 128 with a warp-specialized kernel"),
        "{err}"
    );
}
