//! `check --devices`: one worker process per GPU of the host, each running
//! one shard of the run on its own GPU (`BITPARITY_CUDA_DEVICE`) with its
//! share of the CPU cores for the oracles; their summaries are merged into
//! the run's. A process per GPU (rather than threads) keeps each GPU's
//! context, module cache and failures apart, and reuses the shard and merge
//! machinery whose result is already proven equal to an unsharded run.

use crate::report::JsonReport;
use crate::runner::Shard;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

/// The GPU ordinals a `--devices` value names: `all` (every device of the
/// host) or a comma list of ordinals, each at most once.
pub fn parse(spec: &str, count: impl FnOnce() -> Result<usize, String>) -> Result<Vec<usize>, String> {
    let ordinals: Vec<usize> = if spec.trim() == "all" {
        let n = count()?;
        if n == 0 {
            return Err("--devices all: this host has no CUDA device".into());
        }
        (0..n).collect()
    } else {
        spec.split(',')
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("--devices {spec:?}: expected `all` or ordinals like 0,1"))
            })
            .collect::<Result<_, _>>()?
    };
    if ordinals.is_empty() {
        return Err(format!("--devices {spec:?}: no device named"));
    }
    for (i, o) in ordinals.iter().enumerate() {
        if ordinals[..i].contains(o) {
            return Err(format!("--devices {spec:?}: device {o} named twice"));
        }
    }
    Ok(ordinals)
}

/// Shard `i` (0-based) of `n` within the user's shard `outer` (or the whole
/// run): the positions m with m mod (m_out n) = (j - 1) + i m_out.
pub fn sub_shard(outer: Option<Shard>, i: usize, n: usize) -> Shard {
    let Shard { index: j, count: m } = outer.unwrap_or(Shard { index: 1, count: 1 });
    Shard { index: j + i as u64 * m, count: m * n as u64 }
}

/// One worker's outcome.
pub struct Worker {
    pub ordinal: usize,
    pub shard: Shard,
    pub exit_code: Option<i32>,
    /// Its summary, or why there is none.
    pub summary: Result<JsonReport, String>,
}

/// Runs `check` once per ordinal: this executable with `args` (the user's
/// arguments without `--devices`, `--shard`, `--json`, `--markdown` and
/// `--quiet`), a sub-shard each, the summary written to `dir`. The CPU
/// cores are split between the workers (RAYON_NUM_THREADS); their stderr
/// (failures as they are found) is the terminal's; SIGINT reaches them as it
/// reaches this process, and each finishes its cases in flight and writes its
/// summary.
pub fn run(args: &[OsString], ordinals: &[usize], outer: Option<Shard>, dir: &Path) -> Result<Vec<Worker>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = (cores / ordinals.len()).max(1);
    let mut children = Vec::new();
    for (i, &ordinal) in ordinals.iter().enumerate() {
        let shard = sub_shard(outer, i, ordinals.len());
        let json = dir.join(format!("device-{ordinal}.json"));
        let child = Command::new(&exe)
            .arg("check")
            .args(args)
            .args(["--quiet", "--shard", &shard.to_string(), "--json"])
            .arg(&json)
            .env(crate::knobs::CUDA_DEVICE, ordinal.to_string())
            .env("RAYON_NUM_THREADS", threads.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting the worker of device {ordinal}: {e}"))?;
        children.push((ordinal, shard, json, child));
    }
    let mut workers = Vec::new();
    for (ordinal, shard, json, mut child) in children {
        let exit_code = child.wait().map_err(|e| format!("waiting for the worker of device {ordinal}: {e}"))?.code();
        let summary = crate::fsio::read_capped(&json, 64 << 20)
            .and_then(|b| serde_json::from_slice::<JsonReport>(&b).map_err(|e| e.to_string()))
            .map_err(|e| format!("device {ordinal}'s worker (exit {exit_code:?}) left no summary: {e}"));
        workers.push(Worker { ordinal, shard, exit_code, summary });
    }
    Ok(workers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_all_or_distinct_ordinals() {
        assert_eq!(parse("all", || Ok(2)), Ok(vec![0, 1]));
        assert_eq!(parse("1, 3", || unreachable!()), Ok(vec![1, 3]));
        assert!(parse("all", || Ok(0)).is_err());
        assert!(parse("all", || Err("no driver".into())).unwrap_err().contains("no driver"));
        for bad in ["", "0,0", "x", "0,", "-1"] {
            assert!(parse(bad, || Ok(4)).is_err(), "{bad}");
        }
    }

    #[test]
    fn sub_shards_split_the_outer_shard() {
        // Shard 2 of 3, over 2 devices: positions 1, 4, 7, ... split into
        // 1, 7, ... (2/6) and 4, 10, ... (5/6).
        let outer = Some(Shard { index: 2, count: 3 });
        assert_eq!(sub_shard(outer, 0, 2), Shard { index: 2, count: 6 });
        assert_eq!(sub_shard(outer, 1, 2), Shard { index: 5, count: 6 });
        assert_eq!(sub_shard(None, 1, 4), Shard { index: 2, count: 4 });
    }
}
