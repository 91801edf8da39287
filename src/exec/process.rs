//! One child process speaking the protocol of `docs/protocol.md`: started
//! under a guard ([`super::contain`]: its own process group, a subreaper
//! that kills whatever it leaves behind, in any group or session, and
//! outlives no bitparity), fed and read by threads of its own so that every
//! read and write has a deadline (a child that hangs, or never reads its
//! stdin, cannot block bitparity), its stderr drained continuously (a child
//! that prints a lot would otherwise block on a full pipe) and its last
//! lines kept for the report, escaped (they are the child's text, shown on
//! bitparity's terminal). A broken child is killed with everything it
//! spawned and reaped: no zombie, no orphan left sleeping.
//!
//! Nothing here knows an op: it moves frames (a length-prefixed JSON header,
//! then the raw buffers the header lists) and checks their sizes against
//! what the caller expects before allocating anything.

use oracles::vocab::ClampTie;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The protocol version this build speaks.
pub const VERSION: u64 = 1;
/// The largest JSON header either side may send (a header lists a few
/// fields and buffer sizes: a few hundred bytes).
pub const MAX_HEADER: u32 = 1 << 20;
/// Stderr lines kept for a crash report, and the characters kept of each.
const STDERR_LINES: usize = 12;
const STDERR_LINE_CHARS: usize = 300;
/// The least time a child has for its handshake.
pub const STARTUP: Duration = Duration::from_secs(30);
/// Chunks of stdout the reader thread may hold ahead of the parser: a child
/// that floods its stdout is slowed by the pipe, not buffered into memory.
const READ_AHEAD: usize = 16;
/// How long a child whose stdout closed has to end by itself before it is
/// killed, so that a crash reads as the exit code or signal it was...
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// ...and how long while the kernel says it is exiting: its pipes close
/// early in an exit, and the rest (a GPU context torn down, say) may take
/// longer than `EXIT_GRACE`; killing it then hid its own status behind
/// "killed by bitparity".
const EXIT_GRACE_EXITING: Duration = Duration::from_secs(10);
/// How long the stderr tail may take to reach its end once the child is
/// reaped (the pipe closes with the last process holding it; one that left
/// the process group could hold it forever).
const STDERR_SETTLE: Duration = Duration::from_secs(1);

/// The element type of a buffer on the wire (little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    U32,
    /// Booleans as bytes 0 and 1.
    U8,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::U32 => "u32",
            Dtype::U8 => "u8",
        }
    }
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::U32 => 4,
            Dtype::U8 => 1,
        }
    }
}

/// A buffer: its name, type, element count and bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub name: &'static str,
    pub dtype: Dtype,
    pub bytes: Vec<u8>,
}

impl Buffer {
    pub fn f32s(name: &'static str, v: &[f32]) -> Buffer {
        Buffer { name, dtype: Dtype::F32, bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect() }
    }
    pub fn bools(name: &'static str, v: &[bool]) -> Buffer {
        Buffer { name, dtype: Dtype::U8, bytes: v.iter().map(|&b| b as u8).collect() }
    }
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub fn to_f32(&self) -> Vec<f32> {
        self.bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }
    pub fn to_u32(&self) -> Vec<u32> {
        self.bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }
    /// Booleans; a byte other than 0 or 1 is a garbled reply.
    pub fn to_bools(&self) -> Result<Vec<bool>, String> {
        self.bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| match b {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(format!("{}[{i}] = {b}: a boolean must be 0 or 1", self.name)),
            })
            .collect()
    }
}

/// An output the reply must hold: its name, type and element count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub name: &'static str,
    pub dtype: Dtype,
    pub len: usize,
}

/// A request: the op's header fields and its input buffers.
#[derive(Clone, Debug)]
pub struct Request {
    pub header: Map<String, Value>,
    pub buffers: Vec<Buffer>,
}

/// A buffer as a header lists it: name, dtype, element count.
type Listed = (String, String, u64);

