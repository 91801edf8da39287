//! cuBLAS as a subject of `shared_expert` (docs/ops/shared_expert.md#profiles:
//! cuBLAS through cudarc, as PyTorch runs it, claiming no profile), four ways
//! ([`Variant`]): `--subject cublas` and `--subject cublas-fp32-reduction`,
//! PyTorch's two math modes, and `--subject cublaslt-pinned` /
//! `cublaslt-pinned-aligned`, cuBLASLt with one algorithm without split-K
//! pinned for every T ([`super::cublaslt`]).
//!
//! The four GEMMs of the first two are `cublasGemmEx` calls as PyTorch's bf16
//! `matmul` makes them: bf16 operands, `CUBLAS_COMPUTE_32F`,
//! `CUBLAS_GEMM_DEFAULT`, cuBLAS's own choice of algorithm for each shape, and
//! the math mode of the variant. y and dh come out as bf16 (PyTorch's output
//! type, rounded by the library); z and dX as f32, since the op's z is the
//! unrounded f32 product and dX is returned unrounded. Between the GEMMs,
//! `kernels/shared_expert_cublas.cu` computes the op's SwiGLU epilogues
//! elementwise, so a subject differs from the profile oracle only in what the
//! library does.
//!
//! They claim no profile: judged by accuracy within the bound of every
//! summation order (`oracles::any_order`), by determinism, offset/stride and
//! batch invariance, which cuBLAS breaks (its kernel, tile shape and split-K
//! follow the shape and the operands' alignment:
//! reports/shared-expert-2026-12-01). They are never among the default
//! subjects: a vendor library that is known to break a property is run by
//! name.
//!
//! Fail closed as the strict subject: no libcublas, no GPU, no NVRTC is an
//! explicit reason; a case past cuBLAS's int sizes is unavailable.

use super::cublaslt::{LtGemm, PinnedLt};
use super::device::{dev_err, device, Device};
use super::nvrtc::guarded;
use super::shared_expert::{bf16_bits, bf16_value, plan};
use super::{KernelId, GAP_POISON};
use crate::subject::{Subject, SubjectError, SubjectKind};
use cudarc::cublas::{result as blas, sys as blas_sys, CudaBlas};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use oracles::case::shared_expert::{SharedExpertBackward, SharedExpertCase, SharedExpertForward};
use oracles::op::shared_expert::SharedExpert;
use oracles::profile::shared_expert::SharedExpertProfile;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// The math modes PyTorch runs cuBLAS in, each a subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `cublas`: the handle's default math mode, PyTorch's default
    /// (`torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction`
    /// is True): cuBLAS may sum split-K partials of a bf16-output GEMM in
    /// reduced precision.
    Default,
    /// `cublas-fp32-reduction`: `CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION`,
    /// what PyTorch sets when that flag is False.
    Fp32Reduction,
    /// `cublaslt-pinned`: cuBLASLt, one algorithm without split-K per GEMM,
    /// for operands of any alignment, chosen once at T = 2048 and used for
    /// every T ([`super::cublaslt`]).
    PinnedLt,
    /// `cublaslt-pinned-aligned`: the same, with algorithms of their own
    /// (Hopper's fast ones) for 16-byte aligned operands.
    PinnedLtAligned,
}

impl Variant {
    pub const ALL: [Variant; 4] =
        [Variant::Default, Variant::Fp32Reduction, Variant::PinnedLt, Variant::PinnedLtAligned];

    /// The subject's name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Default => "cublas",
            Variant::Fp32Reduction => "cublas-fp32-reduction",
            Variant::PinnedLt => "cublaslt-pinned",
            Variant::PinnedLtAligned => "cublaslt-pinned-aligned",
        }
    }
}

/// The subjects' names, in [`Variant::ALL`]'s order.
pub const NAMES: [&str; 4] = ["cublas", "cublas-fp32-reduction", "cublaslt-pinned", "cublaslt-pinned-aligned"];

/// What runs the GEMMs.
enum Engine {
    Blas(CudaBlas),
    Lt(PinnedLt),
}

/// Threads per block of the epilogue kernels, and their most blocks (they
/// stride over the rest).
const THREADS: u32 = 256;
const MAX_BLOCKS: usize = 132 * 16;

/// The cuBLAS subject. Cheap to clone; calls are serialized (one handle).
#[derive(Clone)]
pub struct CublasSharedExpert {
    dev: Arc<Device>,
    engine: Arc<Mutex<Engine>>,
    swiglu_fwd: CudaFunction,
    swiglu_bwd: CudaFunction,
    pub variant: Variant,
    /// cuBLAS's (or cuBLASLt's) version, as its GetVersion gives it.
    pub version: usize,
}

