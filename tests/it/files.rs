//! ReadFiles and FileWriteOrEdit through the real binary.

use crate::support;

use serde_json::{Value, json};
use support::{Agent, Opts, pair_args, sc, text};

fn read(a: &mut Agent, s: &Value, paths: &[&str]) -> Value {
    a.call("ReadFiles", pair_args(s, json!({"file_paths": paths})))
}

fn edit(a: &mut Agent, s: &Value, path: &str, body: &str) -> Value {
    a.call(
        "FileWriteOrEdit",
        pair_args(
            s,
            json!({"file_path": path, "text_or_search_replace_blocks": body}),
        ),
    )
}

fn block(search: &str, replace: &str) -> String {
    format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n")
}

#[test]
fn read_files_numbers_lines_and_reports_revisions_and_ranges() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(a.workspace.join("a.txt"), &body).unwrap();
    let r = read(&mut a, &s, &["a.txt:3-4"]);
    assert_eq!(r["isError"], false, "{r}");
    let t = text(&r);
    assert!(
        t.contains("3 line 3\n") && t.contains("4 line 4\n") && !t.contains("line 5"),
        "{t}"
    );
    let f = &sc(&r)["data"]["files"][0];
    assert_eq!(f["totalLines"], 10);
    assert_eq!(f["ranges"], json!(["3-4"]));
    let rev = f["revision"].as_str().unwrap();
    assert!(rev.starts_with("sha256:") && rev.len() == 71);
    // A batch with failures keeps the successful content and says isError.
    std::fs::write(a.workspace.join("bin.dat"), b"\x00\x01\x02").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", a.workspace.join("escape")).unwrap();
    let r = read(
        &mut a,
        &s,
        &["a.txt", "missing.txt", "bin.dat", ".", "escape"],
    );
    assert_eq!(r["isError"], true);
    let d = &sc(&r)["data"];
    assert_eq!(
        (d["successful_files"].clone(), d["failed_files"].clone()),
        (json!(1), json!(4))
    );
    assert!(text(&r).contains("10 line 10"));
    let codes: Vec<&str> = d["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["errorCode"].as_str().unwrap())
        .collect();
    assert_eq!(codes.len(), 4, "{codes:?}");
    assert!(codes.contains(&"path_outside_allowed_roots"), "{codes:?}");
}

#[test]
fn edits_need_a_read_and_apply_search_replace() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let path = a.workspace.join("lib.rs");
    std::fs::write(
        &path,
        "fn a() {\n    one();\n}\n\nfn b() {\n    two();\n}\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let r = edit(&mut a, &s, "lib.rs", &block("    two();", "    three();"));
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    assert_eq!(sc(&r)["errorCode"], "read_required");
    assert_eq!(sc(&r)["requiredReads"][0]["path"], path.to_str().unwrap());
    let next = &sc(&r)["nextAction"];
    assert_eq!(next["tool"], "ReadFiles");
    assert_eq!(
        std::fs::read_to_string(&path)
            .unwrap()
            .matches("two")
            .count(),
        1,
        "nothing written"
    );
    // Perform exactly the required read, then the same edit succeeds.
    let files: Vec<String> = next["arguments"]["file_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let refs: Vec<&str> = files.iter().map(String::as_str).collect();
    read(&mut a, &s, &refs);
    let r = edit(&mut a, &s, "lib.rs", &block("two();", "three();"));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert!(
        text(&r).contains("-    two();") && text(&r).contains("+    three();"),
        "{}",
        text(&r)
    );
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("    three();")
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o640, "permissions kept");
}

#[test]
fn search_conflicts_are_reported_precisely_and_escalate() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("x.py"), "a = 1\nb = 2\na = 1\nc = 3\n").unwrap();
    read(&mut a, &s, &["x.py"]);
    let r = edit(&mut a, &s, "x.py", &block("a = 1", "a = 9"));
    assert_eq!(sc(&r)["errorCode"], "search_block_ambiguous", "{r}");
    let r = edit(&mut a, &s, "x.py", &block("c = 4", "c = 5"));
    assert_eq!(sc(&r)["errorCode"], "search_block_not_found", "{r}");
    assert_eq!(sc(&r)["status"], "conflict");
    assert!(
        text(&r).contains("c = 3"),
        "closest region shown: {}",
        text(&r)
    );
    let r = edit(
        &mut a,
        &s,
        "x.py",
        "<<<<<<< SEARCH\nb = 2\n>>>>>>> REPLACE\n",
    );
    assert_eq!(sc(&r)["errorCode"], "search_block_malformed", "{r}");
    assert!(text(&r).contains("======="), "the correct format is shown");
    let r = edit(&mut a, &s, "x.py", &block("d = 4", "d = 5"));
    assert_eq!(sc(&r)["errorCode"], "recovery_exhausted", "{r}");
    assert!(sc(&r)["nextAction"].is_null());
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("x.py")).unwrap(),
        "a = 1\nb = 2\na = 1\nc = 3\n"
    );
}

