//! Hostile inputs (docs/security.md): every file, summary, config, knob and
//! provider reply bitparity reads is untrusted. Each test plants one attack
//! and checks that nothing starts a process, escapes its folder, reaches the
//! terminal raw, allocates past its bound, or hangs the run.
//!
//! They run against this build's binary, or the one `BITPARITY_TEST_BIN`
//! names: `BITPARITY_TEST_BIN=/path/to/old/bitparity cargo test --test it
//! hostile::` shows them fail on a binary without the defences.

use crate::common::{alive_with, bin, bitparity, real_entry, repo, run, tmp, write_json};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A real entry of the repository's corpus (a planted bug's).
const ENTRY: &str = "offset-stride-bug-offset-ignored-d9d7e7ee.json";

fn python() -> bool {
    Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

/// An entry whose subject names a program is a label: replay (the command
/// and `cargo test`'s library call) starts nothing, whether the name is
/// `exec:...`, `anyorder:exec:...` or a subject of the bitparity.toml in
/// the folder; `exec:sleep` does not stall it.
#[test]
fn an_entry_naming_a_program_starts_nothing() {
    let dir = tmp("exec-entry");
    let marker = dir.join("ran");
    std::fs::write(
        dir.join("bitparity.toml"),
        format!(
            "[[subject]]\nname = \"mine\"\ncommand = [\"touch\", \"{}\"]\nop = \"seqwise_loss\"\n",
            marker.display()
        ),
    )
    .unwrap();
    let touch = format!("exec:touch {}", marker.display());
    let labels = [touch.clone(), format!("anyorder:{touch}"), "mine".into(), "exec:sleep 100".into()];
    for (i, label) in labels.iter().enumerate() {
        let mut e = real_entry(ENTRY);
        e["subject"] = serde_json::json!(label);
        write_json(&dir.join(format!("corpus/seqwise_loss/e{i}.json")), &e);
    }
    let r = run(bitparity().current_dir(&dir).args(["replay", "corpus"]));
    assert!(!marker.exists(), "an entry started its subject's program\n{}", r.all());
    assert!(r.seconds < 30.0, "an entry's subject stalled the replay\n{}", r.all());
    assert_eq!(r.code, Some(0), "{}", r.all());
    assert_eq!(r.stdout.matches("runs only when named").count(), 4, "{}", r.all());
    // The library face `cargo test` uses.
    for label in &labels {
        let mut e = real_entry(ENTRY);
        e["subject"] = serde_json::json!(label);
        let entry = bitparity::corpus::parse(serde_json::to_string(&e).unwrap().as_bytes()).unwrap();
        let replay = bitparity::runner::replay::ReplayEntry { entry: &entry, names: &[] };
        let r = bitparity::harness::with_op("seqwise_loss", replay).unwrap();
        assert!(r.judged() && r.ok(), "{label}: {r:?}");
        // Not judged on the label (no bitparity.toml is loaded in this
        // process: "mine" is a name it does not know).
        assert!(r.not_replayed.iter().any(|s| &s.suite == label), "{label}: {r:?}");
    }
    assert!(!marker.exists(), "the library's replay started a program");
    std::fs::remove_dir_all(dir).ok();
}

/// No file is created or replaced through a link, and what would be is
/// refused before the run: a dangling `.lock` link, a linked op folder, a
/// linked corpus, a loop of links, a report path that is a link or a
/// folder.
#[test]
fn links_never_lead_a_write_elsewhere() {
    let dir = tmp("links");
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let check = || {
        let mut c = bitparity();
        c.args(["check", "--op", "seqwise_loss", "--subject", "bug:fma-quotient", "--cases", "30", "--seed", "1"]);
        c.arg("--quiet");
        c
    };
    // A dangling .lock: the old code created its target at the first failure.
    let c1 = dir.join("c1");
    std::fs::create_dir_all(&c1).unwrap();
    let target = elsewhere.join("created-by-lock");
    std::os::unix::fs::symlink(&target, c1.join(".lock")).unwrap();
    let r = run(check().arg("--corpus").arg(&c1));
    assert!(!target.exists(), "the .lock link's target was created\n{}", r.all());
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.stderr.contains("symbolic link"), "{}", r.all());
    // A linked op folder: entries were written into its target.
    let c2 = dir.join("c2");
    std::fs::create_dir_all(&c2).unwrap();
    std::os::unix::fs::symlink(&elsewhere, c2.join("seqwise_loss")).unwrap();
    let r = run(check().arg("--corpus").arg(&c2));
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.seconds < 10.0, "refused only after the run\n{}", r.all());
    // A corpus that is a loop of links.
    let c3 = dir.join("c3");
    std::os::unix::fs::symlink(dir.join("c3b"), &c3).unwrap();
    std::os::unix::fs::symlink(&c3, dir.join("c3b")).unwrap();
    let r = run(check().arg("--corpus").arg(&c3));
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.seconds < 10.0, "refused only after the run\n{}", r.all());
    let written: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
    assert!(written.is_empty(), "written outside the corpus: {written:?}");
    // A report path that is a link, or ends in /: refused before any case.
    let report = elsewhere.join("report.json");
    std::fs::write(&report, b"mine\n").unwrap();
    let link = dir.join("out.json");
    std::os::unix::fs::symlink(&report, &link).unwrap();
    for out in [link.clone(), dir.join("new-folder/")] {
        let r = run(check().arg("--no-save").arg("--json").arg(&out));
        assert_eq!(r.code, Some(2), "{}: {}", out.display(), r.all());
        assert!(r.seconds < 10.0, "refused only after the run\n{}", r.all());
    }
    assert_eq!(std::fs::read(&report).unwrap(), b"mine\n", "written through the link");
    std::fs::remove_dir_all(dir).ok();
}

