//! The app-server child of a host: started on pipes, spoken to in newline-delimited
//! JSON-RPC (one `write_all` of one line per message), read by a thread that parses each
//! line (`codex::app_server::parse`) and hands it to the host's loop.
//!
//! Invariant: the child's stdin is the host's alone; when the host ends (even by
//! SIGKILL) the pipe closes and the app-server ends with it.

use crate::codex::app_server::{Event, MAX_LINE, parse};
use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, select, unbounded};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// One line from the app-server, parsed, with its raw bytes (for the event log).
pub enum FromChild {
    Line(Event, Vec<u8>),
    /// Its stdout closed (it exited, or closed it).
    Closed,
}

pub struct AppChild {
    child: Child,
    stdin: ChildStdin,
    next_id: i64,
    pub pid: u32,
}

impl AppChild {
    /// Start `command` in `cwd` and the thread reading its output.
    pub fn spawn(
        command: &[String],
        cwd: &Path,
    ) -> std::io::Result<(AppChild, Receiver<FromChild>)> {
        let (prog, args) = command
            .split_first()
            .ok_or_else(|| std::io::Error::other("an empty app-server command"))?;
        let mut child = Command::new(prog)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, rx) = unbounded();
        std::thread::Builder::new()
            .name("app-server-reader".into())
            .spawn(move || read_lines(stdout, tx))?;
        let pid = child.id();
        Ok((
            AppChild {
                child,
                stdin,
                next_id: 1,
                pid,
            },
            rx,
        ))
    }

    fn write(&mut self, v: &Value) -> std::io::Result<()> {
        let mut b = serde_json::to_vec(v).map_err(std::io::Error::other)?;
        b.push(b'\n');
        self.stdin.write_all(&b).and_then(|_| self.stdin.flush())
    }

    /// Send request `method`; its id.
    pub fn request(&mut self, method: &str, params: Value) -> std::io::Result<i64> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"method": method, "id": id, "params": params}))?;
        Ok(id)
    }

    pub fn notify(&mut self, method: &str) -> std::io::Result<()> {
        self.write(&json!({"method": method}))
    }

    /// Refuse a server-initiated request (approvals, user input): winx answers none.
    pub fn refuse(&mut self, id: &Value, method: &str) -> std::io::Result<()> {
        let msg = format!("winx's managed host does not answer {method}");
        self.write(&json!({"id": id, "error": {"code": -32601, "message": msg}}))
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_lines(stdout: ChildStdout, tx: Sender<FromChild>) {
    let mut r = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        match (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE {
            // Oversized: skip to the end of the line.
            let mut rest = Vec::new();
            let _ = r.read_until(b'\n', &mut rest);
            let _ = tx.send(FromChild::Line(Event::Oversized, Vec::new()));
            continue;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let e = parse(&line);
        if tx.send(FromChild::Line(e, line)).is_err() {
            return;
        }
    }
    let _ = tx.send(FromChild::Closed);
}

/// Wait for the answer to request `id`, refusing server requests meanwhile; other lines
/// go to `seen`.
pub fn wait_response(
    child: &mut AppChild,
    rx: &Receiver<FromChild>,
    id: i64,
    deadline: &Deadline,
    seen: &mut dyn FnMut(&Event, &[u8]),
) -> Result<Value, String> {
    let timer = deadline.receiver();
    loop {
        select! {
            recv(rx) -> m => match m {
                Ok(FromChild::Line(e, raw)) => {
                    seen(&e, &raw);
                    match e {
                        Event::Response { id: got, result } if got == id => return result,
                        Event::ServerRequest { id, method } => {
                            let _ = child.refuse(&id, &method);
                        }
                        _ => {}
                    }
                }
                Ok(FromChild::Closed) | Err(_) => {
                    return Err("the app-server exited during the handshake".into())
                }
            },
            recv(timer) -> _ => return Err(format!("no answer to request {id} in time ({})", deadline.name())),
        }
    }
}

/// `initialize` + `initialized`, then `thread/start` in `cwd`: the thread id and session
/// id (an older server without `sessionId` gets the thread id as its session id).
pub fn handshake(
    child: &mut AppChild,
    rx: &Receiver<FromChild>,
    cwd: &Path,
    deadline: &Deadline,
    seen: &mut dyn FnMut(&Event, &[u8]),
) -> Result<(String, String), String> {
    let err = |e: std::io::Error| format!("write to the app-server: {e}");
    let info = json!({"clientInfo": {"name": "winx", "title": "winx managed host",
                                     "version": env!("CARGO_PKG_VERSION")}});
    let id = child.request("initialize", info).map_err(err)?;
    wait_response(child, rx, id, deadline, seen).map_err(|e| format!("initialize: {e}"))?;
    child.notify("initialized").map_err(err)?;
    let params = json!({"cwd": cwd.to_string_lossy(), "approvalPolicy": "never"});
    let id = child.request("thread/start", params).map_err(err)?;
    let r =
        wait_response(child, rx, id, deadline, seen).map_err(|e| format!("thread/start: {e}"))?;
    let thread = r.get("thread").unwrap_or(&Value::Null);
    let thread_id = thread
        .get("id")
        .and_then(Value::as_str)
        .ok_or("thread/start answered without thread.id")?
        .to_string();
    let session_id = thread
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or(&thread_id)
        .to_string();
    Ok((thread_id, session_id))
}
