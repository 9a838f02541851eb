//! Tool policy through the real binary: no argument may start a process for a principal
//! whose policy hides `BashCommand` (stdio `--tool-profile`/`--allow-tool`, HTTP principals).

use crate::support;
use crate::support::http as http_support;

use http_support::{Home, Server, TOKEN, path_str, two_principals};
use serde_json::{Value, json};
use support::{Agent, Opts, pair_args, sc};

/// Every tool that has an argument able to start a process, with a call that uses it.
/// `marker` is created by the process; `file` is the edit's target.
fn process_calls(marker: &str) -> Vec<(&'static str, Value, &'static str)> {
    let verify = format!("touch {marker}");
    vec![
        (
            "FileWriteOrEdit",
            json!({"file_path": "fw.txt", "text_or_search_replace_blocks": "new\n",
                   "verify_command": verify}),
            "fw.txt",
        ),
        (
            "MultiFileEdit",
            json!({"edits": [{"file_path": "mf.txt", "text_or_search_replace_blocks": "new\n"}],
                   "verify_command": verify}),
            "mf.txt",
        ),
        (
            "ApplyPatch",
            json!({"file_path": "ap.txt", "expected_revision": "sha256:0",
                   "patches": [{"start_line": 1, "delete_lines": 0, "replacement": "x"}],
                   "verify_command": verify}),
            "ap.txt",
        ),
        (
            "EditFiles",
            json!({"files": [{"file_path": "ef.txt", "mode": "replace", "content": "new\n"}],
                   "verify_command": verify}),
            "ef.txt",
        ),
        ("VerifyEdit", json!({"verify_command": verify}), ""),
        (
            "BashCommand",
            json!({"action_json": {"command": verify}}),
            "",
        ),
    ]
}

/// The policies under test: every profile, plus allowlists with and without BashCommand.
fn policies() -> Vec<(&'static str, Vec<&'static str>, bool)> {
    let edits_only = [
        "--allow-tool",
        "Initialize",
        "--allow-tool",
        "ReadFiles",
        "--allow-tool",
        "FileWriteOrEdit",
        "--allow-tool",
        "ApplyPatch",
        "--allow-tool",
        "MultiFileEdit",
        "--allow-tool",
        "EditFiles",
    ];
    let edits_and_bash = [
        "--allow-tool",
        "Initialize",
        "--allow-tool",
        "FileWriteOrEdit",
        "--allow-tool",
        "BashCommand",
    ];
    vec![
        ("full", vec!["--tool-profile", "full"], true),
        ("coding", vec!["--tool-profile", "coding"], true),
        ("read-only", vec!["--tool-profile", "read-only"], false),
        ("terminal", vec!["--tool-profile", "terminal"], true),
        ("edits-only", edits_only.to_vec(), false),
        ("edits+bash", edits_and_bash.to_vec(), true),
    ]
}

#[test]
fn no_argument_starts_a_process_without_bash_permission_on_stdio() {
    for (name, args, bash_allowed) in policies() {
        let mut a = Agent::spawn_with(Opts {
            args: &args,
            ..Default::default()
        });
        let s = a.first_call();
        let listed: Vec<String> = a.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        for (i, (tool, mut call, file)) in process_calls("").into_iter().enumerate() {
            let marker = a.workspace.join(format!("pwned-{i}"));
            let verify = format!("touch {}", marker.display());
            match call.get_mut("action_json") {
                Some(action) => action["command"] = json!(verify),
                None => call["verify_command"] = json!(verify),
            }
            call["thread_id"] = s["data"]["thread_id"].clone();
            call["workspace_root"] = s["data"]["workspace_root"].clone();
            let permitted = listed.iter().any(|t| t == tool);
            if permitted && bash_allowed {
                continue; // runs by design; the positive case is checked below
            }
            let r = a.call(tool, call);
            let why = format!("policy {name}, tool {tool}: {r}");
            assert_eq!(r["isError"], true, "{why}");
            assert_eq!(sc(&r)["errorCode"], "policy_blocked", "{why}");
            assert!(!marker.exists(), "a process ran: {why}");
            if !file.is_empty() {
                assert!(!a.workspace.join(file).exists(), "edit committed: {why}");
            }
            if permitted {
                let text = r["content"][0]["text"].as_str().unwrap();
                assert!(
                    text.contains("verify_command") && text.contains("BashCommand"),
                    "{why}"
                );
                assert_eq!(sc(&r)["data"]["required_tool"], "BashCommand", "{why}");
            }
        }
        if bash_allowed && listed.iter().any(|t| t == "FileWriteOrEdit") {
            // The check can fail: where BashCommand is permitted the command does run.
            let marker = a.workspace.join("ran");
            let (_, mut call, file) = process_calls(&path_str(&marker)).remove(0);
            call["thread_id"] = s["data"]["thread_id"].clone();
            call["workspace_root"] = s["data"]["workspace_root"].clone();
            let r = a.call("FileWriteOrEdit", call);
            assert_eq!(sc(&r)["status"], "completed", "policy {name}: {r}");
            assert!(marker.exists() && a.workspace.join(file).exists(), "{name}");
        }
    }
}

