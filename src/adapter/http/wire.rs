//! HTTP/1.1 framing as pure functions over bytes: where a request head ends, what it says
//! (request line, header fields, how its body is framed), and the bytes of a response.
//!
//! Invariant: nothing here does I/O; a head is parsed only from at most `MAX_HEAD_BYTES`
//! already in memory, so its size is bounded before any of it is interpreted.

/// Largest request head we read (request line plus header fields, with line ends): a
/// head that has not ended within this many bytes is answered 431 without reading more.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most header fields in one head (431 beyond).
pub const MAX_HEADERS: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// A parsed request head: its text, held once, and where each part is in it (two
/// allocations per head, whatever its number of fields). Header values are kept
/// verbatim (minus surrounding blanks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    text: String,
    method: Span,
    target: Span,
    pub version: Version,
    /// Name and value of each field, in order.
    fields: Vec<(Span, Span)>,
}

/// A byte range of `Head::text`, always on `char` boundaries.
type Span = (u32, u32);

/// Why a head cannot be served.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Over `MAX_HEAD_BYTES` or `MAX_HEADERS`: 431.
    TooLarge,
    /// Not an HTTP/1.x request head: 400, with the reason.
    Malformed(&'static str),
}

/// How the body after a head is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    None,
    Length(u64),
    Chunked,
}

impl Head {
    fn at(&self, (from, to): Span) -> &str {
        &self.text[from as usize..to as usize]
    }

    pub fn method(&self) -> &str {
        self.at(self.method)
    }

    /// The request target (path and query) as sent.
    pub fn target(&self) -> &str {
        self.at(self.target)
    }

    /// The values of the fields named `name` (case-insensitive), in order.
    fn values<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.fields
            .iter()
            .filter(move |(k, _)| self.at(*k).eq_ignore_ascii_case(name))
            .map(|(_, v)| self.at(*v))
    }

    /// The value of the first field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.values(name).next()
    }

    /// How many fields are named `name`.
    pub fn count(&self, name: &str) -> usize {
        self.values(name).count()
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.values(name)
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// Whether the connection may carry another request after this exchange: HTTP/1.1
    /// unless the client said `close`. HTTP/1.0 never: its `keep-alive` is an opt-in this
    /// server does not answer (a 1.0 client keeps a connection only when the answer says
    /// `Connection: keep-alive`), and a 1.0 message with `Transfer-Encoding` must be
    /// treated as faulty framing and its connection closed (RFC 9112 §6.1).
    pub fn keep_alive(&self) -> bool {
        match self.version {
            Version::Http11 => !self.has_token("Connection", "close"),
            Version::Http10 => false,
        }
    }

    /// `Expect: 100-continue`: the client waits for a go-ahead before sending the body.
    pub fn expects_continue(&self) -> bool {
        self.has_token("Expect", "100-continue")
    }

    /// The body's framing (RFC 9112 §6). Both `Transfer-Encoding` and `Content-Length`,
    /// a coding other than chunked, or disagreeing lengths are refused: each is a way to
    /// make two parsers see different request boundaries.
    pub fn body(&self) -> Result<BodyFraming, &'static str> {
        let te = self.count("Transfer-Encoding");
        let mut cl = (self.values("Content-Length"))
            .flat_map(|v| v.split(','))
            .map(str::trim);
        let first = cl.next();
        if te > 0 {
            if first.is_some() {
                return Err("both Transfer-Encoding and Content-Length");
            }
            let mut codings = (self.values("Transfer-Encoding"))
                .flat_map(|v| v.split(','))
                .map(str::trim);
            return match (codings.next(), codings.next()) {
                (Some(c), None) if c.eq_ignore_ascii_case("chunked") => Ok(BodyFraming::Chunked),
                _ => Err("unsupported Transfer-Encoding (only chunked)"),
            };
        }
        let Some(first) = first else {
            return Ok(BodyFraming::None);
        };
        if cl.any(|v| v != first) {
            return Err("conflicting Content-Length values");
        }
        if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
            return Err("invalid Content-Length");
        }
        // Too many digits for u64 is a declared size no cap admits.
        let n = first.parse::<u64>().unwrap_or(u64::MAX);
        Ok(if n == 0 {
            BodyFraming::None
        } else {
            BodyFraming::Length(n)
        })
    }
}

