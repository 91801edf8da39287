//! Every fuzz target of fuzz/Cargo.toml on its checked-in seed corpus and on
//! a fixed, seeded set of mutations of it, in-process and without libFuzzer:
//! the cheap half of fuzzing that `cargo test` can afford on every change.
//! The long coverage-guided runs are `scripts/fuzz-ci` (ci/cpu-nightly); both
//! call the same checks (`bitparity::fuzzing`), so a seed or an artifact that
//! crashes a target fails here too.

use bitparity::fuzzing::files;
use bitparity::fuzzing::run_target;
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::path::Path;

/// The targets declared in fuzz/Cargo.toml, in file order.
fn targets() -> Vec<String> {
    let toml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/Cargo.toml"))
        .expect("fuzz/Cargo.toml reads");
    let mut in_bin = false;
    let mut names = Vec::new();
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && line.starts_with("name") {
            names.push(line.split('"').nth(1).expect("a quoted name").to_string());
        }
    }
    names
}

fn run(target: &str, data: &[u8]) {
    match target {
        "corpus_entry" => files::corpus_entry(data),
        "hexf" => files::hexf(data),
        "summary" => files::summary(data),
        "config" => files::config(data),
        op_target => run_target(op_target, data),
    }
}

/// The seed files of a target (none when it has no corpus folder).
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let Ok(read) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut paths: Vec<_> = read.map(|e| e.expect("a corpus entry").path()).collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).expect("a seed reads")).collect()
}

/// One of libFuzzer's simpler moves on `seed`: a byte changed, a range cut
/// out, a range of another seed spliced in, or the seed cut short.
fn mutate(rng: &mut TestRng, seed: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seed.to_vec();
    match rng.random_range(0..4) {
        0 if !v.is_empty() => {
            let i = rng.random_range(0..v.len());
            v[i] = rng.random();
        }
        1 if !v.is_empty() => {
            let a = rng.random_range(0..v.len());
            let b = rng.random_range(a..=v.len());
            v.drain(a..b);
        }
        2 if !others.is_empty() => {
            let o = &others[rng.random_range(0..others.len())];
            let a = rng.random_range(0..=o.len());
            let b = rng.random_range(a..=o.len());
            let at = rng.random_range(0..=v.len());
            v.splice(at..at, o[a..b].iter().copied());
        }
        _ => v.truncate(rng.random_range(0..=v.len())),
    }
    v
}

/// Mutations per seed, and random inputs for a target without seeds.
const MUTATIONS: usize = 12;
const RANDOM_INPUTS: usize = 24;

#[test]
fn every_fuzz_target_survives_its_seeds_and_their_mutations() {
    let names = targets();
    assert!(names.len() >= 8, "fuzz/Cargo.toml lists {names:?}");
    for (k, target) in names.iter().enumerate() {
        let seeds = seeds(target);
        // A fixed stream per target, so that a failure here reproduces.
        let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[k as u8; 32]);
        let mut inputs = seeds.clone();
        for s in &seeds {
            for _ in 0..MUTATIONS {
                inputs.push(mutate(&mut rng, s, &seeds));
            }
        }
        if seeds.is_empty() {
            for _ in 0..RANDOM_INPUTS {
                let n = rng.random_range(0..200);
                inputs.push((0..n).map(|_| rng.random::<u8>()).collect());
            }
        }
        for (i, data) in inputs.iter().enumerate() {
            let caught = std::panic::catch_unwind(|| run(target, data));
            assert!(caught.is_ok(), "fuzz target {target} panicked on input {i} (bytes {data:?})");
        }
    }
}

#[test]
fn the_file_targets_have_seed_corpora_that_exercise_them() {
    // A seed folder emptied or moved would leave the test above checking
    // random bytes only: the file targets must keep real seeds.
    for t in ["corpus_entry", "hexf"] {
        assert!(seeds(t).len() >= 10, "fuzz/corpus/{t} has too few seeds");
    }
}
