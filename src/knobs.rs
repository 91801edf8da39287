//! Every environment variable bitparity reads, in one place (proptest's
//! manner): each is named as a constant, documents its default, and a value
//! that does not parse is refused with a clear error, never silently replaced
//! by the default. Values that change which cases run are recorded in every
//! summary ([`recorded`]), so `--seed X` reproduces a run.

use std::str::FromStr;
use std::time::Duration;

/// Largest T x E of a generated case (default 4096).
pub const MAX_TE: &str = "BITPARITY_MAX_TE";
/// Largest E of a generated case (default 257).
pub const MAX_E: &str = "BITPARITY_MAX_E";
/// Largest T of a generated case (default 1100).
pub const MAX_T: &str = "BITPARITY_MAX_T";
/// `reference`: tier B's real shapes (shared_expert's H x F = 4096 x 2048
/// or 7168 x 2048) instead of the small ones (default `small`);
/// `reference-dense`: the same at dense layouts.
pub const SHAPES: &str = "BITPARITY_SHAPES";
/// `check`'s seed when `--seed` is not given (default: random, printed).
pub const SEED: &str = "BITPARITY_SEED";
/// `check`'s case count when `--cases` is not given (default 1000).
pub const CASES: &str = "BITPARITY_CASES";
/// The CUDA device ordinal (default 0).
pub const CUDA_DEVICE: &str = "BITPARITY_CUDA_DEVICE";
/// Generated cases per GPU test (default 300).
pub const GPU_CASES: &str = "BITPARITY_GPU_CASES";
/// Seed of the GPU tests' generated cases (default 0x5eed).
pub const GPU_SEED: &str = "BITPARITY_GPU_SEED";
/// The subjects a fuzz target judges, comma separated (default: every
/// available correct subject).
pub const FUZZ_SUBJECT: &str = "BITPARITY_FUZZ_SUBJECT";
/// Extra NVRTC options for tuning experiments: whitespace-separated `-DBP_*`
/// macro definitions of the kernels' launch-shape knobs only (default none).
pub const NVRTC_EXTRA: &str = "BITPARITY_NVRTC_EXTRA";
/// `1`: a missing NVRTC fails the kernel compile test instead of skipping it.
pub const REQUIRE_NVRTC: &str = "BITPARITY_REQUIRE_NVRTC";
/// Seconds an `exec:` subject named on the command line has for its
/// handshake and for each reply (default 60; `bitparity.toml` sets each
/// named subject's own `timeout_s`).
pub const EXEC_TIMEOUT: &str = "BITPARITY_EXEC_TIMEOUT";
/// Timeouts in a row (replies or handshakes) after which an external
/// subject is marked hung: its remaining cases are not judged, so a run
/// with a subject that never answers ends in bounded time (default 3).
pub const HUNG_AFTER: &str = "BITPARITY_HUNG_AFTER";
/// Seconds a CUDA subject's launch has to finish before the case fails as a
/// hang (default 60; `bitparity mutants` gives its children at most a
/// quarter of their hunt limit).
pub const KERNEL_TIMEOUT: &str = "BITPARITY_KERNEL_TIMEOUT";
/// `off`: the CUDA subjects' buffers get no guard zones (default `on`).
/// `bitparity mutants --sanitizer` sets it for the children it runs under
/// compute-sanitizer, whose tools check every access themselves and would
/// take a stray access into a zone for a valid one.
pub const GUARDS: &str = "BITPARITY_GUARDS";
/// `large`, `small` or `narrow`: the tile every launch of a CUDA subject
/// with several takes (`cuda-wgmma`: 128 x 256, 64 x 128, or for its dh
/// GEMM 64 x 64; a kernel without the tile named takes the next larger it
/// has), so that a run of small cases judges every tile (default `auto`:
/// the tile whose busiest multiprocessor finishes first).
pub const TILES: &str = "BITPARITY_TILES";

/// The knobs that change which cases a run generates or where it runs
/// them: recorded in every summary.
pub const RECORDED: [&str; 6] = [MAX_TE, MAX_E, MAX_T, SHAPES, CUDA_DEVICE, TILES];

/// Every variable the binary reads.
pub const ALL: [&str; 17] = [
    MAX_TE,
    MAX_E,
    MAX_T,
    SHAPES,
    SEED,
    CASES,
    CUDA_DEVICE,
    GPU_CASES,
    GPU_SEED,
    FUZZ_SUBJECT,
    NVRTC_EXTRA,
    REQUIRE_NVRTC,
    GUARDS,
    TILES,
    EXEC_TIMEOUT,
    HUNG_AFTER,
    KERNEL_TIMEOUT,
];