/// Where the head in `buf` ends (just past its blank line), looking from `from` (bytes
/// before it were already searched). Accepts bare LF line ends as RFC 9112 §2.2 allows.
pub fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3);
    let mut i = start;
    while let Some(off) = buf.get(i..)?.iter().position(|&b| b == b'\n') {
        let nl = i + off;
        match buf.get(nl + 1) {
            Some(b'\n') => return Some(nl + 2),
            Some(b'\r') if buf.get(nl + 2) == Some(&b'\n') => return Some(nl + 3),
            _ => i = nl + 1,
        }
    }
    None
}

/// Parse a complete head (the bytes up to and including its blank line) with `httparse`,
/// then hold it as text with spans. On top of what `httparse` checks (token method and
/// names, request-target and value characters, no obsolete line folding, at most
/// `MAX_HEADERS` fields): the head is UTF-8, the target is origin-form or `*`, and the
/// version is 1.0 or 1.1.
pub fn parse_head(bytes: &[u8]) -> Result<Head, HeadError> {
    use HeadError::{Malformed, TooLarge};
    if bytes.len() > MAX_HEAD_BYTES {
        return Err(TooLarge);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| Malformed("head is not UTF-8"))?;
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(Malformed("incomplete request head")),
        Err(httparse::Error::TooManyHeaders) => return Err(TooLarge),
        Err(e) => return Err(Malformed(malformed(e))),
    }
    // Where `part` (a subslice of `bytes`, so of `text`) lies; heads are far below 4 GiB.
    let span = |part: &[u8]| -> Span {
        let from = part.as_ptr() as usize - bytes.as_ptr() as usize;
        (from as u32, (from + part.len()) as u32)
    };
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Err(Malformed("malformed request line"));
    };
    if !(target.starts_with('/') || target == "*") {
        return Err(Malformed("malformed request target"));
    }
    let version = match req.version {
        Some(1) => Version::Http11,
        Some(0) => Version::Http10,
        _ => return Err(Malformed("unsupported HTTP version")),
    };
    let fields = req
        .headers
        .iter()
        .map(|h| {
            let value = h.value.trim_ascii();
            (span(h.name.as_bytes()), span(value))
        })
        .collect::<Vec<_>>();
    Ok(Head {
        method: span(method.as_bytes()),
        target: span(target.as_bytes()),
        version,
        fields,
        text: text.to_string(),
    })
}

/// The reason a head `httparse` refused is malformed, for the 400's text.
fn malformed(e: httparse::Error) -> &'static str {
    use httparse::Error as E;
    match e {
        E::HeaderName => "malformed header name",
        E::HeaderValue => "control character in a header value",
        E::NewLine => "malformed line end",
        E::Status | E::Token => "malformed method",
        E::Version => "unsupported HTTP version",
        E::TooManyHeaders => "too many header fields",
    }
}

/// The size on a chunk-size line (`hex-size [; extensions] CRLF`, the line end included),
/// by `httparse`: no sign, no leading blank, at most 15 hex digits, a CR only before LF.
pub fn chunk_size(line: &[u8]) -> Result<u64, &'static str> {
    // `1*HEXDIG`: `httparse` reads an empty size as 0.
    if !line.first().is_some_and(u8::is_ascii_hexdigit) {
        return Err("bad chunk size");
    }
    match httparse::parse_chunk_size(line) {
        Ok(httparse::Status::Complete((used, size))) if used == line.len() => Ok(size),
        _ => Err("bad chunk size"),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Append a response head to `out`: status line, `headers`, the framing field for a body
/// of `body_len` bytes (the body itself is sent after it, or not at all for HEAD), and
/// `Connection: close` when `close`.
pub fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    headers: &[(&'static str, std::borrow::Cow<'static, str>)],
    body_len: usize,
    close: bool,
) {
    use std::io::Write;
    let _ = write!(out, "HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if status != 204 {
        let _ = write!(out, "Content-Length: {body_len}\r\n");
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
