//! The GPU: opened once per process, each kernel source compiled (NVRTC) and
//! loaded the first time an op asks for it, and kept, failure included: a
//! kernel that does not compile disables that op's `cuda` subject only, with
//! the reason.

use super::nvrtc::{self, guarded};
use super::KernelId;
use crate::knobs;
use crate::subject::SubjectError;
use cudarc::driver::{sys as cu, CudaContext, CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// The opened GPU: its context, stream, and the modules loaded so far.
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: DeviceInfo,
    arch: String,
    modules: Mutex<HashMap<KernelId, Result<Arc<CudaModule>, String>>>,
    /// How long [`Device::finish`] waits ([`knobs::KERNEL_TIMEOUT`]).
    watchdog: Duration,
}

/// A driver error as a subject's device error, naming the step. An error
/// that leaves the context unusable (a kernel fault: every later call of
/// the process fails with it) is also recorded as the loss of the device
/// ([`lost`]).
pub fn dev_err(what: &str) -> impl Fn(DriverError) -> SubjectError + '_ {
    move |e| {
        let msg = format!("{what}: {e}");
        if is_sticky(&e) {
            let _ = LOST.set(msg.clone());
        }
        SubjectError::Device(msg)
    }
}

static LOST: OnceLock<String> = OnceLock::new();

/// The first error that left this process's CUDA context unusable, if any:
/// a kernel fault is sticky, so every later CUDA result of the process is
/// meaningless, and a hung kernel ([`Device::finish`]) holds the stream for
/// ever (the runner stops judging, and does not shrink against a dead
/// context).
pub fn lost() -> Option<&'static str> {
    LOST.get().map(String::as_str)
}

/// [`lost`] as a CUDA subject says it.
pub fn lost_reason() -> Option<String> {
    lost().map(|why| {
        format!(
            "the GPU context was lost ({why}): a kernel fault or hang on this case or on another one in flight; \
             every later CUDA call of the process fails; replay it in a new process, with RAYON_NUM_THREADS=1 \
             to single out the case"
        )
    })
}

/// The CUDA errors after which the context cannot be used again.
fn is_sticky(e: &DriverError) -> bool {
    use cu::cudaError_enum as C;
    matches!(
        e.0,
        C::CUDA_ERROR_ILLEGAL_ADDRESS
            | C::CUDA_ERROR_LAUNCH_FAILED
            | C::CUDA_ERROR_HARDWARE_STACK_ERROR
            | C::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | C::CUDA_ERROR_MISALIGNED_ADDRESS
            | C::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | C::CUDA_ERROR_INVALID_PC
            | C::CUDA_ERROR_ASSERT
            | C::CUDA_ERROR_ECC_UNCORRECTABLE
            | C::CUDA_ERROR_LAUNCH_TIMEOUT
    )
}

/// Opens the GPU (ordinal `BITPARITY_CUDA_DEVICE`, default 0), once per
/// process. `Err` is the reason no CUDA subject can run here.
pub fn device() -> Result<Arc<Device>, String> {
    static DEVICE: OnceLock<Result<Arc<Device>, String>> = OnceLock::new();
    DEVICE.get_or_init(|| guarded(open).and_then(|r| r)).clone()
}

/// A GPU bench whose CUDA subject did not load (`reason`): `Ok`, the line
/// to print before exiting 0, only where `may_skip` (no report was asked
/// for) and this machine has no usable GPU; otherwise `Err`, the failure to
/// exit 1 with: a report asked for without a GPU, or a GPU whose subject
/// does not load (a kernel that does not compile, a refused knob). A skip
/// says so and why; it is never a pass.
pub fn bench_without_subject(bench: &str, reason: &str, may_skip: bool) -> Result<String, String> {
    match device() {
        Err(_) if may_skip => Ok(format!("SKIPPED {bench}: no CUDA subject: {reason}")),
        Err(_) => Err(format!("{bench} failed: no CUDA subject: {reason}; no timings written")),
        Ok(_) => Err(format!("{bench} failed: the GPU is there but the CUDA subject is not: {reason}")),
    }
}

