//! `bitparity mutants`: mutation testing of the CUDA kernels (docs/mutants.md),
//! and the two hidden commands its children run.

use super::output::{emit, write_output};
use super::Outcome;
use crate::devices;
use crate::fsio::{check_writable, read_capped, write_report};
use crate::knobs;
use crate::report::Verdict;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `bitparity mutants`' arguments.
#[derive(clap::Args)]
pub(crate) struct MutantsArgs {
    /// Only mutants reaching this op's kernel (repeatable).
    #[arg(long)]
    pub(crate) op: Vec<String>,
    /// Only mutants of this file of kernels/ (`router.cu`, `common.cuh`;
    /// repeatable).
    #[arg(long, value_name = "FILE")]
    pub(crate) kernel: Vec<String>,
    /// Cases each mutant is hunted with, per op it reaches.
    #[arg(long, default_value = "1000", value_name = "N")]
    pub(crate) budget_cases: u64,
    /// Seconds each mutant is hunted for at most (with --budget-cases,
    /// whichever ends first).
    #[arg(long, value_name = "S")]
    pub(crate) seconds: Option<f64>,
    /// A child still hunting this many seconds after its compile is
    /// counted timed out and killed (default: --seconds + 60, else 300).
    #[arg(long, value_name = "S")]
    pub(crate) timeout: Option<f64>,
    /// Start no mutant after this many seconds; the rest are not run.
    #[arg(long, value_name = "S")]
    pub(crate) campaign_seconds: Option<f64>,
    /// Only this mutant (repeatable; ids as --list prints them).
    #[arg(long)]
    pub(crate) id: Vec<String>,
    /// At most N mutants per file, spread over the rules (drawn by --seed).
    #[arg(long, value_name = "N")]
    pub(crate) sample: Option<usize>,
    /// Children at a time (default: the CPU cores).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// GPUs the children run on, round-robin: `all`, or ordinals like `0,1`
    /// (default: $BITPARITY_CUDA_DEVICE, else 0).
    #[arg(long, value_name = "all|0,1,..")]
    pub(crate) devices: Option<String>,
    /// Seed of the cases (and of --sample).
    #[arg(long, default_value = "1")]
    pub(crate) seed: String,
    /// Only list the mutants (id, line, rule, diff).
    #[arg(long)]
    pub(crate) list: bool,
    /// No GPU: run NVRTC's front end on every mutant (the CI check); exit 1
    /// when a rule yields no mutant or none of a rule's mutants compiles.
    #[arg(long)]
    pub(crate) compile_only: bool,
    /// Write the kill matrix as JSON here (`-`: stdout).
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write the kill matrix as Markdown here.
    #[arg(long)]
    pub(crate) markdown: Option<PathBuf>,
    /// Write the kill matrix as one HTML page here.
    #[arg(long)]
    pub(crate) html: Option<PathBuf>,
    /// The triage of survivors (default: the kernels/mutants.toml built in).
    #[arg(long, value_name = "PATH")]
    pub(crate) triage: Option<PathBuf>,
    /// Run every survivor again under these compute-sanitizer tools, in
    /// turn (comma separated: memcheck, racecheck, synccheck, initcheck):
    /// a mutant a tool reports on is killed by it. Each tool first runs on
    /// the original kernels, and is not used when it reports on them.
    #[arg(long, value_name = "TOOLS", conflicts_with = "compile_only")]
    pub(crate) sanitizer: Option<String>,
    /// Cases per op of each run under a sanitizer tool.
    #[arg(long, default_value = "24", value_name = "N")]
    pub(crate) sanitizer_cases: u64,
    /// No run: combine these earlier --json reports (repeatable; a later
    /// one's outcome of a mutant replaces an earlier one's, except that a
    /// kill stands over a later survival) and judge them again with the
    /// triage.
    #[arg(long, value_name = "JSON", conflicts_with = "compile_only")]
    pub(crate) from: Vec<PathBuf>,
    /// The corpus whose entries of an op every mutant meets before the
    /// generated cases; the original kernels must pass them first
    /// (default: regressions, when that folder exists).
    #[arg(long, value_name = "DIR")]
    pub(crate) corpus: Option<PathBuf>,
    /// Generated cases only.
    #[arg(long, conflicts_with = "corpus")]
    pub(crate) no_corpus: bool,
    /// Judge each case by these properties only, in this order (repeatable;
    /// default: the selftest's conformance, padding, offset-stride,
    /// batch-invariance, determinism, validation). For tier B's reference
    /// shapes, whose CPU oracles take minutes a case, the ones that compare
    /// the kernel with itself.
    #[arg(long, value_name = "PROPERTY")]
    pub(crate) property: Vec<String>,
}

