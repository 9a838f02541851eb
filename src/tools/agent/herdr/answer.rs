//! Reading what one Herdr agent command answered, strictly, as Herdr 0.8.2's CLI reference
//! and socket API describe it (herdrdev/herdr, tag v0.8.2: `cli-reference.mdx`,
//! `agent-automation.mdx`, `socket-api.mdx`, `herdr-api.schema.json`):
//!
//! - exit 0: `agent list|get|prompt|wait` print one JSON envelope on stdout,
//!   `{"id":"cli:agent:<verb>","result":{"type":…,…}}`; `agent read` prints the terminal
//!   text itself; `agent explain --json` prints the bare explain object;
//! - exit 1: a server error or timeout, printed as `{"id":…,"error":{"code","message"}}`
//!   on stderr;
//! - exit 2: the command line was not accepted (usage error); nothing was asked of the
//!   server.
//!
//! Invariant: an answer is believed only when it has exactly this shape — one JSON value,
//! the expected request id and result type, and every field the schema requires of an
//! `AgentInfo` with its type. Unknown fields are ignored, as Herdr asks of its clients.

use super::run::Finished;
use serde_json::{Map, Value};

/// Herdr's agent lifecycle states (`AgentStatus`).
pub const STATUSES: &[&str] = &["idle", "working", "blocked", "done", "unknown"];

/// The agent commands this adapter runs — the only Herdr commands it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    List,
    Get,
    Read,
    Prompt,
    Wait,
    Explain,
}

impl Verb {
    pub fn word(self) -> &'static str {
        match self {
            Verb::List => "list",
            Verb::Get => "get",
            Verb::Read => "read",
            Verb::Prompt => "prompt",
            Verb::Wait => "wait",
            Verb::Explain => "explain",
        }
    }

    /// The request id the CLI gives this command's envelope.
    pub fn request_id(self) -> String {
        format!("cli:agent:{}", self.word())
    }

    /// The `result.type` of this command's success envelope (`None`: not an envelope).
    fn result_type(self) -> Option<&'static str> {
        match self {
            Verb::List => Some("agent_list"),
            Verb::Get | Verb::Wait => Some("agent_info"),
            Verb::Prompt => Some("agent_prompted"),
            Verb::Read | Verb::Explain => None,
        }
    }
}

/// Herdr's error envelope (exit 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub code: String,
    pub message: String,
}

/// A run that is neither a success nor Herdr's error envelope.
#[derive(Debug, Clone, PartialEq)]
pub enum Odd {
    /// Exit 2: Herdr did not accept the command line.
    Usage { stderr: String },
    /// Exit 1 without an error envelope on stderr.
    Unexplained { stderr: String },
    /// Any other exit (`None`: a signal).
    Exit { code: Option<i32>, stderr: String },
}

/// The three ways a finished run can end.
pub enum Ended {
    Ok(Vec<u8>),
    Refused(Refused),
    Odd(Odd),
}

/// At most this much of stderr goes into a message.
const STDERR_TAIL: usize = 512;

fn tail(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[b.len().saturating_sub(STDERR_TAIL)..]);
    s.trim().to_string()
}

/// Sort a finished run by its exit status.
pub fn ended(f: Finished) -> Ended {
    match f.code {
        Some(0) => Ended::Ok(f.stdout),
        Some(1) => match refused(&f.stderr) {
            Some(r) => Ended::Refused(r),
            None => Ended::Odd(Odd::Unexplained {
                stderr: tail(&f.stderr),
            }),
        },
        Some(2) => Ended::Odd(Odd::Usage {
            stderr: tail(&f.stderr),
        }),
        code => Ended::Odd(Odd::Exit {
            code,
            stderr: tail(&f.stderr),
        }),
    }
}

/// Herdr's error envelope, if `stderr` is exactly one.
fn refused(stderr: &[u8]) -> Option<Refused> {
    let v: Value = serde_json::from_slice(stderr).ok()?;
    let o = v.as_object()?;
    o.get("id")?.as_str()?;
    let e = o.get("error")?.as_object()?;
    Some(Refused {
        code: e.get("code")?.as_str()?.to_string(),
        message: e.get("message")?.as_str()?.to_string(),
    })
}

/// One agent of an answer: the fields the adapter uses, and the whole object.
#[derive(Debug, Clone)]
pub struct Agent {
    pub pane_id: String,
    pub name: Option<String>,
    pub status: &'static str,
    pub raw: Map<String, Value>,
}

