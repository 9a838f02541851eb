//! Edits from several adapters at once, and adapters killed mid-commit, through the real
//! binary: no acknowledged edit is ever lost, and a crashed writer's temp files do not
//! outlive it.

use crate::support;

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use support::{Agent, HARD_TIMEOUT, Opts, pair_args, sc};

fn block(search: &str, replace: &str) -> String {
    format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n")
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

/// An adapter on a shared state directory and workspace (both owned by the test).
fn adapter(state: &Path, workspace: &Path) -> Agent {
    Agent::spawn_with(Opts {
        state: Some(state.to_path_buf()),
        workspace: Some(workspace.to_path_buf()),
        ..Default::default()
    })
}

/// Read-then-edit rounds per adapter (the reproduction used 60).
const ROUNDS: usize = 60;

/// `ROUNDS` times: read the file, then add this adapter's tag above `end`. Returns the
/// tags the server acknowledged as committed, and every refusal's error code.
fn tag_rounds(mut a: Agent, s: &Value, tag: &str, start: &Barrier) -> (Vec<String>, Vec<String>) {
    start.wait();
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        let r = a.call("ReadFiles", pair_args(s, json!({"file_paths": ["f.txt"]})));
        assert_eq!(r["isError"], false, "{r}");
        let line = format!("{tag}-{i}");
        let r = edit(&mut a, s, "f.txt", &block("end", &format!("{line}\nend")));
        if sc(&r)["status"] == "completed" {
            acked.push(line);
        } else {
            refused.push(sc(&r)["errorCode"].as_str().unwrap_or("?").to_string());
        }
    }
    (acked, refused)
}

#[test]
fn two_adapters_editing_one_file_never_lose_an_acknowledged_edit() {
    let root = tempfile::tempdir().unwrap();
    let (state, ws) = (root.path().join("state"), root.path().join("project"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("f.txt"), "begin\nend\n").unwrap();
    let start = Arc::new(Barrier::new(2));
    let runs: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|tag| {
            // One after the other: two first calls racing on a fresh state directory is
            // another matter (both would create the database).
            let mut a = adapter(&state, &ws);
            let s = a.first_call();
            assert_eq!(s["status"], "completed", "{s}");
            let start = start.clone();
            std::thread::spawn(move || tag_rounds(a, &s, tag, &start))
        })
        .collect();
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for r in runs {
        let (a, r) = r.join().expect("an adapter thread panicked");
        acked.extend(a);
        refused.extend(r);
    }
    eprintln!(
        "{} edits acknowledged, {} refused",
        acked.len(),
        refused.len()
    );
    let file = std::fs::read_to_string(ws.join("f.txt")).unwrap();
    let present: BTreeSet<&str> = file.lines().collect();
    let missing: Vec<&String> = acked
        .iter()
        .filter(|t| !present.contains(t.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged edits missing from the file: {missing:?}",
        missing.len(),
        acked.len()
    );
    // Every tag in the file was acknowledged (nothing committed behind a refusal).
    assert_eq!(present.len() - 2, acked.len(), "{file}");
    // A refusal is a stale read permit, answered with the read it needs.
    assert!(
        refused.iter().all(|c| c == "read_required"),
        "unexpected refusals: {refused:?}"
    );
    assert!(!acked.is_empty());
}

/// Adapters killed with SIGKILL while committing a multi-file edit.
const CRASHES: usize = 8;
/// Files per killed commit: each is a synced temp file, so staging takes long enough to
/// be caught in the middle.
const FILES_PER_EDIT: usize = 24;

/// Our temp files in `dir`.
fn temps(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with('.') && n.contains(".winx-") && n.ends_with(".tmp")
        })
        .collect()
}

/// Start a `FILES_PER_EDIT`-file `MultiFileEdit` in `dir` and SIGKILL the adapter as soon
/// as one of its temp files appears (mid-commit). An edit that finishes before that is
/// followed by another, so every crash lands inside a commit.
fn crash_mid_commit(a: &mut Agent, s: &Value, dir: &Path, round: usize) {
    let body = "x".repeat(48 * 1024);
    let before = temps(dir);
    let deadline = Instant::now() + HARD_TIMEOUT;
    for attempt in 0.. {
        let edits: Vec<Value> = (0..FILES_PER_EDIT)
            .map(|j| {
                json!({"file_path": format!("src/gen-{round}-{attempt}-{j}.txt"),
                            "text_or_search_replace_blocks": body})
            })
            .collect();
        let id = a.fresh_id();
        a.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "MultiFileEdit", "arguments": pair_args(s, json!({"edits": edits}))}}));
        loop {
            assert!(
                Instant::now() < deadline,
                "no commit was caught in progress"
            );
            if temps(dir).difference(&before).next().is_some() {
                a.kill9();
                return;
            }
            if a.recv_within(Duration::ZERO).is_some() {
                break; // finished before a temp file was seen: try again
            }
            std::thread::yield_now();
        }
    }
}

#[test]
fn temp_files_of_killed_adapters_are_removed_by_the_next_commit_in_their_directory() {
    let root = tempfile::tempdir().unwrap();
    let (state, ws) = (root.path().join("state"), root.path().join("project"));
    let dir = ws.join("src");
    std::fs::create_dir_all(&dir).unwrap();
    let mut left = BTreeSet::new();
    for round in 0..=CRASHES {
        let mut a = adapter(&state, &ws);
        let s = a.first_call();
        // Every earlier adapter is dead (killed and reaped): after this adapter's first
        // commit in the directory, no temp file may be left there.
        let r = edit(&mut a, &s, &format!("src/check-{round}.txt"), "checked\n");
        assert_eq!(sc(&r)["status"], "completed", "{r}");
        left.extend(temps(&dir));
        if round < CRASHES {
            crash_mid_commit(&mut a, &s, &dir, round);
        }
    }
    assert!(
        left.is_empty(),
        "after {CRASHES} adapters killed mid-commit, the next commits left {} temp files of \
         dead writers: {left:?}",
        left.len()
    );
    let intents = std::fs::read_dir(state.join("commits"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(intents, 0, "commit intents of dead writers were left");
}
