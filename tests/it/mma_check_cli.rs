//! The MMA model check's command line as the nightly meets it: it fails
//! closed without a GPU (exit 2, the reason, a JSON summary saying so), it
//! refuses bad arguments, and its CPU side shows that the generator's inputs
//! tell every neighbour from the model, without claiming a confirmation (the
//! GPU side runs only on a GPU host).

use crate::common::{read_json, tmp_json};
use std::process::Command;

fn mma_check() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bitparity-mma-check"))
}

/// Device ordinal 4096 exists nowhere: with or without a driver, the check
/// cannot run, and says why.
#[test]
fn without_a_gpu_it_fails_closed_with_the_reason() {
    let path = tmp_json("unavailable");
    let out = mma_check()
        .env("BITPARITY_CUDA_DEVICE", "4096")
        .args(["--cases", "3", "--json"])
        .arg(&path)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unavailable: "), "{stderr}");
    let v = read_json(&path);
    assert_eq!(v["status"], "unavailable");
    assert!(v["reason"].as_str().is_some_and(|r| !r.is_empty()));
    assert!(v["device"].is_null());
    assert!(v["classes"].as_object().is_some_and(|c| c.is_empty()), "nothing judged, nothing counted");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn bad_arguments_are_refused() {
    for args in [
        &["--cases", "0"][..],
        &["--cases", "100001"],
        &["--seed", "x"],
        &["--json"],
        &["--frobnicate"],
        &["--instruction", "hmma"],
        &["--instruction"],
    ] {
        let out = mma_check().args(args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: no reason given");
    }
}

#[test]
fn the_cpu_side_tells_every_neighbour_apart_and_confirms_nothing() {
    let path = tmp_json("cpu");
    let out =
        mma_check().args(["--cpu-only", "--cases", "20", "--seed", "7", "--json"]).arg(&path).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let v = read_json(&path);
    assert_eq!(v["status"], "cpu-only");
    assert!(v["reason"].as_str().is_some_and(|r| r.contains("nothing is confirmed")));
    assert!(v["device"].is_null());
    let classes = v["classes"].as_object().expect("classes");
    assert_eq!(classes.len(), 12);
    for name in ["frac-23 (V100)", "frac-24 (A100)", "frac-26", "renormalised products", "round-to-nearest output"] {
        let refuted: u64 = classes.values().map(|c| c["refutations"][name].as_u64().expect("a count")).sum();
        assert!(refuted > 0, "{name} not told apart");
    }
    let _ = std::fs::remove_file(&path);
}
