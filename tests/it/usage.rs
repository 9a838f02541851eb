//! The usage log's file lifecycle through the real binary (seed 003, "Persistent usage
//! telemetry"): private modes, a planted symlink refused while the server keeps serving,
//! rotation across a day and an hour boundary on the injected clock
//! (`WINX_USAGE_CLOCK_SKEW_SECS`), keep-days pruning, bad settings, `doctor`, JSON
//! diagnostics, and `report` over what the server wrote.

use crate::support;

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::{Agent, HARD_TIMEOUT, Opts};
use winx::usage::Rotation;

const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// A stdio server with the usage log at `log` (and `extra` settings), in `dir`'s state.
fn agent(dir: &Path, log: &Path, extra: &[(&str, &str)]) -> Agent {
    let mut env = vec![
        ("WINX_RUNTIME", "embedded"),
        ("WINX_USAGE_LOG", log.to_str().unwrap()),
    ];
    env.extend_from_slice(extra);
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    Agent::spawn_with(Opts {
        env: &env,
        state: Some(dir.join("state")),
        workspace: Some(ws),
        ..Default::default()
    })
}

/// One Initialize call, then a clean exit (the writer flushes on the way out).
fn one_call_and_exit(mut a: Agent) -> Agent {
    let first = a.first_call();
    assert_eq!(first["status"], "completed", "{first}");
    a.close_stdin();
    assert!(a.wait_exit(HARD_TIMEOUT).is_some_and(|s| s.success()));
    a
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sibling(log: &Path, label: &str) -> PathBuf {
    log.with_file_name(format!("usage.jsonl.{label}"))
}

#[test]
fn files_are_0600_new_directories_0700_and_a_broader_mode_is_reduced() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("logs/deeper/usage.jsonl");
    let a = one_call_and_exit(agent(tmp.path(), &log, &[]));
    assert_eq!(mode(&log), 0o600);
    assert_eq!(mode(&tmp.path().join("logs")), 0o700);
    assert_eq!(mode(&tmp.path().join("logs/deeper")), 0o700);
    let events = lines(&log);
    assert!(events.iter().any(|e| e["event"] == "tool_call"));
    assert!(events.iter().all(|e| e["usage_schema"] == 1));
    // An existing file with a broader mode is reduced, and appended to.
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(a);
    one_call_and_exit(agent(tmp.path(), &log, &[]));
    assert_eq!(mode(&log), 0o600);
    assert_eq!(
        lines(&log)
            .iter()
            .filter(|e| e["event"] == "tool_call")
            .count(),
        2
    );
    // Without WINX_USAGE_LOG nothing is written anywhere in the state or home.
    let quiet = tempfile::tempdir().unwrap();
    let ws = quiet.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut q = Agent::spawn_with(Opts {
        env: &[("WINX_RUNTIME", "embedded")],
        workspace: Some(ws),
        ..Default::default()
    });
    q.first_call();
    q.close_stdin();
    q.wait_exit(HARD_TIMEOUT);
    assert!(!q.state.join("usage-salt").exists());
    let found = walk(q.dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("usage"))
        .collect::<Vec<_>>();
    assert!(found.is_empty(), "{found:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn a_planted_symlink_is_refused_the_server_keeps_serving_and_says_so_once() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("victim");
    std::fs::write(&target, "").unwrap();
    let log = tmp.path().join("usage.jsonl");
    std::os::unix::fs::symlink(&target, &log).unwrap();
    let mut a = agent(
        tmp.path(),
        &log,
        &[("WINX_LOG_FORMAT", "json"), ("WINX_LOG", "warn")],
    );
    let first = a.first_call();
    assert_eq!(first["status"], "completed");
    let pair = json!({"data": first["data"]});
    for _ in 0..3 {
        let r = a.bash(&pair, json!({"command": "echo still serving"}));
        assert!(
            support::text(&r).contains("still serving"),
            "{}",
            support::text(&r)
        );
    }
    let doctor = a.op_json(&["doctor"]);
    assert_eq!(doctor["usage_log_configured"], true);
    assert_eq!(doctor["usage_log"]["writable"], false, "{doctor}");
    assert!(
        doctor["usage_log"]["state"]
            .as_str()
            .unwrap()
            .contains("symlink")
    );
    a.close_stdin();
    a.wait_exit(HARD_TIMEOUT);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    let stderr = a.stderr_log();
    let said: Vec<Value> = stderr
        .lines()
        .filter(|l| l.contains("symlink"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not a JSON line: {l}")))
        .collect();
    assert_eq!(said.len(), 1, "said once: {stderr}");
    assert_eq!(said[0]["level"], "WARN");
    assert_eq!(said[0]["thread"], "usage-writer");
}

/// The skew that puts the server's usage clock at `at_ms`.
fn skew_to(at_ms: i64) -> String {
    ((at_ms - now_ms()) / 1000).to_string()
}

/// Run once just before `boundary` and once just after: the first run's events end up in
/// the file of the earlier period, the second run's in the active file.
fn rotates_across(rotation: Rotation, period_ms: i64) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let boundary = (now_ms() / period_ms + 2) * period_ms;
    let name = rotation.as_str();
    let before = skew_to(boundary - 60_000);
    let env = |skew: &str| {
        vec![
            ("WINX_USAGE_LOG_ROTATION", name.to_string()),
            ("WINX_USAGE_CLOCK_SKEW_SECS", skew.to_string()),
        ]
    };
    let e = env(&before);
    let refs: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    one_call_and_exit(agent(tmp.path(), &log, &refs));
    let first = lines(&log);
    assert!(
        first
            .iter()
            .all(|l| l["ts_ms"].as_i64().unwrap() < boundary)
    );
    let after = skew_to(boundary + 60_000);
    let e = env(&after);
    let refs: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    one_call_and_exit(agent(tmp.path(), &log, &refs));
    let label = rotation.label(boundary - 1).unwrap();
    let rotated = sibling(&log, &label);
    assert_eq!(
        lines(&rotated),
        first,
        "the earlier period moved to {label}"
    );
    let second = lines(&log);
    assert!(!second.is_empty());
    assert!(
        second
            .iter()
            .all(|l| l["ts_ms"].as_i64().unwrap() >= boundary)
    );
    assert_eq!(mode(&rotated), 0o600);
}

#[test]
fn rotation_across_a_day_boundary() {
    rotates_across(Rotation::Daily, DAY_MS);
}

#[test]
fn rotation_across_an_hour_boundary() {
    rotates_across(Rotation::Hourly, HOUR_MS);
}

#[test]
fn keep_days_prunes_old_rotated_files_only() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let now = now_ms();
    let old = Rotation::Daily.label(now - 10 * DAY_MS).unwrap();
    let recent = Rotation::Daily.label(now - DAY_MS).unwrap();
    let old_hour = Rotation::Hourly.label(now - 5 * DAY_MS).unwrap();
    for label in [&old, &recent, &old_hour, &"notes".to_string()] {
        std::fs::write(sibling(&log, label), "{}\n").unwrap();
    }
    one_call_and_exit(agent(
        tmp.path(),
        &log,
        &[("WINX_USAGE_LOG_KEEP_DAYS", "3")],
    ));
    assert!(!sibling(&log, &old).exists());
    assert!(!sibling(&log, &old_hour).exists());
    assert!(sibling(&log, &recent).exists());
    assert!(sibling(&log, "notes").exists(), "not ours: kept");
    // 0 keeps everything.
    let keep = sibling(&log, &Rotation::Daily.label(now - 400 * DAY_MS).unwrap());
    std::fs::write(&keep, "{}\n").unwrap();
    one_call_and_exit(agent(
        tmp.path(),
        &log,
        &[("WINX_USAGE_LOG_KEEP_DAYS", "0")],
    ));
    assert!(keep.exists());
}

#[test]
fn bad_settings_are_clear_startup_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let env = support::isolated_env(tmp.path(), &tmp.path().join("state"), tmp.path());
    for (k, v, says) in [
        ("WINX_USAGE_LOG_KEEP_DAYS", "-1", "0..=3650"),
        ("WINX_USAGE_LOG_KEEP_DAYS", "99999", "0..=3650"),
        ("WINX_USAGE_LOG_ROTATION", "weekly", "daily, hourly, never"),
        ("WINX_LOG_FORMAT", "xml", "text, json"),
    ] {
        let out = support::command(&env)
            .arg("serve")
            .env("WINX_USAGE_LOG", &log)
            .env(k, v)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{k}={v}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(k) && err.contains(says), "{k}={v}: {err}");
        assert!(!log.exists(), "nothing written for a refused start");
    }
}

