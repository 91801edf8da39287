//! External subjects through the protocol (docs/protocol.md), against the
//! plain-Python providers of `python/providers/tests/` (python3 only: no
//! numpy, no torch): a correct provider passes every property; a planted
//! bug is caught through the wire; crashing, hanging and garbage-writing
//! providers are each a failure, shrunk and saved, within a bounded time,
//! with no child left behind; `bitparity.toml` is strict.

use crate::common::{alive_with, text, tmp};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bitparity() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bitparity"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    // Small cases: the plain-Python provider rounds every operation by hand.
    c.env("BITPARITY_MAX_TE", "256").env("BITPARITY_MAX_T", "40");
    c
}

fn provider(file: &str) -> String {
    format!("python3 python/providers/tests/{file}")
}

fn entries(dir: &Path) -> Vec<serde_json::Value> {
    let op = dir.join("seqwise_loss");
    let mut v = Vec::new();
    for e in std::fs::read_dir(&op).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default() {
        if e.path().extension().is_some_and(|x| x == "json") {
            v.push(serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap());
        }
    }
    v
}

fn row<'a>(json: &'a serde_json::Value, property: &str, subject: &str) -> &'a serde_json::Value {
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["property"] == property && r["subject"] == subject)
        .unwrap_or_else(|| panic!("no row {property} / {subject}"))
}

#[test]
fn a_correct_provider_passes_every_property_bitwise() {
    let dir = tmp("correct");
    let subject = format!("exec:{}", provider("pure_seqwise_loss.py"));
    let json = dir.join("s.json");
    let out = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "30", "--seed", "5", "--quiet", "--no-save", "--subject"])
        .arg(&subject)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for p in ["conformance", "determinism", "offset-stride", "padding", "validation", "accuracy", "gradient"] {
        let r = row(&v, p, &subject);
        assert_eq!((r["cases"].as_u64(), r["failures"].as_u64()), (Some(30), Some(0)), "{p}: {r}");
        assert_eq!(r["profile"], "serial", "the provider claims serial: {r}");
    }
    assert!(row(&v, "batch-invariance", &subject)["not_applicable"].is_string());
}

/// The pure-Python provider computing native's `mask` padding rule
/// (docs/padding.md) passes under the rule it claims and fails, bitwise,
/// when it claims the other; the plain provider (`skip`) claiming `mask`
/// fails too. The report names the rule each row was judged by.
#[test]
fn a_provider_is_judged_by_the_padding_rule_it_claims() {
    let run = |args: &str, properties: &[&str]| {
        let subject = format!("exec:{} {args}", provider("pure_seqwise_loss.py"));
        let mut c = bitparity();
        c.args(["check", "--op", "seqwise_loss", "--cases", "30", "--seed", "5", "--quiet", "--no-save"]);
        for p in properties {
            c.args(["--property", p]);
        }
        let out = c.args(["--json", "-", "--subject"]).arg(&subject).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out, v, subject)
    };
    let (out, v, subject) = run("--mask", &["conformance", "padding", "accuracy", "gradient"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for p in ["conformance", "padding", "accuracy", "gradient"] {
        let r = row(&v, p, &subject);
        assert_eq!((r["cases"].as_u64(), r["failures"].as_u64()), (Some(30), Some(0)), "{p}: {r}");
        assert_eq!(r["padding"], "mask", "{p}: {r}");
    }
    for args in ["--mask --claim skip", "--claim mask"] {
        let (out, v, subject) = run(args, &["conformance"]);
        assert_eq!(out.status.code(), Some(1), "{args}: {}", text(&out));
        let r = row(&v, "conformance", &subject);
        assert!(r["failures"].as_u64().unwrap() > 0, "{args}: {r}");
        assert_eq!(r["padding"], if args == "--claim mask" { "mask" } else { "skip" });
    }
}

/// A provider of one clamp tie rule (`--tie`: it ignores the case's
/// `clamp_tie`) passes conformance and gradient when its handshake claims
/// that rule, whatever rule the generated cases carry; claiming none, it is
/// caught on a case of the other rule at the tie, shrunk to one or two
/// tokens. The rows say which rule judged.
#[test]
fn a_provider_of_one_clamp_tie_rule_is_judged_by_the_rule_it_claims() {
    let run = |args: &str| {
        let subject = format!("exec:{} {args}", provider("pure_seqwise_loss.py"));
        let out = bitparity()
            .args(["check", "--op", "seqwise_loss", "--cases", "40", "--seed", "11", "--quiet", "--no-save"])
            .args(["--property", "conformance", "--property", "gradient", "--json", "-", "--subject"])
            .arg(&subject)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out, v, subject)
    };
    // Seed 11 holds clamp tie cases of both rules (the failing runs below
    // check it, so the passing ones cannot pass vacuously).
    for tie in ["strict", "inclusive"] {
        let (out, v, subject) = run(&format!("--tie {tie}"));
        assert_eq!(out.status.code(), Some(0), "{tie}: {}", text(&out));
        for p in ["conformance", "gradient"] {
            let r = row(&v, p, &subject);
            assert_eq!((r["cases"].as_u64(), r["failures"].as_u64()), (Some(40), Some(0)), "{p}: {r}");
            assert_eq!(r["clamp_tie"], tie, "{p}: {r}");
        }
        let (out, v, subject) = run(&format!("--tie {tie} --claim-tie case"));
        assert_eq!(out.status.code(), Some(1), "{tie} claiming none: {}", text(&out));
        let r = row(&v, "conformance", &subject);
        assert!(r["failures"].as_u64().unwrap() > 0, "{r}");
        assert!(r.get("clamp_tie").is_none(), "{r}");
        assert!(text(&out).contains("shrunk to T=1") || text(&out).contains("shrunk to T=2"), "{}", text(&out));
    }
}

