//! The CUDA subjects of `moe_combine` (docs/ops/moe_combine.md):
//! `kernels/moe_combine.cu`, compiled at run time by NVRTC ([`super::nvrtc`])
//! on first use and run through cudarc's driver API on the process's one
//! [`Device`], launched as the launch contract in that file's header says.
//! Two subjects share the dispatch kernels:
//!
//! - `cuda` ([`Variant::Gather`]): the gather combine and its backward,
//!   profile `serial`;
//! - `cuda-scatter` ([`Variant::Scatter`]): y and dx accumulated with float
//!   atomics (as MoE code and PyTorch's `index_add_` on a GPU do), claiming
//!   no profile: judged by the any-order bound, and by determinism and batch
//!   invariance, which it is expected to fail from three kept choices on.
//!
//! Fail closed, as the other ops' subjects: no driver, no GPU, no NVRTC, or
//! a kernel that does not compile is an explicit reason ([`probe`] returns
//! `Err(reason)`); an invalid case is [`SubjectError::Invalid`]; a valid case
//! past the kernels' limits (E above [`MAX_RANK_EXPERTS`], a size past their
//! i32 arguments) is [`SubjectError::Unavailable`] with the reason ([`plan`]
//! decides, without a GPU). Nothing panics, nothing falls back.

use super::device::{as_i32, dev_err, device, Device};
use super::guard::Guarded;
use super::{KernelId, GAP_POISON};
use crate::subject::{invalid, Subject, SubjectError, SubjectKind};
use cudarc::driver::{sys as cu, CudaFunction, LaunchConfig, PushKernelArg};
use oracles::case::moe_combine::{MoeCombineBackward, MoeCombineCase, MoeCombineForward};
use oracles::op::moe_combine::MoeCombine;
use oracles::profile::moe_combine::MoeCombineProfile;
use std::sync::{Arc, OnceLock};

/// `BP_MOE_THREADS`: the block of every kernel but the rank and scan ones.
const THREADS: u32 = 256;
/// `BP_MOE_CHUNK`: the tokens one warp of `moe_dispatch_rank` ranks.
const CHUNK: usize = 64;
/// `BP_MOE_RANK_WARPS`: the chunks (warps) of one rank block.
const RANK_WARPS: usize = 4;
/// `BP_MOE_SCAN_THREADS`: the one block of `moe_dispatch_scan`.
const SCAN_THREADS: u32 = 1024;
/// Warps of a `moe_combine_bwd_dw` block (one choice each).
const DW_WARPS: usize = THREADS as usize / 32;
/// The largest grid dimension y (and the cap put on x for the grid-stride
/// loops).
const MAX_GRID: usize = 65_535;
/// The largest E taken: `moe_dispatch_rank` keeps E counters per warp in
/// shared memory, 16 E bytes a block (128 KiB at this E, within every
/// device of compute capability 8.0 on).
pub const MAX_RANK_EXPERTS: usize = 8192;

/// Dynamic shared memory of `moe_dispatch_rank`: E counters per warp.
pub fn rank_shared_bytes(e: usize) -> usize {
    RANK_WARPS * e * 4
}

/// Which combine the subject runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The gather kernels (profile `serial`): subject `cuda`.
    Gather,
    /// The atomic scatter kernels (no profile): subject `cuda-scatter`.
    Scatter,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Gather => "cuda",
            Variant::Scatter => "cuda-scatter",
        }
    }
}

/// A pass of the op: what [`DeviceMoeCombineCase::launch_combine`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// y.
    Forward,
    /// dx.
    Backward,
}

/// How the kernels take a valid case: its sizes as the kernels' arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// ceil(T / 64): the dispatch's token chunks.
    pub nchunks: usize,
    /// The slots (rows of x_exp and g_disp).
    pub n_slots: usize,
    /// -1 for no capacity, else min(C, T): a rank is always below T, so
    /// both drop the same choices, and min(C, T) fits an int.
    pub cap: i32,
}

