//! The HTML usage report reads at a glance (issue 38 item 12). Pages generated from
//! crafted usage logs (thousands of calls in one-second bars, latencies in every bucket,
//! long error codes; a log spanning days, with HTTP) are rendered by headless Chromium
//! with a measuring script injected into a copy of the page — the report itself ships no
//! script. The script writes every chart text's box into `<pre id=boxes>`; the test checks
//! that no two labels overlap, that each stays inside its chart, that every bar chart's y
//! axis has at least three ticks, that timeline labels are as precise as the bars, and
//! that the cards show only figures the log has. Without Chromium on PATH the tests
//! fail saying how to install it (`make test` does), unless `WINX_SKIP_BROWSER=1` skips
//! the browser checks.

use crate::support;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::HARD_TIMEOUT;

/// 2026-03-01T06:00:00Z.
const SIX: i64 = 1_772_344_800_000;

/// Upper bounds of the report's latency buckets, and one past the last.
const DURATIONS: [f64; 13] = [
    0.3, 0.8, 1.5, 4.0, 8.0, 15.0, 40.0, 80.0, 150.0, 400.0, 900.0, 4000.0, 9000.0,
];

fn write_log(dir: &Path, lines: &[Value]) -> PathBuf {
    let path = dir.join("usage.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    f.flush().unwrap();
    path
}

fn call(i: usize, ts: i64, tool: &str, transport: &str) -> Value {
    let mut l = json!({
        "usage_schema": 1, "ts_ms": ts, "event": "tool_call", "usage_call_id": format!("c{i}"),
        "transport": transport, "tool": tool, "build": "0.1.0 (rev aaaa)",
        "outcome": "result", "status": "completed",
        "duration_ms": DURATIONS[i % DURATIONS.len()], "response_bytes": 100 + i,
    });
    if i.is_multiple_of(7) {
        let code = match i % 3 {
            0 => "shell_exited".to_string(),
            1 => format!("a_very_long_error_code_{}", "that_goes_on_".repeat(12)),
            _ => "needs_initialize".to_string(),
        };
        l["error_code"] = json!(code);
        l["status"] = json!("error");
    }
    l
}

/// `winx-code-agent report --log LOG --format html`, in an environment of its own.
fn report_html(log: &Path) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let env = support::isolated_env(tmp.path(), &tmp.path().join("state"), tmp.path());
    let out = support::command(&env)
        .arg("report")
        .arg("--log")
        .arg(log)
        .args(["--format", "html"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        !page.to_lowercase().contains("<script"),
        "the report ships no script"
    );
    page
}

/// The cards' markup: from the cards' container to the first section heading.
fn cards(page: &str) -> &str {
    let from = page.find("class=\"cards\"").expect("cards");
    &page[from..from + page[from..].find("<h2>").expect("a section")]
}

/// Chromium from Debian's packages (`make test` installs it). Without it the test fails
/// saying how to install it, unless `WINX_SKIP_BROWSER=1` asks to skip the browser checks
/// (then `None`, with a note).
pub(crate) fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::var("PATH").unwrap_or_default().split(':') {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    if std::env::var_os("WINX_SKIP_BROWSER").is_some_and(|v| v == "1") {
        eprintln!("skipping the browser checks: no chromium on PATH and WINX_SKIP_BROWSER=1");
        return None;
    }
    panic!(
        "no chromium (nor chromium-browser, google-chrome) on PATH: the HTML report is \
         checked in a real browser. Install it with `make browser` (`make test` does), i.e. \
         `sudo apt-get install --no-install-recommends chromium`, or set \
         WINX_SKIP_BROWSER=1 to skip the browser checks"
    );
}

/// Run `cmd` to completion within three `HARD_TIMEOUT`s, else kill it and fail.
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

/// Measures every chart's text after layout and writes the boxes, as JSON, into a
/// `<pre id=boxes>`; also the cards' rendered text. Injected into the test's copy only.
const MEASURE: &str = r#"<script>
(function () {
  var box = function (r) { return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
  var charts = [];
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var texts = [];
    svg.querySelectorAll('text').forEach(function (t) {
      var b = t.getBBox();
      texts.push({cls: t.getAttribute('class') || '', text: t.firstChild ? t.firstChild.nodeValue : '',
                  box: box(t.getBoundingClientRect()), bboxWidth: b.width, bboxHeight: b.height});
    });
    charts.push({cls: svg.getAttribute('class'), box: box(svg.getBoundingClientRect()), texts: texts});
  });
  var cards = [];
  document.querySelectorAll('.card').forEach(function (c) { cards.push(c.textContent); });
  var pre = document.createElement('pre');
  pre.id = 'boxes';
  pre.textContent = JSON.stringify({charts: charts, cards: cards});
  document.body.appendChild(pre);
})();
</script>"#;

