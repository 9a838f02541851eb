//! Wire types between the adapter, winxd and guardians, and their framing: a 4-byte
//! big-endian length followed by that many bytes of JSON. Nothing else lives here.

pub mod codex;
pub mod daemon;
pub mod error;
pub mod guardian;

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::io::{self, Read, Write};

/// Largest frame accepted. Output windows are capped well below this (see guardian).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// First frame on every stream, in both directions.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    pub protocol: u32,
    /// "adapter", "winxd", "guardian" or "operator".
    pub role: String,
    pub build: String,
}

impl Hello {
    pub fn new(protocol: u32, role: &str) -> Hello {
        Hello {
            protocol,
            role: role.into(),
            build: crate::build_info::identity(),
        }
    }
}

pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    let mut buf = Vec::new();
    encode_frame(&mut buf, msg)?;
    w.write_all(&buf)?;
    w.flush()
}

/// Append one frame to `buf` (several frames can then leave in one write). The body is
/// written in place after a length placeholder: a kept buffer (a guardian client's
/// outbox) then serialises an answer without allocating, and so without `realloc` calls
/// that take the malloc arena's one lock (`alloc::single_arena`), which the embedded
/// guardian shares with the adapter's threads. On error `buf` is left as it was.
pub fn encode_frame<T: Serialize>(buf: &mut Vec<u8>, msg: &T) -> io::Result<()> {
    let start = buf.len();
    buf.extend_from_slice(&[0; 4]);
    let written = serde_json::to_writer(&mut *buf, msg).map_err(io::Error::other);
    let framed = written.and_then(|()| {
        let len = buf.len() - start - 4;
        if len > MAX_FRAME_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "frame too large",
            ));
        }
        buf[start..start + 4].copy_from_slice(&(len as u32).to_be_bytes());
        Ok(())
    });
    if framed.is_err() {
        buf.truncate(start);
    }
    framed
}

pub fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds {MAX_FRAME_BYTES}"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The dialect a session's shell rc is written in; travels typed in winxd's `Ensure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    Bash,
    Zsh,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Bash => "bash",
            Dialect::Zsh => "zsh",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversize_is_refused() {
        let mut buf = Vec::new();
        let h = Hello::new(1, "adapter");
        write_frame(&mut buf, &h).unwrap();
        let back: Hello = read_frame(&mut buf.as_slice()).unwrap();
        assert_eq!(back, h);
        let mut huge = ((MAX_FRAME_BYTES + 1) as u32).to_be_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        assert!(read_frame::<_, Hello>(&mut huge.as_slice()).is_err());
        let garbage = [0u8, 0, 0, 2, b'{', b'x'];
        assert!(read_frame::<_, Hello>(&mut garbage.as_slice()).is_err());
    }

    #[test]
    fn frames_are_appended_in_place_and_a_refused_one_leaves_nothing() {
        let mut buf = b"kept".to_vec();
        let (a, b) = (Hello::new(1, "adapter"), Hello::new(2, "operator"));
        encode_frame(&mut buf, &a).unwrap();
        encode_frame(&mut buf, &b).unwrap();
        let mut rest = &buf[4..];
        assert_eq!(read_frame::<_, Hello>(&mut rest).unwrap(), a);
        assert_eq!(read_frame::<_, Hello>(&mut rest).unwrap(), b);
        assert!(rest.is_empty());
        let before = buf.clone();
        let huge = "x".repeat(MAX_FRAME_BYTES);
        assert!(encode_frame(&mut buf, &huge).is_err());
        assert_eq!(buf, before, "a refused frame leaves no bytes behind");
    }
}

