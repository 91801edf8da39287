//! The CUDA subjects of `shared_expert` (docs/ops/shared_expert.md), one per
//! kernel source, compiled at run time by NVRTC on first use and run on the
//! process's one [`Device`] ([`Variant`]):
//! - `cuda`: `kernels/shared_expert.cu`, profile `serial` (every dot product
//!   serial ascending, mul then add each rounded), register-tiled SIMT GEMMs
//!   in which every output element is one thread's serial loop;
//! - `cuda-tc`: `kernels/shared_expert_tc.cu`, profile `mma16-h100` (every
//!   dot product a chain of tensor-core `mma.sync` steps over K in blocks of
//!   16, ascending), each output's chain in one warp;
//! - `cuda-wgmma`: `kernels/shared_expert_wgmma.cu`, the same profile on
//!   Hopper's warpgroup MMA (`wgmma`, whose step gives `mma.sync`'s bits),
//!   each output's chain in one warpgroup's accumulators.
//!
//! The sources keep one launch contract, so one launcher runs any. Five
//! launches, no split-K, an output's chain the same for every T:
//! batch-invariant by construction.
//! - forward: `se_gate_up_fwd` (z = x w1^T with the SwiGLU epilogue: h, bf16)
//!   then `se_gemm_nk_bf16` (y = bf16(h w2^T));
//! - backward: `se_gemm_kn_bf16` (dh = bf16(dy w2)), `se_gate_up_bwd` (z
//!   recomputed from x, dz = bf16([dgate, dup])), `se_gemm_kn_f32` (dX = dz
//!   w1, one chain over all 2F).
//!
//! `cuda-wgmma` keeps z from the forward instead, as autograd does
//! ([`Variant::keeps_z`]): four launches, the backward's dh GEMM turning dh
//! into dz in its epilogue. Its tiles are 128 x 256 ([`Variant::tile_n`]),
//! or 64 x 128, or (the dh GEMM) 64 x 64, whichever finishes first
//! ([`Tile`]); its blocks are persistent, one per multiprocessor
//! ([`Variant::persistent`]); it copies with TMA through tensor maps the
//! subject encodes where the rows are 16-byte aligned, with cp.async
//! otherwise (the same bits; tier A has both); each launch may overlap the
//! one before ([`Variant::overlaps_launches`]).
//!
//! Fail closed, as the other ops' subjects: no driver, GPU or NVRTC, or a
//! kernel that does not compile, is an explicit reason ([`probe`]); an
//! invalid case is [`SubjectError::Invalid`]; a valid case past the kernels'
//! i32 sizes or grid limits is [`SubjectError::Unavailable`] ([`plan`],
//! without a GPU). Nothing panics, nothing falls back.
//!
//! Uploads, launches and read-backs are separate so that the bench times the
//! kernels alone (CUDA events) and can capture them in a CUDA graph.

use super::device::{as_i32, dev_err, device, Device, DeviceInfo};
use super::guard::Guarded;
use super::launch::{self, KernelArgs};
use super::tma::TensorMap;
use super::{KernelId, GAP_POISON};
use crate::knobs;
use crate::subject::{invalid, Subject, SubjectError, SubjectKind};
use cudarc::driver::{CudaFunction, LaunchConfig};
use oracles::case::shared_expert::{SharedExpertBackward, SharedExpertCase, SharedExpertForward};
use oracles::op::shared_expert::SharedExpert;
use oracles::profile::shared_expert::SharedExpertProfile;
use std::sync::{Arc, OnceLock};

/// `BP_SE_THREADS`: threads per block of every kernel but `cuda-wgmma`'s
/// ([`Variant::threads`]).
pub const THREADS: u32 = 256;
/// `cuda-wgmma`'s `BP_SE_THREADS`: two computing warpgroups and one that
/// copies.
pub const WG_THREADS: u32 = 384;
/// `BP_SE_BM`, `BP_SE_BN`: the output tile of one block (rows x columns),
/// but for `cuda-wgmma`'s ([`Variant::tile_n`]).
pub const TILE_M: usize = 128;
pub const TILE_N: usize = 128;
/// `BP_TC_SMEM`: the tensor-core kernels' dynamic shared memory.
pub const TC_SMEM: u32 = 81_920;
/// `BP_WG_SMEM`: the wgmma kernels' dynamic shared memory.
pub const WG_SMEM: u32 = 197_632;
/// The most blocks a grid's y dimension takes (CUDA's limit).
const MAX_GRID_Y: usize = 65_535;

/// A bf16 (given as the f32 it is exactly) as its 16 stored bits.
pub fn bf16_bits(x: f32) -> u16 {
    (x.to_bits() >> 16) as u16
}

/// The f32 value of stored bf16 bits.
pub fn bf16_value(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// The shape of a valid case the kernels take (its grids: `launch_of`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub t: usize,
    pub h: usize,
    pub f: usize,
}

/// Validates `case` ([`SharedExpertCase::validate`]) and decides whether the
/// kernels take it: `Invalid` for an invalid case, `Unavailable` (with the
/// reason) for a valid one past the kernels' limits: T, H, 2F, the offset,
/// and every element count of a buffer (x's storage, w1, w2, z) within i32
/// (the kernels index rows in 64 bits, but take sizes as int), and
/// ceil(T / 128) <= 65535 (the grid's y dimension). Any T >= 1, H, F >= 1,
/// offset 0..3 and row stride >= H within those is supported. Needs no GPU.
pub fn plan(case: &SharedExpertCase) -> Result<Plan, SubjectError> {
    case.validate().map_err(invalid)?;
    let (t, h, f) = (case.t, case.h, case.f);
    let storage = case.layout.storage_len(t, h).map_err(SubjectError::Invalid)?;
    for (what, x) in [
        ("T", t),
        ("H", h),
        ("2F", f.saturating_mul(2)),
        ("offset", case.layout.offset),
        ("row stride", case.layout.row_stride),
        ("x storage", storage),
        ("w1 (2F x H)", f.saturating_mul(2).saturating_mul(h)),
        ("T x 2F", t.saturating_mul(2).saturating_mul(f)),
        ("T x H", t.saturating_mul(h)),
    ] {
        as_i32(x, what)?;
    }
    let grid_m = t.div_ceil(TILE_M);
    if grid_m > MAX_GRID_Y {
        return Err(SubjectError::Unavailable(format!(
            "T = {t}: the shared expert's kernels take at most {} tokens ({MAX_GRID_Y} blocks of {TILE_M})",
            MAX_GRID_Y * TILE_M
        )));
    }
    Ok(Plan { t, h, f })
}

