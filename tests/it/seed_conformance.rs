//! Seed 000's own request shapes through the real binary over stdio (issue 37): the flat
//! `Agent` form beside the nested one, `target` and `execution_id` as one argument on every
//! action, `wait` budgets by client profile with `effectiveWait` and a repeating
//! `nextAction`, and a next action on the history tools' refusals. The seed's JSON examples
//! are used verbatim; only their placeholders are replaced.

use crate::support;
use crate::support::herdr as herdr_support;
use crate::support::http;

use serde_json::{Value, json};
use support::history::{exec, id_of, logged_lines, spawn_with, start_fake_agent, until_recorded};
use support::{Agent, sc};

/// A JSON example of seed 000, verbatim, with its placeholders replaced.
fn seed(example: &str, s: &Value, target: &str) -> Value {
    let text = example
        .replace(
            "<initialized-thread>",
            s["data"]["thread_id"].as_str().unwrap(),
        )
        .replace(
            "/absolute/initialized/workspace",
            s["data"]["workspace_root"].as_str().unwrap(),
        )
        .replace(
            "/canonical/workspace",
            s["data"]["workspace_root"].as_str().unwrap(),
        )
        .replace("<execution-id>", target);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

const SEED_PROMPT: &str = r#"{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"backend": "native",
"action": "prompt",
"target": "<execution-id>",
"prompt_id": "review-round-1",
"text": "Review the current changes and report any correctness defects.",
"recognizer": "auto",
"timeout_seconds": 10
}"#;

const SEED_RECEIPT_WAIT: &str = r#"{
"thread_id": "<initialized-thread>",
"workspace_root": "/absolute/initialized/workspace",
"action": "wait",
"target": "<execution-id>",
"prompt_id": "review-round-1",
"timeout_seconds": 5
}"#;

const SEED_HERDR_READ: &str = r#"{
"thread_id": "<initialized-thread>",
"workspace_root": "/canonical/workspace",
"backend": "herdr",
"action": "read",
"target": "writer",
"lines": 100
}"#;

fn agent(a: &mut Agent, s: &Value, action: Value) -> Value {
    a.call(
        "Agent",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": action}),
    )
}

/// Issue 37 item 1: the seed's flat prompt and receipt wait, verbatim, are answered (they
/// were refused with "action must be an object with a type"); the prompt is delivered once.
#[test]
fn the_seeds_flat_prompt_and_receipt_wait_work_verbatim() {
    let mut a = spawn_with("embedded", &[]);
    let s = a.first_call();
    let (id, log) = start_fake_agent(&mut a, &s, "codex");
    let r = a.call("Agent", seed(SEED_PROMPT, &s, &id));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    let r = a.call("Agent", seed(SEED_RECEIPT_WAIT, &s, &id));
    assert_eq!(sc(&r)["errorCode"], Value::Null, "{r}");
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    assert_eq!(sc(&r)["data"]["prompt_id"], "review-round-1", "{r}");
    // The same flat prompt again is the stored receipt: nothing typed twice.
    let r = a.call("Agent", seed(SEED_PROMPT, &s, &id));
    assert_eq!(sc(&r)["data"]["replayed"], true, "{r}");
    assert_eq!(
        logged_lines(&log),
        ["Review the current changes and report any correctness defects."]
    );
    // The flat form refuses a second name for the action and unknown fields.
    let mut both = seed(SEED_RECEIPT_WAIT, &s, &id);
    both["type"] = json!("wait");
    let r = a.call("Agent", both);
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
    let mut extra = seed(SEED_RECEIPT_WAIT, &s, &id);
    extra["colour"] = json!("red");
    let r = a.call("Agent", extra);
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
    assert!(
        sc(&r)["message"].as_str().unwrap().contains("colour"),
        "{r}"
    );
    a.bash(&s, json!({"send_text": "exit", "submit": true}));
}

