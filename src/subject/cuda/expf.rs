//! The GPU side of the exhaustive check of `bp::exp_cr` (kernels/expf.cuh):
//! `kernels/expf_check.cu` evaluates it on a range of f32 inputs, given by
//! their bits, and the results' bits come back to the host. The comparison
//! with the CPU reference is `src/bin/bitparity-expf-check.rs`.
//!
//! Fail closed as the rest of this module: no driver, no GPU or no NVRTC is
//! [`SubjectError::Unavailable`]; a kernel that does not compile or a CUDA
//! error is [`SubjectError::Device`]; nothing panics.

use super::device::{device, Device, DeviceInfo};
use super::nvrtc::guarded;
use super::KernelId;
use crate::subject::SubjectError;
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// Threads per block: the kernel's `BP_EXPF_CHECK_THREADS` (its launch bound).
const THREADS: u32 = 256;
/// The most inputs one launch takes: the kernel's 32-bit thread index
/// (blockIdx.x * blockDim.x + threadIdx.x) must not wrap.
pub const MAX_CHUNK: u32 = 1 << 30;

/// The GPU with the check kernel loaded and an output buffer of `chunk`
/// results.
pub struct ExpfCheckDevice {
    dev: Arc<Device>,
    function: CudaFunction,
    out: CudaSlice<u32>,
}

