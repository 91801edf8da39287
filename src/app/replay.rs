//! `bitparity replay`: the corpus (or one folder, or one entry) judged
//! again, as `cargo test` does, on the correct subjects available here and
//! on the subjects the user names. An entry's recorded subject is a label
//! (`--label` selects by it): it never starts a program.

use super::names::{Resolution, ResolveNames};
use super::output::emit;
use super::Outcome;
use crate::corpus;
use crate::escape::{path as shown_path, visible};
use crate::harness::registry::{self, with_op, OPS};
use crate::report::Verdict;
use crate::runner::replay::{ReplayEntry, ReplayedOn};
use crate::subject::Skip;
use std::path::Path;
use std::sync::atomic::Ordering;

pub(super) fn run(path: &Path, op: Option<&str>, subjects: &[String], label: Option<&str>) -> Outcome {
    // An interrupt ends the replay after the entry in flight; what was
    // replayed is printed (src/interrupt.rs).
    let interrupt = crate::interrupt::install(None);
    let ops_selected = registry::select(&op.map(|o| vec![o.to_string()]).unwrap_or_default())?;
    // Every name must mean a correct subject of some op replayed; those
    // that cannot run here are said, and the replay cannot pass.
    let mut unavailable: Vec<Skip> = Vec::new();
    for name in subjects {
        if crate::subject::planted_name(name).is_some() {
            return Err(format!(
                "--subject {}: a planted bug judges no entry; the entries that caught it replay as still failing \
                 (select them with --label {})",
                visible(name),
                visible(name)
            ));
        }
        let res: Vec<Resolution> =
            ops_selected.iter().filter_map(|&o| with_op(o, ResolveNames(std::slice::from_ref(name)))).collect();
        if res.iter().all(|r| r.found.is_empty() && r.unavailable.is_empty()) {
            let why = res.iter().flat_map(|r| r.unknown.iter().map(|(_, m)| m.clone())).next().unwrap_or_default();
            return Err(why);
        }
        if res.iter().all(|r| r.found.is_empty()) {
            unavailable.extend(res.into_iter().flat_map(|r| r.unavailable));
        }
    }
    let (files, problems) = corpus::list(path, &OPS)?;
    let mut out = String::new();
    let (mut passed, mut failed, mut not_judged) = (0usize, 0usize, 0usize);
    for (p, why) in &problems {
        out += &format!("BAD  {}: {}\n", shown_path(p), visible(why));
        failed += 1;
    }
    // Entries each named subject judged.
    let mut judged_on: Vec<usize> = vec![0; subjects.len()];
    let mut ops_seen: Vec<&'static str> = Vec::new();
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
        let Some(&op_name) = OPS.iter().find(|o| **o == entry.op) else {
            out += &format!(
                "BAD  {}: unknown op {:?} (known: {})\n",
                shown_path(file),
                visible(&entry.op),
                OPS.join(", ")
            );
            failed += 1;
            continue;
        };
        let folder = file.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str());
        if folder.is_some_and(|f| OPS.contains(&f) && f != entry.op) {
            out += &format!("BAD  {}: an entry of op {} in another op's folder\n", shown_path(file), entry.op);
            failed += 1;
            continue;
        }
        if !ops_seen.contains(&op_name) {
            ops_seen.push(op_name);
        }
        // The names this op has a subject of (another op's subject judges
        // none of its entries).
        let here: Vec<String> = subjects
            .iter()
            .filter(|n| with_op(op_name, ResolveNames(std::slice::from_ref(n))).is_some_and(|r| !r.found.is_empty()))
            .cloned()
            .collect();
        let r = with_op(op_name, ReplayEntry { entry: &entry, names: &here }).unwrap_or_default();
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
    for &o in &ops_seen {
        let (on, skipped) = with_op(o, ReplayedOn).unwrap_or_default();
        out += &format!("{o}: every entry replayed on {}\n", on.join(", "));
        for s in skipped {
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