/// Issue 37 item 2: every native action takes `target`, and `execution_id` as its alias
/// (get, read, explain and wait refused `target`; prompt refused `execution_id`).
#[test]
fn target_and_execution_id_are_one_argument_on_every_action() {
    let mut a = spawn_with("embedded", &[]);
    let s = a.first_call();
    let id = id_of(&a.bash(&s, json!({"command": "printf 'x\\ny\\n'; (exit 4)"})));
    until_recorded(&mut a, &s, &id);
    for key in ["target", "execution_id"] {
        let r = agent(&mut a, &s, json!({"type": "get", key: id}));
        assert_eq!(sc(&r)["data"]["exit_code"], 4, "{key}: {r}");
        let r = agent(&mut a, &s, json!({"type": "read", key: id}));
        assert_eq!(sc(&r)["data"]["page"]["text"], "x\ny\n", "{key}: {r}");
        let r = agent(&mut a, &s, json!({"type": "explain", key: id}));
        assert!(sc(&r)["data"]["detection"].is_object(), "{key}: {r}");
        let r = agent(
            &mut a,
            &s,
            json!({"type": "wait", key: id, "timeout_seconds": 0}),
        );
        assert_eq!(sc(&r)["errorCode"], Value::Null, "{key}: {r}");
        // The flat form too.
        let flat = json!({"thread_id": s["data"]["thread_id"],
            "workspace_root": s["data"]["workspace_root"], "action": "read", key: id});
        let r = a.call("Agent", flat);
        assert_eq!(sc(&r)["data"]["page"]["text"], "x\ny\n", "{key}: {r}");
        // A prompt and a receipt wait take either name (the target exited: not ready,
        // which is past argument checking).
        let p = json!({"type": "prompt", key: id, "prompt_id": "p1", "text": "hi"});
        let r = agent(&mut a, &s, p);
        assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{key}: {r}");
        let w = json!({"type": "wait", key: id, "prompt_id": "p1"});
        let r = agent(&mut a, &s, w);
        assert_eq!(sc(&r)["errorCode"], "agent_receipt_not_found", "{key}: {r}");
    }
    let r = agent(
        &mut a,
        &s,
        json!({"type": "get", "target": id, "execution_id": "1-1"}),
    );
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
    assert!(sc(&r)["message"].as_str().unwrap().contains("alias"), "{r}");
}