#[test]
fn report_reads_what_the_server_wrote_without_touching_it() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let a = one_call_and_exit(agent(tmp.path(), &log, &[]));
    let before = std::fs::read(&log).unwrap();
    let meta = std::fs::metadata(&log).unwrap();
    let report = a.op_json(&["report", "--log", log.to_str().unwrap()]);
    assert_eq!(report["counts"]["toolCalls"], 1);
    assert_eq!(report["initialize"]["transitions"]["created"], 1);
    assert_eq!(report["source"]["malformedLines"], 0);
    // The configured log is the default; --last and --since-minutes filter.
    let again = a.op_json(&["report", "--last", "1", "--since-minutes", "60"]);
    assert_eq!(again["counts"]["toolCalls"], 1);
    assert_eq!(std::fs::read(&log).unwrap(), before);
    assert_eq!(
        std::fs::metadata(&log).unwrap().modified().unwrap(),
        meta.modified().unwrap()
    );
    let siblings = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("usage.jsonl."))
        .count();
    assert_eq!(siblings, 0, "report never rotates");
    let none = a.op(&["report", "--log", tmp.path().join("nope").to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no usage log"));
}

/// A host that closes stdin and sends SIGTERM at once (the MCP SDKs' shutdown) still finds
/// the last call's `tool_call` line: the server drains the usage queue and exits with
/// 128 + SIGTERM instead of dying by the signal. Before the fix the process died by the
/// signal (no exit code) and the line was lost whenever the writer had not ticked yet.
#[test]
fn sigterm_right_after_a_call_keeps_its_usage_line() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("usage.jsonl");
        let mut a = agent(dir.path(), &log, &[]);
        let first = a.first_call();
        let r = a.bash(&first, json!({"command": "echo usage-drain"}));
        assert!(support::text(&r).contains("usage-drain"), "{r}");
        a.close_stdin();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(a.pid() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = a.wait_exit(HARD_TIMEOUT).expect("the server exits");
        // Either EOF won the race (a clean exit) or the signal did (128 + 15); never a
        // death by the signal.
        assert!(
            status.success() || status.code() == Some(143),
            "round {round}: {status:?}"
        );
        let calls: Vec<Value> = lines(&log)
            .into_iter()
            .filter(|l| l["event"] == "tool_call")
            .collect();
        assert_eq!(calls.len(), 2, "round {round}: {calls:?}");
        assert_eq!(calls[1]["tool"], "BashCommand", "round {round}");
    }
}