/// `BITPARITY_*` variables that the scripts (`scripts/nvrtc-env`,
/// `ci/gpu-nightly`), the tests and the Python side of external subjects
/// (`BITPARITY_DEVICE`: where `bitparity.serve` puts its tensors; the
/// pytest plugin's `BITPARITY_BIN`, the CLI it runs, and
/// `BITPARITY_RELAY_SOCKET`, which it sets for the CLI so that its relay
/// subject finds the test's server) read for themselves: not knobs of the
/// binary, but not typos either.
pub const SCRIPTS: [&str; 7] = [
    "BITPARITY_NVRTC_DIR",
    "BITPARITY_NVRTC_WHEELS",
    "BITPARITY_NVRTC_LIB",
    "BITPARITY_TEST_BIN",
    "BITPARITY_DEVICE",
    "BITPARITY_BIN",
    "BITPARITY_RELAY_SOCKET",
];

/// Checks the whole environment before a command runs: every knob that is
/// set must parse (a recorded knob such as `BITPARITY_CUDA_DEVICE=abc` was
/// printed in the header yet never read where no GPU runs), and a
/// `BITPARITY_*` variable that is no knob (`BITPARITY_SEEDS=5`, a typo) is
/// refused rather than silently ignored.
pub fn check_environment() -> Result<(), String> {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("BITPARITY_") && !ALL.contains(&k.as_ref()) && !SCRIPTS.contains(&k.as_ref()) {
            return Err(format!(
                "{k} is not a bitparity knob (known: {}; docs/cli.md, \"Environment knobs\")",
                ALL.join(", ")
            ));
        }
    }
    for name in [MAX_TE, MAX_E, MAX_T, CUDA_DEVICE] {
        get::<usize>(name)?;
    }
    get::<u64>(GPU_CASES)?;
    for name in [SEED, GPU_SEED] {
        if let Some(s) = get::<String>(name)? {
            parse_seed(&s).map_err(|e| format!("{name}: {e}"))?;
        }
    }
    get::<u64>(CASES)?;
    get::<String>(FUZZ_SUBJECT)?;
    get::<String>(NVRTC_EXTRA)?;
    if get::<f64>(EXEC_TIMEOUT)?.is_some() {
        exec_timeout()?;
    }
    kernel_timeout()?;
    hung_after()?;
    shapes()?;
    guards()?;
    tiles()?;
    match get::<String>(REQUIRE_NVRTC)?.as_deref() {
        None | Some("0") | Some("1") => {}
        Some(v) => return Err(format!("{REQUIRE_NVRTC}={v:?}: must be 1 (or 0)")),
    }
    Ok(())
}

/// The value of `name` parsed as T; `Ok(None)` when unset; an error naming
/// the variable and the value when it does not parse (or is not unicode).
pub fn get<T: FromStr>(name: &str) -> Result<Option<T>, String> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!("{name}={v:?} is not valid text")),
        Ok(s) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}={s:?} is not a valid {}", std::any::type_name::<T>())),
    }
}

/// [`get`] with a default.
pub fn get_or<T: FromStr>(name: &str, default: T) -> Result<T, String> {
    Ok(get(name)?.unwrap_or(default))
}

/// The shapes [`SHAPES`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shapes {
    /// Tier A's (the default).
    Small,
    /// Tier B's reference shapes, at random layouts.
    Reference,
    /// Tier B's reference shapes, dense (offset 0, row stride H): a layout
    /// that never changes under a sub-batch.
    ReferenceDense,
}

impl Shapes {
    pub const ALL: [Shapes; 3] = [Shapes::Small, Shapes::Reference, Shapes::ReferenceDense];

    pub fn name(self) -> &'static str {
        match self {
            Shapes::Small => "small",
            Shapes::Reference => "reference",
            Shapes::ReferenceDense => "reference-dense",
        }
    }
}

/// [`SHAPES`]: which shapes are asked for.
pub fn shapes() -> Result<Shapes, String> {
    match get::<String>(SHAPES)? {
        None => Ok(Shapes::Small),
        Some(v) => Shapes::ALL
            .into_iter()
            .find(|s| s.name() == v.trim())
            .ok_or_else(|| format!("{SHAPES}={v:?}: use small, reference or reference-dense")),
    }
}

