//! JSON-RPC 2.0, written by hand: message types, pure framing over bytes (with a bound on
//! what a message may cost once parsed), a bounded line reader.
//!
//! Invariant: only this module and `adapter/` know the JSON-RPC envelope; MCP handlers
//! receive a parsed `Request` and return a `Response` value.

pub mod cost;
pub mod framing;
pub mod line_reader;
pub mod message;

pub use framing::{Incoming, parse_message};
pub use message::{ErrorCode, Id, Notification, Request, Response, RpcError};

/// The largest message accepted on any transport (a line on stdio, a body over HTTP).
/// 64 MiB matches the HTTP body cap of seed 003, so one limit governs both transports.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