#[test]
fn new_files_stale_revisions_and_modes() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let r = edit(&mut a, &s, "src/new.rs", "pub fn f() {}\n");
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("src/new.rs")).unwrap(),
        "pub fn f() {}\n"
    );
    // Changed behind our back: the old read no longer permits the edit.
    read(&mut a, &s, &["src/new.rs"]);
    std::fs::write(
        a.workspace.join("src/new.rs"),
        "pub fn f() {}\npub fn g() {}\n",
    )
    .unwrap();
    let r = edit(
        &mut a,
        &s,
        "src/new.rs",
        &block("pub fn f() {}", "pub fn h() {}"),
    );
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    let tid = s["data"]["thread_id"].clone();
    let ws = s["data"]["workspace_root"].clone();
    a.call("Initialize", json!({"type": "user_asked_mode_change", "thread_id": tid, "workspace_root": ws, "mode": "architect"}));
    let r = edit(&mut a, &s, "other.rs", "x");
    assert_eq!(sc(&r)["errorCode"], "path_not_allowed", "{r}");
    let r = edit(&mut a, &s, "/etc/winx-should-not-exist", "x");
    assert_eq!(sc(&r)["status"], "policy_blocked");
}

#[test]
fn two_agents_editing_one_file_one_wins() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let mut b = Agent::spawn_with(Opts {
        workspace: Some(a.workspace.clone()),
        ..Default::default()
    });
    let sb = b.first_call();
    std::fs::write(a.workspace.join("f.txt"), "alpha\nbeta\n").unwrap();
    read(&mut a, &s, &["f.txt"]);
    read(&mut b, &sb, &["f.txt"]);
    let ra = edit(&mut a, &s, "f.txt", &block("alpha", "ALPHA"));
    assert_eq!(sc(&ra)["status"], "completed");
    let rb = edit(&mut b, &sb, "f.txt", &block("beta", "BETA"));
    assert_eq!(sc(&rb)["status"], "needs_read", "{rb}");
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("f.txt")).unwrap(),
        "ALPHA\nbeta\n"
    );
}

#[test]
fn verify_command_runs_after_a_commit() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let ok = a.call(
        "FileWriteOrEdit",
        pair_args(
            &s,
            json!({"file_path": "t.sh", "text_or_search_replace_blocks": "exit 0\n",
        "verify_command": "bash t.sh"}),
        ),
    );
    assert_eq!(sc(&ok)["status"], "completed", "{ok}");
    read(&mut a, &s, &["t.sh"]);
    let bad = a.call(
        "FileWriteOrEdit",
        pair_args(
            &s,
            json!({"file_path": "t.sh",
        "text_or_search_replace_blocks": block("exit 0", "exit 4"), "verify_command": "bash t.sh"}),
        ),
    );
    let e = sc(&bad);
    assert_eq!(
        (e["status"].clone(), e["errorCode"].clone()),
        (json!("completed_with_issues"), json!("verification_failed")),
        "{bad}"
    );
    assert_eq!(bad["isError"], false);
    assert_eq!(e["data"]["edit_applied"], true);
    assert_eq!(e["data"]["verification"]["exit_code"], 4);
    assert_eq!(e["nextAction"]["tool"], "VerifyEdit");
    assert_eq!(e["nextAction"]["arguments"]["verify_command"], "bash t.sh");
    // The next action reruns only the check.
    let args = e["nextAction"]["arguments"].clone();
    let again = a.call("VerifyEdit", args);
    assert_eq!(sc(&again)["errorCode"], "verification_failed", "{again}");
    std::fs::write(a.workspace.join("t.sh"), "exit 0\n").unwrap();
    let fixed = a.call(
        "VerifyEdit",
        pair_args(&s, json!({"verify_command": "bash t.sh"})),
    );
    assert_eq!(sc(&fixed)["status"], "completed", "{fixed}");
}

