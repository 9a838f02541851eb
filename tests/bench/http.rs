//! `cargo bench --bench http` (`make bench`): throughput, latency and memory of the real
//! `winx-code-agent serve --http` release binary under keep-alive load (issue 18).
//!
//! A report, not a gate: every figure is printed with its target and PASS/MISS, then one
//! JSON line for machines; the process exits 0 even on a MISS. It panics only when the
//! server misbehaves (an answer that is not HTTP, a connection closed mid-run), because
//! then the figures would be meaningless.
//!
//! The client runs on the same machine as the server (2 cores in CI), so its cost is
//! taken out of the server's share of the CPU: it is kept lean on purpose. Each request's
//! bytes (head and body) are built once and sent with one `write`; the answer is read
//! into a reused buffer and parsed only as far as the status code and `Content-Length`
//! (every answer of this server is length-framed). No JSON is parsed or built inside the
//! timed loop, nothing is allocated per request, and latency is the span from the write
//! to the last byte of the answer. A round starts all its clients together after a
//! warm-up, and its rate is the requests it completed over its wall time.
//!
//! What is measured:
//! - `ping` (a stateless 2026-07-28 request, authenticated) at 1, 8 and 32 keep-alive
//!   clients, with `--max-concurrency` at its default (32): at 32 clients no request may
//!   be refused (each client has one request in flight, never more than the cap);
//! - a cheap `tools/call`, `Initialize` with `type: status` on a session made once before
//!   the round (it verifies the session and asks the session's shell for its state), at
//!   8 clients, for information;
//! - the server's RSS cold (just started) and idle (it has answered one request, so the
//!   code serving requests is paged in, and holds no connection), and again after the
//!   `ping` load, once every connection has closed and its thread ended: it must be back
//!   within 10 % of idle within a second (`rss.settle` says how long it took; the server
//!   hands free heap back 100 ms after its last connection closed); its PSS and private
//!   memory (smaps_rollup) idle and at the end, VmRSS counting shared pages in full.

#[path = "report.rs"]
#[allow(dead_code)]
mod report;
#[path = "server.rs"]
mod server;

use crossbeam_channel::{after, bounded};
use report::{Samples, memory_mib, vm_rss_mib};
use serde_json::{Value, json};
use server::{HARD_TIMEOUT, Sandbox};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-token-0123456789abcdef0123456789abcdef";
/// Requests per measured round (split between its clients), and unmeasured requests
/// per client before it. `WINX_BENCH_HTTP_REQUESTS` overrides the first (profiling).
const ROUND_REQUESTS: usize = 60_000;
const WARMUP_PER_CLIENT: usize = 200;
/// The status tool call is slower (it asks the shell): fewer of them.
const TOOL_ROUND_REQUESTS: usize = 6_000;

const RPS_TARGET: f64 = 20_000.0;
const P99_8_TARGET_MS: f64 = 2.0;
const P99_32_TARGET_MS: f64 = 5.0;
const IDLE_RSS_TARGET_MIB: f64 = 10.0;
/// After the load, RSS may exceed idle by this fraction, once settled within this long.
const RSS_REGROWTH: f64 = 0.10;
const RSS_SETTLE: Duration = Duration::from_secs(1);

/// The server under test; killed on drop (the sandbox ends whatever it started).
struct Http {
    child: Child,
    addr: SocketAddr,
}

