//! The report's accumulator: one pass over the selected lines builds every section.
//! Memory stays bounded by what the sections need: latency samples, the unmatched half of
//! each HTTP↔tool correlation, and calls started but not yet finished — each linear in the
//! log — and at most `stats::MAX_KEYS` tools, actions per tool and builds (the rest in
//! one `(other)` row each), so many distinct names cannot multiply the report's size.
//!
//! Invariant: no arithmetic on a time from the log can overflow (any `i64` is a valid
//! `ts_ms`, `i64::MIN` and `i64::MAX` included).

use super::audit::Audit;
use super::line::{Kind, Line};
use super::sections::{Execution, Initialize, Observations, Reads, Recovery, Workflows};
use super::stats::{Counter, LATENCY_BUCKETS_MS, Samples, key_in, round3};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Buckets of the calls-over-time series.
const TIMELINE_BUCKETS: i64 = 48;

#[derive(Default)]
struct Tool {
    calls: u64,
    latency: Samples,
    bytes: Samples,
    statuses: Counter,
    codes: Counter,
    actions: BTreeMap<String, (u64, Samples)>,
}

#[derive(Default)]
struct Build {
    events: u64,
    first: Option<i64>,
    last: Option<i64>,
}

#[derive(Default)]
struct Http {
    requests: u64,
    rejected: u64,
    statuses: Counter,
    reasons: Counter,
    rpc_methods: Counter,
    latency: Samples,
    /// Request id → duration of the half seen first (a `tool_call` over HTTP, or an
    /// `http_request`), waiting for the other half.
    tool_waiting: HashMap<String, Option<f64>>,
    http_waiting: HashMap<String, Option<f64>>,
    correlated: u64,
    overhead: Samples,
}

/// CodeMap calls by `source_kind` (`canonical`, `helper`) and their `payload_bytes`
/// (seed 000: the canonical root fields win over the legacy camelCase ones; a value of
/// the wrong type is unknown).
#[derive(Default)]
struct CodeMap {
    calls: u64,
    source_kinds: Counter,
    payload: Samples,
}

impl CodeMap {
    fn add(&mut self, l: &Line) {
        self.calls += 1;
        let kind = l.source_kind.str().or(l.source_kind_legacy.str());
        if kind.is_some() {
            self.source_kinds.add_or_unknown(kind);
        }
        let bytes = l.payload_bytes.u64().or(l.payload_bytes_legacy.u64());
        self.payload.add(bytes.map(|b| b as f64));
    }

    fn to_json(&self) -> Value {
        json!({
            "calls": self.calls,
            "sourceKinds": self.source_kinds.to_json(),
            "sourceKindUnknown": self.calls - self.source_kinds.total(),
            "payloadBytes": self.payload.totals(),
        })
    }
}

#[derive(Default)]
pub struct Agg {
    tool_calls: u64,
    tool_started: u64,
    tool_phases: u64,
    unknown_events: u64,
    /// `usage_call_id`s started and not (yet) finished.
    open_calls: HashSet<String>,
    tools: BTreeMap<String, Tool>,
    statuses: Counter,
    codes: Counter,
    outcomes: Counter,
    error_results: u64,
    http: Http,
    initialize: Initialize,
    recovery: Recovery,
    execution: Execution,
    reads: Reads,
    observations: Observations,
    workflows: Workflows,
    codemap: CodeMap,
    builds: BTreeMap<String, Build>,
    audit: Audit,
    /// (time, is an error) of every tool call with a known time.
    times: Vec<(i64, bool)>,
}

impl Agg {
    pub fn add(&mut self, kind: Kind, l: &Line) {
        let ts = l.ts_ms.i64();
        if !kind.auxiliary() {
            let b = entry(&mut self.builds, l.build.str().unwrap_or("unknown"));
            b.events += 1;
            b.first = match (b.first, ts) {
                (Some(f), Some(t)) => Some(f.min(t)),
                (f, t) => f.or(t),
            };
            b.last = b.last.max(ts);
        }
        match kind {
            Kind::ToolCall => self.tool_call(l, ts),
            Kind::ToolStarted => {
                self.tool_started += 1;
                if let Some(id) = l.usage_call_id.str() {
                    self.open_calls.insert(id.to_string());
                }
            }
            Kind::ToolPhase => self.tool_phases += 1,
            Kind::HttpRequest => self.http_request(l),
            Kind::HttpRejected => {
                self.http.rejected += 1;
                self.http.reasons.add_or_unknown(l.reason.str());
                match l.status.u64() {
                    Some(s) => self.http.statuses.add(&s.to_string()),
                    None => self.http.statuses.add("unknown"),
                }
            }
            Kind::Unknown => self.unknown_events += 1,
        }
    }

