//! For `tests/bench/peers.rs` (included with `#[path]`): the chart of docs/benchmarks.md, a
//! hand-written SVG: the `echo hello` round trip per program as horizontal bars (median)
//! with a p99 tick, on a log scale (the programs differ by orders of magnitude).

use super::peers_doc::Row;
use std::fmt::Write as _;

const WIDTH: f64 = 820.0;
/// The plot area: bars start at X0 (the lowest decade) and the highest decade is at X1.
const X0: f64 = 230.0;
const X1: f64 = 660.0;
const TOP: f64 = 64.0;
const ROW: f64 = 34.0;
const BAR: f64 = 18.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn label(ms: f64) -> String {
    match ms {
        v if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        v if v >= 10.0 => format!("{v:.0} ms"),
        v if v >= 1.0 => format!("{v:.1} ms"),
        v => format!("{v:.2} ms"),
    }
}

fn decade_label(exp: i32) -> String {
    if exp >= 3 {
        format!("{} s", 10f64.powi(exp - 3))
    } else {
        format!("{:.*} ms", (-exp).max(0) as usize, 10f64.powi(exp))
    }
}

pub fn chart(rows: &[Row], date: &str) -> String {
    let points: Vec<(f64, f64)> = rows.iter().filter_map(Row::echo_p50_p99).collect();
    let lo = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let (lo, hi) = if points.is_empty() {
        (1.0, 10.0)
    } else {
        (lo, hi)
    };
    let (e0, e1) = (
        lo.log10().floor() as i32,
        (hi.log10().ceil() as i32).max(lo.log10().floor() as i32 + 1),
    );
    let x = |ms: f64| X0 + (ms.log10() - e0 as f64) / (e1 - e0) as f64 * (X1 - X0);
    let height = TOP + ROW * rows.len() as f64 + 56.0;
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"Helvetica, Arial, sans-serif\" \
         font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>"
    );
    let _ = writeln!(
        w,
        "<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\">BashCommand \
         `echo hello` round trip</text>\n<text x=\"16\" y=\"46\" fill=\"#555\">bar: median, \
         tick: p99; log scale; lower is better. make bench-peers, {}</text>",
        escape(date)
    );
    let bottom = TOP + ROW * rows.len() as f64;
    for e in e0..=e1 {
        let gx = x(10f64.powi(e));
        let _ = writeln!(
            w,
            "<line x1=\"{gx:.1}\" y1=\"{:.1}\" x2=\"{gx:.1}\" y2=\"{bottom:.1}\" \
             stroke=\"#ccc\"/>\n<text x=\"{gx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
             fill=\"#555\">{}</text>",
            TOP - 6.0,
            bottom + 18.0,
            decade_label(e)
        );
        if e < e1 {
            for m in [2.0, 5.0] {
                let mx = x(m * 10f64.powi(e));
                let _ = writeln!(
                    w,
                    "<line x1=\"{mx:.1}\" y1=\"{:.1}\" x2=\"{mx:.1}\" y2=\"{bottom:.1}\" \
                     stroke=\"#eee\"/>",
                    TOP - 6.0
                );
            }
        }
    }
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + ROW * i as f64 + (ROW - BAR) / 2.0;
        let mid = y + BAR / 2.0 + 4.5;
        let weight = if row.ours() {
            " font-weight=\"bold\""
        } else {
            ""
        };
        let _ = writeln!(
            w,
            "<text x=\"{:.1}\" y=\"{mid:.1}\" text-anchor=\"end\"{weight}>{}</text>",
            X0 - 10.0,
            escape(row.label)
        );
        let Some((p50, p99)) = row.echo_p50_p99() else {
            let why = if row.missing.is_some() {
                "not installed"
            } else {
                "failed"
            };
            let _ = writeln!(
                w,
                "<text x=\"{:.1}\" y=\"{mid:.1}\" fill=\"#999\">{why}</text>",
                X0 + 6.0
            );
            continue;
        };
        let color = match row.key {
            k if row.ours() && k.ends_with("daemon") => "#1f5fa8",
            _ if row.ours() => "#4a8fd9",
            "bash-raw-pty" => "#2f855a",
            _ => "#9a9a9a",
        };
        let (bx, tx) = (x(p50), x(p99));
        let _ = writeln!(
            w,
            "<rect x=\"{X0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{BAR}\" fill=\"{color}\"/>\n\
             <line x1=\"{bx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\n\
             <line x1=\"{tx:.1}\" y1=\"{y:.1}\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#333\" \
             stroke-width=\"2\"/>",
            (bx - X0).max(1.0),
            y + BAR / 2.0,
            y + BAR / 2.0,
            y + BAR
        );
        let _ = writeln!(
            w,
            "<text x=\"{:.1}\" y=\"{mid:.1}\">{} <tspan fill=\"#777\">(p99 {})</tspan></text>",
            bx.max(tx) + 8.0,
            label(p50),
            label(p99)
        );
    }
    let _ = writeln!(w, "</svg>");
    s
}
