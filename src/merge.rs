//! `bitparity merge`: the JSON summaries of the n shards of one run
//! (`check --shard i/n`) combined into the summary the unsharded run gives.
//!
//! Every count is a sum over the shards (each case is judged in exactly one
//! shard); a worst ratio is the largest; a row's failure is the one of its
//! lowest failing case, which is also what the unsharded run reports (the
//! runner reports the lowest failing case of each row whatever the threads
//! did). Only the times differ: a merged op's `seconds` is the sum of its
//! shards' times. The shards must be the same run: the same seed, plan,
//! generator, knobs, ops and rows, and shards 1..n each exactly once (or
//! the n sub-shards of one coarser shard, which then merge into it). The
//! GPU ordinal (`BITPARITY_CUDA_DEVICE`) may differ between shards: the
//! merged summary lists every ordinal used.

use crate::gen::GenConfig;
use crate::harness::registry::{with_op, ClassNames, OPS};
use crate::knobs;
use crate::report::{JsonReport, JsonRow, RunPlan, RunReport};
use crate::runner::{DimCounts, FailureRecord, OpSummary, RowKey, RowStats, Shard};
use crate::subject::Skip;
use std::collections::BTreeMap;

/// The most a summary file may hold: a run's summary is a few hundred KB.
pub const MAX_SUMMARY_BYTES: u64 = 64 << 20;

/// A `check --json` summary from its bytes: parsed strictly (a file of
/// another kind is refused) and every field checked ([`check_summary`]).
pub fn read_summary(bytes: &[u8]) -> Result<JsonReport, String> {
    let r: JsonReport =
        serde_json::from_slice(bytes).map_err(|e| format!("not a `bitparity check --json` summary: {e}"))?;
    check_summary(&r)?;
    Ok(r)
}

