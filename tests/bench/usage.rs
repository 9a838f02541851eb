//! `cargo bench --bench usage` (`make bench`): what the usage log costs and how fast it
//! is read back.
//!
//! - cheap call p50 (`Initialize status` over stdio) with the log on and off, the two
//!   servers driven alternately so both see the same machine noise; target: on within 5 %
//!   of off;
//! - the writer at 20,000 events/s (paced) without a drop, and its burst throughput;
//! - `report` over 1,000,000 lines (JSON and HTML); target ≤ 3 s.
//!
//! A report, not a gate: figures with targets and PASS/MISS, then one JSON line.

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};
use winx::usage::event::{Facts, Origin, ToolCall};
use winx::usage::{Event, Rotation, Settings, Sink};

const BIN: &str = env!("CARGO_BIN_EXE_winx-code-agent");
const HARD_TIMEOUT: Duration = Duration::from_secs(30);
const CALLS: usize = 2_000;
const WARMUP: usize = 100;
const PACED_RATE: u64 = 20_000;
const BURST_EVENTS: u64 = 200_000;
const REPORT_LINES: usize = 1_000_000;
const REPORT_TARGET_MS: f64 = 3_000.0;
const OVERHEAD_TARGET_PCT: f64 = 5.0;

/// One stdio server in its own temp dir, with a session to ask the status of.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pair: Value,
    next: u64,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(log: Option<&Path>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .env("WINX_STATE_DIR", dir.path().join("state"))
            .env("XDG_RUNTIME_DIR", &run)
            .env("WINX_RUNTIME", "embedded")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(l) = log {
            cmd.env("WINX_USAGE_LOG", l);
        }
        let mut child = cmd.spawn().expect("spawn the server");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = unbounded();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut s = Server {
            child,
            stdin: Some(stdin),
            lines,
            pair: Value::Null,
            next: 0,
            _dir: dir,
        };
        s.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}),
        );
        let ws = ws.canonicalize().unwrap();
        let (_, first) = s.call(
            "tools/call",
            json!({"name": "Initialize", "arguments": {"type": "first_call",
                   "workspace_root": ws}}),
        );
        let d = &first["result"]["structuredContent"]["data"];
        s.pair = json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]});
        s
    }

    fn call(&mut self, method: &str, params: Value) -> (Duration, Value) {
        self.next += 1;
        let mut line =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": self.next, "method": method,
                                       "params": params}))
            .unwrap();
        line.push(b'\n');
        let t = Instant::now();
        self.stdin.as_mut().unwrap().write_all(&line).unwrap();
        let answer = match self.lines.recv_timeout(HARD_TIMEOUT) {
            Ok(a) => a,
            Err(RecvTimeoutError::Timeout) => panic!("no answer to {method}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server exited"),
        };
        let took = t.elapsed();
        let v: Value = serde_json::from_str(&answer).unwrap();
        assert!(v.get("error").is_none(), "{answer}");
        (took, v)
    }

    /// Close stdin and wait for the clean exit (the usage writer flushes on the way out).
    fn finish(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }

    fn status(&mut self) -> Duration {
        let mut args = self.pair.clone();
        args["type"] = json!("status");
        let (took, v) = self.call(
            "tools/call",
            json!({"name": "Initialize", "arguments": args}),
        );
        assert_eq!(v["result"]["isError"], false, "{v}");
        took
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn p50_ms(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len().div_ceil(2) - 1].as_secs_f64() * 1e3
}

/// Cheap-call p50 with the log off and on, calls alternating between the two servers.
fn cheap_call(dir: &Path) -> (f64, f64, u64) {
    let log = dir.join("cheap/usage.jsonl");
    let mut off = Server::start(None);
    let mut on = Server::start(Some(&log));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + CALLS {
        let (x, y) = match i % 2 {
            0 => (off.status(), on.status()),
            _ => {
                let y = on.status();
                (off.status(), y)
            }
        };
        if i >= WARMUP {
            a.push(x);
            b.push(y);
        }
    }
    on.finish();
    let written = std::fs::read_to_string(&log)
        .map(|t| t.lines().filter(|l| l.contains("\"tool_call\"")).count() as u64)
        .unwrap_or(0);
    (p50_ms(a), p50_ms(b), written)
}