/// A block's output tile, of those a kernel source may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tile {
    /// 128 rows, [`Variant::tile_n`] columns: every source's, every step.
    Large,
    /// 64 x 128 (`NAME_m64`): `cuda-wgmma`'s, every step.
    Small,
    /// 64 x 64 (`NAME_n64`): `cuda-wgmma`'s dh GEMM (`se_gemm_kn_dz`).
    /// Not dX's: at T = 16 its 64 narrow tiles took 0.025 ms against 0.022
    /// on 32 small ones, and at T = 256 they make two waves (0.044 against
    /// 0.027, measured on the H200).
    Narrow,
}

impl Tile {
    /// Largest first (the tile rule's ties take the earlier one).
    pub const ALL: [Tile; 3] = [Tile::Large, Tile::Small, Tile::Narrow];

    /// The entry points' suffix.
    fn suffix(self) -> &'static str {
        match self {
            Tile::Large => "",
            Tile::Small => "_m64",
            Tile::Narrow => "_n64",
        }
    }

    /// (rows, columns).
    pub fn shape(self, variant: Variant) -> (usize, usize) {
        match self {
            Tile::Large => (TILE_M, variant.tile_n()),
            Tile::Small => (TILE_M / 2, TILE_N),
            Tile::Narrow => (TILE_M / 2, TILE_N / 2),
        }
    }

    /// A tile's time on a multiprocessor, in sixths of a large one's: a
    /// small tile (a quarter of the outputs) takes half (measured: 242
    /// against 563 TFLOP/s with full waves of each); a narrow one a third,
    /// as its copies are 128 of a small one's 192 rows a stage (the main
    /// loops of the 64-row kernels wait on the L2; dh at T = 256 took
    /// 0.029 ms on 128 narrow tiles, 0.032 on 64 small ones).
    fn cost(self) -> usize {
        match self {
            Tile::Large => 6,
            Tile::Small => 3,
            Tile::Narrow => 2,
        }
    }

    /// The forced tile `knobs::Tiles` names, `None` for `auto`.
    fn forced(tiles: knobs::Tiles) -> Option<Tile> {
        match tiles {
            knobs::Tiles::Auto => None,
            knobs::Tiles::Large => Some(Tile::Large),
            knobs::Tiles::Small => Some(Tile::Small),
            knobs::Tiles::Narrow => Some(Tile::Narrow),
        }
    }
}

/// When the busiest of `multiprocessors` finishes `n` tiles of `tile`:
/// waves (tiles over multiprocessors, rounded up) times the tile's cost.
fn finish(tile: Tile, n: usize, multiprocessors: usize) -> usize {
    n.div_ceil(multiprocessors.max(1)).saturating_mul(tile.cost())
}

struct Kernels {
    variant: Variant,
    /// The entry points, by [`Tile`] and [`Step`]: `None` for a step the
    /// source does not run ([`Variant::entry_point`]) or runs without that
    /// tile ([`Variant::has`]).
    by_tile: [[Option<CudaFunction>; 5]; 3],
    /// The GPU's multiprocessors: the tile rule's ([`tile_of`]) and the
    /// persistent grid's.
    multiprocessors: usize,
    /// `BITPARITY_TILES`: which tile every launch takes, where there are
    /// several.
    tiles: knobs::Tiles,
}

