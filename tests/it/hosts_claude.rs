//! Claude Code, the real program (npm `@anthropic-ai/claude-code`, pinned in the Makefile,
//! installed by `make hosts`), with winx as its MCP server, driven offline by a scripted
//! model on loopback (`support/fake_anthropic.rs`). Judged by what reaches the model: the
//! `tool_result` blocks of the request Claude Code sends after each call. One scripted
//! session per cell: stdio in the daemon and the embedded runtime, and Streamable HTTP
//! with a bearer token. The MCP set-up is the README's "Claude Code" section, read from
//! README.md, so the README stays true.
//!
//! Set `WINX_TEST_KEEP_LOGS=1` to keep a cell's directory (the model request log
//! `model-requests.jsonl`, Claude Code's stdout and stderr).

use crate::support;
use crate::support::http;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use support::fake_anthropic::{Exchange, FakeAnthropic, Reply, Turn};
use support::hosts::{cut_strings, fenced, host_bin, readme_section, shell_words};
use support::wait::Deadline;
use support::{bin, isolated_env, kill_processes_mentioning, manifest_dir};

/// The version `make hosts` installs (Makefile `CLAUDE_CODE_VERSION`).
const VERSION: &str = "2.1.328";

/// One `claude` run, a whole session at most: Claude Code's start (about 1.5 s warm; its 370 MB native binary
/// takes longer on a cold page cache), a winxd start in the daemon cell, seven calls of a
/// few milliseconds each. Generous, because only a hang should exceed it.
const SESSION_LIMIT: Duration = Duration::from_secs(120);

/// The README's placeholders, replaced by this test's binary, URL and token.
const README_BIN: &str = "winx-code-agent";
const README_URL: &str = "http://127.0.0.1:8000/mcp";
const README_TOKEN_CMD: &str = "$(cat ~/.config/winx-http-token)";
const README_TOKEN_VAR: &str = "WINX_MCP_TOKEN";

/// The file the model reads, then edits: distinctive lines, so seeing them proves the
/// lines (not only their count) reached the model.
const NOTES: &str = "alpha-7f3 first line\nbeta-9c1 second line\ngamma-2d4 third line\n";
const NOTES_EDITED: &str = "alpha-7f3 first line\nbeta-9c1 EDITED-BY-HOST\ngamma-2d4 third line\n";
/// A file the model edits without reading it first: the error step.
const UNREAD: &str = "zeta-5e8 never read\n";

/// What the user asks; the scripted model does not read it.
const PROMPT: &str = "Run the winx host checks.";

/// Prints `hello-from-host` without the command line containing it, so the marker can
/// only reach the model as the command's output.
const ECHO: &str = "printf '%s-from-host\\n' hello";

#[test]
fn stdio_daemon_runtime_the_model_receives_every_result() {
    let s = Snippets::from_readme();
    let cell = Cell::new(None, "daemon");
    // The README's `claude mcp add`, run by Claude Code itself into the cell's HOME.
    let add = replaced(&s.add_stdio, &[(README_BIN, bin())]);
    cell.claude_ok(&add);
    cell.session(&[]);
}

#[test]
fn stdio_embedded_runtime_the_model_receives_every_result() {
    let s = Snippets::from_readme();
    let cell = Cell::new(None, "embedded");
    let mut cfg = s.json_stdio.clone();
    cfg["mcpServers"]["winx"]["command"] = json!(bin());
    let path = cell.write_config(&cfg);
    cell.session(&["--mcp-config", &path, "--strict-mcp-config"]);
}

#[test]
fn http_with_a_bearer_token_the_model_receives_every_result() {
    let s = Snippets::from_readme();
    let server = http::Server::start(&[]);
    let url = format!("http://{}/mcp", server.addr);
    let mut cell = Cell::new(Some(server.home.workspace.clone()), "embedded");
    cell.env.push((README_TOKEN_VAR.into(), http::TOKEN.into()));
    let mut cfg = s.json_http.clone();
    cfg["mcpServers"]["winx"]["url"] = json!(url);
    // The README's `claude mcp add --transport http` stores the same server as its JSON.
    let add = replaced(
        &s.add_http,
        &[(README_URL, &url), (README_TOKEN_CMD, http::TOKEN)],
    );
    cell.claude_ok(&add);
    let stored = cell.stored_server("winx");
    let mut expected = cfg["mcpServers"]["winx"].clone();
    let bearer = format!("Bearer {}", http::TOKEN);
    expected["headers"]["Authorization"] = json!(bearer);
    assert_eq!(
        stored, expected,
        "`claude mcp add --transport http` and the HTTP .mcp.json in the README differ"
    );
    let path = cell.write_config(&cfg);
    cell.session(&["--mcp-config", &path, "--strict-mcp-config"]);
}