/// Validates `case` (docs/ops/moe_combine.md#validation) and decides whether
/// the kernels take it: `Invalid` for an invalid case, `Unavailable` (with
/// the reason) for a valid one beyond the kernels' limits. Needs no GPU.
///
/// Limits: E <= [`MAX_RANK_EXPERTS`] (the rank kernel's counters), and every
/// size the kernels take as an int (T, H, E, k, the offset, T x k, the
/// chunk counts nchunks x E, T x H, N_slots x H) within i32, the row stride
/// within i64.
pub fn plan(case: &MoeCombineCase) -> Result<Plan, SubjectError> {
    case.validate().map_err(invalid)?;
    let (t, h, e, k) = (case.t, case.h, case.e, case.k);
    if e > MAX_RANK_EXPERTS {
        return Err(SubjectError::Unavailable(format!(
            "E = {e}: the dispatch's rank kernel keeps at most {MAX_RANK_EXPERTS} experts' counters in shared memory"
        )));
    }
    let nchunks = t.div_ceil(CHUNK);
    let n_slots = case.x_exp.len() / h;
    for (what, x) in [
        ("T", t),
        ("H", h),
        ("E", e),
        ("k", k),
        ("offset", case.layout.offset),
        ("T x k", t.saturating_mul(k)),
        ("nchunks x E", nchunks.saturating_mul(e)),
        ("T x H", t.saturating_mul(h)),
        ("N_slots x H", n_slots.saturating_mul(h)),
    ] {
        as_i32(x, what)?;
    }
    i64::try_from(case.layout.row_stride).map_err(|_| SubjectError::Unavailable("row stride exceeds i64".into()))?;
    let cap = match case.capacity {
        None => -1,
        Some(c) => c.min(t) as i32, // T is within i32 (checked above)
    };
    Ok(Plan { nchunks, n_slots, cap })
}

struct Kernels {
    rank: CudaFunction,
    scan: CudaFunction,
    slots: CudaFunction,
    copy: CudaFunction,
    gather: CudaFunction,
    dx_exp: CudaFunction,
    dw: CudaFunction,
    bwd_dx: CudaFunction,
    zero: CudaFunction,
    scatter: CudaFunction,
    scatter_bwd_dx: CudaFunction,
}

/// Every kernel this file launches, by its name in kernels/moe_combine.cu.
pub const KERNEL_NAMES: [&str; 11] = [
    "moe_dispatch_rank",
    "moe_dispatch_scan",
    "moe_dispatch_slots",
    "moe_dispatch_copy",
    "moe_combine_gather",
    "moe_combine_bwd_dx_exp",
    "moe_combine_bwd_dw",
    "moe_combine_bwd_dx",
    "moe_zero_f32",
    "moe_combine_scatter",
    "moe_combine_scatter_bwd_dx",
];

/// A CUDA subject of `moe_combine`. Cheap to clone (one device and one
/// compilation per process).
#[derive(Clone)]
pub struct CudaMoeCombine {
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
    variant: Variant,
}

/// Opens the GPU (shared with every op) and loads `kernels/moe_combine.cu`,
/// once per process. `Err` is the reason the subject cannot run here; it
/// does not disable another op's subject.
pub fn probe(variant: Variant) -> Result<CudaMoeCombine, String> {
    static KERNELS: OnceLock<Loaded> = OnceLock::new();
    let (dev, kernels) = KERNELS.get_or_init(load).clone()?;
    Ok(CudaMoeCombine { dev, kernels, variant })
}

/// The device and the loaded kernels, or why they cannot load.
type Loaded = Result<(Arc<Device>, Arc<Kernels>), String>;

fn load() -> Loaded {
    let dev = device()?;
    let f = |i: usize| dev.function(KernelId::MoeCombine, KERNEL_NAMES[i]);
    let kernels = Kernels {
        rank: f(0)?,
        scan: f(1)?,
        slots: f(2)?,
        copy: f(3)?,
        gather: f(4)?,
        dx_exp: f(5)?,
        dw: f(6)?,
        bwd_dx: f(7)?,
        zero: f(8)?,
        scatter: f(9)?,
        scatter_bwd_dx: f(10)?,
    };
    // Above 48 KiB a block's dynamic shared memory must be asked for (the
    // rank kernel needs 16 E bytes).
    kernels
        .rank
        .set_attribute(
            cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            rank_shared_bytes(MAX_RANK_EXPERTS) as i32,
        )
        .map_err(|e| format!("shared memory of moe_dispatch_rank: {e}"))?;
    Ok((dev, Arc::new(kernels)))
}

