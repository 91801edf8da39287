//! What the modules driving the built binaries share: the binary, temporary
//! folders, a run's output, JSON files, the corpus's entries, the processes
//! alive.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test: this build's, or the one `BITPARITY_TEST_BIN`
/// names (an older build, to watch the hostile and reliability tests fail
/// on the code before their fixes: `BITPARITY_TEST_BIN=/path/to/old/bitparity
/// cargo test --test it -- hostile:: reliability::`).
pub fn bin() -> String {
    std::env::var("BITPARITY_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_bitparity").to_string())
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The generator's size limit of [`bitparity`]: small, fast cases.
pub const MAX_TE: &str = "64";

/// [`bin`] with a clean environment of knobs (none inherited from the
/// caller), small generated cases and no stdin.
pub fn bitparity() -> Command {
    let mut c = Command::new(bin());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("BITPARITY_") {
            c.env_remove(k);
        }
    }
    c.env("BITPARITY_MAX_TE", MAX_TE);
    c.stdin(Stdio::null());
    c
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub seconds: f64,
    /// stdout then stderr, as written (escapes and all).
    pub raw: Vec<u8>,
}

impl Run {
    pub fn all(&self) -> String {
        format!(
            "exit {:?} after {:.1} s\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.seconds, self.stdout, self.stderr
        )
    }

    /// The run of a finished process that started at `start`; `code` is
    /// None where it was killed by a signal.
    pub fn of(out: Output, start: Instant) -> Run {
        let mut raw = out.stdout.clone();
        raw.extend(&out.stderr);
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            seconds: start.elapsed().as_secs_f64(),
            raw,
        }
    }
}

/// The most a probed run may take: an old binary that hangs on a probe
/// fails it instead of stalling the suite.
const LIMIT: Duration = Duration::from_secs(150);

/// Runs `c` in a process group of its own, killed (the group) after
/// [`LIMIT`].
pub fn run(c: &mut Command) -> Run {
    let start = Instant::now();
    c.stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = c.spawn().expect("the binary runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut b);
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut b);
        b
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > LIMIT {
            // SAFETY: a signal to the process group of the child spawned above.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (reader.join().unwrap_or_default(), err_reader.join().unwrap_or_default());
    let out =
        Output { status: status.unwrap_or_else(|| std::os::unix::process::ExitStatusExt::from_raw(9)), stdout, stderr };
    let mut r = Run::of(out, start);
    if status.is_none() {
        r.stderr += "\n(killed: still running after the test's limit)";
    }
    r
}

/// stdout and stderr of `o`, one after the other.
pub fn text(o: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The module's file name: tests of one name in two modules never share a
/// temporary file or folder.
#[track_caller]
fn caller() -> String {
    let file = Path::new(std::panic::Location::caller().file());
    file.file_stem().unwrap().to_string_lossy().into_owned()
}

/// A fresh, empty temporary folder of this process, named after the calling
/// module and `name`.
#[track_caller]
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bitparity-{}-{}-{name}", caller(), std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A temporary `.json` path of this process, named after the calling module
/// and `name` (nothing is created).
#[track_caller]
pub fn tmp_json(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bitparity-{}-{}-{name}.json", caller(), std::process::id()))
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the JSON file")).expect("valid JSON")
}

/// `v`, pretty, at `p` (its folders created).
pub fn write_json(p: &Path, v: &serde_json::Value) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap() + "\n").unwrap();
}

/// A real corpus entry of the repository (a planted bug's shrunk failure),
/// `regressions/seqwise_loss/<name>`.
pub fn real_entry(name: &str) -> serde_json::Value {
    read_json(&repo().join("regressions/seqwise_loss").join(name))
}

/// The processes alive (zombies left out) whose command line holds `token`,
/// as `pid: command line`.
pub fn alive_with(token: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = state.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if cmd.contains(token) && !zombie {
            out.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    out
}
