//! The Landlock sandbox (`WINX_SANDBOX`) through the real binaries: shells and file tools
//! cannot write (or read) outside the allowed set while the workspace stays writable; a
//! usage log outside the writable set and a kernel without Landlock are clear startup
//! errors; `doctor` reports the state.
//!
//! Everything "outside" lives in a scratch directory the sandbox provably does not allow
//! (`support::sandbox::scratch_dir`).
//! A kernel without Landlock is made for one process by a seccomp filter
//! that answers the Landlock system call with `ENOSYS`, as such a kernel does; when the
//! machine's own kernel lacks Landlock, the tests that need it check the startup error
//! instead of skipping.

use crate::support;

use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::sandbox::{env_with, scratch_dir};
use support::{Agent, Opts, text};

each_runtime!(a_shell_cannot_write_outside_the_allowed_set_and_the_workspace_stays_writable);

struct Tree {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    ro: PathBuf,
}

fn tree() -> Tree {
    let root = scratch_dir();
    let [ws, outside, ro] = ["ws", "outside", "ro"].map(|d| root.path().join(d));
    for d in [&ws, &outside, &ro] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(outside.join("secret.txt"), "outside secret\n").unwrap();
    std::fs::write(ro.join("notes.txt"), "read-only notes\n").unwrap();
    Tree {
        ws: ws.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        ro: ro.canonicalize().unwrap(),
        _root: root,
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Make the Landlock system calls answer `ENOSYS` in the child, as on a kernel built
/// without Landlock (a seccomp filter; `no_new_privs` lets an unprivileged test set it).
fn without_landlock(cmd: &mut std::process::Command) {
    use nix::libc::{
        BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W, ENOSYS, PR_SET_NO_NEW_PRIVS,
        PR_SET_SECCOMP, SECCOMP_MODE_FILTER, SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, sock_filter,
        sock_fprog,
    };
    let stmt = |code: u32, k: u32| sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let nr = nix::libc::SYS_landlock_create_ruleset as u32;
    let filter = [
        // seccomp_data.nr is the first field.
        stmt(BPF_LD | BPF_W | BPF_ABS, 0),
        sock_filter {
            code: (BPF_JMP | BPF_JEQ | BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: nr,
        },
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS as u32),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    ];
    // SAFETY: only prctl between fork and exec; the filter outlives the call (moved in).
    unsafe {
        cmd.pre_exec(move || {
            let prog = sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut sock_filter,
            };
            if nix::libc::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || nix::libc::prctl(
                    PR_SET_SECCOMP,
                    SECCOMP_MODE_FILTER,
                    &prog as *const sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `serve` over stdio with no client (stdin at EOF: a server that starts exits 0).
fn serve_once(env: &[(String, String)], no_landlock: bool) -> std::process::Output {
    let mut cmd = support::command(env);
    cmd.arg("serve").stdin(Stdio::null());
    if no_landlock {
        without_landlock(&mut cmd);
    }
    cmd.output().expect("run winx-code-agent serve")
}

fn doctor(env: &[(String, String)], no_landlock: bool) -> Value {
    support::sandbox::doctor_with(env, |cmd| {
        if no_landlock {
            without_landlock(cmd);
        }
    })
}

/// The startup error of `WINX_SANDBOX=1` without Landlock: exit 2, naming the kernel
/// requirement and the best-effort way out.
fn assert_kernel_requirement_error(out: &std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("WINX_SANDBOX=1 cannot be enforced")
            && err.contains("Linux >= 5.13")
            && err.contains("WINX_SANDBOX=best-effort"),
        "{err}"
    );
}

/// A tool result's text, lower-cased (bash says "Permission denied", zsh "permission
/// denied").
fn output(r: &Value) -> String {
    text(r).to_lowercase()
}

fn a_shell_cannot_write_outside_the_allowed_set_and_the_workspace_stays_writable(rt: &str) {
    let t = tree();
    let (runtime, shell) = match rt {
        "zsh" => ("daemon", "zsh"),
        other => (other, "bash"),
    };
    let env = [
        ("WINX_SANDBOX", "1"),
        ("WINX_SANDBOX_WORKSPACE", s(&t.ws)),
        ("WINX_SANDBOX_RO_PATHS", s(&t.ro)),
        ("WINX_RUNTIME", runtime),
        ("WINX_SHELL", shell),
        // File tools may reach `outside` (extended containment): only the sandbox stops them.
        ("WINX_ALLOW_PATHS", s(&t.outside)),
    ];
    if !support::landlock_available() {
        let home = scratch_dir();
        assert_kernel_requirement_error(&serve_once(&env_with(home.path(), &env), false));
        return;
    }
    let mut a = Agent::spawn_with(Opts {
        workspace: Some(t.ws.clone()),
        env: &env,
        ..Default::default()
    });
    let pair = a.first_call();
    assert_eq!(pair["status"], "completed", "{pair}");

    // The workspace is writable, by the shell and by the file tools.
    let r = a.bash(
        &pair,
        json!({"command": "echo inside > inside.txt && cat inside.txt"}),
    );
    assert!(output(&r).contains("inside"), "{r}");
    assert_eq!(
        std::fs::read_to_string(t.ws.join("inside.txt")).unwrap(),
        "inside\n"
    );

    // Outside the allowed set: EACCES, nothing written.
    let target = t.outside.join("new.txt");
    let r = a.bash(
        &pair,
        json!({"command": format!("echo x > {}; echo rc=$?", s(&target))}),
    );
    let out = output(&r);
    assert!(
        out.contains("permission denied") && out.contains("rc=1"),
        "{out}"
    );
    assert!(!target.exists(), "a sandboxed shell wrote outside");
    let r = a.bash(
        &pair,
        json!({"command": format!("mkdir {0}/d; echo rc=$?; echo more >> {0}/secret.txt; echo rc=$?", s(&t.outside))}),
    );
    let out = output(&r);
    assert!(
        out.contains("permission denied") && out.matches("rc=1").count() == 2,
        "{out}"
    );
    assert!(!t.outside.join("d").exists());
    assert_eq!(
        std::fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
        "outside secret\n"
    );

    // Not readable either (it is in no list), while a read-only root reads but never writes.
    let r = a.bash(
        &pair,
        json!({"command": format!("cat {}/secret.txt", s(&t.outside))}),
    );
    let out = output(&r);
    assert!(
        out.contains("permission denied") && !out.contains("outside secret"),
        "{out}"
    );
    let r = a.bash(
        &pair,
        json!({"command": format!("cat {0}/notes.txt; echo y >> {0}/notes.txt; echo rc=$?", s(&t.ro))}),
    );
    let out = output(&r);
    assert!(
        out.contains("read-only notes")
            && out.contains("permission denied")
            && out.contains("rc=1"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(t.ro.join("notes.txt")).unwrap(),
        "read-only notes\n"
    );

    // /tmp stays writable.
    let r = a.bash(
        &pair,
        json!({"command": "f=$(mktemp) && echo ok > \"$f\" && cat \"$f\" && rm \"$f\""}),
    );
    assert!(output(&r).contains("ok"), "{r}");

    // The adapter itself is sandboxed: a file tool allowed by WINX_ALLOW_PATHS still
    // cannot read outside the sandbox.
    let r = a.call(
        "ReadFiles",
        support::pair_args(
            &pair,
            json!({"file_paths": [format!("{}/secret.txt", s(&t.outside))]}),
        ),
    );
    let all = r.to_string();
    assert!(!all.contains("outside secret"), "{all}");
    assert!(all.contains("ermission denied"), "{all}");

    let d = a.op_json(&["doctor"]);
    assert_eq!(d["sandbox"]["state"], "enforced", "{d}");
    assert_eq!(d["file_tools_containment"], "extended", "{d}");
}

#[test]
fn a_usage_log_outside_the_writable_set_is_a_clear_startup_error() {
    let t = tree();
    let home = scratch_dir();
    let log = t.outside.join("usage.jsonl");
    let env = env_with(
        home.path(),
        &[
            ("WINX_SANDBOX", "1"),
            ("WINX_SANDBOX_WORKSPACE", s(&t.ws)),
            ("WINX_USAGE_LOG", s(&log)),
        ],
    );
    let out = serve_once(&env, false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("WINX_USAGE_LOG")
            && err.contains(s(&log))
            && err.contains("outside the sandbox's writable set")
            && err.contains("WINX_SANDBOX_RW_PATHS"),
        "{err}"
    );
    assert!(!log.exists(), "nothing written for a refused start");

    // The same log is accepted once its directory is a writable root.
    let env = env_with(
        home.path(),
        &[
            ("WINX_SANDBOX", "best-effort"),
            ("WINX_SANDBOX_WORKSPACE", s(&t.ws)),
            ("WINX_SANDBOX_RW_PATHS", s(&t.outside)),
            ("WINX_USAGE_LOG", s(&log)),
        ],
    );
    let out = serve_once(&env, false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn without_landlock_enforcing_is_a_startup_error_naming_the_kernel_requirement() {
    let t = tree();
    let home = scratch_dir();
    let strict = env_with(
        home.path(),
        &[("WINX_SANDBOX", "1"), ("WINX_SANDBOX_WORKSPACE", s(&t.ws))],
    );
    assert_kernel_requirement_error(&serve_once(&strict, true));
    // doctor says what such a server would do (it is not sandboxed itself).
    let d = doctor(&strict, true);
    assert_eq!(d["sandbox"]["state"], "unavailable", "{d}");
    assert!(d["sandbox"]["kernel_abi"].is_null(), "{d}");
    assert!(
        d["sandbox"]["requirement"]
            .as_str()
            .unwrap()
            .contains("Linux >= 5.13"),
        "{d}"
    );

    // Best effort: the server starts unsandboxed and says so on stderr.
    let lenient = env_with(
        home.path(),
        &[
            ("WINX_SANDBOX", "best-effort"),
            ("WINX_SANDBOX_WORKSPACE", s(&t.ws)),
        ],
    );
    let out = serve_once(&lenient, true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("running WITHOUT the sandbox"), "{err}");
    let d = doctor(&lenient, true);
    assert_eq!(d["sandbox"]["state"], "best_effort_unavailable", "{d}");
    assert_eq!(d["sandbox"]["mode"], "best_effort", "{d}");
}

#[test]
fn doctor_reports_the_sandbox_state_and_the_file_tool_containment() {
    let t = tree();
    let home = scratch_dir();
    let d = doctor(&env_with(home.path(), &[]), false);
    assert_eq!(d["sandbox"]["state"], "off", "{d}");
    assert_eq!(d["sandbox"]["mode"], "off", "{d}");
    assert_eq!(d["file_tools_containment"], "workspace", "{d}");

    let d = doctor(
        &env_with(
            home.path(),
            &[
                ("WINX_SANDBOX", "1"),
                ("WINX_SANDBOX_WORKSPACE", s(&t.ws)),
                ("WINX_SANDBOX_RO_PATHS", s(&t.ro)),
                ("WINX_ALLOW_PATHS", "/"),
            ],
        ),
        false,
    );
    let sb = &d["sandbox"];
    assert_eq!(d["file_tools_containment"], "unconfined", "{d}");
    assert_eq!(sb["mode"], "enforce", "{d}");
    assert_eq!(sb["workspace"], s(&t.ws), "{d}");
    let has = |list: &str, p: &Path| {
        sb[list]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_str() == Some(s(p)))
    };
    assert!(
        has("writable", &t.ws) && has("writable", Path::new("/tmp")),
        "{d}"
    );
    assert!(has("readable", &t.ro) && !has("writable", &t.ro), "{d}");
    assert!(
        !has("readable", &t.outside) && !has("writable", &t.outside),
        "{d}"
    );
    assert_eq!(sb["handled_abi"], 5, "{d}");
    if support::landlock_available() {
        assert_eq!(sb["state"], "enforced", "{d}");
        assert!(sb["kernel_abi"].as_i64().unwrap() >= 1, "{d}");
    } else {
        assert_eq!(sb["state"], "unavailable", "{d}");
    }
    // Sandboxed servers get their own winxd, in a runtime subdirectory named by the rules.
    assert!(
        d["control_socket"]
            .as_str()
            .unwrap()
            .contains("/winx/sandbox-"),
        "{d}"
    );
}
