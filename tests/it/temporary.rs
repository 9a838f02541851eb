//! The managed temporary directory and helper maps (issue 17, items 2–4) through the real
//! binaries: `WINX_TEMP_DIR` in foreground and background PTYs, the artifact policy, the
//! budget gate, stale pruning with an injected clock, `release_temporary`, helper-map
//! budgets, and a directory replaced by a symlink.

use crate::support;

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::{Agent, Opts, pair_args, sc, text};

both_runtimes!(
    shells_in_the_foreground_and_background_export_the_directory,
    release_is_refused_while_a_background_command_runs_and_works_after,
);

fn spawn(rt: &str) -> Agent {
    Agent::spawn_env(&[("WINX_RUNTIME", rt)])
}

fn data(r: &Value) -> &Value {
    &sc(r)["data"]
}

fn temp_dir(first: &Value) -> PathBuf {
    PathBuf::from(first["data"]["temp_dir"].as_str().expect("temp_dir"))
}

fn shells_in_the_foreground_and_background_export_the_directory(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let dir = temp_dir(&s);
    assert!(dir.starts_with(a.workspace.join(".winx/tmp")), "{dir:?}");
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("session-"), "{name}");
    let meta = std::fs::metadata(&dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert_eq!(s["data"]["temporary"]["files"], 0);
    let r = a.bash(&s, json!({"command": "echo \"fg=$WINX_TEMP_DIR\""}));
    assert!(text(&r).contains(&format!("fg={}", dir.display())), "{r}");
    assert_eq!(data(&r)["temporary"]["over_budget"], false);
    let r = a.background_to_end(&s, "echo \"bg=$WINX_TEMP_DIR\"");
    assert!(text(&r).contains(&format!("bg={}", dir.display())), "{r}");
}

#[test]
fn bypassing_writes_are_refused_and_ordinary_commands_run() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    std::fs::write(a.workspace.join("README.md"), "a\n").unwrap();
    let sys = format!("/tmp/winx-test-{}", std::process::id());
    for cmd in [
        format!("echo x > {sys}.py"),
        format!("printf '%s\\n' a | tee {sys}.log"),
        format!("cp README.md {sys}.md"),
        format!("touch {sys}.touch"),
        "echo x > scratch.txt".to_string(),
        "make 2>&1 >> debug.log".to_string(),
    ] {
        let r = a.bash(&s, json!({"command": cmd}));
        assert_eq!(
            sc(&r)["errorCode"],
            "temporary_artifact_policy",
            "{cmd}: {r}"
        );
        assert!(text(&r).contains("$WINX_TEMP_DIR"), "{r}");
        assert_eq!(sc(&r)["nextAction"]["tool"], "BashCommand");
    }
    for p in [".py", ".log", ".md", ".touch"] {
        assert!(!Path::new(&format!("{sys}{p}")).exists(), "nothing was run");
    }
    assert!(!a.workspace.join("scratch.txt").exists());
    for cmd in [
        "cargo build --offline -q 2>/dev/null; true".to_string(),
        "git status 2>/dev/null; true".to_string(),
        "echo hi > $WINX_TEMP_DIR/x".to_string(),
        "ls > /dev/null".to_string(),
        "echo test 2>&1 | tee $WINX_TEMP_DIR/log".to_string(),
        "sed -i s/a/b/ README.md".to_string(),
        "echo notes > notes.md".to_string(),
    ] {
        let r = a.bash(&s, json!({"command": cmd}));
        assert!(sc(&r)["errorCode"].is_null(), "{cmd}: {r}");
    }
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("README.md")).unwrap(),
        "b\n"
    );
    // A verify_command is judged the same way, before the edit is written.
    let r = a.call(
        "VerifyEdit",
        pair_args(
            &s,
            json!({"verify_command": format!("make > {sys}.verify")}),
        ),
    );
    assert_eq!(sc(&r)["errorCode"], "temporary_artifact_policy", "{r}");
    let r = a.bash(&s, json!({"command": "cat \"$WINX_TEMP_DIR/x\""}));
    assert!(text(&r).starts_with("hi"), "{r}");
    assert_eq!(data(&r)["temporary"]["files"], 2);
}

