//! The `bitparity` command line.
//!
//! Exit codes (docs/cli.md, "Exit codes"): 0 every judged case passed; 1 a
//! property failed (or a corpus entry did not replay as it must); 2 a usage
//! or input error; 3 nothing was judged, or a subject named on the command
//! line could not run here; 130 interrupted (SIGINT or SIGTERM) with no failure.

use bitparity::corpus;
use bitparity::devices;
use bitparity::fsio::{check_folder_writable, check_writable, read_capped, write_report};
use bitparity::fuzzing::Direction;
use bitparity::gen::GenConfig;
use bitparity::harness::{op_by_name, ops, DynOp};
use bitparity::html;
use bitparity::import::{ImportError, MAX_ARTIFACT_BYTES};
use bitparity::knobs;
use bitparity::merge;
use bitparity::props::Property;
use bitparity::report::{self, RunPlan, RunReport, Verdict};
use bitparity::runner::{Plan, SavePolicy, Shard};
use bitparity::selftest;
use bitparity::subject::Skip;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "bitparity",
    version,
    about = "Proves GPU numeric kernels right: bit-exact and MPFR oracles, adversarial generators, a permanent corpus",
    after_help = "Exit codes: 0 passed; 1 a property failed; 2 usage or input error; \
                  3 nothing judged (or a named subject could not run); 130 interrupted."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `bitparity check`'s arguments.
