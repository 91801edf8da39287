//! The CUDA subject of `router` (docs/ops/router.md): `kernels/router.cu`,
//! compiled at run time by NVRTC ([`super::nvrtc`]) on first use and run
//! through cudarc's driver API on the process's one [`Device`], profile
//! `warp32` ([`RouterProfile::gpu`]).
//!
//! Fail closed, as the seqwise subject: no driver, no GPU, no NVRTC, or a
//! kernel that does not compile is an explicit reason ([`probe`] returns
//! `Err(reason)`); an invalid case is [`SubjectError::Invalid`]; a valid
//! case the kernels cannot take (E > 1024, a size past the kernels' i32
//! arguments) is [`SubjectError::Unavailable`] with the reason ([`plan`]
//! decides, without a GPU). Nothing panics, nothing falls back.
//!
//! Uploads, launches and read-backs are separate so that benches can time
//! the kernels alone ([`CudaRouter::time_us`], CUDA events), and capture them
//! in a CUDA graph: a launch only enqueues work (the counters' zeroing
//! included), it never synchronises.

use super::device::{as_i32, dev_err, device, Device, DeviceInfo};
use super::guard::Guarded;
use super::{KernelId, GAP_POISON, LANE_WIDTHS, MAX_EXPERTS};
use crate::subject::{invalid, Subject, SubjectError, SubjectKind};
use cudarc::driver::{sys as cu, CudaFunction, LaunchConfig, PushKernelArg};
use oracles::case::router::{FusedLoss, RouterBackward, RouterCase, RouterForward};
use oracles::op::router::Router;
use oracles::profile::router::RouterProfile;
use oracles::vocab::ClampTie;
use std::sync::{Arc, OnceLock};

/// Threads per block of both token kernels (`BP_ROUTER_THREADS`): one warp
/// per token, so this only decides how many tokens a block takes at once.
const THREADS: u32 = 256;
const WARPS: usize = THREADS as usize / 32;
/// `BP_GROUP_SHIFT`: expert e's group is (e * ceil(2^20 / gs)) >> 20 (the
/// tests check the kernel's constant and the identity).
#[cfg(test)]
const GROUP_SHIFT: u32 = 20;

/// Dynamic shared memory of `router_fwd_v<V>`: E block counters and the E
/// biases, then per warp 2E words (keys and kept flags, reused for the
/// chosen weights and ids; at least 128, the 32 four-word entries of the
/// group-size-32 path) and 32 words of candidate scratch: the kernel's
/// `fwd_warp_words`. (With 2E words at E = 32, warp 7's entries ran past
/// the block's shared memory: an illegal address the GPU check found.)
pub fn fwd_shared_bytes(e: usize) -> usize {
    (2 * e + WARPS * ((2 * e).max(128) + 32)) * 4
}

/// Dynamic shared memory of `router_bwd_v<V>`: per warp E words of route
/// gradients by expert and 32 words of chosen masks.
pub fn bwd_shared_bytes(e: usize) -> usize {
    WARPS * (e + 32) * 4
}

/// How the kernels take a valid case: which instantiation (V values per
/// lane, 32 V >= E) and how much shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Index into [`LANE_WIDTHS`].
    pub v_index: usize,
    /// V, values per lane.
    pub v: usize,
    pub fwd_shared: usize,
    pub bwd_shared: usize,
}

/// Validates `case` (docs/ops/router.md#validation: [`RouterCase::validate`])
/// and decides whether the kernels take it: `Invalid` for an invalid case,
/// `Unavailable` (with the reason) for a valid one beyond the kernels' limits.
/// Needs no GPU.
///
/// Limits: E <= 1024, because a token's E values live in the registers of one
/// warp (32 lanes x at most 32 values); and every size the kernels take as an
/// i32 (T, E, k, G, L, the offset, T x E, T x k) within i32, the row stride
/// within i64. Every G (up to E/2), L and k (up to E) that the op allows is
/// supported.
pub fn plan(case: &RouterCase) -> Result<Plan, SubjectError> {
    case.validate().map_err(invalid)?;
    let (t, e) = (case.t, case.e);
    if e > MAX_EXPERTS {
        return Err(SubjectError::Unavailable(format!(
            "E = {e}: the router's CUDA kernels take at most {MAX_EXPERTS} experts (one warp's registers per token)"
        )));
    }
    for (what, x) in [
        ("T", t),
        ("E", e),
        ("k", case.k),
        ("G", case.groups),
        ("L", case.topk_groups),
        ("offset", case.layout.offset),
        ("T x E", t.saturating_mul(e)),
        ("T x k", t.saturating_mul(case.k)),
    ] {
        as_i32(x, what)?;
    }
    i64::try_from(case.layout.row_stride).map_err(|_| SubjectError::Unavailable("row stride exceeds i64".into()))?;
    let v_index = LANE_WIDTHS
        .iter()
        .position(|&v| 32 * v >= e)
        .ok_or_else(|| SubjectError::Unavailable(format!("E = {e}: no lane width holds it")))?;
    Ok(Plan { v_index, v: LANE_WIDTHS[v_index], fwd_shared: fwd_shared_bytes(e), bwd_shared: bwd_shared_bytes(e) })
}

