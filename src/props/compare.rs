//! Bitwise comparisons of output groups
//! (docs/ops/README.md#rules-every-profile-keeps: bits must match, the sign of
//! zero counts, any NaN matches any NaN): whole results, and results related by
//! a metamorphic transform.

use crate::harness::Transform;
use oracles::case::hexf;
use oracles::op::{Group, Rows, Values};
use oracles::same_bits;

/// An f32 as its bits and its exact hex-float value.
pub fn bits(x: f32) -> String {
    format!("{:#010x} ({})", x.to_bits(), hexf::format(x))
}

/// A bit difference read back from a failure message: the output, the
/// bits expected and the bits got. Failure messages are the one form a
/// failure takes (the shrinker, the corpus note and the reports all carry
/// the text), so the reports read the bits back from it; the two message
/// shapes are written by this module only ([`bits`], [`diff_groups`],
/// [`diff_transformed`]), and a test ties the reader to them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitDiff {
    /// The output that differs (`backward grad[0][1]`).
    pub output: String,
    pub expected: u32,
    pub got: u32,
}

impl BitDiff {
    /// The distance in units in the last place between the two values:
    /// how many f32s lie between them, plus one (0 for +0.0 and -0.0, whose
    /// bits differ by the sign alone). `None` where it means nothing: a NaN.
    pub fn ulps(&self) -> Option<u64> {
        let (a, b) = (f32::from_bits(self.expected), f32::from_bits(self.got));
        if a.is_nan() || b.is_nan() {
            return None;
        }
        // The f32s in order as integers: negative ones mirrored below zero.
        let ordered = |x: u32| if x & 0x8000_0000 != 0 { -((x & 0x7fff_ffff) as i64) } else { x as i64 };
        Some(ordered(self.expected).abs_diff(ordered(self.got)))
    }
}

/// `0x` and eight hex digits at the start of `s`: the bits, and the rest.
fn hex_bits(s: &str) -> Option<(u32, &str)> {
    let digits = s.strip_prefix("0x")?.get(..8)?;
    let v = u32::from_str_radix(digits, 16).ok()?;
    Some((v, &s[10..]))
}

/// `(...)` at the start of `s` (the value in hex-float), skipped.
fn skip_value(s: &str) -> Option<&str> {
    let s = s.strip_prefix(" (")?;
    Some(&s[s.find(')')? + 1..])
}

/// The output named just before `at` in `message`: after the last `": "`.
fn output_before(message: &str, at: usize) -> String {
    let head = &message[..at];
    head.rsplit_once(": ").map_or(head, |(_, o)| o).to_string()
}

/// The bits a failure message says differ, when it compares bits: `X:
/// expected 0x.. (v), got 0x.. (v)` or `X = 0x.. (v), expected +0.0`.
pub fn bit_diff(message: &str) -> Option<BitDiff> {
    if let Some(at) = message.find(": expected 0x") {
        let (expected, rest) = hex_bits(&message[at + ": expected ".len()..])?;
        let rest = skip_value(rest)?.strip_prefix(", got ")?;
        let (got, rest) = hex_bits(rest)?;
        skip_value(rest)?;
        return Some(BitDiff { output: output_before(message, at), expected, got });
    }
    let at = message.find(" = 0x")?;
    let (got, rest) = hex_bits(&message[at + " = ".len()..])?;
    skip_value(rest)?.starts_with(", expected +0.0").then(|| BitDiff {
        output: output_before(message, at),
        expected: 0,
        got,
    })
}

/// The first difference between two groups' values at the same positions
/// (`label` names position i), comparing `idx` positions of each.
fn first_diff<'a>(
    expected: &Group<f32>,
    got: &Group<f32>,
    pairs: impl Iterator<Item = (usize, usize)> + 'a,
) -> Option<String> {
    match (&expected.values, &got.values) {
        (Values::Real(a), Values::Real(b)) => pairs
            .into_iter()
            .find(|&(i, j)| !same_bits(a[i], b[j]))
            .map(|(i, j)| format!("{}: expected {}, got {}", got.label(j), bits(a[i]), bits(b[j]))),
        (Values::Int(a), Values::Int(b)) => pairs
            .into_iter()
            .find(|&(i, j)| a[i] != b[j])
            .map(|(i, j)| format!("{}: expected {}, got {}", got.label(j), a[i], b[j])),
        _ => Some(format!("{}: not the kind of output the op defines", got.name)),
    }
}

