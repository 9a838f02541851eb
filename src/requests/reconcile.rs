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
        // A pid no process can have (over `pid_max`'s range) is not running either.
        (Some(pid), Some(start)) => {
            i32::try_from(pid).is_err() || crate::process::is_gone(pid, start)
        }
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
    // Only if nobody moved it on since `r` was read: an admitter that handed the request
    // to its observer and then exited is not a dead owner of the request now.
    store
        .request_settle(
            r,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::admit::admit;
    use crate::requests::admit::tests::{ID, admission};
    use crate::requests::receipt::Class;

    /// What an admitter leaves when it is SIGKILLed after the PTY write and before the
    /// durable `submitted` mark: its registration, `admitting`, owned by a dead process.
    fn crashed_registration(store: &Store, owner: &str) {
        store
            .request_register(&admission().registration(owner.into(), 0))
            .unwrap();
    }

    /// An owner whose process has ended.
    fn dead_owner() -> String {
        crate::requests::owner_key((crate::process::ended_pid(), 1))
    }

    #[test]
    fn the_crash_window_resolves_as_indeterminate_never_as_a_second_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        crashed_registration(&store, &dead_owner());
        // A repeat of the same request settles the registration first, then answers the
        // stored outcome: indeterminate, and no target is even looked at (None).
        let r = admit(
            &store,
            &admission(),
            None,
            std::path::Path::new("/nonexistent"),
        );
        assert_eq!(r.receipt_class, Class::Indeterminate, "{r:?}");
        assert!(r.replayed);
        let row = store.request_get("p", ID).unwrap().unwrap();
        let seq = row.terminal_event_sequence.expect("terminal");
        let e = store.request_event(seq).unwrap().unwrap();
        assert_eq!(e.state, "indeterminate");
        assert!(e.reason.unwrap().contains("admitting process ended"));
        // Settled once: another reader adds no second event.
        all(&store).unwrap();
        assert!(store.request_events_after("p", seq, 10).unwrap().is_empty());
    }

    #[test]
    fn an_owner_no_process_can_be_is_gone() {
        assert!(owner_gone("4294967295:1"));
        assert!(owner_gone("garbage"));
        assert!(!owner_gone(&crate::requests::this_owner()));
    }

    /// Regression: a reader that saw the registration while the admitter ran, and judged
    /// it once the admitter had handed it to its observer and exited, settled the live
    /// request `indeterminate` (seen by `a_truncated_or_replaced_rollout_is_indeterminate`).
    #[test]
    fn a_request_handed_over_since_it_was_read_is_not_settled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        crashed_registration(&store, &dead_owner());
        let stale = store.request_get("p", ID).unwrap().unwrap();
        let handed = AgentRequest {
            state: SUBMITTED.into(),
            owner: crate::requests::this_owner(),
            ..stale.clone()
        };
        assert!(store.request_written(&handed).unwrap());
        settle(&store, &stale).unwrap();
        let row = store.request_get("p", ID).unwrap().unwrap();
        assert_eq!(row.state, SUBMITTED, "{row:?}");
        assert!(row.terminal_event_sequence.is_none());
    }

    #[test]
    fn a_live_owner_keeps_its_registration() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        crashed_registration(&store, &crate::requests::this_owner());
        all(&store).unwrap();
        let row = store.request_get("p", ID).unwrap().unwrap();
        assert_eq!(row.state, ADMITTING);
        assert!(row.terminal_event_sequence.is_none());
    }
}
