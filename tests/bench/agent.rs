//! `cargo bench --bench agent` (`make bench`): native prompts on the real release binary
//! (daemon runtime) to the fake agent TUI (`tests/fake/fake-agent`).
//!
//! - `prompt`: one `Agent prompt` to an idle fake (readiness check in the guardian, the
//!   write, the receipt claimed and stored), inline wait 0; target p50 ≤ 5 ms.
//! - `wake`: `Agent wait` with `prompt_id` and `until: activity` is pending when the fake
//!   draws its first busy frame (it logs that moment, CLOCK_MONOTONIC); the figure is the
//!   time from that frame to the answer; target p50 ≤ 5 ms.
//!
//! A report, not a gate (see `report.rs`).

use serde_json::{Value, json};
use std::time::Duration;

#[path = "report.rs"]
mod report;
use report::{Report, Samples};
#[path = "server.rs"]
mod server;
use server::{Client, Sandbox};

/// Receipts per runtime are capped at 64: 40 prompts and 20 wakes fit one shell.
const PROMPTS: usize = 40;
const WAKES: usize = 20;
const PROMPT_P50_MS: f64 = 5.0;
const WAKE_P50_MS: f64 = 5.0;

fn monotonic_ns() -> u128 {
    let mut t = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec pointer; CLOCK_MONOTONIC always exists on Linux.
    // SAFETY: clock_gettime(2) writes one `timespec` that lives on this frame.
    unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

fn call(c: &mut Client, tool: &str, pair: &Value, extra: Value) -> (Duration, Value) {
    let mut args = pair.clone();
    for (k, v) in extra.as_object().expect("object") {
        args[k] = v.clone();
    }
    let (t, v) = c.timed("tools/call", json!({"name": tool, "arguments": args}));
    (t, v["result"]["structuredContent"].clone())
}

fn wait_outcome(c: &mut Client, pair: &Value, target: &str, prompt_id: &str, want: &str) {
    let w =
        json!({"type": "wait", "target": target, "prompt_id": prompt_id, "timeout_seconds": 10});
    let (_, sc) = call(c, "Agent", pair, json!({"action": w}));
    assert_eq!(sc["data"]["outcome"], want, "{sc}");
}

fn main() {
    let sb = Sandbox::new();
    let mut r = Report::new("agent");
    eprintln!("winx agent bench (sandbox {})", sb.dir.path().display());
    let mut c = Client::start(sb.server("daemon"));
    let first = json!({"type": "first_call", "workspace_root": sb.workspace});
    let (_, sc) = call(&mut c, "Initialize", &json!({}), first);
    let pair = json!({"thread_id": sc["data"]["thread_id"], "workspace_root": sc["data"]["workspace_root"]});
    let log = sb.dir.path().join("fake.log");
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/fake-agent");
    let cmd = format!("python3 {} codex {}", fake.display(), log.display());
    let (_, sc) = call(
        &mut c,
        "BashCommand",
        &pair,
        json!({"action_json": {"command": cmd}, "wait_for_seconds": 0.3}),
    );
    let target = sc["data"]["state"]["execution_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no execution id: {sc}"))
        .to_string();
    let (_, sc) = call(
        &mut c,
        "BashCommand",
        &pair,
        json!({"action_json": {"wait_for_turn": true}}),
    );
    assert_eq!(sc["data"]["turn_state"], "awaiting_input", "{sc}");

    let mut prompts = Vec::new();
    for n in 0..PROMPTS {
        let id = format!("p{n}");
        let action = json!({"type": "prompt", "target": target, "prompt_id": id,
                            "text": format!("work:20 prompt {n}")});
        let (t, sc) = call(&mut c, "Agent", &pair, json!({"action": action}));
        assert_eq!(sc["data"]["delivery"], "delivered", "{sc}");
        prompts.push(t);
        wait_outcome(&mut c, &pair, &target, &id, "awaiting_input");
    }

    let busy = std::path::PathBuf::from(format!("{}.busy", log.display()));
    let mut wakes = Vec::new();
    for n in 0..WAKES {
        let id = format!("w{n}");
        let action = json!({"type": "prompt", "target": target, "prompt_id": id,
                            "text": format!("work:100:50 wake {n}")});
        let (_, sc) = call(&mut c, "Agent", &pair, json!({"action": action}));
        assert_eq!(sc["data"]["delivery"], "delivered", "{sc}");
        let before = std::fs::read_to_string(&busy)
            .unwrap_or_default()
            .lines()
            .count();
        let w = json!({"type": "wait", "target": target, "prompt_id": id, "until": "activity",
                       "timeout_seconds": 10});
        let (_, sc) = call(&mut c, "Agent", &pair, json!({"action": w}));
        let answered = monotonic_ns();
        assert_eq!(sc["data"]["activity_observed"], true, "{sc}");
        let marks = std::fs::read_to_string(&busy).expect("busy marks");
        let lines: Vec<&str> = marks.lines().collect();
        if lines.len() > before {
            let at: u128 = lines[lines.len() - 1].parse().expect("a busy mark");
            wakes.push(Duration::from_nanos(answered.saturating_sub(at) as u64));
        }
        wait_outcome(&mut c, &pair, &target, &id, "awaiting_input");
    }
    let prompts = Samples::new(prompts);
    r.latency("prompt", &prompts, Some(PROMPT_P50_MS));
    r.add("wake.samples", wakes.len() as f64, "", None);
    let wakes = Samples::new(wakes);
    r.latency("wake", &wakes, Some(WAKE_P50_MS));
    drop(c);
    sb.kill_leftovers();
    r.print();
}
