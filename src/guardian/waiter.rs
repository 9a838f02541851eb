//! The event loop's deferred answers (`Waiter`s): a request that waits for output, a
//! command's end, new facts, a prompt's status change or a reset, bounded by a deadline.

use crate::deadline::Deadline;
use std::time::Duration;

/// What a deferred answer waits for.
pub enum WaitKind {
    Action {
        bg: Option<String>,
    },
    Read {
        offset: u64,
    },
    Watch {
        after: u64,
        screen: bool,
        known: u64,
    },
    Prompt {
        key: String,
        seen: Option<crate::wire::guardian::PromptStatus>,
    },
    Reset,
}

/// A request answered later: when its condition holds or its deadline passes.
pub struct Waiter {
    pub client: u64,
    pub kind: WaitKind,
    pub deadline: Deadline,
    /// Also answer once output has been idle this long (interactive actions).
    pub settle: Option<Duration>,
    pub seen_total: u64,
    pub settle_at: Option<Deadline>,
}

impl Waiter {
    /// A wait without output settling.
    pub fn plain(client: u64, kind: WaitKind, deadline: Deadline) -> Waiter {
        Waiter {
            client,
            kind,
            deadline,
            settle: None,
            seen_total: 0,
            settle_at: None,
        }
    }
}
