//! `cargo bench --bench history` (`make bench`): the execution history on the real release
//! binary (daemon runtime). `echo hello` with history on next to the same server with
//! `WINX_NO_HISTORY=1` (runs interleaved, same machine), one 64 KiB `read` page,
//! `observe` of 32 items, the wake-up of `wait` after an output event, and `list` / `read`
//! on a catalog of 128 records × 1 MiB of output.
//!
//! A report, not a gate (see `report.rs`): figures with targets and PASS/MISS, one JSON
//! line, exit 0 on a MISS; it panics only when the server answers wrongly.

use serde_json::{Value, json};
use std::io::Write;
use std::time::{Duration, Instant};

#[path = "report.rs"]
mod report;
use report::{Report, Samples};
#[path = "server.rs"]
mod server;
use server::{Client, HARD_TIMEOUT, Sandbox};

const ECHO_ROUNDS: usize = 4;
const ECHO_CALLS: usize = 250;
const PAGE_READS: usize = 300;
const OBSERVES: usize = 200;
const WAKES: usize = 100;
const CATALOG_THREADS: usize = 8;
const CATALOG_PER_THREAD: usize = 16;

const ECHO_OVERHEAD_MAX: f64 = 1.10;
const READ_P50_MS: f64 = 1.0;
const OBSERVE_P50_MS: f64 = 5.0;
const WAKE_P99_MS: f64 = 5.0;

/// A session pair from `Initialize first_call` on `ws`.
fn session(c: &mut Client, ws: &std::path::Path) -> Value {
    std::fs::create_dir_all(ws).expect("mkdir workspace");
    let first = json!({"type": "first_call", "workspace_root": ws});
    let (_, v) = c.timed(
        "tools/call",
        json!({"name": "Initialize", "arguments": first}),
    );
    let d = v["result"]["structuredContent"]["data"].clone();
    json!({"thread_id": d["thread_id"], "workspace_root": d["workspace_root"]})
}

fn tool(c: &mut Client, name: &str, pair: &Value, extra: Value) -> (Duration, Value) {
    let mut args = pair.clone();
    for (k, v) in extra.as_object().expect("object") {
        args[k] = v.clone();
    }
    let (t, v) = c.timed("tools/call", json!({"name": name, "arguments": args}));
    (t, v["result"].clone())
}

fn bash(c: &mut Client, pair: &Value, action: Value) -> Value {
    tool(c, "BashCommand", pair, json!({"action_json": action})).1
}

fn execution(c: &mut Client, pair: &Value, action: Value) -> (Duration, Value) {
    let (t, r) = tool(c, "Execution", pair, json!({"action": action}));
    let sc = &r["structuredContent"];
    assert!(sc["errorCode"].is_null(), "Execution {action}: {r}");
    (t, sc.clone())
}

fn id_of(r: &Value) -> String {
    let id = &r["structuredContent"]["data"]["state"]["execution_id"];
    id.as_str()
        .unwrap_or_else(|| panic!("no execution id: {r}"))
        .to_string()
}

/// Wait (through the history) until `id` has exited: observe it, and wait from that
/// observation's catalog position while it still runs.
fn exited(c: &mut Client, pair: &Value, id: &str) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        let observe = json!({"type": "observe", "items": [{"execution_id": id, "page_bytes": 4}]});
        let (_, sc) = execution(c, pair, observe);
        let item = &sc["data"]["items"][0]["execution"];
        if item["process_status"] == "exited" && item["output_pending"] == false {
            return;
        }
        let wait = json!({"type": "wait", "execution_ids": [id], "after": sc["data"]["catalog_cursor"],
                          "timeout_seconds": 30});
        execution(c, pair, wait);
    }
    panic!("{id} never exited");
}

