//! The real Codex CLI (the TUI of the version `make hosts` pins, issue 35) in a winx PTY,
//! with Codex's default settings — its managed app-server daemon included — against a
//! scripted OpenAI Responses API on loopback (`support::fake_responses`): a native
//! `Agent prompt` is submitted once and answered, a draft in the composer is never merged
//! with a prompt, the agent is in the catalog although the daemon holds its rollout, and
//! return-final requests end `completed` with the exact final, `aborted` with the model's
//! error, and `aborted` on Esc. Set `WINX_TEST_KEEP_LOGS=1` to keep the temp dir.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::codex::{Tui, last_user_text};

use support::fake_responses::{Reply, Request};
use support::sc;

const R1: &str = "5d0c3a10-1111-4aaa-8bbb-000000000001";
const R2: &str = "5d0c3a10-1111-4aaa-8bbb-000000000002";
const R3: &str = "5d0c3a10-1111-4aaa-8bbb-000000000003";

/// The fake model: "FAIL…" is an HTTP 500, "HOLD…" a stream held open until released,
/// anything else "FINAL: <text>" after a short delay (so the TUI shows that it works).
fn script(req: &Request) -> Reply {
    let text = last_user_text(req);
    if text.contains("FAIL") {
        Reply::Http500("fake upstream exploded".into())
    } else if text.contains("HOLD") {
        Reply::Hold(Box::new(Reply::text("released")))
    } else {
        let answer = Reply::text(&format!("FINAL: {text}"));
        Reply::Delayed(Duration::from_millis(400), Box::new(answer))
    }
}

/// How many model turns carried `text` as their last user message.
fn turns_with(t: &Tui, text: &str) -> usize {
    t.model
        .turns()
        .iter()
        .filter(|r| last_user_text(r) == text)
        .count()
}

/// The catalog names the TUI's own process (not its app-server daemon).
fn is_tui(agent: &Value) -> bool {
    let pid = agent["pid"].as_u64().unwrap_or(0);
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd);
    cmd.contains("codex") && !cmd.contains("app-server")
}

/// A native prompt the TUI answers; returns once the answer is on the screen.
fn prompt_answered(t: &mut Tui, prompt_id: &str, text: &str) {
    let id = t.id.clone();
    let p = json!({"type": "prompt", "target": id, "prompt_id": prompt_id, "text": text,
                   "timeout_seconds": 30});
    let r = t.agent_tool(p);
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    let answer = format!("FINAL: {text}");
    t.until_screen("the answer is shown", |s| s.contains(&answer));
}

/// When the rollout's `task_complete` of `turn` was written (its `timestamp`, unix ms).
fn task_complete_ms(rollout: &str, turn: &str) -> u64 {
    let line = rollout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["payload"]["type"] == "task_complete" && v["payload"]["turn_id"] == turn)
        .expect("the bound turn's task_complete");
    iso_ms(line["timestamp"].as_str().unwrap())
}

/// `2026-12-04T07:14:46.585Z` in unix ms.
fn iso_ms(t: &str) -> u64 {
    let n = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    let ms = t[20..].trim_end_matches('Z');
    (secs * 1000) as u64 + ms.parse::<u64>().unwrap_or(0)
}

fn admit(t: &Tui, agent: &Value, id: &str, text: &str) -> Value {
    let (r, code) = t.agent(&[
        "admit",
        agent["agent_id"].as_str().unwrap(),
        "--incarnation",
        agent["incarnation"].as_str().unwrap(),
        "--request-id",
        id,
        "--return-final",
        text,
    ]);
    assert_eq!(
        (r["receipt_class"].as_str(), code),
        (Some("accepted"), 0),
        "{r}"
    );
    r
}

