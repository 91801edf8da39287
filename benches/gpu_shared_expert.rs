//! GPU timing of a CUDA subject's shared-expert kernels (the strict ones,
//! profile `serial`, or with `--variant tc` or `--variant wgmma` the
//! tensor-core ones, profile `mma16-h100`) with CUDA events, medians of many runs: forward, backward and both, and each
//! of the five kernels alone, at DeepSeek-V3's shared expert (H = 7168, F =
//! 2048) and the seed's contract (H = 4096, F = 2048), for several T.
//!
//! FLOPs counted: a multiply and an add per term of every dot product the
//! subject runs: forward 6 T H F (z = x w1^T: 4, y = h w2^T: 2), backward
//! 10 T H F (dh = dy w2: 2, z recomputed from x: 4, dX = dz w1: 4), or 6
//! where the subject keeps z from the forward (`--variant wgmma`). The
//! `model` column counts f+b as 12 T H F whatever the subject runs, as a
//! training step that keeps z does: the column to compare across subjects.
//!
//! Before a shape is timed, rows of its full batch (the first, the last and
//! one between) are checked bitwise against the profile oracle run on those
//! rows alone (batch invariance makes that a check of the full batch's
//! rows): a shape that does not conform gets no timing and the bench fails.
//!
//! `graph f+b`: the forward and backward captured in one CUDA graph and
//! replayed five times a timing (the mean), as benches/torch_shared_expert.py
//! times PyTorch: the host's submission latency does not count.
//!
//! Usage: gpu_shared_expert [--variant strict|tc|wgmma] [--json PATH] [--iters N]
//!        [--warmup N] [--only T] [--quick] [--table] [--no-check]
//!        [--sweep-t MAX] (--quick: T = 2048 at H = 4096 only; --table: the
//!        speed table's shapes, those of the cuBLAS subjects; --no-check:
//!        time without the oracle check, for tuning; --sweep-t: no timing,
//!        the batch-invariance sweep below)
//!
//! `--sweep-t MAX`: batch invariance and determinism for every T from 1 to
//! MAX at H = 4096, F = 2048. One batch of MAX tokens is uploaded and runs
//! whole; then for each T the T tokens from row a = 7919 T mod (MAX + 1 -
//! T) run as a batch of their own (a window of the uploaded rows), twice,
//! and rows 0, T / 2 and T - 1 of it (y and dX) must equal the whole
//! batch's rows a, a + T / 2 and a + T - 1, and the second run the first,
//! bit for bit. Exits 1 on the first difference.
//! Without a GPU it prints `SKIPPED` with the reason and exits 0, unless a
//! report was asked for (`--json`); with a GPU whose subject does not load
//! (a kernel that does not compile, a refused knob) it fails (exit 1):
//! `device::exit_without_subject`.

mod common;

use bitparity::subject::cuda::device::exit_without_subject;
use bitparity::subject::cuda::shared_expert::{probe, CudaSharedExpert, Variant};
use bitparity::subject::{Subject, SubjectError};
use common::{finish, lcg24, median, replay};
use oracles::case::shared_expert::SharedExpertCase;
use oracles::case::Layout;
use oracles::op::{self, shared_expert::SharedExpert};

/// (T, H, F).
const SHAPES: [(usize, usize, usize); 10] = [
    (2048, 4096, 2048),
    (1, 4096, 2048),
    (16, 4096, 2048),
    (256, 4096, 2048),
    (128, 4096, 2048),
    (1000, 4096, 2048),
    (4096, 4096, 2048),
    (2048, 7168, 2048),
    (4096, 7168, 2048),
    (8192, 7168, 2048),
];

/// bf16 values uniform in [-scale, scale) (truncated to bf16) from an LCG.
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    lcg24(seed)
        .take(n)
        .map(|r| {
            let v = (r / (1u64 << 23) as f32 - 1.0) * scale;
            f32::from_bits(v.to_bits() & 0xffff_0000)
        })
        .collect()
}

fn case(t: usize, h: usize, f: usize) -> SharedExpertCase {
    SharedExpertCase {
        t,
        h,
        f,
        layout: Layout::dense(h),
        x: values(t * h, 1, 2.0),
        w1: values(2 * f * h, 2, 2.0 / (h as f32).sqrt()),
        w2: values(h * f, 3, 2.0 / (f as f32).sqrt()),
        dy: values(t * h, 4, 1.0),
    }
}

fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Rows of the full batch against the oracle on those rows alone.
fn check(cuda: &CudaSharedExpert, c: &SharedExpertCase) -> Result<Option<String>, String> {
    let e = |x: SubjectError| x.to_string();
    let mut dc = cuda.upload(c).map_err(e)?;
    dc.launch_forward().map_err(e)?;
    dc.launch_backward().map_err(e)?;
    let y = dc.read_forward().map_err(e)?;
    let dx = dc.read_backward().map_err(e)?;
    let h = c.h;
    let mut rows = vec![0, c.t / 2, c.t - 1];
    rows.dedup();
    let p = cuda.profile().ok_or("the CUDA subject claims no profile")?;
    for r in rows {
        let one = c.rows(r..r + 1);
        let yr = op::forward::<SharedExpert>(&one, &p).map_err(|x| x.to_string())?.y;
        let dxr = op::backward::<SharedExpert>(&one, &p).map_err(|x| x.to_string())?.dx;
        if !same(&y[r * h..(r + 1) * h], &yr) {
            return Ok(Some(format!("y row {r}")));
        }
        if !same(&dx[r * h..(r + 1) * h], &dxr) {
            return Ok(Some(format!("dX row {r}")));
        }
    }
    Ok(None)
}

/// The cuBLAS subjects' shapes: the speed table's (benches/torch_shared_expert.py).
const LIBRARY_SHAPES: [(usize, usize, usize); 4] =
    [(16, 4096, 2048), (256, 4096, 2048), (2048, 4096, 2048), (2048, 7168, 2048)];

/// The cuBLAS subjects (`cublas`, PyTorch's default math; `cublaslt-pinned`,
/// one algorithm without split-K for every T) timed like the strict
/// kernels: the forward and forward + backward, five back to back a timing.
/// Their backward recomputes z as the strict kernels' does (16 T H F in
/// all; PyTorch keeps z: 12).
fn libraries(only: &Option<usize>, warmup: usize, iters: usize) -> Result<Vec<serde_json::Value>, String> {
    use bitparity::subject::cuda::shared_expert_cublas::{probe as probe_lib, Variant};
    let e = |x: SubjectError| x.to_string();
    let mut rows = Vec::new();
    println!("\nthe cuBLAS subjects (GEMMs by cuBLAS, the op's epilogues), f+b = 16 T H F FLOPs");
    println!("{:>22} {:>18} {:>9} {:>9} {:>8}", "subject", "T x H x F", "fwd ms", "f+b ms", "f+b TF");
    for v in [Variant::Default, Variant::PinnedLt, Variant::PinnedLtAligned] {
        let sub = match probe_lib(v) {
            Ok(s) => s,
            Err(r) => {
                println!("SKIPPED {}: {r}", v.name());
                continue;
            }
        };
        let dev = sub.device();
        for &(t, h, f) in &LIBRARY_SHAPES {
            if only.is_some_and(|o| o != t) {
                continue;
            }
            let mut dc = sub.upload(&case(t, h, f)).map_err(e)?;
            let fwd = median(dev.time_batched_us(warmup, iters, 5, || dc.launch_forward()).map_err(e)?) / 1e3;
            let both = median(
                dev.time_batched_us(warmup, iters, 5, || {
                    dc.launch_forward()?;
                    dc.launch_backward()
                })
                .map_err(e)?,
            ) / 1e3;
            let tf = 16.0 * (t * h * f) as f64 / (both * 1e-3) / 1e12;
            println!("{:>22} {:>18} {fwd:>9.4} {both:>9.4} {tf:>8.2}", v.name(), format!("{t}x{h}x{f}"));
            rows.push(serde_json::json!({
                "subject": v.name(), "version": sub.version, "t": t, "h": h, "f": f,
                "fwd_ms": fwd, "fwd_bwd_ms": both, "fwd_bwd_tflops": tf,
            }));
        }
        for p in sub.pins() {
            println!("    {} pinned: {p}", v.name());
        }
    }
    Ok(rows)
}

