//! The real Codex CLI (`codex exec`, the version `make hosts` pins) driving winx, judged by
//! what reaches the model: a scripted OpenAI Responses provider on loopback
//! (`support::fake_responses`) makes the model call winx's tools one by one and keeps every
//! request Codex sends it; each step's `function_call_output` in the next request is what
//! the model received, and must carry the evidence (the echoed marker and exit code, the
//! file's lines and revision, the long output's last line and truncation notice, the page
//! text, the error's code and next action).
//!
//! Codex runs offline with its own `CODEX_HOME` and `HOME` in the test's temp dir; winx is
//! configured with the TOML snippets of README's "### Codex" section, so the README stays
//! true. Cells: stdio in both runtimes, Streamable HTTP with a bearer token, and stdio
//! under Codex's default approval settings (the snippet without its approval key).
//! Set `WINX_TEST_KEEP_LOGS=1` to keep the temp dir (requests.jsonl, Codex's output).

use crate::support;
use crate::support::codex_exec;
use crate::support::http;

use codex_exec::{Cell, Dirs, Transport, exec_codex, golden_trace, readme_snippets, run_codex};
use serde_json::{Value, json};
use std::io::Read;
use std::time::{Duration, Instant};
use support::fake_responses::{FakeResponses, Reply, Request};

/// The small file the model reads and edits.
const NOTES: &str = "alpha-line-1\nbeta-line-2\ngamma-line-3\n";

/// The value after `key` in what the model received, as JSON (`"key":"v"`, also escaped
/// inside a JSON string) or as text (`key: v`); also in TOML (`key = "v"`).
fn field(text: &str, key: &str) -> Option<String> {
    text.match_indices(key).find_map(|(i, _)| {
        let rest = text[i + key.len()..].trim_start_matches(['"', '\\', ':', '=', ' ']);
        let v: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c))
            .collect();
        (!v.is_empty()).then_some(v)
    })
}

/// The session pair plus `extra`, as the model would send it.
fn with_pair(thread: &str, ws: &str, extra: Value) -> Value {
    let mut args = json!({"thread_id": thread, "workspace_root": ws});
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    args
}

/// The model of the full cells: step `n` (the number of tool results so far) makes the
/// `n`-th call; ids come from what the model was given.
fn full_script(ws: String) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    move |req| {
        let outs = req.outputs();
        let thread = outs
            .first()
            .and_then(|o| field(o, "thread_id"))
            .unwrap_or_else(|| "thread-id-not-seen".into());
        let pair = |extra| with_pair(&thread, &ws, extra);
        match outs.len() {
            0 => req.call(
                "winx__Initialize",
                json!({"type": "first_call", "workspace_root": ws}),
            ),
            1 => req.call(
                "winx__BashCommand",
                pair(json!({"action_json": {"command": "echo hello-from-host"}})),
            ),
            2 => req.call(
                "winx__ReadFiles",
                pair(json!({"file_paths": ["notes.txt"]})),
            ),
            3 => req.call(
                "winx__FileWriteOrEdit",
                pair(
                    json!({"file_path": "notes.txt", "text_or_search_replace_blocks":
                    "<<<<<<< SEARCH\nbeta-line-2\n=======\nbeta-line-2-edited\n>>>>>>> REPLACE\n"}),
                ),
            ),
            4 => req.call(
                "winx__BashCommand",
                pair(json!({"action_json": {"command": "seq 1 40000"}})),
            ),
            5 => {
                let id = field(&outs[4], "execution_id").unwrap_or_else(|| "not-seen".into());
                req.call(
                    "winx__Execution",
                    pair(json!({"action": {"type": "read", "execution_id": id}})),
                )
            }
            6 => req.call(
                "winx__BashCommand",
                with_pair(
                    "ws_no_such_thread",
                    &ws,
                    json!({"action_json": {"command": "true"}}),
                ),
            ),
            _ => Reply::text("done"),
        }
    }
}

/// `a`, a line break (real or escaped in JSON), then `b`.
fn lines_follow(text: &str, a: &str, b: &str) -> bool {
    text.contains(&format!("{a}\n{b}")) || text.contains(&format!("{a}\\n{b}"))
}

