//! Interop with the official MCP Python SDK streamable-HTTP client (`mcp`, pinned in the
//! Makefile) against the real `serve --http`, in both eras, each calling `Initialize` and
//! then running an `until_complete` `BashCommand` as an MCP task: through the
//! `io.modelcontextprotocol/tasks` extension and `tasks/get` (2026-07-28), or a
//! task-augmented `tools/call` and `tasks/result` (2025-11-25). The client side is
//! `tests/interop/sdk_http_client.py` with its tasks half in `tests/interop/sdk_tasks.py`.
//!
//! Needs the venv: `make test` sets `WINX_TEST_PYTHON`; otherwise `target/venv/bin/python`
//! (from `make venv`) is used. Without either the test fails; it never skips.

use crate::support;
use crate::support::http as http_support;

use crossbeam_channel::bounded;
use http_support::{Server, TOKEN};
use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

fn run_mode(mode: &str) -> Value {
    let server = Server::start(&[]);
    let script = support::manifest_dir().join("tests/interop/sdk_http_client.py");
    let mut child = Command::new(support::python())
        .arg(&script)
        .arg("--url")
        .arg(format!("http://{}/mcp", server.addr))
        .arg("--workspace")
        .arg(&server.home.workspace)
        .arg("--mode")
        .arg(mode)
        .env("WINX_TEST_HTTP_TOKEN", TOKEN)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the SDK client script");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        let (mut out, mut err) = (String::new(), String::new());
        let _ = stdout.read_to_string(&mut out);
        let _ = stderr.read_to_string(&mut err);
        let _ = tx.send((out, err));
    });
    let Ok((out, err)) = rx.recv_timeout(SCRIPT_TIMEOUT) else {
        let _ = child.kill();
        panic!("{mode}: SDK client did not finish within {SCRIPT_TIMEOUT:?}");
    };
    let status = child.wait().unwrap();
    let line = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{mode}: no report (exit {status})\nstderr:\n{err}\nserver:\n{}",
                server.stderr_log()
            )
        });
    let report: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{mode}: {e}: {line}"));
    assert_eq!(
        report["ok"],
        true,
        "{mode}: {}\nstderr:\n{err}\nserver:\n{}",
        serde_json::to_string_pretty(&report).unwrap(),
        server.stderr_log()
    );
    assert!(status.success(), "{mode}: exit {status}");
    report
}

#[test]
fn python_sdk_http_auto_mode_uses_2026_07_28_and_runs_a_task() {
    let r = run_mode("auto");
    assert_eq!(r["protocol_version"], "2026-07-28", "{r}");
    assert!(r["thread_id"].as_str().unwrap().starts_with("ws_"), "{r}");
    assert!(r["task_id"].as_str().unwrap().starts_with("task_"), "{r}");
}

#[test]
fn python_sdk_http_legacy_mode_uses_a_session_and_runs_a_task() {
    let r = run_mode("legacy");
    assert!(
        r["protocol_version"].as_str().unwrap().starts_with("202"),
        "{r}"
    );
    assert_ne!(r["protocol_version"], "2026-07-28", "{r}");
    assert!(r["thread_id"].as_str().unwrap().starts_with("ws_"), "{r}");
    assert!(r["task_id"].as_str().unwrap().starts_with("task_"), "{r}");
}
