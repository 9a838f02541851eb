//! Durable return-final agent requests (issue 15) through the real binaries: a fake Codex
//! (`tests/fake/fake-codex`, real-shaped rollout JSONL under a private CODEX_HOME) runs in
//! a winx session; the operator CLI's `agent` verbs admit prompts to it and read the
//! terminal-event stream, which an attached `request watch` delivers as it is committed.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::codex::Codex;
use support::history::spawn_with;
use support::wait::{Deadline, eventually};

const R1: &str = "fe57dc90-994e-4e73-b09c-fac483d9f05b";
const R2: &str = "0b5e4c36-7c1a-4d8e-9f4e-1a2b3c4d5e6f";
const R3: &str = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f";

#[test]
fn a_return_final_request_gets_its_turns_final_once() {
    let c = Codex::start("");
    let agent = c.agent_in("idle");
    assert_eq!(agent["provider"], "codex");
    assert_eq!(agent["observer_status"], "attached");
    assert_eq!(agent["return_final_ready"], true, "{agent}");
    let w = c.watch(0);
    let (r, code) = c.admit(
        &agent,
        R1,
        "work:50 complete phases 2 and 3",
        &["--return-final"],
    );
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("accepted"), 0),
        "{r}"
    );
    assert_eq!(r["prompt_written"], true);
    assert_eq!(r["reply_pending"], true);
    assert_eq!(r["correlation_source"], "codex_rollout");
    assert_eq!(r["baseline_provider_turn"], "turn-1");
    assert!(r["armed_cursor"].as_u64().unwrap() > 0, "{r}");
    let e = w.next();
    assert_eq!(e["request_id"], R1);
    assert_eq!(e["state"], "completed", "{e}");
    assert_eq!(e["final_message"], "final: work:50 complete phases 2 and 3");
    assert_eq!(e["provider_turn"], "turn-2");
    let seq = e["terminal_event_sequence"].as_i64().unwrap();
    // The same request again: its stored receipt, nothing written.
    let (again, code) = c.admit(
        &agent,
        R1,
        "work:50 complete phases 2 and 3",
        &["--return-final"],
    );
    assert_eq!(
        (again["replayed"].as_bool(), code),
        (Some(true), 0),
        "{again}"
    );
    assert_eq!(again["armed_cursor"], r["armed_cursor"]);
    // The same id with other input: invalid, nothing written.
    let (other, code) = c.admit(&agent, R1, "something else", &["--return-final"]);
    assert_eq!(
        (other["receipt_class"].as_str(), code),
        (Some("invalid"), 2),
        "{other}"
    );
    assert_eq!(other["prompt_written"], false);
    assert_eq!(c.lines(), ["work:50 complete phases 2 and 3"]);
    // get shows the request with its terminal event; watch resumes after it.
    let (g, _) = c.agent(&["request", "get", R1]);
    assert_eq!(g["terminal"]["terminal_event_sequence"], seq, "{g}");
    let out = c.a.op(&[
        "agent",
        "request",
        "watch",
        "--after",
        &seq.to_string(),
        "--once",
    ]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let out =
        c.a.op(&["agent", "request", "watch", "--after", "0", "--once"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

#[test]
fn definitive_rejections_write_nothing() {
    let mut c = Codex::start("");
    let agent = c.agent_in("idle");
    // One-way admission of a turn that stays busy.
    let (r, code) = c.admit(&agent, R1, "hold on", &[]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("accepted"), 0),
        "{r}"
    );
    assert_eq!(r["reply_pending"], false);
    c.agent_in("busy");
    let (r, code) = c.admit(&agent, R2, "second", &["--return-final"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("busy"), 3),
        "{r}"
    );
    assert_eq!(r["prompt_written"], false);
    let (r, _) = c.admit(&agent, R3, "third", &[]);
    assert_eq!(r["receipt_class"], "busy", "{r}");
    // A wrong incarnation, an unknown exact id, a bad request id.
    let mut stale = agent.clone();
    stale["incarnation"] = json!("0000");
    c.type_line("release");
    c.agent_in("idle");
    let (r, code) = c.admit(&stale, R2, "second", &[]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("stale_incarnation"), 3),
        "{r}"
    );
    let mut gone = agent.clone();
    gone["agent_id"] = json!("codex-0000000000000000");
    let (r, _) = c.admit(&gone, R2, "second", &["--exact-agent-id"]);
    assert_eq!(r["receipt_class"], "unavailable", "{r}");
    let (r, code) = c.admit(&agent, "not-a-uuid", "x", &[]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("invalid"), 2),
        "{r}"
    );
    let (r, _) = c.admit(&agent, R3, "x", &["--final-timeout-ms", "999999999999"]);
    assert_eq!(r["receipt_class"], "invalid", "{r}");
    // Nothing but the first prompt and the typed release reached the agent; a rejected
    // id can be admitted once the agent is idle.
    assert_eq!(c.lines(), ["hold on", "release"]);
    let (r, _) = c.admit(&agent, R2, "second", &[]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    assert_eq!(c.lines(), ["hold on", "release", "second"]);
}

#[test]
fn a_fresh_agent_has_no_cursor_for_return_final() {
    let c = Codex::start("--fresh");
    let agent = c.agent_in("fresh");
    assert_eq!(agent["return_final_ready"], false);
    let (r, code) = c.admit(&agent, R1, "x", &["--return-final"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("observer_failure"), 3),
        "{r}"
    );
    assert_eq!(r["prompt_written"], false);
    assert!(c.lines().is_empty());
    let (r, _) = c.admit(&agent, R1, "x", &[]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
}

/// Each misbehaviour of the bound turn ends as its own terminal state, never as another
/// turn's final.
#[test]
fn the_bound_turn_decides_the_outcome() {
    let mut c = Codex::start("");
    let w = c.watch(0);
    let cases = [
        ("later work", "completed"),
        ("mismatch me", "indeterminate"),
        ("abort this", "aborted"),
    ];
    let ids = [R1, R2, R3];
    for ((text, state), id) in cases.iter().zip(ids) {
        let agent = c.agent_in("idle");
        let (r, _) = c.admit(&agent, id, text, &["--return-final"]);
        assert_eq!(r["receipt_class"], "accepted", "{r}");
        let e = w.next();
        assert_eq!(
            (e["request_id"].as_str(), e["state"].as_str()),
            (Some(id), Some(*state)),
            "{e}"
        );
        if *state == "completed" {
            assert_eq!(
                e["final_message"],
                format!("final: {text}"),
                "not the later turn's"
            );
        } else {
            assert!(e.get("final_message").is_none(), "{e}");
        }
    }
    // A timeout and a cancel end requests whose turn never completes.
    let agent = c.agent_in("idle");
    let id = "11111111-2222-4333-8444-555555555555";
    let (r, _) = c.admit(
        &agent,
        id,
        "forever",
        &["--return-final", "--final-timeout-ms", "300"],
    );
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(id), Some("timed_out")),
        "{e}"
    );
    c.type_line("exit");
}