/// Opens the GPU (shared with every subject), a cuBLAS handle in the
/// variant's math mode and the epilogue kernels, once per process and
/// variant. `Err` is the reason it cannot run here.
pub fn probe(variant: Variant) -> Result<CublasSharedExpert, String> {
    static SUBJECTS: [OnceLock<Result<CublasSharedExpert, String>>; 4] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    SUBJECTS[variant as usize].get_or_init(|| load(variant)).clone()
}

fn load(variant: Variant) -> Result<CublasSharedExpert, String> {
    let dev = device()?;
    let (engine, version) = match variant {
        Variant::PinnedLt | Variant::PinnedLtAligned => {
            let lt = PinnedLt::new(dev.stream.clone(), variant == Variant::PinnedLtAligned)?;
            // SAFETY: the library is loaded (PinnedLt::new checked it).
            (Engine::Lt(lt), guarded(|| unsafe { cudarc::cublaslt::sys::cublasLtGetVersion() })?)
        }
        Variant::Default | Variant::Fp32Reduction => {
            // SAFETY: only tries to dlopen the library's names; no symbol is called.
            if !unsafe { blas_sys::is_culib_present() } {
                return Err("cuBLAS not found: libcublas.so.13 is not on the library path \
                            (add CUDA 13's lib folder, or PyTorch's nvidia/cu13/lib, to LD_LIBRARY_PATH)"
                    .into());
            }
            let handle = guarded(|| CudaBlas::new(dev.stream.clone()))?.map_err(|e| format!("cublasCreate: {e}"))?;
            let mut version = 0;
            // SAFETY: the handle is live and `version` is valid for a write.
            let rc = guarded(|| unsafe { blas_sys::cublasGetVersion_v2(*handle.handle(), &mut version) })?;
            rc.result().map_err(|e| format!("cublasGetVersion: {e}"))?;
            let mode = if variant == Variant::Default {
                blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH
            } else {
                blas_sys::cublasMath_t::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
            };
            // SAFETY: the handle is live; the mode is one of cuBLAS's values.
            let rc = guarded(|| unsafe { blas_sys::cublasSetMathMode(*handle.handle(), mode) })?;
            rc.result().map_err(|e| format!("cublasSetMathMode: {e}"))?;
            (Engine::Blas(handle), version.max(0) as usize)
        }
    };
    let function = |n: &str| dev.function(KernelId::SharedExpertCublas, n);
    Ok(CublasSharedExpert {
        swiglu_fwd: function("se_swiglu_fwd")?,
        swiglu_bwd: function("se_swiglu_bwd")?,
        dev,
        engine: Arc::new(Mutex::new(engine)),
        variant,
        version,
    })
}

/// A cuBLAS failure as a subject's.
fn blas_err(what: &'static str) -> impl Fn(blas::CublasError) -> SubjectError {
    move |e| SubjectError::Device(format!("cublasGemmEx {what}: {e}"))
}

/// One `cublasGemmEx` in cuBLAS's column-major terms: C (m x n, leading
/// dimension ldc) = op(A) op(B), A and B bf16, C bf16 (`c_bf16`) or f32.
struct Gemm {
    what: &'static str,
    trans_a: bool,
    m: usize,
    n: usize,
    k: usize,
    a: u64,
    lda: usize,
    b: u64,
    ldb: usize,
    c: u64,
    c_bf16: bool,
    ldc: usize,
}

