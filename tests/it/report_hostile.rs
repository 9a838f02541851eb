//! `winx-code-agent report` over crafted usage logs (issue 36 items 8 and 10): extreme
//! timestamps, tens of thousands of distinct names, and a `--log` that is not a regular
//! file. Each log lives in its own temp dir; each report runs under a hard timeout.

use crate::support;

use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Output, Stdio};
use support::HARD_TIMEOUT;

/// Run `report` with `args` (a temp HOME, no configured log), killed past `HARD_TIMEOUT`.
fn report(args: &[&str]) -> Output {
    report_measured(args).0
}

/// Runs the report as its child and writes the child's peak resident set in KiB as the
/// last line of its stderr. The report is not measured as this test process's own child:
/// it would be spawned sharing this process's memory (vfork), and `ru_maxrss` keeps that
/// high-water mark across `exec`, so whatever the one test process holds for its other
/// modules would count as the report's (131 MiB once). A small Python parent keeps the
/// figure the report's.
const MEASURE: &str = "import resource, subprocess, sys
r = subprocess.run(sys.argv[1:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stderr.write('\\npeak_kib=%d\\n' % peak)
sys.exit(r.returncode if r.returncode >= 0 else 128 - r.returncode)
";

/// The `python3` on this process's `PATH` (the README's one prerequisite besides Rust).
fn python3() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
        .expect("python3 on PATH")
}

/// `report(args)` and the report's own peak resident set in KiB.
fn report_measured(args: &[&str]) -> (Output, i64) {
    let tmp = tempfile::tempdir().unwrap();
    let env = support::isolated_env(tmp.path(), &tmp.path().join("state"), tmp.path());
    let mut child = std::process::Command::new(python3())
        .env_clear()
        .envs(env)
        .args(["-c", MEASURE, support::bin(), "report"])
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
    let (tx, rx) = crossbeam_channel::bounded(1);
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let read = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = r.read_to_end(&mut buf);
                buf
            })
        };
        let (out, err) = (read(Box::new(stdout)), read(Box::new(stderr)));
        let status = child.wait().unwrap();
        let _ = tx.send((status, out.join().unwrap(), err.join().unwrap()));
    });
    let Ok((status, stdout, mut stderr)) = rx.recv_timeout(HARD_TIMEOUT) else {
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        panic!("report {args:?} did not finish within {HARD_TIMEOUT:?}");
    };
    let text = String::from_utf8_lossy(&stderr).into_owned();
    let at = text
        .rfind("\npeak_kib=")
        .unwrap_or_else(|| panic!("no peak from the measuring parent: {text}"));
    let peak = text[at + "\npeak_kib=".len()..].trim().parse().unwrap();
    stderr.truncate(at);
    (
        Output {
            status,
            stdout,
            stderr,
        },
        peak,
    )
}

fn ok(out: &Output) -> &[u8] {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    &out.stdout
}

