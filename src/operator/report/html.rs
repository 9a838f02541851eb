//! `report --format html`: the JSON report rendered as one self-contained page — inline
//! CSS and SVG only (no script, no font, no image fetched from anywhere), so an operator
//! can open it from a file or a mail attachment.
//!
//! Invariant: the page is built from the JSON report alone, and every string from the
//! log is escaped (`svg::esc`): a crafted log line cannot inject markup. A card shows a
//! figure the log has — none for an unknown (`null`) one, no HTTP cards for a log without
//! HTTP lines — and the timeline's labels are as precise as its bars.

use super::svg::{self, esc};
use serde_json::Value;
use std::fmt::Write;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\
h3{font-size:14px;margin:14px 0 4px}table{border-collapse:collapse;margin:6px 0}\
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f4f4f4}\
td.n{text-align:right;font-variant-numeric:tabular-nums}.cards{display:flex;gap:12px;flex-wrap:wrap}\
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}\
.card b{display:block;font-size:20px}.grid{display:flex;flex-wrap:wrap;gap:18px}\
.ok{color:#2a7a2a}.bad{color:#b02a2a}.muted{color:#777}";

fn num(v: &Value) -> String {
    match v {
        Value::Null => "unknown".into(),
        // 40.0 reads as 40; a fraction stays (0.5, 733.333).
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => esc(&other.to_string()),
    }
}

/// A card for `v`, or nothing when the log has no such figure (`null`).
fn card(out: &mut String, label: &str, v: &Value) {
    if v.is_null() {
        return;
    }
    let _ = write!(
        out,
        r#"<div class="card">{}<b>{}</b></div>"#,
        esc(label),
        num(v)
    );
}

/// The page for the JSON report `r`.
pub fn render(r: &Value) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>winx usage report</title><style>{STYLE}</style></head><body><h1>winx usage report</h1>"#
    );
    let src = &r["source"];
    let _ = write!(
        out,
        r#"<p class="muted">{} file(s), {} lines seen, {} malformed, {} filtered out.</p><div class="cards">"#,
        num(&src["files"]
            .as_array()
            .map_or(Value::Null, |f| f.len().into())),
        num(&src["linesSeen"]),
        num(&src["malformedLines"]),
        num(&src["filteredOut"]),
    );
    card(&mut out, "tool calls", &r["counts"]["toolCalls"]);
    card(&mut out, "error results", &r["errorResults"]);
    // A log without HTTP lines (stdio only) has no HTTP figures, not zero of them.
    let counts = &r["counts"];
    let http_seen = [&counts["httpRequests"], &counts["httpRejected"]]
        .iter()
        .any(|v| v.as_u64().is_some_and(|n| n > 0));
    if http_seen {
        card(&mut out, "HTTP requests", &counts["httpRequests"]);
        card(&mut out, "HTTP rejected", &counts["httpRejected"]);
    }
    card(
        &mut out,
        "audit violations",
        &r["trace_audit"]["violationsTotal"],
    );
    card(
        &mut out,
        "adapter overhead p50 ms",
        &r["http"]["adapterOverheadMs"]["p50"],
    );
    out.push_str("</div>");
    tools_table(&mut out, r);
    latency(&mut out, r);
    timeline(&mut out, r);
    errors(&mut out, r);
    audit(&mut out, r);
    builds(&mut out, r);
    out.push_str("</body></html>\n");
    out
}

fn tools_table(out: &mut String, r: &Value) {
    out.push_str("<h2>Tools</h2><table><tr><th>tool</th><th>calls</th><th>p50 ms</th><th>p95 ms</th><th>max ms</th><th>avg bytes</th><th>errors</th></tr>");
    for t in r["tools"].as_array().into_iter().flatten() {
        let errors: u64 = t["errorCodes"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
        let _ = write!(
            out,
            r#"<tr><td>{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{errors}</td></tr>"#,
            esc(t["tool"].as_str().unwrap_or("unknown")),
            num(&t["calls"]),
            num(&t["latencyMs"]["p50"]),
            num(&t["latencyMs"]["p95"]),
            num(&t["latencyMs"]["max"]),
            num(&t["responseBytes"]["avg"]),
        );
    }
    out.push_str("</table>");
}

fn latency(out: &mut String, r: &Value) {
    out.push_str("<h2>Latency per tool</h2><div class=\"grid\">");
    let limits: Vec<f64> = r["latencyBucketsMs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .collect();
    let bounds = bucket_labels(&limits);
    for t in r["tools"].as_array().into_iter().flatten() {
        let name = t["tool"].as_str().unwrap_or("unknown");
        let counts: Vec<u64> = t["latencyHistogram"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c.as_u64().unwrap_or(0))
            .collect();
        let l = &t["latencyMs"];
        let figures = match l["p50"].is_null() {
            true => "no duration recorded".to_string(),
            false => format!(
                "p50 {} ms · p95 {} ms · max {} ms",
                num(&l["p50"]),
                num(&l["p95"]),
                num(&l["max"])
            ),
        };
        let _ = write!(
            out,
            "<div><h3>{} <span class=\"muted\">{figures}</span></h3>{}</div>",
            esc(name),
            svg::columns(
                "latency",
                &format!("{name} latency (ms)"),
                &bounds,
                &counts,
                None
            )
        );
    }
    out.push_str("</div>");
}

fn timeline(out: &mut String, r: &Value) {
    let tl = &r["timeline"];
    let ints = |v: &Value| -> Vec<u64> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|c| c.as_u64().unwrap_or(0))
            .collect()
    };
    let (calls, errors) = (ints(&tl["calls"]), ints(&tl["errors"]));
    let (start, bucket) = (tl["startMs"].as_i64(), tl["bucketMs"].as_i64());
    out.push_str("<h2>Calls over time</h2>");
    let (Some(start), Some(bucket)) = (start, bucket) else {
        out.push_str("<p class=\"muted\">No tool call with a known time.</p>");
        return;
    };
    let labels = time_labels(start, bucket, calls.len());
    let _ = write!(
        out,
        "<p class=\"muted\">From {} UTC, {} per bar; errors in red.</p>{}",
        crate::usage::period::iso(start),
        duration(bucket / 1000),
        svg::columns(
            "timeline",
            "tool calls over time",
            &labels,
            &calls,
            Some(&errors)
        )
    );
}