/// A buffer of at least one element: an empty matrix (N_slots = 0) still
/// gets an allocation, which no kernel reads.
fn at_least_one(mut v: Vec<f32>) -> Vec<f32> {
    if v.is_empty() {
        v.push(GAP_POISON);
    }
    v
}

/// A case on the GPU: its inputs, every output and scratch buffer, and the
/// launch sizes; launches and read-backs are separate.
pub struct DeviceMoeCombineCase {
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
    variant: Variant,
    plan: Plan,
    t: usize,
    h: usize,
    e: usize,
    k: usize,
    offset: i32,
    stride: i64,
    ids: Guarded<u32>,
    padding: Guarded<u8>,
    weights: Guarded<f32>,
    x: Guarded<f32>,
    x_exp: Guarded<f32>,
    dy: Guarded<f32>,
    g_disp: Guarded<f32>,
    /// The slots (i32 bits; u32 here, as the guard zones hold).
    slot: Guarded<u32>,
    chunk_counts: Guarded<u32>,
    counts: Guarded<u32>,
    offsets: Guarded<u32>,
    slot_src: Guarded<u32>,
    x_disp: Guarded<f32>,
    y: Guarded<f32>,
    dx_exp: Guarded<f32>,
    dw: Guarded<f32>,
    dx: Guarded<f32>,
}

impl CudaMoeCombine {
    /// The device the kernels run on (for timing).
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Validates `case` ([`plan`]) and uploads it: x, x_exp, dy and g_disp
    /// as their storage (the real offset and row stride, NaN in every gap),
    /// the ids, the weights, the padding flags (zeros without padding); and
    /// allocates every output and scratch buffer, each between guard zones.
    pub fn upload(&self, case: &MoeCombineCase) -> Result<DeviceMoeCombineCase, SubjectError> {
        let plan = plan(case)?;
        let (t, h, e, k, n) = (case.t, case.h, case.e, case.k, plan.n_slots);
        let s = &self.dev.stream;
        let padding: Vec<u8> = (0..t).map(|i| case.is_padding(i) as u8).collect();
        Ok(DeviceMoeCombineCase {
            dev: self.dev.clone(),
            kernels: self.kernels.clone(),
            variant: self.variant,
            plan,
            t,
            h,
            e,
            k,
            offset: as_i32(case.layout.offset, "offset")?,
            stride: case.layout.row_stride as i64, // checked by plan
            ids: Guarded::upload(s, "ids", &case.ids)?,
            padding: Guarded::upload(s, "padding", &padding)?,
            weights: Guarded::upload(s, "weights", &case.weights)?,
            x: Guarded::upload(s, "x", &case.x_storage(GAP_POISON))?,
            x_exp: Guarded::upload(s, "x_exp", &at_least_one(case.x_exp_storage(GAP_POISON)))?,
            dy: Guarded::upload(s, "dy", &case.dy_storage(GAP_POISON))?,
            g_disp: Guarded::upload(s, "g_disp", &at_least_one(case.g_disp_storage(GAP_POISON)))?,
            slot: Guarded::unwritten(s, "slot", t * k)?,
            chunk_counts: Guarded::unwritten(s, "chunk_counts", plan.nchunks * e)?,
            counts: Guarded::unwritten(s, "counts", e)?,
            offsets: Guarded::unwritten(s, "offsets", e + 1)?,
            slot_src: Guarded::unwritten(s, "slot_src", n.max(1))?,
            x_disp: Guarded::unwritten(s, "x_disp", (n * h).max(1))?,
            y: Guarded::unwritten(s, "y", t * h)?,
            dx_exp: Guarded::unwritten(s, "dx_exp", (n * h).max(1))?,
            dw: Guarded::unwritten(s, "dw", t * k)?,
            dx: Guarded::unwritten(s, "dx", t * h)?,
        })
    }
}

