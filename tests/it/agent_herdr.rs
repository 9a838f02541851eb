//! `Agent` with `backend: herdr` through the real binary and `tests/fake/herdr` (a fake of
//! Herdr 0.8.2's agent commands): every action runs exactly its agent command and never a
//! pane command, the runner's deadline and output limits, the operator configuration's
//! validation, and bindings per principal over HTTP. Herdr's refusals and errors are in
//! `agent_herdr_errors.rs`; the fake against the reference in `agent_herdr_golden.rs`.

use crate::support;
use crate::support::herdr as herdr_support;
use crate::support::http as http_support;

use herdr_support::*;
use serde_json::{Value, json};
use support::{Agent, sc};

#[test]
fn every_action_runs_its_agent_command_and_never_a_pane_command() {
    let mut r = Rig::new();
    r.configure(5000);
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["status"], "completed", "{v}");
    let targets = v["data"]["targets"].as_array().unwrap();
    // Only configured targets; the unconfigured agent in w9:p9 is never shown.
    assert_eq!(targets.len(), 3, "{v}");
    assert!(
        !v.to_string().contains("w9:p9") && !v.to_string().contains("working"),
        "{v}"
    );
    let t = |alias: &str| {
        targets
            .iter()
            .find(|t| t["target"] == alias)
            .unwrap()
            .clone()
    };
    assert_eq!(
        t("writer"),
        json!({"target": "writer", "present": true, "agent_status": "idle", "agent": "claude"})
    );
    assert_eq!(
        t("rev")["agent_status"],
        "blocked",
        "found by its name: {v}"
    );
    assert_eq!(t("gone")["present"], false);
    let v = r.herdr(json!({"type": "get", "target": "writer"}));
    assert_eq!(
        (&v["data"]["agent_status"], &v["data"]["agent"]),
        (&json!("idle"), &json!("claude")),
        "{v}"
    );
    assert_eq!(v["data"]["herdr"]["terminal_id"], "term_1", "{v}");
    let v = r.herdr(json!({"type": "get", "target": "rev"}));
    assert_eq!(v["data"]["herdr"]["pane_id"], "w1:p2", "{v}");
    let v = r.herdr(json!({"type": "explain", "target": "writer"}));
    assert_eq!(v["data"]["agent_status"], "idle", "{v}");
    assert_eq!(
        v["data"]["herdr"]["matched_rule"]["id"], "claude-idle",
        "{v}"
    );
    let v = r.herdr(json!({"type": "read", "target": "writer", "lines": 2}));
    assert_eq!(v["data"]["text"], "second line\nlast line\n", "{v}");
    let v = r.herdr(json!({"type": "read", "target": "rev", "source": "visible"}));
    assert_eq!(v["data"]["text"], "Allow command? [y/n]\n", "{v}");
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "-n review it"}));
    assert_eq!(v["data"]["submission"], "acknowledged", "{v}");
    assert_eq!(v["data"]["input_sent"], true, "{v}");
    let v = r
        .herdr(json!({"type": "wait", "target": "writer", "until": "idle", "timeout_seconds": 30}));
    assert_eq!(
        (&v["data"]["outcome"], &v["data"]["agent_status"]),
        (&json!("reached"), &json!("idle")),
        "{v}"
    );
    assert_eq!(
        v["data"]["timeout_ms"], 4500,
        "capped below deadline_ms: {v}"
    );
    let v = r.herdr(json!({"type": "wait", "target": "rev", "until": ["working", "blocked"]}));
    assert_eq!(v["data"]["agent_status"], "blocked", "{v}");
    let v = r.herdr(json!({"type": "wait", "target": "rev", "timeout_seconds": 1}));
    assert_eq!(
        v["data"]["until"],
        json!(["idle", "done", "blocked"]),
        "Herdr's default: {v}"
    );
    let calls: Vec<Vec<String>> = r.calls().into_iter().map(|(a, _)| a).collect();
    let want = [
        argv(&["agent", "list"]),
        argv(&["agent", "get", "w1:p1"]),
        argv(&["agent", "get", "reviewer"]),
        argv(&["agent", "explain", "w1:p1", "--json"]),
        argv(&[
            "agent", "read", "w1:p1", "--source", "recent", "--lines", "2",
        ]),
        argv(&[
            "agent", "read", "reviewer", "--source", "visible", "--lines", "100",
        ]),
        argv(&["agent", "prompt", "w1:p1", "-n review it"]),
        argv(&[
            "agent",
            "wait",
            "w1:p1",
            "--until",
            "idle",
            "--timeout",
            "4500",
        ]),
        argv(&[
            "agent",
            "wait",
            "reviewer",
            "--until",
            "working",
            "--until",
            "blocked",
            "--timeout",
            "4500",
        ]),
        argv(&["agent", "wait", "reviewer", "--timeout", "1000"]),
    ];
    assert_eq!(calls, want);
    only_agent_commands(&r);
    // The prompt reached the agent once, as one literal argument.
    assert_eq!(r.world()["agents"][0]["prompts"], json!(["-n review it"]));
    // An alias that is not configured, bad requests, a prompt_id: nothing runs.
    let before = r.calls().len();
    let v = r.herdr(json!({"type": "get", "target": "w9:p9"}));
    assert_eq!(v["errorCode"], "herdr_scope_denied", "{v}");
    for bad in [
        json!({"type": "read", "target": "writer", "lines": 1001}),
        json!({"type": "read", "target": "writer", "source": "screen"}),
        json!({"type": "prompt", "target": "writer", "text": "x", "prompt_id": "p"}),
        json!({"type": "wait", "target": "writer", "until": "finished"}),
        json!({"type": "wait", "target": "writer", "until": []}),
    ] {
        let v = r.herdr(bad.clone());
        assert_eq!(v["errorCode"], "invalid_herdr_request", "{bad}: {v}");
    }
    assert_eq!(r.calls().len(), before);
}

