//! An embedded `serve --http` ends its sessions when it exits: a SIGTERM drains the
//! requests, then every embedded guardian is shut down (SIGTERM, grace, SIGKILL), so even
//! the shells' detached children end with the server, as they do with a stdio adapter.

use crate::support;
use crate::support::http as http_support;

use http_support::*;
use serde_json::json;
use std::time::Duration;
use support::processes_mentioning;
use support::wait::{Deadline, eventually};

#[test]
fn sigterm_ends_an_embedded_servers_sessions_and_their_detached_children() {
    let home = Home::new();
    let tag = home.dir.path().join("orphan");
    let mut s = Server::start_in(home, &[], &[("WINX_RUNTIME", "embedded")], true);
    let ws = path_str(&s.home.workspace);
    let first = json!({"type": "first_call", "workspace_root": ws});
    let d = s.call(TOKEN, "Initialize", first)["structuredContent"]["data"].clone();
    let cmd = format!(
        "nohup bash -c 'exec -a {} sleep 1000' >/dev/null 2>&1 & disown; true",
        tag.display()
    );
    let args = json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"],
                      "action_json": {"command": cmd}});
    let r = s.call(TOKEN, "BashCommand", args);
    assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    let started = Deadline::after("detached child started", Duration::from_secs(10));
    eventually(
        started,
        "one detached child",
        || processes_mentioning(&tag).len(),
        |n| *n == 1,
    );
    s.signal(nix::sys::signal::Signal::SIGTERM);
    let status = s.wait_exit(Duration::from_secs(20)).expect("server exited");
    assert!(status.success(), "{status:?}\n{}", s.stderr_log());
    let ended = Deadline::after("detached child ended", Duration::from_secs(10));
    eventually(
        ended,
        "no detached child",
        || processes_mentioning(&tag),
        |left| left.is_empty(),
    );
}
