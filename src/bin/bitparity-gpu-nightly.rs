//! The nightly GPU differential run (ci/gpu-nightly runs this prebuilt on a
//! GPU host): tier B properties of the CUDA subject over generated
//! adversarial cases, for a time budget, on every CPU core. Every case gets
//! conformance; each also gets one of padding, offset-stride and determinism
//! in turn. Failures are shrunk and saved to the corpus as exact values.
//! Writes a JSON and a Markdown report.
//!
//! Usage: bitparity-gpu-nightly [--seconds S] [--seed X] [--threads N]
//!        [--json PATH] [--md PATH] [--corpus DIR] [--driver TEXT]
//!        [--max-cases N] [--max-te N] [--max-t N] [--max-e N]
//!
//! Exit status: 0 when every judged case passed, 1 on any failure, 2 when the
//! CUDA subject is unavailable (the reason is printed and reported).

use bitparity::gen::seqwise_loss::{classify, generate, shrink, Class, GenConfig};
use bitparity::props::seqwise_loss::{judge, References};
use bitparity::props::Property;
use bitparity::subject::cuda::{probe, CudaSeqwise};
use bitparity::subject::SeqwiseSubject;
use oracles::case::seqwise_loss::SeqwiseCase;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const METAMORPHIC: [Property; 3] = [Property::Padding, Property::OffsetStride, Property::Determinism];
/// Failures shrunk and saved per property (the rest are counted).
const SAVED_PER_PROPERTY: usize = 5;
const SHRINK_BUDGET: usize = 3000;

struct Args {
    seconds: f64,
    seed: u64,
    threads: usize,
    json: Option<PathBuf>,
    md: Option<PathBuf>,
    corpus: PathBuf,
    driver: String,
    max_cases: u64,
    gen: GenConfig,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 240.0,
        seed: 0x6e16_4711,
        threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4),
        json: None,
        md: None,
        corpus: PathBuf::from("regressions"),
        driver: String::from("unknown"),
        max_cases: u64::MAX,
        gen: GenConfig::from_env(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |s: String| s.parse::<u64>().map_err(|_| format!("not a number: {s}"));
        match flag.as_str() {
            "--seconds" => a.seconds = val()?.parse().map_err(|_| "bad --seconds".to_string())?,
            "--seed" => {
                let s = val()?;
                a.seed = match s.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).map_err(|_| format!("bad seed {s}"))?,
                    None => num(s)?,
                }
            }
            "--threads" => a.threads = num(val()?)?.max(1) as usize,
            "--json" => a.json = Some(val()?.into()),
            "--md" => a.md = Some(val()?.into()),
            "--corpus" => a.corpus = val()?.into(),
            "--driver" => a.driver = val()?,
            "--max-cases" => a.max_cases = num(val()?)?,
            "--max-te" => a.gen.max_te = num(val()?)? as usize,
            "--max-t" => a.gen.max_t = num(val()?)? as usize,
            "--max-e" => a.gen.max_e = num(val()?)? as usize,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn case_rng(seed: u64, index: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16..24].copy_from_slice(b"gpunight");
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

#[derive(Default, Serialize, Clone)]
struct Row {
    op: String,
    property: String,
    profile: String,
    subject: String,
    cases: u64,
    failures: u64,
}

#[derive(Serialize, Clone)]
struct Failure {
    property: String,
    case_index: u64,
    shape: String,
    note: String,
    shrunk_shape: String,
    corpus_entry: Option<String>,
}

#[derive(Serialize)]
struct CorpusEntry<'a> {
    op: &'a str,
    property: Property,
    subject: String,
    profile: String,
    date: String,
    note: String,
    classes: Vec<Class>,
    case: &'a SeqwiseCase,
}

#[derive(Default)]
struct Tally {
    rows: BTreeMap<Property, Row>,
    classes: BTreeMap<String, u64>,
    failures: Vec<Failure>,
    saved: BTreeMap<Property, usize>,
}

