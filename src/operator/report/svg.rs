//! Inline SVG bar charts for the HTML report: pure functions from numbers and labels to
//! markup. No scripts, no external resources; every label is escaped.
//!
//! Invariant: the charts read at a glance without a browser's help — the y axis has at
//! least three labelled ticks, and no two labels overlap. Text is measured by an estimate
//! (`text_width`) on the wide side of common sans-serif fonts (DejaVu Sans, the widest
//! usual fallback); x labels are thinned to every k-th slot until the widest fits, and a
//! row label that does not fit its column is cut with `…` (the whole label in its
//! tooltip).

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

/// Width of `c` in ems, rounded up from DejaVu Sans (digits 0.64, `m` 0.97, `W` 1.01).
fn char_em(c: char) -> f64 {
    match c {
        ' ' | '.' | ',' | ':' | ';' | '|' | '\'' | '!' | 'i' | 'j' | 'l' | 'I' => 0.4,
        'm' | 'w' | 'M' | 'W' | '@' | '%' => 1.05,
        'A'..='Z' => 0.8,
        c if c.is_ascii() => 0.68,
        _ => 1.05,
    }
}

/// Estimated width (px) of `text` drawn at `size` px, never less than the usual fonts draw.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().map(char_em).sum::<f64>() * size
}