#[test]
fn a_clamp_tie_claim_on_an_op_without_a_clamp_is_refused() {
    let run = |args: &str| {
        let subject = format!("exec:{} --serve-as shared_expert {args}", provider("pure_seqwise_loss.py"));
        let out = bitparity()
            .args(["check", "--op", "shared_expert", "--cases", "3", "--seed", "1", "--quiet", "--no-save"])
            .args(["--property", "validation", "--subject"])
            .arg(&subject)
            .output()
            .unwrap();
        (out.status.code(), text(&out))
    };
    let (code, t) = run("--tie strict");
    assert_eq!(code, Some(2), "{t}");
    assert!(t.contains("claims clamp_tie strict, but shared_expert has no clamp"), "{t}");
    // Without the claim the handshake is accepted (the cases then fail:
    // this provider computes seqwise_loss).
    let (code, t) = run("");
    assert!(!t.contains("has no clamp") && code != Some(2), "{code:?} {t}");
}

#[test]
fn a_planted_bug_is_caught_through_the_protocol() {
    let subject = format!("exec:{} --bug ignore-offset", provider("pure_seqwise_loss.py"));
    let out = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "20", "--seed", "3", "--quiet", "--no-save"])
        .args(["--property", "offset-stride", "--property", "conformance", "--subject"])
        .arg(&subject)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("FAILED seqwise_loss / offset-stride") && t.contains("FAILED seqwise_loss / conformance"),
        "{t}"
    );
}

#[test]
fn unavailable_replies_are_skips_not_passes_nor_failures() {
    let subject = format!("exec:{} --unavailable-odd", provider("pure_seqwise_loss.py"));
    let out = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "20", "--seed", "3", "--quiet", "--no-save"])
        .args(["--property", "conformance", "--json", "-", "--subject"])
        .arg(&subject)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = row(&v, "conformance", &subject);
    let (cases, skipped) = (r["cases"].as_u64().unwrap(), r["unavailable"].as_u64().unwrap());
    assert!(skipped > 0 && cases > 0 && cases + skipped == 20, "{r}");
    assert_eq!(r["failures"], 0);
    assert!(r["unavailable_reason"].as_str().unwrap().contains("odd T"), "{r}");
}

