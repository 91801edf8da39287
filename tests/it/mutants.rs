//! `bitparity mutants` from the command line, without a GPU or NVRTC: the
//! listing, the selection, bad arguments, and a child asked for a mutant
//! that does not exist. (The NVRTC front end on every mutant is CI's
//! `mutants --compile-only` step; the kills need the GPU host.)

use std::process::{Command, Output};

fn bitparity(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bitparity")).args(args).output().expect("bitparity runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn list_names_each_mutant_once_with_its_diff() {
    let o = bitparity(&["mutants", "--list", "--kernel", "seqwise_loss.cu"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let ids: Vec<&str> = out.lines().filter(|l| !l.starts_with(' ')).map(|l| l.split(' ').next().unwrap()).collect();
    assert!(ids.len() > 100, "{}", ids.len());
    assert!(ids.iter().all(|i| i.starts_with("seqwise_loss.cu:")));
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
    assert!(err.contains(&format!("{} mutants", ids.len())), "{err}");
    // Each mutant shows its line before and after.
    assert_eq!(out.lines().filter(|l| l.starts_with("    -")).count(), ids.len());
    assert_eq!(out.lines().filter(|l| l.starts_with("    +")).count(), ids.len());
}

#[test]
fn a_sample_keeps_n_per_file_over_the_rules() {
    let o = bitparity(&["mutants", "--list", "--kernel", "router.cu", "--sample", "13"]);
    let (out, _) = text(&o);
    let heads: Vec<&str> = out.lines().filter(|l| !l.starts_with(' ')).collect();
    let kept: Vec<&&str> = heads.iter().filter(|l| !l.contains("(sampled out)")).collect();
    assert_eq!(kept.len(), 13);
    // Round-robin over the rules: 13 kept from router.cu's rules cover at
    // least ten distinct rules.
    let rules: std::collections::HashSet<&str> = kept.iter().map(|l| l.rsplit(' ').next().unwrap()).collect();
    assert!(rules.len() >= 10, "{rules:?}");
    // The same seed draws the same sample; another seed another.
    let again = bitparity(&["mutants", "--list", "--kernel", "router.cu", "--sample", "13"]);
    assert_eq!(again.stdout, o.stdout);
    let other = bitparity(&["mutants", "--list", "--kernel", "router.cu", "--sample", "13", "--seed", "2"]);
    assert_ne!(other.stdout, o.stdout);
}

#[test]
fn an_id_selects_one_mutant() {
    let (all, _) = text(&bitparity(&["mutants", "--list", "--kernel", "common.cuh"]));
    let id = all.lines().nth(3 * 5).unwrap().split(' ').next().unwrap().to_string();
    let (out, _) = text(&bitparity(&["mutants", "--list", "--id", &id]));
    assert_eq!(out.lines().filter(|l| !l.starts_with(' ')).count(), 1);
    assert!(out.starts_with(&id), "{out}");
}

#[test]
fn an_op_selects_its_kernels_and_the_headers_they_include() {
    let (out, _) = text(&bitparity(&["mutants", "--list", "--op", "shared_expert"]));
    let files: std::collections::BTreeSet<&str> =
        out.lines().filter(|l| !l.starts_with(' ')).map(|l| l.split(':').next().unwrap()).collect();
    // The op's kernels: the strict one (`cuda`) and the tensor cores'
    // (`cuda-tc`, `cuda-wgmma`), and the headers they include.
    assert_eq!(
        files.into_iter().collect::<Vec<_>>(),
        [
            "common.cuh",
            "expf.cuh",
            "expf_hard.cuh",
            "shared_expert.cu",
            "shared_expert_tc.cu",
            "shared_expert_wgmma.cu",
            "swiglu.cuh"
        ]
    );
}

#[test]
fn bad_arguments_are_usage_errors() {
    for (args, want) in [
        (&["mutants", "--list", "--kernel", "nope.cu"][..], "not a mutated file"),
        (&["mutants", "--list", "--op", "nope"][..], "no op with a CUDA kernel"),
        (&["mutants", "--list", "--id", "router.cu:00000000"][..], "no such mutant"),
        (&["mutants", "--seconds=-1"][..], "--seconds must be a positive"),
        (&["mutants", "--seconds", "nan"][..], "--seconds must be a positive"),
        (&["mutants", "--triage", "/nonexistent/triage.toml"][..], "triage.toml"),
        (&["mutants", "--sanitizer", "memcheck,nope"][..], "no tool \"nope\""),
        (&["mutants", "--sanitizer", "memcheck", "--sanitizer-cases", "0"][..], "at least 1"),
        (&["mutants", "--list", "--property", "accuracy"][..], "not a property a mutant is hunted with"),
        (&["mutants", "--kernel", "router.cu", "--corpus", "/nonexistent/corpus"][..], "no such folder"),
    ] {
        let o = bitparity(args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_triage_file_naming_a_mutant_twice_is_refused() {
    let dir = std::env::temp_dir().join(format!("bp-mutants-triage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.toml");
    std::fs::write(&p, "[[equivalent]]\nid = 'a'\nreason = 'r'\n[[equivalent]]\nid = 'a'\nreason = 'r'\n").unwrap();
    let o = bitparity(&["mutants", "--list", "--triage", p.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("listed twice"), "{err}");
}

#[test]
fn a_child_asked_for_no_such_mutant_says_so_in_its_verdict() {
    let o = bitparity(&[
        "mutant-child",
        "--id",
        "router.cu:00000000",
        "--seed",
        "1",
        "--cases",
        "1",
        "--originals",
        "/tmp",
    ]);
    let (out, _) = text(&o);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["outcome"], "crashed");
    assert!(v["detail"].as_str().unwrap().contains("no mutant"), "{v}");
}

#[test]
fn a_child_asked_for_the_originals_of_no_such_kernel_says_so_in_its_verdict() {
    let o =
        bitparity(&["mutant-child", "--id", "original:nope.cu", "--seed", "1", "--cases", "1", "--originals", "/tmp"]);
    let (out, _) = text(&o);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["outcome"], "crashed");
    assert!(v["detail"].as_str().unwrap().contains("no op kernel \"nope.cu\""), "{v}");
}

#[test]
fn combined_runs_that_judged_nothing_exit_3_and_a_kill_exits_0() {
    let (all, _) = text(&bitparity(&["mutants", "--list", "--kernel", "common.cuh"]));
    let id = all.lines().next().unwrap().split(' ').next().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("bp-mutants-from-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, row: serde_json::Value| {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::json!({ "header": "h", "mutants": [row] }).to_string()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let crashed = write("crashed.json", serde_json::json!({ "id": id, "outcome": "crashed", "detail": "no GPU" }));
    let o = bitparity(&["mutants", "--kernel", "common.cuh", "--from", &crashed]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o).1);
    let killed = write(
        "killed.json",
        serde_json::json!({ "id": id, "outcome": "killed", "op": "router", "property": "conformance", "case": 0, "message": "m" }),
    );
    let o = bitparity(&["mutants", "--kernel", "common.cuh", "--from", &crashed, "--from", &killed]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(out.contains("common.cuh") && out.contains("100.0%"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
