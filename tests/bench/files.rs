//! `cargo bench --bench files` (`make bench`): the file tools of the real
//! `winx-code-agent` release binary over stdio: a `ReadFiles` of a 10,000-line file, a
//! one-block `FileWriteOrEdit` SEARCH/REPLACE round trip on a 1,000-line file, and a
//! 100-file `MultiFileEdit`.
//!
//! This is a report, not a gate: every figure is printed with its target and PASS/MISS,
//! followed by one JSON line for machines, and the process exits 0 even on a MISS. It
//! panics only when the server misbehaves (wrong or missing answer, a status other than
//! `completed`, a file left in the wrong state), because then the figures would be
//! meaningless. Medians and percentiles throughout, never means.

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use serde_json::{Value, json};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "report.rs"]
mod report;
use report::{Report, Samples, vm_rss_mib};

const BIN: &str = env!("CARGO_BIN_EXE_winx-code-agent");
/// No single wait may exceed this, so a hung server fails the run instead of blocking it.
const HARD_TIMEOUT: Duration = Duration::from_secs(20);
/// Unmeasured calls first: page cache, lazy init and allocator growth stay out of the
/// samples.
const WARMUP_CALLS: usize = 10;

const READ_CALLS: usize = 200;
const READ_CHAIN_RUNS: usize = 20;
const EDIT_CALLS: usize = 200;
const MULTI_CALLS: usize = 20;
const MULTI_WARMUP: usize = 2;

const BIG_LINES: usize = 10_000;
const MID_LINES: usize = 1_000;
const MULTI_FILES: usize = 100;
/// `ReadFiles` takes at most this many paths per call.
const MAX_READ_PATHS: usize = 64;

const READ_P50_MS: f64 = 3.0;
const EDIT_P50_MS: f64 = 5.0;
const MULTI_P50_MS: f64 = 100.0;

/// Line `i` (1-based) of the generated files: ~50 bytes, unique, newline included.
fn filler_line(i: usize) -> String {
    format!("{i:05} lorem ipsum dolor sit amet, consectetur elit\n")
}

/// The line the single-file edit rewrites (unique in its file), at generation `n`.
///
/// Every edit moves the line to the next generation instead of flipping between two
/// values: the server replays an identical edit call (same arguments) from its mutation
/// receipt, and refuses it once the file changed since, so A→B, B→A, A→B would hit that
/// path on the third call. Fixed-width generations keep the file size constant.
fn edit_line(n: usize) -> String {
    format!("    let marker = {n:05}; // rewritten by the bench")
}

/// The line every file of the multi-file edit rewrites, at generation `n`.
fn multi_line(n: usize) -> String {
    format!("value = {n:05}")
}

/// `edits` from the body of every edit: one SEARCH/REPLACE block from generation `n` to
/// `n + 1`.
fn step(line: fn(usize) -> String, n: usize) -> String {
    block(&line(n), &line(n + 1))
}

/// One temp dir per bench run: HOME, state dir, a private runtime dir, the workspace and
/// the server's stderr. Dropping it kills every process that mentions it, so neither a
/// panic nor a detached daemon leaks anything.
struct Sandbox {
    dir: tempfile::TempDir,
    workspace: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("project");
        std::fs::create_dir_all(ws.join("multi")).expect("mkdir workspace");
        std::fs::write(ws.join("README.md"), "# bench\n").expect("write workspace file");
        std::fs::create_dir(dir.path().join("home")).expect("mkdir home");
        // XDG_RUNTIME_DIR is used only when ours and private (0700), as in tests/support.
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir run");
        std::fs::set_permissions(&run, PermissionsExt::from_mode(0o700)).expect("chmod run");

