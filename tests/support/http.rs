//! Test handle for `winx-code-agent serve --http`: its own temp HOME, state dir, private
//! 0700 runtime dir and workspace, a token file, readiness synchronised on the
//! `listening on http://…/mcp` stderr line, hard timeouts, kill on Drop (and every process
//! whose command line mentions the temp dir). Plus a small HTTP/1.1 client over
//! `TcpStream`, raw enough to send malformed requests on purpose.
//!
//! Included with `#[path = "support/http.rs"]` next to `mod support;`.
#![allow(dead_code)]

pub use crate::support::HARD_TIMEOUT;
use crate::support::kill_processes_mentioning;
use crate::support::wait::{Deadline, eventually};
use crossbeam_channel::{Receiver, bounded};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub const TOKEN: &str = "test-token-0123456789abcdef0123456789abcdef";

/// A temp directory laid out like a user's machine, shared by server starts.
pub struct Home {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["home", "run", "project"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::set_permissions(dir.path().join("run"), PermissionsExt::from_mode(0o700)).unwrap();
        let workspace = dir.path().join("project").canonicalize().unwrap();
        Home { dir, workspace }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Write a private (0600) file and return its path.
    pub fn secret(&self, name: &str, contents: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, contents).unwrap();
        std::fs::set_permissions(&p, PermissionsExt::from_mode(0o600)).unwrap();
        p.to_string_lossy().into_owned()
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = crate::support::command(&crate::support::isolated_env(
            &self.path("home"),
            &self.path("state"),
            &self.path("run"),
        ));
        cmd.args(args)
            .env("WINX_RUNTIME", "embedded")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// A loopback `serve --http` start with the principal config `cfg` that must fail.
    pub fn principal_config_failure(&self, cfg: &str) -> Output {
        self.start_failing(
            &[
                "serve",
                "--http",
                "--bind",
                "127.0.0.1:0",
                "--principal-config",
                cfg,
            ],
            &[],
        )
    }

    /// Run a server start that must fail; returns its output (bounded by HARD_TIMEOUT).
    pub fn start_failing(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let child = self
            .command(args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn winx-code-agent");
        let (tx, rx) = bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        rx.recv_timeout(HARD_TIMEOUT)
            .expect("a failing start must exit promptly")
            .unwrap()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        kill_processes_mentioning(self.dir.path());
    }
}

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
    /// Disconnects when the server's stderr closes, i.e. when it exits.
    stderr_closed: Receiver<()>,
    /// Dropped last: the processes it names are killed first.
    pub home: Home,
}

impl Server {
    /// Start with a private token file and `extra` arguments.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_in(Home::new(), extra, &[], true)
    }

    /// Start in `home` with `args` after `serve --http` (and `--bind 127.0.0.1:0` unless
    /// `args` bind elsewhere); with
    /// `token_file`, `--token-file <TOKEN>` is added.
    pub fn start_in(home: Home, args: &[&str], env: &[(&str, &str)], token_file: bool) -> Server {
        let mut all: Vec<String> = vec!["serve".into(), "--http".into()];
        if !args.contains(&"--bind") {
            all.extend(["--bind".to_string(), "127.0.0.1:0".to_string()]);
        }
        if token_file {
            all.push("--token-file".into());
            all.push(home.secret("token", &format!("{TOKEN}\n")));
        }
        all.extend(args.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let log = home.path("stderr.log");
        let mut child = home
            .command(&refs, env)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn winx-code-agent");
        let (ready, stderr_closed) = tee_stderr(child.stderr.take().unwrap(), log.clone());
        let addr = match ready.recv_timeout(HARD_TIMEOUT) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "no readiness line within {HARD_TIMEOUT:?}; stderr:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        };
        Server {
            child,
            addr,
            log,
            stderr_closed,
            home,
        }
    }

    pub fn stderr_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    /// Wait for the process to exit within `d`: synchronised on its stderr closing (only
    /// exit closes it), then reaped.
    pub fn wait_exit(&mut self, d: Duration) -> Option<ExitStatus> {
        match self.stderr_closed.recv_timeout(d) {
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                Some(self.child.wait().unwrap())
            }
            _ => None,
        }
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(self.addr)
    }

    /// One MCP POST with the default token on a fresh connection.
    pub fn post(&self, body: &Value) -> Resp {
        self.conn().mcp(TOKEN, &[], body)
    }

