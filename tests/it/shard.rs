//! `check --shard i/n` and `merge`: the shards of a run together judge
//! exactly its cases, and their merged summary is the unsharded run's, byte
//! for byte but for the times, whatever the threads of each process.

use crate::common::{text, tmp};
use std::path::Path;
use std::process::{Command, Output};

fn bitparity(threads: usize) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bitparity"));
    c.env("RAYON_NUM_THREADS", threads.to_string());
    c
}

/// `check` with `args`, writing its summary to `json`; the process's output.
fn check(threads: usize, args: &[&str], shard: Option<&str>, json: &Path) -> Output {
    let mut c = bitparity(threads);
    c.arg("check").args(args).args(["--quiet", "--no-save", "--json"]).arg(json);
    if let Some(s) = shard {
        c.args(["--shard", s]);
    }
    c.output().unwrap()
}

/// The summary without its times (the one thing shards cannot reproduce).
fn timeless(path: &Path) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["seconds"] = 0.into();
    for o in v["ops"].as_array_mut().unwrap() {
        o["seconds"] = 0.into();
    }
    serde_json::to_string_pretty(&v).unwrap()
}

/// The table without its times.
fn timeless_table(s: &str) -> String {
    s.lines()
        .map(|l| match l.find(" cases in ") {
            Some(i) => l[..i].to_string(),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The HTML report without its times and its title (which names the
/// command: `check` or `merge`).
fn timeless_html(path: &Path) -> String {
    let page = std::fs::read_to_string(path).unwrap();
    let kept: Vec<&str> = page.lines().filter(|l| !l.contains("<title>") && !l.contains("<h1>")).collect();
    timeless_table(&kept.join("\n"))
}

/// Runs `args` unsharded (on 2 threads) and in `n` shards (on 1 thread
/// each, given to merge in reverse order); both summaries and tables. Both
/// also write their HTML reports, `whole.html` and `merged.html` in the
/// folder `name`.
fn unsharded_and_merged(name: &str, args: &[&str], n: usize) -> (String, String, Output, Output) {
    let dir = tmp(name);
    let whole = dir.join("whole.json");
    let whole_html = dir.join("whole.html");
    let with_html: Vec<&str> = args.iter().copied().chain(["--html", whole_html.to_str().unwrap()]).collect();
    let w = check(2, &with_html, None, &whole);
    let mut parts = Vec::new();
    for i in (1..=n).rev() {
        let p = dir.join(format!("shard-{i}.json"));
        let s = check(1, args, Some(&format!("{i}/{n}")), &p);
        assert!(matches!(s.status.code(), Some(0 | 1)), "shard {i}/{n}: {}", text(&s));
        parts.push(p);
    }
    let merged = dir.join("merged.json");
    let m = bitparity(1)
        .arg("merge")
        .args(&parts)
        .arg("--json")
        .arg(&merged)
        .arg("--html")
        .arg(dir.join("merged.html"))
        .output()
        .unwrap();
    (timeless(&whole), timeless(&merged), w, m)
}

#[test]
fn merged_shards_are_the_unsharded_run() {
    // Both ops, every property, no failure.
    let args = ["--cases", "25", "--seed", "11"];
    let (whole, merged, w, m) = unsharded_and_merged("clean", &args, 3);
    assert_eq!(w.status.code(), Some(0), "{}", text(&w));
    assert_eq!(m.status.code(), Some(0), "{}", text(&m));
    assert_eq!(whole, merged);
    assert_eq!(
        timeless_table(&String::from_utf8_lossy(&w.stdout)),
        timeless_table(&String::from_utf8_lossy(&m.stdout))
    );
    let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
    let ops = v["ops"].as_array().unwrap().len() as u64;
    assert!(ops >= 3, "every op ran");
    assert_eq!(v["cases"], 25 * ops, "25 cases of each op, each judged once");
    assert!(v["plan"]["shard"].is_null());
    // The histograms were added, not taken from one shard: every accuracy
    // row's counts cover all 25 cases' outputs, and each op's T sizes 25 cases.
    let mut histograms = 0;
    for row in v["rows"].as_array().unwrap() {
        let h = &row["error_over_bound_histogram"];
        if row["property"] == "accuracy" && row["not_applicable"].is_null() {
            let bins: u64 = h["log2"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
            let total =
                bins + ["zero", "undetermined", "unbounded"].iter().map(|k| h[k].as_u64().unwrap()).sum::<u64>();
            assert!(total >= 25, "{row}: fewer outputs than cases");
            histograms += 1;
        }
    }
    assert!(histograms as u64 >= ops, "an accuracy histogram per op at least");
    for o in v["ops"].as_array().unwrap() {
        let t = &o["shapes"][0];
        assert_eq!(t["dim"], "T");
        assert_eq!(t["by_bit_length"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>(), 25);
    }
    // The HTML report of the merge is the unsharded run's, charts included.
    let dir = std::env::temp_dir().join(format!("bitparity-shard-{}-clean", std::process::id()));
    assert_eq!(timeless_html(&dir.join("whole.html")), timeless_html(&dir.join("merged.html")));
}

#[test]
fn merged_failures_are_the_unsharded_runs_lowest_cases() {
    // Every planted bug of both ops fails: each row's reported failure must
    // be the same shrunk case whichever shard and thread found it first.
    let args = ["--subject", "bugs", "--property", "conformance", "--cases", "30", "--seed", "5"];
    let (whole, merged, w, m) = unsharded_and_merged("bugs", &args, 4);
    assert_eq!(w.status.code(), Some(1), "{}", text(&w));
    assert_eq!(m.status.code(), Some(1), "{}", text(&m));
    assert_eq!(whole, merged);
    let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
    let failures: usize = v["ops"].as_array().unwrap().iter().map(|o| o["failures"].as_array().unwrap().len()).sum();
    assert!(failures >= 10, "the planted bugs of both ops fail: {failures}");
}

#[test]
fn the_report_does_not_depend_on_the_threads() {
    let dir = tmp("threads");
    let args = ["--op", "router", "--subject", "bugs", "--property", "conformance", "--cases", "40", "--seed", "9"];
    let (one, four) = (dir.join("1.json"), dir.join("4.json"));
    assert_eq!(check(1, &args, None, &one).status.code(), Some(1));
    assert_eq!(check(4, &args, None, &four).status.code(), Some(1));
    assert_eq!(timeless(&one), timeless(&four));
}

#[test]
fn merge_refuses_what_is_not_one_whole_run() {
    let dir = tmp("refuse");
    let args = ["--op", "seqwise_loss", "--property", "conformance", "--cases", "6", "--seed", "2"];
    let p = |n: &str| dir.join(n);
    for (i, name) in [(1, "a1"), (2, "a2"), (3, "a3")] {
        assert_eq!(check(1, &args, Some(&format!("{i}/3")), &p(name)).status.code(), Some(0));
    }
    let other_seed = ["--op", "seqwise_loss", "--property", "conformance", "--cases", "6", "--seed", "3"];
    assert_eq!(check(1, &other_seed, Some("3/3"), &p("b3")).status.code(), Some(0));
    assert_eq!(check(1, &args, None, &p("whole")).status.code(), Some(0));
    std::fs::write(p("empty"), "{}").unwrap();
    let merge = |files: &[&str]| {
        let o = bitparity(1).arg("merge").args(files.iter().map(|f| p(f))).output().unwrap();
        (o.status.code(), text(&o))
    };
    let cases: [(&[&str], &str); 5] = [
        (&["a1", "a2"], "missing shards: 3/3"),
        (&["a1", "a2", "a2", "a3"], "both shard 2/3"),
        (&["a1", "a2", "b3"], "seed"),
        (&["whole"], "not a shard's summary"),
        (&["empty"], "not a `bitparity check --json` summary"),
    ];
    for (files, why) in cases {
        let (code, out) = merge(files);
        assert_eq!(code, Some(2), "{files:?}: {out}");
        assert!(out.contains(why), "{files:?}: expected {why:?} in {out}");
    }
    assert_eq!(merge(&["a3", "a1", "a2"]).0, Some(0));
}

#[test]
fn bad_shards_are_usage_errors() {
    for s in ["0/3", "4/3", "1/0", "x", "1/", "/2", "-1/2", "1/2/3"] {
        let o = bitparity(1).args(["check", "--cases", "2", "--shard", s]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "--shard {s}: {}", text(&o));
    }
    let o = bitparity(1).args(["check", "--seed", "1", "--case", "3", "--shard", "1/2"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn devices_run_one_worker_per_device_and_merge() {
    // Without a GPU the workers run the CPU subjects: the fan-out and the
    // merge are what is checked (the GPU host's scaling run uses --subject cuda).
    let dir = tmp("devices");
    let args = ["--op", "router", "--subject", "bugs", "--property", "conformance", "--cases", "24", "--seed", "6"];
    let (whole, fanned) = (dir.join("whole.json"), dir.join("fanned.json"));
    assert_eq!(check(2, &args, None, &whole).status.code(), Some(1));
    let o = bitparity(2)
        .arg("check")
        .args(args)
        .args(["--no-save", "--devices", "0,1", "--json"])
        .arg(&fanned)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("device 0 (shard 1/2)") && err.contains("device 1 (shard 2/2)"), "{err}");
    let strip_knobs = |s: String| {
        let mut v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert!(v["plan"]["shard"].is_null());
        v["knobs"] = serde_json::json!({});
        // A worker's reproduce commands name its GPU: the one knob that differs.
        serde_json::to_string_pretty(&v)
            .unwrap()
            .replace("BITPARITY_CUDA_DEVICE=0 ", "")
            .replace("BITPARITY_CUDA_DEVICE=1 ", "")
    };
    let fanned_v: serde_json::Value = serde_json::from_str(&timeless(&fanned)).unwrap();
    assert_eq!(fanned_v["knobs"]["BITPARITY_CUDA_DEVICE"], "0,1");
    assert_eq!(strip_knobs(timeless(&whole)), strip_knobs(timeless(&fanned)));
    let o = bitparity(1).args(["check", "--devices", "0,0", "--cases", "2"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn sub_shards_merge_into_their_shard() {
    // Shards 2/6 and 5/6 are shard 2/3 run on two devices.
    let dir = tmp("coarser");
    let args = ["--op", "seqwise_loss", "--property", "conformance", "--cases", "30", "--seed", "8"];
    let p = |n: &str| dir.join(n);
    for (s, name) in [("2/6", "a"), ("5/6", "b"), ("2/3", "whole-shard")] {
        assert_eq!(check(1, &args, Some(s), &p(name)).status.code(), Some(0));
    }
    let merged = p("merged");
    let o = bitparity(1).args(["merge"]).arg(p("b")).arg(p("a")).arg("--json").arg(&merged).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(timeless(&p("whole-shard")), timeless(&merged));
}