/// Which kernel source a subject runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `kernels/shared_expert.cu`, profile `serial`: the subject `cuda`.
    Strict,
    /// `kernels/shared_expert_tc.cu`, profile `mma16-h100`: `cuda-tc`.
    TensorCore,
    /// `kernels/shared_expert_wgmma.cu`, profile `mma16-h100`:
    /// `cuda-wgmma`.
    Wgmma,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Strict, Variant::TensorCore, Variant::Wgmma];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Strict => "cuda",
            Variant::TensorCore => "cuda-tc",
            Variant::Wgmma => "cuda-wgmma",
        }
    }

    pub fn kernel(self) -> KernelId {
        match self {
            Variant::Strict => KernelId::SharedExpert,
            Variant::TensorCore => KernelId::SharedExpertTc,
            Variant::Wgmma => KernelId::SharedExpertWgmma,
        }
    }

    /// Bytes of dynamic shared memory every kernel of the source takes
    /// (`BP_TC_SMEM`, `BP_WG_SMEM`: the tensor-core kernels' stages of K;
    /// the strict ones use static shared memory only).
    pub fn dynamic_smem(self) -> u32 {
        match self {
            Variant::Strict => 0,
            Variant::TensorCore => TC_SMEM,
            Variant::Wgmma => WG_SMEM,
        }
    }

    /// Threads per block (`BP_SE_THREADS`).
    pub fn threads(self) -> u32 {
        if self == Variant::Wgmma {
            WG_THREADS
        } else {
            THREADS
        }
    }

    /// Whether the kernels loop over their tiles (`cuda-wgmma`): the grid
    /// is one block per multiprocessor, or one per tile where there are
    /// fewer tiles; the other sources take a block per tile.
    pub fn persistent(self) -> bool {
        self == Variant::Wgmma
    }

    /// Whether each kernel's launch may overlap the kernel before it
    /// (`cuda-wgmma`: [`launch::launch`]; its kernels load their first
    /// stages of weights, then wait for that kernel to complete, so that
    /// the launch, the blocks' set-up and those loads run under its tail).
    pub fn overlaps_launches(self) -> bool {
        self == Variant::Wgmma
    }

    /// Whether the forward keeps z (T x 2F f32) for the backward, as
    /// autograd does: the backward then runs [`Step::Dh`] with the SwiGLU
    /// backward in its epilogue and no [`Step::GateUpBwd`] (6 T H F FLOPs,
    /// not 10).
    pub fn keeps_z(self) -> bool {
        self == Variant::Wgmma
    }

    /// The kernel that runs `step` (with the large tiles; with the others,
    /// the name and [`Tile`]'s suffix), or `None` where the source has no
    /// such step.
    pub fn entry_point(self, step: Step) -> Option<&'static str> {
        match (step, self.keeps_z()) {
            (Step::GateUpBwd, true) => None,
            (Step::Dh, true) => Some("se_gemm_kn_dz"),
            _ => Some(step.entry_point()),
        }
    }

    /// The backward's steps, in order.
    pub fn backward_steps(self) -> &'static [Step] {
        if self.keeps_z() {
            &[Step::Dh, Step::Dx]
        } else {
            &[Step::Dh, Step::GateUpBwd, Step::Dx]
        }
    }

    /// The steps the variant runs: the forward's, then the backward's.
    pub fn steps(self) -> Vec<Step> {
        [Step::GateUpFwd, Step::Down].into_iter().chain(self.backward_steps().iter().copied()).collect()
    }

    /// Whether the source runs `step` with `tile` (every source every step
    /// with the large tiles; `cuda-wgmma` also every step with the small
    /// ones, and its dh GEMM with the narrow ones).
    pub fn has(self, tile: Tile, step: Step) -> bool {
        self.entry_point(step).is_some()
            && match tile {
                Tile::Large => true,
                Tile::Small => self == Variant::Wgmma,
                Tile::Narrow => self == Variant::Wgmma && step == Step::Dh,
            }
    }

    /// Columns of a block's tile (`BP_SE_BN`; 128 rows each): 256 for
    /// `cuda-wgmma`, 128 for the others.
    pub fn tile_n(self) -> usize {
        if self == Variant::Wgmma {
            2 * TILE_N
        } else {
            TILE_N
        }
    }

    /// The profile the kernel source declares and the subject claims.
    pub fn profile(self) -> SharedExpertProfile {
        match self {
            Variant::Strict => SharedExpertProfile::serial(),
            Variant::TensorCore | Variant::Wgmma => SharedExpertProfile::mma_h100(),
        }
    }
}

/// A CUDA subject of `shared_expert`. Cheap to clone.
#[derive(Clone)]
pub struct CudaSharedExpert {
    variant: Variant,
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
}

/// Opens the GPU (shared with every op) and loads the variant's kernel
/// source, once per process. `Err` is the reason this subject cannot run
/// here; it disables no other subject.
pub fn probe(variant: Variant) -> Result<CudaSharedExpert, String> {
    static SUBJECTS: [OnceLock<Result<CudaSharedExpert, String>>; 3] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    SUBJECTS[variant as usize].get_or_init(|| load(variant)).clone()
}

fn load(variant: Variant) -> Result<CudaSharedExpert, String> {
    let dev = device()?;
    // The MMA model is the sm_90 tensor core's (H100, H200): another
    // architecture's steps round otherwise (the A100 keeps 24 fraction
    // bits), so its bits are not this profile's.
    if variant != Variant::Strict && dev.info.compute_capability != (9, 0) {
        let (major, minor) = dev.info.compute_capability;
        return Err(format!(
            "{}: its profile mma16-h100 models the sm_90 tensor core (H100, H200); this GPU is sm_{major}{minor}",
            variant.name()
        ));
    }
    let functions = |tile: Tile| -> Result<[Option<CudaFunction>; 5], String> {
        let f = |s: Step| match variant.entry_point(s) {
            Some(name) if variant.has(tile, s) => {
                dev.function(variant.kernel(), &format!("{name}{}", tile.suffix())).map(Some)
            }
            _ => Ok(None),
        };
        Ok([f(Step::GateUpFwd)?, f(Step::Down)?, f(Step::Dh)?, f(Step::GateUpBwd)?, f(Step::Dx)?])
    };
    let kernels = Kernels {
        variant,
        by_tile: [functions(Tile::Large)?, functions(Tile::Small)?, functions(Tile::Narrow)?],
        multiprocessors: dev.info.multiprocessors.max(1) as usize,
        tiles: knobs::tiles()?,
    };
    let smem = variant.dynamic_smem();
    if smem > 0 {
        // A plain driver call: the context current on this thread first.
        dev.ctx.bind_to_thread().map_err(|e| format!("{}: binding the context: {e}", variant.name()))?;
        use cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX_DYN;
        for f in kernels.by_tile.iter().flatten().flatten() {
            f.set_attribute(MAX_DYN, smem as i32)
                .map_err(|e| format!("{}: {smem} bytes of dynamic shared memory: {e}", variant.name()))?;
        }
    }
    Ok(CudaSharedExpert { variant, dev, kernels: Arc::new(kernels) })
}

/// A case on the GPU: its inputs (bf16 bits), the intermediates and the
/// outputs; launches and read-backs are separate.
pub struct DeviceSharedExpertCase {
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
    plan: Plan,
    offset: i32,
    stride: i64,
    /// The uploaded case's T and x's (and dy's) offset: [`Self::window`]
    /// launches on rows of them.
    uploaded_t: usize,
    base_offset: i32,
    x: Guarded<u16>,
    dy: Guarded<u16>,
    w1: Guarded<u16>,
    w2: Guarded<u16>,
    /// T x F bf16: the forward's h.
    hid: Guarded<u16>,
    /// T x H bf16: y.
    y: Guarded<u16>,
    /// T x F bf16: the backward's dh.
    dh: Guarded<u16>,
    /// T x 2F bf16: dz.
    dz: Guarded<u16>,
    /// T x 2F f32: z, kept by the forward where the variant keeps it
    /// ([`Variant::keeps_z`]; else one unused element).
    z: Guarded<f32>,
    /// T x H f32: dX.
    dx: Guarded<f32>,
    forward_enqueued: bool,
    backward_enqueued: bool,
}

