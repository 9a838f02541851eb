//! Hostile shell workloads, one regression test per defect of the issue "Reliability and
//! interoperability": a PTY that floods (item 1), printed text that imitates completion
//! (item 2), bash history expansion (item 3) and children that detach from the session
//! (item 5). Every wait has a deadline; gates are FIFOs, never sleeps.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{Agent, Opts, processes_mentioning};

/// Floods use the whole CPU: run them one at a time so each measures alone.
static FLOOD: std::sync::Mutex<()> = std::sync::Mutex::new(());

// Daemon, embedded and zsh variants of every test below (`support::each_runtime`).
each_runtime!(
    a_flooding_command_leaves_the_guardian_responsive,
    printed_markers_never_end_a_call,
    history_expansion_is_off_and_a_discarded_line_ends_the_call,
);

fn spawn(rt: &str) -> Agent {
    let (runtime, shell) = match rt {
        "zsh" => ("daemon", "zsh"),
        other => (other, "bash"),
    };
    Agent::spawn_with(Opts {
        env: &[("WINX_RUNTIME", runtime), ("WINX_SHELL", shell)],
        ..Default::default()
    })
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or_default()
}

fn data(r: &Value) -> &Value {
    &r["structuredContent"]["data"]
}

/// One `BashCommand`, timed from the request to its answer; panics when no answer comes
/// within `limit` (so a hung guardian fails fast instead of waiting out the hard timeout).
fn timed(
    a: &mut Agent,
    pair: &Value,
    action: Value,
    extra: Value,
    limit: Duration,
) -> (Duration, Value) {
    let mut args = json!({
        "thread_id": pair["data"]["thread_id"],
        "workspace_root": pair["data"]["workspace_root"],
        "action_json": action,
    });
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    let id = a.fresh_id();
    let t = Instant::now();
    a.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "BashCommand", "arguments": args}}));
    loop {
        let left = limit.saturating_sub(t.elapsed());
        let msg = a
            .recv_within(left)
            .unwrap_or_else(|| panic!("no answer to {action} within {limit:?}"));
        if msg["id"] == json!(id) {
            return (t.elapsed(), msg["result"].clone());
        }
    }
}

/// Live pids of `name` (its `comm`) whose parent is `parent`.
fn children_named(parent: i64, name: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if &stat[open + 1..close] == name
            && rest.len() > 2
            && rest[0] != "Z"
            && rest[1] == parent.to_string()
        {
            out.push(pid);
        }
    }
    out
}

/// Wait (polling /proc, bounded by `limit`) until `cond` holds; the elapsed time.
fn until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    let held = support::wait::settle(
        support::wait::Deadline::after("condition", limit),
        &mut cond,
        |held| *held,
    );
    assert!(held.is_ok(), "{what}: not within {limit:?}");
    t.elapsed()
}

/// Item 1: `yes` floods the PTY; the guardian still answers, Ctrl-C still interrupts, and
/// the session stays usable. Bounds are CI-safe (debug build, shared CPU); the release
/// figures are in `cargo bench --bench shell` (flood case).
fn a_flooding_command_leaves_the_guardian_responsive(rt: &str) {
    let _one = FLOOD.lock().unwrap_or_else(|e| e.into_inner());
    let mut a = spawn(rt);
    let s = a.first_call();
    let shell_pid = s["data"]["shell"]["pid"].as_i64().unwrap();
    let (t, r) = timed(
        &mut a,
        &s,
        json!({"command": "yes"}),
        json!({"wait_for_seconds": 0.5}),
        Duration::from_secs(8),
    );
    assert_eq!(
        r["structuredContent"]["status"],
        "running",
        "{t:?} {}",
        &text(&r)[..200.min(text(&r).len())]
    );
    let mut lat = Vec::new();
    for _ in 0..40 {
        let (t, r) = timed(
            &mut a,
            &s,
            json!({"screen": true, "lines": 2}),
            json!({}),
            Duration::from_secs(5),
        );
        assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
        lat.push(t);
    }
    lat.sort();
    let p99 = lat[lat.len() * 99 / 100 - 1];
    eprintln!(
        "flood[{rt}]: screen p50 {:?} p99 {:?}",
        lat[lat.len() / 2],
        p99
    );
    assert!(
        p99 < Duration::from_millis(500),
        "screen p99 {p99:?} under flood"
    );
    let yes = children_named(shell_pid, "yes");
    assert_eq!(yes.len(), 1, "one `yes` under the shell");
    let id = a.fresh_id();
    let t = Instant::now();
    a.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "BashCommand", "arguments": {
        "thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
        "action_json": {"send_specials": ["Ctrl-c"]}}}}));
    let reach = until(Duration::from_secs(2), "Ctrl-C reaching `yes`", || {
        !std::path::Path::new(&format!("/proc/{}", yes[0])).exists()
            || children_named(shell_pid, "yes").is_empty()
    });
    let r = loop {
        let msg = a.recv();
        if msg["id"] == json!(id) {
            break msg["result"].clone();
        }
    };
    eprintln!(
        "flood[{rt}]: Ctrl-C reached yes in {reach:?}, answered in {:?}",
        t.elapsed()
    );
    assert_eq!(data(&r)["exit_code"], 130, "{}", r["structuredContent"]);
    let r = a.bash(&s, json!({"command": "echo after-flood"}));
    assert!(text(&r).starts_with("after-flood\n"), "{}", text(&r));
}