/// A realistic terminal event.
fn event(i: u64) -> Event {
    Event::ToolCall(Box::new(ToolCall {
        usage_call_id: format!("c0000{i:08x}"),
        origin: Origin {
            transport: "http",
            request_id: Some(format!("r0000{i:08x}")),
            mcp_session: Some("0123456789abcdef".into()),
            client_name: Some("bench".into()),
            client_version: Some("1.0".into()),
            protocol: Some("2026-07-28"),
            compact_bash: false,
        },
        tool: "BashCommand",
        action: Some("command"),
        command_category: Some("build"),
        build: "0.1.0 (rev bench)".into(),
        principal: "alice".into(),
        thread: Some("fedcba9876543210".into()),
        outcome: "result",
        status: Some("completed"),
        retryable: Some(false),
        retry_same_call: Some(false),
        duration_ms: 12.345,
        response_bytes: Some(4096),
        facts: Facts {
            exit_code: Some(0),
            truncated: Some(false),
            effective_wait_ms: Some(30_000),
            effective_wait_policy: Some("adaptive"),
            effective_wait_mode: Some("synchronous"),
            ..Default::default()
        },
        ..Default::default()
    }))
}

fn writer_sink(dir: &Path, name: &str) -> (Sink, PathBuf) {
    let path = dir.join(name).join("usage.jsonl");
    let sink = Sink::start(&Settings {
        path: path.clone(),
        rotation: Rotation::Never,
        keep_days: 0,
        clock_skew_ms: 0,
        salt_file: dir.join(name).join("salt"),
    });
    (sink, path)
}

/// `PACED_RATE` events/s for one second (busy-paced): drops. Then a burst as fast as
/// one thread can emit: events/s written and drops.
fn writer(dir: &Path) -> (u64, f64, u64) {
    let (sink, _) = writer_sink(dir, "paced");
    let start = Instant::now();
    for i in 0..PACED_RATE {
        let due = start + Duration::from_nanos(i * 1_000_000_000 / PACED_RATE);
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        sink.emit(event(i));
    }
    assert!(sink.flush(HARD_TIMEOUT));
    let paced_drops = sink.dropped();
    let (sink, path) = writer_sink(dir, "burst");
    let t = Instant::now();
    for i in 0..BURST_EVENTS {
        sink.emit(event(i));
    }
    assert!(sink.flush(HARD_TIMEOUT));
    let secs = t.elapsed().as_secs_f64();
    let written = std::fs::read_to_string(path).unwrap().lines().count() as f64;
    (paced_drops, written / secs, sink.dropped())
}