/// Run the seven steps in `cell` and check what the model received at each.
fn full_cell(cell: Cell) {
    let b = Dirs::new();
    let server = matches!(cell.transport, Transport::Http)
        .then(|| http::Server::start_in(http::Home::new(), &[], &[], true));
    let ws = match &server {
        Some(s) => s.home.workspace.clone(),
        None => b.path("project").canonicalize().unwrap(),
    };
    std::fs::write(ws.join("notes.txt"), NOTES).unwrap();
    let url = server.as_ref().map(|s| format!("http://{}/mcp", s.addr));
    let token = server.as_ref().map(|_| (token_var(), http::TOKEN));
    let script = full_script(ws.to_string_lossy().into_owned());
    let run = run_codex(&b, &cell, url.as_deref(), token, &ws, script);
    eprintln!("codex exec, {:?}: {:.1} s", cell.transport, run.seconds);
    golden_trace(&run, &b, &ws);
    let outs = run.outputs();
    let mut failures = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            failures.push(what.to_string());
        }
    };
    let out = |i: usize| outs.get(i).map(String::as_str).unwrap_or("");
    check(outs.len() == 7, "the model got seven tool results");
    check(
        field(out(0), "thread_id").is_some(),
        "Initialize: the thread_id",
    );
    check(
        out(1).contains("hello-from-host"),
        "BashCommand: the echoed marker",
    );
    check(exit_code_zero(out(1)), "BashCommand: exit code 0");
    for line in NOTES.lines() {
        check(
            out(2).contains(line),
            &format!("ReadFiles: the line {line}"),
        );
    }
    let revision = field(out(2), "sha256");
    check(revision.is_some(), "ReadFiles: the revision");
    check(
        out(3).contains("notes.txt")
            && field(out(3), "sha256").is_some_and(|r| Some(&r) != revision.as_ref()),
        "edit: the file and its new revision",
    );
    check(
        lines_follow(out(4), "39999", "40000"),
        "seq: the last line 40000",
    );
    // winx's own notice: Codex marks its middle cut "…N tokens truncated…".
    check(
        out(4).contains("output truncated"),
        "seq: winx's truncation notice",
    );
    check(
        lines_follow(out(5), "1", "2") && lines_follow(out(5), "2", "3"),
        "Execution read: the page text",
    );
    check(out(6).contains("needs_initialize"), "error: its code");
    check(
        out(6).contains("first_call"),
        "error: the next action (Initialize)",
    );
    assert!(
        failures.is_empty(),
        "the model did not receive: {failures:?}\n{}",
        run.report()
    );
}

fn exit_code_zero(text: &str) -> bool {
    regex_lite::Regex::new(r#"exit[_ ]code\W{1,4}0\b"#)
        .unwrap()
        .is_match(text)
}

/// The variable README's HTTP snippet names for the bearer token.
fn token_var() -> &'static str {
    let (_, http) = readme_snippets();
    let var =
        field(&http, "bearer_token_env_var").expect("the HTTP snippet names a token variable");
    Box::leak(var.into_boxed_str())
}

#[test]
fn stdio_daemon_model_receives_every_result() {
    full_cell(Cell {
        transport: Transport::Stdio("daemon"),
        approval_key: true,
    });
}

#[test]
fn stdio_embedded_model_receives_every_result() {
    full_cell(Cell {
        transport: Transport::Stdio("embedded"),
        approval_key: true,
    });
}

#[test]
fn http_bearer_model_receives_every_result() {
    full_cell(Cell {
        transport: Transport::Http,
        approval_key: true,
    });
}

/// Under Codex's default approval settings (no per-server key), winx's read-only tools
/// (and `Initialize`, neither destructive nor open-world) run; `codex exec` refuses a
/// call it would have to ask about (`BashCommand`), as README says.
#[test]
fn default_approval_runs_read_only_tools() {
    let b = Dirs::new();
    let ws = b.path("project").canonicalize().unwrap();
    std::fs::write(ws.join("notes.txt"), NOTES).unwrap();
    let w = ws.to_string_lossy().into_owned();
    let cell = Cell {
        transport: Transport::Stdio("embedded"),
        approval_key: false,
    };
    let run = run_codex(&b, &cell, None, None, &ws, move |req| {
        let outs = req.outputs();
        let thread = outs.first().and_then(|o| field(o, "thread_id"));
        match (outs.len(), thread) {
            (0, _) => req.call(
                "winx__Initialize",
                json!({"type": "first_call", "workspace_root": w}),
            ),
            (1, Some(t)) => req.call(
                "winx__ReadFiles",
                with_pair(&t, &w, json!({"file_paths": ["notes.txt"]})),
            ),
            (2, Some(t)) => req.call(
                "winx__BashCommand",
                with_pair(
                    &t,
                    &w,
                    json!({"action_json": {"command": "echo hello-from-host"}}),
                ),
            ),
            _ => Reply::text("done"),
        }
    });
    eprintln!("codex exec, default approval: {:.1} s", run.seconds);
    let outs = run.outputs();
    let read = outs.get(1).map(String::as_str).unwrap_or("");
    assert!(
        NOTES.lines().all(|l| read.contains(l)),
        "ReadFiles did not run under Codex's default approval settings, or its lines did \
         not reach the model\n{}",
        run.report()
    );
    let bash = outs.get(2).map(String::as_str).unwrap_or("");
    assert!(
        bash.contains("requires approval") && !bash.contains("hello-from-host"),
        "codex exec ran BashCommand without an approval setting\n{}",
        run.report()
    );
}

