//! Faults around the execution history through the real binary: an adapter killed before
//! its recorder committed a command's admission, an adapter killed while 32 commands
//! stream output, and the 24-hour expiry on an injected clock.

use crate::support;

use serde_json::{Value, json};
use support::history::{exec, id_of, read_all, spawn_with, until_recorded};
use support::{Agent, Opts, sc};

/// The ids `list` shows in `s`'s scope.
fn listed(a: &mut Agent, s: &Value) -> Vec<String> {
    let r = exec(a, s, json!({"type": "list", "limit": 128}));
    assert!(sc(&r)["errorCode"].is_null(), "{r}");
    let list = sc(&r)["data"]["executions"].as_array().unwrap().clone();
    list.iter()
        .map(|e| e["execution_id"].as_str().unwrap().to_string())
        .collect()
}

/// Another adapter on `old`'s state, workspace, winxd and guardians, with `env` added.
fn restart_with(old: &Agent, env: &[(&str, &str)]) -> Agent {
    let run = old.dir.path().join("run");
    let mut all = vec![("XDG_RUNTIME_DIR", run.to_str().unwrap())];
    all.extend_from_slice(env);
    Agent::spawn_with(Opts {
        state: Some(old.state.clone()),
        workspace: Some(old.workspace.clone()),
        env: &all,
        ..Default::default()
    })
}

/// Admission is asynchronous (the command's answer never waits for SQLite). An adapter
/// killed after the guardian accepted commands but before its recorder could commit them
/// (here: another process holds the database locked) loses no record: the next adapter
/// records them from the guardian's facts, under the scope that admitted them, once.
#[test]
fn commands_accepted_by_an_adapter_killed_before_recording_them_are_recorded() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let kept = id_of(&a.bash(&s, json!({"command": "echo before"})));
    until_recorded(&mut a, &s, &kept);
    let db = rusqlite::Connection::open(a.state.join("winx.db")).unwrap();
    db.execute_batch("BEGIN IMMEDIATE; UPDATE history_seq SET seq = seq;")
        .unwrap();
    let fg = id_of(&a.bash(&s, json!({"command": "echo never-committed; (exit 4)"})));
    let bg = id_of(&a.bash(
        &s,
        json!({"command": "echo in-the-background", "is_background": true}),
    ));
    a.kill9();
    db.execute_batch("COMMIT;").unwrap();
    drop(db);
    let mut b = support::restart_adapter(&a, "daemon");
    let ids = listed(&mut b, &s);
    assert_eq!(ids, [bg.as_str(), fg.as_str(), kept.as_str()], "{ids:?}");
    until_recorded(&mut b, &s, &fg);
    let r = exec(&mut b, &s, json!({"type": "get", "execution_id": fg}));
    let got = &sc(&r)["data"];
    assert_eq!(
        (got["process_status"].as_str(), got["exit_code"].as_i64()),
        (Some("exited"), Some(4)),
        "{r}"
    );
    assert!(
        got["command"]
            .as_str()
            .unwrap()
            .starts_with("echo never-committed"),
        "{r}"
    );
    assert_eq!(read_all(&mut b, &s, &fg), "never-committed\n");
    until_recorded(&mut b, &s, &bg);
    assert_eq!(read_all(&mut b, &s, &bg), "in-the-background\n");
    // Recorded once, and only in the scope that admitted them.
    assert_eq!(listed(&mut b, &s).len(), 3);
    let ws2 = a.dir.path().join("elsewhere");
    std::fs::create_dir(&ws2).unwrap();
    let s2 = b.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws2.to_string_lossy()}),
    );
    let s2 = sc(&s2).clone();
    assert!(listed(&mut b, &s2).is_empty());
}