#[derive(clap::Args)]
struct CheckArgs {
    /// The op (repeatable; every op when omitted).
    #[arg(long)]
    op: Vec<String>,
    /// Subjects: all (default: every available one), cuda, bugs,
    /// oracle:<profile>, model:<profile>, bug:<name>. Repeatable.
    #[arg(long)]
    subject: Vec<String>,
    /// Properties to run (default: all). Repeatable.
    #[arg(long, value_enum)]
    property: Vec<Property>,
    /// Cases per op (default $BITPARITY_CASES, else 1000 unless --seconds).
    #[arg(long)]
    cases: Option<u64>,
    /// Time budget in seconds, shared by the ops (with --cases, whichever
    /// ends first).
    #[arg(long)]
    seconds: Option<f64>,
    /// Seed of the case generator (default $BITPARITY_SEED, else random, printed).
    #[arg(long)]
    seed: Option<String>,
    /// Run only case N of the seed (a failure's reproduce command).
    #[arg(long, value_name = "N")]
    case: Option<u64>,
    /// Run shard I of N: every N-th case of the run, from the I-th (1-based;
    /// cargo-nextest's convention). `bitparity merge` combines the shards'
    /// --json summaries into the unsharded run's summary.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// One worker process per GPU: `all`, or ordinals like `0,1`. Each runs
    /// a shard of the run (of --shard's shard, when given) on its own GPU
    /// with its share of the CPU cores; their summaries are merged, and each
    /// device's cases per second reported.
    #[arg(long, value_name = "all|0,1,..")]
    devices: Option<String>,
    /// Write the summary as JSON here (`-`: stdout; the table then goes
    /// to stderr).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the summary as Markdown here (the nightly report).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write the report as one self-contained HTML page here: the table,
    /// every failure, charts of the coverage and of error/bound.
    #[arg(long)]
    html: Option<PathBuf>,
    /// The corpus new failures are saved to (default regressions/; failures
    /// of planted bugs are saved only when this is given).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Do not save failures anywhere (they are still shrunk and printed).
    #[arg(long)]
    no_save: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// The project's named external subjects (default: ./bitparity.toml
    /// when present).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

/// `bitparity mutants`' arguments.
#[derive(clap::Args)]
struct MutantsArgs {
    /// Only mutants reaching this op's kernel (repeatable).
    #[arg(long)]
    op: Vec<String>,
    /// Only mutants of this file of kernels/ (`router.cu`, `common.cuh`;
    /// repeatable).
    #[arg(long, value_name = "FILE")]
    kernel: Vec<String>,
    /// Cases each mutant is hunted with, per op it reaches.
    #[arg(long, default_value = "1000", value_name = "N")]
    budget_cases: u64,
    /// Seconds each mutant is hunted for at most (with --budget-cases,
    /// whichever ends first).
    #[arg(long, value_name = "S")]
    seconds: Option<f64>,
    /// A child still hunting this many seconds after its compile is
    /// counted timed out and killed (default: --seconds + 60, else 300).
    #[arg(long, value_name = "S")]
    timeout: Option<f64>,
    /// Start no mutant after this many seconds; the rest are not run.
    #[arg(long, value_name = "S")]
    campaign_seconds: Option<f64>,
    /// Only this mutant (repeatable; ids as --list prints them).
    #[arg(long)]
    id: Vec<String>,
    /// At most N mutants per file, spread over the rules (drawn by --seed).
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// Children at a time (default: the CPU cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// GPUs the children run on, round-robin: `all`, or ordinals like `0,1`
    /// (default: $BITPARITY_CUDA_DEVICE, else 0).
    #[arg(long, value_name = "all|0,1,..")]
    devices: Option<String>,
    /// Seed of the cases (and of --sample).
    #[arg(long, default_value = "1")]
    seed: String,
    /// Only list the mutants (id, line, rule, diff).
    #[arg(long)]
    list: bool,
    /// No GPU: run NVRTC's front end on every mutant (the CI check); exit 1
    /// when a rule yields no mutant or none of a rule's mutants compiles.
    #[arg(long)]
    compile_only: bool,
    /// Write the kill matrix as JSON here (`-`: stdout).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the kill matrix as Markdown here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write the kill matrix as one HTML page here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// The triage of survivors (default: the kernels/mutants.toml built in).
    #[arg(long, value_name = "PATH")]
    triage: Option<PathBuf>,
    /// Run every survivor again under these compute-sanitizer tools, in
    /// turn (comma separated: memcheck, racecheck, synccheck, initcheck):
    /// a mutant a tool reports on is killed by it. Each tool first runs on
    /// the original kernels, and is not used when it reports on them.
    #[arg(long, value_name = "TOOLS", conflicts_with = "compile_only")]
    sanitizer: Option<String>,
    /// Cases per op of each run under a sanitizer tool.
    #[arg(long, default_value = "24", value_name = "N")]
    sanitizer_cases: u64,
    /// No run: combine these earlier --json reports (repeatable; a later
    /// one's outcome of a mutant replaces an earlier one's, except that a
    /// kill stands over a later survival) and judge them again with the
    /// triage.
    #[arg(long, value_name = "JSON", conflicts_with = "compile_only")]
    from: Vec<PathBuf>,
    /// The corpus whose entries of an op every mutant meets before the
    /// generated cases; the original kernels must pass them first
    /// (default: regressions, when that folder exists).
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// Generated cases only.
    #[arg(long, conflicts_with = "corpus")]
    no_corpus: bool,
    /// Judge each case by these properties only, in this order (repeatable;
    /// default: the selftest's conformance, padding, offset-stride,
    /// batch-invariance, determinism, validation). For tier B's reference
    /// shapes, whose CPU oracles take minutes a case, the ones that compare
    /// the kernel with itself.
    #[arg(long, value_name = "PROPERTY")]
    property: Vec<String>,
}

// One Command is parsed per process: the size of its largest variant costs
// nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the properties on generated adversarial cases and print a table.
    Check(CheckArgs),
    /// Replay the regression corpus, or one entry, against every available subject.
    Replay {
        /// A corpus folder, one op's folder, or one entry (default: regressions).
        #[arg(default_value = "regressions")]
        path: PathBuf,
        /// Only entries of this op.
        #[arg(long)]
        op: Option<String>,
        /// Judge every entry on this subject too (repeatable): `cuda`,
        /// `oracle:<profile>`, an external subject (`exec:<command>`, a name
        /// of bitparity.toml). External subjects run only when named here:
        /// the subject an entry records is a label, never run.
        #[arg(long)]
        subject: Vec<String>,
        /// Only entries whose recorded subject (their label) is exactly
        /// this one (`cuda`, `bug:...`, `exec:...`).
        #[arg(long)]
        label: Option<String>,
        /// The project's named external subjects (default: ./bitparity.toml
        /// when present).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Hunt every planted bug from 20 seeds and report how fast each is caught.
    Selftest {
        /// Only this op's planted bugs.
        #[arg(long)]
        op: Option<String>,
        /// Write the report as JSON here (`-`: stdout).
        #[arg(long)]
        json: Option<PathBuf>,
        /// First of the 20 seeds (decimal or 0x-hex).
        #[arg(long, default_value = "0")]
        seed: String,
    },
    /// Combine the --json summaries of every shard of one run (`check --shard
    /// i/n`) into the unsharded run's summary; exit code as that run's.
    Merge {
        /// The shards' JSON summaries, each shard exactly once.
        #[arg(required = true)]
        summaries: Vec<PathBuf>,
        /// Write the merged summary as JSON here (`-`: stdout; the table
        /// then goes to stderr).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the merged summary as Markdown here.
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Write the merged report as one self-contained HTML page here.
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// Mutate the ops' CUDA kernels by rule and report which mutants the
    /// properties kill (docs/mutants.md).
    Mutants(MutantsArgs),
    /// One mutant in its own process (run by `bitparity mutants`).
    #[command(hide = true)]
    MutantChild {
        #[arg(long)]
        id: String,
        #[arg(long)]
        seed: String,
        #[arg(long)]
        cases: u64,
        #[arg(long)]
        seconds: Option<f64>,
        #[arg(long)]
        originals: PathBuf,
        #[arg(long)]
        corpus: Option<PathBuf>,
        #[arg(long)]
        property: Vec<String>,
    },
    /// NVRTC's front end on these mutants, a JSON line each (run by
    /// `bitparity mutants --compile-only`: NVRTC compiles one program at a
    /// time per process).
    #[command(hide = true)]
    MutantCompile { ids: Vec<String> },
    /// Turn a fuzz artifact into a shrunk corpus entry (docs/fuzzing.md).
    Import {
        /// The raw input libFuzzer saved (fuzz/artifacts/<target>/crash-...).
        artifact: PathBuf,
        /// Subjects to judge it with, comma separated (default:
        /// $BITPARITY_FUZZ_SUBJECT, else every available correct subject).
        #[arg(long)]
        subject: Option<String>,
        /// The fuzz target that found it (loss_bwd, router_fwd, ...; default:
        /// read off the artifact's folder, else every target).
        #[arg(long)]
        target: Option<String>,
        /// The corpus the entry is saved to.
        #[arg(long, default_value = "regressions")]
        corpus: PathBuf,
    },
}

/// A command's outcome: its exit code.
type Outcome = Result<u8, String>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(msg) = knobs::check_environment() {
        eprintln!("error: {msg}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Check(args) => cmd_check(args),
        Command::Replay { path, op, subject, label, config } => {
            bitparity::harness::registry::load_config(config.as_deref())
                .and_then(|()| cmd_replay(&path, op.as_deref(), &subject, label.as_deref()))
        }
        Command::Selftest { op, json, seed } => cmd_selftest(op.as_deref(), json, &seed),
        Command::Import { artifact, subject, target, corpus } => cmd_import(&artifact, subject, target, &corpus),
        Command::Merge { summaries, json, markdown, html } => cmd_merge(&summaries, json, markdown, html),
        Command::Mutants(args) => cmd_mutants(args),
        Command::MutantChild { id, seed, cases, seconds, originals, corpus, property } => {
            let properties = hunt_properties(&property);
            knobs::parse_seed(&seed).map_err(|e| format!("--seed: {e}")).and_then(|seed| {
                let properties = properties?;
                let ask = bitparity::mutants::child::Ask {
                    id: &id,
                    seed,
                    cases,
                    seconds,
                    originals: &originals,
                    corpus: corpus.as_deref(),
                    properties: &properties,
                };
                let outcome = bitparity::mutants::child::run(&ask);
                emit(&format!("{}\n", serde_json::to_string(&outcome).unwrap_or_default()));
                Ok(0)
            })
        }
        Command::MutantCompile { ids } => {
            for line in bitparity::mutants::child::syntax_check(&ids) {
                emit(&format!("{}\n", serde_json::to_string(&line).unwrap_or_default()));
            }
            Ok(0)
        }
    };
    // External subjects' children end with bitparity: none is left running
    // (a hung one would sleep on) and every one is reaped.
    bitparity::exec::kill_all();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            eprintln!("error: {}", bitparity::escape::visible_lines(&msg));
            ExitCode::from(2)
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic:
/// the rest of the output is dropped.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    // The last guard: nothing read from a file or a child acts on the
    // terminal (src/escape.rs).
    let text = bitparity::escape::visible_lines(text);
    if out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_err() {
        // EPIPE or another write error: nothing more can be shown.
    }
}

/// Writes `text` to `path`, or to stdout for `-`.
fn write_output(path: &Path, text: &str) -> Result<(), String> {
    if path == Path::new("-") {
        emit(text);
        Ok(())
    } else {
        write_report(path, text.as_bytes())
    }
}

fn selected_ops(names: &[String]) -> Result<Vec<&'static dyn DynOp>, String> {
    if names.is_empty() {
        return Ok(ops().to_vec());
    }
    let known: Vec<&str> = ops().iter().map(|o| o.name()).collect();
    let mut out: Vec<&'static dyn DynOp> = Vec::new();
    for n in names {
        let o = op_by_name(n).ok_or_else(|| format!("unknown op {n:?} (known: {})", known.join(", ")))?;
        // `--op router --op router` runs the op once (it ran twice, its rows
        // twice in the JSON).
        if !out.iter().any(|p| p.name() == o.name()) {
            out.push(o);
        }
    }
    Ok(out)
}

fn cmd_check(a: CheckArgs) -> Outcome {
    let ops_selected = selected_ops(&a.op)?;
    bitparity::harness::registry::load_config(a.config.as_deref())?;
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
        check_folder_writable(dir, &op_names()).map_err(|e| format!("{e} (--no-save saves nothing)"))?;
    }
    let save = if a.no_save {
        SavePolicy::default()
    } else {
        match &a.corpus {
            Some(dir) => SavePolicy { root: Some(dir.clone()), planted: true },
            None => SavePolicy { root: Some(PathBuf::from("regressions")), planted: false },
        }
    };
    // Which ops run which subjects: every name must mean something somewhere.
    let mut runs = Vec::new();
    let mut unavailable: Vec<Skip> = Vec::new();
    for name in &a.subject {
        let res: Vec<_> = ops_selected.iter().map(|o| o.resolve_names(std::slice::from_ref(name))).collect();
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
        let r = o.resolve_names(&a.subject);
        unavailable.extend(r.unavailable.iter().map(|s| Skip { suite: s.suite.clone(), reason: s.reason.clone() }));
        if !r.found.is_empty() {
            runs.push(o);
        } else if !a.op.is_empty() && r.unavailable.is_empty() {
            return Err(format!("op {} has none of the subjects {}", o.name(), a.subject.join(", ")));
        }
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    });
    if let Some(spec) = &a.devices {
        if a.case.is_some() {
            return Err("--case N runs one case: it has no devices to spread over".into());
        }
        let ordinals = devices::parse(spec, bitparity::subject::cuda::device::device_count)?;
        return check_on_devices(&a, &ordinals, shard, seed, cases);
    }
    // Interrupts (src/interrupt.rs): the first finishes the cases in flight,
    // a second drops them, and the report is written either way.
    let interrupt = bitparity::interrupt::install(Some(
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
        let names: Vec<&str> = runs.iter().map(|o| o.name()).collect();
        eprintln!("bitparity check: seed {seed}, ops {}", names.join(", "));
    }
    let mut summaries = Vec::new();
    for o in &runs {
        if interrupt.load(Ordering::SeqCst) {
            break;
        }
        summaries.push(o.check(&plan, &a.subject));
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
    let dir = bitparity::fsio::private_temp_dir("bitparity-devices")?;
    // SIGINT reaches the workers too; this process waits for their summaries.
    bitparity::interrupt::install(Some("interrupted: the workers finish their cases in flight"));
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

/// Where a run's reports go (each checked writable before the run).
struct Outputs<'a> {
    json: Option<&'a Path>,
    markdown: Option<&'a Path>,
    html: Option<&'a Path>,
}

fn outputs(a: &CheckArgs) -> Outputs<'_> {
    Outputs { json: a.json.as_deref(), markdown: a.markdown.as_deref(), html: a.html.as_deref() }
}

