//! `bitparity.toml`: a project's named external subjects.
//!
//! ```toml
//! [[subject]]
//! name = "my-loss"                         # --subject my-loss
//! command = ["python3", "my_kernel.py"]    # or one string, split shell-style
//! op = "seqwise_loss"
//! profile = "serial"                       # optional: absent = claims none
//! padding = "mask"                         # optional: "skip" (default) or "mask" (docs/padding.md)
//! clamp_tie = "inclusive"                  # optional: "strict" or "inclusive"; absent = each case's
//! env = { BITPARITY_DEVICE = "cuda:1" }    # optional
//! timeout_s = 30                           # optional, default 60
//! ```
//!
//! Strict like the corpus: an unknown key, a missing one, a name used twice
//! or one that shadows a built-in subject is an error naming the file, never
//! a silently different subject.

use oracles::vocab::ClampTie;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The default file, read from the current folder when present.
pub const DEFAULT_FILE: &str = "bitparity.toml";
/// The most a config file may hold.
const MAX_BYTES: u64 = 1 << 20;

/// One named subject, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedSubject {
    pub name: String,
    pub command: Vec<String>,
    pub op: String,
    pub profile: Option<String>,
    /// The padding rule it claims (absent: `skip`); its handshake must say
    /// the same.
    pub padding: oracles::padding::PaddingRule,
    /// The clamp tie rule it implements (absent: it follows each case's);
    /// its handshake must say the same.
    pub clamp_tie: Option<ClampTie>,
    pub env: BTreeMap<String, String>,
    pub timeout: Duration,
}

/// The loaded configuration (empty without a file).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub subjects: Vec<NamedSubject>,
    /// The file named by `--config`, when one was (`None`: the default
    /// `./bitparity.toml`, or no file).
    pub file: Option<PathBuf>,
}

impl Config {
    pub fn subject(&self, name: &str) -> Option<&NamedSubject> {
        self.subjects.iter().find(|s| s.name == name)
    }

    /// The `--config PATH` argument a command needs to find subject `name`
    /// again: its file when that is not the default `./bitparity.toml`
    /// (which every command reads by itself). `None` for a subject of no
    /// file (built in, `exec:`) or of the default file.
    pub fn flag_for(&self, name: &str) -> Option<String> {
        self.subject(name)?;
        let file = self.file.as_ref()?;
        let default = Path::new(DEFAULT_FILE);
        let same = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b);
        if same(file, default) {
            return None;
        }
        Some(format!("--config {}", crate::knobs::shell_word(&file.display().to_string())))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    subject: Vec<RawSubject>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CommandSpec {
    Line(String),
    Argv(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubject {
    name: String,
    command: CommandSpec,
    op: String,
    profile: Option<String>,
    padding: Option<String>,
    clamp_tie: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    timeout_s: Option<f64>,
}

/// The prefixes of built-in subject names (and of kinds of them).
const BUILTIN_PREFIXES: [&str; 5] = ["oracle:", "model:", "bug:", "exec:", crate::subject::ANY_ORDER_PREFIX];

/// Names that mean a built-in subject (or a kind of them): `reserved` are
/// the ops' own (`cuda`, `cuda-tc`, `cublas`, ...).
fn shadows_builtin(name: &str, reserved: &[&str]) -> bool {
    matches!(name, "all" | "bugs" | "mpfr")
        || reserved.contains(&name)
        || BUILTIN_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Parses and checks a config file's text; `ops` are the known op names,
/// `reserved` the ops' built-in subject names (no subject may take one).
pub fn parse(text: &str, origin: &str, ops: &[&str], reserved: &[&str]) -> Result<Config, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("{origin}: {}", e.to_string().trim_end()))?;
    let mut subjects: Vec<NamedSubject> = Vec::new();
    for (i, s) in file.subject.into_iter().enumerate() {
        let at = format!("{origin}: subject {} ({:?})", i + 1, s.name);
        if s.name.trim().is_empty() || s.name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{at}: a name is one word"));
        }
        if s.name != crate::escape::visible(&s.name) {
            return Err(format!("{at}: a name holds no invisible or reordering character"));
        }
        if shadows_builtin(&s.name, reserved) {
            return Err(format!(
                "{at}: the name is a built-in subject's (all, bugs, mpfr, {}, or one starting with {})",
                reserved.join(", "),
                BUILTIN_PREFIXES.join(" ")
            ));
        }
        for (k, v) in &s.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(format!("{at}: env: {k:?} is not a variable name (empty, or holds = or NUL)"));
            }
            if v.contains('\0') {
                return Err(format!("{at}: env: the value of {k} holds a NUL byte"));
            }
        }
        if subjects.iter().any(|x| x.name == s.name) {
            return Err(format!("{at}: a second subject of that name"));
        }
        if !ops.contains(&s.op.as_str()) {
            return Err(format!("{at}: unknown op {:?} (known: {})", s.op, ops.join(", ")));
        }
        let command = match s.command {
            CommandSpec::Argv(a) => a,
            CommandSpec::Line(l) => {
                shell_words::split(&l).map_err(|e| format!("{at}: cannot split the command: {e}"))?
            }
        };
        if command.is_empty() || command[0].is_empty() {
            return Err(format!("{at}: an empty command"));
        }
        let timeout = match s.timeout_s {
            None => Duration::from_secs(60),
            Some(t) => crate::knobs::positive_seconds(t).map_err(|e| format!("{at}: timeout_s: {e}"))?,
        };
        let padding = match s.padding.as_deref() {
            None => oracles::padding::PaddingRule::Skip,
            Some(r) => oracles::padding::PaddingRule::by_name(r)
                .ok_or_else(|| format!("{at}: padding {r:?}: \"skip\" or \"mask\" (docs/padding.md)"))?,
        };
        let clamp_tie =
            match s.clamp_tie.as_deref() {
                None => None,
                Some(t) => Some(ClampTie::by_name(t).ok_or_else(|| {
                    format!("{at}: clamp_tie {t:?}: \"strict\" or \"inclusive\" (absent: each case's)")
                })?),
            };
        subjects.push(NamedSubject {
            name: s.name,
            command,
            op: s.op,
            profile: s.profile,
            padding,
            clamp_tie,
            env: s.env,
            timeout,
        });
    }
    Ok(Config { subjects, file: None })
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Loads `path` (which must exist), or `bitparity.toml` of the current
/// folder when there is one; once per process. `ops` are the names a
/// subject's `op` may take (the registry's), `reserved` the built-in
/// subject names none may take.
pub fn load(path: Option<&Path>, ops: &[&str], reserved: &[&str]) -> Result<(), String> {
    let read = |p: &Path| -> Result<String, String> {
        let bytes = crate::fsio::read_capped(p, MAX_BYTES)?;
        String::from_utf8(bytes).map_err(|e| {
            format!(
                "{}: not UTF-8 text (byte {}): refused rather than read in part",
                crate::escape::path(p),
                e.utf8_error().valid_up_to()
            )
        })
    };
    let config = match path {
        Some(p) => Config { file: Some(p.to_path_buf()), ..parse(&read(p)?, &crate::escape::path(p), ops, reserved)? },
        None if Path::new(DEFAULT_FILE).is_file() => {
            parse(&read(Path::new(DEFAULT_FILE))?, DEFAULT_FILE, ops, reserved)?
        }
        None => Config::default(),
    };
    let _ = CONFIG.set(config);
    Ok(())
}

