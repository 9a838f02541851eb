//! Durable return-final agent requests (issue 15) through the real binaries: a fake Codex
//! (`tests/fake/fake-codex`, real-shaped rollout JSONL under a private CODEX_HOME) runs in
//! a winx session; the operator CLI's `agent` verbs admit prompts to it and read the
//! terminal-event stream, which an attached `request watch` delivers as it is committed.

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;
use support::history::spawn_with;
use support::wait::{Deadline, eventually};
use support::{Agent, manifest_dir, sc};

/// A winx session (daemon runtime) running a fake Codex.
struct Codex {
    a: Agent,
    s: Value,
    log: PathBuf,
}

impl Codex {
    fn start(flags: &str) -> Codex {
        let mut a = spawn_with("daemon", &[]);
        let s = a.first_call();
        let log = a.dir.path().join("codex.log");
        let home = a.dir.path().join("codex-home");
        let fake = manifest_dir().join("tests/fake/fake-codex");
        let cmd = format!(
            "CODEX_HOME={} python3 {} {} {flags}",
            home.display(),
            fake.display(),
            log.display()
        );
        let r = a.bash_with(
            &s,
            json!({"command": cmd}),
            json!({"wait_for_seconds": 0.2}),
        );
        assert_eq!(sc(&r)["status"], "running", "{r}");
        let c = Codex { a, s, log };
        let want = if flags.contains("--fresh") {
            "fresh"
        } else {
            "idle"
        };
        c.agent_in(want);
        c
    }

    fn catalog(&self) -> Vec<Value> {
        let v = self.a.op_json(&["agent", "catalog"]);
        v.as_array().cloned().unwrap_or_default()
    }

    /// The one agent, once the catalog shows it in `state`.
    fn agent_in(&self, state: &str) -> Value {
        let d = Deadline::after("agent in catalog", Duration::from_secs(20));
        let all = eventually(
            d,
            &format!("the fake is {state}"),
            || self.catalog(),
            |v| v.len() == 1 && v[0]["state"] == state,
        );
        all[0].clone()
    }

    /// Run `agent args…`: the JSON it printed and its exit code.
    fn agent(&self, args: &[&str]) -> (Value, i32) {
        let mut full = vec!["agent"];
        full.extend_from_slice(args);
        let out = self.a.op(&full);
        let text = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {text:?} / {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (v, out.status.code().unwrap_or(-1))
    }

    fn admit(&self, agent: &Value, id: &str, text: &str, extra: &[&str]) -> (Value, i32) {
        let mut args = vec![
            "admit",
            agent["agent_id"].as_str().unwrap(),
            "--incarnation",
            agent["incarnation"].as_str().unwrap(),
            "--request-id",
            id,
        ];
        args.extend_from_slice(extra);
        args.push(text);
        self.agent(&args)
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// An attached `request watch --after N`.
    fn watch(&self, after: i64) -> Watch {
        let mut child = self
            .a
            .op_command(&["agent", "request", "watch", "--after", &after.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Watch { child, rx }
    }

    fn type_line(&mut self, text: &str) {
        let s = self.s.clone();
        self.a.bash(&s, json!({"send_text": text, "submit": true}));
    }
}

struct Watch {
    child: Child,
    rx: crossbeam_channel::Receiver<String>,
}

impl Watch {
    fn next(&self) -> Value {
        let l = self
            .rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a terminal event within 20 s");
        serde_json::from_str(&l).unwrap()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
    unsafe { nix::libc::kill(observer[0], nix::libc::SIGKILL) };
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
    assert_eq!(v["receipt_classes"].as_array().unwrap().len(), 9);
    assert!(
        v["return_modes"]
            .as_array()
            .unwrap()
            .contains(&json!("final"))
    );
}
