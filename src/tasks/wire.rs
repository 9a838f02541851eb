//! How a task looks on the wire in each protocol era.
//!
//! 2025-11-25 (handshake era, requestor-driven): `tools/call` carries `params.task`, the
//! answer is `{"task": Task}`, `Task` has `ttl` and `pollInterval`, and the result comes
//! from `tasks/result`. 2026-07-28 (`io.modelcontextprotocol/tasks` extension,
//! server-directed): the answer is the task itself with `resultType: "task"`, `Task` has
//! `ttlMs` and `pollIntervalMs`, and `tasks/get` inlines the `result` or `error`.

use super::store::{Outcome, POLL_INTERVAL_MS, State, Status, Task};
use serde_json::{Map, Value, json};

/// The extension identifier of the 2026-07-28 tasks extension.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// `_meta` key tying a 2025-11-25 `tasks/result` answer to its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Handshake,
    Modern,
}

/// The common `Task` fields.
pub fn fields(task: &Task, st: &State, d: Dialect) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("taskId".into(), json!(task.id));
    m.insert("status".into(), json!(st.status.as_str()));
    if let Some(msg) = &st.message {
        m.insert("statusMessage".into(), json!(msg));
    }
    m.insert("createdAt".into(), json!(iso8601(task.created_ms)));
    m.insert("lastUpdatedAt".into(), json!(iso8601(st.updated_ms)));
    let (ttl, poll) = match d {
        Dialect::Handshake => ("ttl", "pollInterval"),
        Dialect::Modern => ("ttlMs", "pollIntervalMs"),
    };
    m.insert(ttl.into(), json!(task.ttl_ms));
    if !st.status.terminal() {
        m.insert(poll.into(), json!(POLL_INTERVAL_MS));
    }
    m
}

/// The answer to a `tools/call` that became a task.
pub fn created(task: &Task, d: Dialect) -> Value {
    let f = fields(task, &task.state(), d);
    match d {
        Dialect::Handshake => json!({"task": f}),
        Dialect::Modern => {
            let mut f = f;
            f.insert("resultType".into(), json!("task"));
            Value::Object(f)
        }
    }
}

/// The answer to `tasks/get` (and `tasks/cancel` in the handshake era): the task, and in
/// the modern era its outcome once there is one. A cancelled task keeps the outcome of
/// the interrupted work, so nothing it printed is lost.
pub fn detailed(task: &Task, d: Dialect) -> Value {
    let st = task.state();
    let mut f = fields(task, &st, d);
    if d == Dialect::Modern {
        match (&st.outcome, st.status) {
            (Some(Outcome::Result(r)), Status::Completed | Status::Cancelled) => {
                f.insert("result".into(), r.clone());
            }
            (Some(Outcome::Error(e)), _) => {
                f.insert("error".into(), e.to_json());
            }
            _ => {}
        }
    }
    Value::Object(f)
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_764_500_000_123), "2025-11-30T10:53:20.123Z");
        assert_eq!(iso8601(-1), "1969-12-31T23:59:59.999Z");
    }
}