    fn tool_call(&mut self, l: &Line, ts: Option<i64>) {
        self.tool_calls += 1;
        if let Some(id) = l.usage_call_id.str() {
            self.open_calls.remove(id);
        }
        let name = l.tool.str().unwrap_or("unknown");
        let t = entry(&mut self.tools, name);
        let duration = l.duration_ms.f64();
        t.calls += 1;
        t.latency.add(duration);
        t.bytes.add(l.response_bytes.f64());
        t.statuses.add_or_unknown(l.status.str());
        let code = l.code.str();
        if let Some(c) = code {
            t.codes.add(c);
            self.codes.add(c);
            self.error_results += 1;
        }
        let action = l.action.str().unwrap_or("none");
        let a = entry(&mut t.actions, action);
        a.0 += 1;
        a.1.add(duration);
        self.statuses.add_or_unknown(l.status.str());
        self.outcomes.add_or_unknown(l.outcome.str());
        if let Some(ts) = ts {
            self.times.push((ts, code.is_some()));
        }
        match name {
            "Initialize" => self.initialize.add(l),
            "BashCommand" => self.execution.add(l),
            "ReadFiles" => self.reads.add(l),
            "CodeMap" => self.codemap.add(l),
            _ => {}
        }
        if name == "Execution" && l.action.str() == Some("observe") {
            self.observations.add(l);
        }
        self.recovery.add(l);
        self.workflows.add(l);
        self.audit.call(l);
        if l.transport.str() == Some("http")
            && let Some(id) = l.request_id.str()
        {
            let http = &mut self.http;
            match http.http_waiting.remove(id) {
                Some(h) => http.correlate(h, duration),
                None => {
                    http.tool_waiting.insert(id.to_string(), duration);
                }
            }
        }
    }

    fn http_request(&mut self, l: &Line) {
        let http = &mut self.http;
        http.requests += 1;
        let duration = l.duration_ms.f64();
        http.latency.add(duration);
        match l.status.u64() {
            Some(s) => http.statuses.add(&s.to_string()),
            None => http.statuses.add("unknown"),
        }
        http.rpc_methods.add_or_unknown(l.rpc_method.str());
        if let Some(id) = l.request_id.str() {
            match http.tool_waiting.remove(id) {
                Some(t) => http.correlate(duration, t),
                None => {
                    http.http_waiting.insert(id.to_string(), duration);
                }
            }
        }
    }