/// One raw request to the fake: the status line and everything it sent back.
fn raw(addr: std::net::SocketAddr, method: &str, body: &str) -> (String, String) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(support::HARD_TIMEOUT)).unwrap();
    let path = if method == "GET" {
        "/v1/models"
    } else {
        "/v1/responses"
    };
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, rest) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        rest.to_string(),
    )
}

/// The provider's cues, as any client sees them (other host tests rely on them).
#[test]
fn fake_provider_cues() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeResponses::start(dir.path(), |req| match req.body["cue"].as_str() {
        Some("500") => Reply::Http500("boom".into()),
        Some("failed") => Reply::Failed("the model fell over".into()),
        Some("hold") => Reply::Hold(Box::new(Reply::text("after the hold"))),
        Some("delay") => Reply::Delayed(Duration::from_millis(150), Box::new(Reply::text("late"))),
        _ => Reply::call("f", json!({"a": 1})),
    });
    let (status, body) = raw(fake.addr, "POST", r#"{"cue":"500"}"#);
    assert!(status.contains(" 500 "), "{status}");
    assert!(body.contains("boom"), "{body}");
    let (status, body) = raw(fake.addr, "POST", r#"{"cue":"failed"}"#);
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains("event: response.created"), "{body}");
    assert!(body.contains("event: response.failed") && body.contains("the model fell over"));
    assert!(!body.contains("response.completed"), "{body}");
    let t = Instant::now();
    let (_, body) = raw(fake.addr, "POST", r#"{"cue":"delay"}"#);
    assert!(t.elapsed() >= Duration::from_millis(150));
    assert!(body.contains(r#""delta":"late""#), "{body}");
    assert!(body.contains("event: response.completed"), "{body}");
    let (_, body) = raw(fake.addr, "POST", "{}");
    assert!(body.contains(r#""type":"function_call""#), "{body}");
    assert!(body.contains(r#""arguments":"{\"a\":1}""#), "{body}");
    let (status, body) = raw(fake.addr, "GET", "");
    assert!(
        status.contains(" 200 ") && body.contains("models"),
        "{status} {body}"
    );
    let addr = fake.addr;
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || tx.send(raw(addr, "POST", r#"{"cue":"hold"}"#)));
    assert!(
        fake.wait_held(1, support::HARD_TIMEOUT),
        "the stream was never held"
    );
    assert!(
        rx.try_recv().is_err(),
        "a held stream ended before its release"
    );
    fake.release();
    let (_, body) = rx.recv_timeout(support::HARD_TIMEOUT).expect("released");
    assert!(body.contains("after the hold") && body.contains("response.completed"));
    assert_eq!(fake.requests().len(), 6);
    assert_eq!(fake.turns().len(), 5);
    let logged = std::fs::read_to_string(fake.log_path()).unwrap();
    assert_eq!(logged.lines().count(), 6, "{logged}");
}

/// A stream that ends in `response.failed` fails Codex's turn with the provider's message
/// (the cue the interactive tests use for a model error).
#[test]
fn codex_reports_a_failed_stream() {
    let b = Dirs::new();
    let ws = b.path("project").canonicalize().unwrap();
    let cell = Cell {
        transport: Transport::Stdio("embedded"),
        approval_key: true,
    };
    let (run, status) = exec_codex(&b, &cell, None, None, &ws, |_| {
        Reply::Failed("scripted-model-failure".into())
    });
    assert!(
        status.is_some_and(|s| !s.success()),
        "codex exec must fail when the model's stream fails ({status:?})\n{}",
        run.report()
    );
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("scripted-model-failure"), "{}", run.report());
    assert_eq!(
        run.fake.turns().len(),
        1,
        "retried despite stream_max_retries = 0"
    );
}
