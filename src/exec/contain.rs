//! Containment of an external subject: no process it starts outlives it.
//!
//! A provider is someone else's program: it may spawn helpers, daemonise one
//! (a double fork), move one into a session of its own (`setsid`), and none
//! of those is in its process group. So bitparity never starts a provider
//! directly. It forks a *guard*, a small process of its own (no exec: the
//! same binary, running only the few system calls below), which
//!
//! - makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`) and, where
//!   the system allows (root, CAP_SYS_ADMIN, or an unprivileged user
//!   namespace), puts the provider in a PID namespace of its own: the
//!   namespace's first process is a small reaper that mounts the
//!   namespace's own /proc (CUDA needs it) and starts the provider, and
//!   when that reaper ends, the kernel kills every process of the
//!   namespace, in whatever group or session it moved;
//! - gives the reaper and the provider `PR_SET_PDEATHSIG` = SIGKILL (each
//!   parent is single-threaded, so the signal comes exactly when it dies):
//!   the guard's death, by any signal, ends the namespace;
//! - waits for whichever comes first: the provider's end, SIGTERM from
//!   bitparity (the provider broke or the run ends), or bitparity's end by
//!   any means, SIGKILL included (its parent changes: polled every 50 ms);
//! - then kills the provider's group, the namespace, and every process
//!   reparented to the guard, level by level until it has no child left,
//!   and exits with the provider's own status (an exit code, or the same
//!   signal), so that a crash still reads as the signal it was.
//!
//! Without a namespace (`Mode::Subreaper`) the guard alone cleans up, which
//! holds as long as the guard itself is not killed by SIGKILL.
//!
//! The guard is a fork of a multi-threaded process, so until it exits it
//! may only make async-signal-safe calls: everything it needs (the
//! program's path, its argument and environment arrays) is built before the
//! fork, and the code below allocates nothing, formats nothing and cannot
//! panic. docs/security.md says what is guaranteed.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A provider running under its guard.
pub struct Contained {
    /// The guard: bitparity's child, the provider's parent.
    pub guard: i32,
    /// The provider, the guard's child.
    pub provider: i32,
    /// How it is contained.
    pub mode: Mode,
    /// The provider's stdin (written), stdout and stderr (read).
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
}

/// How often the guard looks whether bitparity is still its parent.
const POLL: libc::timespec = libc::timespec { tv_sec: 0, tv_nsec: 50_000_000 };
/// How long a guard has to clean up after SIGTERM before bitparity kills it
/// and the provider's group itself.
const GUARD_GRACE: Duration = Duration::from_secs(5);
/// Rounds of killing the guard's children (each round reaches one more
/// level of a tree of processes that left the provider's group).
const MAX_ROUNDS: u32 = 10_000;

fn cstring(what: &str, bytes: &[u8]) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| format!("{what} holds a NUL byte"))
}

/// The program `name` names: a path when it holds a `/`, else the first
/// executable file of that name on `path` (the `PATH` the child gets).
fn find_program(name: &str, path: Option<&OsStr>) -> Result<PathBuf, String> {
    let executable = |p: &Path| {
        let Ok(c) = CString::new(p.as_os_str().as_bytes()) else { return false };
        // SAFETY: `c` is a NUL-terminated string that outlives the call.
        p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return match std::fs::metadata(&p) {
            Err(e) => Err(format!("cannot start {name:?}: {e}")),
            Ok(_) if !executable(&p) => Err(format!("cannot start {name:?}: not an executable file")),
            Ok(_) => Ok(p),
        };
    }
    let path = path.map(|p| p.to_os_string()).unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
        .ok_or_else(|| format!("cannot start {name:?}: no such program on PATH"))
}

/// `pipe2(O_CLOEXEC)`: (read end, write end).
fn pipe() -> Result<(i32, i32), String> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("cannot make a pipe: {}", std::io::Error::last_os_error()));
    }
    Ok((fds[0], fds[1]))
}

fn close(fd: i32) {
    // SAFETY: closes a descriptor this module created and owns.
    unsafe {
        libc::close(fd);
    }
}

