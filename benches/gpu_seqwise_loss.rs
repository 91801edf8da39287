//! GPU timing of the seqwise_loss kernels (CUDA events around each launch
//! sequence, median of many), at the shapes of issue 3, with the measured
//! copy bandwidth for the memory floor. Each shape's outputs are first
//! checked bitwise against the profile oracle, so no number comes from a
//! wrong kernel. benches/torch_seqwise_loss.py times native PyTorch on the
//! same shapes; benches/speed_table.py joins the two JSON files.
//!
//! Usage: gpu_seqwise_loss [--json PATH] [--iters N] [--warmup N] [--only TxExk]
//!        [--objective topk|map]   (the last two narrow the run, e.g. for ncu)
//! Without a GPU it prints `SKIPPED` with the reason and exits 0; any shape
//! whose outputs are not bitwise the oracle's makes it exit 1.

use bitparity::props::compare::diff_groups;
use bitparity::subject::cuda::probe;
use oracles::case::seqwise_loss::{Objective, SeqwiseCase};
use oracles::op::{seqwise_loss::SeqwiseLoss, Op};
use oracles::profile::seqwise_loss::SeqwiseProfile;
use oracles::profile_oracle::seqwise_loss as oracle;

const SHAPES: [(usize, usize, usize); 5] =
    [(8193, 64, 6), (4097, 512, 8), (33, 129, 8), (4096, 256, 8), (65536, 256, 8)];

/// Scores in (0, 1], like sigmoid outputs, from a 64-bit LCG: never zero.
fn scores(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 + 1.0) / (1u64 << 24) as f32
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut json_path = None;
    let (mut iters, mut warmup) = (200usize, 20usize);
    let (mut only, mut only_objective) = (None::<String>, None::<String>);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => json_path = it.next(),
            "--iters" => iters = it.next().and_then(|s| s.parse().ok()).unwrap_or(iters),
            "--warmup" => warmup = it.next().and_then(|s| s.parse().ok()).unwrap_or(warmup),
            "--only" => only = it.next(),
            "--objective" => only_objective = it.next(),
            _ => {} // cargo bench passes --bench
        }
    }
    let cuda = match probe() {
        Ok(c) => c,
        Err(reason) => {
            println!("SKIPPED gpu_seqwise_loss bench: no CUDA subject: {reason}");
            return;
        }
    };
    let run = || -> Result<serde_json::Value, String> {
        let bw = cuda.device().copy_bandwidth(1 << 30, iters.clamp(1, 50)).map_err(|e| e.to_string())?;
        println!("device {}: copy bandwidth {:.3} TB/s (read + write)", cuda.info().name, bw / 1e12);
        let profile = SeqwiseProfile::gpu();
        let mut rows = Vec::new();
        println!("{:>18} {:>6} {:>10} {:>10} {:>10}  check", "T x E x k", "obj", "fwd us", "bwd us", "f+b us");
        for (i, &(t, e, k)) in SHAPES.iter().enumerate() {
            if only.as_ref().is_some_and(|o| *o != format!("{t}x{e}x{k}")) {
                continue;
            }
            for objective in ["topk", "map"] {
                if only_objective.as_ref().is_some_and(|o| o != objective) {
                    continue;
                }
                let s = scores(t * e, i as u64 + 1);
                let mut case = SeqwiseCase::dense(t, e, s, Objective::UnbiasedTopK { k });
                case.g = 1.0;
                if objective == "map" {
                    case.objective = Objective::ProvidedMap { map: case.routing_map() };
                }
                let mut dc = cuda.upload(&case).map_err(|e| e.to_string())?;
                dc.launch_forward().map_err(|e| e.to_string())?;
                dc.launch_backward().map_err(|e| e.to_string())?;
                let f = dc.read_forward().map_err(|e| e.to_string())?;
                let b = dc.read_backward().map_err(|e| e.to_string())?;
                let expected_f = oracle::forward(&case, &profile).map_err(|e| e.to_string())?;
                let expected_b = oracle::backward(&case, &profile).map_err(|e| e.to_string())?;
                let check =
                    diff_groups(&SeqwiseLoss::fwd_groups(&case, &expected_f), &SeqwiseLoss::fwd_groups(&case, &f))
                        .or_else(|| {
                            diff_groups(
                                &SeqwiseLoss::bwd_groups(&case, &expected_b),
                                &SeqwiseLoss::bwd_groups(&case, &b),
                            )
                        });
                let fwd =
                    median(cuda.device().time_us(warmup, iters, || dc.launch_forward()).map_err(|e| e.to_string())?);
                let bwd =
                    median(cuda.device().time_us(warmup, iters, || dc.launch_backward()).map_err(|e| e.to_string())?);
                let both = median(
                    cuda.device()
                        .time_us(warmup, iters, || {
                            dc.launch_forward()?;
                            dc.launch_backward()
                        })
                        .map_err(|e| e.to_string())?,
                );
                let n = (t * e * 4) as f64;
                let floor = |bytes: f64| bytes / bw * 1e6;
                let status: String = match &check {
                    None => "bitwise equal to oracle".into(),
                    Some(m) => format!("MISMATCH {}", m.chars().take(100).collect::<String>()),
                };
                println!(
                    "{:>18} {objective:>6} {fwd:>10.2} {bwd:>10.2} {both:>10.2}  {status}",
                    format!("{t}x{e}x{k}")
                );
                rows.push(serde_json::json!({
                    "t": t, "e": e, "k": k, "objective": objective,
                    "fwd_us": fwd, "bwd_us": bwd, "fwd_bwd_us": both,
                    "floor_fwd_us": floor(n), "floor_bwd_us": floor(2.0 * n), "floor_fwd_bwd_us": floor(3.0 * n),
                    "conformance": check.is_none(), "mismatch": check,
                }));
            }
        }
        let g = cuda.info();
        Ok(serde_json::json!({
            "device": g.name,
            "compute_capability": format!("{}.{}", g.compute_capability.0, g.compute_capability.1),
            "driver_cuda_version": g.driver_cuda_version,
            "copy_bandwidth_bytes_per_s": bw,
            "iters": iters, "warmup": warmup,
            "rows": rows,
        }))
    };
    match run() {
        Ok(v) => {
            if let Some(p) = json_path {
                let text = serde_json::to_string_pretty(&v).unwrap_or_default();
                if let Err(e) = bitparity::fsio::write_atomic(std::path::Path::new(&p), text.as_bytes()) {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            }
            // A timing of a kernel that does not conform is no result: the
            // table shows it, and the bench fails.
            let mismatches = v["rows"].as_array().map_or(0, |r| r.iter().filter(|x| x["conformance"] != true).count());
            if mismatches > 0 {
                eprintln!("gpu bench: {mismatches} shape(s) not bitwise equal to the oracle");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("gpu bench failed: {e}");
            std::process::exit(1);
        }
    }
}
