//! Native prompts to agents running as background commands of one session (issue 37 item
//! 3, seed 000: "a native prompt requires an explicit execution ID"): each background
//! command has its own PTY, readiness is checked on its own screen, the text goes to its
//! own terminal, and receipts are once-only as for the foreground program. The agents are
//! the fake TUI (`tests/fake/fake-agent`, which logs every line it receives) and, when
//! `make hosts` installed it, the real Codex CLI against a scripted model.

use crate::support;

use serde_json::{Value, json};
use std::path::PathBuf;
use support::history::{exec, id_of, logged_lines, spawn_with};
use support::wait::{Deadline, eventually};
use support::{Agent, sc};

fn agent(a: &mut Agent, s: &Value, action: Value) -> Value {
    a.call(
        "Agent",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "action": action}),
    )
}

fn prompt(id: &str, prompt_id: &str, text: &str, wait: f64) -> Value {
    json!({"type": "prompt", "target": id, "prompt_id": prompt_id, "text": text,
           "timeout_seconds": wait})
}

/// Everything the execution `id` printed so far (retained output, one page).
fn output(a: &mut Agent, s: &Value, id: &str) -> String {
    let r = exec(
        a,
        s,
        json!({"type": "read", "execution_id": id, "source": "output", "page_bytes": 65536}),
    );
    sc(&r)["data"]["page"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The fake agent TUI (`flavor`: codex or claude) started as a background command, once
/// its output shows its input screen: its execution id and the file it logs lines to.
fn start_background_agent(a: &mut Agent, s: &Value, flavor: &str) -> (String, PathBuf) {
    let log = a.dir.path().join(format!("{flavor}-bg.log"));
    let fake = support::manifest_dir().join("tests/fake/fake-agent");
    let cmd = format!("python3 {} {flavor} {}", fake.display(), log.display());
    let r = a.bash(s, json!({"command": cmd, "is_background": true}));
    assert!(sc(&r)["data"]["state"]["bg_command_id"].is_string(), "{r}");
    let id = id_of(&r);
    let ready = match flavor {
        "codex" => "context left",
        _ => "? for shortcuts",
    };
    eventually(
        Deadline::hard("background agent drawn"),
        "its input screen is drawn",
        || output(a, s, &id),
        |t| t.contains(ready),
    );
    (id, log)
}

#[test]
fn two_background_agents_each_take_their_own_prompt_once() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let (one, log_one) = start_background_agent(&mut a, &s, "codex");
    let (two, log_two) = start_background_agent(&mut a, &s, "claude");
    assert_ne!(one, two);
    for (id, pid, text) in [
        (&one, "one-1", "work:200 review the parser"),
        (&two, "two-1", "work:200 review the lexer"),
    ] {
        let r = agent(&mut a, &s, prompt(id, pid, text, 15.0));
        let d = &sc(&r)["data"];
        assert_eq!(sc(&r)["status"], "completed", "{r}");
        assert_eq!(d["delivery"], "delivered", "{r}");
        assert_eq!(d["input_sent"], true, "{r}");
        assert_eq!(d["target"], id.as_str(), "{r}");
        // Its own screen showed work after the baseline, then input again.
        assert_eq!(d["activity_observed"], true, "{r}");
        assert_eq!(d["outcome"], "awaiting_input", "{r}");
        assert_eq!(d["replayed"], false, "{r}");
    }
    // Each received its own prompt, and only that one.
    assert_eq!(logged_lines(&log_one), ["work:200 review the parser"]);
    assert_eq!(logged_lines(&log_two), ["work:200 review the lexer"]);
    // The same prompt_id and payload: the stored receipt, nothing written again.
    let r = agent(
        &mut a,
        &s,
        prompt(&one, "one-1", "work:200 review the parser", 0.0),
    );
    assert_eq!(sc(&r)["data"]["replayed"], true, "{r}");
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    let w = json!({"type": "wait", "target": two, "prompt_id": "two-1", "timeout_seconds": 1});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_input", "{r}");
    assert_eq!(logged_lines(&log_one), ["work:200 review the parser"]);
    assert_eq!(logged_lines(&log_two), ["work:200 review the lexer"]);
    // The first agent works on a long job: busy on its own screen, so refused, while
    // the second (its own screen ready) still takes a prompt.
    let r = agent(&mut a, &s, prompt(&one, "one-2", "work:6000 long job", 0.0));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    let w = json!({"type": "wait", "target": one, "prompt_id": "one-2", "until": "activity",
                   "timeout_seconds": 15});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
    let r = agent(&mut a, &s, prompt(&one, "one-3", "meanwhile", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false, "{r}");
    assert_eq!(sc(&r)["data"]["state"], "busy", "{r}");
    let r = agent(&mut a, &s, prompt(&two, "two-2", "quiet second look", 0.0));
    assert_eq!(sc(&r)["data"]["delivery"], "delivered", "{r}");
    // A refused prompt leaves no receipt: its id stays free.
    let w = json!({"type": "wait", "target": one, "prompt_id": "one-3"});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["errorCode"], "agent_receipt_not_found", "{r}");
    eventually(
        Deadline::hard("second prompt logged"),
        "the second agent logged its second prompt",
        || logged_lines(&log_two),
        |l| l.len() == 2,
    );
    assert_eq!(
        logged_lines(&log_one),
        ["work:200 review the parser", "work:6000 long job"]
    );
    assert_eq!(
        logged_lines(&log_two),
        ["work:200 review the lexer", "quiet second look"]
    );
}

/// A background command that ended takes no prompt, and one whose screen is no agent's
/// input screen is not ready.
#[test]
fn an_ended_or_unready_background_command_gets_nothing() {
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let r = a.bash(&s, json!({"command": "sleep 30", "is_background": true}));
    let sleeper = id_of(&r);
    let r = agent(&mut a, &s, prompt(&sleeper, "sleep", "hello", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["reason"], "not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false, "{r}");
    let r = a.bash(&s, json!({"command": "true", "is_background": true}));
    let done = id_of(&r);
    let bg = sc(&r)["data"]["state"]["bg_command_id"].clone();
    eventually(
        Deadline::hard("background command ends"),
        "it exited",
        || {
            let r = a.bash(&s, json!({"status_check": true, "bg_command_id": bg}));
            sc(&r)["data"]["state"]["process_status"].clone()
        },
        |st| st == "exited",
    );
    let r = agent(&mut a, &s, prompt(&done, "late", "hello", 0.0));
    assert_eq!(sc(&r)["errorCode"], "agent_target_not_ready", "{r}");
    assert_eq!(sc(&r)["data"]["input_sent"], false, "{r}");
}

/// The real Codex CLI (`make hosts`) started as a BACKGROUND command, against a scripted
/// model: a native prompt by its execution id is delivered once when its own screen shows
/// the composer, the model gets it once, and Codex writes the model's final answer.
#[test]
fn a_real_codex_in_the_background_answers_a_prompt() {
    use support::codex::{last_user_text, real_codex};
    use support::fake_responses::{FakeResponses, Reply};
    let codex = real_codex();
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    let model = FakeResponses::start(a.dir.path(), |req| {
        let answer = Reply::text(&format!("FINAL: {}", last_user_text(req)));
        Reply::Delayed(std::time::Duration::from_millis(400), Box::new(answer))
    });
    let home = a.dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    let ws = a.workspace.canonicalize().unwrap();
    let config = format!(
        "model = \"gpt-5.1-codex\"\nmodel_provider = \"fake\"\n\n\
         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}\"\n\
         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n\
         [projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        model.base_url(),
        ws.display()
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    let cmd = format!("CODEX_HOME={} {}", home.display(), codex.display());
    let r = a.bash(&s, json!({"command": cmd, "is_background": true}));
    assert!(sc(&r)["data"]["state"]["bg_command_id"].is_string(), "{r}");
    let id = id_of(&r);
    let text = "Say which file you would review first";
    // Refused (nothing sent, the id stays free) until Codex's own screen shows its empty
    // composer: the readiness check is the one an orchestrator relies on.
    let r = eventually(
        Deadline::after("codex composer", std::time::Duration::from_secs(60)),
        "the prompt is delivered",
        || agent(&mut a, &s, prompt(&id, "bg-codex", text, 0.0)),
        |r| {
            let d = &sc(r)["data"];
            assert!(
                d["delivery"] == "delivered" || d["input_sent"] == false,
                "{r}"
            );
            d["delivery"] == "delivered"
        },
    );
    assert_eq!(sc(&r)["data"]["replayed"], false, "{r}");
    let w = json!({"type": "wait", "target": id, "prompt_id": "bg-codex",
                   "timeout_seconds": 30});
    let r = agent(&mut a, &s, w);
    assert_eq!(sc(&r)["data"]["activity_observed"], true, "{r}");
    assert_eq!(sc(&r)["data"]["outcome"], "awaiting_input", "{r}");
    let turns: Vec<_> = model
        .turns()
        .into_iter()
        .filter(|t| last_user_text(t) == text)
        .collect();
    assert_eq!(turns.len(), 1, "the model got the prompt once");
    // Codex wrote the model's final answer to its rollout.
    let answer = format!("FINAL: {text}");
    let rollouts = files_under(&home.join("sessions"));
    assert!(
        rollouts
            .iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(&answer))),
        "no rollout holds {answer:?}: {rollouts:?}"
    );
}

/// Every file below `dir`.
fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}
