//! Readiness pipes: a started process (winxd, a guardian) writes one typed `Verdict` as a
//! JSON line and closes the pipe; the starter waits for it with a deadline. A pipe that
//! closes without a verdict means the process exited before reporting.

use crate::deadline::Deadline;
use crossbeam_channel::{bounded, select};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;

/// What a started process reports once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// It serves.
    Ready,
    /// Another instance already serves (winxd's lock was taken); this one exits.
    AlreadyRunning,
    /// It could not start, and why.
    Failed { reason: String },
}

/// Why no usable verdict arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadyError {
    /// The named deadline passed first.
    Timeout { deadline: &'static str },
    /// The pipe closed without a verdict (the process exited first).
    Exited,
    /// Bytes that are no verdict (another build's starter protocol).
    Garbled { text: String },
    /// The waiting thread could not be started.
    Spawn { detail: String },
}

impl std::fmt::Display for ReadyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadyError::Timeout { deadline } => write!(f, "{deadline} timed out"),
            ReadyError::Exited => f.write_str("the process exited before reporting ready"),
            ReadyError::Garbled { text } => write!(f, "unreadable readiness verdict {text:?}"),
            ReadyError::Spawn { detail } => write!(f, "cannot wait for readiness: {detail}"),
        }
    }
}

impl ReadyError {
    /// The runtime failure of starting `step` (`winxd start`, `guardian start`): a passed
    /// deadline stays a timeout, anything else is a failed start.
    pub fn starting(self, step: &str) -> crate::wire::error::RuntimeError {
        use crate::wire::error::RuntimeError;
        match self {
            ReadyError::Timeout { deadline } => RuntimeError::Timeout {
                deadline: deadline.to_string(),
            },
            other => RuntimeError::start_failed(step, other.to_string()),
        }
    }
}

/// Write `verdict` on the readiness pipe `out` (errors are ignored: a starter that went
/// away needs no answer).
pub fn report(mut out: impl Write, verdict: &Verdict) {
    let mut line = serde_json::to_vec(verdict).unwrap_or_default();
    line.push(b'\n');
    let _ = out.write_all(&line);
}

/// The verdict written on `fd`, or why none came before `deadline`.
pub fn wait_verdict(fd: OwnedFd, deadline: Deadline) -> Result<Verdict, ReadyError> {
    let (tx, rx) = bounded(1);
    std::thread::Builder::new()
        .name("ready-pipe".into())
        .spawn(move || {
            let mut s = String::new();
            let _ = std::fs::File::from(fd).read_to_string(&mut s);
            let _ = tx.send(s);
        })
        .map_err(|e| ReadyError::Spawn {
            detail: e.to_string(),
        })?;
    let text = select! {
        recv(rx) -> msg => msg.unwrap_or_default(),
        recv(deadline.receiver()) -> _ => {
            return Err(ReadyError::Timeout { deadline: deadline.name() });
        }
    };
    parse(&text)
}

fn parse(text: &str) -> Result<Verdict, ReadyError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ReadyError::Exited);
    }
    serde_json::from_str(text).map_err(|_| ReadyError::Garbled {
        text: text.chars().take(200).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip_and_bad_ones_are_named() {
        for v in [
            Verdict::Ready,
            Verdict::AlreadyRunning,
            Verdict::Failed {
                reason: "bind: address in use".into(),
            },
        ] {
            let mut buf = Vec::new();
            report(&mut buf, &v);
            assert_eq!(parse(&String::from_utf8(buf).unwrap()), Ok(v));
        }
        assert_eq!(parse(""), Err(ReadyError::Exited));
        assert!(matches!(parse("ok"), Err(ReadyError::Garbled { .. })));
    }
}
