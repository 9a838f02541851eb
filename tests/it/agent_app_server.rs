//! Managed Codex app-server targets (issue 15 item 5) through the real binaries: `agent
//! app-server start` runs a detached host with the fake app-server
//! (`tests/fake/fake-codex-app-server`, which logs every `turn/start` it receives);
//! `agent catalog|admit|request …` reach it exactly as they reach PTY targets.

use crate::support;

use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;
use support::wait::{Deadline, eventually};
use support::{command, isolated_env, kill_processes_mentioning, manifest_dir};

const R1: &str = "fe57dc90-994e-4e73-b09c-fac483d9f05b";
const R2: &str = "0b5e4c36-7c1a-4d8e-9f4e-1a2b3c4d5e6f";
const R3: &str = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f";
const R4: &str = "11111111-2222-4333-8444-555555555555";
const R5: &str = "22222222-3333-4444-8555-666666666666";
const R6: &str = "33333333-4444-4555-8666-777777777777";

/// One host with its fake app-server, in a private state and runtime directory.
struct App {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    log: PathBuf,
    started: Value,
}

impl App {
    fn start() -> App {
        let dir = tempfile::tempdir().unwrap();
        let (home, state, run) = (
            dir.path().join("home"),
            dir.path().join("state"),
            dir.path().join("run"),
        );
        std::fs::create_dir(&home).unwrap();
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let env = isolated_env(&home, &state, &run);
        let log = dir.path().join("turns.log");
        let (started, ok) = start_host(&env, dir.path(), &log);
        assert!(ok, "{started}");
        App {
            dir,
            env,
            log,
            started,
        }
    }

    fn agent(&self, args: &[&str]) -> (Value, i32) {
        let out = command(&self.env).arg("agent").args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {text:?}"));
        (v, out.status.code().unwrap_or(-1))
    }

    fn catalog(&self) -> Vec<Value> {
        let (v, code) = self.agent(&["catalog"]);
        assert_eq!(code, 0, "{v}");
        v.as_array().cloned().unwrap_or_default()
    }

    fn agent_in(&self, state: &str) -> Value {
        let d = Deadline::after("app-server target state", Duration::from_secs(20));
        let all = eventually(
            d,
            &format!("the target is {state}"),
            || self.catalog(),
            |v| v.len() == 1 && v[0]["state"] == state,
        );
        all[0].clone()
    }

    fn admit(&self, agent: &Value, id: &str, text: &str, extra: &[&str]) -> (Value, i32) {
        let mut args = vec![
            "admit",
            agent["agent_id"].as_str().unwrap(),
            "--incarnation",
            agent["incarnation"].as_str().unwrap(),
            "--request-id",
            id,
        ];
        args.extend_from_slice(extra);
        args.push(text);
        self.agent(&args)
    }

    /// The terminal event of request `id`, once it is in the stream.
    fn event(&self, id: &str) -> Value {
        let d = Deadline::after("terminal event", Duration::from_secs(20));
        let events = eventually(
            d,
            &format!("a terminal event for {id}"),
            || {
                let out = command(&self.env)
                    .args(["agent", "request", "watch", "--after", "0", "--once"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|e| e["request_id"] == id)
                    .collect::<Vec<_>>()
            },
            |v| !v.is_empty(),
        );
        assert_eq!(events.len(), 1, "{events:?}");
        events[0].clone()
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The pid of the host (`host`) or of the fake app-server.
    fn pid(&self, host: bool) -> i32 {
        let pids: Vec<i32> = support::processes_mentioning(self.dir.path())
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains("fake-codex-app-server") && c.contains("--runtime-dir") == host
                })
            })
            .collect();
        assert_eq!(pids.len(), 1, "one process (host: {host}): {pids:?}");
        pids[0]
    }

    fn signal(&self, host: bool, sig: i32) {
        // SAFETY: kill(2) passes no memory.
        unsafe { nix::libc::kill(self.pid(host), sig) };
    }
}

