//! The kernel model of `moe_combine` (docs/ops/moe_combine.md), written as
//! kernels/moe_combine.cu computes it: the slots from per-expert counters
//! (each choice's rank among its expert's choices in walk order, the
//! counts capped, their exclusive scan, then rank plus offset), x_disp
//! copied from x's strided storage, every sum one thread's loop (the
//! profile's order over the listed kept choices for y and dx, over h for
//! dw), x, dy, x_exp and g_disp read from their real storage (poison in the
//! gaps, and past the end), and y rounded to bf16 on its f32 bits where the
//! profile says so. It shares with the oracles the case, profile and output
//! types and their validation; nothing else (the dispatch above is its own).
//!
//! Without a bug it computes every shipped profile bit for bit (any NaN
//! matching any NaN); with a [`MoeCombineBug`] it makes that one mistake.

use super::{ModelError, Strided, Sum, POISON};
use crate::planted::moe_combine::MoeCombineBug;
use oracles::case::moe_combine::{MoeCombineBackward, MoeCombineCase, MoeCombineForward};
use oracles::profile::moe_combine::{MoeCombineProfile, TermOrder};

/// Lanes of the warp butterfly the `dw-order` bug sums dw with.
const WARP: usize = 32;

/// The kernel model of a profile, with or without a planted bug.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeCombineModel {
    pub profile: MoeCombineProfile,
    pub bug: Option<MoeCombineBug>,
}

/// The kernel loops of the profile's two orders.
#[derive(Clone, Copy, Debug)]
struct Loops {
    /// Over a token's listed kept choices (y, dx).
    combine: Sum,
    /// Over h (dw).
    dw: Sum,
}

/// The model's slots: what the three dispatch kernels leave behind.
struct Slots {
    /// T x k: the slot of each choice, -1 where it has none.
    slot: Vec<i32>,
    /// E: the slots each expert uses.
    counts: Vec<u32>,
    /// N_slots: the flat choice t k + j that owns each slot.
    src: Vec<usize>,
    /// T x k: for a choice the capacity dropped, its expert's last kept
    /// slot (what a clamped index reads); `None` elsewhere.
    clamped: Vec<Option<usize>>,
}

/// bf16 round-to-nearest-even on the f32 bits, as `__float2bfloat16_rn`
/// does: add 0x7fff plus the kept half's lowest bit (a tie goes to the even
/// kept half), drop the low 16 bits; the carry rounds past the largest
/// bf16 to infinity. A NaN stays a NaN (the add could carry a NaN whose
/// payload lies in the low half into an infinity).
fn to_bf16(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000)
}

/// A row-major matrix read from its storage: element (r, i) at `base + r
/// stride + i`; anything past the storage reads as the poison NaN (as a
/// guard zone would), so a wrong index poisons its output instead of
/// stopping the model.
fn at(m: &Strided, r: usize, i: usize) -> f32 {
    m.buf.get(m.base + r * m.stride + i).copied().unwrap_or(f32::from_bits(POISON))
}

impl MoeCombineModel {
    /// The correct model of `profile`.
    pub fn new(profile: MoeCombineProfile) -> Self {
        MoeCombineModel { profile, bug: None }
    }

    /// A planted bug, on the serial profile.
    pub fn planted(bug: MoeCombineBug) -> Self {
        MoeCombineModel { profile: MoeCombineProfile::serial(), bug: Some(bug) }
    }

    fn has(&self, bug: MoeCombineBug) -> bool {
        self.bug == Some(bug)
    }

    /// Validates the case and the profile (shared validation) and finds the
    /// kernel loop of each order, refusing any the model does not implement.
    fn prepare(&self, case: &MoeCombineCase) -> Result<Loops, ModelError> {
        case.validate().map_err(|e| ModelError::Invalid(e.to_string()))?;
        let p = &self.profile;
        p.validate().map_err(|e| ModelError::Invalid(format!("invalid profile: {e}")))?;
        let of = |order, what: &str| Sum::of(order, &format!("{what} (moe_combine profile {})", p.name));
        Ok(Loops { combine: of(&p.combine, "the combine over the kept choices")?, dw: of(&p.dw, "dw over h")? })
    }

    /// A strided input as the kernels read it.
    fn storage(buf: Vec<f32>, case: &MoeCombineCase) -> Strided {
        Strided { buf, base: case.layout.offset, stride: case.layout.row_stride }
    }

