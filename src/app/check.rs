//! `bitparity check`: generated adversarial cases, every property on every
//! subject, each failure shrunk and saved; on one process, or one worker
//! per GPU (`--devices`) merged as shards are.

use super::names::{subjects, Resolution, ResolveNames};
use super::output::{write_run, Outputs};
use super::Outcome;
use crate::corpus;
use crate::devices;
use crate::fsio::{check_folder_writable, check_writable};
use crate::gen::GenConfig;
use crate::harness::registry::{self, with_op, OPS};
use crate::harness::{Harness, OpCommand};
use crate::knobs;
use crate::merge;
use crate::props::Property;
use crate::report::{RunPlan, RunReport, Verdict};
use crate::runner::{OpSummary, Plan, SavePolicy, Shard};
use crate::subject::Skip;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// `bitparity check`'s arguments.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// The op (repeatable; every op when omitted).
    #[arg(long)]
    pub(crate) op: Vec<String>,
    /// Subjects: all (default: every available one), cuda, bugs,
    /// oracle:<profile>, model:<profile>, bug:<name>. Repeatable.
    #[arg(long)]
    pub(crate) subject: Vec<String>,
    /// Properties to run (default: all). Repeatable.
    #[arg(long, value_enum)]
    pub(crate) property: Vec<Property>,
    /// Cases per op (default $BITPARITY_CASES, else 1000 unless --seconds).
    #[arg(long)]
    pub(crate) cases: Option<u64>,
    /// Time budget in seconds, shared by the ops (with --cases, whichever
    /// ends first).
    #[arg(long)]
    pub(crate) seconds: Option<f64>,
    /// Seed of the case generator (default $BITPARITY_SEED, else random, printed).
    #[arg(long)]
    pub(crate) seed: Option<String>,
    /// Run only case N of the seed (a failure's reproduce command).
    #[arg(long, value_name = "N")]
    pub(crate) case: Option<u64>,
    /// Run shard I of N: every N-th case of the run, from the I-th (1-based;
    /// cargo-nextest's convention). `bitparity merge` combines the shards'
    /// --json summaries into the unsharded run's summary.
    #[arg(long, value_name = "I/N")]
    pub(crate) shard: Option<String>,
    /// One worker process per GPU: `all`, or ordinals like `0,1`. Each runs
    /// a shard of the run (of --shard's shard, when given) on its own GPU
    /// with its share of the CPU cores; their summaries are merged, and each
    /// device's cases per second reported.
    #[arg(long, value_name = "all|0,1,..")]
    pub(crate) devices: Option<String>,
    /// Write the summary as JSON here (`-`: stdout; the table then goes
    /// to stderr).
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write the summary as Markdown here (the nightly report).
    #[arg(long)]
    pub(crate) markdown: Option<PathBuf>,
    /// Write the report as one self-contained HTML page here: the table,
    /// every failure, charts of the coverage and of error/bound.
    #[arg(long)]
    pub(crate) html: Option<PathBuf>,
    /// The corpus new failures are saved to (default regressions/; failures
    /// of planted bugs are saved only when this is given).
    #[arg(long)]
    pub(crate) corpus: Option<PathBuf>,
    /// Do not save failures anywhere (they are still shrunk and printed).
    #[arg(long)]
    pub(crate) no_save: bool,
    /// No progress bar.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// The project's named external subjects (default: ./bitparity.toml
    /// when present).
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
}

