//! A kernel launch that may overlap the launch before it in its stream
//! (CUDA's programmatic dependent launch): `cuLaunchKernelEx` with
//! `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`, which cudarc's
//! launch builder does not set.
//!
//! Such a launch's blocks may start once every block of the kernel before
//! it has run `griddepcontrol.launch_dependents` (or exited), and run until
//! their `griddepcontrol.wait`, which returns when that kernel has completed
//! and its writes are visible. So only a kernel that waits before it reads
//! anything the kernel before it writes, and before it writes anything that
//! kernel reads, may be launched so (`kernels/shared_expert_wgmma.cu`'s
//! launch contract says what they do before the wait). Where the work before
//! it in the stream is not a kernel (a copy, a memset), the launch waits for
//! it as any launch does.

use cudarc::driver::{sys, CudaFunction, CudaStream, DeviceRepr, DriverError, LaunchConfig};
use std::ffi::c_void;
use std::marker::PhantomData;

/// A kernel's arguments as the driver takes them: the address of each, in
/// the order of the kernel's parameters. The values outlive the launch
/// (`'a`); the driver copies them when it enqueues it.
#[derive(Default)]
pub struct KernelArgs<'a> {
    ptrs: Vec<*mut c_void>,
    values: PhantomData<&'a ()>,
}

impl<'a> KernelArgs<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next parameter's value.
    pub fn arg<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.ptrs.push(value as *const T as *mut c_void);
        self
    }
}

/// Enqueues `function` on `stream` with `args`; where `overlap_previous`,
/// as a programmatic dependent launch (the module's docs).
///
/// # Safety
/// As cudarc's `LaunchArgs::launch`: `args` are the kernel's parameters, in
/// order and of their types; `config` is a valid shape for it; the memory
/// it touches outlives it. Where `overlap_previous`, the kernel waits
/// (`griddepcontrol.wait`) as the module's docs say.
pub unsafe fn launch(
    stream: &CudaStream,
    function: &CudaFunction,
    config: LaunchConfig,
    args: &mut KernelArgs<'_>,
    overlap_previous: bool,
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: an all-zero attribute is a valid value of the C union; its id
    // and the one field the id selects are set below.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let (grid, block) = (config.grid_dim, config.block_dim);
    let cfg = sys::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block.0,
        blockDimY: block.1,
        blockDimZ: block.2,
        sharedMemBytes: config.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: overlap_previous as u32,
    };
    // SAFETY: cfg and attr live across the call; the argument addresses are
    // the caller's (this function's contract); the driver copies both.
    unsafe { sys::cuLaunchKernelEx(&cfg, function.cu_function(), args.ptrs.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
}