/// What a GPU bench's `main` does when its CUDA subject did not load:
/// prints [`bench_without_subject`]'s skip line and exits 0, or its
/// failure and exits 1.
pub fn exit_without_subject(bench: &str, reason: &str, may_skip: bool) -> ! {
    match bench_without_subject(bench, reason, may_skip) {
        Ok(skip) => {
            println!("{skip}");
            std::process::exit(0)
        }
        Err(failure) => {
            eprintln!("{failure}");
            std::process::exit(1)
        }
    }
}

/// How many CUDA devices this host has (`check --devices all`).
pub fn device_count() -> Result<usize, String> {
    guarded(|| {
        // SAFETY: only dlopen of the driver library names; no symbol is called.
        if !unsafe { cu::is_culib_present() } {
            return Err("no NVIDIA driver: libcuda.so could not be loaded".to_string());
        }
        cudarc::driver::result::init().map_err(|e| format!("cuInit failed (no usable GPU?): {e}"))?;
        let n = cudarc::driver::result::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e}"))?;
        Ok(n.max(0) as usize)
    })
    .and_then(|r| r)
}

fn open() -> Result<Arc<Device>, String> {
    // SAFETY: only dlopen of the driver library names; no symbol is called.
    if !unsafe { cu::is_culib_present() } {
        return Err("no NVIDIA driver: libcuda.so could not be loaded".into());
    }
    let nvrtc_version = nvrtc::version().map_err(|e| e.to_string())?;
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed (no usable GPU?): {e}"))?;
    let count = cudarc::driver::result::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e}"))?;
    let ordinal: usize = knobs::get_or(knobs::CUDA_DEVICE, 0)?;
    if count <= 0 || ordinal >= count as usize {
        return Err(format!("no CUDA device {ordinal} ({count} found)"));
    }
    let watchdog = knobs::kernel_timeout()?;
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
    // One stream of our own (the legacy default stream cannot be captured
    // into a CUDA graph, which the speed benches replay). Every buffer of
    // bitparity is allocated, used and freed on this one stream, in stream
    // order, so cudarc's cross-stream event tracking has nothing to guard and
    // only costs an event per use: it is turned off before any buffer exists.
    // SAFETY: disable_event_tracking is sound when no CudaSlice is shared
    // between streams (module docs of cudarc); this process creates exactly
    // one stream (here) and no buffer exists yet.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(|e| format!("creating a CUDA stream: {e}"))?;
    let info = DeviceInfo {
        name,
        ordinal,
        compute_capability: (major, minor),
        driver_cuda_version,
        nvrtc_version,
        multiprocessors,
    };
    Ok(Arc::new(Device {
        ctx,
        stream,
        info,
        arch: format!("sm_{major}{minor}"),
        modules: Mutex::new(HashMap::new()),
        watchdog,
    }))
}