impl ExpfCheckDevice {
    /// Opens the GPU (`BITPARITY_CUDA_DEVICE`, default 0), compiles
    /// expf_check.cu for its architecture with the project's NVRTC options,
    /// and allocates room for `chunk` results (1..=[`MAX_CHUNK`]).
    pub fn open(chunk: u32) -> Result<Self, SubjectError> {
        if chunk == 0 || chunk > MAX_CHUNK {
            return Err(SubjectError::Device(format!("chunk {chunk} is not in 1..={MAX_CHUNK}")));
        }
        let dev = device().map_err(SubjectError::Unavailable)?;
        let function = dev.function(KernelId::ExpfCheck, "expf_check").map_err(SubjectError::Device)?;
        let out = dev
            .stream
            .alloc_zeros::<u32>(chunk as usize)
            .map_err(|e| SubjectError::Device(format!("allocating {chunk} results on the GPU: {e}")))?;
        Ok(ExpfCheckDevice { dev, function, out })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    /// The number of results one [`Self::run`] can take.
    pub fn chunk(&self) -> u32 {
        self.out.len() as u32
    }

    /// Evaluates `bp::exp_cr` on the inputs whose bits are `start`,
    /// `start + 1`, ..., `start + host.len() - 1` and writes the results'
    /// bits into `host`. The range must not pass 2^32 and `host` must fit in
    /// the device buffer.
    pub fn run(&mut self, start: u32, host: &mut [u32]) -> Result<(), SubjectError> {
        let count = host.len();
        if count == 0 {
            return Ok(());
        }
        if count > self.out.len() || start as u64 + count as u64 > 1u64 << 32 {
            return Err(SubjectError::Device(format!(
                "inputs {start:#x} + {count} do not fit the buffer ({}) or pass 2^32",
                self.out.len()
            )));
        }
        guarded(|| self.run_loaded(start, host)).and_then(|r| r).map_err(SubjectError::Device)
    }

    fn run_loaded(&mut self, start: u32, host: &mut [u32]) -> Result<(), String> {
        let count = host.len() as u32; // <= out.len() <= MAX_CHUNK (checked)
        let stream = &self.dev.stream;
        let mut b = stream.launch_builder(&self.function);
        b.arg(&start).arg(&count).arg(&mut self.out);
        let cfg =
            LaunchConfig { grid_dim: (count.div_ceil(THREADS), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments match expf_check(unsigned, unsigned, unsigned*)
        // in order and type; `out` holds at least `count` u32 (checked by
        // run), and threads with an index >= count write nothing; blocks of
        // THREADS = BP_EXPF_CHECK_THREADS respect the kernel's launch bound;
        // start + count <= 2^32 (checked), so no input index wraps. `out`
        // lives in self and outlives the launch (frees are stream-ordered).
        unsafe { b.launch(cfg) }.map_err(|e| format!("expf_check launch: {e}"))?;
        // Under the watchdog: a launch that never ends fails, it does not
        // block the copy below for ever.
        self.dev.finish("expf_check").map_err(|e| match e {
            SubjectError::Device(m) => m,
            e => e.to_string(),
        })?;
        let view = self.out.slice(..count as usize);
        stream.memcpy_dtoh(&view, host).map_err(|e| format!("copying the results back: {e}"))?;
        stream.synchronize().map_err(|e| format!("expf_check: {e}"))?;
        self.dev.ctx.check_err().map_err(|e| format!("expf_check: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::HEADERS;
    use super::*;
    use oracles::expf::{exp_f32_fast, exp_f32_mpfr, INV_LN2, LN2_HI, LN2_LO, SETTLE_REL, S_COEFFS};

    fn header(name: &str) -> &'static str {
        HEADERS.iter().find(|h| h.name == name).map(|h| h.text).unwrap_or_else(|| panic!("{name} not in HEADERS"))
    }

    /// A positive normal f64 as the C hex literal expf.cuh writes it.
    fn c_hex(v: f64) -> String {
        let bits = v.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32 - 1023;
        format!("0x1.{:013x}p{exp:+}", bits & ((1u64 << 52) - 1))
    }

    /// The GPU evaluates with the CPU's constants, bit for bit, and in the
    /// same order.
    #[test]
    fn the_gpu_constants_are_the_cpus() {
        let text = header("expf.cuh");
        for (name, v) in [("inv_ln2", INV_LN2), ("ln2_hi", LN2_HI), ("ln2_lo", LN2_LO)] {
            assert!(text.contains(&format!("{name} = {};", c_hex(v))), "{name} = {}", c_hex(v));
        }
        let mut at = text.find("const double c[13] = {").expect("the coefficient array");
        for (j, &c) in S_COEFFS.iter().enumerate() {
            let lit = format!("{},", c_hex(c));
            let pos = text[at..].find(&lit).unwrap_or_else(|| panic!("c[{j}] = {lit} missing or out of order"));
            at += pos + lit.len();
        }
        assert_eq!(S_COEFFS.len(), 13);
        assert!(text.contains("__dmul_rn(y, 0x1p-50)") && SETTLE_REL == 2f64.powi(-50));
        assert!(text.contains("if (x > 89.0f)") && oracles::expf::OVERFLOW_X == 89.0);
        assert!(text.contains("if (x < -110.0f)") && oracles::expf::UNDERFLOW_X == -110.0);
        assert!(KernelId::ExpfCheck.source().text.contains(&format!("#define BP_EXPF_CHECK_THREADS {THREADS}")));
    }

    /// The table path's constants (exp_table_eval) and its table of
    /// 2^(j/64) (pow2_64) are the correctly rounded values, by MPFR.
    #[test]
    fn the_table_path_constants_are_correctly_rounded() {
        use rug::float::{Constant, Round};
        use rug::Float;
        const PREC: u32 = 256;
        let text = header("expf.cuh");
        let rn = |x: Float| x.to_f64_round(Round::Nearest);
        let ln2 = Float::with_val(PREC, Constant::Log2);
        let l1 = rn(ln2.clone() / 64);
        let constants = [
            ("RN(64/ln2)", rn(Float::with_val(PREC, 64) / ln2.clone())),
            ("L1 = RN(ln2/64)", l1),
            ("L2 = RN(ln2/64 - L1)", rn(ln2.clone() / 64 - l1)),
            ("RN(1/6)", rn(Float::with_val(PREC, 1) / 6)),
            ("RN(1/24)", rn(Float::with_val(PREC, 1) / 24)),
            ("RN(1/120)", rn(Float::with_val(PREC, 1) / 120)),
        ];
        let start = text.find("exp_table_eval(").expect("the table path");
        for (what, v) in constants {
            assert!(text[start..].contains(&c_hex(v)), "{what} = {} not in exp_table_eval", c_hex(v));
        }
        let head = "pow2_64[BP_EXP_TABLE] = {";
        let at = text.find(head).expect("the table") + head.len();
        let body = &text[at..at + text[at..].find("};").expect("its end")];
        let entries: Vec<&str> = body.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        assert_eq!(entries.len(), 64);
        assert!(text.contains("#define BP_EXP_TABLE 64"));
        for (j, lit) in entries.iter().enumerate() {
            let e: Float = Float::with_val(PREC, j as u32) / 64;
            let want = rn(e.exp2());
            assert_eq!(*lit, c_hex(want), "pow2_64[{j}]");
        }
    }

    /// The table of expf_hard.cuh: (input bits, result bits), as written.
    fn hard_table() -> Vec<(u32, u32)> {
        let text = header("expf_hard.cuh");
        let column = |name: &str| -> Vec<u32> {
            let head = format!("{name}[BP_EXP_HARD_COUNT] = {{");
            let start = text.find(&head).map(|i| i + head.len()).expect("the column");
            let body = &text[start..start + text[start..].find("};").expect("its end")];
            body.lines()
                .filter_map(|l| l.trim().strip_prefix("0x"))
                .map(|l| u32::from_str_radix(&l[..l.find('u').expect("a u suffix")], 16).expect("hex"))
                .collect()
        };
        let count: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("#define BP_EXP_HARD_COUNT "))
            .and_then(|n| n.trim().parse().ok())
            .expect("BP_EXP_HARD_COUNT");
        let (inputs, results) = (column("input"), column("result"));
        assert_eq!(inputs.len(), count);
        assert_eq!(results.len(), count);
        inputs.into_iter().zip(results).collect()
    }

    /// Every entry is the correct rounding (MPFR alone), the keys are sorted
    /// for the binary search, and the inputs on which the fast path cannot
    /// decide that lie in windows around the known hard spots are all there.
    #[test]
    fn the_hard_case_table_is_sorted_correct_and_holds_the_fast_path_failures() {
        let table = hard_table();
        assert!(!table.is_empty());
        assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "sorted, no duplicates");
        for &(x, r) in &table {
            let x = f32::from_bits(x);
            assert!((-110.0..=89.0).contains(&x), "{x:e} outside the evaluated range");
            assert_eq!(r, exp_f32_mpfr(x).to_bits(), "entry for {x:e}");
        }
        // Around each entry (2^12 inputs either side) and around 0, every
        // input the fast path leaves undecided must be in the table.
        let centers = table.iter().map(|e| e.0).chain([0, 0x8000_0000]);
        let mut undecided = 0;
        for c in centers {
            for b in c.saturating_sub(1 << 12)..=c.saturating_add(1 << 12) {
                let x = f32::from_bits(b);
                if (-110.0..=89.0).contains(&x) && exp_f32_fast(x).is_none() {
                    undecided += 1;
                    assert!(table.binary_search_by_key(&b, |e| e.0).is_ok(), "{x:e} ({b:#010x}) missing");
                }
            }
        }
        assert!(undecided > 0, "the windows should meet some of the fast path's failures");
    }
}
