//! `winx-code-agent report` over a hand-written log (`tests/fixtures/usage/`): an active
//! file with a truncated last line, malformed fields and unknown fields and events, a
//! rotated file of an older build, and a rotated file of gzip-like garbage. The JSON is
//! compared with `report.golden.json` (`WINX_UPDATE_GOLDEN=1` rewrites it); the HTML page
//! is rendered by headless Chromium and its charts checked after rendering.

use crate::report_html::chromium;
use crate::support;

use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use support::HARD_TIMEOUT;

fn fixture(name: &str) -> PathBuf {
    support::manifest_dir()
        .join("tests/fixtures/usage")
        .join(name)
}

/// Run `report` with `args`, in an environment without a configured log.
fn report(args: &[&str]) -> Output {
    let tmp = tempfile::tempdir().unwrap();
    let env = support::isolated_env(tmp.path(), &tmp.path().join("state"), tmp.path());
    support::command(&env)
        .arg("report")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn report_json(args: &[&str]) -> Value {
    let out = report(args);
    assert!(
        out.status.success(),
        "report {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn log() -> String {
    fixture("usage.jsonl").to_string_lossy().into_owned()
}

#[test]
fn the_fixture_report_matches_the_golden_json() {
    let actual = report_json(&["--log", &log()]);
    let golden = fixture("report.golden.json");
    if std::env::var_os(support::golden::UPDATE_ENV).is_some() {
        let text = serde_json::to_string_pretty(&actual).unwrap() + "\n";
        std::fs::write(&golden, text).unwrap();
        return;
    }
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(&golden).unwrap())
        .expect("the golden file is JSON");
    assert!(
        actual == expected,
        "report differs from {}; if intended, rerun with {}=1 and review the diff.\n\
         ---- actual ----\n{}",
        golden.display(),
        support::golden::UPDATE_ENV,
        serde_json::to_string_pretty(&actual).unwrap()
    );
}

/// The facts the golden file must show, stated on their own so a careless rewrite of it
/// cannot hide a regression.
#[test]
fn the_fixture_report_counts_bad_lines_and_keeps_unknowns_unknown() {
    let r = report_json(&["--log", &log()]);
    let src = &r["source"];
    // 28 + 1 truncated lines in the active file, 3 in the garbage file, 3 rotated.
    assert_eq!(src["linesSeen"], 35);
    assert_eq!(
        src["malformedLines"], 5,
        "[1,2,3], the truncated line, 3 garbage"
    );
    assert_eq!(src["files"].as_array().unwrap().len(), 3);
    assert_eq!(r["counts"]["toolCalls"], 19);
    assert_eq!(r["counts"]["unknownEvents"], 1);
    assert_eq!(r["counts"]["startedWithoutTerminal"], 1);
    let bash = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "BashCommand")
        .unwrap();
    assert_eq!(bash["calls"], 5);
    assert_eq!(bash["latencyMs"]["samples"], 4, "\"fast\" is no duration");
    let ex = &r["execution"];
    assert_eq!(ex["exitCodesKnown"], 2, "a string exit code is unknown");
    assert_eq!(ex["nonZeroExits"], 1);
    assert_eq!(ex["effectiveWaitCalls"], 3);
    assert_eq!(ex["effectiveWaitUnknown"], 2);
    assert_eq!(r["reads"]["shapeUnknown"], 1);
    assert_eq!(r["observations"]["partialResults"], 1);
    assert_eq!(r["http"]["correlatedToolCalls"], 2);
    assert_eq!(r["http"]["adapterOverheadMs"]["max"], 1.0);
    assert_eq!(r["initialize"]["transitions"]["attached_existing"], 1);
    let audit = &r["trace_audit"];
    assert_eq!(audit["violationsTotal"], 4);
    for rule in [
        "retry_same_call",
        "committed_edit_retried",
        "needs_read_without_read_files",
        "search_conflict_kept_read_evidence",
    ] {
        assert_eq!(audit["byRule"][rule], 1, "{rule}");
    }
    assert_eq!(r["builds"].as_array().unwrap().len(), 2);
    // Agent workflows: by backend, with receipts observed (a re-read counts again) and
    // the Herdr prompt whose input is uncertain.
    let wf = |action: &str, backend: &str| {
        r["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["tool"] == "Agent" && w["action"] == action && w["backend"] == backend)
            .cloned()
            .unwrap_or_else(|| panic!("no Agent {action} {backend} workflow"))
    };
    let prompt = wf("prompt", "native");
    assert_eq!(prompt["receiptDeliveries"]["delivered"], 1);
    assert_eq!(prompt["inputSent"]["true"], 1);
    assert_eq!(wf("wait", "native")["receiptOutcomes"]["awaiting_input"], 1);
    assert_eq!(wf("prompt", "herdr")["inputSent"]["unknown"], 1);
}

#[test]
fn last_and_build_filters_select_terminal_events() {
    // The last three terminal lines: two HTTP rejections and the unknown event; the
    // auxiliary tool_started before them does not count towards --last.
    let r = report_json(&["--log", &log(), "--last", "3"]);
    assert_eq!(r["counts"]["toolCalls"], 0);
    assert_eq!(r["counts"]["httpRejected"], 2);
    assert_eq!(r["counts"]["unknownEvents"], 1);
    // Lines outside the window are still seen and counted.
    assert_eq!(r["source"]["linesSeen"], 35);
    assert_eq!(r["source"]["malformedLines"], 5);
    let r = report_json(&["--log", &log(), "--last", "4"]);
    assert_eq!(r["counts"]["toolCalls"], 1);
    let old = report_json(&["--log", &log(), "--build", "0.0.9 (rev bbbb)"]);
    assert_eq!(old["counts"]["toolCalls"], 2);
    assert_eq!(old["initialize"]["transitions"]["created"], 1);
    // The fixture lies in 2026: a recent window selects nothing, and says so.
    let recent = report_json(&["--log", &log(), "--since-minutes", "5"]);
    assert_eq!(recent["counts"]["toolCalls"], 0);
    assert_eq!(recent["tools"], Value::Array(vec![]));
    assert_eq!(recent["execution"]["effectiveWaitMs"]["p50"], Value::Null);
}

/// `--last N` keeps the auxiliary lines (`tool_started`, `tool_phase`) of the calls that
/// end in its window, even those written before the window's first terminal line; the
/// auxiliary lines of calls that end before it stay out. Before the fix every auxiliary
/// line before the window's first terminal line was cut (`toolStarted` and `toolPhases`
/// 0 here, and `startedWithoutTerminal` blind to the calls in the window).
#[test]
fn last_keeps_the_auxiliary_lines_of_the_calls_in_its_window() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let started = |id: &str, ts: i64| {
        format!(
            r#"{{"usage_schema":1,"ts_ms":{ts},"event":"tool_started","usage_call_id":"{id}","tool":"BashCommand","principal":"local"}}"#
        )
    };
    let phase = |id: &str, ts: i64| {
        format!(
            r#"{{"usage_schema":1,"ts_ms":{ts},"event":"tool_phase","usage_call_id":"{id}","phase":"wait","start_ms":0.1,"duration_ms":5.0}}"#
        )
    };
    let call = |id: &str, ts: i64| {
        format!(
            r#"{{"usage_schema":1,"ts_ms":{ts},"event":"tool_call","usage_call_id":"{id}","transport":"stdio","tool":"BashCommand","build":"b","principal":"local","outcome":"result","status":"completed","duration_ms":6.0,"batch_items":0,"worker_limit":0}}"#
        )
    };
    // a ends before the window; b and c end in it, their starts and phases interleaved
    // before b's terminal line.
    let lines = [
        started("a", 1),
        phase("a", 2),
        call("a", 3),
        started("b", 4),
        started("c", 5),
        phase("b", 6),
        phase("c", 7),
        call("b", 8),
        call("c", 9),
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let path = log.to_str().unwrap();
    let r = report_json(&["--log", path, "--last", "2"]);
    let counts = &r["counts"];
    assert_eq!(counts["toolCalls"], 2, "{counts}");
    assert_eq!(counts["toolStarted"], 2, "b's and c's starts: {counts}");
    assert_eq!(counts["toolPhases"], 2, "b's and c's phases: {counts}");
    assert_eq!(counts["startedWithoutTerminal"], 0, "{counts}");
    assert_eq!(r["source"]["linesSeen"], 9);
    // The window of the last call alone: its own start and phase, not b's.
    let r = report_json(&["--log", path, "--last", "1"]);
    let counts = &r["counts"];
    assert_eq!(
        (
            &counts["toolCalls"],
            &counts["toolStarted"],
            &counts["toolPhases"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{counts}"
    );
    assert_eq!(counts["startedWithoutTerminal"], 0, "{counts}");
    // The whole log: everything.
    let r = report_json(&["--log", path, "--last", "3"]);
    assert_eq!(r["counts"]["toolStarted"], 3);
    assert_eq!(r["counts"]["toolPhases"], 3);
}

/// CodeMap lines: the canonical root `source_kind` / `payload_bytes` win over the legacy
/// camelCase ones, which still count alone; a value of the wrong type is unknown.
#[test]
fn codemap_source_kind_and_payload_bytes_prefer_the_canonical_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("usage.jsonl");
    let line = |id: u32, extra: &str| {
        format!(
            r#"{{"usage_schema":1,"ts_ms":{id},"event":"tool_call","usage_call_id":"c{id}","tool":"CodeMap","action":"outline","build":"b","principal":"local","outcome":"result","status":"completed","duration_ms":1.0,"batch_items":0,"worker_limit":0{extra}}}"#
        )
    };
    let lines = [
        line(1, r#","source_kind":"canonical","payload_bytes":100"#),
        line(
            2,
            r#","source_kind":"helper","payload_bytes":40,"sourceKind":"canonical","payloadBytes":9999"#,
        ),
        line(3, r#","sourceKind":"helper","payloadBytes":60"#),
        line(4, r#","source_kind":7,"payload_bytes":"many""#),
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let r = report_json(&["--log", log.to_str().unwrap()]);
    let cm = &r["codeMap"];
    assert_eq!(cm["calls"], 4, "{cm}");
    assert_eq!(
        cm["sourceKinds"],
        json!({"canonical": 1, "helper": 2}),
        "{cm}"
    );
    assert_eq!(cm["sourceKindUnknown"], 1, "{cm}");
    assert_eq!(cm["payloadBytes"]["samples"], 3, "{cm}");
    assert_eq!(cm["payloadBytes"]["total"], 200.0, "{cm}");
}

/// Run `cmd` to completion within `HARD_TIMEOUT`.
fn output_within(mut cmd: Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(HARD_TIMEOUT * 3) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("chromium did not finish in time");
        }
    }
}

#[test]
fn the_html_page_renders_with_non_empty_charts_in_a_real_browser() {
    let out = report(&["--log", &log(), "--format", "html"]);
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.to_lowercase().contains("<script"), "no scripts");
    assert!(
        !page.contains(" src=") && !page.contains(" href="),
        "nothing fetched"
    );
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("report.html");
    std::fs::write(&file, &page).unwrap();
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
    ])
    .arg(format!(
        "--user-data-dir={}",
        tmp.path().join("profile").display()
    ))
    .arg("--dump-dom")
    .arg(format!("file://{}", file.display()))
    .env("HOME", tmp.path());
    let out = output_within(cmd);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("winx usage report"),
        "chromium rendered nothing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One latency histogram per tool, the timeline and the error codes, each with bars
    // of positive height after rendering.
    let charts: Vec<&str> = dom.split("<svg").skip(1).collect();
    let tools = 8;
    let latency = charts
        .iter()
        .filter(|c| c.contains("class=\"chart latency\""))
        .count();
    assert_eq!(latency, tools, "{dom}");
    for kind in ["timeline", "errors", "rejections"] {
        assert!(
            charts
                .iter()
                .any(|c| c.contains(&format!("chart {kind}\""))),
            "no {kind} chart"
        );
    }
    let height = regex_lite::Regex::new(r#"height="([0-9.]+)""#).unwrap();
    for c in &charts {
        let svg = c.split("</svg>").next().unwrap();
        let bars = svg
            .split("<rect")
            .skip(1)
            .filter_map(|r| height.captures(r))
            .filter(|m| m[1].parse::<f64>().unwrap() > 0.0)
            .count();
        assert!(bars > 0, "an empty chart: <svg{svg}");
    }
    // The audit table lists the violations.
    assert_eq!(dom.matches("search_conflict_kept_read_evidence").count(), 2);
}
