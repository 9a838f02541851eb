//! Operator commands against real winxd and guardian processes.

use crate::support;

use crossbeam_channel::unbounded;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use support::{Agent, HARD_TIMEOUT, processes_mentioning};

/// A second workspace for `a`, initialized in the same adapter.
fn second(a: &mut Agent, name: &str) -> Value {
    let ws = a.dir.path().join(name);
    std::fs::create_dir_all(&ws).unwrap();
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws.to_str().unwrap()}),
    );
    r["structuredContent"].clone()
}

fn thread_ids(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["thread_id"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn list_reports_every_session_with_its_clocks() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    a.bash(&s, json!({"command": "sleep 100", "is_background": true}));
    let list = a.op_json(&["list"]);
    let row = &list[0];
    assert_eq!(row["thread_id"], s["data"]["thread_id"]);
    assert_eq!(row["shell_pid"], s["data"]["shell"]["pid"]);
    assert_eq!(row["ever_ran_command"], true);
    assert_eq!(row["background_command_ids"], json!(["bg1"]));
    for key in [
        "guardian_pid",
        "created_at_unix_ms",
        "last_activity_unix_ms",
        "build",
        "running",
    ] {
        assert!(!row[key].is_null(), "{key} missing: {row}");
    }
    let table = a.op(&["list", "--table"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains(s["data"]["thread_id"].as_str().unwrap())
    );
}

#[test]
fn attach_follow_sees_output_without_stealing_it() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let tid = s["data"]["thread_id"].as_str().unwrap().to_string();
    let mut follower = a
        .op_command(&["attach", &tid, "--follow"])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = unbounded();
    let stdout = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let r = a.bash(&s, json!({"command": "echo follow-me-please"}));
    // The agent still gets its output: the follower has its own cursor.
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("follow-me-please\n")
    );
    let seen = loop {
        let line = rx
            .recv_timeout(HARD_TIMEOUT)
            .expect("attach printed the output");
        if line.contains("follow-me-please") {
            break line;
        }
    };
    assert!(seen.contains("follow-me-please"));
    let _ = follower.kill();
    let _ = follower.wait();
}

#[test]
fn attach_without_follow_prints_a_transcript_longer_than_one_answer() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let tid = s["data"]["thread_id"].as_str().unwrap().to_string();
    // About 110 KB: several bounded Read answers.
    let r = a.bash(&s, json!({"command": "seq 1 20000"}));
    assert_eq!(r["structuredContent"]["data"]["exit_code"], 0, "{r}");
    let out = a.op(&["attach", &tid]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let numbers: Vec<&str> = text
        .lines()
        .filter(|l| l.trim() == "20000" || l.trim() == "1")
        .collect();
    assert!(
        text.contains("\n19999\n20000"),
        "the end of the transcript is missing"
    );
    assert!(!numbers.is_empty());
    assert!(text.len() > 100_000, "only {} bytes printed", text.len());
}

#[test]
fn prune_applies_the_two_tiers() {
    // Two hours later: a never-used session (30 min tier) goes, a used one (24 h) stays.
    let mut a = Agent::spawn_env(&[("WINX_CLOCK_SKEW_SECS", "7200")]);
    let used = a.first_call();
    a.bash(&used, json!({"command": "true"}));
    let unused = second(&mut a, "unused");
    let out = a.op_json(&["prune"]);
    assert_eq!(out["removed"], json!([unused["data"]["thread_id"]]));
    assert_eq!(
        thread_ids(&a.op_json(&["list"])),
        vec![used["data"]["thread_id"].as_str().unwrap().to_string()]
    );
}

