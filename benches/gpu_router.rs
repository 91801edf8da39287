//! GPU timing of the router kernels (CUDA events, medians of many runs) at
//! DeepSeek-V3's shape (E = 256, k = 8, G = 8, L = 4) for T = 4096 and
//! 65536, forward, backward and both, each two ways: launched one by one
//! (eager) and replayed from a CUDA graph (as a training step runs them, so
//! launch latency is compared fairly with PyTorch under CUDA graphs), with
//! and without the fused seqwise_loss gradient. Each shape's outputs are
//! first checked bitwise against the profile oracle: a kernel that does not
//! conform gets no timing, and the bench fails. benches/torch_router.py
//! times PyTorch's router on the same shapes in the same run;
//! benches/router_table.py joins the two files.
//!
//! Usage: gpu_router [--json PATH] [--iters N] [--warmup N] [--only T]
//! Without a GPU it prints `SKIPPED` with the reason and exits 0, unless a
//! report was asked for (`--json`); with a GPU whose subject does not load
//! (a kernel that does not compile, a refused knob) it fails (exit 1):
//! `device::exit_without_subject`.

mod common;

use bitparity::props::compare::diff_groups;
use bitparity::subject::cuda::device::exit_without_subject;
use bitparity::subject::cuda::router::{probe, CudaRouter};
use bitparity::subject::SubjectError;
use common::{eager_and_graph, finish, lcg24, Pass, Timings};
use oracles::case::router::{FusedLoss, RouterCase};
use oracles::case::Layout;
use oracles::op::{self, router::Router, Op};
use oracles::profile::router::RouterProfile;
use oracles::vocab::ClampTie;

const SHAPES: [(usize, usize, usize, usize, usize); 3] =
    [(4096, 256, 8, 4, 8), (65536, 256, 8, 4, 8), (4096, 160, 8, 3, 6)];

/// Values from a 64-bit LCG, uniform in [shift, shift + scale).
fn values(n: usize, seed: u64, scale: f32, shift: f32) -> Vec<f32> {
    lcg24(seed).take(n).map(|r| r / (1u64 << 24) as f32 * scale + shift).collect()
}

fn case(t: usize, e: usize, g: usize, l: usize, k: usize, fused: bool) -> RouterCase {
    RouterCase {
        t,
        e,
        layout: Layout::dense(e),
        // Logits like a gate matmul's: a few units either side of 0.
        logits: values(t * e, 1, 8.0, -4.0),
        bias: values(e, 2, 0.02, -0.01),
        groups: g,
        topk_groups: l,
        k,
        route_scale: 2.5,
        route_norm: true,
        padding: None,
        gw: values(t * k, 3, 2.0, -1.0),
        loss: fused.then_some(FusedLoss { clamp_tie: ClampTie::Strict, g: 1e-3 }),
    }
}

/// The first bit difference between the kernels' outputs and the oracle's.
fn check(cuda: &CudaRouter, c: &RouterCase) -> Result<Option<String>, String> {
    let p = RouterProfile::gpu();
    let e = |x: SubjectError| x.to_string();
    let mut dc = cuda.upload(c).map_err(e)?;
    dc.launch_forward().map_err(e)?;
    dc.launch_backward().map_err(e)?;
    let f = dc.read_forward().map_err(e)?;
    let b = dc.read_backward().map_err(e)?;
    let xf = op::forward::<Router>(c, &p).map_err(|x| x.to_string())?;
    let xb = op::backward::<Router>(c, &p).map_err(|x| x.to_string())?;
    Ok(diff_groups(&Router::fwd_groups(c, &xf), &Router::fwd_groups(c, &f)).map(|d| format!("forward {d}")).or_else(
        || diff_groups(&Router::bwd_groups(c, &xb), &Router::bwd_groups(c, &b)).map(|d| format!("backward {d}")),
    ))
}

