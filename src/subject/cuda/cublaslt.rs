//! bf16 GEMMs through cuBLASLt with one algorithm pinned for every T: the
//! engine of the `cublaslt-pinned` subject of `shared_expert`
//! ([`super::shared_expert_cublas`]). It answers the question
//! docs/ops/shared_expert.md leaves to cuBLAS: is a cuBLAS kernel
//! batch-invariant once the choice of kernel, tile and split-K no longer
//! depends on the batch?
//!
//! For each GEMM role (the same transposes, types, m and k, and the
//! operands' alignment class), the algorithm is chosen once, at a
//! reference batch ([`REFERENCE_N`] columns): among cuBLASLt's heuristic
//! candidates for operands of that alignment, the first without split-K
//! (`CUBLASLT_ALGO_CONFIG_SPLITK_NUM` <= 1). Every later call of that role,
//! whatever its n (the tokens), uses that algorithm, after
//! `cublasLtMatmulAlgoCheck` accepts it for the call's shape; a shape it
//! refuses is unavailable, never run with another algorithm.
//!
//! Alignment classes: with `aligned` false every operand is taken as 2-byte
//! aligned (any element offset), one class; with `aligned` true, operands
//! whose addresses and strides are multiples of 16 bytes form a second
//! class with its own, faster algorithms (Hopper's), so bits may then
//! differ between an aligned and a misaligned layout of the same values.
//! Measured on the H200 (reports/shared-expert-2026-12-01): the 2-byte
//! class pinned this way was batch-invariant on every case run, the
//! 16-byte class was not.

use super::nvrtc::guarded;
use crate::subject::SubjectError;
use cudarc::cublaslt::{result as lt, sys as lt_sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

/// The batch (GEMM n) the algorithms are chosen at.
pub const REFERENCE_N: u64 = 2048;
/// The workspace handed to cuBLASLt (NVIDIA's recommendation for Hopper).
const WORKSPACE: usize = 32 << 20;
/// Heuristic candidates asked for.
const CANDIDATES: usize = 32;

/// One GEMM in cuBLAS's column-major terms: D (m x n, ldd) = op(A) B, A and
/// B bf16 (A stored k x m with lda when `trans_a`, else m x k), D bf16 or
/// f32.
#[derive(Clone, Copy, Debug)]
pub struct LtGemm {
    pub trans_a: bool,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub lda: i64,
    pub ldb: i64,
    pub ldd: i64,
    pub d_bf16: bool,
}

/// The role of a GEMM: what its pinned algorithm is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Role {
    pub trans_a: bool,
    pub m: u64,
    pub k: u64,
    pub d_bf16: bool,
    /// The operands' alignment in bytes (16 or 2).
    pub align: u32,
}

/// The algorithm pinned for a role, and what it is (for reports).
#[derive(Clone, Copy, Debug)]
pub struct Pinned {
    algo: lt_sys::cublasLtMatmulAlgo_t,
    pub id: u32,
    pub tile: u32,
    pub splitk: u32,
}

/// A cuBLASLt handle, its workspace and the pinned algorithms. Not Sync:
/// the subject holds it under a mutex.
pub struct PinnedLt {
    /// Whether 16-byte aligned operands get their own algorithms.
    aligned: bool,
    handle: lt_sys::cublasLtHandle_t,
    stream: Arc<CudaStream>,
    workspace: CudaSlice<u8>,
    pinned: HashMap<Role, Pinned>,
}

// SAFETY: the handle is only used under the subject's mutex, one thread at
// a time; cuBLASLt handles may move between threads.
unsafe impl Send for PinnedLt {}

fn err(what: &str) -> impl Fn(lt::CublasError) -> SubjectError + '_ {
    move |e| SubjectError::Device(format!("{what}: {e}"))
}

/// Descriptors of one GEMM, destroyed on drop.
struct Descs {
    desc: lt_sys::cublasLtMatmulDesc_t,
    a: lt_sys::cublasLtMatrixLayout_t,
    b: lt_sys::cublasLtMatrixLayout_t,
    d: lt_sys::cublasLtMatrixLayout_t,
}

