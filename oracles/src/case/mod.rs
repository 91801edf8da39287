//! Each op's typed input (a case), its validation, and its outputs.

pub mod router;
pub mod seqwise_loss;

use serde::{Deserialize, Serialize};

/// The most elements a case's storage may span (2^28 f32 = 1 GiB), checked
/// by every op's validation before anything is allocated: a corpus entry of
/// a few bytes cannot ask for more (a huge row stride, say).
pub const MAX_STORAGE: usize = 1 << 28;

/// Largest supported element offset from a 16-byte-aligned base.
pub const MAX_OFFSET: usize = 3;

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
    /// at most [`MAX_OFFSET`], row stride at least e) and the span at most
    /// [`MAX_STORAGE`]; otherwise why not.
    pub fn storage_len(&self, t: usize, e: usize) -> Result<usize, String> {
        if self.offset > MAX_OFFSET {
            return Err(format!("element offset {} is unsupported (0..={MAX_OFFSET})", self.offset));
        }
        if self.row_stride < e {
            return Err(format!("row stride {} is smaller than E = {e}", self.row_stride));
        }
        t.saturating_sub(1)
            .checked_mul(self.row_stride)
            .and_then(|n| n.checked_add(self.offset))
            .and_then(|n| n.checked_add(e))
            .filter(|&n| n <= MAX_STORAGE)
            .ok_or_else(|| format!("{t} rows of stride {} span more than {MAX_STORAGE} elements", self.row_stride))
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

    pub fn parse(s: &str) -> Result<f32, String> {
        let t = s.trim();
        let bad = || format!("not an exact f32 hex float: {s:?}");
        if let Some(b) = t.strip_prefix("nan:0x") {
            let bits = u32::from_str_radix(b, 16).map_err(|_| bad())?;
            let x = f32::from_bits(bits);
            return if x.is_nan() { Ok(x) } else { Err(bad()) };
        }
        match t {
            "nan" => return Ok(f32::NAN),
            "inf" | "+inf" => return Ok(f32::INFINITY),
            "-inf" => return Ok(f32::NEG_INFINITY),
            _ => {}
        }
        let (neg, rest) = match t.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let rest = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")).ok_or_else(bad)?;
        let (mant, exp) = rest.split_once(['p', 'P']).ok_or_else(bad)?;
        let exp: i32 = exp.parse().map_err(|_| bad())?;
        let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
        let digits = format!("{int}{frac}");
        if digits.is_empty() || digits.len() > 13 {
            return Err(bad());
        }
        let m = u64::from_str_radix(&digits, 16).map_err(|_| bad())?;
        // m < 2^52, so m * 2^k is exact in f64 over the whole f32 range.
        let v = (m as f64) * 2f64.powi(exp - 4 * frac.len() as i32);
        let x = v as f32;
        if x as f64 != v || !x.is_finite() {
            return Err(bad());
        }
        Ok(if neg { -x } else { x })
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn round_trips_every_class() {
            for x in [
                0.0f32,
                -0.0,
                1.0,
                -1.5,
                1e-12,
                f32::MIN_POSITIVE,
                1e-45,
                3e-40,
                f32::MAX,
                f32::INFINITY,
                f32::NEG_INFINITY,
                0.1,
                1.0 - f32::EPSILON / 2.0,
            ] {
                let s = super::format(x);
                assert_eq!(super::parse(&s).unwrap().to_bits(), x.to_bits(), "{s}");
            }
            let nan = f32::from_bits(0x7fc0_0001);
            assert_eq!(super::parse(&super::format(nan)).unwrap().to_bits(), 0x7fc0_0001);
            assert_eq!(super::format(1.0), "0x1p0");
            assert_eq!(super::format(1.5), "0x1.8p+0");
            assert!(super::parse("0x1.000001p+0").is_err(), "25 significant bits");
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