/// Item 2: the command prints the shell's own marker (by calling the prompt machinery in
/// the shell and from a child process); the call must wait for the real end.
fn printed_markers_never_end_a_call(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let gate = a.dir.path().join("gate");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // Whatever the prompt is made of: the hook function, the expanded prompt string.
    let expanded = if rt == "zsh" { "${(%)PS1}" } else { "${PS1@P}" };
    let forge = format!(
        "__winx_prompt 2>/dev/null; printf '%s' \"{expanded}\"; env printf '%s' \"{expanded}\"; \
         declare -f __winx_prompt >/dev/null 2>&1; read _ < {}; echo end; (exit 7)",
        gate.display()
    );
    let (_, r) = timed(
        &mut a,
        &s,
        json!({"command": forge}),
        json!({"wait_for_seconds": 1}),
        Duration::from_secs(10),
    );
    assert_eq!(
        r["structuredContent"]["status"], "running",
        "ended early: {}",
        r["structuredContent"]
    );
    std::fs::write(&gate, "go\n").unwrap();
    let r = a.bash_with(
        &s,
        json!({"status_check": true}),
        json!({"wait_for_seconds": 10}),
    );
    assert_eq!(data(&r)["exit_code"], 7, "{}", r["structuredContent"]);
    assert!(text(&r).contains("end\n"), "{}", text(&r));
    let r = a.bash(&s, json!({"command": "echo next"}));
    assert!(
        text(&r).starts_with("next\n"),
        "the next call got the rest: {}",
        text(&r)
    );
}

/// Item 3: `!` is an ordinary character; a line the shell discards (history expansion
/// turned back on by the user) still ends its call.
fn history_expansion_is_off_and_a_discarded_line_ends_the_call(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let quick = |a: &mut Agent, cmd: &str| {
        let (_, r) = timed(
            a,
            &s,
            json!({"command": cmd}),
            json!({"wait_for_seconds": 5}),
            Duration::from_secs(10),
        );
        r
    };
    let r = quick(&mut a, "echo pass=abc!def");
    assert_eq!(
        r["structuredContent"]["status"], "completed",
        "{}",
        r["structuredContent"]
    );
    assert!(text(&r).starts_with("pass=abc!def\n"), "{}", text(&r));
    let r = quick(&mut a, "echo !!");
    assert!(text(&r).starts_with("!!\n"), "{}", text(&r));
    let on = if rt == "zsh" {
        "setopt BANG_HIST"
    } else {
        "set -H"
    };
    quick(&mut a, on);
    let r = quick(&mut a, "echo pass=abc!zzqq");
    assert_eq!(
        r["structuredContent"]["status"], "completed",
        "{}",
        r["structuredContent"]
    );
    assert!(text(&r).contains("event not found"), "{}", text(&r));
    let r = quick(&mut a, "echo still-here");
    assert!(text(&r).starts_with("still-here\n"), "{}", text(&r));
}

/// Start one detached child of every kind; each is `sleep` renamed (argv[0]) to a path
/// in the test dir, so `processes_mentioning` finds it and the handle's Drop kills it.
fn start_detached(a: &mut Agent, s: &Value) -> std::path::PathBuf {
    let tag = a.dir.path().join("orphan");
    let run = |how: &str| format!("{how} bash -c 'exec -a {} sleep 1000'", tag.display());
    let cmd = format!(
        "{} >/dev/null 2>&1 & {} >/dev/null 2>&1 & ({} >/dev/null 2>&1 &); {} >/dev/null 2>&1 & disown; ( {} & ) >/dev/null 2>&1; true",
        run("nohup"),
        run("setsid"),
        run(""),
        run(""),
        run("setsid"),
    );
    let r = a.bash(s, json!({"command": cmd}));
    assert_eq!(
        r["structuredContent"]["status"], "completed",
        "{}",
        r["structuredContent"]
    );
    until(
        Duration::from_secs(10),
        "five detached children started",
        || processes_mentioning(&tag).len() == 5,
    );
    tag
}

/// Item 5: `kill --all` ends every descendant of the session, detached or not.
#[test]
fn kill_all_ends_detached_children() {
    let mut a = spawn("daemon");
    let s = a.first_call();
    let tag = start_detached(&mut a, &s);
    let out = a.op(&["kill", "--all"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    until(Duration::from_secs(10), "detached children ended", || {
        processes_mentioning(&tag).is_empty()
    });
}

/// Item 5, embedded runtime: the session ends with the adapter, and so do its children.
/// `setsid` is left out: in a job-control shell it forks, so its child is re-parented to
/// init in a session of its own, which an embedded guardian cannot tell from any other
/// process (the adapter is no subreaper: see docs/architecture.md).
#[test]
fn adapter_exit_ends_embedded_detached_children() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    let tag = a.dir.path().join("orphan");
    let run = |how: &str| format!("{how} bash -c 'exec -a {} sleep 1000'", tag.display());
    let cmd = format!(
        "{} >/dev/null 2>&1 & ({} >/dev/null 2>&1 &); {} >/dev/null 2>&1 & disown; true",
        run("nohup"),
        run(""),
        run(""),
    );
    let r = a.bash(&s, json!({"command": cmd}));
    assert_eq!(
        r["structuredContent"]["status"], "completed",
        "{}",
        r["structuredContent"]
    );
    until(
        Duration::from_secs(10),
        "three detached children started",
        || processes_mentioning(&tag).len() == 3,
    );
    a.close_stdin();
    assert!(
        a.wait_exit(Duration::from_secs(15)).is_some(),
        "the adapter exited"
    );
    until(Duration::from_secs(10), "detached children ended", || {
        processes_mentioning(&tag).is_empty()
    });
}
