//! A winx session (daemon runtime) running the fake Codex (`tests/fake/fake-codex`, a
//! real-shaped rollout under a private CODEX_HOME), driven through the operator CLI's
//! `agent` verbs; shared by the CLI and MCP request tests. `Tui` runs the real Codex CLI
//! the same way (the version `make hosts` pins), offline against a scripted model.

use super::fake_responses::{FakeResponses, Reply, Request};
use super::history::spawn_with;
use super::wait::{Deadline, eventually};
use super::{Agent, manifest_dir, sc};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

/// A winx session (daemon runtime) running a fake Codex.
pub struct Codex {
    pub a: Agent,
    pub s: Value,
    pub log: PathBuf,
}

impl Codex {
    pub fn start(flags: &str) -> Codex {
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

    pub fn catalog(&self) -> Vec<Value> {
        let v = self.a.op_json(&["agent", "catalog"]);
        v.as_array().cloned().unwrap_or_default()
    }

    /// The one agent, once the catalog shows it in `state`.
    pub fn agent_in(&self, state: &str) -> Value {
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
    pub fn agent(&self, args: &[&str]) -> (Value, i32) {
        agent_json(&self.a, args)
    }

    pub fn admit(&self, agent: &Value, id: &str, text: &str, extra: &[&str]) -> (Value, i32) {
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

    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// An attached `request watch --after N`.
    pub fn watch(&self, after: i64) -> Watch {
        watch_of(&self.a, after)
    }

    pub fn type_line(&mut self, text: &str) {
        let s = self.s.clone();
        self.a.bash(&s, json!({"send_text": text, "submit": true}));
    }
}

/// An attached `agent request watch --after N` of `a`'s state.
/// Run `agent args…` as `a`'s operator: the JSON it printed and its exit code.
fn agent_json(a: &Agent, args: &[&str]) -> (Value, i32) {
    let mut full = vec!["agent"];
    full.extend_from_slice(args);
    let out = a.op(&full);
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {text:?} / {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

fn watch_of(a: &Agent, after: i64) -> Watch {
    let mut child = a
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
            let _ = tx.send((l, unix_ms_now()));
        }
    });
    Watch { child, rx }
}

/// The wall clock in unix ms (to compare with the times Codex writes in its rollout).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub struct Watch {
    child: Child,
    rx: crossbeam_channel::Receiver<(String, u64)>,
}

impl Watch {
    pub fn next(&self) -> Value {
        self.next_timed().0
    }

