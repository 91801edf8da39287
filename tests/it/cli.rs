//! The command line as a user meets it: exit codes, JSON, the corpus round
//! trip of a planted failure, clear errors on bad input.

use crate::common::tmp;
use std::process::Command;

fn bitparity() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bitparity"))
}

#[test]
fn check_passes_and_writes_json() {
    let dir = tmp("json");
    let json = dir.join("s.json");
    let out = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "40", "--seed", "3", "--quiet", "--no-save", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("conformance") && stdout.contains("passed"));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["property"] == "accuracy" && r["cases"] == 40 && r["failures"] == 0));
    for key in ["op", "property", "profile", "subject", "cases", "failures", "worst_error_over_bound"] {
        assert!(rows[0].get(key).is_some(), "missing {key}");
    }
    assert!(v["ops"][0]["classes"]["clamp-tie"].is_number());
    assert!(v["ops"][0]["skipped"].is_array());
}

#[test]
fn a_planted_failure_goes_to_the_corpus_and_replays() {
    let dir = tmp("corpus");
    let out = bitparity()
        .args([
            "check",
            "--subject",
            "bug:offset-ignored",
            "--property",
            "conformance",
            "--cases",
            "50",
            "--seed",
            "1",
            "--quiet",
            "--corpus",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a planted bug must fail the check");
    let entries: Vec<_> = std::fs::read_dir(dir.join("seqwise_loss")).unwrap().collect();
    assert_eq!(entries.len(), 1);
    // Replaying: correct subjects pass it, the planted bug still fails it.
    let out = bitparity().arg("replay").arg(&dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("bug:offset-ignored: still fails"), "{stdout}");
}

#[test]
fn check_writes_an_html_report_and_refuses_an_unwritable_path_before_the_run() {
    let dir = tmp("html");
    let page = dir.join("report.html");
    let out = bitparity()
        .args(["check", "--op", "router", "--subject", "bug:fast-exp", "--property", "conformance"])
        .args(["--property", "accuracy", "--cases", "20", "--seed", "2", "--quiet", "--no-save", "--html"])
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    for s in [
        "id=\"summary-router\"",
        "id=\"failures-router\"",
        "FAILED router / conformance / bug:fast-exp",
        "ULP distance",
        "<svg",
    ] {
        assert!(html.contains(s), "{s} missing");
    }
    // No temporary file is left beside it (written atomically).
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    for bad in [dir.join("no-such-folder").join("r.html"), dir.clone()] {
        let out = bitparity()
            .args(["check", "--cases", "100000", "--quiet", "--no-save", "--html"])
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}: {}", bad.display(), String::from_utf8_lossy(&out.stderr));
        let out = bitparity().args(["merge", "x.json", "--html"]).arg(&bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&bad.display().to_string()));
    }
}

#[test]
fn bad_input_gets_a_clear_error() {
    let out = bitparity().args(["check", "--subject", "nonsense"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown subject"));
    let out = bitparity().args(["check", "--cases", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = bitparity().args(["check", "--op", "nope"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown op"));
    // A watchdog of 0 s would fail every launch: refused, named.
    for bad in ["0", "-1", "soon"] {
        let out = bitparity().args(["check", "--cases", "1"]).env("BITPARITY_KERNEL_TIMEOUT", bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("BITPARITY_KERNEL_TIMEOUT"), "{bad}");
    }
    let dir = tmp("garbage");
    let f = dir.join("x.json");
    std::fs::write(&f, "{not json").unwrap();
    // A bad entry is reported with its path and reason, and fails the run.
    let out = bitparity().arg("replay").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not a corpus entry"));
}

#[test]
fn a_profile_less_subject_is_judged_by_the_any_order_bound_and_its_bug_replays() {
    // anyorder:model:serial: accuracy judged (no n/a), conformance n/a.
    let out = bitparity()
        .args(["check", "--op", "router", "--subject", "anyorder:model:serial", "--cases", "20", "--seed", "4"])
        .args(["--quiet", "--no-save", "--property", "accuracy", "--property", "conformance", "--json", "-"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let json = &stdout[stdout.find('{').expect("a JSON summary")..];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let row = |p: &str| rows.iter().find(|r| r["property"] == p && r["subject"] == "anyorder:model:serial").unwrap();
    assert_eq!((row("accuracy")["cases"].as_u64(), row("accuracy")["failures"].as_u64()), (Some(20), Some(0)));
    assert!(row("conformance")["not_applicable"].as_str().unwrap().contains("claims no profile"));
    // A planted bug seen as profile-less fails accuracy, is saved under its
    // own name, and replays as still failing.
    let dir = tmp("anyorder");
    let out = bitparity()
        .args(["check", "--op", "router", "--subject", "anyorder:bug:bias-in-weights", "--property", "accuracy"])
        .args(["--cases", "40", "--seed", "4", "--quiet", "--corpus"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let saved = std::fs::read_dir(dir.join("router")).unwrap().count();
    assert_eq!(saved, 1);
    let out = bitparity().arg("replay").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    // Once is enough.
    let out = bitparity().args(["check", "--subject", "anyorder:anyorder:cuda", "--cases", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