/// The handshake a child opens with.
#[derive(Clone, Debug, PartialEq)]
pub struct Hello {
    pub ops: Vec<String>,
    pub profile: Option<String>,
    /// The padding rule it claims (`"padding"`: `"skip"` or `"mask"`; absent or
    /// null: `skip`, bitparity's own, docs/padding.md).
    pub padding: oracles::padding::PaddingRule,
    /// The clamp tie rule it implements (`"clamp_tie"`: `"strict"` or
    /// `"inclusive"`), when one only; absent or null: it follows each
    /// case's `clamp_tie`.
    pub clamp_tie: Option<ClampTie>,
}

/// A reply that is not outputs: the child's own typed error.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    Invalid(String),
    Unavailable(String),
    Device(String),
}

/// Why a request got no reply that can be used: the child crashed, hung,
/// or broke the protocol. The child is dead (killed and reaped) after it.
#[derive(Clone, Debug, PartialEq)]
pub struct Broken {
    pub why: String,
    /// It said nothing within its timeout (as opposed to a crash or
    /// garbage): a subject that keeps doing so is marked hung.
    pub unresponsive: bool,
}

impl Broken {
    pub fn message(&self) -> String {
        self.why.clone()
    }
}

/// Why a child could not be started.
#[derive(Clone, Debug, PartialEq)]
pub enum StartError {
    /// The program could not be run at all (no such file, not executable).
    Spawn(String),
    /// It ran but did not open with a valid handshake.
    Handshake(Broken),
}

/// Guards alive now, with their providers' pids ([`super::contain`]):
/// [`kill_all`] ends them when bitparity stops early (a second SIGINT) and
/// at exit.
static LIVE: Mutex<BTreeMap<i32, i32>> = Mutex::new(BTreeMap::new());

fn live() -> std::sync::MutexGuard<'static, BTreeMap<i32, i32>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends every provider still running, with everything it spawned, and
/// reaps their guards: called at exit and by the signal handlers before
/// they end the process.
pub fn kill_all() {
    let all: Vec<(i32, i32)> = std::mem::take(&mut *live()).into_iter().collect();
    // Every guard is asked at once; each then cleans up in parallel.
    for &(guard, _) in &all {
        // SAFETY: a signal to a guard this process forked and has not
        // reaped (it leaves LIVE when reaped): no memory is involved.
        unsafe {
            libc::kill(guard, libc::SIGTERM);
        }
    }
    for (guard, provider) in all {
        super::contain::stop(guard, provider);
    }
}

/// Kills `child` and every process of its process group (`child` was
/// spawned with `process_group(0)`): a wrapper's own child (compute-sanitizer
/// runs the program it checks as one) dies with it, and so closes the pipes
/// the caller reads.
pub fn kill_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: a signal to the process group this process created for a
        // child it has not reaped yet (`child` is not waited for): no memory
        // is involved.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// What was spawned, for messages.
#[derive(Clone, Debug)]
pub struct Spawn {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
}

