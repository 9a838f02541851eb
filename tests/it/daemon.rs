//! The daemon runtime: winxd and forked guardians survive the adapter and each other.

use crate::support;

use serde_json::json;
use support::tasks::{Gate, q};
use support::{Agent, Opts, processes_mentioning, restart_adapter, text};

/// The socket of the agent's only guardian.
fn guardian_socket(a: &Agent) -> std::path::PathBuf {
    std::fs::read_dir(a.dir.path().join("run/winx/g"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("a guardian socket")
}

fn winxd_pids(a: &Agent) -> Vec<i32> {
    processes_mentioning(&a.dir.path().join("run/winx/winxd.sock"))
}

#[test]
fn the_shell_survives_an_adapter_sigkill() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let pid = s["data"]["shell"]["pid"].clone();
    a.bash(
        &s,
        json!({"command": "cd /tmp && export WINX_TEST_MARK=kept"}),
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let mut b = restart_adapter(&a, "daemon");
    let again = b.first_call();
    assert_eq!(again["data"]["shell"]["pid"], pid, "{again}");
    assert_eq!(again["data"]["shell"]["cwd"], "/tmp");
    let r = b.bash(&again, json!({"command": "echo $$ $WINX_TEST_MARK"}));
    assert!(
        text(&r).starts_with(&format!("{pid} kept\n")),
        "{}",
        text(&r)
    );
    drop(b);
}

#[test]
fn a_running_command_keeps_running_across_adapters() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    // The command cannot finish before the restart: it waits on a gate opened only after.
    let gate = Gate::new(&a);
    let r = a.bash_with(
        &s,
        json!({"command": format!("read x < {}; echo finished-$x", q(&gate.0))}),
        json!({"wait_for_seconds": 0}),
    );
    assert_eq!(r["structuredContent"]["status"], "running");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let mut b = restart_adapter(&a, "daemon");
    let again = b.first_call();
    assert!(again["data"]["shell"]["running"].is_string(), "{again}");
    gate.open("late");
    let r = b.bash_with(
        &again,
        json!({"status_check": true}),
        json!({"wait_for_seconds": 10}),
    );
    assert!(text(&r).contains("finished-late"), "{}", text(&r));
    assert_eq!(r["structuredContent"]["data"]["exit_code"], 0);
}

#[test]
fn guardians_survive_winxd_and_winxd_is_respawned() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let pid = s["data"]["shell"]["pid"].clone();
    let daemons = winxd_pids(&a);
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemons[0]),
        nix::sys::signal::Signal::SIGKILL,
    );
    // The existing session is reached directly through its guardian socket.
    let r = a.bash(&s, json!({"command": "echo $$"}));
    assert!(text(&r).starts_with(&format!("{pid}\n")));
    // A new session needs winxd: the adapter starts a fresh one.
    let other = a.dir.path().join("second");
    std::fs::create_dir(&other).unwrap();
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": other.to_str().unwrap()}),
    );
    assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    let after = winxd_pids(&a);
    assert_eq!(after.len(), 1);
    assert_ne!(after[0], daemons[0]);
}

#[test]
fn racing_adapters_converge_on_one_daemon() {
    let a = Agent::spawn();
    let run = a.dir.path().join("run");
    let mut agents: Vec<Agent> = (0..4)
        .map(|_| {
            Agent::spawn_with(Opts {
                env: &[("XDG_RUNTIME_DIR", run.to_str().unwrap())],
                ..Default::default()
            })
        })
        .collect();
    for ag in &mut agents {
        let ws = ag.ws();
        ag.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "Initialize", "arguments": {"type": "first_call", "workspace_root": ws}}}));
    }
    for ag in &agents {
        let r = ag.recv();
        assert_eq!(
            r["result"]["structuredContent"]["status"], "completed",
            "{r}"
        );
    }
    assert_eq!(winxd_pids(&a).len(), 1);
    drop(agents);
}

#[test]
fn a_killed_guardian_is_reported_and_reset_recovers() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let guardians = processes_mentioning(&a.dir.path().join("run/winx/g"));
    assert_eq!(guardians.len(), 1, "{guardians:?}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(guardians[0]),
        nix::sys::signal::Signal::SIGKILL,
    );
    let r = a.bash(&s, json!({"command": "echo hi"}));
    assert_eq!(
        r["structuredContent"]["errorCode"], "shell_unavailable",
        "{r}"
    );
    assert_eq!(
        r["structuredContent"]["nextAction"]["arguments"]["type"],
        "reset_shell"
    );
    let tid = s["data"]["thread_id"].clone();
    let ws = s["data"]["workspace_root"].clone();
    let r = a.call(
        "Initialize",
        json!({"type": "reset_shell", "thread_id": tid, "workspace_root": ws}),
    );
    assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    let r = a.bash(&s, json!({"command": "echo back"}));
    assert!(text(&r).starts_with("back\n"));
}

