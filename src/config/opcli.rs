//! Raw parsing of the operator verbs (`list`, `attach`, `prune`, `kill`, `restart-daemon`,
//! `doctor`). Shapes only; the verbs run in `operator/`.

use super::usage::{UsageError, usage};
use lexopt::prelude::*;
use std::ffi::OsString;

pub const VERBS: [&str; 6] = [
    "list",
    "attach",
    "prune",
    "kill",
    "restart-daemon",
    "doctor",
];

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
}

/// Parse the arguments after the verb.
pub fn parse(verb: &str, rest: Vec<OsString>) -> Result<OpCommand, UsageError> {
    let mut p = lexopt::Parser::from_args(rest);
    let mut positional: Vec<String> = Vec::new();
    let (mut table, mut follow, mut all) = (false, false, false);
    let mut idle: Option<u64> = None;
    while let Some(arg) = p.next().map_err(usage)? {
        match arg {
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
    }
}