    /// The slots, as the dispatch kernels compute them: each valid choice's
    /// rank among its expert's choices in walk order (tokens ascending,
    /// then choices; the `choice-major-slots` bug walks choices first),
    /// the counts (the ranks below the capacity), their exclusive scan, and
    /// each kept choice's slot, its expert's offset plus its rank.
    fn slots(&self, case: &MoeCombineCase) -> Slots {
        let (t_n, k, e_n) = (case.t, case.k, case.e);
        let skipped =
            |t: usize| !self.has(MoeCombineBug::PaddingDispatched) && case.padding.as_ref().is_some_and(|p| p[t]);
        let mut seen = vec![0usize; e_n];
        let mut rank: Vec<Option<usize>> = vec![None; t_n * k];
        let walk: Vec<(usize, usize)> = if self.has(MoeCombineBug::ChoiceMajorSlots) {
            (0..k).flat_map(|j| (0..t_n).map(move |t| (t, j))).collect()
        } else {
            (0..t_n).flat_map(|t| (0..k).map(move |j| (t, j))).collect()
        };
        for (t, j) in walk {
            if skipped(t) {
                continue;
            }
            let e = case.ids[t * k + j] as usize;
            rank[t * k + j] = Some(seen[e]);
            seen[e] += 1;
        }
        // The first `limit` ranks of an expert are kept.
        let limit = match case.capacity {
            None => usize::MAX,
            Some(c) if self.has(MoeCombineBug::CapacityOffByOne) => c.saturating_add(1),
            Some(c) => c,
        };
        let counts: Vec<u32> = seen.iter().map(|&n| n.min(limit) as u32).collect();
        let mut offsets = Vec::with_capacity(e_n);
        let mut total = 0usize;
        for &c in &counts {
            offsets.push(total);
            total += c as usize;
        }
        let mut slot = vec![-1i32; t_n * k];
        let mut src = vec![0usize; total];
        let mut clamped = vec![None; t_n * k];
        for (i, r) in rank.iter().enumerate() {
            let Some(r) = *r else { continue };
            let e = case.ids[i] as usize;
            if r < limit {
                let s = offsets[e] + r;
                slot[i] = s as i32;
                src[s] = i;
            } else if counts[e] > 0 {
                clamped[i] = Some(offsets[e] + counts[e] as usize - 1);
            }
        }
        Slots { slot, counts, src, clamped }
    }