impl Agent {
    /// Is this the agent the configured id (a pane id or an agent name) names?
    pub fn is(&self, id: &str) -> bool {
        self.pane_id == id || self.name.as_deref() == Some(id)
    }

    /// The detected agent kind (`claude`, `codex`, …), or `unknown`.
    pub fn kind(&self) -> &str {
        self.raw
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
    }
}

fn status(v: Option<&Value>) -> Option<&'static str> {
    let s = v?.as_str()?;
    STATUSES.iter().copied().find(|x| *x == s)
}

/// An `AgentInfo`, checked against the schema's required fields and their types.
fn agent(v: &Value) -> Result<Agent, String> {
    let o = v.as_object().ok_or("an agent is not a JSON object")?;
    let string = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    for k in ["terminal_id", "workspace_id", "tab_id"] {
        string(k).ok_or(format!("an agent has no string {k}"))?;
    }
    let pane_id = string("pane_id").ok_or("an agent has no string pane_id")?;
    let status = status(o.get("agent_status")).ok_or(format!(
        "an agent's agent_status is not one of {}",
        STATUSES.join(", ")
    ))?;
    o.get("focused")
        .and_then(Value::as_bool)
        .ok_or("an agent has no boolean focused")?;
    o.get("revision")
        .and_then(Value::as_u64)
        .ok_or("an agent has no integer revision")?;
    let name = match o.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("an agent's name is not a string".into()),
    };
    Ok(Agent {
        pane_id,
        name,
        status,
        raw: o.clone(),
    })
}

/// The `result` of `verb`'s success envelope.
fn result(verb: Verb, stdout: &[u8]) -> Result<Map<String, Value>, String> {
    let v: Value =
        serde_json::from_slice(stdout).map_err(|e| format!("not one JSON value: {e}"))?;
    let mut o = match v {
        Value::Object(o) => o,
        _ => return Err("the answer is not a JSON object".into()),
    };
    let want = verb.request_id();
    if o.get("id").and_then(Value::as_str) != Some(want.as_str()) {
        return Err(format!("the answer's id is not {want:?}"));
    }
    let Some(Value::Object(r)) = o.remove("result") else {
        return Err("the answer has no result object".into());
    };
    let ty = verb.result_type().unwrap_or("");
    if r.get("type").and_then(Value::as_str) != Some(ty) {
        return Err(format!("the result's type is not {ty:?}"));
    }
    Ok(r)
}

/// `agent get`, `agent wait`, `agent prompt`: the one agent of the result.
pub fn one(verb: Verb, stdout: &[u8]) -> Result<Agent, String> {
    let r = result(verb, stdout)?;
    agent(r.get("agent").ok_or("the result has no agent")?)
}

/// `agent list`: every agent of the result.
pub fn list(stdout: &[u8]) -> Result<Vec<Agent>, String> {
    let r = result(Verb::List, stdout)?;
    r.get("agents")
        .and_then(Value::as_array)
        .ok_or("the result has no agents array")?
        .iter()
        .map(agent)
        .collect()
}

