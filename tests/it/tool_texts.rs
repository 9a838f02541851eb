//! The texts agents read, pinned by golden files (`tests/golden/*.txt`): the wording of a
//! command result, a file read, an edit and a SEARCH miss is the contract with the model.
//! Temp paths and revisions are normalised; `WINX_UPDATE_GOLDEN=1` rewrites the files.

use crate::support;

use serde_json::json;
use support::golden::{agent_text, assert_golden};
use support::{Agent, pair_args, sc};

const FILE: &str = "alpha\nbeta\ngamma\n";

fn search_replace(search: &str, replace: &str) -> String {
    format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n")
}

#[test]
fn a_command_result_reads_as_pinned() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let r = a.bash(&s, json!({"command": "echo hello"}));
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_golden("bash_echo", &agent_text(&a, &r));
}

#[test]
fn a_file_read_reads_as_pinned() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("a.txt"), FILE).unwrap();
    let r = a.call("ReadFiles", pair_args(&s, json!({"file_paths": ["a.txt"]})));
    assert_eq!(r["isError"], false, "{r}");
    assert_golden("read_files", &agent_text(&a, &r));
}

#[test]
fn an_edit_and_a_new_file_read_as_pinned() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("a.txt"), FILE).unwrap();
    a.call("ReadFiles", pair_args(&s, json!({"file_paths": ["a.txt"]})));
    let edit = |body: String, path: &str| json!({"file_path": path, "text_or_search_replace_blocks": body});
    let r = a.call(
        "FileWriteOrEdit",
        pair_args(&s, edit(search_replace("beta", "BETA"), "a.txt")),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_golden("edit_search_replace", &agent_text(&a, &r));
    let r = a.call(
        "FileWriteOrEdit",
        pair_args(&s, edit("fresh\n".into(), "new.txt")),
    );
    assert_eq!(sc(&r)["status"], "completed", "{r}");
    assert_golden("write_new_file", &agent_text(&a, &r));
}

#[test]
fn a_search_miss_reads_as_pinned() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("a.txt"), FILE).unwrap();
    a.call("ReadFiles", pair_args(&s, json!({"file_paths": ["a.txt"]})));
    let r = a.call(
        "FileWriteOrEdit",
        pair_args(
            &s,
            json!({"file_path": "a.txt",
                   "text_or_search_replace_blocks": search_replace("delta", "DELTA")}),
        ),
    );
    assert_eq!(sc(&r)["errorCode"], "search_block_not_found", "{r}");
    assert_golden("search_miss", &agent_text(&a, &r));
    assert_eq!(
        std::fs::read_to_string(a.workspace.join("a.txt")).unwrap(),
        FILE
    );
}
