//! A history database that cannot grow (the adapter's file-size limit is lowered under
//! it, as a full disk would): `Execution` answers a structured, retryable
//! `history_unavailable`, commands keep running, and once space is back every command
//! and byte is recorded.

use crate::support;

use serde_json::json;
use support::history::{exec, id_of, read_all, spawn_with, until_recorded};
use support::sc;

fn prlimit(pid: u32, fsize: &str) {
    let out = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--fsize={fsize}:")])
        .output()
        .expect("prlimit (util-linux) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_full_history_database_is_a_clear_error_and_loses_nothing() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let kept = id_of(&a.bash(&s, json!({"command": "echo kept"})));
    until_recorded(&mut a, &s, &kept);
    // No file of the adapter may grow past 4 KiB: every SQLite write now fails.
    prlimit(a.pid(), "4096");
    let during = id_of(&a.bash(&s, json!({"command": "seq 1 3000 | sed s/^/n/"})));
    let r = exec(&mut a, &s, json!({"type": "list"}));
    assert_eq!(sc(&r)["errorCode"], "history_unavailable", "{r}");
    assert_eq!(sc(&r)["retryable"], true, "{r}");
    // The server is alive and still runs commands.
    let r = a.bash(&s, json!({"command": "echo still-serving"}));
    assert!(support::text(&r).contains("still-serving"), "{r}");
    prlimit(a.pid(), "unlimited");
    until_recorded(&mut a, &s, &during);
    let want: String = (1..=3000).map(|i| format!("n{i}\n")).collect();
    assert_eq!(read_all(&mut a, &s, &during), want);
    assert_eq!(read_all(&mut a, &s, &kept), "kept\n");
}
