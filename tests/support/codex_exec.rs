//! The real Codex CLI in a test: the binary `make hosts` installed, a private
//! `CODEX_HOME` whose `config.toml` points Codex at the fake Responses provider
//! (`support::fake_responses`) and at winx through README's "### Codex" snippets, one
//! bounded `codex exec` run killed with its process group on timeout, and the golden
//! traces of what this Codex version sends (`tests/golden/hosts/codex-<version>-*.json`).
//!
//! Included by `tests/it/hosts_codex.rs` with `#[path = "support/codex_exec.rs"]`.
#![allow(dead_code)]

use crate::support::fake_responses::{FakeResponses, Reply, Request};
use crate::support::{kill_processes_mentioning, manifest_dir};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Codex release the Makefile pins (`CODEX_VERSION`); golden traces name it.
pub const CODEX_VERSION: &str = "0.169.0";

/// One whole `codex exec` run: eight model turns and seven winx calls take 1.5 to 3 s on
/// a shared 2-core machine (debug build); only a hang comes near this.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The environment variable the provider's API key is read from (any value works).
pub const KEY_VAR: &str = "WINX_FAKE_OPENAI_KEY";

/// The Codex binary `make hosts` installed; panics saying how to install it.
pub fn codex_bin() -> PathBuf {
    crate::support::hosts::host_bin("codex", "Codex CLI")
}

/// The TOML blocks of README's "### Codex" section: (stdio, HTTP).
pub fn readme_snippets() -> (String, String) {
    let section = crate::support::hosts::readme_section("codex");
    let blocks = crate::support::hosts::fenced(&section, "toml");
    let pick = |key: &str| {
        let hits: Vec<&String> = blocks.iter().filter(|b| b.contains(key)).collect();
        assert!(
            hits.len() == 1,
            "README's Codex section needs one toml block with `{key}`, has {blocks:?}"
        );
        hits[0].clone()
    };
    (pick("command ="), pick("url ="))
}

/// The approval key line of a README snippet.
pub const APPROVAL_KEY: &str = "default_tools_approval_mode";

/// How winx is reached, and with which settings.
#[derive(Clone, Copy, Debug)]
pub enum Transport {
    /// stdio, `WINX_RUNTIME` set to this.
    Stdio(&'static str),
    /// `serve --http` with a bearer token.
    Http,
}

/// One host × transport cell's set-up.
pub struct Cell {
    pub transport: Transport,
    /// Keep the README snippet's approval key (false: Codex's defaults).
    pub approval_key: bool,
}

/// A temp dir laid out for Codex and a stdio winx, killed and removed on Drop.
pub struct Dirs {
    pub dir: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Dirs {
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "codex-home", "state", "run", "project"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path().join("run"), PermissionsExt::from_mode(0o700)).unwrap();
        Dirs { dir }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        kill_processes_mentioning(self.dir.path());
        if std::env::var_os("WINX_TEST_KEEP_LOGS").is_some() {
            let path = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap()).keep();
            eprintln!("kept test dir {}", path.display());
        }
    }
}

/// `config.toml` for Codex: the fake provider, then the README snippet with the test's
/// binary, URL and environment put in.
pub fn codex_config(b: &Dirs, fake: &FakeResponses, cell: &Cell, url: Option<&str>) -> String {
    let (stdio, http) = readme_snippets();
    let mut snippet = match cell.transport {
        Transport::Stdio(_) => stdio.replace(
            "command = \"winx-code-agent\"",
            &format!("command = \"{}\"", crate::support::bin()),
        ),
        Transport::Http => http.replace(
            "http://127.0.0.1:8000/mcp",
            url.expect("an HTTP cell has a URL"),
        ),
    };
    if !cell.approval_key {
        snippet = snippet
            .lines()
            .filter(|l| !l.trim_start().starts_with(APPROVAL_KEY))
            .map(|l| format!("{l}\n"))
            .collect();
    }
    if let Transport::Stdio(rt) = cell.transport {
        // The server's own isolation (Codex passes only a few variables through).
        snippet.push_str(&format!(
            "[mcp_servers.winx.env]\nHOME = \"{}\"\nWINX_STATE_DIR = \"{}\"\n\
             XDG_RUNTIME_DIR = \"{}\"\nWINX_RUNTIME = \"{rt}\"\n",
            b.path("home").display(),
            b.path("state").display(),
            b.path("run").display(),
        ));
    }
    format!(
        "model = \"fake-model\"\nmodel_provider = \"fake\"\n\
         check_for_update_on_startup = false\n\n\
         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}\"\n\
         wire_api = \"responses\"\nenv_key = \"{KEY_VAR}\"\n\
         request_max_retries = 0\nstream_max_retries = 0\n\n{snippet}",
        fake.base_url()
    )
}

