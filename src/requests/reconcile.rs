//! Requests whose responsible process ended while they were open become `indeterminate`:
//! an admitter that died between the write and its durable mark, an observer killed
//! mid-turn. Run by every reader (`request get|watch`, admission) — whoever looks first
//! settles it, once (the terminal transition is conditional).

use crate::deadline::unix_ms;
use crate::store::agent_requests::{ADMITTING, AgentRequest, SUBMITTED, Terminal};
use crate::store::{Store, StoreError};

fn owner_gone(owner: &str) -> bool {
    let mut it = owner.splitn(2, ':');
    match (
        it.next().and_then(|p| p.parse::<u32>().ok()),
        it.next().and_then(|s| s.parse::<u64>().ok()),
    ) {
        (Some(pid), Some(start)) => crate::process::is_gone(pid, start),
        // An owner nobody can name is not running anywhere.
        _ => true,
    }
}

fn settle(store: &Store, r: &AgentRequest) -> Result<(), StoreError> {
    if !(r.state == ADMITTING || r.state == SUBMITTED) || !owner_gone(&r.owner) {
        return Ok(());
    }
    let reason = match r.state.as_str() {
        ADMITTING => "the admitting process ended before the prompt's delivery was recorded",
        _ => "the request observer ended before the bound provider turn completed",
    };
    store
        .request_finish(
            &r.principal,
            &r.request_id,
            &Terminal {
                state: "indeterminate",
                final_message: None,
                reason: Some(reason),
                turn_id: None,
                at_ms: unix_ms(),
            },
        )
        .map(drop)
}

/// Settle one request if its owner is gone.
pub fn one(store: &Store, principal: &str, id: &str) -> Result<(), StoreError> {
    match store.request_get(principal, id)? {
        Some(r) => settle(store, &r),
        None => Ok(()),
    }
}

/// Settle every open request whose owner is gone.
pub fn all(store: &Store) -> Result<(), StoreError> {
    for r in store.requests_open()? {
        settle(store, &r)?;
    }
    Ok(())
}
