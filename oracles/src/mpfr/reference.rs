//! What a result is judged against, for any [`Op`]: the exact result (Ziv's
//! loop over the whole computation) on the profile's decisions, and the
//! profile's own rigorous bound (the profile run on [`Bounded`]).

use super::{correctly_rounded, with_precision, Exact, Verdict, MAX_PREC, START_PREC};
use crate::num::Bounded;
use crate::op::{Group, Op, Run, Values};

/// An exact result, the precision it took, and how many real outputs'
/// correct f32 rounding stayed undetermined at [`MAX_PREC`] (reported,
/// never guessed).
#[derive(Clone, Debug)]
pub struct ExactResult<T> {
    pub out: T,
    /// Rows where the exact values would have decided otherwise than the
    /// imposed decisions (`decision-near-tie`).
    pub near_ties: usize,
    pub prec: u32,
    pub undetermined: usize,
}

/// The real values of some output groups.
fn reals<'a, N>(groups: &'a [Group<'a, N>]) -> impl Iterator<Item = &'a N> + 'a {
    groups.iter().flat_map(|g| match &g.values {
        Values::Real(v) => v.iter(),
        Values::Int(_) => [].iter(),
    })
}

/// Ziv's loop over a whole computation: double the precision until every
/// real output's f32 rounding is settled (see the module docs of [`super`]).
fn ziv<T, D, E>(
    compute: impl Fn() -> Result<Run<T, D>, E>,
    groups: impl for<'a> Fn(&'a T) -> Vec<Group<'a, Exact>>,
) -> Result<ExactResult<T>, E> {
    let mut prec = START_PREC;
    loop {
        let run = with_precision(prec, &compute)?;
        let undetermined = reals(&groups(&run.out)).filter(|x| correctly_rounded(x).is_none()).count();
        if undetermined == 0 || prec >= MAX_PREC {
            return Ok(ExactResult { out: run.out, near_ties: run.near_ties, prec, undetermined });
        }
        prec *= 2;
    }
}

/// The exact forward on `imposed` decisions (those of the profile being
/// judged, SPEC section 2), or on the exact ones.
pub fn exact_forward<O: Op>(
    case: &O::Case,
    imposed: Option<&O::Decisions>,
) -> Result<ExactResult<O::Fwd<Exact>>, O::Error> {
    let p = O::exact_profile();
    ziv(|| O::forward_on::<Exact>(case, &p, imposed), |f| O::fwd_groups(case, f))
}

/// The exact backward (see [`exact_forward`]).
pub fn exact_backward<O: Op>(
    case: &O::Case,
    imposed: Option<&O::Decisions>,
) -> Result<ExactResult<O::Bwd<Exact>>, O::Error> {
    let p = O::exact_profile();
    ziv(|| O::backward_on::<Exact>(case, &p, imposed), |b| O::bwd_groups(case, b))
}

/// Accuracy of a result: how many outputs were judged, which were outside
/// their bound, how many had no finite bound or no settled exact rounding,
/// and the worst |error| / bound.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accuracy {
    pub judged: usize,
    pub outside: Vec<String>,
    pub unbounded: usize,
    pub worst_ratio: f64,
    pub near_ties: usize,
    pub undetermined: usize,
}

impl Accuracy {
    fn add(&mut self, what: impl FnOnce() -> String, computed: f32, bound: f64, exact: &Exact) {
        self.judged += 1;
        match super::judge(computed, bound, exact) {
            Verdict::Within { ratio } => self.worst_ratio = self.worst_ratio.max(ratio),
            Verdict::Outside { ratio } => {
                self.worst_ratio = self.worst_ratio.max(ratio);
                self.outside.push(format!(
                    "{}: computed {:e}, exact {:e}, bound {:e}",
                    what(),
                    computed,
                    exact.v.to_f64(),
                    bound
                ));
            }
            Verdict::Unbounded => self.unbounded += 1,
        }
    }

    /// Judges `computed` group by group: integers must equal the exact ones,
    /// every real output must lie within its bound (from `bounded`) of the
    /// exact value.
    pub fn of(computed: &[Group<f32>], bounded: &[Group<Bounded>], exact: &[Group<Exact>]) -> Self {
        let mut acc = Accuracy::default();
        for ((c, b), x) in computed.iter().zip(bounded).zip(exact) {
            match (&c.values, &b.values, &x.values) {
                (Values::Int(ci), _, Values::Int(xi)) => {
                    if ci != xi {
                        acc.outside.push(format!("{} {:?} != exact {:?}", c.name, ci, xi));
                    }
                }
                (Values::Real(cv), Values::Real(bv), Values::Real(xv)) => {
                    if cv.len() != xv.len() || bv.len() != xv.len() {
                        acc.outside.push(format!("{}: {} values, expected {}", c.name, cv.len(), xv.len()));
                        continue;
                    }
                    for (i, ((cv, bv), xv)) in cv.iter().zip(bv.iter()).zip(xv.iter()).enumerate() {
                        acc.add(|| c.label(i), *cv, bv.err, xv);
                    }
                }
                _ => acc.outside.push(format!("{}: not the kind of output the op defines", c.name)),
            }
        }
        if computed.len() != exact.len() {
            acc.outside.push(format!("{} output groups, expected {}", computed.len(), exact.len()));
        }
        acc
    }
}

/// The profile's forward with its running bound, and the exact forward on
/// the profile's decisions: what a subject claiming that profile is judged
/// against for accuracy.
pub struct ForwardReference<O: Op> {
    pub bounded: Run<O::Fwd<Bounded>, O::Decisions>,
    pub exact: ExactResult<O::Fwd<Exact>>,
}

impl<O: Op> ForwardReference<O> {
    pub fn new(case: &O::Case, profile: &O::Profile) -> Result<Self, O::Error> {
        let bounded = O::forward_on::<Bounded>(case, profile, None)?;
        let exact = exact_forward::<O>(case, Some(&bounded.decisions))?;
        Ok(ForwardReference { bounded, exact })
    }

    /// Every forward output of `computed` within the profile's bound of the
    /// exact forward; integer outputs equal.
    pub fn judge(&self, case: &O::Case, computed: &O::Fwd<f32>) -> Accuracy {
        let mut acc = Accuracy::of(
            &O::fwd_groups(case, computed),
            &O::fwd_groups(case, &self.bounded.out),
            &O::fwd_groups(case, &self.exact.out),
        );
        acc.near_ties = self.exact.near_ties;
        acc.undetermined = self.exact.undetermined;
        acc
    }
}

/// The backward counterpart of [`ForwardReference`].
pub struct BackwardReference<O: Op> {
    pub bounded: Run<O::Bwd<Bounded>, O::Decisions>,
    pub exact: ExactResult<O::Bwd<Exact>>,
}

impl<O: Op> BackwardReference<O> {
    pub fn new(case: &O::Case, profile: &O::Profile) -> Result<Self, O::Error> {
        let bounded = O::backward_on::<Bounded>(case, profile, None)?;
        let exact = exact_backward::<O>(case, Some(&bounded.decisions))?;
        Ok(BackwardReference { bounded, exact })
    }

    /// Every backward output of `computed` within the profile's bound of the
    /// exact backward.
    pub fn judge(&self, case: &O::Case, computed: &O::Bwd<f32>) -> Accuracy {
        let mut acc = Accuracy::of(
            &O::bwd_groups(case, computed),
            &O::bwd_groups(case, &self.bounded.out),
            &O::bwd_groups(case, &self.exact.out),
        );
        acc.near_ties = self.exact.near_ties;
        acc.undetermined = self.exact.undetermined;
        acc
    }
}
