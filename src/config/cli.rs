//! Raw command-line parsing with lexopt. This layer only validates shapes; meaning is
//! given by `Config::build`.

use super::opcli::{self, OpCommand};
pub use super::usage::UsageError;
use super::usage::{string, usage};
use lexopt::prelude::*;
use std::ffi::OsString;

/// The `--help` text: usage and options, then the environment section built from the
/// variable table (`vars.rs`).
pub fn help() -> String {
    format!("{USAGE}{}", super::vars::help_section())
}

pub const USAGE: &str = "\
winx-code-agent: a shell-and-files MCP server for coding agents

Usage:
  winx-code-agent [serve] [OPTIONS]    serve MCP over stdio (one JSON message per line)
  winx-code-agent serve --http [OPTIONS] [HTTP OPTIONS]
                                       serve MCP over authenticated Streamable HTTP at /mcp
  winx-code-agent list [--table]       sessions known to winxd (JSON by default)
  winx-code-agent attach <thread_id> [--follow]
                                       print a session's output with an independent cursor
  winx-code-agent prune [--idle-seconds N]
                                       remove idle sessions (the TTL tiers, or N seconds)
  winx-code-agent kill <thread_id> | --all
  winx-code-agent restart-daemon       replace winxd; guardians and shells keep running
  winx-code-agent doctor               redacted runtime report (JSON)
  winx-code-agent report [--log P] [--last N] [--since-minutes M] [--build B]
                         [--format json|html]
                                       usage log aggregation and audit (read-only)
  winx-code-agent agent capabilities | catalog
                                       the admission API; Codex agents in winx sessions
  winx-code-agent agent send TARGET MESSAGE [--return-final] [--request-id UUID]
                         [--final-timeout-ms N] [--paste bracketed|typed]
                                       prompt an agent (may steer a busy one)
  winx-code-agent agent admit TARGET --incarnation INC --request-id UUID [--return-final]
                         [--final-timeout-ms N] [--exact-agent-id] [--paste bracketed|typed]
                         MESSAGE       prompt an idle agent at most once (orchestrators)
  winx-code-agent agent request get ID | cancel ID | watch [--after N] [--once]
                                       return-final requests and their terminal events
  winx-code-agent agent app-server start [--cwd DIR] [--command PROG ARGS...]
                                       start a managed Codex app-server target
  winx-code-agent <verb> --help        one verb's usage

Options:
  --tool-profile <PROFILE>   catalog profile: full (default), coding, read-only, terminal
  --allow-tool <NAME>        exact tool allowlist; repeatable; replaces --tool-profile
  -h, --help                 print this help
  -V, --version              print the build identity

HTTP options (with --http; exactly one credential source):
  --bind <IP:PORT>           listener, default 127.0.0.1:8000 (port 0 picks a free port)
  --token-file <PATH>        single-principal token in a private file (preferred)
  --principal-config <PATH>  named principals with their own tokens and tool policies (TOML)
  --token <VALUE>            single-principal token on the command line (visible to ps)
  --session-affinity <MODE>  workspace (default), conversation or thread
  --allow-weak-token         accept tokens shorter than 32 bytes (local tests only)
  --allow-non-loopback       permit a wildcard, LAN or public listener
  --allowed-host <HOST>      extra accepted Host authority; repeatable
  --allow-query-token        also accept ?token=... (appears in logs; prefer the header)
  --max-concurrency <N>      simultaneous requests, default 32 (then 503)
  --requests-per-minute <N>  per source IP, default 120 (then 429)

";

/// Arguments of the `serve` command (also the default command).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServeArgs {
    pub tool_profile: Option<String>,
    pub allow_tools: Vec<String>,
    /// `--http` and its options (meaning given by `config::http`).
    pub http: bool,
    pub bind: Option<String>,
    pub token_file: Option<String>,
    pub principal_config: Option<String>,
    pub token: Option<String>,
    pub session_affinity: Option<String>,
    pub allow_weak_token: bool,
    pub allow_non_loopback: bool,
    pub allowed_hosts: Vec<String>,
    pub allow_query_token: bool,
    pub max_concurrency: Option<usize>,
    pub requests_per_minute: Option<u32>,
}