/// Histogram labels for bucket upper bounds in ms: `≤0.5`, `≤20`, `≤1 s`, then `>5 s`.
fn bucket_labels(limits: &[f64]) -> Vec<String> {
    let ms = |v: f64| match v >= 1000.0 {
        true => format!("{} s", v / 1000.0),
        false => format!("{v}"),
    };
    let mut out: Vec<String> = limits.iter().map(|b| format!("≤{}", ms(*b))).collect();
    out.push(match limits.last() {
        Some(b) => format!(">{}", ms(*b)),
        None => "all".into(),
    });
    out
}

/// Labels for `n` bars of `bucket` ms from `start`: each bar's start time, as precise as
/// the bars — seconds unless every label falls on a whole minute, the date when the bars
/// cross midnight, the year when they cross a year.
fn time_labels(start: i64, bucket: i64, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let isos: Vec<String> = (0..n)
        .map(|i| {
            let at = start.saturating_add(bucket.saturating_mul(i as i64));
            crate::usage::period::iso(at)
        })
        .collect();
    // `YYYY-MM-DDTHH:MM:SSZ`; a year is not always four digits: cut from the end.
    let cut = |iso: &str, from_end: usize, to_end: usize| -> String {
        let (len, from) = (iso.len(), iso.len().saturating_sub(from_end));
        iso.get(from..len.saturating_sub(to_end))
            .unwrap_or("")
            .to_string()
    };
    let differ = |from_end: usize, to_end: usize| {
        let first = cut(&isos[0], from_end, to_end);
        isos.iter().any(|i| cut(i, from_end, to_end) != first)
    };
    let seconds = isos.iter().any(|i| cut(i, 3, 1) != "00");
    let years = differ(usize::MAX, 15);
    let dates = differ(usize::MAX, 10);
    isos.iter()
        .map(|i| {
            let time = cut(i, 9, if seconds { 1 } else { 4 });
            match (years, dates) {
                (true, _) => format!("{} {time}", cut(i, usize::MAX, 10)),
                (false, true) => format!("{} {time}", cut(i, 15, 10)),
                _ => time,
            }
        })
        .collect()
}

/// `secs` as `1 d 2 h 3 min 4 s`, zero parts left out.
fn duration(secs: i64) -> String {
    let parts = [
        (secs / 86_400, "d"),
        (secs % 86_400 / 3600, "h"),
        (secs % 3600 / 60, "min"),
        (secs % 60, "s"),
    ];
    let text: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n != 0)
        .map(|(n, unit)| format!("{n} {unit}"))
        .collect();
    match text.is_empty() {
        true => "0 s".into(),
        false => text.join(" "),
    }
}