/// `agent app-server start` in `env`, the fake app-server logging to `log`: the line it
/// printed and whether it succeeded.
fn start_host(
    env: &[(String, String)],
    cwd: &std::path::Path,
    log: &std::path::Path,
) -> (Value, bool) {
    let fake = manifest_dir().join("tests/fake/fake-codex-app-server");
    let out = command(env)
        .args(["agent", "app-server", "start", "--cwd"])
        .arg(cwd)
        .args(["--command", "python3"])
        .arg(&fake)
        .arg(log)
        .output()
        .unwrap();
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    (v, out.status.success())
}

/// The names in `dir` (none when it does not exist).
fn names(dir: &std::path::Path) -> Vec<String> {
    let all = std::fs::read_dir(dir).into_iter().flatten().flatten();
    all.map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

impl Drop for App {
    fn drop(&mut self) {
        kill_processes_mentioning(self.dir.path());
    }
}

#[test]
fn a_return_final_request_gets_its_turns_final_once() {
    let app = App::start();
    assert_eq!(app.started["target_kind"], "app_server", "{}", app.started);
    let agent = app.agent_in("idle");
    assert_eq!(agent["target_kind"], "app_server", "{agent}");
    assert_eq!(agent["provider"], "codex");
    assert_eq!(agent["observer_status"], "attached");
    assert_eq!(agent["return_final_ready"], true);
    assert_eq!(agent["agent_id"], app.started["agent_id"]);
    assert!(
        agent["thread_id"].as_str().unwrap().starts_with("thr_"),
        "{agent}"
    );
    assert!(
        agent["session_id"].as_str().unwrap().starts_with("ses_"),
        "{agent}"
    );
    let (r, code) = app.admit(&agent, R1, "complete phases 2 and 3", &["--return-final"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("accepted"), 0),
        "{r}"
    );
    assert_eq!(r["prompt_written"], true);
    assert_eq!(r["reply_pending"], true);
    assert_eq!(r["correlation_source"], "app_server_events");
    assert_eq!(r["app_server_thread_id"], agent["thread_id"]);
    assert_eq!(r["app_server_session_id"], agent["session_id"]);
    assert!(r["armed_cursor"].as_u64().unwrap() > 0, "{r}");
    let e = app.event(R1);
    assert_eq!(e["state"], "completed", "{e}");
    assert_eq!(e["final_message"], "final: complete phases 2 and 3");
    assert_eq!(e["provider_turn"], r["provider_turn"], "{e} / {r}");
    // The same request again: its stored receipt, nothing sent.
    let (again, code) = app.admit(&agent, R1, "complete phases 2 and 3", &["--return-final"]);
    assert_eq!(
        (again["replayed"].as_bool(), code),
        (Some(true), 0),
        "{again}"
    );
    assert_eq!(again["armed_cursor"], r["armed_cursor"]);
    let (other, code) = app.admit(&agent, R1, "something else", &["--return-final"]);
    assert_eq!(
        (other["receipt_class"].as_str(), code),
        (Some("invalid"), 2),
        "{other}"
    );
    assert_eq!(app.lines(), ["complete phases 2 and 3"]);
    // The next admission arms after the first turn: its baseline is that turn.
    let agent = app.agent_in("idle");
    assert_eq!(agent["baseline_provider_turn"], e["provider_turn"]);
    let (r, _) = app.admit(&agent, R2, "one-way", &[]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    assert_eq!(r["reply_pending"], false);
    assert_eq!(app.lines(), ["complete phases 2 and 3", "one-way"]);
    // `send` by display name, as for PTY agents.
    let agent = app.agent_in("idle");
    let name = agent["display_name"].as_str().unwrap();
    assert_eq!(
        name,
        format!("app-server/{}", agent["thread_id"].as_str().unwrap())
    );
    let (r, code) = app.agent(&[
        "send",
        name,
        "by name",
        "--return-final",
        "--request-id",
        R3,
    ]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("accepted"), 0),
        "{r}"
    );
    assert_eq!(app.event(R3)["final_message"], "final: by name");
}

/// Each misbehaviour of the bound turn ends as its own terminal state, never as another
/// turn's final.
#[test]
fn the_bound_turn_decides_the_outcome() {
    let app = App::start();
    let cases = [
        (R1, "later work", "completed"),
        (R2, "swap the turn", "indeterminate"),
        (R3, "mismatch me", "indeterminate"),
        (R4, "interrupt it", "aborted"),
        (R5, "fail it", "aborted"),
    ];
    for (id, text, state) in cases {
        let agent = app.agent_in("idle");
        let (r, _) = app.admit(&agent, id, text, &["--return-final"]);
        assert_eq!(r["receipt_class"], "accepted", "{r}");
        let e = app.event(id);
        assert_eq!(e["state"], state, "{text}: {e}");
        if state == "completed" {
            assert_eq!(
                e["final_message"],
                format!("final: {text}"),
                "not the later turn's"
            );
            assert_eq!(e["provider_turn"], r["provider_turn"]);
        } else {
            assert!(e.get("final_message").is_none(), "{e}");
        }
    }
    let (r, code) = app.admit(&app.agent_in("idle"), R6, "reject", &[]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("unavailable"), 3),
        "{r}"
    );
    assert_eq!(r["prompt_written"], false);
}