/// The `--sweep-t` check (see the module docs): the number of (T, row)
/// pairs compared, or the first difference. The case is uploaded once; each
/// T runs on a window of its rows (`DeviceSharedExpertCase::window`).
fn sweep(cuda: &CudaSharedExpert, max: usize) -> Result<Result<usize, String>, String> {
    let e = |x: SubjectError| x.to_string();
    let full = case(max, 4096, 2048);
    let h = full.h;
    let mut dc = cuda.upload(&full).map_err(e)?;
    dc.launch_forward().map_err(e)?;
    dc.launch_backward().map_err(e)?;
    let (y, dx) = (dc.read_forward().map_err(e)?, dc.read_backward().map_err(e)?);
    let t0 = std::time::Instant::now();
    let mut compared = 0;
    for t in 1..=max {
        let a = (7919 * t) % (max - t + 1);
        let mut rows = vec![0, t / 2, t - 1];
        rows.dedup();
        dc.window(a, t).map_err(e)?;
        let mut run = || -> Result<(Vec<f32>, Vec<f32>), String> {
            dc.launch_forward().map_err(e)?;
            dc.launch_backward().map_err(e)?;
            dc.read_rows(&rows).map_err(e)
        };
        let (ys, dxs) = run()?;
        let (ys2, dxs2) = run()?;
        if !same(&ys, &ys2) || !same(&dxs, &dxs2) {
            return Ok(Err(format!("T = {t} (rows {a}..{}): a second run differs", a + t)));
        }
        for (i, &r) in rows.iter().enumerate() {
            let (s, w) = (i * h..(i + 1) * h, (a + r) * h..(a + r + 1) * h);
            if !same(&ys[s.clone()], &y[w.clone()]) || !same(&dxs[s], &dx[w]) {
                return Ok(Err(format!("T = {t}: row {r} (token {}) differs from the batch of {max}", a + r)));
            }
            compared += 1;
        }
        if t % 512 == 0 {
            println!("T = {t}: {compared} rows equal so far ({:.0} s)", t0.elapsed().as_secs_f64());
        }
    }
    Ok(Ok(compared))
}

