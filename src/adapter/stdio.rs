//! MCP over stdio: one JSON message per line in, one per line out.
//!
//! Threads: two readers take turns on stdin (leader/follower): the caller's thread and
//! `stdin-reader`. The one holding stdin reads and parses a line; a request goes to one
//! of three lanes (`mcp::lane`). When the other reader is idle, waiting for stdin, and
//! the lane has a free slot, the reader releases stdin to it and runs the request
//! itself, sparing it the hand-off to a pool thread (one wake-up per call); otherwise the
//! request is queued on its lane: `mcp-worker-N` for work that may wait
//! long, `mcp-interactive-N` for status checks and input to a running command, and
//! `mcp-control-N` for requests answered from memory (ping, lists, task lookups), so long
//! waits can never delay a ping or a Ctrl-C. Workers write their own answers through the
//! one `writer::Output` (a mutex keeps every line whole). `progress-ticker` sends
//! `notifications/progress` every `Limits::progress_interval` for requests that carry
//! `_meta.progressToken` until they are answered.
//! A request run by a reader holds one of its lane's slots, so a lane never runs more
//! than its workers at once, and one reader is always free to read (a ping or a Ctrl-C is
//! never stuck behind a long wait).
//! Answers leave in completion order. On stdin EOF the readers stop, queued and running
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
/// The default of `Limits::progress_interval` (`WINX_PROGRESS_INTERVAL_MS`).
pub const PROGRESS_INTERVAL: Duration =
    Duration::from_millis(crate::config::vars::DEFAULT_PROGRESS_INTERVAL_MS);

/// Transport limits of one stdio connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub workers: usize,
    pub max_message_bytes: usize,
    /// How often `progress-ticker` writes `notifications/progress`.
    pub progress_interval: Duration,
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

/// What both readers share: stdin, and everything a request needs to be answered.
struct Shared<R> {
    /// A `std` mutex on purpose: the other reader waits here while the holder sits in
    /// `read`, and `parking_lot` would first spin and `sched_yield` a dozen times per turn
    /// (5 % of the adapter's CPU in an `echo` loop); `std` spins briefly, then sleeps.
    reader: std::sync::Mutex<LineReader<R>>,
    /// Readers waiting for (or about to take) `reader`, counting a reader that ran a
    /// request itself from the moment its answer is ready to be written (see `Rejoin`).
    idle: Arc<AtomicUsize>,
    /// stdin ended or failed: every reader returns.
    ended: AtomicBool,
    max_message_bytes: usize,
    lanes: Lanes,
    in_flight: InFlight,
    progress: Progress,
    out: writer::Output,
    handler: Arc<dyn Handler>,
}

/// Serve until `input` ends. Returns once every answer that could be given was written.
pub fn serve<R, W>(
    input: R,
    output: W,
    limits: Limits,
    handler: Arc<dyn Handler>,
) -> std::io::Result<()>
where
    R: BufRead + Send + 'static,
    W: Write + Send + 'static,
{
    let out = writer::Output::new(output);
    let shared = Arc::new(Shared {
        reader: std::sync::Mutex::new(LineReader::new(input, limits.max_message_bytes)),
        // `stdin-reader` counts as idle from the start: it takes stdin as soon as it runs,
        // so the first request may already run on this thread (whether the new thread had
        // reached the lock yet was a race that sent early requests to a pool).
        idle: Arc::new(AtomicUsize::new(1)),
        ended: AtomicBool::new(false),
        max_message_bytes: limits.max_message_bytes,
        lanes: Lanes::new(limits.workers)?,
        in_flight: Arc::new(Mutex::new(HashMap::new())),
        progress: Progress::start(out.clone(), limits.progress_interval)?,
        out,
        handler,
    });
    let (done_tx, done) = crossbeam_channel::bounded::<()>(0);
    let other = shared.clone();
    std::thread::Builder::new()
        .name("stdin-reader".into())
        .spawn(move || {
            read(&other, Counted::Idle);
            // Let go of the shared state before saying so: the serving thread unwraps it
            // next, and only then shuts the lanes and drops the handler (whose runtime ends
            // the embedded sessions) before the process exits.
            drop(other);
            drop(done_tx);
        })?;
    read(&shared, Counted::No);
    log::debug!("stdin closed; finishing in-flight requests");
    let grace = Deadline::after("shutdown grace", SHUTDOWN_GRACE);
    // The other reader may be running a request: it has the same grace as the lanes.
    let reader_done = crossbeam_channel::select! {
        recv(done) -> _ => true,
        recv(grace.receiver()) -> _ => false,
    };
    // Only this thread and the finished reader held `shared`; a reader still running a
    // request keeps its own reference, and its lane is left to the grace.
    let finished = match Arc::try_unwrap(shared) {
        Ok(s) => {
            let lanes_done = s.lanes.shutdown(grace);
            s.progress.stop();
            s.handler.before_exit();
            lanes_done
        }
        // A reader still runs a request past the grace: the sessions end under it anyway,
        // since the process exits next.
        Err(s) => {
            s.handler.before_exit();
            false
        }
    };
    if !(reader_done && finished) {
        log::warn!("shutdown grace expired with requests still running; exiting without them");
    }
    Ok(())
}