/// What one `codex exec` run left: the fake's requests, Codex's output, its duration.
pub struct Run {
    pub fake: FakeResponses,
    pub stdout: String,
    pub stderr: String,
    pub seconds: f64,
}

impl Run {
    /// Everything a failure should show.
    pub fn report(&self) -> String {
        format!(
            "{}\n--- codex stdout\n{}\n--- codex stderr (tail)\n{}",
            self.fake.dump(),
            self.stdout,
            tail(&self.stderr, 4000)
        )
    }

    /// The tool results of the last model turn (every result of the run, in order).
    pub fn outputs(&self) -> Vec<String> {
        self.fake
            .turns()
            .last()
            .map(Request::outputs)
            .unwrap_or_default()
    }
}

pub fn tail(s: &str, n: usize) -> &str {
    let mut i = s.len().saturating_sub(n);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

/// Run `codex exec` once in `workspace` with `script` as the model; it must succeed.
pub fn run_codex(
    b: &Dirs,
    cell: &Cell,
    url: Option<&str>,
    token: Option<(&str, &str)>,
    workspace: &Path,
    script: impl Fn(&Request) -> Reply + Send + Sync + 'static,
) -> Run {
    let (run, status) = exec_codex(b, cell, url, token, workspace, script);
    match status {
        Some(s) if s.success() => run,
        Some(s) => panic!("codex exec failed ({s})\n{}", run.report()),
        None => panic!(
            "codex exec did not end within {RUN_LIMIT:?}\n{}",
            run.report()
        ),
    }
}

/// Run `codex exec` once: what it left, and its exit status (`None`: killed at
/// [`RUN_LIMIT`]).
pub fn exec_codex(
    b: &Dirs,
    cell: &Cell,
    url: Option<&str>,
    token: Option<(&str, &str)>,
    workspace: &Path,
    script: impl Fn(&Request) -> Reply + Send + Sync + 'static,
) -> (Run, Option<std::process::ExitStatus>) {
    let fake = FakeResponses::start(b.dir.path(), script);
    std::fs::write(
        b.path("codex-home/config.toml"),
        codex_config(b, &fake, cell, url),
    )
    .unwrap();
    let mut cmd = Command::new(codex_bin());
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", b.path("home"))
        .env("CODEX_HOME", b.path("codex-home"))
        .env(KEY_VAR, "sk-fake")
        .args(["exec", "--skip-git-repo-check", "-C"])
        .arg(workspace)
        .arg("Use winx to run the checks.")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((var, value)) = token {
        cmd.env(var, value);
    }
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("start codex");
    let stdout: Box<dyn Read + Send> = Box::new(child.stdout.take().unwrap());
    let stderr: Box<dyn Read + Send> = Box::new(child.stderr.take().unwrap());
    let readers = [stdout, stderr].map(|mut s| {
        std::thread::spawn(move || {
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out
        })
    });
    let (tx, rx) = crossbeam_channel::bounded(1);
    let pid = child.id() as i32;
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx.recv_timeout(RUN_LIMIT).ok().and_then(Result::ok);
    if status.is_none() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let [stdout, stderr] = readers.map(|h| h.join().unwrap_or_default());
    let run = Run {
        fake,
        stdout,
        stderr,
        seconds: started.elapsed().as_secs_f64(),
    };
    std::fs::write(b.path("codex-stdout.txt"), &run.stdout).unwrap();
    std::fs::write(b.path("codex-stderr.txt"), &run.stderr).unwrap();
    (run, status)
}

/// Where a golden trace of this Codex version lives.
pub fn golden_path(what: &str) -> PathBuf {
    manifest_dir().join(format!(
        "tests/golden/hosts/codex-{CODEX_VERSION}-{what}.json"
    ))
}

/// Strings longer than this are cut in a recorded trace (Codex's instructions run to
/// tens of KB and say nothing about the wire format).
pub const GOLDEN_STRING_LIMIT: usize = 2000;

/// `v` with the test's paths replaced by names (`<workspace>`, `<tmp>`) and long strings
/// cut.
pub fn scrub(v: &Value, paths: &[(String, &str)], limit: usize) -> Value {
    match v {
        Value::String(s) => {
            let mut s = s.clone();
            for (path, name) in paths {
                s = s.replace(path.as_str(), name);
            }
            if s.len() > limit {
                let mut end = limit;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s = format!("{}…[{} more bytes trimmed]", &s[..end], s.len() - end);
            }
            Value::String(s)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| scrub(x, paths, limit)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), scrub(x, paths, limit)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The golden trace of a full cell: the request Codex sent after the `echo` call (its
/// body with long strings cut, its headers) and that call's result as the model saw it.
/// `WINX_TEST_RECORD_GOLDEN=1` rewrites them; otherwise the live request must have the
/// recorded shape (top-level fields, headers, the function call and output items), so a
/// Codex upgrade that changes the wire format shows here first.
pub fn golden_trace(run: &Run, b: &Dirs, ws: &Path) {
    let turns = run.fake.turns();
    let Some(turn) = turns.get(2) else { return };
    let tmps = [
        (ws.to_string_lossy().into_owned(), "<workspace>"),
        (b.dir.path().to_string_lossy().into_owned(), "<tmp>"),
    ];
    let items: Vec<Value> = turn.input();
    let echo_call = items
        .iter()
        .rfind(|i| i["type"] == "function_call")
        .cloned();
    let echo_out = items
        .iter()
        .rfind(|i| i["type"] == "function_call_output")
        .cloned();
    let request = json!({"method": turn.method, "path": turn.path, "headers": turn.headers,
                         "body": scrub(&turn.body, &tmps, GOLDEN_STRING_LIMIT)});
    let result = json!({"function_call": echo_call, "function_call_output": echo_out});
    let result = scrub(&result, &tmps, usize::MAX);
    if std::env::var_os("WINX_TEST_RECORD_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_path("x").parent().unwrap()).unwrap();
        for (what, v) in [("request", &request), ("echo-result", &result)] {
            let text = serde_json::to_string_pretty(v).unwrap() + "\n";
            std::fs::write(golden_path(what), text).unwrap();
        }
        return;
    }
    let load = |what: &str| -> Value {
        let p = golden_path(what);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; record it with WINX_TEST_RECORD_GOLDEN=1",
                p.display()
            )
        });
        serde_json::from_str(&text).unwrap()
    };
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    };
    let header_names = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h[0].as_str().map(str::to_string))
            .collect();
        k.sort();
        k
    };
    let (want, want_result) = (load("request"), load("echo-result"));
    assert_eq!(
        keys(&request["body"]),
        keys(&want["body"]),
        "request fields changed"
    );
    assert_eq!(
        header_names(&request["headers"]),
        header_names(&want["headers"]),
        "request headers changed"
    );
    for item in ["function_call", "function_call_output"] {
        assert_eq!(
            keys(&result[item]),
            keys(&want_result[item]),
            "{item} fields changed"
        );
    }
    let seen = result["function_call_output"]["output"]
        .as_str()
        .unwrap_or("");
    assert!(
        seen.starts_with("Wall time: ") && seen.contains(" seconds\nOutput:\n"),
        "Codex renders a result differently from the recorded trace: {seen}"
    );
}