impl Device {
    /// The module of kernel source `id`, compiled for this device and loaded
    /// on first use; the same result (or reason) every later time.
    pub fn module(&self, id: KernelId) -> Result<Arc<CudaModule>, String> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        modules
            .entry(id)
            .or_insert_with(|| {
                let extra = nvrtc::extra_options()?;
                let arch = id.arch(&self.arch);
                let compiled = nvrtc::compile(&id.source(), &arch, &extra).map_err(|e| e.to_string())?;
                guarded(|| self.ctx.load_module(Ptx::from_binary(compiled.cubin)))?
                    .map_err(|e| format!("loading {} for {arch}: {e}", id.source().name))
            })
            .clone()
    }

    /// Loads machine code compiled elsewhere as the module of `id` (a
    /// mutants child compiles first, to compare the code with the
    /// original's); an error when `id` was loaded already.
    pub fn load_compiled(&self, id: KernelId, cubin: Vec<u8>) -> Result<(), String> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if modules.contains_key(&id) {
            return Err(format!("{} is loaded already", id.source().name));
        }
        let module = guarded(|| self.ctx.load_module(Ptx::from_binary(cubin)))?
            .map_err(|e| format!("loading {} for {}: {e}", id.source().name, self.arch));
        modules.insert(id, module.clone());
        module.map(|_| ())
    }

    /// The architecture the kernels are compiled for (`sm_90`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// A kernel of module `id`.
    pub fn function(&self, id: KernelId, name: &str) -> Result<CudaFunction, String> {
        self.module(id)?.load_function(name).map_err(|e| format!("kernel {name}: {e}"))
    }

    /// Blocks of `threads` that this device keeps resident for `f` with
    /// `smem` bytes of dynamic shared memory, over all multiprocessors: a
    /// kernel whose warps loop over the rows never needs a larger grid.
    pub fn resident_blocks(
        &self,
        f: &CudaFunction,
        threads: u32,
        smem: usize,
        what: &str,
    ) -> Result<u32, SubjectError> {
        // The occupancy query is a plain driver call: make the context current
        // on this thread (a rayon worker, say) first.
        self.ctx.bind_to_thread().map_err(dev_err(what))?;
        let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(threads, smem, None).map_err(dev_err(what))?;
        if per_sm == 0 {
            return Err(SubjectError::Unavailable(format!(
                "{what}: a block of {threads} threads with {smem} bytes of shared memory does not fit on {}",
                self.info.name
            )));
        }
        Ok(per_sm.saturating_mul(self.info.multiprocessors.max(1) as u32))
    }

    /// Waits for the stream, at most the watchdog's time, and checks for an
    /// asynchronous error. A launch still running then fails the case as a
    /// hang: a blocking synchronize would wait for ever on a kernel that
    /// never ends, and the case that hangs would never be named. The hung
    /// kernel keeps the stream, so the context is recorded as lost
    /// ([`lost`]): nothing later waits behind it.
    pub fn finish(&self, what: &str) -> Result<(), SubjectError> {
        if let Some(why) = lost() {
            return Err(SubjectError::Device(format!("{what}: not run, the GPU context is lost ({why})")));
        }
        let done = self.ctx.new_event(Some(cu::CUevent_flags::CU_EVENT_DISABLE_TIMING)).map_err(dev_err(what))?;
        done.record(&self.stream).map_err(dev_err(what))?;
        let start = Instant::now();
        // Polled, not waited on: a nap that doubles from 10 us to 2 ms costs
        // a short launch little and a long one no CPU core.
        let mut nap = Duration::from_micros(10);
        while !done.try_is_complete().map_err(dev_err(what))? {
            if start.elapsed() >= self.watchdog {
                let msg = format!(
                    "{what}: the kernel did not finish within {} s ({}): it hangs, or runs far longer than \
                     such a case needs",
                    self.watchdog.as_secs_f64(),
                    knobs::KERNEL_TIMEOUT
                );
                let _ = LOST.set(msg.clone());
                return Err(SubjectError::Device(msg));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(2));
        }
        self.stream.synchronize().map_err(dev_err(what))?;
        self.ctx.check_err().map_err(dev_err(what))
    }

    /// Times `f` (which enqueues GPU work on this device's stream) with CUDA
    /// events: `warmup` untimed calls, then `iters` timed ones; returns each
    /// timed call's microseconds.
    pub fn time_us(
        &self,
        warmup: usize,
        iters: usize,
        f: impl FnMut() -> Result<(), SubjectError>,
    ) -> Result<Vec<f64>, SubjectError> {
        self.time_batched_us(warmup, iters, 1, f)
    }

    /// As `time_us`, but each timing spans `batch` calls enqueued back to
    /// back and reports their mean. With one call per timing, the start event
    /// fires before the host has submitted the work, so a small graph's time
    /// includes the host's submission latency (about 13 us for a one-kernel
    /// graph, measured on an H200 host); back to back, the GPU
    /// runs ahead of nothing but its own work, as in a training loop whose
    /// host runs ahead.
    pub fn time_batched_us(
        &self,
        warmup: usize,
        iters: usize,
        batch: usize,
        mut f: impl FnMut() -> Result<(), SubjectError>,
    ) -> Result<Vec<f64>, SubjectError> {
        let ev = || self.ctx.new_event(Some(cu::CUevent_flags::CU_EVENT_DEFAULT)).map_err(dev_err("event"));
        let batch = batch.max(1);
        for _ in 0..warmup {
            f()?;
        }
        self.stream.synchronize().map_err(dev_err("warm-up"))?;
        let mut out = Vec::with_capacity(iters);
        let (start, end) = (ev()?, ev()?);
        for _ in 0..iters {
            start.record(&self.stream).map_err(dev_err("event record"))?;
            for _ in 0..batch {
                f()?;
            }
            end.record(&self.stream).map_err(dev_err("event record"))?;
            let ms = start.elapsed_ms(&end).map_err(dev_err("event elapsed"))?;
            out.push(ms as f64 * 1000.0 / batch as f64);
        }
        self.ctx.check_err().map_err(dev_err("timing"))?;
        Ok(out)
    }

    /// Captures what `f` enqueues on this device's stream into a CUDA graph
    /// (nothing runs while capturing); replay it with `CudaGraph::launch`.
    pub fn capture(&self, f: impl FnOnce() -> Result<(), SubjectError>) -> Result<CudaGraph, SubjectError> {
        self.stream
            .begin_capture(cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(dev_err("begin capture"))?;
        let enqueued = f();
        // End the capture whatever happened, so the stream is usable again.
        let graph = self.stream.end_capture(cu::CUgraphInstantiate_flags(0)).map_err(dev_err("end capture"));
        enqueued?;
        graph?.ok_or_else(|| SubjectError::Device("the capture recorded no work".into()))
    }

    /// Measured device-to-device copy bandwidth in bytes per second (bytes
    /// read plus bytes written), median of `iters` copies of `bytes`.
    pub fn copy_bandwidth(&self, bytes: usize, iters: usize) -> Result<f64, SubjectError> {
        let s = &self.stream;
        let n = bytes / 4;
        let src: CudaSlice<f32> = s.alloc_zeros(n).map_err(dev_err("alloc"))?;
        let mut dst: CudaSlice<f32> = s.alloc_zeros(n).map_err(dev_err("alloc"))?;
        let mut times = self.time_us(3, iters.max(1), || s.memcpy_dtod(&src, &mut dst).map_err(dev_err("copy")))?;
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        Ok((2 * n * 4) as f64 / (med * 1e-6))
    }
}

