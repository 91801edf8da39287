//! Each op's typed input (a case), its validation, and its outputs.

pub mod moe_combine;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

use serde::{Deserialize, Serialize};

/// The most elements a case's storage may span (2^28 f32 = 1 GiB), checked
/// by every op's validation before anything is allocated: a corpus entry of
/// a few bytes cannot ask for more (a huge row stride, say).
pub const MAX_STORAGE: usize = 1 << 28;

/// Largest supported element offset from a 16-byte-aligned base.
pub const MAX_OFFSET: usize = 3;

/// The most elements a layout may leave between two rows (row stride - E).
/// Strided views of wider tensors (a slice of a fused output, padded rows)
/// leave gaps of a few to a few thousand elements. Without this bound a
/// stored case of a few hundred bytes (two rows, a stride of 2^28) made every
/// subject allocate and poison 1 GiB, for seconds; with it, a case's storage
/// is at most (E + 4096) elements a row: proportional to the values it holds.
pub const MAX_ROW_GAP: usize = 4096;

/// Where a T x E matrix lies in memory: element `offset` from a 16-byte-
/// aligned base, rows `row_stride` elements apart. The elements between rows
/// are never read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    pub offset: usize,
    pub row_stride: usize,
}

impl Layout {
    /// Rows of `e` values, packed, at offset 0.
    pub fn dense(e: usize) -> Self {
        Layout { offset: 0, row_stride: e }
    }

    /// The elements the storage of `t` rows of `e` values spans: offset +
    /// (t - 1) * row_stride + e, when the layout is valid for them (offset
    /// at most [`MAX_OFFSET`], row stride from e to e + [`MAX_ROW_GAP`]) and
    /// the span at most [`MAX_STORAGE`]; otherwise why not.
    pub fn storage_len(&self, t: usize, e: usize) -> Result<usize, String> {
        if self.offset > MAX_OFFSET {
            return Err(format!("element offset {} is unsupported (0..={MAX_OFFSET})", self.offset));
        }
        if self.row_stride < e {
            return Err(format!("row stride {} is smaller than E = {e}", self.row_stride));
        }
        if self.row_stride - e > MAX_ROW_GAP {
            return Err(format!(
                "row stride {} leaves {} elements between rows of E = {e} (at most {MAX_ROW_GAP})",
                self.row_stride,
                self.row_stride - e
            ));
        }
        t.saturating_sub(1)
            .checked_mul(self.row_stride)
            .and_then(|n| n.checked_add(self.offset))
            .and_then(|n| n.checked_add(e))
            .filter(|&n| n <= MAX_STORAGE)
            .ok_or_else(|| format!("{t} rows of stride {} span more than {MAX_STORAGE} elements", self.row_stride))
    }

    /// Another valid layout of the same t x e values (for the offset-stride
    /// property): the next offset and three more elements between rows,
    /// unless that leaves the layouts validation accepts (the gap or storage
    /// bound): then the next offset with packed rows.
    pub fn relaid(&self, t: usize, e: usize) -> Layout {
        let offset = (self.offset + 1) % (MAX_OFFSET + 1);
        let wider = Layout { offset, row_stride: self.row_stride + 3 };
        match wider.storage_len(t, e) {
            Ok(_) => wider,
            Err(_) => Layout { offset, row_stride: e },
        }
    }

    /// `values` (t rows of e, row-major) laid out as this layout says; every
    /// element no valid read touches (the offset, the gaps between rows) is
    /// `gap`. The layout must have been validated for t x e.
    pub fn place(&self, values: &[f32], t: usize, e: usize, gap: f32) -> Vec<f32> {
        let len = if t == 0 { 0 } else { self.offset + (t - 1) * self.row_stride + e };
        let mut buf = vec![gap; len];
        for r in 0..t {
            let base = self.offset + r * self.row_stride;
            buf[base..base + e].copy_from_slice(&values[r * e..(r + 1) * e]);
        }
        buf
    }
}

/// What the ops' case tests share.
#[cfg(test)]
pub(crate) mod testing {
    use serde::de::DeserializeOwned;
    use serde::Serialize;
    use std::fmt::Debug;

