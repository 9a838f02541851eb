//! HTTP deployment configuration (seed 003): listener, the one credential source, named
//! principals with their tool policies, and the limits. Built once at startup from
//! `ServeArgs` and the environment; every problem is a startup error (exit 2).
//!
//! Invariant: raw tokens never leave this module, `token` and `principals` (the principal
//! config); a `Principal` carries only the SHA-256 digest of its token.

use super::cli::ServeArgs;
use super::vars::{self, ConfigError, Var};
use crate::tools::policy::ToolPolicy;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Loopback by default: the endpoint grants a shell, so exposure must be a choice.
pub const DEFAULT_BIND: &str = "127.0.0.1:8000";
pub const DEFAULT_MAX_CONCURRENCY: usize = 32;
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 120;
/// Seed 003: a request that takes longer is answered 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Per-read/per-write socket timeout. It bounds a stalled client (slow head, slow body,
/// a reader that never reads) and closes idle keep-alive connections; longer than the
/// 5 s idle expiry of common HTTP clients so they close first.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// After SIGTERM, in-flight requests may finish for this long.
pub const DRAIN_GRACE: Duration = Duration::from_secs(20);

pub use super::principals::{RESERVED_NAMES, load_principal_config};
pub use super::token::{
    MIN_TOKEN_BYTES, Principal, SINGLE_PRINCIPAL, check_token, key, read_token_file, token_digest,
};

pub use crate::session::Affinity;

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

/// Everything `serve --http` needs beyond the common `Config`.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    pub bind: SocketAddr,
    pub principals: Vec<Principal>,
    /// Which credential source was used, for the startup log line.
    pub credential_source: &'static str,
    pub affinity: Affinity,
    /// Extra accepted Host authorities (lowercase), beyond the loopback names.
    pub allowed_hosts: Vec<String>,
    pub allow_query_token: bool,
    pub max_concurrency: usize,
    pub requests_per_minute: u32,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    pub io_timeout: Duration,
    pub drain_grace: Duration,
    /// Credential files (token files, the principal config) that file tools must refuse.
    pub secret_files: Vec<PathBuf>,
    /// Variables that held a credential (`WINX_HTTP_TOKEN`, every `token_env`): no shell,
    /// winxd or guardian gets them, and the server scrubs them from its own environment
    /// block (`config::credentials`).
    pub credential_vars: Vec<String>,
}

impl HttpConfig {
    /// Build from validated arguments. `policy` is the command-line tool policy (used by
    /// single-token servers); `env` reads the process environment.
    pub fn build(
        args: &ServeArgs,
        policy: &ToolPolicy,
        max_body_bytes: usize,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpConfig, ConfigError> {
        let bind = parse_bind(args.bind.as_deref().unwrap_or(DEFAULT_BIND))?;
        if !is_loopback(bind.ip()) && !args.allow_non_loopback {
            return Err(err(format!(
                "refusing to listen on {bind}: it is not a loopback address. Keep winx on \
                 127.0.0.1 behind a VPN, tunnel or authenticated HTTPS proxy, or pass \
                 --allow-non-loopback to acknowledge the exposure"
            )));
        }
        let affinity = match args.session_affinity.as_deref() {
            None | Some("workspace") => Affinity::Workspace,
            Some("conversation") => Affinity::Conversation,
            Some("thread") => Affinity::Thread,
            Some(other) => {
                return Err(err(format!(
                    "unknown --session-affinity {other:?}; expected workspace, conversation or thread"
                )));
            }
        };
        let (principals, credential_source) = principals(args, policy, env)?;
        let mut allowed_hosts = Vec::new();
        for h in &args.allowed_hosts {
            let h = h.trim().to_ascii_lowercase();
            if h.is_empty() || h.contains(['/', ' ', '@', '?', '#']) {
                return Err(err(format!(
                    "--allowed-host {h:?} must be a host name or host:port authority"
                )));
            }
            allowed_hosts.push(h);
        }
        let max_concurrency = args.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY);
        if !(1..=1024).contains(&max_concurrency) {
            return Err(err("--max-concurrency must be 1..=1024"));
        }
        let requests_per_minute = args
            .requests_per_minute
            .unwrap_or(DEFAULT_REQUESTS_PER_MINUTE);
        if !(1..=1_000_000).contains(&requests_per_minute) {
            return Err(err("--requests-per-minute must be 1..=1000000"));
        }
        let secret_files = [&args.principal_config, &args.token_file]
            .into_iter()
            .flatten()
            .map(PathBuf::from)
            .chain(principals.iter().filter_map(|p| p.token_file.clone()))
            .collect();
        let credential_vars = std::iter::once(vars::HTTP_TOKEN.name.to_string())
            .chain(principals.iter().filter_map(|p| p.token_env.clone()))
            .collect();
        Ok(HttpConfig {
            secret_files,
            credential_vars,
            bind,
            principals,
            credential_source,
            affinity,
            allowed_hosts,
            allow_query_token: args.allow_query_token,
            max_concurrency,
            requests_per_minute,
            max_body_bytes,
            request_timeout: millis(env, &vars::HTTP_REQUEST_TIMEOUT_MS)?,
            io_timeout: millis(env, &vars::HTTP_IO_TIMEOUT_MS)?,
            drain_grace: millis(env, &vars::HTTP_DRAIN_GRACE_MS)?,
        })
    }
}

