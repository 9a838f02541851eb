//! The README's "Tools by example" section, run (issue 38 item 8): every example's
//! arguments go through the real binary over stdio, in order, in one session on a temp
//! workspace holding the section's fixtures, and what comes back must carry the lines and
//! `structuredContent` fields the README states. The section's Python SDK example runs with
//! the pinned `mcp` SDK (`WINX_TEST_PYTHON`, else the `make venv` interpreter; without
//! either it fails saying so, as the other interop tests do). So the examples stay true.
//!
//! The section's shape, which `examples` reads: a paragraph starting `` **`Tool`** `` per
//! example, then its ```` ```json ```` arguments, a ```` ```text ```` block of lines the text
//! block holds (in order; `…` alone skips lines, inside a line it matches anything), and
//! optionally `` `structuredContent`: `{…}` ``, a subset of the envelope (objects by key,
//! arrays by position, strings with `…`). A paragraph starting `**From Python**` holds the
//! ```` ```python ```` example and the ```` ```text ```` lines it prints.

use crate::support;

use crossbeam_channel::bounded;
use serde_json::Value;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::hosts::{fenced, readme_part};
use support::{Agent, python, sc, text};

/// The README's workspace, replaced by the test's.
const README_WORKSPACE: &str = "/home/me/project";
/// The `execution_id` the README shows for its `echo hello`, replaced by the real one.
const README_EXECUTION_ID: &str = "1a2409660f7-1";
/// The wildcard of the README's abridged results.
const ELIDED: &str = "…";
/// The Python example's whole run: interpreter and SDK start, server start, two calls.
const PYTHON_LIMIT: Duration = Duration::from_secs(60);

/// The section's fixtures, as its first paragraph describes them.
const NOTES: &str = "alpha\nbeta\ngamma\n";
const LIB_RS: &str = "pub fn greet(name: &str) -> String {\n    format!(\"hello {name}\")\n}\n";

struct Example {
    tool: String,
    args: String,
    lines: Option<String>,
    structured: Option<String>,
}

fn section() -> String {
    readme_part("examples:tools")
}

