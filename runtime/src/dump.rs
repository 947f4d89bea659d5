//! `RUTILE_DUMP=DIR`: every compilation writes the kernel's block IR, per-thread IR and
//! generated code (PTX, SPIR-V disassembly, WGSL) to `DIR/<kernel>.<n>.<stage>`.

use std::sync::atomic::{AtomicU32, Ordering};

/// Writes the stages of one compilation if `RUTILE_DUMP` is set; each text is made only
/// then, so that compiling without dumps does not print kernels. Failures to write are
/// reported on stderr, never fatal: dumping is a debugging aid.
pub(crate) fn write(kernel: &str, stages: &[(&str, &dyn Fn() -> String)]) {
    let Some(dir) = std::env::var_os("RUTILE_DUMP") else {
        return;
    };
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::path::PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("rutile: cannot create dump folder {}: {e}", dir.display());
        return;
    }
    for (stage, text) in stages {
        let path = dir.join(format!("{kernel}.{n}.{stage}"));
        if let Err(e) = std::fs::write(&path, text()) {
            eprintln!("rutile: cannot write {}: {e}", path.display());
        }
    }
}

/// Writes the SPIR-V words that `words` makes as a `.spv` file, and their disassembly as
/// `.spvasm` when `spirv-dis` (or `RUTILE_SPIRV_DIS`) is available, if `RUTILE_DUMP` is
/// set.
pub(crate) fn write_spirv<E: std::fmt::Display>(kernel: &str, words: impl FnOnce() -> Result<Vec<u32>, E>) {
    let Some(dir) = std::env::var_os("RUTILE_DUMP") else {
        return;
    };
    let words = match words() {
        Ok(words) => words,
        Err(e) => {
            eprintln!("rutile: cannot dump the SPIR-V of `{kernel}`: {e}");
            return;
        }
    };
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{kernel}.spv"));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    if let Err(e) = std::fs::write(&path, bytes) {
        eprintln!("rutile: cannot write {}: {e}", path.display());
        return;
    }
    let dis = std::env::var("RUTILE_SPIRV_DIS").unwrap_or_else(|_| "spirv-dis".into());
    if let Ok(out) = std::process::Command::new(dis).arg(&path).output() {
        if out.status.success() {
            let _ = std::fs::write(dir.join(format!("{kernel}.spvasm")), out.stdout);
        }
    }
}