        let big: String = (1..=BIG_LINES).map(filler_line).collect();
        std::fs::write(ws.join("big.txt"), big).expect("write big.txt");
        let mid: String = (1..=MID_LINES)
            .map(|i| {
                if i == MID_LINES / 2 {
                    format!("{}\n", edit_line(0))
                } else {
                    filler_line(i)
                }
            })
            .collect();
        std::fs::write(ws.join("mid.txt"), mid).expect("write mid.txt");
        for i in 0..MULTI_FILES {
            let body = format!("# file {i}\n{}\n# end\n", multi_line(0));
            std::fs::write(ws.join(multi_path(i)), body).expect("write multi file");
        }
        // The server answers with the canonical path; /tmp may be a symlink.
        let workspace = ws.canonicalize().expect("canonicalize workspace");
        Sandbox { dir, workspace }
    }

    /// The server with a minimal, explicit environment (default runtime).
    fn server(&self) -> Command {
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("stderr.log"))
            .expect("open stderr log");
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("WINX_STATE_DIR", self.dir.path().join("state"))
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        cmd
    }

    /// SIGKILL every process whose command line mentions the sandbox, and its process
    /// group, like tests/support does.
    fn kill_leftovers(&self) {
        for pid in procs_mentioning(self.dir.path()) {
            {
                use nix::sys::signal::{Signal, kill};
                let _ = kill(nix::unistd::Pid::from_raw(-pid), Signal::SIGKILL);
                let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.workspace.join(rel)).expect("read workspace file")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.kill_leftovers();
    }
}

fn multi_path(i: usize) -> String {
    format!("multi/f{i:03}.txt")
}

/// Pids of every live process whose command line mentions `path`.
fn procs_mentioning(path: &Path) -> Vec<i32> {
    let needle = path.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = e.file_name().to_string_lossy().parse::<i32>();
        let (Ok(pid), Ok(cmdline)) = (pid, std::fs::read(e.path().join("cmdline"))) else {
            continue;
        };
        let mentions = (cmdline.split(|&b| b == 0))
            .any(|a| !a.is_empty() && String::from_utf8_lossy(a).contains(&needle));
        if mentions {
            out.push(pid);
        }
    }
    out
}

/// A JSON-RPC client over one server process with a reader thread; kill on Drop.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// `thread_id` and `workspace_root` from `Initialize first_call`, for every tool call.
    binding: Value,
    /// Size of the last answer line, in bytes.
    last_bytes: usize,
}

