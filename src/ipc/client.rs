//! Talking to one guardian: hello, then requests, each with one (possibly deferred)
//! response. A connection whose answer was read whole goes back to the client's small
//! pool, so the next call skips connect, hello and accept (two of them per `BashCommand`:
//! the snapshot and the action). Clones of a client share its pool.

use crate::deadline::Deadline;
use crate::wire::guardian::{Facts, PROTOCOL, Request, Response, Wait};
use crate::wire::{Hello, encode_frame, read_frame};
use parking_lot::Mutex;
use std::io::{BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Idle connections kept per guardian: one per concurrent caller of a session is plenty
/// (a session runs one foreground command); the rest are closed after use.
const POOL_MAX: usize = 4;
/// A request's frame is written into this much room at once (a `Run` is about 300 bytes):
/// no growth by `realloc`, which takes the malloc arena's lock.
const REQUEST_CAPACITY: usize = 1024;

/// `req` as one frame, written into `REQUEST_CAPACITY` bytes of room.
fn request_frame(req: &Request) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(REQUEST_CAPACITY);
    encode_frame(&mut out, req)?;
    Ok(out)
}

/// Slack added to a request's own wait before the client gives up on the guardian. The
/// guardian enforces the wait itself; this only bounds a guardian that stopped answering.
pub const ANSWER_SLACK: Duration = Duration::from_secs(10);

/// A guardian running on a thread of this process, reachable without its socket (the
/// embedded runtime's `guardian::InProcessLoop`).
pub trait InProcess: Send + Sync {
    /// The answer to `req` if this path serves it, `None` to send it over the socket.
    /// The request carries its own wait, which the guardian enforces.
    fn call(&self, req: &Request) -> Option<Result<Response, ClientError>>;
}

/// A client's in-process path, if it has one.
#[derive(Clone)]
struct Direct(Arc<dyn InProcess>);

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("in-process")
    }
}

#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens on the socket (guardian gone) or it hung up mid-request.
    Gone(String),
    /// The guardian (of build `build`) speaks protocol `theirs`, not ours.
    Protocol { build: String, theirs: u32 },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Gone(d) => write!(f, "session guardian unavailable: {d}"),
            ClientError::Protocol { build, theirs } => write!(
                f,
                "guardian protocol mismatch: guardian {build} speaks {theirs}, we speak {PROTOCOL}"
            ),
        }
    }
}

impl From<ClientError> for crate::wire::error::RuntimeError {
    fn from(e: ClientError) -> Self {
        use crate::wire::error::RuntimeError;
        match e {
            ClientError::Gone(detail) => RuntimeError::GuardianGone { detail },
            ClientError::Protocol { build, theirs } => RuntimeError::ProtocolMismatch {
                peer: format!("guardian {build}"),
                ours: PROTOCOL,
                theirs,
            },
        }
    }
}

/// A failed `try_call`: `sent` is false only when the request provably never left.
#[derive(Debug)]
pub struct SendError {
    pub error: ClientError,
    pub sent: bool,
}

/// Why a guardian gave no facts.
#[derive(Debug)]
pub enum FactsError {
    /// It answered something else: a guardian of a build without execution facts.
    Unsupported(String),
    Client(ClientError),
}

impl std::fmt::Display for FactsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FactsError::Unsupported(answer) => write!(
                f,
                "the session's guardian cannot report executions (an older build?): {answer}"
            ),
            FactsError::Client(e) => e.fmt(f),
        }
    }
}

#[derive(Clone, Debug)]
pub struct GuardianClient {
    pub socket: PathBuf,
    /// Greeted connections whose last answer was read whole, most recent last.
    idle: Arc<Mutex<Vec<Conn>>>,
    /// An embedded guardian's loop: the requests it serves skip the socket.
    direct: Option<Direct>,
}

/// A greeted connection and the read timeout last set on it (each set is a syscall).
#[derive(Debug)]
struct Conn {
    /// Frames are read through a buffer: a length and its body (and, on a new connection,
    /// the hello and the answer) usually arrive in one read.
    reader: BufReader<UnixStream>,
    read_timeout: Duration,
}