    /// `tools/call` over the stateless era with token `token`; returns the `result`.
    pub fn call(&self, token: &str, tool: &str, args: Value) -> Value {
        let r = self.conn().mcp(
            token,
            &modern_headers("tools/call", Some(tool)),
            &modern("tools/call", json!({"name": tool, "arguments": args})),
        );
        assert_eq!(r.status, 200, "{tool}: {}", r.text());
        let v = r.json();
        assert!(v.get("error").is_none(), "JSON-RPC error: {v}");
        v["result"].clone()
    }

    /// `Initialize` (first call) of the home's workspace as `token`: the session pair
    /// (`thread_id`, `workspace_root`) and the rest of its `data`.
    pub fn first_call(&self, token: &str) -> Value {
        let ws = path_str(&self.home.workspace);
        let init = self.call(
            token,
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws}),
        );
        init["structuredContent"]["data"].clone()
    }

    /// Current resident set size of the server, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("WINX_TEST_KEEP_LOGS").is_some() {
            eprintln!("server stderr:\n{}", self.stderr_log());
        }
    }
}

/// Copy the child's stderr to `log`; report the address of the readiness line, and
/// disconnect the second channel at EOF.
fn tee_stderr(
    stderr: std::process::ChildStderr,
    log: PathBuf,
) -> (Receiver<SocketAddr>, Receiver<()>) {
    let (tx, rx) = bounded(1);
    let (closed_tx, closed_rx) = bounded::<()>(0);
    std::thread::spawn(move || {
        let _closed = closed_tx;
        let mut out = std::fs::File::create(&log).unwrap();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(out, "{line}");
            if let Some(rest) = line.split("listening on http://").nth(1)
                && let Some(addr) = rest.strip_suffix("/mcp")
            {
                let _ = tx.try_send(addr.parse().expect("address in the readiness line"));
            }
        }
    });
    (rx, closed_rx)
}

/// `_meta` of a 2026-07-28 request.
pub fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

/// A stateless request body.
pub fn modern(method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// A `server/discover` request body.
pub fn discover() -> Value {
    modern("server/discover", json!({}))
}

/// One header, as `Conn::send` takes them.
pub fn h(name: &str, value: &str) -> (String, String) {
    (name.to_string(), value.to_string())
}

/// The routing headers a 2026-07-28 client sends.
pub fn modern_headers(method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("MCP-Protocol-Version".to_string(), "2026-07-28".to_string()),
        ("Mcp-Method".to_string(), method.to_string()),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name".into(), n.into()));
    }
    h
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub elapsed: Duration,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// One keep-alive connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    pub addr: SocketAddr,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect_timeout(&addr, HARD_TIMEOUT).expect("connect");
        s.set_read_timeout(Some(HARD_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(HARD_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
            addr,
        }
    }

    /// A connection opened elsewhere (e.g. one that sent a partial request by hand).
    pub fn from_stream(s: TcpStream, addr: SocketAddr) -> Conn {
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
            addr,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes)?;
        self.writer.flush()
    }

    /// Build and send a request head (with `Host` unless given) plus `body`.
    pub fn send(&mut self, method: &str, path: &str, headers: &[(String, String)], body: &[u8]) {
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        self.send_raw(&bytes).expect("send request");
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Resp {
        let t0 = Instant::now();
        self.send(method, path, headers, body);
        let mut r = self.read().expect("read response");
        r.elapsed = t0.elapsed();
        r
    }

    /// POST `body` to /mcp as JSON with `token` and extra headers.
    pub fn mcp(&mut self, token: &str, extra: &[(String, String)], body: &Value) -> Resp {
        let mut h = vec![
            ("Authorization".to_string(), format!("Bearer {token}")),
            ("Content-Type".to_string(), "application/json".to_string()),
            (
                "Accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
        ];
        h.extend(extra.iter().cloned());
        self.request("POST", "/mcp", &h, &serde_json::to_vec(body).unwrap())
    }

    /// Whether the server has answered (or closed) this connection, without waiting.
    pub fn answered(&mut self) -> bool {
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let s = self.reader.get_ref();
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let got = s.peek(&mut b);
        s.set_nonblocking(false).unwrap();
        !matches!(got, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// Read one response (Content-Length or chunked body).
    pub fn read(&mut self) -> std::io::Result<Resp> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed",
            ));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if let Some(len) = get("Content-Length").and_then(|v| v.parse::<usize>().ok()) {
            body.resize(len, 0);
            self.reader.read_exact(&mut body)?;
        } else if get("Transfer-Encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size)?;
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; n + 2];
                self.reader.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        Ok(Resp {
            status,
            headers,
            body,
            elapsed: Duration::ZERO,
        })
    }
}

/// A `BashCommand` blocked on a gate (a FIFO it reads a line from), in flight on its own
/// thread; `release` lets it finish, `join` returns its HTTP status.
pub struct Held {
    gate: std::fs::File,
    thread: std::thread::JoinHandle<u16>,
}

impl Held {
    pub fn release(mut self) -> u16 {
        self.gate.write_all(b"go\n").expect("write the gate");
        drop(self.gate);
        self.thread.join().expect("the held call's thread")
    }
}

/// Start a `BashCommand` that waits on a gate in its own workspace `name`, and return once
/// the command is running: the event is the gate gaining its reader (a non-blocking open
/// for writing fails with ENXIO until then).
pub fn blocked_call(s: &Server, token: &str, name: &str) -> Held {
    use std::os::unix::fs::OpenOptionsExt;
    let ws = s.home.dir.path().join(name);
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let gate = ws.join("gate");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let init = s.call(
        token,
        "Initialize",
        json!({"type": "first_call", "workspace_root": path_str(&ws)}),
    );
    let pair = init["structuredContent"]["data"].clone();
    let args = json!({"thread_id": pair["thread_id"], "workspace_root": pair["workspace_root"],
        "action_json": {"command": "read x < gate; echo released"}, "wait_for_seconds": 60,
        "wait_policy": "until_complete"});
    let body = modern(
        "tools/call",
        json!({"name": "BashCommand", "arguments": args}),
    );
    let (addr, token) = (s.addr, token.to_string());
    let thread = std::thread::spawn(move || {
        let r = Conn::connect(addr).mcp(
            &token,
            &modern_headers("tools/call", Some("BashCommand")),
            &body,
        );
        r.status
    });
    let open_gate = || {
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&gate)
    };
    let (opened, _) = eventually(
        Deadline::hard("gated command start"),
        "the gated command opens its gate (or its call ends)",
        || (open_gate(), thread.is_finished()),
        |(opened, ended)| opened.is_ok() || *ended,
    );
    match opened {
        Ok(gate) => Held { gate, thread },
        Err(_) => panic!("the gated call ended early: {}", thread.join().unwrap()),
    }
}

