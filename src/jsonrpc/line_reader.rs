//! A newline-delimited reader with a hard per-line cap.
//!
//! An oversized line is skipped to its end without being buffered, so one bad message
//! never costs more than the cap in memory and never swallows the messages after it.

use std::io::{self, BufRead};

/// One item read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its terminator (a trailing `\r` is removed too).
    Message(Vec<u8>),
    /// A line longer than the cap; `bytes` is how long it was.
    Oversized {
        bytes: usize,
    },
    Eof,
}

pub struct LineReader<R> {
    inner: R,
    max: usize,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R, max: usize) -> LineReader<R> {
        LineReader { inner, max }
    }

    /// The next non-blank line. A final line without a newline still counts.
    pub fn next_line(&mut self) -> io::Result<Line> {
        loop {
            match self.read_one()? {
                Line::Message(m) if m.iter().all(u8::is_ascii_whitespace) => continue,
                other => return Ok(other),
            }
        }
    }

    fn read_one(&mut self) -> io::Result<Line> {
        let mut buf = Vec::new();
        let mut total = 0usize;
        let mut oversized = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if total == 0 {
                    return Ok(Line::Eof);
                }
                break;
            }
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let body = if done { &chunk[..take - 1] } else { chunk };
            total += body.len();
            if !oversized {
                if total > self.max {
                    oversized = true;
                    buf = Vec::new();
                } else {
                    buf.extend_from_slice(body);
                }
            }
            self.inner.consume(take);
            if done {
                break;
            }
        }
        if oversized {
            return Ok(Line::Oversized { bytes: total });
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(Line::Message(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut r = LineReader::new(Cursor::new(input.to_vec()), max);
        let mut out = Vec::new();
        loop {
            match r.next_line().unwrap() {
                Line::Eof => return out,
                l => out.push(l),
            }
        }
    }

    #[test]
    fn splits_lines_and_strips_crlf() {
        assert_eq!(
            lines(b"a\r\nbb\n\n  \nccc", 10),
            vec![
                Line::Message(b"a".to_vec()),
                Line::Message(b"bb".to_vec()),
                Line::Message(b"ccc".to_vec())
            ]
        );
    }

    #[test]
    fn oversized_line_is_skipped_and_later_lines_survive() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(
            lines(&input, 10),
            vec![
                Line::Oversized { bytes: 100 },
                Line::Message(b"ok".to_vec())
            ]
        );
    }

    #[test]
    fn oversized_across_small_buffers() {
        let mut input = vec![b'y'; 5000];
        input.extend_from_slice(b"\nnext\n");
        let mut r = LineReader::new(io::BufReader::with_capacity(7, Cursor::new(input)), 64);
        assert_eq!(r.next_line().unwrap(), Line::Oversized { bytes: 5000 });
        assert_eq!(r.next_line().unwrap(), Line::Message(b"next".to_vec()));
        assert_eq!(r.next_line().unwrap(), Line::Eof);
    }

    #[test]
    fn exactly_the_cap_is_accepted() {
        assert_eq!(
            lines(b"0123456789\n", 10),
            vec![Line::Message(b"0123456789".to_vec())]
        );
    }
}
