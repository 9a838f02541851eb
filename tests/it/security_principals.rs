//! Principals against each other and against the stdio user (issue 36, items 4 and 2):
//! a principal named `local` is refused at startup and HTTP principals are keyed apart
//! from the stdio user (`http:<name>`); no principal's shell can read another's
//! `token_env` token, from its own environment or from the server's or its parent's
//! `/proc/<pid>/environ`.

use crate::support;
use crate::support::http as http_support;

use crossbeam_channel::bounded;
use http_support::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Stdio};
use support::{Agent, Opts, text};

/// A `serve --http` that either listens or exits on its own.
enum Started {
    Listening(Running),
    Exited { code: Option<i32>, stderr: String },
}

/// A listening server, killed on Drop.
struct Running {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `serve --http --bind 127.0.0.1:0 <args>` in `home`; synchronised on its
/// readiness line or on its stderr closing (it exited), whichever comes first.
fn start(home: &Home, args: &[&str], env: &[(&str, &str)]) -> Started {
    let mut cmd = support::command(&support::isolated_env(
        &home.path("home"),
        &home.path("state"),
        &home.path("run"),
    ));
    cmd.args(["serve", "--http", "--bind", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn winx-code-agent");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = bounded::<Result<SocketAddr, String>>(2);
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("listening on http://").nth(1)
                && let Some(addr) = rest.strip_suffix("/mcp")
            {
                let _ = tx.try_send(Ok(addr.parse().expect("readiness address")));
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        let _ = tx.try_send(Err(seen));
    });
    match rx.recv_timeout(HARD_TIMEOUT) {
        Ok(Ok(addr)) => Started::Listening(Running { child, addr }),
        Ok(Err(stderr)) => Started::Exited {
            code: child.wait().unwrap().code(),
            stderr,
        },
        Err(_) => {
            let _ = child.kill();
            panic!("serve --http neither listened nor exited within {HARD_TIMEOUT:?}");
        }
    }
}

/// `tools/call` over the stateless era; returns the `result`.
fn call(addr: SocketAddr, token: &str, tool: &str, args: Value) -> Value {
    let r = Conn::connect(addr).mcp(
        token,
        &modern_headers("tools/call", Some(tool)),
        &modern("tools/call", json!({"name": tool, "arguments": args})),
    );
    assert_eq!(r.status, 200, "{tool}: {}", r.text());
    r.json()["result"].clone()
}

#[test]
fn a_principal_named_local_never_reaches_the_stdio_users_session() {
    let home = Home::new();
    let run = home.path("run");
    // The stdio user works in the project, on the shared state and winxd.
    let mut stdio = Agent::spawn_with(Opts {
        state: Some(home.path("state")),
        workspace: Some(home.workspace.clone()),
        env: &[("XDG_RUNTIME_DIR", run.to_str().unwrap())],
        ..Default::default()
    });
    let first = stdio.first_call();
    let r = stdio.bash(&first, json!({"command": "echo stdio-$((6*7))-canary"}));
    assert!(text(&r).contains("stdio-42-canary"), "{r}");

    for name in ["local", "LOCAL", "default"] {
        let token = home.secret("p.token", TOKEN);
        let cfg = principal_config(
            &home,
            &format!("[[principals]]\nname = \"{name}\"\ntoken_file = \"{token}\"\n"),
        );
        let server = match start(
            &home,
            &["--principal-config", &cfg],
            &[("WINX_RUNTIME", "daemon")],
        ) {
            Started::Exited { code, stderr } => {
                assert_eq!(code, Some(2), "{name}: {stderr}");
                assert!(
                    stderr.contains(&format!("principal name \"{name}\" is reserved")),
                    "{name}: {stderr}"
                );
                continue;
            }
            Started::Listening(server) => server,
        };
        // What the name used to buy: the stdio user's session and history.
        let ws = path_str(&home.workspace);
        let init = call(
            server.addr,
            TOKEN,
            "Initialize",
            json!({"type": "first_call", "workspace_root": ws}),
        );
        let d = &init["structuredContent"]["data"];
        assert_ne!(
            d["thread_id"], first["data"]["thread_id"],
            "principal {name:?} got the stdio user's thread id: {init}"
        );
        let listed = call(
            server.addr,
            TOKEN,
            "Execution",
            json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"],
                   "action": {"type": "list"}}),
        );
        assert!(
            !listed.to_string().contains("stdio-"),
            "principal {name:?} sees the stdio user's history: {listed}"
        );
        panic!("principal {name:?} was not refused at startup");
    }
}

