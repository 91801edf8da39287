//! One mutant, in its own process (`bitparity mutant-child`, hidden): a
//! mutant that hangs the GPU, corrupts the context or crashes the process
//! ends only this child, and the campaign goes on.
//!
//! The child compiles every op kernel the mutant reaches with the mutated
//! source, compares the machine code with the original's (compiled once by
//! the campaign), loads the mutated code as the kernels' modules, and hunts
//! each reached op's CUDA subject through the tier B properties
//! ([`crate::selftest::HUNT`], or those asked), on the op's corpus entries first, then on
//! generated cases; a mutant of the exp headers that all of them pass is
//! then held to the exp check ([`super::expf`]). It prints [`HUNTING`] on
//! stdout when the compile is done (the campaign's hunt time limit starts
//! then), and its verdict as the last line, one JSON [`Outcome`].

use super::report::Outcome;
use super::{by_id, Mutant};
use crate::corpus::{self, RawEntry};
use crate::gen::GenConfig;
use crate::harness::{with_op, Harness, OpCommand};
use crate::props::Property;
use crate::subject::cuda::{self, nvrtc, KernelId, HEADERS};
use std::path::Path;
use std::time::{Duration, Instant};

/// The line a child prints when its compile is done.
pub const HUNTING: &str = "hunting";

/// The prefix of the id that hunts a kernel's unmutated source
/// (`original:router.cu`): the baseline a sanitizer stage needs, since a
/// sanitizer's report on a mutant means something only when the original
/// kernels give none.
pub const ORIGINAL: &str = "original:";

/// What the child is asked.
pub struct Ask<'a> {
    pub id: &'a str,
    pub seed: u64,
    pub cases: u64,
    pub seconds: Option<f64>,
    /// The folder where the campaign wrote each original kernel's machine
    /// code as `NAME.cubin`.
    pub originals: &'a Path,
    /// The corpus whose entries of an op are judged before its generated
    /// cases (`regressions`); `None`: generated cases only.
    pub corpus: Option<&'a Path>,
    /// The properties each case is judged by, in this order (a subset of
    /// [`crate::selftest::HUNT`], which is the default).
    pub properties: &'a [Property],
}

/// The entries of `op` in the corpus at `root`, by file name: none when
/// there is no corpus or no folder of the op; an error naming the file for
/// anything in the folder that is not an entry.
pub fn corpus_entries(root: Option<&Path>, op: &str) -> Result<Vec<(String, RawEntry)>, String> {
    let Some(dir) = root.map(|r| r.join(op)).filter(|d| d.is_dir()) else { return Ok(Vec::new()) };
    let (files, problems) = corpus::list(&dir, &[op])?;
    if let Some((p, why)) = problems.first() {
        return Err(format!("{}: {why}", p.display()));
    }
    files
        .iter()
        .map(|f| {
            let name = f.file_name().map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned());
            corpus::read_entry(f).map(|e| (name, e)).map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect()
}

/// Why a hunt ([`Hunt`]) could not run. Apart, because a mutants child
/// counts a subject that cannot load as a kill (the mutant broke the
/// kernel's interface) and a bad corpus entry as its own error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HuntError {
    /// A corpus entry that is another op's, does not decode, or is invalid
    /// (named by its file).
    Corpus(String),
    /// The subject cannot run here: not a CUDA subject of the op, no GPU,
    /// or its kernels do not load.
    Subject(String),
}

impl std::fmt::Display for HuntError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HuntError::Corpus(m) => write!(f, "corpus entry {m}"),
            HuntError::Subject(m) => f.write_str(m),
        }
    }
}

/// The first case an op's CUDA subject `subject` (`cuda`, or a library's
/// kernel such as `cuda-tc`) fails by one of `props`: the cases of the
/// corpus `entries` (this op's) first, then those of seed `seed`.
/// `Ok(Err(n))` when none of `n` cases did; `Err` when the subject cannot
/// run or an entry is not a case of this op.
pub struct Hunt<'a> {
    pub subject: &'a str,
    pub props: &'a [Property],
    pub entries: &'a [(String, RawEntry)],
    pub seed: u64,
    pub max_cases: u64,
    pub deadline: Option<Instant>,
    pub cfg: &'a GenConfig,
}

/// A hunt's verdict: the failing case (index, property, message), or the
/// number of cases that passed.
pub type HuntResult = Result<Result<(u64, Property, String), u64>, HuntError>;

