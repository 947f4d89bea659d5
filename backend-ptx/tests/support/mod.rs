//! Shared test helpers: the kernel shape the tests build and the `ptxas` check.
#![allow(dead_code)]

use rutile_ir::thread::{ThreadKernel, ThreadKernelBuilder};
use rutile_ptx::PtxTarget;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A builder of a kernel of 4 warps of 32 threads, the shape the tests here use.
pub fn kernel(name: &str) -> ThreadKernelBuilder {
    ThreadKernelBuilder::new(name, 4, 32)
}

/// `ptxas`, from `RUTILE_PTXAS`; `None` (with a note) when unset, unless
/// `RUTILE_REQUIRE_TOOLS=1`, which makes a missing tool a failure.
pub fn ptxas() -> Option<PathBuf> {
    match std::env::var_os("RUTILE_PTXAS") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            if std::env::var("RUTILE_REQUIRE_TOOLS").as_deref() == Ok("1") {
                panic!("RUTILE_REQUIRE_TOOLS=1 but RUTILE_PTXAS is not set");
            }
            eprintln!("note: RUTILE_PTXAS is not set; skipping the ptxas check");
            None
        }
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Assembles `ptx` with `ptxas` for `sm_{sm}` and fails with ptxas's messages (and the
/// numbered PTX) when it does not assemble. Skips when ptxas is not available.
pub fn ptxas_check(ptx: &str, sm: u32) {
    let Some(ptxas) = ptxas() else { return };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("rutile-ptx-test-{}-{n}.ptx", std::process::id()));
    std::fs::write(&path, ptx).expect("write the PTX file");
    let out = Command::new(&ptxas)
        .arg(format!("-arch=sm_{sm}"))
        .arg(&path)
        .arg("-o")
        .arg("/dev/null")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
    let _ = std::fs::remove_file(&path);
    if !out.status.success() {
        let numbered: String = ptx
            .lines()
            .enumerate()
            .map(|(i, l)| format!("{:4} {l}\n", i + 1))
            .collect();
        panic!(
            "ptxas -arch=sm_{sm} failed:\n{}{}\n--- PTX ---\n{numbered}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The PTX of `k` for `sm`, checked with ptxas.
pub fn emit_checked(k: &ThreadKernel, sm: u32) -> String {
    let target = PtxTarget::from_compute_capability(sm / 10, sm % 10);
    let ptx = rutile_ptx::emit(k, &target).unwrap_or_else(|e| panic!("emit for sm_{sm} failed: {e}"));
    ptxas_check(&ptx, sm);
    ptx
}

/// The PTX of `k` for sm_80 and sm_90 (both checked with ptxas); returns the sm_80 text.
pub fn emit_80_90(k: &ThreadKernel) -> String {
    emit_checked(k, 90);
    emit_checked(k, 80)
}

/// Asserts that `ptx` contains each of `needles`.
pub fn assert_contains(ptx: &str, needles: &[&str]) {
    for n in needles {
        assert!(ptx.contains(n), "expected `{n}` in the PTX:\n{ptx}");
    }
}
