//! One admitted MCP POST, on its connection's thread: collect the body (capped,
//! deadline-bound), take a dispatch slot for the principal, classify the message's era,
//! check the legacy session, run `mcp::Server::handle` and answer — or answer 408 when
//! the request deadline passes first.
//!
//! The body is in memory before a slot is taken, so a slow client holds only its own
//! connection — and its body's memory, granted from the body budget before a byte of it
//! is read (a 503 `Retry-After` when the budget or the principal's share of it is taken),
//! and held with the slot until the handler returns. A method answered from memory (`routes::inline`: `ping`, the handshake,
//! the lists) runs right here, holding its slot: it cannot wait, so there is no deadline
//! to keep. Everything else runs on an `mcp-worker` so this thread can keep the deadline:
//! a handler that outlives it keeps its slot until it returns, so timed-out work still
//! counts against the cap.

use super::Shared;
use super::conn::{BodyError, Conn};
use super::limits::{BodyGrant, Permit, Refusal, Slot};
use super::routes::{self, Era, Framing, McpHeaders, Reply};
use super::wire::{BodyFraming, Head};
use crate::config::http::Principal;
use crate::deadline::Deadline;
use crate::jsonrpc::{
    ErrorCode, Incoming, Request as RpcRequest, Response, RpcError, parse_message,
};
use crate::mcp::CallContext;
use crossbeam_channel::{bounded, select};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// A request that passed admission.
pub struct Admitted {
    pub principal: Arc<Principal>,
    pub framing: Framing,
    /// Held until the answer is written: a draining server waits for it.
    pub answering: Permit,
    pub deadline: Deadline,
    /// The usage log's id of this request, shared with its `tool_call`.
    pub request_id: Option<String>,
}

/// What serving an admitted request came to, for the usage log.
#[derive(Default)]
pub struct Served {
    /// Whether the connection stays open.
    pub open: bool,
    /// The status answered (`None`: the client left before an answer).
    pub status: Option<u16>,
    /// Why the request was refused before reaching the server, if it was.
    pub rejected: Option<&'static str>,
    pub rpc_method: Option<&'static str>,
    /// Salted hash of the MCP session or conversation the request named.
    pub mcp_session: Option<String>,
}

