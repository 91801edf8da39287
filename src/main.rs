//! The `bitparity` command line.

use bitparity::check::{self, CheckPlan, Skip};
use bitparity::corpus;
use bitparity::gen::seqwise_loss::GenConfig;
use bitparity::props::Property;
use bitparity::{report, selftest, subject};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "bitparity",
    version,
    about = "Proves GPU numeric kernels right: bit-exact and MPFR oracles, adversarial generators, a permanent corpus"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the properties on generated adversarial cases and print a table.
    Check {
        /// The op (every op when omitted).
        #[arg(long)]
        op: Option<String>,
        /// Subjects: all (default: every available one), cuda, bugs,
        /// oracle:<profile>, model:<profile>, bug:<name>. Repeatable.
        #[arg(long)]
        subject: Vec<String>,
        /// Properties to run (default: all). Repeatable.
        #[arg(long, value_enum)]
        property: Vec<Property>,
        /// Number of cases (default 1000 unless --seconds is given).
        #[arg(long)]
        cases: Option<u64>,
        /// Time budget in seconds (with --cases, whichever ends first).
        #[arg(long)]
        seconds: Option<f64>,
        /// Seed of the case generator (default: random, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Write the summary as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The regression corpus new failures are saved to.
        #[arg(long, default_value = "regressions")]
        corpus: PathBuf,
        /// Do not save failures to the corpus.
        #[arg(long)]
        no_save: bool,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Replay the regression corpus, or one entry, against every available subject.
    Replay {
        /// A corpus directory or one entry (default: regressions).
        #[arg(default_value = "regressions")]
        path: PathBuf,
    },
    /// Hunt every planted bug from 20 seeds and report how fast each is caught.
    Selftest {
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// First of the 20 seeds.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Turn a fuzz artifact into a shrunk corpus entry (docs/fuzzing.md).
    Import {
        /// The raw input libFuzzer saved (fuzz/artifacts/<target>/crash-...).
        artifact: PathBuf,
        /// Subjects to judge it with, comma separated (default:
        /// $BITPARITY_FUZZ_SUBJECT, else every available correct subject).
        #[arg(long)]
        subject: Option<String>,
        /// The fuzz target that found it: loss_fwd or loss_bwd (default: read
        /// off the artifact's folder, else both).
        #[arg(long)]
        target: Option<String>,
        /// The corpus the entry is saved to.
        #[arg(long, default_value = "regressions")]
        corpus: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { op, subject, property, cases, seconds, seed, json, corpus, no_save, quiet } => {
            cmd_check(op, subject, property, cases, seconds, seed, json, corpus, no_save, quiet)
        }
        Command::Replay { path } => cmd_replay(&path),
        Command::Selftest { json, seed } => cmd_selftest(json, seed),
        Command::Import { artifact, subject, target, corpus } => {
            bitparity::import::cmd_import(artifact, subject, target, corpus)
        }
    }
}

fn usage_error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

#[allow(clippy::too_many_arguments)]
fn cmd_check(
    op: Option<String>,
    subject_names: Vec<String>,
    properties: Vec<Property>,
    cases: Option<u64>,
    seconds: Option<f64>,
    seed: Option<u64>,
    json: Option<PathBuf>,
    corpus: PathBuf,
    no_save: bool,
    quiet: bool,
) -> ExitCode {
    if let Some(op) = &op {
        if !corpus::OPS.contains(&op.as_str()) {
            return usage_error(format!("unknown op {op:?} (known: {})", corpus::OPS.join(", ")));
        }
    }
    if let Some(s) = seconds {
        if !(s > 0.0 && s.is_finite()) {
            return usage_error("--seconds must be a positive number");
        }
    }
    if cases == Some(0) {
        return usage_error("--cases must be at least 1");
    }
    let mut skipped = Vec::new();
    let subjects: Vec<Arc<dyn subject::SeqwiseSubject>> = if subject_names.is_empty() {
        let a = subject::available();
        for (name, reason) in a.skipped {
            skipped.push(Skip {
                suite: format!("{name} (tier B: conformance, offset-stride, padding, determinism, accuracy, gradient, validation on the kernel)"),
                reason,
            });
        }
        a.subjects
    } else {
        let mut v = Vec::new();
        for n in &subject_names {
            match subject::resolve(n) {
                Ok(s) => v.extend(s),
                Err(e) if n == "cuda" => skipped.push(Skip { suite: "cuda (tier B)".into(), reason: e }),
                Err(e) => return usage_error(e),
            }
        }
        v
    };
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    });
    let properties = if properties.is_empty() { Property::ALL.to_vec() } else { properties };
    let op_name = op.as_deref().unwrap_or("seqwise_loss");
    if !quiet {
        let names: Vec<String> = subjects.iter().map(|s| s.name()).collect();
        eprintln!("bitparity check: op {op_name}, seed {seed}, subjects: {}", names.join(", "));
        for s in &skipped {
            eprintln!("skipping {}: {}", s.suite, s.reason);
        }
    }
    let plan = CheckPlan {
        subjects,
        properties,
        cases,
        seconds,
        seed,
        gen: GenConfig::from_env(),
        corpus: (!no_save).then_some(corpus),
        skipped,
        progress: !quiet,
        shrink_budget: 20_000,
    };
    let summary = check::run(&plan);
    print!("{}", report::to_table(op_name, &summary));
    if let Some(path) = json {
        if let Err(e) = std::fs::write(&path, report::to_json(op_name, &summary) + "\n") {
            return usage_error(format!("cannot write {}: {e}", path.display()));
        }
    }
    if summary.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn cmd_replay(path: &std::path::Path) -> ExitCode {
    let entries = match corpus::load_all(path) {
        Ok(e) => e,
        Err(e) => return usage_error(e),
    };
    let avail = subject::available();
    for (name, reason) in &avail.skipped {
        println!("SKIPPED {name}: {reason}");
    }
    let mut bad = 0;
    for (p, entry) in &entries {
        let results = corpus::replay(entry, &avail.subjects);
        let ok = results.iter().all(|r| r.ok());
        bad += !ok as usize;
        println!(
            "{} {} ({} / {}, {})",
            if ok { "ok  " } else { "FAIL" },
            p.display(),
            entry.property,
            entry.subject,
            entry.date
        );
        for r in results.iter().filter(|r| !r.ok() || r.must_fail) {
            let what = match (&r.failure, r.must_fail) {
                (Some(_), true) => "still fails, as a planted bug must".to_string(),
                (None, true) => "passes, but this planted bug must fail it".to_string(),
                (Some(m), false) => format!("fails: {m}"),
                (None, false) => "passes".to_string(),
            };
            println!("       {}: {what}", r.subject);
        }
    }
    println!("\n{} entries replayed, {} passed, {} failed", entries.len(), entries.len() - bad, bad);
    if bad > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn cmd_selftest(json: Option<PathBuf>, seed: u64) -> ExitCode {
    eprintln!("hunting {} planted bugs from {} seeds each...", subject::planted::Bug::ALL.len(), selftest::SEEDS);
    let reports = selftest::run(seed, &GenConfig::from_env());
    print!("{}", selftest::to_table(&reports));
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&reports).expect("reports serialize");
        if let Err(e) = std::fs::write(&path, text + "\n") {
            return usage_error(format!("cannot write {}: {e}", path.display()));
        }
    }
    if reports.iter().all(|r| r.caught) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
