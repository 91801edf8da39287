//! Each op's typed input (a case), its validation, and its outputs.

pub mod seqwise_loss;

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
