//! A campaign: the mutants chosen, the originals compiled once, then one
//! child process per mutant ([`super::child`]), `jobs` at a time, spread
//! round-robin over the host's GPUs, each under a time limit, and with
//! `--sanitizer` the survivors once more under each compute-sanitizer tool
//! ([`Sanitizer`]); or, without a GPU, only NVRTC's front end on every
//! mutant (`--compile-only`, the CI check that every rule yields mutants
//! that compile).

use super::child::{self, HUNTING};
use super::report::{Outcome, Row};
use super::rules::Rule;
use super::sanitizer::{self, Sanitizer, Wrap};
use super::triage::Triage;
use super::{all, op_kernels, Mutant};
use crate::exec::process::kill_group;
use crate::knobs;
use crate::subject::cuda::{self, nvrtc, KernelId};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which mutants a campaign takes.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Only mutants reaching these ops' kernels (empty: every op).
    pub ops: Vec<String>,
    /// Only mutants of these files (empty: every file).
    pub files: Vec<String>,
    /// Only these mutants (empty: every one).
    pub ids: Vec<String>,
    /// At most this many per file, spread over the rules (a sample drawn
    /// by `seed`); the rest are reported not run.
    pub sample: Option<usize>,
    pub seed: u64,
}

/// The mutants chosen, each with whether it runs (false: sampled out).
pub fn select(sel: &Selection) -> Result<Vec<(Mutant, bool)>, String> {
    let files: Vec<&str> = super::files().iter().map(|f| f.name).collect();
    for f in &sel.files {
        if !files.contains(&f.as_str()) {
            return Err(format!("--kernel {f:?}: not a mutated file (known: {})", files.join(", ")));
        }
    }
    let mut kernels = Vec::new();
    for o in &sel.ops {
        let of_op: Vec<KernelId> = op_kernels().into_iter().filter(|k| k.op() == Some(o.as_str())).collect();
        if of_op.is_empty() {
            return Err(format!("--op {o:?}: no op with a CUDA kernel of that name"));
        }
        kernels.extend(of_op);
    }
    let every = all();
    for id in &sel.ids {
        if !every.iter().any(|m| &m.id == id) {
            return Err(format!("--id {id:?}: no such mutant in these sources (bitparity mutants --list)"));
        }
    }
    let chosen: Vec<Mutant> = every
        .into_iter()
        .filter(|m| sel.ids.is_empty() || sel.ids.contains(&m.id))
        .filter(|m| sel.files.is_empty() || sel.files.iter().any(|f| f == m.file))
        .filter(|m| kernels.is_empty() || m.kernels().iter().any(|k| kernels.contains(k)))
        .collect();
    let Some(n) = sel.sample else { return Ok(chosen.into_iter().map(|m| (m, true)).collect()) };
    // Per file: the mutants of each rule in an order drawn from the seed,
    // then taken round-robin over the rules, so a sample has every rule.
    let mut keep = std::collections::HashSet::new();
    for f in files {
        let mut by_rule: Vec<Vec<&Mutant>> = Rule::ALL
            .iter()
            .map(|r| {
                let mut v: Vec<&Mutant> = chosen.iter().filter(|m| m.file == f && m.rule == *r).collect();
                v.sort_by_key(|m| super::fnv1a(format!("{}\0{}", sel.seed, m.id)));
                v
            })
            .collect();
        let mut taken = 0;
        while taken < n && by_rule.iter().any(|v| !v.is_empty()) {
            for v in by_rule.iter_mut().filter(|v| !v.is_empty()) {
                if taken < n {
                    keep.insert(v.remove(0).id.clone());
                    taken += 1;
                }
            }
        }
    }
    Ok(chosen.into_iter().map(|m| (keep.contains(&m.id), m)).map(|(k, m)| (m, k)).collect())
}