#[test]
fn undo_restores_the_last_edit_unless_changed_since() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("u.txt"), "before\n").unwrap();
    read(&mut a, &s, &["u.txt"]);
    edit(&mut a, &s, "u.txt", &block("before", "after"));
    edit(&mut a, &s, "created.txt", "new\n");
    let r = a.call("UndoEdit", pair_args(&s, json!({"file_path": "u.txt"})));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("u.txt")).unwrap(),
        "before\n"
    );
    std::fs::write(a.workspace.join("created.txt"), "changed by someone\n").unwrap();
    let r = a.call("UndoEdit", pair_args(&s, json!({})));
    assert_eq!(sc(&r)["errorCode"], "undo_refused", "{r}");
    // EditFiles carries undo too.
    edit(&mut a, &s, "third.txt", "3\n");
    let r = a.call(
        "EditFiles",
        pair_args(
            &s,
            json!({"operation": "undo", "files": [{"file_path": "third.txt"}]}),
        ),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert!(!a.workspace.join("third.txt").exists());
    assert!(a.workspace.join("created.txt").exists());
}

#[test]
fn multi_file_edit_is_all_or_nothing() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("one.txt"), "1\n").unwrap();
    std::fs::write(a.workspace.join("two.txt"), "2\n").unwrap();
    read(&mut a, &s, &["one.txt", "two.txt"]);
    let r = a.call(
        "MultiFileEdit",
        pair_args(
            &s,
            json!({"edits": [
        {"file_path": "one.txt", "text_or_search_replace_blocks": block("1", "one")},
        {"file_path": "two.txt", "text_or_search_replace_blocks": block("missing", "x")}]}),
        ),
    );
    assert_eq!(sc(&r)["errorCode"], "search_block_not_found", "{r}");
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("one.txt")).unwrap(),
        "1\n",
        "nothing written"
    );
    let r = a.call(
        "MultiFileEdit",
        pair_args(
            &s,
            json!({"edits": [
        {"file_path": "one.txt", "text_or_search_replace_blocks": block("1", "one")},
        {"file_path": "two.txt", "text_or_search_replace_blocks": block("2", "two")}]}),
        ),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("two.txt")).unwrap(),
        "two\n"
    );
}

#[test]
fn apply_patch_and_edit_files_use_revisions() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("p.txt"), "a\nb\nc\n").unwrap();
    let r = read(&mut a, &s, &["p.txt"]);
    let rev = sc(&r)["data"]["files"][0]["revision"]
        .as_str()
        .unwrap()
        .to_string();
    let patch = json!([{"start_line": 2, "delete_lines": 1, "replacement": "B"}]);
    let r = a.call(
        "ApplyPatch",
        pair_args(
            &s,
            json!({"file_path": "p.txt", "expected_revision": "sha256:stale", "patches": patch}),
        ),
    );
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    let r = a.call(
        "ApplyPatch",
        pair_args(
            &s,
            json!({"file_path": "p.txt", "expected_revision": rev, "patches": patch}),
        ),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("p.txt")).unwrap(),
        "a\nB\nc\n"
    );
    // A patch past the end of the file is malformed (not a request to read lines that do
    // not exist), however large its numbers.
    let rev = sc(&read(&mut a, &s, &["p.txt"]))["data"]["files"][0]["revision"].clone();
    for bad in [
        json!([{"start_line": 1, "delete_lines": u64::MAX}]),
        json!([{"start_line": 5, "delete_lines": 1, "replacement": "x"}]),
    ] {
        let r = a.call(
            "ApplyPatch",
            pair_args(
                &s,
                json!({"file_path": "p.txt", "expected_revision": rev, "patches": bad}),
            ),
        );
        assert_eq!(sc(&r)["errorCode"], "invalid_patch", "{r}");
        assert!(
            sc(&r)["message"]
                .as_str()
                .unwrap()
                .contains("beyond the end")
        );
    }
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("p.txt")).unwrap(),
        "a\nB\nc\n"
    );
    let r = a.call(
        "EditFiles",
        pair_args(
            &s,
            json!({"files": [
        {"file_path": "p.txt", "mode": "search_replace", "search_replace": block("c", "C")},
        {"file_path": "q.txt", "mode": "replace", "content": "new\n"}]}),
        ),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("p.txt")).unwrap(),
        "a\nB\nC\n"
    );
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("q.txt")).unwrap(),
        "new\n"
    );
    let r = a.call(
        "ApplyPatch",
        pair_args(
            &s,
            json!({"file_path": "p.txt", "expected_revision": "x",
        "patches": [{"start_line": 2, "delete_lines": 2}, {"start_line": 3, "delete_lines": 1}]}),
        ),
    );
    assert_ne!(sc(&r)["status"], "completed");
}

