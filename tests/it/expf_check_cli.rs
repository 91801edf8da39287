//! The exhaustive check's command line as the nightly meets it: it fails
//! closed without a GPU (exit 2, the reason, a JSON summary saying so), it
//! refuses bad arguments, and its CPU side passes on a range that holds
//! inputs of the hard-case table (the GPU side runs only on a GPU host).

use crate::common::{read_json, tmp_json};
use std::process::Command;

fn expf_check() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bitparity-expf-check"))
}

/// Device ordinal 4096 exists nowhere: with or without a driver, the check
/// cannot run, and says why.
#[test]
fn without_a_gpu_it_fails_closed_with_the_reason() {
    let path = tmp_json("unavailable");
    let out = expf_check()
        .env("BITPARITY_CUDA_DEVICE", "4096")
        .args(["--count", "1024", "--json"])
        .arg(&path)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("unavailable: "), "{stdout}");
    let v = read_json(&path);
    assert_eq!(v["status"], "unavailable");
    assert!(v["reason"].as_str().is_some_and(|r| !r.is_empty()));
    assert!(v["gpu"].is_null());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn bad_arguments_are_refused() {
    for args in
        [&["--count", "0"][..], &["--start", "0xffffffff", "--count", "2"], &["--chunk", "0"], &["--frobnicate"]]
    {
        let out = expf_check().args(args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: no reason given");
    }
}

/// 0x377eff81 and 0x39c6be5b are inputs on which the double evaluation
/// cannot decide (kernels/expf_hard.cuh): the range around them sends some
/// through MPFR, and every answer is checked against MPFR alone.
#[test]
fn the_cpu_side_passes_against_mpfr() {
    for start in ["0x377ef000", "0x39c6b000"] {
        let path = tmp_json(&format!("cpu-{start}"));
        let out = expf_check()
            .args(["--cpu-only", "--verify-cpu", "--start", start, "--count", "8192", "--chunk", "3000", "--json"])
            .arg(&path)
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let v = read_json(&path);
        assert_eq!(v["status"], "passed");
        assert_eq!(v["mode"], "cpu-vs-mpfr");
        assert_eq!(v["cpu_vs_mpfr"]["checked"], 8192);
        assert_eq!(v["cpu_vs_mpfr"]["mismatches"], 0);
        assert!(v["gpu"].is_null(), "no GPU side claimed");
        let _ = std::fs::remove_file(&path);
    }
}