#[test]
fn the_real_codex_is_prompted_once_and_its_finals_come_back() {
    let mut t = Tui::start(script);
    let id = t.id.clone();
    // A native prompt: submitted (not left as a draft), answered, activity observed.
    let p = json!({"type": "prompt", "target": id, "prompt_id": "n1",
                   "text": "native prompt one", "timeout_seconds": 30});
    let r = t.agent_tool(p);
    let d = &sc(&r)["data"];
    assert_eq!(d["delivery"], "delivered", "{r}");
    assert_eq!(d["activity_observed"], true, "{r}\n{}", t.screen());
    assert_eq!(d["outcome"], "awaiting_input", "{r}");
    t.until_screen("the answer is shown", |s| {
        s.contains("FINAL: native prompt one")
    });
    assert_eq!(turns_with(&t, "native prompt one"), 1, "{}", t.model.dump());

    // A draft typed into the composer is never merged with a prompt.
    t.keys(b"my draft");
    t.until_screen("the draft is in the composer", |s| s.contains("› my draft"));
    let p = json!({"type": "prompt", "target": id, "prompt_id": "n2",
                   "text": "second prompt", "timeout_seconds": 0});
    let r = t.agent_tool(p);
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["reason"], "composer_not_empty", "{r}");
    t.keys(&[0x15]); // Ctrl-U clears the draft
    t.until_screen("the draft is gone", |s| !s.contains("my draft"));

    // In the catalog although Codex's daemon, not the TUI, holds the rollout.
    let agents = t.catalog_with(1, "idle");
    let agent = &agents[0];
    assert!(is_tui(agent), "the TUI, not Codex's daemon: {agent}");
    assert_eq!(agent["execution_id"], id.as_str(), "{agent}");
    assert_eq!(agent["return_final_ready"], true, "{agent}");
    let w = t.watch(0);

    // Return-final: completed with the exact final, the prompt delivered once.
    let r = admit(&t, agent, R1, "return final one");
    assert_eq!(r["correlation_source"], "codex_rollout", "{r}");
    let (e, arrived) = w.next_timed();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(R1), Some("completed")),
        "{e}"
    );
    assert_eq!(e["final_message"], "FINAL: return final one");
    assert_eq!(turns_with(&t, "return final one"), 1);
    // From Codex writing task_complete to the event reaching `watch`.
    let rollout = std::fs::read_to_string(r["rollout"].as_str().unwrap()).unwrap();
    let written = task_complete_ms(&rollout, e["provider_turn"].as_str().unwrap());
    let latency = arrived as i64 - written as i64;
    // Measured 7 to 24 ms on a loaded 2-core machine; the bound leaves room for a
    // parallel test run, and still fails a poll-based delivery.
    eprintln!("task_complete to watch: {latency} ms");
    assert!((0..500).contains(&latency), "{latency} ms");

    // A model failure: aborted with Codex's error text, never an empty completion.
    let agent = t.catalog_with(1, "idle").remove(0);
    admit(&t, &agent, R2, "FAIL this turn");
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(R2), Some("aborted")),
        "{e}"
    );
    let reason = e["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("failed: "), "{e}");
    assert!(e.get("final_message").is_none(), "{e}");

    // Esc while the model works: aborted.
    let agent = t.catalog_with(1, "idle").remove(0);
    admit(&t, &agent, R3, "HOLD until interrupted");
    assert!(
        t.model.wait_held(1, Duration::from_secs(30)),
        "{}",
        t.model.dump()
    );
    let started = Instant::now();
    t.keys(&[0x1b]);
    let e = w.next();
    assert_eq!(
        (e["request_id"].as_str(), e["state"].as_str()),
        (Some(R3), Some("aborted")),
        "{e}"
    );
    assert_eq!(e["reason"], "interrupted", "{e}");
    eprintln!("Esc to aborted event: {:?}", started.elapsed());
    t.model.release();
}

/// Codex's daemon outlives the TUI that started it and serves the next ones: a second TUI
/// of the same `CODEX_HOME` and a `codex resume <id>` are each in the catalog with their
/// own thread (never the closed TUI's), with the TUI's own incarnation.
#[test]
fn a_second_and_a_resumed_tui_are_in_the_catalog() {
    let mut t = Tui::start(script);
    prompt_answered(&mut t, "a1", "first tui");
    let first = t.catalog_with(1, "idle").remove(0);
    assert!(is_tui(&first), "{first}");
    let first_thread = first["conversation_id"].as_str().unwrap().to_string();
    t.quit();
    assert_eq!(t.catalog_with(0, "idle"), Vec::<Value>::new());

    // A second TUI joins the daemon, which still holds the first thread's rollout.
    t.launch("");
    prompt_answered(&mut t, "b1", "second tui");
    let second = t.catalog_with(1, "idle").remove(0);
    assert!(is_tui(&second), "{second}");
    assert_ne!(
        second["conversation_id"], first["conversation_id"],
        "{second}"
    );
    assert_ne!(second["incarnation"], first["incarnation"]);
    assert_eq!(second["return_final_ready"], true, "{second}");
    let w = t.watch(0);
    admit(&t, &second, R1, "to the second tui");
    let e = w.next();
    assert_eq!(e["state"], "completed", "{e}");
    assert_eq!(e["final_message"], "FINAL: to the second tui");
    t.quit();

    // The first conversation resumed by its id.
    t.launch(&format!("resume {first_thread}"));
    prompt_answered(&mut t, "c1", "resumed tui");
    let resumed = t.catalog_with(1, "idle").remove(0);
    assert!(is_tui(&resumed), "{resumed}");
    assert_eq!(
        resumed["conversation_id"],
        first_thread.as_str(),
        "{resumed}"
    );
    assert_ne!(resumed["incarnation"], first["incarnation"]);
    admit(&t, &resumed, R2, "to the resumed tui");
    let e = w.next();
    assert_eq!(e["state"], "completed", "{e}");
    assert_eq!(e["final_message"], "FINAL: to the resumed tui");
}
