//! `RUTILE_DUMP=DIR`: every compilation writes the kernel's block IR, per-thread IR and
//! generated code (PTX, SPIR-V disassembly, WGSL) to `DIR/<kernel>.<n>.<stage>`, and what
//! the driver says of the kernel (`driver.txt`): through CUDA its compiler's log (registers,
//! spills, notes), through Vulkan the statistics of drivers that report them.

use std::sync::atomic::{AtomicU32, Ordering};

/// The kernel's name as a file-name stem: any character other than ASCII letters, digits,
/// `_` and `-` becomes `_`, so that a name with `/` or `..` cannot write outside the dump
/// folder (kernel names are free text).
fn file_stem(kernel: &str) -> String {
    let stem: String = kernel
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() {
        "kernel".into()
    } else {
        stem
    }
}

/// Writes the stages of one compilation if `RUTILE_DUMP` is set; each text is made only
/// then, so that compiling without dumps does not print kernels. Failures to write are
/// reported on stderr, never fatal: dumping is a debugging aid. Returns the compilation's
/// number `n` when dumping, for [`write_spirv`].
pub(crate) fn write(kernel: &str, stages: &[(&str, &dyn Fn() -> String)]) -> Option<u32> {
    let dir = std::env::var_os("RUTILE_DUMP")?;
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::path::PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("rutile: cannot create dump folder {}: {e}", dir.display());
        return Some(n);
    }
    let stem = file_stem(kernel);
    for (stage, text) in stages {
        let path = dir.join(format!("{stem}.{n}.{stage}"));
        if let Err(e) = std::fs::write(&path, text()) {
            eprintln!("rutile: cannot write {}: {e}", path.display());
        }
    }
    Some(n)
}

/// Where compilation `n` of `kernel` (being dumped: [`write`] returned `n`) keeps its
/// `stage`: `DIR/<kernel>.<n>.<stage>`; `None` when not dumping.
pub(crate) fn path(kernel: &str, n: Option<u32>, stage: &str) -> Option<std::path::PathBuf> {
    let (dir, n) = (std::env::var_os("RUTILE_DUMP")?, n?);
    Some(std::path::PathBuf::from(dir).join(format!("{}.{n}.{stage}", file_stem(kernel))))
}

/// Writes the SPIR-V words that `words` makes as `<kernel>.<n>.spv`, and their disassembly
/// as `.spvasm` when `spirv-dis` (or `RUTILE_SPIRV_DIS`) is available, when compilation `n`
/// is being dumped ([`write`] returned it).
pub(crate) fn write_spirv<E: std::fmt::Display>(
    kernel: &str,
    n: Option<u32>,
    words: impl FnOnce() -> Result<Vec<u32>, E>,
) {
    let (Some(dir), Some(n)) = (std::env::var_os("RUTILE_DUMP"), n) else {
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
    let stem = file_stem(kernel);
    let path = dir.join(format!("{stem}.{n}.spv"));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    if let Err(e) = std::fs::write(&path, bytes) {
        eprintln!("rutile: cannot write {}: {e}", path.display());
        return;
    }
    let dis = std::env::var("RUTILE_SPIRV_DIS").unwrap_or_else(|_| "spirv-dis".into());
    if let Ok(out) = std::process::Command::new(dis).arg(&path).output() {
        if out.status.success() {
            let _ = std::fs::write(dir.join(format!("{stem}.{n}.spvasm")), out.stdout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::file_stem;

    #[test]
    fn kernel_names_stay_inside_the_dump_folder() {
        assert_eq!(file_stem("softmax_kernel"), "softmax_kernel");
        assert_eq!(file_stem("../../etc/passwd"), "______etc_passwd");
        assert_eq!(file_stem("a/b\\c d"), "a_b_c_d");
        assert_eq!(file_stem(""), "kernel");
    }
}
