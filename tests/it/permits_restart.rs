//! Read permits outlive the adapter: a host that restarts the stdio server between calls
//! (one process per call) can edit the lines it read in an earlier process, and a file
//! changed in between still asks for a new read.

use crate::support;

use serde_json::{Value, json};
use support::{Agent, Opts, pair_args, sc};

fn read(a: &mut Agent, s: &Value, paths: &[&str]) -> Value {
    a.call("ReadFiles", pair_args(s, json!({"file_paths": paths})))
}

fn edit(a: &mut Agent, s: &Value, path: &str, search: &str, replace: &str) -> Value {
    let body = format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n");
    a.call(
        "FileWriteOrEdit",
        pair_args(
            s,
            json!({"file_path": path, "text_or_search_replace_blocks": body}),
        ),
    )
}

/// A second adapter on the same state directory and workspace (the first one is killed).
fn restart(old: &mut Agent) -> Agent {
    old.kill9();
    Agent::spawn_with(Opts {
        state: Some(old.state.clone()),
        workspace: Some(old.workspace.clone()),
        ..Default::default()
    })
}

#[test]
fn a_read_in_one_adapter_permits_the_edit_in_the_next() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    std::fs::write(a.workspace.join("a.txt"), &body).unwrap();
    std::fs::write(a.workspace.join("b.txt"), &body).unwrap();
    let r = read(&mut a, &s, &["a.txt:1-10", "b.txt"]);
    assert_eq!(r["isError"], false, "{r}");
    let mut b = restart(&mut a);
    let r = edit(&mut b, &s, "a.txt", "line 5", "line five");
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    let r = edit(&mut b, &s, "b.txt", "line 20", "line twenty");
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    // Lines the first adapter never showed still need a read.
    let r = edit(&mut b, &s, "a.txt", "line 15", "line fifteen");
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    assert_eq!(sc(&r)["errorCode"], "read_required", "{r}");
    // The edit made a new revision: the stored permit (of the old one) counts for nothing
    // in a third adapter. Permits an edit grants stay in memory (the edit path writes no
    // permit rows), so the agent reads again there.
    let mut c = restart(&mut b);
    let r = edit(&mut c, &s, "a.txt", "line five", "line 5 again");
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    let r = read(&mut c, &s, &["a.txt:5-5"]);
    assert_eq!(r["isError"], false, "{r}");
    let r = edit(&mut c, &s, "a.txt", "line five", "line 5 again");
    assert_eq!(sc(&r)["status"], "completed", "{r}");
}

/// Reads of one revision in successive adapters add up.
#[test]
fn reads_in_successive_adapters_add_up() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    std::fs::write(a.workspace.join("a.txt"), &body).unwrap();
    assert_eq!(read(&mut a, &s, &["a.txt:1-10"])["isError"], false);
    let mut b = restart(&mut a);
    assert_eq!(read(&mut b, &s, &["a.txt:11-20"])["isError"], false);
    let mut c = restart(&mut b);
    let r = edit(
        &mut c,
        &s,
        "a.txt",
        "line 9\nline 10\nline 11",
        "nine to eleven",
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
}

#[test]
fn a_file_changed_between_adapters_needs_a_new_read() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    std::fs::write(a.workspace.join("a.txt"), &body).unwrap();
    let r = read(&mut a, &s, &["a.txt"]);
    assert_eq!(r["isError"], false, "{r}");
    let mut b = restart(&mut a);
    std::fs::write(b.workspace.join("a.txt"), format!("{body}line 21\n")).unwrap();
    let r = edit(&mut b, &s, "a.txt", "line 5", "line five");
    assert_eq!(sc(&r)["status"], "needs_read", "{r}");
    assert_eq!(sc(&r)["errorCode"], "read_required", "{r}");
    // A new read (in this adapter) permits it again.
    let r = read(&mut b, &s, &["a.txt"]);
    assert_eq!(r["isError"], false, "{r}");
    let r = edit(&mut b, &s, "a.txt", "line 5", "line five");
    assert_eq!(sc(&r)["status"], "completed", "{r}");
}
