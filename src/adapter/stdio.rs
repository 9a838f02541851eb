//! MCP over stdio: one JSON message per line in, one per line out.
//!
//! Threads: `stdin-reader` (this function's caller thread) parses lines and queues
//! requests; `mcp-worker-N` run them and write their own answers through the one
//! `writer::Output` (a mutex keeps every line whole).
//! Answers leave in completion order. On stdin EOF the reader stops, queued and running
//! requests are answered within `SHUTDOWN_GRACE`, then the process returns.

use super::Handler;
use super::pool::Pool;
use super::writer;
use crate::deadline::{Deadline, Stopwatch};
use crate::jsonrpc::line_reader::{Line, LineReader};
use crate::jsonrpc::{ErrorCode, Id, Incoming, Request, Response, RpcError, parse_message};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long in-flight requests may run after stdin closes. Long enough for ordinary
/// tool calls to answer, short enough that a client closing its pipe sees a prompt exit.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Requests waiting for a worker before the reader stops reading (backpressure).
const QUEUE_DEPTH: usize = 256;

/// Transport limits of one stdio connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub workers: usize,
    pub max_message_bytes: usize,
}

/// Requests queued or running, by id, with their cancellation flag.
type InFlight = Arc<Mutex<HashMap<Id, Arc<AtomicBool>>>>;

/// Serve until `input` ends. Returns once every answer that could be given was written.
pub fn serve<R, W>(
    input: R,
    output: W,
    limits: Limits,
    handler: Arc<dyn Handler>,
) -> std::io::Result<()>
where
    R: BufRead,
    W: Write + Send + 'static,
{
    let out = writer::Output::new(output);
    let pool = Pool::new("mcp-worker", limits.workers, QUEUE_DEPTH)?;
    let in_flight: InFlight = Arc::new(Mutex::new(HashMap::new()));
    let mut reader = LineReader::new(input, limits.max_message_bytes);
    loop {
        let line = match reader.next_line() {
            Ok(Line::Eof) => break,
            Ok(l) => l,
            Err(e) => {
                log::error!("stdin read failed: {e}");
                break;
            }
        };
        let bytes = match line {
            Line::Message(b) => b,
            Line::Oversized { bytes } => {
                let e = RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "message of {bytes} bytes exceeds the {} byte limit",
                        limits.max_message_bytes
                    ),
                );
                send(&out, &Response::err(None, e));
                continue;
            }
            Line::Eof => break,
        };
        match parse_message(&bytes) {
            Incoming::Request(req) => queue(&pool, &in_flight, &out, &handler, req),
            Incoming::Notification(n) if n.method == "notifications/cancelled" => {
                cancel(&in_flight, n.params.get("requestId"));
            }
            Incoming::Notification(n) => handler.on_notification(&n),
            Incoming::Response(id) => log::debug!("ignoring a response to {id}"),
            Incoming::Invalid(resp) => send(&out, &resp),
        }
    }
    log::debug!("stdin closed; finishing in-flight requests");
    if !pool.shutdown(Deadline::after("shutdown grace", SHUTDOWN_GRACE)) {
        log::warn!("shutdown grace expired with requests still running; exiting without them");
    }
    Ok(())
}

fn send(out: &writer::Output, resp: &Response) {
    out.send(resp.to_bytes());
}

fn cancel(in_flight: &InFlight, id: Option<&Value>) {
    if let Some(flag) = id
        .and_then(Id::from_value)
        .and_then(|id| in_flight.lock().get(&id).cloned())
    {
        flag.store(true, Ordering::SeqCst);
    }
}

fn queue(
    pool: &Pool,
    in_flight: &InFlight,
    out: &writer::Output,
    handler: &Arc<dyn Handler>,
    req: Request,
) {
    let cancelled = Arc::new(AtomicBool::new(false));
    {
        let mut map = in_flight.lock();
        if map.contains_key(&req.id) {
            let e = RpcError::new(
                ErrorCode::InvalidRequest,
                format!("request id {} is already in flight", req.id),
            );
            drop(map);
            send(out, &Response::err(Some(req.id), e));
            return;
        }
        map.insert(req.id.clone(), cancelled.clone());
    }
    let (in_flight, out, handler) = (in_flight.clone(), out.clone(), handler.clone());
    let job = Box::new(move || {
        let id = req.id.clone();
        // A request cancelled while queued is dropped without an answer (MCP cancellation).
        if !cancelled.load(Ordering::SeqCst) {
            let method = req.method.clone();
            let clock = Stopwatch::start();
            let resp =
                catch_unwind(AssertUnwindSafe(|| handler.handle(req))).unwrap_or_else(|_| {
                    Response::err(
                        Some(id.clone()),
                        RpcError::new(
                            ErrorCode::InternalError,
                            "internal error: the handler panicked",
                        ),
                    )
                });
            if cancelled.load(Ordering::SeqCst) {
                log::debug!("{method} id={id} cancelled; answer discarded");
            } else {
                send(&out, &resp);
                log::debug!("{method} id={id} answered in {:?}", clock.elapsed());
            }
        }
        in_flight.lock().remove(&id);
    });
    if pool.submit(job).is_err() {
        log::error!("worker pool is gone; dropping a request");
    }
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;
