//! The GPU side of the check of the tensor core's MMA model
//! (`oracles::mma`): `kernels/mma_check.cu` runs chains of
//! `mma.sync.m16n8k16` bf16 steps, one warp per case, or of Hopper's
//! `wgmma.mma_async.m64n8k16` steps, one warpgroup per case
//! ([`Instruction`]), and the results' bits come back. The comparison is
//! `src/bin/bitparity-mma-check.rs`.
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

/// The instruction whose steps a check runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`, one warp.
    Mma,
    /// `wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16`, A from
    /// registers, B from shared memory: one warpgroup, whose first warp's
    /// 16 rows are the case (sm_90 only).
    Wgmma,
}

impl Instruction {
    pub const ALL: [Instruction; 2] = [Instruction::Mma, Instruction::Wgmma];

    /// As `--instruction` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Instruction::Mma => "mma",
            Instruction::Wgmma => "wgmma",
        }
    }

    pub fn by_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.name() == name)
    }

    /// The PTX instruction, as reports name it.
    pub fn ptx(self) -> &'static str {
        match self {
            Instruction::Mma => "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
            Instruction::Wgmma => "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
        }
    }

    fn kernel(self) -> &'static str {
        match self {
            Instruction::Mma => "mma_check",
            Instruction::Wgmma => "wgmma_check",
        }
    }

    /// Threads per block: the kernel's `BP_MMA_CHECK_THREADS` (a warp) or
    /// `BP_WGMMA_CHECK_THREADS` (a warpgroup).
    fn threads(self) -> u32 {
        match self {
            Instruction::Mma => 32,
            Instruction::Wgmma => 128,
        }
    }
}
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
    instruction: Instruction,
    function: CudaFunction,
}

impl MmaCheckDevice {
    /// Opens the GPU (`BITPARITY_CUDA_DEVICE`, default 0) and compiles
    /// mma_check.cu for its architecture with the project's NVRTC options
    /// (sm_90a on sm_90: [`KernelId::arch`]). `wgmma` on a GPU other than
    /// sm_90 is unavailable, with the reason.
    pub fn open(instruction: Instruction) -> Result<Self, SubjectError> {
        let dev = device().map_err(SubjectError::Unavailable)?;
        if instruction == Instruction::Wgmma && dev.info.compute_capability != (9, 0) {
            let (major, minor) = dev.info.compute_capability;
            return Err(SubjectError::Unavailable(format!("wgmma is sm_90's; this GPU is sm_{major}{minor}")));
        }
        let function = dev.function(KernelId::MmaCheck, instruction.kernel()).map_err(SubjectError::Device)?;
        Ok(MmaCheckDevice { dev, instruction, function })
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
        let threads = self.instruction.threads();
        let cfg = LaunchConfig { grid_dim: (cases as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let name = self.instruction.kernel();
        // SAFETY: the arguments match mma_check's and wgmma_check's
        // (const unsigned short*, const unsigned short*, const float*, int,
        // unsigned*) in order and type; block b reads
        // a[b * M * K * steps ..][.. M * K * steps], b's and c's likewise and
        // writes d[b * M * N ..][.. M * N], all inside the buffers (their
        // lengths checked by cases() against `cases` blocks); the block is
        // the kernel's launch bound (a warp, a warpgroup), and wgmma_check's
        // shared memory is static. The buffers live until the synchronize
        // below.
        unsafe { l.launch(cfg) }.map_err(|e| format!("{name} launch: {e}"))?;
        let out = stream.clone_dtoh(&d).map_err(|e| format!("copying the results back: {e}"))?;
        stream.synchronize().map_err(|e| format!("{name}: {e}"))?;
        self.dev.ctx.check_err().map_err(|e| format!("{name}: {e}"))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instruction_is_found_by_its_name_and_names_its_kernel() {
        assert_eq!(Instruction::by_name("mma"), Some(Instruction::Mma));
        assert_eq!(Instruction::by_name("wgmma"), Some(Instruction::Wgmma));
        assert_eq!(Instruction::by_name("hmma"), None);
        let text = KernelId::MmaCheck.source().text;
        for i in Instruction::ALL {
            assert!(text.contains(&format!("{}(", i.kernel())), "{}", i.kernel());
            assert!(text.contains(i.ptx()), "{}", i.ptx());
        }
        assert!(text.contains("#define BP_MMA_CHECK_THREADS 32"));
        assert!(text.contains("#define BP_WGMMA_CHECK_THREADS 128"));
        assert_eq!((Instruction::Mma.threads(), Instruction::Wgmma.threads()), (32, 128));
    }

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
