//! A write the sandbox refuses (issue 36 item 14), through the real binary: a file tool
//! allowed by `WINX_ALLOW_PATHS` to reach a directory the Landlock sandbox keeps
//! read-only gets `EACCES` while staging; nothing was committed, so the answer is
//! `permission_denied` with a next action, never `partial_commit`.

use crate::support;

use serde_json::json;
use std::path::Path;
use support::{Agent, Opts, pair_args, sc};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_sandbox_refused_write_is_not_a_partial_commit() {
    if !support::landlock_available() {
        // tests/it/sandbox.rs covers the kernel requirement error.
        return;
    }
    // Outside everything the sandbox allows (not in `/tmp`, which it keeps writable,
    // wherever the checkout lives).
    let root = support::sandbox::scratch_dir();
    let [ws, ro] = ["ws", "ro"].map(|d| root.path().join(d));
    for d in [&ws, &ro] {
        std::fs::create_dir(d).unwrap();
    }
    let (ws, ro) = (ws.canonicalize().unwrap(), ro.canonicalize().unwrap());
    let notes = ro.join("notes.txt");
    std::fs::write(&notes, "read-only notes\n").unwrap();
    let env = [
        ("WINX_SANDBOX", "1"),
        ("WINX_SANDBOX_WORKSPACE", s(&ws)),
        ("WINX_SANDBOX_RO_PATHS", s(&ro)),
        ("WINX_ALLOW_PATHS", s(&ro)),
    ];
    let mut a = Agent::spawn_with(Opts {
        workspace: Some(ws.clone()),
        env: &env,
        ..Default::default()
    });
    let pair = a.first_call();
    assert_eq!(pair["status"], "completed", "{pair}");
    let r = a.call(
        "ReadFiles",
        pair_args(&pair, json!({"file_paths": [s(&notes)]})),
    );
    assert_eq!(r["isError"], false, "{r}");
    let r = a.call(
        "FileWriteOrEdit",
        pair_args(
            &pair,
            json!({"file_path": s(&notes), "text_or_search_replace_blocks":
                "<<<<<<< SEARCH\nread-only notes\n=======\nchanged\n>>>>>>> REPLACE\n"}),
        ),
    );
    let e = sc(&r);
    assert_eq!(e["errorCode"], "permission_denied", "{r}");
    assert_eq!(e["data"]["edit_applied"], false, "{r}");
    assert_eq!(e["data"]["committed"], json!([]), "{r}");
    assert_eq!(e["nextAction"]["tool"], "BashCommand", "{r}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("nothing was written"),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "read-only notes\n"
    );
}