/// The snippets of the README's "Claude Code" section.
struct Snippets {
    add_stdio: Vec<String>,
    add_http: Vec<String>,
    json_stdio: Value,
    json_http: Value,
}

impl Snippets {
    fn from_readme() -> Snippets {
        let section = readme_section("claude");
        let section = section.as_str();
        let adds: Vec<Vec<String>> = fenced(section, "bash")
            .iter()
            .flat_map(|b| b.lines())
            .filter(|l| l.starts_with("claude mcp add "))
            .map(shell_words)
            .collect();
        let jsons: Vec<Value> = fenced(section, "json")
            .iter()
            .map(|b| serde_json::from_str(b).unwrap_or_else(|e| panic!("README json: {e}\n{b}")))
            .collect();
        let is_http = |c: &&Vec<String>| c.iter().any(|w| w == "http");
        let pick = |http: bool| {
            jsons
                .iter()
                .find(|j| j["mcpServers"]["winx"]["url"].is_string() == http)
                .unwrap_or_else(|| {
                    panic!("README's Claude Code section lacks a .mcp.json (http: {http})")
                })
                .clone()
        };
        let s = Snippets {
            add_stdio: adds
                .iter()
                .find(|c| !is_http(c))
                .expect("stdio `claude mcp add`")
                .clone(),
            add_http: adds
                .iter()
                .find(is_http)
                .expect("HTTP `claude mcp add`")
                .clone(),
            json_stdio: pick(false),
            json_http: pick(true),
        };
        // The placeholders this test replaces must be there, or it would test something else.
        let has = |words: &[String], p: &str| words.iter().any(|w| w.contains(p));
        let winx = |j: &Value, field: &str| j["mcpServers"]["winx"][field].clone();
        let placeholders = has(&s.add_stdio, README_BIN)
            && has(&s.add_http, README_URL)
            && has(&s.add_http, README_TOKEN_CMD)
            && winx(&s.json_stdio, "command") == README_BIN
            && winx(&s.json_http, "url") == README_URL
            && winx(&s.json_http, "headers")["Authorization"]
                == format!("Bearer ${{{README_TOKEN_VAR}}}");
        assert!(
            placeholders,
            "the README's Claude Code snippets lack a placeholder"
        );
        s
    }
}

/// `words` after `claude`, each placeholder replaced.
fn replaced(words: &[String], subs: &[(&str, &str)]) -> Vec<String> {
    words[1..]
        .iter()
        .map(|w| {
            subs.iter()
                .fold(w.clone(), |w, (from, to)| w.replace(from, to))
        })
        .collect()
}

/// The installed `claude`.
fn claude_bin() -> PathBuf {
    host_bin("claude", "Claude Code")
}

/// How a `claude` run ended.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (status, out, err) = (self.status, &self.stdout, &self.stderr);
        write!(f, "claude: {status}\nstdout: {out}\nstderr: {err}")
    }
}

/// One host × transport cell: a private HOME for Claude Code (and for the stdio server it
/// starts, which inherits Claude Code's environment), winx's state and runtime
/// directories, the workspace. Every process that mentions the directory dies on Drop.
struct Cell {
    claude: PathBuf,
    dir: tempfile::TempDir,
    ws: PathBuf,
    env: Vec<(String, String)>,
}

