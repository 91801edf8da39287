//! The kernel model of `router` (docs/ops/router.md), written as a routing
//! kernel is: logits read from their strided storage, a sigmoid per element,
//! each group's two largest biased scores kept in registers in one pass, the
//! kept groups and the experts chosen by iterative argmax, the k weights
//! normalised with the kernel loop of the profile's order, and the backward
//! (route part, fused `seqwise_loss` gradient, sigmoid derivative) as one loop
//! per formula. It shares with the oracles the case, profile and output types,
//! their validation, and `exp_f32`; nothing else (not even the seqwise model:
//! the fused loss gradient is written again here, from the model's own sums and
//! sign).
//!
//! Without a bug it follows docs/ops/router.md to the letter; with a
//! [`RouterBug`] it makes that one mistake.

use super::{pick_top, sign_factor, top_two, ModelError, Scan, Strided, Sum, POISON};
use crate::planted::RouterBug;
use oracles::case::router::{RouterBackward, RouterCase, RouterForward};
use oracles::vocab::{ClampTie, EPS};
// The one computational leaf shared with the oracles: the correctly rounded exp
// that docs/ops/README.md#the-correctly-rounded-exp requires of every
// implementation (kernels included). It is not the oracle's formula code but a
// leaf verified on its own, exhaustively over its f32 domain against MPFR;
// writing a second correctly rounded exp here would only be a second copy to
// verify.
use oracles::expf::exp_f32;
use oracles::profile::router::RouterProfile;

/// 1e-20 as f32: added to the route-norm sum D.
const NORM_EPS: f32 = 1e-20;
/// Lanes of the warp butterfly the `norm-order` bug sums D with.
const WARP: usize = 32;

/// The kernel model of a router profile, with or without a planted bug.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterModel {
    pub profile: RouterProfile,
    pub bug: Option<RouterBug>,
}

/// The kernel loops of the profile's sums.
#[derive(Clone, Copy, Debug)]
struct Loops {
    /// D over the k chosen weights.
    norm: Sum,
    /// The route gradient's q over the k chosen.
    q: Sum,
    /// The fused loss's n_t over E.
    loss_row: Sum,
    /// The fused loss's q_t over E.
    loss_q: Sum,
}

/// One token's routing decision and weights.
struct Route {
    /// s_e over the row's E experts.
    s: Vec<f32>,
    /// The chosen experts, ascending.
    ids: Vec<usize>,
    /// The gathered weights before normalisation (w0 of the backward).
    w0: Vec<f32>,
    /// D = (sum of w0) + 1e-20, when route_norm.
    d: f32,
    /// The final weights.
    weights: Vec<f32>,
}

impl RouterModel {
    /// The correct model of `profile`.
    pub fn new(profile: RouterProfile) -> Self {
        RouterModel { profile, bug: None }
    }

    /// A planted bug, on the serial profile.
    pub fn planted(bug: RouterBug) -> Self {
        RouterModel { profile: RouterProfile::serial(), bug: Some(bug) }
    }

    /// ids, weights, the routing map, the counts (valid tokens) and s.
    pub fn forward(&self, case: &RouterCase) -> Result<RouterForward<f32>, ModelError> {
        let loops = self.prepare(case)?;
        let logits = self.read(case);
        let (t_n, e_n, k) = (case.t, case.e, case.k);
        let mut ids = Vec::with_capacity(t_n * k);
        let mut weights = Vec::with_capacity(t_n * k);
        let mut map = vec![false; t_n * e_n];
        let mut counts = vec![0u32; e_n];
        let mut scores = Vec::with_capacity(t_n * e_n);
        for t in 0..t_n {
            let route = self.route(&logits, case, t, loops);
            let counted = self.counted(case, t);
            for &e in &route.ids {
                ids.push(e as u32);
                map[t * e_n + e] = true;
                if counted {
                    counts[e] += 1;
                }
            }
            weights.extend_from_slice(&route.weights);
            scores.extend_from_slice(&route.s);
        }
        Ok(RouterForward { ids, weights, map, counts, scores })
    }

