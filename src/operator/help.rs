//! `<verb> --help`: each operator verb's usage, printed with exit code 0 before the verb's
//! own parser runs (which refuses options it does not know). The top-level `--help`
//! (`config::cli::USAGE`) lists every verb in one line each; this is the longer form.

use crate::config::opcli::VERBS;
use std::ffi::OsString;

const AGENT: &str = "\
Usage: winx-code-agent agent <COMMAND>

Codex agents in winx sessions and durable return-final requests (seed 001). Every command
prints JSON on stdout. A receipt's exit code: 0 accepted, 2 invalid, 3 busy, unsupported,
unavailable, stale_incarnation or observer_failure, 4 indeterminate, 1 internal failure.

Commands:
  capabilities                 the admission API's version and receipt classes
  catalog                      agents with their stable agent_id and incarnation
  send TARGET MESSAGE [--return-final] [--request-id UUID] [--final-timeout-ms N]
       [--paste bracketed|typed]
                               write MESSAGE to TARGET (agent id or display name) and
                               submit it; may steer a busy agent
  admit TARGET --incarnation INC --request-id UUID [--return-final]
        [--final-timeout-ms N] [--exact-agent-id] [--paste bracketed|typed] MESSAGE
                               the orchestrator's path: written only to that incarnation,
                               only when it is idle, at most once per request id
  request get ID               one request and its state
  request cancel ID            stop waiting for its final (the agent's turn goes on)
  request watch [--after N] [--once]
                               terminal events after sequence N, one JSON line each
  app-server start [--cwd DIR] [--command PROG ARGS...]
                               start a managed Codex app-server target

Options:
  --return-final               correlate the turn's final answer (a terminal event)
  --request-id UUID            the caller's idempotency key (send makes one if absent)
  --final-timeout-ms N         deadline of the final in ms, 0 (default) for none; a value
                               that is not a whole number 0..=604800000 is an invalid receipt
  --paste bracketed|typed      bracketed paste (default) or typed text
  --exact-agent-id             TARGET is an agent id, never a display name
  -h, --help                   print this help
";

const REPORT: &str = "\
Usage: winx-code-agent report [--log P] [--last N] [--since-minutes M] [--build B]
                              [--format json|html]

Aggregate the usage log offline (read-only; no winxd, no writer).

Options:
  --log P              the usage log (default: WINX_USAGE_LOG)
  --last N             only the last N calls
  --since-minutes M    only calls of the last M minutes (0: no time filter)
  --build B            only calls of build B
  --format json|html   JSON (default) or a self-contained HTML page
  -h, --help           print this help
";

/// The help of `verb`, or `None` for a name that is no verb.
pub fn of(verb: &str) -> Option<String> {
    let text = match verb {
        "agent" => AGENT.to_string(),
        "report" => REPORT.to_string(),
        "list" => short(
            "list [--table]",
            "sessions known to winxd (JSON; --table: a table)",
        ),
        "attach" => short(
            "attach <thread_id> [--follow]",
            "print a session's output with an independent cursor (--follow: keep printing)",
        ),
        "prune" => short(
            "prune [--idle-seconds N]",
            "remove idle sessions (the TTL tiers, or every session idle N seconds)",
        ),
        "kill" => short(
            "kill <thread_id> | --all",
            "end one session, or every session",
        ),
        "restart-daemon" => short(
            "restart-daemon",
            "replace winxd; guardians and their shells keep running",
        ),
        "doctor" => short("doctor", "redacted runtime report (JSON)"),
        _ => return None,
    };
    Some(text)
}

fn short(usage: &str, what: &str) -> String {
    format!(
        "Usage: winx-code-agent {usage}\n\n{what}.\n\nOptions:\n  -h, --help   print this help\n"
    )
}

/// The help to print when `args` (after the program name) name a verb and ask for help
/// (`-h` or `--help` anywhere before a `--`).
pub fn asked(args: &[OsString]) -> Option<String> {
    let verb = args.first()?.to_str()?;
    if !VERBS.contains(&verb) {
        return None;
    }
    let wants = args[1..]
        .iter()
        .take_while(|a| a.to_str() != Some("--"))
        .any(|a| matches!(a.to_str(), Some("-h" | "--help")));
    wants.then(|| of(verb)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(args: &[&str]) -> Option<String> {
        asked(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn every_verb_has_help_and_it_is_found_anywhere_before_a_separator() {
        for verb in VERBS {
            let h = of(verb).unwrap_or_else(|| panic!("{verb} has no help"));
            assert!(h.contains(&format!("winx-code-agent {verb}")), "{h}");
            assert_eq!(ask(&[verb, "--help"]), Some(h.clone()));
            assert_eq!(ask(&[verb, "-h"]), Some(h));
        }
        assert!(ask(&["agent", "send", "zola", "--help"]).is_some());
        assert!(ask(&["agent", "send", "zola", "--", "--help"]).is_none());
        assert!(
            ask(&["serve", "--help"]).is_none(),
            "serve's help is the top level"
        );
        assert!(ask(&["list"]).is_none());
        assert!(of("agent").unwrap().contains("--paste"));
        let max = crate::requests::MAX_FINAL_TIMEOUT_MS.to_string();
        assert!(
            AGENT.contains(&format!("0..={max}")),
            "the bound in the text is the rule's"
        );
    }
}