#[test]
fn prune_idle_zero_keeps_active_commands() {
    let mut a = Agent::spawn();
    let busy = a.first_call();
    let r = a.bash_with(
        &busy,
        json!({"command": "sleep 100"}),
        json!({"wait_for_seconds": 0}),
    );
    assert_eq!(r["structuredContent"]["status"], "running");
    let idle = second(&mut a, "idle");
    let out = a.op_json(&["prune", "--idle-seconds", "0"]);
    assert_eq!(out["removed"], json!([idle["data"]["thread_id"]]));
    let left = a.op_json(&["list"]);
    assert_eq!(
        thread_ids(&left),
        vec![busy["data"]["thread_id"].as_str().unwrap().to_string()]
    );
    assert_eq!(left[0]["running"], true);
}

#[test]
fn kill_one_and_kill_all() {
    let mut a = Agent::spawn();
    let one = a.first_call();
    let two = second(&mut a, "two");
    let out = a.op_json(&["kill", one["data"]["thread_id"].as_str().unwrap()]);
    assert_eq!(out["removed"], json!([one["data"]["thread_id"]]));
    assert_eq!(thread_ids(&a.op_json(&["list"])).len(), 1);
    let missing = a.op(&["kill", "ws_nothing_000000000000"]);
    assert_eq!(missing.status.code(), Some(1));
    let out = a.op_json(&["kill", "--all"]);
    assert_eq!(out["removed"], json!([two["data"]["thread_id"]]));
    assert!(a.op_json(&["list"]).as_array().unwrap().is_empty());
    // The guardians and their shells are gone (a killed process leaves /proc when it is
    // reaped, which a loaded machine delays).
    let g = a.dir.path().join("run/winx/g");
    support::wait::eventually(
        support::wait::Deadline::hard("guardians gone"),
        "every guardian and shell has exited",
        || processes_mentioning(&g),
        |p| p.is_empty(),
    );
    let r = a.bash(&one, json!({"command": "echo x"}));
    assert_eq!(r["structuredContent"]["errorCode"], "shell_unavailable");
}

#[test]
fn restart_daemon_keeps_shells() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    a.bash(&s, json!({"command": "cd /tmp"}));
    let created = a.op_json(&["list"])[0]["created_at_unix_ms"].clone();
    let out = a.op_json(&["restart-daemon"]);
    assert_ne!(out["old_pid"], out["new_pid"]);
    assert_eq!(out["sessions_after"], 1);
    let again = a.first_call();
    assert_eq!(again["data"]["shell"]["pid"], s["data"]["shell"]["pid"]);
    assert_eq!(again["data"]["shell"]["cwd"], "/tmp");
    // The guardian's clocks are authoritative: a new daemon does not make it look new.
    assert_eq!(a.op_json(&["list"])[0]["created_at_unix_ms"], created);
}

#[test]
fn quota_reclaims_never_used_sessions_and_preserves_used_ones() {
    let mut a = Agent::spawn_env(&[("WINX_MAX_GUARDIANS", "2")]);
    let used = a.first_call();
    a.bash(
        &used,
        json!({"command": "sleep 100", "is_background": true}),
    );
    let unused = second(&mut a, "unused");
    let third = second(&mut a, "third");
    assert_eq!(third["status"], "completed", "{third}");
    let ids = thread_ids(&a.op_json(&["list"]));
    assert!(
        !ids.contains(&unused["data"]["thread_id"].as_str().unwrap().to_string()),
        "never-used reclaimed"
    );
    assert!(
        ids.contains(&used["data"]["thread_id"].as_str().unwrap().to_string()),
        "used kept"
    );
    // Now both live sessions are in use: a new one is refused with the prune command.
    a.bash(&third, json!({"command": "true"}));
    let refused = second(&mut a, "fourth");
    assert_eq!(refused["errorCode"], "shell_unavailable", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("winx-code-agent prune --idle-seconds 0")
    );
    // The structured error carries the quota's typed cause: its limit and the prune command.
    let cause = &refused["data"]["cause"];
    assert_eq!(cause["kind"], "quota", "{refused}");
    assert_eq!(cause["limit"], 2, "{refused}");
    assert_eq!(cause["prune"], "winx-code-agent prune --idle-seconds 0");
}