/// Codex 0.169's rollout (issue 35; the fake writes the lines recorded from the real
/// program): the prompt is an `item_completed` `UserMessage`, and a failed turn ends with
/// `task_complete` without a final and with an `error`: `aborted` with its text, never
/// `completed` with an empty final.
#[test]
fn codex_0_169_finals_complete_and_failed_turns_abort() {
    let c = Codex::start("");
    let w = c.watch(0);
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R1, "return final one", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(R1), Some("completed")),
        "{e}"
    );
    assert_eq!(e["final_message"], "final: return final one");
    assert_eq!(e["provider_turn"], "turn-2");
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R2, "fail now", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(R2), Some("aborted")),
        "{e}"
    );
    assert_eq!(e["reason"], "failed: fake upstream exploded", "{e}");
    assert_eq!(e["provider_turn"], "turn-3");
    assert!(e.get("final_message").is_none(), "{e}");
}

/// The fake writes what the real Codex 0.169.0 wrote: every event it writes is of a kind
/// the recorded trace (`tests/fixtures/codex/rollout-0.169.0.jsonl`) holds, with no field
/// the real one lacks.
#[test]
fn the_fake_codex_writes_the_recorded_shapes() {
    use std::collections::{BTreeMap, BTreeSet};
    type Shapes = BTreeMap<String, BTreeSet<String>>;
    fn shapes(text: &str) -> Shapes {
        let mut out = Shapes::new();
        for v in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let p = &v["payload"];
            if v["type"] != "event_msg" {
                continue;
            }
            let mut kind = p["type"].as_str().unwrap_or("?").to_string();
            let mut keys: BTreeSet<String> = p.as_object().unwrap().keys().cloned().collect();
            if let Some(item) = p["item"].as_object() {
                kind = format!("{kind}/{}", item["type"].as_str().unwrap_or("?"));
                keys.extend(item.keys().map(|k| format!("item.{k}")));
            }
            if p["error"].is_object() {
                kind.push_str("/error");
            }
            out.entry(kind).or_default().extend(keys);
        }
        out
    }
    let golden = shapes(include_str!("../fixtures/codex/rollout-0.169.0.jsonl"));
    let c = Codex::start("");
    let w = c.watch(0);
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R1, "work:20 shape", &["--return-final"]);
    assert_eq!(w.next()["state"], "completed");
    let agent = c.agent_in("idle");
    c.admit(&agent, R2, "fail shape", &["--return-final"]);
    assert_eq!(w.next()["state"], "aborted");
    let fake = shapes(&std::fs::read_to_string(r["rollout"].as_str().unwrap()).unwrap());
    for (kind, keys) in &fake {
        let real = golden
            .get(kind)
            .unwrap_or_else(|| panic!("the real trace has no {kind}: {golden:?}"));
        assert!(keys.is_subset(real), "{kind}: {keys:?} not in {real:?}");
    }
    assert!(fake.contains_key("item_completed/UserMessage"), "{fake:?}");
    assert!(fake.contains_key("task_complete/error"), "{fake:?}");
}

