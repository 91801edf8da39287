//! The launches of `kernels/seqwise_loss.cu` (profile `warp32-chunk64`):
//! the `cuda` subject of `seqwise_loss`.

use super::device::{as_i32, dev_err, device, Device, DeviceInfo};
use super::guard::Guarded;
use super::{KernelId, GAP_POISON, LANE_WIDTHS, MAX_EXPERTS};
use crate::subject::{invalid, Subject, SubjectError, SubjectKind};
use cudarc::driver::{sys as cu, CudaFunction, LaunchConfig, PushKernelArg};
use oracles::case::seqwise_loss::{Objective, SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::profile::seqwise_loss::SeqwiseProfile;
use std::sync::{Arc, OnceLock};

// Launch geometry. None of these changes a bit of the output (the profile's
// constants, 32 lanes and 64-token chunks, are fixed inside the kernels).
const FWD_THREADS: u32 = 512;
const BWD_THREADS: u32 = 256;
/// Dynamic shared memory of seqwise_fwd_chunk: E counters and one row of E
/// values per warp.
fn fwd_shared_bytes(e: usize) -> usize {
    (1 + FWD_THREADS as usize / 32) * e * 4
}
/// The profile's token chunk, which the forward's grid is cut into.
const TOKEN_CHUNK: usize = oracles::profile::seqwise_loss::GPU_TOKEN_CHUNK;

struct Kernels {
    fwd_chunk: Vec<CudaFunction>,
    bwd: Vec<CudaFunction>,
    finalize: CudaFunction,
}

/// The CUDA subject of `seqwise_loss`: profile `warp32-chunk64`
/// ([`SeqwiseProfile::gpu`]). Cheap to clone (one device per process).
#[derive(Clone)]
pub struct CudaSeqwise {
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
}

/// Opens the GPU and loads `seqwise_loss`'s kernels, once per process.
/// `Err` is the reason this op's CUDA subject cannot run here (report its
/// GPU suites as skipped with it).
pub fn probe() -> Result<CudaSeqwise, String> {
    static SUBJECT: OnceLock<Result<CudaSeqwise, String>> = OnceLock::new();
    SUBJECT.get_or_init(load).clone()
}

fn load() -> Result<CudaSeqwise, String> {
    let dev = device()?;
    let id = KernelId::SeqwiseLoss;
    let function = |n: &str| dev.function(id, n);
    let kernels = Kernels {
        fwd_chunk: LANE_WIDTHS
            .iter()
            .map(|v| function(&format!("seqwise_fwd_chunk_v{v}")))
            .collect::<Result<_, _>>()?,
        bwd: LANE_WIDTHS.iter().map(|v| function(&format!("seqwise_bwd_v{v}"))).collect::<Result<_, _>>()?,
        finalize: function("seqwise_fwd_finalize")?,
    };
    for f in &kernels.fwd_chunk {
        f.set_attribute(
            cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            fwd_shared_bytes(MAX_EXPERTS) as i32,
        )
        .map_err(|e| format!("shared memory of seqwise_fwd_chunk: {e}"))?;
    }
    Ok(CudaSeqwise { dev, kernels: Arc::new(kernels) })
}

/// A case uploaded to the GPU with every buffer its kernels need; launches
/// and read-backs are separate so benches can time the kernels alone.
pub struct DeviceCase {
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
    t: usize,
    e: usize,
    offset: i32,
    stride: i64,
    topk: i32,
    k: i32,
    inclusive: i32,
    g: f32,
    v_index: usize,
    /// The backward's grid: one warp per row, at most one wave.
    bwd_grid: u32,
    scores: Guarded<f32>,
    padding: Guarded<u8>,
    map: Guarded<u8>,
    p_part: Guarded<f32>,
    c_part: Guarded<u32>,
    p: Guarded<f32>,
    counts: Guarded<u32>,
    freq: Guarded<f32>,
    raw: Guarded<f32>,
    ticket: Guarded<u32>,
    grad: Guarded<f32>,
}

impl CudaSeqwise {
    pub fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    /// Validates `case` and uploads it: the scores as `case.storage(GAP_POISON)`
    /// (the real offset and row stride), the padding flags, the map; every
    /// buffer between guard zones ([`Guarded`]).
    pub fn upload(&self, case: &SeqwiseCase) -> Result<DeviceCase, SubjectError> {
        case.validate().map_err(invalid)?;
        let (t, e) = (case.t, case.e);
        if e > MAX_EXPERTS {
            return Err(SubjectError::Unavailable(format!(
                "E = {e}: the CUDA kernels take at most {MAX_EXPERTS} experts"
            )));
        }
        let v_index = LANE_WIDTHS.iter().position(|&v| 32 * v >= e).unwrap_or(LANE_WIDTHS.len() - 1);
        let (topk, k, map) = match &case.objective {
            Objective::ProvidedMap { map } => (0, 0, map.iter().map(|&b| b as u8).collect::<Vec<u8>>()),
            Objective::UnbiasedTopK { k } => (1, *k, vec![0u8]),
        };
        let padding: Vec<u8> = (0..t).map(|i| case.is_padding(i) as u8).collect();
        let nchunks = t.div_ceil(TOKEN_CHUNK);
        as_i32(nchunks * e, "chunks x E")?;
        // One warp per row, at most one wave of blocks (the warps then loop).
        let rows_per_block = (BWD_THREADS / 32) as usize;
        let bwd_needed = u32::try_from(t.div_ceil(rows_per_block)).unwrap_or(u32::MAX);
        let bwd_grid = bwd_needed
            .min(self.dev.resident_blocks(&self.kernels.bwd[v_index], BWD_THREADS, 0, "seqwise_bwd occupancy")?)
            .max(1);
        let s = &self.dev.stream;
        let dc = DeviceCase {
            dev: self.dev.clone(),
            kernels: self.kernels.clone(),
            t,
            e,
            offset: as_i32(case.layout.offset, "offset")?,
            stride: i64::try_from(case.layout.row_stride)
                .map_err(|_| SubjectError::Unavailable("row stride exceeds i64".into()))?,
            topk,
            k: as_i32(k, "k")?,
            inclusive: matches!(case.clamp_tie, oracles::vocab::ClampTie::Inclusive) as i32,
            g: case.g,
            v_index,
            bwd_grid,
            scores: Guarded::upload(s, "scores", &case.storage(GAP_POISON))?,
            padding: Guarded::upload(s, "padding", &padding)?,
            map: Guarded::upload(s, "map", &map)?,
            p_part: Guarded::unwritten(s, "p_part", nchunks * e)?,
            c_part: Guarded::unwritten(s, "c_part", nchunks * e)?,
            p: Guarded::unwritten(s, "P", e)?,
            counts: Guarded::unwritten(s, "counts", e)?,
            freq: Guarded::unwritten(s, "freq", e)?,
            raw: Guarded::unwritten(s, "raw", 1)?,
            ticket: Guarded::zeros(s, "ticket", 1)?,
            grad: Guarded::unwritten(s, "grad", t * e)?,
        };
        as_i32(t, "T")?;
        as_i32(e, "E")?;
        Ok(dc)
    }

    /// The device this subject runs on (timing, bandwidth).
    pub fn device(&self) -> &Device {
        &self.dev
    }
}

impl DeviceCase {
    fn cfg(grid: u32, block: (u32, u32), smem: u32) -> LaunchConfig {
        LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block.0, block.1, 1), shared_mem_bytes: smem }
    }

    /// Enqueues the forward: the chunk kernel, then the finalize kernel.
    pub fn launch_forward(&mut self) -> Result<(), SubjectError> {
        let dev = self.dev.clone();
        let s = &dev.stream;
        let (t, e) = (self.t as i32, self.e as i32);
        let nchunks = self.t.div_ceil(TOKEN_CHUNK) as i32;
        let f = &self.kernels.fwd_chunk[self.v_index];
        let mut b = s.launch_builder(f);
        b.arg(self.scores.arg())
            .arg(&self.offset)
            .arg(&self.stride)
            .arg(&t)
            .arg(&e)
            .arg(self.padding.arg())
            .arg(self.map.arg())
            .arg(&self.topk)
            .arg(&self.k)
            .arg(self.p_part.arg())
            .arg(self.c_part.arg());
        // SAFETY: the argument list matches seqwise_fwd_chunk_v<V>'s signature
        // (pointers, i32, i64 in order); `scores` holds offset + (T-1)*stride + E
        // elements (SeqwiseCase::storage), padding T bytes, map T*E bytes when
        // topk == 0, p_part and c_part nchunks*E each, and the dynamic shared
        // memory holds E counters and 16 rows of E values (the kernel's limit
        // was raised to E = 1024 at load). Every buffer outlives the launch (they are owned by
        // self, and frees are stream-ordered).
        unsafe { b.launch(Self::cfg(nchunks as u32, (FWD_THREADS, 1), fwd_shared_bytes(self.e) as u32)) }
            .map_err(dev_err("seqwise_fwd_chunk launch"))?;
        let mut b = s.launch_builder(&self.kernels.finalize);
        b.arg(self.p_part.arg())
            .arg(self.c_part.arg())
            .arg(&nchunks)
            .arg(&e)
            .arg(self.p.arg())
            .arg(self.counts.arg())
            .arg(self.freq.arg())
            .arg(self.raw.arg())
            .arg(self.ticket.arg());
        // SAFETY: matches seqwise_fwd_finalize's signature; P, counts, freq hold
        // E elements, raw and ticket one (ticket starts at 0 and the kernel's
        // last block resets it); E <= 1024 fits its shared term buffer.
        unsafe { b.launch(Self::cfg(self.e.div_ceil(32) as u32, (32, 32), 0)) }
            .map_err(dev_err("seqwise_fwd_finalize launch"))?;
        Ok(())
    }

    /// Enqueues the backward; it reads f_e from the last forward launch.
    pub fn launch_backward(&mut self) -> Result<(), SubjectError> {
        let dev = self.dev.clone();
        let s = &dev.stream;
        let (t, e) = (self.t as i32, self.e as i32);
        let f = &self.kernels.bwd[self.v_index];
        let mut b = s.launch_builder(f);
        b.arg(self.scores.arg())
            .arg(&self.offset)
            .arg(&self.stride)
            .arg(&t)
            .arg(&e)
            .arg(self.padding.arg())
            .arg(&self.topk)
            .arg(&self.inclusive)
            .arg(&self.g)
            .arg(self.freq.arg())
            .arg(self.grad.arg());
        // SAFETY: matches seqwise_bwd_v<V>'s signature; scores and padding as in
        // the forward, freq E elements, grad T*E; the warps loop over the rows,
        // warps past T return at once.
        unsafe { b.launch(Self::cfg(self.bwd_grid, (BWD_THREADS, 1), 0)) }.map_err(dev_err("seqwise_bwd launch"))?;
        Ok(())
    }

    /// Waits for the forward, checks every buffer's guards, and copies its
    /// outputs back.
    pub fn read_forward(&self) -> Result<SeqwiseForward<f32>, SubjectError> {
        self.dev.finish("forward")?;
        self.check_guards()?;
        let s = &self.dev.stream;
        let raw = self.raw.read(s)?;
        let counts = self.counts.read(s)?;
        let freq = self.freq.read(s)?;
        let ticket = self.ticket.read(s)?;
        self.dev.finish("read-back")?;
        // The finalize's last block resets its ticket (the launch contract):
        // left at any other value, the next launch on these buffers (a CUDA
        // graph's replay) would take the wrong block for the last one.
        if ticket[0] != 0 {
            return Err(SubjectError::Device(format!(
                "the forward left its ticket at {} (the finalize must reset it to 0 for the next launch)",
                ticket[0]
            )));
        }
        Ok(SeqwiseForward { raw: raw[0], counts, freq })
    }

    /// Waits for the backward, checks every buffer's guards, and copies the
    /// gradient back.
    pub fn read_backward(&self) -> Result<SeqwiseBackward<f32>, SubjectError> {
        self.dev.finish("backward")?;
        self.check_guards()?;
        let grad = self.grad.read(&self.dev.stream)?;
        self.dev.finish("read-back")?;
        Ok(SeqwiseBackward { grad })
    }

    /// Every buffer's guard zones, inputs included (a kernel must not write
    /// its inputs either).
    fn check_guards(&self) -> Result<(), SubjectError> {
        let s = &self.dev.stream;
        self.scores.check(s)?;
        self.padding.check(s)?;
        self.map.check(s)?;
        self.p_part.check(s)?;
        self.c_part.check(s)?;
        self.p.check(s)?;
        self.counts.check(s)?;
        self.freq.check(s)?;
        self.raw.check(s)?;
        self.ticket.check(s)?;
        self.grad.check(s)
    }
}