pub(super) fn run(a: CheckArgs) -> Outcome {
    let ops_selected = registry::select(&a.op)?;
    registry::load_config(a.config.as_deref())?;
    let seconds = match a.seconds {
        None => None,
        Some(s) if s.is_nan() || s <= 0.0 => return Err("--seconds must be a positive number".into()),
        Some(s) => Some(Duration::try_from_secs_f64(s).map_err(|_| format!("--seconds {s} is too large"))?),
    };
    let seed = match a.seed.as_deref().map(knobs::parse_seed) {
        Some(s) => Some(s.map_err(|e| format!("--seed: {e}"))?),
        None => knobs::get::<String>(knobs::SEED)?
            .map(|s| knobs::parse_seed(&s))
            .transpose()
            .map_err(|e| format!("{}: {e}", knobs::SEED))?,
    };
    let env_cases: Option<u64> = knobs::get(knobs::CASES)?;
    let (cases, first_case) = match a.case {
        Some(n) => {
            if seed.is_none() {
                return Err("--case N needs the seed of the run it comes from (--seed X)".into());
            }
            if a.cases.is_some() || a.seconds.is_some() {
                return Err("--case N runs exactly one case: drop --cases and --seconds".into());
            }
            (Some(1), n)
        }
        None => (a.cases.or(env_cases).or(if seconds.is_some() { None } else { Some(1000) }), 0),
    };
    let shard = a.shard.as_deref().map(Shard::parse).transpose()?;
    if shard.is_some() && a.case.is_some() {
        return Err("--case N runs one case: it has no shards".into());
    }
    if cases == Some(0) {
        return Err(match a.cases {
            Some(_) => "--cases must be at least 1".into(),
            None => format!("{}=0: the case count must be at least 1", knobs::CASES),
        });
    }
    let gen = GenConfig::from_env()?;
    for p in a.json.iter().chain(&a.markdown).chain(&a.html) {
        check_writable(p)?;
    }
    if a.no_save && a.corpus.is_some() {
        return Err("--no-save and --corpus contradict each other".into());
    }
    if let (false, Some(dir)) = (a.no_save, a.corpus.as_deref().or(Some(Path::new("regressions")))) {
        check_folder_writable(dir, &OPS).map_err(|e| format!("{e} (--no-save saves nothing)"))?;
    }
    let save = if a.no_save {
        SavePolicy::default()
    } else {
        match &a.corpus {
            Some(dir) => SavePolicy { store: Some(Arc::new(corpus::Store::new(dir.clone()))), planted: true },
            None => {
                SavePolicy { store: Some(Arc::new(corpus::Store::new(PathBuf::from("regressions")))), planted: false }
            }
        }
    };
    // Which ops run which subjects: every name must mean something somewhere.
    let mut runs = Vec::new();
    let mut unavailable: Vec<Skip> = Vec::new();
    for name in &a.subject {
        let res: Vec<Resolution> =
            ops_selected.iter().filter_map(|&o| with_op(o, ResolveNames(std::slice::from_ref(name)))).collect();
        if res.iter().all(|r| r.found.is_empty() && r.unavailable.is_empty()) {
            let why = res.iter().flat_map(|r| r.unknown.iter().map(|(_, m)| m.clone())).next().unwrap_or_default();
            return Err(why);
        }
    }
    for &o in &ops_selected {
        if a.subject.is_empty() {
            runs.push(o);
            continue;
        }
        let r = with_op(o, ResolveNames(&a.subject)).unwrap_or_default();
        unavailable.extend(r.unavailable.iter().map(|s| Skip { suite: s.suite.clone(), reason: s.reason.clone() }));
        if !r.found.is_empty() {
            runs.push(o);
        } else if !a.op.is_empty() && r.unavailable.is_empty() {
            return Err(format!("op {o} has none of the subjects {}", a.subject.join(", ")));
        }
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    });
    if let Some(spec) = &a.devices {
        if a.case.is_some() {
            return Err("--case N runs one case: it has no devices to spread over".into());
        }
        let ordinals = devices::parse(spec, crate::subject::cuda::device::device_count)?;
        return check_on_devices(&a, &ordinals, shard, seed, cases);
    }
    // Interrupts (src/interrupt.rs): the first finishes the cases in flight,
    // a second drops them, and the report is written either way.
    let interrupt = crate::interrupt::install(Some(
        "interrupted: finishing the cases in flight, then the report (again to stop them at once)",
    ));
    let properties = if a.property.is_empty() { Property::ALL.to_vec() } else { a.property.clone() };
    let per_op = seconds.map(|d| d / runs.len().max(1) as u32);
    let plan = Plan {
        properties,
        cases,
        seconds: per_op,
        first_case,
        shard,
        seed,
        gen: gen.clone(),
        save,
        progress: !a.quiet,
        interrupt: interrupt.clone(),
    };
    if !a.quiet {
        eprintln!("bitparity check: seed {seed}, ops {}", runs.join(", "));
    }
    let mut summaries = Vec::new();
    for o in &runs {
        if interrupt.load(Ordering::SeqCst) {
            break;
        }
        summaries.extend(with_op(o, CheckOp { plan: &plan, names: &a.subject }));
    }
    let run = RunReport {
        seed,
        plan: RunPlan {
            cases,
            seconds_per_op: per_op.map(|d| d.as_secs_f64()),
            first_case,
            properties: plan.properties.clone(),
            subjects: a.subject.clone(),
            shard,
        },
        ops: summaries,
        gen,
        knobs: knobs::recorded(),
        unavailable,
        interrupted: interrupt.load(Ordering::SeqCst),
    };
    write_run(&run, &outputs(&a), "bitparity check")
}

