//! Initialize through the real binary: attach-or-create, binding checks, modes,
//! recovery after an adapter restart, and the state store's files.

use crate::support;

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use support::{Agent, Opts};

fn status(a: &mut Agent, tid: &Value, ws: &Value) -> Value {
    a.call(
        "Initialize",
        json!({"type": "status", "thread_id": tid, "workspace_root": ws}),
    )
}

#[test]
fn first_call_creates_then_attaches_compactly() {
    let mut a = Agent::spawn();
    std::fs::write(
        a.workspace.join("AGENTS.md"),
        "Run make test before committing.",
    )
    .unwrap();
    std::fs::create_dir(a.workspace.join("src")).unwrap();
    std::fs::write(a.workspace.join("src/lib.rs"), "").unwrap();
    let ws = a.ws();
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    let s = &r["structuredContent"];
    assert_eq!(s["status"], "completed");
    assert_eq!(s["data"]["transition"], "created");
    assert_eq!(s["data"]["response_mode"], "full");
    assert_eq!(s["data"]["workspace_root"], ws);
    let tid = s["data"]["thread_id"].as_str().unwrap().to_string();
    assert!(tid.starts_with("ws_project_"), "{tid}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Run make test before committing."), "{text}");
    assert!(text.contains("src/ (1 file)"), "{text}");
    assert!(text.contains(&tid));

    // A repeated first call, even with a different supplied thread_id, attaches.
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": format!("{ws}/."), "thread_id": "release_0_2_333"}),
    );
    let s = &r["structuredContent"];
    assert_eq!(s["data"]["transition"], "attached_existing");
    assert_eq!(s["data"]["response_mode"], "compact");
    assert_eq!(s["data"]["thread_id"], tid.as_str());
    assert!(
        !r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Run make test")
    );
}

#[test]
fn every_later_call_checks_the_pair() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let (tid, ws) = (
        s["data"]["thread_id"].clone(),
        s["data"]["workspace_root"].clone(),
    );
    assert_eq!(
        status(&mut a, &tid, &ws)["structuredContent"]["data"]["transition"],
        "status"
    );

    let r = a.call(
        "Initialize",
        json!({"type": "status", "workspace_root": ws}),
    );
    let s = &r["structuredContent"];
    assert_eq!(
        (r["isError"].clone(), s["status"].clone()),
        (json!(true), json!("needs_initialize"))
    );
    assert_eq!(s["nextAction"]["tool"], "Initialize");
    assert_eq!(s["nextAction"]["arguments"]["type"], "first_call");
    assert_eq!(s["nextAction"]["arguments"]["workspace_root"], ws);

    let r = a.call(
        "Initialize",
        json!({"type": "reset_shell", "thread_id": tid}),
    );
    assert_eq!(r["structuredContent"]["status"], "needs_initialize");

    let other = a.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let r = status(&mut a, &tid, &json!(other.to_str().unwrap()));
    let s = &r["structuredContent"];
    assert_eq!(s["status"], "conflict");
    assert_eq!(s["errorCode"], "session_binding_conflict");
    assert_eq!(s["nextAction"]["arguments"]["workspace_root"], ws);

    let r = status(&mut a, &json!("ws_project_000000000000"), &ws);
    assert_eq!(r["structuredContent"]["status"], "needs_initialize");
}

#[test]
fn modes_change_explicitly_and_code_writer_needs_allowlists() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let (tid, ws) = (
        s["data"]["thread_id"].clone(),
        s["data"]["workspace_root"].clone(),
    );
    assert_eq!(s["data"]["mode"]["name"], "wcgw");
    let r = a.call(
        "Initialize",
        json!({"type": "user_asked_mode_change", "thread_id": tid, "workspace_root": ws, "mode": "architect"}),
    );
    assert_eq!(r["structuredContent"]["data"]["transition"], "mode_changed");
    assert_eq!(
        status(&mut a, &tid, &ws)["structuredContent"]["data"]["mode"]["name"],
        "architect"
    );

    let r = a.call(
        "Initialize",
        json!({"type": "user_asked_mode_change", "thread_id": tid, "workspace_root": ws, "mode": "code_writer"}),
    );
    assert_eq!(r["structuredContent"]["errorCode"], "invalid_tool_input");
    let r = a.call(
        "Initialize",
        json!({"type": "user_asked_mode_change", "thread_id": tid, "workspace_root": ws, "mode": "code_writer",
               "allowed_commands": ["cargo", "ls"], "allowed_globs": ["src/**"]}),
    );
    let m = &r["structuredContent"]["data"]["mode"];
    assert_eq!(m["name"], "code_writer");
    assert_eq!(m["allowed_commands"], json!(["cargo", "ls"]));
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws, "allowed_globs": ["x"]}),
    );
    assert_eq!(r["structuredContent"]["errorCode"], "invalid_tool_input");
    // A repeated first call with a mode is a non-destructive mode transition.
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws, "mode": "wcgw"}),
    );
    assert_eq!(
        r["structuredContent"]["data"]["transition"],
        "attached_existing"
    );
    assert_eq!(r["structuredContent"]["data"]["mode_changed"], true);
}

