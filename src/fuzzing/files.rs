//! The file-input fuzz targets' checks (`fuzz/fuzz_targets/{corpus_entry,hexf}.rs`
//! are one call each into this module), kept in the library so that the
//! seed corpora replay in `cargo test` (`tests/it/fuzz_seeds.rs`) without
//! libFuzzer, and the long runs (`scripts/fuzz-ci`) check the same thing.

use crate::corpus::{self, decode_case, RawEntry};
use crate::harness::{with_op, Harness, OpCommand};
use crate::runner::replay::ReplayEntry;
use oracles::case::hexf as hexf_text;
use rug::Integer;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A corpus entry file, as `bitparity replay` reads it: any bytes are parsed
/// strictly (`bitparity::corpus::parse`), the op the entry names decodes and
/// validates its case, and a valid case is replayed through the op's
/// replay (every correct subject, the planted bug it names, MPFR for
/// accuracy and gradient entries). Nothing may panic, and nothing may
/// allocate beyond what validation bounds (`oracles::case::MAX_STORAGE`):
/// libFuzzer's `-rss_limit_mb` / `-malloc_limit_mb` turn a violation into a
/// crash. A decoded case must also survive its own round trip: written back
/// as JSON (hex floats) it decodes to the same text.
pub fn corpus_entry(data: &[u8]) {
    let Ok(entry) = corpus::parse(data) else { return };
    let _ = with_op(&entry.op, RoundTrip(&entry));
    // Decodes, validates, and replays when valid; a broken entry is a
    // reported result, never a panic.
    let _ = with_op(&entry.op, ReplayEntry { entry: &entry, names: &[] });
}

/// A `check --json` summary, as `merge` reads it: any bytes are parsed and
/// checked ([`crate::merge::read_summary`]); one that is accepted merges
/// with itself as the shards of one run or is refused with a reason, and a
/// merged result is accepted again. Nothing may panic, and nothing may
/// allocate more than a few times the input (a forged shard count of 2^64 - 1
/// once built the list of every missing shard).
pub fn summary(data: &[u8]) {
    let Ok(r) = crate::merge::read_summary(data) else { return };
    if let Ok(run) = crate::merge::merge(&[("a".into(), r.clone())]) {
        let again = crate::report::to_json(&run);
        crate::merge::read_summary(again.as_bytes())
            .unwrap_or_else(|e| panic!("merge wrote a summary it refuses: {e}\n{again}"));
    }
    let _ = crate::merge::merge(&[("a".into(), r.clone()), ("b".into(), r)]);
}

/// A `bitparity.toml`: any bytes; one that parses names subjects whose
/// names, commands, environment and timeouts bitparity can honour (no
/// built-in's name, no invisible character, no empty or `=` key, a timeout
/// of at least 10 ms).
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let reserved = crate::harness::registry::device_subject_names();
    let Ok(c) = crate::exec::config::parse(text, "fuzz.toml", &crate::harness::OPS, &reserved) else { return };
    for s in &c.subjects {
        assert_eq!(crate::escape::visible(&s.name), s.name, "a name with hidden characters was accepted");
        assert!(
            !reserved.contains(&s.name.as_str()) && !s.name.starts_with("exec:"),
            "{:?} shadows a built-in",
            s.name
        );
        assert!(!s.command.is_empty() && !s.command[0].is_empty(), "an empty command was accepted");
        assert!(s.env.keys().all(|k| !k.is_empty() && !k.contains('=') && !k.contains('\0')), "{:?}", s.env);
        assert!(s.timeout.as_secs_f64() >= crate::knobs::MIN_TIMEOUT_S, "{:?}", s.timeout);
    }
}

/// The case of `entry` as type `C`, written back and read again, must be the
/// same JSON (so every value the parser accepted is exactly what it wrote).
/// The round trip of an entry's case, as a case of the op the entry names.
struct RoundTrip<'a>(&'a RawEntry);

impl OpCommand for RoundTrip<'_> {
    type Output = ();
    fn run<O: Harness>(self) {
        round_trips::<O::Case>(self.0);
    }
}

fn round_trips<C: Serialize + DeserializeOwned>(entry: &RawEntry) {
    let Ok(case) = decode_case::<C>(entry) else { return };
    let text = serde_json::to_value(&case).expect("a decoded case serializes");
    let again: C = serde_json::from_value(text.clone())
        .unwrap_or_else(|e| panic!("a written case does not read back: {e}\n{text}"));
    assert_eq!(serde_json::to_value(&again).expect("serializes"), text, "the case changed in a round trip");
}