/// A summary for `merge` is checked field by field before anything is
/// built from it: a forged shard count costs no memory and no time, totals
/// do not wrap, what `check` refuses is refused, and an infinite ratio
/// survives the round trip as "inf".
#[test]
fn merge_refuses_forged_summaries_quickly() {
    let dir = tmp("merge");
    let shard = |i: u32| {
        let p = dir.join(format!("s{i}.json"));
        let r = run(bitparity()
            .args(["check", "--op", "router", "--subject", "model:serial", "--cases", "6", "--seed", "3"])
            .args(["--no-save", "--quiet", "--shard", &format!("{i}/2"), "--json"])
            .arg(&p));
        assert_eq!(r.code, Some(0), "{}", r.all());
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&p).unwrap()).unwrap()
    };
    let (a, b) = (shard(1), shard(2));
    let merge = |name: &str, x: &serde_json::Value, y: &serde_json::Value| {
        let (px, py) = (dir.join(format!("{name}-1.json")), dir.join(format!("{name}-2.json")));
        write_json(&px, x);
        write_json(&py, y);
        run(bitparity().arg("merge").arg(&px).arg(&py).args(["--json", "-"]))
    };
    let r = merge("fine", &a, &b);
    assert_eq!(r.code, Some(0), "{}", r.all());
    type Forge = fn(&mut serde_json::Value);
    let forged: [(&str, Forge); 6] = [
        ("count", |x| x["plan"]["shard"] = serde_json::json!({"index": 1, "count": u64::MAX})),
        ("zero", |x| x["plan"]["shard"] = serde_json::json!({"index": 0, "count": 0})),
        ("wrap", |x| x["ops"][0]["cases"] = serde_json::json!(u64::MAX / 2 + 1)),
        ("ratio", |x| x["rows"][0]["worst_error_over_bound"] = serde_json::json!(-1.0)),
        ("seconds", |x| x["ops"][0]["seconds"] = serde_json::json!(1.7e308)),
        ("escape", |x| x["rows"][0]["subject"] = serde_json::json!("\u{1b}[2K\rok")),
    ];
    for (name, forge) in forged {
        let (mut x, mut y) = (a.clone(), b.clone());
        forge(&mut x);
        forge(&mut y);
        if name == "count" {
            y["plan"]["shard"] = serde_json::json!({"index": 2, "count": u64::MAX});
        }
        let r = merge(name, &x, &y);
        assert_ne!(r.code, Some(0), "{name}: accepted\n{}", r.all());
        assert!(r.seconds < 10.0, "{name}: slow\n{}", r.all());
        assert!(r.raw.len() < 10_000, "{name}: {} bytes of output", r.raw.len());
        assert!(!r.raw.contains(&0x1b), "{name}: an escape reached the terminal\n{}", r.all());
    }
    // 10^7 shards of which two are given: a short message, not the list.
    let (mut x, mut y) = (a.clone(), b.clone());
    x["plan"]["shard"] = serde_json::json!({"index": 1, "count": 10_000_000u64});
    y["plan"]["shard"] = serde_json::json!({"index": 2, "count": 10_000_000u64});
    let r = merge("many", &x, &y);
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.stderr.len() < 2000 && r.stderr.contains("more"), "{}", r.all());
    // An infinite ratio is "inf", distinct from null, and merges again.
    let (mut x, mut y) = (a.clone(), b.clone());
    let acc = x["rows"].as_array().unwrap().iter().position(|r| r["property"] == "accuracy").unwrap();
    x["rows"][acc]["worst_error_over_bound"] = serde_json::json!("inf");
    y["rows"][acc]["worst_error_over_bound"] = serde_json::json!(0.5);
    let r = merge("inf", &x, &y);
    let merged: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}\n{}", r.all()));
    assert_eq!(merged["rows"][acc]["worst_error_over_bound"], "inf", "{}", r.all());
    let null_rows = merged["rows"].as_array().unwrap().iter().filter(|r| r["worst_error_over_bound"].is_null()).count();
    assert!(null_rows > 0, "bitwise rows keep null");
    std::fs::remove_dir_all(dir).ok();
}

