//! `report --format html`: the JSON report rendered as one self-contained page — inline
//! CSS and SVG only (no script, no font, no image fetched from anywhere), so an operator
//! can open it from a file or a mail attachment.
//!
//! Invariant: the page is built from the JSON report alone, and every string from the
//! log is escaped (`svg::esc`): a crafted log line cannot inject markup.

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
        Value::Number(n) => n.to_string(),
        other => esc(&other.to_string()),
    }
}

fn card(out: &mut String, label: &str, v: &Value) {
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
    card(&mut out, "HTTP requests", &r["counts"]["httpRequests"]);
    card(&mut out, "HTTP rejected", &r["counts"]["httpRejected"]);
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
    let bounds: Vec<String> = r["latencyBucketsMs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| format!("≤{}", num(b)))
        .chain(std::iter::once("more".to_string()))
        .collect();
    for t in r["tools"].as_array().into_iter().flatten() {
        let name = t["tool"].as_str().unwrap_or("unknown");
        let counts: Vec<u64> = t["latencyHistogram"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c.as_u64().unwrap_or(0))
            .collect();
        let _ = write!(
            out,
            "<div><h3>{} <span class=\"muted\">p50 {} ms · p95 {} ms · max {} ms</span></h3>{}</div>",
            esc(name),
            num(&t["latencyMs"]["p50"]),
            num(&t["latencyMs"]["p95"]),
            num(&t["latencyMs"]["max"]),
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
    let labels: Vec<String> = (0..calls.len())
        .map(|i| {
            let at = start.saturating_add(bucket.saturating_mul(i as i64));
            let iso = crate::usage::period::iso(at);
            iso.get(11..16).unwrap_or("").to_string()
        })
        .collect();
    let _ = write!(
        out,
        "<p class=\"muted\">From {} UTC, {} s per bar; errors in red.</p>{}",
        crate::usage::period::iso(start),
        bucket / 1000,
        svg::columns(
            "timeline",
            "tool calls over time",
            &labels,
            &calls,
            Some(&errors)
        )
    );
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
    }
}