/// Combines the shards' summaries (each with its file name, for errors)
/// into the whole run's.
pub fn merge(parts: &[(String, JsonReport)]) -> Result<RunReport, String> {
    for (name, r) in parts {
        check_summary(r).map_err(|e| format!("{}: {e}", crate::escape::visible(name)))?;
    }
    let (first_name, first) = parts.first().ok_or("merge: no summary given")?;
    let shard_of = |name: &str, r: &JsonReport| {
        r.plan.shard.ok_or_else(|| format!("{name}: not a shard's summary (run `check --shard i/n`)"))
    };
    let count = shard_of(first_name, first)?.count;
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    for (name, r) in parts {
        let s = shard_of(name, r)?;
        if s.count != count {
            return Err(format!("{name}: shard {s} is not one of {count} shards ({first_name} is)"));
        }
        if let Some(other) = seen.insert(s.index, name) {
            return Err(format!("{name} and {other} are both shard {s}"));
        }
        let same_plan = RunPlan { shard: None, ..r.plan.clone() } == RunPlan { shard: None, ..first.plan.clone() };
        let differs = [
            (r.seed != first.seed, "seed"),
            (!same_plan, "plan (cases, time, first case, properties, subjects)"),
            (r.generator != first.generator, "generator sizes"),
            (case_knobs(&r.knobs) != case_knobs(&first.knobs), "environment knobs"),
            (r.ops.iter().map(|o| &o.op).ne(first.ops.iter().map(|o| &o.op)), "ops"),
            (!same_rows(&r.rows, &first.rows), "table rows (the subjects available differ)"),
        ];
        if let Some((_, what)) = differs.iter().find(|(d, _)| *d) {
            return Err(format!("{name} and {first_name} are not shards of one run: their {what} differ"));
        }
    }
    let shard = whole_or_coarser(&seen, count)?;
    let mut ops = Vec::new();
    for (i, op) in first.ops.iter().enumerate() {
        let order = with_op(&op.op, ClassNames).ok_or_else(|| format!("{first_name}: unknown op {:?}", op.op))?;
        let mut summary = OpSummary { op: op.op.clone(), ..Default::default() };
        let mut classes: BTreeMap<String, u64> = BTreeMap::new();
        let mut failures: BTreeMap<(String, String, String), FailureRecord> = BTreeMap::new();
        let mut shapes: Vec<DimCounts> = Vec::new();
        for (name, r) in parts {
            let o = &r.ops[i];
            for d in &o.shapes {
                let d = d.to_counts().map_err(|e| format!("{name}: {e}"))?;
                match shapes.iter_mut().find(|s| s.dim == d.dim) {
                    Some(s) => {
                        s.position = s.position.min(d.position);
                        for (a, b) in s.bins.iter_mut().zip(d.bins.iter()) {
                            add(a, *b)?;
                        }
                    }
                    None => shapes.push(d),
                }
            }
            add(&mut summary.cases, o.cases)?;
            summary.seconds += o.seconds;
            if !summary.seconds.is_finite() {
                return Err(format!("{}: the op's seconds sum past what a number holds", o.op));
            }
            add(&mut summary.near_tie_cases, o.near_tie_cases)?;
            for (c, n) in &o.classes {
                add(classes.entry(c.clone()).or_default(), *n)?;
            }
            for s in &o.skipped {
                if !summary.skipped.contains(s) {
                    summary.skipped.push(s.clone());
                }
            }
            for f in &o.failures {
                let key = (f.property.to_string(), f.subject.clone(), f.profile.clone());
                let lower = |old: &FailureRecord| f.case_index.unwrap_or(u64::MAX) < old.case_index.unwrap_or(u64::MAX);
                if failures.get(&key).is_none_or(lower) {
                    failures.insert(key, f.clone());
                }
            }
        }
        // The class order of the op's own list, as the unsharded table shows it.
        let mut listed: Vec<(String, u64)> = classes.into_iter().collect();
        listed.sort_by_key(|(c, _)| order.iter().position(|o| o == c).unwrap_or(usize::MAX));
        summary.classes = listed;
        // The order of the op's shape, as a run lists its dimensions.
        shapes.sort_by(|a, b| (a.position, &a.dim).cmp(&(b.position, &b.dim)));
        summary.shapes = shapes;
        summary.failures = failures.into_values().collect();
        summary.failures.sort_by(|a, b| (a.property, &a.subject).cmp(&(b.property, &b.subject)));
        for row in first.rows.iter().filter(|r| r.op == op.op) {
            let key = RowKey {
                op: row.op.clone(),
                property: row.property,
                profile: row.profile.clone(),
                subject: row.subject.clone(),
            };
            let mut stats = RowStats {
                not_applicable: row.not_applicable.clone(),
                padding: row.padding.clone(),
                clamp_tie: row.clamp_tie.clone(),
                ..Default::default()
            };
            for (name, r) in parts {
                let Some(x) = r.rows.iter().find(|x| same_key(x, row)) else { continue };
                // Every shard has the histogram or none has (`same_rows`).
                if let Some(h) = &x.error_over_bound_histogram {
                    let h = h.to_histogram().map_err(|e| format!("{name}: row {} / {}: {e}", x.property, x.subject))?;
                    stats.histogram.get_or_insert_with(Default::default).merge(&h);
                }
                add(&mut stats.cases, x.cases)?;
                add(&mut stats.failures, x.failures)?;
                add(&mut stats.not_applicable_cases, x.not_applicable_cases)?;
                add(&mut stats.near_ties, x.near_ties)?;
                add(&mut stats.unbounded, x.unbounded)?;
                add(&mut stats.kinks, x.kinks)?;
                add(&mut stats.undetermined, x.undetermined)?;
                add(&mut stats.unavailable, x.unavailable)?;
                if stats.unavailable_reason.is_none() {
                    stats.unavailable_reason = x.unavailable_reason.clone();
                }
                stats.worst_error_over_bound = match (stats.worst_error_over_bound, x.worst_error_over_bound) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            summary.rows.insert(key, stats);
        }
        ops.push(summary);
    }
    let mut unavailable: Vec<Skip> = Vec::new();
    for (_, r) in parts {
        for u in &r.unavailable {
            if !unavailable.contains(u) {
                unavailable.push(u.clone());
            }
        }
    }
    // The knobs in the order a run records them; the GPU ordinals of every
    // shard, in shard order.
    let mut knob_list: Vec<(String, String)> = case_knobs(&first.knobs).into_iter().collect();
    let mut by_shard: Vec<(u64, &str)> = parts
        .iter()
        .filter_map(|(_, r)| Some((r.plan.shard?.index, r.knobs.get(knobs::CUDA_DEVICE)?.as_str())))
        .collect();
    by_shard.sort();
    let mut ordinals: Vec<&str> = Vec::new();
    for (_, o) in by_shard {
        if !ordinals.contains(&o) {
            ordinals.push(o);
        }
    }
    if !ordinals.is_empty() {
        knob_list.push((knobs::CUDA_DEVICE.to_string(), ordinals.join(",")));
    }
    knob_list.sort_by_key(|(k, _)| knobs::RECORDED.iter().position(|r| r == k).unwrap_or(usize::MAX));
    Ok(RunReport {
        seed: first.seed,
        plan: RunPlan { shard, ..first.plan.clone() },
        ops,
        gen: GenConfig {
            max_te: first.generator.max_te,
            max_t: first.generator.max_t,
            max_e: first.generator.max_e,
            // Recorded as the knob (in `knobs`, above), not in the generator.
            shapes: knobs::Shapes::ALL
                .into_iter()
                .find(|s| knob_list.iter().any(|(k, v)| k == knobs::SHAPES && v == s.name()))
                .unwrap_or(knobs::Shapes::Small),
        },
        knobs: knob_list,
        unavailable,
        interrupted: parts.iter().any(|(_, r)| r.interrupted),
    })
}

/// What the shards `seen` of `count` form together: the whole run (`None`),
/// or shard j of m when they are exactly its n sub-shards (the shards
/// j, j + m, ..., j + (n - 1) m of n x m: what `check --shard j/m --devices`
/// runs); anything else is missing some shard.
fn whole_or_coarser(seen: &BTreeMap<u64, &str>, count: u64) -> Result<Option<Shard>, String> {
    let n = seen.len() as u64;
    if n == count {
        return Ok(None);
    }
    let j = seen.keys().next().copied().unwrap_or(1);
    let m = count / n;
    if m * n == count && j <= m && (0..n).all(|i| seen.contains_key(&(j + i * m))) {
        return Ok(Some(Shard { index: j, count: m }));
    }
    // The first few missing only: a forged count must cost no memory.
    const SHOWN: usize = 20;
    let missing: Vec<String> =
        (1..=count).filter(|i| !seen.contains_key(i)).take(SHOWN).map(|i| format!("{i}/{count}")).collect();
    let more = count - n - missing.len() as u64;
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    Err(format!("missing shards: {}{tail}", missing.join(", ")))
}

/// `*a += b`, refusing a total past what a count holds (forged summaries
/// must not wrap around to a small number).
fn add(a: &mut u64, b: u64) -> Result<(), String> {
    *a = a.checked_add(b).ok_or("a total past 2^64 - 1: not the summaries of one run")?;
    Ok(())
}

/// A summary's fields, checked before anything is merged or allocated from
/// them: what `check` itself refuses (a shard 0/0, zero cases, a time that
/// is not a positive number), counts that cannot be (more failures than
/// cases), ops this bitparity does not know, and text that would act on a
/// terminal instead of showing (every name, reason and message is printed).
pub fn check_summary(r: &JsonReport) -> Result<(), String> {
    use crate::escape::{visible, visible_lines};
    let text = |what: &str, t: &str| {
        if visible(t) == t {
            Ok(())
        } else {
            Err(format!("{what} {:?} holds control or invisible characters", visible(t)))
        }
    };
    if let Some(sh) = r.plan.shard {
        if sh.index == 0 || sh.index > sh.count {
            return Err(format!("shard {}/{}: expected i/n with 1 <= i <= n", sh.index, sh.count));
        }
    }
    if r.plan.cases == Some(0) {
        return Err("a plan of 0 cases (check refuses --cases 0)".into());
    }
    if let Some(t) = r.plan.seconds_per_op {
        if !(t > 0.0 && std::time::Duration::try_from_secs_f64(t).is_ok()) {
            return Err(format!("a time budget of {t} s per op (check refuses it)"));
        }
    }
    for s in &r.plan.subjects {
        text("a subject", s)?;
    }
    if !(r.seconds.is_finite() && r.seconds >= 0.0) {
        return Err(format!("a run of {} s", r.seconds));
    }
    if r.generator.max_te == 0 || r.generator.max_t == 0 || r.generator.max_e == 0 {
        return Err("a generator bound of 0".into());
    }
    for (k, v) in &r.knobs {
        if !knobs::RECORDED.contains(&k.as_str()) {
            return Err(format!("a knob {:?} that no run records", visible(k)));
        }
        text("a knob's value", v)?;
    }
    for u in &r.unavailable {
        text("a subject", &u.suite)?;
        text("a reason", &u.reason)?;
    }
    let mut names: Vec<&str> = Vec::new();
    for o in &r.ops {
        if !OPS.contains(&o.op.as_str()) {
            return Err(format!("an op {:?} this bitparity does not have", visible(&o.op)));
        }
        if names.contains(&o.op.as_str()) {
            return Err(format!("op {} twice", o.op));
        }
        names.push(&o.op);
        if !(o.seconds.is_finite() && o.seconds >= 0.0) {
            return Err(format!("op {}: {} s", o.op, o.seconds));
        }
        for c in o.classes.keys() {
            text("a class", c)?;
        }
        for d in &o.shapes {
            text("a dimension", &d.dim)?;
        }
        for sk in &o.skipped {
            text("a suite", &sk.suite)?;
            text("a reason", &sk.reason)?;
        }
        for f in &o.failures {
            for (what, t) in [
                ("a subject", &f.subject),
                ("a profile", &f.profile),
                ("a message", &f.message),
                ("a shape", &f.original_shape),
                ("a shape", &f.shrunk_shape),
            ] {
                text(what, t)?;
            }
            if visible_lines(&f.shrunk_case) != f.shrunk_case {
                return Err("a shrunk case holds control or invisible characters".into());
            }
            for c in &f.reproduce {
                text("a command", c)?;
            }
            match &f.save {
                crate::runner::SaveNote::NotSaved { reason } => text("a reason", reason)?,
                crate::runner::SaveNote::Saved { path }
                | crate::runner::SaveNote::Repaired { path }
                | crate::runner::SaveNote::Known { path } => text("a path", &path.display().to_string())?,
            }
        }
    }
    for row in &r.rows {
        if !names.contains(&row.op.as_str()) {
            return Err(format!("a row of op {:?}, which the summary does not run", visible(&row.op)));
        }
        for (what, t) in [("a subject", &row.subject), ("a profile", &row.profile), ("a padding rule", &row.padding)] {
            text(what, t)?;
        }
        for t in [&row.not_applicable, &row.unavailable_reason, &row.clamp_tie].into_iter().flatten() {
            text("a note", t)?;
        }
        if row.failures > row.cases {
            return Err(format!(
                "row {} / {}: {} failures in {} cases",
                row.property, row.subject, row.failures, row.cases
            ));
        }
    }
    Ok(())
}

/// The knobs that shape the cases (every recorded one but the GPU ordinal).
fn case_knobs(k: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    k.iter().filter(|(name, _)| name.as_str() != knobs::CUDA_DEVICE).map(|(a, b)| (a.clone(), b.clone())).collect()
}

fn same_key(a: &JsonRow, b: &JsonRow) -> bool {
    (a.op.as_str(), a.property, a.profile.as_str(), a.subject.as_str())
        == (b.op.as_str(), b.property, b.profile.as_str(), b.subject.as_str())
}

/// The same rows, in the same order, each n/a for the same reason, each
/// judged by the same padding rule, each with a ratio histogram or each without (a summary of an older bitparity
/// has none: adding it to a newer one would give a histogram of part of
/// the run).
fn same_rows(a: &[JsonRow], b: &[JsonRow]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            same_key(x, y)
                && x.not_applicable == y.not_applicable
                // One subject judged by two padding rules is two claims.
                && x.padding == y.padding
                && x.error_over_bound_histogram.is_some() == y.error_over_bound_histogram.is_some()
        })
}
