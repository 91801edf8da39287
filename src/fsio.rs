//! File input and output that cannot lose data or exhaust memory: every write
//! is atomic (a temporary file in the same folder, fsync, rename, fsync of
//! the folder), every read is capped at a size the caller names.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically: a reader (or a later run after a
/// crash or SIGKILL at any point) sees either the old file or the whole new
/// one, never a partial one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| format!("{}: not a file path", path.display()))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    // Hidden and without the final extension, so that no reader of the
    // folder (the corpus loader) mistakes it for an entry.
    let tmp = dir.join(format!(".{}.tmp-{}-{nanos}", name.to_string_lossy(), std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        // The rename itself is durable once the folder is synced.
        File::open(&dir)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    Ok(())
}

/// Reads the regular file at `path` (following links), refusing anything
/// larger than `cap` bytes before reading it whole: a declared size bounds
/// the memory (`/dev/zero` and a 1 GB artifact are refused, not read).
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let meta = fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.is_dir() {
        return Err(format!("{} is a folder, not a file", path.display()));
    }
    let f = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    // Special files (a pipe, /dev/zero) report no useful length: the cap is
    // enforced on what is actually read.
    let mut buf = Vec::new();
    f.take(cap + 1).read_to_end(&mut buf).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if buf.len() as u64 > cap {
        return Err(format!("{} is larger than the {cap}-byte limit", path.display()));
    }
    Ok(buf)
}

/// Whether `path` names something that exists and is neither a regular file
/// nor a folder (following links): a character device (`/dev/stdout`,
/// `/dev/full`), a FIFO, a socket. Such a target is written into, never
/// replaced.
fn is_special(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Writes a report (`--json`, `--markdown`) to `path`: atomically when it is
/// (or will be) a regular file, through its link when it is a link (the link
/// stays a link), and straight into it when it is a device or a FIFO
/// (`/dev/stdout`, a pipe), which is never replaced by a regular file. A
/// write that fails (`/dev/full`) is an error.
pub fn write_report(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if is_special(path) {
        let mut f =
            OpenOptions::new().write(true).open(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        return f
            .write_all(bytes)
            .and_then(|()| f.flush())
            .map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.is_symlink() => resolve_link(path)?,
        _ => path.to_path_buf(),
    };
    write_atomic(&target, bytes)
}

/// The path a link leads to, followed to its end (dangling: the final name it
/// names, which the write then creates).
fn resolve_link(path: &Path) -> Result<PathBuf, String> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_symlink() => {
                let next = fs::read_link(&p).map_err(|e| format!("cannot read the link {}: {e}", p.display()))?;
                p = match p.parent() {
                    Some(dir) if next.is_relative() => dir.join(next),
                    _ => next,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(format!("{}: too many levels of links", path.display()))
}

/// Whether `path` (following links) is something other than a regular file
/// or a folder: a FIFO, a device, a socket. Opening such a file can block
/// for ever (a FIFO without a writer) or never end (`/dev/zero`), so a
/// folder's listing reports it instead of reading it.
pub fn not_regular(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = fs::metadata(path).ok()?.file_type();
    if t.is_fifo() {
        Some("a FIFO (named pipe), not a regular file: not read")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device, not a regular file: not read")
    } else if t.is_socket() {
        Some("a socket, not a regular file: not read")
    } else {
        None
    }
}

/// Checks, before a long run, that a file can be written at `path` later:
/// its folder exists and accepts a new file. A path of `-` (stdout) passes,
/// and so does a device or FIFO that exists (written into, not replaced).
pub fn check_writable(path: &Path) -> Result<(), String> {
    if path == Path::new("-") {
        return Ok(());
    }
    if path.is_dir() {
        return Err(format!("{} is a folder, not a file", path.display()));
    }
    if is_special(path) {
        return Ok(());
    }
    let resolved = match fs::symlink_metadata(path) {
        Ok(m) if m.is_symlink() => resolve_link(path)?,
        _ => path.to_path_buf(),
    };
    let path = resolved.as_path();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(format!("cannot write {}: the folder {} does not exist", path.display(), dir.display()));
    }
    let probe = dir.join(format!(".bitparity-write-probe-{}", std::process::id()));
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot write in {}: {e}", dir.display())),
    }
}

/// Checks, before a run, that a corpus can be saved under `dir` later: it is
/// a folder that accepts a new file, or it does not exist yet and its
/// nearest existing ancestor is such a folder (`--corpus /dev/null`, a file,
/// or a read-only folder are refused before any case, not at the first
/// failure).
pub fn check_folder_writable(dir: &Path) -> Result<(), String> {
    let mut d = dir.to_path_buf();
    loop {
        match fs::metadata(&d) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(format!("cannot save into {}: {} is not a folder", dir.display(), d.display())),
            Err(_) => match d.parent() {
                Some(p) if !p.as_os_str().is_empty() => d = p.to_path_buf(),
                _ => {
                    d = PathBuf::from(".");
                    break;
                }
            },
        }
    }
    let probe = d.join(format!(".bitparity-write-probe-{}", std::process::id()));
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot save into {}: cannot write in {}: {e}", dir.display(), d.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bitparity-fsio-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn atomic_write_replaces_whole_files_and_leaves_no_temporaries() {
        let d = tmp("atomic");
        let p = d.join("x.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second, longer").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"second, longer");
        let names: Vec<_> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("x.json")]);
        assert!(write_atomic(&d.join("no-such-dir").join("y.json"), b"z").is_err());
        fs::remove_dir_all(d).ok();
    }

    #[test]
    fn capped_reads_refuse_large_files_folders_and_endless_devices() {
        let d = tmp("cap");
        let p = d.join("big");
        fs::write(&p, vec![b'a'; 100]).unwrap();
        assert_eq!(read_capped(&p, 100).unwrap().len(), 100);
        assert!(read_capped(&p, 99).unwrap_err().contains("limit"));
        assert!(read_capped(&d, 10).unwrap_err().contains("folder"));
        assert!(read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err().contains("limit"));
        assert!(read_capped(&d.join("missing"), 10).is_err());
        fs::remove_dir_all(d).ok();
    }

    #[test]
    fn writability_is_checked_before_a_run() {
        let d = tmp("writable");
        assert!(check_writable(&d.join("out.json")).is_ok());
        assert!(check_writable(&d.join("missing").join("out.json")).unwrap_err().contains("does not exist"));
        assert!(check_writable(&d).unwrap_err().contains("folder"));
        assert!(check_writable(Path::new("-")).is_ok());
        fs::remove_dir_all(d).ok();
    }
}