fn main() {
    let mut json_path = None;
    let mut sweep_max = None::<usize>;
    let (mut iters, mut warmup) = (30usize, 3usize);
    let mut only = None::<usize>;
    let mut quick = false;
    let mut no_check = false;
    let mut table = false;
    let mut variant = Variant::Strict;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |d: usize| it.next().and_then(|s| s.parse().ok()).unwrap_or(d);
        match a.as_str() {
            "--json" => json_path = it.next(),
            "--iters" => iters = num(iters),
            "--warmup" => warmup = num(warmup),
            "--only" => only = Some(num(0)),
            "--quick" => quick = true,
            "--no-check" => no_check = true,
            "--table" => table = true,
            "--sweep-t" => sweep_max = Some(num(4096).clamp(1, 8192)),
            "--variant" => {
                variant = match it.next().as_deref() {
                    Some("strict") => Variant::Strict,
                    Some("tc") => Variant::TensorCore,
                    Some("wgmma") => Variant::Wgmma,
                    v => {
                        eprintln!("--variant takes strict, tc or wgmma, not {v:?}");
                        std::process::exit(2);
                    }
                }
            }
            _ => {} // cargo bench passes --bench
        }
    }
    let cuda = match probe(variant) {
        Ok(c) => c,
        Err(reason) => exit_without_subject("gpu_shared_expert bench", &reason, json_path.is_none()),
    };
    if let Some(max) = sweep_max {
        println!("{}: batch invariance and determinism, T = 1 to {max}, H = 4096, F = 2048", variant.name());
        match sweep(&cuda, max) {
            Ok(Ok(n)) => println!("passed: {n} (T, row) pairs equal, y and dX bit for bit, every T run twice"),
            Ok(Err(d)) => {
                println!("FAILED: {d}");
                std::process::exit(1);
            }
            Err(m) => {
                println!("error: {m}");
                std::process::exit(1);
            }
        }
        return;
    }
    // The steps the variant runs, and the FLOPs (units of T H F) each pass
    // executes: the forward 6; the backward 10, or 6 where z is kept.
    let steps = variant.steps();
    let bwd_units = variant.backward_steps().iter().map(|s| s.thf_flops()).sum::<u64>() as f64;
    let run = || -> Result<serde_json::Value, String> {
        let dev = cuda.device();
        let e = |x: SubjectError| x.to_string();
        println!(
            "device {} ({} SMs); subject {}, profile {}; TFLOP/s of the executed FLOPs (model: bwd without z's recomputation)",
            dev.info.name,
            dev.info.multiprocessors,
            variant.name(),
            variant.profile().name
        );
        println!(
            "{:>18} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}  {:>42}  check",
            "T x H x F",
            "fwd ms",
            "bwd ms",
            "f+b ms",
            "graph f+b",
            "fwd TF",
            "bwd TF",
            "f+b TF",
            "model",
            format!("kernels ms ({})", steps.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "))
        );
        let mut rows = Vec::new();
        for &(t, h, f) in &SHAPES {
            if only.is_some_and(|o| o != t)
                || (quick && (t, h) != (2048, 4096))
                || (table && !LIBRARY_SHAPES.contains(&(t, h, f)))
            {
                continue;
            }
            let c = case(t, h, f);
            let mismatch = if no_check { None } else { check(&cuda, &c)? };
            let thf = (t * h * f) as f64;
            let mut dc = cuda.upload(&c).map_err(e)?;
            let (mut fwd, mut bwd, mut both, mut graph) = (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
            let mut times = Vec::new();
            if mismatch.is_none() {
                // Fewer iterations where one pass takes long.
                let n = if thf > 4e10 { iters.div_ceil(3).max(5) } else { iters };
                fwd = median(dev.time_us(warmup, n, || dc.launch_forward()).map_err(e)?) / 1e3;
                bwd = median(dev.time_us(warmup, n, || dc.launch_backward()).map_err(e)?) / 1e3;
                both = median(
                    dev.time_us(warmup, n, || {
                        dc.launch_forward()?;
                        dc.launch_backward()
                    })
                    .map_err(e)?,
                ) / 1e3;
                // The pass replayed from a CUDA graph, five replays a timing
                // (as the PyTorch side is timed: benches/torch_shared_expert.py).
                let g = dev
                    .capture(|| {
                        dc.launch_forward()?;
                        dc.launch_backward()
                    })
                    .map_err(e)?;
                graph = median(dev.time_batched_us(warmup, n, 5, || replay(&g)).map_err(e)?) / 1e3;
                for &s in &steps {
                    times.push(median(dev.time_us(1, n, || dc.launch(s)).map_err(e)?) / 1e3);
                }
            }
            let tf = |units: f64, ms: f64| units * thf / (ms * 1e-3) / 1e12;
            let status = match &mismatch {
                None if no_check => "not checked (--no-check)".to_string(),
                None => "rows bitwise equal to oracle".to_string(),
                Some(m) => format!("MISMATCH {m}"),
            };
            let ks: Vec<String> = times.iter().map(|s| format!("{s:.3}")).collect();
            println!(
                "{:>18} {fwd:>9.3} {bwd:>9.3} {both:>9.3} {graph:>9.3} {:>8.2} {:>8.2} {:>8.2} {:>8.2}  {:>42}  {status}",
                format!("{t}x{h}x{f}"),
                tf(6.0, fwd),
                tf(bwd_units, bwd),
                tf(6.0 + bwd_units, both),
                tf(12.0, both),
                ks.join(" ")
            );
            let step_json: Vec<serde_json::Value> = steps
                .iter()
                .zip(&times)
                .map(|(s, ms)| {
                    serde_json::json!({"kernel": format!("{s:?}"), "ms": ms, "tflops": tf(s.thf_flops() as f64, *ms)})
                })
                .collect();
            rows.push(serde_json::json!({
                "t": t, "h": h, "f": f,
                "fwd_ms": fwd, "bwd_ms": bwd, "fwd_bwd_ms": both,
                "fwd_tflops": tf(6.0, fwd), "bwd_tflops": tf(bwd_units, bwd), "fwd_bwd_tflops": tf(6.0 + bwd_units, both),
                "fwd_bwd_model_tflops": tf(12.0, both),
                "graph_fwd_bwd_ms": graph, "graph_fwd_bwd_tflops": tf(6.0 + bwd_units, graph),
                "kernels": step_json,
                "conformance": mismatch.is_none(), "checked": !no_check, "mismatch": mismatch,
            }));
        }
        Ok(serde_json::json!({
            "subject": variant.name(), "profile": variant.profile().name,
            "device": dev.info.name,
            "compute_capability": format!("{}.{}", dev.info.compute_capability.0, dev.info.compute_capability.1),
            "driver_cuda_version": dev.info.driver_cuda_version,
            "nvrtc_extra": std::env::var("BITPARITY_NVRTC_EXTRA").unwrap_or_default(),
            "iters": iters, "warmup": warmup,
            "rows": rows,
            "libraries": libraries(&only, warmup, iters)?,
        }))
    };
    finish("gpu_shared_expert", json_path, run());
}
