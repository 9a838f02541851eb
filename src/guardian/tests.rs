//! The guardian with a real bash on a real PTY, driven through its socket.

use super::*;
use crate::ipc::GuardianClient;
use crate::wire::guardian::{ActionResult, ProcessStatus, Request, Response, Wait};
use std::time::Duration;

struct Fixture {
    _tmp: tempfile::TempDir,
    client: GuardianClient,
    ws: String,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.client.call(&Request::Shutdown, Duration::from_secs(5));
    }
}

fn start() -> Fixture {
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
    spawn_embedded(spec, &socket).unwrap();
    Fixture {
        client: GuardianClient::new(&socket),
        _tmp: tmp,
        ws,
    }
}

fn wait(ms: u64) -> Wait {
    Wait {
        timeout_ms: ms,
        settle_ms: None,
    }
}

fn run(f: &Fixture, cmd: &str) -> ActionResult {
    let req = Request::Run {
        command: cmd.into(),
        background: false,
        wait: wait(10_000),
        scope: None,
        expect: None,
    };
    match f.client.call(&req, Duration::from_secs(10)).unwrap() {
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
