//! A connection to one guardian: hello, one request, one (possibly deferred) response.

use crate::wire::guardian::{Facts, PROTOCOL, Request, Response, Wait};
use crate::wire::{Hello, encode_frame, read_frame};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Slack added to a request's own wait before the client gives up on the guardian. The
/// guardian enforces the wait itself; this only bounds a guardian that stopped answering.
const ANSWER_SLACK: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens on the socket (guardian gone) or it hung up mid-request.
    Gone(String),
    /// The guardian (of build `build`) speaks protocol `theirs`, not ours.
    Protocol { build: String, theirs: u32 },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Gone(d) => write!(f, "session guardian unavailable: {d}"),
            ClientError::Protocol { build, theirs } => write!(
                f,
                "guardian protocol mismatch: guardian {build} speaks {theirs}, we speak {PROTOCOL}"
            ),
        }
    }
}

impl From<ClientError> for crate::wire::error::RuntimeError {
    fn from(e: ClientError) -> Self {
        use crate::wire::error::RuntimeError;
        match e {
            ClientError::Gone(detail) => RuntimeError::GuardianGone { detail },
            ClientError::Protocol { build, theirs } => RuntimeError::ProtocolMismatch {
                peer: format!("guardian {build}"),
                ours: PROTOCOL,
                theirs,
            },
        }
    }
}

/// A failed `try_call`: `sent` is false only when the request provably never left.
#[derive(Debug)]
pub struct SendError {
    pub error: ClientError,
    pub sent: bool,
}

/// Why a guardian gave no facts.
#[derive(Debug)]
pub enum FactsError {
    /// It answered something else: a guardian of a build without execution facts.
    Unsupported(String),
    Client(ClientError),
}

impl std::fmt::Display for FactsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FactsError::Unsupported(answer) => write!(
                f,
                "the session's guardian cannot report executions (an older build?): {answer}"
            ),
            FactsError::Client(e) => e.fmt(f),
        }
    }
}

#[derive(Clone, Debug)]
pub struct GuardianClient {
    pub socket: PathBuf,
}

impl GuardianClient {
    pub fn new(socket: &Path) -> GuardianClient {
        GuardianClient {
            socket: socket.to_path_buf(),
        }
    }

    /// Send `Shutdown` and wait (up to `linger`) until the guardian has really ended: its
    /// side of the connection closes only when its event loop is gone.
    pub fn shutdown_and_wait(&self, linger: Duration) -> Result<Response, ClientError> {
        let (resp, mut s) = self.exchange(&Request::Shutdown, Duration::ZERO)?;
        let _ = s.set_read_timeout(Some(linger));
        let mut sink = [0u8; 64];
        loop {
            // A socket read with a timeout is not restarted after a signal (SIGCHLD when
            // the guardian's shell dies): EINTR is not the end of the guardian.
            match std::io::Read::read(&mut s, &mut sink) {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        Ok(resp)
    }

    /// The guardian's facts with its foreground screen (`Request::Watch`), answered once
    /// its activity counter passes `after` or `wait` ends; executions numbered up to
    /// `known` come without their admission.
    pub fn facts(&self, after: u64, wait: Duration, known: u64) -> Result<Facts, FactsError> {
        let req = Request::Watch {
            after,
            wait: Wait {
                timeout_ms: wait.as_millis() as u64,
                settle_ms: None,
            },
            screen: true,
            known,
        };
        match self.call(&req, wait) {
            Ok(Response::Facts(f)) => Ok(f),
            Ok(other) => Err(FactsError::Unsupported(format!("{other:?}"))),
            Err(e) => Err(FactsError::Client(e)),
        }
    }

    /// Like `call`, but says whether the request may have reached the guardian: a failure
    /// before the request was written (nothing listens, another protocol) did not send it.
    pub fn try_call(&self, req: &Request, wait: Duration) -> Result<Response, SendError> {
        let gone = |e: std::io::Error| ClientError::Gone(e.to_string());
        let unsent = |error| SendError { error, sent: false };
        let mut s = UnixStream::connect(&self.socket).map_err(|e| unsent(gone(e)))?;
        s.set_write_timeout(Some(ANSWER_SLACK))
            .map_err(|e| unsent(gone(e)))?;
        s.set_read_timeout(Some(ANSWER_SLACK))
            .map_err(|e| unsent(gone(e)))?;
        // Hello first, alone, so a guardian of another protocol never sees the request.
        let mut out = Vec::new();
        encode_frame(&mut out, &Hello::new(PROTOCOL, "adapter")).map_err(|e| unsent(gone(e)))?;
        s.write_all(&out).map_err(|e| unsent(gone(e)))?;
        let hello: Hello = read_frame(&mut s).map_err(|e| unsent(gone(e)))?;
        if hello.protocol != PROTOCOL {
            return Err(unsent(ClientError::Protocol {
                build: hello.build,
                theirs: hello.protocol,
            }));
        }
        let sent = |error| SendError { error, sent: true };
        out.clear();
        encode_frame(&mut out, req).map_err(|e| unsent(gone(e)))?;
        s.write_all(&out).map_err(|e| sent(gone(e)))?;
        s.set_read_timeout(Some(wait + ANSWER_SLACK))
            .map_err(|e| sent(gone(e)))?;
        read_frame(&mut s).map_err(|e| sent(gone(e)))
    }

    /// Send `req`, waiting up to `wait` plus slack for the answer.
    pub fn call(&self, req: &Request, wait: Duration) -> Result<Response, ClientError> {
        self.exchange(req, wait).map(|(r, _)| r)
    }

    fn exchange(
        &self,
        req: &Request,
        wait: Duration,
    ) -> Result<(Response, UnixStream), ClientError> {
        let gone = |e: std::io::Error| ClientError::Gone(e.to_string());
        let mut s = UnixStream::connect(&self.socket).map_err(gone)?;
        s.set_write_timeout(Some(ANSWER_SLACK)).map_err(gone)?;
        s.set_read_timeout(Some(ANSWER_SLACK)).map_err(gone)?;
        // The request follows the hello without waiting for the guardian's: one round trip
        // per call. A guardian speaking another protocol answers its hello and closes,
        // discarding the request unread.
        let mut out = Vec::new();
        encode_frame(&mut out, &Hello::new(PROTOCOL, "adapter")).map_err(gone)?;
        encode_frame(&mut out, req).map_err(gone)?;
        s.write_all(&out).map_err(gone)?;
        let hello: Hello = read_frame(&mut s).map_err(gone)?;
        if hello.protocol != PROTOCOL {
            return Err(ClientError::Protocol {
                build: hello.build,
                theirs: hello.protocol,
            });
        }
        s.set_read_timeout(Some(wait + ANSWER_SLACK))
            .map_err(gone)?;
        let resp = read_frame(&mut s).map_err(gone)?;
        Ok((resp, s))
    }
}