#[test]
fn changing_workspace_in_place_fails_closed() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let tid = s["data"]["thread_id"].clone();
    let other = a.dir.path().join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let r = a.call(
        "Initialize",
        json!({"type": "user_asked_change_workspace", "thread_id": tid, "workspace_root": other.to_str().unwrap()}),
    );
    let s = &r["structuredContent"];
    assert_eq!(s["errorCode"], "workspace_change_requires_new_session");
    assert_eq!(s["retryable"], false);
    assert_eq!(s["nextAction"]["arguments"]["type"], "first_call");
}

#[test]
fn bindings_survive_an_adapter_restart() {
    let mut first = Agent::spawn();
    let s = first.first_call();
    let (tid, ws) = (
        s["data"]["thread_id"].clone(),
        s["data"]["workspace_root"].clone(),
    );
    let state = first.state.clone();
    let workspace = first.workspace.clone();
    // SIGKILL: no chance to flush anything that was not already durable.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let mut second = Agent::spawn_with(Opts {
        state: Some(state.clone()),
        workspace: Some(workspace.clone()),
        ..Default::default()
    });
    let r = second.call(
        "Initialize",
        json!({"type": "reset_shell", "thread_id": tid, "workspace_root": ws}),
    );
    let s = &r["structuredContent"];
    assert_eq!(s["status"], "completed", "{r}");
    assert_eq!(s["data"]["initialize_recovered_missing_session"], true);
    assert_eq!(s["data"]["transition"], "reset");
    // Now live in this adapter: no second recovery.
    let r = status(&mut second, &tid, &ws);
    assert_eq!(
        r["structuredContent"]["data"]["initialize_recovered_missing_session"],
        false
    );
    // A workspace change is still refused after recovery.
    let other = first.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let r = second.call(
        "Initialize",
        json!({"type": "user_asked_change_workspace", "thread_id": tid, "workspace_root": other.to_str().unwrap()}),
    );
    assert_eq!(
        r["structuredContent"]["errorCode"],
        "workspace_change_requires_new_session"
    );
    // A first call in a third adapter attaches to the stored binding.
    let mut third = Agent::spawn_with(Opts {
        state: Some(state),
        workspace: Some(workspace),
        ..Default::default()
    });
    let s = third.first_call();
    assert_eq!(s["data"]["transition"], "attached_existing");
    assert_eq!(s["data"]["thread_id"], tid);
}

#[test]
fn state_store_is_private_sqlite_in_wal_mode() {
    let mut a = Agent::spawn();
    a.first_call();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&a.state), 0o700);
    let db = a.state.join("winx.db");
    assert_eq!(mode(&db), 0o600);
    let wal = a.state.join("winx.db-wal");
    assert!(wal.exists(), "WAL file present while the adapter runs");
    assert_eq!(mode(&wal), 0o600);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn first_call_without_workspace_uses_a_private_scratch_session() {
    let mut a = Agent::spawn();
    let r = a.call("Initialize", json!({"type": "first_call"}));
    let s = &r["structuredContent"];
    assert_eq!(s["status"], "completed", "{r}");
    let ws = s["data"]["workspace_root"].as_str().unwrap();
    assert!(
        ws.starts_with(a.state.canonicalize().unwrap().to_str().unwrap()),
        "{ws}"
    );
    let again = a.call("Initialize", json!({"type": "first_call"}));
    assert_eq!(
        again["structuredContent"]["data"]["thread_id"],
        s["data"]["thread_id"]
    );
}

#[test]
fn server_instructions_reach_the_handshake_and_initialize() {
    let mut a = Agent::spawn_with(Opts {
        env: &[("WINX_SERVER_INSTRUCTIONS", "Always run cargo fmt.")],
        ..Default::default()
    });
    let r = a.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
    );
    assert!(
        r["result"]["instructions"]
            .as_str()
            .unwrap()
            .ends_with("Always run cargo fmt.")
    );
    let ws = a.ws();
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Always run cargo fmt.")
    );
}
