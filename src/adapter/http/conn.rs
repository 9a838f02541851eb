//! One client connection's bounded I/O: read a bounded head (the `http-conn` loop in
//! `listener.rs` hands it to admission, `front.rs`), read a bounded body only for an
//! admitted request, write the answer, and keep the connection for the next request or
//! close it. It knows nothing of admission or dispatch.
//!
//! Every read is bounded three ways: in bytes (a head stops at `MAX_HEAD_BYTES`, a body at
//! the body cap, a chunk-size line at `MAX_CHUNK_LINE`), in time per read (the I/O
//! timeout, set on the socket) and in time overall (a head must arrive within one I/O
//! timeout of its first byte; a body within the request deadline). A body's memory is
//! asked of the caller (`Reserve`) before it is allocated: a declared length at once, a
//! chunked body as the capacity each chunk grows its buffer to.
//!
//! Invariant: a connection whose request body was not read to its end is closed after
//! the answer, never reused and never drained into memory; closing it first discards (in
//! a fixed buffer) at most `LINGER_BYTES` for at most `LINGER_TIME`, so the client can
//! read the answer instead of a reset.

use super::reply::Reply;
use super::routes;
use super::wire::{self, BodyFraming, Head, HeadError, MAX_HEAD_BYTES};
use crate::deadline::Deadline;
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// Most bytes asked of the socket per read.
const READ_CHUNK: usize = 64 * 1024;
/// The read buffer's first size: a typical request (head and JSON body) fits in one
/// read. It doubles, up to `READ_CHUNK` per read, only for a longer head or body.
const FIRST_BUF: usize = 8 * 1024;
/// Longest chunk-size line (size, extensions, CRLF) of a chunked body.
const MAX_CHUNK_LINE: usize = 4096;
/// What a closing connection may still discard: enough for a client that wrote a whole
/// oversized request before reading the answer (a 4 MiB head, a small body behind a 431).
const LINGER_BYTES: usize = 8 << 20;
/// A rejected request's body up to this size is read and dropped, so its connection
/// stays usable (a 401 or 429 on a keep-alive client is routine); larger ones close it.
const DISCARD_BYTES: u64 = 64 * 1024;
/// How long a closing connection waits for the client to stop sending.
const LINGER_TIME: Duration = Duration::from_secs(2);

pub struct Conn {
    stream: TcpStream,
    /// `buf[pos..end]` is read and not yet consumed; `buf[end..]` is room for the next
    /// read, zeroed once when the buffer grows and never again.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// The head of the answer being written, reused from answer to answer.
    out: Vec<u8>,
    io_timeout: Duration,
    read_timeout: Option<Duration>,
    pub peer: SocketAddr,
}

/// What reading a head produced.
pub enum HeadRead {
    Head(Head),
    /// The client hung up, stayed idle past the I/O timeout, or stalled mid-head.
    Closed,
    /// Answer this (431, 400) and close.
    Refuse(Reply),
}

/// Asked for the whole capacity a body's buffer is about to have, before it is allocated;
/// `Err` (why, for the answer) refuses the body.
pub type Reserve<'a> = &'a mut dyn FnMut(usize) -> Result<(), &'static str>;

/// Why a body could not be collected.
#[derive(Debug)]
pub enum BodyError {
    /// More than the cap (counted as it streams, chunked bodies included): 413.
    TooLarge,
    /// The memory for it was refused (the body budget is taken): 503, retry later.
    OverBudget(&'static str),
    /// The request deadline passed while the body was still arriving: 408.
    Timeout(&'static str),
    /// Bad chunk framing, or the client hung up: 400.
    Malformed(String),
}

impl BodyError {
    pub fn reply(&self) -> Reply {
        match self {
            BodyError::TooLarge => routes::plain(413, "request body exceeds 64 MiB"),
            BodyError::OverBudget(why) => routes::retry_later(503, why),
            BodyError::Timeout(which) => routes::plain(408, &format!("{which} expired")),
            BodyError::Malformed(e) => routes::plain(400, &format!("unreadable request body: {e}")),
        }
    }
}

fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

impl Conn {
    /// A connection with no bytes read yet; small answers go out at once (`TCP_NODELAY`).
    pub fn new(stream: TcpStream, peer: SocketAddr, io_timeout: Duration) -> Conn {
        // A failing setsockopt leaves the defaults in place.
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(io_timeout));
        Conn {
            stream,
            buf: Vec::new(),
            pos: 0,
            end: 0,
            out: Vec::new(),
            io_timeout,
            read_timeout: None,
            peer,
        }
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
        }
    }

