//! The guardian with a real bash on a real PTY, driven through its socket.

use super::*;
use crate::ipc::GuardianClient;
use crate::wire::guardian::{ActionResult, GuardianError, ProcessStatus, Request, Response, Wait};
use std::time::Duration;

struct Fixture {
    _tmp: tempfile::TempDir,
    client: GuardianClient,
    ws: String,
    socket: std::path::PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.client.call(&Request::Shutdown, Duration::from_secs(5));
    }
}

/// A guardian on a thread, called through its socket (as winxd's guardians are).
fn start() -> Fixture {
    start_embedded(false)
}

/// A guardian on a thread, called through its socket or, for what it serves that way,
/// in process (as the embedded runtime calls it).
fn start_embedded(in_process: bool) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap().to_string_lossy().into_owned();
    let (program, dialect) = shell::resolve("bash", "/usr/bin:/bin").unwrap();
    let spec = ShellSpec {
        program,
        dialect,
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), ws.clone()),
        ],
        workspace: ws.clone(),
        session_dir: tmp.path().join("session"),
        labels: Default::default(),
        temp_dir: None,
    };
    let socket = tmp.path().join("g.sock");
    let lp = spawn_embedded(spec, &socket).unwrap();
    let client = GuardianClient::new(&socket);
    Fixture {
        client: match in_process {
            true => client.in_process(std::sync::Arc::new(lp)),
            false => client,
        },
        _tmp: tmp,
        ws,
        socket,
    }
}

fn wait(ms: u64) -> Wait {
    Wait {
        timeout_ms: ms,
        settle_ms: None,
    }
}

fn run(f: &Fixture, cmd: &str) -> ActionResult {
    match run_waiting(f, cmd, 10_000).unwrap() {
        Response::Action(a) => a,
        other => panic!("{other:?}"),
    }
}

#[test]
fn runs_commands_with_exit_codes_and_cwd() {
    let f = start();
    let r = run(&f, "echo hello");
    assert_eq!(r.state.process_status, ProcessStatus::Exited);
    assert_eq!(r.state.exit_code, Some(0));
    assert_eq!(r.output.replace('\r', ""), "hello\n");
    assert_eq!(r.state.cwd, f.ws);
    let r = run(&f, "false");
    assert_eq!(r.state.exit_code, Some(1));
    let r = run(&f, "cd /tmp && pwd");
    assert_eq!(r.state.cwd, "/tmp");
    let fake = run(&f, "printf '\\033]6973;0000;0;/fake\\007'; echo done");
    assert_eq!(fake.state.cwd, "/tmp");
    assert!(fake.output.contains("done"));
}

#[test]
fn a_run_whose_expectation_no_longer_holds_is_not_run() {
    use crate::wire::guardian::Expect;
    let f = start();
    let snap = match f.client.call(&Request::Snapshot, Duration::from_secs(5)) {
        Ok(Response::Snapshot(s)) => s,
        other => panic!("{other:?}"),
    };
    let marker = format!("{}/ran", f.ws);
    let run_expecting = |expect: Expect| Request::Run {
        command: format!("touch {marker}"),
        background: false,
        wait: wait(10_000),
        scope: None,
        expect: Some(expect),
    };
    let moved = Expect {
        cwd: "/elsewhere".into(),
        ..Expect::of(&snap)
    };
    let other_guardian = Expect {
        created_at_ms: snap.created_at_ms - 1,
        ..Expect::of(&snap)
    };
    for stale in [moved, other_guardian] {
        match f
            .client
            .call(&run_expecting(stale), Duration::from_secs(10))
        {
            Ok(Response::Stale(now)) => assert_eq!(now.cwd, f.ws),
            other => panic!("{other:?}"),
        }
        assert!(!std::path::Path::new(&marker).exists(), "nothing ran");
    }
    match f
        .client
        .call(&run_expecting(Expect::of(&snap)), Duration::from_secs(10))
    {
        Ok(Response::Action(r)) => assert_eq!(r.state.exit_code, Some(0)),
        other => panic!("{other:?}"),
    }
    assert!(std::path::Path::new(&marker).exists());
}

fn run_waiting(
    f: &Fixture,
    cmd: &str,
    timeout_ms: u64,
) -> Result<Response, crate::ipc::ClientError> {
    let req = Request::Run {
        command: cmd.into(),
        background: false,
        wait: wait(timeout_ms),
        scope: None,
        expect: None,
    };
    f.client.call(&req, Duration::from_millis(timeout_ms))
}

