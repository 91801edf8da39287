//! The application: the command line's schema, one module per command,
//! the subject-name grammar and the outputs. Everything below `app` is the
//! library (generators, subjects, the judge, the runner, the corpus, the
//! reports); nothing there reaches up into it. `src/main.rs` only calls
//! [`main`].
//!
//! Exit codes (docs/cli.md, "Exit codes"): 0 every judged case passed; 1 a
//! property failed (or a corpus entry did not replay as it must); 2 a usage
//! or input error; 3 nothing was judged, or a subject named on the command
//! line could not run here; 130 interrupted (SIGINT or SIGTERM) with no
//! failure.

mod check;
mod import;
mod merge;
mod mutants;
mod names;
mod output;
mod replay;
mod selftest;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A command's outcome: its exit code, or a usage or input error (exit 2).
type Outcome = Result<u8, String>;

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

// One Command is parsed per process: the size of its largest variant costs
// nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the properties on generated adversarial cases and print a table.
    Check(check::CheckArgs),
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
    Mutants(mutants::MutantsArgs),
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

/// Parses the command line, checks the environment's knobs, runs the
/// command; every external subject's processes end with it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(msg) = crate::knobs::check_environment() {
        eprintln!("error: {}", crate::escape::visible_lines(&msg));
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Replay { path, op, subject, label, config } => {
            crate::harness::registry::load_config(config.as_deref())
                .and_then(|()| replay::run(&path, op.as_deref(), &subject, label.as_deref()))
        }
        Command::Selftest { op, json, seed } => selftest::run(op.as_deref(), json, &seed),
        Command::Import { artifact, subject, target, corpus } => import::run(&artifact, subject, target, &corpus),
        Command::Merge { summaries, json, markdown, html } => merge::run(&summaries, json, markdown, html),
        Command::Mutants(args) => mutants::run(args),
        Command::MutantChild { id, seed, cases, seconds, originals, corpus, property } => {
            mutants::child(&id, &seed, cases, seconds, &originals, corpus.as_deref(), &property)
        }
        Command::MutantCompile { ids } => mutants::compile(&ids),
    };
    // External subjects' children end with bitparity: none is left running
    // (a hung one would sleep on) and every one is reaped.
    crate::exec::kill_all();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            eprintln!("error: {}", crate::escape::visible_lines(&msg));
            ExitCode::from(2)
        }
    }
}