impl OpCommand for Hunt<'_> {
    type Output = HuntResult;
    fn run<O: Harness>(self) -> HuntResult {
        let known = self
            .entries
            .iter()
            .map(|(name, e)| {
                if e.op != O::NAME {
                    return Err(format!("{name}: an entry of op {:?}, not {}", e.op, O::NAME));
                }
                let case = corpus::case_of::<O>(e).map_err(|m| format!("{name}: {m}"))?;
                Ok((name.clone(), case))
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(HuntError::Corpus)?;
        let s = crate::harness::device_subject::<O>(self.subject).map_err(HuntError::Subject)?;
        Ok(crate::selftest::first_failure(&s, self.props, &known, self.seed, self.max_cases, self.deadline, self.cfg))
    }
}

/// Runs `hunt` on the op named `op`.
fn hunt_op(op: &str, hunt: Hunt) -> HuntResult {
    with_op(op, hunt).unwrap_or_else(|| Err(HuntError::Subject(format!("no op {op}"))))
}

/// The file name of `k`'s original machine code in the originals folder.
pub fn cubin_name(k: KernelId) -> String {
    format!("{}.cubin", k.source().name)
}

/// The sources `k` compiles from with mutant `m` applied: the kernel's text
/// and the headers, one of them mutated when `m` is in a header.
pub fn sources(m: &Mutant, k: KernelId) -> (String, Vec<(&'static str, String)>) {
    let mutated = m.text();
    let text = if k.source().name == m.file { mutated.clone() } else { k.source().text.to_string() };
    let headers =
        HEADERS.iter().map(|h| (h.name, if h.name == m.file { mutated.clone() } else { h.text.to_string() })).collect();
    (text, headers)
}

/// Compiles `k` with mutant `m` applied, for a device of `arch` (the
/// kernel's own architecture on it: [`KernelId::arch`]).
pub fn compile(m: &Mutant, k: KernelId, arch: &str, output: nvrtc::Output) -> Result<Vec<u8>, String> {
    let (text, headers) = sources(m, k);
    let headers: Vec<(&'static str, &str)> = headers.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let extra = nvrtc::extra_options()?;
    nvrtc::compile_with(k.source().name, &text, &headers, &k.arch(arch), &extra, output)
        .map(|c| c.cubin)
        .map_err(|e| e.to_string())
}

/// A mutant's id with its outcome: a `mutant-compile` child's line.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Line {
    pub id: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// NVRTC's front end on every kernel each mutant of `ids` reaches, a line
/// each: compiles or no-compile (crashed when an id names no mutant). The
/// mutants are generated once, not once per id.
pub fn syntax_check(ids: &[String]) -> impl Iterator<Item = Line> + '_ {
    let all: std::collections::HashMap<String, Mutant> = super::all().into_iter().map(|m| (m.id.clone(), m)).collect();
    ids.iter().map(move |id| {
        let outcome = match all.get(id) {
            None => Outcome::Crashed { detail: format!("no mutant {id:?} in these sources") },
            Some(m) => m
                .kernels()
                .into_iter()
                .find_map(|k| compile(m, k, nvrtc::CI_ARCH, nvrtc::Output::SyntaxOnly).err())
                .map_or(Outcome::Compiles, |log| Outcome::NoCompile { log }),
        };
        Line { id: id.clone(), outcome }
    })
}

/// Runs the child: the verdict on mutant `ask.id`.
pub fn run(ask: &Ask) -> Outcome {
    match hunt(ask) {
        Ok(o) => o,
        Err(detail) => Outcome::Crashed { detail },
    }
}

fn hunt(ask: &Ask) -> Result<Outcome, String> {
    if let Some(op) = ask.id.strip_prefix(ORIGINAL) {
        return hunt_original(ask, op);
    }
    let m = by_id(ask.id)?;
    let dev = cuda::device()?;
    let mut changed = Vec::new();
    let mut cubins = Vec::new();
    for k in m.kernels() {
        let cubin = match compile(&m, k, dev.arch(), nvrtc::Output::Cubin) {
            Ok(c) => c,
            Err(log) => return Ok(Outcome::NoCompile { log }),
        };
        let original = ask.originals.join(cubin_name(k));
        let original = std::fs::read(&original).map_err(|e| format!("{}: {e}", original.display()))?;
        if cubin != original {
            changed.push(k);
        }
        cubins.push((k, cubin));
    }
    if changed.is_empty() {
        return Ok(Outcome::SameCode);
    }
    for (k, cubin) in cubins {
        dev.load_compiled(k, cubin)?;
    }
    println!("{HUNTING}");
    let cfg = GenConfig::from_env()?;
    let mut fewest = u64::MAX;
    for &k in &changed {
        // Each op its own time: a header's mutant reaches up to three.
        let deadline = ask.seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
        // The exp check kernel is judged last, by its own check.
        let Some((name, subject)) = k.subject() else { continue };
        let entries = corpus_entries(ask.corpus, name)?;
        let hunt = Hunt {
            subject,
            props: ask.properties,
            entries: &entries,
            seed: ask.seed,
            max_cases: ask.cases,
            deadline,
            cfg: &cfg,
        };
        let op = name;
        let name = who(name, subject);
        // A subject that cannot load (a kernel's symbol renamed, a launch
        // attribute refused) fails every `check` of the op: a kill, by load.
        // A bad corpus entry is no verdict on the mutant: the child's error.
        let hunt = match hunt_op(op, hunt) {
            Ok(h) => h,
            Err(HuntError::Subject(message)) => {
                return Ok(Outcome::Killed { op: name, property: "subject-load".into(), case: 0, message })
            }
            Err(e @ HuntError::Corpus(_)) => return Err(e.to_string()),
        };
        match hunt {
            Ok((case, property, message)) => {
                let message = message.lines().next().unwrap_or("").chars().take(400).collect();
                return Ok(Outcome::Killed { op: name, property: property.name().into(), case, message });
            }
            Err(n) => fewest = fewest.min(n),
        }
    }
    if changed.contains(&KernelId::ExpfCheck) {
        if let Some((window, message)) = super::expf::check()? {
            return Ok(Outcome::Killed { op: "exp".into(), property: "exp-check".into(), case: window, message });
        }
        fewest = fewest.min(super::expf::windows().len() as u64);
    }
    Ok(Outcome::Survived { cases: fewest })
}

/// How a kill names what killed it: the op, and its subject when that is
/// not the op's default `cuda` (`shared_expert (cuda-tc)`).
pub(super) fn who(op: &str, subject: &str) -> String {
    if subject == "cuda" {
        op.to_string()
    } else {
        format!("{op} ({subject})")
    }
}

/// The unmutated kernel source `file` (`router.cu`), hunted as a mutant is
/// (the device compiles it itself).
fn hunt_original(ask: &Ask, file: &str) -> Result<Outcome, String> {
    let (op, subject) = KernelId::ALL
        .into_iter()
        .find(|k| k.source().name == file)
        .and_then(KernelId::subject)
        .ok_or_else(|| format!("no op kernel {file:?}"))?;
    cuda::device()?;
    println!("{HUNTING}");
    let cfg = GenConfig::from_env()?;
    let deadline = ask.seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
    let entries = corpus_entries(ask.corpus, op)?;
    let hunt = hunt_op(
        op,
        Hunt {
            subject,
            props: ask.properties,
            entries: &entries,
            seed: ask.seed,
            max_cases: ask.cases,
            deadline,
            cfg: &cfg,
        },
    );
    Ok(match hunt.map_err(|e| e.to_string())? {
        Ok((case, property, message)) => Outcome::Killed {
            op: who(op, subject),
            property: property.name().into(),
            case,
            message: message.lines().next().unwrap_or("").into(),
        },
        Err(cases) => Outcome::Survived { cases },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::HUNT;

    #[test]
    fn a_corpus_gives_its_entries_of_the_op_by_file_name_and_names_a_bad_file() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/regressions"));
        let entries = corpus_entries(Some(root), "router").unwrap();
        let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"conformance-cuda-2bc1e54c.json"), "{names:?}");
        assert!(entries.iter().all(|(_, e)| e.op == "router"));
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "file order");
        // No corpus, or no folder of the op: no entry.
        assert!(corpus_entries(None, "router").unwrap().is_empty());
        assert!(corpus_entries(Some(root), "shared_expert_missing").unwrap().is_empty());

        let dir = std::env::temp_dir().join(format!("bitparity-child-corpus-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("router")).unwrap();
        std::fs::write(dir.join("router/broken.json"), b"{\"op\": ").unwrap();
        let e = corpus_entries(Some(&dir), "router").unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.contains("broken.json"), "{e}");
    }

    #[test]
    fn a_hunt_refuses_an_entry_of_another_op_or_an_invalid_case_before_any_gpu_work() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/regressions"));
        let seqwise = corpus_entries(Some(root), "seqwise_loss").unwrap();
        let cfg = GenConfig::default();
        let hunt = |subject, entries| Hunt {
            subject,
            props: &HUNT,
            entries,
            seed: 1,
            max_cases: 1,
            deadline: None,
            cfg: &cfg,
        };
        let corpus = |e: HuntError| match e {
            HuntError::Corpus(m) => m,
            other => panic!("not the corpus's error: {other:?}"),
        };
        let e = corpus(hunt_op("router", hunt("cuda", &seqwise[..1])).unwrap_err());
        assert!(e.contains(&seqwise[0].0) && e.contains("not router"), "{e}");
        let mut bad = corpus_entries(Some(root), "router").unwrap().remove(0);
        let mut case: serde_json::Value = serde_json::from_str(bad.1.case.get()).unwrap();
        case["k"] = serde_json::json!(0);
        bad.1.case = serde_json::value::to_raw_value(&case).unwrap();
        let bad_list = [bad.clone()];
        let e = corpus(hunt_op("router", hunt("cuda", &bad_list)).unwrap_err());
        assert!(e.contains(&bad.0) && e.contains("invalid"), "{e}");
        // A subject the op does not have: the subject's error, a kill in a
        // mutants child.
        let e = hunt_op("router", hunt("cuda-tc", &[])).unwrap_err();
        assert!(matches!(&e, HuntError::Subject(m) if m.contains("no CUDA subject")), "{e:?}");
    }
}