impl CudaSharedExpert {
    pub fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    /// The device this subject runs on (timing, graphs).
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Validates `case` ([`plan`]) and uploads it: x and dy as their storage
    /// (the real offset and row stride, a NaN in every gap), the weights
    /// dense, all as bf16 bits; allocates every intermediate and output;
    /// every buffer between guard zones ([`Guarded`]).
    pub fn upload(&self, case: &SharedExpertCase) -> Result<DeviceSharedExpertCase, SubjectError> {
        let plan = plan(case)?;
        let (t, h, f) = (plan.t, plan.h, plan.f);
        let bits = |v: &[f32]| v.iter().map(|&x| bf16_bits(x)).collect::<Vec<u16>>();
        let s = &self.dev.stream;
        Ok(DeviceSharedExpertCase {
            dev: self.dev.clone(),
            kernels: self.kernels.clone(),
            plan,
            offset: as_i32(case.layout.offset, "offset")?,
            stride: case.layout.row_stride as i64, // < 2^31, checked by plan
            uploaded_t: t,
            base_offset: as_i32(case.layout.offset, "offset")?,
            x: Guarded::upload(s, "x", &bits(&case.x_storage(GAP_POISON)))?,
            dy: Guarded::upload(s, "dy", &bits(&case.dy_storage(GAP_POISON)))?,
            w1: Guarded::upload(s, "w1", &bits(&case.w1))?,
            w2: Guarded::upload(s, "w2", &bits(&case.w2))?,
            hid: Guarded::unwritten(s, "h", t * f)?,
            y: Guarded::unwritten(s, "y", t * h)?,
            dh: Guarded::unwritten(s, "dh", t * f)?,
            dz: Guarded::unwritten(s, "dz", t * 2 * f)?,
            z: Guarded::unwritten(s, "z", if self.variant.keeps_z() { t * 2 * f } else { 1 })?,
            dx: Guarded::unwritten(s, "dX", t * h)?,
            forward_enqueued: false,
            backward_enqueued: false,
        })
    }

    /// The forward: y, T x H bf16 values (dense), validated, uploaded,
    /// launched and read back.
    pub fn forward_y(&self, case: &SharedExpertCase) -> Result<Vec<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_forward()?;
        dc.read_forward()
    }

    /// The backward: dX, T x H f32 (dense).
    pub fn backward_dx(&self, case: &SharedExpertCase) -> Result<Vec<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_backward()?;
        dc.read_backward()
    }
}

/// The five kernels, in the order their pass runs them (a variant that
/// keeps z runs four: [`Variant::steps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Forward: h = bf16(silu(g) u), g and u from z = x w1^T (4THF flops).
    GateUpFwd,
    /// Forward: y = bf16(h w2^T) (2THF).
    Down,
    /// Backward: dh = bf16(dy w2) (2THF).
    Dh,
    /// Backward: z recomputed, dz = bf16([dgate, dup]) (4THF).
    GateUpBwd,
    /// Backward: dX = dz w1 (4THF).
    Dx,
}

impl Step {
    pub const ALL: [Step; 5] = [Step::GateUpFwd, Step::Down, Step::Dh, Step::GateUpBwd, Step::Dx];

    /// The kernel's entry point (with 128-row tiles).
    pub fn entry_point(self) -> &'static str {
        match self {
            Step::GateUpFwd => "se_gate_up_fwd",
            Step::Down => "se_gemm_nk_bf16",
            Step::Dh => "se_gemm_kn_bf16",
            Step::GateUpBwd => "se_gate_up_bwd",
            Step::Dx => "se_gemm_kn_f32",
        }
    }

    /// Blocks along N of the step's grid with tiles of `tile_n` columns
    /// (the gate/up kernels: `tile_n / 2` gate units and their up units).
    fn grid_n(self, plan: &Plan, tile_n: usize) -> usize {
        match self {
            Step::GateUpFwd | Step::GateUpBwd => plan.f.div_ceil(tile_n / 2),
            Step::Down | Step::Dx => plan.h.div_ceil(tile_n),
            Step::Dh => plan.f.div_ceil(tile_n),
        }
    }

    /// Floating-point operations (a multiply and an add per term) in units
    /// of T x H x F.
    pub fn thf_flops(self) -> u64 {
        match self {
            Step::GateUpFwd | Step::GateUpBwd | Step::Dx => 4,
            Step::Down | Step::Dh => 2,
        }
    }
}

impl Subject<SharedExpert> for CudaSharedExpert {
    fn name(&self) -> String {
        self.variant.name().into()
    }

    /// The profile every kernel of the variant's source implements.
    fn profile(&self) -> Option<SharedExpertProfile> {
        Some(self.variant.profile())
    }

    fn kind(&self) -> SubjectKind {
        SubjectKind::Device
    }

    fn lost(&self) -> Option<String> {
        super::device::lost_reason()
    }

    fn forward(&self, case: &SharedExpertCase) -> Result<SharedExpertForward<f32>, SubjectError> {
        Ok(SharedExpertForward { y: self.forward_y(case)? })
    }

    fn backward(&self, case: &SharedExpertCase) -> Result<SharedExpertBackward<f32>, SubjectError> {
        Ok(SharedExpertBackward { dx: self.backward_dx(case)? })
    }
}

