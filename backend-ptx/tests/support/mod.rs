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
    assemble(ptx, sm, false);
}

/// What `ptxas -v` reports for the one kernel of `ptx` on `sm_{sm}`: registers per thread
/// and spilled bytes (stores plus loads). `None` when ptxas is not available.
pub fn ptxas_resources(ptx: &str, sm: u32) -> Option<(u32, u32)> {
    let report = assemble(ptx, sm, true)?;
    // The first `N marker` of the report (ptxas's notes, such as why it serialized wgmmas,
    // may use the same words without a number).
    let number_before = |marker: &str| -> Option<u32> {
        report
            .match_indices(marker)
            .find_map(|(at, _)| report[..at].split_whitespace().last()?.parse().ok())
    };
    let registers = number_before(" registers").expect("ptxas -v reports registers");
    let spills = number_before(" bytes spill stores").unwrap_or(0) + number_before(" bytes spill loads").unwrap_or(0);
    Some((registers, spills))
}

/// What `ptxas -v` prints for `ptx` on `sm_{sm}` (registers, spills and notes); `None` when
/// ptxas is not available.
pub fn ptxas_report(ptx: &str, sm: u32) -> Option<String> {
    assemble(ptx, sm, true)
}

/// Runs ptxas (with `-v` when `verbose`) and returns what it printed; fails the test when
/// the PTX does not assemble.
fn assemble(ptx: &str, sm: u32, verbose: bool) -> Option<String> {
    let ptxas = ptxas()?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("rutile-ptx-test-{}-{n}.ptx", std::process::id()));
    std::fs::write(&path, ptx).expect("write the PTX file");
    let mut cmd = Command::new(&ptxas);
    if verbose {
        cmd.arg("-v");
    }
    // Architecture-specific PTX (sm_90a: `wgmma`) assembles only for that architecture.
    let suffix = if ptx.contains(&format!(".target sm_{sm}a")) {
        "a"
    } else {
        ""
    };
    let out = cmd
        .arg(format!("-arch=sm_{sm}{suffix}"))
        .arg(&path)
        .arg("-o")
        .arg("/dev/null")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
    let _ = std::fs::remove_file(&path);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let numbered: String = ptx
            .lines()
            .enumerate()
            .map(|(i, l)| format!("{:4} {l}\n", i + 1))
            .collect();
        panic!("ptxas -arch=sm_{sm} failed:\n{printed}\n--- PTX ---\n{numbered}");
    }
    Some(printed)
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
