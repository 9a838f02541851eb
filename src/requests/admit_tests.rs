//! Admission receipts that need a misbehaving peer: a guardian that does not know
//! `CodexAdmit` (an older build) → `unsupported`; a state store another process holds
//! locked → `internal_failure`. Both write nothing and keep nothing.

use super::*;
use crate::wire::guardian::{GuardianError, PROTOCOL};
use crate::wire::{Hello, read_frame, write_frame};
use std::os::unix::net::UnixListener;

pub(crate) const ID: &str = "fe57dc90-994e-4e73-b09c-fac483d9f05b";

/// A return-final admission of `ID` by principal `p` (shared with `reconcile`'s tests).
pub(crate) fn admission() -> Admission {
    Admission {
        principal: "p".into(),
        request_id: ID.into(),
        agent_id: "codex-0000000000000000".into(),
        incarnation: "inc".into(),
        text: "do it".into(),
        paste: PasteMode::Bracketed,
        return_final: true,
        final_timeout_ms: 0,
        steer: false,
    }
}

fn located(socket: &Path) -> Located {
    Located {
        target: CodexTarget {
            agent_id: "codex-0000000000000000".into(),
            incarnation: "inc".into(),
            ..Default::default()
        },
        socket: socket.to_path_buf(),
        thread_id: "t".into(),
        via: Via::Guardian,
    }
}

/// A guardian of an older build: it speaks the protocol but answers any request it does
/// not know with an error. Returns how many requests it was sent.
fn old_guardian(listener: UnixListener) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _: Hello = read_frame(&mut s).unwrap();
        write_frame(&mut s, &Hello::new(PROTOCOL, "guardian")).unwrap();
        let got: Result<serde_json::Value, _> = read_frame(&mut s);
        let answer = Response::Error(GuardianError::Io {
            detail: "unknown request".into(),
        });
        write_frame(&mut s, &answer).unwrap();
        usize::from(got.is_ok())
    })
}

#[test]
fn a_guardian_without_codex_admit_is_unsupported_and_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let socket = dir.path().join("g.sock");
    let guardian = old_guardian(UnixListener::bind(&socket).unwrap());
    let r = admit(
        &store,
        &admission(),
        Some(&located(&socket)),
        Path::new("/nonexistent"),
    );
    assert_eq!(r.receipt_class, Class::Unsupported, "{r:?}");
    assert_eq!(r.prompt_written, Some(false));
    assert_eq!(guardian.join().unwrap(), 1);
    // The definitive refusal released the id.
    assert!(store.request_get("p", ID).unwrap().is_none());
}

#[test]
fn a_locked_state_store_is_an_internal_failure_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let lock = rusqlite::Connection::open(store.path()).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // No guardian listens: had admission gone on, the receipt would say unavailable.
    let socket = dir.path().join("none.sock");
    let r = admit(
        &store,
        &admission(),
        Some(&located(&socket)),
        Path::new("/nonexistent"),
    );
    assert_eq!(r.receipt_class, Class::InternalFailure, "{r:?}");
    assert_eq!(r.prompt_written, Some(false));
    lock.execute_batch("ROLLBACK").unwrap();
    assert!(store.request_get("p", ID).unwrap().is_none());
}
