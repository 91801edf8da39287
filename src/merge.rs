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
use crate::harness::op_by_name;
use crate::knobs;
use crate::report::{JsonReport, JsonRow, RunPlan, RunReport};
use crate::runner::{DimCounts, FailureRecord, OpSummary, RowKey, RowStats, Shard};
use crate::subject::Skip;
use std::collections::BTreeMap;

/// Combines the shards' summaries (each with its file name, for errors)
/// into the whole run's.
pub fn merge(parts: &[(String, JsonReport)]) -> Result<RunReport, String> {
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
        let dyn_op = op_by_name(&op.op).ok_or_else(|| format!("{first_name}: unknown op {:?}", op.op))?;
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
                            *a += b;
                        }
                    }
                    None => shapes.push(d),
                }
            }
            summary.cases += o.cases;
            summary.seconds += o.seconds;
            summary.near_tie_cases += o.near_tie_cases;
            for (c, n) in &o.classes {
                *classes.entry(c.clone()).or_default() += n;
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
        let order = dyn_op.class_names();
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
                stats.cases += x.cases;
                stats.failures += x.failures;
                stats.not_applicable_cases += x.not_applicable_cases;
                stats.near_ties += x.near_ties;
                stats.unbounded += x.unbounded;
                stats.kinks += x.kinks;
                stats.undetermined += x.undetermined;
                stats.unavailable += x.unavailable;
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
    let missing: Vec<String> = (1..=count).filter(|i| !seen.contains_key(i)).map(|i| format!("{i}/{count}")).collect();
    Err(format!("missing shards: {}", missing.join(", ")))
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