struct Kernels {
    fwd: Vec<CudaFunction>,
    bwd: Vec<CudaFunction>,
}

/// The CUDA subject of `router`: profile `warp32` ([`RouterProfile::gpu`]).
/// Cheap to clone (one device and one compilation per process).
#[derive(Clone)]
pub struct CudaRouter {
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
}

/// Opens the GPU (shared with every op) and loads `kernels/router.cu`, once
/// per process. `Err` is the reason the router's CUDA subject cannot run here
/// (report its GPU suites as skipped with it); it does not disable another
/// op's subject.
pub fn probe() -> Result<CudaRouter, String> {
    static SUBJECT: OnceLock<Result<CudaRouter, String>> = OnceLock::new();
    SUBJECT.get_or_init(load).clone()
}

fn load() -> Result<CudaRouter, String> {
    let dev = device()?;
    let function = |n: &str| dev.function(KernelId::Router, n);
    let kernels = Kernels {
        fwd: LANE_WIDTHS.iter().map(|v| function(&format!("router_fwd_v{v}"))).collect::<Result<_, _>>()?,
        bwd: LANE_WIDTHS.iter().map(|v| function(&format!("router_bwd_v{v}"))).collect::<Result<_, _>>()?,
    };
    // Above 48 KiB a block's dynamic shared memory must be asked for (the
    // forward needs 69 KiB at E = 1024).
    for (fs, bytes, what) in [
        (&kernels.fwd, fwd_shared_bytes(MAX_EXPERTS), "router_fwd"),
        (&kernels.bwd, bwd_shared_bytes(MAX_EXPERTS), "router_bwd"),
    ] {
        for f in fs {
            f.set_attribute(cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32)
                .map_err(|e| format!("shared memory of {what}: {e}"))?;
        }
    }
    Ok(CudaRouter { dev, kernels: Arc::new(kernels) })
}

/// A router case on the GPU: its inputs, every output buffer, and the launch
/// shapes; launches and read-backs are separate.
pub struct DeviceRouterCase {
    dev: Arc<Device>,
    kernels: Arc<Kernels>,
    t: usize,
    e: usize,
    k: usize,
    plan: Plan,
    groups: i32,
    topk_groups: i32,
    offset: i32,
    stride: i64,
    route_scale: f32,
    route_norm: i32,
    fused: i32,
    inclusive: i32,
    g: f32,
    fwd_grid: u32,
    bwd_grid: u32,
    logits: Guarded<f32>,
    bias: Guarded<f32>,
    padding: Guarded<u8>,
    gw: Guarded<f32>,
    ids: Guarded<u32>,
    weights: Guarded<f32>,
    map: Guarded<u8>,
    counts: Guarded<u32>,
    scores: Guarded<f32>,
    grad: Guarded<f32>,
    /// A forward was enqueued: the backward reads its outputs.
    forward_enqueued: bool,
}