impl Conn {
    fn set_read_timeout(&mut self, t: Duration) -> std::io::Result<()> {
        if self.read_timeout != t {
            self.reader.get_ref().set_read_timeout(Some(t))?;
            self.read_timeout = t;
        }
        Ok(())
    }

    /// Wait up to `limit` for the answer's first bytes, in `poll` for `POLLIN` rather than
    /// in a blocking read. A reader blocked in `recv` on a Unix stream socket is also woken
    /// when the guardian reads our request (the kernel signals the freed send space on the
    /// same wait queue, and `recv` does not filter by event), so about one call in three
    /// paid a spurious wake-up and two task switches while the guardian was starting the
    /// command (`perf sched`); `poll` sleeps through it. A failed `poll` leaves the
    /// verdict to the read that follows (which has the same timeout on the socket).
    fn await_answer(&self, limit: Duration) -> std::io::Result<()> {
        if !self.reader.buffer().is_empty() {
            return Ok(());
        }
        let deadline = Deadline::after("guardian answer", limit);
        let fd = self.reader.get_ref().as_raw_fd();
        loop {
            let left = deadline.remaining().unwrap_or(Duration::ZERO);
            // Rounded up: a wait never ends before its limit.
            let ms = left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
            let mut pfd = nix::libc::pollfd {
                fd,
                events: nix::libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on the stack for an open socket.
            let n = unsafe { nix::libc::poll(&mut pfd, 1, ms) };
            if n == 0 {
                let e = format!("no answer from the guardian within {limit:?}");
                return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, e));
            }
            if n > 0 || nix::Error::last() != nix::Error::EINTR {
                return Ok(());
            }
        }
    }

    /// An idle connection is usable when nothing is waiting on it: the guardian has not
    /// hung up (ended, or restarted on the same path) and sent nothing unasked.
    fn usable(&self) -> bool {
        if !self.reader.buffer().is_empty() {
            return false;
        }
        let mut byte = 0u8;
        // SAFETY: a one-byte peek into a local buffer on an open socket.
        let n = unsafe {
            nix::libc::recv(
                self.reader.get_ref().as_raw_fd(),
                (&mut byte as *mut u8).cast(),
                1,
                nix::libc::MSG_PEEK | nix::libc::MSG_DONTWAIT,
            )
        };
        n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
    }
}

impl GuardianClient {
    pub fn new(socket: &Path) -> GuardianClient {
        GuardianClient {
            socket: socket.to_path_buf(),
            idle: Arc::default(),
            direct: None,
        }
    }

    /// The same client, with a guardian of this process that serves some requests
    /// without the socket.
    pub fn in_process(mut self, guardian: Arc<dyn InProcess>) -> GuardianClient {
        self.direct = Some(Direct(guardian));
        self
    }

    /// A pooled connection that is still usable, if any (unusable ones are closed).
    fn pooled(&self) -> Option<Conn> {
        let mut idle = self.idle.lock();
        while let Some(c) = idle.pop() {
            if c.usable() {
                return Some(c);
            }
        }
        None
    }

    fn release(&self, c: Conn) {
        let mut idle = self.idle.lock();
        if idle.len() < POOL_MAX {
            idle.push(c);
        }
    }

