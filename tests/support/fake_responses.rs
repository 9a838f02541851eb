//! A scripted OpenAI Responses API on loopback, for tests that run a real agent host
//! (Codex CLI) offline: `POST …/responses` streams Server-Sent Events, everything else a
//! host probes (`GET …/models`, …) gets a harmless JSON answer.
//!
//! A test gives a script: a function from the request the host sent (its `tools` and
//! `input`) to the next [`Reply`]: a function call, a final text, or a fault cue (a
//! delay, HTTP 500, a stream ending in `response.failed`, a stream held open until the
//! test calls [`FakeResponses::release`]). Every request is kept in memory and appended
//! to `requests.jsonl` in the directory given at start, so a failing test can print what
//! the model received ([`FakeResponses::dump`]).
//!
//! Invariant: std threads only, bounded: at most [`MAX_CONNECTIONS`] connections served
//! at once, heads and bodies read under size limits and a read timeout, and every thread
//! ends once the handle is dropped (held streams are released first).
#![allow(dead_code)]

mod wire;

use crossbeam_channel::{Receiver, Sender, after};
use serde_json::{Value, json};
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use wire::{Head, Sse, read_body, read_head, write_json};

/// Connections served at once; a host opens one or two, so more means a runaway client.
pub const MAX_CONNECTIONS: usize = 16;
/// A client that sends nothing for this long is dropped, so no thread waits forever.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What the fake model does with one `POST …/responses`.
#[derive(Clone, Debug)]
pub enum Reply {
    /// One `function_call` output item: the host should run tool `name` (of
    /// `namespace`, when the host offered it inside a namespace tool).
    Call {
        namespace: Option<String>,
        name: String,
        arguments: Value,
    },
    /// A final assistant message, streamed as one text delta.
    Text(String),
    /// HTTP 500 with a JSON error body carrying this message.
    Http500(String),
    /// A stream that starts (`response.created`) and ends with `response.failed`.
    Failed(String),
    /// Wait this long, then answer with the inner reply.
    Delayed(Duration, Box<Reply>),
    /// Start the stream (`response.created`), then hold it open until the test calls
    /// [`FakeResponses::release`] (or drops the fake); then finish with the inner reply.
    Hold(Box<Reply>),
}

impl Reply {
    /// A call of the top-level function tool `name`.
    pub fn call(name: &str, arguments: Value) -> Reply {
        Reply::Call {
            namespace: None,
            name: name.to_string(),
            arguments,
        }
    }

    pub fn text(s: &str) -> Reply {
        Reply::Text(s.to_string())
    }
}

/// One request the host made, as the script and the log see it.
#[derive(Clone, Debug)]
pub struct Request {
    /// 0 for the first request the fake received.
    pub n: usize,
    pub method: String,
    pub path: String,
    /// Header names in lower case, in order; `authorization` is redacted.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Value::Null` when empty or not JSON).
    pub body: Value,
}

impl Request {
    /// True for a model turn (`POST …/responses`).
    pub fn is_turn(&self) -> bool {
        self.method == "POST"
            && self
                .path
                .split('?')
                .next()
                .unwrap_or("")
                .ends_with("/responses")
    }

    /// The tools the host offered the model.
    pub fn tools(&self) -> Vec<Value> {
        self.body["tools"].as_array().cloned().unwrap_or_default()
    }

    /// Every function tool offered as (namespace, name): a namespace tool (Codex offers
    /// an MCP server's tools as one, `mcp__<server>`) contributes its members.
    pub fn tool_names(&self) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        for t in self.tools() {
            let Some(n) = t["name"].as_str() else {
                continue;
            };
            if t["type"] == "namespace" {
                for sub in t["tools"].as_array().into_iter().flatten() {
                    if let Some(s) = sub["name"].as_str() {
                        out.push((Some(n.to_string()), s.to_string()));
                    }
                }
            } else {
                out.push((None, n.to_string()));
            }
        }
        out
    }

    /// A call of the one offered tool whose full name (`namespace` + name) ends with
    /// `suffix`: `"winx__BashCommand"` finds `BashCommand` in namespace `mcp__winx`, or a
    /// flat `mcp__winx__BashCommand`. Panics listing the offer when none or several match.
    pub fn call(&self, suffix: &str, arguments: Value) -> Reply {
        let names = self.tool_names();
        let full = |(ns, n): &(Option<String>, String)| match ns {
            Some(ns) => format!("{ns}__{n}"),
            None => n.clone(),
        };
        let hits: Vec<_> = names.iter().filter(|t| full(t).ends_with(suffix)).collect();
        assert!(
            hits.len() == 1,
            "want one tool named …{suffix}, offered: {:?}",
            names.iter().map(full).collect::<Vec<_>>()
        );
        Reply::Call {
            namespace: hits[0].0.clone(),
            name: hits[0].1.clone(),
            arguments,
        }
    }

    /// The conversation items the host sent (`input`).
    pub fn input(&self) -> Vec<Value> {
        self.body["input"].as_array().cloned().unwrap_or_default()
    }

    /// The text of every `function_call_output` in `input`, in order: what the model was
    /// given as tool results.
    pub fn outputs(&self) -> Vec<String> {
        self.input()
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| output_text(&i["output"]))
            .collect()
    }
}

