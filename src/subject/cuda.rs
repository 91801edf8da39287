//! The CUDA subject: `kernels/seqwise_loss.cu`, compiled at run time by NVRTC
//! and run through cudarc's driver API.
//!
//! Fail closed at every step: a machine without the driver, without a GPU,
//! without NVRTC, or whose kernels do not compile gets an explicit reason
//! ([`probe`] returns `Err(reason)`, a subject call returns
//! [`SubjectError::Unavailable`] or [`SubjectError::Device`]); nothing panics
//! and nothing falls back to another implementation.
//!
//! Both libraries are loaded with dlopen (cudarc's `dynamic-loading`), and
//! cudarc panics when a library it needs is missing, so [`probe`] first checks
//! that each library loads, and runs the rest under `catch_unwind` as a last
//! guard. The kernels are compiled once per process; the device is opened
//! once per process.
//!
//! All unsafe code of bitparity lives in this module (and its [`expf`]
//! submodule, the exhaustive check of the GPU's exponential); every block
//! says why it is sound.

pub mod expf;

use super::{SeqwiseSubject, SubjectError};
use cudarc::driver::{
    sys as cu, CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys, Ptx};
use oracles::case::seqwise_loss::{Objective, SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::profile::seqwise_loss::SeqwiseProfile;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

/// One CUDA source file of `kernels/`, embedded at build time so that a
/// prebuilt binary carries its kernels.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    pub name: &'static str,
    pub text: &'static str,
}

/// Every kernel source compiled by NVRTC (the CI compile test walks this).
/// `seqwise_loss.cu` stays first: the seqwise subject compiles `KERNELS[0]`.
pub const KERNELS: &[KernelSource] = &[
    KernelSource { name: "seqwise_loss.cu", text: include_str!("../../kernels/seqwise_loss.cu") },
    expf::CHECK_KERNEL,
];

/// The shared headers, handed to NVRTC by name (`#include "common.cuh"`).
pub const HEADERS: &[KernelSource] = &[
    KernelSource { name: "common.cuh", text: include_str!("../../kernels/common.cuh") },
    KernelSource { name: "expf.cuh", text: include_str!("../../kernels/expf.cuh") },
    KernelSource { name: "expf_hard.cuh", text: include_str!("../../kernels/expf_hard.cuh") },
];

/// The architecture the CI compile test targets (the H200 is sm_90).
pub const CI_ARCH: &str = "sm_90";

/// NVRTC options that keep every profile's rules (SPEC section 2): no FMA
/// contraction, IEEE division and square root, subnormals kept. `arch` is a
/// real architecture (`sm_90`), so NVRTC emits machine code for it (CUBIN)
/// and no JIT stands between these options and the GPU.
pub fn nvrtc_options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--fmad=false".into(),
        "--prec-div=true".into(),
        "--prec-sqrt=true".into(),
        "--ftz=false".into(),
        "--std=c++17".into(),
    ]
}

/// One kernel source compiled: the CUBIN and the compiler's log (empty when
/// there was nothing to say; CI fails on any non-empty log).
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    pub name: &'static str,
    pub arch: String,
    pub cubin: Vec<u8>,
    pub log: String,
}

/// Whether NVRTC can be loaded here, and its version.
pub fn nvrtc_version() -> Result<(i32, i32), String> {
    // SAFETY: `is_culib_present` only tries to dlopen the library names; it
    // calls no symbol.
    if !unsafe { nvrtc_sys::is_culib_present() } {
        return Err("NVRTC not found: libnvrtc.so.13 is not on the library path \
                    (source scripts/nvrtc-env, or add CUDA 13's lib folder to LD_LIBRARY_PATH)"
            .into());
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library loads (checked above) and both pointers are valid
    // for writes for the duration of the call.
    let rc = guarded(|| unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) })?;
    if rc != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("nvrtcVersion failed: {rc:?}"));
    }
    Ok((major, minor))
}

