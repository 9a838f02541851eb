//! In-process tests of the stdio loop with a scripted handler: concurrency, cancellation,
//! panics and shutdown, synchronised on channels (never sleeps).

use super::*;
use crate::jsonrpc::Notification;
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use serde_json::json;
use std::io::{self, Read};
use std::thread;

/// stdin fed from a channel; a dropped sender is EOF.
struct ChanReader {
    rx: Receiver<Vec<u8>>,
    buf: Vec<u8>,
}

impl Read for ChanReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.buf.is_empty() {
            match self.rx.recv() {
                Ok(b) => self.buf = b,
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf.drain(..n);
        Ok(n)
    }
}

/// stdout as a channel of lines.
struct ChanWriter(Sender<Value>, Vec<u8>);

impl Write for ChanWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.1.extend_from_slice(b);
        while let Some(i) = self.1.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = self.1.drain(..=i).collect();
            let _ = self.0.send(serde_json::from_slice(&line).unwrap());
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `block` waits on the gate (announcing itself first), `panic` panics, others echo.
struct Scripted {
    started: Sender<Id>,
    gate: Receiver<()>,
}

impl Handler for Scripted {
    fn handle(&self, req: Request) -> Response {
        match req.method.as_str() {
            "block" => {
                self.started.send(req.id.clone()).unwrap();
                self.gate.recv().unwrap();
                Response::ok(req.id, json!({"blocked": true}))
            }
            "panic" => panic!("scripted panic"),
            "whoami" => {
                let name = thread::current().name().unwrap_or("").to_string();
                Response::ok(req.id, json!({"thread": name}))
            }
            m => Response::ok(req.id, json!({"method": m})),
        }
    }
    fn on_notification(&self, _: &Notification) {}
}

struct Harness {
    input: Option<Sender<Vec<u8>>>,
    output: Receiver<Value>,
    started: Receiver<Id>,
    gate: Sender<()>,
    done: Receiver<()>,
}

const WAIT: Duration = Duration::from_secs(10);

impl Harness {
    fn new(workers: usize) -> Harness {
        let (in_tx, in_rx) = unbounded();
        let (out_tx, output) = unbounded();
        let (started_tx, started) = unbounded();
        let (gate, gate_rx) = unbounded();
        let (done_tx, done) = bounded(1);
        let handler = Arc::new(Scripted {
            started: started_tx,
            gate: gate_rx,
        });
        thread::spawn(move || {
            let input = io::BufReader::new(ChanReader {
                rx: in_rx,
                buf: Vec::new(),
            });
            let limits = Limits {
                workers,
                max_message_bytes: 1024,
                progress_interval: super::PROGRESS_INTERVAL,
            };
            serve(input, ChanWriter(out_tx, Vec::new()), limits, handler).unwrap();
            let _ = done_tx.send(());
        });
        Harness {
            input: Some(in_tx),
            output,
            started,
            gate,
            done,
        }
    }

    fn send(&self, v: Value) {
        let mut b = serde_json::to_vec(&v).unwrap();
        b.push(b'\n');
        self.input.as_ref().unwrap().send(b).unwrap();
    }

    fn req(&self, id: i64, method: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method}));
    }

    fn cancel(&self, id: i64) {
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
    }

    /// Wait until the reader has processed everything sent so far: it answers a parse
    /// error itself, without the pool, so that answer orders after earlier lines.
    fn sync_reader(&self) {
        self.input
            .as_ref()
            .unwrap()
            .send(b"sync\n".to_vec())
            .unwrap();
        assert_eq!(self.next()["error"]["code"], -32700);
    }

    fn next(&self) -> Value {
        self.output.recv_timeout(WAIT).expect("an answer")
    }

    fn wait_started(&self) -> Id {
        self.started.recv_timeout(WAIT).expect("handler started")
    }

    /// Close stdin and collect every remaining answer until `serve` returns.
    fn finish(mut self) -> Vec<Value> {
        self.input = None;
        self.done.recv_timeout(WAIT).expect("serve returned");
        self.output.try_iter().collect()
    }
}

#[test]
fn answers_leave_in_completion_order() {
    let h = Harness::new(2);
    h.req(1, "block");
    assert_eq!(h.wait_started(), Id::Num(1));
    h.req(2, "ping");
    assert_eq!(h.next()["id"], 2);
    h.gate.send(()).unwrap();
    assert_eq!(h.next()["id"], 1);
    assert!(h.finish().is_empty());
}

/// The hand-off spared: with the other reader free to take stdin, a reader runs the
/// request itself instead of queuing it for a pool thread. Every request of a sequential
/// client runs on a reader, from the first one on: `stdin-reader` counts as free before
/// its thread has run (this test failed under load when early requests found it not yet
/// waiting), and the reader that answered counts as free before its answer leaves, so the
/// next request never finds both readers busy.
#[test]
fn a_reader_runs_a_request_itself_while_the_other_reads() {
    let h = Harness::new(2);
    for id in 0..2000 {
        h.req(id, "whoami");
        let r = h.next();
        let thread = r["result"]["thread"].as_str().unwrap();
        assert!(!thread.starts_with("mcp-"), "request {id} ran on {thread}");
    }
    // Still, a request that blocks on a reader leaves stdin to the other: a ping passes.
    h.req(100, "block");
    h.wait_started();
    h.req(101, "ping");
    assert_eq!(h.next()["id"], 101);
    h.gate.send(()).unwrap();
    assert_eq!(h.next()["id"], 100);
    assert!(h.finish().is_empty());
}

