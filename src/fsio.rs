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

/// Checks, before a long run, that a file can be written at `path` later:
/// its folder exists and accepts a new file. A path of `-` (stdout) passes.
pub fn check_writable(path: &Path) -> Result<(), String> {
    if path == Path::new("-") {
        return Ok(());
    }
    if path.is_dir() {
        return Err(format!("{} is a folder, not a file", path.display()));
    }
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