/// Prints a run's table (to stderr when a report goes to stdout), writes
/// its JSON, Markdown and HTML where asked; the run's exit code.
fn write_run(run: &RunReport, out: &Outputs, title: &str) -> Outcome {
    let table = report::to_table(run);
    let to_stdout = [out.json, out.markdown, out.html].contains(&Some(Path::new("-")));
    if to_stdout {
        eprint!("{}", bitparity::escape::visible_lines(&table));
    } else {
        emit(&table);
    }
    if let Some(p) = out.json {
        write_output(p, &report::to_json(run))?;
    }
    if let Some(p) = out.markdown {
        write_output(p, &report::to_markdown(run, &format!("{title}, {}", corpus::today())))?;
    }
    if let Some(p) = out.html {
        write_output(p, &html::to_html(run, &html::title(title)))?;
    }
    Ok(run.verdict().exit_code())
}

fn cmd_merge(files: &[PathBuf], json: Option<PathBuf>, markdown: Option<PathBuf>, html: Option<PathBuf>) -> Outcome {
    for p in json.iter().chain(&markdown).chain(&html) {
        check_writable(p)?;
    }
    let mut parts = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let bytes = read_capped(f, merge::MAX_SUMMARY_BYTES).map_err(|e| format!("{name}: {e}"))?;
        parts.push((name.clone(), merge::read_summary(&bytes).map_err(|e| format!("{name}: {e}"))?));
    }
    let run = merge::merge(&parts)?;
    let out = Outputs { json: json.as_deref(), markdown: markdown.as_deref(), html: html.as_deref() };
    write_run(&run, &out, "bitparity check (merged shards)")
}