#[test]
fn http_principals_are_keyed_apart_from_the_stdio_user() {
    let home = Home::new();
    let cfg = two_principals(&home, "");
    let s = Server::start_in(
        home,
        &["--principal-config", &cfg],
        &[("WINX_RUNTIME", "daemon")],
        false,
    );
    let ws = path_str(&s.home.workspace);
    let init = s.call(
        &format!("{TOKEN}-a"),
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    let thread = init["structuredContent"]["data"]["thread_id"].clone();
    assert_eq!(
        thread,
        json!(winx::session::ids::workspace_thread_id(
            "http:alice",
            &s.home.workspace
        )),
        "{init}"
    );
    // The operator sees the key, never a bare name that could be the stdio user's.
    let env = support::isolated_env(
        &s.home.path("home"),
        &s.home.path("state"),
        &s.home.path("run"),
    );
    let out = support::command(&env)
        .arg("list")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("list: {e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let principals: Vec<&Value> = listed
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| &s["principal"])
        .collect();
    assert_eq!(principals, [&json!("http:alice")], "{listed}");
}

/// What a shell reports about `needle` (a file holding a token): how many lines of its
/// own environment, of the server's and of its parent's `/proc/<pid>/environ` hold it,
/// and whether the server's block was readable at all.
fn probe(server_pid: i32) -> String {
    format!(
        "echo \"env=$(env | grep -c -F -f needle) \
         server=$(grep -a -c -F -f needle /proc/{server_pid}/environ) \
         parent=$(grep -a -c -F -f needle /proc/$PPID/environ) \
         readable=$(grep -a -c PATH= /proc/{server_pid}/environ)\""
    )
}

fn bash(s: &Server, token: &str, command: &str) -> String {
    let ws = path_str(&s.home.workspace);
    let init = s.call(
        token,
        "Initialize",
        json!({"type": "first_call", "workspace_root": ws}),
    );
    let d = &init["structuredContent"]["data"];
    let r = s.call(
        token,
        "BashCommand",
        json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"],
               "action_json": {"command": command}}),
    );
    text(&r).to_string()
}

fn token_env_tokens_reach_no_other_principals_shell(rt: &str) {
    let home = Home::new();
    let a_token = format!("{TOKEN}-from-the-environment");
    let b = home.secret("b.token", &format!("{TOKEN}-b"));
    let cfg = principal_config(
        &home,
        &format!(
            "[[principals]]\nname = \"alice\"\ntoken_env = \"A_TOKEN\"\n\n\
             [[principals]]\nname = \"bob\"\ntoken_file = \"{b}\"\n"
        ),
    );
    std::fs::write(home.workspace.join("needle"), &a_token).unwrap();
    let s = Server::start_in(
        home,
        &["--principal-config", &cfg],
        &[("A_TOKEN", &a_token), ("WINX_RUNTIME", rt)],
        false,
    );
    // Alice's token was read: she is served.
    assert!(bash(&s, &a_token, "echo alice-$((1+1))").contains("alice-2"));
    let out = bash(&s, &format!("{TOKEN}-b"), &probe(s.pid()));
    assert!(
        out.contains("env=0 server=0 parent=0 readable=1"),
        "bob's shell reached alice's token: {out}"
    );
}

fn winx_http_token_stays_out_of_the_servers_environ(rt: &str) {
    let home = Home::new();
    std::fs::write(home.workspace.join("needle"), TOKEN).unwrap();
    let s = Server::start_in(
        home,
        &[],
        &[("WINX_HTTP_TOKEN", TOKEN), ("WINX_RUNTIME", rt)],
        false,
    );
    let out = bash(&s, TOKEN, &probe(s.pid()));
    assert!(
        out.contains("env=0 server=0 parent=0 readable=1"),
        "a shell reached WINX_HTTP_TOKEN: {out}"
    );
}

both_runtimes!(
    token_env_tokens_reach_no_other_principals_shell,
    winx_http_token_stays_out_of_the_servers_environ
);
