//! Tasks as state-store rows: what is written when a task changes, and how another
//! process turns a row back into a task.

use super::store::{Outcome, State, Status, Task};
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::store::tasks::TaskRow;
use serde_json::{Value, json};

pub fn to_row(task: &Task) -> TaskRow {
    to_row_with(task, task.state())
}

/// The row of `task` in state `st` (a state about to be published).
pub fn to_row_with(task: &Task, st: State) -> TaskRow {
    TaskRow {
        principal: task.principal.clone(),
        task_id: task.id.clone(),
        tool: task.tool.clone(),
        legacy: task.legacy,
        created_at_ms: task.created_ms,
        ttl_ms: task.ttl_ms.min(i64::MAX as u64) as i64,
        status: st.status.as_str().into(),
        status_message: st.message,
        updated_at_ms: st.updated_ms,
        outcome: st.outcome.as_ref().map(|o| outcome_json(o).to_string()),
        follow: task.follow().map(|f| f.to_string()),
        owner: Some(format!("{}:{}", task.owner.0, task.owner.1)),
    }
}

/// The task a row describes; `None` for a row this build cannot read.
pub fn from_row(row: TaskRow) -> Option<Task> {
    let status = match row.status.as_str() {
        "working" => Status::Working,
        "completed" => Status::Completed,
        "failed" => Status::Failed,
        "cancelled" => Status::Cancelled,
        _ => return None,
    };
    let outcome = match &row.outcome {
        None => None,
        Some(text) => Some(parse_outcome(&serde_json::from_str(text).ok()?)?),
    };
    let follow = match &row.follow {
        None => None,
        Some(text) => Some(serde_json::from_str(text).ok()?),
    };
    // An unknown owner reads as (0, 0): no running process has it.
    let owner = row
        .owner
        .as_deref()
        .and_then(|o| o.split_once(':'))
        .and_then(|(p, s)| Some((p.parse().ok()?, s.parse().ok()?)))
        .unwrap_or((0, 0));
    Some(Task::restored(
        row.task_id,
        row.principal,
        row.tool,
        row.created_at_ms,
        row.ttl_ms.max(0) as u64,
        row.legacy,
        owner,
        State {
            status,
            message: row.status_message,
            updated_ms: row.updated_at_ms,
            outcome,
        },
        follow,
    ))
}

fn outcome_json(o: &Outcome) -> Value {
    match o {
        Outcome::Result(r) => json!({"result": r}),
        Outcome::Error(e) => json!({"error": e.to_json()}),
    }
}

fn parse_outcome(v: &Value) -> Option<Outcome> {
    if let Some(r) = v.get("result") {
        return Some(Outcome::Result(r.clone()));
    }
    let e = v.get("error")?;
    // Only internal failures end a task with a JSON-RPC error.
    let mut err = RpcError::new(
        ErrorCode::InternalError,
        e.get("message")
            .and_then(Value::as_str)
            .unwrap_or("task failed"),
    );
    if let Some(d) = e.get("data") {
        err = err.with_data(d.clone());
    }
    Some(Outcome::Error(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::store::TaskStore;

    #[test]
    fn a_task_survives_the_round_trip() {
        let s = TaskStore::default();
        let (t, _slot) = s
            .create("alice", "BashCommand", Some(120_000), true)
            .unwrap();
        t.set_follow(json!({"key": "k", "execution_id": "e1"}));
        s.finish(
            &t,
            Outcome::Result(json!({"isError": false})),
            Status::Completed,
            "ok".into(),
        );
        let back = from_row(to_row(&t)).unwrap();
        assert_eq!(
            (back.id.as_str(), back.principal.as_str()),
            (t.id.as_str(), "alice")
        );
        assert_eq!(
            (back.ttl_ms, back.legacy, back.created_ms),
            (120_000, true, t.created_ms)
        );
        assert_eq!(back.follow(), t.follow());
        assert_eq!(back.owner, crate::process::this_process());
        let st = back.state();
        assert_eq!(st.status, Status::Completed);
        assert!(matches!(st.outcome, Some(Outcome::Result(r)) if r == json!({"isError": false})));
        let mut bad = to_row(&t);
        bad.status = "exploded".into();
        assert!(from_row(bad).is_none());
    }
}