fn gone_within(token: &str, limit: Duration) -> Vec<String> {
    let start = Instant::now();
    loop {
        let alive = alive_with(token);
        if alive.is_empty() || start.elapsed() > limit {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A provider that leaves a grandchild in its own session and a daemon
/// behind: none of them survives the run's end, SIGINT (twice, as
/// `timeout -s INT` sends it), SIGTERM, or SIGKILL of bitparity; and where
/// the provider has a PID namespace, not even SIGKILL of every bitparity
/// process (its guards included).
#[test]
fn no_process_outlives_the_run() {
    if !python() {
        println!("SKIPPED: no python3 to run the provider");
        return;
    }
    let provider = repo().join("python/providers/tests/spawner.py");
    let namespaced = bitparity::exec::contain::spawn(&["true".into()], &[]).map(|c| {
        bitparity::exec::contain::wait(c.guard);
        c.mode != bitparity::exec::contain::Mode::Subreaper
    });
    let start = |token: &str, hang: bool| -> Child {
        let subject = format!("exec:python3 {} {token}{}", provider.display(), if hang { " hang" } else { "" });
        let mut c = bitparity();
        c.args(["check", "--op", "seqwise_loss", "--cases", "30", "--no-save", "--quiet", "--subject", &subject]);
        c.env("BITPARITY_EXEC_TIMEOUT", "60").stdout(Stdio::null()).stderr(Stdio::null());
        c.process_group(0);
        c.spawn().unwrap()
    };
    let token = |what: &str| format!("bp-hostile-{}-{what}", std::process::id());
    let wait_started = |t: &str| {
        let s = Instant::now();
        while alive_with(t).len() < 4 && s.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(alive_with(t).len() >= 4, "the provider and its leftovers did not start: {:?}", alive_with(t));
    };
    // The run's own end.
    let t = token("end");
    let mut c = start(&t, false);
    c.wait().unwrap();
    assert_eq!(gone_within(&t, Duration::from_secs(3)), Vec::<String>::new(), "left after the run");
    // Signals to bitparity: SIGINT twice at once (a process-group signal),
    // SIGTERM, SIGKILL.
    for (what, sigs) in
        [("int", vec![libc::SIGINT, libc::SIGINT]), ("term", vec![libc::SIGTERM]), ("kill", vec![libc::SIGKILL])]
    {
        let t = token(what);
        let mut c = start(&t, true);
        wait_started(&t);
        for s in sigs {
            // SAFETY: a signal to the child this test spawned.
            unsafe { libc::kill(c.id() as i32, s) };
        }
        let _ = c.wait();
        assert_eq!(gone_within(&t, Duration::from_secs(10)), Vec::<String>::new(), "left after {what}");
    }
    // Every bitparity process killed at once (`pkill -9 -f`): only a
    // namespace can hold its leftovers then.
    match namespaced {
        Ok(true) => {
            let t = token("pkill");
            let mut c = start(&t, true);
            wait_started(&t);
            for p in alive_with(&t) {
                let pid: i32 = p.split(':').next().unwrap().parse().unwrap();
                let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
                if exe == Path::new(&bin()) || exe.to_string_lossy().contains("bitparity") {
                    // SAFETY: a signal to a process of this test's run.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            let _ = c.wait();
            assert_eq!(gone_within(&t, Duration::from_secs(5)), Vec::<String>::new(), "left after pkill -9");
        }
        other => println!("SKIPPED the pkill -9 probe: no PID namespace can be made here ({other:?})"),
    }
}

/// A subject that never answers costs a bounded time: after 3 timeouts in a
/// row it is hung, its remaining cases are not judged, and the run fails.
#[test]
fn an_unresponsive_subject_costs_bounded_time() {
    if !python() {
        println!("SKIPPED: no python3 to run the provider");
        return;
    }
    let subject = format!("exec:python3 {}", repo().join("python/providers/tests/hang.py").display());
    let r = run(bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "60", "--no-save", "--quiet", "--subject", &subject])
        .env("BITPARITY_EXEC_TIMEOUT", "1"));
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert!(r.seconds < 60.0, "{}", r.all());
    assert!(r.stdout.contains("hung"), "{}", r.all());
}

/// Strings read from an entry, a provider's stderr or its error message
/// reach the terminal escaped.
#[test]
fn untrusted_text_is_escaped() {
    let dir = tmp("escape");
    let mut e = real_entry(ENTRY);
    e["date"] = serde_json::json!("2026-12-07\u{1b}[2K\r\u{1b}[32mok");
    e["subject"] = serde_json::json!("bug:fma-quotient\u{1b}[1A");
    write_json(&dir.join("seqwise_loss/e.json"), &e);
    let r = run(bitparity().arg("replay").arg(&dir));
    assert!(!r.raw.contains(&0x1b), "an escape sequence reached the terminal\n{}", r.all());
    assert!(r.stdout.contains("\\u{1b}[2K"), "{}", r.all());
    let r = run(bitparity().args([
        "check",
        "--op",
        "seqwise_loss",
        "--cases",
        "2",
        "--no-save",
        "--quiet",
        "--subject",
        "exec:sh -c \"printf '\\033[31mred\\n' >&2; exit 3\"",
    ]));
    assert_ne!(r.code, Some(0), "{}", r.all());
    assert!(!r.raw.contains(&0x1b), "a provider's escape reached the terminal\n{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// Runs `args` (the binary's) to its end: its exit code and peak resident
/// memory (KiB), as `getrusage(RUSAGE_CHILDREN)` of a small Python parent
/// reports it. (A child's peak counted by this test process itself would
/// start from this process's own size: Linux carries the peak of the image
/// a child was forked from across its exec.)
fn peak_rss_kib(args: &[&str]) -> Option<(i32, i64)> {
    let script = "import resource, subprocess, sys\n\
                  r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n\
                  print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)";
    let mut c = Command::new("python3");
    c.arg("-c").arg(script).arg(bin()).args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("BITPARITY_") {
            c.env_remove(k);
        }
    }
    let out = c.output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

/// No accepted entry needs more than 256 MB, whatever it declares: the
/// largest file accepted (16 MiB of values) and the largest footprint
/// (strided storage at the bound); what is past the bounds (a 20 MiB
/// file, a 2^28-element layout of a 2 MB file) is refused in little memory.
#[test]
fn entries_are_bounded_in_memory() {
    let dir = tmp("memory");
    let base = real_entry(ENTRY);
    let mk = |name: &str, t: usize, e: usize, stride: usize| {
        let mut v = base.clone();
        v["property"] = serde_json::json!("conformance");
        v["subject"] = serde_json::json!("oracle:serial");
        let c = &mut v["case"];
        c["t"] = serde_json::json!(t);
        c["e"] = serde_json::json!(e);
        c["layout"] = serde_json::json!({"offset": 1, "row_stride": stride});
        c["scores"] = serde_json::json!(vec!["0x1.8p-1"; t * e]);
        c["padding"] = serde_json::Value::Null;
        c["objective"] = serde_json::json!({"kind": "unbiased_top_k", "k": 1});
        let p = dir.join(format!("{name}/seqwise_loss/e.json"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        (p.parent().unwrap().parent().unwrap().to_path_buf(), std::fs::metadata(&p).unwrap().len())
    };
    let cases = [
        // (name, t, e, stride, accepted)
        ("values", 65_536, 16, 16, true),
        ("storage", 1000, 2, 4098, true),
        ("too-many-bytes", 200_000, 12, 12, false),
        ("too-much-storage", 65_000, 2, 4098, false),
    ];
    if !python() {
        println!("SKIPPED: no python3 to measure a child's peak memory");
        return;
    }
    for (name, t, e, stride, accepted) in cases {
        let (corpus, bytes) = mk(name, t, e, stride);
        let (code, kib) = peak_rss_kib(&["replay", corpus.to_str().unwrap()]).expect("measured");
        println!("{name}: {bytes} bytes, peak {} MiB, exit {code}", kib >> 10);
        assert!(kib < 256 << 10, "{name}: {} MiB", kib >> 10);
        assert_eq!(code == 0, accepted, "{name}: exit {code}");
    }
    std::fs::remove_dir_all(dir).ok();
}

/// What `check` and the config refuse, they refuse before any case.
#[test]
fn bad_configs_are_refused_with_the_reason() {
    let dir = tmp("config");
    let entries: [(&str, &[u8], &str); 5] = [
        ("tiny-timeout", b"[[subject]]\nname='a'\ncommand='x'\nop='router'\ntimeout_s=1e-300\n", "timeout"),
        ("env-key", b"[[subject]]\nname='a'\ncommand='x'\nop='router'\nenv={'A=B'='1'}\n", "variable name"),
        ("anyorder-name", b"[[subject]]\nname='anyorder:a'\ncommand='x'\nop='router'\n", "built-in"),
        ("library-name", b"[[subject]]\nname='cuda-tc'\ncommand='x'\nop='shared_expert'\n", "built-in"),
        ("not-utf8", b"[[subject]]\nname='a\xff'\ncommand='x'\nop='router'\n", "UTF-8"),
    ];
    for (name, text, why) in entries {
        let p = dir.join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        let r = run(bitparity().args(["check", "--op", "router", "--cases", "1", "--no-save", "--config"]).arg(&p));
        assert_eq!(r.code, Some(2), "{name}: {}", r.all());
        assert!(r.stderr.contains(why), "{name}: expected {why:?}\n{}", r.all());
    }
    std::fs::remove_dir_all(dir).ok();
}

/// A report into a FIFO nobody reads ends the run with an error, not a
/// hang deaf to SIGTERM.
#[test]
fn a_fifo_without_reader_does_not_hang_the_run() {
    let dir = tmp("fifo");
    let fifo = dir.join("report.html");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let r = run(bitparity()
        .args(["check", "--op", "router", "--subject", "model:serial", "--cases", "2", "--no-save", "--quiet"])
        .arg("--html")
        .arg(&fifo));
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(r.seconds < 30.0, "{}", r.all());
    assert!(r.stderr.contains("FIFO"), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}

/// A provider that answers every case `unavailable` judged nothing it
/// computes: the run does not pass (exit 3), though it refused every
/// invalid case.
#[test]
fn a_subject_that_computed_nothing_is_not_a_pass() {
    if !python() {
        println!("SKIPPED: no python3 to run the provider");
        return;
    }
    let subject = format!("exec:python3 {}", repo().join("python/providers/tests/unavailable.py").display());
    let r = run(bitparity().args([
        "check",
        "--op",
        "seqwise_loss",
        "--cases",
        "20",
        "--no-save",
        "--quiet",
        "--subject",
        &subject,
    ]));
    assert_eq!(r.code, Some(3), "{}", r.all());
    assert!(r.stdout.contains("NOTHING JUDGED"), "{}", r.all());
}

/// `timeout -s INT` signals bitparity twice at once: the run still ends
/// with its table and its JSON written, every time.
#[test]
fn a_group_wide_interrupt_still_writes_the_report() {
    let dir = tmp("interrupt");
    for i in 0..3 {
        let json = dir.join(format!("s{i}.json"));
        let r = run(Command::new("timeout")
            .args(["-s", "INT", "2"])
            .arg(bin())
            .args(["check", "--op", "seqwise_loss", "--cases", "1000000", "--no-save", "--quiet", "--json"])
            .arg(&json)
            .env_remove("BITPARITY_CASES"));
        assert!(r.stdout.contains("INTERRUPTED"), "run {i}: {}", r.all());
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(s["interrupted"], true, "run {i}");
    }
    std::fs::remove_dir_all(dir).ok();
}

/// `replay --subject S` judges every entry on S, whatever subject the
/// entry records: an entry of `exec:python3 ./p.py` is not dropped when
/// replayed with `exec:python3 p.py`.
#[test]
fn a_named_subject_judges_entries_of_any_label() {
    if !python() {
        println!("SKIPPED: no python3 to run the provider");
        return;
    }
    let dir = tmp("label");
    let mut e = real_entry(ENTRY);
    e["subject"] = serde_json::json!("exec:python3 ./python/providers/tests/pure_seqwise_loss.py");
    write_json(&dir.join("seqwise_loss/e.json"), &e);
    let subject = "exec:python3 python/providers/tests/pure_seqwise_loss.py";
    let r = run(bitparity().current_dir(repo()).arg("replay").arg(&dir).args(["--subject", subject]));
    assert_eq!(r.code, Some(0), "{}", r.all());
    assert!(r.stdout.contains("1 passed"), "{}", r.all());
    // --label selects by the recorded subject; one that matches nothing says so.
    let r = run(bitparity().current_dir(repo()).arg("replay").arg(&dir).args(["--label", subject]));
    assert_eq!(r.code, Some(3), "{}", r.all());
    assert!(r.stdout.contains("no entry is labelled"), "{}", r.all());
    std::fs::remove_dir_all(dir).ok();
}
