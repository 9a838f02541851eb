#!/usr/bin/env bash
# A fake agent TUI for integration tests of turn recognition. It draws Claude-Code-like
# screens and changes state on cues read from stdin, one per line:
#   busy     spinner line with "esc to interrupt", redrawn every ~100 ms until the next cue
#   approve  a "Do you want to proceed?" menu with numbered options; waits
#   input    the idle input box with "? for shortcuts"; waits
#   exit     exits 0 (so does end of input)
# With TUI_LOG set, every line read is appended there with the state it arrived in.
# Any other line, in the input or approval state, is echoed as "received: <line>", shown
# busy for about a second, then the input box returns; while busy, such lines are
# ignored. It never sleeps: the spinner's
# clock is `read -t 0.1`, so a cue is handled as soon as it arrives.
set -u

frames=('·' '✢' '✳' '✶' '✻' '✽')
state=input      # input | approve | busy
ticks=0          # 100 ms ticks spent busy
left=-1          # ticks until busy ends on its own; -1 = until the next cue
received=''
partial=''       # the start of a line a tick cut short

header() {
    printf '\033[H\033[2J'
    printf '╭───────────────────────────────────────────────────╮\n'
    printf '│ ✻ Welcome to Claude Code!                         │\n'
    printf '╰───────────────────────────────────────────────────╯\n\n'
    if [ -n "$received" ]; then printf '> %s\n\n⏺ received: %s\n\n' "$received" "$received"; fi
}

input_box() {
    printf '╭──────────────────────────────────────────────────────────────────────────╮\n'
    printf '│ >                                                                        │\n'
    printf '╰──────────────────────────────────────────────────────────────────────────╯\n'
    printf '  ? for shortcuts\n'
}

draw() {
    header
    case $state in
        busy)
            printf '%s Working… (%ds · esc to interrupt)\n\n' \
                "${frames[ticks % ${#frames[@]}]}" $((ticks / 10))
            input_box ;;
        approve)
            printf '╭──────────────────────────────────────────────────────────────────────────╮\n'
            printf '│ Bash command                                                             │\n'
            printf '│                                                                          │\n'
            printf '│   make test                                                              │\n'
            printf '│                                                                          │\n'
            printf '│ Do you want to proceed?                                                  │\n'
            printf '│ ❯ 1. Yes                                                                 │\n'
            printf '│   2. Yes, and don'"'"'t ask again for make commands                          │\n'
            printf '│   3. No, and tell Claude what to do differently (esc)                    │\n'
            printf '╰──────────────────────────────────────────────────────────────────────────╯\n' ;;
        input)
            input_box ;;
    esac
}

go() { state=$1; ticks=0; left=${2:--1}; draw; }

go input
while :; do
    if [ "$state" = busy ]; then
        read -r -t 0.1 line
    else
        read -r line
    fi
    rc=$?
    if [ $rc -gt 128 ]; then   # the 100 ms tick of a busy screen
        # A tick can cut a cue short: `read -t` keeps what it had read (seen: "i", then
        # "nput"), so that start waits for the rest instead of being lost.
        partial+=$line
        ticks=$((ticks + 1))
        if [ "$left" -gt 0 ]; then left=$((left - 1)); fi
        if [ "$left" -eq 0 ]; then go input; else draw; fi
        continue
    fi
    if [ $rc -ne 0 ]; then exit 0; fi   # end of input
    line=$partial$line
    partial=''
    # Every line read, and the state it arrived in, for a failing test's message.
    if [ -n "${TUI_LOG:-}" ]; then printf '%s <- %s\n' "$state" "$line" >> "$TUI_LOG"; fi
    case $line in
        busy) go busy ;;
        approve) go approve ;;
        input) go input ;;
        exit) exit 0 ;;
        *)
            if [ "$state" != busy ]; then received=$line; go busy 10; fi ;;
    esac
done