/// `page` rendered by headless Chromium with `MEASURE` injected: the JSON it wrote, or
/// `None` when `WINX_SKIP_BROWSER=1` skips the browser.
fn rendered_boxes(page: &str) -> Option<Value> {
    let browser = chromium()?;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("report.html");
    let at = page.rfind("</body>").expect("</body>");
    std::fs::write(&file, format!("{}{MEASURE}{}", &page[..at], &page[at..])).unwrap();
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--window-size=1280,1000",
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
    let start = dom.find("<pre id=\"boxes\">").unwrap_or_else(|| {
        panic!(
            "the measuring script wrote nothing: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let json = &dom[start + "<pre id=\"boxes\">".len()..];
    let json = &json[..json.find("</pre>").expect("</pre>")];
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    Some(serde_json::from_str(&json).expect("the boxes are JSON"))
}

fn edges(b: &Value) -> [f64; 4] {
    ["left", "top", "right", "bottom"].map(|k| b[k].as_f64().unwrap())
}

/// Every chart: no two texts overlap, each lies inside its chart, and a bar chart's y
/// axis has at least three ticks. Returns the x labels of the chart of class `class`.
fn check_layout(boxes: &Value, class: &str) -> Vec<String> {
    let charts = boxes["charts"].as_array().unwrap();
    assert!(!charts.is_empty(), "no charts: {boxes}");
    let mut wanted = Vec::new();
    for chart in charts {
        let cls = chart["cls"].as_str().unwrap();
        let [cl, ct, cr, cb] = edges(&chart["box"]);
        let texts: Vec<(&str, [f64; 4])> = chart["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["text"].as_str().unwrap_or(""), edges(&t["box"])))
            .filter(|(_, [l, _, r, _])| r > l)
            .collect();
        for (text, [l, t, r, b]) in &texts {
            assert!(
                *l >= cl - 0.5 && *t >= ct - 0.5 && *r <= cr + 0.5 && *b <= cb + 0.5,
                "{cls}: {text:?} {:?} sticks out of its chart {:?}",
                [l, t, r, b],
                [cl, ct, cr, cb]
            );
        }
        for (i, (a, [al, at, ar, ab])) in texts.iter().enumerate() {
            for (b, [bl, bt, br, bb]) in &texts[i + 1..] {
                let apart = ar <= bl || br <= al || ab <= bt || bb <= at;
                assert!(
                    apart,
                    "{cls}: labels {a:?} {:?} and {b:?} {:?} overlap",
                    [al, at, ar, ab],
                    [bl, bt, br, bb]
                );
            }
        }
        let of = |kind: &str| -> Vec<String> {
            chart["texts"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["cls"] == kind)
                .map(|t| t["text"].as_str().unwrap_or("").to_string())
                .collect()
        };
        if cls.contains("latency") || cls.contains("timeline") {
            let ticks = of("tick y");
            assert!(ticks.len() >= 3, "{cls}: y ticks {ticks:?}");
            assert_eq!(ticks[0], "0", "{cls}: the axis starts at 0");
            assert!(
                of("tick x").len() >= 2,
                "{cls}: x labels {:?}",
                of("tick x")
            );
        }
        if cls == format!("chart {class}") {
            wanted = of("tick x");
        }
    }
    wanted
}

/// 2,400 stdio calls in 48 s (one-second bars, up to 50 calls a bar), every latency
/// bucket used, long error codes: a page whose labels fit, with seconds on the timeline
/// and no card for a figure the log lacks.
#[test]
fn a_busy_stdio_log_has_readable_axes_and_no_unknown_card() {
    let tmp = tempfile::tempdir().unwrap();
    let tools = ["BashCommand", "ReadFiles", "FileWriteOrEdit", "Initialize"];
    let lines: Vec<Value> = (0..2400)
        .map(|i| call(i, SIX + 20 * i as i64, tools[i % tools.len()], "stdio"))
        .collect();
    let page = report_html(&write_log(tmp.path(), &lines));
    let cards = cards(&page);
    assert!(cards.contains("tool calls"), "{cards}");
    assert!(
        !cards.contains("unknown"),
        "a card without a figure: {cards}"
    );
    assert!(
        !cards.contains("HTTP"),
        "HTTP cards for a stdio log: {cards}"
    );
    assert!(page.contains("1 s per bar"), "the timeline's caption");
    let Some(boxes) = rendered_boxes(&page) else {
        return;
    };
    let rendered = boxes["cards"].to_string();
    assert!(!rendered.contains("unknown"), "{rendered}");
    let codes = check_layout(&boxes, "errors");
    assert!(codes.is_empty(), "rows have no x axis");
    let errors = &boxes["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cls"] == "chart errors");
    let long = errors.expect("an error chart")["texts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| {
            t["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("a_very_long") && t.ends_with('…'))
        });
    assert!(long, "the long error code is cut to its column");
    let labels = check_layout(&boxes, "timeline");
    // One-second bars: every label has its seconds, and no two are the same.
    let second = regex_lite::Regex::new(r"^06:00:[0-5][0-9]$").unwrap();
    assert!(labels.iter().all(|l| second.is_match(l)), "{labels:?}");
    let mut distinct = labels.clone();
    distinct.dedup();
    assert_eq!(distinct, labels, "labels repeat");
    assert!(labels.len() >= 4, "{labels:?}");
}

/// A log over three days, half its calls through HTTP: dated timeline labels that fit,
/// and the HTTP cards (adapter overhead included) because the log has those figures.
#[test]
fn a_log_over_days_labels_dates_and_shows_the_http_cards_it_has() {
    let tmp = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for i in 0..600usize {
        let ts = SIX + i as i64 * 431_000;
        let transport = if i.is_multiple_of(2) { "http" } else { "stdio" };
        let mut l = call(i, ts, "BashCommand", transport);
        if transport == "http" {
            l["request_id"] = json!(format!("r{i}"));
            lines.push(l.clone());
            lines.push(json!({
                "usage_schema": 1, "ts_ms": ts + 1, "event": "http_request",
                "request_id": format!("r{i}"), "method": "POST", "rpc_method": "tools/call",
                "status": 200, "duration_ms": l["duration_ms"].as_f64().unwrap() + 0.25,
                "build": "0.1.0 (rev aaaa)",
            }));
        } else {
            lines.push(l);
        }
    }
    let page = report_html(&write_log(tmp.path(), &lines));
    let cards = cards(&page);
    for figure in ["HTTP requests", "HTTP rejected", "adapter overhead p50 ms"] {
        assert!(cards.contains(figure), "no {figure} card: {cards}");
    }
    assert!(!cards.contains("unknown"), "{cards}");
    let Some(boxes) = rendered_boxes(&page) else {
        return;
    };
    let labels = check_layout(&boxes, "timeline");
    let dated = regex_lite::Regex::new(r"^03-0[1-4] [0-2][0-9]:[0-5][0-9]:[0-5][0-9]$").unwrap();
    assert!(labels.iter().all(|l| dated.is_match(l)), "{labels:?}");
    assert!(labels.len() >= 3, "{labels:?}");
}