/// Whether the CUDA subjects put guard zones around their buffers
/// ([`GUARDS`]).
pub fn guards() -> Result<bool, String> {
    match get::<String>(GUARDS)?.as_deref().map(str::trim) {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(v) => Err(format!("{GUARDS}={v:?}: use on or off")),
    }
}

/// Which tile the launches of a CUDA subject with several take
/// ([`TILES`]): the one that finishes first, or the one named (where a
/// kernel lacks it, the next larger it has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiles {
    Auto,
    Large,
    Small,
    Narrow,
}

/// [`TILES`], parsed.
pub fn tiles() -> Result<Tiles, String> {
    match get::<String>(TILES)?.as_deref().map(str::trim) {
        None | Some("auto") => Ok(Tiles::Auto),
        Some("large") => Ok(Tiles::Large),
        Some("small") => Ok(Tiles::Small),
        Some("narrow") => Ok(Tiles::Narrow),
        Some(v) => Err(format!("{TILES}={v:?}: use auto, large, small or narrow")),
    }
}

/// A seed: decimal or 0x-prefixed hexadecimal.
pub fn parse_seed(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| format!("{s:?} is not a seed (a u64, decimal or 0x-hex)"))
}

/// The recorded knobs that are set, as (name, value).
pub fn recorded() -> Vec<(String, String)> {
    RECORDED.iter().filter_map(|&k| std::env::var(k).ok().map(|v| (k.to_string(), v))).collect()
}

/// `v` as one shell word (quoted when it holds anything but plain
/// characters), for the reproduce commands a failure prints.
pub fn shell_word(v: &str) -> String {
    if !v.is_empty() && v.bytes().all(|c| c.is_ascii_alphanumeric() || b"_-.,:/+=@".contains(&c)) {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

/// The timeout of a command-line subject: `BITPARITY_EXEC_TIMEOUT`
/// seconds, 60 by default (a GPU provider's first request initialises
/// CUDA).
pub fn exec_timeout() -> Result<Duration, String> {
    let s = get_or::<f64>(EXEC_TIMEOUT, 60.0)?;
    positive_seconds(s).map_err(|e| format!("{}: {e}", EXEC_TIMEOUT))
}

/// [`KERNEL_TIMEOUT`] as a duration.
pub fn kernel_timeout() -> Result<Duration, String> {
    let s = get_or::<f64>(KERNEL_TIMEOUT, 60.0)?;
    positive_seconds(s).map_err(|e| format!("{KERNEL_TIMEOUT}: {e}"))
}

/// [`HUNG_AFTER`]: at least 1.
pub fn hung_after() -> Result<u32, String> {
    match get_or::<u32>(HUNG_AFTER, 3)? {
        0 => Err(format!("{HUNG_AFTER}=0: at least 1 timeout marks a subject hung")),
        n => Ok(n),
    }
}

/// The shortest timeout accepted: below it no child could answer at all
/// (a process takes milliseconds to start), and every case would fail as
/// a hang.
pub const MIN_TIMEOUT_S: f64 = 0.01;

/// `s` seconds as a timeout: finite, from [`MIN_TIMEOUT_S`] to a day.
pub fn positive_seconds(s: f64) -> Result<Duration, String> {
    if !(MIN_TIMEOUT_S..=86_400.0).contains(&s) {
        return Err(format!("{s} is not a timeout in seconds (at least {MIN_TIMEOUT_S}, at most 86400)"));
    }
    Ok(Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_errors_not_defaults() {
        // A variable no other test reads.
        let name = "BITPARITY_KNOBS_SELFTEST";
        std::env::set_var(name, "12x");
        let e = get::<usize>(name).unwrap_err();
        assert!(e.contains(name) && e.contains("12x"), "{e}");
        std::env::set_var(name, " 12 ");
        assert_eq!(get::<usize>(name), Ok(Some(12)));
        std::env::remove_var(name);
        assert_eq!(get::<usize>(name), Ok(None));
        assert_eq!(get_or(name, 7usize), Ok(7));
        assert_eq!(parse_seed("0x10"), Ok(16));
        assert_eq!(parse_seed("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_seed("-1").is_err());
        assert_eq!(shell_word("64"), "64");
        assert_eq!(shell_word(" 64 "), "' 64 '");
        assert_eq!(shell_word("a'b"), "'a'\\''b'");
    }
}