/// `echo hello` p50 with history on and off, alternating rounds on two servers.
fn echo(sb: &Sandbox) -> (Samples, Samples) {
    let mut on = Client::start(sb.server("daemon"));
    let mut cmd = sb.server("daemon");
    cmd.env("WINX_NO_HISTORY", "1");
    let mut off = Client::start(cmd);
    let pair_on = session(&mut on, &sb.dir.path().join("echo-on"));
    let pair_off = session(&mut off, &sb.dir.path().join("echo-off"));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..ECHO_ROUNDS {
        for (c, pair, out) in [(&mut on, &pair_on, &mut a), (&mut off, &pair_off, &mut b)] {
            for i in 0..ECHO_CALLS + 10 {
                let (t, r) = tool(
                    c,
                    "BashCommand",
                    pair,
                    json!({"action_json": {"command": "echo hello"}}),
                );
                let ok = r["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("hello"));
                assert!(ok, "round {round} call {i}: {r}");
                if i >= 10 {
                    out.push(t);
                }
            }
        }
    }
    (Samples::new(a), Samples::new(b))
}

fn main() {
    let sb = Sandbox::new();
    let mut r = Report::new("history");
    eprintln!("winx history bench (sandbox {})", sb.dir.path().display());
    let (on, off) = echo(&sb);
    sb.kill_leftovers();

    let mut c = Client::start(sb.server("daemon"));
    let pair = session(&mut c, &sb.dir.path().join("main"));
    // One 64 KiB page of a 1 MiB output.
    let cmd = "head -c 786432 /dev/urandom | base64 -w 100";
    let id = id_of(&bash(
        &mut c,
        &pair,
        json!({"command": cmd, "is_background": true}),
    ));
    exited(&mut c, &pair, &id);
    let page = json!({"type": "read", "execution_id": id, "page_bytes": 65536});
    let reads: Vec<Duration> = (0..PAGE_READS)
        .map(|_| {
            let (t, sc) = execution(&mut c, &pair, page.clone());
            assert_eq!(
                sc["data"]["page"]["text"].as_str().map(str::len),
                Some(65536)
            );
            t
        })
        .collect();
    let reads = Samples::new(reads);

    // observe of 32 items.
    let ids: Vec<String> = (0..32)
        .map(|i| {
            id_of(&bash(
                &mut c,
                &pair,
                json!({"command": format!("echo item {i}")}),
            ))
        })
        .collect();
    let items: Vec<Value> = ids.iter().map(|i| json!({"execution_id": i})).collect();
    let observe = json!({"type": "observe", "items": items});
    let observes = (0..OBSERVES).map(|_| execution(&mut c, &pair, observe.clone()).0);
    let observes = Samples::new(observes.collect());

    // wait wake-up: a background reader echoes each line written to a FIFO.
    let fifo = sb.dir.path().join("main").join("events");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    // Opened read-write once: the reader never sees EOF between two writers.
    let cmd = "exec 3<>events; while read -r l <&3; do echo \"$l\"; done";
    let reader = id_of(&bash(
        &mut c,
        &pair,
        json!({"command": cmd, "is_background": true}),
    ));
    let (_, sc) = execution(&mut c, &pair, json!({"type": "list", "limit": 1}));
    let mut after = sc["data"]["catalog_cursor"].clone();
    let mut wakes = Vec::new();
    for n in 0..WAKES {
        let wait = json!({"type": "wait", "execution_ids": [reader], "after": after,
                          "events": ["output"], "timeout_seconds": 10});
        let args = json!({"name": "Execution", "arguments": {"thread_id": pair["thread_id"],
                          "workspace_root": pair["workspace_root"], "action": wait}});
        let (_, rid) = c.begin("tools/call", args);
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(&fifo)
            .expect("open fifo");
        let t0 = Instant::now();
        writeln!(w, "event {n}").expect("write fifo");
        drop(w);
        let v = c.answer("tools/call", rid);
        wakes.push(t0.elapsed());
        let sc = &v["result"]["structuredContent"];
        assert_eq!(sc["data"]["outcome"], "changed", "{v}");
        after = sc["data"]["catalog_cursor"].clone();
        assert!(t0.elapsed() < HARD_TIMEOUT);
    }
    let wakes = Samples::new(wakes);

    // A catalog of 128 records x 1 MiB (8 sessions x 16, each at its 16 MiB scope cap).
    let t = Instant::now();
    let mut last = (Value::Null, String::new());
    for s in 0..CATALOG_THREADS {
        let pair = session(&mut c, &sb.dir.path().join(format!("cat{s}")));
        for _ in 0..CATALOG_PER_THREAD {
            let cmd = "head -c 1048576 /dev/zero | tr '\\0' a | fold -w 127";
            let id = id_of(&bash(
                &mut c,
                &pair,
                json!({"command": cmd, "is_background": true}),
            ));
            exited(&mut c, &pair, &id);
            last = (pair.clone(), id);
        }
    }
    let fill = t.elapsed();
    let (pair, id) = last;
    let lists = (0..100).map(|_| execution(&mut c, &pair, json!({"type": "list", "limit": 128})).0);
    let lists = Samples::new(lists.collect());
    let page = json!({"type": "read", "execution_id": id, "page_bytes": 65536});
    let big_reads = Samples::new(
        (0..100)
            .map(|_| execution(&mut c, &pair, page.clone()).0)
            .collect(),
    );
    let db = sb.dir.path().join("state-daemon").join("winx.db");
    let db_mib = std::fs::metadata(&db)
        .map(|m| m.len() as f64 / 1048576.0)
        .unwrap_or(0.0);
    let adapter = c.rss_mib();
    drop(c);

    r.latency("echo.history_on", &on, None);
    r.latency("echo.history_off", &off, None);
    let ratio = on.pct(50.0) / off.pct(50.0);
    r.add("echo.on_vs_off.p50", ratio, "x", Some(ECHO_OVERHEAD_MAX));
    r.latency("read.64k_page", &reads, Some(READ_P50_MS));
    r.latency("observe.32_items", &observes, Some(OBSERVE_P50_MS));
    r.latency("wait.wake_after_output", &wakes, None);
    r.add("wait.wake.p99", wakes.pct(99.0), "ms", Some(WAKE_P99_MS));
    r.add("catalog.fill_128x1MiB", fill.as_secs_f64(), "s", None);
    r.latency("catalog.list_128", &lists, None);
    r.latency("catalog.read_64k_page", &big_reads, None);
    r.add("catalog.db_size", db_mib, "MiB", None);
    r.add("adapter.vm_rss_after", adapter, "MiB", None);
    r.print();
}
