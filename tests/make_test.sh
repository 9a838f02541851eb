#!/usr/bin/env bash
# `make test`: every step, then every test of every binary (`cargo test --no-fail-fast`), each
# run even when an earlier one failed, so one failure never hides the rest.
#
#   tests/make_test.sh STEP... [-- INSTALL...]
#
# STEPs (make targets: lint) run in order. INSTALLs (make targets that install what the tests
# drive: pip, npm, apt) run one after another in the background, alongside the STEPs and the
# test build (network and disk beside compilation), each into target/install-NAME.log, shown
# when the build is done; the tests start after the last install. When an install may need
# a password (not root, and sudo asks for one), the installs run first, in the foreground.
# The last line sums everything up:
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
steps=()
installs=()
while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
        shift
        installs=("$@")
        break
    fi
    steps+=("$1")
    shift
done
# A checkout's first build has no incremental state to reuse, and building that state costs
# our three large crates (the library, its unit tests, the test crate) about half again as
# much CPU: the first `make test` of a checkout builds without it (decision 045). Later runs
# find target/debug and build incrementally (the first of them rebuilds our crates once,
# then an edit costs seconds).
if [ ! -d "${CARGO_TARGET_DIR:-target}/debug" ] && [ -z "${CARGO_INCREMENTAL:-}" ]; then
    export CARGO_INCREMENTAL=0
fi
mkdir -p target

# Each install into its own log; the names of those that failed into target/install-failed.
run_installs() {
    local step
    for step in "$@"; do
        "$make" --no-print-directory "$step" >"target/install-$step.log" 2>&1 \
            || echo "$step" >>target/install-failed
    done
}
rm -f target/install-failed
installs_pid=
if [ ${#installs[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then
        echo "installing in the background: ${installs[*]}" >&2
        run_installs "${installs[@]}" &
        installs_pid=$!
    else
        steps=("${installs[@]}" "${steps[@]}")
    fi
fi

for step in "${steps[@]}"; do
    "$make" --no-print-directory "$step" || failed_steps+=("$step")
done

"$cargo" test --no-run 2>&1 | tee "$log"
if [ -n "$installs_pid" ]; then
    wait "$installs_pid"
    for step in "${installs[@]}"; do
        if [ -s "target/install-$step.log" ]; then
            echo "--- make $step (target/install-$step.log)"
            cat "target/install-$step.log"
        fi
    done
    if [ -f target/install-failed ]; then
        while read -r step; do failed_steps+=("$step"); done <target/install-failed
    fi
fi

"$cargo" test --no-fail-fast 2>&1 | tee -a "$log"
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
