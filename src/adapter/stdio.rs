//! MCP over stdio: one JSON message per line in, one per line out.
//!
//! Threads: `stdin-reader` (this function's caller thread) parses lines and queues
//! requests on one of three lanes (`mcp::lane`): `mcp-worker-N` for work that may wait
//! long, `mcp-interactive-N` for status checks and input to a running command, and
//! `mcp-control-N` for requests answered from memory (ping, lists, task lookups), so long
//! waits can never delay a ping or a Ctrl-C. Workers write their own answers through the
//! one `writer::Output` (a mutex keeps every line whole). `progress-ticker` sends
//! `notifications/progress` every `PROGRESS_INTERVAL` for requests that carry
//! `_meta.progressToken` until they are answered.
//! Answers leave in completion order. On stdin EOF the reader stops, queued and running
//! requests are answered within `SHUTDOWN_GRACE`, then the process returns.

use super::Handler;
use super::pool::Pool;
use super::progress::Progress;
use super::writer;
use crate::deadline::{Deadline, Stopwatch};
use crate::jsonrpc::line_reader::{Line, LineReader};
use crate::jsonrpc::{ErrorCode, Id, Incoming, Request, Response, RpcError, parse_message};
use crate::mcp::lane::Lane;
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
/// Workers of the control lane: its requests never wait on a shell, so two keep it free.
const CONTROL_WORKERS: usize = 2;
/// Workers of the interactive lane: status checks wait at most seconds; four let an
/// interrupt through while others watch their commands.
const INTERACTIVE_WORKERS: usize = 4;
/// A request with a progress token hears from us at least this often while it runs
/// (clients commonly time out a silent request after 60 s).
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

/// Transport limits of one stdio connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub workers: usize,
    pub max_message_bytes: usize,
}

/// Requests queued or running, by id, with their cancellation flag.
type InFlight = Arc<Mutex<HashMap<Id, Arc<AtomicBool>>>>;

/// The worker pools, one per `Lane`.
struct Lanes {
    work: Pool,
    interactive: Pool,
    control: Pool,
}

impl Lanes {
    fn new(workers: usize) -> std::io::Result<Lanes> {
        Ok(Lanes {
            work: Pool::new("mcp-worker", workers, QUEUE_DEPTH)?,
            interactive: Pool::new("mcp-interactive", INTERACTIVE_WORKERS, QUEUE_DEPTH)?,
            control: Pool::new("mcp-control", CONTROL_WORKERS, QUEUE_DEPTH)?,
        })
    }

    fn pool(&self, req: &Request) -> &Pool {
        match crate::mcp::lane::classify(req) {
            Lane::Work => &self.work,
            Lane::Interactive => &self.interactive,
            Lane::Control => &self.control,
        }
    }

    /// Let every lane finish within one shared grace period.
    fn shutdown(self, grace: Deadline) -> bool {
        let a = self.control.shutdown(grace);
        let b = self.interactive.shutdown(grace);
        self.work.shutdown(grace) && a && b
    }
}

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
    let lanes = Lanes::new(limits.workers)?;
    let in_flight: InFlight = Arc::new(Mutex::new(HashMap::new()));
    let progress = Progress::start(out.clone(), PROGRESS_INTERVAL)?;
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
            Incoming::Request(req) => {
                queue(lanes.pool(&req), &in_flight, &progress, &out, &handler, req)
            }
            Incoming::Notification(n) if n.method == "notifications/cancelled" => {
                cancel(&in_flight, n.params.get("requestId"));
            }
            Incoming::Notification(n) => handler.on_notification(&n),
            Incoming::Response(id) => log::debug!("ignoring a response to {id}"),
            Incoming::Invalid(resp) => send(&out, &resp),
        }
    }
    log::debug!("stdin closed; finishing in-flight requests");
    if !lanes.shutdown(Deadline::after("shutdown grace", SHUTDOWN_GRACE)) {
        log::warn!("shutdown grace expired with requests still running; exiting without them");
    }
    progress.stop();
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
    progress: &Progress,
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
    let token = req
        .params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned();
    let (in_flight, out, handler) = (in_flight.clone(), out.clone(), handler.clone());
    let progress = progress.clone();
    let job = Box::new(move || {
        let id = req.id.clone();
        if let Some(token) = token {
            progress.watch(id.clone(), token);
        }
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
            // No progress notification may follow the answer.
            progress.forget(&id);
            if cancelled.load(Ordering::SeqCst) {
                log::debug!("{method} id={id} cancelled; answer discarded");
            } else {
                send(&out, &resp);
                log::debug!("{method} id={id} answered in {:?}", clock.elapsed());
            }
        }
        progress.forget(&id);
        in_flight.lock().remove(&id);
    });
    if pool.submit(job).is_err() {
        log::error!("worker pool is gone; dropping a request");
    }
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;
