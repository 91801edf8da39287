//! The sanitizer stage of a campaign (`bitparity mutants --sanitizer`):
//! the survivors of the properties run again under compute-sanitizer's
//! tools, each tool first held to the original kernels.

use super::campaign::{spawn_all, Job, Plan};
use super::report::Outcome;
use super::{op_kernels, Mutant};
use crate::knobs;
use crate::subject::cuda::KernelId;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The second stage of a campaign: every survivor of the properties run
/// again, with `cases` cases, under each tool of compute-sanitizer in turn
/// (memcheck sees accesses out of bounds in shared and global memory that no
/// output shows, racecheck shared-memory races, synccheck misused barriers).
/// A mutant the tool reports on is killed by it; first each tool runs on the
/// unmutated kernels of every op the survivors reach, and a tool that
/// reports on them is not used (its reports would mean nothing).
#[derive(Clone, Debug)]
pub struct Sanitizer {
    /// The compute-sanitizer executable.
    pub exe: std::path::PathBuf,
    pub tools: Vec<String>,
    pub cases: u64,
}

/// The exit code compute-sanitizer is asked to end with when its tool
/// reported an error (`--error-exitcode`).
const EXIT: i32 = 86;

/// The sanitizer stage on the survivors among `outcomes` (see [`Sanitizer`]).
pub(super) fn run(
    exe: &Path,
    dir: &Path,
    mutants: &[(Mutant, bool)],
    mut outcomes: Vec<Option<(Outcome, f64)>>,
    plan: &Plan,
    san: &Sanitizer,
    start: Instant,
) -> Result<Vec<Option<(Outcome, f64)>>, String> {
    let survived = |o: &Option<(Outcome, f64)>| matches!(o, Some((Outcome::Survived { .. }, _)));
    for tool in &san.tools {
        if plan.interrupt.load(Ordering::SeqCst) {
            break;
        }
        // The campaign's time limit covers this stage too: no child starts
        // after it (the survivors not run again stay survivors).
        let staged = Plan {
            cases: san.cases,
            seconds: None,
            // A sanitizer slows the kernels tens of times.
            hunt_limit: plan.hunt_limit * 3,
            compile_limit: plan.compile_limit * 2,
            campaign_limit: plan.campaign_limit.map(|l| l.saturating_sub(start.elapsed())),
            ..plan.clone()
        };
        let kernels: Vec<KernelId> = op_kernels()
            .into_iter()
            .filter(|k| mutants.iter().zip(&outcomes).any(|((m, _), o)| survived(o) && m.kernels().contains(k)))
            .collect();
        if kernels.is_empty() {
            break;
        }
        // The baseline: each reached kernel's unmutated source, under this tool.
        let baseline: Vec<Job> = kernels.iter().map(|&k| Job::original(k)).collect();
        let names: Vec<&str> = kernels.iter().map(|k| k.source().name).collect();
        eprintln!(
            "{tool}: the original kernels of {} ({:.0} s into the campaign)...",
            names.join(", "),
            start.elapsed().as_secs_f64()
        );
        let wrap = Wrap { san, tool, dir };
        let base = spawn_all(exe, dir, &baseline, &staged, Some(&wrap))?;
        let dirty: Vec<String> = baseline
            .iter()
            .zip(&base)
            .filter_map(|(j, o)| match o {
                Some((Outcome::Killed { message, .. }, _)) => Some(format!("{}: {message}", j.op)),
                Some((Outcome::Survived { .. }, _)) | None => None,
                Some((o, _)) => Some(format!("{}: {}", j.op, o.label())),
            })
            .collect();
        if base.iter().any(Option::is_none) {
            // Not a verdict on the tool: the campaign's time ran out before
            // (or while) the baseline could start.
            eprintln!(
                "{tool} and any tool after it not run: --campaign-seconds ran out before its baseline on the original \
                 kernels ran (the survivors stay survivors; give the campaign time for the stage)"
            );
            break;
        }
        if !dirty.is_empty() {
            eprintln!("{tool} is not used: it does not pass the original kernels ({})", dirty.join("; "));
            continue;
        }
        let chosen: Vec<Job> = mutants.iter().zip(&outcomes).map(|((m, _), o)| Job::of(m, survived(o))).collect();
        eprintln!(
            "{tool}: {} survivors ({:.0} s into the campaign)...",
            chosen.iter().filter(|j| j.run).count(),
            start.elapsed().as_secs_f64()
        );
        let verdicts = spawn_all(exe, dir, &chosen, &staged, Some(&wrap))?;
        for (slot, v) in outcomes.iter_mut().zip(verdicts) {
            // Only a report of the tool kills; a child that timed out or
            // crashed under it leaves the survivor as it was.
            if let Some((o @ Outcome::Killed { .. }, secs)) = v {
                *slot = Some((o, secs));
            }
        }
    }
    Ok(outcomes)
}

