//! GPU timing of the seqwise_loss kernels (CUDA events, medians of many
//! runs) at the shapes of `SHAPES`, forward, backward and both, each two ways:
//! launched one by one (eager) and replayed from a CUDA graph (as a training
//! step runs them, so launch latency is compared fairly with PyTorch under
//! CUDA graphs), with the measured copy bandwidth for the memory floor.
//! The graph of forward and backward is timed twice: one replay per timing
//! (which includes the host's submission latency), and `STEADY_BATCH`
//! replays back to back per timing (the GPU's own time per step, the way a
//! training loop whose host runs ahead sees it).
//!
//! Each shape's timed outputs are checked bitwise against the profile oracle
//! before any timing (on the very buffers that are then timed), and again
//! after the graph replays: a kernel that does not conform gets no timing,
//! and the bench fails (exit 1). benches/torch_seqwise_loss.py times native
//! PyTorch on the same shapes in the same run (eager, CUDA graph,
//! torch.compile in a CUDA graph); benches/speed_table.py joins the two
//! JSON files.
//!
//! Usage: gpu_seqwise_loss [--json PATH] [--iters N] [--warmup N] [--only TxExk]
//!        [--objective topk|map]   (the last two narrow the run, e.g. for ncu)
//! Without a usable GPU it fails closed (exit 1, the reason on stderr):
//! only under `cargo bench` with no `--json` (a developer's machine, where no
//! report is asked for) does it print `SKIPPED` with the reason and exit 0.

mod common;

