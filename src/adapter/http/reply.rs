//! A response as a value: status, header fields and a body held in memory. Every answer
//! this transport gives is small or already built (JSON-RPC answers are serialised
//! before they are sent), so a reply is written with one `write_all`.

use super::wire;

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    headers: Vec<(&'static str, String)>,
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

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Reply {
        self.body = body;
        self
    }

    /// The bytes on the wire; `head_only` for an answer to HEAD, `close` to end the
    /// connection after it.
    pub fn to_bytes(&self, head_only: bool, close: bool) -> Vec<u8> {
        wire::response(self.status, &self.headers, &self.body, head_only, close)
    }
}