/// `agent explain --json`: the explain object and the state it classified.
pub fn explain(stdout: &[u8]) -> Result<(Map<String, Value>, &'static str), String> {
    let v: Value =
        serde_json::from_slice(stdout).map_err(|e| format!("not one JSON value: {e}"))?;
    let Value::Object(o) = v else {
        return Err("the explanation is not a JSON object".into());
    };
    o.get("agent")
        .and_then(Value::as_str)
        .ok_or("the explanation has no string agent")?;
    let state = status(o.get("state")).ok_or(format!(
        "the explanation's state is not one of {}",
        STATUSES.join(", ")
    ))?;
    Ok((o, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fin(code: Option<i32>, out: &str, err: &str) -> Finished {
        Finished {
            code,
            stdout: out.as_bytes().to_vec(),
            stderr: err.as_bytes().to_vec(),
        }
    }

    const AGENT: &str = r#"{"terminal_id":"t1","agent":"claude","agent_status":"idle","workspace_id":"w1","tab_id":"w1:t1","pane_id":"w1:p1","focused":false,"revision":3,"extra":1}"#;

    #[test]
    fn envelopes_are_read_strictly() {
        let ok =
            format!(r#"{{"id":"cli:agent:get","result":{{"type":"agent_info","agent":{AGENT}}}}}"#);
        let a = one(Verb::Get, ok.as_bytes()).unwrap();
        assert_eq!(
            (a.pane_id.as_str(), a.status, a.kind()),
            ("w1:p1", "idle", "claude")
        );
        assert!(a.is("w1:p1") && !a.is("w1:p2"));
        // The wrong id, the wrong type, a missing required field, two values.
        let wrong_id = ok.replace("cli:agent:get", "cli:agent:focus");
        assert!(one(Verb::Get, wrong_id.as_bytes()).is_err());
        assert!(one(Verb::Prompt, ok.as_bytes()).is_err());
        let no_rev = ok.replace(r#","revision":3"#, "");
        assert!(
            one(Verb::Get, no_rev.as_bytes())
                .unwrap_err()
                .contains("revision")
        );
        let bad_status = ok.replace(r#""idle""#, r#""finished""#);
        assert!(one(Verb::Get, bad_status.as_bytes()).is_err());
        assert!(one(Verb::Get, format!("{ok}\n{ok}").as_bytes()).is_err());
        let l = format!(
            r#"{{"id":"cli:agent:list","result":{{"type":"agent_list","agents":[{AGENT}]}}}}"#
        );
        assert_eq!(list(l.as_bytes()).unwrap().len(), 1);
    }

    #[test]
    fn exits_are_sorted() {
        let e = r#"{"id":"cli:agent:prompt","error":{"code":"agent_blocked","message":"m"}}"#;
        assert!(matches!(ended(fin(Some(1), "", e)),
            Ended::Refused(r) if r.code == "agent_blocked" && r.message == "m"));
        assert!(matches!(
            ended(fin(Some(1), "", "Error: no socket")),
            Ended::Odd(Odd::Unexplained { .. })
        ));
        assert!(matches!(
            ended(fin(Some(2), "", "usage")),
            Ended::Odd(Odd::Usage { .. })
        ));
        assert!(matches!(
            ended(fin(None, "", "")),
            Ended::Odd(Odd::Exit { code: None, .. })
        ));
        assert!(matches!(ended(fin(Some(0), "x", "")), Ended::Ok(b) if b == b"x"));
    }

    /// Every answer in the golden file of Herdr 0.8.2's agent commands reads as it should.
    #[test]
    fn the_golden_answers_of_herdr_0_8_2_are_understood() {
        let g: Value = serde_json::from_str(include_str!(
            "../../../../tests/golden/herdr/herdr-0.8.2-agent-cli.json"
        ))
        .unwrap();
        let verb = |w: &str| {
            [
                Verb::List,
                Verb::Get,
                Verb::Read,
                Verb::Prompt,
                Verb::Wait,
                Verb::Explain,
            ]
            .into_iter()
            .find(|v| v.word() == w)
            .unwrap()
        };
        let cases = g["cases"].as_array().unwrap();
        for c in cases {
            let v = verb(c["argv"][1].as_str().unwrap());
            let bytes = |k: &str| c[k].to_string().into_bytes();
            let fin = Finished {
                code: Some(c["exit"].as_i64().unwrap() as i32),
                stdout: c.get("stdout").map(|_| bytes("stdout")).unwrap_or_default(),
                stderr: c.get("stderr").map(|_| bytes("stderr")).unwrap_or_default(),
            };
            match ended(fin) {
                Ended::Ok(out) => match v {
                    Verb::List => assert!(!list(&out).unwrap().is_empty()),
                    Verb::Get | Verb::Prompt | Verb::Wait => {
                        let a = one(v, &out).unwrap();
                        assert!(a.is(c["argv"][2].as_str().unwrap()), "{c}");
                    }
                    Verb::Explain => assert!(explain(&out).is_ok()),
                    Verb::Read => assert!(c["stdout_text"].is_string()),
                },
                Ended::Refused(r) => assert_eq!(r.code, c["stderr"]["error"]["code"], "{c}"),
                Ended::Odd(o) => assert!(matches!(o, Odd::Usage { .. }), "{c}"),
            }
        }
        assert!(cases.len() >= 10);
    }

    #[test]
    fn explanations_need_an_agent_and_a_state() {
        let (o, s) =
            explain(br#"{"agent":"codex","state":"blocked","matched_rule":null}"#).unwrap();
        assert_eq!((s, o["agent"].as_str()), ("blocked", Some("codex")));
        assert!(explain(br#"{"agent":"codex"}"#).is_err());
        assert!(explain(b"agent: codex").is_err());
    }
}