    /// Every section, as the report's JSON.
    pub fn to_json(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|(name, t)| {
                let actions: Vec<Value> = t
                    .actions
                    .iter()
                    .map(|(a, (n, s))| json!({"action": a, "calls": n, "latencyMs": s.summary()}))
                    .collect();
                json!({
                    "tool": name,
                    "calls": t.calls,
                    "latencyMs": t.latency.summary(),
                    "latencyHistogram": t.latency.histogram(),
                    "responseBytes": t.bytes.totals(),
                    "statuses": t.statuses.to_json(),
                    "errorCodes": t.codes.to_json(),
                    "actions": actions,
                })
            })
            .collect();
        let builds: Vec<Value> = self
            .builds
            .iter()
            .map(|(b, x)| json!({"build": b, "events": x.events, "firstTsMs": x.first, "lastTsMs": x.last}))
            .collect();
        json!({
            "counts": {
                "toolCalls": self.tool_calls,
                "toolStarted": self.tool_started,
                "toolPhases": self.tool_phases,
                "httpRequests": self.http.requests,
                "httpRejected": self.http.rejected,
                "unknownEvents": self.unknown_events,
                "startedWithoutTerminal": self.open_calls.len(),
            },
            "latencyBucketsMs": LATENCY_BUCKETS_MS,
            "tools": tools,
            "statuses": self.statuses.to_json(),
            "errorCodes": self.codes.to_json(),
            "errorResults": self.error_results,
            "outcomes": self.outcomes.to_json(),
            "http": self.http.to_json(),
            "initialize": self.initialize.to_json(),
            "recovery": self.recovery.to_json(),
            "execution": self.execution.to_json(),
            "workflows": self.workflows.to_json(),
            "reads": self.reads.to_json(),
            "observations": self.observations.to_json(),
            "codeMap": self.codemap.to_json(),
            "builds": builds,
            "timeline": self.timeline(),
            "trace_audit": self.audit.to_json(),
        })
    }

    /// Tool calls (and errors) per time bucket, over the span of the calls seen.
    fn timeline(&self) -> Value {
        let (Some(first), Some(last)) = (
            self.times.iter().map(|t| t.0).min(),
            self.times.iter().map(|t| t.0).max(),
        ) else {
            return json!({"startMs": null, "bucketMs": null, "calls": [], "errors": []});
        };
        let (bucket, n) = buckets(first, last);
        let (mut calls, mut errors) = (vec![0u64; n], vec![0u64; n]);
        for (t, err) in &self.times {
            let i = ((i128::from(*t) - i128::from(first)) / i128::from(bucket)) as usize;
            let i = i.min(n - 1);
            calls[i] += 1;
            errors[i] += u64::from(*err);
        }
        json!({"startMs": first, "bucketMs": bucket, "calls": calls, "errors": errors})
    }
}

/// The timeline's bucket (ms) and number of buckets for times `first..=last`: whole
/// seconds per bucket, at least one, so the span fits in `TIMELINE_BUCKETS` (+1) bars.
/// Computed in `i128`: the span of two `i64` times is not always an `i64`.
fn buckets(first: i64, last: i64) -> (i64, usize) {
    let span = i128::from(last) - i128::from(first);
    let bucket = (span / i128::from(TIMELINE_BUCKETS) / 1000 + 1) * 1000;
    let n = span / bucket + 1;
    // The widest span (2^64 ms) makes a bucket of about 3.8e17 ms: an `i64`.
    (i64::try_from(bucket).unwrap_or(i64::MAX), n as usize)
}

/// `map[key]` (the key cut and bounded by `stats::key_in`), inserted as default when
/// missing, without allocating for a present key (most lines repeat a handful of tools,
/// actions and builds).
fn entry<'m, V: Default>(map: &'m mut BTreeMap<String, V>, key: &str) -> &'m mut V {
    let key = key_in(map, key);
    if !map.contains_key(key.as_ref()) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key.as_ref()).expect("inserted above")
}

impl Http {
    fn correlate(&mut self, http_ms: Option<f64>, tool_ms: Option<f64>) {
        self.correlated += 1;
        if let (Some(h), Some(t)) = (http_ms, tool_ms) {
            self.overhead.add(Some(round3((h - t).max(0.0))));
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "requests": self.requests,
            "rejected": self.rejected,
            "statuses": self.statuses.to_json(),
            "rejectedByReason": self.reasons.to_json(),
            "rpcMethods": self.rpc_methods.to_json(),
            "latencyMs": self.latency.summary(),
            "correlatedToolCalls": self.correlated,
            "httpToolCallsWithoutRequest": self.tool_waiting.len(),
            "requestsWithoutToolCall": self.http_waiting.len(),
            "adapterOverheadMs": self.overhead.summary(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_any_span_of_i64_times() {
        for (first, last) in [
            (0, 0),
            (i64::MIN, i64::MAX),
            (i64::MIN, 0),
            (0, i64::MAX),
            (i64::MAX, i64::MAX),
            (1_700_000_000_000, 1_700_000_047_999),
        ] {
            let (bucket, n) = buckets(first, last);
            assert!(bucket >= 1000 && n >= 1, "{first}..{last}");
            assert!(n <= TIMELINE_BUCKETS as usize + 1, "{first}..{last}: {n}");
            let span = i128::from(last) - i128::from(first);
            assert!(span < i128::from(bucket) * n as i128, "{first}..{last}");
        }
    }
}