/// A log of `REPORT_LINES` lines: started, phase, call and HTTP request per call.
fn big_log(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut w = BufWriter::new(std::fs::File::create(path).unwrap());
    let tools = [
        "BashCommand",
        "ReadFiles",
        "Initialize",
        "FileWriteOrEdit",
        "Execution",
    ];
    let t0 = 1_772_409_600_000i64;
    for i in 0..REPORT_LINES / 4 {
        let ts = t0 + i as i64 * 10;
        let tool = tools[i % tools.len()];
        let d = (i % 97) as f64 * 0.37 + 0.2;
        writeln!(w, r#"{{"usage_schema":1,"ts_ms":{ts},"event":"tool_started","usage_call_id":"c{i:012x}","request_id":"r{i:012x}","tool":"{tool}","principal":"alice"}}"#).unwrap();
        writeln!(w, r#"{{"usage_schema":1,"ts_ms":{ts},"event":"tool_phase","usage_call_id":"c{i:012x}","phase":"wait","start_ms":0.1,"duration_ms":{d:.3}}}"#).unwrap();
        let code = if i % 13 == 0 {
            r#","error_code":"read_required","next_action_tool":"ReadFiles","status":"needs_read""#
        } else {
            r#","status":"completed""#
        };
        writeln!(w, r#"{{"usage_schema":1,"ts_ms":{ts},"event":"tool_call","usage_call_id":"c{i:012x}","transport":"http","request_id":"r{i:012x}","mcp_session":"0123456789abcdef","client_name":"bench","protocol":"2026-07-28","tool":"{tool}","action":"command","command_category":"build","build":"0.1.0 (rev bench)","principal":"alice","thread":"t{:04}","outcome":"result"{code},"retryable":false,"retry_same_call":false,"duration_ms":{d:.3},"response_bytes":{},"batch_items":0,"worker_limit":0,"exit_code":{},"truncated":false,"effective_wait_ms":30000,"effective_wait_policy":"adaptive","effective_wait_mode":"synchronous","phases":{{"wait":{{"count":1,"total_ms":{d:.3}}}}}}}"#, i % 50, 100 + i % 5000, i % 3).unwrap();
        writeln!(w, r#"{{"usage_schema":1,"ts_ms":{},"event":"http_request","request_id":"r{i:012x}","peer":"127.0.0.1","method":"POST","rpc_method":"tools/call","status":200,"duration_ms":{:.3},"principal":"alice","build":"0.1.0 (rev bench)"}}"#, ts + 1, d + 0.4).unwrap();
    }
    w.flush().unwrap();
}

fn report_ms(log: &Path, format: &str) -> (f64, usize) {
    let t = Instant::now();
    let out = Command::new(BIN)
        .args(["report", "--log", log.to_str().unwrap(), "--format", format])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", log.parent().unwrap())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if format == "json" {
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["source"]["linesSeen"], REPORT_LINES as u64);
        assert_eq!(v["counts"]["toolCalls"], (REPORT_LINES / 4) as u64);
    }
    (ms, out.stdout.len())
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    eprintln!("winx usage bench: {BIN}");
    let (off, on, written) = cheap_call(dir.path());
    let overhead = (on / off - 1.0) * 100.0;
    let (paced_drops, burst_rate, burst_drops) = writer(dir.path());
    let log = dir.path().join("big/usage.jsonl");
    big_log(&log);
    let (json_ms, _) = report_ms(&log, "json");
    let (html_ms, html_bytes) = report_ms(&log, "html");
    let rows: Vec<(&str, String, String, Option<bool>)> = vec![
        (
            "cheap call p50, log off",
            format!("{off:.3} ms"),
            "-".into(),
            None,
        ),
        (
            "cheap call p50, log on",
            format!("{on:.3} ms"),
            "-".into(),
            None,
        ),
        (
            "log-on overhead",
            format!("{overhead:+.1} %"),
            format!("<= {OVERHEAD_TARGET_PCT} %"),
            Some(overhead <= OVERHEAD_TARGET_PCT),
        ),
        (
            "tool_call events written",
            format!("{written}"),
            format!("{}", WARMUP + CALLS + 1),
            None,
        ),
        (
            "drops at 20,000 events/s",
            format!("{paced_drops}"),
            "0".into(),
            Some(paced_drops == 0),
        ),
        (
            "burst throughput",
            format!("{burst_rate:.0} /s"),
            format!(">= {PACED_RATE} /s"),
            Some(burst_rate >= PACED_RATE as f64),
        ),
        (
            "burst drops (200k, 1 thread)",
            format!("{burst_drops}"),
            "-".into(),
            None,
        ),
        (
            "report 1M lines (json)",
            format!("{json_ms:.0} ms"),
            format!("<= {REPORT_TARGET_MS} ms"),
            Some(json_ms <= REPORT_TARGET_MS),
        ),
        (
            "report 1M lines (html)",
            format!("{html_ms:.0} ms"),
            format!("<= {REPORT_TARGET_MS} ms"),
            Some(html_ms <= REPORT_TARGET_MS),
        ),
        (
            "html page size",
            format!("{html_bytes} B"),
            "-".into(),
            None,
        ),
    ];
    println!(
        "\n{:<30} {:>14} {:>14}  result\n{}",
        "figure",
        "value",
        "target",
        "-".repeat(70)
    );
    for (name, value, target, pass) in &rows {
        let r = match pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "info",
        };
        println!("{name:<30} {value:>14} {target:>14}  {r}");
    }
    println!(
        "{}",
        json!({"bench": "usage", "cheap_call_p50_off_ms": off, "cheap_call_p50_on_ms": on,
               "overhead_pct": overhead, "paced_drops": paced_drops,
               "burst_events_per_s": burst_rate, "burst_drops": burst_drops,
               "report_1m_json_ms": json_ms, "report_1m_html_ms": html_ms})
    );
}