/// Issue 37 item 1: the seed's flat Herdr read, verbatim.
#[test]
fn the_seeds_flat_herdr_read_works_verbatim() {
    let mut r = herdr_support::Rig::new();
    r.configure(5000);
    let s = r.s.clone();
    let out = r.a.call("Agent", seed(SEED_HERDR_READ, &s, ""));
    assert_eq!(sc(&out)["status"], "completed", "{out}");
    assert_eq!(sc(&out)["data"]["target"], "writer", "{out}");
    assert!(
        sc(&out)["data"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("last line"),
        "{out}"
    );
    // `execution_id` is the alias of `target` for Herdr too.
    let out = r.a.call("Agent", {
        let mut v = seed(SEED_HERDR_READ, &s, "");
        let t = v.as_object_mut().unwrap().remove("target").unwrap();
        v["execution_id"] = t;
        v
    });
    assert_eq!(sc(&out)["status"], "completed", "{out}");
}

/// Issue 37 item 4: a wait without a timeout (or with `null`) takes the local profile's
/// 5 s (it took 10 s), reports it as `effectiveWait`, and its `nextAction` repeats the wait
/// from the new baseline with the same timeout and events. The default is waited out once
/// (no timeout); `null` shows the same allowance on a wait a change ends at once.
#[test]
fn a_default_wait_takes_five_seconds_locally_and_says_how_to_repeat_it() {
    let mut a = spawn_with("embedded", &[]);
    let s = a.first_call();
    let id = id_of(&a.bash(&s, json!({"command": "echo done"})));
    until_recorded(&mut a, &s, &id);
    // A baseline before a second command's exit: a wait after it ends at that exit.
    let poll = json!({"type": "wait", "execution_ids": [id], "timeout_seconds": 0});
    let before = sc(&exec(&mut a, &s, poll))["data"]["catalog_cursor"].clone();
    assert!(before.is_string(), "{before}");
    let id2 = id_of(&a.bash(&s, json!({"command": "echo again"})));
    until_recorded(&mut a, &s, &id2);
    for (timeout, target, after) in [(None, &id, None), (Some(Value::Null), &id2, Some(before))] {
        let mut action = json!({"type": "wait", "execution_ids": [target], "events": ["exited"]});
        if let Some(t) = &timeout {
            action["timeout_seconds"] = t.clone();
        }
        if let Some(c) = &after {
            action["after"] = c.clone();
        }
        let started = std::time::Instant::now();
        let r = exec(&mut a, &s, action);
        let took = started.elapsed();
        let v = sc(&r);
        if after.is_none() {
            // Nothing of `id` changes after the wait's first read: the whole default passes.
            assert_eq!(v["data"]["outcome"], "timeout", "{r}");
            assert!(
                took >= std::time::Duration::from_millis(4500)
                    && took < std::time::Duration::from_secs(8),
                "{timeout:?}: waited {took:?}"
            );
        } else {
            assert_eq!(v["data"]["outcome"], "changed", "{r}");
            assert_eq!(v["data"]["changed"][0]["execution_id"], id2.as_str(), "{r}");
        }
        let w = &v["data"]["effectiveWait"];
        assert_eq!(w["timeout_seconds"], 5.0, "{r}");
        assert_eq!(w["source"], "profile_default", "{r}");
        assert_eq!(w["profile"], "local", "{r}");
        let next = &v["nextAction"];
        assert_eq!(next["tool"], "Execution", "{r}");
        let args = &next["arguments"];
        assert_eq!(args["thread_id"], s["data"]["thread_id"], "{r}");
        assert_eq!(args["workspace_root"], s["data"]["workspace_root"], "{r}");
        assert_eq!(
            args["action"],
            json!({"type": "wait", "execution_ids": [target], "events": ["exited"],
                   "after": v["data"]["catalog_cursor"], "timeout_seconds": 5.0}),
            "{r}"
        );
        // The next action is a call that works as given.
        let r = a.call(
            "Execution",
            json!({"thread_id": args["thread_id"],
            "workspace_root": args["workspace_root"],
            "action": {"type": "wait", "execution_ids": [target], "after": args["action"]["after"],
                       "timeout_seconds": 0}}),
        );
        assert_eq!(sc(&r)["data"]["outcome"], "timeout", "{r}");
    }
    // An explicit timeout is the request's, never raised; Agent answers the same way.
    let r = agent(
        &mut a,
        &s,
        json!({"type": "wait", "target": id, "timeout_seconds": 0}),
    );
    let w = &sc(&r)["data"]["effectiveWait"];
    assert_eq!(w["timeout_seconds"], 0.0, "{r}");
    assert_eq!(w["source"], "request", "{r}");
    assert_eq!(sc(&r)["nextAction"]["tool"], "Agent", "{r}");
    assert_eq!(
        sc(&r)["nextAction"]["arguments"]["action"]["timeout_seconds"],
        0.0,
        "{r}"
    );
}

/// `tools/call` over HTTP (stateless era) as the client `name` says it is.
fn http_call(srv: &http::Server, client: &str, tool: &str, args: Value) -> Value {
    let mut body = http::modern("tools/call", json!({"name": tool, "arguments": args}));
    body["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] =
        json!({"name": client, "version": "1.0"});
    let r = srv.conn().mcp(
        http::TOKEN,
        &http::modern_headers("tools/call", Some(tool)),
        &body,
    );
    assert_eq!(r.status, 200, "{tool}: {}", r.text());
    r.json()["result"].clone()
}

/// Issue 37 item 4: over HTTP a ChatGPT/Codex client's default wait is 50 s capped at the
/// tool's 30, a Claude client's 5 s; a wait that ends early still reports its allowance.
#[test]
fn http_wait_defaults_follow_the_client_profile() {
    let srv = http::Server::start(&[]);
    let ws = srv.home.workspace.to_string_lossy().into_owned();
    for (client, seconds, profile) in [
        ("openai-mcp", 30.0, "chatgpt_http"),
        ("codex-mcp-client", 30.0, "chatgpt_http"),
        ("claude-ai", 5.0, "claude_http"),
    ] {
        let r = http_call(
            &srv,
            client,
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws}),
        );
        let pair = json!({"thread_id": sc(&r)["data"]["thread_id"],
                          "workspace_root": sc(&r)["data"]["workspace_root"]});
        let fifo = srv.home.workspace.join(format!("go-{client}"));
        let fifo_name = fifo.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let mut args = pair.clone();
        args["action_json"] =
            json!({"command": format!("read x < {fifo_name}; echo got $x"), "is_background": true});
        let r = http_call(&srv, client, "BashCommand", args);
        let id = id_of(&r);
        let mut list = pair.clone();
        list["action"] = json!({"type": "list"});
        let r = http_call(&srv, client, "Execution", list);
        let after = sc(&r)["data"]["catalog_cursor"].clone();
        // Released from another thread; the wait catches it whenever it lands.
        let writer = std::thread::spawn(move || std::fs::write(&fifo, "now\n").unwrap());
        let mut wait = pair.clone();
        wait["action"] = json!({"type": "wait", "execution_ids": [id], "after": after,
                                "events": ["exited"]});
        let r = http_call(&srv, client, "Execution", wait);
        writer.join().unwrap();
        assert_eq!(sc(&r)["data"]["outcome"], "changed", "{client}: {r}");
        let w = &sc(&r)["data"]["effectiveWait"];
        assert_eq!(w["timeout_seconds"], seconds, "{client}: {r}");
        assert_eq!(w["profile"], profile, "{client}: {r}");
        assert_eq!(
            sc(&r)["nextAction"]["arguments"]["action"]["timeout_seconds"],
            seconds,
            "{client}: {r}"
        );
    }
}

