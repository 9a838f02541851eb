//! 1,000 consecutive commands: no file-descriptor or memory growth in the adapter or the
//! guardian.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::wait::{Deadline, eventually};
use support::{Agent, processes_mentioning};

fn fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_thousand_commands_leak_nothing() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let guardian = processes_mentioning(&a.dir.path().join("run/winx/g"))[0];
    let adapter = a.pid() as i32;
    for i in 0..100 {
        a.bash(&s, json!({"command": format!("echo warm {i}")}));
    }
    let (fd_g, fd_a) = (fds(guardian), fds(adapter));
    let (rss_g, rss_a) = (rss_kib(guardian), rss_kib(adapter));
    for i in 0..1000 {
        let r = a.bash(&s, json!({"command": format!("echo n{i}")}));
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(&format!("n{i}\n")), "{text}");
    }
    // A client connection being torn down can be counted on either side of a sample;
    // a leak would show as hundreds of fds after 1,000 commands.
    assert!(
        fds(guardian) <= fd_g + 1,
        "guardian fds grew: {fd_g} -> {}",
        fds(guardian)
    );
    assert!(
        fds(adapter) <= fd_a + 1,
        "adapter fds grew: {fd_a} -> {}",
        fds(adapter)
    );
    // Each command keeps a small record (journal handle closed, window freed when the
    // next command starts); allow allocator noise, not linear growth.
    assert!(
        rss_kib(guardian) < rss_g + 1024,
        "guardian RSS {} -> {} KiB",
        rss_g,
        rss_kib(guardian)
    );
    assert!(
        rss_kib(adapter) < rss_a + 2048,
        "adapter RSS {} -> {} KiB",
        rss_a,
        rss_kib(adapter)
    );
    // Journals on disk stay bounded too: commands share segment files, so only the
    // segments holding the newest 16 finished commands (at most two), the current one
    // and the spare made ahead remain, once the guardian had an idle moment to delete
    // older ones (it may not have had one yet when the last answer arrives). One file
    // per command, as before segments, would leave 18.
    let sessions = a.state.join("sessions");
    let journals = || -> usize {
        std::fs::read_dir(&sessions)
            .unwrap()
            .flatten()
            .map(|d| {
                std::fs::read_dir(d.path())
                    .unwrap()
                    .flatten()
                    .filter(|f| {
                        let name = f.file_name().to_string_lossy().into_owned();
                        name.starts_with("exec-") || name.starts_with("seg-")
                    })
                    .count()
            })
            .sum()
    };
    let deadline = Deadline::after("idle journal pruning", Duration::from_secs(10));
    eventually(deadline, "journals are pruned to 4", journals, |n| *n <= 4);
}