/// The tile `variant` runs `step` on `plan` with, and its tiles (along N,
/// along M): the one `tiles` names (where the step lacks it, the next
/// larger it has), else the one that finishes first on `multiprocessors`
/// ([`finish`]; ties take the larger tile). `None` where the variant does
/// not run the step.
fn tile_of(
    variant: Variant,
    step: Step,
    plan: &Plan,
    multiprocessors: usize,
    tiles: knobs::Tiles,
) -> Option<(Tile, (usize, usize))> {
    let grids = Tile::ALL.into_iter().filter(|&tile| variant.has(tile, step)).map(|tile| {
        let (rows, cols) = tile.shape(variant);
        (tile, (step.grid_n(plan, cols), plan.t.div_ceil(rows)))
    });
    match Tile::forced(tiles) {
        Some(forced) => grids.take_while(|&(tile, _)| tile as usize <= forced as usize).last(),
        // The first of equal minima: the larger tile (Tile::ALL's order).
        None => grids.min_by_key(|&(tile, (n, m))| finish(tile, n.saturating_mul(m), multiprocessors)),
    }
}

impl Kernels {
    /// The function and launch shape of `step` on `plan`, and its tile
    /// ([`tile_of`]): a block per tile, or per multiprocessor where the
    /// kernels loop over their tiles ([`Variant::persistent`]). Neither the
    /// tile nor the grid changes a bit (an output's chain depends on
    /// neither); batch invariance checks that.
    fn launch_of(&self, step: Step, plan: &Plan) -> Result<(&CudaFunction, LaunchConfig, Tile), SubjectError> {
        let chosen = tile_of(self.variant, step, plan, self.multiprocessors, self.tiles);
        let found =
            chosen.and_then(|(tile, grid)| Some((self.by_tile[tile as usize][step as usize].as_ref()?, grid, tile)));
        let Some((f, (grid_n, grid_m), tile)) = found else {
            return Err(SubjectError::Invalid(format!("{}: no {step:?} step", self.variant.name())));
        };
        let grid_dim = if self.variant.persistent() {
            // Tiles, walked by the blocks in turn: grid_n <= 2^31 / 64 (N <
            // 2^31, plan), grid_m <= T.
            let tiles = grid_n.saturating_mul(grid_m);
            (tiles.min(self.multiprocessors).max(1) as u32, 1, 1)
        } else {
            // grid_n <= 2^31 / 64: N < 2^31 (plan); the 128-row grid is
            // within CUDA's y limit (plan).
            (grid_n as u32, grid_m as u32, 1)
        };
        Ok((
            f,
            LaunchConfig {
                grid_dim,
                block_dim: (self.variant.threads(), 1, 1),
                shared_mem_bytes: self.variant.dynamic_smem(),
            },
            tile,
        ))
    }
}

impl DeviceSharedExpertCase {
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Enqueues the forward: `se_gate_up_fwd` (h), then `se_gemm_nk_bf16`
    /// (y).
    pub fn launch_forward(&mut self) -> Result<(), SubjectError> {
        self.launch(Step::GateUpFwd)?;
        self.launch(Step::Down)?;
        self.forward_enqueued = true;
        Ok(())
    }

    /// Enqueues the backward: `se_gemm_kn_bf16` (dh), `se_gate_up_bwd` (z
    /// recomputed from x, dz), `se_gemm_kn_f32` (dX); where the variant
    /// keeps z, `se_gemm_kn_dz` (dh, then dz from the forward's z) and
    /// `se_gemm_kn_f32`, after the forward's `se_gate_up_fwd` if no forward
    /// is enqueued.
    pub fn launch_backward(&mut self) -> Result<(), SubjectError> {
        if self.kernels.variant.keeps_z() && !self.forward_enqueued {
            self.launch(Step::GateUpFwd)?;
        }
        for &step in self.kernels.variant.backward_steps() {
            self.launch(step)?;
        }
        self.backward_enqueued = true;
        Ok(())
    }