impl Cell {
    /// `ws`: the workspace (the HTTP server's), else one inside the cell.
    fn new(ws: Option<PathBuf>, runtime: &str) -> Cell {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        for d in ["home", "run", "project"] {
            std::fs::create_dir(p(d)).unwrap();
        }
        std::fs::set_permissions(
            p("run"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let ws = ws.unwrap_or_else(|| p("project").canonicalize().unwrap());
        let mut env = isolated_env(&p("home"), &p("state"), &p("run"));
        env.push(("WINX_RUNTIME".into(), runtime.into()));
        let cell = Cell {
            claude: claude_bin(),
            dir,
            ws,
            env,
        };
        let version = cell.claude_ok(&["--version".into()]);
        assert!(
            version.starts_with(VERSION),
            "{} is Claude Code {version}, not the pinned {VERSION}: run `make hosts`",
            cell.claude.display()
        );
        cell
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `claude` with the offline environment: the fake model at `base_url` (or nowhere)
    /// and everything but the model requests turned off.
    fn command(&self, base_url: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.claude);
        cmd.env_clear()
            .envs(self.env.iter().cloned())
            .envs([
                ("ANTHROPIC_BASE_URL", base_url),
                ("ANTHROPIC_API_KEY", "sk-ant-fake-for-tests"),
                // Auto-update, telemetry, error reporting and the other side traffic.
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
                // A request the fake answers badly fails at once instead of backing off.
                ("CLAUDE_CODE_MAX_RETRIES", "0"),
            ])
            .current_dir(&self.ws)
            .args(args)
            .stdin(Stdio::null())
            .process_group(0);
        cmd
    }

    /// Run `claude args` against the model at `base_url` within [`SESSION_LIMIT`], its
    /// output in `<name>.stdout` / `<name>.stderr`; `context` says what a hang left behind.
    fn run(&self, name: &str, base_url: &str, args: &[&str], context: &dyn Fn() -> String) -> Ran {
        let file = |ext: &str| std::fs::File::create(self.path(&format!("{name}.{ext}"))).unwrap();
        let mut child = self
            .command(base_url, args)
            .stdout(file("stdout"))
            .stderr(file("stderr"))
            .spawn()
            .expect("start claude");
        let deadline = Deadline::after("a Claude Code run", SESSION_LIMIT);
        let waited = support::wait::settle(
            deadline,
            || child.try_wait().expect("wait for claude"),
            Option::is_some,
        );
        let Ok(Some(status)) = waited else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{deadline} passed with `claude {args:?}` running\n{}",
                context()
            );
        };
        let read = |ext: &str| {
            std::fs::read_to_string(self.path(&format!("{name}.{ext}"))).unwrap_or_default()
        };
        Ran {
            status,
            stdout: read("stdout"),
            stderr: read("stderr"),
        }
    }

    /// Run a `claude` subcommand (`--version`, `mcp add …`) that must succeed; its stdout.
    /// No model is needed: the base URL is the discard port.
    fn claude_ok(&self, args: &[String]) -> String {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = self.run("claude-cli", "http://127.0.0.1:9", &args, &String::new);
        assert!(ran.status.success(), "claude {args:?} failed: {ran}");
        ran.stdout
    }

    /// The MCP server `name` as `claude mcp add` stored it for the workspace.
    fn stored_server(&self, name: &str) -> Value {
        let cfg = std::fs::read_to_string(self.path("home/.claude.json")).unwrap();
        let cfg: Value = serde_json::from_str(&cfg).unwrap();
        let ws = self.ws.to_string_lossy();
        cfg["projects"][ws.as_ref()]["mcpServers"][name].clone()
    }