/// The loaded configuration (empty when none was loaded).
pub fn get() -> &'static Config {
    CONFIG.get_or_init(Config::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: [&str; 2] = ["seqwise_loss", "router"];
    const RESERVED: [&str; 2] = ["cuda", "cuda-tc"];

    #[test]
    fn a_good_file_parses() {
        let c = parse(
            r#"
[[subject]]
name = "mine"
command = "python3 'my kernel.py' --fast"
op = "seqwise_loss"
profile = "serial"
env = { BITPARITY_DEVICE = "cpu" }
timeout_s = 2.5

[[subject]]
name = "theirs"
command = ["python3", "x.py"]
op = "router"
"#,
            "t.toml",
            &OPS,
            &RESERVED,
        )
        .unwrap();
        assert_eq!(c.subjects[0].command, ["python3", "my kernel.py", "--fast"]);
        assert_eq!(c.subjects[0].timeout, Duration::from_secs_f64(2.5));
        assert_eq!(c.subjects[1].profile, None);
        assert_eq!(c.subjects[1].timeout, Duration::from_secs(60));
    }

    #[test]
    fn only_a_subject_of_a_named_file_needs_config_in_its_commands() {
        let mut c = parse("[[subject]]\nname='a'\ncommand='x'\nop='router'\n", "t.toml", &OPS, &RESERVED).unwrap();
        assert_eq!(c.flag_for("a"), None, "the default file: read by every command");
        c.file = Some(PathBuf::from("/nonexistent/my project.toml"));
        assert_eq!(c.flag_for("a").as_deref(), Some("--config '/nonexistent/my project.toml'"));
        assert_eq!(c.flag_for("exec:x"), None);
        assert_eq!(c.flag_for("cuda"), None);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let cases = [
            ("[[subject]]\nname='a'\ncommand='x'\nop='router'\nprofle='serial'\n", "profle"),
            ("[[subjects]]\nname='a'\n", "subjects"),
            ("[[subject]]\nname='a'\ncommand='x'\n", "op"),
            ("[[subject]]\nname='a'\ncommand='x'\nop='nope'\n", "unknown op"),
            ("[[subject]]\nname='cuda'\ncommand='x'\nop='router'\n", "built-in"),
            ("[[subject]]\nname='exec:x'\ncommand='x'\nop='router'\n", "built-in"),
            ("[[subject]]\nname='a'\ncommand=''\nop='router'\n", "empty command"),
            ("[[subject]]\nname='a'\ncommand='x'\nop='router'\ntimeout_s=0\n", "timeout"),
            (
                "[[subject]]\nname='a'\ncommand='x'\nop='router'\n[[subject]]\nname='a'\ncommand='y'\nop='router'\n",
                "second",
            ),
            ("[[subject]]\nname='a'\ncommand='x \"'\nop='router'\n", "split"),
            ("[[subject]]\nname='a'\ncommand='x'\nop='router'\npadding='native'\n", "padding"),
            ("not toml at all", "t.toml"),
            ("[[subject]]\nname='cuda-tc'\ncommand='x'\nop='router'\n", "built-in"),
            ("[[subject]]\nname='anyorder:x'\ncommand='x'\nop='router'\n", "built-in"),
            ("[[subject]]\nname='a\u{202e}'\ncommand='x'\nop='router'\n", "invisible"),
            ("[[subject]]\nname='a'\ncommand='x'\nop='router'\nenv={'A=B'='1'}\n", "variable name"),
            ("[[subject]]\nname='a'\ncommand='x'\nop='router'\nenv={''='1'}\n", "variable name"),
            ("[[subject]]\nname='a'\ncommand='x'\nop='router'\ntimeout_s=1e-300\n", "timeout"),
        ];
        for (text, want) in cases {
            let e = parse(text, "t.toml", &OPS, &RESERVED).unwrap_err();
            assert!(e.contains(want) && e.contains("t.toml"), "{text:?}: {e}");
        }
    }
}