impl ServeArgs {
    /// The first HTTP-only option given, for "requires --http" errors.
    fn first_http_option(&self) -> Option<&'static str> {
        [
            (self.bind.is_some(), "--bind"),
            (self.token_file.is_some(), "--token-file"),
            (self.principal_config.is_some(), "--principal-config"),
            (self.token.is_some(), "--token"),
            (self.session_affinity.is_some(), "--session-affinity"),
            (self.allow_weak_token, "--allow-weak-token"),
            (self.allow_non_loopback, "--allow-non-loopback"),
            (!self.allowed_hosts.is_empty(), "--allowed-host"),
            (self.allow_query_token, "--allow-query-token"),
            (self.max_concurrency.is_some(), "--max-concurrency"),
            (self.requests_per_minute.is_some(), "--requests-per-minute"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Serve(ServeArgs),
    Operator(OpCommand),
    Help,
    Version,
}

pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, UsageError> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    if let Some(verb) = args.first().and_then(|a| a.to_str()).map(str::to_string)
        && opcli::VERBS.contains(&verb.as_str())
    {
        args.remove(0);
        return opcli::parse(&verb, args).map(Command::Operator);
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
            Long("http") => serve.http = true,
            Long(
                flag @ ("bind" | "token-file" | "principal-config" | "token" | "session-affinity"),
            ) => {
                let flag = flag.to_string();
                let slot = match flag.as_str() {
                    "bind" => &mut serve.bind,
                    "token-file" => &mut serve.token_file,
                    "principal-config" => &mut serve.principal_config,
                    "token" => &mut serve.token,
                    _ => &mut serve.session_affinity,
                };
                if slot.is_some() {
                    return Err(usage(format!("--{flag} given twice")));
                }
                *slot = Some(string(parser.value().map_err(usage)?)?);
            }
            Long("allow-weak-token") => serve.allow_weak_token = true,
            Long("allow-non-loopback") => serve.allow_non_loopback = true,
            Long("allow-query-token") => serve.allow_query_token = true,
            Long("allowed-host") => serve
                .allowed_hosts
                .push(string(parser.value().map_err(usage)?)?),
            Long("max-concurrency") => {
                serve.max_concurrency = Some(number(parser.value(), "--max-concurrency")?)
            }
            Long("requests-per-minute") => {
                serve.requests_per_minute = Some(number(parser.value(), "--requests-per-minute")?)
            }
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
    if !serve.http
        && let Some(flag) = serve.first_http_option()
    {
        return Err(usage(format!("{flag} requires --http")));
    }
    Ok(Command::Serve(serve))
}

fn number<T: std::str::FromStr>(
    v: Result<OsString, lexopt::Error>,
    flag: &str,
) -> Result<T, UsageError> {
    let v = string(v.map_err(usage)?)?;
    v.parse()
        .map_err(|_| usage(format!("{flag} expects a number, got {v:?}")))
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
    fn http_options() {
        let Ok(Command::Serve(a)) = p(&[
            "serve",
            "--http",
            "--bind",
            "127.0.0.1:0",
            "--token-file=/t",
            "--allowed-host",
            "a.example",
            "--allowed-host",
            "b.example",
            "--max-concurrency",
            "4",
            "--allow-query-token",
        ]) else {
            panic!()
        };
        assert!(a.http && a.allow_query_token);
        assert_eq!(a.bind.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(a.token_file.as_deref(), Some("/t"));
        assert_eq!(a.allowed_hosts, vec!["a.example", "b.example"]);
        assert_eq!(a.max_concurrency, Some(4));
        assert!(
            p(&["--bind", "127.0.0.1:1"])
                .unwrap_err()
                .0
                .contains("requires --http")
        );
        assert!(p(&["--http", "--max-concurrency", "x"]).is_err());
        assert!(p(&["--http", "--token", "a", "--token", "b"]).is_err());
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

#[cfg(test)]
mod fuzz {
    use super::super::opcli::VERBS;
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::ffi::OsStringExt;

    const WORDS: &[&str] = &[
        "serve",
        "--http",
        "--bind",
        "127.0.0.1:0",
        "--bind=[::1]:8000",
        "--token",
        "--token=",
        "--token=abc",
        "--token-file",
        "/t",
        "--principal-config",
        "p.toml",
        "--allow-tool",
        "Initialize",
        "--allow-tool=ReadFiles",
        "--tool-profile",
        "coding",
        "--session-affinity",
        "thread",
        "--allow-weak-token",
        "--allow-non-loopback",
        "--allowed-host",
        "a.example",
        "--allow-query-token",
        "--max-concurrency",
        "--max-concurrency=4",
        "--requests-per-minute",
        "list",
        "--table",
        "kill",
        "--all",
        "attach",
        "--follow",
        "prune",
        "--idle-seconds",
        "restart-daemon",
        "doctor",
        "report",
        "agent",
        "catalog",
        "--last",
        "--format",
        "-h",
        "-V",
        "--help",
        "--version",
        "--",
        "-",
        "-x",
        "-hV",
        "-Vh",
        "--=",
        "=",
        "--http=1",
        "--help=x",
        "0",
        "1",
        "-1",
        "4294967296",
        "18446744073709551616",
        "",
        " ",
        "x",
    ];

    fn arb_arg() -> impl Strategy<Value = OsString> {
        prop_oneof![
            6 => prop::sample::select(WORDS).prop_map(OsString::from),
            2 => any::<String>().prop_map(OsString::from),
            1 => "-{1,2}[a-z\\-=]{0,12}".prop_map(OsString::from),
            1 => any::<u64>().prop_map(|n| OsString::from(n.to_string())),
            // Not UTF-8: a lone continuation byte, an overlong encoding, a surrogate half.
            1 => (prop::sample::select(vec!["--token=", "--allow-tool=", "--", ""]),
                  proptest::collection::vec(prop_oneof![Just(0x80u8), Just(0xc0), Just(0xed), Just(0xff), any::<u8>()], 1..6))
                .prop_map(|(p, tail)| {
                    let mut b = p.as_bytes().to_vec();
                    b.extend(tail);
                    OsString::from_vec(b)
                }),
        ]
    }

    /// Mostly well-formed option groups (a flag and its value), so parses also succeed.
    fn arb_group() -> impl Strategy<Value = Vec<OsString>> {
        let flag_value = (
            prop::sample::select(vec![
                "--allow-tool",
                "--allowed-host",
                "--max-concurrency",
                "--requests-per-minute",
                "--bind",
                "--token",
                "--idle-seconds",
            ]),
            prop_oneof![any::<u32>().prop_map(|n| n.to_string()), any::<String>()],
            any::<bool>(),
        )
            .prop_map(|(f, v, joined)| {
                if joined {
                    vec![OsString::from(format!("{f}={v}"))]
                } else {
                    vec![OsString::from(f), OsString::from(v)]
                }
            });
        prop_oneof![
            3 => prop::sample::select(vec![
                "--http", "--allow-weak-token", "--allow-non-loopback", "--allow-query-token",
                "--table", "--follow", "--all", "ws_thread_1",
            ])
            .prop_map(|f| vec![OsString::from(f)]),
            3 => flag_value,
            2 => arb_arg().prop_map(|a| vec![a]),
        ]
    }

    fn arb_args() -> impl Strategy<Value = Vec<OsString>> {
        (
            proptest::option::of(prop::sample::select(
                VERBS.iter().copied().chain(["serve"]).collect::<Vec<_>>(),
            )),
            prop_oneof![
                proptest::collection::vec(arb_arg(), 0..8),
                proptest::collection::vec(arb_group(), 0..5)
                    .prop_map(|g| g.into_iter().flatten().collect()),
            ],
        )
            .prop_map(|(verb, rest)| verb.map(OsString::from).into_iter().chain(rest).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        /// Any argument list parses to a command or to a `UsageError`, deterministically,
        /// and what it parses to respects the shapes the parser promises.
        #[test]
        fn parse_is_total(args in arb_args()) {
            let out = parse(args.clone());
            prop_assert_eq!(&out, &parse(args.clone()));
            let verb = args.first().and_then(|a| a.to_str()).filter(|a| VERBS.contains(a));
            match out {
                Err(e) => {
                    prop_assert!(!e.0.is_empty());
                    let shown = e.to_string();
                    prop_assert!(shown.starts_with("error: ") && shown.contains("--help"));
                }
                Ok(Command::Operator(op)) => {
                    prop_assert!(verb.is_some(), "operator command without a verb: {:?}", args);
                    match op {
                        OpCommand::Kill { thread_id, all } => prop_assert!(thread_id.is_some() != all),
                        OpCommand::List { .. } => prop_assert_eq!(verb, Some("list")),
                        OpCommand::Attach { .. } => prop_assert_eq!(verb, Some("attach")),
                        OpCommand::Prune { .. } => prop_assert_eq!(verb, Some("prune")),
                        OpCommand::RestartDaemon => prop_assert_eq!(verb, Some("restart-daemon")),
                        OpCommand::Doctor => prop_assert_eq!(verb, Some("doctor")),
                        OpCommand::Report(_) => prop_assert_eq!(verb, Some("report")),
                        OpCommand::Agent(_) => prop_assert_eq!(verb, Some("agent")),
                    }
                }
                Ok(Command::Serve(a)) => {
                    prop_assert!(verb.is_none());
                    if !a.http {
                        prop_assert_eq!(a.first_http_option(), None);
                    }
                }
                Ok(Command::Help | Command::Version) => prop_assert!(verb.is_none()),
            }
        }
    }
}