pub(super) fn run(a: MutantsArgs) -> Outcome {
    use crate::mutants::{campaign, report as mreport, triage::Triage, Rule};
    let seed = knobs::parse_seed(&a.seed).map_err(|e| format!("--seed: {e}"))?;
    let positive = |x: Option<f64>, what: &str| match x {
        Some(s) if s.is_nan() || s <= 0.0 || s > 1e9 => Err(format!("{what} must be a positive number of seconds")),
        s => Ok(s),
    };
    let properties = hunt_properties(&a.property)?;
    let seconds = positive(a.seconds, "--seconds")?;
    let timeout = positive(a.timeout, "--timeout")?.unwrap_or(seconds.map_or(300.0, |s| s + 60.0));
    let campaign_seconds = positive(a.campaign_seconds, "--campaign-seconds")?;
    for p in [&a.json, &a.markdown, &a.html].into_iter().flatten() {
        check_writable(p)?;
    }
    let triage = match &a.triage {
        None => Triage::parse(crate::mutants::triage::EMBEDDED, "kernels/mutants.toml")?,
        Some(p) => {
            let text = read_capped(p, 1 << 20)?;
            let text = String::from_utf8(text).map_err(|_| format!("{}: not UTF-8", p.display()))?;
            Triage::parse(&text, &p.display().to_string())?
        }
    };
    let ids: std::collections::HashSet<String> = crate::mutants::all().into_iter().map(|m| m.id).collect();
    let stale = triage.stale(&ids.iter().map(String::as_str).collect());
    if !stale.is_empty() {
        eprintln!("warning: the triage names mutants these sources no longer have: {}", stale.join(", "));
    }
    let whole = a.op.is_empty() && a.kernel.is_empty() && a.id.is_empty() && a.sample.is_none();
    let sel = campaign::Selection { ops: a.op, files: a.kernel, ids: a.id, sample: a.sample, seed };
    let chosen = campaign::select(&sel)?;
    if a.list {
        for (m, run) in &chosen {
            emit(&format!(
                "{}{} line {} {}\n    -{}\n    +{}\n",
                m.id,
                if *run { "" } else { " (sampled out)" },
                m.line,
                m.rule.name(),
                m.before,
                m.after
            ));
        }
        eprintln!("{} mutants", chosen.len());
        return Ok(0);
    }
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let header;
    let mut interrupt = Arc::new(AtomicBool::new(false));
    let rows = if !a.from.is_empty() {
        let mut texts = Vec::new();
        for p in &a.from {
            let bytes = read_capped(p, 256 << 20)?;
            let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", p.display()))?;
            texts.push((p.display().to_string(), text));
        }
        let (rows, stale) = mreport::from_runs(chosen.into_iter().map(|(m, _)| m).collect(), &texts, &triage)?;
        if !stale.is_empty() {
            eprintln!("warning: the reports name mutants these sources no longer have: {}", stale.join(", "));
        }
        let names: Vec<String> = a.from.iter().map(|p| p.display().to_string()).collect();
        header = format!("combined from {}; triage of this binary", names.join(", "));
        rows
    } else if a.compile_only {
        let mutants: Vec<_> = chosen.into_iter().filter(|(_, run)| *run).map(|(m, _)| m).collect();
        eprintln!("compiling {} mutants with NVRTC's front end on {jobs} threads...", mutants.len());
        header = format!("{} mutants, NVRTC front end only ({})", mutants.len(), crate::subject::cuda::nvrtc::CI_ARCH);
        campaign::compile_only(mutants, jobs, &triage)?
    } else {
        let devices = match &a.devices {
            Some(spec) => devices::parse(spec, crate::subject::cuda::device::device_count)?,
            None => vec![knobs::get_or(knobs::CUDA_DEVICE, 0)?],
        };
        let corpus = match (a.no_corpus, a.corpus) {
            (true, _) => None,
            (false, Some(dir)) if !dir.is_dir() => return Err(format!("--corpus {}: no such folder", dir.display())),
            (false, Some(dir)) => Some(dir),
            (false, None) => Some(PathBuf::from("regressions")).filter(|d| d.is_dir()),
        };
        match &corpus {
            Some(dir) => eprintln!("{}", campaign::corpus_summary(dir, &chosen)?),
            None => eprintln!("no corpus: generated cases only"),
        }
        // The first interrupt stops the children and writes the report of
        // what was judged (src/interrupt.rs).
        interrupt = crate::interrupt::install(None);
        let plan = campaign::Plan {
            corpus,
            properties,
            seed,
            cases: a.budget_cases,
            seconds,
            hunt_limit: Duration::from_secs_f64(timeout),
            compile_limit: Duration::from_secs(900),
            campaign_limit: campaign_seconds.map(Duration::from_secs_f64),
            jobs,
            devices,
            sanitizer: a.sanitizer.as_deref().map(|t| sanitizer(t, a.sanitizer_cases)).transpose()?,
            interrupt: interrupt.clone(),
        };
        let run = chosen.iter().filter(|(_, r)| *r).count();
        eprintln!(
            "{run} mutants, {jobs} at a time on GPUs {:?}, {} cases each (seed {seed})...",
            plan.devices, plan.cases
        );
        let names: Vec<&str> = plan.properties.iter().map(|p| p.name()).collect();
        header = format!(
            "{run} mutants run, seed {seed}, {} cases{} per op{}{}, bitparity {}",
            plan.cases,
            seconds.map_or(String::new(), |s| format!(" or {s} s")),
            plan.corpus.as_ref().map_or(String::new(), |c| format!(" after the corpus {}", c.display())),
            plan.sanitizer.as_ref().map_or(String::new(), |z| format!(
                "; survivors again under compute-sanitizer {} ({} cases)",
                z.tools.join(", "),
                z.cases
            )),
            env!("CARGO_PKG_VERSION")
        ) + &if names.len() < crate::selftest::HUNT.len() {
            format!("; judged by {} only", names.join(", "))
        } else {
            String::new()
        };
        campaign::run(chosen, &plan, &triage)?
    };
    let scores = mreport::scores(&rows);
    let table = mreport::table(&scores);
    // The files first: a closed stdout or stderr (a pager quit early) must
    // not cost the reports.
    if let Some(p) = &a.json {
        let v = serde_json::json!({ "header": header, "scores": scores, "mutants": rows });
        write_output(p, &(serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n"))?;
    }
    if let Some(p) = &a.markdown {
        write_report(p, mreport::markdown(&rows, &header).as_bytes())?;
    }
    if let Some(p) = &a.html {
        write_report(p, mreport::html(&rows, &header).as_bytes())?;
    }
    if a.json.as_deref() == Some(Path::new("-")) {
        eprint!("{table}");
    } else {
        emit(&table);
    }
    for r in mreport::survivors(&rows) {
        eprintln!(
            "{} {}: {} line {} {}\n    -{}\n    +{}",
            r.outcome.label(),
            r.mutant.id,
            r.mutant.file,
            r.mutant.line,
            r.mutant.rule.name(),
            r.mutant.before,
            r.mutant.after
        );
    }
    if a.compile_only {
        // A rule that yields no mutant, or only mutants that do not compile,
        // is broken.
        let mut bad = Vec::new();
        for rule in Rule::ALL {
            let of: Vec<_> = rows.iter().filter(|r| r.mutant.rule == rule).collect();
            let compiling = of.iter().filter(|r| r.outcome == mreport::Outcome::Compiles).count();
            if compiling == 0 {
                bad.push(format!("{} ({} mutants, none compiles)", rule.name(), of.len()));
            }
        }
        if !bad.is_empty() && whole {
            eprintln!("broken rules: {}", bad.join(", "));
            return Ok(1);
        }
        return Ok(0);
    }
    // Judged means a verdict of the properties: a campaign whose every child
    // crashed or timed out (a GPU that cannot run them) judged nothing.
    let judged =
        rows.iter().any(|r| matches!(r.outcome, mreport::Outcome::Killed { .. } | mreport::Outcome::Survived { .. }));
    Ok(if interrupt.load(Ordering::SeqCst) {
        130
    } else if judged {
        0
    } else {
        Verdict::NothingJudged.exit_code()
    })
}

/// The properties of `bitparity mutants --property`: the hunt's, in the
/// order given, each once; all of them when none is given.
fn hunt_properties(names: &[String]) -> Result<Vec<crate::props::Property>, String> {
    use crate::selftest::HUNT;
    if names.is_empty() {
        return Ok(HUNT.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let p = HUNT.into_iter().find(|p| p.name() == n).ok_or_else(|| {
            let known: Vec<&str> = HUNT.iter().map(|p| p.name()).collect();
            format!("--property {n}: not a property a mutant is hunted with (those: {})", known.join(", "))
        })?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The sanitizer stage of `mutants --sanitizer TOOLS`: the tools checked by
/// name, compute-sanitizer found (PATH, then $CUDA_HOME/bin and
/// /usr/local/cuda/bin), before any mutant runs.
fn sanitizer(tools: &str, cases: u64) -> Result<crate::mutants::sanitizer::Sanitizer, String> {
    const TOOLS: [&str; 4] = ["memcheck", "racecheck", "synccheck", "initcheck"];
    let tools: Vec<String> = tools.split(',').map(|t| t.trim().to_string()).collect();
    if let Some(t) = tools.iter().find(|t| !TOOLS.contains(&t.as_str())) {
        return Err(format!("--sanitizer: no tool {t:?} (known: {})", TOOLS.join(", ")));
    }
    if cases == 0 {
        return Err("--sanitizer-cases must be at least 1".into());
    }
    let name = "compute-sanitizer";
    let dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("bin")))
        .chain([PathBuf::from("/usr/local/cuda/bin")]);
    let exe = dirs
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("--sanitizer: {name} is not on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin"))?;
    Ok(crate::mutants::sanitizer::Sanitizer { exe, tools, cases })
}

/// `mutant-child`: one mutant hunted in its own process; its outcome as a
/// JSON line.
pub(super) fn child(
    id: &str,
    seed: &str,
    cases: u64,
    seconds: Option<f64>,
    originals: &Path,
    corpus: Option<&Path>,
    property: &[String],
) -> Outcome {
    let properties = hunt_properties(property)?;
    let seed = knobs::parse_seed(seed).map_err(|e| format!("--seed: {e}"))?;
    let ask = crate::mutants::child::Ask { id, seed, cases, seconds, originals, corpus, properties: &properties };
    let outcome = crate::mutants::child::run(&ask);
    emit(&format!("{}\n", serde_json::to_string(&outcome).unwrap_or_default()));
    Ok(0)
}

/// `mutant-compile`: NVRTC's front end on these mutants, a JSON line each.
pub(super) fn compile(ids: &[String]) -> Outcome {
    for line in crate::mutants::child::syntax_check(ids) {
        emit(&format!("{}\n", serde_json::to_string(&line).unwrap_or_default()));
    }
    Ok(0)
}
