//! `explain`: how turn recognition reads an execution now — recognizer, state, detection
//! source, matching rule and priority, fallback or unknown reason — from the recorded
//! screen (the whole of it, whatever display limits say) and the process facts.

use super::{Ctx, done, execution_id, fresh, only, refuse, unavailable, view, with};
use crate::deadline::unix_ms;
use crate::history::catalog::ProcessStatus;
use crate::shell::turn::{self, Choice, RecognitionInput};
use crate::tools::envelope::ToolOutput;
use crate::tools::error::ToolError;
use serde_json::{Map, Value, json};

pub struct ExplainReq {
    pub id: String,
    choice: Choice,
    name: String,
}

pub fn parse(action: &Map<String, Value>) -> Result<ExplainReq, ToolError> {
    only(action, &["execution_id", "recognizer"])?;
    let id = execution_id(action.get("execution_id"), "execution_id")?;
    let auto = |detail: String| {
        refuse(
            detail,
            "recognizer is auto (the default), generic, claude_code, codex or configurable.",
            with(action, "recognizer", Value::String("auto".into())),
        )
    };
    let name = match action.get("recognizer") {
        None => "auto",
        Some(v) => v
            .as_str()
            .ok_or_else(|| auto("recognizer must be a string".into()))?,
    };
    let choice = Choice::parse(name).map_err(|e| auto(e.to_string()))?;
    Ok(ExplainReq {
        id,
        choice,
        name: name.to_string(),
    })
}

pub fn run(x: &Ctx, req: ExplainReq) -> Result<ToolOutput, ToolError> {
    let r = fresh(x, &req.id)?;
    let shot = x.screen(&r).map_err(unavailable)?;
    let running = r.process_status == ProcessStatus::Running;
    let (screen, quiet_ms) = match &shot {
        // Quiet time keeps growing after the capture while nothing new was recorded.
        Some(s) => (
            s.text.as_str(),
            (s.quiet_ms + (unix_ms() - s.captured_at_ms).max(0)) as u64,
        ),
        None => ("", 0),
    };
    let input = RecognitionInput {
        screen,
        quiet_ms,
        running,
    };
    let rules = x.limits().turn_rules.as_deref();
    // A configurable choice without operator rules: the same explain with `auto` works.
    let detection = turn::recognize(&req.choice, &input, rules).map_err(|e| {
        refuse(
            e,
            "recognizer auto needs no operator rule file.",
            json!({"type": "explain", "execution_id": req.id, "recognizer": "auto"}),
        )
    })?;
    let text = format!(
        "{}: {} by {} ({}{})\n",
        r.execution_id,
        crate::history::turn::state_name(detection.state),
        detection.recognizer,
        detection.source,
        detection
            .rule
            .as_deref()
            .map(|rule| format!(", rule {rule}"))
            .unwrap_or_default()
    );
    let data = json!({
        "recognizer_requested": req.name,
        "detection": detection,
        "input": {
            "screen_snapshot": shot.as_ref().map(|s| s.snapshot),
            "screen_captured_at_unix_ms": shot.as_ref().map(|s| s.captured_at_ms),
            "screen_bytes": screen.len(),
            "quiet_ms": quiet_ms,
            "running": running,
        },
        "execution": view::compact(&r),
    });
    Ok(done(x.tool, format!("explain: {}", req.id), text, data))
}