    /// The gradient of the logits (T x E) from gw and, when the case has
    /// one, the fused loss.
    pub fn backward(&self, case: &RouterCase) -> Result<RouterBackward<f32>, ModelError> {
        let loops = self.prepare(case)?;
        let logits = self.read(case);
        let (t_n, e_n, k) = (case.t, case.e, case.k);
        let routes: Vec<Route> = (0..t_n).map(|t| self.route(&logits, case, t, loops)).collect();
        // The fused loss's a_e = g * f_e, f_e = (c_e / max(C, eps)) * E from
        // the counts of this router's map over the counted tokens.
        let loss_a: Option<Vec<f32>> = case.loss.map(|loss| {
            let mut counts = vec![0u32; e_n];
            let mut total = 0u64;
            for (t, r) in routes.iter().enumerate() {
                if self.counted(case, t) {
                    for &e in &r.ids {
                        counts[e] += 1;
                    }
                    total += r.ids.len() as u64;
                }
            }
            // C <= T x k <= 2^24 (validated): exact in f32.
            let denom = if total == 0 { EPS } else { total as f32 };
            let experts = e_n as f32;
            counts.iter().map(|&c| loss.g * ((c as f32 / denom) * experts)).collect()
        });
        let mut grad = vec![0.0f32; t_n * e_n];
        for (t, route) in routes.iter().enumerate() {
            let s = &route.s;
            // The route part r_j of each chosen expert.
            let gw = &case.gw[t * k..(t + 1) * k];
            let r: Vec<f32> = if case.route_norm {
                let a: Vec<f32> = gw.iter().map(|&g| case.route_scale * g).collect();
                let d = route.d;
                let q = loops.q.sum(k, |j| Some(-(a[j] * ((route.w0[j] / d) / d))));
                a.iter().map(|&a_j| a_j / d + q).collect()
            } else {
                gw.iter().map(|&g| case.route_scale * g).collect()
            };
            // The fused loss part l_te (+0.0 without a loss, and on
            // padding tokens).
            let mut l = vec![0.0f32; e_n];
            if let (Some(loss), Some(a)) = (&case.loss, &loss_a) {
                if self.counted(case, t) {
                    let n = loops.loss_row.sum(e_n, |e| Some(s[e].abs()));
                    // max(n, eps) with NaN propagating: eps only where n < eps.
                    let d = if n < EPS { EPS } else { n };
                    let gate = match loss.clamp_tie {
                        ClampTie::Strict => n > EPS,
                        ClampTie::Inclusive => n >= EPS,
                    };
                    let q = loops.loss_q.sum(e_n, |e| Some(-(a[e] * ((s[e] / d) / d))));
                    let open = if gate { q } else { 0.0 };
                    for (e, l_e) in l.iter_mut().enumerate() {
                        *l_e = a[e] / d + sign_factor(s[e]) * open;
                    }
                }
            }
            // gs_te = chosen ? r_j + l_te : l_te; then the sigmoid's derivative.
            let mut slot: Vec<Option<usize>> = vec![None; e_n];
            for (j, &e) in route.ids.iter().enumerate() {
                slot[e] = Some(j);
            }
            let gs: Vec<f32> = (0..e_n)
                .map(|e| match slot[e] {
                    Some(j) => r[j] + l[e],
                    None => l[e],
                })
                .collect();
            for (e, g) in grad[t * e_n..(t + 1) * e_n].iter_mut().enumerate() {
                *g = if self.has(RouterBug::SigmoidGradAssoc) {
                    (s[e] * (1.0 - s[e])) * gs[e]
                } else {
                    (gs[e] * (1.0 - s[e])) * s[e]
                };
            }
        }
        Ok(RouterBackward { grad })
    }

    fn has(&self, bug: RouterBug) -> bool {
        self.bug == Some(bug)
    }

    /// Validates the case and the profile (shared validation) and finds the
    /// kernel loop of each order the router runs (D, q, and the fused
    /// loss's n_t and q_t), refusing any order the model does not implement.
    fn prepare(&self, case: &RouterCase) -> Result<Loops, ModelError> {
        case.validate().map_err(|e| ModelError::Invalid(e.to_string()))?;
        self.profile.validate().map_err(|e| ModelError::Invalid(format!("invalid profile: {e}")))?;
        let p = &self.profile;
        let of = |order, what: &str| Sum::of(order, &format!("{what} (router profile {})", p.name));
        Ok(Loops {
            norm: of(&p.norm, "the route-norm sum D")?,
            q: of(&p.q, "the route gradient's q")?,
            loss_row: of(&p.loss.row, "the fused loss's n_t")?,
            loss_q: of(&p.loss.q, "the fused loss's q_t")?,
        })
    }

    /// The logits as they lie in device memory: poison in the gaps, rows at
    /// the real offset and stride.
    fn read(&self, case: &RouterCase) -> Strided {
        Strided { buf: case.storage(f32::from_bits(POISON)), base: case.layout.offset, stride: case.layout.row_stride }
    }

    /// Whether token t counts (in the counts and the fused loss): valid
    /// tokens only.
    fn counted(&self, case: &RouterCase, t: usize) -> bool {
        !case.is_padding(t) || self.has(RouterBug::PaddingCounted)
    }