    /// Enqueues one kernel. A step reads what the steps before it in its
    /// pass wrote (Down reads h, GateUpBwd dh, Dx dz): alone, it reads the
    /// buffer as the last launch left it (the bench times steps one by one).
    pub fn launch(&mut self, step: Step) -> Result<(), SubjectError> {
        let dev = self.dev.clone();
        let s = &dev.stream;
        let Plan { t, h, f, .. } = self.plan;
        let (ti, hi, fi, f2) = (t as i32, h as i32, f as i32, 2 * f as i32);
        let kernels = self.kernels.clone();
        let (function, config, tile) = kernels.launch_of(step, &self.plan)?;
        let (ta, tb, tma) = self.tensor_maps(step, tile)?;
        let tma = tma as i32;
        let keeps_z = kernels.variant.keeps_z();
        let zero = 0i32;
        let (ld_h, ld_dz) = (f as i64, 2 * f as i64);
        // Each arm pushes the step's arguments (as its kernel's signature
        // says) and names the kernel.
        let (mut b, kernel) = match step {
            Step::GateUpFwd => {
                let mut b = KernelArgs::new();
                b.arg(self.x.arg())
                    .arg(&self.offset)
                    .arg(&self.stride)
                    .arg(self.w1.arg())
                    .arg(&ti)
                    .arg(&hi)
                    .arg(&fi)
                    .arg(self.hid.arg());
                if keeps_z {
                    b.arg(self.z.arg());
                }
                // The arguments match se_gate_up_fwd's signature
                // (pointers, int, long long, int x3, pointer). x holds offset
                // + (T-1)*stride + H elements (SharedExpertCase::x_storage)
                // and the kernel reads only the H values of each row; w1
                // holds 2F x H; hid T x F. Every size is within i32 (plan);
                // the grid is ceil(F/units) x ceil(T/tile rows) (launch_of;
                // <= 65535). Its twins of other tiles take the same arguments. Dynamic
                // shared memory as the source takes it
                // (Variant::dynamic_smem, the limit raised at load). The
                // buffers outlive the launch (frees are stream-ordered).
                (b, "se_gate_up_fwd")
            }
            Step::Down => {
                let mut b = KernelArgs::new();
                b.arg(self.hid.arg())
                    .arg(&zero)
                    .arg(&ld_h)
                    .arg(self.w2.arg())
                    .arg(&ti)
                    .arg(&hi)
                    .arg(&fi)
                    .arg(self.y.arg());
                // Matches se_gemm_nk_bf16(a, a_off, a_ld, b, M, N, K,
                // out): a = hid (T x F dense: offset 0, ld F), b = w2 (H x F:
                // element (n, k) at n*F + k), M = T, N = H, K = F, out = y
                // (T x H). Sizes within i32 (plan).
                (b, "se_gemm_nk_bf16")
            }
            Step::Dh => {
                let mut b = KernelArgs::new();
                b.arg(self.dy.arg()).arg(&self.offset).arg(&self.stride).arg(self.w2.arg());
                if keeps_z {
                    b.arg(self.z.arg());
                }
                b.arg(&ti).arg(&fi).arg(&hi);
                if keeps_z {
                    b.arg(self.dz.arg());
                } else {
                    b.arg(self.dh.arg());
                }
                // Matches se_gemm_kn_bf16(a, a_off, a_ld, b, M, N, K,
                // out), or where the variant keeps z se_gemm_kn_dz(a, a_off,
                // a_ld, b, z, M, N, K, dz): a = dy (its storage: offset +
                // (T-1)*stride + H elements, only the H of each row read), b
                // = w2 (H x F: element (n = j, k = i) at i*F + j), M = T, N =
                // F, K = H, out = dh (T x F); z and dz T x 2F (the forward
                // wrote z: launch_backward runs it first where it has not).
                // Sizes within i32 (plan).
                (b, if keeps_z { "se_gemm_kn_dz" } else { "se_gemm_kn_bf16" })
            }
            Step::GateUpBwd => {
                let mut b = KernelArgs::new();
                b.arg(self.x.arg())
                    .arg(&self.offset)
                    .arg(&self.stride)
                    .arg(self.w1.arg())
                    .arg(self.dh.arg())
                    .arg(&ti)
                    .arg(&hi)
                    .arg(&fi)
                    .arg(self.dz.arg());
                // Matches se_gate_up_bwd's signature; x and w1 as in
                // GateUpFwd, dh T x F, dz T x 2F. Sizes within i32; grid as
                // in GateUpFwd.
                (b, "se_gate_up_bwd")
            }
            Step::Dx => {
                let mut b = KernelArgs::new();
                b.arg(self.dz.arg())
                    .arg(&zero)
                    .arg(&ld_dz)
                    .arg(self.w1.arg())
                    .arg(&ti)
                    .arg(&hi)
                    .arg(&f2)
                    .arg(self.dx.arg());
                // Matches se_gemm_kn_f32(a, a_off, a_ld, b, M, N, K,
                // out): a = dz (T x 2F dense), b = w1 (2F x H: element (n =
                // c, k = r) at r*H + c), M = T, N = H, K = 2F (< 2^31, plan),
                // out = dx (T x H).
                (b, "se_gemm_kn_f32")
            }
        };
        if kernels.variant.persistent() {
            // cuda-wgmma's three last parameters (BP_WG_TMA).
            b.arg(&ta).arg(&tb).arg(&tma);
        }
        // SAFETY: the arguments are those of the kernel's signature, as each
        // arm says; the grid and dynamic shared memory are launch_of's;
        // cuda-wgmma's kernels wait for the kernel before them as
        // launch::launch asks (their source's launch contract).
        // The message is formatted only on failure: this runs every launch.
        unsafe { launch::launch(s, function, config, &mut b, kernels.variant.overlaps_launches()) }
            .map_err(|e| dev_err(&format!("{kernel} launch"))(e))?;
        Ok(())
    }

    /// The tensor maps of `step`'s A and B for `cuda-wgmma` (boxes of
    /// `tile`'s rows), and whether the kernel copies through them: only where
    /// TMA can address both (16-byte aligned rows); otherwise, and for the
    /// other sources, unused maps and cp.async.
    fn tensor_maps(&self, step: Step, tile: Tile) -> Result<(TensorMap, TensorMap, bool), SubjectError> {
        let none = Ok((TensorMap::unused(), TensorMap::unused(), false));
        if !self.kernels.variant.persistent() {
            return none;
        }
        let Plan { t, h, f, .. } = self.plan;
        let (bm, bn) = tile.shape(self.kernels.variant);
        // A window's rows start `offset` elements into x (and dy); the
        // storage holds them (plan).
        let at = |p: &u64| p + 2 * self.offset as u64;
        let stride = self.stride as usize;
        // (A: address, rows, columns, row stride), (B: the same, box rows).
        let ((a, ar, ac, ald), (b, br, bc, bld, bbox)) = match step {
            Step::GateUpFwd => ((at(self.x.arg()), t, h, stride), (*self.w1.arg(), 2 * f, h, h, 32)),
            Step::Down => ((*self.hid.arg(), t, f, f), (*self.w2.arg(), h, f, f, bn)),
            Step::Dh => ((at(self.dy.arg()), t, h, stride), (*self.w2.arg(), h, f, f, 64)),
            Step::Dx => ((*self.dz.arg(), t, 2 * f, 2 * f), (*self.w1.arg(), 2 * f, h, h, 64)),
            Step::GateUpBwd => return none,
        };
        match (TensorMap::bf16(a, ar, ac, ald, bm as u32)?, TensorMap::bf16(b, br, bc, bld, bbox as u32)?) {
            (Some(ta), Some(tb)) => Ok((ta, tb, true)),
            _ => none,
        }
    }