/// A `function_call_output`'s `output`: a string, or content items whose texts are joined.
pub fn output_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

struct Shared {
    script: Box<Script>,
    log_path: PathBuf,
    requests: Mutex<Vec<Request>>,
    /// Signalled on every new request and every hold starting.
    changed: Condvar,
    held: AtomicUsize,
    /// Each `release` sends one token; a held stream takes one.
    release_tx: Sender<()>,
    release_rx: Receiver<()>,
    stop: AtomicBool,
    live: AtomicUsize,
}

/// The running fake; dropping it stops the listener and releases held streams.
pub struct FakeResponses {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl FakeResponses {
    /// Listen on 127.0.0.1 (a free port) and answer with `script`; log into `dir`.
    pub fn start(
        dir: &Path,
        script: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> FakeResponses {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake Responses API");
        let addr = listener.local_addr().unwrap();
        let (release_tx, release_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared {
            script: Box::new(script),
            log_path: dir.join("requests.jsonl"),
            requests: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            held: AtomicUsize::new(0),
            release_tx,
            release_rx,
            stop: AtomicBool::new(false),
            live: AtomicUsize::new(0),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("fake-responses-accept".into())
            .spawn(move || accept_loop(listener, s))
            .unwrap();
        FakeResponses {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// The base URL a host's provider config takes (`http://127.0.0.1:<port>/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn log_path(&self) -> &Path {
        &self.shared.log_path
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The model turns (`POST …/responses`) so far.
    pub fn turns(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(Request::is_turn)
            .collect()
    }

    /// Block until `n` model turns have arrived (or `limit` passes: `None`).
    pub fn wait_turns(&self, n: usize, limit: Duration) -> Option<Vec<Request>> {
        let guard = self.shared.requests.lock().unwrap();
        let (guard, _) = self
            .shared
            .changed
            .wait_timeout_while(guard, limit, |r| {
                r.iter().filter(|q| q.is_turn()).count() < n
            })
            .unwrap();
        let turns: Vec<Request> = guard.iter().filter(|q| q.is_turn()).cloned().collect();
        (turns.len() >= n).then_some(turns)
    }

    /// Block until `n` streams are being held by [`Reply::Hold`] (false after `limit`).
    pub fn wait_held(&self, n: usize, limit: Duration) -> bool {
        let guard = self.shared.requests.lock().unwrap();
        let (_g, _) = self
            .shared
            .changed
            .wait_timeout_while(guard, limit, |_| {
                self.shared.held.load(Ordering::SeqCst) < n
            })
            .unwrap();
        self.shared.held.load(Ordering::SeqCst) >= n
    }

    /// Let one held stream finish: one being held now, else the next one to be held.
    pub fn release(&self) {
        let _ = self.shared.release_tx.send(());
    }

    /// What the model was given, turn by turn, for a failure message: each turn's new
    /// tool results in full (long ones cut in their middle) and its last other item.
    pub fn dump(&self) -> String {
        let mut out = format!("requests logged in {}\n", self.shared.log_path.display());
        for r in self.requests() {
            out.push_str(&format!("#{} {} {}\n", r.n, r.method, r.path));
            if !r.is_turn() {
                continue;
            }
            let input = r.input();
            let tail_start = input
                .iter()
                .rposition(|i| i["type"] == "function_call")
                .unwrap_or(input.len().saturating_sub(1));
            for item in &input[tail_start.min(input.len())..] {
                let text = if item["type"] == "function_call_output" {
                    output_text(&item["output"])
                } else {
                    item.to_string()
                };
                out.push_str(&format!(
                    "  {}: {}\n",
                    item["type"],
                    cut_middle(&text, 3000)
                ));
            }
        }
        out
    }
}

impl Drop for FakeResponses {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for _ in 0..MAX_CONNECTIONS {
            let _ = self.shared.release_tx.send(());
        }
        // Wake the blocking accept so its thread sees `stop` and ends.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn cut_middle(s: &str, keep: usize) -> String {
    if s.len() <= keep {
        return s.to_string();
    }
    let mut a = keep / 2;
    while !s.is_char_boundary(a) {
        a -= 1;
    }
    let mut b = s.len() - keep / 2;
    while !s.is_char_boundary(b) {
        b += 1;
    }
    format!("{} …[{} bytes]… {}", &s[..a], b - a, &s[b..])
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        if shared.live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = conn.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            continue;
        }
        shared.live.fetch_add(1, Ordering::SeqCst);
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("fake-responses-conn".into())
            .spawn(move || {
                let _ = serve(conn, &s);
                s.live.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Serve one connection: requests until the client closes or a stream was sent (streams
/// end with the connection).
fn serve(conn: TcpStream, shared: &Shared) -> std::io::Result<()> {
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let Some(head) = read_head(&mut reader)? else {
            return Ok(());
        };
        let body = read_body(&mut reader, &head.2)?;
        let req = record(shared, head, &body);
        if !req.is_turn() {
            let answer = probe_answer(&req);
            write_json(&mut out, "200 OK", &answer)?;
            continue;
        }
        let reply = (shared.script)(&req);
        return stream(&mut out, shared, &req, reply);
    }
}

fn record(shared: &Shared, head: Head, body: &[u8]) -> Request {
    let (method, path, mut headers) = head;
    for (k, v) in headers.iter_mut() {
        if k == "authorization" {
            *v = "<redacted>".into();
        }
    }
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut all = shared.requests.lock().unwrap();
    let req = Request {
        n: all.len(),
        method,
        path,
        headers,
        body,
    };
    let line = json!({"n": req.n, "method": req.method, "path": req.path,
                      "headers": req.headers, "body": req.body});
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&shared.log_path)
    {
        let _ = writeln!(f, "{line}");
    }
    all.push(req.clone());
    shared.changed.notify_all();
    req
}

/// What a host's side requests get: an empty model list for `…/models`, `{}` otherwise.
fn probe_answer(req: &Request) -> Value {
    if req
        .path
        .split('?')
        .next()
        .unwrap_or("")
        .ends_with("/models")
    {
        json!({"object": "list", "data": [], "models": []})
    } else {
        json!({})
    }
}

fn stream(
    out: &mut TcpStream,
    shared: &Shared,
    req: &Request,
    reply: Reply,
) -> std::io::Result<()> {
    let mut sse = Sse {
        out,
        id: format!("resp_{}", req.n),
    };
    let mut started = false;
    let mut reply = reply;
    loop {
        match reply {
            Reply::Delayed(d, inner) => {
                // A slow model, not synchronisation: the test chose this delay.
                let _ = after(d).recv();
                reply = *inner;
            }
            Reply::Hold(inner) => {
                if !started {
                    sse.start()?;
                    started = true;
                }
                hold(shared);
                reply = *inner;
            }
            Reply::Http500(message) if !started => {
                let body = json!({"error": {"message": message, "type": "server_error"}});
                return write_json(sse.out, "500 Internal Server Error", &body);
            }
            other => {
                reply = other;
                break;
            }
        }
    }
    if !started {
        sse.start()?;
    }
    match reply {
        Reply::Call {
            namespace,
            name,
            arguments,
        } => {
            let mut item = json!({"type": "function_call", "id": format!("fc_{}", req.n),
                                  "call_id": format!("call_{}", req.n), "name": name,
                                  "arguments": arguments.to_string(), "status": "completed"});
            if let Some(ns) = namespace {
                item["namespace"] = json!(ns);
            }
            let mut added = item.clone();
            added["status"] = json!("in_progress");
            sse.item(0, added, item.clone())?;
            sse.completed(vec![item])
        }
        Reply::Text(text) => {
            let id = format!("msg_{}", req.n);
            let added = json!({"type": "message", "id": id, "role": "assistant",
                               "status": "in_progress", "content": []});
            let done = json!({"type": "message", "id": id, "role": "assistant",
                              "status": "completed",
                              "content": [{"type": "output_text", "text": text, "annotations": []}]});
            sse.item(0, added, done.clone())?;
            sse.completed(vec![done])
        }
        Reply::Failed(message) | Reply::Http500(message) => sse.failed(&message),
        Reply::Delayed(..) | Reply::Hold(..) => unreachable!("unwrapped above"),
    }
}

/// Count this stream as held until one release token (or the fake's drop) arrives.
fn hold(shared: &Shared) {
    {
        let _g = shared.requests.lock().unwrap();
        shared.held.fetch_add(1, Ordering::SeqCst);
        shared.changed.notify_all();
    }
    let _ = shared.release_rx.recv();
    shared.held.fetch_sub(1, Ordering::SeqCst);
}