/// The corpus's f32 text (`oracles::case::hexf`): any UTF-8 string. The
/// parser must accept exactly the grammar `[-]0x<hex>[.<hex>]p[+-]<dec>`
/// (`0X`, `P` too), `inf`, `-inf`, `nan`, `nan:0x<8 hex digits>` (a NaN),
/// and of the hex floats exactly those whose value is an f32. This target
/// decides both independently of the parser: its own scanner for the grammar
/// and big integers (rug) for the exact value, then checks that the parser
/// agrees (accepts iff the oracle does, with the same bits) and that
/// `format` of every accepted value parses back to the same bits.
pub fn hexf(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let parsed = hexf_text::parse(s);
    match (exact_f32(s), &parsed) {
        (Some(bits), Ok(x)) => assert_eq!(x.to_bits(), bits, "{s:?}: parsed {:#010x}, exact {bits:#010x}", x.to_bits()),
        (None, Err(_)) => {}
        (Some(bits), Err(e)) => panic!("{s:?} is exactly {bits:#010x}, but the parser refused it: {e}"),
        (None, Ok(x)) => {
            panic!("{s:?} is not an exact f32 spelling, but the parser accepted it as {:#010x}", x.to_bits())
        }
    }
    if let Ok(x) = parsed {
        let text = hexf_text::format(x);
        let back = hexf_text::parse(&text)
            .unwrap_or_else(|e| panic!("format({:#010x}) = {text:?} does not parse: {e}", x.to_bits()));
        assert_eq!(back.to_bits(), x.to_bits(), "{text:?} does not round-trip");
        assert_eq!(exact_f32(&text), Some(x.to_bits()), "format wrote {text:?}, which the oracle reads otherwise");
    }
}

/// The independent oracle of [`hexf`]: the exact f32 a spelling names, by
/// big-integer arithmetic, or None when it names none exactly.
fn exact_f32(s: &str) -> Option<u32> {
    match s {
        "nan" => return Some(f32::NAN.to_bits()),
        "inf" => return Some(f32::INFINITY.to_bits()),
        "-inf" => return Some(f32::NEG_INFINITY.to_bits()),
        _ => {}
    }
    let b = s.as_bytes();
    if let Some(h) = s.strip_prefix("nan:0x") {
        if h.len() != 8 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let bits = h.bytes().fold(0u32, |v, c| (v << 4) | (c as char).to_digit(16).unwrap());
        return f32::from_bits(bits).is_nan().then_some(bits);
    }
    // [-] 0 (x|X) hex+ ( . hex+ )? (p|P) (+|-)? dec+
    let mut i = 0;
    let neg = b.first() == Some(&b'-');
    i += neg as usize;
    if b.get(i) != Some(&b'0') || !matches!(b.get(i + 1), Some(b'x' | b'X')) {
        return None;
    }
    i += 2;
    let run = |i: &mut usize, ok: fn(&u8) -> bool| {
        let start = *i;
        while b.get(*i).is_some_and(ok) {
            *i += 1;
        }
        &s[start..*i]
    };
    let int = run(&mut i, u8::is_ascii_hexdigit);
    if int.is_empty() {
        return None;
    }
    let mut frac = "";
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac = run(&mut i, u8::is_ascii_hexdigit);
        if frac.is_empty() {
            return None;
        }
    }
    if !matches!(b.get(i), Some(b'p' | b'P')) {
        return None;
    }
    i += 1;
    let exp_neg = b.get(i) == Some(&b'-');
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits = run(&mut i, u8::is_ascii_digit);
    if digits.is_empty() || i != b.len() {
        return None;
    }
    // The exact value: M * 2^(exp - 4 * |frac|), M the hex digits as one integer.
    let sign = if neg { 1u32 << 31 } else { 0 };
    let m = Integer::from_str_radix(&format!("{int}{frac}"), 16).ok()?;
    if m == 0 {
        return Some(sign);
    }
    let mut exp = Integer::from_str_radix(digits, 10).ok()?;
    if exp_neg {
        exp = -exp;
    }
    let tz = m.find_one(0)?;
    let odd = Integer::from(&m >> tz);
    let e2 = exp - Integer::from(4) * Integer::from(frac.len()) + tz;
    let bits = odd.significant_bits() as i64;
    // Exactly an f32: at most 24 significant bits, the lowest at or above
    // 2^-149, the highest at or below 2^127.
    if bits > 24 || e2 < -149 || Integer::from(&e2 + (bits - 1)) > 127 {
        return None;
    }
    let e2 = e2.to_i32()?;
    // odd < 2^24 and -149 <= e2 <= 127: the f64 product is exact, so is the f32.
    let v = odd.to_f64() * 2f64.powi(e2);
    Some((v as f32).to_bits() | sign)
}
