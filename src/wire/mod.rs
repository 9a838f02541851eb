//! Wire types between the adapter, winxd and guardians, and their framing: a 4-byte
//! big-endian length followed by that many bytes of JSON. Nothing else lives here.

pub mod daemon;
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

/// Append one frame to `buf` (several frames can then leave in one write).
pub fn encode_frame<T: Serialize>(buf: &mut Vec<u8>, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    buf.reserve(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    Ok(())
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
}