#[cfg(test)]
mod fuzz {
    use super::guardian::{Request, Wait};
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// A reader over `data` that records the largest buffer it was asked to fill and how
    /// many bytes it handed out.
    struct Probe<'a> {
        data: &'a [u8],
        largest_request: usize,
        consumed: usize,
    }

    impl Read for Probe<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.largest_request = self.largest_request.max(buf.len());
            let n = self.data.read(buf)?;
            self.consumed += n;
            Ok(n)
        }
    }

    fn probe(data: &[u8]) -> Probe<'_> {
        Probe {
            data,
            largest_request: 0,
            consumed: 0,
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            // Dyadic fractions print and parse exactly (no reliance on float_roundtrip).
            (-1_000_000i64..1_000_000).prop_map(|n| json!(n as f64 / 8.0)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_wait() -> impl Strategy<Value = Wait> {
        (any::<u64>(), proptest::option::of(any::<u64>())).prop_map(|(timeout_ms, settle_ms)| {
            Wait {
                timeout_ms,
                settle_ms,
            }
        })
    }

    fn arb_request() -> impl Strategy<Value = Request> {
        let id = proptest::option::of(any::<String>());
        prop_oneof![
            Just(Request::Snapshot),
            Just(Request::Reset),
            Just(Request::Shutdown),
            (any::<String>(), any::<bool>(), arb_wait()).prop_map(|(command, background, wait)| {
                Request::Run {
                    command,
                    background,
                    wait,
                    scope: None,
                    expect: None,
                }
            }),
            (id.clone(), arb_wait()).prop_map(|(bg_id, wait)| Request::Status { bg_id, wait }),
            (
                proptest::collection::vec(any::<u8>(), 0..64),
                id,
                arb_wait()
            )
                .prop_map(|(bytes, bg_id, wait)| Request::Input { bytes, bg_id, wait }),
            (any::<u64>(), arb_wait()).prop_map(|(offset, wait)| Request::Read { offset, wait }),
            (proptest::option::of(any::<usize>()), any::<bool>())
                .prop_map(|(lines, diff)| Request::Screen { lines, diff }),
        ]
    }

    /// A declared length: small, around the cap, or absurd.
    fn arb_len() -> impl Strategy<Value = u32> {
        let max = MAX_FRAME_BYTES as u32;
        prop_oneof![
            0u32..64,
            (max - 2)..=(max + 2),
            Just(u32::MAX),
            Just(u32::MAX - 1),
            any::<u32>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        /// Arbitrary bytes: an error or the JSON of exactly the declared body, never a panic.
        #[test]
        fn read_frame_is_total(
            len in arb_len(),
            body in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..96),
                arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
            ],
            raw in proptest::collection::vec(any::<u8>(), 0..16),
            use_raw in any::<bool>(),
        ) {
            let bytes = if use_raw {
                raw
            } else {
                let mut b = len.to_be_bytes().to_vec();
                b.extend_from_slice(&body);
                b
            };
            let mut r = probe(&bytes);
            let out = read_frame::<_, Value>(&mut r);
            if bytes.len() < 4 {
                prop_assert_eq!(out.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
                return Ok(());
            }
            let declared = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
            if declared > MAX_FRAME_BYTES {
                // Refused from the prefix alone: nothing past it was asked for.
                prop_assert_eq!(out.unwrap_err().kind(), io::ErrorKind::InvalidData);
                prop_assert_eq!(r.consumed, 4);
                prop_assert_eq!(r.largest_request, 4);
            } else if bytes.len() - 4 < declared {
                prop_assert_eq!(out.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
            } else {
                prop_assert_eq!(r.consumed, 4 + declared);
                let expected: Result<Value, _> = serde_json::from_slice(&bytes[4..4 + declared]);
                match (out, expected) {
                    (Ok(got), Ok(want)) => prop_assert_eq!(got, want),
                    (Err(e), Err(_)) => prop_assert_eq!(e.kind(), io::ErrorKind::InvalidData),
                    (got, want) => prop_assert!(false, "read_frame {:?} vs serde_json {:?}", got, want),
                }
            }
        }

        /// A huge prefix with a few bytes after it is an error without touching the body.
        #[test]
        fn oversize_prefix_fails_before_reading_the_body(
            len in ((MAX_FRAME_BYTES as u32) + 1)..=u32::MAX,
            tail in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut bytes = len.to_be_bytes().to_vec();
            bytes.extend_from_slice(&tail);
            let started = crate::deadline::Stopwatch::start();
            let mut r = probe(&bytes);
            let e = read_frame::<_, Value>(&mut r).unwrap_err();
            prop_assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            prop_assert!(e.to_string().contains("exceeds"));
            prop_assert_eq!(r.largest_request, 4);
            prop_assert!(started.elapsed() < std::time::Duration::from_secs(1));
        }

        /// Frames written back to back read back in order, then the stream ends cleanly.
        #[test]
        fn json_values_round_trip(values in proptest::collection::vec(arb_json(), 1..4)) {
            let mut buf = Vec::new();
            for v in &values {
                write_frame(&mut buf, v).unwrap();
            }
            let mut r = buf.as_slice();
            for v in &values {
                let back: Value = read_frame(&mut r).unwrap();
                prop_assert_eq!(&back, v);
            }
            prop_assert!(r.is_empty());
            prop_assert_eq!(
                read_frame::<_, Value>(&mut r).unwrap_err().kind(),
                io::ErrorKind::UnexpectedEof
            );
        }

        #[test]
        fn guardian_requests_round_trip(reqs in proptest::collection::vec(arb_request(), 1..4)) {
            let mut buf = Vec::new();
            for q in &reqs {
                encode_frame(&mut buf, q).unwrap();
            }
            let mut r = buf.as_slice();
            for q in &reqs {
                let back: Request = read_frame(&mut r).unwrap();
                prop_assert_eq!(&back, q);
            }
            prop_assert!(r.is_empty());
        }
    }

    #[test]
    fn the_cap_is_inclusive() {
        // Exactly the cap with a truncated body: the body is missing, not oversized.
        let mut at = (MAX_FRAME_BYTES as u32).to_be_bytes().to_vec();
        at.extend_from_slice(b"{}");
        let e = read_frame::<_, Value>(&mut at.as_slice()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let mut over = ((MAX_FRAME_BYTES + 1) as u32).to_be_bytes().to_vec();
        over.extend_from_slice(b"{}");
        let e = read_frame::<_, Value>(&mut over.as_slice()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