/// The CI check: NVRTC's front end on every kernel each mutant reaches, in
/// `jobs` child processes (`bitparity mutant-compile`: NVRTC compiles one
/// program at a time in a process, threads would wait on each other). `Err`
/// when an unmutated kernel does not compile or a child fails.
pub fn compile_only(mutants: Vec<Mutant>, jobs: usize, triage: &Triage) -> Result<Vec<Row>, String> {
    for k in KernelId::ALL {
        let headers: Vec<(&'static str, &str)> = cuda::HEADERS.iter().map(|h| (h.name, h.text)).collect();
        let extra = nvrtc::extra_options()?;
        nvrtc::compile_with(
            k.source().name,
            k.source().text,
            &headers,
            &k.arch(nvrtc::CI_ARCH),
            &extra,
            nvrtc::Output::SyntaxOnly,
        )
        .map_err(|e| format!("the unmutated {} does not compile: {e}", k.source().name))?;
    }
    let exe = std::env::current_exe().map_err(|e| format!("bitparity's own path: {e}"))?;
    let jobs = jobs.clamp(1, mutants.len().max(1));
    let total = mutants.len();
    let children: Vec<Child> = (0..jobs)
        .map(|j| {
            Command::new(&exe)
                .arg("mutant-compile")
                .args(mutants.iter().skip(j).step_by(jobs).map(|m| &m.id))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("starting {}: {e}", exe.display()))
        })
        .collect::<Result<_, _>>()?;
    let done = std::sync::atomic::AtomicUsize::new(0);
    let mut outcomes = std::collections::HashMap::new();
    std::thread::scope(|s| {
        let readers: Vec<_> = children
            .into_iter()
            .map(|mut c| {
                let done = &done;
                s.spawn(move || {
                    let mut lines = Vec::new();
                    for l in BufReader::new(c.stdout.take().expect("piped")).lines().map_while(Result::ok) {
                        lines.push(
                            serde_json::from_str::<child::Line>(&l)
                                .map_err(|e| format!("a compile child said {l:?}: {e}"))?,
                        );
                        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        if n.is_multiple_of(100) || n == total {
                            eprintln!("compiled {n}/{total} mutants");
                        }
                    }
                    let status = c.wait().map_err(|e| e.to_string())?;
                    if !status.success() {
                        return Err(format!("a compile child ended with {status}"));
                    }
                    Ok(lines)
                })
            })
            .collect();
        for r in readers {
            let lines = r.join().map_err(|_| "a compile reader panicked".to_string())??;
            outcomes.extend(lines.into_iter().map(|l| (l.id, l.outcome)));
        }
        Ok::<(), String>(())
    })?;
    mutants
        .into_iter()
        .map(|m| {
            let o = outcomes.remove(&m.id).ok_or_else(|| format!("no compile verdict on {}", m.id))?;
            Ok(Row::new(m, o, 0.0, triage))
        })
        .collect()
}

/// How a GPU campaign runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The corpus whose entries each child judges first (`regressions`).
    pub corpus: Option<PathBuf>,
    /// The properties each case is judged by, in order.
    pub properties: Vec<crate::props::Property>,
    pub seed: u64,
    /// Cases per op each mutant is hunted with.
    pub cases: u64,
    /// Seconds of hunting per mutant (its child stops generating then).
    pub seconds: Option<f64>,
    /// A child still hunting this long after its compile is killed
    /// (timed out).
    pub hunt_limit: Duration,
    /// A child still compiling this long after its start is killed.
    pub compile_limit: Duration,
    /// No child is started after this long; the rest are not run.
    pub campaign_limit: Option<Duration>,
    pub jobs: usize,
    /// GPU ordinals, one per child round-robin.
    pub devices: Vec<usize>,
    /// The sanitizer stage, if asked (`--sanitizer`).
    pub sanitizer: Option<Sanitizer>,
    /// Set by SIGINT: the children running are stopped, none starts, and
    /// the report says what was judged until then (the rest not run).
    pub interrupt: Arc<AtomicBool>,
}

struct Running {
    index: usize,
    child: Child,
    started: Instant,
    hunting: Arc<Mutex<Option<Instant>>>,
    stdout: JoinHandle<Vec<String>>,
    stderr: JoinHandle<String>,
}

