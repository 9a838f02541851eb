//! A winx session (daemon runtime) running the fake Codex (`tests/fake/fake-codex`, a
//! real-shaped rollout under a private CODEX_HOME), driven through the operator CLI's
//! `agent` verbs; shared by the CLI and MCP request tests.

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

    pub fn type_line(&mut self, text: &str) {
        let s = self.s.clone();
        self.a.bash(&s, json!({"send_text": text, "submit": true}));
    }
}

pub struct Watch {
    child: Child,
    rx: crossbeam_channel::Receiver<String>,
}

impl Watch {
    pub fn next(&self) -> Value {
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