/// An index or size as the kernels' i32, or why the case is unavailable.
pub fn as_i32(x: usize, what: &str) -> Result<i32, SubjectError> {
    i32::try_from(x).map_err(|_| SubjectError::Unavailable(format!("{what} = {x} exceeds the kernels' i32 range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bench skips only without a usable GPU and without a report asked
    /// for; with a GPU (the nightly's machine) every subject that does not
    /// load fails.
    #[test]
    fn a_bench_skips_only_where_there_is_no_gpu_and_no_report() {
        let skip = bench_without_subject("b", "why", true);
        let report = bench_without_subject("b", "why", false);
        if device().is_err() {
            assert_eq!(skip, Ok("SKIPPED b: no CUDA subject: why".to_string()));
            assert!(report.is_err_and(|e| e.contains("no timings written")));
        } else {
            assert!(skip.is_err_and(|e| e.contains("the GPU is there")));
            assert!(report.is_err_and(|e| e.contains("the GPU is there")));
        }
    }

    // Only the classification: setting LOST in a test would stop every
    // runner test of this process.
    #[test]
    fn kernel_faults_are_sticky_and_resource_errors_are_not() {
        use cu::cudaError_enum as C;
        for c in [C::CUDA_ERROR_ILLEGAL_ADDRESS, C::CUDA_ERROR_LAUNCH_FAILED, C::CUDA_ERROR_MISALIGNED_ADDRESS] {
            assert!(is_sticky(&DriverError(c)), "{c:?}");
        }
        for c in [C::CUDA_ERROR_OUT_OF_MEMORY, C::CUDA_ERROR_INVALID_VALUE, C::CUDA_ERROR_NOT_FOUND] {
            assert!(!is_sticky(&DriverError(c)), "{c:?}");
        }
    }
}