/// The first bit difference between two results, group by group in the
/// op's order.
pub fn diff_groups(expected: &[Group<f32>], got: &[Group<f32>]) -> Option<String> {
    diff_decided(expected, got, None).0
}

/// [`diff_groups`] over the values the profile decides: `undecided[g][i]`
/// marks value i of group g as undecided ([`oracles::undecided`]; `None`:
/// every value is decided). The first difference among the decided values,
/// and how many values were left out.
pub fn diff_decided(
    expected: &[Group<f32>],
    got: &[Group<f32>],
    undecided: Option<&[Vec<bool>]>,
) -> (Option<String>, usize) {
    if expected.len() != got.len() {
        return (Some(format!("{} output groups, expected {}", got.len(), expected.len())), 0);
    }
    let mut left_out = 0;
    for (g, (a, b)) in expected.iter().zip(got).enumerate() {
        if a.len() != b.len() {
            return (Some(format!("{}: {} values, expected {}", b.name, b.len(), a.len())), left_out);
        }
        let open = |i: usize| undecided.and_then(|u| u.get(g)).and_then(|m| m.get(i)).copied().unwrap_or(false);
        left_out += (0..a.len()).filter(|&i| open(i)).count();
        if let Some(d) = first_diff(a, b, (0..a.len()).filter(|&i| !open(i)).map(|i| (i, i))) {
            return (Some(d), left_out);
        }
    }
    (None, left_out)
}

