//! The sandbox against its own shells (issue 36, items 1 and 3): a sandboxed shell cannot
//! get an unsandboxed shell from the user's ordinary winxd or guardians, cannot read or
//! write winx's state and runtime directories, and cannot reach abstract Unix sockets of
//! processes outside its sandbox; `doctor` says that principals share one uid.
//!
//! Every tree lives in `support::sandbox::scratch_dir`, outside everything the sandbox
//! allows wherever the checkout is: the sandbox leaves `/tmp` writable, so a state
//! directory there would stay reachable (`doctor` reports it as exposed). When the kernel has no Landlock, `WINX_SANDBOX=1` is a startup error and
//! these tests check that instead.

use crate::support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{Agent, Opts, text};

/// A Python the sandbox lets shells run: one in a system tree (a `python3` under HOME,
/// such as a pyenv shim, is outside the sandbox).
fn python() -> &'static str {
    ["/usr/bin/python3", "/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("these tests need python3 in /usr/bin, /bin or /usr/local/bin")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A user's machine in miniature: the sandbox's workspace, the shared state and runtime
/// directories, and a secret outside everything the sandbox allows.
struct Tree {
    _root: tempfile::TempDir,
    ws: PathBuf,
    /// The ordinary server's project.
    project: PathBuf,
    state: PathBuf,
    run: PathBuf,
    secret: PathBuf,
}

fn tree() -> Tree {
    let root = support::sandbox::scratch_dir();
    let r = root.path().canonicalize().unwrap();
    let [ws, project, state, run, keys] =
        ["ws", "project", "state", "run", "keys"].map(|d| r.join(d));
    for d in [&ws, &project, &state, &run, &keys] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let secret = keys.join("id_rsa");
    std::fs::write(&secret, "ssh-canary-4f1c9e\n").unwrap();
    Tree {
        _root: root,
        ws,
        project,
        state,
        run,
        secret,
    }
}

/// A server on `t`'s state and runtime directories; sandboxed to `t.ws` when `sandboxed`.
fn server(t: &Tree, rt: &str, sandboxed: bool) -> Agent {
    let mut env = vec![("XDG_RUNTIME_DIR", s(&t.run)), ("WINX_RUNTIME", rt)];
    if sandboxed {
        env.extend([("WINX_SANDBOX", "1"), ("WINX_SANDBOX_WORKSPACE", s(&t.ws))]);
    }
    Agent::spawn_with(Opts {
        state: Some(t.state.clone()),
        workspace: Some(match sandboxed {
            true => t.ws.clone(),
            false => t.project.clone(),
        }),
        env: &env,
        ..Default::default()
    })
}

/// Without Landlock there is no sandboxed shell to test: the start must fail instead.
fn no_landlock_refuses(t: &Tree) -> bool {
    if support::landlock_abi() > 0 {
        return false;
    }
    let mut a = server(t, "daemon", true);
    let status = a
        .wait_exit(support::HARD_TIMEOUT)
        .expect("a start without Landlock fails");
    assert_eq!(status.code(), Some(2), "{}", a.stderr_log());
    assert!(a.stderr_log().contains("Landlock"), "{}", a.stderr_log());
    true
}

/// What the script does inside the sandboxed shell, as the issue's reproduction: start
/// `winx-code-agent serve` on the user's ordinary winxd, Initialize a sub-workspace and
/// `cat` the secret; then speak to an ordinary guardian's socket directly.
const ESCAPE: &str = r#"
import json, os, select, socket, struct, subprocess, sys
exe, sock, state, sub, secret, guardian = sys.argv[1:7]
os.makedirs(sub, exist_ok=True)
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": sub,
       "WINX_SOCKET": sock, "WINX_STATE_DIR": state}
p = subprocess.Popen([exe, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, env=env, cwd=sub)
def rpc(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                               "params": params}) + "\n").encode())
    p.stdin.flush()
    while True:
        ready, _, _ = select.select([p.stdout], [], [], 20)
        if not ready:
            return {"timeout": method}
        line = p.stdout.readline()
        if not line:
            return {"eof": method}
        m = json.loads(line)
        if m.get("id") == i:
            return m
rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "escape", "version": "1"}})
init = rpc(2, "tools/call", {"name": "Initialize",
                             "arguments": {"type": "first_call", "workspace_root": sub}})
print("INIT", json.dumps(init)[:3000])
d = init.get("result", {}).get("structuredContent", {}).get("data", {})
if d.get("thread_id"):
    r = rpc(3, "tools/call", {"name": "BashCommand", "arguments": {
        "thread_id": d["thread_id"], "workspace_root": d["workspace_root"],
        "action_json": {"command": "cat " + secret}}})
    print("BASH", json.dumps(r)[:3000])
p.kill()
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(guardian)
except OSError as e:
    print("GUARDIAN refused-connect", e.errno)
    sys.exit(0)
hello = json.dumps({"protocol": 2, "role": "adapter", "build": "escape"}).encode()
try:
    # A guardian that refuses closes at once: the send itself may fail (EPIPE, ECONNRESET).
    s.sendall(struct.pack(">I", len(hello)) + hello)
    got = s.recv(4)
except OSError:
    got = b""
print("GUARDIAN", "answered" if got else "closed")
"#;