    /// The next terminal event and when its line arrived (unix ms).
    pub fn next_timed(&self) -> (Value, u64) {
        let (l, at) = self
            .rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a terminal event within 20 s");
        (serde_json::from_str(&l).unwrap(), at)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Codex release `make hosts` pins; the real-Codex tests name it.
pub const CODEX_VERSION: &str = "0.169.0";

/// The real Codex CLI `make hosts` installed; panics saying how to install it.
pub fn real_codex() -> PathBuf {
    super::hosts::host_bin("codex", &format!("Codex CLI {CODEX_VERSION}"))
}

/// The text of the last user message of a model turn (the context Codex adds in `<…>`
/// blocks left out).
pub fn last_user_text(req: &Request) -> String {
    req.input()
        .iter()
        .filter(|i| i["type"] == "message" && i["role"] == "user")
        .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .rfind(|t| !t.trim_start().starts_with('<'))
        .unwrap_or_default()
}

/// How long the real TUI may take to show its composer (a cold start on a loaded 2-core
/// machine takes a few seconds; only a hang comes near this).
const TUI_START: Duration = Duration::from_secs(60);

/// How long one Ctrl-C of [`Tui::quit`] waits for the TUI to exit before the next one.
const QUIT_STEP: Duration = Duration::from_secs(1);

/// A winx session (daemon runtime) running the real Codex TUI in its PTY, with Codex's
/// default settings except the model provider: a scripted Responses API on loopback
/// (no retries, so a model failure ends the turn at once), and the workspace trusted.
pub struct Tui {
    pub a: Agent,
    pub s: Value,
    pub model: FakeResponses,
    pub codex_home: PathBuf,
    /// The TUI's execution.
    pub id: String,
}

impl Tui {
    pub fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Tui {
        real_codex();
        let mut a = spawn_with("daemon", &[]);
        let s = a.first_call();
        let model = FakeResponses::start(a.dir.path(), script);
        let codex_home = a.dir.path().join("codex-home");
        std::fs::create_dir_all(&codex_home).unwrap();
        let ws = a.workspace.canonicalize().unwrap();
        let config = format!(
            "model = \"gpt-5.1-codex\"\nmodel_provider = \"fake\"\n\n\
             [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}\"\n\
             wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n\
             [projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            model.base_url(),
            ws.display()
        );
        std::fs::write(codex_home.join("config.toml"), config).unwrap();
        let mut t = Tui {
            a,
            s,
            model,
            codex_home,
            id: String::new(),
        };
        t.launch("");
        t
    }

    /// Start `codex <args>` in the session's foreground (this `CODEX_HOME`), wait for its
    /// composer, and make it the TUI `id` names.
    pub fn launch(&mut self, args: &str) {
        let cmd = format!(
            "CODEX_HOME={} {} {args}",
            self.codex_home.display(),
            real_codex().display()
        );
        let s = self.s.clone();
        let r = self.a.bash_with(
            &s,
            json!({"command": cmd}),
            json!({"wait_for_seconds": 0.2}),
        );
        assert_eq!(sc(&r)["status"], "running", "{r}");
        self.id = sc(&r)["data"]["state"]["execution_id"]
            .as_str()
            .unwrap()
            .to_string();
        self.until_screen("the composer is drawn", |screen| {
            screen.lines().any(|l| l.starts_with('›'))
        });
    }

    /// End the TUI (Ctrl-C, repeated while it asks to confirm) and wait for its exit.
    /// Each Ctrl-C waits at most [`QUIT_STEP`] for the exit (a status check returns at
    /// the exit): after a turn Codex may first ask what to do with a "still running"
    /// task, and the next Ctrl-C closes that question; the default status wait (10 s)
    /// would be paid at every such step.
    pub fn quit(&mut self) {
        let s = self.s.clone();
        let d = Deadline::after("codex quits", TUI_START);
        let step = json!({"wait_for_seconds": QUIT_STEP.as_secs_f64()});
        eventually(
            d,
            "the TUI exited",
            || {
                self.a.bash(&s, json!({"send_specials": ["Ctrl-c"]}));
                let r = self
                    .a
                    .bash_with(&s, json!({"status_check": true}), step.clone());
                sc(&r)["data"]["state"]["process_status"].clone()
            },
            |st| st == "exited",
        );
    }

    /// The terminal screen as the session renders it.
    pub fn screen(&mut self) -> String {
        let s = self.s.clone();
        let r = self.a.bash(&s, json!({"screen": true}));
        r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Poll the screen until `ok` holds (panics with the screen after `TUI_START`).
    pub fn until_screen(&mut self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let d = Deadline::after("codex screen", TUI_START);
        eventually(d, what, || self.screen(), |t| ok(t))
    }

    /// An `Agent` call in this session.
    pub fn agent_tool(&mut self, action: Value) -> Value {
        let s = self.s.clone();
        self.a.call(
            "Agent",
            json!({"thread_id": s["data"]["thread_id"], "workspace_root": s["data"]["workspace_root"],
                   "action": action}),
        )
    }

    /// Bytes to the TUI as one write each (one key at a time is typing, not a paste).
    /// Each call answers at once (`wait_for_seconds: 0`): the caller waits on the screen
    /// for what the keys mean, not on the default input settle (300 ms of quiet) per key.
    pub fn keys(&mut self, bytes: &[u8]) {
        let s = self.s.clone();
        for b in bytes {
            self.a.bash_with(
                &s,
                json!({"send_ascii": [b]}),
                json!({"wait_for_seconds": 0}),
            );
        }
    }

    /// `agent catalog` once it shows `n` agents in `state`.
    pub fn catalog_with(&self, n: usize, state: &str) -> Vec<Value> {
        let d = Deadline::after("codex in catalog", TUI_START);
        eventually(
            d,
            &format!("{n} agents {state}"),
            || {
                let v = self.a.op_json(&["agent", "catalog"]);
                v.as_array().cloned().unwrap_or_default()
            },
            |v| v.len() == n && v.iter().all(|x| x["state"] == state),
        )
    }

    /// Run `agent args…`: the JSON it printed and its exit code.
    pub fn agent(&self, args: &[&str]) -> (Value, i32) {
        agent_json(&self.a, args)
    }

    /// An attached `request watch --after N`.
    pub fn watch(&self, after: i64) -> Watch {
        watch_of(&self.a, after)
    }
}