/// Serve the admitted request on `conn`.
pub fn run(
    shared: &Arc<Shared>,
    conn: &mut Conn,
    head: &Head,
    body: BodyFraming,
    a: Admitted,
) -> Served {
    let Admitted {
        principal,
        framing,
        answering,
        deadline,
        request_id,
    } = a;
    // A declared length is granted before anything else, `100 Continue` included: a body
    // refused here is never read.
    let mut grant = shared.bodies.grant(&principal.name);
    if let BodyFraming::Length(n) = body
        && let Err(why) = grant.grow_to(usize::try_from(n).unwrap_or(usize::MAX))
    {
        let reply = routes::retry_later(503, over_budget(why));
        let keep = head.keep_alive() && conn.discard_small_body(body, head.expects_continue());
        return Served {
            open: conn.answer(&reply, false, keep),
            status: Some(reply.status),
            rejected: Some("body_budget"),
            ..Default::default()
        };
    }
    if body != BodyFraming::None && head.expects_continue() && !conn.write_raw(CONTINUE) {
        return Served::default();
    }
    let mut reserve = |n: usize| grant.grow_to(n).map_err(over_budget);
    let read = conn.read_body(body, shared.cfg.max_body_bytes, deadline, &mut reserve);
    let body = match read {
        Ok(b) => b,
        Err(e) => {
            // The rest of the body may still be on the wire: answer and close.
            let reply = e.reply();
            conn.finish(&reply, false);
            return Served {
                open: false,
                status: Some(reply.status),
                rejected: Some(match e {
                    BodyError::TooLarge => "too_large",
                    BodyError::OverBudget(_) => "body_budget",
                    BodyError::Timeout(_) => "timeout",
                    BodyError::Malformed(_) => "bad_request",
                }),
                ..Default::default()
            };
        }
    };
    let keep = head.keep_alive();
    let slot = match shared.slots.try_acquire(&principal.name) {
        Ok(slot) => Arc::new(Hold {
            _slot: slot,
            _body: grant,
        }),
        Err(why) => {
            let text = match why {
                Refusal::Full => "too many concurrent requests",
                Refusal::ShareUsed => "too many concurrent requests for this principal",
            };
            let reply = routes::retry_later(503, text);
            return Served {
                open: conn.answer(&reply, false, keep),
                status: Some(reply.status),
                rejected: Some("concurrency"),
                ..Default::default()
            };
        }
    };
    let headers = McpHeaders::read(head);
    let mcp_session = headers
        .session
        .as_deref()
        .or(headers.conversation.as_deref())
        .and_then(|s| shared.usage.hash("session", s));
    let call = Call {
        shared,
        principal: &principal,
        slot: &slot,
        headers: &headers,
        framing,
        deadline,
        request_id,
        mcp_session: mcp_session.clone(),
        rpc_method: Cell::new(None),
        rejected: Cell::new(None),
    };
    let reply = call.answer(&body);
    let (rejected, rpc_method) = (call.rejected.get(), call.rpc_method.get());
    drop(call);
    drop(body);
    // Give the slot (and the body's grant) back before writing: a client that sends its
    // next request as soon as it reads this answer must not find its own finished request
    // still holding them. A handler still running past the deadline keeps its own clone.
    drop(slot);
    // Past the deadline the work goes on: the 408 closes the connection, so the client
    // cannot take this connection's next answer for the one it gave up on.
    let keep = keep && reply.status != TIMED_OUT;
    let open = conn.answer(&reply, false, keep);
    drop(answering);
    Served {
        open,
        status: Some(reply.status),
        rejected,
        rpc_method,
        mcp_session,
    }
}

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What a running request holds, given back when its last holder lets go (this thread, or
/// a handler that outlives the deadline): its dispatch slot and its body's memory.
struct Hold {
    _slot: Slot,
    _body: BodyGrant,
}

/// The 503's text when a body's memory is refused.
fn over_budget(why: Refusal) -> &'static str {
    match why {
        Refusal::Full => "request bodies in memory are at the server's limit; retry shortly",
        Refusal::ShareUsed => {
            "this principal's request bodies in memory are at its share; retry shortly"
        }
    }
}
/// The status of an answer given at the request deadline while the handler runs on.
const TIMED_OUT: u16 = 408;

struct Call<'a> {
    shared: &'a Arc<Shared>,
    principal: &'a Arc<Principal>,
    slot: &'a Arc<Hold>,
    headers: &'a McpHeaders,
    framing: Framing,
    deadline: Deadline,
    request_id: Option<String>,
    mcp_session: Option<String>,
    /// Learned while answering, for the usage log.
    rpc_method: Cell<Option<&'static str>>,
    rejected: Cell<Option<&'static str>>,
}