#[test]
fn a_panicking_handler_answers_internal_error_and_serving_goes_on() {
    let h = Harness::new(1);
    h.req(1, "panic");
    let r = h.next();
    assert_eq!(r["id"], 1);
    assert_eq!(r["error"]["code"], -32603);
    h.req(2, "ping");
    assert_eq!(h.next()["result"]["method"], "ping");
    h.finish();
}

#[test]
fn cancelling_a_running_request_discards_its_answer() {
    let h = Harness::new(2);
    h.req(1, "block");
    h.wait_started();
    h.cancel(1);
    h.sync_reader();
    h.gate.send(()).unwrap();
    h.req(2, "ping");
    assert_eq!(h.next()["id"], 2);
    let rest = h.finish();
    assert!(
        rest.iter().all(|r| r["id"] != 1),
        "cancelled answer leaked: {rest:?}"
    );
}

#[test]
fn cancelling_a_queued_request_drops_it() {
    let h = Harness::new(1);
    h.req(1, "block");
    h.wait_started();
    h.req(2, "block");
    h.cancel(2);
    h.sync_reader();
    h.req(3, "ping");
    h.gate.send(()).unwrap();
    let mut ids = vec![h.next()["id"].clone(), h.next()["id"].clone()];
    ids.sort_by_key(|v| v.as_i64());
    assert_eq!(ids, vec![json!(1), json!(3)]);
    // Request 2 never started: no second `started` signal.
    assert!(h.started.try_recv().is_err());
    assert!(h.finish().is_empty());
}

#[test]
fn duplicate_in_flight_id_is_refused() {
    let h = Harness::new(2);
    h.req(1, "block");
    h.wait_started();
    h.req(1, "ping");
    let r = h.next();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(1), json!(-32600))
    );
    h.gate.send(()).unwrap();
    assert_eq!(h.next()["result"]["blocked"], true);
    h.finish();
}

/// An id is free again before its answer can arrive: a client may reuse it at once.
#[test]
fn an_id_may_be_reused_as_soon_as_its_answer_arrives() {
    let h = Harness::new(2);
    for round in 0..5000 {
        h.req(1, "ping");
        let r = h.next();
        assert!(r.get("error").is_none(), "round {round}: {r}");
    }
    assert!(h.finish().is_empty());
}

#[test]
fn eof_waits_for_in_flight_answers() {
    let mut h = Harness::new(1);
    h.req(1, "block");
    h.wait_started();
    h.input = None;
    h.gate.send(()).unwrap();
    let rest = h.finish();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["id"], 1);
}

#[test]
fn oversized_and_garbage_lines_get_errors_and_later_lines_survive() {
    let h = Harness::new(1);
    let input = h.input.as_ref().unwrap();
    let mut big = vec![b'x'; 4000];
    big.push(b'\n');
    input.send(big).unwrap();
    input.send(b"\xff\xfe garbage\n".to_vec()).unwrap();
    input
        .send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n".to_vec())
        .unwrap();
    h.req(5, "ping");
    let a = h.next();
    assert_eq!(
        (a["id"].clone(), a["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    let b = h.next();
    assert_eq!(b["error"]["code"], -32700);
    // The notification is never answered; the next answer is the ping.
    assert_eq!(h.next()["id"], 5);
    h.finish();
}

/// A handler that only answers and counts `before_exit`; the test keeps a `Weak` to it.
struct Quiet(Arc<AtomicUsize>);

impl Handler for Quiet {
    fn handle(&self, req: Request) -> Response {
        Response::ok(req.id, json!({}))
    }
    fn on_notification(&self, _: &Notification) {}
    fn before_exit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Regression: the stdin reader signalled "done" before it let go of the shared state, so
/// the serving thread sometimes found it still shared, skipped the orderly shutdown and
/// returned while the handler (and, in the adapter, the embedded runtime whose drop ends
/// the sessions) was dropped later on the reader thread, racing the process's exit. The
/// embedded guardians were then never told to shut down, and their shells' detached
/// children lived on (`shell_hostile::adapter_exit_ends_embedded_detached_children`, about
/// 1 run in 12 under load). A clean EOF must end with the handler dropped before `serve`
/// returns, every time, and the handler told once that the process exits (the adapter
/// ends its embedded sessions then, whoever still holds it).
#[test]
fn the_handler_is_dropped_before_serve_returns_at_eof() {
    for round in 0..1_000 {
        let exits = Arc::new(AtomicUsize::new(0));
        let handler: Arc<dyn Handler> = Arc::new(Quiet(exits.clone()));
        let weak = Arc::downgrade(&handler);
        let input = io::BufReader::new(io::Cursor::new(Vec::<u8>::new()));
        let limits = Limits {
            workers: 1,
            max_message_bytes: 1024,
            progress_interval: super::PROGRESS_INTERVAL,
        };
        serve(input, io::sink(), limits, handler).unwrap();
        assert!(weak.upgrade().is_none(), "round {round}: still held");
        assert_eq!(exits.load(Ordering::SeqCst), 1, "round {round}");
    }
}