    /// One read of at most `limit` bytes, waiting at most `timeout`; `Ok(0)` is EOF. The
    /// buffer grows (doubling from `FIRST_BUF`, by at most `limit`) only when it has
    /// room for fewer than `want` bytes (`1 <= want <= limit`).
    fn fill(&mut self, limit: usize, want: usize, timeout: Duration) -> std::io::Result<usize> {
        let timeout = timeout.max(Duration::from_millis(1));
        if self.read_timeout != Some(timeout) {
            self.stream.set_read_timeout(Some(timeout))?;
            self.read_timeout = Some(timeout);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() - self.end < want {
            let len = (self.buf.len() * 2).max(FIRST_BUF).min(self.end + limit);
            self.buf.resize(len.max(self.end + want), 0);
        }
        let to = self.buf.len().min(self.end + limit);
        let got = self.stream.read(&mut self.buf[self.end..to])?;
        self.end += got;
        Ok(got)
    }

    pub fn read_head(&mut self) -> HeadRead {
        let mut scanned = 0;
        let mut deadline: Option<Deadline> = None;
        loop {
            if let Some(end) = wire::head_end(self.unread(), scanned) {
                let parsed = wire::parse_head(&self.unread()[..end]);
                self.consume(end);
                return match parsed {
                    Ok(h) => HeadRead::Head(h),
                    Err(HeadError::TooLarge) => HeadRead::Refuse(too_large()),
                    Err(HeadError::Malformed(why)) => {
                        HeadRead::Refuse(routes::plain(400, &format!("bad request: {why}")))
                    }
                };
            }
            // The head's first bytes are here (a whole head read at once needs no clock).
            if !self.unread().is_empty() && deadline.is_none() {
                deadline = Some(Deadline::after("request head", self.io_timeout));
            }
            let have = self.unread().len();
            if have >= MAX_HEAD_BYTES {
                return HeadRead::Refuse(too_large());
            }
            scanned = have;
            let timeout = match deadline {
                None => self.io_timeout,
                Some(d) => match d.remaining() {
                    Some(left) if !left.is_zero() => left,
                    _ => return HeadRead::Closed,
                },
            };
            match self.fill(READ_CHUNK.min(MAX_HEAD_BYTES - have), 1, timeout) {
                Ok(0) => return HeadRead::Closed,
                Ok(_) => {}
                // Idle between requests: the keep-alive connection ends.
                Err(e) if transient(&e) && deadline.is_some() => {}
                Err(_) => return HeadRead::Closed,
            }
        }
    }

    /// Read once for a body, bounded by the I/O timeout and the request deadline; `want`
    /// bytes are still expected (the buffer grows for up to `READ_CHUNK` of them).
    fn fill_body(&mut self, want: usize, deadline: Deadline) -> Result<(), BodyError> {
        let want = want.clamp(1, READ_CHUNK);
        loop {
            let left = match deadline.remaining() {
                Some(l) if l.is_zero() => return Err(BodyError::Timeout(deadline.name())),
                Some(l) => l.min(self.io_timeout),
                None => self.io_timeout,
            };
            match self.fill(READ_CHUNK, want, left) {
                Ok(0) => return Err(BodyError::Malformed("the client hung up".into())),
                Ok(_) => return Ok(()),
                Err(e) if transient(&e) => {}
                Err(e) => return Err(BodyError::Malformed(e.to_string())),
            }
        }
    }

    /// Append exactly `n` body bytes to `out`.
    fn take(&mut self, out: &mut Vec<u8>, n: usize, deadline: Deadline) -> Result<(), BodyError> {
        let mut left = n;
        while left > 0 {
            if self.unread().is_empty() {
                self.fill_body(left, deadline)?;
            }
            let k = left.min(self.unread().len());
            out.extend_from_slice(&self.unread()[..k]);
            self.consume(k);
            left -= k;
        }
        Ok(())
    }

    /// One LF-terminated line of at most `max` bytes, with its end.
    fn raw_line(&mut self, max: usize, deadline: Deadline) -> Result<Vec<u8>, BodyError> {
        loop {
            if let Some(i) = self.unread().iter().position(|&b| b == b'\n') {
                let raw = self.unread()[..=i].to_vec();
                self.consume(i + 1);
                return Ok(raw);
            }
            if self.unread().len() > max {
                return Err(BodyError::Malformed("chunk line too long".into()));
            }
            self.fill_body(1, deadline)?;
        }
    }

    /// One CRLF- (or LF-) terminated line of at most `max` bytes, without its end.
    fn line(&mut self, max: usize, deadline: Deadline) -> Result<String, BodyError> {
        let raw = self.raw_line(max, deadline)?;
        let raw = raw.strip_suffix(b"\n").unwrap_or(&raw);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        Ok(String::from_utf8_lossy(raw).into_owned())
    }

    /// Collect a whole body of at most `cap` bytes before `deadline`, its memory granted
    /// by `reserve` first.
    pub fn read_body(
        &mut self,
        framing: BodyFraming,
        cap: usize,
        deadline: Deadline,
        reserve: Reserve,
    ) -> Result<Vec<u8>, BodyError> {
        match framing {
            BodyFraming::None => Ok(Vec::new()),
            BodyFraming::Length(n) => {
                let n = usize::try_from(n).ok().filter(|n| *n <= cap);
                let n = n.ok_or(BodyError::TooLarge)?;
                // The declared length is granted before a byte is read, so it is
                // allocated at once: pages are resident only as the bytes arrive.
                reserve(n).map_err(BodyError::OverBudget)?;
                let mut body = Vec::with_capacity(n);
                self.take(&mut body, n, deadline)?;
                Ok(body)
            }
            BodyFraming::Chunked => self.read_chunked(cap, deadline, reserve),
        }
    }

    fn read_chunked(
        &mut self,
        cap: usize,
        deadline: Deadline,
        reserve: Reserve,
    ) -> Result<Vec<u8>, BodyError> {
        let bad = |why: &str| BodyError::Malformed(why.to_string());
        let mut body = Vec::new();
        loop {
            let line = self.raw_line(MAX_CHUNK_LINE, deadline)?;
            let size = super::wire::chunk_size(&line).map_err(bad)?;
            let size = usize::try_from(size).map_err(|_| BodyError::TooLarge)?;
            if size == 0 {
                break;
            }
            let need = body.len().saturating_add(size);
            if need > cap {
                return Err(BodyError::TooLarge);
            }
            if need > body.capacity() {
                // Doubling (within the cap) keeps many small chunks cheap; the capacity,
                // not the length, is what is granted.
                let grown = need.max(body.capacity().saturating_mul(2)).min(cap);
                reserve(grown).map_err(BodyError::OverBudget)?;
                body.reserve_exact(grown - body.len());
            }
            self.take(&mut body, size, deadline)?;
            if !self.line(2, deadline)?.is_empty() {
                return Err(bad("chunk longer than its size"));
            }
        }
        // Trailer fields are ignored, within the head's bounds.
        let mut trailers = 0;
        loop {
            let line = self.line(MAX_HEAD_BYTES, deadline)?;
            trailers += line.len() + 2;
            if line.is_empty() {
                return Ok(body);
            }
            if trailers > MAX_HEAD_BYTES {
                return Err(bad("trailer section too large"));
            }
        }
    }

    /// Skip the body of a rejected request when it is small and declared by length;
    /// whether the connection can carry another request. A client that declared
    /// `Expect: 100-continue` has not sent it and will not.
    pub fn discard_small_body(&mut self, framing: BodyFraming, expect_continue: bool) -> bool {
        let n = match framing {
            BodyFraming::None => return true,
            BodyFraming::Length(n) if n <= DISCARD_BYTES && !expect_continue => n as usize,
            _ => return false,
        };
        let deadline = Deadline::after("discarded body", self.io_timeout);
        let mut left = n;
        while left > 0 {
            if self.unread().is_empty() && self.fill_body(left, deadline).is_err() {
                return false;
            }
            let k = left.min(self.unread().len());
            self.consume(k);
            left -= k;
        }
        true
    }

    /// Write raw bytes (an interim `100 Continue`).
    pub fn write_raw(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok()
    }

    /// Write `reply`'s head and body with one `writev` (more only if the socket takes
    /// part of it): no copy of the body, no second segment for it (`TCP_NODELAY`).
    fn send(&mut self, reply: &Reply, head_only: bool, close: bool) -> std::io::Result<()> {
        self.out.clear();
        reply.write_head(&mut self.out, close);
        let mut parts = [IoSlice::new(&self.out), IoSlice::new(reply.body(head_only))];
        let mut parts = &mut parts[..];
        while !parts.is_empty() {
            match self.stream.write_vectored(parts) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut parts, n),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Answer and keep the connection when the client wants it and nothing of this
    /// request is left unread; otherwise answer with `Connection: close` and close.
    /// Returns whether the connection stays open.
    pub fn answer(&mut self, reply: &Reply, head_only: bool, keep: bool) -> bool {
        if !keep {
            self.finish(reply, head_only);
            return false;
        }
        match self.send(reply, head_only, false) {
            Ok(()) => true,
            Err(e) => {
                log::debug!("answer to {} not delivered: {e}", self.peer);
                false
            }
        }
    }

    /// Answer with `Connection: close`, then close without reading what remains.
    pub fn finish(&mut self, reply: &Reply, head_only: bool) {
        if let Err(e) = self.send(reply, head_only, true) {
            log::debug!("answer to {} not delivered: {e}", self.peer);
            return;
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        let until = Deadline::after("lingering close", LINGER_TIME.min(self.io_timeout));
        let mut sink = [0u8; 16 * 1024];
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            let Some(left) = until.remaining().filter(|l| !l.is_zero()) else {
                return;
            };
            if self.stream.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match self.stream.read(&mut sink) {
                Ok(0) => return,
                Ok(n) => discarded += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

fn too_large() -> Reply {
    routes::plain(431, "request header fields too large (64 KiB, 128 fields)")
}