fn main() {
    let mut json_path = None;
    let (mut iters, mut warmup) = (200usize, 20usize);
    let mut only = None::<usize>;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |d: usize| it.next().and_then(|s| s.parse().ok()).unwrap_or(d);
        match a.as_str() {
            "--json" => json_path = it.next(),
            "--iters" => iters = num(iters),
            "--warmup" => warmup = num(warmup),
            "--only" => only = Some(num(0)),
            _ => {} // cargo bench passes --bench
        }
    }
    let cuda = match probe() {
        Ok(c) => c,
        Err(reason) => exit_without_subject("gpu_router bench", &reason, json_path.is_none()),
    };
    let run = || -> Result<serde_json::Value, String> {
        let dev = cuda.device();
        let e = |x: SubjectError| x.to_string();
        let bw = dev.copy_bandwidth(1 << 30, 50).map_err(e)?;
        println!("device {}: copy bandwidth {:.3} TB/s (read + write)", dev.info.name, bw / 1e12);
        println!(
            "{:>22} {:>5} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9}  check",
            "T x E x k (G, L)", "fused", "fwd us", "bwd us", "f+b us", "graph fwd", "graph bwd", "graph f+b", "floor"
        );
        let mut rows = Vec::new();
        for &(t, en, g, l, k) in &SHAPES {
            if only.is_some_and(|o| o != t) {
                continue;
            }
            for fused in [false, true] {
                let c = case(t, en, g, l, k, fused);
                let mismatch = check(&cuda, &c)?;
                let mut dc = cuda.upload(&c).map_err(e)?;
                let Timings { fwd, bwd, both, graph_fwd: gfwd, graph_bwd: gbwd, graph_both: gboth } =
                    if mismatch.is_some() {
                        Timings::NONE
                    } else {
                        dc.launch_forward().map_err(e)?;
                        let launch = |p: Pass| match p {
                            Pass::Forward => dc.launch_forward(),
                            Pass::Backward => dc.launch_backward(),
                        };
                        eager_and_graph(dev, warmup, iters, launch).map_err(e)?.0
                    };
                // Bytes the kernels must move: the forward reads the logits
                // and writes s, the map, ids and weights; the backward reads
                // s, ids and gw and writes the gradient.
                let (te, tk) = ((t * en) as f64, (t * k) as f64);
                let fwd_bytes = te * 4.0 + te * 4.0 + te + tk * 8.0;
                let bwd_bytes = te * 4.0 + tk * 8.0 + te * 4.0;
                let floor = (fwd_bytes + bwd_bytes) / bw * 1e6;
                let status = match &mismatch {
                    None => "bitwise equal to oracle".to_string(),
                    Some(m) => format!("MISMATCH {}", m.chars().take(120).collect::<String>()),
                };
                println!(
                    "{:>22} {:>5} {fwd:>9.2} {bwd:>9.2} {both:>9.2} {gfwd:>10.2} {gbwd:>10.2} {gboth:>10.2} {floor:>9.2}  {status}",
                    format!("{t}x{en}x{k} ({g}, {l})"),
                    fused
                );
                rows.push(serde_json::json!({
                    "t": t, "e": en, "k": k, "groups": g, "topk_groups": l, "fused_loss": fused,
                    "fwd_us": fwd, "bwd_us": bwd, "fwd_bwd_us": both,
                    "graph_fwd_us": gfwd, "graph_bwd_us": gbwd, "graph_fwd_bwd_us": gboth,
                    "floor_fwd_bwd_us": floor, "bytes_fwd": fwd_bytes, "bytes_bwd": bwd_bytes,
                    "conformance": mismatch.is_none(), "mismatch": mismatch,
                }));
            }
        }
        Ok(serde_json::json!({
            "device": dev.info.name,
            "compute_capability": format!("{}.{}", dev.info.compute_capability.0, dev.info.compute_capability.1),
            "driver_cuda_version": dev.info.driver_cuda_version,
            "copy_bandwidth_bytes_per_s": bw,
            "iters": iters, "warmup": warmup,
            "rows": rows,
        }))
    };
    finish("gpu_router", json_path, run());
}