#[test]
fn an_overage_blocks_ordinary_commands_until_helpers_are_removed() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    // 70 MiB of apparent size (sparse): over the 64 MiB session budget.
    let r = a.bash(
        &s,
        json!({"command": "truncate -s 70M \"$WINX_TEMP_DIR/big\""}),
    );
    assert_eq!(data(&r)["temporary"]["over_budget"], true, "{r}");
    assert!(text(&r).contains("over budget"), "{r}");
    let r = a.bash(&s, json!({"command": "echo hi"}));
    assert_eq!(sc(&r)["errorCode"], "temporary_budget_exceeded", "{r}");
    assert!(
        sc(&r)["nextAction"]["arguments"]["action_json"]["command"]
            .as_str()
            .unwrap()
            .contains("du")
    );
    // Inspecting and removing still run; nothing was deleted automatically.
    let r = a.bash(
        &s,
        json!({"command": "ls -la \"$WINX_TEMP_DIR\" && du -sh \"$WINX_TEMP_DIR\""}),
    );
    assert!(text(&r).contains("big"), "{r}");
    assert!(temp_dir(&s).join("big").exists());
    // A restarted adapter (no verdict in memory) audits before the first command.
    let mut b = support::restart_adapter(&a, "embedded");
    let s2 = b.first_call();
    let r = b.bash(&s2, json!({"command": "echo hi"}));
    assert_eq!(sc(&r)["errorCode"], "temporary_budget_exceeded", "{r}");
    drop(b);
    let r = a.bash(&s, json!({"command": "rm \"$WINX_TEMP_DIR/big\""}));
    assert_eq!(data(&r)["temporary"]["over_budget"], false, "{r}");
    let r = a.bash(&s, json!({"command": "echo hi"}));
    assert!(text(&r).starts_with("hi"), "{r}");
}

#[test]
fn stale_sessions_are_pruned_with_an_injected_clock() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    let own = temp_dir(&s);
    let stale = a.workspace.join(".winx/tmp/session-00000000deadbeef");
    std::fs::create_dir_all(stale.join("sub")).unwrap();
    std::fs::write(stale.join("sub/helper.py"), "x = 1\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path(), stale.join("link")).unwrap();
    // Fresh: a first call keeps it.
    let again = a.call(
        "Initialize",
        json!({"type": "first_call", "workspace_root": a.ws()}),
    );
    assert!(sc(&again)["data"]["temporary"]["pruned_stale_sessions"].is_null());
    assert!(stale.exists());
    // 25 hours later (the lifecycle clock of another adapter): pruned, own kept.
    let mut later = Agent::spawn_with(Opts {
        workspace: Some(a.workspace.clone()),
        env: &[
            ("WINX_RUNTIME", "embedded"),
            ("WINX_CLOCK_SKEW_SECS", "90000"),
        ],
        ..Default::default()
    });
    let s2 = later.first_call();
    assert_eq!(s2["data"]["temporary"]["pruned_stale_sessions"], 1, "{s2}");
    assert!(!stale.exists());
    assert!(own.exists());
    assert!(
        outside.path().join("keep").exists(),
        "links are never followed"
    );
}