/// SIGKILL of the adapter while 32 background commands (four sessions of eight) stream
/// output: a new adapter records the rest from the guardians' journals, so every byte of
/// every command reads back in order, once.
#[test]
fn an_adapter_killed_while_32_commands_stream_loses_no_byte() {
    const SESSIONS: usize = 4;
    const PER_SESSION: usize = 8;
    const LINES: usize = 4000;
    let mut a = spawn_with("daemon", &[]);
    let gate_path = a.workspace.join("gate.lock");
    let gate = std::fs::File::create(&gate_path).unwrap();
    // Held until the kill: each command prints half its lines, then waits for the gate.
    let gate = nix::fcntl::Flock::lock(gate, nix::fcntl::FlockArg::LockExclusive).unwrap();
    let mut started = Vec::new();
    for n in 0..SESSIONS {
        let ws = a.workspace.join(format!("s{n}"));
        std::fs::create_dir(&ws).unwrap();
        let s = a.call(
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws.to_string_lossy()}),
        );
        let s = sc(&s).clone();
        for k in 0..PER_SESSION {
            let half = LINES / 2;
            let cmd = format!(
                "for i in $(seq 1 {half}); do echo s{n}c{k}-$i; done; \
                 flock -s {gate} true; \
                 for i in $(seq {} {LINES}); do echo s{n}c{k}-$i; done",
                half + 1,
                gate = gate_path.display()
            );
            let id = id_of(&a.bash(&s, json!({"command": cmd, "is_background": true})));
            started.push((s.clone(), id, format!("s{n}c{k}")));
        }
    }
    // Every command recorded its first half: the adapter is killed with all 32 running,
    // just after the gate opens (their second halves stream while it dies).
    for (s, id, tag) in &started {
        let want = format!("{tag}-{}\n", LINES / 2);
        for _ in 0..200 {
            let r = exec(
                &mut a,
                s,
                json!({"type": "observe", "items": [{"execution_id": id, "page_bytes": 65536}]}),
            );
            let item = &sc(&r)["data"]["items"][0];
            if item["page"]["text"].as_str().unwrap_or("").contains(&want)
                || item["execution"]["process_status"] != "running"
            {
                break;
            }
            let after = sc(&r)["data"]["catalog_cursor"].clone();
            exec(
                &mut a,
                s,
                json!({"type": "wait", "execution_ids": [id], "after": after,
                                   "events": ["output"], "timeout_seconds": 10}),
            );
        }
    }
    drop(gate);
    a.kill9();
    let mut b = support::restart_adapter(&a, "daemon");
    for (s, id, tag) in &started {
        until_recorded(&mut b, s, id);
        let got = read_all(&mut b, s, id);
        let want: String = (1..=LINES).map(|i| format!("{tag}-{i}\n")).collect();
        if got != want {
            let at = got
                .bytes()
                .zip(want.bytes())
                .position(|(x, y)| x != y)
                .unwrap_or(got.len());
            let r = exec(&mut b, s, json!({"type": "get", "execution_id": id}));
            let near =
                |t: &str| t[at.saturating_sub(30).min(t.len())..(at + 60).min(t.len())].to_string();
            panic!(
                "{tag}: {} bytes recorded, {} expected; first difference at {at}: got {:?} want {:?}\n{r}",
                got.len(),
                want.len(),
                near(&got),
                near(&want)
            );
        }
    }
}

/// Terminal records expire 24 h after their outcome was recorded (here: an adapter whose
/// clock runs 25 h ahead); a running record never does.
#[test]
fn terminal_records_expire_after_24_hours_and_running_ones_stay() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let done = id_of(&a.bash(&s, json!({"command": "echo old"})));
    until_recorded(&mut a, &s, &done);
    let fifo = a.workspace.join("hold");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let running = id_of(&a.bash(
        &s,
        json!({"command": "read -r l < hold; echo released", "is_background": true}),
    ));
    // Only adapters with the shifted clock record from here on.
    a.kill9();
    // 23 h later: both are still there.
    let mut b = restart_with(&a, &[("WINX_CLOCK_SKEW_SECS", "82800")]);
    assert_eq!(listed(&mut b, &s), [running.as_str(), done.as_str()]);
    drop(b);
    // 25 h later: the exited one expired; the running one stays.
    let mut c = restart_with(&a, &[("WINX_CLOCK_SKEW_SECS", "90000")]);
    assert_eq!(listed(&mut c, &s), [running.as_str()]);
    let r = exec(&mut c, &s, json!({"type": "get", "execution_id": done}));
    assert_eq!(sc(&r)["errorCode"], "execution_not_found", "{r}");
    std::fs::write(&fifo, "go\n").unwrap();
    until_recorded(&mut c, &s, &running);
    assert_eq!(read_all(&mut c, &s, &running), "released\n");
}