/// A child run under a sanitizer tool: the verdict is the tool's.
pub(super) struct Wrap<'a> {
    san: &'a Sanitizer,
    tool: &'a str,
    dir: &'a Path,
}

impl Wrap<'_> {
    /// compute-sanitizer running `exe` (its arguments come after) under this
    /// tool, its report in [`Wrap::log`].
    pub(super) fn command(&self, exe: &Path, index: usize) -> Command {
        let mut c = Command::new(&self.san.exe);
        c.args(["--tool", self.tool, "--error-exitcode", &EXIT.to_string()])
            // bitparity's own probes (an occupancy query, a module that
            // does not load) fail on purpose: only the kernels are judged.
            .args(["--report-api-errors", "no", "--print-limit", "4", "--log-file"])
            .arg(self.log(index))
            .arg(exe)
            // The tool checks every access against the allocation; a guard
            // zone would make a stray access a valid one to it.
            .env(knobs::GUARDS, "off");
        c
    }

    fn log(&self, index: usize) -> std::path::PathBuf {
        self.dir.join(format!("{}-{index}.log", self.tool))
    }

    /// The verdict on a child that ended with `status`: killed when the tool
    /// reported (its first error line is the message), survived otherwise
    /// (with the child's own count of cases).
    pub(super) fn verdict(
        &self,
        index: usize,
        job: &Job,
        status: std::process::ExitStatus,
        child: Option<Outcome>,
    ) -> Outcome {
        let cases = match child {
            Some(Outcome::Survived { cases }) => cases,
            _ => self.san.cases,
        };
        if status.code() != Some(EXIT) {
            return match child {
                Some(o @ Outcome::Survived { .. }) => o,
                Some(Outcome::Killed { .. }) => Outcome::Survived { cases },
                other => other.unwrap_or(Outcome::Crashed { detail: format!("{status}, no verdict") }),
            };
        }
        let log = std::fs::read_to_string(self.log(index)).unwrap_or_default();
        let first = log
            .lines()
            .map(|l| l.trim_start_matches('=').trim())
            .find(|l| !l.is_empty() && !l.starts_with("COMPUTE-SANITIZER"))
            .unwrap_or("(no report line)");
        Outcome::Killed {
            op: job.op.clone(),
            property: self.tool.into(),
            // Which case the report came from is not known: the bound is
            // the cases the child ran.
            case: cases.saturating_sub(1),
            message: first.chars().take(400).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn exited(code: i32) -> std::process::ExitStatus {
        std::process::ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn only_the_tools_exit_code_kills_and_its_first_report_line_is_the_message() {
        let dir = std::env::temp_dir().join(format!("bp-sanitizer-verdict-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let san = Sanitizer { exe: "compute-sanitizer".into(), tools: vec!["memcheck".into()], cases: 12 };
        let wrap = Wrap { san: &san, tool: "memcheck", dir: &dir };
        let job = Job { id: "shared_expert.cu:0".into(), label: "m".into(), op: "shared_expert".into(), run: true };
        // compute-sanitizer's log as the H200 wrote it (guards-7).
        std::fs::write(
            wrap.log(3),
            "========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 2 bytes\n=========     at se_gate_up_fwd+0x1a0\n",
        )
        .unwrap();
        let survived = Some(Outcome::Survived { cases: 9 });
        match wrap.verdict(3, &job, exited(EXIT), survived.clone()) {
            Outcome::Killed { op, property, case, message } => {
                assert_eq!((op.as_str(), property.as_str(), case), ("shared_expert", "memcheck", 8));
                assert_eq!(message, "Invalid __global__ read of size 2 bytes");
            }
            o => panic!("{o:?}"),
        }
        // No report: the child's own verdict stands; a property failure
        // under the tool is not the tool's kill.
        assert_eq!(wrap.verdict(3, &job, exited(0), survived), Outcome::Survived { cases: 9 });
        let killed =
            Outcome::Killed { op: "x".into(), property: "conformance".into(), case: 0, message: String::new() };
        assert_eq!(wrap.verdict(3, &job, exited(0), Some(killed)), Outcome::Survived { cases: 12 });
        assert!(matches!(wrap.verdict(3, &job, exited(1), None), Outcome::Crashed { .. }));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
