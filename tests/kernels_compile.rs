//! CI compiles every kernel with NVRTC, with the options the CUDA subject
//! uses, and fails on any error or warning (a non-empty NVRTC log).
//!
//! NVRTC comes from PyPI (nvidia-cuda-nvrtc==13.0.*): `. scripts/nvrtc-env`
//! installs it and puts it on LD_LIBRARY_PATH. Without NVRTC the test prints
//! an explicit skip, unless BITPARITY_REQUIRE_NVRTC=1 (CI sets it), where a
//! missing NVRTC fails.

use bitparity::subject::cuda::{compile, nvrtc_version, CI_ARCH, KERNELS};

#[test]
fn every_kernel_compiles_without_warnings() {
    let required = std::env::var("BITPARITY_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    let version = match nvrtc_version() {
        Ok(v) => v,
        Err(reason) if !required => {
            println!("SKIPPED kernels_compile: {reason}");
            eprintln!("SKIPPED kernels_compile: {reason}");
            return;
        }
        Err(reason) => panic!("BITPARITY_REQUIRE_NVRTC=1 but {reason}"),
    };
    let mut failures = Vec::new();
    for kernel in KERNELS {
        match compile(kernel, CI_ARCH) {
            Ok(c) if c.log.is_empty() => {
                println!(
                    "compiled {} for {} with NVRTC {}.{}: {} bytes",
                    c.name,
                    c.arch,
                    version.0,
                    version.1,
                    c.cubin.len()
                )
            }
            Ok(c) => failures.push(format!("{} ({}): NVRTC log not empty:\n{}", c.name, c.arch, c.log)),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