/// `text` cut (with `…`) to at most `max` px at `size` px.
fn fit(text: &str, size: f64, max: f64) -> String {
    if text_width(text, size) <= max {
        return text.to_string();
    }
    let mut out = String::new();
    let mut w = text_width("…", size);
    for c in text.chars() {
        w += char_em(c) * size;
        if w > max {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

const W: f64 = 560.0;
const H: f64 = 180.0;
const PAD_LEFT: f64 = 44.0;
const PAD_RIGHT: f64 = 6.0;
const PAD_BOTTOM: f64 = 34.0;
const PAD_TOP: f64 = 12.0;
/// Font sizes (px) of x labels and y ticks.
const X_FONT: f64 = 9.0;
const Y_FONT: f64 = 10.0;
/// The x labels' baseline below the x axis (px): their boxes clear the lowest y tick's.
const X_BASELINE: f64 = 16.0;
/// Least space (px) between two x labels.
const GAP: f64 = 6.0;

/// The y axis for counts up to `max`: (step, number of intervals), the step 1, 2 or 5
/// times a power of ten, at most 5 intervals and at least 2 (three ticks: 0, step, top).
pub fn y_axis(max: u64) -> (u64, u64) {
    let max = u128::from(max.max(1));
    let mut power: u128 = 1;
    loop {
        for m in [1, 2, 5] {
            let step = power * m;
            let n = max.div_ceil(step);
            if n <= 5 {
                let step = u64::try_from(step).unwrap_or(u64::MAX);
                return (step, u64::try_from(n.max(2)).unwrap_or(2));
            }
        }
        power *= 10;
    }
}

/// A tick value, short: `900`, `12k`, `1.5M`.
fn tick(v: u128) -> String {
    let short = |d: u128, unit: &str| match v % d {
        0 => format!("{}{unit}", v / d),
        r => format!("{}.{}{unit}", v / d, r * 10 / d),
    };
    match v {
        v if v >= 1_000_000_000 => short(1_000_000_000, "G"),
        v if v >= 1_000_000 => short(1_000_000, "M"),
        v if v >= 10_000 => short(1_000, "k"),
        v => v.to_string(),
    }
}

/// Which of `n` x labels of widths `widths` to draw, with the x (px) of each label's
/// centre, in slots of `slot` px starting at `origin`: every k-th label, k the least that
/// leaves `GAP` between the widest two; a label is moved inside `left..right` when it
/// would stick out, and dropped when it would then overlap the one before.
fn x_labels(
    widths: &[f64],
    origin: f64,
    (left, right): (f64, f64),
    slot: f64,
) -> Vec<(usize, f64)> {
    let widest = widths.iter().copied().fold(0.0, f64::max);
    let every = (((widest + GAP) / slot).ceil() as usize).max(1);
    let mut shown: Vec<(usize, f64)> = Vec::new();
    let mut end = f64::MIN;
    for (i, w) in widths.iter().enumerate().step_by(every) {
        let centre = origin + slot * (i as f64 + 0.5);
        let centre = centre.max(left + w / 2.0).min(right - w / 2.0);
        if centre - w / 2.0 < end + GAP {
            continue;
        }
        end = centre + w / 2.0;
        shown.push((i, centre));
    }
    shown
}

/// One series of vertical bars (`values[i]` over `labels[i]`), optionally with a second
/// series drawn over it (errors over calls). `class` names the chart for styling/tests;
/// axis labels are `text.tick.x` and `text.tick.y`.
pub fn columns(
    class: &str,
    title: &str,
    labels: &[String],
    values: &[u64],
    over: Option<&[u64]>,
) -> String {
    let (step, intervals) = y_axis(values.iter().copied().max().unwrap_or(0));
    let top = step as f64 * intervals as f64;
    let n = values.len().max(1) as f64;
    let right = W - PAD_RIGHT;
    let plot_w = right - PAD_LEFT;
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
    for k in 0..=intervals {
        let y = base - plot_h * k as f64 / intervals as f64;
        let colour = if k == 0 { "#888" } else { "#e4e4e4" };
        let _ = write!(
            s,
            r##"<line x1="{PAD_LEFT}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="{colour}"/><text class="tick y" x="{}" y="{:.1}" font-size="{Y_FONT}" text-anchor="end" fill="#555">{}</text>"##,
            PAD_LEFT - 4.0,
            y + Y_FONT * 0.35,
            tick(u128::from(step) * u128::from(k))
        );
    }
    for (i, v) in values.iter().enumerate() {
        let x = PAD_LEFT + slot * i as f64 + (slot - bar) / 2.0;
        let h = (*v as f64 / top * plot_h).max(if *v > 0 { 1.0 } else { 0.0 });
        let label = labels.get(i).map(String::as_str).unwrap_or("");
        let _ = write!(
            s,
            r##"<rect class="bar" x="{x:.1}" y="{:.1}" width="{bar:.1}" height="{h:.1}" fill="#4a7bd0"><title>{}: {v}</title></rect>"##,
            base - h,
            esc(label)
        );
        if let Some(e) = over.and_then(|o| o.get(i)).filter(|e| **e > 0) {
            let eh = (*e as f64 / top * plot_h).max(1.0);
            let _ = write!(
                s,
                r##"<rect class="bar error" x="{x:.1}" y="{:.1}" width="{bar:.1}" height="{eh:.1}" fill="#d0504a"><title>{} errors: {e}</title></rect>"##,
                base - eh,
                esc(label)
            );
        }
    }
    let texts: Vec<String> = (0..values.len())
        .map(|i| fit(labels.get(i).map_or("", String::as_str), X_FONT, W - 4.0))
        .collect();
    let widths: Vec<f64> = texts.iter().map(|t| text_width(t, X_FONT)).collect();
    // The x labels sit below the lowest y tick, so they may reach into the left margin.
    for (i, centre) in x_labels(&widths, PAD_LEFT, (2.0, W - 2.0), slot) {
        let _ = write!(
            s,
            r##"<text class="tick x" x="{centre:.1}" y="{:.1}" font-size="{X_FONT}" text-anchor="middle" fill="#555">{}</text>"##,
            base + X_BASELINE,
            esc(&texts[i])
        );
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars, one row per label (error codes, rejection reasons); a label wider
/// than its column is cut, whole in its tooltip.
pub fn rows(class: &str, title: &str, items: &[(String, u64)]) -> String {
    const ROW: f64 = 18.0;
    const LABEL_W: f64 = 230.0;
    const FONT: f64 = 11.0;
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
        let w = (*v as f64 / max * (W - LABEL_W - 70.0)).max(1.0);
        let _ = write!(
            s,
            r##"<text class="label" x="{:.1}" y="{:.1}" font-size="{FONT}" text-anchor="end" fill="#333">{}<title>{l}</title></text><rect class="bar" x="{LABEL_W}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="#d0504a"><title>{l}: {v}</title></rect><text class="value" x="{:.1}" y="{:.1}" font-size="{FONT}" fill="#333">{v}</text>"##,
            LABEL_W - 6.0,
            y + 12.0,
            esc(&fit(label, FONT, LABEL_W - 10.0)),
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

    #[test]
    fn the_y_axis_has_at_least_three_nice_ticks() {
        for (max, want) in [
            (0, (1, 2)),
            (1, (1, 2)),
            (3, (1, 3)),
            (6, (2, 3)),
            (7, (2, 4)),
            (11, (5, 3)),
            (48, (10, 5)),
            (51, (20, 3)),
            (u64::MAX, (5_000_000_000_000_000_000, 4)),
        ] {
            let (step, n) = y_axis(max);
            assert_eq!((step, n), want, "max {max}");
            assert!(u128::from(step) * u128::from(n) >= u128::from(max));
        }
        assert_eq!(tick(12_000), "12k");
        assert_eq!(tick(1_500_000), "1.5M");
        assert_eq!(tick(900), "900");
        let svg = columns("c", "t", &[], &[5], None);
        assert!(svg.matches("class=\"tick y\"").count() >= 3, "{svg}");
    }

    #[test]
    fn x_labels_are_thinned_until_the_widest_fits_and_stay_inside() {
        // 49 slots of ~10.4 px; "06:00:00" is ~44 px, 50 with the gap: every 5th label.
        let widths = vec![text_width("06:00:00", X_FONT); 49];
        let shown = x_labels(&widths, 44.0, (2.0, 554.0), 510.0 / 49.0);
        assert_eq!(shown.len(), 10, "{shown:?}");
        for pair in shown.windows(2) {
            assert!(pair[1].1 - pair[0].1 >= widths[0] + GAP, "{shown:?}");
        }
        for (_, c) in &shown {
            assert!(c - widths[0] / 2.0 >= 2.0 && c + widths[0] / 2.0 <= 554.0);
        }
        // Evenly spaced: the first label is not pushed into the second's place.
        for (k, (i, _)) in shown.iter().enumerate() {
            assert_eq!(*i, k * shown[1].0, "{shown:?}");
        }
        // One label wider than the plot: cut to fit, never past the axis.
        let long = fit(&"x".repeat(500), X_FONT, 510.0);
        assert!(long.ends_with('…') && text_width(&long, X_FONT) <= 510.0);
    }
}