impl Gemm {
    /// Enqueues it on the engine's stream (the device's).
    ///
    /// # Safety
    /// a, b and c must be live device allocations holding op(A) (m x k, as
    /// stored with lda), B (k x n with ldb) and C (m x n with ldc), of the
    /// element types above, for as long as the stream runs the call.
    unsafe fn enqueue(&self, engine: &mut Engine) -> Result<(), SubjectError> {
        let handle = match engine {
            Engine::Blas(h) => h,
            Engine::Lt(lt) => {
                let g = LtGemm {
                    trans_a: self.trans_a,
                    m: self.m as u64,
                    n: self.n as u64,
                    k: self.k as u64,
                    lda: self.lda as i64,
                    ldb: self.ldb as i64,
                    ldd: self.ldc as i64,
                    d_bf16: self.c_bf16,
                };
                // SAFETY: the caller's contract, as for cuBLAS.
                return unsafe { lt.matmul(&g, self.a, self.b, self.c) };
            }
        };
        let int = |x: usize, what: &str| {
            i32::try_from(x)
                .map_err(|_| SubjectError::Unavailable(format!("{}: {what} = {x} exceeds cuBLAS's int", self.what)))
        };
        let (m, n, k) = (int(self.m, "m")?, int(self.n, "n")?, int(self.k, "k")?);
        let (lda, ldb, ldc) = (int(self.lda, "lda")?, int(self.ldb, "ldb")?, int(self.ldc, "ldc")?);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let bf16 = blas_sys::cudaDataType::CUDA_R_16BF;
        let c_type = if self.c_bf16 { bf16 } else { blas_sys::cudaDataType::CUDA_R_32F };
        // SAFETY: the caller's contract (above); alpha and beta are host f32s
        // (the handle's default pointer mode) that outlive the call.
        guarded(|| unsafe {
            blas::gemm_ex(
                *handle.handle(),
                op(self.trans_a),
                op(false),
                m,
                n,
                k,
                &alpha as *const f32 as *const c_void,
                self.a as *const c_void,
                bf16,
                lda,
                self.b as *const c_void,
                bf16,
                ldb,
                &beta as *const f32 as *const c_void,
                self.c as *mut c_void,
                c_type,
                ldc,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        })
        .map_err(SubjectError::Device)?
        .map_err(blas_err(self.what))
    }
}

fn launch_cfg(elements: usize) -> LaunchConfig {
    let blocks = elements.div_ceil(THREADS as usize).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// A case on the GPU: inputs (bf16 bits at their layout), intermediates
/// and outputs; launches and read-backs are separate, so that the bench
/// times the GEMMs and epilogues alone.
pub struct DeviceCublasCase {
    subject: CublasSharedExpert,
    t: usize,
    h: usize,
    f: usize,
    off: usize,
    ld: usize,
    x: CudaSlice<u16>,
    dy: CudaSlice<u16>,
    w1: CudaSlice<u16>,
    w2: CudaSlice<u16>,
    /// T x 2F f32: z = x w1^T, written by both passes.
    z: CudaSlice<f32>,
    hid: CudaSlice<u16>,
    y: CudaSlice<u16>,
    dh: CudaSlice<u16>,
    dz: CudaSlice<u16>,
    dx: CudaSlice<f32>,
}

impl CublasSharedExpert {
    /// The cuBLASLt algorithms pinned so far, one line each (empty for the
    /// cuBLAS variants).
    pub fn pins(&self) -> Vec<String> {
        let engine = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        let Engine::Lt(lt) = &*engine else { return Vec::new() };
        lt.pins()
            .into_iter()
            .map(|(r, p)| {
                format!(
                    "{} m {} k {} {} {}-byte: algorithm {} tile {} split-K {}",
                    if r.trans_a { "A^T B" } else { "A B" },
                    r.m,
                    r.k,
                    if r.d_bf16 { "bf16" } else { "f32" },
                    r.align,
                    p.id,
                    p.tile,
                    p.splitk
                )
            })
            .collect()
    }

    /// The device this subject runs on (timing).
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Validates `case` and uploads it: x and dy as their storage (the
    /// real offset and row stride, a NaN in every gap), the weights dense.
    pub fn upload(&self, case: &SharedExpertCase) -> Result<DeviceCublasCase, SubjectError> {
        // The strict subject's plan: validation, and every size and count
        // within i32 (cuBLAS takes int sizes; the epilogues index in 64 bits).
        let p = plan(case)?;
        let (t, h, f) = (p.t, p.h, p.f);
        let s = &self.dev.stream;
        let up = dev_err("upload");
        let bits = |v: &[f32]| v.iter().map(|&x| bf16_bits(x)).collect::<Vec<u16>>();
        Ok(DeviceCublasCase {
            subject: self.clone(),
            t,
            h,
            f,
            off: case.layout.offset,
            ld: case.layout.row_stride,
            x: s.clone_htod(&bits(&case.x_storage(GAP_POISON))).map_err(&up)?,
            dy: s.clone_htod(&bits(&case.dy_storage(GAP_POISON))).map_err(&up)?,
            w1: s.clone_htod(&bits(&case.w1)).map_err(&up)?,
            w2: s.clone_htod(&bits(&case.w2)).map_err(&up)?,
            z: s.alloc_zeros(t * 2 * f).map_err(&up)?,
            hid: s.alloc_zeros(t * f).map_err(&up)?,
            y: s.alloc_zeros(t * h).map_err(&up)?,
            dh: s.alloc_zeros(t * f).map_err(&up)?,
            dz: s.alloc_zeros(t * 2 * f).map_err(&up)?,
            dx: s.alloc_zeros(t * h).map_err(&up)?,
        })
    }
}

impl DeviceCublasCase {
    /// z^T (2F x T) = w1 (stored H x 2F: op T) . x^T (H x T, ld = stride).
    fn gemm_z(&mut self, engine: &mut Engine) -> Result<(), SubjectError> {
        let s = self.subject.dev.stream.clone();
        let (pa, _ga) = self.w1.device_ptr(&s);
        let (pb, _gb) = self.x.device_ptr(&s);
        let (pc, _gc) = self.z.device_ptr_mut(&s);
        let g = Gemm {
            what: "z = x w1^T",
            trans_a: true,
            m: 2 * self.f,
            n: self.t,
            k: self.h,
            a: pa,
            lda: self.h,
            b: pb + 2 * self.off as u64,
            ldb: self.ld,
            c: pc,
            c_bf16: false,
            ldc: 2 * self.f,
        };
        // SAFETY: w1 holds 2F x H bf16 (H x 2F column-major, ld H); x's
        // storage holds offset + (T-1) stride + H elements, so column t of
        // x^T starts at offset + t stride and has H; z holds T x 2F f32. The
        // guards keep the buffers ordered on the stream.
        unsafe { g.enqueue(engine) }
    }

    /// Enqueues the forward: z, h = SwiGLU(z) (bf16), y = bf16(h w2^T).
    pub fn launch_forward(&mut self) -> Result<(), SubjectError> {
        let subject = self.subject.clone();
        let mut engine = subject.engine.lock().unwrap_or_else(|e| e.into_inner());
        self.gemm_z(&mut engine)?;
        let s = subject.dev.stream.clone();
        let (ti, fi) = (self.t as i32, self.f as i32); // within i32 (plan)
        let mut b = s.launch_builder(&subject.swiglu_fwd);
        b.arg(&self.z).arg(&ti).arg(&fi).arg(&mut self.hid);
        // SAFETY: se_swiglu_fwd(z, T, F, h): z T x 2F f32, h T x F bf16;
        // grid-stride over T F < 2^31 elements; static shared memory.
        unsafe { b.launch(launch_cfg(self.t * self.f)) }.map_err(dev_err("se_swiglu_fwd launch"))?;
        let (pa, _ga) = self.w2.device_ptr(&s);
        let (pb, _gb) = self.hid.device_ptr(&s);
        let (pc, _gc) = self.y.device_ptr_mut(&s);
        let g = Gemm {
            what: "y = h w2^T",
            trans_a: true,
            m: self.h,
            n: self.t,
            k: self.f,
            a: pa,
            lda: self.f,
            b: pb,
            ldb: self.f,
            c: pc,
            c_bf16: true,
            ldc: self.h,
        };
        // SAFETY: w2 holds H x F (F x H column-major, ld F), h T x F (F x T,
        // ld F), y T x H bf16 (H x T, ld H).
        unsafe { g.enqueue(&mut engine) }
    }

    /// Enqueues the backward (no forward needed: z is recomputed): dh =
    /// bf16(dy w2), z, dz = SwiGLU'(z, dh) (bf16), dX = dz w1 (f32).
    pub fn launch_backward(&mut self) -> Result<(), SubjectError> {
        let subject = self.subject.clone();
        let mut engine = subject.engine.lock().unwrap_or_else(|e| e.into_inner());
        let s = subject.dev.stream.clone();
        {
            let (pa, _ga) = self.w2.device_ptr(&s);
            let (pb, _gb) = self.dy.device_ptr(&s);
            let (pc, _gc) = self.dh.device_ptr_mut(&s);
            let g = Gemm {
                what: "dh = dy w2",
                trans_a: false,
                m: self.f,
                n: self.t,
                k: self.h,
                a: pa,
                lda: self.f,
                b: pb + 2 * self.off as u64,
                ldb: self.ld,
                c: pc,
                c_bf16: true,
                ldc: self.f,
            };
            // SAFETY: w2 holds H x F (F x H column-major, ld F: op N); dy's
            // storage as x's; dh T x F bf16 (F x T, ld F).
            unsafe { g.enqueue(&mut engine) }?;
        }
        self.gemm_z(&mut engine)?;
        let (ti, fi) = (self.t as i32, self.f as i32); // within i32 (plan)
        let mut b = s.launch_builder(&subject.swiglu_bwd);
        b.arg(&self.z).arg(&self.dh).arg(&ti).arg(&fi).arg(&mut self.dz);
        // SAFETY: se_swiglu_bwd(z, dh, T, F, dz): z T x 2F f32, dh T x F
        // bf16, dz T x 2F bf16; grid-stride; static shared memory.
        unsafe { b.launch(launch_cfg(self.t * self.f)) }.map_err(dev_err("se_swiglu_bwd launch"))?;
        let (pa, _ga) = self.w1.device_ptr(&s);
        let (pb, _gb) = self.dz.device_ptr(&s);
        let (pc, _gc) = self.dx.device_ptr_mut(&s);
        let g = Gemm {
            what: "dX = dz w1",
            trans_a: false,
            m: self.h,
            n: self.t,
            k: 2 * self.f,
            a: pa,
            lda: self.h,
            b: pb,
            ldb: 2 * self.f,
            c: pc,
            c_bf16: false,
            ldc: self.h,
        };
        // SAFETY: w1 holds 2F x H (H x 2F column-major, ld H: op N), dz T x
        // 2F (2F x T, ld 2F), dx T x H f32 (H x T, ld H).
        unsafe { g.enqueue(&mut engine) }
    }

    /// Waits for the work enqueued and copies y back (bf16 values as f32).
    pub fn read_forward(&self) -> Result<Vec<f32>, SubjectError> {
        let dev = &self.subject.dev;
        dev.finish("cublas shared_expert forward")?;
        let y = dev.stream.clone_dtoh(&self.y).map_err(dev_err("read-back"))?;
        dev.finish("read-back")?;
        Ok(y.into_iter().map(bf16_value).collect())
    }

    /// Waits for the work enqueued and copies dX back.
    pub fn read_backward(&self) -> Result<Vec<f32>, SubjectError> {
        let dev = &self.subject.dev;
        dev.finish("cublas shared_expert backward")?;
        let dx = dev.stream.clone_dtoh(&self.dx).map_err(dev_err("read-back"))?;
        dev.finish("read-back")?;
        Ok(dx)
    }
}

impl Subject<SharedExpert> for CublasSharedExpert {
    fn name(&self) -> String {
        self.variant.name().into()
    }

    /// None: cuBLAS's summation order is its own (docs/ops/shared_expert.md#profiles).
    fn profile(&self) -> Option<SharedExpertProfile> {
        None
    }

    fn kind(&self) -> SubjectKind {
        SubjectKind::Device
    }

    fn lost(&self) -> Option<String> {
        super::device::lost_reason()
    }

    fn forward(&self, case: &SharedExpertCase) -> Result<SharedExpertForward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_forward()?;
        Ok(SharedExpertForward { y: dc.read_forward()? })
    }

    fn backward(&self, case: &SharedExpertCase) -> Result<SharedExpertBackward<f32>, SubjectError> {
        let mut dc = self.upload(case)?;
        dc.launch_backward()?;
        Ok(SharedExpertBackward { dx: dc.read_backward()? })
    }
}

#[cfg(test)]
mod tests {
    use super::KernelId;

    /// The block of `text` that starts at `signature` and ends at the next
    /// blank line.
    fn block<'a>(text: &'a str, signature: &str) -> &'a str {
        let start = text.find(signature).unwrap_or_else(|| panic!("{signature} not found"));
        let len = text[start..].find("\n\n").expect("a blank line after it");
        &text[start..start + len]
    }