    /// Send `Shutdown` and wait (up to `linger`) until the guardian has really ended: its
    /// side of the connection closes only when its event loop is gone.
    pub fn shutdown_and_wait(&self, linger: Duration) -> Result<Response, ClientError> {
        let shutdown = self.exchange(&Request::Shutdown, Duration::ZERO, Greeting::Pipelined);
        let (resp, c) = shutdown.map_err(|e| e.error)?;
        let mut s = c.reader;
        let _ = s.get_ref().set_read_timeout(Some(linger));
        let mut sink = [0u8; 64];
        loop {
            // A socket read with a timeout is not restarted after a signal (SIGCHLD when
            // the guardian's shell dies): EINTR is not the end of the guardian.
            match std::io::Read::read(&mut s, &mut sink) {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        Ok(resp)
    }

    /// The guardian's facts with its foreground screen (`Request::Watch`), answered once
    /// its activity counter passes `after` or `wait` ends; executions numbered up to
    /// `known` come without their admission.
    pub fn facts(&self, after: u64, wait: Duration, known: u64) -> Result<Facts, FactsError> {
        let req = Request::Watch {
            after,
            wait: Wait {
                timeout_ms: wait.as_millis() as u64,
                settle_ms: None,
            },
            screen: true,
            known,
        };
        match self.call(&req, wait) {
            Ok(Response::Facts(f)) => Ok(f),
            Ok(other) => Err(FactsError::Unsupported(format!("{other:?}"))),
            Err(e) => Err(FactsError::Client(e)),
        }
    }

    /// Like `call`, but says whether the request may have reached the guardian: a failure
    /// before the request was written (nothing listens, another protocol) did not send it.
    /// Always over the socket, greeting a new connection before the request
    /// (`Greeting::HelloFirst`).
    pub fn try_call(&self, req: &Request, wait: Duration) -> Result<Response, SendError> {
        let (resp, c) = self.exchange(req, wait, Greeting::HelloFirst)?;
        self.release(c);
        Ok(resp)
    }

    /// Send `req`, waiting up to `wait` plus slack for the answer.
    pub fn call(&self, req: &Request, wait: Duration) -> Result<Response, ClientError> {
        if let Some(answer) = self.direct.as_ref().and_then(|d| d.0.call(req)) {
            return answer;
        }
        let (resp, c) = (self.exchange(req, wait, Greeting::Pipelined)).map_err(|e| e.error)?;
        self.release(c);
        Ok(resp)
    }

    /// A pooled connection with `frame` written to it. A write that fails means the
    /// guardian closed its end before reading anything: the request never arrived.
    fn reuse(&self, frame: &[u8]) -> Option<Conn> {
        let mut c = self.pooled()?;
        c.reader.get_mut().write_all(frame).ok()?;
        Some(c)
    }

    fn connect(&self) -> std::io::Result<Conn> {
        let stream = UnixStream::connect(&self.socket)?;
        stream.set_write_timeout(Some(ANSWER_SLACK))?;
        stream.set_read_timeout(Some(ANSWER_SLACK))?;
        Ok(Conn {
            reader: BufReader::new(stream),
            read_timeout: ANSWER_SLACK,
        })
    }

    /// Write `req` (on a pooled connection, else on a new one greeted as `greeting` says)
    /// and read its answer within `wait` plus slack. The connection comes back with the
    /// answer, for the pool or for a caller that keeps reading (`shutdown_and_wait`).
    fn exchange(
        &self,
        req: &Request,
        wait: Duration,
        greeting: Greeting,
    ) -> Result<(Response, Conn), SendError> {
        let gone = |e: std::io::Error| ClientError::Gone(e.to_string());
        let unsent = |e: std::io::Error| SendError {
            error: gone(e),
            sent: false,
        };
        let sent = |e: std::io::Error| SendError {
            error: gone(e),
            sent: true,
        };
        let out = request_frame(req).map_err(unsent)?;
        let mut c = match self.reuse(&out) {
            Some(c) => c,
            None => {
                let mut c = self.connect().map_err(unsent)?;
                let mut first = Vec::with_capacity(out.len() + 96);
                encode_frame(&mut first, &Hello::new(PROTOCOL, "adapter")).map_err(unsent)?;
                if greeting == Greeting::Pipelined {
                    first.extend_from_slice(&out);
                }
                // Pipelined, a partial write may have carried the request.
                let pipelined = greeting == Greeting::Pipelined;
                let failed = |e| if pipelined { sent(e) } else { unsent(e) };
                c.reader.get_mut().write_all(&first).map_err(failed)?;
                let hello: Hello = read_frame(&mut c.reader).map_err(failed)?;
                if hello.protocol != PROTOCOL {
                    let error = ClientError::Protocol {
                        build: hello.build,
                        theirs: hello.protocol,
                    };
                    // It answers its hello and closes, discarding unread what followed it;
                    // pipelined, the request did leave.
                    return Err(SendError {
                        error,
                        sent: pipelined,
                    });
                }
                if greeting == Greeting::HelloFirst {
                    c.reader.get_mut().write_all(&out).map_err(sent)?;
                }
                c
            }
        };
        c.set_read_timeout(wait + ANSWER_SLACK).map_err(sent)?;
        c.await_answer(wait + ANSWER_SLACK).map_err(sent)?;
        let resp = read_frame(&mut c.reader).map_err(sent)?;
        Ok((resp, c))
    }
}

/// How a new connection greets the guardian before its first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Greeting {
    /// The request follows the hello in the same write, without waiting for the
    /// guardian's: one round trip per call. A guardian speaking another protocol answers
    /// its hello and closes, discarding the request unread, but a failure cannot prove
    /// the request never arrived.
    Pipelined,
    /// The hello alone, the guardian's hello awaited, then the request: a guardian of
    /// another protocol never sees the request, so a failure before its write proves it
    /// unsent (`try_call`).
    HelloFirst,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A guardian stand-in: greets each connection and answers each request `Done`,
    /// closing every connection after `answers_per_conn` answers. Reports each accept,
    /// and each close.
    fn fake_guardian(
        listener: UnixListener,
        answers_per_conn: usize,
    ) -> (
        crossbeam_channel::Receiver<()>,
        crossbeam_channel::Receiver<()>,
    ) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (closed_tx, closed) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                let _ = tx.send(());
                serve(&mut s, answers_per_conn);
                drop(s);
                let _ = closed_tx.send(());
            }
        });
        (rx, closed)
    }

    fn serve(s: &mut UnixStream, answers_per_conn: usize) {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let hello: std::io::Result<Hello> = read_frame(&mut reader);
        if hello.is_err() {
            return;
        }
        let mut out = Vec::new();
        encode_frame(&mut out, &Hello::new(PROTOCOL, "guardian")).unwrap();
        s.write_all(&out).unwrap();
        for _ in 0..answers_per_conn {
            let req: std::io::Result<Request> = read_frame(&mut reader);
            if req.is_err() {
                return;
            }
            out.clear();
            encode_frame(&mut out, &Response::Done).unwrap();
            s.write_all(&out).unwrap();
        }
    }

    /// Thread `tid` of this process: its scheduler state letter and voluntary switches.
    fn thread_state(tid: i32) -> (char, u64) {
        let task = format!("/proc/self/task/{tid}");
        let stat = std::fs::read_to_string(format!("{task}/stat")).unwrap();
        let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
        let status = std::fs::read_to_string(format!("{task}/status")).unwrap();
        let switches = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        (state, switches)
    }

    /// Spin (yielding) until thread `tid` sleeps.
    fn until_asleep(tid: i32) {
        let deadline = Deadline::after("thread asleep", ANSWER_SLACK);
        while thread_state(tid).0 != 'S' {
            assert!(!deadline.expired(), "thread {tid} never slept");
            std::thread::yield_now();
        }
    }

    /// The guardian reading a request must not wake the caller waiting for the answer
    /// (it did when the caller slept in `recv`: the freed send space is signalled on the
    /// same wait queue). One sleep per call, not two.
    #[test]
    fn a_caller_is_not_woken_when_the_guardian_reads_its_request() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("g.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let (tid_tx, tid_rx) = crossbeam_channel::unbounded::<i32>();
        let guardian = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut out = Vec::new();
            let _: Hello = read_frame(&mut reader).unwrap();
            encode_frame(&mut out, &Hello::new(PROTOCOL, "guardian")).unwrap();
            for _ in 0..20 {
                let tid = tid_rx.recv().unwrap();
                // The caller has written its request and waits: only then is it read.
                if reader.buffer().is_empty() {
                    let mut byte = [0u8; 1];
                    let peek = nix::sys::socket::MsgFlags::MSG_PEEK;
                    nix::sys::socket::recv(s.as_raw_fd(), &mut byte, peek).unwrap();
                }
                until_asleep(tid);
                let _: Request = read_frame(&mut reader).unwrap();
                // A wake-up, if any, happened inside that read; let it run its course.
                until_asleep(tid);
                encode_frame(&mut out, &Response::Done).unwrap();
                s.write_all(&out).unwrap();
                out.clear();
            }
        });
        let client = GuardianClient::new(&socket);
        let tid = nix::unistd::gettid().as_raw();
        // The first call opens the connection; then each call writes one request.
        tid_tx.send(tid).unwrap();
        assert!(matches!(
            client.call(&Request::Snapshot, Duration::ZERO),
            Ok(Response::Done)
        ));
        let mut extra = 0;
        for _ in 0..19 {
            tid_tx.send(tid).unwrap();
            let before = thread_state(tid).1;
            let r = client.call(&Request::Snapshot, Duration::ZERO);
            assert!(matches!(r, Ok(Response::Done)), "{r:?}");
            extra += thread_state(tid).1 - before - 1;
        }
        guardian.join().unwrap();
        // The defect woke the caller once in every call (19 extra sleeps); a loaded machine
        // adds a stray sleep now and then (2 of 19 calls, once in a full `make test`).
        assert!(extra < 10, "the caller slept twice in {extra} of 19 calls");
    }

    #[test]
    fn calls_reuse_one_connection() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("g.sock");
        let (accepted, _) = fake_guardian(UnixListener::bind(&socket).unwrap(), usize::MAX);
        let client = GuardianClient::new(&socket);
        let shared = client.clone();
        for c in [&client, &shared, &client] {
            let r = c.call(&Request::Snapshot, Duration::ZERO).unwrap();
            assert!(matches!(r, Response::Done), "{r:?}");
        }
        let r = client.try_call(&Request::Snapshot, Duration::ZERO).unwrap();
        assert!(matches!(r, Response::Done), "{r:?}");
        assert_eq!(
            accepted.try_iter().count(),
            1,
            "one connection for four calls"
        );
    }

    #[test]
    fn a_pooled_connection_the_guardian_closed_is_replaced_not_reported() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("g.sock");
        // Every connection ends after one answer, as when a guardian restarts on the same
        // path between two calls.
        let (accepted, closed) = fake_guardian(UnixListener::bind(&socket).unwrap(), 1);
        let client = GuardianClient::new(&socket);
        for i in 0..3 {
            let r = client.call(&Request::Snapshot, Duration::ZERO);
            assert!(matches!(r, Ok(Response::Done)), "call {i}: {r:?}");
            accepted
                .recv_timeout(ANSWER_SLACK)
                .expect("a connection per call");
            closed
                .recv_timeout(ANSWER_SLACK)
                .expect("closed after its answer");
        }
        let r = client.try_call(&Request::Snapshot, Duration::ZERO);
        assert!(matches!(r, Ok(Response::Done)), "{r:?}");
    }

    /// A guardian of another protocol: `try_call` greets it and stops, so the request
    /// provably never left (`sent: false`) and the guardian read nothing after the hello;
    /// `call` sends the request behind the hello (one round trip) and reports the mismatch.
    #[test]
    fn try_call_never_shows_a_request_to_a_guardian_of_another_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("g.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        // Per connection: the bytes that arrived after the client's hello frame.
        let (tx, after_hello) = crossbeam_channel::unbounded::<usize>();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                let mut reader = BufReader::new(s.try_clone().unwrap());
                let _: Hello = read_frame(&mut reader).unwrap();
                let mut out = Vec::new();
                encode_frame(&mut out, &Hello::new(PROTOCOL + 1, "guardian")).unwrap();
                s.write_all(&out).unwrap();
                // The client closes after reading our hello: read to its end.
                let mut rest = reader.buffer().to_vec();
                std::io::Read::read_to_end(reader.get_mut(), &mut rest).unwrap();
                let _ = tx.send(rest.len());
            }
        });
        let client = GuardianClient::new(&socket);
        let e = client
            .try_call(&Request::Snapshot, Duration::ZERO)
            .unwrap_err();
        assert!(matches!(e.error, ClientError::Protocol { .. }), "{e:?}");
        assert!(!e.sent, "a refused greeting proves the request unsent");
        assert_eq!(after_hello.recv_timeout(ANSWER_SLACK).unwrap(), 0);
        let e = client.call(&Request::Snapshot, Duration::ZERO).unwrap_err();
        assert!(matches!(e, ClientError::Protocol { .. }), "{e:?}");
        let pipelined = after_hello.recv_timeout(ANSWER_SLACK).unwrap();
        assert!(pipelined > 0, "call sends its request behind the hello");
    }
}
