//! The autotuner's cache file: a tab-separated line per kernel family, device and key
//! (see [`Entry`]), shared by every process that tunes.
//!
//! Several processes (and threads) may tune at once and add lines to one file, so a line
//! is never written in pieces and never lost:
//!
//! - A line is added by one `write` to the file opened for appending (`O_APPEND`): the
//!   system places each such write whole at the end of the file, after whatever others
//!   appended, without a read-modify-write that could drop their lines.
//! - Replacing a key's older lines means rewriting the file (to a file beside it, renamed
//!   over it, so that a reader sees the old file or the new one, never half of one). That
//!   would drop a line another process appends meanwhile, so it is done only under an
//!   exclusive lock on `FILE.lock`, which every writer takes first; where the lock cannot
//!   be had, the line is appended and the older ones stay (a reader takes a key's last
//!   line).
//! - A reader ignores a last line without its newline: one still being written, or left
//!   so by a writer that died.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One line of the cache file: name, device, key, configuration, time, and the
/// fingerprint of the list of configurations it was chosen from (tab-separated).
pub(super) struct Entry<'a> {
    pub name: &'a str,
    pub device: &'a str,
    pub key: &'a str,
    pub config: &'a str,
    pub time_ms: f64,
    pub configs: &'a str,
}

impl<'a> Entry<'a> {
    /// The entry a line holds; `None` for a line of another layout or a damaged one.
    pub fn parse(line: &'a str) -> Option<Entry<'a>> {
        let mut f = line.split('\t');
        let entry = Entry {
            name: f.next()?,
            device: f.next()?,
            key: f.next()?,
            config: f.next()?,
            time_ms: f.next()?.parse().ok()?,
            configs: f.next()?,
        };
        f.next().is_none().then_some(entry)
    }

    /// The entry as a line, without its newline. Tabs and line breaks inside a field are
    /// written as spaces, so that every entry is one line of six fields.
    pub fn line(&self) -> String {
        let field = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            field(self.name),
            field(self.device),
            field(self.key),
            field(self.config),
            self.time_ms,
            field(self.configs)
        )
    }

    /// Whether `line` is of the kernel family, device and key `(name, device, key)`, in
    /// this layout or another.
    pub fn is_of(line: &str, (name, device, key): (&str, &str, &str)) -> bool {
        let mut f = line.split('\t');
        (f.next(), f.next(), f.next()) == (Some(name), Some(device), Some(key))
    }
}

/// The complete lines of the file at `path` (see the module's documentation); `None` when
/// it cannot be read. Bytes that are not UTF-8 read as replacement characters, so that one
/// damaged line does not hide the others.
pub(super) fn read(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    Some(text[..complete].to_string())
}

/// Adds `line` (without its newline) to the file at `path`, creating it and its
/// directory where missing, and removes the older lines `superseded` picks out where the
/// lock can be had.
pub(super) fn store(path: &Path, line: &str, superseded: &dyn Fn(&str) -> bool) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let Some(_lock) = Lock::exclusive(&lock_path(path)) else {
        return append(path, line);
    };
    let old = read(path).unwrap_or_default();
    if !old.lines().any(superseded) {
        return append(path, line);
    }
    let mut text: String = old
        .lines()
        .filter(|l| !superseded(l))
        .map(|l| format!("{l}\n"))
        .collect();
    text.push_str(line);
    text.push('\n');
    replace(path, &text)
}

/// Appends `line` and its newline in one write (see the module's documentation).
fn append(path: &Path, line: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
    // A last line without its newline (its writer died) would swallow this one: end it
    // first.
    let text = if ends_inside_a_line(&mut file)? {
        format!("\n{line}\n")
    } else {
        format!("{line}\n")
    };
    // A regular file takes the whole buffer in one write unless the disk is full;
    // `write_all` only goes on after such a short write.
    file.write_all(text.as_bytes())
}

/// Whether the file is non-empty and its last byte is not a newline.
fn ends_inside_a_line(file: &mut File) -> io::Result<bool> {
    if file.metadata()?.len() == 0 {
        return Ok(false);
    }
    // Reading moves the position, not where an appending write goes.
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// Replaces the file at `path` with `text`: written beside it, then renamed over it.
fn replace(path: &Path, text: &str) -> io::Result<()> {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // A name of this process and call: threads of one process rewrite too.
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = sibling(path, &format!(".tmp{}-{n}", std::process::id()));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The lock file of the cache file at `path`: `FILE.lock` beside it. It is left in place:
/// removing it could let two writers lock different files of the same name.
fn lock_path(path: &Path) -> PathBuf {
    sibling(path, ".lock")
}

/// `path` with `suffix` added to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// An exclusive lock on a lock file, held while this lives (closing the file releases it,
/// also when the process dies).
struct Lock {
    _file: File,
}

impl Lock {
    /// How long a writer waits for another to finish before appending without the lock.
    /// Writers hold it for one read and one write; this long means one is stuck.
    const PATIENCE: Duration = Duration::from_secs(5);

    /// The lock on `path`, waiting for it; `None` where locks are not available (no
    /// `flock`, a file system without locks) or after [`Self::PATIENCE`].
    #[cfg(unix)]
    fn exclusive(path: &Path) -> Option<Lock> {
        use std::os::unix::io::AsRawFd;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ok()?;
        let start = std::time::Instant::now();
        loop {
            // SAFETY: `flock` on a descriptor `file` owns and keeps open.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Some(Lock { _file: file });
            }
            let error = io::Error::last_os_error();
            let busy = error.raw_os_error() == Some(libc::EWOULDBLOCK) || error.kind() == io::ErrorKind::Interrupted;
            if !busy || start.elapsed() > Self::PATIENCE {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[cfg(not(unix))]
    fn exclusive(_path: &Path) -> Option<Lock> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("rutile-cache-{name}-{}.tsv", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    #[test]
    fn a_line_without_its_newline_is_not_read_and_not_glued_to() {
        let path = temp("torn");
        std::fs::write(&path, "a\tb\nhalf a li").unwrap();
        assert_eq!(read(&path).unwrap(), "a\tb\n");
        store(&path, "c\td", &|_| false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\tb\nhalf a li\nc\td\n");
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(lock_path(&path));
    }

    #[test]
    fn superseded_lines_are_replaced_and_others_kept() {
        let path = temp("replace");
        for line in ["k\t1", "other", "k\t2"] {
            store(&path, line, &|l| l.starts_with("k\t")).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "other\nk\t2\n");
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(lock_path(&path));
    }

    #[test]
    fn fields_with_tabs_or_line_breaks_stay_one_line() {
        let entry = Entry {
            name: "a\tb",
            device: "gpu\n",
            key: "1,2",
            config: "X=1, num_warps=4, num_stages=3",
            time_ms: 0.5,
            configs: "configs:00",
        };
        let line = entry.line();
        let parsed = Entry::parse(&line).unwrap();
        assert_eq!((parsed.name, parsed.device, parsed.time_ms), ("a b", "gpu ", 0.5));
    }
}