/// A millisecond variable, checked by its table entry.
fn millis(env: vars::Env, var: &Var) -> Result<Duration, ConfigError> {
    vars::number(var, env).map(Duration::from_millis)
}

/// `IP:PORT`, or `localhost:PORT` (meaning 127.0.0.1). Port 0 picks a free port.
pub fn parse_bind(s: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = s.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Err(err(format!(
        "--bind {s:?} is not an IP:PORT address (e.g. 127.0.0.1:8000)"
    )))
}

/// 127.0.0.0/8, ::1 and IPv4-mapped loopback. Wildcards are not loopback.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Pick the single credential source and load its principals.
fn principals(
    args: &ServeArgs,
    policy: &ToolPolicy,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Principal>, &'static str), ConfigError> {
    let env_token = vars::text(&vars::HTTP_TOKEN, env);
    let mut given = Vec::new();
    if args.principal_config.is_some() {
        given.push("--principal-config");
    }
    if args.token_file.is_some() {
        given.push("--token-file");
    }
    if args.token.is_some() {
        given.push("--token");
    }
    if env_token.is_some() {
        given.push("WINX_HTTP_TOKEN");
    }
    match given.len() {
        0 => {
            return Err(err(
                "serve --http needs exactly one credential source: --token-file <PATH> \
                 (preferred), --principal-config <PATH>, --token <VALUE> or WINX_HTTP_TOKEN",
            ));
        }
        1 => {}
        _ => {
            return Err(err(format!(
                "exactly one credential source is allowed, got {}",
                given.join(" and ")
            )));
        }
    }
    let weak_ok = args.allow_weak_token;
    let single = |token: String, from: &str| -> Result<Vec<Principal>, ConfigError> {
        let token = check_token(&token, from, weak_ok)?;
        Ok(vec![Principal {
            name: SINGLE_PRINCIPAL.into(),
            key: key(SINGLE_PRINCIPAL),
            token_digest: token_digest(token.as_bytes()),
            policy: policy.clone(),
            token_file: None,
            token_env: None,
        }])
    };
    if let Some(path) = &args.principal_config {
        if args.tool_profile.is_some() || !args.allow_tools.is_empty() {
            return Err(err(
                "--tool-profile and --allow-tool apply to single-token servers; with \
                 --principal-config set tool_profile or allowed_tools per principal",
            ));
        }
        let list = load_principal_config(Path::new(path), weak_ok, env)?;
        return Ok((list, "principal config"));
    }
    if let Some(path) = &args.token_file {
        let path = Path::new(path);
        let token = read_token_file(path)?;
        return Ok((
            single(token, &format!("token file {}", path.display()))?,
            "token file",
        ));
    }
    if let Some(token) = &args.token {
        return Ok((single(token.clone(), "--token")?, "--token"));
    }
    let token = env_token.unwrap_or_default();
    Ok((single(token, "WINX_HTTP_TOKEN")?, "WINX_HTTP_TOKEN"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variable table shows the defaults this module applies.
    #[test]
    fn the_table_defaults_are_the_constants() {
        let none = |_: &str| None;
        assert_eq!(
            millis(&none, &vars::HTTP_REQUEST_TIMEOUT_MS).unwrap(),
            REQUEST_TIMEOUT
        );
        assert_eq!(
            millis(&none, &vars::HTTP_IO_TIMEOUT_MS).unwrap(),
            IO_TIMEOUT
        );
        assert_eq!(
            millis(&none, &vars::HTTP_DRAIN_GRACE_MS).unwrap(),
            DRAIN_GRACE
        );
    }

    #[test]
    fn bind_parsing_and_loopback() {
        assert!(is_loopback(parse_bind("127.0.0.1:0").unwrap().ip()));
        assert!(is_loopback(parse_bind("localhost:8000").unwrap().ip()));
        assert!(is_loopback(parse_bind("[::1]:1").unwrap().ip()));
        assert!(is_loopback(
            parse_bind("[::ffff:127.0.0.1]:1").unwrap().ip()
        ));
        assert!(!is_loopback(parse_bind("0.0.0.0:8000").unwrap().ip()));
        assert!(!is_loopback(parse_bind("[::]:8000").unwrap().ip()));
        assert!(!is_loopback(parse_bind("192.168.1.20:8000").unwrap().ip()));
        assert!(parse_bind("example.com:80").is_err());
    }

    #[test]
    fn tokens_are_trimmed_and_checked() {
        let long = "a".repeat(MIN_TOKEN_BYTES);
        assert_eq!(check_token(&format!("{long}\n"), "t", false).unwrap(), long);
        assert!(check_token("short", "t", false).is_err());
        assert!(check_token("short", "t", true).is_ok());
        assert!(check_token(&format!("{long} {long}"), "t", false).is_err());
        assert!(check_token(" \n", "t", true).is_err());
        assert_ne!(token_digest(b"a"), token_digest(b"b"));
    }
}
