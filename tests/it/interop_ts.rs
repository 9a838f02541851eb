//! Interop with the official MCP TypeScript SDK client (`@modelcontextprotocol/sdk`, pinned
//! in the Makefile; the client most desktop hosts embed) against the real binary, over stdio
//! and over HTTP. The SDK validates every result strictly — an unknown key on a
//! handshake-era `ping` is an error — and checks `structuredContent` against each tool's
//! `outputSchema`. The client side is `tests/interop/ts_client.mjs`.
//!
//! Needs the SDK: `make test` installs it and sets `WINX_TEST_TS_SDK`; otherwise
//! `target/node` (from `make node-sdk`) is used. Without either the test fails; it never
//! skips silently.

use crate::support;
use crate::support::http as http_support;

use crossbeam_channel::bounded;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The whole script run (spawn, connect, every call, shutdown) must end within this.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

fn sdk_dir() -> PathBuf {
    let dir = std::env::var_os("WINX_TEST_TS_SDK")
        .map(PathBuf::from)
        .unwrap_or_else(|| support::manifest_dir().join("target/node"));
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk/package.json")
            .is_file(),
        "the TypeScript SDK interop tests need the SDK in {}: run `make test` (or `make \
         node-sdk`, then `cargo test`)",
        dir.display()
    );
    dir
}

/// Run the client script with `extra` arguments in `env`; returns its JSON report.
fn run_client(dir: &std::path::Path, workspace: &std::path::Path, extra: &[&str]) -> Value {
    let script = support::manifest_dir().join("tests/interop/ts_client.mjs");
    let home = dir.join("home");
    let run = dir.join("run");
    for d in [&home, &run] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let child = Command::new("node")
        .arg(&script)
        .arg("--sdk")
        .arg(sdk_dir())
        .arg("--server")
        .arg(env!("CARGO_BIN_EXE_winx-code-agent"))
        .arg("--workspace")
        .arg(workspace)
        .args(extra)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("WINX_STATE_DIR", dir.join("state"))
        .env("XDG_RUNTIME_DIR", &run)
        .env("WINX_RUNTIME", "embedded")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node (is Node.js installed? `make test` checks)");
    let pid = child.id();
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(SCRIPT_TIMEOUT) {
        Ok(out) => out.expect("wait for the TypeScript client"),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            support::kill_processes_mentioning(dir);
            panic!("the TypeScript SDK client did not finish within {SCRIPT_TIMEOUT:?}");
        }
    };
    support::kill_processes_mentioning(dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| !l.trim().is_empty());
    let report: Value = line
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no JSON report (exit {}):\nstdout:\n{stdout}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(
        report["ok"],
        true,
        "TypeScript SDK client failed: {}\nstderr:\n{}",
        report["error"].as_str().unwrap_or_default(),
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("project");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("README.md"), "# interop fixture\n").unwrap();
    let ws = ws.canonicalize().unwrap();
    (dir, ws)
}

#[test]
fn typescript_sdk_client_over_stdio() {
    let (dir, ws) = fixture();
    let r = run_client(dir.path(), &ws, &[]);
    assert!(r["tools"].as_u64().unwrap() >= 10, "{r}");
}

#[test]
fn typescript_sdk_client_over_http() {
    let s = http_support::Server::start(&[]);
    let url = format!("http://{}/mcp", s.addr);
    let ws = s.home.workspace.clone();
    std::fs::write(ws.join("README.md"), "# interop fixture\n").unwrap();
    let client_dir = tempfile::tempdir().unwrap();
    let r = run_client(
        client_dir.path(),
        &ws,
        &["--url", &url, "--token", http_support::TOKEN],
    );
    assert!(r["tools"].as_u64().unwrap() >= 10, "{r}");
}