#[test]
fn every_process_ends_with_the_test() {
    let dir;
    {
        let mut a = Agent::spawn();
        a.first_call();
        assert!(!processes_mentioning(a.dir.path()).is_empty());
        dir = a.dir.path().to_path_buf();
    }
    assert!(processes_mentioning(&dir).is_empty());
}

#[test]
fn background_commands_are_limited_across_sessions() {
    let mut a = Agent::spawn();
    let mut sessions = vec![a.first_call()];
    for i in 0..4 {
        let ws = a.dir.path().join(format!("w{i}"));
        std::fs::create_dir(&ws).unwrap();
        let r = a.call(
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws.to_str().unwrap()}),
        );
        sessions.push(r["structuredContent"].clone());
    }
    for s in &sessions[..4] {
        for _ in 0..8 {
            let r = a.bash(s, json!({"command": "sleep 100", "is_background": true}));
            assert_eq!(r["structuredContent"]["status"], "running", "{r}");
        }
    }
    // 32 are running across four sessions: the fifth session gets none.
    let r = a.bash(
        &sessions[4],
        json!({"command": "sleep 100", "is_background": true}),
    );
    assert_eq!(
        r["structuredContent"]["errorCode"], "background_limit",
        "{r}"
    );
    // Ending one session frees its slots for the others.
    let tid = sessions[0]["data"]["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    a.op_json(&["kill", &tid]);
    let r = a.bash(
        &sessions[4],
        json!({"command": "sleep 100", "is_background": true}),
    );
    assert_eq!(r["structuredContent"]["status"], "running", "{r}");
}

#[test]
fn silent_connections_never_stall_a_guardian() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let sock = guardian_socket(&a);
    // Connections that never say hello (a client that died mid-connect, a stray probe).
    let silent: Vec<_> = (0..3)
        .map(|_| std::os::unix::net::UnixStream::connect(&sock).unwrap())
        .collect();
    // The session answers at once; before, each silent client stalled the guardian's
    // loop for its 5 s hello timeout.
    let t0 = std::time::Instant::now();
    let r = a.bash(&s, json!({"command": "echo still-here"}));
    assert!(text(&r).contains("still-here"), "{r}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(3),
        "stalled for {:?}",
        t0.elapsed()
    );
    drop(silent);
}

#[test]
fn a_reader_that_stops_reading_never_stalls_a_guardian() {
    use std::io::Write;
    let mut a = Agent::spawn();
    let s = a.first_call();
    // About 390 KB of transcript: more than a socket buffer holds in one answer.
    let r = a.bash(&s, json!({"command": "seq 1 70000"}));
    assert_eq!(r["structuredContent"]["data"]["exit_code"], 0, "{r}");
    let sock = guardian_socket(&a);
    // An `attach`-like reader asks for the whole transcript, then never reads the answer.
    let frame = |v: serde_json::Value| {
        let body = serde_json::to_vec(&v).unwrap();
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&body);
        f
    };
    let mut stalled = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let hello =
        json!({"protocol": winx::wire::guardian::PROTOCOL, "role": "operator", "build": "test"});
    let mut out = frame(hello);
    out.extend(frame(
        json!({"op": "read", "offset": 0, "wait": {"timeout_ms": 0, "settle_ms": null}}),
    ));
    stalled.write_all(&out).unwrap();
    // The session answers at once; before, writing the whole transcript to the paused
    // reader blocked the guardian's loop until its 5 s write timeout.
    let t0 = std::time::Instant::now();
    let r = a.bash(&s, json!({"command": "echo still-served"}));
    assert!(text(&r).contains("still-served"), "{r}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(3),
        "stalled for {:?}",
        t0.elapsed()
    );
    drop(stalled);
}