impl Http {
    fn start(sb: &Sandbox) -> Http {
        let token = sb.dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).expect("write token");
        std::fs::set_permissions(&token, PermissionsExt::from_mode(0o600)).expect("chmod");
        // `WINX_BENCH_HTTP_BIN`: another build of the server (one with symbols, to profile).
        let bin = std::env::var_os("WINX_BENCH_HTTP_BIN").unwrap_or(server::BIN.into());
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", sb.dir.path().join("home"))
            .env("WINX_STATE_DIR", sb.dir.path().join("state"))
            .env("XDG_RUNTIME_DIR", sb.dir.path().join("run"))
            .args(["serve", "--http", "--bind", "127.0.0.1:0", "--token-file"])
            .arg(&token)
            .args(["--requests-per-minute", "1000000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn winx-code-agent");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = bounded(1);
        // Detached: ends when the server's stderr closes.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1)
                    && let Some(addr) = rest.strip_suffix("/mcp")
                {
                    let _ = tx.try_send(addr.parse::<SocketAddr>().expect("address"));
                }
            }
        });
        let addr = rx
            .recv_timeout(HARD_TIMEOUT)
            .expect("no readiness line from serve --http");
        Http { child, addr }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn rss_mib(&self) -> f64 {
        vm_rss_mib(self.pid()).expect("server VmRSS")
    }

    /// (PSS, private) in MiB: its proportional share, and what its exit would free.
    fn pss_private_mib(&self) -> (f64, f64) {
        let m = memory_mib(self.pid()).expect("server smaps_rollup");
        (m.pss, m.private)
    }

    /// Live connection threads (`http-conn`), from /proc.
    fn conn_threads(&self) -> usize {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid())).expect("tasks");
        tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .filter(|comm| comm.trim() == "http-conn")
            .count()
    }

    /// Wait until every connection thread has ended (each ends when its client closes),
    /// polling every 10 ms for at most HARD_TIMEOUT.
    fn settle(&self) {
        let give_up = after(HARD_TIMEOUT);
        while self.conn_threads() > 0 {
            assert!(
                give_up.try_recv().is_err(),
                "connection threads did not end"
            );
            let _ = after(Duration::from_millis(10)).recv();
        }
    }
}

