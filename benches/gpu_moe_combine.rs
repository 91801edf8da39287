//! GPU timing of the moe_combine kernels (CUDA events, medians of many runs)
//! at three MoE shapes: the dispatch alone, the forward (dispatch, x_disp,
//! combine) and the backward (dispatch, dx_exp, dw, dx), launched one by one
//! (eager) and replayed from a CUDA graph, for the gather kernels (subject
//! `cuda`, profile `serial`) and the atomicAdd scatter (`cuda-scatter`).
//! The gather's outputs are first checked bitwise against the profile
//! oracle (the scatter claims no profile: its y and dx are checked within
//! nothing, only its dispatch, x_disp, dx_exp and dw, which have one
//! answer); a kernel that does not conform gets no timing and the bench
//! fails. benches/torch_moe_combine.py times PyTorch's index_add_ combine
//! (eager, CUDA graph, torch.compile in a CUDA graph) on the same shapes in
//! the same run; benches/moe_combine_table.py joins the two files.
//!
//! Our kernels keep bf16 values in f32 words (the case's storage), so they
//! move twice the bytes of x, x_exp and x_disp that a bf16 kernel would;
//! the floor column counts the bytes they really move.
//!
//! Usage: gpu_moe_combine [--json PATH] [--iters N] [--warmup N]
//! Without a GPU it prints `SKIPPED` with the reason and exits 0, unless a
//! report was asked for (`--json`).

mod common;

use bitparity::props::compare::diff_groups;
use bitparity::subject::cuda::device::exit_without_subject;
use bitparity::subject::cuda::moe_combine::{probe, CudaMoeCombine, Variant};
use bitparity::subject::SubjectError;
use oracles::case::moe_combine::MoeCombineCase;
use oracles::case::Layout;
use oracles::op::{self, moe_combine::MoeCombine, Op};
use oracles::profile::moe_combine::MoeCombineProfile;

use common::{eager_and_graph, finish, lcg24, median, Pass, Timings};

/// (T, H, E, k): DeepSeek-V3 (per rank), Qwen3-30B-A3B, Mixtral 8x7B.
pub const SHAPES: [(usize, usize, usize, usize); 3] = [(4096, 7168, 256, 8), (8192, 2048, 128, 8), (8192, 4096, 8, 2)];

/// Uniform draws in [0, 1) from the benches' LCG.
fn unit(seed: u64) -> impl Iterator<Item = f32> {
    lcg24(seed).map(|v| v / (1u32 << 24) as f32)
}

/// n values uniform in [shift, shift + scale); bf16 ones truncated to a
/// bf16 value (any will do for timing).
fn values(n: usize, seed: u64, scale: f32, shift: f32, bf16: bool) -> Vec<f32> {
    let to = |v: f32| if bf16 { f32::from_bits(v.to_bits() & 0xffff_0000) } else { v };
    unit(seed).take(n).map(|u| to(u * scale + shift)).collect()
}

/// Every token picks k distinct experts uniformly (a partial Fisher-Yates
/// shuffle), so the experts' loads are near T k / E, as a trained router's.
fn case(t: usize, h: usize, e: usize, k: usize) -> MoeCombineCase {
    let mut r = unit(1);
    let mut ids = Vec::with_capacity(t * k);
    let mut pool: Vec<u32> = (0..e as u32).collect();
    for _ in 0..t {
        for j in 0..k {
            let u = r.next().unwrap_or(0.0);
            let pick = j + ((u * (e - j) as f32) as usize).min(e - j - 1);
            pool.swap(j, pick);
            ids.push(pool[j]);
        }
    }
    let n = t * k;
    MoeCombineCase {
        t,
        h,
        e,
        k,
        capacity: None,
        layout: Layout::dense(h),
        ids,
        weights: values(t * k, 2, 1.0, 0.0, false),
        padding: None,
        x: values(t * h, 3, 4.0, -2.0, true),
        x_exp: values(n * h, 4, 4.0, -2.0, true),
        dy: values(t * h, 5, 2.0, -1.0, false),
        g_disp: values(n * h, 6, 2.0, -1.0, false),
    }
}

/// The first bit difference between the kernels' outputs and the oracle's:
/// every output for the gather (profile `serial`); for the scatter, the
/// outputs with one answer (the slots, counts, x_disp, dx_exp and dw).
fn check(cuda: &CudaMoeCombine, variant: Variant, c: &MoeCombineCase) -> Result<Option<String>, String> {
    let p = MoeCombineProfile::serial();
    let e = |x: SubjectError| x.to_string();
    let mut dc = cuda.upload(c).map_err(e)?;
    dc.launch_forward().map_err(e)?;
    let mut f = dc.read_forward().map_err(e)?;
    dc.launch_backward().map_err(e)?;
    let mut b = dc.read_backward().map_err(e)?;
    let xf = op::forward::<MoeCombine>(c, &p).map_err(|x| x.to_string())?;
    let xb = op::backward::<MoeCombine>(c, &p).map_err(|x| x.to_string())?;
    if variant == Variant::Scatter {
        // The sums in any order: not compared here (bitparity check judges
        // them against the exact result within the any-order bound).
        f.y.clone_from(&xf.y);
        b.dx.clone_from(&xb.dx);
    }
    Ok(diff_groups(&MoeCombine::fwd_groups(c, &xf), &MoeCombine::fwd_groups(c, &f))
        .map(|d| format!("forward {d}"))
        .or_else(|| {
            diff_groups(&MoeCombine::bwd_groups(c, &xb), &MoeCombine::bwd_groups(c, &b))
                .map(|d| format!("backward {d}"))
        }))
}