impl Subject<MoeCombine> for CudaMoeCombine {
    fn name(&self) -> String {
        self.variant.name().into()
    }

    /// The gather kernels implement `serial` (declared in the kernel
    /// source's header); the scatter claims none.
    fn profile(&self) -> Option<MoeCombineProfile> {
        match self.variant {
            Variant::Gather => Some(MoeCombineProfile::serial()),
            Variant::Scatter => None,
        }
    }

    fn kind(&self) -> SubjectKind {
        SubjectKind::Device
    }

    fn lost(&self) -> Option<String> {
        super::device::lost_reason()
    }

    fn forward(&self, case: &MoeCombineCase) -> Result<MoeCombineForward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_forward()?;
        dc.read_forward()
    }

    fn backward(&self, case: &MoeCombineCase) -> Result<MoeCombineBackward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_backward()?;
        dc.read_backward()
    }
}

/// A launch shape: grid (x, y) of blocks of `block` threads.
fn cfg(grid: (usize, usize), block: u32, smem: usize) -> LaunchConfig {
    // Every grid dimension is capped at MAX_GRID (or is ceil(H / 256) <= 2^23).
    LaunchConfig {
        grid_dim: (grid.0 as u32, grid.1 as u32, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: smem as u32,
    }
}

/// Blocks of `per` items covering `n`, at least 1, at most [`MAX_GRID`]
/// (the kernels loop past it).
fn blocks(n: usize, per: usize) -> usize {
    n.div_ceil(per).clamp(1, MAX_GRID)
}

impl DeviceMoeCombineCase {
    fn ints(&self) -> (i32, i32, i32, i32, i32) {
        // Checked by plan.
        (self.t as i32, self.h as i32, self.e as i32, self.k as i32, self.plan.n_slots as i32)
    }

    /// Enqueues the dispatch: ranks per chunk, the scan into counts and
    /// offsets, the slots and their owners (the forward and the backward
    /// each start with it; public for the bench to time it alone).
    pub fn launch_dispatch(&mut self) -> Result<(), SubjectError> {
        let dev = self.dev.clone();
        let s = &dev.stream;
        let (t, _, e, k, _) = self.ints();
        let nchunks = self.plan.nchunks as i32;
        let cap = self.plan.cap;
        let mut b = s.launch_builder(&self.kernels.rank);
        b.arg(self.ids.arg())
            .arg(self.padding.arg())
            .arg(&t)
            .arg(&e)
            .arg(&k)
            .arg(self.slot.arg())
            .arg(self.chunk_counts.arg());
        // SAFETY: the arguments match moe_dispatch_rank's signature in order
        // and type (pointers; int as i32). ids holds T*k ids, each < E and
        // distinct within a token (the case passed `plan`, which validates
        // it), so the shared-memory counters a warp touches are its own E;
        // padding holds T bytes; slot T*k, chunk_counts nchunks*E. The grid
        // covers the nchunks chunks at RANK_WARPS a block, and the dynamic
        // shared memory is RANK_WARPS*E*4 bytes, within the limit raised at
        // load (E <= MAX_RANK_EXPERTS). Every buffer is owned by self and
        // outlives the launch (frees are stream-ordered).
        unsafe {
            b.launch(cfg(
                (self.plan.nchunks.div_ceil(RANK_WARPS), 1),
                (RANK_WARPS * 32) as u32,
                rank_shared_bytes(self.e),
            ))
        }
        .map_err(dev_err("moe_dispatch_rank launch"))?;
        let mut b = s.launch_builder(&self.kernels.scan);
        b.arg(&nchunks).arg(&e).arg(&cap).arg(self.chunk_counts.arg()).arg(self.counts.arg()).arg(self.offsets.arg());
        // SAFETY: moe_dispatch_scan's signature in order and type; one block
        // of SCAN_THREADS as the contract says; chunk_counts holds nchunks*E
        // values written by the rank kernel before it on this stream, counts
        // E and offsets E + 1 elements.
        unsafe { b.launch(cfg((1, 1), SCAN_THREADS, 0)) }.map_err(dev_err("moe_dispatch_scan launch"))?;
        let mut b = s.launch_builder(&self.kernels.slots);
        b.arg(self.ids.arg())
            .arg(&t)
            .arg(&e)
            .arg(&k)
            .arg(&cap)
            .arg(self.chunk_counts.arg())
            .arg(self.offsets.arg())
            .arg(self.slot.arg())
            .arg(self.slot_src.arg());
        // SAFETY: moe_dispatch_slots's signature in order and type; ids and
        // slot hold T*k, chunk_counts nchunks*E bases, offsets E + 1;
        // slot_src holds N_slots (at least one) entries, and the slots the
        // kernel writes are below offsets[E] = N_slots, the case's own count
        // (the dispatch has one answer, which the case's x_exp is sized by).
        // Grid-stride over T*k.
        unsafe { b.launch(cfg((blocks(self.t * self.k, THREADS as usize), 1), THREADS, 0)) }
            .map_err(dev_err("moe_dispatch_slots launch"))?;
        Ok(())
    }

    /// The grid over (the column tiles of H, `rows` rows), or `None` for no
    /// rows (the launch is skipped: its outputs are empty).
    fn rows_grid(&self, rows: usize) -> Option<(usize, usize)> {
        (rows > 0).then(|| (self.h.div_ceil(THREADS as usize), rows.min(MAX_GRID)))
    }

    /// Enqueues `moe_zero_f32` on `out` (n elements).
    fn zero(&self, out: &Guarded<f32>, n: usize, what: &str) -> Result<(), SubjectError> {
        let s = &self.dev.stream;
        let n64 = n as i64;
        let mut b = s.launch_builder(&self.kernels.zero);
        b.arg(out.arg()).arg(&n64);
        // SAFETY: moe_zero_f32(float*, long long): `out` holds n elements;
        // grid-stride.
        unsafe { b.launch(cfg((blocks(n, THREADS as usize), 1), THREADS, 0)) }.map_err(dev_err(what))?;
        Ok(())
    }

    /// Enqueues the forward: the dispatch, x_disp, then y.
    pub fn launch_forward(&mut self) -> Result<(), SubjectError> {
        self.launch_dispatch()?;
        let kn = &self.kernels;
        self.launch_over_slots((&kn.copy, "moe_dispatch_copy"), &self.x, None, &self.x_disp)?;
        self.launch_combine(Pass::Forward)
    }

    /// Enqueues the backward: the dispatch, dx_exp, dw, then dx.
    pub fn launch_backward(&mut self) -> Result<(), SubjectError> {
        self.launch_dispatch()?;
        let kn = &self.kernels;
        self.launch_over_slots((&kn.dx_exp, "moe_combine_bwd_dx_exp"), &self.dy, Some(&self.weights), &self.dx_exp)?;
        let (t, h, _, k, _) = self.ints();
        let mut b = self.dev.stream.launch_builder(&kn.dw);
        b.arg(self.dy.arg())
            .arg(self.x_exp.arg())
            .arg(&self.offset)
            .arg(&self.stride)
            .arg(&t)
            .arg(&h)
            .arg(&k)
            .arg(self.slot.arg())
            .arg(self.dw.arg());
        // SAFETY: moe_combine_bwd_dw's signature in order and type; dy T
        // rows, x_exp N_slots rows read only at the dispatch's slots; dw T*k.
        // Whole warps per choice (THREADS is a multiple of 32); grid-stride.
        unsafe { b.launch(cfg((blocks(self.t * self.k, DW_WARPS), 1), THREADS, 0)) }
            .map_err(dev_err("moe_combine_bwd_dw launch"))?;
        self.launch_combine(Pass::Backward)
    }

    /// Enqueues the step the two subjects differ in: the pass's output (T x
    /// H: y, or dx) from the slots' rows (x_exp times the choices' weights,
    /// or g_disp). The gather sums each token's kept slots in one thread;
    /// the scatter zeroes the output, then adds every slot's row into its
    /// token's with float atomics.
    fn launch_combine(&self, pass: Pass) -> Result<(), SubjectError> {
        let kn = &self.kernels;
        let (rows, weights, (out, out_name), gather, scatter) = match pass {
            Pass::Forward => (
                &self.x_exp,
                Some(&self.weights),
                (&self.y, "y"),
                (&kn.gather, "moe_combine_gather"),
                (&kn.scatter, "moe_combine_scatter"),
            ),
            Pass::Backward => (
                &self.g_disp,
                None,
                (&self.dx, "dx"),
                (&kn.bwd_dx, "moe_combine_bwd_dx"),
                (&kn.scatter_bwd_dx, "moe_combine_scatter_bwd_dx"),
            ),
        };
        match self.variant {
            Variant::Gather => self.launch_over_tokens(gather, rows, weights, out),
            Variant::Scatter => {
                self.zero(out, self.t * self.h, &format!("moe_zero_f32 launch ({out_name})"))?;
                self.launch_over_slots(scatter, rows, weights, out)
            }
        }
    }

    /// Enqueues `kernel`, one of the kernels over the slots, whose
    /// parameters are (rows, off, ld, H, k, slot_src, [weights,] n_slots,
    /// out) (`weights` exactly for those that take them): slot s's row of
    /// `out` from the row of `rows` that s names (its owner's token's row of
    /// x or dy, or its own row of x_exp or g_disp). Skipped without slots.
    fn launch_over_slots(
        &self,
        (kernel, name): (&CudaFunction, &str),
        rows: &Guarded<f32>,
        weights: Option<&Guarded<f32>>,
        out: &Guarded<f32>,
    ) -> Result<(), SubjectError> {
        let Some(grid) = self.rows_grid(self.plan.n_slots) else {
            return Ok(());
        };
        let (_, h, _, k, n) = self.ints();
        let mut b = self.dev.stream.launch_builder(kernel);
        b.arg(rows.arg()).arg(&self.offset).arg(&self.stride).arg(&h).arg(&k).arg(self.slot_src.arg());
        if let Some(w) = weights {
            b.arg(w.arg());
        }
        b.arg(&n).arg(out.arg());
        // SAFETY: the parameters above in order and type, as the callers'
        // kernels take them (moe_dispatch_copy, moe_combine_bwd_dx_exp,
        // moe_combine_scatter, moe_combine_scatter_bwd_dx; the test
        // below checks their declarations). `rows` is the storage at (offset,
        // stride) of T rows (x, dy) or N_slots rows (x_exp, g_disp); slot_src
        // holds N_slots owners t*k + j with t < T, written by the dispatch
        // before on this stream; weights T*k; `out` N_slots*H (x_disp,
        // dx_exp) or T*H (y, dx: zeroed just before on this stream). Every
        // buffer is owned by self and outlives the launch.
        unsafe { b.launch(cfg(grid, THREADS, 0)) }.map_err(dev_err(&format!("{name} launch")))?;
        Ok(())
    }

    /// Enqueues `kernel`, one of the gather kernels, whose parameters are
    /// (rows, off, ld, T, H, k, slot, [weights,] out): token t's row of
    /// `out` (T x H) from the rows of `rows` (N_slots of them) at its kept
    /// slots.
    fn launch_over_tokens(
        &self,
        (kernel, name): (&CudaFunction, &str),
        rows: &Guarded<f32>,
        weights: Option<&Guarded<f32>>,
        out: &Guarded<f32>,
    ) -> Result<(), SubjectError> {
        let grid = (self.h.div_ceil(THREADS as usize), self.t.min(MAX_GRID));
        let (t, h, _, k, _) = self.ints();
        let mut b = self.dev.stream.launch_builder(kernel);
        b.arg(rows.arg()).arg(&self.offset).arg(&self.stride).arg(&t).arg(&h).arg(&k).arg(self.slot.arg());
        if let Some(w) = weights {
            b.arg(w.arg());
        }
        b.arg(out.arg());
        // SAFETY: the parameters above in order and type, as the callers'
        // kernels take them (moe_combine_gather, moe_combine_bwd_dx; the test
        // below checks their declarations). `rows` is the storage of N_slots
        // rows, and the slots read (slot, from the dispatch before on this
        // stream) are below N_slots or -1 (skipped); weights T*k; `out` T*H.
        unsafe { b.launch(cfg(grid, THREADS, 0)) }.map_err(dev_err(&format!("{name} launch")))?;
        Ok(())
    }

    /// Reads `n` elements of `buf` (none when n = 0: an empty output's
    /// buffer holds one unread element).
    fn read_n<T: super::guard::Canary>(&self, buf: &Guarded<T>, n: usize) -> Result<Vec<T>, SubjectError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        buf.read_range(&self.dev.stream, 0..n)
    }

    /// The dispatch's own N_slots (offsets[E]) against the case's: a kernel
    /// that counts otherwise has put slots where x_exp has no row.
    fn check_slots(&self) -> Result<(), SubjectError> {
        let total = self.offsets.read_range(&self.dev.stream, self.e..self.e + 1)?[0] as usize;
        if total != self.plan.n_slots {
            return Err(SubjectError::Device(format!(
                "the dispatch counted {total} slots, the case's x_exp has {}",
                self.plan.n_slots
            )));
        }
        Ok(())
    }

    /// Waits for the forward and copies its outputs back.
    pub fn read_forward(&self) -> Result<MoeCombineForward<f32>, SubjectError> {
        self.dev.finish("moe_combine forward")?;
        self.check_guards()?;
        self.check_slots()?;
        let s = &self.dev.stream;
        let slot = self.slot.read(s)?.into_iter().map(|v| v as i32).collect();
        let counts = self.counts.read(s)?;
        let x_disp = self.read_n(&self.x_disp, self.plan.n_slots * self.h)?;
        let y = self.y.read(s)?;
        self.dev.finish("read-back")?;
        Ok(MoeCombineForward { slot, counts, x_disp, y })
    }

    /// Waits for the backward and copies its outputs back.
    pub fn read_backward(&self) -> Result<MoeCombineBackward<f32>, SubjectError> {
        self.dev.finish("moe_combine backward")?;
        self.check_guards()?;
        self.check_slots()?;
        let s = &self.dev.stream;
        let dx_exp = self.read_n(&self.dx_exp, self.plan.n_slots * self.h)?;
        let dw = self.dw.read(s)?;
        let dx = self.dx.read(s)?;
        self.dev.finish("read-back")?;
        Ok(MoeCombineBackward { dx_exp, dw, dx })
    }

    /// Every buffer's guard zones, inputs included (a kernel must not write
    /// its inputs either).
    fn check_guards(&self) -> Result<(), SubjectError> {
        let s = &self.dev.stream;
        self.ids.check(s)?;
        self.padding.check(s)?;
        for b in [&self.weights, &self.x, &self.x_exp, &self.dy, &self.g_disp] {
            b.check(s)?;
        }
        for b in [&self.slot, &self.chunk_counts, &self.counts, &self.offsets, &self.slot_src] {
            b.check(s)?;
        }
        for b in [&self.x_disp, &self.y, &self.dx_exp, &self.dw, &self.dx] {
            b.check(s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::cuda::declared_profile_name;
    use oracles::case::Layout;

    fn source() -> &'static str {
        KernelId::MoeCombine.source().text
    }

    fn define(name: &str) -> Option<u64> {
        source().lines().find_map(|l| {
            let rest = l.strip_prefix("#define ")?.strip_prefix(name)?;
            rest.split_whitespace().next()?.parse().ok()
        })
    }

    #[test]
    fn kernel_source_declares_serial_and_the_launchers_constants() {
        assert_eq!(
            declared_profile_name(&KernelId::MoeCombine.source()),
            Some(MoeCombineProfile::serial().name.as_str())
        );
        assert_eq!(define("BP_MOE_THREADS"), Some(THREADS as u64));
        assert_eq!(define("BP_MOE_CHUNK"), Some(CHUNK as u64));
        assert_eq!(define("BP_MOE_RANK_WARPS"), Some(RANK_WARPS as u64));
        assert_eq!(define("BP_MOE_SCAN_THREADS"), Some(SCAN_THREADS as u64));
        for name in KERNEL_NAMES {
            // The declaration's text up to its body names the kernel.
            let declared = source()
                .split("extern \"C\" __global__")
                .skip(1)
                .any(|d| d[..d.find('{').unwrap_or(0)].contains(&format!(" {name}(")));
            assert!(declared, "{name} is not a kernel of moe_combine.cu");
        }
        assert_eq!(KernelId::MoeCombine.subject(), Some(("moe_combine", "cuda")));
    }

    /// The parameter types of kernel `name` as its declaration gives them.
    fn parameters(name: &str) -> Vec<String> {
        let decl = source()
            .split("extern \"C\" __global__")
            .skip(1) // the header's comments, which quote the declarations
            .find_map(|d| d.split_once(&format!(" {name}(")))
            .unwrap_or_else(|| panic!("{name} is not a kernel of moe_combine.cu"))
            .1;
        let list = &decl[..decl.find(')').unwrap_or(0)];
        list.split(',')
            .map(|p| {
                let mut words: Vec<&str> = p.split_whitespace().filter(|w| *w != "__restrict__").collect();
                words.pop(); // the parameter's name
                words.join(" ")
            })
            .collect()
    }

    /// The kernels launched through `launch_over_slots` and
    /// `launch_over_tokens` take the parameters those push, with the
    /// weights exactly where their caller passes them.
    #[test]
    fn shared_launches_push_the_kernels_parameters() {
        // (rows, off, ld, H, k, slot_src, [weights,] n_slots, out)
        let over_slots = |weights: bool| {
            let mut p = vec!["const float*", "int", "long long", "int", "int", "const int*"];
            p.extend(weights.then_some("const float*"));
            p.extend(["int", "float*"]);
            p
        };
        // (rows, off, ld, T, H, k, slot, [weights,] out)
        let over_tokens = |weights: bool| {
            let mut p = vec!["const float*", "int", "long long", "int", "int", "int", "const int*"];
            p.extend(weights.then_some("const float*"));
            p.push("float*");
            p
        };
        assert_eq!(parameters("moe_dispatch_copy"), over_slots(false));
        assert_eq!(parameters("moe_combine_bwd_dx_exp"), over_slots(true));
        assert_eq!(parameters("moe_combine_scatter"), over_slots(true));
        assert_eq!(parameters("moe_combine_scatter_bwd_dx"), over_slots(false));
        assert_eq!(parameters("moe_combine_gather"), over_tokens(true));
        assert_eq!(parameters("moe_combine_bwd_dx"), over_tokens(false));
    }

    #[test]
    fn shared_memory_fits_sm80() {
        assert!(rank_shared_bytes(MAX_RANK_EXPERTS) <= 163 * 1024);
    }

    fn case(t: usize, e: usize, capacity: Option<usize>) -> MoeCombineCase {
        let ids: Vec<u32> = (0..t).map(|i| (i % e) as u32).collect();
        let mut c = MoeCombineCase {
            t,
            h: 2,
            e,
            k: 1,
            capacity,
            layout: Layout::dense(2),
            ids,
            weights: vec![1.0; t],
            padding: None,
            x: vec![1.0; 2 * t],
            x_exp: Vec::new(),
            dy: vec![1.0; 2 * t],
            g_disp: Vec::new(),
        };
        let n = oracles::case::moe_combine::slot_count(&c).unwrap();
        c.x_exp = vec![1.0; 2 * n];
        c.g_disp = vec![1.0; 2 * n];
        c
    }

    #[test]
    fn plan_takes_valid_cases_and_refuses_the_rest() {
        let p = plan(&case(130, 4, None)).unwrap();
        assert_eq!(p, Plan { nchunks: 3, n_slots: 130, cap: -1 });
        // A capacity past T drops nothing: min(C, T).
        assert_eq!(plan(&case(5, 1, Some(1 << 40))).unwrap().cap, 5);
        assert_eq!(plan(&case(5, 1, Some(2))).unwrap(), Plan { nchunks: 1, n_slots: 2, cap: 2 });
        assert!(matches!(plan(&case(3, MAX_RANK_EXPERTS + 1, None)), Err(SubjectError::Unavailable(_))));
        let mut bad = case(3, 2, None);
        bad.x_exp.pop();
        assert!(matches!(plan(&bad), Err(SubjectError::Invalid(_))));
    }
}