#[test]
fn faults_of_the_executable_are_bounded_and_named() {
    let mut r = Rig::new();
    r.configure(400);
    r.fault("hang");
    let started = std::time::Instant::now();
    let v = r.herdr(json!({"type": "get", "target": "writer"}));
    assert_eq!(v["errorCode"], "herdr_timeout", "{v}");
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "hello"}));
    assert_eq!(v["errorCode"], "herdr_delivery_uncertain", "{v}");
    assert_eq!(v["data"]["input_sent"], "unknown", "{v}");
    assert_eq!(
        v["nextAction"]["arguments"]["action"]["type"], "read",
        "never resent: {v}"
    );
    // A deadline long enough that only the limit can end the run, even on a busy machine.
    r.configure(5000);
    r.fault("flood");
    let v = r.herdr(json!({"type": "read", "target": "writer"}));
    assert_eq!(v["errorCode"], "herdr_output_limit", "{v}");
    assert_eq!(v["data"]["stream"], "stdout", "{v}");
    r.fault("flood_stderr");
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["errorCode"], "herdr_output_limit", "{v}");
    assert_eq!(v["data"]["stream"], "stderr", "{v}");
}

#[test]
fn the_configuration_is_validated_on_each_herdr_call() {
    let mut r = Rig::new();
    // No file yet: configured but unusable.
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["errorCode"], "herdr_configuration", "{v}");
    assert_eq!(v["data"]["operator_action_required"], true);
    let good = config(r.dir.path(), "local", &r.a.workspace, 1000);
    let cases: Vec<(Value, u32, &str)> = vec![
        (good.clone(), 0o644, "mode"),
        (json!({"pad": "x".repeat(300 * 1024)}), 0o600, "limit"),
        (
            {
                let mut v = good.clone();
                v["color"] = json!("red");
                v
            },
            0o600,
            "unknown field",
        ),
        (
            {
                let mut v = good.clone();
                v["socket_path"] = json!("rel/sock");
                v
            },
            0o600,
            "socket_path",
        ),
        (
            {
                let mut v = good.clone();
                v["executable"] = json!("/nonexistent/herdr");
                v
            },
            0o600,
            "executable",
        ),
        (
            {
                let mut v = good.clone();
                v["deadline_ms"] = json!(30001);
                v
            },
            0o600,
            "deadline_ms",
        ),
        (
            {
                let mut v = good.clone();
                v["bindings"][0]["principal_key"] = json!("bob");
                v
            },
            0o600,
            "principal_key",
        ),
        (
            {
                let mut v = good.clone();
                v["bindings"][0]["targets"]["x"] = json!("-rf");
                v
            },
            0o600,
            "targets",
        ),
    ];
    for (v, mode, what) in cases {
        write(&r.cfg_path(), &v, mode);
        let out = r.herdr(json!({"type": "list"}));
        assert_eq!(out["errorCode"], "herdr_configuration", "{what}: {out}");
        assert!(
            out["message"].as_str().unwrap().contains(what),
            "{what}: {out}"
        );
        assert_eq!(out["data"]["input_sent"], false);
    }
    // A binding for another workspace grants nothing here.
    let other = tempfile::tempdir().unwrap();
    let v = config(
        r.dir.path(),
        "local",
        &other.path().canonicalize().unwrap(),
        1000,
    );
    write(&r.cfg_path(), &v, 0o600);
    let out = r.herdr(json!({"type": "list"}));
    assert_eq!(out["errorCode"], "herdr_scope_denied", "{out}");
    write(&r.cfg_path(), &good, 0o600);
    r.set_world(&world());
    let out = r.herdr(json!({"type": "list"}));
    assert_eq!(out["status"], "completed", "{out}");
}

