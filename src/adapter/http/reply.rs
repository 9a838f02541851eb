//! A response as a value: status, header fields and a body held in memory. Every answer
//! this transport gives is small or already built (JSON-RPC answers are serialised
//! before they are sent), so a reply goes out in one write of its head and body.

use super::wire;
use std::borrow::Cow;

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Field values are mostly fixed text: borrowed, not allocated per answer.
    headers: Vec<(&'static str, Cow<'static, str>)>,
    body: Vec<u8>,
}

impl Reply {
    pub fn new(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<Cow<'static, str>>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Reply {
        self.body = body;
        self
    }

    /// Append the head's bytes (status line, fields, framing) to `out`; `close` ends the
    /// connection after this answer.
    pub fn write_head(&self, out: &mut Vec<u8>, close: bool) {
        wire::write_head(out, self.status, &self.headers, self.body.len(), close);
    }

    /// The body's bytes; none for an answer to HEAD.
    pub fn body(&self, head_only: bool) -> &[u8] {
        if head_only { &[] } else { &self.body }
    }
}