/// With the socket moved away, what a command's path asks still works (a foreground
/// command, its status, its input, the session's snapshot): none of it touched the socket.
#[test]
fn an_embedded_guardian_serves_a_commands_path_in_process() {
    let f = start_embedded(true);
    let away = f.socket.with_extension("away");
    std::fs::rename(&f.socket, &away).unwrap();
    let r = run(&f, "echo hello");
    assert_eq!(r.state.exit_code, Some(0));
    assert_eq!(r.output.replace('\r', ""), "hello\n");
    assert_eq!(run(&f, "false").state.exit_code, Some(1));
    match f.client.call(&Request::Snapshot, Duration::from_secs(5)) {
        Ok(Response::Snapshot(s)) => assert_eq!(s.cwd, f.ws),
        other => panic!("{other:?}"),
    }
    let Ok(Response::Action(r)) = run_waiting(&f, "read x; echo got $x", 0) else {
        panic!("no answer");
    };
    assert_eq!(r.state.process_status, ProcessStatus::Running);
    let status = Request::Status {
        bg_id: None,
        wait: wait(0),
    };
    match f.client.call(&status, Duration::ZERO) {
        Ok(Response::Action(r)) => assert_eq!(r.state.process_status, ProcessStatus::Running),
        other => panic!("{other:?}"),
    }
    let input = Request::Input {
        bytes: b"hello\n".to_vec(),
        bg_id: None,
        wait: wait(10_000),
    };
    match f.client.call(&input, Duration::from_secs(10)) {
        Ok(Response::Action(r)) => {
            assert_eq!(r.state.exit_code, Some(0));
            assert!(r.output.contains("got hello"), "{:?}", r.output);
        }
        other => panic!("{other:?}"),
    }
    // Everything else still goes over the socket.
    let read = Request::Read {
        offset: 0,
        wait: wait(0),
    };
    let answer = f.client.call(&read, Duration::from_secs(5));
    assert!(answer.is_err(), "{answer:?}");
    std::fs::rename(&away, &f.socket).unwrap();
    assert!(matches!(
        f.client.call(&read, Duration::from_secs(5)),
        Ok(Response::Output { .. })
    ));
}

/// A caller's wait ends on its own deadline, and a second foreground command is refused
/// while the first runs, exactly as over the socket.
#[test]
fn an_in_process_wait_ends_on_time_and_one_command_runs_at_once() {
    let f = start_embedded(true);
    // A first command, so the journals' idle-time work (which makes the loop look
    // without waiting) is done when the silent one starts.
    run(&f, "true");
    let clock = crate::deadline::Stopwatch::start();
    let Ok(Response::Action(r)) = run_waiting(&f, "sleep 30", 300) else {
        panic!("no answer");
    };
    assert_eq!(r.state.process_status, ProcessStatus::Running);
    assert!(
        clock.elapsed() < Duration::from_secs(10),
        "{:?}",
        clock.elapsed()
    );
    match run_waiting(&f, "echo second", 0) {
        Ok(Response::Error(GuardianError::CommandAlreadyRunning { .. })) => {}
        other => panic!("{other:?}"),
    }
}

/// A command started in process wakes a watcher waiting on the socket, at once.
#[test]
fn a_command_started_in_process_answers_a_socket_watcher() {
    let f = start_embedded(true);
    let seq = f.client.facts(0, Duration::ZERO, u64::MAX).unwrap().seq;
    let watcher = GuardianClient::new(&f.socket);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let watching = std::thread::spawn(move || {
        let _ = tx.send(watcher.facts(seq, Duration::from_secs(20), u64::MAX));
    });
    // A silent command with a wait of 0: no output wakes the loop's thread, so the
    // watcher (when its watch was in before the command) is answered by the caller.
    let Ok(Response::Action(r)) = run_waiting(&f, "sleep 30", 0) else {
        panic!("no answer");
    };
    assert_eq!(r.state.process_status, ProcessStatus::Running);
    let facts = rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert!(facts.seq > seq);
    watching.join().unwrap();
}

/// A caller waiting in process when the guardian ends is told at once, not at the end
/// of its wait.
#[test]
fn an_in_process_caller_hears_the_guardian_end() {
    let f = start_embedded(true);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let client = f.client.clone();
    let caller = std::thread::spawn(move || {
        let req = Request::Run {
            command: "sleep 60".into(),
            background: false,
            wait: wait(60_000),
            scope: None,
            expect: None,
        };
        let _ = tx.send(client.call(&req, Duration::from_secs(60)));
    });
    // Synchronised on the guardian's own account of the command (a long-poll on its
    // activity), not on time.
    let mut seq = 0;
    loop {
        let facts = f
            .client
            .facts(seq, Duration::from_secs(10), u64::MAX)
            .unwrap();
        assert!(facts.seq > seq, "the command never started");
        if !facts.executions.is_empty() {
            break;
        }
        seq = facts.seq;
    }
    let clock = crate::deadline::Stopwatch::start();
    let _ = f.client.call(&Request::Shutdown, Duration::from_secs(5));
    let answer = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(
        clock.elapsed() < Duration::from_secs(15),
        "{:?}",
        clock.elapsed()
    );
    match answer {
        Ok(Response::Action(_)) | Err(crate::ipc::ClientError::Gone(_)) => {}
        other => panic!("{other:?}"),
    }
    caller.join().unwrap();
}