/// Days since 1970-01-01 to a civil date (proleptic Gregorian).
fn today() -> String {
    let days =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() / 86_400).unwrap_or(0)
            as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}-{m:02}-{d:02}")
}

fn save_entry(dir: &Path, property: Property, cuda: &CudaSeqwise, note: &str, case: &SeqwiseCase) -> Option<String> {
    let entry = CorpusEntry {
        op: "seqwise_loss",
        property,
        subject: cuda.name(),
        profile: cuda.profile().name,
        date: today(),
        note: note.lines().next().unwrap_or("").chars().take(300).collect(),
        classes: classify(case).into_iter().collect(),
        case,
    };
    let json = serde_json::to_string(case).ok()?;
    let hash = json.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let path = dir.join("seqwise_loss").join(format!("{property}-cuda-{:08x}.json", hash as u32));
    std::fs::create_dir_all(path.parent()?).ok()?;
    let text = serde_json::to_string_pretty(&entry).ok()?;
    std::fs::write(&path, text + "\n").ok()?;
    Some(path.display().to_string())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bitparity-gpu-nightly: {e}");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let date = today();
    let cuda = probe();
    let (gpu, skip) = match &cuda {
        Ok(c) => (Some(c.info().clone()), None),
        Err(reason) => (None, Some(reason.clone())),
    };
    let tally = Mutex::new(Tally::default());
    let next = AtomicU64::new(0);
    if let Ok(cuda) = &cuda {
        let deadline = started + Duration::from_secs_f64(args.seconds);
        let profile = cuda.profile().name;
        {
            let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
            for p in [Property::Conformance].into_iter().chain(METAMORPHIC) {
                t.rows.insert(
                    p,
                    Row {
                        op: "seqwise_loss".into(),
                        property: p.name().into(),
                        profile: profile.clone(),
                        subject: cuda.name(),
                        ..Default::default()
                    },
                );
            }
        }
        std::thread::scope(|scope| {
            for _ in 0..args.threads {
                scope.spawn(|| loop {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= args.max_cases {
                        break;
                    }
                    let case = generate(&mut case_rng(args.seed, index), &args.gen);
                    let extra = METAMORPHIC[(index % 3) as usize];
                    let mut results = Vec::new();
                    for p in [Property::Conformance, extra] {
                        let j = judge(p, cuda, &case, &mut References::default());
                        results.push((p, j.failure));
                    }
                    let classes = classify(&case);
                    let mut to_shrink = Vec::new();
                    {
                        let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                        for c in &classes {
                            *t.classes.entry(c.to_string()).or_default() += 1;
                        }
                        for (p, failure) in &results {
                            let row = t.rows.get_mut(p).expect("row inserted above");
                            row.cases += 1;
                            if let Some(note) = failure {
                                row.failures += 1;
                                let saved = t.saved.entry(*p).or_default();
                                if *saved < SAVED_PER_PROPERTY {
                                    *saved += 1;
                                    to_shrink.push((*p, note.clone()));
                                }
                            }
                        }
                    }
                    for (p, note) in to_shrink {
                        let small = shrink(
                            &case,
                            |c| judge(p, cuda, c, &mut References::default()).failure.is_some(),
                            SHRINK_BUDGET,
                        );
                        let small_note =
                            judge(p, cuda, &small, &mut References::default()).failure.unwrap_or(note.clone());
                        let path = save_entry(&args.corpus, p, cuda, &small_note, &small);
                        eprintln!("FAIL {p} case {index} (T={}, E={}): {note}", case.t, case.e);
                        let f = Failure {
                            property: p.name().into(),
                            case_index: index,
                            shape: format!("T={} E={}", case.t, case.e),
                            note,
                            shrunk_shape: format!("T={} E={}", small.t, small.e),
                            corpus_entry: path,
                        };
                        tally.lock().unwrap_or_else(|p| p.into_inner()).failures.push(f);
                    }
                });
            }
        });
    }
    let elapsed = started.elapsed().as_secs_f64();
    let t = tally.into_inner().unwrap_or_else(|p| p.into_inner());
    let failed: u64 = t.rows.values().map(|r| r.failures).sum();
    let json = serde_json::json!({
        "date": date,
        "op": "seqwise_loss",
        "gpu": gpu.as_ref().map(|g| serde_json::json!({
            "name": g.name,
            "ordinal": g.ordinal,
            "compute_capability": format!("{}.{}", g.compute_capability.0, g.compute_capability.1),
            "multiprocessors": g.multiprocessors,
            "driver": args.driver,
            "driver_cuda_version": format!("{}.{}", g.driver_cuda_version / 1000, (g.driver_cuda_version % 1000) / 10),
            "nvrtc": format!("{}.{}", g.nvrtc_version.0, g.nvrtc_version.1),
        })),
        "seed": format!("{:#x}", args.seed),
        "budget_seconds": args.seconds,
        "elapsed_seconds": elapsed,
        "threads": args.threads,
        "generator": {"max_te": args.gen.max_te, "max_t": args.gen.max_t, "max_e": args.gen.max_e},
        "rows": t.rows.values().collect::<Vec<_>>(),
        "classes": t.classes,
        "failures": t.failures,
        "new_corpus_entries": t.failures.iter().filter_map(|f| f.corpus_entry.clone()).collect::<Vec<_>>(),
        "skipped": skip.iter().map(|r| serde_json::json!({"suite": "cuda tier B", "reason": r})).collect::<Vec<_>>(),
    });
    let mut md = String::new();
    md.push_str(&format!("# GPU differential run, seqwise_loss, {date}\n\n"));
    match &gpu {
        Some(g) => md.push_str(&format!(
            "- GPU: {} (compute capability {}.{}, {} SMs), driver {} (CUDA {}.{}), NVRTC {}.{}\n",
            g.name,
            g.compute_capability.0,
            g.compute_capability.1,
            g.multiprocessors,
            args.driver,
            g.driver_cuda_version / 1000,
            (g.driver_cuda_version % 1000) / 10,
            g.nvrtc_version.0,
            g.nvrtc_version.1
        )),
        None => md.push_str(&format!("- SKIPPED: no CUDA subject: {}\n", skip.as_deref().unwrap_or("?"))),
    }
    md.push_str(&format!(
        "- seed {:#x}, budget {} s, ran {:.1} s on {} threads; generator max T x E {}, max T {}, max E {}\n\n",
        args.seed, args.seconds, elapsed, args.threads, args.gen.max_te, args.gen.max_t, args.gen.max_e
    ));
    md.push_str("| op | property | profile | subject | cases | failures |\n|---|---|---|---|---:|---:|\n");
    for r in t.rows.values() {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.op, r.property, r.profile, r.subject, r.cases, r.failures
        ));
    }
    md.push_str("\nAdversarial classes (cases that exercised each):\n\n| class | cases |\n|---|---:|\n");
    for (c, n) in &t.classes {
        md.push_str(&format!("| {c} | {n} |\n"));
    }
    md.push_str(&format!("\nFailures: {failed}\n"));
    for f in &t.failures {
        md.push_str(&format!(
            "- {} case {} ({} -> shrunk {}): {} [{}]\n",
            f.property,
            f.case_index,
            f.shape,
            f.shrunk_shape,
            f.note,
            f.corpus_entry.as_deref().unwrap_or("not saved")
        ));
    }
    md.push_str(&format!(
        "\nNew corpus entries: {}\n",
        if t.failures.iter().any(|f| f.corpus_entry.is_some()) { "see failures above" } else { "none" }
    ));
    let text = serde_json::to_string_pretty(&json).unwrap_or_default();
    if let Some(p) = &args.json {
        if let Err(e) = std::fs::write(p, text + "\n") {
            eprintln!("writing {}: {e}", p.display());
        }
    }
    if let Some(p) = &args.md {
        if let Err(e) = std::fs::write(p, &md) {
            eprintln!("writing {}: {e}", p.display());
        }
    }
    println!("{md}");
    std::process::exit(if skip.is_some() {
        2
    } else if failed > 0 {
        1
    } else {
        0
    });
}
