//! Raw command-line parsing with lexopt. This layer only validates shapes; meaning is
//! given by `Config::build`.

use lexopt::prelude::*;
use std::ffi::OsString;

pub const USAGE: &str = "\
winx-code-agent: a shell-and-files MCP server for coding agents

Usage:
  winx-code-agent [serve] [OPTIONS]    serve MCP over stdio (one JSON message per line)
  winx-code-agent list [--table]       sessions known to winxd (JSON by default)
  winx-code-agent attach <thread_id> [--follow]
                                       print a session's output with an independent cursor
  winx-code-agent prune [--idle-seconds N]
                                       remove idle sessions (the TTL tiers, or N seconds)
  winx-code-agent kill <thread_id> | --all
  winx-code-agent restart-daemon       replace winxd; guardians and shells keep running
  winx-code-agent doctor               redacted runtime report (JSON)

Options:
  --tool-profile <PROFILE>   catalog profile: full (default), coding, read-only, terminal
  --allow-tool <NAME>        exact tool allowlist; repeatable; replaces --tool-profile
  -h, --help                 print this help
  -V, --version              print the build identity

Environment:
  WINX_STATE_DIR             state directory (default $XDG_STATE_HOME/winx or ~/.local/state/winx)
  WINX_LOG / RUST_LOG        stderr log level: off, error, warn (default), info, debug, trace
  WINX_WORKERS               request worker threads (default 8)
  WINX_SERVER_INSTRUCTIONS   extra instructions appended to the handshake and Initialize
";

/// Arguments of the `serve` command (also the default command).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServeArgs {
    pub tool_profile: Option<String>,
    pub allow_tools: Vec<String>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Serve(ServeArgs),
    Operator(super::opcli::OpCommand),
    Help,
    Version,
}

/// A usage error: printed with a one-line hint, exit code 2.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "error: {}\nhint: run 'winx-code-agent --help' for usage",
            self.0
        )
    }
}

fn usage(e: impl std::fmt::Display) -> UsageError {
    UsageError(e.to_string())
}

pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, UsageError> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    if let Some(verb) = args.first().and_then(|a| a.to_str()).map(str::to_string)
        && super::opcli::VERBS.contains(&verb.as_str())
    {
        args.remove(0);
        return super::opcli::parse(&verb, args).map(Command::Operator);
    }
    let mut parser = lexopt::Parser::from_args(args);
    let mut serve = ServeArgs::default();
    let mut saw_command = false;
    while let Some(arg) = parser.next().map_err(usage)? {
        match arg {
            Short('h') | Long("help") => return Ok(Command::Help),
            Short('V') | Long("version") => return Ok(Command::Version),
            Long("tool-profile") => {
                if serve.tool_profile.is_some() {
                    return Err(usage("--tool-profile given twice"));
                }
                serve.tool_profile = Some(string(parser.value().map_err(usage)?)?);
            }
            Long("allow-tool") => serve
                .allow_tools
                .push(string(parser.value().map_err(usage)?)?),
            Value(v) if !saw_command && v == "serve" => saw_command = true,
            Value(v) => {
                return Err(usage(format!(
                    "unexpected argument {:?}",
                    v.to_string_lossy()
                )));
            }
            other => return Err(usage(other.unexpected())),
        }
    }
    Ok(Command::Serve(serve))
}

fn string(v: OsString) -> Result<String, UsageError> {
    v.into_string()
        .map_err(|v| usage(format!("argument is not valid UTF-8: {v:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, UsageError> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn default_and_serve_are_the_stdio_server() {
        assert_eq!(p(&[]), Ok(Command::Serve(ServeArgs::default())));
        assert_eq!(p(&["serve"]), Ok(Command::Serve(ServeArgs::default())));
    }

    #[test]
    fn repeated_allow_tool() {
        let Ok(Command::Serve(a)) = p(&[
            "serve",
            "--allow-tool",
            "Initialize",
            "--allow-tool=ReadFiles",
        ]) else {
            panic!()
        };
        assert_eq!(a.allow_tools, vec!["Initialize", "ReadFiles"]);
    }

    #[test]
    fn errors() {
        assert!(p(&["--bogus"]).unwrap_err().0.contains("--bogus"));
        assert!(p(&["serve", "serve"]).is_err());
        assert!(p(&["--tool-profile"]).is_err());
        assert!(p(&["--tool-profile", "a", "--tool-profile", "b"]).is_err());
        assert_eq!(p(&["-V"]), Ok(Command::Version));
        assert_eq!(p(&["serve", "--help"]), Ok(Command::Help));
    }
}