#[test]
fn a_sandboxed_shell_gets_no_shell_from_the_users_ordinary_winxd_or_guardians() {
    let t = tree();
    if no_landlock_refuses(&t) {
        return;
    }
    // The user's ordinary, unsandboxed server: its winxd and a guardian.
    let mut user = server(&t, "daemon", false);
    let first = user.first_call();
    assert_eq!(first["status"], "completed", "{first}");
    let winxd = t.run.join("winx/winxd.sock");
    assert!(winxd.exists(), "no ordinary winxd at {}", winxd.display());
    let guardian = std::fs::read_dir(t.run.join("winx/g"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the ordinary session's guardian socket");

    // The sandboxed server, on the same state and runtime directories.
    let mut a = server(&t, "daemon", true);
    let pair = a.first_call();
    assert_eq!(pair["status"], "completed", "{pair}");
    let r = a.bash(&pair, json!({"command": format!("cat {}", s(&t.secret))}));
    assert!(
        !text(&r).contains("ssh-canary"),
        "the sandbox let a shell read it: {r}"
    );
    std::fs::write(t.ws.join("escape.py"), ESCAPE).unwrap();
    let cmd = format!(
        "{} escape.py {} {} {} {} {} {}",
        python(),
        support::bin(),
        s(&winxd),
        s(&t.ws.join("inner-state")),
        s(&t.ws.join("sub")),
        s(&t.secret),
        s(&guardian)
    );
    let r = a.bash_with(
        &pair,
        json!({"command": cmd}),
        json!({"wait_for_seconds": 60}),
    );
    let out = text(&r);
    assert!(out.contains("INIT"), "the script did not run: {r}");
    assert!(
        !out.contains("ssh-canary"),
        "a sandboxed shell read a file outside its sandbox through the ordinary winxd: {out}"
    );
    // Below Landlock ABI 9 `connect` reaches winxd, which refuses and says why; from ABI
    // 9 the shell cannot even connect.
    assert!(
        out.contains("no_new_privs") || support::landlock_abi() >= 9,
        "winxd did not say why: {out}"
    );
    assert!(
        out.contains("GUARDIAN closed") || out.contains("GUARDIAN refused-connect"),
        "an ordinary guardian served a sandboxed client: {out}"
    );
    // The ordinary server still works.
    let r = user.bash(&first, json!({"command": "echo still-$((2+3))"}));
    assert!(text(&r).contains("still-5"), "{r}");
}

fn a_sandboxed_shell_reaches_neither_winx_state_nor_runtime_directories(rt: &str) {
    let t = tree();
    if no_landlock_refuses(&t) {
        return;
    }
    let mut a = server(&t, rt, true);
    let pair = a.first_call();
    assert_eq!(pair["status"], "completed", "{pair}");
    let r = a.bash(
        &pair,
        json!({"command": "echo history-$((4*4)) > mine.txt"}),
    );
    assert_eq!(sc_status(&r), "completed", "{r}");
    let runtime = std::fs::read_dir(t.run.join("winx"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("sandbox-")
        })
        .expect("the sandbox's runtime directory");
    let probes = [
        format!("ls {}", s(&t.state)),
        format!("ls {}/sessions", s(&t.state)),
        format!("head -c 16 {}/winx.db", s(&t.state)),
        format!("touch {}/planted", s(&t.state)),
        format!("ls {}", s(&runtime)),
        format!("touch {}/planted", s(&runtime)),
    ];
    let script: Vec<String> = probes
        .iter()
        .map(|p| {
            format!("if {p} >/dev/null 2>&1; then echo \"open: {p}\"; else echo \"shut: {p}\"; fi")
        })
        .collect();
    // From a script, so the kernel, not the static temporary-artifact check, judges the
    // writes.
    std::fs::write(t.ws.join("probe.sh"), script.join("\n")).unwrap();
    let r = a.bash(&pair, json!({"command": "bash probe.sh"}));
    let out = text(&r);
    for p in &probes {
        assert!(out.contains(&format!("shut: {p}")), "{p} reached: {out}");
    }
    assert!(!t.state.join("planted").exists() && !runtime.join("planted").exists());
    // The shell's own ground still works: workspace, /tmp, its session.
    let r = a.bash(
        &pair,
        json!({"command": "cat mine.txt; f=$(mktemp) && echo tmp-ok > $f && cat $f && rm $f"}),
    );
    assert!(
        text(&r).contains("history-16") && text(&r).contains("tmp-ok"),
        "{r}"
    );

    // Abstract Unix sockets of processes outside the sandbox (Landlock ABI 6).
    if support::landlock_abi() >= 6 {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("winx-test-{}-{rt}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        let py = format!(
            "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    \
             s.connect('\\0{name}')\n    print('abstract-connected')\n\
             except OSError as e:\n    print('abstract-refused', e.errno)\n"
        );
        std::fs::write(t.ws.join("abstract.py"), py).unwrap();
        let r = a.bash(
            &pair,
            json!({"command": format!("{} abstract.py", python())}),
        );
        assert!(text(&r).contains("abstract-refused"), "{r}");
    }

    // doctor says what the OS does not separate, and what the shells are kept from.
    let d = a.op_json(&["doctor"]);
    assert_eq!(d["principal_isolation"]["os_isolated"], false, "{d}");
    let private = d["sandbox"]["shells"]["private"].to_string();
    assert!(private.contains(s(&t.state)), "{d}");
    if !t.state.starts_with("/tmp") {
        assert_eq!(d["sandbox"]["shells"]["exposed"], json!([]), "{d}");
    }
}

fn sc_status(r: &Value) -> &Value {
    &r["structuredContent"]["status"]
}

both_runtimes!(a_sandboxed_shell_reaches_neither_winx_state_nor_runtime_directories);
