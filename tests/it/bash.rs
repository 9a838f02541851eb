//! BashCommand through the real binary with a real bash on a real PTY.

use crate::support;

use serde_json::{Value, json};
use support::{Agent, text};

// Daemon, embedded and zsh variants of every test below (`support::each_runtime`).
each_runtime!(
    commands_report_output_exit_code_and_cwd,
    text_is_never_executed_and_bad_actions_are_refused,
    long_output_is_truncated_with_a_marker_and_spilled_in_full,
    running_commands_interrupts_and_eof,
    background_commands_and_status_check,
    screen_and_ascii,
    secrets_are_redacted_by_default,
    modes_restrict_commands,
    a_shell_that_exits_is_reported_and_reset,
    repeated_first_call_attaches_to_the_same_shell,
    shell_environment_is_prepared_and_server_secrets_removed,
    a_shell_that_never_prompts_again_can_be_reset,
    background_commands_are_limited_per_session,
);

/// `rt` is `daemon`, `embedded`, or `zsh` (the daemon runtime with zsh as the shell).
fn spawn(rt: &str) -> Agent {
    let (runtime, shell) = match rt {
        "zsh" => ("daemon", "zsh"),
        other => (other, "bash"),
    };
    // Without the shell the server would wait for a prompt that never comes: fail at once,
    // saying what to do, instead of at the hard timeout.
    assert!(
        on_path(shell),
        "{shell} missing: install {shell} (make shells)"
    );
    Agent::spawn_env(&[
        ("WINX_RUNTIME", runtime),
        ("WINX_SHELL", shell),
        ("WINX_HTTP_TOKEN", "server-secret-never-in-shell"),
    ])
}

/// Whether an executable `name` is on the `PATH` the binary under test inherits.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn data(r: &Value) -> &Value {
    &r["structuredContent"]["data"]
}

fn commands_report_output_exit_code_and_cwd(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let r = a.bash(&s, json!({"command": "echo hello"}));
    assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    assert!(
        text(&r).starts_with("hello\n---\nstatus: exited, exit code 0"),
        "{}",
        text(&r)
    );
    assert_eq!(data(&r)["exit_code"], 0);
    let r = a.bash(&s, json!({"command": "false"}));
    assert_eq!(
        (r["isError"].clone(), data(&r)["exit_code"].clone()),
        (json!(false), json!(1))
    );
    a.bash(&s, json!({"command": "cd /tmp"}));
    let r = a.bash(&s, json!("{\"command\": \"pwd\"}"));
    assert!(text(&r).starts_with("/tmp\n"), "{}", text(&r));
    assert_eq!(data(&r)["cwd"], "/tmp");
    // A command printing a forged marker does not end early or change the state.
    let r = a.bash(
        &s,
        json!({"command": "printf '\\033]6973;deadbeef;0;/forged\\007'; sleep 0.2; echo real-end"}),
    );
    assert!(text(&r).contains("real-end"));
    assert_eq!(data(&r)["cwd"], "/tmp");
}

fn text_is_never_executed_and_bad_actions_are_refused(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    for bad in [
        json!("touch /tmp/winx-should-not-exist"),
        json!(42),
        json!({"command": "ls", "screen": true}),
        json!({}),
    ] {
        let r = a.bash(&s, bad.clone());
        assert_eq!(
            r["structuredContent"]["errorCode"], "invalid_tool_input",
            "{bad}"
        );
    }
    let r = a.call("BashCommand", json!({"action_json": {"command": "ls"}}));
    assert_eq!(r["structuredContent"]["status"], "needs_initialize");
    let r = a.bash_with(
        &s,
        json!({"status_check": true}),
        json!({"wait_policy": "until_complete"}),
    );
    let sc = &r["structuredContent"];
    assert_eq!(sc["errorCode"], "wait_policy_incompatible_with_action");
    assert_eq!(sc["nextAction"]["arguments"]["wait_policy"], "return_early");
}