/// Issue item 7: a winxd killed while its guardians still answer is brought back by the
/// next adapter call, off that call's path.
#[test]
fn a_killed_winxd_is_brought_back_by_the_next_call() {
    use support::wait::{Deadline, eventually};
    let mut a = Agent::spawn();
    let s = a.first_call();
    let pid = s["data"]["shell"]["pid"].clone();
    let daemons = winxd_pids(&a);
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemons[0]),
        nix::sys::signal::Signal::SIGKILL,
    );
    eventually(
        Deadline::hard("winxd gone"),
        "the killed winxd is gone",
        || winxd_pids(&a),
        |p| p.is_empty(),
    );
    // A new adapter reaches the session straight through its guardian socket...
    a.kill9();
    let mut b = restart_adapter(&a, "daemon");
    let started = std::time::Instant::now();
    let again = b.first_call();
    let took = started.elapsed();
    assert_eq!(again["data"]["shell"]["pid"], pid, "{again}");
    // ...without waiting for winxd's start (a respawn on the call's path would add the
    // daemon's start to it; the attach itself is a snapshot from guardian memory).
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    // ...and winxd is alive again without anyone creating a session.
    let after = eventually(
        Deadline::hard("winxd respawned"),
        "a new winxd runs",
        || winxd_pids(&a),
        |p| p.len() == 1,
    );
    assert_ne!(after[0], daemons[0]);
    // Its process exists before its socket answers: wait for doctor to reach it.
    let d = eventually(
        Deadline::hard("winxd answers"),
        "doctor reaches the new winxd",
        || b.op_json(&["doctor"]),
        |d| d["daemon"]["running"] == true,
    );
    assert_eq!(d["guardians"]["count"], 1, "{d}");
}

/// Issue item 8: winxd of another build is replaced (only winxd: the shell survives), and
/// the guardian of the other build is flagged by `list` and `doctor` and keeps serving.
#[test]
fn a_winxd_of_another_build_is_replaced_and_older_guardians_are_flagged() {
    use support::wait::{Deadline, eventually};
    let old = "0.0.0-drill (rev 000000000000)";
    let mut a = Agent::spawn_env(&[("WINX_BUILD_IDENTITY_OVERRIDE", old)]);
    let s = a.first_call();
    let pid = s["data"]["shell"]["pid"].clone();
    let old_daemons = winxd_pids(&a);
    assert_eq!(old_daemons.len(), 1, "{old_daemons:?}");
    a.kill9();
    // The upgraded adapter: same runtime directory, its own (real) build.
    let mut b = restart_adapter(&a, "daemon");
    let again = b.first_call();
    assert_eq!(again["data"]["shell"]["pid"], pid, "{again}");
    let now = eventually(
        Deadline::hard("winxd replaced"),
        "winxd of the other build is replaced",
        || winxd_pids(&a),
        |p| p.len() == 1 && p[0] != old_daemons[0],
    );
    assert_eq!(now.len(), 1);
    // Its process exists before its socket answers: wait for doctor to reach it.
    let d = eventually(
        Deadline::hard("winxd answers"),
        "doctor reaches the new winxd",
        || b.op_json(&["doctor"]),
        |d| d["daemon"]["running"] == true,
    );
    assert_eq!(d["daemon"]["mixed_build"], false, "{d}");
    assert_eq!(d["guardians"]["count"], 1, "{d}");
    assert_eq!(d["guardians"]["mixed_builds"], true, "{d}");
    assert_eq!(d["guardians"]["builds"], json!([old]), "{d}");
    let list = b.op_json(&["list"]);
    assert_eq!(list[0]["build"], old, "{list}");
    assert_eq!(list[0]["build_mismatch"], true, "{list}");
    // The old guardian keeps serving the same shell.
    let r = b.bash(&again, json!({"command": "echo $$"}));
    assert!(text(&r).starts_with(&format!("{pid}\n")), "{}", text(&r));
}

/// Concurrent winxd starts on one socket: every one that reports "another winxd serves"
/// (exits 0 at once) must leave a socket that answers. The lock was taken before the
/// socket was bound, so a loser could exit in between and its adapter found no socket
/// (`daemon_unreachable`, seen when the adapter's winxd check raced its first Initialize).
#[test]
fn a_losing_winxd_start_exits_only_once_the_winner_answers() {
    use std::os::unix::net::UnixStream;
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("winx/winxd.sock");
        let env = support::isolated_env(dir.path(), &dir.path().join("state"), dir.path());
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut pids = KillOnDrop(Vec::new());
        for _ in 0..6 {
            let mut child = support::winxd_command()
                .arg("--socket")
                .arg(&socket)
                .env_clear()
                .envs(env.iter().cloned())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            pids.0.push(child.id() as i32);
            let (tx, socket) = (tx.clone(), socket.clone());
            std::thread::spawn(move || {
                let status = child.wait().unwrap();
                // Exited of its own accord: it lost the lock; the winner must answer now.
                if status.success() {
                    let _ = tx.send(UnixStream::connect(&socket).map(drop));
                }
            });
        }
        for _ in 0..5 {
            let r = rx
                .recv_timeout(support::HARD_TIMEOUT)
                .expect("a loser exits");
            assert!(
                r.is_ok(),
                "round {round}: a loser exited before the winner's socket: {r:?}"
            );
        }
        drop(pids);
    }
}

/// Processes killed when the test ends, a failed assertion included.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