/// `check --devices`: the workers, their throughput, the merged summary.
fn check_on_devices(a: &CheckArgs, ordinals: &[usize], shard: Option<Shard>, seed: u64, cases: Option<u64>) -> Outcome {
    let mut args: Vec<std::ffi::OsString> = vec!["--seed".into(), seed.to_string().into()];
    let mut flag = |name: &str, value: String| {
        args.push(name.into());
        args.push(value.into());
    };
    for o in &a.op {
        flag("--op", o.clone());
    }
    for s in &a.subject {
        flag("--subject", s.clone());
    }
    for p in &a.property {
        flag("--property", p.to_string());
    }
    if let Some(c) = cases {
        flag("--cases", c.to_string());
    }
    if let Some(s) = a.seconds {
        flag("--seconds", s.to_string());
    }
    if let Some(c) = &a.corpus {
        flag("--corpus", c.display().to_string());
    }
    if let Some(c) = &a.config {
        flag("--config", c.display().to_string());
    }
    if a.no_save {
        args.push("--no-save".into());
    }
    let dir = crate::fsio::private_temp_dir("bitparity-devices")?;
    // SIGINT reaches the workers too; this process waits for their summaries.
    crate::interrupt::install(Some("interrupted: the workers finish their cases in flight"));
    if !a.quiet {
        eprintln!("bitparity check: seed {seed}, {} workers on devices {ordinals:?}", ordinals.len());
    }
    let workers = devices::run(&args, ordinals, shard, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let workers = workers?;
    let mut parts = Vec::new();
    let mut lost = Vec::new();
    for w in workers {
        match w.summary {
            Ok(r) => {
                let secs = r.ops.iter().map(|o| o.seconds).sum::<f64>();
                eprintln!(
                    "device {} (shard {}): {} cases in {secs:.1} s, {:.1} cases/s, exit {}",
                    w.ordinal,
                    w.shard,
                    r.cases,
                    r.cases as f64 / secs.max(1e-9),
                    w.exit_code.map_or("by signal".into(), |c| c.to_string())
                );
                parts.push((format!("device {}", w.ordinal), r));
            }
            Err(e) => lost.push(e),
        }
    }
    if !lost.is_empty() {
        for e in &lost {
            eprintln!("FAILED: {e}");
        }
        return Ok(Verdict::Failed.exit_code());
    }
    let run = merge::merge(&parts)?;
    write_run(&run, &outputs(a), "bitparity check")
}

fn outputs(a: &CheckArgs) -> Outputs<'_> {
    Outputs { json: a.json.as_deref(), markdown: a.markdown.as_deref(), html: a.html.as_deref() }
}

/// `check` for one op: its subjects (those named, or every available
/// correct one), then the runner.
struct CheckOp<'a> {
    plan: &'a Plan,
    names: &'a [String],
}

impl OpCommand for CheckOp<'_> {
    type Output = OpSummary;
    fn run<O: Harness>(self) -> OpSummary {
        let (subjects, skipped) = subjects::<O>(self.names);
        crate::runner::check::<O>(self.plan, &subjects, skipped)
    }
}