    fn write_config(&self, cfg: &Value) -> String {
        let path = self.path("mcp.json");
        std::fs::write(&path, cfg.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// The scripted session with `mcp_args` naming the server; asserts, step by step, on
    /// what the model received.
    fn session(&self, mcp_args: &[&str]) {
        std::fs::write(self.ws.join("notes.txt"), NOTES).unwrap();
        std::fs::write(self.ws.join("unread.txt"), UNREAD).unwrap();
        let ws = self.ws.to_string_lossy().into_owned();
        let fake = FakeAnthropic::start(self.dir.path(), move |t: &Turn| next_call(t, &ws));
        // Permissions: `--allowedTools mcp__winx` allows exactly winx's tools, as the
        // README tells a user to; print mode refuses anything else, so a permission
        // problem shows as a refused call instead of a hang. `--tools ""` drops the
        // built-in tools, so the requests carry only winx's.
        let mut args = vec!["-p", PROMPT, "--allowedTools", "mcp__winx", "--tools", ""];
        args.extend(["--output-format", "text"]);
        args.extend(mcp_args);
        let started = Instant::now();
        let ran = self.run("claude", &fake.base_url(), &args, &|| fake.transcript());
        eprintln!("claude session: {:.1} s", started.elapsed().as_secs_f64());
        let report = || format!("\n{ran}\nwhat the model received:\n{}", fake.transcript());
        assert!(ran.status.success(), "claude failed{}", report());
        check_request_shape(&fake);
        let calls = fake.exchanges();
        let mut failures = Vec::new();
        for (i, step) in STEPS.iter().enumerate() {
            let Some(e) = calls.get(i) else {
                failures.push(format!("step {i} ({}): never called", step.tool));
                continue;
            };
            if !e.name.ends_with(&format!("__{}", step.tool)) {
                failures.push(format!(
                    "step {i}: called {} instead of {}",
                    e.name, step.tool
                ));
            } else if let Err(why) = (step.check)(e, &self.ws) {
                failures.push(format!("step {i} ({}, {}): {why}", step.tool, step.what));
            }
        }
        assert!(failures.is_empty(), "{}{}", failures.join("\n"), report());
        assert_eq!(
            std::fs::read_to_string(self.ws.join("notes.txt")).unwrap(),
            NOTES_EDITED
        );
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        kill_processes_mentioning(self.dir.path());
        if std::env::var_os("WINX_TEST_KEEP_LOGS").is_some() {
            let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap()).keep();
            eprintln!("kept {}", dir.display());
        }
    }
}

/// One scripted call and the check on what the model received for it.
struct Step {
    tool: &'static str,
    what: &'static str,
    check: fn(&Exchange, &Path) -> Result<(), String>,
}

const STEPS: [Step; 7] = [
    Step {
        tool: "Initialize",
        what: "first_call",
        check: |e, _| need(find_value(&e.result, "thread_id").is_some(), "no thread_id"),
    },
    Step {
        tool: "BashCommand",
        what: "the echoed marker and exit code 0",
        check: |e, _| {
            need(e.result.contains("hello-from-host"), "no `hello-from-host`")?;
            let exit0 = regex_lite::Regex::new(r#"exit[ _]code"?:?\s*0\b"#).unwrap();
            need(exit0.is_match(&e.result), "no exit code 0")
        },
    },
    Step {
        tool: "ReadFiles",
        what: "the file's lines and revision",
        check: |e, _| {
            for line in NOTES.lines() {
                need(e.result.contains(line), &format!("no line `{line}`"))?;
            }
            need(e.result.contains(&revision(NOTES)), "no revision")
        },
    },
    Step {
        tool: "FileWriteOrEdit",
        what: "the edit's outcome",
        check: |e, _| {
            need(
                e.result.contains(&revision(NOTES_EDITED)),
                "no new revision",
            )
        },
    },
    Step {
        tool: "BashCommand",
        what: "the long output's last line and truncation notice",
        check: |e, _| {
            // The last two lines, as text or inside a JSON string.
            let tail = e.result.contains("39999\n40000") || e.result.contains("39999\\n40000");
            need(tail, "no last line `40000` after `39999`")?;
            need(
                e.result.to_lowercase().contains("truncat"),
                "no truncation notice",
            )
        },
    },
    Step {
        tool: "Execution",
        what: "the page text of the echo's execution",
        check: |e, _| need(e.result.contains("hello-from-host"), "no `hello-from-host`"),
    },
    // A result with `isError` reaches the model as its text block, not as
    // `structuredContent` (Claude Code 2.1.328): the text must name the next action.
    Step {
        tool: "FileWriteOrEdit",
        what: "an edit of an unread file: the error code and next action",
        check: |e, ws| {
            need(
                e.result.contains("read_required"),
                "no error code `read_required`",
            )?;
            need(
                shows_next_action(&e.result, "ReadFiles"),
                "no next action naming ReadFiles",
            )?;
            let untouched = std::fs::read_to_string(ws.join("unread.txt")).unwrap() == UNREAD;
            need(untouched, "the refused edit changed the file")
        },
    },
];

fn need(ok: bool, why: &str) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why.to_string()) }
}