#[test]
fn a_principal_without_bash_cannot_verify_over_http() {
    let home = Home::new();
    let cfg = two_principals(
        &home,
        "allowed_tools = [\"Initialize\", \"ReadFiles\", \"FileWriteOrEdit\", \"ApplyPatch\", \
         \"MultiFileEdit\"]",
    );
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let bob = format!("{TOKEN}-b");
    let ws = path_str(&s.home.workspace);
    let first = s.call(
        &bob,
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    let pair = sc(&first)["data"].clone();
    let marker = s.home.workspace.join("pwned");
    for (tool, mut call, file) in process_calls(&path_str(&marker)).into_iter().take(3) {
        call["thread_id"] = pair["thread_id"].clone();
        call["workspace_root"] = pair["workspace_root"].clone();
        let r = s.call(&bob, tool, call);
        assert_eq!(sc(&r)["errorCode"], "policy_blocked", "{tool}: {r}");
        assert!(!s.home.workspace.join(file).exists(), "{tool} committed");
    }
    assert!(
        !marker.exists(),
        "verify_command ran for a principal without BashCommand"
    );
}

fn read_one(s: &Server, token: &str, pair: &Value, path: &str) -> Value {
    s.call(
        token,
        "ReadFiles",
        json!({"thread_id": pair["thread_id"], "workspace_root": pair["workspace_root"],
               "file_paths": [path]}),
    )
}

#[test]
fn file_tools_never_reach_the_servers_own_secrets_over_http() {
    let home = Home::new();
    let cfg = two_principals(&home, "tool_profile = \"read-only\"");
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let bob = format!("{TOKEN}-b");
    let first = s.call(
        &bob,
        "Initialize",
        json!({"type": "first_call", "workspace_root": "/"}),
    );
    assert_eq!(sc(&first)["status"], "completed", "{first}");
    let pair = sc(&first)["data"].clone();
    let alice_token = path_str(&s.home.path("a.token"));
    let state_db = path_str(&s.home.path("state").join("winx.db"));
    for secret in [alice_token.as_str(), cfg.as_str(), state_db.as_str()] {
        let r = read_one(&s, &bob, &pair, secret);
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            !text.contains(TOKEN) && !text.contains("SQLite format"),
            "{secret} was served: {r}"
        );
        assert!(text.contains("never touch"), "{secret}: {r}");
    }
    // An ordinary file next to them is still readable from the "/" workspace.
    std::fs::write(s.home.path("notes.txt"), "plain notes\n").unwrap();
    let r = read_one(&s, &bob, &pair, &path_str(&s.home.path("notes.txt")));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("plain notes"),
        "{r}"
    );
    // No workspace can be bound inside the server's state.
    let inside = s.call(
        &bob,
        "Initialize",
        json!({"type": "first_call", "workspace_root": path_str(&s.home.path("state"))}),
    );
    assert_eq!(sc(&inside)["errorCode"], "policy_blocked", "{inside}");
}

#[test]
fn workspace_roots_confine_where_a_principal_binds_workspaces() {
    let home = Home::new();
    let ws = path_str(&home.workspace);
    let cfg = two_principals(&home, &format!("workspace_roots = [\"{ws}\"]"));
    let s = Server::start_in(home, &["--principal-config", &cfg], &[], false);
    let (alice, bob) = (format!("{TOKEN}-a"), format!("{TOKEN}-b"));
    let root = json!({"type": "first_call", "workspace_root": "/"});
    let r = s.call(&bob, "Initialize", root.clone());
    assert_eq!(sc(&r)["errorCode"], "policy_blocked", "{r}");
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains(&ws),
        "{r}"
    );
    let sub = s.home.workspace.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let r = s.call(
        &bob,
        "Initialize",
        json!({"type": "first_call", "workspace_root": path_str(&sub)}),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    // Alice has no workspace_roots: anywhere.
    let r = s.call(&alice, "Initialize", root);
    assert_eq!(sc(&r)["status"], "completed", "{r}");
}

#[test]
fn a_workspace_root_that_does_not_exist_is_a_startup_error() {
    let home = Home::new();
    let cfg = two_principals(&home, "workspace_roots = [\"/nonexistent/winx-root\"]");
    let out = home.principal_config_failure(&cfg);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/winx-root") && err.contains("bob"),
        "{err}"
    );
}

#[test]
fn stdio_file_tools_refuse_the_state_directory_but_serve_scratch_sessions() {
    let mut a = Agent::spawn_with(Opts {
        env: &[("WINX_ALLOW_PATHS", "/")],
        ..Default::default()
    });
    let s = a.first_call();
    let pair = |extra: Value| pair_args(&s, extra);
    let db = a.state.join("winx.db");
    let r = a.call("ReadFiles", pair(json!({"file_paths": [path_str(&db)]})));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("never touch"),
        "{r}"
    );
    let scratch_parent = a.state.join("scratch");
    std::fs::create_dir_all(&scratch_parent).unwrap();
    let r = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": path_str(&scratch_parent)}),
    );
    assert_eq!(sc(&r)["errorCode"], "policy_blocked", "{r}");
    // A first call without a workspace gets its own scratch directory and may use it.
    let r = a.call("Initialize", json!({"type": "first_call"}));
    let scratch = sc(&r)["data"].clone();
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    let w = a.call(
        "FileWriteOrEdit",
        json!({"thread_id": scratch["thread_id"], "workspace_root": scratch["workspace_root"],
               "file_path": "notes.md", "text_or_search_replace_blocks": "scratch notes\n"}),
    );
    assert_eq!(sc(&w)["status"], "completed", "{w}");
    let r = a.call(
        "ReadFiles",
        json!({"thread_id": scratch["thread_id"], "workspace_root": scratch["workspace_root"],
               "file_paths": ["notes.md"]}),
    );
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("scratch notes"),
        "{r}"
    );
}