    /// Token t's kept choices as (j, slot), in the order its sums add them:
    /// ascending j, or ascending slot (`by-slot`); the `atomic-order` bug
    /// takes the slots descending.
    fn terms(&self, sl: &Slots, k: usize, t: usize) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> =
            (0..k).filter_map(|j| usize::try_from(sl.slot[t * k + j]).ok().map(|s| (j, s))).collect();
        if self.has(MoeCombineBug::AtomicOrder) {
            v.sort_by_key(|&(_, s)| std::cmp::Reverse(s));
        } else if self.profile.terms == TermOrder::BySlot {
            v.sort_by_key(|&(_, s)| s);
        }
        v
    }

    /// slot, counts, x_disp and y.
    pub fn forward(&self, case: &MoeCombineCase) -> Result<MoeCombineForward<f32>, ModelError> {
        let loops = self.prepare(case)?;
        let sl = self.slots(case);
        let (h, k) = (case.h, case.k);
        let gap = f32::from_bits(POISON);
        let x = Self::storage(case.x_storage(gap), case);
        let x_exp = Self::storage(case.x_exp_storage(gap), case);
        let mut x_disp = Vec::with_capacity(sl.src.len() * h);
        for &i in &sl.src {
            x_disp.extend((0..h).map(|c| at(&x, i / k, c)));
        }
        let mut y = Vec::with_capacity(case.t * h);
        for t in 0..case.t {
            let terms = self.terms(&sl, k, t);
            for c in 0..h {
                let product = |(j, s): (usize, usize)| (case.weights[t * k + j], at(&x_exp, s, c));
                let acc = if self.has(MoeCombineBug::Fma) {
                    terms.iter().fold(0.0f32, |acc, &p| {
                        let (w, v) = product(p);
                        w.mul_add(v, acc)
                    })
                } else {
                    loops.combine.sum(terms.len(), |m| {
                        let (w, v) = product(terms[m]);
                        Some(w * v)
                    })
                };
                y.push(if self.profile.bf16_out { to_bf16(acc) } else { acc });
            }
        }
        Ok(MoeCombineForward { slot: sl.slot, counts: sl.counts, x_disp, y })
    }

    /// dx_exp, dw and dx.
    pub fn backward(&self, case: &MoeCombineCase) -> Result<MoeCombineBackward<f32>, ModelError> {
        let loops = self.prepare(case)?;
        let sl = self.slots(case);
        let (h, k) = (case.h, case.k);
        let gap = f32::from_bits(POISON);
        let dy = Self::storage(case.dy_storage(gap), case);
        let x_exp = Self::storage(case.x_exp_storage(gap), case);
        let g_disp = Self::storage(case.g_disp_storage(gap), case);
        let mut dx_exp = Vec::with_capacity(sl.src.len() * h);
        for &i in &sl.src {
            let w = case.weights[i];
            dx_exp.extend((0..h).map(|c| w * at(&dy, i / k, c)));
        }
        let dw_loop = match (self.has(MoeCombineBug::DwOrder), loops.dw) {
            (false, order) => order,
            (true, Sum::Serial) => Sum::Warp { lanes: WARP },
            (true, _) => Sum::Serial,
        };
        let mut dw = Vec::with_capacity(case.t * k);
        let mut dx = Vec::with_capacity(case.t * h);
        for t in 0..case.t {
            for j in 0..k {
                let i = t * k + j;
                let row = match usize::try_from(sl.slot[i]) {
                    Ok(s) => Some(s),
                    Err(_) if self.has(MoeCombineBug::DroppedGrad) => sl.clamped[i],
                    Err(_) => None,
                };
                dw.push(match row {
                    Some(s) => dw_loop.sum(h, |c| Some(at(&dy, t, c) * at(&x_exp, s, c))),
                    None => 0.0,
                });
            }
            let terms = self.terms(&sl, k, t);
            for c in 0..h {
                dx.push(loops.combine.sum(terms.len(), |m| Some(at(&g_disp, terms[m].1, c))));
            }
        }
        Ok(MoeCombineBackward { dx_exp, dw, dx })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracles::case::Layout;

    fn one_token(ids: Vec<u32>, x_exp: Vec<f32>) -> MoeCombineCase {
        let k = ids.len();
        MoeCombineCase {
            t: 1,
            h: 1,
            e: k,
            k,
            capacity: None,
            layout: Layout::dense(1),
            ids,
            weights: vec![1.0; k],
            padding: None,
            x: vec![1.0],
            x_exp,
            dy: vec![1.0],
            g_disp: vec![1.0; k],
        }
    }

    /// Ids ascending, terms 2^-24, 2^-24, 1: in j order 1 + 2^-23; slots
    /// descending add the 1 first and lose both small terms.
    #[test]
    fn atomic_order_adds_the_slots_descending() {
        let tiny = 2f32.powi(-24);
        let c = one_token(vec![0, 1, 2], vec![tiny, tiny, 1.0]);
        assert_eq!(MoeCombineModel::new(MoeCombineProfile::serial()).forward(&c).unwrap().y, vec![1.0 + f32::EPSILON]);
        assert_eq!(MoeCombineModel::planted(MoeCombineBug::AtomicOrder).forward(&c).unwrap().y, vec![1.0]);
        // by-slot: ascending slots, here the j order.
        assert_eq!(MoeCombineModel::new(MoeCombineProfile::by_slot()).forward(&c).unwrap().y, vec![1.0 + f32::EPSILON]);
    }

    #[test]
    fn bf16_rounding_goes_to_even_on_ties_and_keeps_nan() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even, 1.
        assert_eq!(to_bf16(1.0 + 2f32.powi(-8)), 1.0);
        // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
        assert_eq!(to_bf16(1.0 + 3.0 * 2f32.powi(-8)), 1.0 + 2f32.powi(-6));
        assert_eq!(to_bf16(1.0 + 2f32.powi(-8) + 2f32.powi(-20)), 1.0 + 2f32.powi(-7));
        assert_eq!(to_bf16(f32::MAX), f32::INFINITY);
        assert!(to_bf16(f32::from_bits(0x7f80_0001)).is_nan());
        assert_eq!(to_bf16(-0.0).to_bits(), 0x8000_0000);
    }

    #[test]
    fn reads_past_the_storage_are_poison() {
        let m = Strided { buf: vec![1.0, 2.0], base: 1, stride: 1 };
        assert_eq!(at(&m, 0, 0), 2.0);
        assert_eq!(at(&m, 1, 0).to_bits(), POISON);
        let c = one_token(vec![0], vec![1.0]);
        let bad = MoeCombineCase { x_exp: vec![], ..c.clone() };
        assert!(matches!(MoeCombineModel::new(MoeCombineProfile::serial()).forward(&bad), Err(ModelError::Invalid(_))));
        let any = MoeCombineModel::new(MoeCombineProfile::any_order());
        assert!(matches!(any.forward(&c), Err(ModelError::Unsupported(_))));
    }
}