fn cmd_replay(path: &Path, op: Option<&str>, subjects: &[String], label: Option<&str>) -> Outcome {
    use bitparity::escape::{path as shown_path, visible};
    // An interrupt ends the replay after the entry in flight; what was
    // replayed is printed (src/interrupt.rs).
    let interrupt = bitparity::interrupt::install(None);
    let ops_selected = selected_ops(&op.map(|o| vec![o.to_string()]).unwrap_or_default())?;
    // Every name must mean a correct subject of some op replayed; those
    // that cannot run here are said, and the replay cannot pass.
    let mut unavailable: Vec<Skip> = Vec::new();
    for name in subjects {
        if bitparity::subject::planted_name(name).is_some() {
            return Err(format!(
                "--subject {}: a planted bug judges no entry; the entries that caught it replay as still failing \
                 (select them with --label {})",
                visible(name),
                visible(name)
            ));
        }
        let res: Vec<_> = ops_selected.iter().map(|o| o.resolve_names(std::slice::from_ref(name))).collect();
        if res.iter().all(|r| r.found.is_empty() && r.unavailable.is_empty()) {
            let why = res.iter().flat_map(|r| r.unknown.iter().map(|(_, m)| m.clone())).next().unwrap_or_default();
            return Err(why);
        }
        if res.iter().all(|r| r.found.is_empty()) {
            unavailable.extend(res.into_iter().flat_map(|r| r.unavailable));
        }
    }
    let names: Vec<&str> = ops().iter().map(|o| o.name()).collect();
    let (files, problems) = corpus::list(path, &names)?;
    let mut out = String::new();
    let (mut passed, mut failed, mut not_judged) = (0usize, 0usize, 0usize);
    for (p, why) in &problems {
        out += &format!("BAD  {}: {}\n", shown_path(p), visible(why));
        failed += 1;
    }
    // Entries each named subject judged.
    let mut judged_on: Vec<usize> = vec![0; subjects.len()];
    let mut ops_seen: Vec<&'static dyn DynOp> = Vec::new();
    for file in &files {
        if interrupt.load(Ordering::SeqCst) {
            break;
        }
        let read = if file.as_path() == path { corpus::read_named_entry(file) } else { corpus::read_entry(file) };
        let entry = match read {
            Ok(e) => e,
            Err(why) => {
                out += &format!("BAD  {}: {}\n", shown_path(file), visible(&why));
                failed += 1;
                continue;
            }
        };
        if op.is_some_and(|o| o != entry.op) || label.is_some_and(|l| l != entry.subject) {
            continue;
        }
        let Some(dyn_op) = op_by_name(&entry.op) else {
            out += &format!(
                "BAD  {}: unknown op {:?} (known: {})\n",
                shown_path(file),
                visible(&entry.op),
                names.join(", ")
            );
            failed += 1;
            continue;
        };
        let folder = file.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str());
        if folder.is_some_and(|f| names.contains(&f) && f != entry.op) {
            out += &format!("BAD  {}: an entry of op {} in another op's folder\n", shown_path(file), entry.op);
            failed += 1;
            continue;
        }
        if !ops_seen.iter().any(|o| o.name() == dyn_op.name()) {
            ops_seen.push(dyn_op);
        }
        // The names this op has a subject of (another op's subject judges
        // none of its entries).
        let here: Vec<String> = subjects
            .iter()
            .filter(|n| !dyn_op.resolve_names(std::slice::from_ref(n)).found.is_empty())
            .cloned()
            .collect();
        let r = if here.is_empty() { dyn_op.replay(&entry) } else { dyn_op.replay_on(&entry, &here) };
        for (i, n) in subjects.iter().enumerate() {
            judged_on[i] += r.results.iter().any(|x| &x.subject == n) as usize;
        }
        let status = if r.broken.is_some() || (r.judged() && !r.ok()) {
            failed += 1;
            "FAIL"
        } else if !r.judged() {
            not_judged += 1;
            "SKIP"
        } else {
            passed += 1;
            "ok  "
        };
        out += &format!(
            "{status} {} ({} / {} / {}, {})\n",
            shown_path(file),
            entry.op,
            visible(&entry.property),
            visible(&entry.subject),
            visible(&entry.date)
        );
        if let Some(b) = &r.broken {
            out += &format!("       not replayable: {}\n", visible(b));
        }
        for s in r.results.iter().filter(|s| !s.ok() || s.must_fail) {
            let what = match (&s.failure, s.must_fail) {
                (Some(_), true) => "still fails, as a planted bug must".to_string(),
                (None, true) => "passes, but this planted bug must fail it".to_string(),
                (Some(m), false) => format!("fails: {m}"),
                (None, false) => "passes".to_string(),
            };
            out += &format!("       {}: {}\n", visible(&s.subject), visible(&what));
        }
        for s in &r.not_replayed {
            out += &format!("       not replayed on {}: {}\n", visible(&s.suite), visible(&s.reason));
        }
    }
    for o in &ops_seen {
        out += &format!("{}: every entry replayed on {}\n", o.name(), o.replay_subject_names().join(", "));
        for s in o.replay_skips() {
            out += &format!("SKIPPED {}: {}\n", s.suite, s.reason);
        }
    }
    let total = passed + failed + not_judged;
    out += &format!("\n{total} entries: {passed} passed, {failed} failed, {not_judged} judged by no subject here\n");
    for s in &unavailable {
        out += &format!("NOT RUN {}: {}\n", visible(&s.suite), visible(&s.reason));
    }
    // A subject the user named that judged nothing (it serves no op of the
    // entries, or refused every case) did not pass anything.
    let idle: Vec<&String> = subjects
        .iter()
        .zip(&judged_on)
        .filter(|(n, &j)| j == 0 && !unavailable.iter().any(|u| &u.suite == *n))
        .map(|(n, _)| n)
        .collect();
    for n in &idle {
        out += &format!("NOT JUDGED: --subject {} judged no entry\n", visible(n));
    }
    let code = if failed > 0 {
        Verdict::Failed
    } else if interrupt.load(Ordering::SeqCst) {
        out += "interrupted: the entries above were replayed, the rest were not\n";
        Verdict::Interrupted
    } else if passed == 0 {
        out += &match label {
            Some(l) if total == 0 => format!("nothing was replayed: no entry is labelled {}\n", visible(l)),
            _ => "nothing was replayed: no entry was judged\n".to_string(),
        };
        Verdict::NothingJudged
    } else if !unavailable.is_empty() || !idle.is_empty() {
        Verdict::NothingJudged
    } else {
        Verdict::Passed
    };
    emit(&out);
    Ok(code.exit_code())
}