    /// Makes the launches that follow run on the uploaded case's tokens
    /// `first..first + t` as a batch of their own (their outputs in rows
    /// 0..t of the buffers): a batch-invariance sweep over every T without
    /// uploading the case again. `window(0, T)` is the whole case.
    pub fn window(&mut self, first: usize, t: usize) -> Result<(), SubjectError> {
        if t == 0 || first.checked_add(t).is_none_or(|end| end > self.uploaded_t) {
            return Err(SubjectError::Invalid(format!(
                "window of {t} tokens from {first}: the case holds {}",
                self.uploaded_t
            )));
        }
        // first * stride lies inside x's storage, whose size is within i32
        // (plan): the window's rows are rows of the uploaded case.
        let offset = first as i64 * self.stride + self.base_offset as i64;
        self.offset = i32::try_from(offset).map_err(|_| SubjectError::Invalid(format!("offset {offset}")))?;
        self.plan.t = t;
        // The outputs (and z) are those of the previous window until the
        // passes run again.
        self.forward_enqueued = false;
        self.backward_enqueued = false;
        Ok(())
    }

    /// Waits for both passes and copies back rows `rows` of y (bf16 values
    /// as f32) and of dX, each H values, row after row.
    pub fn read_rows(&self, rows: &[usize]) -> Result<(Vec<f32>, Vec<f32>), SubjectError> {
        if let Some(r) = rows.iter().find(|&&r| r >= self.plan.t) {
            return Err(SubjectError::Invalid(format!("row {r} of a batch of {}", self.plan.t)));
        }
        if !self.forward_enqueued || !self.backward_enqueued {
            return Err(SubjectError::Device("read_rows: launch the forward and the backward first".into()));
        }
        self.dev.finish("shared_expert")?;
        self.check_guards()?;
        let (s, h) = (&self.dev.stream, self.plan.h);
        let (mut y, mut dx) = (Vec::with_capacity(rows.len() * h), Vec::with_capacity(rows.len() * h));
        for &r in rows {
            y.extend(self.y.read_range(s, r * h..(r + 1) * h)?.into_iter().map(bf16_value));
            dx.extend(self.dx.read_range(s, r * h..(r + 1) * h)?);
        }
        self.dev.finish("read-back")?;
        Ok((y, dx))
    }

    /// Waits for the forward and copies y back (T x H bf16 values as f32).
    pub fn read_forward(&self) -> Result<Vec<f32>, SubjectError> {
        if !self.forward_enqueued {
            return Err(SubjectError::Device("read_forward: call launch_forward first".into()));
        }
        self.dev.finish("shared_expert forward")?;
        self.check_guards()?;
        let y = self.y.read(&self.dev.stream)?;
        self.dev.finish("read-back")?;
        Ok(y.into_iter().map(bf16_value).collect())
    }

    /// Waits for the backward and copies dX back (T x H f32).
    pub fn read_backward(&self) -> Result<Vec<f32>, SubjectError> {
        if !self.backward_enqueued {
            return Err(SubjectError::Device("read_backward: call launch_backward first".into()));
        }
        self.dev.finish("shared_expert backward")?;
        self.check_guards()?;
        let dx = self.dx.read(&self.dev.stream)?;
        self.dev.finish("read-back")?;
        Ok(dx)
    }

