//! A session's secrets stay hidden once seen: values from the shell's starting environment,
//! from `KEY=value` in command text, output and files ContextSave reads are redacted
//! wherever they appear later, even without their key (output, spill files, screen,
//! `attach`, saved context).

use crate::support;

use serde_json::{Value, json};
use support::{Agent, text};

each_runtime!(a_seen_secret_is_redacted_everywhere_later);

/// Fake secret values, assembled at run time so no secret-shaped literal sits in the
/// source. Each is distinct and long enough to be remembered.
fn fake(tag: &str) -> String {
    format!("{tag}{}", "Zq7x".repeat(6))
}

fn spawn(rt: &str, env_secret: &str) -> Agent {
    let (runtime, shell) = match rt {
        "zsh" => ("daemon", "zsh"),
        other => (other, "bash"),
    };
    Agent::spawn_env(&[
        ("WINX_RUNTIME", runtime),
        ("WINX_SHELL", shell),
        ("AWS_SECRET_ACCESS_KEY", env_secret),
    ])
}

fn assert_hidden(what: &str, haystack: &str, secrets: &[&String]) {
    for s in secrets {
        assert!(
            !haystack.contains(s.as_str()),
            "{what} shows {s}:\n{haystack}"
        );
    }
}

fn memories(state: &std::path::Path) -> String {
    let mut all = String::new();
    for ns in std::fs::read_dir(state.join("tasks")).unwrap().flatten() {
        for f in std::fs::read_dir(ns.path()).unwrap().flatten() {
            all.push_str(&std::fs::read_to_string(f.path()).unwrap());
        }
    }
    all
}

fn a_seen_secret_is_redacted_everywhere_later(rt: &str) {
    let (from_env, typed, printed, in_file) =
        (fake("env"), fake("typed"), fake("printed"), fake("file"));
    let mut a = spawn(rt, &from_env);
    let s = a.first_call();
    let all = [&from_env, &typed, &printed, &in_file];

    // The starting environment: the value alone, without its key.
    let r = a.bash(
        &s,
        json!({"command": "echo \"key is $AWS_SECRET_ACCESS_KEY.\""}),
    );
    assert!(text(&r).contains("key is [REDACTED]."), "{}", text(&r));
    // Command text: the export is seen before anything prints.
    let cmd = format!("export DEPLOY_TOKEN={typed}; echo \"got $DEPLOY_TOKEN\"");
    let r = a.bash(&s, json!({ "command": cmd }));
    assert!(text(&r).contains("got [REDACTED]"), "{}", text(&r));
    // Output: printed as an assignment (split in the command text so the text alone
    // does not give it away), then echoed bare by a later command.
    let (head, tail) = printed.split_at(8);
    let cmd = format!("printf 'DB_PASSWORD=%s%s\\n' {head} {tail}");
    let r = a.bash(&s, json!({ "command": cmd }));
    assert!(text(&r).contains("DB_PASSWORD=[REDACTED]"), "{}", text(&r));
    let r = a.bash(&s, json!({"command": format!("echo {head}{tail} done")}));
    assert!(text(&r).contains("[REDACTED] done"), "{}", text(&r));
    assert!(r["structuredContent"]["data"]["redactions"].as_u64() >= Some(1));

    // ContextSave: a value assigned in one file read is hidden in another and in the
    // description, and the session hides it from then on.
    std::fs::write(
        a.workspace.join("app.env"),
        format!("STRIPE_SECRET={in_file}\n"),
    )
    .unwrap();
    let notes = format!("deploy with {in_file} and {from_env}\n");
    std::fs::write(a.workspace.join("notes.md"), notes).unwrap();
    let description = format!("deploy with key {from_env} then {typed} and {printed}");
    let r = a.call(
        "ContextSave",
        json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
               "id": "deploy", "description": description,
               "relevant_file_globs": ["app.env", "notes.md"]}),
    );
    assert_eq!(r["structuredContent"]["status"], "completed", "{r}");
    let saved = memories(&a.state);
    assert!(saved.contains("deploy with key [REDACTED]"), "{saved}");
    assert_hidden("the saved memory", &saved, &all);
    let (fh, ft) = in_file.split_at(6);
    let r = a.bash(&s, json!({"command": format!("echo {fh}{ft}")}));
    assert_hidden("output after ContextSave", text(&r), &all);

    // Spill file and screen: a long output holding the values.
    let cmd =
        "for i in $(seq 1 3000); do echo \"line $i $AWS_SECRET_ACCESS_KEY $DEPLOY_TOKEN\"; done";
    let r = a.bash(&s, json!({ "command": cmd }));
    assert_hidden("truncated output", text(&r), &all);
    let spill = r["structuredContent"]["data"]["spill_path"]
        .as_str()
        .expect("spilled");
    let spilled = std::fs::read_to_string(spill).unwrap();
    // The spill is made from the journal, whose secrets are masked as written (decision
    // 041): `*` of the same length where the answer shows `[REDACTED]`.
    assert!(
        spilled.contains(&format!("line 1 {} {}\n", "*".repeat(27), "*".repeat(29))),
        "{}",
        &spilled[..200]
    );
    assert_hidden("the spill file", &spilled, &all);
    let r = a.bash(&s, json!({"screen": true}));
    assert!(text(&r).contains("line 3000 [REDACTED]"), "{}", text(&r));
    assert_hidden("the screen", text(&r), &all);

    // attach (an operator reading the session's transcript) hides them too.
    if rt != "embedded" {
        let out = a.op(&["attach", s["data"]["thread_id"].as_str().unwrap()]);
        let transcript = String::from_utf8_lossy(&out.stdout);
        assert!(transcript.contains("got [REDACTED]"), "{transcript}");
        assert_hidden("attach", &transcript, &all);
    }
}

/// `WINX_NO_REDACT=1` shows everything, so the tests above are not passing by hiding
/// all output.
#[test]
fn redaction_off_shows_the_values() {
    let value = fake("plain");
    let mut a = Agent::spawn_env(&[("WINX_RUNTIME", "embedded"), ("WINX_NO_REDACT", "1")]);
    let s = a.first_call();
    let cmd = format!("export API_TOKEN={value}; echo \"got $API_TOKEN\"");
    let r: Value = a.bash(&s, json!({ "command": cmd }));
    assert!(text(&r).contains(&format!("got {value}")), "{}", text(&r));
}
