//! A scripted Anthropic Messages API on loopback, for driving a real agent host (Claude
//! Code) offline: `POST /v1/messages` (with or without `?beta=true`) answered as a
//! streaming SSE message or, when `stream` is false, one JSON message. What the fake model
//! says next is decided by a script, a function of the request (its tools and messages);
//! every request is kept in memory and appended to a log file, so a test judges what the
//! host handed the model (the `tool_result` blocks) and a failure can show it.
//!
//! Invariant: std only, one server thread, one connection at a time (each answered with
//! `Connection: close`, so the host never holds an idle keep-alive connection that would
//! wedge the next one), every read bounded by a timeout.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A connection that stops sending mid-request is dropped after this long, so one stray
/// client cannot stop the server from answering the host's next request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A request body larger than this is refused (a whole conversation of the scripted
/// sessions is well under 1 MiB; the cap only bounds memory).
const MAX_BODY_BYTES: usize = 16 << 20;

/// What the fake model does next.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Call the tool `name` (the host's name for it, e.g. `mcp__winx__BashCommand`).
    Call { name: String, input: Value },
    /// End the turn with this text.
    Text(String),
}

/// One request to `/v1/messages`, as the script sees it.
pub struct Turn<'a> {
    pub body: &'a Value,
}

impl Turn<'_> {
    /// The names of the tools the host offers the model.
    pub fn tool_names(&self) -> Vec<&str> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect()
    }

    /// The offered tool whose name ends with `suffix` (e.g. `__BashCommand`).
    pub fn tool(&self, suffix: &str) -> Option<String> {
        self.tool_names()
            .into_iter()
            .find(|n| n.ends_with(suffix))
            .map(str::to_string)
    }

    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// How many tool calls the model has made in this conversation so far.
    pub fn calls_made(&self) -> usize {
        blocks(self.messages(), "tool_use").count()
    }

    /// The texts of every tool result in the conversation, oldest first.
    pub fn results(&self) -> Vec<String> {
        blocks(self.messages(), "tool_result")
            .map(result_text)
            .collect()
    }
}

/// One tool call as the model saw it: what it asked for and what came back, taken from
/// the first request that carried the result (the request right after the call).
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The `tool_use` id pairing the call with its result.
    pub id: String,
    pub name: String,
    pub input: Value,
    /// The tool result's text as handed to the model (text blocks joined).
    pub result: String,
    pub is_error: bool,
    /// Index of that request in [`FakeAnthropic::requests`].
    pub request: usize,
}

/// One logged HTTP request.
#[derive(Debug, Clone)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub body: Value,
}

type Script = Box<dyn FnMut(&Turn) -> Reply + Send>;

pub struct FakeAnthropic {
    pub addr: SocketAddr,
    pub log: PathBuf,
    requests: Arc<Mutex<Vec<Logged>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeAnthropic {
    /// Serve on 127.0.0.1 (a free port), logging to `dir/model-requests.jsonl`.
    pub fn start(dir: &Path, script: impl FnMut(&Turn) -> Reply + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake model");
        let addr = listener.local_addr().unwrap();
        let log = dir.join("model-requests.jsonl");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = Server {
            script: Box::new(script),
            requests: requests.clone(),
            log: std::fs::File::create(&log).expect("create the model request log"),
            replies: 0,
        };
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fake-anthropic".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        // A broken connection is the client's business; keep serving.
                        let _ = server.serve(conn);
                    }
                }
            })
            .unwrap();
        FakeAnthropic {
            addr,
            log,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// The value for the host's `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Logged> {
        self.requests.lock().unwrap().clone()
    }

    /// The bodies of the requests to `/v1/messages` that offered tools (the agent loop's
    /// turns, not side requests).
    pub fn turns(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| is_messages(&r.path) && r.body["tools"].is_array())
            .map(|r| r.body)
            .collect()
    }

    /// Every tool call the model made with the result it received, in call order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let mut out: Vec<Exchange> = Vec::new();
        for (i, r) in self.requests().iter().enumerate() {
            let msgs = r.body["messages"].as_array().map_or(&[][..], Vec::as_slice);
            for res in blocks(msgs, "tool_result") {
                let id = res["tool_use_id"].as_str().unwrap_or_default();
                if out.iter().any(|e| e.id == id) {
                    continue;
                }
                let Some(call) = blocks(msgs, "tool_use").find(|u| u["id"] == id) else {
                    continue;
                };
                out.push(Exchange {
                    id: id.to_string(),
                    name: call["name"].as_str().unwrap_or_default().to_string(),
                    input: call["input"].clone(),
                    result: result_text(res),
                    is_error: res["is_error"] == true,
                    request: i,
                });
            }
        }
        out
    }

    /// What the model received, for a failure message: each call and its result.
    pub fn transcript(&self) -> String {
        let mut s = format!(
            "{} requests (log: {}; WINX_TEST_KEEP_LOGS=1 keeps it)\n",
            self.requests().len(),
            self.log.display()
        );
        for e in self.exchanges() {
            s.push_str(&format!(
                "--- {} {} -> (request {}{})\n{}\n",
                e.name,
                e.input,
                e.request,
                if e.is_error { ", is_error" } else { "" },
                elide(&e.result)
            ));
        }
        s
    }
}

/// Long results keep their head and tail: enough to see what the model got.
const SHOWN_BYTES: usize = 1500;

