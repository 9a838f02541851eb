//! Shared by the bench programs (included with `#[path]`): latency samples, the report
//! table with its final JSON line, and process memory readings.

use serde_json::json;
use std::time::Duration;

/// VmRSS in MiB; `None` once the process is gone (or a zombie, which has no VmRSS).
pub fn vm_rss_mib(pid: i32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A process's memory in MiB, from `/proc/PID/smaps_rollup` (read by the benches that
/// start several processes; the others include this file too).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    /// Every resident page it maps, shared ones counted in full (`VmRSS`).
    pub rss: f64,
    /// Its proportional share: a page mapped by n processes counts 1/n (`Pss`).
    pub pss: f64,
    /// Pages only it maps (`Private_Clean` + `Private_Dirty`): what its exit frees.
    pub private: f64,
}

/// `None` once the process is gone.
#[allow(dead_code)]
pub fn memory_mib(pid: i32) -> Option<Memory> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = rollup.lines().find_map(|l| l.strip_prefix(name))?;
        let kib: f64 = line.split_whitespace().next()?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some(Memory {
        rss: field("Rss:")?,
        pss: field("Pss:")?,
        private: field("Private_Clean:")? + field("Private_Dirty:")?,
    })
}

/// Latency samples, sorted; percentiles by nearest rank, so every figure is a real sample.
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn new(mut v: Vec<Duration>) -> Samples {
        assert!(!v.is_empty(), "no samples");
        v.sort();
        Samples(v)
    }

    pub fn pct(&self, p: f64) -> f64 {
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1].as_secs_f64() * 1e3
    }
}

/// Figures in print order: (name, value, unit, target); `value <= target` passes.
pub struct Report {
    bench: &'static str,
    rows: Vec<(String, f64, &'static str, Option<f64>)>,
}

impl Report {
    pub fn new(bench: &'static str) -> Report {
        Report {
            bench,
            rows: Vec::new(),
        }
    }

    pub fn add(&mut self, name: &str, value: f64, unit: &'static str, target: Option<f64>) {
        self.rows.push((name.to_string(), value, unit, target));
    }

    /// `<name>.p50` (against `p50_target`), `.p99` and `.max`, in ms.
    pub fn latency(&mut self, name: &str, s: &Samples, p50_target: Option<f64>) {
        self.add(&format!("{name}.p50"), s.pct(50.0), "ms", p50_target);
        self.add(&format!("{name}.p99"), s.pct(99.0), "ms", None);
        self.add(&format!("{name}.max"), s.pct(100.0), "ms", None);
    }

    pub fn print(&self) {
        let rule = "-".repeat(62);
        let header = format!("{:<26} {:>14} {:>12}  result", "figure", "value", "target");
        println!("\n{header}\n{rule}");
        let (mut metrics, mut misses) = (serde_json::Map::new(), Vec::new());
        for (name, value, unit, target) in &self.rows {
            let pass = target.map(|t| *value <= t);
            // Counts and byte sizes are integers; times and MiB need the decimals.
            let digits = if matches!(*unit, "" | "B") { 0 } else { 3 };
            let value_s = format!("{value:.digits$} {unit}");
            let target_s = target.map_or("-".into(), |t| format!("<= {t} {unit}"));
            let result = pass.map_or("info", |p| if p { "PASS" } else { "MISS" });
            println!("{name:<26} {:>14} {target_s:>12}  {result}", value_s.trim());
            if pass == Some(false) {
                misses.push(name.clone());
            }
            let v = json!({"value": value, "unit": unit, "target": target, "pass": pass});
            metrics.insert(name.clone(), v);
        }
        let with_target = self.rows.iter().filter(|r| r.3.is_some()).count();
        let n = misses.len();
        println!("{rule}\n{with_target} figures with targets, {n} MISS");
        let all_pass = misses.is_empty();
        let line = json!({"bench": self.bench, "metrics": metrics, "misses": misses, "all_pass": all_pass});
        println!("{line}");
    }
}