/// `sha256:<hex>` of `text`: winx's revision of a file holding it.
fn revision(text: &str) -> String {
    let hex: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A next action for `tool` in a result: a structured `nextAction` (the result is JSON)
/// or a `Next: <tool>` line (the result is text).
fn shows_next_action(result: &str, tool: &str) -> bool {
    match serde_json::from_str::<Value>(result) {
        Ok(v) => v["nextAction"]["tool"] == tool,
        Err(_) => result.contains(&format!("Next: {tool}")),
    }
}

/// The value after `key` in a result, as text (`key: value`) or JSON (`"key":"value"`).
fn find_value(result: &str, key: &str) -> Option<String> {
    let re = regex_lite::Regex::new(&format!(r#"{key}\W+([A-Za-z0-9_.-]+)"#)).unwrap();
    re.captures(result).map(|c| c[1].to_string())
}

/// The scripted model: the next call from what the conversation holds so far (so a
/// retried request gets the same answer), taking the `thread_id` from the Initialize
/// result and the execution id from the echo's result, as a model would.
fn next_call(turn: &Turn, ws: &str) -> Reply {
    if turn.tool("__Initialize").is_none() {
        return Reply::Text("No winx tools were offered.".into());
    }
    let results = turn.results();
    let thread = results.first().and_then(|r| find_value(r, "thread_id"));
    let pair = |extra: Value| {
        let mut args = json!({"thread_id": thread, "workspace_root": ws});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    let step = turn.calls_made();
    if step >= 1 && thread.is_none() {
        return Reply::Text("Stopped: no thread_id in what Initialize returned.".into());
    }
    let edit = |path: &str, search: &str, replace: &str| {
        let blocks = format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n");
        pair(json!({"file_path": path, "text_or_search_replace_blocks": blocks}))
    };
    let input = match step {
        0 => json!({"type": "first_call", "workspace_root": ws}),
        1 => pair(json!({"action_json": {"command": ECHO}})),
        2 => pair(json!({"file_paths": ["notes.txt"]})),
        3 => edit(
            "notes.txt",
            "beta-9c1 second line",
            "beta-9c1 EDITED-BY-HOST",
        ),
        4 => pair(json!({"action_json": {"command": "seq 1 40000"}})),
        5 => match results.get(1).and_then(|r| find_value(r, "execution_id")) {
            Some(id) => pair(json!({"action": {"type": "read", "execution_id": id}})),
            None => return Reply::Text("Stopped: no execution_id in the echo's result.".into()),
        },
        6 => edit("unread.txt", "zeta-5e8 never read", "ZETA"),
        _ => return Reply::Text("done".into()),
    };
    let tool = STEPS[step].tool;
    match turn.tool(&format!("__{tool}")) {
        Some(name) => Reply::Call { name, input },
        None => Reply::Text(format!("Stopped: no tool named *__{tool} was offered.")),
    }
}

/// The request that carried the echo's result, against the recorded trace of this
/// version's (`tests/golden/hosts/claude-code-<version>-request.json`): the same top-level
/// fields, streaming, winx's tools under `mcp__winx__`, results as `tool_result` blocks
/// in a user message after the assistant's `tool_use`. `WINX_UPDATE_GOLDEN=1` rewrites it.
fn check_request_shape(fake: &FakeAnthropic) {
    let turns = fake.turns();
    let req = turns
        .get(2)
        .expect("Claude Code sent no request after the echo");
    let path = manifest_dir().join(format!(
        "tests/golden/hosts/claude-code-{VERSION}-request.json"
    ));
    if std::env::var_os(support::golden::UPDATE_ENV).is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = serde_json::to_string_pretty(&trace(req)).unwrap();
        std::fs::write(&path, text + "\n").unwrap();
    }
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(req),
        keys(&golden["request"]),
        "the request's fields changed"
    );
    assert_eq!(req["stream"], true);
    let names = strings(&req["tools"], "name");
    for t in [
        "Initialize",
        "BashCommand",
        "ReadFiles",
        "FileWriteOrEdit",
        "Execution",
    ] {
        let name = format!("mcp__winx__{t}");
        assert!(names.contains(&name.as_str()), "no {name} in {names:?}");
    }
    let roles = strings(&req["messages"], "role");
    let golden_roles = strings(&golden["request"]["messages"], "role");
    assert_eq!(roles, golden_roles, "the conversation's shape changed");
}

/// The string `field` of each item of the array `v`.
fn strings<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    let items = v.as_array().map_or(&[][..], Vec::as_slice);
    items.iter().filter_map(|i| i[field].as_str()).collect()
}

/// One real request, trimmed for the record: the tools reduced to their names but one,
/// long texts cut, temp paths replaced.
fn trace(req: &Value) -> Value {
    let mut r = req.clone();
    let tools = r["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<Value> = tools.iter().map(|t| t["name"].clone()).collect();
    let sample = tools
        .iter()
        .find(|t| t["name"] == "mcp__winx__Initialize")
        .cloned();
    r["tools"] = json!([sample]);
    cut_strings(&mut r);
    json!({
        "_note": format!("A request Claude Code {VERSION} sent to the model (ANTHROPIC_BASE_URL) in \
                          tests/it/hosts_claude.rs, trimmed: `tools` keeps one of the tools \
                          named in `tool_names`; long strings are cut."),
        "tool_names": names,
        "request": r,
    })
}