impl CudaRouter {
    pub fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    /// The device this subject runs on (timing, bandwidth, graphs).
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Validates `case` ([`plan`]) and uploads it: the logits as
    /// `case.storage(GAP_POISON)` (the real offset and row stride, NaN in
    /// every gap), the bias, the padding flags, gw; and allocates every
    /// output; every buffer between guard zones ([`Guarded`]).
    pub fn upload(&self, case: &RouterCase) -> Result<DeviceRouterCase, SubjectError> {
        let plan = plan(case)?;
        let (t, e, k) = (case.t, case.e, case.k);
        let dev = &self.dev;
        let tokens_grid = |f: &CudaFunction, smem: usize, what: &str| -> Result<u32, SubjectError> {
            let needed = u32::try_from(t.div_ceil(WARPS)).unwrap_or(u32::MAX);
            Ok(needed.min(dev.resident_blocks(f, THREADS, smem, what)?).max(1))
        };
        let fwd_grid = tokens_grid(&self.kernels.fwd[plan.v_index], plan.fwd_shared, "router_fwd occupancy")?;
        let bwd_grid = tokens_grid(&self.kernels.bwd[plan.v_index], plan.bwd_shared, "router_bwd occupancy")?;
        let padding: Vec<u8> = (0..t).map(|i| case.is_padding(i) as u8).collect();
        let (fused, inclusive, g) = match case.loss {
            Some(FusedLoss { clamp_tie, g }) => (1, matches!(clamp_tie, ClampTie::Inclusive) as i32, g),
            None => (0, 0, 0.0),
        };
        let s = &dev.stream;
        Ok(DeviceRouterCase {
            dev: dev.clone(),
            kernels: self.kernels.clone(),
            t,
            e,
            k,
            plan,
            groups: as_i32(case.groups, "G")?,
            topk_groups: as_i32(case.topk_groups, "L")?,
            offset: as_i32(case.layout.offset, "offset")?,
            stride: case.layout.row_stride as i64, // checked by plan
            route_scale: case.route_scale,
            route_norm: case.route_norm as i32,
            fused,
            inclusive,
            g,
            fwd_grid,
            bwd_grid,
            logits: Guarded::upload(s, "logits", &case.storage(GAP_POISON))?,
            bias: Guarded::upload(s, "bias", &case.bias)?,
            padding: Guarded::upload(s, "padding", &padding)?,
            gw: Guarded::upload(s, "gw", &case.gw)?,
            ids: Guarded::unwritten(s, "ids", t * k)?,
            weights: Guarded::unwritten(s, "weights", t * k)?,
            map: Guarded::unwritten(s, "map", t * e)?,
            counts: Guarded::zeros(s, "counts", e)?,
            scores: Guarded::unwritten(s, "scores", t * e)?,
            grad: Guarded::unwritten(s, "grad", t * e)?,
            forward_enqueued: false,
        })
    }
}

impl Subject<Router> for CudaRouter {
    fn name(&self) -> String {
        "cuda".into()
    }

    /// The profile every kernel of kernels/router.cu implements.
    fn profile(&self) -> Option<RouterProfile> {
        Some(RouterProfile::gpu())
    }

    fn kind(&self) -> SubjectKind {
        SubjectKind::Device
    }

    fn lost(&self) -> Option<String> {
        super::device::lost_reason()
    }

    fn forward(&self, case: &RouterCase) -> Result<RouterForward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_forward()?;
        dc.read_forward()
    }

    fn backward(&self, case: &RouterCase) -> Result<RouterBackward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_forward()?;
        dc.launch_backward()?;
        dc.read_backward()
    }
}

