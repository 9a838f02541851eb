//! `Agent` with `backend: herdr` through the real binary and `tests/fake/herdr`: the
//! operator configuration's validation, every action's happy path, the runner's deadline,
//! output limits and failures, and bindings per principal over HTTP.

#[path = "support/http.rs"]
mod http_support;
mod support;

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::{Agent, Opts, manifest_dir, sc};

fn fake() -> PathBuf {
    manifest_dir().join("tests/fake/herdr")
}

/// A config for `principal_key` in `workspace` with target `writer` = `w1:p1`.
fn config(dir: &Path, principal_key: &str, workspace: &Path, deadline_ms: u64) -> Value {
    json!({
        "executable": fake(),
        "socket_path": dir.join("sock"),
        "deadline_ms": deadline_ms,
        "bindings": [{"principal_key": principal_key, "workspace_root": workspace,
                      "targets": {"writer": "w1:p1", "gone": "w5:p5"}}],
    })
}

fn write(path: &Path, v: &Value, mode: u32) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    std::fs::set_permissions(path, PermissionsExt::from_mode(mode)).unwrap();
}

struct Rig {
    a: Agent,
    s: Value,
    dir: tempfile::TempDir,
}

impl Rig {
    fn new() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("herdr.json");
        let cfg = cfg.to_str().unwrap().to_string();
        let mut a = Agent::spawn_with(Opts {
            env: &[
                ("WINX_RUNTIME", "embedded"),
                ("WINX_HERDR_CONFIG", &cfg),
                ("HERDR_LEAK", "1"),
            ],
            ..Default::default()
        });
        let s = a.first_call();
        Rig { a, s, dir }
    }

    fn cfg_path(&self) -> PathBuf {
        self.dir.path().join("herdr.json")
    }

    fn configure(&self, deadline_ms: u64) {
        let v = config(self.dir.path(), "local", &self.a.workspace, deadline_ms);
        write(&self.cfg_path(), &v, 0o600);
    }

    fn mode(&self, mode: &str) {
        std::fs::write(self.dir.path().join("sock"), mode).unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sock.log")).unwrap_or_default()
    }

    fn herdr(&mut self, action: Value) -> Value {
        let r = self.a.call(
            "Agent",
            json!({"thread_id": self.s["data"]["thread_id"],
                   "workspace_root": self.s["data"]["workspace_root"],
                   "backend": "herdr", "action": action}),
        );
        sc(&r).clone()
    }
}

#[test]
fn every_action_runs_the_configured_executable_within_the_binding() {
    let mut r = Rig::new();
    r.configure(5000);
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["status"], "completed", "{v}");
    let targets = v["data"]["targets"].as_array().unwrap();
    // Only configured targets; the unconfigured pane w9:p9 is never shown.
    assert_eq!(targets.len(), 2, "{v}");
    assert!(!v.to_string().contains("w9:p9"), "{v}");
    let writer = targets.iter().find(|t| t["target"] == "writer").unwrap();
    assert_eq!(writer["agent_status"], "idle");
    assert_eq!(writer["present"], true);
    let v = r.herdr(json!({"type": "get", "target": "writer"}));
    assert_eq!(v["data"]["agent_status"], "idle", "{v}");
    let v = r.herdr(json!({"type": "explain", "target": "writer"}));
    assert_eq!(v["data"]["herdr"]["rule"], "prompt box", "{v}");
    let v = r.herdr(json!({"type": "read", "target": "writer", "lines": 5}));
    assert_eq!(v["data"]["text"], "first line\nlast line\n", "{v}");
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "-n review it"}));
    assert_eq!(v["data"]["submission"], "acknowledged", "{v}");
    let v = r
        .herdr(json!({"type": "wait", "target": "writer", "until": "idle", "timeout_seconds": 30}));
    assert_eq!(v["data"]["outcome"], "reached", "{v}");
    assert!(v["data"]["timeout_ms"].as_u64().unwrap() <= 5000, "{v}");
    let log = r.log();
    assert!(
        log.contains("args:pane read w1:p1 --source recent --lines 5"),
        "{log}"
    );
    assert!(log.contains("sent:-n review it"), "{log}");
    assert!(
        !log.contains("leaked"),
        "an inherited HERDR_* reached Herdr: {log}"
    );
    // An alias that is not configured, a bad request, a prompt_id.
    let v = r.herdr(json!({"type": "get", "target": "w9:p9"}));
    assert_eq!(v["errorCode"], "herdr_scope_denied", "{v}");
    let v = r.herdr(json!({"type": "read", "target": "writer", "lines": 1001}));
    assert_eq!(v["errorCode"], "invalid_herdr_request", "{v}");
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "x", "prompt_id": "p"}));
    assert_eq!(v["errorCode"], "invalid_herdr_request", "{v}");
    let v = r.herdr(json!({"type": "wait", "target": "writer", "until": "finished"}));
    assert_eq!(v["errorCode"], "invalid_herdr_request", "{v}");
    // An answer about another pane is not believed.
    r.mode("stranger");
    let v = r.herdr(json!({"type": "get", "target": "writer"}));
    assert_eq!(v["errorCode"], "invalid_herdr_response", "{v}");
}

#[test]
fn faults_of_the_executable_are_bounded_and_named() {
    let mut r = Rig::new();
    r.configure(400);
    r.mode("hang");
    let started = std::time::Instant::now();
    let v = r.herdr(json!({"type": "get", "target": "writer"}));
    assert_eq!(v["errorCode"], "herdr_timeout", "{v}");
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    let v = r.herdr(json!({"type": "prompt", "target": "writer", "text": "hello"}));
    assert_eq!(v["errorCode"], "herdr_delivery_uncertain", "{v}");
    assert_eq!(v["data"]["input_sent"], "unknown", "{v}");
    r.mode("flood");
    let v = r.herdr(json!({"type": "read", "target": "writer"}));
    assert_eq!(v["errorCode"], "herdr_output_limit", "{v}");
    assert_eq!(v["data"]["stream"], "stdout", "{v}");
    r.mode("fail");
    let v = r.herdr(json!({"type": "list"}));
    assert_eq!(v["errorCode"], "herdr_failed", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("no such pane"),
        "{v}"
    );
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