/// Issue 37 item 5: the history tools' refusals each carry a complete next action (they
/// answered `nextAction: null`), and following it works.
#[test]
fn history_refusals_carry_a_next_action_that_works() {
    let mut a = spawn_with("embedded", &[]);
    let s = a.first_call();
    let id = id_of(&a.bash(&s, json!({"command": "printf 'one\\ntwo\\n'"})));
    let other = id_of(&a.bash(&s, json!({"command": "echo other"})));
    until_recorded(&mut a, &s, &id);
    until_recorded(&mut a, &s, &other);
    let r = exec(
        &mut a,
        &s,
        json!({"type": "read", "execution_id": id, "page_bytes": 4}),
    );
    let cursor = sc(&r)["data"]["page"]["next_cursor"]
        .as_str()
        .unwrap()
        .to_string();
    let cut = &cursor[..cursor.len() - 3];
    let mut forged = cursor.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'a' { b'b' } else { b'a' };
    let forged = String::from_utf8(forged).unwrap();
    let huge: Vec<Value> = (0..2)
        .map(|i| json!({"execution_id": if i == 0 { &id } else { &other }, "page_bytes": 40000}))
        .collect();
    for (action, code) in [
        (json!({"type": "explode"}), "invalid_tool_input"),
        (
            json!({"type": "get", "execution_id": ""}),
            "invalid_tool_input",
        ),
        (
            json!({"type": "read", "execution_id": id, "page_bytes": 0}),
            "invalid_tool_input",
        ),
        (
            json!({"type": "read", "execution_id": id, "page_bytes": 65537}),
            "invalid_tool_input",
        ),
        (
            json!({"type": "observe", "items": huge}),
            "invalid_tool_input",
        ),
        (
            json!({"type": "read", "execution_id": id, "cursor": forged}),
            "invalid_cursor",
        ),
        (
            json!({"type": "read", "execution_id": id, "cursor": cut}),
            "invalid_cursor",
        ),
        (
            json!({"type": "read", "execution_id": other, "cursor": cursor}),
            "invalid_cursor",
        ),
        (
            json!({"type": "get", "execution_id": "ffff-9"}),
            "execution_not_found",
        ),
    ] {
        let r = exec(&mut a, &s, action.clone());
        assert_eq!(sc(&r)["errorCode"], code, "{action}: {r}");
        let next = &sc(&r)["nextAction"];
        assert_eq!(next["tool"], "Execution", "{action}: {r}");
        let args = next["arguments"].clone();
        assert_eq!(args["thread_id"], s["data"]["thread_id"], "{action}: {r}");
        assert!(
            support::text(&r).contains("Next: Execution"),
            "{action}: {r}"
        );
        // The next action is a call that is accepted as given.
        let r = a.call("Execution", args.clone());
        assert_eq!(sc(&r)["errorCode"], Value::Null, "{action} -> {args}: {r}");
    }
    // Through Agent, the next action names Agent.
    let r = agent(
        &mut a,
        &s,
        json!({"type": "read", "target": id, "page_bytes": 0}),
    );
    assert_eq!(sc(&r)["nextAction"]["tool"], "Agent", "{r}");
    let r = a.call("Agent", sc(&r)["nextAction"]["arguments"].clone());
    assert_eq!(sc(&r)["errorCode"], Value::Null, "{r}");
}