    /// A change that makes a valid case invalid, and what it breaks.
    pub type Mutation<C> = (fn(&mut C), &'static str);

    /// Each of `bad`, applied to `valid()`, fails `validate`.
    pub fn each_refused<C, E>(valid: fn() -> C, validate: fn(&C) -> Result<(), E>, bad: Vec<Mutation<C>>) {
        for (f, what) in bad {
            let mut c = valid();
            f(&mut c);
            assert!(validate(&c).is_err(), "{what} accepted");
        }
    }

    /// `case` comes back from its JSON; the JSON with `key` spelled `typo`,
    /// or without each of `missing` (a key and its value, as the JSON has
    /// them), is refused.
    pub fn json_is_strict<C>(case: &C, (key, typo): (&str, &str), missing: &[&str])
    where
        C: Serialize + DeserializeOwned + PartialEq + Debug,
    {
        let text = serde_json::to_string(case).unwrap();
        assert_eq!(&serde_json::from_str::<C>(&text).unwrap(), case);
        let misspelt = text.replace(key, typo);
        assert_ne!(misspelt, text, "{key}");
        assert!(serde_json::from_str::<C>(&misspelt).is_err(), "{misspelt}");
        for m in missing {
            let cut = text.replace(m, "");
            assert_ne!(cut, text, "{m}");
            assert!(serde_json::from_str::<C>(&cut).is_err(), "{cut}");
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn storage_is_bounded_by_the_gap_and_the_total() {
        let l = |offset, row_stride| Layout { offset, row_stride };
        assert_eq!(l(3, 8).storage_len(2, 8), Ok(19));
        assert_eq!(l(0, 8 + MAX_ROW_GAP).storage_len(2, 8), Ok(16 + MAX_ROW_GAP));
        assert!(l(0, 9 + MAX_ROW_GAP).storage_len(2, 8).unwrap_err().contains("between rows"));
        assert!(l(0, (1 << 28) - 2).storage_len(2, 1).is_err(), "1 GiB for two values");
        assert!(l(0, usize::MAX).storage_len(3, 1).is_err());
        assert!(l(0, 7).storage_len(2, 8).unwrap_err().contains("smaller"));
        assert!(l(4, 8).storage_len(2, 8).unwrap_err().contains("offset"));
        assert!(l(0, 4096).storage_len((MAX_STORAGE / 4096) + 2, 4096).unwrap_err().contains("span"));
    }
}

/// serde: a field that must be present even when its type is an `Option`
/// (serde would read a missing `Option` as `None`).
pub fn required<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    T::deserialize(d)
}

/// Exact, readable f32 text: C99 hex floats (`0x1.8p+0`, `-0x0p+0`,
/// `0x0.000002p-126`), `inf`, `-inf`, and `nan` or `nan:0x7fc00001` (the bits,
/// to keep a payload). Every f32 round-trips bit for bit.
pub mod hexf {
    pub fn format(x: f32) -> String {
        let bits = x.to_bits();
        if x.is_nan() {
            return if bits == f32::NAN.to_bits() { "nan".into() } else { format!("nan:{bits:#010x}") };
        }
        let sign = if bits >> 31 == 1 { "-" } else { "" };
        if x.is_infinite() {
            return format!("{sign}inf");
        }
        let exp = ((bits >> 23) & 0xff) as i32;
        let frac = (bits & 0x7f_ffff) << 1; // 24 bits = 6 hex digits
        let (lead, e) = if exp == 0 { (0, -126) } else { (1, exp - 127) };
        if frac == 0 {
            return format!("{sign}0x{lead}p{}", if lead == 0 { 0 } else { e });
        }
        let digits = format!("{frac:06x}");
        format!("{sign}0x{lead}.{}p{e:+}", digits.trim_end_matches('0'))
    }

    /// Parses exactly the spellings [`format`] writes, and no others:
    ///
    /// - `[-]0x<hex digits>[.<hex digits>]p[+|-]<decimal digits>` (`0X` and
    ///   `P` too): any number of digits, as long as the value is exactly an
    ///   f32, normal or subnormal;
    /// - `inf`, `-inf`, `nan`, and `nan:0x<8 hex digits>` (bits that must be
    ///   a NaN).
    ///
    /// No whitespace, no `+` before the number, no sign inside the digits, no
    /// rounding: a value that is not exactly an f32 (25 significant bits, below
    /// 2^-149, above f32::MAX) is an error, never the nearest f32 or zero.
    /// Exactness is decided in integers (the odd part of the significand and
    /// its binary exponent), never through a power that could underflow.
    pub fn parse(s: &str) -> Result<f32, String> {
        let bad = |why: &str| format!("not an exact f32 hex float ({why}): {s:?}");
        if let Some(b) = s.strip_prefix("nan:0x") {
            if b.len() != 8 || !b.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad("nan:0x needs exactly 8 hex digits"));
            }
            let x = f32::from_bits(u32::from_str_radix(b, 16).map_err(|_| bad("bad bits"))?);
            return if x.is_nan() { Ok(x) } else { Err(bad("the bits are not a NaN")) };
        }
        match s {
            "nan" => return Ok(f32::NAN),
            "inf" => return Ok(f32::INFINITY),
            "-inf" => return Ok(f32::NEG_INFINITY),
            _ => {}
        }
        let (neg, rest) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s),
        };
        let rest = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")).ok_or_else(|| bad("no 0x"))?;
        let (mant, exp) = rest.split_once(['p', 'P']).ok_or_else(|| bad("no p exponent"))?;
        let (int, frac) = match mant.split_once('.') {
            Some((i, f)) => {
                if f.is_empty() {
                    return Err(bad("no digit after the point"));
                }
                (i, f)
            }
            None => (mant, ""),
        };
        let hex = |d: &str| d.bytes().all(|c| c.is_ascii_hexdigit());
        if int.is_empty() || !hex(int) || !hex(frac) {
            return Err(bad("the significand must be hex digits"));
        }
        let exp = parse_exponent(exp).ok_or_else(|| bad("the exponent must be decimal digits"))?;
        let bits = exact_bits(int, frac, exp).ok_or_else(|| bad("not exactly an f32"))?;
        Ok(f32::from_bits(bits | if neg { 1 << 31 } else { 0 }))
    }

    /// The binary exponent `[+|-]<decimal digits>`, saturated far beyond any
    /// f32 (the digit count of a significand cannot bring it back in range).
    fn parse_exponent(e: &str) -> Option<i64> {
        const SATURATE: i64 = 1 << 62;
        let (neg, digits) = match e.as_bytes().first()? {
            b'-' => (true, &e[1..]),
            b'+' => (false, &e[1..]),
            _ => (false, e),
        };
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let v = digits.bytes().fold(0i64, |v, c| v.saturating_mul(10).saturating_add((c - b'0') as i64).min(SATURATE));
        Some(if neg { -v } else { v })
    }

    /// The bits (sign clear) of the f32 that equals 0x`int`.`frac` p `exp`
    /// exactly, if there is one. Integers only: the value is m * 2^e2 with m
    /// odd; it is an f32 iff m has at most 24 bits, e2 >= -149 (the lowest
    /// subnormal bit) and its top bit is at most 2^127.
    fn exact_bits(int: &str, frac: &str, exp: i64) -> Option<u32> {
        let digits: Vec<u32> = int.chars().chain(frac.chars()).map(|c| c.to_digit(16).unwrap_or(0)).collect();
        let Some(first) = digits.iter().position(|&d| d != 0) else {
            return Some(0); // zero, whatever the exponent
        };
        let last = digits.iter().rposition(|&d| d != 0).unwrap_or(first);
        let significant = &digits[first..=last];
        // 7 hex digits hold 28 bits: an odd part of 24 bits spans at most 7.
        if significant.len() > 7 {
            return None;
        }
        let m = significant.iter().fold(0u32, |m, &d| (m << 4) | d);
        let tz = m.trailing_zeros();
        let m = m >> tz;
        if m >= 1 << 24 {
            return None;
        }
        // The value of the last significant digit's unit: 16^-(digits after it
        // in frac), i.e. 2^(exp - 4 * (frac.len() - (last + 1 - int.len()))).
        let below = (digits.len() - 1 - last) as i64; // zero digits after the last significant one
        let e2 = exp.checked_sub(4 * frac.len() as i64)?.checked_add(4 * below + tz as i64)?;
        let b = 32 - m.leading_zeros() as i64; // bits of m, 1..=24
        let top = e2 + b - 1;
        if e2 < -149 || top > 127 {
            return None;
        }
        Some(if top >= -126 { (((top + 127) as u32) << 23) | ((m << (24 - b)) & 0x7f_ffff) } else { m << (e2 + 149) })
    }

    #[cfg(test)]
    mod tests {
        use super::{format, parse};

        fn bits(s: &str) -> u32 {
            parse(s).unwrap_or_else(|e| panic!("{e}")).to_bits()
        }

        #[test]
        fn round_trips_every_class() {
            for x in [
                0.0f32,
                -0.0,
                1.0,
                -1.5,
                1e-12,
                f32::MIN_POSITIVE,
                -f32::MIN_POSITIVE,
                f32::from_bits(1),
                f32::from_bits(0x8000_0001),
                f32::from_bits(0x007f_ffff),
                1e-45,
                3e-40,
                f32::MAX,
                f32::MIN,
                f32::EPSILON,
                f32::INFINITY,
                f32::NEG_INFINITY,
                0.1,
                1.0 - f32::EPSILON / 2.0,
            ] {
                let s = format(x);
                assert_eq!(bits(&s), x.to_bits(), "{s}");
            }
            for nan in [0x7fc0_0000u32, 0x7fc0_0001, 0xffc0_0000, 0x7f80_0001, 0xffff_ffff] {
                assert_eq!(bits(&format(f32::from_bits(nan))), nan);
            }
            assert_eq!(format(1.0), "0x1p0");
            assert_eq!(format(1.5), "0x1.8p+0");
        }

        #[test]
        fn round_trips_a_sweep_of_all_bit_patterns() {
            // Every exponent, many significands (a stride coprime to 2^32).
            let mut b = 0u32;
            for _ in 0..200_000 {
                let s = format(f32::from_bits(b));
                assert_eq!(bits(&s), b, "{s}");
                b = b.wrapping_add(0x0000_5a5b);
            }
        }

        #[test]
        fn other_exact_spellings_of_the_same_value() {
            assert_eq!(bits("0x1p0"), 1f32.to_bits());
            assert_eq!(bits("0X1P0"), 1f32.to_bits());
            assert_eq!(bits("0x1p+0"), 1f32.to_bits());
            assert_eq!(bits("0x0001.000000000000000000p-0"), 1f32.to_bits());
            assert_eq!(bits("0x0.00000000000000000000000000000001p+128"), 1f32.to_bits());
            assert_eq!(bits("0x10p-4"), 1f32.to_bits());
            assert_eq!(bits("0xffffffp-24"), (1.0 - f32::EPSILON / 2.0).to_bits());
            assert_eq!(bits("0x1.fffffep+127"), f32::MAX.to_bits());
            assert_eq!(bits("0x1p-149"), 1);
            assert_eq!(bits("0x0.000002p-126"), 1);
        }

        #[test]
        fn refuses_inexact_values() {
            for s in [
                "0x1p-150",                        // half the smallest subnormal
                "0x1p-2000",                       // far below: was read as zero
                "-0x1p-2000",                      //
                "0x1p-99999999999",                //
                "0x1.000001p0",                    // 25 significant bits
                "0x1.0000008p0",                   //
                "0x1ffffffp0",                     //
                "0x1.fffffe8p0",                   //
                "0x1.fffffep-127",                 // a subnormal with 24 bits
                "0x3p-150",                        // 1.5 * 2^-149
                "0x1p128",                         // overflow
                "0x1.fffffep+127000",              //
                "0x1p99999999999",                 //
                "0x1p999999999999999999999999999", // saturates, still refused
                "0x2p127",                         //
            ] {
                assert!(parse(s).is_err(), "{s} accepted as {:?}", parse(s));
            }
        }

        #[test]
        fn refuses_malformed_spellings() {
            for s in [
                "",
                " ",
                "0x",
                "0x1",
                "0x1p",
                "0xp0",
                "0x.p0",
                "0x.8p0",
                "0x1.p0",
                "0x1..0p0",
                "0x1.0.0p0",
                " 0x1p0",
                "0x1p0 ",
                "0x1p0\n",
                "\t0x1p0",
                "0x 1p0",
                "0x1 p0",
                "0x1p 0",
                "+0x1p0",
                "0x+1p0",
                "0x-1p0",
                "--0x1p0",
                "-+0x1p0",
                "0x1p+-1",
                "0x1p-+1",
                "0x1p++1",
                "0x1p--1",
                "0x1.+8p0",
                "0x1p1.0",
                "0x1p1e3",
                "0xgp0",
                "0x1.gp0",
                "0x1p0x1",
                "1p0",
                "1.0",
                "1",
                "0",
                "-0",
                "1e5",
                "0b1p0",
                "x1p0",
                "00x1p0",
                "0x1p0p0",
                "0x1P",
                "0x1pp0",
                "0x_1p0",
                "0x1_0p0",
                "0x1p1_0",
                "+inf",
                "Inf",
                "INF",
                "infinity",
                "-nan",
                "+nan",
                "NaN",
                "nan ",
                " nan",
                "nan:",
                "nan:0x",
                "nan:7fc00001",
                "nan:0x+7fc00001",
                "nan:0x7fc0001",
                "nan:0x07fc00001",
                "nan:0x7fc00001 ",
                "nan:0x7f800000",
                "nan:0x00000000",
                "nan:0x3f800000",
                "nan:0xgfc00001",
                "nan:0X7fc00001",
                "0x1p٣",
                "0x١p0",
                "0x1p０",
            ] {
                assert!(parse(s).is_err(), "{s:?} accepted as {:?}", parse(s));
            }
        }
    }
}

/// serde adapter: one f32 as hex-float text.
pub mod hex_f32 {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hexf::format(*x))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        let s = String::deserialize(d)?;
        super::hexf::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// serde adapter: a vector of f32 as hex-float texts.
pub mod hex_f32_vec {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(xs: &[f32], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(xs.iter().map(|&x| super::hexf::format(x)))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        v.iter().map(|s| super::hexf::parse(s).map_err(serde::de::Error::custom)).collect()
    }
}
