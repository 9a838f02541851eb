//! Inline SVG bar charts for the HTML report: pure functions from numbers and labels to
//! markup. No scripts, no external resources; every label is escaped.

use std::fmt::Write;

/// Text safe inside HTML and SVG elements and attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const W: f64 = 560.0;
const H: f64 = 180.0;
const PAD_LEFT: f64 = 44.0;
const PAD_BOTTOM: f64 = 34.0;
const PAD_TOP: f64 = 12.0;

/// One series of vertical bars (`values[i]` over `labels[i]`), optionally with a second
/// series drawn over it (errors over calls). `class` names the chart for styling/tests.
pub fn columns(
    class: &str,
    title: &str,
    labels: &[String],
    values: &[u64],
    over: Option<&[u64]>,
) -> String {
    let max = values.iter().copied().max().unwrap_or(0).max(1) as f64;
    let n = values.len().max(1) as f64;
    let plot_w = W - PAD_LEFT - 8.0;
    let plot_h = H - PAD_TOP - PAD_BOTTOM;
    let slot = plot_w / n;
    let bar = (slot * 0.8).max(1.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart {class}" role="img" aria-label="{t}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = esc(title)
    );
    let base = H - PAD_BOTTOM;
    let _ = write!(
        s,
        r##"<line x1="{PAD_LEFT}" y1="{base}" x2="{}" y2="{base}" stroke="#888"/>"##,
        W - 4.0
    );
    let _ = write!(
        s,
        r##"<text x="{}" y="{}" font-size="10" text-anchor="end" fill="#555">{}</text>"##,
        PAD_LEFT - 4.0,
        PAD_TOP + 8.0,
        max as u64
    );
    // Label at most ~12 slots so the axis stays readable.
    let every = (values.len() / 12).max(1);
    for (i, v) in values.iter().enumerate() {
        let x = PAD_LEFT + slot * i as f64 + (slot - bar) / 2.0;
        let h = (*v as f64 / max * plot_h).max(if *v > 0 { 1.0 } else { 0.0 });
        let label = labels.get(i).map(String::as_str).unwrap_or("");
        let _ = write!(
            s,
            r##"<rect class="bar" x="{x:.1}" y="{:.1}" width="{bar:.1}" height="{h:.1}" fill="#4a7bd0"><title>{}: {v}</title></rect>"##,
            base - h,
            esc(label)
        );
        if let Some(e) = over.and_then(|o| o.get(i)).filter(|e| **e > 0) {
            let eh = (*e as f64 / max * plot_h).max(1.0);
            let _ = write!(
                s,
                r##"<rect class="bar error" x="{x:.1}" y="{:.1}" width="{bar:.1}" height="{eh:.1}" fill="#d0504a"><title>{} errors: {e}</title></rect>"##,
                base - eh,
                esc(label)
            );
        }
        if i % every == 0 {
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle" fill="#555">{}</text>"##,
                x + bar / 2.0,
                base + 12.0,
                esc(label)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars, one row per label (error codes, rejection reasons).
pub fn rows(class: &str, title: &str, items: &[(String, u64)]) -> String {
    const ROW: f64 = 18.0;
    const LABEL_W: f64 = 230.0;
    let h = ROW * items.len().max(1) as f64 + 8.0;
    let max = items.iter().map(|i| i.1).max().unwrap_or(0).max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart {class}" role="img" aria-label="{t}" viewBox="0 0 {W} {h}" width="{W}" height="{h}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = esc(title)
    );
    for (i, (label, v)) in items.iter().enumerate() {
        let y = 4.0 + ROW * i as f64;
        let w = (*v as f64 / max * (W - LABEL_W - 60.0)).max(1.0);
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#333">{l}</text><rect class="bar" x="{LABEL_W}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="#d0504a"><title>{l}: {v}</title></rect><text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{v}</text>"##,
            LABEL_W - 6.0,
            y + 12.0,
            ROW - 4.0,
            LABEL_W + w + 4.0,
            y + 12.0,
            l = esc(label)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_escape_labels_and_draw_one_bar_per_value() {
        let labels = vec!["<a>".to_string(), "b".to_string()];
        let svg = columns("latency", "t&t", &labels, &[3, 0], Some(&[1, 0]));
        assert!(svg.contains("&lt;a&gt;") && !svg.contains("<a>"));
        assert!(svg.contains("t&amp;t"));
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 2);
        assert_eq!(svg.matches("class=\"bar error\"").count(), 1);
        let r = rows("codes", "c", &[("x\"y".into(), 2)]);
        assert!(r.contains("x&quot;y"));
        assert_eq!(esc("'"), "&#39;");
    }
}
