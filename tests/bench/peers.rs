//! `cargo bench --bench peers` (`make bench-peers`): the same workloads against winx (both
//! runtimes), the programs it is compared with, and the raw PTY round trip of bash, in one
//! run on one machine; the results go to `docs/benchmarks.md` and `docs/benchmarks.svg`.
//!
//! Peers come from the environment (set by the Makefile, which installs them under
//! `target/peers/`): `WINX_BENCH_PEER_WINX` (the winx-code-agent binary of the original
//! 0.2.358 release) and `WINX_BENCH_PEER_WCGW` (wcgw's MCP entry point). A peer whose
//! variable is unset or whose file is missing is reported as "not installed".
//!
//! Workloads, per program: spawn → first answer (process start until the first
//! `tools/call Initialize` answers; every daemon of the previous start killed first), the
//! `echo hello` `BashCommand` round trip, a repeated `Initialize` on the session, a
//! `ReadFiles` of a 10,000-line file, a one-block `FileWriteOrEdit` SEARCH/REPLACE, the
//! peak resident set of the server and every process it started, and the size of the
//! `tools/list` answer. Medians throughout (the machine is noisy), plus p99 for echo.
//! A workload a program fails is reported with its error; the run goes on.
//!
//! `WINX_BENCH_PEERS_ONLY=key,key` runs only those programs (keys below) and writes no docs.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "report.rs"]
mod report;
use report::{Report, Samples};
#[path = "server.rs"]
mod server;
use server::{BIN, Sandbox};
#[path = "rawbash.rs"]
mod rawbash;
use rawbash::RawBash;
#[path = "peers_client.rs"]
mod peers_client;
use peers_client::{FamilyGuard, Mcp, become_subreaper, family_hwm, kill_family, text};
#[path = "peers_doc.rs"]
mod peers_doc;
#[path = "peers_svg.rs"]
mod peers_svg;
use peers_doc::{Measured, Row};

const BIG_LINES: usize = 10_000;
const MID_LINES: usize = 1_000;

/// Warm-up calls (unmeasured), then at most `calls` measured ones or `time`, whichever
/// ends first (a program that answers in 0.8 s gets fewer samples, never a longer run).
struct Budget {
    warmup: usize,
    calls: usize,
    time: Duration,
}

const SPAWN: Budget = Budget {
    warmup: 1,
    calls: 10,
    time: Duration::from_secs(40),
};
const ECHO: Budget = Budget {
    warmup: 10,
    calls: 500,
    time: Duration::from_secs(20),
};
const CALLS: Budget = Budget {
    warmup: 5,
    calls: 200,
    time: Duration::from_secs(10),
};

/// How a program spells the four tools' arguments and answers (facts from each one's
/// public source and schema; see docs/benchmarks.md, "How each program is driven").
#[derive(Clone, Copy, PartialEq)]
enum Dialect {
    /// This repository: `workspace_root` + `thread_id` on every call, answers with a
    /// `structuredContent` envelope whose `status` must be `completed`.
    Winx,
    /// winx-code-agent 0.2.x: wcgw-shaped arguments, a `status` Initialize type.
    WinxOld,
    /// wcgw: flat `BashCommand` arguments, `thread_id` announced in the Initialize text.
    Wcgw,
}

impl Dialect {
    fn first_call(self, ws: &str) -> Value {
        match self {
            Dialect::Winx => json!({"type": "first_call", "workspace_root": ws}),
            Dialect::WinxOld | Dialect::Wcgw => json!({"type": "first_call",
                "any_workspace_path": ws, "initial_files_to_read": [],
                "task_id_to_resume": "", "mode_name": "wcgw", "thread_id": ""}),
        }
    }

    /// What every later call carries, from the first Initialize answer.
    fn binding(self, result: &Value) -> Result<Value, String> {
        let data = &result["structuredContent"]["data"];
        if self == Dialect::Winx {
            self.check(result)?;
            return Ok(json!({"thread_id": data["thread_id"],
                "workspace_root": data["workspace_root"]}));
        }
        let structured =
            (data["thread_id"].as_str()).or(result["structuredContent"]["thread_id"].as_str());
        let t = text(result);
        let announced = t.split("thread_id=").nth(1).map(|rest| {
            let end = rest.find(|c: char| !c.is_alphanumeric() && c != '_');
            &rest[..end.unwrap_or(rest.len())]
        });
        let tid = structured.or(announced).filter(|t| !t.is_empty());
        let tid = tid.ok_or_else(|| format!("no thread_id in the Initialize answer: {t:.300}"))?;
        Ok(json!({"thread_id": tid}))
    }

