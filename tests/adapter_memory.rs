//! The adapter's memory stays bounded whatever a command prints (issue #11 item 4): the
//! spill file is streamed from the journal, never built in memory. Peak RSS (`VmHWM`) of
//! the adapter process is read from /proc after ~60 MB of output, delivered in one answer,
//! in several `status_check` answers, and as the result of an MCP task.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{Agent, pair_args, text};

/// Peak resident memory the adapter may reach, whatever the output size.
const MAX_PEAK_BYTES: u64 = 32 * 1024 * 1024;
/// Lines `seq` prints (distinct, so repeats never collapse): 38.9 MB, more than the bound
/// itself, and about what a debug-build guardian pushes through a PTY in a few seconds.
const LINES: usize = 5_000_000;
/// How long one answer may take: a debug build on a busy machine is slow with this much.
const PATIENCE: Duration = Duration::from_secs(300);

// Only the two runtimes (the adapter process differs between them; the shell does not
// matter here), to keep the cost of ~60 MB through a PTY per test down.
macro_rules! both_runtimes {
    ($($name:ident),* $(,)?) => {
        mod daemon {
            $(#[test] fn $name() { super::$name("daemon") })*
        }
        mod embedded {
            $(#[test] fn $name() { super::$name("embedded") })*
        }
    };
}

both_runtimes!(
    one_large_answer_spills_without_holding_the_output,
    several_deliveries_stay_bounded,
    a_task_result_stays_bounded,
);

fn command() -> String {
    format!("seq 1 {LINES}")
}

/// Bytes `seq 1 LINES` prints.
fn seq_bytes() -> u64 {
    (1..=LINES).map(|n| n.to_string().len() as u64 + 1).sum()
}

fn spawn(rt: &str) -> Agent {
    Agent::spawn_env(&[("WINX_RUNTIME", rt), ("WINX_SHELL", "bash")])
}

/// The adapter's peak resident set so far, from `/proc/<pid>/status`.
fn peak_rss(a: &Agent) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", a.pid())).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/<pid>/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable {line:?}"));
    kib * 1024
}

/// `Agent::request` with `PATIENCE` instead of the usual hard timeout.
fn request(a: &mut Agent, method: &str, params: Value) -> Value {
    let id = a.fresh_id();
    a.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = (a.recv_within(left)).unwrap_or_else(|| panic!("no answer to {method}"));
        if msg["id"] == json!(id) {
            return msg;
        }
    }
}

fn bash(a: &mut Agent, first: &Value, extra: Value) -> Value {
    let args = pair_args(first, extra);
    let r = request(a, "tools/call", json!({"name": "BashCommand", "arguments": args}));
    r["result"].clone()
}

fn assert_bounded(a: &Agent, what: &str) {
    let peak = peak_rss(a);
    assert!(
        peak < MAX_PEAK_BYTES,
        "{what}: adapter VmHWM {} KiB ({:.1} MiB) is over the {} MiB bound",
        peak / 1024,
        peak as f64 / (1024.0 * 1024.0),
        MAX_PEAK_BYTES / (1024 * 1024)
    );
}

/// A truncated answer naming its spill file; checks the file and returns its line count.
fn spilled_lines(r: &Value) -> usize {
    let d = &r["structuredContent"]["data"];
    assert_eq!(d["truncated"], true, "{d}");
    let t = text(r);
    assert!(t.starts_with("[output truncated: "), "{}", &t[..t.len().min(300)]);
    let path = d["spill_path"]
        .as_str()
        .unwrap_or_else(|| panic!("no spill file: {d}"));
    assert!(t.contains(path), "the text names the spill file");
    let meta = std::fs::metadata(path).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
    assert_eq!(mode & 0o777, 0o600);
    let body = std::fs::read(path).unwrap();
    assert!(body.iter().all(|&b| b.is_ascii_digit() || b == b'\n'));
    body.iter().filter(|&&b| b == b'\n').count()
}

fn one_large_answer_spills_without_holding_the_output(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let r = bash(
        &mut a,
        &s,
        json!({"action_json": {"command": command()}, "wait_for_seconds": 600}),
    );
    assert_eq!(r["structuredContent"]["data"]["exit_code"], 0, "{r}");
    assert_eq!(spilled_lines(&r), LINES);
    let path = r["structuredContent"]["data"]["spill_path"].as_str().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), seq_bytes());
    assert_bounded(&a, "one answer");
}

fn several_deliveries_stay_bounded(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let mut r = bash(
        &mut a,
        &s,
        json!({"action_json": {"command": command()}, "wait_for_seconds": 0.5}),
    );
    // Each truncated answer spills its own range, so together they hold at most every line.
    let (mut spills, mut lines) = (0, 0);
    loop {
        if r["structuredContent"]["data"]["truncated"] == true {
            spills += 1;
            lines += spilled_lines(&r);
        }
        if r["structuredContent"]["status"] != "running" {
            break;
        }
        let check = json!({"action_json": {"status_check": true}, "wait_for_seconds": 2});
        r = bash(&mut a, &s, check);
    }
    assert_eq!(r["structuredContent"]["data"]["exit_code"], 0, "{r}");
    assert!(spills > 0 && lines <= LINES, "{spills} spills of {lines} lines");
    assert_bounded(&a, "several deliveries");
}

fn a_task_result_stays_bounded(rt: &str) {
    let mut a = spawn(rt);
    a.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    let first = a.first_call();
    let args = pair_args(
        &first,
        json!({"action_json": {"command": command()}, "wait_for_seconds": 0.5}),
    );
    let r = request(
        &mut a,
        "tools/call",
        json!({"name": "BashCommand", "arguments": args, "task": {"ttl": 600000}}),
    );
    let id = r["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {r}"))
        .to_string();
    let res = request(&mut a, "tasks/result", json!({"taskId": id}));
    let result = &res["result"];
    assert_eq!(result["structuredContent"]["data"]["exit_code"], 0, "{res}");
    // The task's spill is built from the start of the execution: every line.
    assert_eq!(spilled_lines(result), LINES);
    assert_bounded(&a, "task result");
}