/// A running child.
pub struct Child {
    /// The guard ([`super::contain`]): this process's child.
    guard: i32,
    /// The provider: the guard's child.
    pid: i32,
    to_child: Option<SyncSender<Vec<u8>>>,
    from_child: Receiver<FromChild>,
    /// Bytes received and not yet parsed.
    pending: VecDeque<u8>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Disconnected once the stderr pipe reached its end (every line is in
    /// `stderr`).
    stderr_done: Receiver<()>,
    timeout: Duration,
    dead: bool,
    /// Its stdout closed: it is exiting, or has exited.
    eof: bool,
    /// A read passed its deadline.
    timed_out: bool,
}

/// What the stdout reader thread hands over.
enum FromChild {
    Bytes(Vec<u8>),
    /// End of file: every process holding the pipe closed it.
    Closed,
    /// A read error other than an interrupted call (retried).
    Failed(String),
}

impl Child {
    /// Starts the child and reads its handshake (within the timeout).
    pub fn start(spec: &Spawn) -> Result<(Child, Hello), StartError> {
        let c = super::contain::spawn(&spec.argv, &spec.env).map_err(StartError::Spawn)?;
        let (guard, pid) = (c.guard, c.provider);
        live().insert(guard, pid);
        let (stdin, stdout, stderr) = (Some(c.stdin), Some(c.stdout), Some(c.stderr));
        let (to_child, writer_rx) = sync_channel::<Vec<u8>>(1);
        let (reader_tx, from_child) = sync_channel::<FromChild>(READ_AHEAD);
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(mut stdin) = stdin {
            std::thread::spawn(move || {
                // Ends when the request channel closes or the child stops
                // reading (EPIPE after it died or was killed).
                while let Ok(bytes) = writer_rx.recv() {
                    if stdin.write_all(&bytes).and_then(|()| stdin.flush()).is_err() {
                        return;
                    }
                }
            });
        }
        if let Some(mut stdout) = stdout {
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    // A signal that interrupts the read is no end of the
                    // stream: read on.
                    let end = match stdout.read(&mut buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Ok(0) => FromChild::Closed,
                        Err(e) => FromChild::Failed(e.to_string()),
                        Ok(n) => {
                            if reader_tx.send(FromChild::Bytes(buf[..n].to_vec())).is_err() {
                                return;
                            }
                            continue;
                        }
                    };
                    let _ = reader_tx.send(end);
                    return;
                }
            });
        }
        let (stderr_end, stderr_done) = sync_channel::<()>(0);
        if let Some(stderr) = stderr {
            let tail = tail.clone();
            std::thread::spawn(move || {
                drain_stderr(stderr, &tail);
                drop(stderr_end);
            });
        }
        let mut child = Child {
            guard,
            pid,
            to_child: Some(to_child),
            from_child,
            pending: VecDeque::new(),
            stderr: tail,
            stderr_done,
            timeout: spec.timeout,
            dead: false,
            eof: false,
            timed_out: false,
        };
        // Starting may take longer than a reply (a GPU provider imports
        // torch and initialises CUDA): the handshake gets at least this.
        let deadline = Instant::now() + spec.timeout.max(STARTUP);
        match child.read_hello(deadline) {
            Ok(h) => Ok((child, h)),
            Err(why) => Err(StartError::Handshake(child.fail(&format!("handshake: {why}")))),
        }
    }

    fn read_hello(&mut self, deadline: Instant) -> Result<Hello, String> {
        let (h, lens) = self.read_header(deadline)?;
        if !lens.is_empty() {
            return Err("the handshake lists buffers".into());
        }
        if h.get("protocol").and_then(Value::as_str) != Some("bitparity") {
            return Err(format!("not a bitparity handshake: {}", clip(&Value::Object(h).to_string())));
        }
        match h.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            v => return Err(format!("protocol version {v:?}; this bitparity speaks version {VERSION}")),
        }
        let ops = h
            .get("ops")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|o| o.as_str().map(String::from)).collect::<Vec<_>>())
            .filter(|a| !a.is_empty())
            .ok_or("the handshake names no op (`ops`: a list of op names)")?;
        let profile = match h.get("profile") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(v) => return Err(format!("`profile` must be a name or null, not {v}")),
        };
        let padding = match h.get("padding") {
            None | Some(Value::Null) => oracles::padding::PaddingRule::Skip,
            Some(Value::String(r)) => oracles::padding::PaddingRule::by_name(r)
                .ok_or_else(|| format!("`padding` must be \"skip\" or \"mask\", not {r:?}"))?,
            Some(v) => return Err(format!("`padding` must be \"skip\" or \"mask\", not {v}")),
        };
        let clamp_tie = match h.get("clamp_tie") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => Some(
                ClampTie::by_name(t)
                    .ok_or_else(|| format!("`clamp_tie` must be \"strict\", \"inclusive\" or null, not {t:?}"))?,
            ),
            Some(v) => return Err(format!("`clamp_tie` must be \"strict\", \"inclusive\" or null, not {v}")),
        };
        Ok(Hello { ops, profile, padding, clamp_tie })
    }

    /// Sends `req` and reads the reply: outputs exactly as `expected` lists
    /// them (names, types, counts, in order), or the child's typed error.
    /// Anything else (a crash, a hang past the timeout, garbage) breaks the
    /// child: it is killed and reaped, and why is returned.
    pub fn request(
        &mut self,
        header: &Map<String, Value>,
        buffers: &[Buffer],
        expected: &[Expected],
    ) -> Result<Result<Vec<Buffer>, Refusal>, Broken> {
        if self.dead {
            return Err(Broken { why: "the child is gone".into(), unresponsive: false });
        }
        let deadline = Instant::now() + self.timeout;
        let frame = encode_frame(header, buffers);
        // Never a blocking send: the writer thread holds at most the frame
        // before this one, and still holding it means the child has
        // stopped reading its stdin (it answered without reading a
        // request whole): waiting on it would hang bitparity.
        let sent = match self.to_child.as_ref().map(|t| t.try_send(frame)) {
            Some(Ok(())) => Ok(()),
            Some(Err(std::sync::mpsc::TrySendError::Full(_))) => Err("it stopped reading its stdin"),
            _ => Err("its stdin is closed"),
        };
        if let Err(why) = sent {
            return Err(self.fail(why));
        }
        match self.read_reply(deadline, expected) {
            Ok(r) => Ok(r),
            Err(why) => Err(self.fail(&why)),
        }
    }

    fn read_reply(&mut self, deadline: Instant, expected: &[Expected]) -> Result<Result<Vec<Buffer>, Refusal>, String> {
        let (h, lens) = self.read_header(deadline)?;
        if let Some(kind) = h.get("error") {
            if !lens.is_empty() {
                return Err("an error reply lists buffers".into());
            }
            let message: String = h.get("message").and_then(Value::as_str).unwrap_or("").chars().take(2000).collect();
            // The child's words, shown on bitparity's terminal.
            let message = crate::escape::visible(&message);
            return match kind.as_str() {
                Some("invalid") => Ok(Err(Refusal::Invalid(message))),
                Some("unavailable") => Ok(Err(Refusal::Unavailable(message))),
                Some("device") => Ok(Err(Refusal::Device(message))),
                _ => Err(format!("unknown error kind {kind} (invalid, unavailable or device)")),
            };
        }
        if h.get("ok") != Some(&Value::Bool(true)) {
            return Err(format!(
                "a reply is {{\"ok\": true, ...}} or {{\"error\": ...}}: {}",
                clip(&Value::Object(h).to_string())
            ));
        }
        // Every size is checked against what the case implies before a
        // byte of it is read or allocated.
        let got: Vec<String> = lens.iter().map(|(n, d, l)| format!("{n}:{d}[{l}]")).collect();
        let want: Vec<String> = expected.iter().map(|e| format!("{}:{}[{}]", e.name, e.dtype.name(), e.len)).collect();
        if got != want {
            return Err(format!(
                "the reply lists outputs [{}], the case implies [{}]",
                got.join(", "),
                want.join(", ")
            ));
        }
        let mut out = Vec::with_capacity(expected.len());
        for e in expected {
            let bytes = self.read_exact(e.len * e.dtype.size(), deadline)?;
            out.push(Buffer { name: e.name, dtype: e.dtype, bytes });
        }
        Ok(Ok(out))
    }

    /// One header: `u32` length, JSON object; its buffer list as
    /// (name, dtype, count).
    fn read_header(&mut self, deadline: Instant) -> Result<(Map<String, Value>, Vec<Listed>), String> {
        let len = self.read_exact(4, deadline)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if len > MAX_HEADER {
            return Err(format!("a header of {len} bytes announced (at most {MAX_HEADER}): garbage on stdout?"));
        }
        let bytes = self.read_exact(len as usize, deadline)?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("a header that is not JSON ({e}): {}", clip(&String::from_utf8_lossy(&bytes))))?;
        let Value::Object(mut h) = v else {
            return Err(format!("a header that is not a JSON object: {}", clip(&v.to_string())));
        };
        let lens = match h.remove("buffers") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|b| match b.as_array().map(|x| x.as_slice()) {
                    Some([Value::String(n), Value::String(d), Value::Number(l)]) if l.as_u64().is_some() => {
                        Ok((n.clone(), d.clone(), l.as_u64().unwrap_or(0)))
                    }
                    _ => Err(format!("a buffer is [name, dtype, count], not {}", clip(&b.to_string()))),
                })
                .collect::<Result<_, _>>()?,
            Some(v) => return Err(format!("`buffers` must be a list, not {}", clip(&v.to_string()))),
        };
        Ok((h, lens))
    }

    fn read_exact(&mut self, n: usize, deadline: Instant) -> Result<Vec<u8>, String> {
        while self.pending.len() < n {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            match self.from_child.recv_timeout(left) {
                Ok(FromChild::Bytes(chunk)) => self.pending.extend(chunk),
                end @ (Ok(FromChild::Closed | FromChild::Failed(_)) | Err(RecvTimeoutError::Disconnected)) => {
                    self.eof = true;
                    let midway = if self.pending.is_empty() {
                        String::new()
                    } else {
                        format!(" in the middle of a frame ({} of {n} bytes)", self.pending.len())
                    };
                    return Err(match end {
                        Ok(FromChild::Failed(e)) => format!("its stdout could not be read ({e}){midway}"),
                        _ => format!("its stdout closed{midway}"),
                    });
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.timed_out = true;
                    let midway = if self.pending.is_empty() {
                        String::new()
                    } else {
                        format!(": the frame stopped after {} of {n} bytes", self.pending.len())
                    };
                    return Err(format!(
                        "no reply within {} s (the subject's timeout){midway}",
                        self.timeout.as_secs_f64()
                    ));
                }
            }
        }
        Ok(self.pending.drain(..n).collect())
    }

    /// Kills the child (its process group), reaps it, and says what
    /// happened: the reason, how it ended, its last stderr lines.
    fn fail(&mut self, why: &str) -> Broken {
        let status = self.end();
        // The child is reaped and its group killed: the stderr pipe is at
        // its end, or about to be. Its last lines (a traceback written as
        // it died) are what the report needs most.
        let _ = self.stderr_done.recv_timeout(STDERR_SETTLE);
        let tail: Vec<String> = self.stderr.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
        let mut msg = format!("{why}; {status}");
        if !tail.is_empty() {
            msg += &format!("; its last stderr lines: {}", tail.join(" | "));
        }
        Broken { why: msg, unresponsive: self.timed_out }
    }

    /// Ends the child and reaps it: how it ended. A child that closed its
    /// stdout is given a moment to exit on its own, so that a crash reads
    /// as the signal or exit code it was.
    fn end(&mut self) -> String {
        use std::os::unix::process::ExitStatusExt;
        if self.dead {
            return "the child is gone".into();
        }
        self.dead = true;
        self.to_child = None;
        // A hung child is killed at once; one whose stdout closed gets a
        // moment to end by itself, longer while it is exiting, and its
        // guard a moment to clean up after it.
        let start = Instant::now();
        let mut status = None;
        if self.eof {
            loop {
                if let Some(s) = super::contain::try_wait(self.guard) {
                    status = Some(s);
                    break;
                }
                let waited = start.elapsed();
                let ending = exiting(self.pid) || !std::path::Path::new(&format!("/proc/{}", self.pid)).exists();
                if waited >= EXIT_GRACE_EXITING || (waited >= EXIT_GRACE && !ending) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let was_exiting = status.is_none() && exiting(self.pid);
        // The guard kills the provider and everything it left, then ends as
        // the provider ended.
        let reaped = match status {
            Some(s) => Some(s),
            None => super::contain::stop(self.guard, self.pid),
        };
        live().remove(&self.guard);
        match (status, reaped) {
            (Some(s), _) => describe_status(s),
            // Its exit was under way before bitparity's kill, which then
            // changes nothing: the status is its own (a SIGKILL in it came
            // from elsewhere: the OOM killer, a parent-death signal).
            (None, Some(s)) if was_exiting => format!(
                "{} (still exiting {:.1} s after its stdout closed: the status is its own, not bitparity's kill)",
                describe_status(s),
                start.elapsed().as_secs_f64()
            ),
            (None, Some(s)) if s.signal() != Some(libc::SIGKILL) => describe_status(s),
            _ => "killed by bitparity".to_string(),
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.dead {
            self.end();
        }
    }
}

/// Whether the kernel says process `pid` is exiting (`PF_EXITING` in the
/// flags of `/proc/PID/stat`, or a zombie): its end is under way, with a
/// status of its own. False where that cannot be read.
fn exiting(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // After the command name (which may hold spaces and parentheses):
    // state ppid pgrp session tty_nr tpgid flags ...
    let Some((_, rest)) = stat.rsplit_once(')') else { return false };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let zombie = fields.first().is_some_and(|s| *s == "Z" || *s == "X");
    zombie || fields.get(6).and_then(|f| f.parse::<u64>().ok()).is_some_and(|f| f & PF_EXITING != 0)
}

fn describe_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("the child exited with code {c}"),
        (None, Some(sig)) => format!("the child was killed by signal {sig}{}", signal_name(sig)),
        _ => format!("the child ended ({s})"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGFPE => " (SIGFPE)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGINT => " (SIGINT)",
        _ => "",
    }
}

/// Keeps the last lines of the child's stderr, each clipped; reads until
/// the pipe closes so that the child never blocks on it.
fn drain_stderr(mut r: impl Read, tail: &Mutex<VecDeque<String>>) {
    let mut buf = [0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let push = |line: &mut Vec<u8>| {
        let text: String = crate::escape::visible(
            &String::from_utf8_lossy(line).trim_end().chars().take(STDERR_LINE_CHARS).collect::<String>(),
        );
        line.clear();
        if text.is_empty() {
            return;
        }
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        if t.len() == STDERR_LINES {
            t.pop_front();
        }
        t.push_back(text);
    };
    loop {
        match r.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) | Err(_) => {
                push(&mut line);
                return;
            }
            Ok(n) => {
                for &b in &buf[..n] {
                    if b == b'\n' {
                        push(&mut line);
                    } else if line.len() < STDERR_LINE_CHARS * 4 {
                        line.push(b);
                    }
                }
            }
        }
    }
}