/// The first violation of `t` between the original result (`a`, on the
/// original case) and the transformed one (`b`, on `t.case`).
pub fn diff_transformed<C>(a: &[Group<f32>], b: &[Group<f32>], t: &Transform<C>) -> Option<String> {
    if a.len() != b.len() {
        return Some(format!("{} output groups, expected {}", b.len(), a.len()));
    }
    for (ga, gb) in a.iter().zip(b) {
        match ga.rows {
            Rows::Global => {
                if !t.same_global {
                    continue;
                }
                if ga.len() != gb.len() {
                    return Some(format!("{}: {} values, expected {}", gb.name, gb.len(), ga.len()));
                }
                if let Some(d) = first_diff(ga, gb, (0..ga.len()).map(|i| (i, i))) {
                    return Some(d);
                }
            }
            Rows::PerToken { local } => {
                if t.local_only && !local {
                    continue;
                }
                let cols = gb.cols.max(1);
                if gb.len() != t.rows.len() * cols {
                    return Some(format!("{}: {} values, expected {} rows of {cols}", gb.name, gb.len(), t.rows.len()));
                }
                let mapped = t.rows.iter().enumerate().filter_map(|(rb, ra)| ra.map(|ra| (ra, rb)));
                let pairs = mapped.flat_map(|(ra, rb)| (0..cols).map(move |c| (ra * cols + c, rb * cols + c)));
                if ga.len() < t.rows.iter().flatten().max().map_or(0, |&m| (m + 1) * cols) {
                    return Some(format!("{}: {} values in the original result, too few rows", ga.name, ga.len()));
                }
                if let Some(d) = first_diff(ga, gb, pairs) {
                    return Some(d);
                }
                if t.unmapped_zero {
                    if let Values::Real(vb) = &gb.values {
                        let unmapped = t.rows.iter().enumerate().filter(|(_, ra)| ra.is_none()).map(|(rb, _)| rb);
                        for rb in unmapped {
                            if let Some(c) = (0..cols).find(|&c| vb[rb * cols + c].to_bits() != 0) {
                                let j = rb * cols + c;
                                return Some(format!("{} = {}, expected +0.0", gb.label(j), bits(vb[j])));
                            }
                        }
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g<'a>(name: &'static str, rows: Rows, cols: usize, v: &'a [f32]) -> Group<'a, f32> {
        Group { name, rows, cols, values: Values::Real(v) }
    }

    #[test]
    fn nan_matches_nan_and_zero_signs_count() {
        let a = [f32::NAN, 0.0];
        let b = [f32::from_bits(0x7fc0_1234), 0.0];
        let c = [f32::NAN, -0.0];
        let ga = [g("x", Rows::Global, 2, &a)];
        assert_eq!(diff_groups(&ga, &[g("x", Rows::Global, 2, &b)]), None);
        let d = diff_groups(&ga, &[g("x", Rows::Global, 2, &c)]).unwrap();
        assert!(d.starts_with("x[1]: expected 0x00000000"), "{d}");
    }

    #[test]
    fn bit_diffs_are_read_back_from_both_message_shapes() {
        let a = [1.0f32, 2.0];
        let b = [1.0f32, f32::from_bits(2.0f32.to_bits() + 3)];
        let d = diff_groups(&[g("w", Rows::Global, 2, &a)], &[g("w", Rows::Global, 2, &b)]).unwrap();
        let read = bit_diff(&format!("appended padding: backward {d}")).unwrap();
        assert_eq!(read, BitDiff { output: "backward w[1]".into(), expected: 2.0f32.to_bits(), got: b[1].to_bits() });
        assert_eq!(read.ulps(), Some(3));
        let t = Transform {
            what: String::new(),
            case: (),
            rows: vec![None],
            same_global: false,
            unmapped_zero: true,
            local_only: false,
        };
        let d = diff_transformed(
            &[g("grad", Rows::PerToken { local: false }, 1, &[])],
            &[g("grad", Rows::PerToken { local: false }, 1, &[-0.0])],
            &t,
        )
        .unwrap();
        let read = bit_diff(&d).unwrap();
        assert_eq!((read.output.as_str(), read.expected, read.got), ("grad[0][0]", 0, 0x8000_0000));
        assert_eq!(read.ulps(), Some(0), "the sign of zero alone");
        // Across zero, and where ULPs mean nothing.
        let across = BitDiff { output: String::new(), expected: (-f32::from_bits(1)).to_bits(), got: 1 };
        assert_eq!(across.ulps(), Some(2));
        assert_eq!(BitDiff { output: String::new(), expected: f32::NAN.to_bits(), got: 0 }.ulps(), None);
        assert_eq!(bit_diff("forward outside its bound: loss: computed 1e0, exact 2e0, bound 1e-7"), None);
        assert_eq!(bit_diff("counts: expected 3, got 4"), None);
    }

    #[test]
    fn transforms_compare_mapped_rows_and_zero_the_rest() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 2.0, 3.0, 4.0, 0.0, 0.0];
        let t = Transform {
            what: String::new(),
            case: (),
            rows: vec![Some(0), Some(1), None],
            same_global: true,
            unmapped_zero: true,
            local_only: false,
        };
        let pa = [g("grad", Rows::PerToken { local: false }, 2, &a)];
        assert_eq!(diff_transformed(&pa, &[g("grad", Rows::PerToken { local: false }, 2, &b)], &t), None);
        let bad = [1.0, 2.0, 3.0, 4.0, 0.0, -0.0];
        let d = diff_transformed(&pa, &[g("grad", Rows::PerToken { local: false }, 2, &bad)], &t).unwrap();
        assert!(d.starts_with("grad[2][1] = 0x80000000"), "{d}");
        // Sub-batch: only local groups compared; row 0 of b is row 1 of a.
        let sub = Transform { rows: vec![Some(1)], same_global: false, unmapped_zero: false, local_only: true, ..t };
        let pl = [g("w", Rows::PerToken { local: true }, 2, &a), g("c", Rows::Global, 1, &[9.0])];
        let ok = [g("w", Rows::PerToken { local: true }, 2, &[3.0, 4.0]), g("c", Rows::Global, 1, &[1.0])];
        assert_eq!(diff_transformed(&pl, &ok, &sub), None);
        let wrong = [g("w", Rows::PerToken { local: true }, 2, &[3.0, 5.0]), g("c", Rows::Global, 1, &[1.0])];
        assert!(diff_transformed(&pl, &wrong, &sub).unwrap().starts_with("w[0][1]"));
    }
}