impl Subject<SeqwiseLoss> for CudaSeqwise {
    fn name(&self) -> String {
        "cuda".into()
    }

    /// The profile every kernel of kernels/seqwise_loss.cu implements.
    fn profile(&self) -> Option<SeqwiseProfile> {
        Some(SeqwiseProfile::gpu())
    }

    fn kind(&self) -> SubjectKind {
        SubjectKind::Device
    }

    fn lost(&self) -> Option<String> {
        super::device::lost_reason()
    }

    fn forward(&self, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_forward()?;
        dc.read_forward()
    }

    fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_forward()?;
        dc.launch_backward()?;
        dc.read_backward()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::cuda::{declared_profile_name, HEADERS};
    use oracles::profile::seqwise_loss::{GPU_LANES, GPU_TOKEN_CHUNK};

    fn define(name: &str) -> Option<usize> {
        KernelId::SeqwiseLoss.source().text.lines().find_map(|l| {
            let rest = l.strip_prefix("#define ")?.strip_prefix(name)?;
            rest.split_whitespace().next()?.parse().ok()
        })
    }

    #[test]
    fn kernel_source_declares_the_gpu_profile_and_its_constants() {
        let src = KernelId::SeqwiseLoss.source();
        assert_eq!(declared_profile_name(&src), Some(SeqwiseProfile::gpu().name.as_str()));
        assert_eq!(define("BP_TOKEN_CHUNK"), Some(GPU_TOKEN_CHUNK));
        assert!(HEADERS[0].text.contains(&format!("#define BP_WARP {GPU_LANES}")));
        assert!(src.text.contains("#include \"common.cuh\""));
    }

    #[test]
    fn launch_shapes_match_the_kernels_bounds() {
        // A launch with more threads than a kernel's __launch_bounds__ fails.
        assert_eq!(define("BP_FWD_THREADS"), Some(FWD_THREADS as usize));
        assert_eq!(define("BP_BWD_THREADS"), Some(BWD_THREADS as usize));
        assert!(fwd_shared_bytes(MAX_EXPERTS) <= 227 * 1024, "over the per-block shared memory of sm_80/sm_90");
    }
}