/// The bytes of one frame: header length, header (with its buffer list),
/// then the buffers.
pub fn encode_frame(header: &Map<String, Value>, buffers: &[Buffer]) -> Vec<u8> {
    let mut h = header.clone();
    let list: Vec<Value> = buffers
        .iter()
        .map(|b| Value::Array(vec![b.name.into(), b.dtype.name().into(), (b.len() as u64).into()]))
        .collect();
    h.insert("buffers".into(), Value::Array(list));
    let text = Value::Object(h).to_string();
    let payload: usize = buffers.iter().map(|b| b.bytes.len()).sum();
    let mut out = Vec::with_capacity(4 + text.len() + payload);
    out.extend((text.len() as u32).to_le_bytes());
    out.extend(text.as_bytes());
    for b in buffers {
        out.extend(&b.bytes);
    }
    out
}

/// At most 200 characters of `s`, for messages about garbage.
fn clip(s: &str) -> String {
    let c: String = s.chars().take(200).collect();
    if c.len() < s.len() {
        format!("{c}...")
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    #[test]
    fn killing_the_group_closes_the_pipe_a_grandchild_holds() {
        // A wrapper whose own child keeps the stdout pipe open, as
        // compute-sanitizer's target does: killing the wrapper alone would
        // leave the read below blocked for 30 s.
        let mut c = Command::new("sh")
            .args(["-c", "sleep 30 & echo started; wait"])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = c.stdout.take().unwrap();
        let mut first = [0u8; 8];
        out.read_exact(&mut first).unwrap();
        let t = Instant::now();
        kill_group(&mut c);
        let mut rest = String::new();
        let _ = out.read_to_string(&mut rest);
        let _ = c.wait();
        assert!(t.elapsed() < Duration::from_secs(10), "the pipe stayed open {:?}", t.elapsed());
    }
}