    /// s = 1 / (1 + exp(-x)), each operation rounded.
    fn sigmoid(&self, x: f32) -> f32 {
        let e = if self.has(RouterBug::FastExp) { fast_exp(-x) } else { exp_f32(-x) };
        1.0 / (1.0 + e)
    }

    /// Token t's routing: sigmoid, biased scores, group scores, kept groups,
    /// chosen experts, weights.
    fn route(&self, logits: &Strided, case: &RouterCase, t: usize, loops: Loops) -> Route {
        let e_n = case.e;
        let size = case.group_size();
        let scan = if self.has(RouterBug::TiesHigh) { Scan::Descending } else { Scan::Ascending };
        let s: Vec<f32> = (0..e_n).map(|e| self.sigmoid(logits.at(t, e))).collect();
        let u: Vec<f32> = (0..e_n).map(|e| s[e] + case.bias[e]).collect();
        let group_score: Vec<f32> = u
            .chunks(size)
            .map(|g| {
                let (a, b) = top_two(g, scan);
                if self.has(RouterBug::GroupTop1) {
                    a
                } else {
                    a + b
                }
            })
            .collect();
        let kept = pick_top(case.groups, case.topk_groups, scan, |j| Some(group_score[j]));
        let chosen = pick_top(e_n, case.k, scan, |e| kept[e / size].then_some(u[e]));
        let ids: Vec<usize> = (0..e_n).filter(|&e| chosen[e]).collect();
        let w0: Vec<f32> = ids.iter().map(|&e| if self.has(RouterBug::BiasInWeights) { u[e] } else { s[e] }).collect();
        let scale = case.route_scale;
        let (d, weights) = if case.route_norm {
            let order = match (self.has(RouterBug::NormOrder), loops.norm) {
                (false, order) => order,
                (true, Sum::Serial) => Sum::Warp { lanes: WARP },
                (true, _) => Sum::Serial,
            };
            let sum = order.sum(ids.len(), |j| Some(w0[j]));
            let d = if self.has(RouterBug::NormWithoutEps) { sum } else { sum + NORM_EPS };
            let w = w0
                .iter()
                .map(|&w| if self.has(RouterBug::ScaleBeforeNorm) { (w * scale) / d } else { (w / d) * scale })
                .collect();
            (d, w)
        } else {
            (1.0, w0.iter().map(|&w| w * scale).collect())
        };
        Route { s, ids, w0, d, weights }
    }
}

/// CUDA's `__expf(x)`: `ex2.approx.ftz.f32` of `x * log2(e)`, the product
/// rounded to f32 first (its rounding error, up to |x| 2^-24 in the
/// exponent, is amplified by the exp), then a 2^t good to about 22 bits.
/// Emulated as 2^t (t the rounded product) evaluated in f64, truncated to 22
/// significant bits, subnormal results flushed to +0.0. Wrong by an ulp or
/// more on most inputs; that is the point of the `fast-exp` bug.
pub(crate) fn fast_exp(x: f32) -> f32 {
    let t = x * std::f32::consts::LOG2_E;
    if t.is_nan() {
        return f32::NAN;
    }
    let v = (t as f64).exp2();
    if v < f32::MIN_POSITIVE as f64 {
        return 0.0;
    }
    if v.is_infinite() {
        return f32::INFINITY;
    }
    // Keep 21 fraction bits of the f64's 52 (22 significant bits): exact as
    // an f32 below 2^128, +inf past it.
    let kept = f64::from_bits(v.to_bits() & !((1u64 << (52 - 21)) - 1));
    kept as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_is_wrong_on_most_inputs_and_right_at_the_edges() {
        // exp_f32 is the correctly rounded reference (the allowed leaf).
        let mut wrong = 0;
        let n = 2000;
        for i in 0..n {
            let x = -20.0 + 40.0 * (i as f32 + 0.37) / n as f32;
            let (fast, exact) = (fast_exp(x), exp_f32(x));
            let ulps = (fast.to_bits() as i64 - exact.to_bits() as i64).abs();
            assert!(ulps <= 64, "x = {x}: {ulps} ulps");
            wrong += (ulps >= 1) as usize;
        }
        assert!(wrong * 2 > n, "only {wrong} of {n} inputs off by an ulp or more");
        assert_eq!(fast_exp(0.0), 1.0);
        assert_eq!(fast_exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(fast_exp(f32::NEG_INFINITY).to_bits(), 0);
        assert!(fast_exp(f32::NAN).is_nan());
        assert_eq!(fast_exp(-100.0).to_bits(), 0, "subnormal results flushed");
        assert_eq!(fast_exp(100.0), f32::INFINITY);
    }
}