fn long_output_is_truncated_with_a_marker_and_spilled_in_full(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    // Commands share journal segments: the spilled one starts after this one's bytes.
    a.bash(&s, json!({"command": "echo before"}));
    let r = a.bash(&s, json!({"command": "seq 1 100000"}));
    let t = text(&r);
    assert!(
        t.starts_with("[output truncated: "),
        "{}",
        &t[..200.min(t.len())]
    );
    assert!(t.contains("100000\n---\nstatus: exited, exit code 0"));
    let spill = data(&r)["spill_path"].as_str().unwrap();
    let full = std::fs::read_to_string(spill).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(lines.len(), 100_000);
    assert_eq!((lines[0], lines[99_999]), ("1", "100000"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(spill).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    // The next command's spill holds its own bytes only, not its neighbours'.
    let r = a.bash(&s, json!({"command": "seq 200001 300000; echo after"}));
    let spill = data(&r)["spill_path"].as_str().unwrap();
    let full = std::fs::read_to_string(spill).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(lines.len(), 100_001);
    assert_eq!((lines[0], lines[100_000]), ("200001", "after"));
}

fn running_commands_interrupts_and_eof(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let r = a.bash_with(
        &s,
        json!({"command": "sleep 1000"}),
        json!({"wait_for_seconds": 0.2}),
    );
    let sc = &r["structuredContent"];
    assert_eq!(sc["status"], "running");
    assert_eq!(
        sc["nextAction"]["arguments"]["action_json"]["status_check"],
        true
    );
    assert!(data(&r)["retryAfterMs"].is_u64());
    let again = a.bash(&s, json!({"command": "echo second"}));
    assert_eq!(
        again["structuredContent"]["errorCode"],
        "command_already_running"
    );
    assert_eq!(
        again["structuredContent"]["nextAction"]["tool"],
        "BashCommand"
    );
    let r = a.bash(&s, json!({"send_specials": ["Ctrl-c"]}));
    assert_eq!(data(&r)["state"]["process_status"], "exited", "{r}");
    assert_eq!(data(&r)["exit_code"], 130);
    // Ctrl-d ends `cat`'s input: EOF, not an interrupt (exit code 0).
    let r = a.bash_with(
        &s,
        json!({"command": "cat"}),
        json!({"wait_for_seconds": 0.2}),
    );
    assert_eq!(r["structuredContent"]["status"], "running");
    let r = a.bash(&s, json!({"send_text": "typed line", "submit": true}));
    assert!(text(&r).contains("typed line"), "{}", text(&r));
    let r = a.bash(&s, json!({"send_specials": ["Ctrl-d"]}));
    assert_eq!(data(&r)["exit_code"], 0, "{r}");
    let r = a.bash(&s, json!({"command": "echo still-alive"}));
    assert!(text(&r).starts_with("still-alive"));
}

fn background_commands_and_status_check(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let r = a.bash(
        &s,
        json!({"command": "sleep 0.3; echo bg-done", "is_background": true}),
    );
    assert_eq!(r["structuredContent"]["status"], "running", "{r}");
    let bg = data(&r)["state"]["bg_command_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The foreground shell stays free meanwhile.
    let r = a.bash(&s, json!({"command": "echo fg"}));
    assert!(text(&r).starts_with("fg\n"));
    let r = a.bash_with(
        &s,
        json!({"status_check": true, "bg_command_id": bg}),
        json!({"wait_for_seconds": 10}),
    );
    assert!(text(&r).contains("bg-done"), "{}", text(&r));
    assert_eq!(data(&r)["exit_code"], 0);
    let r = a.bash(&s, json!({"status_check": true, "bg_command_id": "bg999"}));
    assert_eq!(
        r["structuredContent"]["errorCode"],
        "no_such_background_command"
    );
}

fn screen_and_ascii(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    a.bash(&s, json!({"command": "printf 'row one\\nrow two\\n'"}));
    let r = a.bash(&s, json!({"screen": true, "lines": 5}));
    assert!(text(&r).contains("row one\nrow two"), "{}", text(&r));
    let r = a.bash_with(
        &s,
        json!({"command": "read x; echo got-$x"}),
        json!({"wait_for_seconds": 0.2}),
    );
    assert_eq!(r["structuredContent"]["status"], "running");
    let r = a.bash(&s, json!({"send_ascii": [121, 101, 115, 13]}));
    assert!(text(&r).contains("got-yes"), "{}", text(&r));
}

fn secrets_are_redacted_by_default(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let r = a.bash(
        &s,
        json!({"command": "echo token ghp_abcdefghijklmnopqrstuvwxyz0123456789"}),
    );
    assert!(
        !text(&r).contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "{}",
        text(&r)
    );
    assert!(data(&r)["redactions"].as_u64().unwrap() >= 1);
}

fn modes_restrict_commands(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let ws = s["data"]["workspace_root"].clone();
    let tid = s["data"]["thread_id"].clone();
    a.call(
        "Initialize",
        json!({"type": "user_asked_mode_change", "thread_id": tid, "workspace_root": ws, "mode": "code_writer",
               "allowed_commands": ["ls", "echo"], "allowed_globs": ["src/**"]}),
    );
    for cmd in ["ls | rm x", "echo $(rm x)", "ls; rm x", "ls > /etc/passwd"] {
        let r = a.bash(&s, json!({"command": cmd}));
        assert_eq!(
            r["structuredContent"]["errorCode"], "command_denied_by_mode",
            "{cmd}: {r}"
        );
    }
    let r = a.bash(&s, json!({"command": "echo allowed"}));
    assert!(text(&r).starts_with("allowed"));
    a.call(
        "Initialize",
        json!({"type": "user_asked_mode_change", "thread_id": tid, "workspace_root": ws, "mode": "architect"}),
    );
    let r = a.bash(&s, json!({"command": "touch f"}));
    assert_eq!(
        r["structuredContent"]["errorCode"],
        "command_denied_by_mode"
    );
    let r = a.bash(&s, json!({"command": "ls -la | head -3"}));
    assert_eq!(r["structuredContent"]["status"], "completed");
}

fn a_shell_that_exits_is_reported_and_reset(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let pid1 = s["data"]["shell"]["pid"].clone();
    let r = a.bash(&s, json!({"command": "exit 3"}));
    assert_eq!(r["structuredContent"]["errorCode"], "shell_exited", "{r}");
    assert_eq!(
        r["structuredContent"]["nextAction"]["arguments"]["type"],
        "reset_shell"
    );
    let r = a.bash(&s, json!({"command": "echo x"}));
    assert_eq!(r["structuredContent"]["errorCode"], "shell_unavailable");
    let reset = a.call(
        "Initialize",
        json!({"type": "reset_shell", "thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"]}),
    );
    assert_ne!(reset["structuredContent"]["data"]["shell"]["pid"], pid1);
    let r = a.bash(&s, json!({"command": "echo back"}));
    assert!(text(&r).starts_with("back"));
}

fn repeated_first_call_attaches_to_the_same_shell(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    a.bash(&s, json!({"command": "cd /tmp"}));
    let again = a.first_call();
    assert_eq!(again["data"]["shell"]["pid"], s["data"]["shell"]["pid"]);
    assert_eq!(again["data"]["shell"]["cwd"], "/tmp");
    let r = a.bash(&s, json!({"command": "echo $$"}));
    assert!(
        text(&r).starts_with(&format!("{}\n", s["data"]["shell"]["pid"])),
        "{}",
        text(&r)
    );
}

fn shell_environment_is_prepared_and_server_secrets_removed(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let r = a.bash(
        &s,
        json!({"command": "echo shell=${ZSH_VERSION:+zsh}${BASH_VERSION:+bash}"}),
    );
    let want = if rt == "zsh" { "zsh" } else { "bash" };
    assert!(text(&r).starts_with(&format!("shell={want}\n")), "{r}");
    let r = a.bash(&s, json!({"command": "echo ${WINX_HTTP_TOKEN:-unset} $TERM $PAGER $GIT_PAGER $WINX_WORKSPACE_ROOT"}));
    let ws = s["data"]["workspace_root"].as_str().unwrap();
    assert!(
        text(&r).starts_with(&format!("unset xterm-256color cat cat {ws}\n")),
        "{}",
        text(&r)
    );
    // The private rc deleted itself once sourced: the nonce lives only in the shell.
    let leftovers: Vec<_> = std::fs::read_dir(a.state.join("sessions"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .filter(|f| f.file_name().to_string_lossy().starts_with("rc-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn a_shell_that_never_prompts_again_can_be_reset(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    // Remove the shell's prompt hook, so no completion marker ever comes again.
    let unhook = if rt == "zsh" {
        "precmd_functions=(); echo lost"
    } else {
        "PS1=''; echo lost"
    };
    let r = a.bash_with(
        &s,
        json!({"command": unhook}),
        json!({"wait_for_seconds": 0.3}),
    );
    assert_eq!(r["structuredContent"]["status"], "running", "{r}");
    let reset = a.call(
        "Initialize",
        json!({"type": "reset_shell", "thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"]}),
    );
    assert_eq!(reset["structuredContent"]["status"], "completed", "{reset}");
    let r = a.bash(&s, json!({"command": "echo fresh"}));
    assert!(text(&r).starts_with("fresh\n"), "{}", text(&r));
}

fn background_commands_are_limited_per_session(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    for _ in 0..8 {
        let r = a.bash(&s, json!({"command": "sleep 100", "is_background": true}));
        assert_eq!(r["structuredContent"]["status"], "running", "{r}");
    }
    let r = a.bash(&s, json!({"command": "sleep 100", "is_background": true}));
    assert_eq!(
        r["structuredContent"]["errorCode"], "background_limit",
        "{r}"
    );
    let r = a.bash(&s, json!({"screen": true, "diff": true}));
    assert_eq!(r["structuredContent"]["status"], "completed");
}
