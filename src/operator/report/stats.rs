//! Small aggregates for the report: samples with nearest-rank percentiles, counters by
//! label, the fixed latency buckets the HTML histograms draw, and the bound on distinct
//! labels.
//!
//! Invariant: a missing observation is never a sample; an aggregate of no samples is
//! `null` (unknown), not zero. No map keyed by a label from the log holds more than
//! `MAX_KEYS` of them or a label longer than `MAX_LABEL_BYTES`: a crafted log of many
//! distinct names costs the report (and its page) no more than a few dozen rows.

use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Distinct labels one map keeps (tools, actions, builds, each counter), besides `OTHER`:
/// far more than
/// winx writes (a dozen tools, a few dozen error codes), few enough for a readable page.
pub const MAX_KEYS: usize = 64;
/// The row that counts every label past `MAX_KEYS` (parenthesised: no tool, code or
/// status is named so).
pub const OTHER: &str = "(other)";
/// Longest label kept, in bytes (cut at a character boundary, marked with `…`): winx's
/// names are short; a line may be up to 1 MiB.
pub const MAX_LABEL_BYTES: usize = 128;

/// The key `label` is counted under in `map`: itself (cut to `MAX_LABEL_BYTES`) when
/// present or when `map` has room, else `OTHER`.
pub fn key_in<'l, V>(map: &BTreeMap<String, V>, label: &'l str) -> Cow<'l, str> {
    let label = cut(label);
    if map.len() < MAX_KEYS || map.contains_key(label.as_ref()) {
        label
    } else {
        Cow::Borrowed(OTHER)
    }
}

/// `label`, at most `MAX_LABEL_BYTES` (with `…` when cut).
pub fn cut(label: &str) -> Cow<'_, str> {
    if label.len() <= MAX_LABEL_BYTES {
        return Cow::Borrowed(label);
    }
    let mut end = MAX_LABEL_BYTES;
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &label[..end]))
}

/// Upper bounds (ms) of the latency histogram buckets; the last bucket is open-ended.
pub const LATENCY_BUCKETS_MS: [f64; 12] = [
    0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0,
];

/// Observed values of one quantity.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    values: Vec<f64>,
}

impl Samples {
    pub fn add(&mut self, v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.values.push(v);
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Nearest-rank percentile of sorted values.
    fn rank(sorted: &[f64], p: f64) -> f64 {
        let n = sorted.len();
        let i = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        sorted[i]
    }

    /// `{samples, p50, p95, max}` (percentiles `null` without samples).
    pub fn summary(&self) -> Value {
        if self.values.is_empty() {
            return json!({"samples": 0, "p50": null, "p95": null, "max": null});
        }
        let mut s = self.values.clone();
        s.sort_by(f64::total_cmp);
        json!({
            "samples": s.len(),
            "p50": round3(Samples::rank(&s, 0.50)),
            "p95": round3(Samples::rank(&s, 0.95)),
            "max": round3(s[s.len() - 1]),
        })
    }

    /// `{samples, total, avg, max}` (for sizes).
    pub fn totals(&self) -> Value {
        if self.values.is_empty() {
            return json!({"samples": 0, "total": null, "avg": null, "max": null});
        }
        let total: f64 = self.values.iter().sum();
        let max = self.values.iter().copied().fold(f64::MIN, f64::max);
        json!({
            "samples": self.values.len(),
            "total": total,
            "avg": round3(total / self.values.len() as f64),
            "max": max,
        })
    }

    /// Counts per `LATENCY_BUCKETS_MS` bucket, plus the open-ended last one.
    pub fn histogram(&self) -> Vec<u64> {
        let mut counts = vec![0u64; LATENCY_BUCKETS_MS.len() + 1];
        for v in &self.values {
            let i = LATENCY_BUCKETS_MS
                .iter()
                .position(|b| v <= b)
                .unwrap_or(LATENCY_BUCKETS_MS.len());
            counts[i] += 1;
        }
        counts
    }
}

pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Counts by label, in label order.
#[derive(Clone, Debug, Default)]
pub struct Counter(BTreeMap<String, u64>);

impl Counter {
    /// Count `label` (past `MAX_KEYS` distinct labels, under `OTHER`).
    pub fn add(&mut self, label: &str) {
        let key = key_in(&self.0, label);
        match self.0.get_mut(key.as_ref()) {
            Some(n) => *n += 1,
            None => {
                self.0.insert(key.into_owned(), 1);
            }
        }
    }

    /// Count `label`, or `unknown` when it is missing.
    pub fn add_or_unknown(&mut self, label: Option<&str>) {
        self.add(label.unwrap_or("unknown"));
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn to_json(&self) -> Value {
        let map: Map<String, Value> = self.0.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_empty_is_unknown() {
        let mut s = Samples::default();
        assert_eq!(s.summary()["p50"], Value::Null);
        for v in 1..=100 {
            s.add(Some(v as f64));
        }
        s.add(None);
        s.add(Some(f64::NAN));
        let j = s.summary();
        assert_eq!(j["samples"], 100);
        assert_eq!(j["p50"], 50.0);
        assert_eq!(j["p95"], 95.0);
        assert_eq!(j["max"], 100.0);
        let h = s.histogram();
        assert_eq!(h.iter().sum::<u64>(), 100);
        assert_eq!(h[0], 0);
        assert_eq!(h[1], 1);
        let mut c = Counter::default();
        c.add_or_unknown(None);
        c.add("a");
        c.add("a");
        assert_eq!(c.to_json(), json!({"a": 2, "unknown": 1}));
    }

    #[test]
    fn distinct_labels_are_bounded_in_number_and_length() {
        let mut c = Counter::default();
        for i in 0..1000 {
            c.add(&format!("code-{i}"));
        }
        c.add("code-0");
        let j = c.to_json();
        let m = j.as_object().unwrap();
        // MAX_KEYS labels, then OTHER for every later one.
        assert_eq!(m.len(), MAX_KEYS + 1);
        assert_eq!(m["code-0"], 2);
        assert_eq!(m[OTHER], 1000 - MAX_KEYS as u64);
        assert_eq!(c.total(), 1001);
        let long = "é".repeat(100);
        let cut_label = cut(&long);
        assert!(cut_label.len() <= MAX_LABEL_BYTES + '…'.len_utf8());
        assert!(cut_label.ends_with('…'));
        assert_eq!(cut("short"), "short");
    }
}
