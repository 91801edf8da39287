//! Fail closed everywhere: the built binary driven as a hostile user would,
//! in temporary folders. One test (or a few) per class of the issue:
//!
//! - corpus integrity: SIGKILL during saves, SIGINT, bad files in a corpus,
//!   strict entries, a 0-byte file of an entry's name, one entry per bug;
//! - verdicts that cannot lie: replay and check exit codes, unknown planted
//!   bugs, subjects unavailable here, output paths checked first, knobs;
//! - bounded resources, no panics: huge strides, huge artifacts, huge and
//!   tiny time budgets, closed pipes;
//! - a failure report a kernel author can act on: the shrunk case, the
//!   reproduce commands (run, they fail the same way), `--json -`, filters,
//!   a table whose numbers fit their columns.
//!
//! Every case is kept small (`BITPARITY_MAX_TE`, one property, few cases) so
//! that the file runs in well under a minute.

use crate::common::{bin, bitparity, real_entry, repo, run, tmp, write_json, Run, MAX_TE};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// [`bitparity`] under an address-space limit (`ulimit -v`, KiB): an
/// attempt to allocate past it fails the run instead of slowing the machine
/// down.
fn bitparity_limited(kib: u64) -> Command {
    let mut c = bitparity();
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\"")).arg(bin());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    c = sh;
    c.stdin(Stdio::null());
    c
}

const OFFSET_ENTRY: &str = "conformance-bug-offset-ignored-beedea09.json";
const FMA_ENTRY: &str = "conformance-bug-fma-quotient-2daa2736.json";

/// Every `*.json` under `dir`, recursively.
fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(json_files(&p));
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").arg(format!("-{sig}")).arg(child.id().to_string()).status().unwrap();
    assert!(ok.success(), "kill -{sig} failed");
}

fn finish(child: Child, start: Instant) -> Run {
    Run::of(child.wait_with_output().unwrap(), start)
}

fn no_panic(r: &Run) {
    assert!(!r.stderr.contains("panicked"), "a panic:\n{}", r.all());
    assert!(r.code.is_some(), "killed by a signal:\n{}", r.all());
}

// ---------------------------------------------------------------- corpus integrity

/// 12 runs of a failing check into one corpus, each SIGKILLed at a
/// different moment (before, during and after its save): afterwards every
/// `*.json` is a whole entry (the old in-place writer left 0-byte files) and
/// no temporary file passes for one.
#[test]
fn sigkill_during_saves_leaves_only_whole_entries() {
    let dir = tmp("sigkill");
    let mut saved_runs = 0;
    for i in 0..12u64 {
        // Each run its own corpus folder: a later run would find the earlier
        // entry still failing and write nothing, and the point is to kill
        // writes.
        let corpus = dir.join(format!("run-{i}"));
        let child = bitparity()
            .args(["check", "--subject", "bug:offset-ignored", "--property", "conformance", "--seconds", "30"])
            .args(["--seed", &i.to_string(), "--quiet", "--corpus"])
            .arg(&corpus)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = child;
        // The failure is found, shrunk and saved 5 to 20 ms after the start
        // on the development machine: the kills fall before, during and
        // after the save.
        std::thread::sleep(Duration::from_millis(3 * i));
        child.kill().unwrap(); // SIGKILL
        let _ = child.wait();
        let saved = !json_files(&corpus).is_empty();
        println!("run {i}: killed after {} ms, {}", 3 * i, if saved { "entry saved" } else { "no entry" });
        saved_runs += saved as usize;
    }
    // A failure is saved when it is found, not after the last case (the old
    // code lost every failure of a run killed before its end): one more
    // run, killed as soon as its entry is there.
    let corpus = dir.join("run-found");
    let mut child = bitparity()
        .args(["check", "--subject", "bug:offset-ignored", "--property", "conformance", "--seconds", "60"])
        .args(["--quiet", "--corpus"])
        .arg(&corpus)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while json_files(&corpus).is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(json_files(&corpus).len(), 1, "no entry within 20 s of a 60 s run: saved only at the end?");
    for f in json_files(&dir) {
        let bytes = std::fs::read(&f).unwrap();
        let e = bitparity::corpus::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(e.subject, "bug:offset-ignored");
    }
    // Whatever was left replays (a torn file would be reported BAD).
    for name in (0..12).map(|i| format!("run-{i}")).chain(["run-found".to_string()]) {
        let corpus = dir.join(name);
        if !json_files(&corpus).is_empty() {
            let r = run(bitparity().arg("replay").arg(&corpus));
            assert_eq!(r.code, Some(0), "{}", r.all());
        }
    }
    println!("{saved_runs} of 12 killed runs had saved their entry");
    std::fs::remove_dir_all(dir).ok();
}