impl Call<'_> {
    fn answer(&self, body: &[u8]) -> Reply {
        match parse_message(body) {
            Incoming::Invalid(resp) => routes::rpc(&resp, self.framing),
            // A client's answer to a server request: we send none, so nothing to route.
            Incoming::Response(_) => routes::accepted(),
            Incoming::Notification(n) => {
                self.rpc_method
                    .set(Some(crate::usage::event::rpc_method(&n.method)));
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
        self.rpc_method
            .set(Some(crate::usage::event::rpc_method(&req.method)));
        let era = match routes::classify(self.headers, &req.method, &req.params) {
            Ok(era) => era,
            Err(e) => return routes::rpc(&Response::err(Some(req.id), e), self.framing),
        };
        if era == Era::Legacy
            && let Err(reply) = self.session()
        {
            return reply;
        }
        // Remembered with or without a usage log: the client also sets wait defaults.
        let client =
            (era == Era::Initialize).then(|| crate::mcp::origin::from_initialize(&req.params));
        let resp = match self.handle(req) {
            Ok(r) => r,
            Err(reply) => return reply,
        };
        let reply = routes::rpc(&resp, self.framing);
        if era != Era::Initialize || resp.outcome.is_err() {
            return reply;
        }
        match self.shared.sessions.create(&self.principal.name) {
            Ok(id) => {
                if let Some(c) = client {
                    self.shared.sessions.remember(&id, c);
                }
                routes::with_session(reply, &id)
            }
            Err(e) => routes::plain(500, &format!("cannot create a session id: {e}")),
        }
    }

    /// The legacy session named by `Mcp-Session-Id`: missing is 400, unknown (or another
    /// principal's) is 404.
    fn session(&self) -> Result<(), Reply> {
        match &self.headers.session {
            None => {
                self.rejected.set(Some("missing_session"));
                Err(routes::plain(
                    400,
                    "missing Mcp-Session-Id header: send initialize first, or use the \
                     stateless 2026-07-28 protocol",
                ))
            }
            Some(id) if self.shared.sessions.touch(id, &self.principal.name) => Ok(()),
            Some(_) => {
                // Unknown, ended, or another principal's: all look the same from outside.
                self.rejected.set(Some("foreign_session"));
                Err(routes::plain(
                    404,
                    "unknown or ended session; initialize again",
                ))
            }
        }
    }

    /// Answer the request: on this thread when `routes::inline` says it is answered from
    /// memory, else on an `mcp-worker`. `Err` is the reply to send instead (503, 408).
    fn handle(&self, req: RpcRequest) -> Result<Response, Reply> {
        let affinity = self.shared.affinity();
        // Identity preference (seed 003): the MCP session, then the gateway header.
        let conversation = (self.headers.session.as_ref()).or(self.headers.conversation.as_ref());
        if routes::inline(&req.method) {
            // No hand-off, no timer: the dispatch slot (taken by the caller) still counts
            // it, and nothing it does can wait.
            let ctx = CallContext {
                principal: &self.principal.key,
                policy: &self.principal.policy,
                affinity,
                conversation: conversation.map(String::as_str),
                origin: Default::default(),
            };
            return Ok(guarded(&self.shared.server, &ctx, req));
        }
        let (tx, rx) = bounded(1);
        let server = self.shared.server.clone();
        let principal = self.principal.clone();
        let slot = self.slot.clone();
        let conversation = conversation.cloned();
        let origin = match req.method == "tools/call" {
            true => {
                let remembered = self
                    .headers
                    .session
                    .as_deref()
                    .and_then(|s| self.shared.sessions.client(s, &principal.name));
                crate::mcp::origin::origin(
                    "http",
                    self.request_id.clone(),
                    self.mcp_session.clone(),
                    remembered.as_ref(),
                    &req.params,
                )
            }
            false => Default::default(),
        };
        let job = Box::new(move || {
            let ctx = CallContext {
                principal: &principal.key,
                policy: &principal.policy,
                affinity,
                conversation: conversation.as_deref(),
                origin,
            };
            let resp = guarded(&server, &ctx, req);
            // The work is done: release the slot before the answer can reach the client.
            drop(slot);
            let _ = tx.send(resp);
        });
        if self.shared.handlers.try_submit(job).is_err() {
            self.rejected.set(Some("concurrency"));
            return Err(routes::retry_later(503, "no worker available"));
        }
        let timeout = self.deadline.receiver();
        select! {
            recv(rx) -> resp => resp.map_err(|_| routes::plain(500, "the handler ended without an answer")),
            recv(timeout) -> _ => Err(routes::plain(
                TIMED_OUT,
                &format!("{} expired; the work continues and stays observable", self.deadline.name()),
            )),
        }
    }
}

/// `Server::handle`, with a panic answered `-32603` instead of ending the thread.
fn guarded(server: &crate::mcp::Server, ctx: &CallContext, req: RpcRequest) -> Response {
    let id = req.id.clone();
    catch_unwind(AssertUnwindSafe(|| server.handle(ctx, req))).unwrap_or_else(|_| {
        Response::err(
            Some(id),
            RpcError::new(
                ErrorCode::InternalError,
                "internal error: the handler panicked",
            ),
        )
    })
}