impl Http {
    /// RSS once it is at most `target`, or after `RSS_SETTLE` (the server hands free heap
    /// back 100 ms after its last connection closed), polled every 10 ms; and how long
    /// after the last connection thread ended it got there.
    fn rss_settled(&self, target: f64) -> (f64, Duration) {
        let t0 = Instant::now();
        let give_up = after(RSS_SETTLE);
        loop {
            let rss = self.rss_mib();
            if rss <= target || give_up.try_recv().is_ok() {
                return (rss, t0.elapsed());
            }
            let _ = after(Duration::from_millis(10)).recv();
        }
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bytes of one authenticated stateless POST to /mcp, built once.
fn request_bytes(addr: SocketAddr, method: &str, name: Option<&str>, params: Value) -> Vec<u8> {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let body = serde_json::to_vec(&body).expect("serialize body");
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n"
    );
    if let Some(n) = name {
        head.push_str(&format!("Mcp-Name: {n}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// One keep-alive connection with a reused read buffer.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, HARD_TIMEOUT).expect("connect");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        stream
            .set_read_timeout(Some(HARD_TIMEOUT))
            .expect("timeout");
        Client {
            stream,
            buf: vec![0; 64 * 1024],
        }
    }

    /// Send `req`, read its answer; the status and the body's range in `self.buf`.
    fn call(&mut self, req: &[u8]) -> (u16, std::ops::Range<usize>) {
        self.stream.write_all(req).expect("send request");
        let mut have = 0;
        let head_end = loop {
            if let Some(i) = find(&self.buf[..have], b"\r\n\r\n") {
                break i + 4;
            }
            have += self.read_more(have);
        };
        let head = &self.buf[..head_end];
        let status = std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let len = content_length(head).expect("a Content-Length answer");
        let end = head_end + len;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        while have < end {
            have += self.read_more(have);
        }
        assert_eq!(have, end, "bytes after the answer (no pipelining here)");
        (status, head_end..end)
    }

    fn read_more(&mut self, have: usize) -> usize {
        if have == self.buf.len() {
            self.buf.resize(have * 2, 0);
        }
        match self.stream.read(&mut self.buf[have..]) {
            Ok(0) => panic!("the server closed a keep-alive connection"),
            Ok(n) => n,
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &[u8]) -> Option<usize> {
    head.split(|&b| b == b'\n').find_map(|line| {
        let (k, v) = line.split_at(line.iter().position(|&b| b == b':')?);
        if !k.eq_ignore_ascii_case(b"content-length") {
            return None;
        }
        std::str::from_utf8(&v[1..]).ok()?.trim().parse().ok()
    })
}

/// What one round measured.
struct Round {
    rps: f64,
    lat: Samples,
    /// Answers other than 200.
    refused: usize,
}

/// `clients` connections, each sending `req` `total / clients` times after a warm-up.
fn round(addr: SocketAddr, req: &[u8], clients: usize, total: usize) -> Round {
    let per_client = total / clients;
    let start = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (req, start) = (req.to_vec(), start.clone());
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for _ in 0..WARMUP_PER_CLIENT {
                    c.call(&req);
                }
                let mut lat = Vec::with_capacity(per_client);
                let mut refused = 0;
                start.wait();
                for _ in 0..per_client {
                    let t = Instant::now();
                    let (status, _) = c.call(&req);
                    lat.push(t.elapsed());
                    refused += usize::from(status != 200);
                }
                (lat, refused)
            })
        })
        .collect();
    start.wait();
    // Progress on stderr, for whoever attaches a profiler to one round.
    eprintln!(
        "round: {clients} client(s), {} requests",
        per_client * clients
    );
    let t0 = Instant::now();
    let mut all = Vec::with_capacity(per_client * clients);
    let mut refused = 0;
    for t in threads {
        let (lat, r) = t.join().expect("client thread");
        all.extend(lat);
        refused += r;
    }
    let wall = t0.elapsed();
    Round {
        rps: all.len() as f64 / wall.as_secs_f64(),
        lat: Samples::new(all),
        refused,
    }
}

/// A session for the status calls: one `first_call`, whose pair later calls carry.
fn status_request(sb: &Sandbox, addr: SocketAddr) -> Vec<u8> {
    let ws = sb.workspace.to_string_lossy().into_owned();
    let args = json!({"type": "first_call", "workspace_root": ws});
    let first = request_bytes(
        addr,
        "tools/call",
        Some("Initialize"),
        json!({"name": "Initialize", "arguments": args}),
    );
    let mut c = Client::connect(addr);
    let (status, body) = c.call(&first);
    let v: Value = serde_json::from_slice(&c.buf[body]).expect("JSON answer");
    assert_eq!(status, 200, "first_call: {v}");
    let data = &v["result"]["structuredContent"]["data"];
    assert!(data["thread_id"].is_string(), "first_call: {v}");
    let args = json!({"type": "status", "thread_id": data["thread_id"],
                      "workspace_root": data["workspace_root"]});
    let req = request_bytes(
        addr,
        "tools/call",
        Some("Initialize"),
        json!({"name": "Initialize", "arguments": args}),
    );
    let (status, body) = c.call(&req);
    let v: Value = serde_json::from_slice(&c.buf[body]).expect("JSON answer");
    let ok = status == 200 && v["result"]["isError"] == json!(false);
    assert!(ok, "status: {v}");
    req
}

#[derive(Clone, Copy)]
enum Goal {
    AtMost(f64),
    AtLeast(f64),
    Info,
}

/// The table (as tests/bench/report.rs prints it, with targets either way) and a JSON line.
struct Table {
    rows: Vec<(String, f64, &'static str, Goal)>,
}

impl Table {
    fn add(&mut self, name: &str, value: f64, unit: &'static str, goal: Goal) {
        self.rows.push((name.to_string(), value, unit, goal));
    }

    fn round(&mut self, name: &str, r: &Round, p99: Goal, rps: Goal) {
        self.add(&format!("{name}.rps"), r.rps, "req/s", rps);
        self.add(&format!("{name}.p50"), r.lat.pct(50.0), "ms", Goal::Info);
        self.add(&format!("{name}.p99"), r.lat.pct(99.0), "ms", p99);
        self.add(&format!("{name}.max"), r.lat.pct(100.0), "ms", Goal::Info);
    }