/// Starts `argv` with `env` added to bitparity's environment, under a
/// guard. `Err` when the program cannot be run at all.
pub fn spawn(argv: &[String], env: &[(String, String)]) -> Result<Contained, String> {
    let (program, _) = argv.split_first().ok_or("an empty command")?;
    let mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
    for (k, v) in env {
        vars.retain(|(x, _)| x.as_bytes() != k.as_bytes());
        vars.push((k.into(), v.into()));
    }
    let path_var = vars.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_os_str());
    let exe = cstring("the program's path", find_program(program, path_var)?.as_os_str().as_bytes())?;
    let args: Vec<CString> = argv.iter().map(|a| cstring("an argument", a.as_bytes())).collect::<Result<_, _>>()?;
    let envs: Vec<CString> = vars
        .iter()
        .map(|(k, v)| cstring("an environment variable", &[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<Result<_, _>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = envs.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let exec = Program { exe: exe.as_ptr(), argv: arg_ptrs.as_ptr(), envp: env_ptrs.as_ptr() };

    let (in_r, in_w) = pipe()?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (info_r, info_w) = pipe()?;
    let ends = Ends { in_r, out_w, err_w, info_w };
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork in a multi-threaded process: the child (the guard) runs
    // only `guard`, which makes async-signal-safe system calls on memory
    // prepared above (the strings and pointer arrays, copied into the
    // child) and never returns.
    let guard = unsafe { libc::fork() };
    if guard == 0 {
        // SAFETY: in the forked child; see `guard`'s contract.
        unsafe { run_guard(parent, exec, ends) }
    }
    for fd in [in_r, out_w, err_w, info_w] {
        close(fd);
    }
    if guard < 0 {
        for fd in [in_w, out_r, err_r, info_r] {
            close(fd);
        }
        return Err(format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    // The guard says the provider's pid, and the provider an exec failure,
    // on the info pipe; it reaches its end when both have closed it (the
    // provider's copy closes on a successful exec).
    // SAFETY: info_r is an open descriptor this function owns; File takes it.
    let mut info = unsafe { File::from_raw_fd(info_r) };
    let mut bytes = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::Read::take(&mut info, 64), &mut bytes);
    let mut provider = 0;
    let mut mode = Mode::Subreaper;
    let mut failure = None;
    for rec in bytes.chunks_exact(5) {
        let v = i32::from_le_bytes([rec[1], rec[2], rec[3], rec[4]]);
        match rec[0] {
            b'P' => provider = v,
            b'M' => {
                mode = match v {
                    1 => Mode::PidNamespace,
                    2 => Mode::UserNamespace,
                    _ => Mode::Subreaper,
                }
            }
            b'E' => failure = Some(format!("cannot start {program:?}: {}", std::io::Error::from_raw_os_error(v))),
            _ => {
                failure =
                    Some(format!("cannot start {program:?}: fork failed ({})", std::io::Error::from_raw_os_error(v)))
            }
        }
    }
    // SAFETY: each is an open descriptor this function owns.
    let (stdin, stdout, stderr) =
        unsafe { (File::from_raw_fd(in_w), File::from_raw_fd(out_r), File::from_raw_fd(err_r)) };
    if failure.is_some() || provider <= 0 {
        stop(guard, provider);
        return Err(failure.unwrap_or_else(|| format!("cannot start {program:?}: its guard did not start")));
    }
    Ok(Contained { guard, provider, mode, stdin, stdout, stderr })
}

/// The provider's program as execve takes it: NUL-terminated strings and a
/// null-terminated array of each, made before the fork.
#[derive(Clone, Copy)]
struct Program {
    exe: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
}

/// The child's ends of the pipes, as the guard receives them.
#[derive(Clone, Copy)]
struct Ends {
    in_r: i32,
    out_w: i32,
    err_w: i32,
    info_w: i32,
}

/// Writes a 5-byte record (a tag and an i32) to the info pipe.
///
/// # Safety
/// Async-signal-safe: one `write` of a stack buffer.
unsafe fn record(fd: i32, tag: u8, v: i32) {
    let b = v.to_le_bytes();
    let rec = [tag, b[0], b[1], b[2], b[3]];
    libc::write(fd, rec.as_ptr().cast(), rec.len());
}

/// The guard (see the module's header). Never returns.
///
/// # Safety
/// Only in the child of `fork`, with `program`'s strings and arrays valid
/// (NUL-terminated, null-terminated). Everything here is an
/// async-signal-safe system call on stack memory or on those arrays.
unsafe fn run_guard(parent: i32, program: Program, ends: Ends) -> ! {
    let me = libc::getpid();
    libc::setpgid(0, 0);
    libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    // The signals the guard waits for are blocked (taken by sigtimedwait,
    // never by a handler inherited from bitparity); the terminal's are
    // blocked too: the guard's group gets none, but a stray one must not end
    // it before it has cleaned up.
    let mut wait_set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut wait_set);
    for s in [libc::SIGTERM, libc::SIGCHLD, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
        libc::sigaddset(&mut wait_set, s);
    }
    libc::sigprocmask(libc::SIG_BLOCK, &wait_set, std::ptr::null_mut());

    let mode = isolate();
    record(ends.info_w, b'M', mode as i32);
    // In a namespace, the guard's child is the namespace's first process:
    // a reaper whose end ends every process of the namespace, and which
    // sends the provider's status back on this pipe (the first process of
    // a namespace cannot end by a signal it raises itself, so the guard,
    // outside, ends as the provider did).
    let mut status_pipe = [-1i32; 2];
    if mode != Mode::Subreaper && libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
        record(ends.info_w, b'F', *libc::__errno_location());
        libc::_exit(127);
    }
    let child = libc::fork();
    if child == 0 {
        match mode {
            Mode::Subreaper => run_provider(me, program, ends),
            _ => run_init(status_pipe[1], program, ends),
        }
    }
    if child < 0 {
        record(ends.info_w, b'F', *libc::__errno_location());
        libc::_exit(127);
    }
    // The provider's pid as bitparity sees it: the guard's child, or in a
    // namespace the child of that child (read from /proc, bounded wait).
    let mut provider = child;
    if mode != Mode::Subreaper {
        libc::close(status_pipe[1]);
        for _ in 0..2000 {
            let mut found = 0;
            for_each_child(child, |pid| found = pid);
            if found > 0 {
                provider = found;
                break;
            }
            let pause = libc::timespec { tv_sec: 0, tv_nsec: 500_000 };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
    record(ends.info_w, b'P', provider);
    // The guard holds no descriptor but the status pipe (as fd 0): every
    // pipe end it inherited (this provider's and every other child's of
    // bitparity) would otherwise keep those pipes from reaching their end.
    let status_fd = if mode == Mode::Subreaper {
        close_from(0);
        -1
    } else {
        libc::dup2(status_pipe[0], 0);
        close_from(1);
        0
    };

    let mut status: i32 = 0;
    let mut ended = false;
    loop {
        loop {
            let mut s: i32 = 0;
            let r = libc::waitpid(-1, &mut s, libc::WNOHANG);
            if r <= 0 {
                break;
            }
            if r == child {
                status = s;
                ended = true;
            }
        }
        if ended || libc::getppid() != parent {
            break;
        }
        let mut info: libc::siginfo_t = std::mem::zeroed();
        if libc::sigtimedwait(&wait_set, &mut info, &POLL) == libc::SIGTERM {
            break;
        }
    }
    libc::kill(-provider, libc::SIGKILL);
    libc::kill(provider, libc::SIGKILL);
    libc::kill(child, libc::SIGKILL);
    if !ended {
        // Killed just now: its status is the kill's.
        let mut s: i32 = 0;
        if libc::waitpid(child, &mut s, 0) == child {
            status = s;
        }
    }
    if status_fd >= 0 {
        // The provider's own status, when the reaper saw it end.
        let mut b = [0u8; 4];
        if libc::read(status_fd, b.as_mut_ptr().cast(), 4) == 4 {
            status = i32::from_ne_bytes(b);
        }
    }
    kill_orphans(me);
    mirror(status)
}

/// The first process of the provider's PID namespace: starts the provider,
/// reaps whatever is reparented to it, and when the provider ends writes
/// its wait status to `status_w` and exits, which ends every process of
/// the namespace. It dies with the guard.
///
/// # Safety
/// As [`run_guard`].
unsafe fn run_init(status_w: i32, program: Program, ends: Ends) -> ! {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    own_proc();
    let provider = libc::fork();
    if provider == 0 {
        run_provider(1, program, ends);
    }
    if provider < 0 {
        record(ends.info_w, b'F', *libc::__errno_location());
        libc::_exit(127);
    }
    // As the guard: no descriptor held but the status pipe's (as fd 0).
    libc::dup2(status_w, 0);
    close_from(1);
    loop {
        let mut s: i32 = 0;
        let r = libc::waitpid(-1, &mut s, 0);
        if r == provider {
            let b = s.to_ne_bytes();
            libc::write(0, b.as_ptr().cast(), 4);
            libc::_exit(0);
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(127);
        }
    }
}

/// Gives the namespace a /proc of its own: the CUDA driver refuses to start
/// (cudaGetDeviceCount: error 304) in a PID namespace whose /proc is still
/// the host's. A mount namespace of the reaper's own, made private first so
/// that nothing mounted here reaches the host's, then a new proc on /proc.
/// Where either step is refused the provider runs with the host's /proc (a
/// CPU provider does not notice; docs/security.md says what a GPU one sees).
/// The guard stays in the host's mount namespace: it reads the host's /proc
/// to find and kill what the provider leaves.
///
/// # Safety
/// As [`run_guard`]: unshare and mount only.
unsafe fn own_proc() {
    let none = std::ptr::null::<libc::c_char>();
    if libc::unshare(libc::CLONE_NEWNS) != 0
        || libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0
    {
        return;
    }
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null());
}

/// The provider's side of the fork: its own group, death with its parent,
/// the pipes as stdin, stdout and stderr, default signals, then exec.
///
/// # Safety
/// As [`run_guard`].
unsafe fn run_provider(parent: i32, program: Program, ends: Ends) -> ! {
    libc::setpgid(0, 0);
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    // The parent (the guard, or the namespace's reaper, pid 1 there) may
    // have died before the death signal was asked for.
    if libc::getppid() != parent {
        libc::_exit(127);
    }
    if libc::dup2(ends.in_r, 0) < 0 || libc::dup2(ends.out_w, 1) < 0 || libc::dup2(ends.err_w, 2) < 0 {
        record(ends.info_w, b'E', *libc::__errno_location());
        libc::_exit(127);
    }
    // Whatever bitparity (or a library it loaded) opened without
    // close-on-exec stays out of the provider.
    libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    // Dispositions a provider expects: Rust ignores SIGPIPE, and an ignored
    // signal stays ignored across exec; the mask is the guard's.
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    libc::execve(program.exe, program.argv, program.envp);
    record(ends.info_w, b'E', *libc::__errno_location());
    libc::_exit(127)
}

/// How a provider is contained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Mode {
    /// The provider is the first process of a PID namespace of its own
    /// (as root, or with CAP_SYS_ADMIN): when it ends, or when its guard
    /// dies by any means, SIGKILL included, the kernel kills every process
    /// of the namespace, wherever it moved.
    PidNamespace = 1,
    /// The same, in a user namespace of its own that maps the user to
    /// itself (an unprivileged user, where the system allows it).
    UserNamespace = 2,
    /// No namespace can be made here: the guard as subreaper kills what
    /// the provider leaves, as long as the guard itself is not killed.
    Subreaper = 0,
}

impl Mode {
    pub fn describe(self) -> &'static str {
        match self {
            Mode::PidNamespace => "a PID namespace of its own",
            Mode::UserNamespace => "a user and PID namespace of its own",
            Mode::Subreaper => "a subreaper guard (no namespace could be made here)",
        }
    }
}