fn write_log(dir: &Path, lines: impl IntoIterator<Item = String>) -> String {
    let path = dir.join("usage.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    f.flush().unwrap();
    path.to_string_lossy().into_owned()
}

fn tool_call(ts: i64, tool: &str) -> String {
    format!(
        r#"{{"usage_schema":1,"ts_ms":{ts},"event":"tool_call","tool":{tool:?},"status":"completed","duration_ms":1.0,"build":"b"}}"#
    )
}

/// `ts_ms` of `i64::MIN`, 0 and `i64::MAX` in one log: the timeline's span does not fit
/// an `i64`, and before the fix the report exited 101 (overflow, then an index out of
/// bounds). Both formats now finish, every call counted on the timeline.
#[test]
fn extreme_timestamps_do_not_panic_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let log = write_log(
        tmp.path(),
        [i64::MIN, 0, i64::MAX, -1, 1].map(|t| tool_call(t, "BashCommand")),
    );
    let r: Value = serde_json::from_slice(ok(&report(&["--log", &log]))).unwrap();
    let calls: u64 = r["timeline"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(calls, 5, "{}", r["timeline"]);
    assert_eq!(r["timeline"]["startMs"], i64::MIN);
    let page =
        String::from_utf8(ok(&report(&["--log", &log, "--format", "html"])).to_vec()).unwrap();
    assert!(page.contains("Calls over time"));
    // Only the extremes, and a window reaching back past the epoch's range.
    for pair in [
        [i64::MIN, i64::MAX],
        [i64::MAX, i64::MAX],
        [i64::MIN, i64::MIN],
    ] {
        let log = write_log(tmp.path(), pair.map(|t| tool_call(t, "ReadFiles")));
        ok(&report(&["--log", &log, "--format", "html"]));
    }
    ok(&report(&[
        "--log",
        &log,
        "--since-minutes",
        &u64::MAX.to_string(),
    ]));
}

/// 30,000 distinct tool names (and as many actions, codes and builds) in a few MiB: the
/// report keeps 64 of each and counts the rest in one `(other)` row, so its JSON, its
/// page and its memory stay small (before: one row, one chart and one `Samples` per
/// name — 60,000 names took 906 MiB and wrote 201 MiB of HTML).
#[test]
fn many_distinct_names_are_folded_into_an_other_row() {
    const NAMES: usize = 30_000;
    let tmp = tempfile::tempdir().unwrap();
    let log = write_log(
        tmp.path(),
        (0..NAMES).map(|i| {
            format!(
                r#"{{"usage_schema":1,"ts_ms":{i},"event":"tool_call","tool":"tool-{i:05}-{pad}","action":"a{i}","error_code":"c{i}","status":"s{i}","build":"b{i}","duration_ms":1.0,"workflow_schema":1}}"#,
                pad = "x".repeat(200)
            )
        }),
    );
    let size = std::fs::metadata(&log).unwrap().len();
    let (json, json_peak) = report_measured(&["--log", &log]);
    let r: Value = serde_json::from_slice(ok(&json)).unwrap();
    let tools = r["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 65, "64 names and (other)");
    let other = tools.iter().find(|t| t["tool"] == "(other)").unwrap();
    assert_eq!(other["calls"], (NAMES - 64) as u64);
    assert_eq!(r["counts"]["toolCalls"], NAMES as u64);
    assert_eq!(r["errorCodes"].as_object().unwrap().len(), 65);
    assert_eq!(r["builds"].as_array().unwrap().len(), 65);
    assert_eq!(r["workflows"].as_array().unwrap().len(), 65);
    let names_cut = tools
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .all(|t| t.len() <= 128 + '…'.len_utf8());
    assert!(
        names_cut,
        "a tool name longer than 128 bytes was kept whole"
    );
    let (html, peak) = report_measured(&["--log", &log, "--format", "html"]);
    let page = ok(&html).len();
    let peak = peak.max(json_peak);
    eprintln!(
        "{NAMES} names in a {} KiB log: HTML {} KiB, report peak RSS {peak} KiB",
        size / 1024,
        page / 1024
    );
    assert!(page < 2 << 20, "the page is {page} bytes");
    assert!(peak < 64 * 1024, "the report reached {peak} KiB");
}

/// A log of 1,000,000 `tool_started` lines whose `tool_call` never comes (a crash, a cut
/// or crafted log), then 10 calls: `--last 10` reports those 10 and its peak stays small.
/// Before the fix the counting pass held every orphan's id and position (~40 B a line:
/// its peak grew by tens of MiB); now it follows at most 65,536 open calls.
#[test]
fn orphan_auxiliary_lines_do_not_grow_the_last_window() {
    const ORPHANS: usize = 1_000_000;
    let tmp = tempfile::tempdir().unwrap();
    let orphans = (0..ORPHANS)
        .map(|i| format!(r#"{{"ts_ms":{i},"event":"tool_started","usage_call_id":"o{i}"}}"#));
    let calls: Vec<String> = (0..10)
        .map(|i| tool_call(ORPHANS as i64 + i, "ReadFiles"))
        .collect();
    let small = tmp.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let small = write_log(&small, calls.clone());
    let (_, base) = report_measured(&["--log", &small, "--last", "10"]);
    let log = write_log(tmp.path(), orphans.chain(calls));
    let (out, peak) = report_measured(&["--log", &log, "--last", "10"]);
    let r: Value = serde_json::from_slice(ok(&out)).unwrap();
    assert_eq!(r["counts"]["toolCalls"], 10, "{}", r["counts"]);
    assert_eq!(r["source"]["linesSeen"], (ORPHANS + 10) as u64);
    eprintln!("{ORPHANS} orphan lines: --last 10 peak RSS {peak} KiB ({base} KiB for 10 lines)");
    // The cap's map and queue and a byte per line: ~10 MiB; all the orphans: over 40 MiB.
    assert!(
        peak < base + 20 * 1024,
        "the report reached {peak} KiB, {base} KiB without the orphans"
    );
}

/// Issue 36 item 8: a FIFO given as `--log`, or named like a rotated sibling of the log,
/// is listed as unreadable (not a regular file) instead of blocking the report in `open`;
/// the regular files beside it are still read. A symbolic link is not followed.
#[test]
fn a_fifo_or_a_symlink_named_as_a_log_is_listed_unreadable_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let mkfifo =
        |p: &Path| nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let unreadable = |r: &Value| -> Vec<(String, String)> {
        r["source"]["unreadableFiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                let s = |k: &str| u[k].as_str().unwrap_or("").to_string();
                (s("file"), s("error"))
            })
            .collect()
    };
    let alone = tmp.path().join("alone.jsonl");
    mkfifo(&alone);
    let r: Value =
        serde_json::from_slice(ok(&report(&["--log", alone.to_str().unwrap()]))).unwrap();
    let u = unreadable(&r);
    assert_eq!(u.len(), 1, "{u:?}");
    assert!(u[0].1.contains("a FIFO, not a regular file"), "{u:?}");
    // A regular active file with a FIFO and a symlink as rotated siblings.
    let log = write_log(tmp.path(), [tool_call(1, "ReadFiles")]);
    mkfifo(&tmp.path().join("usage.jsonl.2026-03-01"));
    std::os::unix::fs::symlink(&log, tmp.path().join("usage.jsonl.2026-02-28")).unwrap();
    let r: Value = serde_json::from_slice(ok(&report(&["--log", &log]))).unwrap();
    assert_eq!(r["counts"]["toolCalls"], 1, "{}", r["source"]);
    let u = unreadable(&r);
    assert_eq!(u.len(), 2, "{u:?}");
    assert!(
        u.iter()
            .any(|(f, e)| f == "usage.jsonl.2026-03-01" && e.contains("FIFO"))
    );
    assert!(
        u.iter()
            .any(|(f, e)| f == "usage.jsonl.2026-02-28" && e.contains("symbolic"))
    );
}
