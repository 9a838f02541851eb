//! The HTTP/1.1 and Server-Sent Events side of the fake Responses provider: request
//! heads and bodies read under size limits, JSON answers, and the Responses API's stream
//! events (`response.created`, `response.output_item.added`/`.done`,
//! `response.output_text.delta`, `response.completed` with usage, `response.failed`).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// A request head larger than this is refused (hosts send a few hundred bytes).
const MAX_HEAD: usize = 64 * 1024;
/// A request body larger than this is refused (a long Codex conversation is well under).
const MAX_BODY: usize = 32 * 1024 * 1024;

pub(super) type Head = (String, String, Vec<(String, String)>);

pub(super) fn read_head(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<Head>> {
    let mut line = String::new();
    let mut total = 0;
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        let n = r.read_line(&mut h)?;
        total += n;
        if n == 0 || total > MAX_HEAD {
            return Err(std::io::Error::other("request head too large or cut"));
        }
        let h = h.trim_end();
        if h.is_empty() {
            return Ok(Some((method, path, headers)));
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
}

pub(super) fn read_body(
    r: &mut BufReader<TcpStream>,
    headers: &[(String, String)],
) -> std::io::Result<Vec<u8>> {
    let get = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            r.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(std::io::Error::other)?;
            if body.len() + n > MAX_BODY {
                return Err(std::io::Error::other("request body too large"));
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..n]);
            if n == 0 {
                return Ok(body);
            }
        }
    }
    let len: usize = get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if len > MAX_BODY {
        return Err(std::io::Error::other("request body too large"));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

pub(super) fn write_json(out: &mut TcpStream, status: &str, body: &Value) -> std::io::Result<()> {
    let b = body.to_string();
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    )?;
    out.flush()
}

/// A stream's events, written as they are produced.
pub(super) struct Sse<'a> {
    pub(super) out: &'a mut TcpStream,
    pub(super) id: String,
}

impl Sse<'_> {
    pub(super) fn event(&mut self, kind: &str, mut data: Value) -> std::io::Result<()> {
        data["type"] = json!(kind);
        write!(self.out, "event: {kind}\ndata: {data}\n\n")?;
        self.out.flush()
    }

    /// The response head and `response.created`.
    pub(super) fn start(&mut self) -> std::io::Result<()> {
        self.out.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        )?;
        self.created()
    }

    pub(super) fn created(&mut self) -> std::io::Result<()> {
        let r = json!({"id": self.id, "object": "response", "status": "in_progress", "output": []});
        self.event("response.created", json!({"response": r}))
    }

    pub(super) fn item(&mut self, index: usize, added: Value, done: Value) -> std::io::Result<()> {
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        )?;
        if done["type"] == "message" {
            let text = done["content"][0]["text"].clone();
            self.event(
                "response.output_text.delta",
                json!({"item_id": done["id"], "output_index": index, "content_index": 0,
                       "delta": text}),
            )?;
        }
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        )
    }

    pub(super) fn completed(&mut self, output: Vec<Value>) -> std::io::Result<()> {
        let usage = json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                           "total_tokens": 110});
        let r = json!({"id": self.id, "object": "response", "status": "completed",
                       "output": output, "usage": usage});
        self.event("response.completed", json!({"response": r}))
    }

    pub(super) fn failed(&mut self, message: &str) -> std::io::Result<()> {
        let r = json!({"id": self.id, "object": "response", "status": "failed",
                       "error": {"code": "server_error", "message": message}});
        self.event("response.failed", json!({"response": r}))
    }
}
