//! Reduction orders (docs/ops/README.md#reduction-orders): the association
//! order of a sum, as data.

use crate::num::Num;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The order in which a sum of n values is associated. Orders compose:
/// `Chunked` and `Strided` name the order of their parts and of their partials.
/// Sizes (`chunk`, `lanes`) are constants of the profile, never taken from the
/// problem size or the device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "order", rename_all = "snake_case")]
pub enum ReductionOrder {
    /// acc = +0.0; for i ascending: acc = acc + x[i]. The empty sum is +0.0.
    Serial,
    /// Consecutive chunks of `chunk` indices, each reduced with `inner`; the
    /// partials (one per chunk, in chunk order) reduced with `outer`.
    Chunked { chunk: usize, inner: Box<ReductionOrder>, outer: Box<ReductionOrder> },
    /// Lane l takes the indices i with i % lanes == l, reduced with `inner`;
    /// the `lanes` partials (lane order) reduced with `outer`.
    Strided { lanes: usize, inner: Box<ReductionOrder>, outer: Box<ReductionOrder> },
    /// xor-butterfly over the values padded with +0.0 to a power-of-two count
    /// n: offsets n/2, n/4, ..., 1, as a warp shuffle does. Every lane ends with
    /// the same value because IEEE addition is commutative.
    Butterfly,
    /// An order that is not known: any association of the n values in any
    /// order, each addition rounded to f32, a product possibly contracted into
    /// the addition that consumes it (an FMA). What a subject that claims no
    /// profile may do (an unknown reduction order of depth n,
    /// docs/ops/README.md#the-accuracy-bound). It defines no f32 value, only a
    /// bound: the value types say what they make of it ([`Num::sum_any_order`];
    /// the plain types compute one admissible value, the serial one, and
    /// [`crate::any_order::AnyOrder`] a bound that holds for every order). No
    /// kernel can claim it: it is no shipped profile's order.
    Any,
}

impl ReductionOrder {
    pub fn chunked(chunk: usize, inner: ReductionOrder, outer: ReductionOrder) -> Self {
        ReductionOrder::Chunked { chunk, inner: Box::new(inner), outer: Box::new(outer) }
    }
    pub fn strided(lanes: usize, inner: ReductionOrder, outer: ReductionOrder) -> Self {
        ReductionOrder::Strided { lanes, inner: Box::new(inner), outer: Box::new(outer) }
    }

    /// A chunk or lane count of zero has no meaning.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            ReductionOrder::Serial | ReductionOrder::Butterfly | ReductionOrder::Any => Ok(()),
            ReductionOrder::Chunked { chunk: n, inner, outer } | ReductionOrder::Strided { lanes: n, inner, outer } => {
                if *n == 0 {
                    return Err(format!("{self}: a size of 0"));
                }
                inner.validate()?;
                outer.validate()
            }
        }
    }

    /// Sums `xs` in this order. Values the op does not read (padding rows)
    /// are passed as +0.0: adding +0.0 to a partial that started at +0.0
    /// changes no bit, so this is the same as skipping them.
    pub fn reduce<N: Num>(&self, xs: &[N]) -> N {
        match self {
            ReductionOrder::Serial => {
                let mut acc = N::zero();
                for x in xs {
                    acc = acc.add(x);
                }
                acc
            }
            ReductionOrder::Chunked { chunk, inner, outer } => {
                let partials: Vec<N> = xs.chunks(*chunk).map(|c| inner.reduce(c)).collect();
                outer.reduce(&partials)
            }
            ReductionOrder::Strided { lanes, inner, outer } => {
                let partials: Vec<N> = (0..*lanes)
                    .map(|l| {
                        let lane: Vec<N> = xs.iter().skip(l).step_by(*lanes).cloned().collect();
                        inner.reduce(&lane)
                    })
                    .collect();
                outer.reduce(&partials)
            }
            ReductionOrder::Butterfly => {
                let n = xs.len().max(1).next_power_of_two();
                let mut v: Vec<N> = xs.to_vec();
                v.resize(n, N::zero());
                let mut width = n / 2;
                while width >= 1 {
                    for l in 0..width {
                        v[l] = v[l].add(&v[l + width]);
                    }
                    width /= 2;
                }
                v.swap_remove(0)
            }
            ReductionOrder::Any => N::sum_any_order(xs),
        }
    }

    /// Depth of the longest chain of additions this order builds over n values
    /// (a bound's gamma(h) uses it; the running error analysis does not need it).
    pub fn depth(&self, n: usize) -> usize {
        match self {
            ReductionOrder::Serial => n,
            ReductionOrder::Chunked { chunk, inner, outer } => {
                inner.depth((*chunk).min(n)) + outer.depth(n.div_ceil(*chunk))
            }
            ReductionOrder::Strided { lanes, inner, outer } => inner.depth(n.div_ceil(*lanes)) + outer.depth(*lanes),
            ReductionOrder::Butterfly => n.max(1).next_power_of_two().trailing_zeros() as usize,
            // The worst tree over n leaves is a chain of n - 1 additions.
            ReductionOrder::Any => n.saturating_sub(1),
        }
    }
}

impl fmt::Display for ReductionOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReductionOrder::Serial => write!(f, "Serial"),
            ReductionOrder::Butterfly => write!(f, "Butterfly"),
            ReductionOrder::Any => write!(f, "Any"),
            ReductionOrder::Chunked { chunk, inner, outer } => {
                write!(f, "Chunked{{{chunk}, {inner}, {outer}}}")
            }
            ReductionOrder::Strided { lanes, inner, outer } => {
                write!(f, "Strided{{{lanes}, {inner}, {outer}}}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReductionOrder::*;

    #[test]
    fn orders_differ_where_association_matters() {
        // 2^-24 + 2^-24 first keeps the tiny terms (1 + 2^-23); meeting 1
        // one at a time rounds each away (ties to even).
        let tiny = f32::EPSILON / 2.0;
        let xs = [tiny, tiny, 1.0f32, 0.0];
        assert_eq!(Serial.reduce(&xs), 1.0 + f32::EPSILON);
        assert_eq!(ReductionOrder::chunked(2, Serial, Serial).reduce(&xs), 1.0 + f32::EPSILON);
        assert_eq!(ReductionOrder::strided(2, Serial, Serial).reduce(&xs), 1.0);
        assert_eq!(Butterfly.reduce(&xs), 1.0);
    }

    #[test]
    fn empty_and_negative_zero_sums_are_positive_zero() {
        assert_eq!(Serial.reduce::<f32>(&[]).to_bits(), 0);
        assert_eq!(Serial.reduce(&[-0.0f32, -0.0]).to_bits(), 0);
        // A butterfly adds raw values as they are: -0 + -0 stays -0.
        assert_eq!(Butterfly.reduce(&[-0.0f32, -0.0]).to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn chunked_and_strided_visit_every_index_once() {
        let xs: Vec<f32> = (1..=100).map(|i| i as f32).collect();
        for o in [
            ReductionOrder::chunked(7, Serial, Butterfly),
            ReductionOrder::strided(32, Serial, Butterfly),
            ReductionOrder::chunked(64, ReductionOrder::strided(3, Butterfly, Serial), Serial),
        ] {
            assert_eq!(o.reduce(&xs), 5050.0, "{o}");
        }
    }
}