fn elide(text: &str) -> String {
    if text.len() <= 2 * SHOWN_BYTES {
        return text.to_string();
    }
    let mut head = SHOWN_BYTES;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - SHOWN_BYTES;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[… {} bytes not shown …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn is_messages(path: &str) -> bool {
    path == "/v1/messages" || path.starts_with("/v1/messages?")
}

/// Content blocks of `kind` in every message, oldest first.
fn blocks<'a>(msgs: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    msgs.iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(move |b| b["type"] == kind)
}

/// A `tool_result`'s content as text: a string, or its text blocks joined by newlines.
pub fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p["type"].as_str() {
                Some("text") => p["text"].as_str().unwrap_or_default().to_string(),
                Some(other) => format!("[{other} block]"),
                None => p.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

struct Server {
    script: Script,
    requests: Arc<Mutex<Vec<Logged>>>,
    log: std::fs::File,
    replies: usize,
}

impl Server {
    fn serve(&mut self, conn: TcpStream) -> std::io::Result<()> {
        conn.set_read_timeout(Some(READ_TIMEOUT))?;
        let mut reader = BufReader::new(conn.try_clone()?);
        let Some((method, path, body)) = read_request(&mut reader)? else {
            return Ok(());
        };
        let logged = Logged {
            method: method.clone(),
            path: path.clone(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        let line = json!({"method": method, "path": path, "body": logged.body});
        writeln!(self.log, "{line}")?;
        self.requests.lock().unwrap().push(logged.clone());
        let mut out = conn;
        match (method.as_str(), path.as_str()) {
            ("POST", p) if is_messages(p) => {
                let reply = (self.script)(&Turn { body: &logged.body });
                self.replies += 1;
                let id = self.replies;
                if logged.body["stream"] == true {
                    write_sse(&mut out, &logged.body, &reply, id)
                } else {
                    let msg = message(&logged.body, &reply, id, true);
                    write_json(&mut out, 200, &msg)
                }
            }
            ("POST", p) if p.starts_with("/v1/messages/count_tokens") => {
                write_json(&mut out, 200, &json!({"input_tokens": 1}))
            }
            ("HEAD", _) => write_head(&mut out),
            _ => write_json(
                &mut out,
                404,
                &json!({"type": "error",
                        "error": {"type": "not_found_error", "message": "not served by the fake model"}}),
            ),
        }
    }
}

/// Read one HTTP/1.1 request: method, path and body (by Content-Length or chunked).
fn read_request(r: &mut impl BufRead) -> std::io::Result<Option<(String, String, Vec<u8>)>> {
    let mut start = String::new();
    if r.read_line(&mut start)? == 0 {
        return Ok(None);
    }
    let mut parts = start.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Ok(None);
    };
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            length = value.parse().unwrap_or(0);
        } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        read_chunked(r)?
    } else {
        let mut b = vec![0; length.min(MAX_BODY_BYTES)];
        r.read_exact(&mut b)?;
        b
    };
    Ok(Some((method.to_string(), path.to_string(), body)))
}

fn read_chunked(r: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        r.read_line(&mut size)?;
        let n =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        if n == 0 || body.len() + n > MAX_BODY_BYTES {
            let mut rest = String::new();
            r.read_line(&mut rest)?;
            return Ok(body);
        }
        let mut chunk = vec![0; n + 2];
        r.read_exact(&mut chunk)?;
        body.extend_from_slice(&chunk[..n]);
    }
}

/// The assistant message for `reply`; `done` gives its final stop reason (the streamed
/// `message_start` carries none yet).
fn message(req: &Value, reply: &Reply, id: usize, done: bool) -> Value {
    let (content, stop) = match reply {
        Reply::Call { name, input } => (
            json!([{"type": "tool_use", "id": tool_use_id(id), "name": name, "input": input}]),
            "tool_use",
        ),
        Reply::Text(t) => (json!([{"type": "text", "text": t}]), "end_turn"),
    };
    json!({
        "id": format!("msg_fake_{id:04}"),
        "type": "message",
        "role": "assistant",
        "model": req["model"].as_str().unwrap_or("fake-model"),
        "content": if done { content } else { json!([]) },
        "stop_reason": if done { json!(stop) } else { Value::Null },
        "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    })
}

/// Unique per reply: the host merges assistant messages that share an id, and pairs a
/// result with its call by this id.
fn tool_use_id(id: usize) -> String {
    format!("toolu_fake_{id:04}")
}

fn write_sse(out: &mut TcpStream, req: &Value, reply: &Reply, id: usize) -> std::io::Result<()> {
    let mut events =
        vec![json!({"type": "message_start", "message": message(req, reply, id, false)})];
    let (block, delta, stop) = match reply {
        Reply::Call { name, input } => (
            json!({"type": "tool_use", "id": tool_use_id(id), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        Reply::Text(t) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": t}),
            "end_turn",
        ),
    };
    events.push(json!({"type": "content_block_start", "index": 0, "content_block": block}));
    events.push(json!({"type": "content_block_delta", "index": 0, "delta": delta}));
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": null},
                       "usage": {"output_tokens": 1}}));
    events.push(json!({"type": "message_stop"}));
    let mut body = String::new();
    for e in events {
        body.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap()
        ));
    }
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

fn write_json(out: &mut TcpStream, status: u16, v: &Value) -> std::io::Result<()> {
    let body = v.to_string();
    let reason = if status == 200 { "OK" } else { "Not Found" };
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

fn write_head(out: &mut TcpStream) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    out.flush()
}