fn read_revision(a: &mut Agent, s: &Value, path: &Path) -> String {
    let r = a.call(
        "ReadFiles",
        pair_args(s, json!({"file_paths": [path.display().to_string()]})),
    );
    data(&r)["files"][0]["revision"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

fn release(a: &mut Agent, s: &Value, generation: &Value, files: Value) -> Value {
    a.call(
        "EditFiles",
        pair_args(
            s,
            json!({"release_temporary": {"generation": generation, "files": files}}),
        ),
    )
}

fn release_is_refused_while_a_background_command_runs_and_works_after(rt: &str) {
    let mut a = spawn(rt);
    let s = a.first_call();
    let dir = temp_dir(&s);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("target"), "keep").unwrap();
    let cmd = format!(
        "printf abc > \"$WINX_TEMP_DIR/h.txt\" && printf zz > \"$WINX_TEMP_DIR/unread.txt\" && ln -s {} \"$WINX_TEMP_DIR/link\"",
        outside.path().join("target").display()
    );
    a.bash(&s, json!({"command": cmd}));
    let h = dir.join("h.txt");
    let rev = read_revision(&mut a, &s, &h);
    let r = a.bash(&s, json!({"command": "sleep 30", "is_background": true}));
    let bg = data(&r)["state"]["bg_command_id"]
        .as_str()
        .unwrap()
        .to_string();
    let generation = data(&r)["temporary"]["generation"].clone();
    let one = json!([{"path": h, "revision": rev}]);
    let r = release(&mut a, &s, &generation, one.clone());
    assert_eq!(sc(&r)["errorCode"], "temporary_release_blocked", "{r}");
    assert!(h.exists(), "nothing released while a command runs");
    a.bash(
        &s,
        json!({"send_specials": ["Ctrl-c"], "bg_command_id": bg}),
    );
    let r = a.bash_with(
        &s,
        json!({"status_check": true, "bg_command_id": bg}),
        json!({"wait_for_seconds": 10}),
    );
    assert_ne!(sc(&r)["status"], "running", "{r}");
    // A stale generation is refused whole.
    let r = release(&mut a, &s, &json!("0000000000000000"), one.clone());
    assert_eq!(sc(&r)["errorCode"], "temporary_generation_changed", "{r}");
    let generation = data(&r)["generation"].clone();
    let files = json!([
        {"path": h, "revision": rev},
        {"path": dir.join("unread.txt"), "revision": "sha256:00"},
        {"path": dir.join("link"), "revision": "sha256:00"},
        {"path": a.workspace.join("README.md"), "revision": "sha256:00"},
        {"path": format!("{}/../x", dir.display()), "revision": "sha256:00"},
    ]);
    let r = release(&mut a, &s, &generation, files);
    assert_eq!(sc(&r)["status"], "partially_failed", "{r}");
    assert_eq!(sc(&r)["errorCode"], "temporary_release_partial");
    let outcomes: Vec<(&str, &str)> = data(&r)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["outcome"].as_str().unwrap(),
                f["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("released", ""),
            ("kept", "not_read_at_revision"),
            ("kept", "not_read_at_revision"),
            ("kept", "outside_session_dir"),
            ("kept", "outside_session_dir"),
        ]
    );
    assert!(!h.exists());
    assert!(dir.join("unread.txt").exists() && dir.join("link").exists());
    assert!(outside.path().join("target").exists());
    // The same call again after its answer was lost: the released file is absent, and
    // the kept ones are still refused.
    let r2 = release(&mut a, &s, &generation, one);
    assert_eq!(sc(&r2)["status"], "completed", "{r2}");
    assert_eq!(data(&r2)["files"][0]["outcome"], "already_absent");
}

#[test]
fn helper_maps_share_a_session_budget_and_are_capped() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    let dir = temp_dir(&s);
    a.bash(
        &s,
        json!({"command": "for i in $(seq 1 25); do echo \"fn f$i() {}\" > \"$WINX_TEMP_DIR/h$i.rs\"; done; \
                           for i in $(seq 1 2000); do echo \"fn function_number_$i() {}\"; done > \"$WINX_TEMP_DIR/big.rs\""}),
    );
    std::fs::write(a.workspace.join("main.rs"), "fn main() {}\n").unwrap();
    let map = |a: &mut Agent, p: &Path| {
        a.call(
            "CodeMap",
            pair_args(
                &s,
                json!({"operation": "outline", "path": p.display().to_string()}),
            ),
        )
    };
    let r = map(&mut a, &dir.join("big.rs"));
    assert_eq!(data(&r)["helper_map"]["capped"], true, "{r}");
    assert!(text(&r).len() <= 12 * 1024, "{}", text(&r).len());
    assert!(serde_json::to_string(&data(&r)["symbols"]).unwrap().len() <= 12 * 1024);
    // The whole structured answer holds the cap too (issue 37 item 13: 13,897 B before).
    let structured = serde_json::to_string(sc(&r)).unwrap().len();
    assert!(
        structured <= 12 * 1024,
        "structuredContent is {structured} B"
    );
    for i in 1..=23 {
        let r = map(&mut a, &dir.join(format!("h{i}.rs")));
        assert!(sc(&r)["errorCode"].is_null(), "{i}: {r}");
        assert_eq!(data(&r)["helper_map"]["files_used"], i + 1);
    }
    let r = map(&mut a, &dir.join("h25.rs"));
    assert_eq!(
        sc(&r)["errorCode"],
        "derived_code_map_budget_exhausted",
        "{r}"
    );
    // Canonical maps do not count.
    let main = a.workspace.join("main.rs");
    let r = map(&mut a, &main);
    assert!(
        sc(&r)["errorCode"].is_null() && data(&r)["helper_map"].is_null(),
        "{r}"
    );
    // Known files keep working until 64 calls in all.
    for _ in 25..=64 {
        let r = map(&mut a, &dir.join("h1.rs"));
        assert!(sc(&r)["errorCode"].is_null(), "{r}");
    }
    let r = map(&mut a, &dir.join("h1.rs"));
    assert_eq!(
        sc(&r)["errorCode"],
        "derived_code_map_budget_exhausted",
        "{r}"
    );
    // A directory is not a helper map.
    let r = map(&mut a, &dir);
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
}