/// A hostile provider's run: exit 1, the failure's message holds `says`,
/// a shrunk entry is saved, the run ends in `limit`, no child is left.
fn hostile(name: &str, subject_args: &str, says: &[&str], timeout: &str, limit: Duration) {
    let dir = tmp(name);
    let marker = format!("bp-marker-{}-{name}", std::process::id());
    let subject = format!("exec:{subject_args} {marker}");
    let start = Instant::now();
    let out = bitparity()
        .env("BITPARITY_EXEC_TIMEOUT", timeout)
        // Case 1 of seed 1 has an odd T: every hostile provider misbehaves.
        .args(["check", "--op", "seqwise_loss", "--cases", "3", "--seed", "1", "--quiet", "--property", "determinism"])
        .arg("--corpus")
        .arg(&dir)
        .arg("--subject")
        .arg(&subject)
        .output()
        .unwrap();
    let took = start.elapsed();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{name}: {t}");
    assert!(took < limit, "{name}: {took:?}");
    for s in says {
        assert!(t.contains(s), "{name}: no {s:?} in\n{t}");
    }
    assert!(!t.contains("panicked"), "{t}");
    let saved = entries(&dir);
    assert_eq!(saved.len(), 1, "{name}: {saved:?}");
    assert_eq!(saved[0]["subject"], subject.as_str());
    assert_eq!(saved[0]["property"], "determinism");
    // Every provider misbehaves on odd T: shrunk to one token.
    assert_eq!(saved[0]["case"]["t"], 1, "{name}: not shrunk: {}", saved[0]);
    let left = alive_with(&marker);
    assert!(left.is_empty(), "{name}: children left behind: {left:?}");
}

#[test]
fn a_segfaulting_provider_is_a_failure_shrunk_and_saved() {
    hostile("segv", &provider("crash.py segv"), &["crashed", "SIGSEGV", "dying on T=1"], "20", Duration::from_secs(90));
}

#[test]
fn an_exiting_provider_is_a_failure_shrunk_and_saved() {
    hostile("exit", &provider("crash.py exit"), &["crashed", "exited with code 3"], "20", Duration::from_secs(90));
}

#[test]
fn a_slowly_exiting_provider_is_reported_with_its_own_status_and_last_lines() {
    // Its stdout closes 1.5 s before it exits, as a CUDA process's does:
    // waited for, not "killed by bitparity" with its last line lost.
    hostile(
        "slow-exit",
        &provider("slow_exit.py"),
        &["crashed", "its stdout closed", "exited with code 7", "last words on T=1"],
        "20",
        Duration::from_secs(120),
    );
}

#[test]
fn a_hanging_provider_times_out_and_is_a_failure() {
    hostile(
        "hang",
        &provider("hang.py"),
        &["no reply within 1 s", "sleeping forever on T=1"],
        "1",
        Duration::from_secs(120),
    );
}

/// A subject marked hung while failures are in flight: one entry is saved
/// (a hung subject's cases are not one bug each), with the failure it
/// showed, never "(no longer fails)". Under the tests' knobs seed 1's cases
/// 0-11 have T = 3, 7, 2, 2, 1, 3, 3, 3, 1, 1, 2, 2: case 1 (T=7) fails at
/// once, case 0 (T=3) when its timeout marks the subject hung, so the
/// lowest failing case is not the one shrunk first.
#[test]
fn a_subject_hung_while_shrinking_is_saved_once_with_what_it_showed() {
    let dir = tmp("hung-once");
    let out = bitparity()
        .env("BITPARITY_EXEC_TIMEOUT", "2")
        .env("BITPARITY_HUNG_AFTER", "1")
        .env("RAYON_NUM_THREADS", "2")
        .args(["check", "--op", "seqwise_loss", "--cases", "12", "--seed", "1", "--quiet"])
        .args(["--property", "determinism", "--corpus"])
        .arg(&dir)
        .arg("--subject")
        .arg(format!("exec:{}", provider("garbage.py mixed")))
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let saved = entries(&dir);
    assert_eq!(saved.len(), 1, "{saved:?}");
    let note = saved[0]["note"].as_str().unwrap();
    assert!(note.contains("not JSON") || note.contains("no reply within 2 s"), "{note}");
    assert!(!t.contains("no longer fails"), "{t}");
}

