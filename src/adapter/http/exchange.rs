//! One admitted MCP POST, on an `http-io` worker: collect the body (capped, deadline-bound),
//! classify the message's era, check the legacy session, run `mcp::Server::handle` on an
//! `mcp-worker` and answer — or answer 408 when the request deadline passes first.
//!
//! The handler runs on another pool so this thread can keep the deadline: a handler that
//! outlives it keeps its concurrency slot until it returns, so timed-out work still counts
//! against the cap.

use super::Shared;
use super::limits::{self, BodyError, Permit};
use super::routes::{self, Era, Framing, McpHeaders, Reply};
use crate::config::http::Principal;
use crate::deadline::Deadline;
use crate::jsonrpc::{
    ErrorCode, Incoming, Request as RpcRequest, Response, RpcError, parse_message,
};
use crate::mcp::CallContext;
use crossbeam_channel::{bounded, select};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// A request that passed admission.
pub struct Admitted {
    pub rq: tiny_http::Request,
    pub principal: Arc<Principal>,
    pub framing: Framing,
    pub permit: Permit,
    /// Held until the answer is written: a draining server waits for it.
    pub answering: Permit,
    pub deadline: Deadline,
}

pub fn run(shared: &Arc<Shared>, a: Admitted) {
    let Admitted {
        mut rq,
        principal,
        framing,
        permit,
        answering,
        deadline,
    } = a;
    let permit = Arc::new(permit);
    let body = match limits::read_body(rq.as_reader(), shared.cfg.max_body_bytes, deadline) {
        Ok(b) => b,
        Err(e) => {
            let reply = match e {
                BodyError::TooLarge => routes::plain(413, "request body exceeds 64 MiB"),
                BodyError::Timeout(which) => routes::plain(408, &format!("{which} expired")),
                BodyError::Io(e) => routes::plain(400, &format!("unreadable request body: {e}")),
            };
            // The rest of the body may still be on the wire: the replier drains it.
            return shared.replier.send(rq, reply);
        }
    };
    let headers = McpHeaders::read(&rq);
    let reply = Call {
        shared,
        principal: &principal,
        permit: &permit,
        headers: &headers,
        framing,
        deadline,
    }
    .answer(&body);
    // Give the concurrency slot back before writing: a client that sends its next request
    // as soon as it reads this answer must not find its own finished request still holding
    // the slot. A handler still running past the deadline keeps its own clone.
    drop(permit);
    super::reply::write(rq, reply);
    drop(answering);
}

struct Call<'a> {
    shared: &'a Arc<Shared>,
    principal: &'a Arc<Principal>,
    permit: &'a Arc<Permit>,
    headers: &'a McpHeaders,
    framing: Framing,
    deadline: Deadline,
}

impl Call<'_> {
    fn answer(&self, body: &[u8]) -> Reply {
        match parse_message(body) {
            Incoming::Invalid(resp) => routes::rpc(&resp, self.framing),
            // A client's answer to a server request: we send none, so nothing to route.
            Incoming::Response(_) => routes::accepted(),
            Incoming::Notification(n) => {
                match routes::classify(self.headers, &n.method, &n.params) {
                    Err(e) => return routes::rpc(&Response::err(None, e), self.framing),
                    Ok(Era::Legacy) => {
                        if let Err(reply) = self.session() {
                            return reply;
                        }
                    }
                    Ok(_) => {}
                }
                self.shared.server.on_notification(&n);
                routes::accepted()
            }
            Incoming::Request(req) => self.request(req),
        }
    }

    fn request(&self, req: RpcRequest) -> Reply {
        let era = match routes::classify(self.headers, &req.method, &req.params) {
            Ok(era) => era,
            Err(e) => return routes::rpc(&Response::err(Some(req.id), e), self.framing),
        };
        if era == Era::Legacy
            && let Err(reply) = self.session()
        {
            return reply;
        }
        let resp = match self.handle(req) {
            Ok(r) => r,
            Err(reply) => return reply,
        };
        let reply = routes::rpc(&resp, self.framing);
        if era != Era::Initialize || resp.outcome.is_err() {
            return reply;
        }
        match self.shared.sessions.create(&self.principal.name) {
            Ok(id) => routes::with_session(reply, &id),
            Err(e) => routes::plain(500, &format!("cannot create a session id: {e}")),
        }
    }

    /// The legacy session named by `Mcp-Session-Id`: missing is 400, unknown (or another
    /// principal's) is 404.
    fn session(&self) -> Result<(), Reply> {
        match &self.headers.session {
            None => Err(routes::plain(
                400,
                "missing Mcp-Session-Id header: send initialize first, or use the stateless \
                 2026-07-28 protocol",
            )),
            Some(id) if self.shared.sessions.touch(id, &self.principal.name) => Ok(()),
            Some(_) => Err(routes::plain(
                404,
                "unknown or ended session; initialize again",
            )),
        }
    }

    /// Run the request on an `mcp-worker`; `Err` is the reply to send instead (503, 408).
    fn handle(&self, req: RpcRequest) -> Result<Response, Reply> {
        let (tx, rx) = bounded(1);
        let server = self.shared.server.clone();
        let principal = self.principal.clone();
        let permit = self.permit.clone();
        let affinity = self.shared.affinity();
        // Identity preference (seed 003): the MCP session, then the gateway header.
        let conversation = self
            .headers
            .session
            .clone()
            .or_else(|| self.headers.conversation.clone());
        let job = Box::new(move || {
            let id = req.id.clone();
            let ctx = CallContext {
                principal: &principal.name,
                policy: &principal.policy,
                affinity,
                conversation: conversation.as_deref(),
            };
            let resp =
                catch_unwind(AssertUnwindSafe(|| server.handle(&ctx, req))).unwrap_or_else(|_| {
                    Response::err(
                        Some(id),
                        RpcError::new(
                            ErrorCode::InternalError,
                            "internal error: the handler panicked",
                        ),
                    )
                });
            // The work is done: release the slot before the answer can reach the client.
            drop(permit);
            let _ = tx.send(resp);
        });
        if self.shared.handlers.try_submit(job).is_err() {
            return Err(routes::retry_later(503, "no worker available"));
        }
        let timeout = self.deadline.receiver();
        select! {
            recv(rx) -> resp => resp.map_err(|_| routes::plain(500, "the handler ended without an answer")),
            recv(timeout) -> _ => Err(routes::plain(
                408,
                &format!("{} expired; the work continues and stays observable", self.deadline.name()),
            )),
        }
    }
}