impl DeviceRouterCase {
    fn cfg(grid: u32, block: u32, smem: usize) -> LaunchConfig {
        LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: smem as u32 }
    }

    /// The plan the case was uploaded with.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Enqueues the forward: zeroes the counters, then `router_fwd_v<V>`.
    pub fn launch_forward(&mut self) -> Result<(), SubjectError> {
        let dev = self.dev.clone();
        let s = &dev.stream;
        self.counts.zero(s)?;
        let (t, e, k) = (self.t as i32, self.e as i32, self.k as i32);
        let f = &self.kernels.fwd[self.plan.v_index];
        let mut b = s.launch_builder(f);
        b.arg(self.logits.arg())
            .arg(&self.offset)
            .arg(&self.stride)
            .arg(&t)
            .arg(&e)
            .arg(self.bias.arg())
            .arg(&self.groups)
            .arg(&self.topk_groups)
            .arg(&k)
            .arg(&self.route_scale)
            .arg(&self.route_norm)
            .arg(self.padding.arg())
            .arg(self.ids.arg())
            .arg(self.weights.arg())
            .arg(self.map.arg())
            .arg(self.counts.arg())
            .arg(self.scores.arg());
        // SAFETY: the arguments match router_fwd_v<V>'s signature in order and
        // type (pointers, i32 for int, i64 for long long, f32 for float);
        // `logits` holds offset + (T-1)*stride + E elements
        // (RouterCase::storage) and the kernel reads only the E values of each
        // row; bias holds E, padding T; ids and weights T*k, map, scores T*E,
        // counts E (zeroed just before, on the same stream). The case passed
        // `plan`: E <= 1024 with V = LANE_WIDTHS[v_index] >= E/32, the op's
        // shape rules (G | E, E/G >= 2, L <= G, k <= L*E/G) that the kernel
        // relies on, and every size in i32. The dynamic shared memory is the
        // kernel's contract (fwd_shared_bytes), within the limit raised at
        // load. map starts 256-byte aligned (a whole allocation past a guard
        // zone of GUARD_BYTES), as the kernel's 16-byte map stores need. Every
        // buffer is owned by self and outlives the launch (frees are
        // stream-ordered).
        unsafe { b.launch(Self::cfg(self.fwd_grid, THREADS, self.plan.fwd_shared)) }
            .map_err(dev_err("router_fwd launch"))?;
        self.forward_enqueued = true;
        Ok(())
    }

    fn require_forward(&self, what: &str) -> Result<(), SubjectError> {
        if self.forward_enqueued {
            Ok(())
        } else {
            Err(SubjectError::Device(format!("{what} reads the forward's outputs: call launch_forward first")))
        }
    }

    /// Enqueues the backward, `router_bwd_v<V>`; it reads the scores, ids and
    /// counts of the last forward enqueued on this case.
    pub fn launch_backward(&mut self) -> Result<(), SubjectError> {
        self.require_forward("the backward")?;
        let dev = self.dev.clone();
        let s = &dev.stream;
        let (t, e, k) = (self.t as i32, self.e as i32, self.k as i32);
        let f = &self.kernels.bwd[self.plan.v_index];
        let mut b = s.launch_builder(f);
        b.arg(self.scores.arg())
            .arg(self.ids.arg())
            .arg(self.gw.arg())
            .arg(self.padding.arg())
            .arg(self.counts.arg())
            .arg(&t)
            .arg(&e)
            .arg(&k)
            .arg(&self.route_scale)
            .arg(&self.route_norm)
            .arg(&self.fused)
            .arg(&self.inclusive)
            .arg(&self.g)
            .arg(self.grad.arg());
        // SAFETY: the arguments match router_bwd_v<V>'s signature in order and
        // type; scores T*E, ids and gw T*k, padding T, counts E, grad T*E
        // elements. ids holds the forward's distinct experts < E (a forward
        // was enqueued before on this stream; the kernel also ignores an id
        // >= E), so its shared-memory writes stay in the warp's E words. The
        // dynamic shared memory is bwd_shared_bytes(E), within the limit
        // raised at load. Every buffer is owned by self and outlives the
        // launch.
        unsafe { b.launch(Self::cfg(self.bwd_grid, THREADS, self.plan.bwd_shared)) }
            .map_err(dev_err("router_bwd launch"))?;
        Ok(())
    }

    /// Waits for the forward and copies its outputs back.
    pub fn read_forward(&self) -> Result<RouterForward<f32>, SubjectError> {
        self.require_forward("read_forward")?;
        self.dev.finish("router forward")?;
        self.check_guards()?;
        let s = &self.dev.stream;
        let ids = self.ids.read(s)?;
        let weights = self.weights.read(s)?;
        let map = self.map.read(s)?;
        let counts = self.counts.read(s)?;
        let scores = self.scores.read(s)?;
        self.dev.finish("read-back")?;
        // The launch contract: map bytes are 0 or 1 (a caller may add them up).
        if let Some((i, b)) = map.iter().enumerate().find(|(_, &b)| b > 1) {
            return Err(SubjectError::Device(format!("map[{i}] is the byte {b:#04x}: the forward writes 0 or 1")));
        }
        Ok(RouterForward { ids, weights, map: map.into_iter().map(|b| b != 0).collect(), counts, scores })
    }

    /// Waits for the backward and copies the gradient back.
    pub fn read_backward(&self) -> Result<RouterBackward<f32>, SubjectError> {
        self.dev.finish("router backward")?;
        self.check_guards()?;
        let grad = self.grad.read(&self.dev.stream)?;
        self.dev.finish("read-back")?;
        Ok(RouterBackward { grad })
    }

    /// Every buffer's guard zones, inputs included (a kernel must not write
    /// its inputs either).
    fn check_guards(&self) -> Result<(), SubjectError> {
        let s = &self.dev.stream;
        self.logits.check(s)?;
        self.bias.check(s)?;
        self.padding.check(s)?;
        self.gw.check(s)?;
        self.ids.check(s)?;
        self.weights.check(s)?;
        self.map.check(s)?;
        self.counts.check(s)?;
        self.scores.check(s)?;
        self.grad.check(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::cuda::declared_profile_name;
    use oracles::case::Layout;

    fn source() -> &'static str {
        KernelId::Router.source().text
    }

    fn define(name: &str) -> Option<u64> {
        source().lines().find_map(|l| {
            let rest = l.strip_prefix("#define ")?.strip_prefix(name)?;
            rest.split_whitespace().next()?.parse().ok()
        })
    }

    #[test]
    fn kernel_source_declares_the_gpu_profile_and_its_constants() {
        let k = KernelId::Router.source();
        assert_eq!(declared_profile_name(&k), Some(RouterProfile::gpu().name.as_str()));
        assert_eq!(define("BP_ROUTER_THREADS"), Some(THREADS as u64));
        assert_eq!(define("BP_GROUP_SHIFT"), Some(GROUP_SHIFT as u64));
        for h in ["#include \"common.cuh\"", "#include \"expf.cuh\""] {
            assert!(source().contains(h), "{h}");
        }
        for v in LANE_WIDTHS {
            assert!(source().contains(&format!("\nBP_ROUTER_INSTANTIATE({v}, ")), "V = {v} not instantiated");
        }
    }

    /// The kernels' group of expert e, (e * ceil(2^20 / gs)) >> 20, is
    /// floor(e / gs) for every e < 1024 and every group size the kernels
    /// take (2 <= gs <= E/2 <= 512).
    #[test]
    fn group_index_by_multiply_and_shift_is_exact() {
        for gs in 2u32..=(MAX_EXPERTS as u32 / 2) {
            let m = (1u32 << GROUP_SHIFT).div_ceil(gs); // the kernel's (2^20 + gs - 1) / gs
            for e in 0u32..MAX_EXPERTS as u32 {
                let prod = e.checked_mul(m).expect("no u32 overflow");
                assert_eq!(prod >> GROUP_SHIFT, e / gs, "e = {e}, gs = {gs}");
            }
        }
    }

    #[test]
    fn shared_memory_fits_sm90() {
        assert!(fwd_shared_bytes(MAX_EXPERTS) <= 227 * 1024);
        assert!(bwd_shared_bytes(MAX_EXPERTS) <= 227 * 1024);
        // The reference shape keeps 8 blocks of 256 threads resident per SM.
        assert!(8 * fwd_shared_bytes(256) <= 227 * 1024);
    }

    fn case(t: usize, e: usize, groups: usize, topk_groups: usize, k: usize) -> RouterCase {
        RouterCase {
            t,
            e,
            layout: Layout::dense(e),
            logits: vec![0.5; t * e],
            bias: vec![0.0; e],
            groups,
            topk_groups,
            k,
            route_scale: 2.5,
            route_norm: true,
            padding: None,
            gw: vec![1.0; t * k],
            loss: None,
        }
    }

    #[test]
    fn plan_takes_every_reference_shape_and_refuses_the_rest() {
        for (e, g, l, k, v) in
            [(256, 8, 4, 8, 8), (64, 1, 1, 6, 2), (160, 8, 3, 6, 8), (2, 1, 1, 2, 1), (1024, 512, 1, 2, 32)]
        {
            let p = plan(&case(3, e, g, l, k)).unwrap_or_else(|err| panic!("E = {e}: {err}"));
            assert_eq!(p.v, v, "E = {e}");
        }
        assert!(matches!(plan(&case(3, 1026, 1, 1, 8)), Err(SubjectError::Unavailable(_))));
        assert!(matches!(plan(&case(3, 256, 3, 1, 8)), Err(SubjectError::Invalid(_))));
        let mut bad = case(3, 256, 8, 4, 8);
        bad.bias[7] = f32::NAN;
        assert!(matches!(plan(&bad), Err(SubjectError::Invalid(_))));
    }
}