    fn print(&self) {
        let rule = "-".repeat(66);
        println!(
            "\n{:<26} {:>16} {:>14}  result\n{rule}",
            "figure", "value", "target"
        );
        let (mut metrics, mut misses) = (serde_json::Map::new(), Vec::new());
        for (name, value, unit, goal) in &self.rows {
            let digits = match *unit {
                "" | "req/s" => 0,
                _ => 3,
            };
            let (target, pass) = match *goal {
                Goal::AtMost(t) => (Some(("<=", t)), Some(*value <= t)),
                Goal::AtLeast(t) => (Some((">=", t)), Some(*value >= t)),
                Goal::Info => (None, None),
            };
            let result = pass.map_or("info", |p| if p { "PASS" } else { "MISS" });
            let value_s = format!("{value:.digits$} {unit}");
            let target_s = target.map_or("-".into(), |(op, t)| format!("{op} {t:.digits$} {unit}"));
            println!(
                "{name:<26} {:>16} {:>14}  {result}",
                value_s.trim(),
                target_s.trim()
            );
            if pass == Some(false) {
                misses.push(name.clone());
            }
            let (goal, target) = target.unzip();
            let v = json!({"value": value, "unit": unit, "goal": goal, "target": target,
                           "pass": pass});
            metrics.insert(name.clone(), v);
        }
        let with_target = self.rows.iter().filter(|r| !matches!(r.3, Goal::Info));
        println!(
            "{rule}\n{} figures with targets, {} MISS",
            with_target.count(),
            misses.len()
        );
        let all_pass = misses.is_empty();
        let line =
            json!({"bench": "http", "metrics": metrics, "misses": misses, "all_pass": all_pass});
        println!("{line}");
    }
}

fn main() {
    let total = std::env::var("WINX_BENCH_HTTP_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUND_REQUESTS);
    let sb = Sandbox::new();
    let server = Http::start(&sb);
    eprintln!("server pid {} on {}", server.pid(), server.addr);
    let mut t = Table { rows: Vec::new() };
    let rss_target = Goal::AtMost(IDLE_RSS_TARGET_MIB);
    t.add("rss.idle_cold", server.rss_mib(), "MiB", rss_target);
    // Idle as a server is between bursts: it has answered once (the code that serves a
    // request is paged in) and holds no connection.
    let ping = request_bytes(server.addr, "ping", None, json!({}));
    assert_eq!(Client::connect(server.addr).call(&ping).0, 200);
    server.settle();
    let idle = server.rss_mib();
    t.add("rss.idle", idle, "MiB", rss_target);
    let (pss, private) = server.pss_private_mib();
    t.add("pss.idle", pss, "MiB", Goal::Info);
    t.add("private.idle", private, "MiB", Goal::Info);
    let r1 = round(server.addr, &ping, 1, total / 4);
    t.round("ping.1", &r1, Goal::Info, Goal::Info);
    let r8 = round(server.addr, &ping, 8, total);
    let rps = Goal::AtLeast(RPS_TARGET);
    t.round("ping.8", &r8, Goal::AtMost(P99_8_TARGET_MS), rps);
    let r32 = round(server.addr, &ping, 32, total);
    t.round("ping.32", &r32, Goal::AtMost(P99_32_TARGET_MS), Goal::Info);
    let refused = (r1.refused + r8.refused + r32.refused) as f64;
    t.add("ping.refused", refused, "", Goal::AtMost(0.0));
    server.settle();
    let target = idle * (1.0 + RSS_REGROWTH);
    let (loaded, took) = server.rss_settled(target);
    t.add("rss.after_ping_load", loaded, "MiB", Goal::AtMost(target));
    t.add("rss.settle", took.as_secs_f64() * 1e3, "ms", Goal::Info);
    let status = status_request(&sb, server.addr);
    let tool = round(server.addr, &status, 8, TOOL_ROUND_REQUESTS);
    t.round("status_call.8", &tool, Goal::Info, Goal::Info);
    t.add(
        "status_call.refused",
        tool.refused as f64,
        "",
        Goal::AtMost(0.0),
    );
    server.settle();
    t.add("rss.after_all", server.rss_mib(), "MiB", Goal::Info);
    let (pss, private) = server.pss_private_mib();
    t.add("pss.after_all", pss, "MiB", Goal::Info);
    t.add("private.after_all", private, "MiB", Goal::Info);
    t.print();
}