#[test]
fn a_busy_or_stale_target_is_refused_with_nothing_sent() {
    let app = App::start();
    let agent = app.agent_in("idle");
    let (r, _) = app.admit(&agent, R1, "hold on", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    app.agent_in("busy");
    let (r, code) = app.admit(&agent, R2, "second", &["--return-final"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("busy"), 3),
        "{r}"
    );
    assert_eq!(r["prompt_written"], false);
    let mut stale = agent.clone();
    stale["incarnation"] = json!("0000");
    let (r, code) = app.admit(&stale, R3, "third", &[]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("stale_incarnation"), 3),
        "{r}"
    );
    let (r, _) = app.admit(&agent, R3, "typed", &["--paste", "typed"]);
    assert_eq!(r["receipt_class"], "invalid", "{r}");
    assert_eq!(app.lines(), ["hold on"]);
    app.signal(false, nix::libc::SIGUSR1);
    let e = app.event(R1);
    assert_eq!(e["final_message"], "final: hold on", "{e}");
    // A refused id can be admitted once the target is idle.
    let (r, _) = app.admit(&app.agent_in("idle"), R2, "second", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    assert_eq!(app.event(R2)["final_message"], "final: second");
    assert_eq!(app.lines(), ["hold on", "second"]);
}

#[test]
fn cancel_timeout_and_the_app_server_exiting() {
    let app = App::start();
    let agent = app.agent_in("idle");
    let (r, _) = app.admit(&agent, R1, "forever", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let (x, code) = app.agent(&["request", "cancel", R1]);
    assert_eq!((x["cancelled"].as_bool(), code), (Some(true), 0), "{x}");
    assert_eq!(app.event(R1)["state"], "cancelled");
    drop(app);
    let app = App::start();
    let agent = app.agent_in("idle");
    let (r, _) = app.admit(
        &agent,
        R2,
        "forever",
        &["--return-final", "--final-timeout-ms", "300"],
    );
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    assert_eq!(app.event(R2)["state"], "timed_out");
    drop(app);
    let app = App::start();
    let agent = app.agent_in("idle");
    let (r, _) = app.admit(&agent, R3, "crash now", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let e = app.event(R3);
    assert_eq!(e["state"], "indeterminate", "{e}");
    assert!(e["reason"].as_str().unwrap().contains("exited"), "{e}");
    // The host ends with its app-server and leaves the catalog.
    let d = Deadline::after("host gone", Duration::from_secs(20));
    eventually(
        d,
        "the catalog is empty",
        || app.catalog(),
        |v| v.is_empty(),
    );
}

#[test]
fn a_killed_host_leaves_an_indeterminate_request() {
    let app = App::start();
    let agent = app.agent_in("idle");
    let (r, _) = app.admit(&agent, R1, "forever", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    app.signal(true, nix::libc::SIGKILL);
    let d = Deadline::after("host gone", Duration::from_secs(10));
    let g = eventually(
        d,
        "the request is settled",
        || app.agent(&["request", "get", R1]).0,
        |g| g["state"] == "terminal",
    );
    assert_eq!(g["terminal"]["state"], "indeterminate", "{g}");
    let (r, code) = app.admit(&agent, R2, "again", &["--exact-agent-id"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("unavailable"), 3),
        "{r}"
    );
}

#[test]
fn capabilities_list_app_server_targets() {
    let out = support::run(&["agent", "capabilities"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["target_kinds"]
            .as_array()
            .unwrap()
            .contains(&json!("app_server"))
    );
    assert!(
        v["correlation_sources"]
            .as_array()
            .unwrap()
            .contains(&json!("app_server_events"))
    );
}

/// An MCP caller of the same principal (stdio: `local`, as the CLI) sees the app-server
/// target in its `catalog`, admits to it with `return_final` and reads the final with
/// `request watch`.
#[test]
fn mcp_actions_reach_an_app_server_target() {
    let app = App::start();
    let target = app.agent_in("idle");
    let mut a = support::Agent::spawn_with(support::Opts {
        state: Some(app.dir.path().join("state")),
        ..Default::default()
    });
    let s = a.first_call();
    let call = |a: &mut support::Agent, action: Value| {
        a.call("Agent", support::pair_args(&s, json!({"action": action})))["structuredContent"]
            .clone()
    };
    let c = call(&mut a, json!({"type": "catalog"}));
    let agents = c["data"]["agents"].as_array().cloned().unwrap_or_default();
    let found: Vec<&Value> = agents
        .iter()
        .filter(|x| x["agent_id"] == target["agent_id"])
        .collect();
    assert_eq!(found.len(), 1, "{c}");
    assert_eq!(found[0]["target_kind"], "app_server");
    let r = call(
        &mut a,
        json!({"type": "admit", "target": target["agent_id"],
               "incarnation": target["incarnation"], "request_id": R6,
               "text": "over mcp", "return_final": true}),
    );
    assert_eq!(r["data"]["receipt_class"], "accepted", "{r}");
    assert_eq!(r["data"]["correlation_source"], "app_server_events");
    let w = call(
        &mut a,
        json!({"type": "request", "op": "watch", "timeout_seconds": 20}),
    );
    let e = &w["data"]["events"][0];
    assert_eq!(e["request_id"], R6, "{w}");
    assert_eq!(e["state"], "completed");
    assert_eq!(e["final_message"], "final: over mcp");
    assert_eq!(app.lines(), ["over mcp"]);
}

/// One raw client exchange on the host's admission socket: the reply line, and whether
/// the host closed the connection after it.
fn raw(socket: &std::path::Path, msg: &Value) -> (Value, bool) {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(format!("{msg}\n").as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let reply = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let mut rest = Vec::new();
    let closed = matches!(r.read_to_end(&mut rest), Ok(0));
    (reply, closed)
}

fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.trim().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Issue 36 item 13: the admission socket takes only clients that present the host's
/// secret (a 0600 file beside the socket), and only admissions the store already holds
/// for the target's principal; anything else is refused with nothing written.
#[test]
fn a_raw_client_without_the_secret_or_a_stored_request_writes_nothing() {
    let app = App::start();
    let agent = app.agent_in("idle");
    let socket = PathBuf::from(app.started["socket"].as_str().unwrap());
    let secret_file = socket.with_extension("secret");
    let meta = std::fs::metadata(&secret_file).expect("the host's secret file");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    assert_eq!(secret.len(), 64, "{secret}");
    // A legitimate one-way admission (principal `local`, request R1) goes through.
    let (r, _) = app.admit(&agent, R1, "legit", &[]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    assert_eq!(app.lines(), ["legit"]);
    let agent = app.agent_in("idle");
    let admit = |principal: &str, id: &str, text: &str| {
        json!({"op": "admit", "principal": principal, "request_id": id,
               "incarnation": agent["incarnation"], "text": text, "return_final": false,
               "prompt_sha256": digest(text)})
    };
    let mut wrong = secret.clone().into_bytes();
    wrong[0] = if wrong[0] == b'a' { b'b' } else { b'a' };
    let wrong = String::from_utf8(wrong).unwrap();
    let with = |mut m: Value, s: &str| {
        m["secret"] = json!(s);
        m
    };
    let cases = [
        ("secret", admit("someone-else", R2, "no secret")),
        ("secret", with(admit("local", R2, "wrong secret"), &wrong)),
        ("secret", json!({"op": "status"})),
        (
            "for this app-server target",
            with(admit("someone-else", R1, "legit"), &secret),
        ),
        (
            "no such request in the state store",
            with(admit("local", R3, "unregistered"), &secret),
        ),
        (
            "is delivered already",
            with(admit("local", R1, "legit"), &secret),
        ),
    ];
    for (what, msg) in cases {
        let (reply, closed) = raw(&socket, &msg);
        assert_eq!(reply["outcome"], "unavailable", "{what}: {reply}");
        let detail = reply["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(what), "{what}: {reply}");
        assert!(
            reply.get("armed_cursor").is_none_or(Value::is_null),
            "{what}: {reply}"
        );
        assert!(closed, "{what}: the connection stays open");
    }
    // Only the legitimate turn reached the app-server; the target is idle and admits.
    assert_eq!(app.lines(), ["legit"]);
    let (st, _) = raw(&socket, &with(json!({"op": "status"}), &secret));
    assert_eq!(st["phase"], "idle", "{st}");
    let (r, _) = app.admit(&app.agent_in("idle"), R4, "after", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    assert_eq!(app.event(R4)["final_message"], "final: after");
    assert_eq!(app.lines(), ["legit", "after"]);
}

/// Issue 36 item 13 (review): the files of a host killed by a signal are removed by the
/// next host to start, and a host whose start fails after it wrote its secret (here the
/// bind: the runtime directory is so deep that the socket's path overflows `sun_path`)
/// leaves neither secret nor socket.
#[test]
fn a_failed_or_killed_host_leaves_no_secret_or_socket() {
    let app = App::start();
    let socket = PathBuf::from(app.started["socket"].as_str().unwrap());
    let secret = socket.with_extension("secret");
    assert!(socket.exists() && secret.exists());
    let host = app.pid(true);
    app.signal(true, nix::libc::SIGKILL);
    let d = Deadline::after("host gone", Duration::from_secs(10));
    eventually(
        d,
        "the killed host is gone",
        || std::fs::read_to_string(format!("/proc/{host}/stat")).unwrap_or_default(),
        |st| {
            st.is_empty()
                || st
                    .rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
        },
    );
    assert!(
        socket.exists() && secret.exists(),
        "a killed host leaves them"
    );
    let (next, ok) = start_host(&app.env, app.dir.path(), &app.dir.path().join("next.log"));
    assert!(ok, "{next}");
    assert!(
        !socket.exists() && !secret.exists(),
        "the next host removed them"
    );
    let kept = PathBuf::from(next["socket"].as_str().unwrap());
    assert!(kept.exists() && kept.with_extension("secret").exists());

    let deep = app.dir.path().join("r".repeat(90));
    std::fs::create_dir(&deep).unwrap();
    std::fs::set_permissions(&deep, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let mut env = app.env.clone();
    env.retain(|(k, _)| k != "XDG_RUNTIME_DIR");
    env.push((
        "XDG_RUNTIME_DIR".into(),
        deep.to_string_lossy().into_owned(),
    ));
    let (v, ok) = start_host(&env, app.dir.path(), &app.dir.path().join("deep.log"));
    let error = v["error"].as_str().unwrap_or_default();
    assert!(!ok && error.contains("admission socket"), "{v}");
    assert_eq!(names(&deep.join("winx/app-server")), Vec::<String>::new());
}