#[test]
fn disabled_without_configuration_and_initialize_says_so() {
    let mut a = Agent::spawn_env(&[("WINX_RUNTIME", "embedded")]);
    let s = a.first_call();
    assert_eq!(
        s["data"]["agent_backends"]["herdr"],
        json!({"configuration_present": false, "availability": "disabled",
               "reason": "configuration_missing"})
    );
    let r = a.call(
        "Agent",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "backend": "herdr", "action": {"type": "list"}}),
    );
    assert_eq!(sc(&r)["errorCode"], "herdr_disabled", "{r}");
    assert_eq!(sc(&r)["data"]["operator_action_required"], true);
    assert_eq!(sc(&r)["data"]["input_sent"], false);
    // Configured (even to a missing file): unknown, not validated; status says it too.
    let r = Rig::new();
    let mut a = r.a;
    let status = a.call(
        "Initialize",
        json!({"type": "status", "thread_id": r.s["data"]["thread_id"],
               "workspace_root": r.s["data"]["workspace_root"]}),
    );
    let hint = &sc(&status)["data"]["agent_backends"]["herdr"];
    assert_eq!(hint["availability"], "unknown", "{status}");
    assert_eq!(hint["reason"], "configuration_not_validated");
    assert!(!status.to_string().contains("herdr.json"), "{status}");
}

#[test]
fn bindings_are_per_principal_over_http() {
    use http_support::*;
    let home = Home::new();
    let cfg_dir = tempfile::tempdir().unwrap();
    let principals = two_principals(&home, "");
    let cfg_path = cfg_dir.path().join("herdr.json");
    let ws = home.workspace.clone();
    write(
        &cfg_path,
        &config(cfg_dir.path(), "http:alice", &ws, 2000),
        0o600,
    );
    let cfg_str = cfg_path.to_str().unwrap().to_string();
    std::fs::write(cfg_dir.path().join("sock"), world().to_string()).unwrap();
    let s = Server::start_in(
        home,
        &["--principal-config", &principals],
        &[("WINX_HERDR_CONFIG", &cfg_str)],
        false,
    );
    let ws = path_str(&ws);
    for (token, want) in [
        (format!("{TOKEN}-a"), "completed"),
        (format!("{TOKEN}-b"), "policy_blocked"),
    ] {
        let d = s.call(
            &token,
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws}),
        )["structuredContent"]["data"]
            .clone();
        let r = s.call(
            &token,
            "Agent",
            json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"],
                   "backend": "herdr", "action": {"type": "get", "target": "writer"}}),
        );
        assert_eq!(r["structuredContent"]["status"], want, "{r}");
        if want == "policy_blocked" {
            assert_eq!(
                r["structuredContent"]["errorCode"], "herdr_scope_denied",
                "{r}"
            );
        }
    }
}