use bitparity::props::compare::diff_groups;
use bitparity::subject::cuda::device::exit_without_subject;
use bitparity::subject::cuda::probe;
use bitparity::subject::cuda::seqwise_loss::DeviceCase;
use bitparity::subject::SubjectError;
use common::{eager_and_graph, finish, lcg24, median, replay, Pass, Timings};
use oracles::case::seqwise_loss::{Objective, SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::op::{seqwise_loss::SeqwiseLoss, Op};
use oracles::profile::seqwise_loss::SeqwiseProfile;
use oracles::profile_oracle::seqwise_loss as oracle;

const SHAPES: [(usize, usize, usize); 5] =
    [(8193, 64, 6), (4097, 512, 8), (33, 129, 8), (4096, 256, 8), (65536, 256, 8)];

/// Graph replays enqueued back to back per steady-state timing.
const STEADY_BATCH: usize = 20;

/// Scores in (0, 1], like sigmoid outputs, from a 64-bit LCG: never zero.
fn scores(n: usize, seed: u64) -> Vec<f32> {
    lcg24(seed).take(n).map(|r| (r + 1.0) / (1u64 << 24) as f32).collect()
}

/// The first bit difference between the device case's current outputs and
/// the oracle's, read back from the buffers the timings use.
fn check(
    dc: &DeviceCase,
    case: &SeqwiseCase,
    expected: &(SeqwiseForward<f32>, SeqwiseBackward<f32>),
) -> Result<Option<String>, String> {
    let f = dc.read_forward().map_err(|e| e.to_string())?;
    let b = dc.read_backward().map_err(|e| e.to_string())?;
    Ok(diff_groups(&SeqwiseLoss::fwd_groups(case, &expected.0), &SeqwiseLoss::fwd_groups(case, &f))
        .map(|d| format!("forward {d}"))
        .or_else(|| {
            diff_groups(&SeqwiseLoss::bwd_groups(case, &expected.1), &SeqwiseLoss::bwd_groups(case, &b))
                .map(|d| format!("backward {d}"))
        }))
}

/// Bytes the kernels must move, (forward, backward): the forward reads the
/// scores, the padding flags and (provided map) the map, and writes E-sized
/// results; the backward reads the scores, the padding flags and f, and
/// writes the gradient.
fn bytes(t: usize, e: usize, objective: &str) -> (f64, f64) {
    let (te, t, e) = ((t * e) as f64, t as f64, e as f64);
    let map = if objective == "map" { te } else { 0.0 };
    let fwd = te * 4.0 + t + map + e * 4.0 * 3.0 + 4.0;
    let bwd = te * 4.0 + t + e * 4.0 + te * 4.0;
    (fwd, bwd)
}

fn main() {
    let mut json_path = None;
    let (mut iters, mut warmup) = (200usize, 20usize);
    let (mut only, mut only_objective) = (None::<String>, None::<String>);
    let mut under_cargo_bench = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => json_path = it.next(),
            "--iters" => iters = it.next().and_then(|s| s.parse().ok()).unwrap_or(iters).max(1),
            "--warmup" => warmup = it.next().and_then(|s| s.parse().ok()).unwrap_or(warmup),
            "--only" => only = it.next(),
            "--objective" => only_objective = it.next(),
            "--bench" => under_cargo_bench = true, // cargo bench passes --bench
            _ => {}
        }
    }
    let cuda = match probe() {
        Ok(c) => c,
        // Only under cargo bench may a machine without a GPU skip.
        Err(reason) => {
            exit_without_subject("gpu_seqwise_loss bench", &reason, under_cargo_bench && json_path.is_none())
        }
    };
    let run = || -> Result<serde_json::Value, String> {
        let dev = cuda.device();
        let e = |x: SubjectError| x.to_string();
        let bw = dev.copy_bandwidth(1 << 30, 50).map_err(e)?;
        println!("device {}: copy bandwidth {:.3} TB/s (read + write)", dev.info.name, bw / 1e12);
        let profile = SeqwiseProfile::gpu();
        let mut rows = Vec::new();
        println!(
            "{:>16} {:>5} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>11} {:>9}  check",
            "T x E x k",
            "obj",
            "fwd us",
            "bwd us",
            "f+b us",
            "graph fwd",
            "graph bwd",
            "graph f+b",
            "steady f+b",
            "floor"
        );
        for (i, &(t, en, k)) in SHAPES.iter().enumerate() {
            if only.as_ref().is_some_and(|o| *o != format!("{t}x{en}x{k}")) {
                continue;
            }
            for objective in ["topk", "map"] {
                if only_objective.as_ref().is_some_and(|o| o != objective) {
                    continue;
                }
                let s = scores(t * en, i as u64 + 1);
                let mut case = SeqwiseCase::dense(t, en, s, Objective::UnbiasedTopK { k });
                case.g = 1.0;
                if objective == "map" {
                    case.objective = Objective::ProvidedMap { map: case.routing_map() };
                }
                let expected = (
                    oracle::forward(&case, &profile).map_err(|x| x.to_string())?,
                    oracle::backward(&case, &profile).map_err(|x| x.to_string())?,
                );
                // The buffers that are timed: checked before any timing.
                let mut dc = cuda.upload(&case).map_err(e)?;
                dc.launch_forward().map_err(e)?;
                dc.launch_backward().map_err(e)?;
                let mut mismatch = check(&dc, &case, &expected)?;
                let (mut timings, mut steady) = (Timings::NONE, f64::NAN);
                if mismatch.is_none() {
                    let launch = |p: Pass| match p {
                        Pass::Forward => dc.launch_forward(),
                        Pass::Backward => dc.launch_backward(),
                    };
                    let gfb;
                    (timings, gfb) = eager_and_graph(dev, warmup, iters, launch).map_err(e)?;
                    steady = median(dev.time_batched_us(warmup, iters, STEADY_BATCH, || replay(&gfb)).map_err(e)?);
                    // What the replayed graph left in the buffers must still be
                    // the oracle's bits (a replay that reuses stale state, e.g.
                    // the finalize ticket, would show here): else no timing.
                    replay(&gfb).map_err(e)?;
                    mismatch = check(&dc, &case, &expected)?.map(|m| format!("after graph replay: {m}"));
                    if mismatch.is_some() {
                        (timings, steady) = (Timings::NONE, f64::NAN);
                    }
                }
                let Timings { fwd, bwd, both, graph_fwd: gfwd, graph_bwd: gbwd, graph_both: gboth } = timings;
                let (fwd_bytes, bwd_bytes) = bytes(t, en, objective);
                let floor = |b: f64| b / bw * 1e6;
                let status = match &mismatch {
                    None => "bitwise equal to oracle".to_string(),
                    Some(m) => format!("MISMATCH {}", m.chars().take(120).collect::<String>()),
                };
                println!(
                    "{:>16} {objective:>5} {fwd:>9.2} {bwd:>9.2} {both:>9.2} {gfwd:>10.2} {gbwd:>10.2} {gboth:>10.2} {steady:>11.2} {:>9.2}  {status}",
                    format!("{t}x{en}x{k}"),
                    floor(fwd_bytes + bwd_bytes)
                );
                // NaN (no timing) is written as null.
                rows.push(serde_json::json!({
                    "t": t, "e": en, "k": k, "objective": objective,
                    "fwd_us": fwd, "bwd_us": bwd, "fwd_bwd_us": both,
                    "graph_fwd_us": gfwd, "graph_bwd_us": gbwd, "graph_fwd_bwd_us": gboth,
                    "graph_steady_fwd_bwd_us": steady, "steady_batch": STEADY_BATCH,
                    "floor_fwd_us": floor(fwd_bytes), "floor_bwd_us": floor(bwd_bytes),
                    "floor_fwd_bwd_us": floor(fwd_bytes + bwd_bytes),
                    "bytes_fwd": fwd_bytes, "bytes_bwd": bwd_bytes,
                    "conformance": mismatch.is_none(), "mismatch": mismatch,
                }));
            }
        }
        let g = &dev.info;
        Ok(serde_json::json!({
            "device": g.name,
            "compute_capability": format!("{}.{}", g.compute_capability.0, g.compute_capability.1),
            "driver_cuda_version": g.driver_cuda_version,
            "copy_bandwidth_bytes_per_s": bw,
            "iters": iters, "warmup": warmup,
            "rows": rows,
        }))
    };
    // A timing of a kernel that does not conform is no result: the table
    // shows it untimed, and the bench fails.
    let v = finish("gpu_seqwise_loss", json_path, run());
    if v["rows"].as_array().map_or(0, Vec::len) == 0 {
        eprintln!("gpu_seqwise_loss bench: no shape selected (--only / --objective)");
        std::process::exit(1);
    }
}