/// Puts the guard's next child in a PID namespace of its own where the
/// system allows it.
///
/// # Safety
/// Async-signal-safe: unshare, and open/write/close of /proc files with
/// stack buffers. Only in the single-threaded guard (a user namespace
/// needs one thread).
unsafe fn isolate() -> Mode {
    if libc::unshare(libc::CLONE_NEWPID) == 0 {
        return Mode::PidNamespace;
    }
    let (uid, gid) = (libc::getuid(), libc::getgid());
    if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) != 0 {
        return Mode::Subreaper;
    }
    // The user and group map to themselves, so that the provider's files
    // and devices are its own as before (setgroups must be denied before
    // an unprivileged gid map).
    let mut line = [0u8; 32];
    let ok = write_file(c"/proc/self/setgroups", b"deny")
        && write_file(c"/proc/self/uid_map", id_map(&mut line, uid))
        && write_file(c"/proc/self/gid_map", id_map(&mut line, gid));
    // Without the maps the namespace still contains the provider; its ids
    // then read as the overflow id inside.
    let _ = ok;
    Mode::UserNamespace
}

/// `"<id> <id> 1"` in `buf`.
fn id_map(buf: &mut [u8; 32], id: u32) -> &[u8] {
    let mut digits = [0u8; 10];
    let digits = decimal(&mut digits, id);
    let n = concat(buf, &[digits, b" ", digits, b" 1"]);
    &buf[..n]
}