#[test]
fn a_directory_replaced_by_a_symlink_is_never_followed() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    let dir = temp_dir(&s);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), "x").unwrap();
    let cmd = format!(
        "rm -rf \"$WINX_TEMP_DIR\" && ln -s {} \"$WINX_TEMP_DIR\"",
        outside.path().display()
    );
    let r = a.bash(&s, json!({"command": cmd}));
    assert!(data(&r)["temporary"]["problem"].is_string(), "{r}");
    assert_eq!(data(&r)["temporary"]["over_budget"], true);
    let r = a.bash(&s, json!({"command": "echo hi"}));
    assert_eq!(sc(&r)["errorCode"], "temporary_budget_exceeded", "{r}");
    let r = release(
        &mut a,
        &s,
        &json!("0"),
        json!([{"path": dir.join("keep"), "revision": "sha256:0"}]),
    );
    assert_eq!(sc(&r)["errorCode"], "temporary_release_blocked", "{r}");
    // Removing the link (rm does not follow it) recovers: the directory is made again.
    let r = a.bash(&s, json!({"command": "rm \"$WINX_TEMP_DIR\""}));
    assert_eq!(data(&r)["temporary"]["recreated"], true, "{r}");
    assert!(std::fs::symlink_metadata(&dir).unwrap().is_dir());
    let r = a.bash(&s, json!({"command": "echo hi"}));
    assert!(text(&r).starts_with("hi"), "{r}");
    assert!(outside.path().join("keep").exists());
    // Deleted whole by the agent: made again, commands run.
    let r = a.bash(&s, json!({"command": "rm -rf .winx"}));
    assert_eq!(data(&r)["temporary"]["recreated"], true, "{r}");
    assert!(dir.is_dir());
}

/// A command is judged where the shell is when it runs, not where this adapter last saw
/// it: another adapter on the same session moves the shell between two calls. The
/// adapter judges against what it remembers and sends that along; the guardian refuses
/// a command whose remembered directory no longer holds, and the adapter judges again.
#[test]
fn a_command_is_judged_where_the_shell_is_now_not_where_it_was() {
    let mut a = spawn("daemon");
    let s = a.first_call();
    std::fs::create_dir(a.workspace.join("sub")).unwrap();
    let r = a.bash(&s, json!({"command": "true"}));
    assert!(sc(&r)["errorCode"].is_null(), "{r}");
    let mut b = support::restart_adapter(&a, "daemon");
    let sb = b.first_call();
    assert_eq!(sb["data"]["thread_id"], s["data"]["thread_id"], "{sb}");
    let r = b.bash(&sb, json!({"command": "cd sub"}));
    assert!(sc(&r)["errorCode"].is_null(), "{r}");
    // A scratch name is refused at the project root only: in sub/ it is an ordinary file.
    let r = a.bash(&s, json!({"command": "echo x > scratch.txt; pwd"}));
    assert!(sc(&r)["errorCode"].is_null(), "{r}");
    assert!(a.workspace.join("sub/scratch.txt").exists(), "{r}");
    let r = b.bash(&sb, json!({"command": "cd .."}));
    assert!(sc(&r)["errorCode"].is_null(), "{r}");
    // A last saw the shell in sub/; it is at the root now.
    let r = a.bash(&s, json!({"command": "echo x > scratch.txt"}));
    assert_eq!(sc(&r)["errorCode"], "temporary_artifact_policy", "{r}");
    assert!(!a.workspace.join("scratch.txt").exists(), "nothing was run");
    let r = a.bash(&s, json!({"command": "pwd"}));
    assert!(text(&r).starts_with(&a.ws()), "{r}");
}

