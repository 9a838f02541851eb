//! Durable return-final agent requests (issue 15, seed 001): admission of a prompt to a
//! Codex agent running in a winx session, its receipt, and the observer process that
//! turns the bound provider turn's outcome into one terminal event.
//!
//! Processes: the admitting process (the CLI's `agent admit|send`) registers the request
//! in the state store, asks the target's guardian for the checked one-write admission,
//! and — for a return-final request — starts a detached request observer
//! (`winx-code-agent agent observe`) that owns the request until it is terminal. A
//! managed app-server target (`app_server/`) is admitted through its host process
//! instead, which also follows the request (no observer).
//!
//! Invariants: the prompt is written at most once per (principal, request id): a known id
//! returns its stored receipt and never writes; a definitive rejection has
//! `prompt_written: false` and keeps nothing; anything that may have written is stored
//! before the admitting process answers. A request whose responsible process died while
//! it was open becomes `indeterminate` — never retried, never completed by a later turn.

pub mod admit;
pub mod app_server;
pub mod follow;
pub mod managed;
pub mod observer;
pub mod receipt;
pub mod reconcile;
pub mod view;

/// Largest prompt accepted.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Longest asynchronous request deadline (`--final-timeout-ms`): seven days.
pub const MAX_FINAL_TIMEOUT_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// Version of the capabilities document and of receipts.
pub const CAPABILITIES_VERSION: u32 = 1;

/// What this build supports (`agent capabilities`).
pub fn capabilities() -> serde_json::Value {
    serde_json::json!({
        "capabilities_version": CAPABILITIES_VERSION,
        "providers": ["codex"],
        "target_kinds": ["pty", "app_server"],
        "return_modes": ["none", "final"],
        "correlation_sources": ["codex_rollout", "app_server_events"],
        "paste_modes": ["bracketed", "typed"],
        "receipt_classes": receipt::Class::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "terminal_states": ["completed", "aborted", "timed_out", "cancelled",
                            "delivery_failed", "indeterminate"],
        "max_text_bytes": MAX_TEXT_BYTES,
        "max_final_timeout_ms": MAX_FINAL_TIMEOUT_MS,
    })
}

/// A request's owner as stored: the responsible process's `pid:start_time` (a pid alone
/// may be reused). `reconcile` reads it back.
pub fn owner_key((pid, start): (u32, u64)) -> String {
    format!("{pid}:{start}")
}

/// This process as a request's owner.
pub fn this_owner() -> String {
    owner_key(crate::process::this_process())
}

/// A request id is a UUID in its canonical textual form (any version).
pub fn valid_request_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// A fresh random (version 4) request id.
pub fn new_request_id() -> String {
    let mut b = [0u8; 16];
    let _ = getrandom::fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::hex::lower(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_canonical_uuids() {
        assert!(valid_request_id("fe57dc90-994e-4e73-b09c-fac483d9f05b"));
        for bad in [
            "",
            "x",
            "fe57dc90994e4e73b09cfac483d9f05b",
            "fe57dc90-994e-4e73-b09c-fac483d9f05g",
        ] {
            assert!(!valid_request_id(bad), "{bad}");
        }
        let a = new_request_id();
        assert!(valid_request_id(&a));
        assert_ne!(a, new_request_id());
    }
}
