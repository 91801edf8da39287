//! What the GPU benches share: their pseudo-random inputs, medians, the
//! eager and graph-replayed timings of a forward and a backward, and the end
//! of a run. Each bench uses a part of it.
#![allow(dead_code)]

use bitparity::subject::cuda::device::Device;
use bitparity::subject::SubjectError;
use cudarc::driver::CudaGraph;

/// Draws of a 64-bit LCG seeded by `seed`: its top 24 bits, as an f32 (an
/// integer in [0, 2^24), exact).
pub fn lcg24(seed: u64) -> impl Iterator<Item = f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    std::iter::repeat_with(move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 40) as f32
    })
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One replay of a captured graph.
pub fn replay(g: &CudaGraph) -> Result<(), SubjectError> {
    g.launch().map_err(|x| SubjectError::Device(format!("graph launch: {x}")))
}

/// A pass to launch.
#[derive(Clone, Copy)]
pub enum Pass {
    Forward,
    Backward,
}

/// Medians in microseconds of the forward, the backward and both, launched
/// one by one (eager) and replayed from a CUDA graph of each.
pub struct Timings {
    pub fwd: f64,
    pub bwd: f64,
    pub both: f64,
    pub graph_fwd: f64,
    pub graph_bwd: f64,
    pub graph_both: f64,
}

impl Timings {
    /// No timing (a shape that does not conform).
    pub const NONE: Timings = Timings {
        fwd: f64::NAN,
        bwd: f64::NAN,
        both: f64::NAN,
        graph_fwd: f64::NAN,
        graph_bwd: f64::NAN,
        graph_both: f64::NAN,
    };
}

/// Times `launch` (which enqueues a pass on the device's stream) eagerly and
/// from graphs, `iters` timings after `warmup`; with the graph of both
/// passes, for more replays.
pub fn eager_and_graph(
    dev: &Device,
    warmup: usize,
    iters: usize,
    mut launch: impl FnMut(Pass) -> Result<(), SubjectError>,
) -> Result<(Timings, CudaGraph), SubjectError> {
    let fwd = median(dev.time_us(warmup, iters, || launch(Pass::Forward))?);
    let bwd = median(dev.time_us(warmup, iters, || launch(Pass::Backward))?);
    let both = median(dev.time_us(warmup, iters, || {
        launch(Pass::Forward)?;
        launch(Pass::Backward)
    })?);
    let gf = dev.capture(|| launch(Pass::Forward))?;
    let graph_fwd = median(dev.time_us(warmup, iters, || replay(&gf))?);
    let gb = dev.capture(|| launch(Pass::Backward))?;
    let graph_bwd = median(dev.time_us(warmup, iters, || replay(&gb))?);
    let gfb = dev.capture(|| {
        launch(Pass::Forward)?;
        launch(Pass::Backward)
    })?;
    let graph_both = median(dev.time_us(warmup, iters, || replay(&gfb))?);
    Ok((Timings { fwd, bwd, both, graph_fwd, graph_bwd, graph_both }, gfb))
}

/// Ends a bench's run: its report written to `json_path` where given; the
/// bench fails (exit 1) on an error, or when a shape was not bitwise equal
/// to the oracle (such a shape gets no timing). The report otherwise.
pub fn finish(bench: &str, json_path: Option<String>, run: Result<serde_json::Value, String>) -> serde_json::Value {
    let v = match run {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{bench} bench failed: {e}");
            std::process::exit(1);
        }
    };
    if let Some(p) = json_path {
        let text = serde_json::to_string_pretty(&v).unwrap_or_default();
        if let Err(e) = bitparity::fsio::write_atomic(std::path::Path::new(&p), text.as_bytes()) {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
    let bad = v["rows"].as_array().map_or(0, |r| r.iter().filter(|x| x["conformance"] != true).count());
    if bad > 0 {
        eprintln!("{bench} bench: {bad} shape(s) not bitwise equal to the oracle: no timing for them");
        std::process::exit(1);
    }
    v
}