    /// Every buffer's guard zones, inputs included (a kernel must not write
    /// its inputs either).
    fn check_guards(&self) -> Result<(), SubjectError> {
        let s = &self.dev.stream;
        self.x.check(s)?;
        self.dy.check(s)?;
        self.w1.check(s)?;
        self.w2.check(s)?;
        self.hid.check(s)?;
        self.y.check(s)?;
        self.dh.check(s)?;
        self.dz.check(s)?;
        self.z.check(s)?;
        self.dx.check(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::cuda::declared_profile_name;
    use oracles::case::Layout;

    fn define(source: &str, name: &str) -> Option<u64> {
        source.lines().find_map(|l| {
            let rest = l.strip_prefix("#define ")?.strip_prefix(name)?;
            rest.split_whitespace().next()?.parse().ok()
        })
    }

    /// Each variant's source declares the profile its subject claims, keeps
    /// the one launch contract (block size, tile, the five entry points)
    /// and has no fused or fast-math arithmetic outside the MMA.
    #[test]
    fn kernel_sources_declare_their_profiles_and_the_launch_contract() {
        use oracles::order::ReductionOrder::Serial;
        for v in Variant::ALL {
            let source = v.kernel().source();
            let text = source.text;
            assert_eq!(declared_profile_name(&source), Some(v.profile().name.as_str()), "{}", source.name);
            let shipped = SharedExpertProfile::all().into_iter().find(|p| p.name == v.profile().name);
            match v {
                // serial ascending in every dot product, a shipped profile.
                Variant::Strict => {
                    let p = shipped.expect("a shipped profile");
                    assert_eq!((p.z, p.y, p.dh, p.dx), (Serial, Serial, Serial, Serial));
                    assert_eq!(p.mma, None);
                    for k in
                        ["BP_SE_GEMM(se_gemm_nk_bf16,", "BP_SE_GEMM(se_gemm_kn_bf16,", "BP_SE_GEMM(se_gemm_kn_f32,"]
                    {
                        assert!(text.contains(k), "{k}");
                    }
                }
                // every dot product on the H100's MMA model, a shipped profile.
                Variant::TensorCore | Variant::Wgmma => {
                    assert_eq!(shipped.expect("a shipped profile").mma.as_deref(), Some(oracles::mma::H100_BF16.name));
                    let (step, gemm, smem) = if v == Variant::TensorCore {
                        ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "BP_TC_GEMM", "BP_TC_SMEM")
                    } else {
                        ("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", "BP_WG_GEMM", "BP_WG_SMEM")
                    };
                    assert!(text.contains(step), "{step}");
                    if v == Variant::TensorCore {
                        for k in ["se_gemm_nk_bf16,", "se_gemm_kn_bf16,", "se_gemm_kn_f32,"] {
                            assert!(text.contains(&format!("{gemm}({k}")), "{gemm}({k}");
                        }
                    }
                    assert_eq!(define(text, smem), Some(v.dynamic_smem() as u64));
                }
            }
            assert_eq!(define(text, "BP_SE_THREADS"), Some(v.threads() as u64), "{}", source.name);
            assert_eq!(define(text, "BP_SE_BM"), Some(TILE_M as u64), "{}", source.name);
            assert_eq!(define(text, "BP_SE_BN"), Some(v.tile_n() as u64), "{}", source.name);
            // Every step's entry point, with its 64-row twin where it has one.
            for step in v.steps() {
                let name = v.entry_point(step).expect("a step the variant runs");
                assert!(text.contains(&format!("{name}(")) || text.contains(&format!("{name}##NAME(")), "{name}");
            }
            assert!(text.contains("#include \"expf.cuh\""), "{}", source.name);
            assert_eq!(
                text.contains("BP_WG_ENTRIES(_m64, 64, 128)"),
                v.has(Tile::Small, Step::Down),
                "{}",
                source.name
            );
            assert_eq!(text.contains("BP_WG_KN_DZ(_n64, 64, 64)"), v.has(Tile::Narrow, Step::Dh), "{}", source.name);
            for banned in ["__fmaf", "fmaf(", "__expf", "__fdividef", "__frcp_r"] {
                assert!(!text.contains(banned), "{banned} in {}", source.name);
            }
        }
    }

    /// The tile rule at the timed shapes on the H200's 132 SMs, as each
    /// tile measured there (reports/wgmma-2026-12-0*): large at T =
    /// 2048 (dh's 128 tiles included), small at T = 256 and 16 but for dh,
    /// whose small tiles leave half the multiprocessors idle: narrow.
    #[test]
    fn the_tile_rule_takes_the_tile_that_finishes_first() {
        use Step::*;
        use Tile::*;
        let tile = |step: Step, t: usize, h: usize| {
            tile_of(Variant::Wgmma, step, &Plan { t, h, f: 2048 }, 132, knobs::Tiles::Auto).map(|(tile, _)| tile)
        };
        for (t, h, want) in [
            (2048, 4096, [Large, Large, Large, Large]),
            (2048, 7168, [Large, Large, Large, Large]),
            (256, 4096, [Small, Small, Narrow, Small]),
            (16, 4096, [Small, Small, Narrow, Small]),
        ] {
            for (step, want) in [GateUpFwd, Down, Dh, Dx].into_iter().zip(want) {
                assert_eq!(tile(step, t, h), Some(want), "{step:?} at T = {t}, H = {h}");
            }
        }
        // dh at T = 2048: 128 large tiles, one wave; 512 small, four.
        let grid = |tiles: knobs::Tiles| tile_of(Variant::Wgmma, Dh, &Plan { t: 2048, h: 4096, f: 2048 }, 132, tiles);
        assert_eq!(grid(knobs::Tiles::Large), Some((Large, (8, 16))));
        assert_eq!(grid(knobs::Tiles::Small), Some((Small, (16, 32))));
        assert_eq!(grid(knobs::Tiles::Narrow), Some((Narrow, (32, 32))));
        // A forced tile a step lacks: the next larger it has.
        let p = Plan { t: 256, h: 4096, f: 2048 };
        assert_eq!(tile_of(Variant::Wgmma, GateUpFwd, &p, 132, knobs::Tiles::Narrow).map(|t| t.0), Some(Small));
        assert_eq!(tile_of(Variant::TensorCore, Dh, &p, 132, knobs::Tiles::Narrow).map(|t| t.0), Some(Large));
        assert_eq!(tile_of(Variant::Wgmma, GateUpBwd, &p, 132, knobs::Tiles::Auto), None);
        // One multiprocessor: the large tiles, a quarter as many, win.
        let one = |step: Step| tile_of(Variant::Wgmma, step, &p, 1, knobs::Tiles::Auto).map(|t| t.0);
        assert_eq!((one(Dh), one(Dx)), (Some(Large), Some(Large)));
        // A tie (one large tile against two small ones on one
        // multiprocessor): the large tile.
        let tie = Plan { t: 64, h: 64, f: 128 };
        assert_eq!(tile_of(Variant::Wgmma, GateUpFwd, &tie, 1, knobs::Tiles::Auto), Some((Large, (1, 1))));
        assert_eq!(finish(Small, 0, 0), 0);
    }

    fn case(t: usize, h: usize, f: usize) -> SharedExpertCase {
        SharedExpertCase {
            t,
            h,
            f,
            layout: Layout::dense(h),
            x: vec![0.5; t * h],
            w1: vec![0.25; 2 * f * h],
            w2: vec![-1.0; h * f],
            dy: vec![1.0; t * h],
        }
    }

    #[test]
    fn plan_takes_odd_and_reference_shapes_and_refuses_the_rest() {
        for (t, h, f) in [(1, 1, 1), (3, 7, 5), (129, 33, 65), (2, 4096, 8)] {
            let p = plan(&case(t, h, f)).unwrap_or_else(|e| panic!("{t}x{h}x{f}: {e}"));
            assert_eq!((p.t, p.h, p.f), (t, h, f));
        }
        let mut c = case(2, 3, 2);
        c.layout = Layout { offset: 3, row_stride: 9 };
        c.x = vec![1.0; 6];
        c.dy = vec![1.0; 6];
        assert!(plan(&c).is_ok());
        c.layout.offset = 4;
        assert!(matches!(plan(&c), Err(SubjectError::Invalid(_))));
        let mut c = case(2, 3, 2);
        c.x[0] = 0.1;
        assert!(matches!(plan(&c), Err(SubjectError::Invalid(_))));
    }

    #[test]
    fn bf16_bits_round_trip() {
        for x in [0.0f32, -0.0, 1.0, -2.5, f32::INFINITY, f32::from_bits(0x0001_0000), f32::from_bits(0xff80_0000)] {
            assert_eq!(bf16_value(bf16_bits(x)).to_bits(), x.to_bits());
        }
        assert!(bf16_value(bf16_bits(GAP_POISON)).is_nan(), "the gap poison stays a NaN in bf16");
    }
}
