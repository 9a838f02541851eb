//! Turning a guardian answer into the agent's text and envelope: cleanup, redaction,
//! head truncation with a visible marker, and a spill file holding everything omitted.

use super::TOOL;
use super::known::known_secrets;
use crate::shell::output::{self, DEFAULT_OUTPUT_BUDGET_BYTES};
use crate::shell::secrets::redact_all;
use crate::tools::ToolContext;
use crate::tools::envelope::{Envelope, NextAction, Status, ToolOutput};
use crate::tools::error::{RETRY_AFTER_MS, SessionPair, mark};
use crate::tools::error_code::ErrorCode;
use crate::wire::guardian::{ActionResult, ProcessStatus, SecretValues};
use serde_json::json;

pub fn action(
    ctx: &ToolContext,
    key: &str,
    pair: &SessionPair,
    action: &str,
    r: ActionResult,
) -> ToolOutput {
    let known = known_secrets(ctx, &r.secrets);
    let (tail, cut) = raw_tail(&r.output);
    let rendered = output::render(tail.as_bytes(), DEFAULT_OUTPUT_BUDGET_BYTES, known.as_ref());
    // Bytes never shown: cut before rendering, cut by the budget, or out of the window.
    let omitted = (cut + rendered.omitted_bytes) as u64 + r.omitted_bytes;
    let truncated = omitted > 0;
    let mut spill_path = None;
    let mut spill_error = r.journal_error.clone();
    if truncated {
        match super::spill::write(ctx, key, &r) {
            Ok(p) => spill_path = Some(p.to_string_lossy().into_owned()),
            Err(e) => spill_error = Some(e),
        }
    }
    let s = &r.state;
    let mut text = String::new();
    if truncated {
        text.push_str(&format!(
            "[output truncated: {omitted} earlier bytes omitted"
        ));
        match &spill_path {
            Some(p) => text.push_str(&format!("; full output in {p}]\n")),
            None => text.push_str(&format!(
                "; spill file unavailable: {}]\n",
                spill_error.as_deref().unwrap_or("unknown")
            )),
        }
    }
    text.push_str(&rendered.text);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let status_line = match s.process_status {
        ProcessStatus::Exited => format!(
            "status: exited, exit code {}",
            s.exit_code.map_or("unknown".into(), |c| c.to_string())
        ),
        ProcessStatus::Running => format!(
            "status: still running ({:.1} s); use status_check",
            s.elapsed_ms as f64 / 1000.0
        ),
        ProcessStatus::Idle => "status: idle (no command running)".into(),
        // `Unknown` is the history's verdict; a guardian never answers it.
        ProcessStatus::ShellExited | ProcessStatus::Unknown => {
            "status: the shell exited; reset it with Initialize reset_shell".into()
        }
    };
    // The trailer, unless the client asked for the compact form (the same facts are in
    // `data`: `state`, `exit_code`, `cwd`).
    if !ctx.compact_bash {
        text.push_str("---\n");
        text.push_str(&status_line);
        text.push_str(&format!("\ncwd: {}\n", s.cwd));
        if let Some(bg) = &s.bg_command_id {
            text.push_str(&format!("bg_command_id: {bg}\n"));
        }
    }
    let (status, code, next_action) = match s.process_status {
        ProcessStatus::Exited | ProcessStatus::Idle => (Status::Completed, None, None),
        ProcessStatus::Running => {
            let mut action_json = json!({"status_check": true});
            if let Some(bg) = &s.bg_command_id {
                action_json["bg_command_id"] = json!(bg);
            }
            let next = NextAction {
                tool: TOOL.as_str().into(),
                instruction: "The command is still running; check on it (or interrupt with send_specials [\"Ctrl-c\"]).".into(),
                arguments: json!({"thread_id": pair.thread_id, "workspace_root": pair.workspace_root, "action_json": action_json}),
            };
            (Status::Running, None, Some(next))
        }
        ProcessStatus::ShellExited | ProcessStatus::Unknown => {
            let next = NextAction {
                tool: "Initialize".into(),
                instruction: "Reset the shell to continue.".into(),
                arguments: json!({"type": "reset_shell", "thread_id": pair.thread_id, "workspace_root": pair.workspace_root}),
            };
            (Status::Failed, Some(ErrorCode::ShellExited), Some(next))
        }
    };
    let data = json!({
        "action": action,
        "state": s,
        "exit_code": s.exit_code,
        "cwd": s.cwd,
        "truncated": truncated,
        "omitted_bytes": omitted,
        "spill_path": spill_path,
        "spill_error": spill_error,
        "redactions": rendered.redactions,
        "retryAfterMs": (s.process_status == ProcessStatus::Running).then_some(RETRY_AFTER_MS),
    });
    let message = format!("BashCommand {action}: {status_line}");
    let mut envelope = Envelope::completed(TOOL, message, data);
    envelope.status = status;
    envelope.retryable = status == Status::Running;
    envelope.next_action = next_action;
    if let Some(code) = code {
        mark(&mut envelope, status, code);
    }
    ToolOutput {
        images: Vec::new(),
        text,
        envelope,
    }
}

/// Raw output rendered for the inline answer at most: the 32 KiB shown come from its end
/// (with room for terminal sequences and collapsed repeats), and cleaning, redacting and
/// collapsing a whole 1 MiB window would cost several copies of it in memory.
const RENDER_WINDOW_BYTES: usize = 256 * 1024;

/// The last `RENDER_WINDOW_BYTES` of `raw`, starting after a newline (so no line, escape
/// sequence or secret is cut in half), and how many bytes were left out before it.
fn raw_tail(raw: &str) -> (&str, usize) {
    if raw.len() <= RENDER_WINDOW_BYTES {
        return (raw, 0);
    }
    let mut start = raw.len() - RENDER_WINDOW_BYTES;
    // Searched as bytes: `start` may fall inside a character, a newline never does.
    match raw.as_bytes()[start..].iter().position(|&b| b == b'\n') {
        Some(nl) => start += nl + 1,
        None => {
            while !raw.is_char_boundary(start) {
                start += 1;
            }
        }
    }
    (&raw[start..], start)
}

pub fn screen(
    ctx: &ToolContext,
    text: String,
    (rows, cols): (u16, u16),
    secrets: &SecretValues,
) -> ToolOutput {
    let text = match known_secrets(ctx, secrets) {
        Some(known) => redact_all(&text, &known).0.into_owned(),
        None => text,
    };
    ToolOutput {
        images: Vec::new(),
        envelope: Envelope::completed(
            TOOL,
            format!("BashCommand screen: {rows}x{cols}"),
            json!({"action": "screen", "rows": rows, "cols": cols}),
        ),
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rendered_tail_starts_after_a_newline_and_never_inside_a_character() {
        let line = "é€ abc\n";
        let raw = line.repeat(2 * RENDER_WINDOW_BYTES / line.len());
        let (tail, cut) = raw_tail(&raw);
        assert_eq!(cut + tail.len(), raw.len());
        assert!(tail.len() <= RENDER_WINDOW_BYTES && tail.starts_with("é€"));
        let one_line = "€".repeat(RENDER_WINDOW_BYTES);
        let (tail, cut) = raw_tail(&one_line);
        assert!(tail.starts_with('€') && cut + tail.len() == one_line.len());
        assert_eq!(raw_tail("short\n"), ("short\n", 0));
    }
}