/// A lane-by-lane model of router.cu's selection (select_topk, keep_groups, the
/// j-major emit order), checked against a direct reading of
/// docs/ops/router.md#selection-order on values full of ties, NaNs, signed
/// zeros and overflowing group sums. It checks the algorithm (the candidate
/// superset, the slot order, the threshold descent, the P-lane top-2 split and
/// its rotation, the key inverse in the group score), not the CUDA text:
/// conformance on the GPU checks that.
#[cfg(test)]
mod warp_model {
    use super::GROUP_SHIFT;
    use std::cmp::Ordering;

    const W: usize = 32;

    fn topk_key(x: f32) -> u32 {
        if x.is_nan() {
            return u32::MAX;
        }
        let mut b = x.to_bits();
        if b == 0x8000_0000 {
            b = 0;
        }
        if b & 0x8000_0000 != 0 {
            !b
        } else {
            b | 0x8000_0000
        }
    }

    fn key_value(k: u32) -> f32 {
        f32::from_bits(if k & 0x8000_0000 != 0 { k & 0x7fff_ffff } else { !k })
    }

    #[derive(Debug, PartialEq, Clone, Copy)]
    enum Path {
        Candidates,
        Threshold,
    }

    /// select_topk<N>: key[lane][j] is element lane + 32 j; returns each
    /// lane's chosen mask.
    fn select_topk(key: &[Vec<u32>], k: usize) -> (Vec<u32>, Path) {
        let n = key[0].len();
        if k <= W {
            let mut lm: Vec<u32> = key.iter().map(|r| r.iter().copied().max().unwrap()).collect();
            let mut tau = 0;
            for _ in 0..k {
                tau = *lm.iter().max().unwrap();
                let first = lm.iter().position(|&x| x == tau).unwrap();
                lm[first] = 0;
            }
            let lo = tau.max(1);
            let mut slots = Vec::new(); // (lane, j, key), j-major
            for j in 0..n {
                for (lane, row) in key.iter().enumerate() {
                    if row[j] >= lo {
                        slots.push((lane, j, row[j]));
                    }
                }
            }
            if slots.len() <= W {
                let mut chosen = vec![0u32; W];
                for (i, &(lane, j, ki)) in slots.iter().enumerate() {
                    let rank =
                        slots.iter().enumerate().filter(|&(m, &(_, _, km))| km > ki || (km == ki && m < i)).count();
                    if rank < k {
                        chosen[lane] |= 1 << j;
                    }
                }
                return (chosen, Path::Candidates);
            }
        }
        let all = || key.iter().flat_map(|r| r.iter().copied());
        let mut kth = 0u32;
        for bit in (0..32).rev() {
            let probe = kth | (1u32 << bit);
            if all().filter(|&x| x >= probe).count() >= k {
                kth = probe;
            }
        }
        let need = k - all().filter(|&x| x > kth).count();
        let mut chosen = vec![0u32; W];
        let mut before = 0;
        for j in 0..n {
            for (lane, row) in key.iter().enumerate() {
                let tie = row[j] == kth;
                if row[j] > kth || (tie && before < need) {
                    chosen[lane] |= 1 << j;
                }
                before += tie as usize;
            }
        }
        (chosen, Path::Threshold)
    }