/// The bytes the kernels read and write: (dispatch, forward, backward). f32
/// words for every value (bf16 ones included); the dispatch reads the ids
/// twice and writes the slots and their owners.
fn bytes(t: usize, h: usize, k: usize) -> (f64, f64, f64) {
    let (th, nh, tk) = ((t * h) as f64 * 4.0, (t * k * h) as f64 * 4.0, (t * k) as f64 * 4.0);
    let dispatch = tk * 4.0;
    // x read, x_disp written, x_exp read, weights read, y written.
    let fwd = dispatch + th + nh + nh + tk + th;
    // dy read (dx_exp, dw), dx_exp written, x_exp read (dw), g_disp read, dx written.
    let bwd = dispatch + th + nh + nh + nh + th + tk;
    (dispatch, fwd, bwd)
}

fn main() {
    let mut json_path = None;
    let (mut iters, mut warmup) = (100usize, 10usize);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |d: usize| it.next().and_then(|s| s.parse().ok()).unwrap_or(d);
        match a.as_str() {
            "--json" => json_path = it.next(),
            "--iters" => iters = num(iters),
            "--warmup" => warmup = num(warmup),
            _ => {} // cargo bench passes --bench
        }
    }
    let subjects = match (probe(Variant::Gather), probe(Variant::Scatter)) {
        (Ok(g), Ok(s)) => [(Variant::Gather, g), (Variant::Scatter, s)],
        (Err(reason), _) | (_, Err(reason)) => {
            exit_without_subject("gpu_moe_combine bench", &reason, json_path.is_none())
        }
    };
    let run = || -> Result<serde_json::Value, String> {
        let dev = subjects[0].1.device();
        let e = |x: SubjectError| x.to_string();
        let bw = dev.copy_bandwidth(1 << 30, 50).map_err(e)?;
        println!("device {}: copy bandwidth {:.3} TB/s (read + write)", dev.info.name, bw / 1e12);
        println!(
            "{:>22} {:>13} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9}  check",
            "T x H x E x k",
            "kernel",
            "disp us",
            "fwd us",
            "bwd us",
            "graph fwd",
            "graph bwd",
            "graph f+b",
            "floor f+b"
        );
        let mut rows = Vec::new();
        for &(t, h, en, k) in &SHAPES {
            let c = case(t, h, en, k);
            for (variant, cuda) in &subjects {
                let mismatch = check(cuda, *variant, &c)?;
                let mut dc = cuda.upload(&c).map_err(e)?;
                let (disp, tm) = if mismatch.is_some() {
                    (f64::NAN, Timings::NONE)
                } else {
                    let disp = median(dev.time_us(warmup, iters, || dc.launch_dispatch()).map_err(e)?);
                    let (tm, _) = eager_and_graph(dev, warmup, iters, |p| match p {
                        Pass::Forward => dc.launch_forward(),
                        Pass::Backward => dc.launch_backward(),
                    })
                    .map_err(e)?;
                    (disp, tm)
                };
                let Timings { fwd, bwd, graph_fwd: gfwd, graph_bwd: gbwd, graph_both: gboth, .. } = tm;
                let (disp_bytes, fwd_bytes, bwd_bytes) = bytes(t, h, k);
                let floor = (fwd_bytes + bwd_bytes) / bw * 1e6;
                let status = match &mismatch {
                    None if *variant == Variant::Gather => "bitwise equal to oracle".to_string(),
                    None => "equal to oracle where one answer exists".to_string(),
                    Some(m) => format!("MISMATCH {}", m.chars().take(120).collect::<String>()),
                };
                println!(
                    "{:>22} {:>13} {disp:>9.2} {fwd:>9.2} {bwd:>9.2} {gfwd:>10.2} {gbwd:>10.2} {gboth:>10.2} {floor:>9.2}  {status}",
                    format!("{t}x{h}x{en}x{k}"),
                    variant.name()
                );
                rows.push(serde_json::json!({
                    "t": t, "h": h, "e": en, "k": k, "kernel": variant.name(),
                    "dispatch_us": disp, "fwd_us": fwd, "bwd_us": bwd,
                    "graph_fwd_us": gfwd, "graph_bwd_us": gbwd, "graph_fwd_bwd_us": gboth,
                    "floor_fwd_bwd_us": floor, "bytes_dispatch": disp_bytes, "bytes_fwd": fwd_bytes, "bytes_bwd": bwd_bytes,
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
    finish("gpu_moe_combine", json_path, run());
}