fn cmd_selftest(op: Option<&str>, json: Option<PathBuf>, seed: &str) -> Outcome {
    let seed = knobs::parse_seed(seed).map_err(|e| format!("--seed: {e}"))?;
    let ops_selected = selected_ops(&op.map(|o| vec![o.to_string()]).unwrap_or_default())?;
    if let Some(p) = &json {
        check_writable(p)?;
    }
    let cfg = GenConfig::from_env()?;
    let count: usize = ops_selected.iter().map(|o| o.planted_count()).sum();
    eprintln!("hunting {count} planted bugs from {} seeds each (seeds {seed}..)...", selftest::SEEDS);
    let reports: Vec<_> = ops_selected.iter().flat_map(|o| o.selftest(seed, &cfg)).collect();
    let table = selftest::to_table(&reports);
    if json.as_deref() == Some(Path::new("-")) {
        eprint!("{table}");
    } else {
        emit(&table);
    }
    if let Some(p) = &json {
        let text = serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?;
        write_output(p, &(text + "\n"))?;
    }
    if reports.is_empty() {
        return Ok(Verdict::NothingJudged.exit_code());
    }
    Ok(if reports.iter().all(|r| r.caught) { 0 } else { 1 })
}

/// The properties of `bitparity mutants --property`: the hunt's, in the
/// order given, each once; all of them when none is given.
fn hunt_properties(names: &[String]) -> Result<Vec<bitparity::props::Property>, String> {
    use bitparity::selftest::HUNT;
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

fn cmd_mutants(a: MutantsArgs) -> Outcome {
    use bitparity::mutants::{campaign, report as mreport, triage::Triage, Rule};
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
        None => Triage::parse(bitparity::mutants::triage::EMBEDDED, "kernels/mutants.toml")?,
        Some(p) => {
            let text = read_capped(p, 1 << 20)?;
            let text = String::from_utf8(text).map_err(|_| format!("{}: not UTF-8", p.display()))?;
            Triage::parse(&text, &p.display().to_string())?
        }
    };
    let ids: std::collections::HashSet<String> = bitparity::mutants::all().into_iter().map(|m| m.id).collect();
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
        header =
            format!("{} mutants, NVRTC front end only ({})", mutants.len(), bitparity::subject::cuda::nvrtc::CI_ARCH);
        campaign::compile_only(mutants, jobs, &triage)?
    } else {
        let devices = match &a.devices {
            Some(spec) => devices::parse(spec, bitparity::subject::cuda::device::device_count)?,
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
        interrupt = bitparity::interrupt::install(None);
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
        ) + &if names.len() < bitparity::selftest::HUNT.len() {
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

/// The sanitizer stage of `mutants --sanitizer TOOLS`: the tools checked by
/// name, compute-sanitizer found (PATH, then $CUDA_HOME/bin and
/// /usr/local/cuda/bin), before any mutant runs.
fn sanitizer(tools: &str, cases: u64) -> Result<bitparity::mutants::sanitizer::Sanitizer, String> {
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
    Ok(bitparity::mutants::sanitizer::Sanitizer { exe, tools, cases })
}

fn cmd_import(artifact: &Path, subject: Option<String>, target: Option<String>, corpus_root: &Path) -> Outcome {
    let all_targets = || -> Vec<(&'static dyn DynOp, Direction)> {
        // Backward first: its checks include the forward's conformance.
        ops().into_iter().flat_map(|o| [(o, Direction::Backward), (o, Direction::Forward)]).collect()
    };
    let named = |t: &str| bitparity::harness::registry::target(t);
    let targets = match target.as_deref() {
        Some(t) => vec![named(t).ok_or_else(|| {
            let known: Vec<String> =
                all_targets().iter().map(|(o, d)| format!("{}_{}", o.fuzz_prefix(), d.suffix())).collect();
            format!("unknown fuzz target {t:?} (known: {})", known.join(", "))
        })?],
        None => match artifact.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()).and_then(named) {
            Some(t) => vec![t],
            None => all_targets(),
        },
    };
    let bytes = read_capped(artifact, MAX_ARTIFACT_BYTES)?;
    check_folder_writable(corpus_root, &op_names())?;
    let env_subject = std::env::var(knobs::FUZZ_SUBJECT).ok();
    use bitparity::fuzzing::Names;
    let subject = match (&subject, &env_subject) {
        (Some(s), _) => Some(Names::CommandLine(s)),
        (None, Some(s)) => Some(Names::Environment(s)),
        (None, None) => None,
    };
    let mut last = None;
    for (o, dir) in targets {
        match o.import(artifact, &bytes, &[dir], subject, corpus_root) {
            Ok(i) => {
                let r = &i.record;
                eprintln!(
                    "{}: {} fails {} ({}); shrunk from {} to {}",
                    i.target, r.subject, r.property, r.message, r.original_shape, r.shrunk_shape
                );
                eprint!("{}", r.text());
                use bitparity::runner::SaveNote;
                return match &r.save {
                    SaveNote::Saved { path } | SaveNote::Repaired { path } | SaveNote::Known { path } => {
                        emit(&format!("{}\n", path.display()));
                        Ok(0)
                    }
                    SaveNote::NotSaved { reason } => Err(format!("the entry was not saved: {reason}")),
                };
            }
            Err(ImportError::Usage(m)) => {
                // A subject name may belong to another op's target.
                last = Some(Err(m));
            }
            Err(ImportError::NoFailure(m)) => last = Some(Ok(m)),
        }
    }
    match last {
        Some(Ok(m)) => {
            eprintln!("error: {m}");
            Ok(1)
        }
        Some(Err(m)) => Err(m),
        None => Err("no fuzz target to judge the artifact with".into()),
    }
}

/// Every registered op's name.
fn op_names() -> Vec<&'static str> {
    ops().iter().map(|o| o.name()).collect()
}