    fn echo(self) -> Value {
        match self {
            Dialect::Winx => json!({"action_json": {"command": "echo hello"}}),
            Dialect::WinxOld => {
                json!({"action_json": {"type": "command", "command": "echo hello"}})
            }
            Dialect::Wcgw => json!({"type": "command", "command": "echo hello"}),
        }
    }

    /// The cheapest Initialize on the live session: a read-only `status` where the program
    /// has one; wcgw has none, and every Initialize type of it restarts the shell.
    fn init_repeat(self, ws: &str) -> Value {
        match self {
            Dialect::Winx => json!({"type": "status"}),
            Dialect::WinxOld => json!({"type": "status", "any_workspace_path": ws}),
            Dialect::Wcgw => json!({"type": "user_asked_mode_change", "any_workspace_path": ws,
                "initial_files_to_read": [], "task_id_to_resume": "", "mode_name": "wcgw"}),
        }
    }

    fn edit(self, path: &str, blocks: &str) -> Value {
        let mut v = json!({"file_path": path, "text_or_search_replace_blocks": blocks});
        if self != Dialect::Winx {
            v["percentage_to_change"] = json!(1);
        }
        v
    }

    /// Winx's envelope must say `completed`, and so must 0.2.x's when it has one (wcgw
    /// answers with text only).
    fn check(self, result: &Value) -> Result<(), String> {
        let sc = &result["structuredContent"];
        let required = self == Dialect::Winx || !sc["status"].is_null();
        if required && sc["status"] != "completed" {
            return Err(format!("status {} ({})", sc["status"], sc["message"]));
        }
        Ok(())
    }
}

/// One program under test.
struct Program {
    key: &'static str,
    label: &'static str,
    dialect: Dialect,
    /// The executable (None: not installed, with the reason).
    exe: Result<PathBuf, String>,
    embedded: bool,
}

impl Program {
    fn peer(key: &'static str, label: &'static str, dialect: Dialect, var: &str) -> Program {
        let exe = match std::env::var_os(var) {
            None => Err(format!(
                "not installed ({var} unset; `make bench-peers` sets it)"
            )),
            Some(p) if !Path::new(&p).is_file() => Err(format!(
                "not installed ({} missing)",
                Path::new(&p).display()
            )),
            Some(p) => Ok(PathBuf::from(p)),
        };
        let embedded = key.ends_with("embedded");
        Program {
            key,
            label,
            dialect,
            exe,
            embedded,
        }
    }