/// Compiles one kernel source with [`nvrtc_options`] for `arch` (`sm_90`).
pub fn compile(kernel: &KernelSource, arch: &str) -> Result<CompiledKernel, String> {
    compile_with(kernel, arch, &[])
}

/// Extra NVRTC options for tuning experiments, from `BITPARITY_NVRTC_EXTRA`
/// (whitespace-separated, default none): only `-D` macro definitions of the
/// kernels' launch-shape knobs are accepted, so the profile's options cannot
/// be overridden.
fn extra_options() -> Vec<String> {
    std::env::var("BITPARITY_NVRTC_EXTRA")
        .map(|s| s.split_whitespace().filter(|o| o.starts_with("-DBP_")).map(String::from).collect())
        .unwrap_or_default()
}

fn compile_with(kernel: &KernelSource, arch: &str, extra: &[String]) -> Result<CompiledKernel, String> {
    nvrtc_version()?;
    guarded(|| compile_loaded(kernel, arch, extra))?
}

fn compile_loaded(kernel: &KernelSource, arch: &str, extra: &[String]) -> Result<CompiledKernel, String> {
    let cstr = |s: &str| CString::new(s).map_err(|_| format!("{}: a NUL byte in {s:.20}", kernel.name));
    let src = cstr(kernel.text)?;
    let name = cstr(kernel.name)?;
    let header_texts = HEADERS.iter().map(|h| cstr(h.text)).collect::<Result<Vec<_>, _>>()?;
    let header_names = HEADERS.iter().map(|h| cstr(h.name)).collect::<Result<Vec<_>, _>>()?;
    let texts: Vec<*const c_char> = header_texts.iter().map(|s| s.as_ptr()).collect();
    let names: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();
    let mut prog: nvrtc_sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a NUL-terminated CString (or an array of them
    // of the stated length) that outlives the program, which is destroyed
    // below before they drop.
    let rc = unsafe {
        nvrtc_sys::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            texts.len() as c_int,
            texts.as_ptr(),
            names.as_ptr(),
        )
    };
    if rc != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("{}: nvrtcCreateProgram failed: {rc:?}", kernel.name));
    }
    let mut options = nvrtc_options(arch);
    options.extend(extra.iter().cloned());
    // SAFETY: `prog` was created above and is destroyed only at the end.
    let compiled = unsafe { nvrtc_result::compile_program(prog, &options) };
    // SAFETY: as above; the log is a NUL-terminated buffer NVRTC filled.
    let log = unsafe { nvrtc_result::get_program_log(prog) }
        .map(|raw| {
            let bytes: Vec<u8> = raw.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).trim().to_string()
        })
        .unwrap_or_else(|e| format!("(no log: {e:?})"));
    let cubin = compiled.map_err(|e| format!("{e:?}")).and_then(|()| {
        let mut size = 0usize;
        // SAFETY: `prog` compiled successfully; `size` is valid for writes.
        let rc = unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) };
        if rc != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(format!("nvrtcGetCUBINSize: {rc:?}"));
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` holds exactly the `size` bytes NVRTC asked for.
        let rc = unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char) };
        if rc != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(format!("nvrtcGetCUBIN: {rc:?}"));
        }
        Ok(buf)
    });
    // SAFETY: `prog` is a live program, destroyed exactly once.
    let _ = unsafe { nvrtc_result::destroy_program(prog) };
    let cubin = cubin.map_err(|e| format!("{} ({arch}) did not compile: {e}\n{log}", kernel.name))?;
    Ok(CompiledKernel { name: kernel.name, arch: arch.to_string(), cubin, log })
}

/// Runs `f`, turning a panic inside cudarc (a missing symbol, say) into an
/// error instead of unwinding through the caller.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        format!("CUDA library call panicked: {msg}")
    })
}

fn dev_err(what: &str) -> impl Fn(DriverError) -> SubjectError + '_ {
    move |e| SubjectError::Device(format!("{what}: {e}"))
}

/// What the probe found.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    pub ordinal: usize,
    pub compute_capability: (i32, i32),
    /// cuDriverGetVersion, e.g. 13000 for CUDA 13.0.
    pub driver_cuda_version: i32,
    pub nvrtc_version: (i32, i32),
    pub multiprocessors: i32,
}

/// Elements per lane the kernels are instantiated for (32 * V >= E).
const LANE_WIDTHS: [usize; 6] = [1, 2, 4, 8, 16, 32];
/// The largest E the kernels take: 32 lanes x 32 registers.
pub const MAX_EXPERTS: usize = 1024;

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

struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Kernels,
    info: DeviceInfo,
}

/// The CUDA subject of `seqwise_loss`: profile `warp32-chunk64`
/// ([`SeqwiseProfile::gpu`]). Cheap to clone (one device per process).
#[derive(Clone)]
pub struct CudaSeqwise {
    dev: Arc<Device>,
}

/// Opens the GPU (ordinal `BITPARITY_CUDA_DEVICE`, default 0) and compiles
/// the kernels, once per process. `Err` is the reason the CUDA subject cannot
/// run here (report the GPU suites as skipped with it).
pub fn probe() -> Result<CudaSeqwise, String> {
    static DEVICE: OnceLock<Result<Arc<Device>, String>> = OnceLock::new();
    DEVICE.get_or_init(|| guarded(open_device).and_then(|r| r)).clone().map(|dev| CudaSeqwise { dev })
}

fn open_device() -> Result<Arc<Device>, String> {
    let (ctx, info) = open_context()?;
    let arch = format!("sm_{}{}", info.compute_capability.0, info.compute_capability.1);
    let compiled = compile_with(&KERNELS[0], &arch, &extra_options())?;
    let module =
        ctx.load_module(Ptx::from_binary(compiled.cubin)).map_err(|e| format!("loading the {arch} kernels: {e}"))?;
    let function = |n: &str| module.load_function(n).map_err(|e| format!("kernel {n}: {e}"));
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
    let stream = ctx.default_stream();
    Ok(Arc::new(Device { ctx, stream, kernels, info }))
}

/// Checks for the driver, NVRTC and a GPU of compute capability 8.0 or newer
/// (ordinal `BITPARITY_CUDA_DEVICE`, default 0), and opens it. Call it under
/// [`guarded`]: cudarc panics where a symbol is missing.
fn open_context() -> Result<(Arc<CudaContext>, DeviceInfo), String> {
    // SAFETY: only dlopen of the driver library names; no symbol is called.
    if !unsafe { cu::is_culib_present() } {
        return Err("no NVIDIA driver: libcuda.so could not be loaded".into());
    }
    let nvrtc_version = nvrtc_version()?;
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed (no usable GPU?): {e}"))?;
    let count = cudarc::driver::result::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e}"))?;
    let ordinal = match std::env::var("BITPARITY_CUDA_DEVICE") {
        Ok(s) => s.parse::<usize>().map_err(|_| format!("BITPARITY_CUDA_DEVICE={s:?} is not an ordinal"))?,
        Err(_) => 0,
    };
    if count <= 0 || ordinal >= count as usize {
        return Err(format!("no CUDA device {ordinal} ({count} found)"));
    }
    let ctx = CudaContext::new(ordinal).map_err(|e| format!("opening CUDA device {ordinal}: {e}"))?;
    let (major, minor) = ctx.compute_capability().map_err(|e| format!("compute capability: {e}"))?;
    if major < 8 {
        return Err(format!("compute capability {major}.{minor}: the kernels need 8.0 or newer"));
    }
    let name = ctx.name().map_err(|e| format!("device name: {e}"))?;
    let multiprocessors = ctx
        .attribute(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| format!("multiprocessor count: {e}"))?;
    let mut driver_cuda_version: c_int = 0;
    // SAFETY: the driver is loaded and initialised; the pointer is valid.
    unsafe { cu::cuDriverGetVersion(&mut driver_cuda_version) }
        .result()
        .map_err(|e| format!("cuDriverGetVersion: {e}"))?;
    let info = DeviceInfo {
        name,
        ordinal,
        compute_capability: (major, minor),
        driver_cuda_version,
        nvrtc_version,
        multiprocessors,
    };
    Ok((ctx, info))
}

/// The poison laid between rows and before the first one: a NaN with a
/// recognisable payload, so a kernel that reads a gap corrupts its output.
pub const GAP_POISON: f32 = f32::from_bits(0x7fc0_dead);

/// A case uploaded to the GPU with every buffer its kernels need; launches
/// and read-backs are separate so benches can time the kernels alone.
pub struct DeviceCase {
    dev: Arc<Device>,
    t: usize,
    e: usize,
    offset: i32,
    stride: i64,
    topk: i32,
    k: i32,
    inclusive: i32,
    g: f32,
    v_index: usize,
    scores: CudaSlice<f32>,
    padding: CudaSlice<u8>,
    map: CudaSlice<u8>,
    p_part: CudaSlice<f32>,
    c_part: CudaSlice<u32>,
    p: CudaSlice<f32>,
    counts: CudaSlice<u32>,
    freq: CudaSlice<f32>,
    raw: CudaSlice<f32>,
    ticket: CudaSlice<u32>,
    grad: CudaSlice<f32>,
}

fn as_i32(x: usize, what: &str) -> Result<i32, SubjectError> {
    i32::try_from(x).map_err(|_| SubjectError::Unavailable(format!("{what} = {x} exceeds the kernels' i32 range")))
}

impl CudaSeqwise {
    pub fn info(&self) -> &DeviceInfo {
        &self.dev.info
    }

    /// Validates `case` and uploads it: the scores as `case.storage(GAP_POISON)`
    /// (the real offset and row stride), the padding flags, the map.
    pub fn upload(&self, case: &SeqwiseCase) -> Result<DeviceCase, SubjectError> {
        case.validate()?;
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
        let s = &self.dev.stream;
        let up = dev_err("upload");
        let dc = DeviceCase {
            dev: self.dev.clone(),
            t,
            e,
            offset: as_i32(case.layout.offset, "offset")?,
            stride: i64::try_from(case.layout.row_stride)
                .map_err(|_| SubjectError::Unavailable("row stride exceeds i64".into()))?,
            topk,
            k: as_i32(k, "k")?,
            inclusive: matches!(case.clamp_tie, oracles::case::seqwise_loss::ClampTie::Inclusive) as i32,
            g: case.g,
            v_index,
            scores: s.clone_htod(&case.storage(GAP_POISON)).map_err(&up)?,
            padding: s.clone_htod(&padding).map_err(&up)?,
            map: s.clone_htod(&map).map_err(&up)?,
            p_part: s.alloc_zeros(nchunks * e).map_err(&up)?,
            c_part: s.alloc_zeros(nchunks * e).map_err(&up)?,
            p: s.alloc_zeros(e).map_err(&up)?,
            counts: s.alloc_zeros(e).map_err(&up)?,
            freq: s.alloc_zeros(e).map_err(&up)?,
            raw: s.alloc_zeros(1).map_err(&up)?,
            ticket: s.alloc_zeros(1).map_err(&up)?,
            grad: s.alloc_zeros(t * e).map_err(&up)?,
        };
        as_i32(t, "T")?;
        as_i32(e, "E")?;
        Ok(dc)
    }

    /// Times `f` (which enqueues GPU work on this subject's stream) with CUDA
    /// events: `warmup` untimed calls, then `iters` timed ones; returns each
    /// timed call's microseconds.
    pub fn time_us(
        &self,
        warmup: usize,
        iters: usize,
        mut f: impl FnMut() -> Result<(), SubjectError>,
    ) -> Result<Vec<f64>, SubjectError> {
        let ctx = &self.dev.ctx;
        let s = &self.dev.stream;
        let ev = || ctx.new_event(Some(cu::CUevent_flags::CU_EVENT_DEFAULT)).map_err(dev_err("event"));
        for _ in 0..warmup {
            f()?;
        }
        s.synchronize().map_err(dev_err("warm-up"))?;
        let mut out = Vec::with_capacity(iters);
        let (start, end) = (ev()?, ev()?);
        for _ in 0..iters {
            start.record(s).map_err(dev_err("event record"))?;
            f()?;
            end.record(s).map_err(dev_err("event record"))?;
            let ms = start.elapsed_ms(&end).map_err(dev_err("event elapsed"))?;
            out.push(ms as f64 * 1000.0);
        }
        ctx.check_err().map_err(dev_err("timing"))?;
        Ok(out)
    }

    /// Measured device-to-device copy bandwidth in bytes per second (bytes
    /// read plus bytes written), median of `iters` copies of `bytes`.
    pub fn copy_bandwidth(&self, bytes: usize, iters: usize) -> Result<f64, SubjectError> {
        let s = &self.dev.stream;
        let n = bytes / 4;
        let src: CudaSlice<f32> = s.alloc_zeros(n).map_err(dev_err("alloc"))?;
        let mut dst: CudaSlice<f32> = s.alloc_zeros(n).map_err(dev_err("alloc"))?;
        let mut times = self.time_us(3, iters, || s.memcpy_dtod(&src, &mut dst).map_err(dev_err("copy")))?;
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        Ok((2 * n * 4) as f64 / (med * 1e-6))
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
        let f = &dev.kernels.fwd_chunk[self.v_index];
        let mut b = s.launch_builder(f);
        b.arg(&self.scores)
            .arg(&self.offset)
            .arg(&self.stride)
            .arg(&t)
            .arg(&e)
            .arg(&self.padding)
            .arg(&self.map)
            .arg(&self.topk)
            .arg(&self.k)
            .arg(&mut self.p_part)
            .arg(&mut self.c_part);
        // SAFETY: the argument list matches seqwise_fwd_chunk_v<V>'s signature
        // (pointers, i32, i64 in order); `scores` holds offset + (T-1)*stride + E
        // elements (SeqwiseCase::storage), padding T bytes, map T*E bytes when
        // topk == 0, p_part and c_part nchunks*E each, and the dynamic shared
        // memory holds E counters and 16 rows of E values (the kernel's limit
        // was raised to E = 1024 at load). Every buffer outlives the launch (they are owned by
        // self, and frees are stream-ordered).
        unsafe { b.launch(Self::cfg(nchunks as u32, (FWD_THREADS, 1), fwd_shared_bytes(self.e) as u32)) }
            .map_err(dev_err("seqwise_fwd_chunk launch"))?;
        let mut b = s.launch_builder(&dev.kernels.finalize);
        b.arg(&self.p_part)
            .arg(&self.c_part)
            .arg(&nchunks)
            .arg(&e)
            .arg(&mut self.p)
            .arg(&mut self.counts)
            .arg(&mut self.freq)
            .arg(&mut self.raw)
            .arg(&mut self.ticket);
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
        let rows_per_block = (BWD_THREADS / 32) as usize;
        let f = &dev.kernels.bwd[self.v_index];
        let mut b = s.launch_builder(f);
        b.arg(&self.scores)
            .arg(&self.offset)
            .arg(&self.stride)
            .arg(&t)
            .arg(&e)
            .arg(&self.padding)
            .arg(&self.topk)
            .arg(&self.inclusive)
            .arg(&self.g)
            .arg(&self.freq)
            .arg(&mut self.grad);
        // SAFETY: matches seqwise_bwd_v<V>'s signature; scores and padding as in
        // the forward, freq E elements, grad T*E; one warp per row, rows past T
        // return at once.
        unsafe { b.launch(Self::cfg(self.t.div_ceil(rows_per_block) as u32, (BWD_THREADS, 1), 0)) }
            .map_err(dev_err("seqwise_bwd launch"))?;
        Ok(())
    }

    fn finish(&self, what: &str) -> Result<(), SubjectError> {
        self.dev.stream.synchronize().map_err(dev_err(what))?;
        self.dev.ctx.check_err().map_err(dev_err(what))
    }

    /// Waits for the forward and copies its outputs back.
    pub fn read_forward(&self) -> Result<SeqwiseForward<f32>, SubjectError> {
        self.finish("forward")?;
        let s = &self.dev.stream;
        let rd = dev_err("read-back");
        let raw = s.clone_dtoh(&self.raw).map_err(&rd)?;
        let counts = s.clone_dtoh(&self.counts).map_err(&rd)?;
        let freq = s.clone_dtoh(&self.freq).map_err(&rd)?;
        self.finish("read-back")?;
        Ok(SeqwiseForward { raw: raw[0], counts, freq })
    }

    /// Waits for the backward and copies the gradient back.
    pub fn read_backward(&self) -> Result<SeqwiseBackward<f32>, SubjectError> {
        self.finish("backward")?;
        let grad = self.dev.stream.clone_dtoh(&self.grad).map_err(dev_err("read-back"))?;
        self.finish("read-back")?;
        Ok(SeqwiseBackward { grad })
    }
}

impl SeqwiseSubject for CudaSeqwise {
    fn name(&self) -> String {
        "cuda".into()
    }

    /// The profile every kernel of kernels/seqwise_loss.cu implements.
    fn profile(&self) -> SeqwiseProfile {
        SeqwiseProfile::gpu()
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

/// The profile declared by the kernels' source (its header comment names
/// it), for the check that the subject and the source agree.
pub fn declared_profile_name(source: &KernelSource) -> Option<&'static str> {
    let text = source.text;
    let start = text.find("Numeric profile: \"")? + "Numeric profile: \"".len();
    let len = text[start..].find('"')?;
    Some(&text[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracles::profile::seqwise_loss::{GPU_LANES, GPU_TOKEN_CHUNK};

    fn define(name: &str) -> Option<usize> {
        KERNELS[0].text.lines().find_map(|l| {
            let rest = l.strip_prefix("#define ")?.strip_prefix(name)?;
            rest.split_whitespace().next()?.parse().ok()
        })
    }

    #[test]
    fn kernel_source_declares_the_gpu_profile_and_its_constants() {
        assert_eq!(declared_profile_name(&KERNELS[0]), Some(SeqwiseProfile::gpu().name.as_str()));
        assert_eq!(define("BP_TOKEN_CHUNK"), Some(GPU_TOKEN_CHUNK));
        assert!(HEADERS[0].text.contains(&format!("#define BP_WARP {GPU_LANES}")));
        assert!(KERNELS[0].text.contains("#include \"common.cuh\""));
    }

    #[test]
    fn launch_shapes_match_the_kernels_bounds() {
        // A launch with more threads than a kernel's __launch_bounds__ fails.
        assert_eq!(define("BP_FWD_THREADS"), Some(FWD_THREADS as usize));
        assert_eq!(define("BP_BWD_THREADS"), Some(BWD_THREADS as usize));
        assert!(fwd_shared_bytes(MAX_EXPERTS) <= 227 * 1024, "over the per-block shared memory of sm_80/sm_90");
    }

    #[test]
    fn options_keep_the_profile_rules() {
        let o = nvrtc_options("sm_90");
        for want in ["--fmad=false", "--prec-div=true", "--ftz=false", "--gpu-architecture=sm_90"] {
            assert!(o.iter().any(|x| x == want), "{want}");
        }
    }
}