impl Client {
    fn start(mut cmd: Command, ws: &str) -> Client {
        let mut child = cmd.spawn().expect("spawn winx-code-agent");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = unbounded();
        // Detached: it ends by itself when the child's stdout closes (kill or exit).
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            let _ = lines.try_for_each(|line| tx.send(line));
        });
        let stdin = child.stdin.take();
        let mut c = Client {
            child,
            stdin,
            lines,
            next_id: 0,
            binding: json!({}),
            last_bytes: 0,
        };
        let info = json!({"name": "winx-bench", "version": "0"});
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info});
        c.timed("initialize", init);
        c.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        let first = json!({"type": "first_call", "workspace_root": ws});
        let (_, sc) = c.tool("Initialize", first);
        let data = &sc["data"];
        assert!(data["thread_id"].is_string(), "no thread_id: {sc}");
        c.binding =
            json!({"thread_id": data["thread_id"], "workspace_root": data["workspace_root"]});
        c
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to server");
    }

    /// One request, timed from the write to the answer line; serialization and parsing
    /// stay outside the timed span.
    fn timed(&mut self, method: &str, params: Value) -> (Duration, Value) {
        self.next_id += 1;
        let id = self.next_id;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = serde_json::to_vec(&req).expect("serialize request");
        line.push(b'\n');
        let t = Instant::now();
        self.send(&line);
        let answer = match self.lines.recv_timeout(HARD_TIMEOUT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in {HARD_TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("stdout closed before {method}"),
        };
        let elapsed = t.elapsed();
        self.last_bytes = answer.len();
        let v: Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {answer:?}"));
        let ok = v["id"] == json!(id) && v.get("error").is_none();
        assert!(ok, "{method}: not the answer to {id}: {answer}");
        (elapsed, v)
    }

    /// A `tools/call` with the session binding merged into `args`; returns the elapsed
    /// time and `structuredContent`, whatever its status.
    fn tool_any(&mut self, name: &str, mut args: Value) -> (Duration, Value) {
        if let (Some(a), Some(b)) = (args.as_object_mut(), self.binding.as_object()) {
            a.extend(b.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let (elapsed, v) = self.timed("tools/call", json!({"name": name, "arguments": args}));
        let sc = v["result"]["structuredContent"].clone();
        assert!(sc.is_object(), "{name}: no structuredContent: {v}");
        (elapsed, sc)
    }

    /// Like `tool_any`, but the answer must be `completed`.
    fn tool(&mut self, name: &str, args: Value) -> (Duration, Value) {
        let (elapsed, sc) = self.tool_any(name, args);
        assert_eq!(sc["status"], "completed", "{name}: not completed: {sc}");
        (elapsed, sc)
    }

    fn read_files(&mut self, paths: &[String]) -> (Duration, Value) {
        self.tool("ReadFiles", json!({"file_paths": paths}))
    }

    /// Perform the reads a `needs_read` answer asks for (its `nextAction`).
    fn satisfy(&mut self, sc: &Value) {
        let next = &sc["nextAction"];
        assert_eq!(next["tool"], "ReadFiles", "needs_read without a read: {sc}");
        let paths: Vec<String> = (next["arguments"]["file_paths"].as_array())
            .unwrap_or_else(|| panic!("needs_read without file_paths: {sc}"))
            .iter()
            .map(|p| p.as_str().expect("path string").to_string())
            .collect();
        for chunk in paths.chunks(MAX_READ_PATHS) {
            self.read_files(chunk);
        }
    }

    /// An edit timed until `completed`: a `needs_read` answer is counted, its reads are
    /// made outside the timed span, and the edit is retried (and that try timed) once.
    fn edit(&mut self, name: &str, args: &Value, needs_read: &mut usize) -> Duration {
        let (elapsed, sc) = self.tool_any(name, args.clone());
        if sc["status"] != "needs_read" {
            assert_eq!(sc["status"], "completed", "{name}: not completed: {sc}");
            return elapsed;
        }
        *needs_read += 1;
        self.satisfy(&sc);
        self.tool(name, args.clone()).0
    }

    fn rss_mib(&self) -> f64 {
        vm_rss_mib(self.child.id() as i32).expect("server VmRSS")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn block(search: &str, replace: &str) -> String {
    format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n")
}

/// 1. One `ReadFiles` of the whole 10,000-line file (cut by the per-file budget, with a
///    continuation line). Returns the samples, the size of one answer line and the last
///    line it shows.
fn read_big(client: &mut Client) -> (Samples, u64, u64) {
    let paths = ["big.txt".to_string()];
    let mut samples = Vec::with_capacity(READ_CALLS);
    let (mut bytes, mut shown) = (0, 0);
    for i in 0..WARMUP_CALLS + READ_CALLS {
        let (elapsed, sc) = client.read_files(&paths);
        let f = &sc["data"]["files"][0];
        assert_eq!(f["totalLines"], json!(BIG_LINES), "big.txt: {f}");
        bytes = client.last_bytes as u64;
        shown = f["nextStartLine"]
            .as_u64()
            .map_or(BIG_LINES as u64, |n| n - 1);
        if i >= WARMUP_CALLS {
            samples.push(elapsed);
        }
    }
    (Samples::new(samples), bytes, shown)
}

/// 1b. The whole 10,000-line file, following the continuation lines until the end: the
///     total time of the chain, and how many calls it took.
fn read_big_chain(client: &mut Client) -> (Samples, usize) {
    let mut samples = Vec::with_capacity(READ_CHAIN_RUNS);
    let mut calls = 0;
    for _ in 0..READ_CHAIN_RUNS {
        let (mut total, mut start) = (Duration::ZERO, 1);
        calls = 0;
        loop {
            let (elapsed, sc) = client.read_files(&[format!("big.txt:{start}-")]);
            total += elapsed;
            calls += 1;
            assert!(calls <= BIG_LINES, "the continuation chain does not end");
            match sc["data"]["files"][0]["nextStartLine"].as_u64() {
                Some(next) => start = next,
                None => break,
            }
        }
        samples.push(total);
    }
    (Samples::new(samples), calls)
}

/// 2. `FileWriteOrEdit` with one SEARCH/REPLACE block on the 1,000-line file, rewriting
///    the same line each time (see `edit_line`). Arguments are built before the timed span.
fn edit_round_trips(client: &mut Client, sb: &Sandbox) -> (Samples, usize) {
    client.read_files(&["mid.txt".to_string()]);
    let mut samples = Vec::with_capacity(EDIT_CALLS);
    let mut needs_read = 0;
    for n in 0..WARMUP_CALLS + EDIT_CALLS {
        let body = step(edit_line, n);
        let args = json!({"file_path": "mid.txt", "text_or_search_replace_blocks": body});
        let elapsed = client.edit("FileWriteOrEdit", &args, &mut needs_read);
        if n >= WARMUP_CALLS {
            samples.push(elapsed);
        }
        // Outside the timed span: the edit really landed.
        let text = sb.read("mid.txt");
        assert!(text.contains(&edit_line(n + 1)), "edit {n} did not land");
        assert_eq!(
            text.lines().count(),
            MID_LINES,
            "edit {n} changed the line count"
        );
    }
    (Samples::new(samples), needs_read)
}

/// 3. `MultiFileEdit` over 100 small files (all read first), one block each.
fn multi_edits(client: &mut Client, sb: &Sandbox) -> (Samples, usize) {
    let paths: Vec<String> = (0..MULTI_FILES).map(multi_path).collect();
    for chunk in paths.chunks(MAX_READ_PATHS) {
        client.read_files(chunk);
    }
    let mut samples = Vec::with_capacity(MULTI_CALLS);
    let mut needs_read = 0;
    for n in 0..MULTI_WARMUP + MULTI_CALLS {
        let body = step(multi_line, n);
        let edits: Vec<Value> = (paths.iter())
            .map(|p| json!({"file_path": p, "text_or_search_replace_blocks": body}))
            .collect();
        let args = json!({"edits": edits});
        let elapsed = client.edit("MultiFileEdit", &args, &mut needs_read);
        if n >= MULTI_WARMUP {
            samples.push(elapsed);
        }
        let now = multi_line(n + 1);
        for p in &paths {
            assert!(
                sb.read(p).contains(&now),
                "multi edit {n} did not land in {p}"
            );
        }
    }
    (Samples::new(samples), needs_read)
}

/// The floor under 3., same filesystem, same run: what committing 100 small files
/// durably costs by itself (per file: temp file, fsync, rename, directory fsync, as
/// src/edit/atomic.rs does), with no server in between.
fn fsync_floor(sb: &Sandbox) -> Samples {
    let dir = sb.dir.path().join("fsync-floor");
    std::fs::create_dir(&dir).expect("mkdir fsync-floor");
    let body = format!("# file\n{}\n# end\n", multi_line(0));
    let run = || {
        let t = Instant::now();
        for i in 0..MULTI_FILES {
            let (tmp, target) = (
                dir.join(format!(".f{i:03}.tmp")),
                dir.join(format!("f{i:03}")),
            );
            let mut f = std::fs::File::create(&tmp).expect("create temp");
            f.write_all(body.as_bytes()).expect("write temp");
            f.sync_all().expect("fsync temp");
            std::fs::rename(&tmp, &target).expect("rename");
            let d = std::fs::File::open(&dir).expect("open dir");
            d.sync_all().expect("fsync dir");
        }
        t.elapsed()
    };
    for _ in 0..MULTI_WARMUP {
        run();
    }
    Samples::new((0..MULTI_CALLS).map(|_| run()).collect())
}

/// Sorted samples; nearest-rank percentiles, so every figure is a real sample (p0 is the
/// minimum, p100 the maximum).
fn main() {
    // Arguments from `cargo bench` (`--bench`, filters) are ignored: this is one program.
    let sb = Sandbox::new();
    let mut r = Report::new("files");
    let dir = sb.dir.path().display();
    eprintln!("winx files bench: {BIN} (sandbox {dir})");
    let ws = sb.workspace.to_string_lossy().into_owned();
    let mut client = Client::start(sb.server(), &ws);

    let (read, read_bytes, read_lines) = read_big(&mut client);
    let (chain, chain_calls) = read_big_chain(&mut client);
    let (edit, edit_needs_read) = edit_round_trips(&mut client, &sb);
    let (multi, multi_needs_read) = multi_edits(&mut client, &sb);
    let rss = client.rss_mib();
    drop(client);
    let floor = fsync_floor(&sb);

    r.latency("read.10k_lines", &read, Some(READ_P50_MS));
    r.add("read.10k_lines.answer", read_bytes as f64, "B", None);
    r.add("read.10k_lines.shown", read_lines as f64, "", None);
    r.latency("read.10k_lines.whole", &chain, None);
    r.add("read.10k_lines.whole.calls", chain_calls as f64, "", None);
    r.latency("edit.1k_lines", &edit, Some(EDIT_P50_MS));
    r.add("edit.1k_lines.needs_read", edit_needs_read as f64, "", None);
    r.latency("multi_edit.100_files", &multi, Some(MULTI_P50_MS));
    r.add("multi_edit.needs_read", multi_needs_read as f64, "", None);
    r.latency("baseline.fsync_100_files", &floor, None);
    r.add("server.vm_rss", rss, "MiB", None);

    r.print();
    // `sb` drops here: every process still mentioning the sandbox is killed.
}