#[test]
fn garbage_on_stdout_is_a_failure_whatever_its_kind() {
    for (mode, says) in [
        ("huge", "a header of 4294967295 bytes"),
        ("json", "not JSON"),
        ("oversized", "the case implies"),
        ("short", "the frame stopped after"),
        ("print", "garbage on stdout"),
    ] {
        hostile(
            &format!("garbage-{mode}"),
            &provider(&format!("garbage.py {mode}")),
            &["crashed", says],
            "2",
            Duration::from_secs(120),
        );
    }
}

#[test]
fn a_saved_entry_replays_against_its_subject_and_passes_once_fixed() {
    let dir = tmp("replay");
    let config = dir.join("bitparity.toml");
    let write = |file: &str| {
        let text = format!(
            "[[subject]]\nname = \"my-loss\"\ncommand = \"{}\"\nop = \"seqwise_loss\"\ntimeout_s = 20\n",
            provider(file)
        );
        std::fs::write(&config, text).unwrap();
    };
    write("crash.py segv");
    let corpus = dir.join("corpus");
    let out = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "6", "--seed", "1", "--quiet", "--property", "determinism"])
        .args(["--subject", "my-loss", "--config"])
        .arg(&config)
        .arg("--corpus")
        .arg(&corpus)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(entries(&corpus)[0]["subject"], "my-loss");
    let replay = || {
        bitparity().arg("replay").arg(&corpus).args(["--subject", "my-loss", "--config"]).arg(&config).output().unwrap()
    };
    let out = replay();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("FAIL") && t.contains("my-loss: fails") && t.contains("SIGSEGV"), "{t}");
    // The kernel fixed (here: the correct provider under the same name):
    // the entry replays green, on it and on every built-in subject.
    std::fs::write(
        &config,
        format!(
            "[[subject]]\nname = \"my-loss\"\ncommand = \"{}\"\nop = \"seqwise_loss\"\nprofile = \"serial\"\n",
            provider("pure_seqwise_loss.py")
        ),
    )
    .unwrap();
    let out = replay();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("1 passed"), "{}", text(&out));
}

/// A failure of a subject of a `bitparity.toml` named by `--config` prints
/// reproduce commands that carry `--config PATH` (and, for the replay, the
/// subject): each, pasted as printed from the same folder, fails the same
/// way instead of stopping at an unknown subject.
#[test]
fn reproduce_commands_of_a_configured_subject_carry_its_config() {
    let dir = tmp("reproduce-config");
    let config = dir.join("my project.toml");
    std::fs::write(
        &config,
        format!(
            "[[subject]]\nname = \"my-loss\"\ncommand = \"{}\"\nop = \"seqwise_loss\"\ntimeout_s = 20\n",
            provider("crash.py segv")
        ),
    )
    .unwrap();
    let corpus = dir.join("corpus");
    let out = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "3", "--seed", "1", "--quiet", "--property", "determinism"])
        .args(["--subject", "my-loss", "--config"])
        .arg(&config)
        .arg("--corpus")
        .arg(&corpus)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let head = "FAILED seqwise_loss / determinism / my-loss";
    let failure = t.split(head).nth(1).unwrap_or_else(|| panic!("no failure text:\n{t}"));
    let commands: Vec<&str> = failure.lines().filter_map(|l| l.trim().strip_prefix("reproduce: ")).collect();
    assert_eq!(commands.len(), 2, "{failure}");
    for cmd in commands {
        let words = shell_words::split(cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        let at = words.iter().position(|w| w == "bitparity").unwrap();
        assert!(
            words.windows(2).any(|w| w[0] == "--config" && std::path::Path::new(&w[1]) == config),
            "no --config {}: {cmd}",
            config.display()
        );
        // As pasted: the VAR=value words, then `bitparity` and its
        // arguments, from the folder the check ran in.
        let mut c = bitparity();
        c.env_remove("BITPARITY_MAX_TE").env_remove("BITPARITY_MAX_T");
        for kv in &words[..at] {
            let (k, v) = kv.split_once('=').unwrap();
            c.env(k, v);
        }
        let again = c.args(&words[at + 1..]).output().unwrap();
        let t = text(&again);
        assert_eq!(again.status.code(), Some(1), "{cmd}: {t}");
        if words[at + 1] == "replay" {
            assert!(t.contains("my-loss: fails") && t.contains("SIGSEGV"), "{cmd}: {t}");
        } else {
            assert!(t.contains(head) && t.contains("SIGSEGV"), "{cmd}: {t}");
        }
    }
}

