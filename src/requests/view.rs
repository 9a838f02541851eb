//! The JSON shapes of agents, requests and terminal events, shared by the CLI (`agent
//! catalog|request …`) and the MCP `Agent` actions, so both answer alike.

use super::admit::{Located, Via};
use crate::store::Store;
use crate::store::agent_requests::{AgentRequest, TerminalEvent};
use serde_json::{Value, json};

/// A foreground agent is named by its thread, a background one by thread/execution, a
/// managed app-server by `app-server/<its thread id>`.
pub fn display_name(l: &Located) -> String {
    if let Via::AppServer { .. } = l.via {
        return format!("app-server/{}", l.thread_id);
    }
    match l.target.foreground {
        true => l.thread_id.clone(),
        false => format!("{}/{}", l.thread_id, l.target.execution_id),
    }
}

/// One catalog entry.
pub fn agent_json(l: &Located) -> Value {
    let t = &l.target;
    if let Via::AppServer { session_id } = &l.via {
        return json!({
            "agent_id": t.agent_id,
            "display_name": display_name(l),
            "provider": "codex",
            "target_kind": "app_server",
            "incarnation": t.incarnation,
            "pid": t.pid,
            "thread_id": l.thread_id,
            "session_id": session_id,
            "command": t.command,
            "observer_status": t.observer,
            "state": t.phase,
            "baseline_provider_turn": t.baseline_turn,
            "event_sequence": t.cursor,
            "return_final_ready": t.cursor.is_some(),
        });
    }
    json!({
        "target_kind": "pty",
        "agent_id": t.agent_id,
        "display_name": display_name(l),
        "provider": "codex",
        "incarnation": t.incarnation,
        "pid": t.pid,
        "thread_id": l.thread_id,
        "execution_id": t.execution_id,
        "foreground": t.foreground,
        "observer_status": t.observer,
        "state": t.phase,
        "conversation_id": t.conversation_id,
        "baseline_provider_turn": t.baseline_turn,
        "return_final_ready": t.cursor.is_some(),
    })
}

/// One terminal event of the ordered stream (the final message only when completed).
pub fn event_json(e: &TerminalEvent) -> Value {
    let mut v = json!({
        "terminal_event_sequence": e.seq,
        "request_id": e.request_id,
        "state": e.state,
        "provider_turn": e.turn_id,
        "reason": e.reason,
        "at_unix_ms": e.at_ms,
    });
    if e.state == "completed" {
        v["final_message"] = json!(e.final_message);
    }
    v
}

/// A request with its stored receipt and, once terminal, its terminal event.
pub fn request_json(store: &Store, r: &AgentRequest) -> Value {
    let receipt: Value = r
        .receipt
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null);
    let terminal = r
        .terminal_event_sequence
        .and_then(|s| store.request_event(s).ok().flatten())
        .map(|e| event_json(&e));
    json!({
        "request_id": r.request_id,
        "agent_id": r.agent_id,
        "incarnation": r.incarnation,
        "return_mode": if r.return_final { "final" } else { "none" },
        "state": r.state,
        "final_timeout_ms": r.final_timeout_ms,
        "created_at_unix_ms": r.created_at_ms,
        "receipt": receipt,
        "terminal": terminal,
    })
}