    #[test]
    fn names_follow_the_variants() {
        let names: Vec<&str> = super::Variant::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names, super::NAMES);
        assert!(super::Variant::ALL.iter().enumerate().all(|(i, v)| *v as usize == i));
    }

    #[test]
    fn the_epilogues_round_and_take_the_sigmoid_as_the_strict_kernels_do() {
        // The tensor-core kernels' copies too: shared_expert_tc.cu's own,
        // swiglu.cuh's (shared_expert_wgmma.cu's).
        let strict = KernelId::SharedExpert.source().text;
        let swiglu = crate::subject::cuda::HEADERS.iter().find(|h| h.name == "swiglu.cuh").expect("swiglu.cuh").text;
        for (name, text) in [
            ("shared_expert_cublas.cu", KernelId::SharedExpertCublas.source().text),
            ("shared_expert_tc.cu", KernelId::SharedExpertTc.source().text),
            ("swiglu.cuh", swiglu),
        ] {
            for sig in [
                "__device__ __forceinline__ float bf16_value(",
                "__device__ __forceinline__ bf16_t bf16_rne(",
                "__device__ __forceinline__ float sigmoid(",
            ] {
                assert_eq!(block(strict, sig), block(text, sig), "{sig} differs between shared_expert.cu and {name}");
            }
        }
    }
}
