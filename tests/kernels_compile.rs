//! CI compiles every kernel with NVRTC, with the options the CUDA subject
//! uses, and fails on any error or warning (a non-empty NVRTC log).
//!
//! BITPARITY_NVRTC_EXTRA's definitions (experiment switches) apply here as
//! in the subjects, so that a switch's code is compiled before a GPU run.
//!
//! NVRTC comes from PyPI (nvidia-cuda-nvrtc==13.0.*): `. scripts/nvrtc-env`
//! installs it and puts it on LD_LIBRARY_PATH. Without NVRTC the test is
//! reported `ignored` with the reason (its own harness: libtest cannot skip at
//! run time), unless BITPARITY_REQUIRE_NVRTC=1 (CI sets it), where a missing
//! NVRTC fails.

use bitparity::subject::cuda::nvrtc::{compile, extra_options, version, CI_ARCH};
use bitparity::subject::cuda::KernelId;

const NAME: &str = "every_kernel_compiles_without_warnings";

fn main() {
    let start = std::time::Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        // `--list --ignored` (cargo-nextest asks) lists the ignored tests:
        // none is ignored at listing time.
        if !args.iter().any(|a| a == "--ignored") {
            println!("{NAME}: test");
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| NAME.contains(f.as_str())) {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out; finished in 0.00s\n");
        return;
    }
    println!("\nrunning 1 test");
    let required = std::env::var("BITPARITY_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    let (passed, failed, ignored, detail) = match version() {
        Err(reason) if !required => {
            println!("test {NAME} ... ignored, {reason}");
            (0, 0, 1, None)
        }
        Err(reason) => (0, 1, 0, Some(format!("BITPARITY_REQUIRE_NVRTC=1 but {reason}"))),
        Ok(version) => {
            let mut failures = Vec::new();
            let extra = extra_options().unwrap_or_else(|e| {
                failures.push(e);
                Vec::new()
            });
            // One NVRTC program per kernel, compiled on every core at once
            // (NVRTC compiles distinct programs concurrently); reported in
            // KernelId order.
            let next = std::sync::atomic::AtomicUsize::new(0);
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(KernelId::ALL.len());
            let mut results: Vec<(usize, Result<String, String>)> = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..threads)
                    .map(|_| {
                        scope.spawn(|| {
                            let mut done = Vec::new();
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(id) = KernelId::ALL.get(i) else { return done };
                                done.push((i, compiled(*id, version, &extra)));
                            }
                        })
                    })
                    .collect();
                workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
            });
            results.sort_by_key(|(i, _)| *i);
            for (_, r) in results {
                match r {
                    Ok(line) => println!("{line}"),
                    Err(e) => failures.push(e),
                }
            }
            if failures.is_empty() {
                (1, 0, 0, None)
            } else {
                (0, 1, 0, Some(failures.join("\n\n")))
            }
        }
    };
    if passed == 1 {
        println!("test {NAME} ... ok");
    }
    if let Some(d) = &detail {
        println!("test {NAME} ... FAILED\n\nfailures:\n\n---- {NAME} ----\n{d}");
    }
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; 0 filtered out; finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(101);
    }
}

/// One kernel compiled: its line of the log, or why it failed.
fn compiled(id: KernelId, version: (i32, i32), extra: &[String]) -> Result<String, String> {
    match compile(&id.source(), &id.arch(CI_ARCH), extra) {
        Ok(c) if c.log.is_empty() => Ok(format!(
            "compiled {} for {} with NVRTC {}.{}{}: {} bytes of machine code, empty log",
            c.name,
            c.arch,
            version.0,
            version.1,
            if extra.is_empty() { String::new() } else { format!(" and {}", extra.join(" ")) },
            c.cubin.len()
        )),
        Ok(c) => Err(format!("{} ({}): NVRTC log not empty:\n{}", c.name, c.arch, c.log)),
        Err(e) => Err(e.to_string()),
    }
}