#[test]
fn identical_retries_are_replayed_and_changed_targets_refused() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let args = pair_args(
        &s,
        json!({"file_path": "r.txt", "text_or_search_replace_blocks": "v1\n",
        "verify_command": "echo checked >> \"$WINX_TEMP_DIR/verify.log\""}),
    );
    let first = a.call("FileWriteOrEdit", args.clone());
    assert_eq!(sc(&first)["status"], "completed", "{first}");
    let again = a.call("FileWriteOrEdit", args.clone());
    assert_eq!(sc(&again)["data"]["replayed"], true, "{again}");
    // Replayed without writing or verifying again. (The count goes to the managed
    // temporary directory: a new `verify.log` at the project root is a scratch file.)
    let log = std::path::Path::new(s["data"]["temp_dir"].as_str().unwrap()).join("verify.log");
    assert_eq!(std::fs::read_to_string(log).unwrap(), "checked\n");
    std::fs::write(a.workspace.join("r.txt"), "someone else\n").unwrap();
    let stale = a.call("FileWriteOrEdit", args.clone());
    assert_eq!(
        sc(&stale)["errorCode"],
        "mutation_postcondition_changed",
        "{stale}"
    );
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("r.txt")).unwrap(),
        "someone else\n"
    );
    // Concurrent identical calls are single-flight: one commits, the other replays.
    let args2 = pair_args(
        &s,
        json!({"file_path": "c.txt", "text_or_search_replace_blocks": "c\n"}),
    );
    for id in [900, 901] {
        a.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "FileWriteOrEdit", "arguments": args2}}));
    }
    let (r1, r2) = (a.recv(), a.recv());
    let replayed = [&r1, &r2]
        .iter()
        .filter(|r| r["result"]["structuredContent"]["data"]["replayed"] == json!(true))
        .count();
    assert_eq!(replayed, 1, "{r1}\n{r2}");
}

#[test]
fn temp_files_left_by_a_crashed_commit_are_swept_by_the_next_one() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let dir = a.workspace.join("src");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("m.rs"), "fn a() {}\n").unwrap();
    // What a commit killed between staging and renaming leaves: a synced temp file.
    let crashed = dir.join(".m.rs.winx-00112233aabbccdd.tmp");
    let f = std::fs::File::create(&crashed).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(7200))
        .unwrap();
    // One of a commit still in progress (fresh) must survive.
    let live = dir.join(".m.rs.winx-99887766aabbccdd.tmp");
    std::fs::File::create(&live).unwrap();
    read(&mut a, &s, &["src/m.rs"]);
    let r = edit(&mut a, &s, "src/m.rs", &block("fn a() {}", "fn b() {}"));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert!(!crashed.exists(), "the stale temp file is still there");
    assert!(live.exists(), "a fresh temp file was removed");
    assert_eq!(
        std::fs::read_to_string(dir.join("m.rs")).unwrap(),
        "fn b() {}\n"
    );
}

fn revision(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[test]
fn a_multi_file_commit_cut_by_a_crash_is_finished_by_the_next_adapter() {
    // The state a MultiFileEdit leaves when killed after renaming one of three files: every
    // temp file synced, the intent recorded, `a` renamed, `b` and `c` not yet. Meanwhile the
    // user changed `c` by hand.
    let mut a = Agent::spawn();
    let ws = a.workspace.clone();
    let (old, new) = (["a0\n", "b0\n", "c0\n"], ["a1\n", "b1\n", "c1\n"]);
    let mut entries = Vec::new();
    for (i, name) in ["a.txt", "b.txt", "c.txt"].iter().enumerate() {
        let target = ws.join(name);
        let tmp = ws.join(format!(".{name}.winx-0123456789abcdef.tmp"));
        std::fs::write(&target, old[i]).unwrap();
        std::fs::write(&tmp, new[i]).unwrap();
        entries.push(json!({"target": target, "tmp": tmp,
            "old_revision": revision(old[i].as_bytes()), "new_revision": revision(new[i].as_bytes())}));
    }
    std::fs::rename(
        ws.join(".a.txt.winx-0123456789abcdef.tmp"),
        ws.join("a.txt"),
    )
    .unwrap();
    std::fs::write(ws.join("c.txt"), "edited by hand\n").unwrap();
    let journal = a.state.join("commits");
    std::fs::create_dir_all(&journal).unwrap();
    // The writer is gone: no process has this pid with this start time.
    let intent = json!({"pid": 2147483647u32, "started": 1, "entries": entries});
    std::fs::write(
        journal.join("commit-0011223344556677.json"),
        intent.to_string(),
    )
    .unwrap();
    // The next adapter's first call finishes the commit.
    a.first_call();
    let read = |n: &str| std::fs::read_to_string(ws.join(n)).unwrap();
    assert_eq!(
        (read("a.txt"), read("b.txt")),
        ("a1\n".into(), "b1\n".into())
    );
    assert_eq!(
        read("c.txt"),
        "edited by hand\n",
        "a newer change was overwritten"
    );
    let left: Vec<String> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(std::fs::read_dir(&journal).unwrap().count(), 0);
}