    fn top2_push((k1, k2): (u32, u32), x: u32) -> (u32, u32) {
        (k1.max(x), k2.max(k1.min(x)))
    }

    fn top2_merge((a1, a2): (u32, u32), (b1, b2): (u32, u32)) -> (u32, u32) {
        (a1.max(b1), a1.min(b1).max(a2.max(b2)))
    }

    /// keep_groups: kept flag of every group, from the keys by expert.
    fn keep_groups(keys: &[u32], g: usize, l: usize) -> Vec<bool> {
        let gs = keys.len() / g;
        let lanes = if g <= W { W / g.next_power_of_two() } else { 1 };
        let slots = W / lanes;
        let gn = if g <= W { 1 } else { g.div_ceil(W) };
        let mut gk = vec![vec![0u32; gn]; W];
        #[allow(clippy::needless_range_loop)] // gj is the kernel's register index, as in the CUDA loop
        for gj in 0..gn {
            let mut part = vec![(0u32, 0u32); W];
            for (lane, p2) in part.iter_mut().enumerate() {
                let (slot, p) = (lane / lanes, lane % lanes);
                let rot = (lanes * slot) % gs;
                let grp = slot + slots * gj;
                if grp < g {
                    let mut i = p;
                    while i < gs {
                        let o = if i + rot >= gs { i + rot - gs } else { i + rot };
                        *p2 = top2_push(*p2, keys[grp * gs + o]);
                        i += lanes;
                    }
                }
            }
            let mut o = lanes / 2;
            while o > 0 {
                let prev = part.clone();
                for lane in 0..W {
                    part[lane] = top2_merge(prev[lane], prev[lane ^ o]);
                }
                o /= 2;
            }
            for lane in 0..W {
                let grp = lane / lanes + slots * gj;
                let (k1, k2) = part[lane];
                gk[lane][gj] = if grp < g { topk_key(key_value(k1) + key_value(k2)) } else { 0 };
            }
        }
        if lanes > 1 {
            let prev: Vec<u32> = gk.iter().map(|r| r[0]).collect();
            for lane in 0..W {
                gk[lane][0] = if lane < g { prev[(lane * lanes) & (W - 1)] } else { 0 };
            }
        }
        let (kept, _) = select_topk(&gk, l);
        (0..g).map(|grp| kept[grp % W] >> (grp / W) & 1 == 1).collect()
    }