fn errors(out: &mut String, r: &Value) {
    out.push_str("<h2>Error codes</h2>");
    let mut items: Vec<(String, u64)> = r["errorCodes"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
        .collect();
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    match items.is_empty() {
        true => out.push_str("<p class=\"ok\">No error results.</p>"),
        false => out.push_str(&svg::rows("errors", "error codes", &items)),
    }
    let reasons: Vec<(String, u64)> = r["http"]["rejectedByReason"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
        .collect();
    if !reasons.is_empty() {
        out.push_str("<h3>HTTP rejections</h3>");
        out.push_str(&svg::rows("rejections", "HTTP rejections", &reasons));
    }
}

fn audit(out: &mut String, r: &Value) {
    let a = &r["trace_audit"];
    let _ = write!(
        out,
        "<h2>Trace audit</h2><p>{} calls checked; <span class=\"{}\">{} violation(s)</span>.</p><table><tr><th>rule</th><th>count</th></tr>",
        num(&a["checkedCalls"]),
        if a["violationsTotal"].as_u64() == Some(0) {
            "ok"
        } else {
            "bad"
        },
        num(&a["violationsTotal"])
    );
    for (rule, n) in a["byRule"].as_object().into_iter().flatten() {
        let _ = write!(
            out,
            r#"<tr><td>{}</td><td class="n">{}</td></tr>"#,
            esc(rule),
            num(n)
        );
    }
    out.push_str("</table>");
    let listed = a["violations"].as_array().cloned().unwrap_or_default();
    if listed.is_empty() {
        return;
    }
    out.push_str("<table class=\"audit\"><tr><th>time (UTC)</th><th>rule</th><th>tool</th><th>call</th><th>detail</th></tr>");
    for v in &listed {
        let time = v["tsMs"]
            .as_i64()
            .map_or("unknown".to_string(), crate::usage::period::iso);
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&time),
            esc(v["rule"].as_str().unwrap_or("")),
            esc(v["tool"].as_str().unwrap_or("unknown")),
            esc(v["usageCallId"].as_str().unwrap_or("unknown")),
            esc(v["detail"].as_str().unwrap_or("")),
        );
    }
    out.push_str("</table>");
}

fn builds(out: &mut String, r: &Value) {
    out.push_str(
        "<h2>Builds</h2><table><tr><th>build</th><th>events</th><th>first</th><th>last</th></tr>",
    );
    for b in r["builds"].as_array().into_iter().flatten() {
        let t = |k: &str| {
            b[k].as_i64()
                .map_or("unknown".into(), crate::usage::period::iso)
        };
        let _ = write!(
            out,
            r#"<tr><td>{}</td><td class="n">{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(b["build"].as_str().unwrap_or("unknown")),
            num(&b["events"]),
            t("firstTsMs"),
            t("lastTsMs"),
        );
    }
    out.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_page_has_no_script_and_escapes_log_strings() {
        let r = json!({
            "source": {"files": [], "linesSeen": 2, "malformedLines": 0, "filteredOut": 0},
            "counts": {"toolCalls": 1}, "errorResults": 1,
            "latencyBucketsMs": [1.0],
            "tools": [{"tool": "<script>alert(1)</script>", "calls": 1,
                       "latencyMs": {"p50": 1.0, "p95": 1.0, "max": 1.0},
                       "latencyHistogram": [1, 0], "responseBytes": {"avg": 10},
                       "errorCodes": {"x": 1}}],
            "errorCodes": {"x": 1},
            "timeline": {"startMs": 0, "bucketMs": 1000, "calls": [1], "errors": [1]},
            "trace_audit": {"checkedCalls": 1, "violationsTotal": 0, "byRule": {}, "violations": []},
            "builds": [], "http": {}
        });
        let page = render(&r);
        assert!(!page.to_lowercase().contains("<script"), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        assert_eq!(page.matches("<svg").count(), 3);
        // A stdio-only log: no HTTP cards, no unknown adapter overhead.
        let cards = &page[page.find("class=\"cards\"").unwrap()..page.find("<h2>").unwrap()];
        assert!(
            !cards.contains("unknown") && !cards.contains("HTTP"),
            "{cards}"
        );
        assert!(cards.contains("tool calls"));
    }

    #[test]
    fn timeline_labels_are_as_precise_as_the_bars() {
        // 2026-03-01T06:00:00Z, one-second bars: every label has its seconds.
        let six = 1_772_344_800_000;
        let l = time_labels(six, 1000, 61);
        assert_eq!((l[0].as_str(), l[1].as_str()), ("06:00:00", "06:00:01"));
        assert_eq!(l[60], "06:01:00");
        // Whole-minute bars on whole minutes: no seconds.
        assert_eq!(time_labels(six, 60_000, 3), ["06:00", "06:01", "06:02"]);
        // Whole minutes from an odd second: the seconds matter.
        assert_eq!(time_labels(six + 5000, 60_000, 2), ["06:00:05", "06:01:05"]);
        // Across midnight: the date; across a year: the year.
        let l = time_labels(six, 12 * 3_600_000, 3);
        assert_eq!(l, ["03-01 06:00", "03-01 18:00", "03-02 06:00"]);
        let l = time_labels(six, 200 * 86_400_000, 3);
        assert_eq!(
            l,
            ["2026-03-01 06:00", "2026-09-17 06:00", "2027-04-05 06:00"]
        );
        assert!(time_labels(six, 1000, 0).is_empty());
        // Extreme times do not panic.
        assert_eq!(time_labels(i64::MIN, i64::MAX, 3).len(), 3);
        assert_eq!(duration(1), "1 s");
        assert_eq!(duration(5401), "1 h 30 min 1 s");
        assert_eq!(duration(86_400), "1 d");
        let b = bucket_labels(&[0.5, 1.0, 1000.0, 5000.0]);
        assert_eq!(b, ["≤0.5", "≤1", "≤1 s", "≤5 s", ">5 s"]);
    }
}
