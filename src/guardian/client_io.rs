//! One guardian client connection: a non-blocking socket with a frame buffer each way.
//! Bytes are read into `inbox` as they arrive and taken out a whole frame at a time;
//! answers wait in `outbox` until the socket accepts them (the loop polls for `POLLOUT`).
//!
//! Invariant: nothing here blocks. A client that sends half a frame, or stops reading its
//! answer, costs only its own buffers; the poll loop never waits for it.

use crate::wire::{MAX_FRAME_BYTES, encode_frame};
use serde::{Serialize, de::DeserializeOwned};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;

/// Bytes read from one client per wake-up: a request is small, a burst must not starve
/// the other fds of the loop.
const READ_BUDGET: usize = 256 * 1024;

pub struct Client {
    pub stream: UnixStream,
    inbox: Vec<u8>,
    outbox: Vec<u8>,
    /// Bytes of `outbox` already written.
    sent: usize,
    /// The peer's hello has been read (and ours queued).
    pub greeted: bool,
    /// The peer closed its side; frames already buffered are still handled.
    pub eof: bool,
}

impl Client {
    pub fn new(stream: UnixStream) -> io::Result<Client> {
        // Accepted sockets do not inherit the listener's O_NONBLOCK on Linux.
        stream.set_nonblocking(true)?;
        Ok(Client {
            stream,
            inbox: Vec::new(),
            outbox: Vec::new(),
            sent: 0,
            greeted: false,
            eof: false,
        })
    }

    /// Read what the socket has (up to `READ_BUDGET`). An error means the connection is
    /// unusable; end of stream only sets `eof`.
    pub fn fill(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        let mut got = 0;
        while got < READ_BUDGET {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.inbox.extend_from_slice(&buf[..n]);
                    got += n;
                    if n < buf.len() {
                        // The socket is drained for now; what arrives later wakes the
                        // loop's poll again (this saves the read that would say EAGAIN).
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next whole frame in the inbox, decoded; `None` while it is incomplete.
    pub fn next_frame<T: DeserializeOwned>(&mut self) -> Option<io::Result<T>> {
        let (len, body) = split_frame(&self.inbox)?;
        let result = match len {
            Err(e) => Err(e),
            Ok(()) => serde_json::from_slice(body)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        };
        let used = 4 + body.len();
        self.inbox.drain(..used);
        Some(result)
    }

    /// Queue one frame and write as much as the socket takes now.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> io::Result<()> {
        encode_frame(&mut self.outbox, msg)?;
        self.flush()
    }

    /// Write queued bytes until the socket would block or the queue is empty.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.sent < self.outbox.len() {
            match self.stream.write(&self.outbox[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.outbox.clear();
        self.sent = 0;
        Ok(())
    }

    pub fn wants_write(&self) -> bool {
        self.sent < self.outbox.len()
    }
}

/// Split a complete frame off the front of `buf`: its length check and its body. An
/// oversized length is reported as soon as the 4 length bytes are there (with an empty
/// body, so the caller drops the connection).
fn split_frame(buf: &[u8]) -> Option<(io::Result<()>, &[u8])> {
    let len = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    if len > MAX_FRAME_BYTES {
        let e = io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds {MAX_FRAME_BYTES}"),
        );
        return Some((Err(e), &[]));
    }
    buf.get(4..4 + len).map(|body| (Ok(()), body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Hello;

    #[test]
    fn frames_are_taken_whole_whatever_the_read_boundaries() {
        let mut bytes = Vec::new();
        encode_frame(&mut bytes, &Hello::new(1, "adapter")).unwrap();
        encode_frame(&mut bytes, &Hello::new(2, "operator")).unwrap();
        for cut in 0..bytes.len() {
            let (a, b) = UnixStream::pair().unwrap();
            let mut c = Client::new(b).unwrap();
            (&a).write_all(&bytes[..cut]).unwrap();
            c.fill().unwrap();
            let mut got: Vec<Hello> = Vec::new();
            while let Some(h) = c.next_frame::<Hello>() {
                got.push(h.unwrap());
            }
            (&a).write_all(&bytes[cut..]).unwrap();
            drop(a);
            // A short read ends a fill; the end of stream shows on a later one.
            while !c.eof {
                c.fill().unwrap();
            }
            while let Some(h) = c.next_frame::<Hello>() {
                got.push(h.unwrap());
            }
            assert!(c.eof, "cut {cut}");
            let protocols: Vec<u32> = got.iter().map(|h| h.protocol).collect();
            assert_eq!(protocols, vec![1, 2], "cut {cut}");
        }
    }

    #[test]
    fn an_oversized_frame_is_refused_before_its_body_arrives() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut c = Client::new(b).unwrap();
        (&a).write_all(&((MAX_FRAME_BYTES + 1) as u32).to_be_bytes())
            .unwrap();
        c.fill().unwrap();
        assert!(c.next_frame::<Hello>().unwrap().is_err());
    }

    #[test]
    fn a_reader_that_stalls_never_blocks_the_writer() {
        let (_a, b) = UnixStream::pair().unwrap();
        let mut c = Client::new(b).unwrap();
        let big = "x".repeat(1024 * 1024);
        for _ in 0..4 {
            c.send(&big).unwrap();
        }
        assert!(c.wants_write(), "the socket buffer cannot hold 4 MiB");
    }
}
