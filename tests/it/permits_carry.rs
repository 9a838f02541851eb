//! Read permits carry over the session's own edits: after `FileWriteOrEdit`,
//! `MultiFileEdit`, `ApplyPatch`, `EditFiles` or `UndoEdit`, the lines the session had read
//! are still permitted at the new revision (where the change moved them), and so are the
//! lines it wrote; lines it never read still need a read, and a change by someone else
//! still voids the permit (decision 046).

use crate::support;

use serde_json::{Value, json};
use support::{Agent, pair_args, sc};

const NOTES: &str = "alpha\nbeta\ngamma\ndelta\nepsilon\n";

fn block(search: &str, replace: &str) -> String {
    format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE")
}

fn read(a: &mut Agent, s: &Value, paths: &[&str]) -> Value {
    let r = a.call("ReadFiles", pair_args(s, json!({"file_paths": paths})));
    assert_eq!(r["isError"], false, "{r}");
    r
}

fn edit(a: &mut Agent, s: &Value, path: &str, text: &str) -> Value {
    a.call(
        "FileWriteOrEdit",
        pair_args(
            s,
            json!({"file_path": path, "text_or_search_replace_blocks": text}),
        ),
    )
}

fn replace_whole(a: &mut Agent, s: &Value, path: &str, content: &str) -> Value {
    a.call(
        "EditFiles",
        pair_args(
            s,
            json!({"files": [{"file_path": path, "mode": "replace", "content": content}]}),
        ),
    )
}

fn completed(r: &Value) {
    assert_eq!(sc(r)["status"], "completed", "{r}");
}

/// The ranges a `needs_read` answer asks for, as "a-b" strings.
fn required(r: &Value) -> Vec<String> {
    assert_eq!(sc(r)["errorCode"], "read_required", "{r}");
    let text = sc(r)["requiredReads"].to_string();
    let mut out = Vec::new();
    for item in sc(r)["requiredReads"].as_array().into_iter().flatten() {
        for range in item["ranges"].as_array().into_iter().flatten() {
            out.push(
                range
                    .as_str()
                    .map_or_else(|| range.to_string(), str::to_string),
            );
        }
    }
    assert!(!out.is_empty(), "no ranges in {text}");
    out
}

/// The README's "Tools by example" sequence on a 5-line file: read, search/replace, undo,
/// line patch at the read revision, a multi-file edit, then a whole-file replace. Every
/// line was read or written by the session, so the replace needs no new read (it was
/// refused `read_required` for lines 2-5 before the fix).
#[test]
fn the_readme_edit_sequence_ends_in_a_permitted_whole_file_replace() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("notes.txt"), NOTES).unwrap();
    std::fs::create_dir_all(a.workspace.join("src")).unwrap();
    std::fs::write(
        a.workspace.join("src/lib.rs"),
        "fn greet() -> &'static str {\n    \"hello\"\n}\n",
    )
    .unwrap();
    let r = read(&mut a, &s, &["notes.txt", "src/lib.rs"]);
    let rev = sc(&r)["data"]["files"][0]["revision"].clone();
    completed(&edit(&mut a, &s, "notes.txt", &block("beta", "BETA")));
    completed(&a.call("UndoEdit", pair_args(&s, json!({}))));
    let patch = json!([{"start_line": 3, "delete_lines": 1, "replacement": "GAMMA\n"}]);
    completed(&a.call(
        "ApplyPatch",
        pair_args(
            &s,
            json!({"file_path": "notes.txt", "expected_revision": rev, "patches": patch}),
        ),
    ));
    completed(&a.call(
        "MultiFileEdit",
        pair_args(
            &s,
            json!({"edits": [
                {"file_path": "notes.txt", "text_or_search_replace_blocks": block("alpha", "ALPHA")},
                {"file_path": "src/lib.rs", "text_or_search_replace_blocks": block("    \"hello\"", "    \"hi\"")}]}),
        ),
    ));
    let r = replace_whole(&mut a, &s, "notes.txt", "one\ntwo\n");
    completed(&r);
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
}

/// Narrowed: a search/replace alone kept only the lines it wrote (line 2); the read lines
/// around it were lost at the new revision.
#[test]
fn a_search_replace_keeps_the_lines_read_before_it() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("notes.txt"), NOTES).unwrap();
    read(&mut a, &s, &["notes.txt"]);
    completed(&edit(
        &mut a,
        &s,
        "notes.txt",
        &block("beta", "BETA\nBETA2"),
    ));
    // The lines below the change moved down by one and are still permitted there.
    completed(&edit(&mut a, &s, "notes.txt", &block("epsilon", "EPSILON")));
    completed(&replace_whole(&mut a, &s, "notes.txt", "x\n"));
}

/// Narrowed: an undo granted nothing at the restored revision. On a file the session
/// created (no stored read permit to fall back on), the restored lines were unread.
#[test]
fn an_undo_keeps_the_permit_of_the_restored_lines() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    completed(&replace_whole(&mut a, &s, "made.txt", NOTES));
    completed(&edit(&mut a, &s, "made.txt", &block("gamma", "GAMMA")));
    completed(&a.call("UndoEdit", pair_args(&s, json!({"file_path": "made.txt"}))));
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("made.txt")).unwrap(),
        NOTES
    );
    completed(&edit(&mut a, &s, "made.txt", &block("gamma", "G")));
    completed(&replace_whole(&mut a, &s, "made.txt", "x\n"));
}

/// What the session never read stays unread through its edits (exact ranges, moved with
/// the change), and a change by someone else voids everything.
#[test]
fn unread_lines_and_foreign_changes_still_need_a_read() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let path = a.workspace.join("long.txt");
    std::fs::write(&path, &body).unwrap();
    read(&mut a, &s, &["long.txt:1-10"]);
    // Two lines in place of line 3: the unread lines 11-20 are now 12-21.
    completed(&edit(
        &mut a,
        &s,
        "long.txt",
        &block("line 3", "line 3a\nline 3b"),
    ));
    let r = replace_whole(&mut a, &s, "long.txt", "x\n");
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    assert_eq!(required(&r), vec!["12-21".to_string()], "{r}");
    read(&mut a, &s, &["long.txt:12-21"]);
    // Someone else changes the file: the permits of the session's revision count for
    // nothing.
    let now = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, now.replace("line 20", "line twenty")).unwrap();
    let r = replace_whole(&mut a, &s, "long.txt", "x\n");
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    assert_eq!(required(&r), vec!["1-21".to_string()], "{r}");
    assert_ne!(std::fs::read_to_string(&path).unwrap(), "x\n");
}

/// A line patch holds the lines it wrote and what was read, not the whole file (it granted
/// every line of the new revision before decision 046).
#[test]
fn a_line_patch_does_not_permit_lines_never_read() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("notes.txt"), NOTES).unwrap();
    let r = read(&mut a, &s, &["notes.txt:2-3"]);
    let rev = sc(&r)["data"]["files"][0]["revision"].clone();
    let patch = json!([{"start_line": 3, "delete_lines": 1, "replacement": "GAMMA\nGAMMA2\n"}]);
    completed(&a.call(
        "ApplyPatch",
        pair_args(
            &s,
            json!({"file_path": "notes.txt", "expected_revision": rev, "patches": patch}),
        ),
    ));
    let r = replace_whole(&mut a, &s, "notes.txt", "x\n");
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    // Line 1 was the diff's context (shown); delta and epsilon (now 5-6) were never read.
    assert_eq!(required(&r), vec!["5-6".to_string()], "{r}");
}