/// Older rollouts (`user_message` events) keep working beside the 0.169 form.
#[test]
fn the_older_rollout_form_still_completes() {
    let c = Codex::start("--legacy");
    let w = c.watch(0);
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R1, "work:20 old form", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let e = w.next();
    assert_eq!(e["state"], "completed", "{e}");
    assert_eq!(e["final_message"], "final: work:20 old form");
}

#[test]
fn cancel_crash_and_a_killed_observer_are_terminal_once() {
    let c = Codex::start("");
    let w = c.watch(0);
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R1, "forever", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let (x, code) = c.agent(&["request", "cancel", R1]);
    assert_eq!((x["cancelled"].as_bool(), code), (Some(true), 0), "{x}");
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(R1), Some("cancelled"))
    );
    let (x, _) = c.agent(&["request", "cancel", R1]);
    assert_eq!(
        x["cancelled"], false,
        "a terminal request stays as it ended"
    );
    let (g, code) = c.agent(&["request", "get", "22222222-2222-4222-8222-222222222222"]);
    assert_eq!((g["error"].as_str(), code), (Some("not_found"), 3));
    // The agent is still in its endless turn: end it, start a new one, and crash it.
    drop(c);
    let c = Codex::start("");
    let w = c.watch(0);
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R2, "crash now", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(R2), Some("indeterminate")),
        "{e}"
    );
    assert!(e["reason"].as_str().unwrap().contains("exited"), "{e}");
}

#[test]
fn a_killed_observer_leaves_an_indeterminate_request() {
    let c = Codex::start("");
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R1, "forever", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let observers = support::processes_mentioning(&c.a.state);
    let observer: Vec<i32> = observers
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("observe"))
        })
        .collect();
    assert_eq!(observer.len(), 1, "one observer process");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(observer[0]),
        nix::sys::signal::Signal::SIGKILL,
    );
    let d = Deadline::after("observer gone", Duration::from_secs(10));
    let g = eventually(
        d,
        "the request is settled",
        || c.agent(&["request", "get", R1]).0,
        |g| g["state"] == "terminal",
    );
    assert_eq!(g["terminal"]["state"], "indeterminate", "{g}");
    assert!(
        g["terminal"]["reason"]
            .as_str()
            .unwrap()
            .contains("observer"),
        "{g}"
    );
}