impl Drop for Descs {
    fn drop(&mut self) {
        // SAFETY: each was created once by `Descs::new` and is destroyed
        // once here; errors on destruction leave nothing to do.
        unsafe {
            let _ = lt::destroy_matrix_layout(self.a);
            let _ = lt::destroy_matrix_layout(self.b);
            let _ = lt::destroy_matrix_layout(self.d);
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

impl Descs {
    fn new(g: &LtGemm) -> Result<Descs, SubjectError> {
        let bf16 = lt_sys::cudaDataType::CUDA_R_16BF;
        let d_type = if g.d_bf16 { bf16 } else { lt_sys::cudaDataType::CUDA_R_32F };
        let desc =
            lt::create_matmul_desc(lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, lt_sys::cudaDataType::CUDA_R_32F)
                .map_err(err("cublasLtMatmulDescCreate"))?;
        let (a_rows, a_cols) = if g.trans_a { (g.k, g.m) } else { (g.m, g.k) };
        let layout = |t, r, c, ld| lt::create_matrix_layout(t, r, c, ld).map_err(err("cublasLtMatrixLayoutCreate"));
        // Built one by one so that a failure drops (destroys) the earlier ones.
        let mut d = Descs { desc, a: std::ptr::null_mut(), b: std::ptr::null_mut(), d: std::ptr::null_mut() };
        d.a = layout(bf16, a_rows, a_cols, g.lda)?;
        d.b = layout(bf16, g.k, g.n, g.ldb)?;
        d.d = layout(d_type, g.m, g.n, g.ldd)?;
        let op = if g.trans_a {
            cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T
        } else {
            cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N
        };
        // SAFETY: the descriptor is live; the buffer is the attribute's type
        // (cublasOperation_t, a 32-bit enum) and size.
        unsafe {
            lt::set_matmul_desc_attribute(
                d.desc,
                lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                &op as *const _ as *const c_void,
                std::mem::size_of_val(&op),
            )
        }
        .map_err(err("cublasLtMatmulDescSetAttribute(TRANSA)"))?;
        Ok(d)
    }
}

/// An attribute of an algorithm's configuration (a u32 one).
fn config(algo: &lt_sys::cublasLtMatmulAlgo_t, attr: lt_sys::cublasLtMatmulAlgoConfigAttributes_t) -> u32 {
    let mut v: u32 = 0;
    let mut written = 0usize;
    // SAFETY: `algo` is an initialized algorithm; the buffer is 4 bytes, the
    // size of the u32/int attributes read here.
    let rc = unsafe {
        lt_sys::cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &mut v as *mut u32 as *mut c_void, 4, &mut written)
    };
    if rc.result().is_ok() {
        v
    } else {
        u32::MAX
    }
}

impl PinnedLt {
    /// A handle on `stream` and its workspace. `Err`: why cuBLASLt cannot
    /// run here.
    pub fn new(stream: Arc<CudaStream>, aligned: bool) -> Result<PinnedLt, String> {
        // SAFETY: only tries to dlopen the library's names.
        if !unsafe { lt_sys::is_culib_present() } {
            return Err("cuBLASLt not found: libcublasLt.so.13 is not on the library path".into());
        }
        let handle = guarded(lt::create_handle)?.map_err(|e| format!("cublasLtCreate: {e}"))?;
        // SAFETY: a byte buffer cuBLASLt writes before it reads.
        let workspace = match unsafe { stream.alloc::<u8>(WORKSPACE) } {
            Ok(w) => w,
            Err(e) => {
                // SAFETY: created above, destroyed once.
                let _ = unsafe { lt::destroy_handle(handle) };
                return Err(format!("cuBLASLt workspace: {e}"));
            }
        };
        Ok(PinnedLt { aligned, handle, stream, workspace, pinned: HashMap::new() })
    }

    /// What was pinned so far, sorted by role.
    pub fn pins(&self) -> Vec<(Role, Pinned)> {
        let mut v: Vec<_> = self.pinned.iter().map(|(r, p)| (*r, *p)).collect();
        v.sort_by_key(|(r, _)| *r);
        v
    }

    /// The algorithm pinned for `g`'s role at alignment `align`, chosen on
    /// first use.
    fn pinned(&mut self, g: &LtGemm, align: u32) -> Result<Pinned, SubjectError> {
        let role = Role { trans_a: g.trans_a, m: g.m, k: g.k, d_bf16: g.d_bf16, align };
        if let Some(p) = self.pinned.get(&role) {
            return Ok(*p);
        }
        // The reference shape: n = REFERENCE_N, dense B and D.
        let r = LtGemm { n: REFERENCE_N, ldb: g.k as i64, ldd: g.m as i64, ..*g };
        let descs = Descs::new(&r)?;
        let pref = lt::create_matmul_pref().map_err(err("cublasLtMatmulPreferenceCreate"))?;
        struct Pref(lt_sys::cublasLtMatmulPreference_t);
        impl Drop for Pref {
            fn drop(&mut self) {
                // SAFETY: created once above, destroyed once.
                let _ = unsafe { lt::destroy_matmul_pref(self.0) };
            }
        }
        let pref = Pref(pref);
        let set = |attr, v: u64| {
            // SAFETY: live preference; MAX_WORKSPACE_BYTES is a u64, the
            // alignments are u32 (the low half of `v`, little-endian).
            let (ptr, size) = match attr {
                lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES => {
                    (&v as *const u64 as *const c_void, 8)
                }
                _ => (&v as *const u64 as *const c_void, 4),
            };
            unsafe { lt::set_matmul_pref_attribute(pref.0, attr, ptr, size) }
                .map_err(err("cublasLtMatmulPreferenceSetAttribute"))
        };
        use lt_sys::cublasLtMatmulPreferenceAttributes_t as P;
        set(P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, WORKSPACE as u64)?;
        for a in [
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
            P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
        ] {
            set(a, align as u64)?;
        }
        // SAFETY: zeroed plain-data results (cuBLASLt writes `count` of them).
        let mut results: Vec<lt_sys::cublasLtMatmulHeuristicResult_t> = vec![unsafe { std::mem::zeroed() }; CANDIDATES];
        let mut count = 0i32;
        // SAFETY: live handle, descriptors and preference; `results` holds
        // CANDIDATES entries.
        unsafe {
            lt_sys::cublasLtMatmulAlgoGetHeuristic(
                self.handle,
                descs.desc,
                descs.a,
                descs.b,
                descs.d,
                descs.d,
                pref.0,
                CANDIDATES as i32,
                results.as_mut_ptr(),
                &mut count,
            )
        }
        .result()
        .map_err(err("cublasLtMatmulAlgoGetHeuristic"))?;
        use lt_sys::cublasLtMatmulAlgoConfigAttributes_t as C;
        let chosen = results[..count.clamp(0, CANDIDATES as i32) as usize]
            .iter()
            .filter(|h| h.state.result().is_ok())
            .map(|h| Pinned {
                algo: h.algo,
                id: config(&h.algo, C::CUBLASLT_ALGO_CONFIG_ID),
                tile: config(&h.algo, C::CUBLASLT_ALGO_CONFIG_TILE_ID),
                splitk: config(&h.algo, C::CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
            })
            .find(|p| p.splitk <= 1)
            .ok_or_else(|| {
                SubjectError::Unavailable(format!(
                    "cuBLASLt offers no algorithm without split-K for {role:?} ({count} candidates)"
                ))
            })?;
        self.pinned.insert(role, chosen);
        Ok(chosen)
    }

    /// Enqueues D = op(A) B with the role's pinned algorithm.
    ///
    /// # Safety
    /// `a`, `b` and `d` must be device addresses of live allocations holding
    /// the matrices `g` describes (bf16 A and B, D of its type) while the
    /// stream runs the call.
    pub unsafe fn matmul(&mut self, g: &LtGemm, a: u64, b: u64, d: u64) -> Result<(), SubjectError> {
        let d_size = if g.d_bf16 { 2 } else { 4 };
        let aligned = [a, b, d, g.lda as u64 * 2, g.ldb as u64 * 2, g.ldd as u64 * d_size].iter().all(|v| v % 16 == 0);
        let pinned = self.pinned(g, if self.aligned && aligned { 16 } else { 2 })?;
        let descs = Descs::new(g)?;
        // SAFETY: zeroed plain data that the check writes.
        let mut check: lt_sys::cublasLtMatmulHeuristicResult_t = unsafe { std::mem::zeroed() };
        // SAFETY: live handle and descriptors; `pinned.algo` came from the
        // heuristic for the same role.
        let rc = unsafe {
            lt_sys::cublasLtMatmulAlgoCheck(
                self.handle,
                descs.desc,
                descs.a,
                descs.b,
                descs.d,
                descs.d,
                &pinned.algo,
                &mut check,
            )
        };
        if rc.result().is_err() || check.workspaceSize > WORKSPACE {
            return Err(SubjectError::Unavailable(format!(
                "the pinned cuBLASLt algorithm (id {}, tile {}) does not take m {} n {} k {}: {rc:?}",
                pinned.id, pinned.tile, g.m, g.n, g.k
            )));
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        let stream = self.stream.clone();
        let (ws, _ws_guard) = self.workspace.device_ptr_mut(&stream);
        // SAFETY: the caller's contract for a, b, d; D is also C (beta 0);
        // the workspace is WORKSPACE bytes, at least what the check asked.
        unsafe {
            lt::matmul(
                self.handle,
                descs.desc,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                a as *const c_void,
                descs.a,
                b as *const c_void,
                descs.b,
                d as *const c_void,
                descs.d,
                d as *mut c_void,
                descs.d,
                &pinned.algo,
                ws as *mut c_void,
                WORKSPACE,
                stream.cu_stream() as lt_sys::cudaStream_t,
            )
        }
        .map_err(err("cublasLtMatmul"))
    }
}

impl Drop for PinnedLt {
    fn drop(&mut self) {
        // SAFETY: created once in `new`, destroyed once here.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}
