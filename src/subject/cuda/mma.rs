//! The GPU side of the check of the tensor core's MMA model
//! (`oracles::mma`): `kernels/mma_check.cu` runs chains of
//! `mma.sync.m16n8k16` bf16 steps, one warp per case, and the results' bits
//! come back. The comparison is `src/bin/bitparity-mma-check.rs`.
//!
//! Fail closed as the rest of this module: no driver, no GPU or no NVRTC is
//! [`SubjectError::Unavailable`]; a kernel that does not compile, a CUDA
//! error or a batch the kernel cannot take is [`SubjectError::Device`];
//! nothing panics.

use super::device::{device, Device, DeviceInfo};
use super::nvrtc::guarded;
use super::KernelId;
use crate::subject::SubjectError;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use oracles::mma::{K, M, N};
use std::sync::Arc;

/// Threads per block: one warp, the kernel's `BP_MMA_CHECK_THREADS`.
const THREADS: u32 = 32;
/// The most cases one launch takes (one block each; far below the grid's
/// limit, and it bounds the buffers a batch allocates).
pub const MAX_CASES: usize = 1 << 20;
/// The most steps a chain may have (a bound on each case's size).
pub const MAX_STEPS: usize = 4096;

/// A batch of cases with the same number of steps: `a` holds each case's
/// M x (K * steps) bf16 bits row-major, `b` its N x (K * steps), `c` its
/// M x N f32, one case after another.
pub struct MmaBatch<'a> {
    pub steps: usize,
    pub a: &'a [u16],
    pub b: &'a [u16],
    pub c: &'a [f32],
}

impl MmaBatch<'_> {
    /// The number of cases, when the three arrays agree on it.
    pub fn cases(&self) -> Result<usize, String> {
        if self.steps == 0 || self.steps > MAX_STEPS {
            return Err(format!("{} steps is not in 1..={MAX_STEPS}", self.steps));
        }
        let cases = self.c.len() / (M * N);
        let kk = K * self.steps;
        if self.c.len() != cases * M * N || self.a.len() != cases * M * kk || self.b.len() != cases * N * kk {
            return Err(format!(
                "a ({}), b ({}) and c ({}) do not hold the same number of {}-step cases",
                self.a.len(),
                self.b.len(),
                self.c.len(),
                self.steps
            ));
        }
        if cases > MAX_CASES {
            return Err(format!("{cases} cases in one batch; at most {MAX_CASES}"));
        }
        Ok(cases)
    }
}

/// The GPU with the check kernel loaded.
pub struct MmaCheckDevice {
    dev: Arc<Device>,
    function: CudaFunction,
}

impl MmaCheckDevice {
    /// Opens the GPU (`BITPARITY_CUDA_DEVICE`, default 0) and compiles
    /// mma_check.cu for its architecture with the project's NVRTC options.
    pub fn open() -> Result<Self, SubjectError> {
        let dev = device().map_err(SubjectError::Unavailable)?;
        let function = dev.function(KernelId::MmaCheck, "mma_check").map_err(SubjectError::Device)?;
        Ok(MmaCheckDevice { dev, function })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    /// Runs every case of `batch` and returns each case's M x N result bits.
    pub fn run(&self, batch: &MmaBatch) -> Result<Vec<u32>, SubjectError> {
        let cases = batch.cases().map_err(SubjectError::Device)?;
        if cases == 0 {
            return Ok(Vec::new());
        }
        guarded(|| self.run_loaded(batch, cases)).and_then(|r| r).map_err(SubjectError::Device)
    }

    fn run_loaded(&self, batch: &MmaBatch, cases: usize) -> Result<Vec<u32>, String> {
        let stream = &self.dev.stream;
        let up = |what: &'static str| move |e| format!("uploading {what}: {e}");
        let a = stream.clone_htod(batch.a).map_err(up("a"))?;
        let b = stream.clone_htod(batch.b).map_err(up("b"))?;
        let c = stream.clone_htod(batch.c).map_err(up("c"))?;
        let mut d = stream.alloc_zeros::<u32>(cases * M * N).map_err(|e| format!("allocating {cases} results: {e}"))?;
        let steps = batch.steps as i32; // <= MAX_STEPS (checked by cases())
        let mut l = stream.launch_builder(&self.function);
        l.arg(&a).arg(&b).arg(&c).arg(&steps).arg(&mut d);
        let cfg = LaunchConfig { grid_dim: (cases as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments match mma_check(const unsigned short*, const
        // unsigned short*, const float*, int, unsigned*) in order and type;
        // block b reads a[b * M * K * steps ..][.. M * K * steps], b's and
        // c's likewise and writes d[b * M * N ..][.. M * N], all inside the
        // buffers (their lengths checked by cases() against `cases` blocks);
        // one warp per block is the kernel's launch bound. The buffers live
        // until the synchronize below.
        unsafe { l.launch(cfg) }.map_err(|e| format!("mma_check launch: {e}"))?;
        let out = stream.clone_dtoh(&d).map_err(|e| format!("copying the results back: {e}"))?;
        stream.synchronize().map_err(|e| format!("mma_check: {e}"))?;
        self.dev.ctx.check_err().map_err(|e| format!("mma_check: {e}"))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_must_agree_on_its_case_count() {
        let (a, b, c) = (vec![0u16; 2 * M * K], vec![0u16; 2 * N * K], vec![0f32; 2 * M * N]);
        assert_eq!(MmaBatch { steps: 1, a: &a, b: &b, c: &c }.cases(), Ok(2));
        assert!(MmaBatch { steps: 2, a: &a, b: &b, c: &c }.cases().is_err());
        assert!(MmaBatch { steps: 1, a: &a[1..], b: &b, c: &c }.cases().is_err());
        assert!(MmaBatch { steps: 1, a: &a, b: &b, c: &c[..M * N + 1] }.cases().is_err());
        assert!(MmaBatch { steps: 0, a: &[], b: &[], c: &[] }.cases().is_err());
    }
}
