//! Raw parsing of the operator verbs (`list`, `attach`, `prune`, `kill`, `restart-daemon`,
//! `doctor`, `report`, `agent`). Shapes only; the verbs run in `operator/`.

use super::usage::{UsageError, usage};
use lexopt::prelude::*;
use std::ffi::OsString;

pub const VERBS: [&str; 8] = [
    "list",
    "attach",
    "prune",
    "kill",
    "restart-daemon",
    "doctor",
    "report",
    "agent",
];

/// `report [--log P] [--last N] [--since-minutes M] [--build B] [--format json|html]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportArgs {
    pub log: Option<std::path::PathBuf>,
    pub last: Option<u64>,
    /// 0 (or absent) means no time filter.
    pub since_minutes: Option<u64>,
    pub build: Option<String>,
    /// `--format html`; JSON otherwise.
    pub html: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpCommand {
    List {
        table: bool,
    },
    Attach {
        thread_id: String,
        follow: bool,
    },
    Prune {
        idle_seconds: Option<u64>,
    },
    Kill {
        thread_id: Option<String>,
        all: bool,
    },
    RestartDaemon,
    Doctor,
    Report(ReportArgs),
    Agent(super::agentcli::AgentCommand),
}

/// Parse the arguments after the verb.
pub fn parse(verb: &str, rest: Vec<OsString>) -> Result<OpCommand, UsageError> {
    if verb == "agent" {
        return super::agentcli::parse(rest).map(OpCommand::Agent);
    }
    let mut p = lexopt::Parser::from_args(rest);
    let mut positional: Vec<String> = Vec::new();
    let (mut table, mut follow, mut all) = (false, false, false);
    let mut idle: Option<u64> = None;
    let mut report = ReportArgs::default();
    let whole = |v: OsString, flag: &str| -> Result<u64, UsageError> {
        v.to_string_lossy()
            .parse()
            .map_err(|_| usage(format!("{flag} takes a whole number")))
    };
    while let Some(arg) = p.next().map_err(usage)? {
        match arg {
            Long("log") if verb == "report" => {
                report.log = Some(p.value().map_err(usage)?.into());
            }
            Long("last") if verb == "report" => {
                report.last = Some(whole(p.value().map_err(usage)?, "--last")?);
            }
            Long("since-minutes") if verb == "report" => {
                let m = whole(p.value().map_err(usage)?, "--since-minutes")?;
                report.since_minutes = Some(m);
            }
            Long("build") if verb == "report" => {
                report.build = Some(super::usage::string(p.value().map_err(usage)?)?);
            }
            Long("format") if verb == "report" => {
                report.html = match p.value().map_err(usage)?.to_string_lossy().as_ref() {
                    "json" => false,
                    "html" => true,
                    other => {
                        return Err(usage(format!("--format takes json or html, got {other:?}")));
                    }
                };
            }
            Long("table") if verb == "list" => table = true,
            Long("follow") if verb == "attach" => follow = true,
            Long("all") if verb == "kill" => all = true,
            Long("idle-seconds") if verb == "prune" => {
                let v = p.value().map_err(usage)?;
                idle = Some(
                    v.to_string_lossy()
                        .parse()
                        .map_err(|_| usage("--idle-seconds takes a whole number of seconds"))?,
                );
            }
            Value(v) => positional.push(v.to_string_lossy().into_owned()),
            other => return Err(usage(format!("{verb}: {}", other.unexpected()))),
        }
    }
    let none_expected = |positional: &[String]| match positional.first() {
        Some(extra) => Err(usage(format!("{verb}: unexpected argument {extra:?}"))),
        None => Ok(()),
    };
    Ok(match verb {
        "list" => {
            none_expected(&positional)?;
            OpCommand::List { table }
        }
        "attach" => match positional.as_slice() {
            [t] => OpCommand::Attach {
                thread_id: t.clone(),
                follow,
            },
            _ => return Err(usage("attach takes exactly one <thread_id>")),
        },
        "prune" => {
            none_expected(&positional)?;
            OpCommand::Prune { idle_seconds: idle }
        }
        "kill" => match (positional.as_slice(), all) {
            ([t], false) => OpCommand::Kill {
                thread_id: Some(t.clone()),
                all: false,
            },
            ([], true) => OpCommand::Kill {
                thread_id: None,
                all: true,
            },
            _ => return Err(usage("kill takes one <thread_id> or --all")),
        },
        "restart-daemon" => {
            none_expected(&positional)?;
            OpCommand::RestartDaemon
        }
        "report" => {
            none_expected(&positional)?;
            OpCommand::Report(report)
        }
        _ => {
            none_expected(&positional)?;
            OpCommand::Doctor
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(verb: &str, args: &[&str]) -> Result<OpCommand, UsageError> {
        parse(verb, args.iter().map(OsString::from).collect())
    }

    #[test]
    fn verbs() {
        assert_eq!(p("list", &[]), Ok(OpCommand::List { table: false }));
        assert_eq!(
            p("attach", &["ws_x_1", "--follow"]),
            Ok(OpCommand::Attach {
                thread_id: "ws_x_1".into(),
                follow: true
            })
        );
        assert_eq!(
            p("prune", &["--idle-seconds", "0"]),
            Ok(OpCommand::Prune {
                idle_seconds: Some(0)
            })
        );
        assert_eq!(
            p("kill", &["--all"]),
            Ok(OpCommand::Kill {
                thread_id: None,
                all: true
            })
        );
        assert!(p("kill", &[]).is_err());
        assert!(p("kill", &["a", "--all"]).is_err());
        assert!(p("prune", &["--idle-seconds", "x"]).is_err());
        assert!(p("list", &["--follow"]).is_err());
        assert!(p("doctor", &["extra"]).is_err());
        assert_eq!(
            p(
                "report",
                &[
                    "--log",
                    "/l",
                    "--last",
                    "10",
                    "--since-minutes",
                    "0",
                    "--format",
                    "html"
                ]
            ),
            Ok(OpCommand::Report(ReportArgs {
                log: Some("/l".into()),
                last: Some(10),
                since_minutes: Some(0),
                build: None,
                html: true,
            }))
        );
        assert!(p("report", &["--last", "-1"]).is_err());
        assert!(p("report", &["--format", "xml"]).is_err());
        assert!(p("list", &["--last", "1"]).is_err());
    }
}