/// Issue 37 item 15: a winxd killed with SIGKILL is back after the very next call of the
/// same adapter (that call works), not only after a call past the adapter's check interval.
#[test]
fn a_killed_winxd_is_back_after_the_very_next_call() {
    use support::wait::{Deadline, eventually};
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let winxd = a.dir.path().join("run/winx/winxd.sock");
    let daemons = support::processes_mentioning(&winxd);
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemons[0]),
        nix::sys::signal::Signal::SIGKILL,
    );
    eventually(
        Deadline::hard("winxd gone"),
        "the killed winxd is gone",
        || support::processes_mentioning(&winxd),
        |p| p.is_empty(),
    );
    let r = a.bash(&s, json!({"command": "echo still-here"}));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert!(support::text(&r).contains("still-here"), "{r}");
    // No other call: winxd must come back from that one alone.
    let after = eventually(
        Deadline::hard("winxd back"),
        "a new winxd runs",
        || support::processes_mentioning(&winxd),
        |p| p.len() == 1,
    );
    assert_ne!(after[0], daemons[0]);
    let d = eventually(
        Deadline::hard("winxd answers"),
        "doctor reaches the new winxd",
        || a.op_json(&["doctor"]),
        |d| d["daemon"]["running"] == true,
    );
    assert_eq!(d["guardians"]["count"], 1, "{d}");
}

/// The binary run to completion in its own HOME, state and runtime directories.
fn cli(args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let env = support::isolated_env(&dir.path().join("home"), &dir.path().join("state"), &run);
    support::command(&env)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Issue 37 item 12: `--help` lists every verb, the agent family with `--paste`; every
/// `<verb> --help` prints help with exit 0 (it was exit 2, "invalid option").
#[test]
fn every_verb_has_help_and_the_top_level_help_lists_them() {
    let out = cli(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for verb in [
        "serve",
        "list",
        "attach",
        "prune",
        "kill",
        "restart-daemon",
        "doctor",
        "report",
        "agent capabilities",
        "agent send",
        "agent admit",
        "agent request",
        "--paste",
    ] {
        assert!(
            help.contains(&format!("winx-code-agent {verb}")) || help.contains(verb),
            "{verb} missing from --help:\n{help}"
        );
    }
    for verb in [
        "list",
        "attach",
        "prune",
        "kill",
        "restart-daemon",
        "doctor",
        "report",
        "agent",
    ] {
        for flag in ["--help", "-h"] {
            let out = cli(&[verb, flag]);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{verb} {flag}: {out:?}");
            assert!(
                text.starts_with("Usage: winx-code-agent"),
                "{verb} {flag}: {text}"
            );
        }
    }
    let out = cli(&["agent", "send", "zola", "--help"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("--paste"));
}

/// Issue 37 item 12: a negative or non-numeric `--final-timeout-ms` is an `invalid`
/// receipt on stdout (exit 2), as admission answers every other refused input; it was a
/// usage error on stderr.
#[test]
fn a_bad_final_timeout_is_an_invalid_receipt() {
    let id = "123e4567-e89b-42d3-a456-426614174000";
    for bad in ["-1", "soon", "1.5"] {
        for args in [
            vec!["agent", "send", "zola", "hello", "--final-timeout-ms", bad],
            vec![
                "agent",
                "admit",
                "zola",
                "--incarnation",
                "i",
                "--request-id",
                id,
                "--final-timeout-ms",
                bad,
                "hello",
            ],
        ] {
            let out = cli(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
            let receipt: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{args:?}: {e}: {out:?}"));
            assert_eq!(receipt["receipt_class"], "invalid", "{receipt}");
            assert_eq!(receipt["prompt_written"], false, "{receipt}");
            assert!(
                receipt["detail"]
                    .as_str()
                    .unwrap()
                    .contains("--final-timeout-ms")
            );
        }
    }
}

/// Issue 37 item 14: a `Host` that names no host is a bad request (RFC 9112 §3.2; an
/// `http` URI with an empty host is invalid, RFC 9110 §4.2.1): 400, before anything else.
/// A host-less authority (`:port`, `[]:port`) was 421 (misdirected).
#[test]
fn an_empty_host_is_a_bad_request() {
    let srv = http::Server::start(&[]);
    let port = srv.addr.port();
    let ping = serde_json::to_vec(&http::modern("ping", json!({}))).unwrap();
    let post = |host: &str| {
        let mut headers = http::modern_headers("ping", None);
        headers.push(http::h("Host", host));
        headers.push(http::h("Authorization", &format!("Bearer {}", http::TOKEN)));
        headers.push(http::h("Content-Type", "application/json"));
        headers.push(http::h("Accept", "application/json, text/event-stream"));
        srv.conn().request("POST", "/mcp", &headers, &ping)
    };
    for host in ["", " ", &format!(":{port}"), &format!("[]:{port}"), ":"] {
        let r = post(host);
        assert_eq!(r.status, 400, "Host {host:?}: {}", r.text());
    }
    let r = post(&format!("127.0.0.1:{port}"));
    assert_eq!(r.status, 200, "{}", r.text());
}