/// Whether a reader already counts among the idle ones when its turn loop starts.
#[derive(Clone, Copy, PartialEq)]
enum Counted {
    /// Counted by `serve` before the reader's thread ran.
    Idle,
    No,
}

/// One reader's turns on stdin until it ends.
fn read<R: BufRead>(s: &Shared<R>, counted: Counted) {
    // Whether this reader is already counted among the idle ones: by `serve` at the
    // start, later by its last request's `Rejoin`.
    let mut rejoined = counted == Counted::Idle;
    loop {
        if !std::mem::take(&mut rejoined) {
            s.idle.fetch_add(1, Ordering::SeqCst);
        }
        // A reader that panicked while holding stdin left it consistent (a line is taken
        // whole or not at all), so a poisoned lock is used as it is.
        let mut reader = s.reader.lock().unwrap_or_else(|e| e.into_inner());
        s.idle.fetch_sub(1, Ordering::SeqCst);
        if s.ended.load(Ordering::SeqCst) {
            return;
        }
        let bytes = match reader.next_line() {
            Ok(Line::Message(b)) => b,
            Ok(Line::Oversized { bytes }) => {
                let e = RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "message of {bytes} bytes exceeds the {} byte limit",
                        s.max_message_bytes
                    ),
                );
                send(&s.out, &Response::err(None, e));
                continue;
            }
            Ok(Line::Eof) => {
                s.ended.store(true, Ordering::SeqCst);
                return;
            }
            Err(e) => {
                log::error!("stdin read failed: {e}");
                s.ended.store(true, Ordering::SeqCst);
                return;
            }
        };
        match parse_message(&bytes) {
            Incoming::Request(req) => {
                let pool = s.lanes.pool(&req);
                // Run here only if the other reader will read meanwhile and the lane has a
                // free slot; otherwise queue it (stdin stays ours).
                let slot = match s.idle.load(Ordering::SeqCst) {
                    0 => None,
                    _ => pool.try_reserve(),
                };
                let Some(job) = prepare(s, req, slot.is_some()) else {
                    continue;
                };
                match slot {
                    None => submit(pool, job),
                    Some(slot) => {
                        // The waiting reader takes stdin over before we run the request.
                        drop(reader);
                        slot.run(job);
                        rejoined = true;
                    }
                }
            }
            Incoming::Notification(n) if n.method == "notifications/cancelled" => {
                cancel(&s.in_flight, n.params.get("requestId"));
            }
            Incoming::Notification(n) => s.handler.on_notification(&n),
            Incoming::Response(id) => log::debug!("ignoring a response to {id}"),
            Incoming::Invalid(resp) => send(&s.out, &resp),
        }
    }
}

fn submit(pool: &Pool, job: super::pool::Job) {
    if pool.submit(job).is_err() {
        log::error!("worker pool is gone; dropping a request");
    }
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

/// Counts the reader running a request back among the idle ones when dropped: just
/// before the answer is written (or however the job ends). Its client may send the next
/// request the moment the answer arrives, and the other reader, holding stdin, must then
/// not find both readers busy and queue that request for a pool thread (one more hand-off
/// and wake-up; it happened to every other request of a sequential client). A reader
/// blocked writing its answer on a full stdout leaves stdin unread meanwhile; every other
/// answer waits for that write too.
struct Rejoin(Option<Arc<AtomicUsize>>);

impl Drop for Rejoin {
    fn drop(&mut self) {
        if let Some(idle) = self.0.take() {
            idle.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Register `req` as in flight and make the job that answers it; `None` when its id is
/// already in flight (refused here). `by_reader`: a reader runs the job itself.
fn prepare<R>(s: &Shared<R>, req: Request, by_reader: bool) -> Option<super::pool::Job> {
    let (in_flight, progress, out, handler) = (&s.in_flight, &s.progress, &s.out, &s.handler);
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
            return None;
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
    let rejoin = Rejoin(by_reader.then(|| s.idle.clone()));
    Some(Box::new(move || {
        let id = req.id.clone();
        let method = req.method.clone();
        let clock = Stopwatch::start();
        // A request cancelled while queued is dropped without an answer (MCP cancellation).
        let answer = (!cancelled.load(Ordering::SeqCst)).then(|| {
            if let Some(token) = token {
                progress.watch(id.clone(), token);
            }
            catch_unwind(AssertUnwindSafe(|| handler.handle(req))).unwrap_or_else(|_| {
                Response::err(
                    Some(id.clone()),
                    RpcError::new(
                        ErrorCode::InternalError,
                        "internal error: the handler panicked",
                    ),
                )
            })
        });
        // No progress notification may follow the answer, and the id is free again before
        // the answer can arrive: a client may reuse it at once. A cancellation that comes
        // later finds nothing; the answer is already on its way.
        progress.forget(&id);
        in_flight.lock().remove(&id);
        drop(rejoin);
        match answer {
            Some(_) if cancelled.load(Ordering::SeqCst) => {
                log::debug!("{method} id={id} cancelled; answer discarded");
            }
            Some(resp) => {
                send(&out, &resp);
                log::debug!("{method} id={id} answered in {:?}", clock.elapsed());
            }
            None => {}
        }
    }))
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;
