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

/// Refuses a symbolic link at `path`: a file bitparity creates or replaces
/// is never reached through a link, which could lead anywhere (a link
/// committed in a pull request, named like the report CI writes, would have
/// the report overwrite its target).
pub fn refuse_link(path: &Path) -> Result<(), String> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_symlink() => Err(format!(
            "{} is a symbolic link: bitparity writes no file through a link (name the file itself, or - for \
             stdout)",
            crate::escape::path(path)
        )),
        _ => Ok(()),
    }
}

/// Whether `path` itself (not following a link) is a FIFO or a device:
/// written into, never replaced.
fn is_special(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir() && !m.is_symlink())
}

/// How long a report waits for a reader at a FIFO before it gives up.
const FIFO_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens the FIFO or device `path` for writing without blocking on it: a
/// FIFO with no reader is waited for at most [`FIFO_WAIT`], then refused
/// (a run must not hang after its cases, deaf to SIGTERM, on a pipe nobody
/// reads).
fn open_special(path: &Path) -> Result<File, String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let start = std::time::Instant::now();
    loop {
        match OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW).open(path) {
            Ok(f) => {
                // Blocking writes from here on: a reader is there.
                // SAFETY: fcntl on a descriptor `f` owns.
                unsafe {
                    let flags = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
                }
                return Ok(f);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && start.elapsed() < FIFO_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return Err(format!(
                    "cannot write {}: a FIFO nobody reads ({} s waited)",
                    crate::escape::path(path),
                    FIFO_WAIT.as_secs()
                ))
            }
            Err(e) => return Err(format!("cannot write {}: {e}", crate::escape::path(path))),
        }
    }
}

/// Writes a report (`--json`, `--markdown`, `--html`) to `path`: atomically
/// when it is (or will be) a regular file, and straight into it when it is
/// a device or a FIFO (a pipe), which is never replaced by a regular file.
/// A symbolic link is refused ([`refuse_link`]); a write that fails
/// (`/dev/full`) is an error.
pub fn write_report(path: &Path, bytes: &[u8]) -> Result<(), String> {
    refuse_link(path)?;
    if is_special(path) {
        let mut f = open_special(path)?;
        return f
            .write_all(bytes)
            .and_then(|()| f.flush())
            .map_err(|e| format!("cannot write {}: {e}", crate::escape::path(path)));
    }
    write_atomic(path, bytes)
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
/// its folder exists and accepts a new file, and nothing at `path` would
/// make the write go elsewhere or fail (a link, a folder, a name ending in
/// `/`). A path of `-` (stdout) passes, and so does a FIFO or device that
/// exists (written into, not replaced).
pub fn check_writable(path: &Path) -> Result<(), String> {
    if path == Path::new("-") {
        return Ok(());
    }
    let shown = crate::escape::path(path);
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") || path.is_dir() {
        return Err(format!("{shown} is a folder, not a file"));
    }
    refuse_link(path)?;
    if is_special(path) {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(format!("cannot write {shown}: the folder {} does not exist", crate::escape::path(&dir)));
    }
    probe(&dir).map_err(|e| format!("cannot write in {}: {e}", crate::escape::path(&dir)))
}

/// Creates and removes a hidden file in `dir`: whether it accepts one.
fn probe(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".bitparity-write-probe-{}", std::process::id()));
    OpenOptions::new().write(true).create_new(true).open(&probe)?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// Checks, before a run, that a corpus can be saved under `dir` later: it
/// is a folder that accepts a new file, or it does not exist yet and its
/// nearest existing ancestor is such a folder (`--corpus /dev/null`, a file,
/// a read-only folder, a link are refused before any case, not at the first
/// failure), and no op's folder in it is a link.
pub fn check_folder_writable(dir: &Path, ops: &[&str]) -> Result<(), String> {
    let shown = crate::escape::path(dir);
    crate::corpus::check_no_links(dir, ops)?;
    let mut d = dir.to_path_buf();
    loop {
        match fs::metadata(&d) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(format!("cannot save into {shown}: {} is not a folder", crate::escape::path(&d))),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(format!("cannot save into {shown}: a loop of symbolic links"))
            }
            Err(_) => match d.parent() {
                Some(p) if !p.as_os_str().is_empty() => d = p.to_path_buf(),
                _ => {
                    d = PathBuf::from(".");
                    break;
                }
            },
        }
    }
    probe(&d).map_err(|e| format!("cannot save into {shown}: cannot write in {}: {e}", crate::escape::path(&d)))
}

/// A new folder of this process's own under the system's temporary folder
/// (`mkdtemp`: a fresh name, mode 0700, never one that exists, so never a
/// link someone left there): `<tmp>/<prefix>-XXXXXX`.
pub fn private_temp_dir(prefix: &str) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    let template = std::env::temp_dir().join(format!("{prefix}-XXXXXX"));
    let mut bytes = template.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    // SAFETY: `bytes` is a writable NUL-terminated template, as mkdtemp
    // requires; it rewrites the Xs in place.
    let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if made.is_null() {
        return Err(format!("cannot create a folder {}: {}", template.display(), std::io::Error::last_os_error()));
    }
    bytes.pop();
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

/// Reads the file `path` inside a corpus whole, without following a
/// symbolic link at it (refused, whatever it points to) and without
/// blocking on a FIFO (refused: not a regular file), refusing anything past
/// `cap` bytes before reading it.
pub fn read_capped_nofollow(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).map_err(
        |e| match e.raw_os_error() {
            Some(libc::ELOOP) => format!("{} is a symbolic link: not followed", crate::escape::path(path)),
            _ => format!("cannot read {}: {e}", crate::escape::path(path)),
        },
    )?;
    let meta = f.metadata().map_err(|e| format!("cannot read {}: {e}", crate::escape::path(path)))?;
    if meta.is_dir() {
        return Err(format!("{} is a folder, not a file", crate::escape::path(path)));
    }
    if !meta.is_file() {
        return Err(format!("{} is not a regular file: not read", crate::escape::path(path)));
    }
    if meta.len() > cap {
        return Err(format!("{} is larger than the {cap}-byte limit", crate::escape::path(path)));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(cap + 1).read_to_end(&mut buf).map_err(|e| format!("cannot read {}: {e}", crate::escape::path(path)))?;
    if buf.len() as u64 > cap {
        return Err(format!("{} is larger than the {cap}-byte limit", crate::escape::path(path)));
    }
    Ok(buf)
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