#[test]
fn bad_configs_and_commands_are_refused_with_the_reason() {
    let dir = tmp("config");
    let check = |config: &str, subject: &str| {
        let p = dir.join("c.toml");
        std::fs::write(&p, config).unwrap();
        bitparity()
            .args(["check", "--op", "seqwise_loss", "--cases", "1", "--quiet", "--no-save", "--subject", subject])
            .arg("--config")
            .arg(&p)
            .output()
            .unwrap()
    };
    let pure = provider("pure_seqwise_loss.py");
    for (config, want) in [
        (format!("[[subject]]\nname='a'\ncommand='{pure}'\nop='seqwise_loss'\ntimeout='3'\n"), "timeout"),
        ("[[subject]\nname='a'\n".to_string(), "c.toml"),
        (format!("[[subject]]\nname='a'\ncommand='{pure}'\nop='router'\n"), "is for op router"),
        (format!("[[subject]]\nname='a'\ncommand='{pure}'\nop='seqwise_loss'\n"), "claims profile none"),
        (
            format!("[[subject]]\nname='a'\ncommand='{pure}'\nop='seqwise_loss'\nprofile='warp32-chunk64'\n"),
            "claims profile warp32-chunk64",
        ),
        (
            format!("[[subject]]\nname='a'\ncommand='{pure}'\nop='seqwise_loss'\nprofile='serial'\npadding='mask'\n"),
            "says it claims padding mask, its handshake claims skip",
        ),
        (
            format!(
                "[[subject]]\nname='a'\ncommand='{pure}'\nop='seqwise_loss'\nprofile='serial'\nclamp_tie='strict'\n"
            ),
            "says it claims clamp_tie strict, its handshake claims none",
        ),
        (
            format!("[[subject]]\nname='a'\ncommand='{pure}'\nop='seqwise_loss'\nprofile='serial'\nclamp_tie='both'\n"),
            "clamp_tie \"both\"",
        ),
    ] {
        let out = check(&config, "a");
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{config}: {t}");
        assert!(t.contains(want), "{config}: no {want:?} in {t}");
    }
    let missing = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "1", "--config", "/nonexistent/bitparity.toml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    let run = |subject: &str| {
        bitparity()
            .args(["check", "--op", "seqwise_loss", "--cases", "1", "--quiet", "--no-save", "--subject", subject])
            .output()
            .unwrap()
    };
    let out = run("exec:/nonexistent/kernel --x");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("cannot start"), "{}", text(&out));
    let out = run("exec:python3 -c 'print(1)'");
    assert_eq!(out.status.code(), Some(3), "no handshake: cannot run here: {}", text(&out));
    assert!(text(&out).contains("handshake"), "{}", text(&out));
    let out = run("exec:python3 'unclosed");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn sigint_ends_a_run_cleanly_and_leaves_no_child() {
    let marker = format!("bp-marker-{}-sigint", std::process::id());
    let mut child = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "100000", "--quiet", "--no-save", "--subject"])
        .arg(format!("exec:{} {marker}", provider("pure_seqwise_loss.py")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Judging is under way once the provider is up.
    let start = Instant::now();
    while alive_with(&marker).is_empty() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let limit = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(limit.elapsed() < Duration::from_secs(60), "still running after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(130), "{}", text(&out));
    assert!(!text(&out).contains("crashed"), "the child must not see the SIGINT: {}", text(&out));
    let left = alive_with(&marker);
    assert!(left.is_empty(), "children left behind: {left:?}");
}

/// SIGINT while a slow subject's failure is being shrunk: the shrink stops
/// at the smallest failing case so far, which is saved and reported, and
/// the run ends at once with the table (it waited out the whole shrink, for
/// minutes, with a PyTorch provider on the H200).
#[test]
fn sigint_cuts_a_slow_shrink_short_and_saves_what_it_has() {
    let dir = std::env::temp_dir().join(format!("bp-exec-sigint-shrink-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = bitparity()
        .args(["check", "--op", "seqwise_loss", "--property", "offset-stride", "--cases", "100000", "--seed", "3"])
        .args(["--quiet", "--corpus"])
        .arg(&dir)
        .arg("--subject")
        .arg(format!("exec:{} --bug ignore-offset --slow 0.5", provider("pure_seqwise_loss.py")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr until the shrink starts.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let start = Instant::now();
    while !seen.contains("shrinking") && start.elapsed() < Duration::from_secs(60) {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    assert!(seen.contains("shrinking"), "{seen}");
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let limit = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(limit.elapsed() < Duration::from_secs(15), "still shrinking 15 s after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    let out = child.wait_with_output().unwrap();
    let all = format!("{seen}{rest}{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(status.code(), Some(1), "{all}");
    assert!(all.contains("FAILED seqwise_loss / offset-stride"), "{all}");
    let saved = std::fs::read_dir(dir.join("seqwise_loss")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(saved, 1, "{all}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The numpy backend (as_strided views on the poisoned buffer) through a
/// numpy provider that claims `serial`: bitwise on every property. Where
/// python3 has no numpy this test says so on stderr and checks nothing
/// (CI needs no numpy: the plain-Python provider covers the protocol).
#[test]
fn the_numpy_backend_keeps_layouts_and_bits() {
    let has_numpy = Command::new("python3").args(["-c", "import numpy"]).status().is_ok_and(|s| s.success());
    if !has_numpy {
        eprintln!("SKIPPED the_numpy_backend_keeps_layouts_and_bits: python3 has no numpy");
        return;
    }
    let subject = format!("exec:{}", provider("numpy_seqwise_loss.py"));
    let out = bitparity()
        .args(["check", "--op", "seqwise_loss", "--cases", "40", "--seed", "9", "--quiet", "--no-save", "--json", "-"])
        .args(["--property", "conformance", "--property", "offset-stride", "--property", "padding", "--subject"])
        .arg(&subject)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in ["conformance", "offset-stride", "padding"] {
        assert_eq!(row(&v, p, &subject)["cases"], 40, "{p}");
    }
}

/// moe_combine's wire end to end: the plain-Python provider claims `serial`
/// and passes conformance (slots, counts, x_disp, y, dx_exp, dw, dx bit for
/// bit), the metamorphic properties and validation through the protocol.
#[test]
fn the_pure_moe_combine_provider_conforms() {
    let subject = format!("exec:{}", provider("pure_moe_combine.py"));
    let props = ["conformance", "padding", "offset-stride", "validation"];
    let out = bitparity()
        .args(["check", "--op", "moe_combine", "--cases", "40", "--seed", "3", "--quiet", "--no-save", "--json", "-"])
        .args(props.iter().flat_map(|p| ["--property", p]))
        .arg("--subject")
        .arg(&subject)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in props {
        assert_eq!(row(&v, p, &subject)["cases"], 40, "{p}");
    }
}

/// Every op's wire encoding end to end (router, shared_expert: their buffers,
/// layouts and output sizes) and the package's validation of the ops' rules
/// (the validation section of each page of docs/ops/): every invalid variant
/// the validation property sends is refused. Without the package's validation,
/// the same provider refuses nothing, and the validation property must say so.
#[test]
fn every_op_travels_and_invalid_cases_are_refused() {
    for op in ["router", "shared_expert", "seqwise_loss", "moe_combine"] {
        let run = |extra: &str| {
            bitparity()
                .args(["check", "--op", op, "--cases", "25", "--seed", "2", "--quiet", "--no-save", "--json", "-"])
                .args(["--property", "validation", "--property", "determinism", "--property", "offset-stride"])
                .arg("--subject")
                .arg(format!("exec:{} {op}{extra}", provider("zeros.py")))
                .output()
                .unwrap()
        };
        let out = run("");
        assert_eq!(out.status.code(), Some(0), "{op}: {}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let subject = format!("exec:{} {op}", provider("zeros.py"));
        for p in ["validation", "determinism", "offset-stride"] {
            assert_eq!(row(&v, p, &subject)["cases"], 25, "{op} {p}");
        }
        let out = run(" --no-validate");
        assert_eq!(out.status.code(), Some(1), "{op}: {}", text(&out));
        assert!(text(&out).contains("accepted an invalid input"), "{op}: {}", text(&out));
    }
}