    /// The server command with a minimal environment confined to the sandbox (HOME, state,
    /// private runtime dir, temp dir), stdio piped, stderr appended to the sandbox's log.
    fn command(&self, sb: &Sandbox) -> Command {
        let exe = self.exe.as_ref().expect("installed");
        if self.dialect == Dialect::Winx {
            let mut cmd = sb.server(if self.embedded { "embedded" } else { "daemon" });
            cmd.env("TMPDIR", sb.dir.path().join("tmp"));
            return cmd;
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(sb.dir.path().join("stderr.log"))
            .expect("open stderr log");
        let mut cmd = Command::new(exe);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", sb.dir.path().join("home"))
            .env("XDG_RUNTIME_DIR", sb.dir.path().join("run"))
            .env("TMPDIR", sb.dir.path().join("tmp"))
            .current_dir(&sb.workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        if self.embedded {
            cmd.env("WINX_RUNTIME", "embedded");
        }
        cmd
    }
}

fn programs() -> Vec<Program> {
    let ours = |key, label, embedded| Program {
        key,
        label,
        dialect: Dialect::Winx,
        exe: Ok(PathBuf::from(BIN)),
        embedded,
    };
    let old = "WINX_BENCH_PEER_WINX";
    vec![
        ours("winx-daemon", "winx (daemon)", false),
        ours("winx-embedded", "winx (embedded)", true),
        Program::peer("winx-0.2.358", "winx 0.2.358", Dialect::WinxOld, old),
        Program::peer(
            "winx-0.2.358-embedded",
            "winx 0.2.358 (embedded)",
            Dialect::WinxOld,
            old,
        ),
        Program::peer("wcgw", "wcgw", Dialect::Wcgw, "WINX_BENCH_PEER_WCGW"),
    ]
}

/// Line `i` (1-based) of the generated files: ~50 bytes, unique, newline included.
fn filler_line(i: usize) -> String {
    format!("{i:05} lorem ipsum dolor sit amet, consectetur elit\n")
}

/// The line the edit rewrites, at generation `n`: every edit moves it to the next
/// generation (an identical repeated edit may be answered from a receipt), fixed width.
fn edit_line(n: usize) -> String {
    format!("    let marker = {n:05}; // rewritten by the bench")
}

/// A sandbox with the two workload files in its workspace.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.dir.path().join("tmp")).expect("mkdir tmp");
    let big: String = (1..=BIG_LINES).map(filler_line).collect();
    std::fs::write(sb.workspace.join("big.txt"), big).expect("write big.txt");
    let mid: String = (1..=MID_LINES)
        .map(|i| match i == MID_LINES / 2 {
            true => format!("{}\n", edit_line(0)),
            false => filler_line(i),
        })
        .collect();
    std::fs::write(sb.workspace.join("mid.txt"), mid).expect("write mid.txt");
    sb
}

/// Warm-up, then measured calls within the budget; `once(i)` gets the call's index over
/// warm-up and measured calls together.
fn measure(
    b: &Budget,
    mut once: impl FnMut(usize) -> Result<Duration, String>,
) -> Result<Measured, String> {
    for i in 0..b.warmup {
        once(i)?;
    }
    let (t, mut v) = (Instant::now(), Vec::new());
    while v.len() < b.calls && (v.is_empty() || t.elapsed() < b.time) {
        v.push(once(b.warmup + v.len())?);
    }
    Ok(Measured::new(Samples::new(v.clone()), v.len()))
}

/// Process start until the first `tools/call Initialize` answered (handshake included).
fn start(p: &Program, sb: &Sandbox) -> Result<(Duration, Mcp, Value, Value), String> {
    let ws = sb.workspace.to_string_lossy().into_owned();
    let cmd = p.command(sb);
    let t = Instant::now();
    let mut mcp = Mcp::spawn(cmd)?;
    let info = mcp.handshake()?;
    let (_, result) = mcp.call("Initialize", p.dialect.first_call(&ws))?;
    let elapsed = t.elapsed();
    let binding = p.dialect.binding(&result)?;
    Ok((elapsed, mcp, info, binding))
}

/// A tools/call with the session binding merged into `args`, checked by the dialect.
fn call(p: &Program, mcp: &mut Mcp, b: &Value, tool: &str, mut args: Value) -> CallResult {
    if let (Some(a), Some(b)) = (args.as_object_mut(), b.as_object()) {
        a.extend(b.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let (elapsed, result) = mcp.call(tool, args)?;
    p.dialect
        .check(&result)
        .map_err(|e| format!("{tool}: {e}"))?;
    Ok((elapsed, result))
}

type CallResult = Result<(Duration, Value), String>;

fn run_program(p: &Program) -> Row {
    let mut row = Row::new(p.key, p.label);
    if let Err(why) = &p.exe {
        row.missing = Some(why.clone());
        return row;
    }
    let sb = sandbox();
    let ws = sb.workspace.to_string_lossy().into_owned();
    eprintln!("{}: sandbox {}", p.label, sb.dir.path().display());
    // Every start is cold: the previous one's server, daemons and shells are gone.
    row.spawn = Some(measure(&SPAWN, |_| {
        let r = start(p, &sb).map(|(t, ..)| t);
        kill_family();
        r
    }));
    let (mut mcp, binding) = match start(p, &sb) {
        Ok((_, mcp, info, binding)) => {
            row.version = info["version"].as_str().unwrap_or("?").to_string();
            (mcp, binding)
        }
        Err(e) => {
            row.failure = Some(format!("start: {e}"));
            kill_family();
            return row;
        }
    };
    match mcp.request("tools/list", json!({})) {
        Ok((_, v)) => {
            row.list_bytes = Some(mcp.last_bytes);
            row.list_tools = v["tools"].as_array().map_or(0, Vec::len);
        }
        Err(e) => row.failure = Some(e),
    }
    row.echo = Some(measure(&ECHO, |_| {
        let (t, r) = call(p, &mut mcp, &binding, "BashCommand", p.dialect.echo())?;
        let hello = text(&r).lines().any(|l| l.trim_end() == "hello");
        hello
            .then_some(t)
            .ok_or_else(|| format!("not hello: {:.300}", text(&r)))
    }));
    row.init = Some(measure(&CALLS, |_| {
        let args = p.dialect.init_repeat(&ws);
        Ok(call(p, &mut mcp, &binding, "Initialize", args)?.0)
    }));
    let big = sb.workspace.join("big.txt").to_string_lossy().into_owned();
    let read_args = json!({"file_paths": [big]});
    row.read = Some(measure(&CALLS, |_| {
        let (t, r) = call(p, &mut mcp, &binding, "ReadFiles", read_args.clone())?;
        row.read_bytes = Some(mcp.last_bytes);
        let shown = r.to_string().contains("00001 lorem ipsum");
        shown
            .then_some(t)
            .ok_or_else(|| format!("big.txt not shown: {:.300}", text(&r)))
    }));
    row.edit = Some(edits(p, &mut mcp, &binding, &sb, &mut row.edit_reads));
    row.hwm = family_hwm();
    drop(mcp);
    kill_family();
    row
}

/// One SEARCH/REPLACE block on mid.txt (read first, untimed), checked on disk after each
/// call. A refused edit (a program that wants a fresh read) is followed by an untimed read
/// and one timed retry, counted in `reads`.
fn edits(
    p: &Program,
    mcp: &mut Mcp,
    binding: &Value,
    sb: &Sandbox,
    reads: &mut usize,
) -> Result<Measured, String> {
    let mid = sb.workspace.join("mid.txt");
    let path = mid.to_string_lossy().into_owned();
    let read = json!({"file_paths": [path]});
    call(p, mcp, binding, "ReadFiles", read.clone())?;
    measure(&CALLS, |n| {
        let blocks = format!(
            "<<<<<<< SEARCH\n{}\n=======\n{}\n>>>>>>> REPLACE\n",
            edit_line(n),
            edit_line(n + 1)
        );
        let args = p.dialect.edit(&path, &blocks);
        let landed = || {
            let text = std::fs::read_to_string(&mid).unwrap_or_default();
            text.contains(&edit_line(n + 1)) && text.lines().count() == MID_LINES
        };
        let first = call(p, mcp, binding, "FileWriteOrEdit", args.clone());
        if let Ok((t, _)) = first
            && landed()
        {
            return Ok(t);
        }
        *reads += 1;
        call(p, mcp, binding, "ReadFiles", read.clone())?;
        let (t, r) = call(p, mcp, binding, "FileWriteOrEdit", args)?;
        landed()
            .then_some(t)
            .ok_or_else(|| format!("edit {n} did not land: {:.300}", text(&r)))
    })
}

/// The floor: bash on a raw PTY (rawbash.rs); start = until its first prompt marker.
fn run_raw_bash() -> Row {
    let mut row = Row::new("bash-raw-pty", "bash, raw PTY (floor)");
    let sb = sandbox();
    let home = sb.dir.path().join("home");
    row.spawn = Some(measure(&SPAWN, |_| {
        let t = Instant::now();
        let bash = RawBash::start(&home, &sb.workspace);
        let elapsed = t.elapsed();
        drop(bash);
        Ok(elapsed)
    }));
    let mut bash = RawBash::start(&home, &sb.workspace);
    row.echo = Some(measure(&ECHO, |_| Ok(bash.round_trip())));
    row.hwm = family_hwm();
    drop(bash);
    kill_family();
    let version = Command::new("bash")
        .args(["-c", "echo $BASH_VERSION"])
        .output();
    let version = version.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    row.version = version.unwrap_or_default();
    row
}

fn main() {
    // Arguments from `cargo bench` (`--bench`, filters) are ignored: this is one program.
    become_subreaper();
    let _family = FamilyGuard;
    let only = std::env::var("WINX_BENCH_PEERS_ONLY").ok();
    let wanted = |key: &str| only.as_ref().is_none_or(|o| o.split(',').any(|k| k == key));
    eprintln!("winx peers bench: {BIN}");
    let started = Instant::now();
    let mut rows = Vec::new();
    for p in programs().iter().filter(|p| wanted(p.key)) {
        rows.push(run_program(p));
    }
    if wanted("bash-raw-pty") {
        rows.push(run_raw_bash());
    }
    let mut r = Report::new("peers");
    for row in &rows {
        row.report(&mut r);
    }
    peers_doc::ratios(&rows, &mut r);
    r.print();
    eprintln!("peers bench: {:.0} s", started.elapsed().as_secs_f64());
    if only.is_none() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        peers_doc::write(&rows, &docs);
        eprintln!("wrote {}/benchmarks.md and benchmarks.svg", docs.display());
    }
}
