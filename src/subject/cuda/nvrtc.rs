//! NVRTC: the kernels compiled at run time for the device's own
//! architecture, with options that keep every profile's rules. The one place
//! that calls NVRTC; each status code becomes a typed [`NvrtcError`] through
//! cudarc's thin `result` layer.

use super::{KernelSource, HEADERS};
use crate::knobs;
use cudarc::nvrtc::result::{self as nvrtc_result, NvrtcError};
use cudarc::nvrtc::sys as nvrtc_sys;
use std::ffi::{c_char, c_int, CString};
use std::fmt;

/// The architecture the CI compile test targets (the H200 is sm_90).
pub const CI_ARCH: &str = "sm_90";

/// Why a kernel source did not compile (or NVRTC could not be used).
#[derive(Clone, Debug)]
pub enum CompileError {
    /// libnvrtc cannot be loaded here.
    Missing(String),
    /// An NVRTC call failed.
    Call { what: &'static str, error: NvrtcError },
    /// NVRTC rejected the source: its log.
    Rejected { kernel: &'static str, arch: String, log: String },
    /// A source, header or option with a NUL byte.
    Nul(&'static str),
    /// cudarc panicked (a missing symbol, say).
    Panicked(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Missing(m) => f.write_str(m),
            CompileError::Call { what, error } => write!(f, "{what} failed: {error}"),
            CompileError::Rejected { kernel, arch, log } => write!(f, "{kernel} ({arch}) did not compile:\n{log}"),
            CompileError::Nul(what) => write!(f, "a NUL byte in {what}"),
            CompileError::Panicked(m) => write!(f, "NVRTC call panicked: {m}"),
        }
    }
}

/// NVRTC options that keep every profile's rules
/// (docs/ops/README.md#rules-every-profile-keeps): no FMA contraction, IEEE
/// division and square root, subnormals kept. `arch` is a real architecture
/// (`sm_90`), so NVRTC emits machine code for it (CUBIN) and no JIT stands
/// between these options and the GPU.
pub fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--fmad=false".into(),
        "--prec-div=true".into(),
        "--prec-sqrt=true".into(),
        "--ftz=false".into(),
        "--std=c++17".into(),
    ]
}

/// Extra NVRTC options for tuning experiments, from `BITPARITY_NVRTC_EXTRA`
/// (whitespace-separated, default none). Only `-DBP_<NAME>=<value>`
/// definitions of the kernels' launch-shape knobs are accepted, so the
/// profile's options cannot be overridden; anything else is refused (an
/// error, not silently dropped).
pub fn extra_options() -> Result<Vec<String>, String> {
    let Some(s) = knobs::get::<String>(knobs::NVRTC_EXTRA)? else { return Ok(Vec::new()) };
    s.split_whitespace()
        .map(|o| {
            if o.starts_with("-DBP_") {
                Ok(o.to_string())
            } else {
                Err(format!("{}: {o:?} is not a -DBP_<knob>=<value> definition", knobs::NVRTC_EXTRA))
            }
        })
        .collect()
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

/// Runs `f`, turning a panic inside cudarc (a missing symbol, say) into an
/// error instead of unwinding through the caller.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|p| format!("CUDA library call panicked: {}", crate::props::panic_message(&*p)))
}

/// Whether NVRTC can be loaded here, and its version.
pub fn version() -> Result<(i32, i32), CompileError> {
    // SAFETY: `is_culib_present` only tries to dlopen the library names; it
    // calls no symbol.
    if !unsafe { nvrtc_sys::is_culib_present() } {
        return Err(CompileError::Missing(
            "NVRTC not found: libnvrtc.so.13 is not on the library path \
             (source scripts/nvrtc-env, or add CUDA 13's lib folder to LD_LIBRARY_PATH)"
                .into(),
        ));
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library loads (checked above) and both pointers are valid
    // for writes for the duration of the call.
    let rc = guarded(|| unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }).map_err(CompileError::Panicked)?;
    rc.result().map_err(|error| CompileError::Call { what: "nvrtcVersion", error })?;
    Ok((major, minor))
}

