//! Conversation-recovery advice (seed 000, "Recover an explicitly selected conversation"):
//! a pure reading of a history record's command text. Only the literal direct launches of
//! the table name a conversation; everything else is `best_effort` (a bare launch) or
//! `unavailable`. Advice is text for the caller: nothing here restarts or types anything.
//!
//! The record it reads is already scoped to the principal, thread and workspace that
//! admitted the command, so the advice is too.

use serde_json::{Value, json};

/// Characters that make a command more than one literal launch (lists, pipelines,
/// substitutions, redirections, quoting, globbing, assignments, comments).
const SHELL_SYNTAX: &[char] = &[
    ';', '&', '|', '<', '>', '$', '`', '\'', '"', '\\', '(', ')', '{', '}', '[', ']', '*', '?',
    '~', '#', '!', '=', '\n', '\r',
];

/// What a launch tells about its conversation.
#[derive(Debug, PartialEq, Eq)]
pub enum Advice {
    /// The launch selected this conversation; `recommended` resumes it.
    Explicit {
        program: &'static str,
        uuid: String,
        recommended: String,
    },
    /// A bare supported launch: no selector, so no executable recommendation.
    BestEffort { program: &'static str },
    /// Not a supported literal launch; `reason` says which rule refused it.
    Unavailable { reason: &'static str },
}

/// A canonical UUID: 8-4-4-4-12 hexadecimal digits.
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub fn parse(command: &str) -> Advice {
    let unavailable = |reason| Advice::Unavailable { reason };
    if command.contains(SHELL_SYNTAX) {
        return unavailable("shell_syntax");
    }
    let words: Vec<&str> = command
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    match words.as_slice() {
        ["claude"] => Advice::BestEffort { program: "claude" },
        ["codex"] => Advice::BestEffort { program: "codex" },
        ["claude", "--session-id" | "--resume" | "-r", id] => match is_uuid(id) {
            true => Advice::Explicit {
                program: "claude",
                uuid: id.to_string(),
                recommended: format!("claude --resume {id}"),
            },
            false => unavailable("not_a_uuid"),
        },
        ["codex", "resume", id] => match is_uuid(id) {
            true => Advice::Explicit {
                program: "codex",
                uuid: id.to_string(),
                recommended: format!("codex resume {id}"),
            },
            false => unavailable("not_a_uuid"),
        },
        ["claude", rest @ ..] if selectors(rest) > 1 => unavailable("conflicting_selectors"),
        ["claude" | "codex", ..] => unavailable("unsupported_arguments"),
        _ => unavailable("not_a_supported_launch"),
    }
}

fn selectors(args: &[&str]) -> usize {
    let flags = ["--session-id", "--resume", "-r", "--continue", "-c"];
    args.iter().filter(|a| flags.contains(a)).count()
}

/// The advice as it appears in `get` and `explain` answers (`data.recovery`).
pub fn render(command: &str) -> Value {
    match parse(command) {
        Advice::Explicit {
            program,
            uuid,
            recommended,
        } => json!({
            "advice": "explicit_target", "program": program, "conversation_id": uuid,
            "source": "launch_argument", "current_conversation_verified": false,
            "recommended_command": recommended,
        }),
        Advice::BestEffort { program } => json!({
            "advice": "best_effort", "program": program, "recommended_command": null,
            "reason": "launch_selected_no_conversation",
        }),
        Advice::Unavailable { reason } => json!({
            "advice": "unavailable", "recommended_command": null, "reason": reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "123e4567-e89b-42d3-a456-426614174000";

    #[test]
    fn every_launch_form_of_the_table() {
        for (launch, want) in [
            (
                format!("claude --session-id {U}"),
                format!("claude --resume {U}"),
            ),
            (
                format!("claude --resume {U}"),
                format!("claude --resume {U}"),
            ),
            (format!("claude -r {U}"), format!("claude --resume {U}")),
            (format!("codex resume {U}"), format!("codex resume {U}")),
            (
                format!("  claude\t--resume  {U} "),
                format!("claude --resume {U}"),
            ),
        ] {
            let v = render(&launch);
            assert_eq!(v["advice"], "explicit_target", "{launch}");
            assert_eq!(v["recommended_command"], want.as_str(), "{launch}");
            assert_eq!(v["source"], "launch_argument");
            assert_eq!(v["current_conversation_verified"], false);
            assert_eq!(v["conversation_id"], U);
        }
        for bare in ["claude", "codex", " claude "] {
            let v = render(bare);
            assert_eq!(v["advice"], "best_effort", "{bare}");
            assert!(v["recommended_command"].is_null());
        }
    }

    #[test]
    fn ten_forms_are_unavailable() {
        for (launch, reason) in [
            (
                format!("claude --resume {U} --verbose"),
                "unsupported_arguments",
            ),
            (
                format!("claude --model opus --resume {U}"),
                "unsupported_arguments",
            ),
            (format!("env FOO=1 claude --resume {U}"), "shell_syntax"),
            (
                format!("nohup claude --resume {U}"),
                "not_a_supported_launch",
            ),
            (format!("claude --resume {U} | tee log"), "shell_syntax"),
            ("claude --resume $(cat id)".to_string(), "shell_syntax"),
            (
                format!("claude --resume {U} --session-id {U}"),
                "conflicting_selectors",
            ),
            ("claude --resume my-session".to_string(), "not_a_uuid"),
            (format!("cd /tmp && claude --resume {U}"), "shell_syntax"),
            ("claude --continue".to_string(), "unsupported_arguments"),
            (
                format!("/usr/bin/claude --resume {U}"),
                "not_a_supported_launch",
            ),
            ("codex resume --last".to_string(), "not_a_uuid"),
            (format!("claude --resume \"{U}\""), "shell_syntax"),
            (format!("codex resume {}", &U[..35]), "not_a_uuid"),
        ] {
            assert_eq!(parse(&launch), Advice::Unavailable { reason }, "{launch}");
            assert!(render(&launch)["recommended_command"].is_null());
        }
    }
}
