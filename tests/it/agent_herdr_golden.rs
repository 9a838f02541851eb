//! `tests/fake/herdr` against the golden file of Herdr 0.8.2's agent-command answers
//! (`tests/golden/herdr/herdr-0.8.2-agent-cli.json`): the golden file holds the shapes the
//! reference documents, and the fake must print exactly them — stdout, stderr and exit
//! status — for each command line, so the Herdr tests drive a fake that answers like the
//! reference.

use crate::support;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use support::manifest_dir;

const GOLDEN: &str = "tests/golden/herdr/herdr-0.8.2-agent-cli.json";

fn golden() -> Value {
    let text = std::fs::read_to_string(manifest_dir().join(GOLDEN)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fake() -> PathBuf {
    manifest_dir().join("tests/fake/herdr")
}

/// Every AgentInfo in `v` has the fields the reference's schema requires, and a status.
fn agents_are_complete(g: &Value, v: &Value) {
    let required = g["agent_info_required"].as_array().unwrap();
    let statuses = g["agent_status"].as_array().unwrap();
    let result = &v["result"];
    let agents: Vec<&Value> = match result["type"].as_str() {
        Some("agent_list") => result["agents"].as_array().unwrap().iter().collect(),
        Some("agent_info" | "agent_prompted") => vec![&result["agent"]],
        _ => return,
    };
    for a in agents {
        for k in required {
            assert!(a.get(k.as_str().unwrap()).is_some(), "{k} missing: {a}");
        }
        assert!(statuses.contains(&a["agent_status"]), "{a}");
    }
}

#[test]
fn the_golden_envelopes_have_the_documented_shape() {
    let g = golden();
    assert_eq!(g["herdr_version"], "0.8.2");
    // The reference's own examples: a success has an id and a typed result, an error an
    // id and a code with a message.
    for e in g["documented"].as_array().unwrap() {
        assert!(e["id"].is_string(), "{e}");
        assert!(
            e["result"]["type"].is_string()
                || (e["error"]["code"].is_string() && e["error"]["message"].is_string()),
            "{e}"
        );
    }
    for c in g["cases"].as_array().unwrap() {
        let verb = c["argv"][1].as_str().unwrap();
        if let Some(out) = c.get("stdout").filter(|_| verb != "explain") {
            assert_eq!(out["id"], format!("cli:agent:{verb}"), "{c}");
            agents_are_complete(&g, out);
        }
        if let Some(err) = c.get("stderr") {
            assert_eq!(c["exit"], 1, "errors exit 1: {c}");
            assert_eq!(err["id"], format!("cli:agent:{verb}"), "{c}");
            assert!(err["error"]["code"].is_string() && err["error"]["message"].is_string());
        }
    }
}

#[test]
fn the_fake_herdr_answers_as_the_golden_file_says() {
    let g = golden();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sock");
    let cases = g["cases"].as_array().unwrap();
    for c in cases {
        // Each command line sees the same world (a prompt changes it).
        std::fs::write(&sock, g["world"].to_string()).unwrap();
        let argv: Vec<&str> = c["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let out = Command::new(fake())
            .args(&argv)
            .env("HERDR_SOCKET_PATH", &sock)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        );
        let what = format!("{argv:?}\nstdout: {stdout}\nstderr: {stderr}");
        assert_eq!(
            Some(c["exit"].as_i64().unwrap() as i32),
            out.status.code(),
            "{what}"
        );
        let json = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
        match (c.get("stdout"), c.get("stdout_text")) {
            (Some(want), _) => assert_eq!(&json(&stdout), want, "{what}"),
            (None, Some(want)) => assert_eq!(stdout, want.as_str().unwrap(), "{what}"),
            (None, None) => assert_eq!(stdout, "", "{what}"),
        }
        match c.get("stderr") {
            Some(want) => assert_eq!(&json(&stderr), want, "{what}"),
            // A usage error explains itself in words; a success says nothing.
            None => assert_eq!(stderr.is_empty(), c["exit"] == 0, "{what}"),
        }
    }
    // Every case ran, and the fake logged each command line.
    let log = std::fs::read_to_string(dir.path().join("sock.log")).unwrap();
    assert_eq!(log.lines().count(), cases.len());
}
