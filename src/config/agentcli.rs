//! Raw parsing of `agent …` (issue 15): `capabilities`, `catalog`, `send`, `admit`,
//! `request get|cancel|watch`, and the internal `observe`. Shapes only; the verbs run in
//! `operator/agent`.

use super::usage::{UsageError, usage};
use lexopt::prelude::*;
use std::ffi::OsString;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendArgs {
    pub target: String,
    pub message: String,
    pub return_final: bool,
    pub request_id: Option<String>,
    pub final_timeout_ms: u64,
    /// `admit` only: the incarnation the caller read from the catalog.
    pub incarnation: Option<String>,
    /// `admit --exact-agent-id`: TARGET is an agent id, never a display name.
    pub exact_agent_id: bool,
    /// `--paste typed`: no bracketed-paste framing.
    pub typed: bool,
    /// A `--final-timeout-ms` that is not a whole number: an admission refusal (an
    /// `invalid` receipt), not a usage error.
    pub bad_final_timeout: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentCommand {
    Capabilities,
    Catalog,
    Send(SendArgs),
    Admit(SendArgs),
    RequestGet {
        id: String,
    },
    RequestCancel {
        id: String,
    },
    RequestWatch {
        after: i64,
        once: bool,
    },
    /// Start a managed Codex app-server target (a detached host process).
    AppServerStart {
        cwd: Option<String>,
        /// The app-server command; empty: `codex app-server`.
        command: Vec<String>,
    },
    /// Internal: the detached app-server host (started by `app-server start`).
    AppServerHost {
        principal: String,
        state_dir: String,
        runtime_dir: String,
        cwd: String,
        command: Vec<String>,
    },
    /// Internal: the detached request observer (started by an admission).
    Observe {
        principal: String,
        request_id: String,
        state_dir: Option<String>,
    },
}

const USAGE: &str = "agent capabilities | catalog | send TARGET MESSAGE [--return-final] \
[--request-id UUID] [--final-timeout-ms N] [--paste bracketed|typed] | admit TARGET \
--incarnation INC --request-id ID [--return-final] [--final-timeout-ms N] [--exact-agent-id] \
[--paste bracketed|typed] MESSAGE | request get ID | \
request cancel ID | request watch [--after N] [--once] | app-server start [--cwd DIR] \
[--command PROG ARGS…]";

pub fn parse(rest: Vec<OsString>) -> Result<AgentCommand, UsageError> {
    let mut p = lexopt::Parser::from_args(rest);
    let mut pos: Vec<String> = Vec::new();
    let mut a = SendArgs::default();
    let (mut after, mut once) = (0i64, false);
    let mut principal = None;
    let mut state_dir = None;
    let (mut runtime_dir, mut cwd, mut command) = (None, None, Vec::new());
    while let Some(arg) = p.next().map_err(usage)? {
        let sub = pos.first().map(String::as_str).unwrap_or("");
        let text = |v: OsString| super::usage::string(v);
        match arg {
            Long("return-final") if matches!(sub, "send" | "admit") => a.return_final = true,
            Long("exact-agent-id") if sub == "admit" => a.exact_agent_id = true,
            Long("request-id") if matches!(sub, "send" | "admit" | "observe") => {
                a.request_id = Some(text(p.value().map_err(usage)?)?)
            }
            Long("incarnation") if sub == "admit" => {
                a.incarnation = Some(text(p.value().map_err(usage)?)?)
            }
            Long("final-timeout-ms") if matches!(sub, "send" | "admit") => {
                let v = text(p.value().map_err(usage)?)?;
                match v.parse() {
                    Ok(ms) => a.final_timeout_ms = ms,
                    Err(_) => a.bad_final_timeout = Some(v),
                }
            }
            Long("paste") if matches!(sub, "send" | "admit") => {
                a.typed = match text(p.value().map_err(usage)?)?.as_str() {
                    "typed" => true,
                    "bracketed" => false,
                    _ => return Err(usage("--paste takes bracketed or typed")),
                }
            }
            Long("after") if sub == "request" => {
                let v = text(p.value().map_err(usage)?)?;
                after =
                    v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                        usage("--after takes a terminal_event_sequence (0 or more)")
                    })?;
            }
            Long("once") if sub == "request" => once = true,
            Long("principal") if matches!(sub, "observe" | "app-server") => {
                principal = Some(text(p.value().map_err(usage)?)?)
            }
            Long("state-dir") if matches!(sub, "observe" | "app-server") => {
                state_dir = Some(text(p.value().map_err(usage)?)?)
            }
            Long("runtime-dir") if sub == "app-server" => {
                runtime_dir = Some(text(p.value().map_err(usage)?)?)
            }
            Long("cwd") if sub == "app-server" => cwd = Some(text(p.value().map_err(usage)?)?),
            Long("command") if sub == "app-server" => {
                // Everything after --command is the app-server's command line.
                for v in p.raw_args().map_err(usage)? {
                    command.push(text(v)?);
                }
                if command.is_empty() {
                    return Err(usage("--command needs a program"));
                }
            }
            Value(v) => pos.push(text(v)?),
            other => {
                return Err(usage(format!(
                    "agent {sub}: {}\nusage: {USAGE}",
                    other.unexpected()
                )));
            }
        }
    }
    let strs: Vec<&str> = pos.iter().map(String::as_str).collect();
    Ok(match strs.as_slice() {
        ["capabilities"] => AgentCommand::Capabilities,
        ["catalog"] => AgentCommand::Catalog,
        ["send", target, message] => AgentCommand::Send(SendArgs {
            target: target.to_string(),
            message: message.to_string(),
            ..a
        }),
        ["admit", target, message] => {
            if a.incarnation.is_none() || a.request_id.is_none() {
                return Err(usage("agent admit requires --incarnation and --request-id"));
            }
            AgentCommand::Admit(SendArgs {
                target: target.to_string(),
                message: message.to_string(),
                ..a
            })
        }
        ["request", "get", id] => AgentCommand::RequestGet { id: id.to_string() },
        ["request", "cancel", id] => AgentCommand::RequestCancel { id: id.to_string() },
        ["request", "watch"] => AgentCommand::RequestWatch { after, once },
        ["app-server", "start"] => AgentCommand::AppServerStart { cwd, command },
        ["app-server", "host"] => match (principal, state_dir, runtime_dir, cwd) {
            (Some(principal), Some(state_dir), Some(runtime_dir), Some(cwd))
                if !command.is_empty() =>
            {
                AgentCommand::AppServerHost {
                    principal,
                    state_dir,
                    runtime_dir,
                    cwd,
                    command,
                }
            }
            _ => {
                return Err(usage(
                    "agent app-server host requires --principal, --state-dir, --runtime-dir, \
                     --cwd and --command",
                ));
            }
        },
        ["observe"] => match (principal, a.request_id) {
            (Some(principal), Some(request_id)) => AgentCommand::Observe {
                principal,
                request_id,
                state_dir,
            },
            _ => return Err(usage("agent observe requires --principal and --request-id")),
        },
        _ => return Err(usage(format!("usage: {USAGE}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<AgentCommand, UsageError> {
        parse(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn shapes() {
        assert_eq!(p(&["capabilities"]), Ok(AgentCommand::Capabilities));
        let Ok(AgentCommand::Admit(a)) = p(&[
            "admit",
            "zola",
            "--incarnation",
            "i",
            "--request-id",
            "r",
            "--return-final",
            "--final-timeout-ms",
            "5",
            "--exact-agent-id",
            "do it",
        ]) else {
            panic!("admit parses")
        };
        assert!(a.return_final && a.exact_agent_id && a.final_timeout_ms == 5);
        assert_eq!((a.target.as_str(), a.message.as_str()), ("zola", "do it"));
        assert!(
            p(&["admit", "zola", "do it"]).is_err(),
            "incarnation and id are required"
        );
        let Ok(AgentCommand::Send(a)) = p(&["send", "zola", "x", "--final-timeout-ms", "-1"])
        else {
            panic!("a bad timeout is the receipt's to refuse")
        };
        assert_eq!(a.bad_final_timeout.as_deref(), Some("-1"));
        assert!(p(&["request", "watch", "--after", "-3"]).is_err());
        assert_eq!(
            p(&["request", "watch", "--after", "42", "--once"]),
            Ok(AgentCommand::RequestWatch {
                after: 42,
                once: true
            })
        );
        assert!(p(&["catalog", "--once"]).is_err());
        assert!(p(&[]).is_err());
        assert!(p(&["send", "only-target"]).is_err());
        assert_eq!(
            p(&[
                "app-server",
                "start",
                "--cwd",
                "/w",
                "--command",
                "fake",
                "--flag",
                "x"
            ]),
            Ok(AgentCommand::AppServerStart {
                cwd: Some("/w".into()),
                command: vec!["fake".into(), "--flag".into(), "x".into()]
            })
        );
        assert!(p(&["app-server", "start", "--command"]).is_err());
        assert!(p(&["app-server", "host", "--cwd", "/w"]).is_err());
    }
}