/// Runs `mutants` (those marked true; the others are reported not run) on
/// the GPUs: the rows in the mutants' order.
pub fn run(mutants: Vec<(Mutant, bool)>, plan: &Plan, triage: &Triage) -> Result<Vec<Row>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("bitparity's own path: {e}"))?;
    let dev = cuda::device()?;
    let kernels: Vec<KernelId> =
        KernelId::ALL.into_iter().filter(|k| mutants.iter().any(|(m, run)| *run && m.kernels().contains(k))).collect();
    let dir = crate::fsio::private_temp_dir("bitparity-mutants")?;
    let start = Instant::now();
    let result = originals(&kernels, dev.arch(), &dir).and_then(|()| {
        corpus_baseline(&exe, &dir, &kernels, plan)?;
        let jobs: Vec<Job> = mutants.iter().map(|(m, run)| Job::of(m, *run)).collect();
        let outcomes = spawn_all(&exe, &dir, &jobs, plan, None)?;
        match &plan.sanitizer {
            Some(san) => sanitizer::run(&exe, &dir, &mutants, outcomes, plan, san, start),
            None => Ok(outcomes),
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    let outcomes = result?;
    Ok(mutants
        .into_iter()
        .zip(outcomes)
        .map(|((m, _), o)| {
            let (o, s) = o.unwrap_or((Outcome::NotRun, 0.0));
            Row::new(m, o, s, triage)
        })
        .collect())
}

/// What the corpus holds for the ops of the mutants to run, as one line
/// (an error naming the file when an entry cannot be read).
pub fn corpus_summary(root: &Path, mutants: &[(Mutant, bool)]) -> Result<String, String> {
    let mut ops: Vec<&str> = mutants
        .iter()
        .filter(|(_, run)| *run)
        .flat_map(|(m, _)| m.kernels())
        .filter_map(|k| k.subject().map(|(op, _)| op))
        .collect();
    ops.sort();
    ops.dedup();
    let counts = ops
        .iter()
        .map(|op| child::corpus_entries(Some(root), op).map(|e| format!("{} of {op}", e.len())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(format!("corpus {}: {} entries judged before the generated cases", root.display(), counts.join(", ")))
}

/// The original kernels on the corpus alone, before any mutant: a kill by
/// an entry means something only when the unmutated kernel passes it.
fn corpus_baseline(exe: &Path, dir: &Path, kernels: &[KernelId], plan: &Plan) -> Result<(), String> {
    if plan.corpus.is_none() {
        return Ok(());
    }
    let jobs: Vec<Job> = kernels.iter().filter(|k| k.subject().is_some()).map(|&k| Job::original(k)).collect();
    eprintln!("the original kernels on the corpus...");
    let corpus_only = Plan { cases: 0, seconds: None, campaign_limit: None, ..plan.clone() };
    let verdicts = spawn_all(exe, dir, &jobs, &corpus_only, None)?;
    let failed: Vec<String> = jobs
        .iter()
        .zip(verdicts)
        .filter_map(|(j, v)| match v {
            Some((Outcome::Survived { .. }, _)) => None,
            Some((Outcome::Killed { message, .. }, _)) => Some(format!("{}: {message}", j.op)),
            Some((o, _)) => Some(format!("{}: {}", j.op, o.label())),
            None => Some(format!("{}: not run", j.op)),
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the original kernels fail the corpus, so its entries cannot judge mutants ({}); mend the kernel or \
             the entry, or run with --no-corpus",
            failed.join("; ")
        ))
    }
}

/// Compiles each original kernel to machine code into `dir`, in parallel.
fn originals(kernels: &[KernelId], arch: &str, dir: &Path) -> Result<(), String> {
    eprintln!("compiling the {} original kernels for {arch}...", kernels.len());
    let extra = nvrtc::extra_options()?;
    std::thread::scope(|s| {
        let handles: Vec<_> = kernels
            .iter()
            .map(|&k| {
                let extra = &extra;
                s.spawn(move || {
                    let c = nvrtc::compile(&k.source(), &k.arch(arch), extra).map_err(|e| e.to_string())?;
                    crate::fsio::write_atomic(&dir.join(child::cubin_name(k)), &c.cubin)
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().map_err(|_| "an original's compile panicked".to_string())?)
    })
}

/// What one child is asked: a mutant's id (or a kernel file's original
/// source), how progress names it, what a sanitizer's report is charged to
/// (the op and its subject; the kernel file for an original), and whether
/// it runs at all.
pub(super) struct Job {
    pub(super) id: String,
    pub(super) label: String,
    pub(super) op: String,
    pub(super) run: bool,
}

impl Job {
    /// Kernel `k`'s unmutated source, hunted as a mutant is: a baseline,
    /// charged to the kernel file.
    pub(super) fn original(k: KernelId) -> Job {
        let file = k.source().name;
        Job {
            id: format!("{}{file}", child::ORIGINAL),
            label: format!("the original {file}"),
            op: file.into(),
            run: true,
        }
    }
    pub(super) fn of(m: &Mutant, run: bool) -> Job {
        Job {
            id: m.id.clone(),
            label: format!("{} line {} {}", m.id, m.line, m.rule.name()),
            op: m.kernels().into_iter().find_map(KernelId::subject).map_or("-".into(), |(op, s)| child::who(op, s)),
            run,
        }
    }
}

/// One child per job marked to run, `plan.jobs` at a time: each one's
/// outcome and seconds (`None`: not run).
pub(super) fn spawn_all(
    exe: &Path,
    dir: &Path,
    jobs: &[Job],
    plan: &Plan,
    wrap: Option<&Wrap>,
) -> Result<Vec<Option<(Outcome, f64)>>, String> {
    let start = Instant::now();
    let total = jobs.iter().filter(|j| j.run).count();
    let mut outcomes: Vec<Option<(Outcome, f64)>> = vec![None; jobs.len()];
    let mut queue: std::collections::VecDeque<usize> = (0..jobs.len()).filter(|&i| jobs[i].run).collect();
    let mut running: Vec<Running> = Vec::new();
    let mut slot = 0usize;
    let mut done = 0usize;
    while !queue.is_empty() || !running.is_empty() {
        if plan.interrupt.load(Ordering::SeqCst) {
            eprintln!("interrupted: {} mutants running stopped, {} not started", running.len(), queue.len());
            for mut r in running.drain(..) {
                kill_group(&mut r.child);
                let _ = r.child.wait();
            }
            break;
        }
        let expired = plan.campaign_limit.is_some_and(|l| start.elapsed() >= l);
        if expired && !queue.is_empty() {
            eprintln!("campaign time is up: {} mutants not run", queue.len());
            queue.clear();
        }
        while running.len() < plan.jobs.max(1) {
            let Some(i) = queue.pop_front() else { break };
            let device = plan.devices[slot % plan.devices.len()];
            slot += 1;
            running.push(spawn(exe, dir, &jobs[i].id, i, device, plan, wrap)?);
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut k = 0;
        while k < running.len() {
            let r = &mut running[k];
            let status = r.child.try_wait().map_err(|e| format!("waiting on a mutant child: {e}"))?;
            let hunting = *r.hunting.lock().unwrap_or_else(|e| e.into_inner());
            let over = match hunting {
                Some(h) => h.elapsed() > plan.hunt_limit,
                None => r.started.elapsed() > plan.compile_limit,
            };
            if status.is_none() && !over {
                k += 1;
                continue;
            }
            let mut r = running.swap_remove(k);
            if status.is_none() {
                kill_group(&mut r.child);
            }
            let status = r.child.wait().map_err(|e| format!("waiting on a mutant child: {e}"))?;
            if plan.interrupt.load(Ordering::SeqCst) {
                // Ended by the interrupt or not, its verdict waits for the
                // next loop turn, which stops every child: not run.
                continue;
            }
            let lines = r.stdout.join().unwrap_or_default();
            let err = r.stderr.join().unwrap_or_default();
            let secs = r.started.elapsed().as_secs_f64();
            let verdict = lines.last().and_then(|l| serde_json::from_str::<Outcome>(l).ok());
            let outcome = if let (Some(w), false) = (wrap, over) {
                w.verdict(r.index, &jobs[r.index], status, verdict)
            } else if let (None, Some(o)) = (wrap, verdict.clone().filter(|_| over)) {
                // Its verdict was in, and its exit then waited on the GPU
                // (a kernel its watchdog gave up on is still running). Not
                // under a sanitizer tool, where only the tool's report kills.
                o
            } else if status.success() || status.code() == Some(1) {
                match verdict {
                    Some(o) if !over => o,
                    _ if over => Outcome::TimedOut { seconds: secs },
                    _ => Outcome::Crashed { detail: format!("{status}, no verdict; stderr: {err}") },
                }
            } else if over {
                Outcome::TimedOut { seconds: secs }
            } else {
                Outcome::Crashed { detail: format!("{status}; stderr: {err}") }
            };
            done += 1;
            eprintln!(
                "[{done}/{total}] {}: {}{} ({secs:.1} s)",
                jobs[r.index].label,
                outcome.label(),
                match &outcome {
                    // A tool's report does not say which case it came from.
                    Outcome::Killed { op, property, case, .. } if wrap.is_some() => {
                        format!(" by {op} {property} within {} cases", case + 1)
                    }
                    Outcome::Killed { op, property, case, .. } => format!(" by {op} {property} at case {}", case + 1),
                    _ => String::new(),
                }
            );
            outcomes[r.index] = Some((outcome, secs));
        }
    }
    Ok(outcomes)
}

/// How long a child's launch may run before its case fails as a hang: a
/// quarter of the hunt limit, at most `BITPARITY_KERNEL_TIMEOUT` (60 s
/// unless set).
fn watchdog(plan: &Plan) -> Duration {
    let quarter = plan.hunt_limit / 4;
    knobs::kernel_timeout().map_or(quarter, |set| set.min(quarter))
}

fn spawn(
    exe: &Path,
    dir: &Path,
    id: &str,
    index: usize,
    device: usize,
    plan: &Plan,
    wrap: Option<&Wrap>,
) -> Result<Running, String> {
    let mut cmd = match wrap {
        None => Command::new(exe),
        Some(w) => w.command(exe, index),
    };
    // A process group of its own: a terminal's SIGINT (or timeout's) is the
    // campaign's to handle; it stops the children itself.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.arg("mutant-child")
        .args(["--id", id, "--seed", &plan.seed.to_string(), "--cases", &plan.cases.to_string()])
        .arg("--originals")
        .arg(dir)
        .args(plan.corpus.iter().flat_map(|c| [std::ffi::OsStr::new("--corpus"), c.as_os_str()]))
        .args(plan.properties.iter().flat_map(|p| ["--property", p.name()]))
        .env(knobs::CUDA_DEVICE, device.to_string())
        // A hang is then a kill with its case, well before the child's limit.
        .env(knobs::KERNEL_TIMEOUT, watchdog(plan).as_secs_f64().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(s) = plan.seconds {
        cmd.args(["--seconds", &s.to_string()]);
    }
    let mut child = cmd.spawn().map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let hunting = Arc::new(Mutex::new(None));
    let out = child.stdout.take().expect("piped");
    let flag = hunting.clone();
    let stdout = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line == HUNTING {
                *flag.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            } else {
                lines.push(line);
            }
        }
        lines
    });
    let mut err = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        // The tail says why a child died; the rest is its progress.
        let tail: String = s.chars().rev().take(1500).collect::<Vec<_>>().into_iter().rev().collect();
        tail.trim().to_string()
    });
    Ok(Running { index, child, started: Instant::now(), hunting, stdout, stderr })
}