/// The decimal digits of `v`, most significant first, at the end of `buf`
/// (async-signal-safe: no allocation, no formatting machinery).
fn decimal(buf: &mut [u8; 10], mut v: u32) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[at..];
        }
    }
}

/// `parts` one after the other from the start of `buf`; the bytes written.
fn concat(buf: &mut [u8], parts: &[&[u8]]) -> usize {
    let mut at = 0;
    for part in parts {
        buf[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    at
}

/// Writes `bytes` to the file `path`.
///
/// # Safety
/// Async-signal-safe: open, write, close.
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> bool {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    libc::close(fd);
    n == bytes.len() as isize
}

/// Closes every descriptor from `first` on.
///
/// # Safety
/// Async-signal-safe (close_range, or close in a loop where the kernel
/// lacks it).
unsafe fn close_from(first: i32) {
    if libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0) != 0 {
        let mut lim: libc::rlimit = std::mem::zeroed();
        let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 { lim.rlim_cur.min(1 << 16) } else { 1024 };
        for fd in first..top as i32 {
            libc::close(fd);
        }
    }
}

/// Kills every process whose parent is the guard `me` (the provider's
/// orphans, reparented here), reaps them, and again, until none is left:
/// each round reaches the children of the processes the last one killed.
///
/// # Safety
/// Async-signal-safe: reads /proc with stack buffers.
unsafe fn kill_orphans(me: i32) {
    for _ in 0..MAX_ROUNDS {
        let killed = for_each_child(me, |pid| {
            libc::kill(pid, libc::SIGKILL);
        });
        let mut reaped = false;
        loop {
            let mut s: i32 = 0;
            let r = libc::waitpid(-1, &mut s, libc::WNOHANG);
            if r <= 0 {
                break;
            }
            reaped = true;
        }
        if killed == 0 && !reaped {
            // No child in /proc and none to reap: is there any at all?
            let mut s: i32 = 0;
            if libc::waitpid(-1, &mut s, libc::WNOHANG) < 0 {
                return;
            }
        }
        let pause = libc::timespec { tv_sec: 0, tv_nsec: 2_000_000 };
        libc::nanosleep(&pause, std::ptr::null_mut());
    }
}

#[repr(C, align(8))]
struct DirBuf([u8; 4096]);

/// Calls `f` with the pid of every process whose parent is `parent`, read
/// from /proc; how many it found.
///
/// # Safety
/// Async-signal-safe: open, getdents64, read and close on stack buffers.
unsafe fn for_each_child(parent: i32, mut f: impl FnMut(i32)) -> u32 {
    let dir = libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
    if dir < 0 {
        return 0;
    }
    let mut found = 0;
    let mut buf = DirBuf([0; 4096]);
    loop {
        let n = libc::syscall(libc::SYS_getdents64, dir, buf.0.as_mut_ptr(), buf.0.len());
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name.
            let reclen = u16::from_ne_bytes([buf.0[at + 16], buf.0[at + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let name = &buf.0[at + 19..(at + reclen).min(n as usize)];
            if let Some(pid) = parse_pid(name) {
                if parent_of(pid) == Some(parent) {
                    f(pid);
                    found += 1;
                }
            }
            at += reclen;
        }
    }
    libc::close(dir);
    found
}

/// A /proc entry's name as a pid (digits up to the NUL).
fn parse_pid(name: &[u8]) -> Option<i32> {
    let mut v: i32 = 0;
    let mut digits = 0;
    for &b in name {
        match b {
            0 => break,
            b'0'..=b'9' => {
                v = v.checked_mul(10)?.checked_add((b - b'0') as i32)?;
                digits += 1;
            }
            _ => return None,
        }
    }
    (digits > 0).then_some(v)
}

/// The parent of `pid`, from /proc/PID/stat (after the command's closing
/// parenthesis: state, then ppid).
///
/// # Safety
/// Async-signal-safe: open, read and close on stack buffers.
unsafe fn parent_of(pid: i32) -> Option<i32> {
    // NUL-terminated: 6 + at most 10 + 5 bytes written.
    let mut path = [0u8; 32];
    let mut digits = [0u8; 10];
    concat(&mut path, &[b"/proc/", decimal(&mut digits, u32::try_from(pid).ok()?), b"/stat"]);
    let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 512];
    let r = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    libc::close(fd);
    if r <= 0 {
        return None;
    }
    let text = &buf[..r as usize];
    let close = text.iter().rposition(|&b| b == b')')?;
    // ") S 1234 ..."
    let rest = text.get(close + 3..)?;
    let space = rest.iter().position(|&b| b == b' ')?;
    let ppid = rest.get(space + 1..)?;
    let end = ppid.iter().position(|&b| b == b' ').unwrap_or(ppid.len());
    parse_pid(&ppid[..end])
}

/// Ends the guard as the provider ended: the same exit code, or the same
/// signal (without a core file).
///
/// # Safety
/// Async-signal-safe.
unsafe fn mirror(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
    libc::_exit(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 127 })
}

/// Ends a provider and its guard: SIGTERM to the guard, which kills the
/// provider and everything it left; if the guard has not ended within a
/// grace period, SIGKILL to the provider's group and the guard. Reaps the
/// guard: its status (the provider's own, mirrored), when it ended.
pub fn stop(guard: i32, provider: i32) -> Option<std::process::ExitStatus> {
    // SAFETY: signals to the guard this process forked and has not reaped
    // (it is reaped only here and in `try_wait`, which callers do not call
    // after this).
    unsafe {
        libc::kill(guard, libc::SIGTERM);
    }
    let start = Instant::now();
    loop {
        if let Some(s) = try_wait(guard) {
            return Some(s);
        }
        if start.elapsed() >= GUARD_GRACE {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: as above; the provider's group was created by its guard.
    unsafe {
        if provider > 0 {
            libc::kill(-provider, libc::SIGKILL);
        }
        libc::kill(guard, libc::SIGKILL);
    }
    wait(guard)
}

/// The guard's status if it has ended (and reaps it).
pub fn try_wait(guard: i32) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut s: i32 = 0;
    // SAFETY: waitpid on a child of this process, into a local int.
    let r = unsafe { libc::waitpid(guard, &mut s, libc::WNOHANG) };
    (r == guard).then(|| std::process::ExitStatus::from_raw(s))
}

/// Waits for the guard to end (and reaps it).
pub fn wait(guard: i32) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut s: i32 = 0;
    loop {
        // SAFETY: waitpid on a child of this process, into a local int.
        let r = unsafe { libc::waitpid(guard, &mut s, 0) };
        if r == guard {
            return Some(std::process::ExitStatus::from_raw(s));
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_and_parents_are_read_from_proc() {
        assert_eq!(parse_pid(b"123\0junk"), Some(123));
        assert_eq!(parse_pid(b"self\0"), None);
        assert_eq!(parse_pid(b"\0"), None);
        assert_eq!(parse_pid(b"99999999999\0"), None);
        let mut buf = [0u8; 32];
        assert_eq!(id_map(&mut buf, 0), b"0 0 1");
        assert_eq!(id_map(&mut buf, u32::MAX), b"4294967295 4294967295 1");
        // SAFETY: reads /proc for this process.
        let me = unsafe { libc::getpid() };
        // SAFETY: as above.
        assert_eq!(unsafe { parent_of(me) }, Some(unsafe { libc::getppid() }));
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let e = spawn(&["/nonexistent/prog".into()], &[]).err().unwrap();
        assert!(e.contains("cannot start") && e.contains("/nonexistent/prog"), "{e}");
        let e = spawn(&["no-such-program-bitparity".into()], &[]).err().unwrap();
        assert!(e.contains("no such program on PATH"), "{e}");
    }

    #[test]
    fn a_provider_runs_and_its_status_is_its_own() {
        use std::io::Read;
        let mut c = spawn(&["sh".into(), "-c".into(), "echo hi; exit 7".into()], &[]).unwrap();
        let mut out = String::new();
        c.stdout.read_to_string(&mut out).unwrap();
        assert_eq!(out, "hi\n");
        let s = wait(c.guard).unwrap();
        assert_eq!(s.code(), Some(7));
        let mut c = spawn(&["sh".into(), "-c".into(), "kill -SEGV $$".into()], &[]).unwrap();
        let mut out = String::new();
        c.stdout.read_to_string(&mut out).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(wait(c.guard).unwrap().signal(), Some(libc::SIGSEGV));
    }
}