/// Compiles one kernel source with [`options`] for `arch` (`sm_90`), plus
/// `extra` options, with the shared [`HEADERS`].
pub fn compile(kernel: &KernelSource, arch: &str, extra: &[String]) -> Result<CompiledKernel, CompileError> {
    let headers: Vec<(&str, &str)> = HEADERS.iter().map(|h| (h.name, h.text)).collect();
    compile_with(kernel.name, kernel.text, &headers, arch, extra, Output::Cubin)
}

/// What a compile produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Machine code for `arch`.
    Cubin,
    /// Only NVRTC's front end (`--fdevice-syntax-only`: parsing, templates
    /// instantiated, types checked), no code: the mutants' quick compile
    /// check. The result's `cubin` is empty.
    SyntaxOnly,
}

/// Compiles source `text` of kernel `name` with the given (name, text)
/// headers: [`compile`] with every input explicit (a mutant is a source or
/// header that is not the embedded one).
pub fn compile_with(
    name: &'static str,
    text: &str,
    headers: &[(&'static str, &str)],
    arch: &str,
    extra: &[String],
    output: Output,
) -> Result<CompiledKernel, CompileError> {
    version()?;
    guarded(|| compile_loaded(name, text, headers, arch, extra, output)).map_err(CompileError::Panicked)?
}

fn compile_loaded(
    kernel: &'static str,
    text: &str,
    headers: &[(&'static str, &str)],
    arch: &str,
    extra: &[String],
    output: Output,
) -> Result<CompiledKernel, CompileError> {
    let cstr = |s: &str, what: &'static str| CString::new(s).map_err(|_| CompileError::Nul(what));
    let src = cstr(text, kernel)?;
    let name = cstr(kernel, kernel)?;
    let header_texts = headers.iter().map(|&(n, t)| cstr(t, n)).collect::<Result<Vec<_>, _>>()?;
    let header_names = headers.iter().map(|&(n, _)| cstr(n, n)).collect::<Result<Vec<_>, _>>()?;
    let texts: Vec<*const c_char> = header_texts.iter().map(|s| s.as_ptr()).collect();
    let names: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();
    let mut prog: nvrtc_sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a NUL-terminated CString (or an array of them
    // of the stated length) that outlives the program, which is destroyed
    // below before they drop. (cudarc's `create_program` takes no headers.)
    unsafe {
        nvrtc_sys::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            texts.len() as c_int,
            texts.as_ptr(),
            names.as_ptr(),
        )
    }
    .result()
    .map_err(|error| CompileError::Call { what: "nvrtcCreateProgram", error })?;
    let mut opts = options(arch);
    opts.extend(extra.iter().cloned());
    if output == Output::SyntaxOnly {
        opts.push("--fdevice-syntax-only".into());
    }
    // SAFETY: `prog` was created above and is destroyed only at the end.
    let compiled = unsafe { nvrtc_result::compile_program(prog, &opts) };
    // SAFETY: as above; the log is a NUL-terminated buffer NVRTC filled.
    let log = unsafe { nvrtc_result::get_program_log(prog) }
        .map(|raw| {
            let bytes: Vec<u8> = raw.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).trim().to_string()
        })
        .unwrap_or_else(|e| format!("(no log: {e})"));
    let cubin = match compiled {
        Err(_) => Err(CompileError::Rejected { kernel, arch: arch.into(), log: log.clone() }),
        Ok(()) if output == Output::SyntaxOnly => Ok(Vec::new()),
        Ok(()) => cubin_of(prog),
    };
    // SAFETY: `prog` is a live program, destroyed exactly once.
    let _ = unsafe { nvrtc_result::destroy_program(prog) };
    Ok(CompiledKernel { name: kernel, arch: arch.to_string(), cubin: cubin?, log })
}

/// The machine code of a compiled program.
fn cubin_of(prog: nvrtc_sys::nvrtcProgram) -> Result<Vec<u8>, CompileError> {
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully; `size` is valid for writes.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) }
        .result()
        .map_err(|error| CompileError::Call { what: "nvrtcGetCUBINSize", error })?;
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds exactly the `size` bytes NVRTC asked for.
    unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char) }
        .result()
        .map_err(|error| CompileError::Call { what: "nvrtcGetCUBIN", error })?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_keep_the_profile_rules() {
        let o = options("sm_90");
        for want in ["--fmad=false", "--prec-div=true", "--ftz=false", "--gpu-architecture=sm_90"] {
            assert!(o.iter().any(|x| x == want), "{want}");
        }
    }
}