#[test]
fn doctor_reports_without_secrets() {
    let token = "doctor-must-never-print-this-token-0123456789";
    let mut a = Agent::spawn_env(&[("WINX_HTTP_TOKEN", token), ("WINX_ALLOW_PATHS", "/")]);
    a.first_call(); // starts winxd, so the report includes what it holds
    let out = a.op(&["doctor"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(token));
    let d: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(d["http_credentials_configured"], true);
    assert_eq!(d["file_tools_containment"], "unconfined");
    assert_eq!(d["runtime"], "daemon");
    assert_eq!(d["lifecycle"]["unused_ttl_secs"], 1800);
    assert_eq!(d["lifecycle"]["used_ttl_secs"], 86400);
    assert_eq!(d["lifecycle"]["max_guardians"], 32);
    assert_eq!(d["daemon"]["running"], true);
    assert_eq!(d["daemon"]["mixed_build"], false);
    assert_eq!(d["guardians"]["count"], 1);
    assert_eq!(d["split_control_sockets"], false);
    assert_eq!(d["interrupted_commits"], 0);
    // An intent left by a crashed multi-file commit is counted.
    let commits = a.state.join("commits");
    std::fs::create_dir_all(&commits).unwrap();
    std::fs::write(commits.join("commit-0011223344556677.json"), "{}").unwrap();
    let d: Value = serde_json::from_slice(&a.op(&["doctor"]).stdout).unwrap();
    assert_eq!(d["interrupted_commits"], 1);
}

#[test]
fn doctor_observes_and_never_starts_winxd() {
    let a = Agent::spawn_env(&[]);
    let d = a.op_json(&["doctor"]);
    assert_eq!(d["daemon"]["running"], false, "{d}");
    assert!(d["guardians"].is_null(), "{d}");
    let socket = a.dir.path().join("run/winx/winxd.sock");
    assert!(!socket.exists(), "doctor started winxd");
    let winxd: Vec<i32> = processes_mentioning(&a.dir.path().join("run"))
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("winxd"))
        })
        .collect();
    assert!(winxd.is_empty(), "doctor left winxd running: {winxd:?}");
    let candidates = d["socket_candidates"].as_array().unwrap();
    assert!(
        candidates
            .iter()
            .all(|c| c["exists"] == false && c["answering_build"].is_null())
    );
}

#[test]
fn a_dead_guardian_is_reported_gone_and_its_socket_removed() {
    let mut a = Agent::spawn();
    a.first_call();
    let g = processes_mentioning(&a.dir.path().join("run/winx/g"));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(g[0]),
        nix::sys::signal::Signal::SIGKILL,
    );
    let sockets = |a: &Agent| {
        std::fs::read_dir(a.dir.path().join("run/winx/g"))
            .unwrap()
            .count()
    };
    assert_eq!(sockets(&a), 1, "the killed guardian left its socket behind");
    assert!(a.op_json(&["list"]).as_array().unwrap().is_empty());
    assert_eq!(sockets(&a), 0, "the stale socket was removed");
}

#[test]
fn the_sweeper_removes_expired_sessions_by_itself() {
    // Clock skew makes the never-used session two hours idle; the sweeper runs every second.
    let mut a = Agent::spawn_env(&[
        ("WINX_CLOCK_SKEW_SECS", "7200"),
        ("WINX_TTL_SWEEP_SECS", "1"),
    ]);
    let s = a.first_call();
    let tid = s["data"]["thread_id"].as_str().unwrap().to_string();
    // `attach --follow` ends when the session ends: an event to wait on, not a sleep.
    let out = a
        .op_command(&["attach", &tid, "--follow"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let out = out.wait_with_output();
        let _ = tx.send(out);
    });
    let out = rx
        .recv_timeout(HARD_TIMEOUT)
        .expect("the sweeper ended the session")
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("[session ended"));
    assert!(a.op_json(&["list"]).as_array().unwrap().is_empty());
}