/// SIGINT during a failing run: the failure is shrunk and saved, the table
/// so far printed, exit 1. The old code saved only after the last case.
#[test]
fn sigint_saves_the_failure_prints_the_table_and_exits_1() {
    let dir = tmp("sigint");
    let start = Instant::now();
    let child = bitparity()
        .args(["check", "--subject", "bug:offset-ignored", "--property", "conformance", "--seconds", "60"])
        .args(["--seed", "1", "--quiet", "--corpus"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    signal(&child, "INT");
    let r = finish(child, start);
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert!(r.seconds < 30.0, "did not stop on SIGINT: {}", r.all());
    assert!(r.stdout.contains("FAILED seqwise_loss / conformance / bug:offset-ignored"), "{}", r.all());
    assert!(r.stdout.contains("saved to"), "{}", r.all());
    assert!(r.stdout.contains("property") && r.stdout.contains("err/bound"), "no table: {}", r.all());
    let files = json_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    bitparity::corpus::read_entry(&files[0]).unwrap();
    std::fs::remove_dir_all(dir).ok();
}

/// SIGINT with nothing failed: the table so far, INTERRUPTED, exit 130.
#[test]
fn sigint_without_a_failure_exits_130() {
    let start = Instant::now();
    let child = bitparity()
        .args(["check", "--subject", "model:serial", "--property", "conformance", "--seconds", "60", "--quiet"])
        .args(["--no-save"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "INT");
    let r = finish(child, start);
    assert_eq!(r.code, Some(130), "{}", r.all());
    assert!(r.stdout.contains("INTERRUPTED"), "{}", r.all());
    assert!(r.stdout.contains("model:serial"), "{}", r.all());
}

/// A corpus folder holding every kind of bad file next to good entries: each
/// bad one is reported with its path and reason, the good ones still
/// replay, the run fails (exit 1), quickly and in little memory (the old
/// code stopped at the first bad file, took `0x1p-2000` as zero, ignored
/// unknown keys, read a missing `padding` as null, aborted on a 4 PB
/// allocation for a huge row stride and spent 1 GB and seconds on a smaller
/// one).
#[test]
fn bad_files_in_a_corpus_are_each_reported_and_the_rest_replays() {
    let dir = tmp("badfiles");
    let op = dir.join("seqwise_loss");
    let good = real_entry(OFFSET_ENTRY);
    write_json(&op.join("good-1.json"), &good);
    write_json(&op.join("good-2.json"), &real_entry(FMA_ENTRY));
    std::fs::write(op.join("empty.json"), b"").unwrap();
    std::os::unix::fs::symlink("/nonexistent/bitparity-lock", op.join(".#lock.json")).unwrap();
    std::fs::create_dir_all(op.join("folder.json")).unwrap();
    let mut unknown_key = good.clone();
    unknown_key["case"]["scale"] = serde_json::json!(2);
    write_json(&op.join("unknown-key.json"), &unknown_key);
    let mut top_key = good.clone();
    top_key["notes"] = serde_json::json!("typo");
    write_json(&op.join("unknown-top-key.json"), &top_key);
    let mut no_padding = good.clone();
    no_padding["case"].as_object_mut().unwrap().remove("padding");
    write_json(&op.join("missing-padding.json"), &no_padding);
    let mut inexact = good.clone();
    inexact["case"]["scores"][0] = serde_json::json!("0x1p-2000");
    write_json(&op.join("inexact.json"), &inexact);
    let mut malformed = good.clone();
    malformed["case"]["g"] = serde_json::json!("0x+1p0");
    write_json(&op.join("malformed-float.json"), &malformed);
    let mut huge = good.clone();
    huge["case"]["t"] = serde_json::json!(2);
    huge["case"]["scores"] = serde_json::json!(["0x1p0", "0x1p0"]);
    huge["case"]["layout"]["row_stride"] = serde_json::json!(1u64 << 50);
    write_json(&op.join("huge-stride.json"), &huge);
    // Within MAX_STORAGE (2^28 elements) but a 2^28-element gap between two
    // rows: 1 GiB and seconds per subject before the gap was bounded.
    huge["case"]["layout"]["row_stride"] = serde_json::json!((1u64 << 28) - 2);
    write_json(&op.join("big-gap.json"), &huge);
    let mut bug = good.clone();
    bug["subject"] = serde_json::json!("bug:no-such-bug");
    write_json(&op.join("unknown-bug.json"), &bug);

    // 512 MiB of address space: one allocation the size of a huge stride
    // ends the run (the old code aborted on 4 PB, or took 1 GB and seconds).
    let r = run(bitparity_limited(512 << 10).arg("replay").arg(&dir));
    no_panic(&r);
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert!(r.seconds < 20.0, "slow: {:.1} s\n{}", r.seconds, r.all());
    let line = |name: &str| -> String {
        r.stdout
            .lines()
            .find(|l| l.contains(&format!("/{name}")))
            .unwrap_or_else(|| panic!("{name} not reported:\n{}", r.all()))
            .to_string()
    };
    for (name, why) in [
        ("empty.json", "empty file"),
        (".#lock.json", "symbolic link: not followed"),
        ("folder.json", "folder"),
        ("unknown-key.json", "unknown field `scale`"),
        ("unknown-top-key.json", "unknown field `notes`"),
        ("missing-padding.json", "missing field `padding`"),
        ("inexact.json", "0x1p-2000"),
        ("malformed-float.json", "0x+1p0"),
        ("huge-stride.json", "between rows"),
        ("big-gap.json", "between rows"),
    ] {
        let l = line(name);
        assert!(l.starts_with("BAD ") || l.starts_with("FAIL"), "{l}");
        let all_about = r.stdout.lines().skip_while(|x| !x.contains(&format!("/{name}"))).take(2).collect::<String>();
        assert!(all_about.contains(why), "{name}: expected {why:?} in {all_about:?}\n{}", r.all());
    }
    assert!(line("unknown-bug.json").starts_with("FAIL"), "{}", r.all());
    assert!(r.stdout.contains("no-such-bug"), "{}", r.all());
    assert!(line("good-1.json").starts_with("ok"), "{}", r.all());
    assert!(line("good-2.json").starts_with("ok"), "{}", r.all());
    assert!(r.stdout.contains("2 passed, 11 failed"), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// A 0-byte file under the very name a failure's entry takes (what the old
/// in-place writer left after a SIGKILL) is not "already in the corpus": it
/// is replaced by the whole entry.
#[test]
fn an_empty_file_of_an_entrys_name_is_repaired_not_taken_as_present() {
    let dir = tmp("repair");
    // One case (seed 4's case 1 fails): with many, which failing case the
    // parallel hunt finds first depends on the machine's load, and so does
    // the entry's name.
    let args = ["check", "--subject", "bug:offset-ignored", "--property", "conformance", "--case", "1"];
    let first = run(bitparity().args(args).args(["--seed", "4", "--quiet", "--corpus"]).arg(dir.join("a")));
    assert_eq!(first.code, Some(1), "{}", first.all());
    let files = json_files(&dir.join("a"));
    assert_eq!(files.len(), 1, "{}", first.all());
    let name = files[0].file_name().unwrap();
    let empty = dir.join("b/seqwise_loss").join(name);
    std::fs::create_dir_all(empty.parent().unwrap()).unwrap();
    std::fs::write(&empty, b"").unwrap();
    let second = run(bitparity().args(args).args(["--seed", "4", "--quiet", "--corpus"]).arg(dir.join("b")));
    assert_eq!(second.code, Some(1), "{}", second.all());
    assert!(second.stdout.contains("replacing an unreadable file"), "{}", second.all());
    assert_eq!(std::fs::read(&empty).unwrap(), std::fs::read(&files[0]).unwrap());
    std::fs::remove_dir_all(dir).ok();
}

/// Unseeded runs of the same failing planted bug into one corpus keep one
/// entry: the bug is known once its entry still fails.
#[test]
fn repeated_unseeded_runs_keep_one_entry_per_bug() {
    let dir = tmp("dedup");
    for i in 0..3 {
        let r = run(bitparity()
            .args(["check", "--subject", "bug:offset-ignored", "--property", "conformance", "--cases", "30"])
            .args(["--quiet", "--corpus"])
            .arg(&dir));
        assert_eq!(r.code, Some(1), "{}", r.all());
        if i > 0 {
            assert!(r.stdout.contains("already in the corpus"), "{}", r.all());
        }
    }
    assert_eq!(json_files(&dir).len(), 1, "{:?}", json_files(&dir));
    std::fs::remove_dir_all(dir).ok();
}

/// A planted bug's failure is a demonstration: without `--corpus` nothing
/// is written to the tracked `regressions/`.
#[test]
fn planted_failures_stay_out_of_regressions_without_corpus() {
    let dir = tmp("nocorpus");
    let r = run(bitparity().current_dir(&dir).args([
        "check",
        "--subject",
        "bug:offset-ignored",
        "--property",
        "conformance",
        "--cases",
        "30",
        "--quiet",
    ]));
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert!(r.stdout.contains("not saved: a planted bug"), "{}", r.all());
    assert!(!dir.join("regressions").exists(), "regressions/ was written");
    std::fs::remove_dir_all(dir).ok();
}

// ---------------------------------------------------------------- verdicts

#[test]
fn replay_exit_codes_say_what_happened() {
    let dir = tmp("replay-codes");
    // A path that does not exist: a usage error.
    let r = run(bitparity().arg("replay").arg(dir.join("missing")));
    assert_eq!(r.code, Some(2), "{}", r.all());
    // A folder with no entries, an empty op folder: nothing judged.
    let r = run(bitparity().arg("replay").arg(&dir));
    assert_eq!(r.code, Some(3), "{}", r.all());
    std::fs::create_dir_all(dir.join("seqwise_loss")).unwrap();
    let r = run(bitparity().arg("replay").arg(dir.join("seqwise_loss")));
    assert_eq!(r.code, Some(3), "{}", r.all());
    // `{}` on stdin: a bad entry.
    let mut child = bitparity()
        .args(["replay", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"{}").unwrap();
    }
    let r = finish(child, Instant::now());
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert!(r.stdout.contains("BAD") && r.stdout.contains("missing field"), "{}", r.all());
    // One op's folder of the repository replays.
    let r = run(bitparity().arg("replay").arg(repo().join("regressions/seqwise_loss")));
    assert_eq!(r.code, Some(0), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// An entry whose failing subject cannot run here (cuda without a GPU) is
/// judged by the others and says so; it never passes silently for it.
#[test]
fn an_entry_of_an_unavailable_subject_says_it_was_not_replayed_there() {
    if bitparity::subject::cuda::probe().is_ok() {
        println!("SKIPPED: a GPU is present here; the cuda entry replays on it");
        return;
    }
    let dir = tmp("unavailable");
    let mut e = real_entry(OFFSET_ENTRY);
    e["subject"] = serde_json::json!("cuda");
    e["profile"] = serde_json::json!("warp32-chunk64");
    write_json(&dir.join("seqwise_loss/cuda.json"), &e);
    let r = run(bitparity().arg("replay").arg(&dir));
    assert!(r.stdout.contains("not replayed on cuda:"), "{}", r.all());
    assert!(r.stdout.contains("SKIPPED"), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// `check --subject cuda` where there is no GPU ran nothing and exited 0;
/// now 3 ("a named subject could not run"), with `--property` too.
#[test]
fn check_of_an_unavailable_subject_exits_3() {
    if bitparity::subject::cuda::probe().is_ok() {
        println!("SKIPPED: a GPU is present here");
        return;
    }
    for extra in [&[][..], &["--property", "conformance"][..]] {
        let r =
            run(bitparity().args(["check", "--subject", "cuda", "--cases", "3", "--quiet", "--no-save"]).args(extra));
        assert_eq!(r.code, Some(3), "{extra:?}: {}", r.all());
        assert!(r.stdout.contains("NOT RUN"), "{}", r.all());
    }
}

/// Zero cases is no pass.
#[test]
fn a_budget_too_small_for_one_case_exits_3() {
    let r = run(bitparity().args(["check", "--seconds", "1e-300", "--quiet", "--no-save"]));
    assert_eq!(r.code, Some(3), "{}", r.all());
    assert!(r.stdout.contains("NOTHING JUDGED"), "{}", r.all());
}

/// A budget past what a `Duration` holds (1e20 s) panicked; it is a usage
/// error now (exit 2), as are infinite, NaN and non-positive budgets.
#[test]
fn absurd_time_budgets_are_usage_errors_not_panics() {
    for s in ["1e20", "inf", "NaN", "0", "-1", "1e400"] {
        let r = run(bitparity().args(["check", &format!("--seconds={s}"), "--quiet", "--no-save"]));
        no_panic(&r);
        assert_eq!(r.code, Some(2), "--seconds {s}: {}", r.all());
        assert!(r.stderr.contains("--seconds"), "{}", r.all());
    }
}

/// `selftest --seed 18446744073709551615` wrapped its seed range to nothing
/// and reported every bug missed; the seeds wrap now.
#[test]
fn selftest_seeds_wrap_past_u64_max() {
    let seeds = bitparity::selftest::seeds(u64::MAX);
    assert_eq!(seeds.len() as u64, bitparity::selftest::SEEDS);
    assert_eq!(&seeds[..3], &[u64::MAX, 0, 1]);
    let r =
        run(bitparity().args(["selftest", "--op", "seqwise_loss", "--seed", "18446744073709551615", "--json", "-"]));
    assert_eq!(r.code, Some(0), "{}", r.all());
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let bugs = v.as_array().unwrap();
    assert!(!bugs.is_empty());
    for b in bugs {
        assert_eq!(b["caught"], true, "{b}");
        assert_eq!(b["hunts"][0]["seed"], serde_json::json!(u64::MAX));
    }
}

/// An output path that cannot be written fails before the run (exit 2 in
/// well under a second), not after it (where it hid a failure's exit 1).
#[test]
fn unwritable_outputs_fail_before_any_case() {
    let dir = tmp("outputs");
    for flag in ["--json", "--markdown"] {
        let r = run(bitparity()
            .args(["check", "--subject", "bug:offset-ignored", "--seconds", "30", "--quiet", "--no-save", flag])
            .arg(dir.join("missing/dir/x.json")));
        assert_eq!(r.code, Some(2), "{}", r.all());
        assert!(r.seconds < 5.0, "{flag}: took {:.1} s: the run happened first", r.seconds);
        assert!(r.stderr.contains("does not exist"), "{}", r.all());
        assert!(r.stdout.is_empty(), "{}", r.all());
    }
    let r = run(bitparity().args(["selftest", "--json"]).arg(dir.join("missing/x.json")));
    assert_eq!(r.code, Some(2), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// A knob that does not parse is refused (exit 2, naming it), never
/// silently the default.
#[test]
fn bad_knob_values_are_refused() {
    for (k, v) in [
        ("BITPARITY_MAX_TE", "abc"),
        ("BITPARITY_MAX_TE", "0"),
        ("BITPARITY_MAX_E", "-3"),
        ("BITPARITY_MAX_T", "1e3"),
        ("BITPARITY_SEED", "seven"),
        ("BITPARITY_CASES", "many"),
        ("BITPARITY_CASES", "0"),
        // No upper bound let a typo allocate GBs.
        ("BITPARITY_MAX_TE", "10000000000"),
        ("BITPARITY_MAX_T", "100000000"),
        ("BITPARITY_GUARDS", "maybe"),
    ] {
        // --seconds, not --cases: BITPARITY_CASES is the case count then.
        let r = run(bitparity().env(k, v).args(["check", "--seconds", "1", "--quiet", "--no-save"]));
        assert_eq!(r.code, Some(2), "{k}={v}: {}", r.all());
        assert!(r.stderr.contains(k), "{k}={v}: {}", r.all());
    }
}

/// Knobs that change the cases are recorded in the table header and the
/// JSON; `BITPARITY_SEED` and `BITPARITY_CASES` are honoured; `--json -`
/// is JSON on stdout (the table goes to stderr).
#[test]
fn knobs_are_honoured_and_recorded_and_json_goes_to_stdout() {
    let r = run(bitparity()
        .env("BITPARITY_SEED", "0x2a")
        .env("BITPARITY_CASES", "7")
        .env("BITPARITY_MAX_E", "9")
        .args(["check", "--op", "seqwise_loss", "--subject", "model:serial", "--property", "conformance"])
        .args(["--quiet", "--no-save", "--json", "-"]));
    assert_eq!(r.code, Some(0), "{}", r.all());
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.all()));
    assert_eq!(v["seed"], 42);
    assert_eq!(v["cases"], 7);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["knobs"]["BITPARITY_MAX_TE"], MAX_TE);
    assert_eq!(v["knobs"]["BITPARITY_MAX_E"], "9");
    assert_eq!(v["generator"]["max_te"], 64);
    assert_eq!(v["generator"]["max_e"], 9);
    assert!(r.stderr.contains("BITPARITY_MAX_TE=64") && r.stderr.contains("seed 42"), "{}", r.all());
}

/// The exit codes are documented where a user looks.
#[test]
fn exit_codes_are_in_the_help() {
    let r = run(bitparity().arg("--help"));
    assert_eq!(r.code, Some(0));
    for code in ["0 passed", "1 a property failed", "2 usage", "3 nothing judged", "130 interrupted"] {
        assert!(r.stdout.contains(code), "{code}: {}", r.stdout);
    }
}

// ---------------------------------------------------------------- bounded resources, no panics

/// `import` of a 2 MiB file and of `/dev/zero`: refused at once, in little
/// memory (the old code read a 1 GB file whole, and /dev/zero forever).
#[test]
fn import_refuses_huge_and_endless_inputs_quickly() {
    let dir = tmp("import");
    let big = dir.join("crash-big");
    std::fs::write(&big, vec![0x5a; 2 << 20]).unwrap();
    for input in [big.as_path(), Path::new("/dev/zero")] {
        let r = run(bitparity_limited(512 << 10).args(["import", "--corpus"]).arg(dir.join("corpus")).arg(input));
        no_panic(&r);
        assert_eq!(r.code, Some(2), "{}: {}", input.display(), r.all());
        assert!(r.stderr.contains("limit"), "{}", r.all());
        assert!(r.seconds < 5.0, "{}: {:.1} s", input.display(), r.seconds);
    }
    assert!(!dir.join("corpus").exists());
    std::fs::remove_dir_all(dir).ok();
}

/// A closed stdout (`replay | head -1`) ends the output, not the process
/// in a panic.
#[test]
fn a_closed_pipe_is_not_a_panic() {
    let corpus = repo().join("regressions");
    let corpus = corpus.to_str().unwrap();
    let runs: [&[&str]; 3] = [
        &["replay", corpus],
        &["check", "--subject", "model:serial", "--property", "conformance", "--cases", "3", "--quiet", "--no-save"],
        &["check", "--subject", "model:serial", "--property", "padding", "--cases", "3", "--no-save", "--json", "-"],
    ];
    // A scratch folder as the working directory: nothing lands in the
    // repository, whatever the binary under test writes.
    let dir = tmp("pipe");
    for args in runs {
        let mut child =
            bitparity().current_dir(&dir).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // The reader goes away before the output comes (what `| head -1`
        // does to everything past its line): every write meets EPIPE.
        drop(child.stdout.take());
        let r = finish(child, Instant::now());
        no_panic(&r);
        assert!(matches!(r.code, Some(0 | 1)), "{args:?}: {}", r.all());
    }
    std::fs::remove_dir_all(dir).ok();
}

// ---------------------------------------------------------------- a report a kernel author can act on

/// The failure text holds the shrunk case and two reproduce commands; each,
/// run as printed (with the recorded knobs), fails the same way.
#[test]
fn a_failure_prints_its_shrunk_case_and_commands_that_reproduce_it() {
    let dir = tmp("reproduce");
    let r = run(bitparity()
        .current_dir(&dir)
        .args(["check", "--subject", "bug:fma-quotient", "--property", "conformance", "--cases", "200"])
        .args(["--seed", "5", "--quiet", "--corpus", "corpus"]));
    assert_eq!(r.code, Some(1), "{}", r.all());
    let head = "FAILED seqwise_loss / conformance / bug:fma-quotient";
    let failure = r.stdout.split(head).nth(1).unwrap_or_else(|| panic!("no failure text:\n{}", r.all()));
    assert!(failure.contains("shrunk to T="), "{failure}");
    assert!(failure.contains("  | T=") && failure.contains("  | row 0: ["), "no shrunk case: {failure}");
    let commands: Vec<&str> = failure.lines().filter_map(|l| l.trim().strip_prefix("reproduce: ")).collect();
    assert_eq!(commands.len(), 2, "{failure}");
    assert!(commands[0].starts_with("bitparity replay corpus/seqwise_loss/"), "{}", commands[0]);
    assert!(commands[1].contains("--case ") && commands[1].starts_with("BITPARITY_MAX_TE=64 "), "{}", commands[1]);
    let message = failure.lines().nth(1).unwrap().trim();
    for cmd in commands {
        // VAR=value words, then `bitparity`, then its arguments.
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "bitparity").unwrap();
        let mut c = bitparity();
        c.env_remove("BITPARITY_MAX_TE").current_dir(&dir);
        for kv in &words[..at] {
            let (k, v) = kv.split_once('=').unwrap();
            c.env(k, v);
        }
        let again = run(c.args(&words[at + 1..]));
        if words[at + 1] == "replay" {
            // The planted bug still fails its entry, as it must: the replay passes.
            assert_eq!(again.code, Some(0), "{cmd}: {}", again.all());
            assert!(again.stdout.contains("bug:fma-quotient: still fails"), "{}", again.all());
        } else {
            assert_eq!(again.code, Some(1), "{cmd}: {}", again.all());
            assert!(again.stdout.contains(head), "{cmd}: {}", again.all());
            assert!(again.stdout.contains(message), "{cmd}: not the same failure ({message}): {}", again.all());
        }
    }
    std::fs::remove_dir_all(dir).ok();
}

/// `replay --op` and `--label` select entries; selecting nothing is not a
/// pass; `--subject` names subjects to judge with, never a planted bug.
#[test]
fn replay_filters_by_op_and_label() {
    let dir = tmp("filters");
    write_json(&dir.join("seqwise_loss/a.json"), &real_entry(OFFSET_ENTRY));
    write_json(&dir.join("seqwise_loss/b.json"), &real_entry(FMA_ENTRY));
    let r = run(bitparity().arg("replay").arg(&dir).args(["--label", "bug:fma-quotient"]));
    assert_eq!(r.code, Some(0), "{}", r.all());
    assert!(r.stdout.contains("1 entries: 1 passed") && !r.stdout.contains("a.json"), "{}", r.all());
    let r = run(bitparity().arg("replay").arg(&dir).args(["--op", "seqwise_loss"]));
    assert!(r.stdout.contains("2 entries: 2 passed"), "{}", r.all());
    let r = run(bitparity().arg("replay").arg(&dir).args(["--label", "bug:wrong-order"]));
    assert_eq!(r.code, Some(3), "{}", r.all());
    let r = run(bitparity().arg("replay").arg(&dir).args(["--subject", "bug:fma-quotient"]));
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.stderr.contains("--label bug:fma-quotient"), "{}", r.all());
    // A correct subject named judges every entry.
    let r = run(bitparity().arg("replay").arg(&dir).args(["--subject", "model:serial"]));
    assert_eq!(r.code, Some(0), "{}", r.all());
    assert!(r.stdout.contains("2 entries: 2 passed"), "{}", r.all());
    let r = run(bitparity().arg("replay").arg(&dir).args(["--op", "nope"]));
    assert_eq!(r.code, Some(2), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// Every number of the table fits its column, whatever its size (a planted
/// bug that reads poison makes err/bound huge or infinite); the JSON keeps
/// the exact value; the finite-difference row is not called `bitwise`, in
/// the table or the Markdown.
#[test]
fn the_table_is_readable_whatever_the_values() {
    let dir = tmp("table");
    let md = dir.join("r.md");
    let json = dir.join("r.json");
    let r = run(bitparity()
        .args(["check", "--subject", "bug:offset-ignored", "--subject", "oracle:serial"])
        .args(["--property", "accuracy", "--property", "gradient", "--cases", "12", "--seed", "3", "--quiet"])
        .args(["--no-save", "--json"])
        .arg(&json)
        .arg("--markdown")
        .arg(&md));
    assert_eq!(r.code, Some(1), "{}", r.all());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let worst = rows
        .iter()
        .filter(|r| r["subject"] == "bug:offset-ignored" && r["property"] == "accuracy")
        .map(|r| r["worst_error_over_bound"].as_f64().unwrap_or(f64::INFINITY))
        .next()
        .unwrap();
    assert!(worst > 1.0, "the planted bug should break its bound: {worst}");
    // The header line fixes the columns: property, profile, subject, cases,
    // failures, err/bound (10 wide, right-aligned), then the notes.
    let header = r.stdout.lines().find(|l| l.starts_with("property ")).unwrap();
    let measure_end = header.find("err/bound").unwrap() + "err/bound".len();
    for l in r.stdout.lines().filter(|l| l.starts_with("accuracy ") || l.starts_with("gradient ")) {
        assert!(l.len() >= measure_end, "{l}");
        let cell = &l[measure_end - 10..measure_end];
        assert!(cell.starts_with(' ') || cell.trim().len() == 10, "err/bound overflows its column: {l:?}");
        let after = &l[measure_end..];
        assert!(after.is_empty() || after.starts_with("  "), "err/bound overflows its column: {l:?}");
        let text = cell.trim();
        assert!(text.len() <= 10, "{l}");
        if l.contains(" mpfr ") {
            assert_ne!(text, "bitwise", "the finite-difference row is no bitwise comparison: {l}");
        }
    }
    let md = std::fs::read_to_string(&md).unwrap();
    let fd = md.lines().find(|l| l.contains("| mpfr |")).unwrap_or_else(|| panic!("{md}"));
    assert!(!fd.contains("bitwise"), "{fd}");
    std::fs::remove_dir_all(dir).ok();
}

// ---------------------------------------------------------------- hostile probes (fail closed)

/// A FIFO named like an entry in an op's folder is reported, never opened:
/// opening it waits for a writer for ever (replay hung on it, and so did a
/// check saving into that folder).
#[test]
fn a_fifo_in_a_corpus_is_reported_not_opened() {
    let dir = tmp("fifo");
    let op = dir.join("seqwise_loss");
    write_json(&op.join("good.json"), &real_entry(OFFSET_ENTRY));
    let fifo = op.join("pipe.json");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let start = Instant::now();
    let child = bitparity().arg("replay").arg(&dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // The old code blocked in open(2): unblock it after a while so that the
    // test ends either way.
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = child.id();
    let guard = std::thread::spawn(move || {
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return;
            }
        }
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    });
    let r = finish(child, start);
    guard.join().unwrap();
    no_panic(&r);
    assert!(r.seconds < 15.0, "blocked on the FIFO for {:.1} s\n{}", r.seconds, r.all());
    assert_eq!(r.code, Some(1), "{}", r.all());
    let l = r.stdout.lines().find(|l| l.contains("pipe.json")).unwrap_or_else(|| panic!("{}", r.all()));
    assert!(l.starts_with("BAD") && l.contains("FIFO"), "{l}");
    assert!(r.stdout.contains("1 passed, 1 failed"), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// An object holding a key twice is refused: the case is first read as a
/// JSON value, which kept the last of two equal keys (`"offset": 0,
/// "offset": 3` replayed silently as offset 3).
#[test]
fn duplicate_keys_are_refused_at_any_depth() {
    let dir = tmp("dupkeys");
    let op = dir.join("seqwise_loss");
    let text = serde_json::to_string_pretty(&real_entry(OFFSET_ENTRY)).unwrap();
    for (name, from, to) in [
        ("dup-top.json", "\"op\":", "\"op\": \"seqwise_loss\", \"op\":"),
        ("dup-case.json", "\"t\":", "\"t\": 1, \"t\":"),
        ("dup-layout.json", "\"row_stride\":", "\"row_stride\": 1, \"row_stride\":"),
    ] {
        assert!(text.contains(from));
        std::fs::create_dir_all(&op).unwrap();
        std::fs::write(op.join(name), text.replacen(from, to, 1)).unwrap();
    }
    let r = run(bitparity().arg("replay").arg(&dir));
    no_panic(&r);
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert!(r.stdout.contains("0 passed, 3 failed"), "{}", r.all());
    for key in ["op", "t", "row_stride"] {
        assert!(r.stdout.contains(&format!("duplicate key \"{key}\"")), "{key}: {}", r.all());
    }
    std::fs::remove_dir_all(dir).ok();
}

/// `--json` into a FIFO writes into the pipe and keeps it a FIFO; a link
/// is refused before the run, its target untouched (a link could lead
/// anywhere: docs/security.md).
#[test]
fn reports_into_pipes_keep_them_and_links_are_refused() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tmp("special-out");
    let target = dir.join("real.json");
    std::fs::write(&target, b"old\n").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let args = ["check", "--op", "router", "--subject", "model:serial", "--cases", "1", "--seed", "1", "--quiet"];
    let r = run(bitparity().args(args).arg("--no-save").arg("--json").arg(&link));
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.stderr.contains("symbolic link"), "{}", r.all());
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read(&target).unwrap(), b"old\n", "the target was written");

    let fifo = dir.join("pipe.json");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read_to_string(reader_path).unwrap_or_default());
    let r = run(bitparity().args(args).arg("--no-save").arg("--json").arg(&fifo));
    // The old code renamed a regular file over the FIFO: unblock the reader.
    if !std::fs::metadata(&fifo).unwrap().file_type().is_fifo() {
        let _ = std::fs::remove_file(&fifo);
        let _ = Command::new("mkfifo").arg(&fifo).status();
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        panic!("the FIFO was replaced by a regular file\n{}", r.all());
    }
    let got = reader.join().unwrap();
    assert_eq!(r.code, Some(0), "{}", r.all());
    assert!(got.contains("\"verdict\""), "nothing came through the pipe: {got:?}");
    std::fs::remove_dir_all(dir).ok();
}

/// Every knob that is set is checked before a command runs, read by this
/// command or not (`BITPARITY_CUDA_DEVICE=abc` was recorded in the header
/// and passed where no GPU runs), and a `BITPARITY_*` name that is no knob
/// (a typo) is refused, not silently ignored.
#[test]
fn unknown_and_unread_knobs_are_refused() {
    let args = ["check", "--op", "router", "--subject", "model:serial", "--cases", "1", "--quiet", "--no-save"];
    for (k, v) in [
        ("BITPARITY_SEEDS", "5"),
        ("BITPARITY_CUDA_DEVICE", "abc"),
        ("BITPARITY_CUDA_DEVICE", "-1"),
        ("BITPARITY_GPU_CASES", "many"),
        ("BITPARITY_GPU_SEED", "zz"),
        ("BITPARITY_REQUIRE_NVRTC", "yes"),
    ] {
        let r = run(bitparity().env(k, v).args(args));
        assert_eq!(r.code, Some(2), "{k}={v}: {}", r.all());
        assert!(r.stderr.contains(k), "{k}={v}: {}", r.all());
    }
    // The documented 0x-hex spelling of the GPU seed is a valid value.
    let r = run(bitparity().env("BITPARITY_GPU_SEED", "0x5eed").args(args));
    assert_eq!(r.code, Some(0), "{}", r.all());
}

/// `--op router --op router` runs the op once.
#[test]
fn an_op_named_twice_runs_once() {
    let r = run(bitparity().args([
        "check",
        "--op",
        "router",
        "--op",
        "router",
        "--subject",
        "model:serial",
        "--cases",
        "1",
        "--seed",
        "1",
        "--quiet",
        "--no-save",
        "--json",
        "-",
    ]));
    assert_eq!(r.code, Some(0), "{}", r.all());
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["ops"].as_array().unwrap().len(), 1, "{}", r.all());
}

/// A corpus that cannot be saved into (a file where the folder should be)
/// is refused before the first case, for `check` and `import`: it was found
/// out at the first failure, after the work, and the entry was lost.
#[test]
fn an_unusable_corpus_fails_before_any_case() {
    let dir = tmp("corpus-not-folder");
    let file = dir.join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    for corpus in [file.clone(), file.join("below")] {
        let r = run(bitparity()
            .args(["check", "--subject", "bug:offset-ignored", "--seconds", "30", "--quiet", "--corpus"])
            .arg(&corpus));
        assert_eq!(r.code, Some(2), "{}", r.all());
        assert!(r.seconds < 5.0, "took {:.1} s: the run happened first", r.seconds);
        assert!(r.stderr.contains("not a folder"), "{}", r.all());
    }
    let artifact = dir.join("artifact");
    std::fs::write(&artifact, b"x").unwrap();
    let r = run(bitparity()
        .args(["import", "--subject", "bug:fast-exp", "--target", "router_fwd", "--corpus"])
        .arg(&file)
        .arg(&artifact));
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.stderr.contains("not a folder") && !r.stderr.contains("FAILED"), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// Saving takes the corpus lock (`<corpus>/.lock`): while another process
/// holds it, a check that found a failure waits before deciding whether the
/// bug is known and writing its entry, so two checks saving into one corpus
/// at once cannot each write an entry for the same bug.
#[test]
fn saves_wait_for_the_corpus_lock() {
    let dir = tmp("lock");
    let held = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(".lock")).unwrap();
    held.lock().unwrap();
    let start = Instant::now();
    let child = bitparity()
        .args(["check", "--subject", "bug:offset-ignored", "--property", "conformance", "--cases", "20"])
        .args(["--seed", "1", "--quiet", "--corpus"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let written = json_files(&dir);
    held.unlock().unwrap();
    let r = finish(child, start);
    assert!(written.is_empty(), "saved while another process held the lock: {written:?}\n{}", r.all());
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert_eq!(json_files(&dir).len(), 1, "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}