/// A principal config in `home` (0600) and the tokens of its principals.
pub fn principal_config(home: &Home, toml: &str) -> String {
    home.secret("principals.toml", toml)
}

/// A principal file naming `alice` (token `TOKEN-a`) and `bob` (token `TOKEN-b`, with
/// `b_policy` lines appended to his entry).
pub fn two_principals(home: &Home, b_policy: &str) -> String {
    let a = home.secret("a.token", &format!("{TOKEN}-a"));
    let b = home.secret("b.token", &format!("{TOKEN}-b"));
    principal_config(
        home,
        &format!(
            "[[principals]]\nname = \"alice\"\ntoken_file = \"{a}\"\n\n\
             [[principals]]\nname = \"bob\"\ntoken_file = \"{b}\"\n{b_policy}\n"
        ),
    )
}

pub fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Bearer `token` and a JSON content type.
pub fn auth_headers(token: &str) -> Vec<(String, String)> {
    vec![
        h("Authorization", &format!("Bearer {token}")),
        h("Content-Type", "application/json"),
    ]
}

/// `r` has `status` and says `Retry-After: 1`.
pub fn assert_retry_after(r: &Resp, status: u16) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(
        r.header("Retry-After"),
        Some("1"),
        "{status} without Retry-After"
    );
}

/// A discover request with a 2 KiB body, so a partial body can be held on the wire.
pub fn padded_discover() -> Value {
    modern("server/discover", json!({"pad": "x".repeat(2048)}))
}

/// A request admitted and then held: its head promises a body that never fully arrives.
pub fn hold_a_request(s: &Server) -> Conn {
    let mut c = s.conn();
    let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", s.addr);
    for (k, v) in auth_headers(TOKEN)
        .into_iter()
        .chain(modern_headers("server/discover", None))
    {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = serde_json::to_vec(&padded_discover()).unwrap();
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    c.send_raw(head.as_bytes()).unwrap();
    c.send_raw(&body[..10]).unwrap();
    c
}

/// Hold a request that owns the only dispatch slot (`--max-concurrency 1`): a
/// `BashCommand` waiting on a gate. A slow body holds no slot (bodies are read before a
/// slot is taken), so a running handler is what holds it.
pub fn hold_admitted(s: &Server) -> Held {
    blocked_call(s, TOKEN, "held")
}
