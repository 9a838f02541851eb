#!/usr/bin/env bash
# `make test`: every step named on the command line (a make target: lint, the installs),
# then every test of every binary (`cargo test --no-fail-fast`), each run even when an
# earlier one failed, so one failure never hides the rest. The last line sums them up:
#
#   N passed, N failed, N ignored
#
# followed, when something other than a test failed, by "; failed: STEP, ..." (a make
# step, or "cargo test" when a test binary crashed, whose unreported tests count as
# failed, or when it failed with no failing test counted: a build error). The exit status is
# non-zero when anything failed. cargo's output is kept in target/test-output.log.
#
# Environment: CARGO and MAKE (the Makefile passes its own); WINX_TEST_* pass through.
set -uo pipefail
cd "$(dirname "$0")/.."
cargo=${CARGO:-cargo}
make=${MAKE:-make}
log=target/test-output.log
failed_steps=()

for step in "$@"; do
    "$make" --no-print-directory "$step" || failed_steps+=("$step")
done

mkdir -p target
"$cargo" test --no-fail-fast 2>&1 | tee "$log"
cargo_status=${PIPESTATUS[0]}

# Each test binary (cargo's "Running" or "Doc-tests" line) ends with a "test result:"
# line; one that crashed has none: its tests that printed no "ok" or "ignored" failed.
summary=$(awk '
    function end_binary() {
        if (open && !reported) {
            crashed++
            passed += ok; ignored += ign
            if (planned > ok + ign) failed += planned - ok - ign
        }
        open = 0
    }
    /^ *(Running|Doc-tests) / { end_binary(); open = 1; reported = 0; planned = ok = ign = 0; next }
    /^running [0-9]+ tests?$/ { planned = $2; next }
    /^test .* \.\.\. ok$/ { ok++; next }
    /^test .* \.\.\. ignored/ { ign++; next }
    /^test result: (ok|FAILED)\. / {
        reported = 1
        for (i = 4; i < NF; i++) {
            if ($(i + 1) ~ /^passed;/) passed += $i
            else if ($(i + 1) ~ /^failed;/) failed += $i
            else if ($(i + 1) ~ /^ignored;/) ignored += $i
        }
    }
    END { end_binary(); printf "%d %d %d %d\n", passed, failed, ignored, crashed }
' "$log")
read -r passed failed ignored crashed <<<"$summary"

if [ "$crashed" -gt 0 ]; then
    failed_steps+=("cargo test ($crashed test binaries crashed)")
elif [ "$cargo_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed_steps+=("cargo test (exit status $cargo_status, no test result)")
fi
line="$passed passed, $failed failed, $ignored ignored"
if [ ${#failed_steps[@]} -gt 0 ]; then
    line+="; failed: $(printf '%s, ' "${failed_steps[@]}" | sed 's/, $//')"
fi
echo
echo "$line"
[ "$failed" -eq 0 ] && [ ${#failed_steps[@]} -eq 0 ] && [ "$cargo_status" -eq 0 ]