/// The refusal's next action is the call that would pass: the same command writing under
/// `$WINX_TEMP_DIR` (issue 38 item 10); sent as given, it runs.
#[test]
fn a_bypass_refusal_gives_the_call_that_passes() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    let sys = format!("/tmp/winx-retry-{}.txt", std::process::id());
    let r = a.bash(&s, json!({"command": format!("echo retried > {sys}")}));
    assert_eq!(sc(&r)["errorCode"], "temporary_artifact_policy", "{r}");
    let next = &sc(&r)["nextAction"];
    assert_eq!(next["tool"], "BashCommand", "{r}");
    let command = next["arguments"]["action_json"]["command"]
        .as_str()
        .unwrap();
    assert!(command.contains("$WINX_TEMP_DIR/"), "{command}");
    let again = a.call("BashCommand", next["arguments"].clone());
    assert!(sc(&again)["errorCode"].is_null(), "{again}");
    let name = Path::new(&sys)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let r = a.bash(
        &s,
        json!({"command": format!("cat \"$WINX_TEMP_DIR/{name}\"")}),
    );
    assert!(text(&r).starts_with("retried"), "{r}");
    assert!(!Path::new(&sys).exists());
}

/// Issue 36 item 11 through the real binary: `cp -r` (its `-r` was taken for an option
/// value, so the destination was never judged), a wrapped `timeout 5 touch`, a write
/// through `/proc/self/root` and through a workspace link to `/tmp` are refused before
/// anything runs, and each refusal's next action, sent as given, runs (issue 38 item 10).
#[test]
fn writes_behind_options_wrappers_and_links_are_refused_before_they_run() {
    let mut a = spawn("embedded");
    let s = a.first_call();
    let sys = format!("/tmp/winx-item11-{}", std::process::id());
    std::fs::create_dir(a.workspace.join("dir")).unwrap();
    std::fs::write(a.workspace.join("dir/a.txt"), "a\n").unwrap();
    std::os::unix::fs::symlink("/tmp", a.workspace.join("tmplink")).unwrap();
    for (cmd, made) in [
        (format!("cp -r dir {sys}-cp"), format!("{sys}-cp")),
        (
            format!("timeout 5 touch {sys}-touch"),
            format!("{sys}-touch"),
        ),
        (
            format!("echo x > /proc/self/root{sys}-proc"),
            format!("{sys}-proc"),
        ),
        (
            format!("echo x > tmplink/winx-item11-{}-link", std::process::id()),
            format!("{sys}-link"),
        ),
    ] {
        let r = a.bash(&s, json!({"command": cmd}));
        assert_eq!(
            sc(&r)["errorCode"],
            "temporary_artifact_policy",
            "{cmd}: {r}"
        );
        assert!(!Path::new(&made).exists(), "nothing was run: {cmd}");
        let next = &sc(&r)["nextAction"]["arguments"];
        assert!(
            next["action_json"]["command"]
                .as_str()
                .is_some_and(|c| c.contains("$WINX_TEMP_DIR/")),
            "{r}"
        );
        let again = a.call("BashCommand", next.clone());
        assert!(sc(&again)["errorCode"].is_null(), "{cmd}: {again}");
        assert!(!Path::new(&made).exists(), "the retry stays inside: {cmd}");
    }
    let r = a.bash(
        &s,
        json!({"command": "ls \"$WINX_TEMP_DIR\" | sort | tr '\\n' ' '"}),
    );
    let listing = text(&r);
    for end in ["cp", "touch", "proc", "link"] {
        assert!(listing.contains(&format!("-{end} ")), "{listing}");
    }
}