#[test]
fn capabilities_are_versioned() {
    let out = support::run(&["agent", "capabilities"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["capabilities_version"], 1);
    assert_eq!(v["receipt_classes"].as_array().unwrap().len(), 10);
    // Advertised and produced (`a_write_the_terminal_takes_nothing_of_is_delivery_failed`).
    for list in ["receipt_classes", "terminal_states"] {
        assert!(
            v[list]
                .as_array()
                .unwrap()
                .contains(&json!("delivery_failed")),
            "{v}"
        );
    }
    assert!(
        v["return_modes"]
            .as_array()
            .unwrap()
            .contains(&json!("final"))
    );
}

/// The orchestrator's round trip across restarts: admit, leave, restart the adapter and
/// winxd while the bound turn runs, then `watch --after` the last sequence it had seen and
/// get exactly that turn's final, once. The processes that must live are the guardian (it
/// holds the PTY the agent runs on) and the request's observer.
#[test]
fn watch_after_resumes_exactly_after_n_across_restarts() {
    let mut c = Codex::start("");
    let agent = c.agent_in("idle");
    let (r, _) = c.admit(&agent, R1, "first", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    let seen = c.watch(0).next();
    assert_eq!(seen["request_id"], R1, "{seen}");
    let seq = seen["terminal_event_sequence"].as_i64().unwrap();
    let (r, _) = c.admit(&agent, R2, "hold the line", &["--return-final"]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    c.agent_in("busy");
    // Every winx process but the guardian and the observer is replaced.
    let mut b = support::restart_adapter(&c.a, "daemon");
    c.a.kill9();
    let out = b.op(&["restart-daemon"]);
    assert!(out.status.success(), "{out:?}");
    let s = c.s.clone();
    b.bash(&s, json!({"send_text": "release", "submit": true}));
    let after = seq.to_string();
    let once = || {
        let out = b.op(&["agent", "request", "watch", "--after", &after, "--once"]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let d = Deadline::after("the held turn's final", Duration::from_secs(20));
    let events = eventually(d, "one event after N", once, |v| !v.is_empty());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["request_id"], R2);
    assert_eq!(events[0]["state"], "completed");
    assert_eq!(events[0]["final_message"], "final: hold the line");
    assert_eq!(events[0]["terminal_event_sequence"], seq + 1);
    // Again: the same one event, never a second copy or a later turn's.
    assert_eq!(once(), events);
    assert_eq!(c.lines(), ["first", "hold the line", "release"]);
}

/// A rollout cut below the armed cursor, or replaced by another session's file, while
/// the bound turn runs: the request ends `indeterminate`, never with a final.
#[test]
fn a_truncated_or_replaced_rollout_is_indeterminate() {
    // A replacement seen before the observer's first look is a file shorter than the
    // armed cursor: "truncated"; seen after it, another inode: "replaced".
    for (cue, why) in [
        ("truncate it", &["truncated"][..]),
        ("replace it", &["replaced", "truncated"][..]),
    ] {
        let c = Codex::start("");
        let agent = c.agent_in("idle");
        let w = c.watch(0);
        let (r, _) = c.admit(&agent, R1, cue, &["--return-final"]);
        assert_eq!(r["receipt_class"], "accepted", "{cue}: {r}");
        let e = w.next();
        assert_eq!(e["request_id"], R1);
        assert_eq!(e["state"], "indeterminate", "{cue}: {e}");
        let reason = e["reason"].as_str().unwrap();
        assert!(why.iter().any(|w| reason.contains(w)), "{cue}: {e}");
        assert!(e.get("final_message").is_none(), "{e}");
    }
}

/// Seed 001: `agent send` keeps its interactive behaviour and may steer a running turn
/// (the prompt goes into it); `agent admit` never steers, and neither does a return-final
/// `send` (its correlation needs an idle target).
#[test]
fn send_steers_a_busy_agent_and_admit_never_does() {
    let c = Codex::start("");
    let agent = c.agent_in("idle");
    let id = agent["agent_id"].as_str().unwrap();
    let (r, _) = c.admit(&agent, R1, "hold on", &[]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    c.agent_in("busy");
    let (r, code) = c.admit(&agent, R2, "do not steer", &[]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("busy"), 3),
        "{r}"
    );
    let (r, code) = c.agent(&["send", id, "--return-final", "final while busy"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("busy"), 3),
        "{r}"
    );
    assert_eq!(r["prompt_written"], false, "{r}");
    let (r, code) = c.agent(&["send", id, "--request-id", R3, "release"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("accepted"), 0),
        "{r}"
    );
    assert_eq!(r["prompt_written"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("steering"), "{r}");
    // The steered line reached the running turn (it ends the fake's hold).
    assert_eq!(r["acknowledged"], true, "{r}");
    c.agent_in("idle");
    assert_eq!(c.lines(), ["hold on", "release"]);
}

/// Issue 37 item 11: steering never answers an approval prompt. The rollout says busy
/// while Codex asks "Would you like to run the following command?" with "Yes, proceed"
/// selected; a steered write's Enter would approve it. `agent send` reads the target's
/// screen first and is refused (busy) unless it shows the turn working; nothing is written.
#[test]
fn send_never_steers_into_an_approval_prompt() {
    let mut c = Codex::start("");
    let agent = c.agent_in("idle");
    let id = agent["agent_id"].as_str().unwrap();
    let (r, _) = c.admit(&agent, R1, "approve the command", &[]);
    assert_eq!(r["receipt_class"], "accepted", "{r}");
    c.agent_in("busy");
    let d = Deadline::hard("the approval prompt");
    let screen = || {
        let r = c.a.bash(&c.s, json!({"screen": true}));
        r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    eventually(d, "the approval prompt on screen", screen, |t| {
        t.contains("Press enter to confirm")
    });
    let (r, code) = c.agent(&["send", id, "--request-id", R2, "yes"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("busy"), 3),
        "{r}"
    );
    assert_eq!(r["prompt_written"], false, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("approval"), "{r}");
    assert_eq!(c.lines(), ["approve the command"]);
}

/// Seed 001's `delivery_failed`: the agent's terminal takes none of the prompt. The fake
/// Codex runs as a background command (its PTY has no other reader) and is stopped, so
/// its terminal's input queue fills: one-way admissions are written until one is cut
/// (`indeterminate`, part of it taken) or refused whole; from then on the terminal takes
/// no byte, and the next admission is `delivery_failed`: nothing written, the request
/// terminal with that state, once. A write gives up after `WINX_PTY_WRITE_TIMEOUT_MS`
/// (default 5 s; both failing writes waited it out, 15 s): 300 ms here.
#[test]
fn a_write_the_terminal_takes_nothing_of_is_delivery_failed() {
    let mut a = spawn_with("daemon", &[("WINX_PTY_WRITE_TIMEOUT_MS", "300")]);
    let s = a.first_call();
    let log = a.dir.path().join("codex.log");
    let fake = support::manifest_dir().join("tests/fake/fake-codex");
    let cmd = format!(
        "CODEX_HOME={} python3 {} {}",
        a.dir.path().join("codex-home").display(),
        fake.display(),
        log.display()
    );
    let r = a.bash(&s, json!({"command": cmd, "is_background": true}));
    assert!(sc_bg(&r), "{r}");
    let c = Codex { a, s, log };
    let agent = c.agent_in("idle");
    let pid = nix::unistd::Pid::from_raw(agent["pid"].as_i64().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let w = c.watch(0);
    let text = "x".repeat(16_000);
    let id = |n: u32| format!("{n:08x}-0000-4000-8000-000000000000");
    let mut cut = None;
    for n in 1..=40 {
        let (r, _) = c.admit(&agent, &id(n), &text, &[]);
        if r["receipt_class"] != "accepted" {
            cut = Some(r);
            break;
        }
    }
    let cut = cut.expect("a stopped reader's terminal fills within 640 KB");
    assert!(
        ["indeterminate", "delivery_failed"].contains(&cut["receipt_class"].as_str().unwrap()),
        "{cut}"
    );
    let last = id(100);
    let (r, code) = c.admit(&agent, &last, "return this", &["--return-final"]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("delivery_failed"), 3),
        "{r}"
    );
    assert_eq!(r["prompt_written"], false, "{r}");
    assert_eq!(r["reply_pending"], false, "{r}");
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(last.as_str()), Some("delivery_failed")),
        "{e}"
    );
    // The same request again: its stored receipt, nothing written.
    let (again, _) = c.admit(&agent, &last, "return this", &["--return-final"]);
    assert_eq!(again["receipt_class"], "delivery_failed", "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    let (g, _) = c.agent(&["request", "get", &last]);
    assert_eq!(g["terminal"]["state"], "delivery_failed", "{g}");
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
}

fn sc_bg(r: &Value) -> bool {
    support::sc(r)["data"]["state"]["bg_command_id"].is_string()
}
