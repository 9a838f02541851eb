//! Who is calling (`CallContext`, and `OwnedCall` for work that outlives its request) and
//! what every call shares (`Shared`): the types the request path and the task runners both
//! use, below `server`, `tasks` and `task_runner` so none of those imports another's.

use crate::runtime::Runtime;
use crate::session::SessionService;
use crate::tools::ToolContext;
use crate::tools::policy::ToolPolicy;

/// Who is calling and what they may use; built by the transport per request.
pub struct CallContext<'a> {
    pub principal: &'a str,
    pub policy: &'a ToolPolicy,
    pub affinity: crate::session::Affinity,
    /// The transport's conversation identity (`Mcp-Session-Id`, `X-Winx-Conversation-Id`).
    pub conversation: Option<&'a str>,
    /// Where the request came from, as the usage log may record it.
    pub origin: crate::usage::Origin,
}

/// What tool calls use, shared with task runner threads.
pub(super) struct Shared {
    pub(super) sessions: SessionService,
    /// The session-state registry (`tools::state`): one per process, bounded.
    pub(super) states: crate::tools::state::SessionStates,
    pub(super) allow_paths: crate::files::policy::AllowPaths,
    pub(super) read_parallelism: usize,
    /// How often a task runner rechecks the store for another process's cancel.
    pub(super) task_cancel_check: std::time::Duration,
    pub(super) runtime: Runtime,
    pub(super) redact: bool,
    pub(super) extra_instructions: Option<String>,
    pub(super) history: crate::history::History,
    pub(super) herdr: crate::tools::agent::herdr::Setting,
}

/// An owned `CallContext`, for work that outlives its request (a task runner).
#[derive(Clone)]
pub(super) struct OwnedCall {
    pub principal: String,
    pub policy: ToolPolicy,
    pub affinity: crate::session::Affinity,
    pub conversation: Option<String>,
    pub origin: crate::usage::Origin,
}

impl OwnedCall {
    pub fn of(ctx: &CallContext) -> OwnedCall {
        OwnedCall {
            principal: ctx.principal.to_string(),
            policy: ctx.policy.clone(),
            affinity: ctx.affinity,
            conversation: ctx.conversation.map(str::to_string),
            origin: ctx.origin.clone(),
        }
    }

    pub fn borrow(&self) -> CallContext<'_> {
        CallContext {
            principal: &self.principal,
            policy: &self.policy,
            affinity: self.affinity,
            conversation: self.conversation.as_deref(),
            origin: self.origin.clone(),
        }
    }
}

impl Shared {
    pub fn sessions(&self) -> &SessionService {
        &self.sessions
    }

    pub fn tool_ctx<'a>(
        &'a self,
        ctx: &CallContext<'a>,
        trace: &'a crate::usage::CallTrace,
    ) -> ToolContext<'a> {
        ToolContext {
            sessions: &self.sessions,
            runtime: &self.runtime,
            principal: ctx.principal,
            affinity: ctx.affinity,
            conversation: ctx.conversation,
            redact: self.redact,
            states: &self.states,
            allow_paths: &self.allow_paths,
            read_parallelism: self.read_parallelism,
            policy: ctx.policy,
            extra_instructions: self.extra_instructions.as_deref(),
            history: &self.history,
            trace,
            herdr: &self.herdr,
            wait_profile: super::origin::wait_profile(&ctx.origin),
            compact_bash: ctx.origin.compact_bash,
        }
    }
}