/// The section's paragraphs that start with `**`, each with the text up to the next.
fn paragraphs(section: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in section.lines() {
        if line.starts_with("**") {
            out.push((line.to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// The tool examples, in README order.
fn examples(section: &str) -> Vec<Example> {
    paragraphs(section)
        .into_iter()
        .filter_map(|(head, body)| {
            let tool = head.strip_prefix("**`")?.split('`').next()?.to_string();
            let args = fenced(&body, "json");
            assert_eq!(args.len(), 1, "{tool}: one ```json arguments block");
            let lines = fenced(&body, "text").into_iter().next();
            let structured = body.lines().find_map(|l| {
                let v = l.strip_prefix("`structuredContent`: `")?;
                Some(
                    v.strip_suffix('`')
                        .expect("a closed `structuredContent` span")
                        .into(),
                )
            });
            Some(Example {
                tool,
                args: args[0].clone(),
                lines,
                structured,
            })
        })
        .collect()
}

/// Whether `actual` is `pattern`, where each `…` in the pattern stands for any text.
fn matches(pattern: &str, actual: &str) -> bool {
    let pieces: Vec<&str> = pattern.split(ELIDED).collect();
    if pieces.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if actual.len() < first.len() + last.len()
        || !actual.starts_with(first)
        || !actual.ends_with(last)
    {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    true
}

/// Every non-empty line of `expected` (but a lone `…`) matches a line of `actual`, in order.
fn lines_in_order(expected: &str, actual: &str) -> Result<(), String> {
    let mut have = actual.lines().map(str::trim_end);
    for want in expected.lines().map(str::trim_end) {
        if want.is_empty() || want == ELIDED {
            continue;
        }
        if !have.any(|h| matches(want, h)) {
            return Err(format!("no line `{want}` (in order) in:\n{actual}"));
        }
    }
    Ok(())
}

/// `expected` is a subset of `actual`: objects by key, arrays by position, strings with `…`.
fn subset(expected: &Value, actual: &Value, at: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e.iter().try_for_each(|(k, v)| {
            let got = a.get(k).ok_or(format!("{at}.{k} is missing"))?;
            subset(v, got, &format!("{at}.{k}"))
        }),
        (Value::Array(e), Value::Array(a)) if e.len() <= a.len() => e
            .iter()
            .zip(a)
            .enumerate()
            .try_for_each(|(i, (v, got))| subset(v, got, &format!("{at}[{i}]"))),
        (Value::String(e), Value::String(a)) if matches(e, a) => Ok(()),
        (e, a) if e == a => Ok(()),
        (e, a) => Err(format!("{at} is {a}, the README says {e}")),
    }
}

/// The README's placeholders replaced by this run's values.
fn replaced(text: &str, subs: &[(String, String)]) -> String {
    subs.iter()
        .fold(text.to_string(), |t, (from, to)| t.replace(from, to))
}

/// The section's fixtures in `workspace`.
fn write_fixtures(workspace: &Path) {
    std::fs::write(workspace.join("notes.txt"), NOTES).unwrap();
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("src/lib.rs"), LIB_RS).unwrap();
    let mut png = Vec::new();
    image::DynamicImage::ImageRgb8(image::RgbImage::new(2, 2))
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    std::fs::write(workspace.join("logo.png"), png).unwrap();
}

#[test]
fn every_tool_example_in_the_readme_runs_and_returns_what_it_shows() {
    let section = section();
    let examples = examples(&section);
    let mut a = Agent::spawn();
    write_fixtures(&a.workspace);

    // One example per tool the server lists, and none for a tool it does not.
    let listed: BTreeSet<String> =
        a.request("tools/list", serde_json::json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
    let shown: BTreeSet<String> = examples.iter().map(|e| e.tool.clone()).collect();
    assert_eq!(
        shown, listed,
        "the README's examples are not one per listed tool"
    );
    assert_eq!(shown.len(), examples.len(), "a tool has two examples");

    let mut subs = vec![(README_WORKSPACE.to_string(), a.ws())];
    let mut pair: Option<Value> = None;
    for ex in &examples {
        let what = &ex.tool;
        let mut args: Value = serde_json::from_str(&replaced(&ex.args, &subs))
            .unwrap_or_else(|e| panic!("{what}: the README's arguments are not JSON: {e}"));
        if let Some(p) = &pair {
            args["thread_id"] = p["thread_id"].clone();
            args["workspace_root"] = p["workspace_root"].clone();
        }
        let result = a.call(what, args);
        let env = sc(&result);
        assert_ne!(result["isError"], true, "{what} failed: {result}");
        if what == "Initialize" {
            pair = Some(env["data"].clone());
        }
        if what == "BashCommand" {
            let id = env["data"]["state"]["execution_id"].as_str().unwrap();
            subs.push((README_EXECUTION_ID.into(), id.into()));
        }
        if what == "ReadImage" {
            assert_eq!(result["content"][1]["type"], "image", "{result}");
        }
        if let Some(lines) = &ex.lines {
            lines_in_order(&replaced(lines, &subs), text(&result))
                .unwrap_or_else(|e| panic!("{what}'s README example: {e}"));
        }
        if let Some(s) = &ex.structured {
            let want: Value = serde_json::from_str(&replaced(s, &subs))
                .unwrap_or_else(|e| panic!("{what}: `structuredContent` is not JSON: {e}"));
            subset(&want, env, "structuredContent")
                .unwrap_or_else(|e| panic!("{what}'s README example: {e}\n{env:#}"));
        }
    }
}

#[test]
fn the_readme_python_sdk_example_connects_initializes_and_runs_a_command() {
    let section = section();
    let (_, body) = paragraphs(&section)
        .into_iter()
        .find(|(head, _)| head.starts_with("**From Python**"))
        .expect("the section has a **From Python** example");
    let script = fenced(&body, "python").pop().expect("a ```python block");
    let printed = fenced(&body, "text")
        .pop()
        .expect("the ```text lines it prints");

    let dir = tempfile::tempdir().unwrap();
    let (home, state, run, bin, ws) = (
        dir.path().join("home"),
        dir.path().join("state"),
        dir.path().join("run"),
        dir.path().join("bin"),
        dir.path().join("project"),
    );
    for d in [&home, &run, &bin, &ws] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::set_permissions(&run, PermissionsExt::from_mode(0o700)).unwrap();
    // `winx-code-agent` on PATH, as after `cargo install`: this build, with the test's own
    // HOME, state and runtime directories (the SDK passes the server only HOME and PATH).
    let wrapper = bin.join("winx-code-agent");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexport HOME='{}' WINX_STATE_DIR='{}' XDG_RUNTIME_DIR='{}'\nexec '{}' \"$@\"\n",
            home.display(),
            state.display(),
            run.display(),
            support::bin()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, PermissionsExt::from_mode(0o755)).unwrap();
    let ws = ws.canonicalize().unwrap();
    let file = dir.path().join("example.py");
    std::fs::write(
        &file,
        script.replace(README_WORKSPACE, ws.to_str().unwrap()),
    )
    .unwrap();

    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = Command::new(python())
        .arg(&file)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python example");
    let pid = child.id();
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx.recv_timeout(PYTHON_LIMIT);
    if out.is_err() {
        // The interpreter this test started, not reaped yet (its waiter has not returned).
        let pid = nix::unistd::Pid::from_raw(pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
    support::kill_processes_mentioning(dir.path());
    let out = out
        .unwrap_or_else(|_| panic!("the Python example ran over {PYTHON_LIMIT:?}"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python example failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    lines_in_order(&printed, &stdout)
        .unwrap_or_else(|e| panic!("the Python example's output: {e}"));
}

#[test]
fn a_result_that_lacks_a_stated_line_or_field_is_refused() {
    let got = "Edited /x/notes.txt (sha256:ab)\n--- a\n-beta\n+BETA\n";
    assert!(lines_in_order("Edited /x/notes.txt (sha256:…)\n…\n+BETA", got).is_ok());
    assert!(lines_in_order("+BETA\n-beta", got).is_err(), "order counts");
    assert!(lines_in_order("+GAMMA", got).is_err());
    assert!(!matches("Edited …(sha256:…)", "Edited x (sha256"));
    let env = serde_json::json!({"data": {"files": [{"path": "/x", "created": false}]}});
    let ok = serde_json::json!({"data": {"files": [{"path": "/…"}]}});
    assert!(subset(&ok, &env, "sc").is_ok());
    let bad = serde_json::json!({"data": {"files": [{"created": true}]}});
    assert!(subset(&bad, &env, "sc").is_err());
}