    /// The kernel's choice of experts, ascending (the order ids are emitted in).
    fn model(u: &[f32], g: usize, l: usize, k: usize) -> (Vec<usize>, Path) {
        let e = u.len();
        let v = e.div_ceil(W).next_power_of_two();
        let mut keys: Vec<u32> = u.iter().map(|&x| topk_key(x)).collect();
        if l < g {
            let kept = keep_groups(&keys, g, l);
            let gs = (e / g) as u32;
            let gmul = (1u32 << GROUP_SHIFT).div_ceil(gs);
            for (i, key) in keys.iter_mut().enumerate() {
                if !kept[((i as u32 * gmul) >> GROUP_SHIFT) as usize] {
                    *key = 0;
                }
            }
        }
        let lanes: Vec<Vec<u32>> =
            (0..W).map(|lane| (0..v).map(|j| keys.get(lane + W * j).copied().unwrap_or(0)).collect()).collect();
        let (chosen, path) = select_topk(&lanes, k);
        let mut ids = Vec::new();
        for j in 0..v {
            for (lane, c) in chosen.iter().enumerate() {
                if c >> j & 1 == 1 {
                    ids.push(lane + W * j);
                }
            }
        }
        (ids, path)
    }

    /// The selection order of docs/ops/router.md#selection-order: larger first,
    /// NaN above every number, equal values (and NaNs, and +-0) by lower index.
    fn before(x: f32, i: usize, y: f32, j: usize) -> Ordering {
        let by_value = match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => y.partial_cmp(&x).unwrap(),
        };
        by_value.then(i.cmp(&j))
    }

    fn best(values: &[(f32, usize)], n: usize) -> Vec<(f32, usize)> {
        let mut v = values.to_vec();
        v.sort_by(|a, b| before(a.0, a.1, b.0, b.1));
        v.truncate(n);
        v
    }

    fn reference(u: &[f32], g: usize, l: usize, k: usize) -> Vec<usize> {
        let gs = u.len() / g;
        let scores: Vec<(f32, usize)> = (0..g)
            .map(|gi| {
                let members: Vec<(f32, usize)> = (gi * gs..(gi + 1) * gs).map(|i| (u[i], i)).collect();
                let top = best(&members, 2);
                (top[0].0 + top[1].0, gi)
            })
            .collect();
        let kept: Vec<usize> = best(&scores, l).into_iter().map(|(_, gi)| gi).collect();
        let eligible: Vec<(f32, usize)> =
            (0..u.len()).filter(|i| kept.contains(&(i / gs))).map(|i| (u[i], i)).collect();
        let mut ids: Vec<usize> = best(&eligible, k).into_iter().map(|(_, i)| i).collect();
        ids.sort();
        ids
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn value(rng: &mut Rng, pool: usize) -> f32 {
        const SPECIAL: [f32; 12] = [f32::NAN, 0.0, -0.0, 1.0, 0.5, -0.5, 2.0, f32::MAX, -f32::MAX, 1e-45, -1e-45, 0.75];
        match rng.below(3) {
            0 => SPECIAL[rng.below(SPECIAL.len())],
            1 => [0.25f32, 0.5, 1.0, -1.0][rng.below(pool.min(4))],
            _ => f32::from_bits(0x3f00_0000 + rng.below(4) as u32) * if rng.below(2) == 0 { 1.0 } else { -1.0 },
        }
    }

    /// fwd_grouped32 (group size 32, L <= G, k <= 2L): the kernel's choice of
    /// experts, ascending, or `None` where it leaves the token to the
    /// general path (more than 32 candidates).
    fn grouped32(u: &[f32], g: usize, l: usize, k: usize) -> Option<Vec<usize>> {
        assert!(u.len() == W * g && k <= 2 * l && l <= g);
        let keys: Vec<u32> = u.iter().map(|&x| topk_key(x)).collect();
        let col = |j: usize| &keys[W * j..W * (j + 1)];
        // Group j's m1 and m2 by two max reductions and a ballot.
        let pairs: Vec<(u32, u32)> = (0..g)
            .map(|j| {
                let m1 = *col(j).iter().max().unwrap();
                let holders = col(j).iter().filter(|&&x| x == m1).count();
                let below = col(j).iter().map(|&x| if x == m1 { 0 } else { x }).max().unwrap();
                (m1, if holders > 1 { m1 } else { below })
            })
            .collect();
        let kept: Vec<bool> = if l < g {
            let mut sk: Vec<u32> = pairs.iter().map(|&(a, b)| topk_key(key_value(a) + key_value(b))).collect();
            for _ in 0..l {
                let m = *sk.iter().max().unwrap();
                let first = sk.iter().position(|&x| x == m).unwrap();
                sk[first] = 0;
            }
            sk.iter().map(|&x| x == 0).collect()
        } else {
            vec![true; g]
        };
        let lo = (0..g).filter(|&j| kept[j]).map(|j| pairs[j].1).min().unwrap();
        // Candidates in slot order (j-major), as (key, expert).
        let mut slots = Vec::new();
        for j in (0..g).filter(|&j| kept[j]) {
            for (lane, &x) in col(j).iter().enumerate() {
                if x >= lo {
                    slots.push((x, lane + W * j));
                }
            }
        }
        let c = slots.len();
        if c > W {
            return None;
        }
        assert!(c >= k);
        let mut inside = vec![true; c];
        if c - k <= k {
            for _ in k..c {
                let m = (0..c).filter(|&i| inside[i]).map(|i| slots[i].0).min().unwrap();
                let last = (0..c).rev().find(|&i| inside[i] && slots[i].0 == m).unwrap();
                inside[last] = false;
            }
        } else {
            let mut won = vec![false; c];
            for _ in 0..k {
                let m = (0..c).filter(|&i| !won[i]).map(|i| slots[i].0).max().unwrap();
                let first = (0..c).find(|&i| !won[i] && slots[i].0 == m).unwrap();
                won[first] = true;
            }
            inside = won;
        }
        Some((0..c).filter(|&i| inside[i]).map(|i| slots[i].1).collect())
    }

    #[test]
    fn the_grouped32_selection_matches_the_spec_order() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let shapes =
            [(8, 4, 8), (2, 1, 2), (2, 2, 4), (4, 2, 4), (32, 16, 32), (3, 2, 4), (8, 8, 16), (16, 3, 6), (8, 4, 1)];
        let mut fallbacks = 0;
        let mut taken = 0;
        for &(g, l, k) in &shapes {
            for round in 0..200 {
                let pool = 1 + round % 7;
                let u: Vec<f32> = (0..W * g)
                    .map(|_| if round % 7 == 6 { rng.below(1 << 20) as f32 * 1e-6 } else { value(&mut rng, pool) })
                    .collect();
                match grouped32(&u, g, l, k) {
                    Some(ids) => {
                        taken += 1;
                        assert_eq!(ids, reference(&u, g, l, k), "G={g} L={l} k={k} u={u:?}");
                    }
                    None => fallbacks += 1,
                }
            }
        }
        // Both the fast path and its fallback (too many equal keys) occur.
        assert!(taken > 0 && fallbacks > 0, "{taken} {fallbacks}");
    }

    #[test]
    fn the_warp_selection_matches_the_spec_order() {
        let mut rng = Rng(0x5eed_1234_abcd);
        let shapes = [
            (256, 8, 4, 8),
            (64, 1, 1, 6),
            (160, 8, 3, 6),
            (2, 1, 1, 1),
            (2, 1, 1, 2),
            (6, 3, 2, 4),
            (129, 43, 5, 7),
            (129, 3, 1, 43),
            (96, 48, 20, 33),
            (1024, 512, 17, 34),
            (1024, 8, 8, 1024),
            (512, 16, 16, 200),
            (40, 20, 1, 2),
            (256, 32, 31, 32),
            (128, 2, 1, 64),
        ];
        let mut paths = [0usize; 2];
        for &(e, g, l, k) in &shapes {
            for round in 0..60 {
                // Rounds with few distinct values force ties everywhere.
                let pool = 1 + round % 5;
                let u: Vec<f32> = (0..e).map(|_| value(&mut rng, pool)).collect();
                let (got, path) = model(&u, g, l, k);
                paths[(path == Path::Threshold) as usize] += 1;
                assert_eq!(got, reference(&u, g, l, k), "E={e} G={g} L={l} k={k} u={u:?}");
            }
        }
        // Both paths of select_topk were exercised.
        assert!(paths[0] > 0 && paths[1] > 0, "{paths:?}");
    }
}
