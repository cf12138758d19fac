#!/usr/bin/env bash
# The fuzz smoke run of scripts/test.sh (FUZZING.md), in one of two modes, and says which:
#   libFuzzer  nightly and cargo-fuzz are there: builds fuzz/ and runs every target for
#              FUZZ_SMOKE_SECONDS (default 20) from the committed seeds; new inputs go to a
#              temporary directory, so the tree stays clean; a crash fails the run and leaves
#              its input in fuzz/artifacts/<target>/;
#   stable     otherwise: the same target functions as seeded randomized tests over the seeds
#              (`cargo test --lib fuzzing`; they also run in every `cargo test`).
# Bounded: 9 targets × 20 s, one per CPU at a time, plus the build (a few minutes cold,
# seconds warm).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SMOKE_SECONDS:-20}
targets=()
for f in fuzz/fuzz_targets/*.rs; do
    t=${f##*/}
    targets+=("${t%.rs}")
done

if ! cargo +nightly --version >/dev/null 2>&1 || ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: mode stable (no nightly toolchain or no cargo-fuzz): ${#targets[@]} targets as seeded randomized tests"
    cargo test --locked --lib fuzzing
    exit 0
fi

echo "fuzz: mode libFuzzer ($(cargo +nightly --version)), ${#targets[@]} targets × ${seconds} s"
start=$SECONDS
# No sanitizer: the targets are safe Rust and reach no `unsafe` (init's sys module is not on
# their paths), and ASan would double the build and halve the executions. Debug assertions
# and overflow checks are on (-a).
cargo +nightly fuzz build -s none -a
echo "fuzz: built in $((SECONDS - start)) s"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# One target per CPU at a time (each libFuzzer run is one process on one core), so the
# smoke gives every target its full time in about a half of the wall time on two CPUs.
at_once=$(nproc 2>/dev/null || echo 1)
run_target() {
    local t=$1 t0=$SECONDS
    mkdir -p "$scratch/$t"
    local rc=0
    cargo +nightly fuzz run -s none -a "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 >"$scratch/$t.log" 2>&1 </dev/null ||
        rc=$?
    echo "$rc $((SECONDS - t0))" >"$scratch/$t.rc"
}
running=0
for t in "${targets[@]}"; do
    if ((running >= at_once)); then
        wait -n || true
        running=$((running - 1))
    fi
    run_target "$t" &
    running=$((running + 1))
done
wait || true
failed=0
for t in "${targets[@]}"; do
    read -r rc took <"$scratch/$t.rc"
    out=$(cat "$scratch/$t.log")
    if [[ $rc -ne 0 ]]; then
        printf '%s\n' "$out" | tail -n 40
        echo "fuzz: $t FAILED (its input is in fuzz/artifacts/$t/)" >&2
        failed=1
        continue
    fi
    runs=$(printf '%s\n' "$out" | sed -n 's/^stat::number_of_executed_units: *//p')
    cov=$(printf '%s\n' "$out" | grep -oE 'DONE +cov: [0-9]+ ft: [0-9]+' | tail -n 1 | sed 's/DONE *//')
    echo "fuzz: $t ok: ${runs:-?} runs, ${cov:-?}, corpus $(ls "$scratch/$t" | wc -l) new, $took s"
done
if ((failed)); then
    exit 1
fi
echo "fuzz: smoke done in $((SECONDS - start)) s"
