#!/usr/bin/env bash
# The day's combined kill matrix (combined.{json,md,html}) from every run's
# --json report, judged with the triage built into the binary. Run from this
# folder: bash combine.sh [BITPARITY]
set -eu
B=${1:-bitparity}
runs="seqwise-shared.json shared.json router-sample.json headers-sample.json
  seqwise-3.json shared-3.json headers-3.json router-3.json rerun-4/rerun-4.json guards-7/guards-7.json
  survivors-8/other-race.json survivors-8/seqwise-race.json survivors-9/seqwise-ref.json
  survivors-9/shared.json survivors-9/seqwise-mem.json run-10/seqwise.json run-10/router.json
  run-11/seqwise.json run-11/race.json run-11/router.json run-12/router.json run-12/memcheck.json
  run-13/surv.json run-13/sample.json run-14/race.json run-14/mem.json run-14/surv.json run-14/sample.json
  run-15/sample.json run-16/mem.json run-16/grouped.json run-16/long.json
  ../mutants-2026-12-02/run-17/r/rare.json ../mutants-2026-12-02/run-17/r/mem.json
  ../mutants-2026-12-02/run-17/r/race.json ../mutants-2026-12-02/run-17/r/sample.json
  ../mutants-2026-12-02/run-18/r/rare.json ../mutants-2026-12-02/run-18/r/sample.json
  ../mutants-2026-12-02/run-19/r/rare.json ../mutants-2026-12-02/run-19/r/long.json
  ../mutants-2026-12-02/run-19/r/mem.json ../mutants-2026-12-02/run-19/r/sample.json
  ../mutants-2026-12-02/run-19/r/headers.json ../mutants-2026-12-02/run-20/r/tc.json
  ../mutants-2026-12-02/run-20/r/router.json ../mutants-2026-12-02/run-21/r/headers.json
  ../mutants-2026-12-02/run-21/r/tc-long.json ../mutants-2026-12-02/run-22/r/mem.json
  ../mutants-2026-12-02/run-22/r/race.json ../mutants-2026-12-02/run-22/r/frag.json
  ../mutants-2026-12-02/run-22/r/headers.json ../mutants-2026-12-02/run-22/r/gzero.json
  ../mutants-2026-12-02/run-23/r/hang.json ../mutants-2026-12-02/run-23/r/corpus.json
  ../mutants-2026-12-02/run-24/r/hang.json ../mutants-2026-12-02/run-25/r/ref.json"
# Left out: run-22/r/ref.json. Its two mutants timed out at tier B's
# reference shapes because conformance runs the CPU's MMA model on those
# shapes (minutes a case), not because the kernels hung: no verdict.
"$B" mutants $(for f in $runs; do echo --from "$f"; done) --json combined.json --markdown combined.md --html combined.html
