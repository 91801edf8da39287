//! The one shrinker, for every op: greedy descent over the op's
//! [`Harness::shrink_candidates`], and the same candidates as a proptest
//! `Strategy`/`ValueTree` for `cargo test` suites.

use crate::gen::GenConfig;
use crate::harness::Harness;
use proptest::strategy::{NewTree, Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use std::marker::PhantomData;

/// Candidates tried when shrinking one failure (each costs one judgement).
pub const BUDGET: usize = 20_000;

/// Greedy shrinking: repeatedly take the first candidate that still fails,
/// until none does or `budget` candidates were tried.
pub fn shrink<O: Harness>(case: &O::Case, mut fails: impl FnMut(&O::Case) -> bool, budget: usize) -> O::Case {
    let mut current = case.clone();
    let mut tried = 0;
    'outer: loop {
        for cand in O::shrink_candidates(&current) {
            if tried >= budget {
                break 'outer;
            }
            tried += 1;
            if fails(&cand) {
                current = cand;
                continue 'outer;
            }
        }
        break;
    }
    current
}

/// A proptest strategy for an op's adversarial cases.
pub struct CaseStrategy<O>(pub GenConfig, PhantomData<O>);

impl<O> CaseStrategy<O> {
    pub fn new(cfg: GenConfig) -> Self {
        CaseStrategy(cfg, PhantomData)
    }
}

impl<O> std::fmt::Debug for CaseStrategy<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CaseStrategy({:?})", self.0)
    }
}

impl<O: Harness> Strategy for CaseStrategy<O> {
    type Tree = CaseTree<O>;
    type Value = O::Case;
    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        Ok(CaseTree::new(O::generate(runner.rng(), &self.0)))
    }
}

/// The value tree: the last case known to fail, and the candidates of
/// [`Harness::shrink_candidates`] left to try from it.
pub struct CaseTree<O: Harness> {
    current: O::Case,
    candidates: std::vec::IntoIter<O::Case>,
    trial: Option<O::Case>,
}

impl<O: Harness> CaseTree<O> {
    pub fn new(case: O::Case) -> Self {
        let candidates = O::shrink_candidates(&case).into_iter();
        CaseTree { current: case, candidates, trial: None }
    }
    fn next_trial(&mut self) -> bool {
        self.trial = self.candidates.next();
        self.trial.is_some()
    }
}

impl<O: Harness> ValueTree for CaseTree<O> {
    type Value = O::Case;
    fn current(&self) -> O::Case {
        self.trial.clone().unwrap_or_else(|| self.current.clone())
    }
    fn simplify(&mut self) -> bool {
        // The last trial still failed: it becomes the case to shrink from.
        if let Some(t) = self.trial.take() {
            self.candidates = O::shrink_candidates(&t).into_iter();
            self.current = t;
        }
        self.next_trial()
    }
    fn complicate(&mut self) -> bool {
        // The last trial passed: drop it and try the next candidate.
        self.next_trial()
    }
}
