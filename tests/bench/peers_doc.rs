//! For `tests/bench/peers.rs` (included with `#[path]`): one program's results, the report
//! lines, and the generated `docs/benchmarks.md` with its hand-written SVG chart.

use super::report::{Report, Samples};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Samples and how many there were (programs that answer slowly get fewer).
pub struct Measured {
    s: Samples,
    n: usize,
}

impl Measured {
    pub fn new(s: Samples, n: usize) -> Measured {
        Measured { s, n }
    }
    pub fn p50(&self) -> f64 {
        self.s.pct(50.0)
    }
    pub fn p99(&self) -> f64 {
        self.s.pct(99.0)
    }
}

/// `None`: not applicable to the program; `Some(Err)`: the program failed it.
pub type Fig = Option<Result<Measured, String>>;

/// One program's results.
pub struct Row {
    pub key: &'static str,
    pub label: &'static str,
    pub version: String,
    /// Why the program did not run at all ("not installed …").
    pub missing: Option<String>,
    /// A failure outside the workloads (start, tools/list).
    pub failure: Option<String>,
    pub spawn: Fig,
    pub echo: Fig,
    pub init: Fig,
    pub read: Fig,
    pub edit: Fig,
    pub read_bytes: Option<usize>,
    /// Edits that were refused until the file was read again.
    pub edit_reads: usize,
    pub list_bytes: Option<usize>,
    pub list_tools: usize,
    /// Peak resident set (VmHWM, MiB) of every process of the program, by name.
    pub hwm: Vec<(String, f64)>,
}

impl Row {
    pub fn new(key: &'static str, label: &'static str) -> Row {
        Row {
            key,
            label,
            version: String::new(),
            missing: None,
            failure: None,
            spawn: None,
            echo: None,
            init: None,
            read: None,
            edit: None,
            read_bytes: None,
            edit_reads: 0,
            list_bytes: None,
            list_tools: 0,
            hwm: Vec::new(),
        }
    }

    fn figs(&self) -> [(&'static str, &Fig); 5] {
        [
            ("spawn", &self.spawn),
            ("echo", &self.echo),
            ("init", &self.init),
            ("read", &self.read),
            ("edit", &self.edit),
        ]
    }

    /// This repository's programs (the others are peers and the floor).
    pub fn ours(&self) -> bool {
        matches!(self.key, "winx-daemon" | "winx-embedded")
    }

    fn ok(f: &Fig) -> Option<&Measured> {
        f.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// Echo p50 and p99, when the program ran it.
    pub fn echo_p50_p99(&self) -> Option<(f64, f64)> {
        Row::ok(&self.echo).map(|m| (m.p50(), m.p99()))
    }

    pub fn rss(&self) -> Option<f64> {
        (!self.hwm.is_empty()).then(|| self.hwm.iter().map(|(_, m)| m).sum())
    }

    pub fn report(&self, r: &mut Report) {
        if let Some(why) = &self.missing {
            eprintln!("{}: {why}", self.label);
            return;
        }
        for (name, fig) in self.figs() {
            match fig {
                Some(Ok(_)) if name == "echo" => {}
                Some(Ok(m)) => r.add(&format!("{}.{name}.p50", self.key), m.p50(), "ms", None),
                Some(Err(e)) => eprintln!("{} {name}: FAILED: {e}", self.label),
                None => {}
            }
        }
        if let Some(m) = Row::ok(&self.echo) {
            r.latency(&format!("{}.echo", self.key), &m.s, None);
        }
        if let Some(rss) = self.rss() {
            r.add(&format!("{}.peak_rss", self.key), rss, "MiB", None);
        }
        if let Some(b) = self.list_bytes {
            r.add(&format!("{}.tools_list", self.key), b as f64, "B", None);
        }
        if let Some(e) = &self.failure {
            eprintln!("{}: FAILED: {e}", self.label);
        }
    }
}

fn find<'a>(rows: &'a [Row], key: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.key == key && r.missing.is_none())
}

/// Echo p50 of every program over the raw PTY's and over winx (daemon)'s.
pub fn ratios(rows: &[Row], r: &mut Report) {
    let p50 = |key: &str| {
        find(rows, key)
            .and_then(|row| Row::ok(&row.echo))
            .map(Measured::p50)
    };
    for row in rows {
        let Some(echo) = Row::ok(&row.echo).map(Measured::p50) else {
            continue;
        };
        if let Some(raw) = p50("bash-raw-pty") {
            r.add(&format!("{}.echo.vs_raw", row.key), echo / raw, "x", None);
        }
        if let Some(winx) = p50("winx-daemon") {
            r.add(&format!("{}.echo.vs_winx", row.key), echo / winx, "x", None);
        }
    }
}

/// A duration in ms, with the unit that reads best.
fn ms(v: f64) -> String {
    match v {
        v if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        v if v >= 100.0 => format!("{v:.0} ms"),
        v if v >= 10.0 => format!("{v:.1} ms"),
        v if v >= 1.0 => format!("{v:.2} ms"),
        v => format!("{v:.3} ms"),
    }
}

fn ratio(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}×")
    } else {
        format!("{v:.2}×")
    }
}

/// A table cell: the median, "n/a", or "failed".
fn cell(f: &Fig) -> String {
    match f {
        None => "n/a".into(),
        Some(Ok(m)) => ms(m.p50()),
        Some(Err(_)) => "failed¹".into(),
    }
}

/// First line of a command's output, or "?".
fn output(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output();
    let out = out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    out.ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "?".into())
}

/// The value after `key:` in a /proc file of `key: value` lines.
fn proc_field(file: &str, key: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let line = text.lines().find(|l| l.starts_with(key));
    let value = line.and_then(|l| l.split_once(':')).map(|(_, v)| v.trim());
    value.unwrap_or("?").to_string()
}

/// The machine, the date and the winx revision, as markdown list lines.
fn machine(repo: &Path) -> (String, String, String) {
    let cpu = proc_field("/proc/cpuinfo", "model name");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let ram_kib: f64 = (proc_field("/proc/meminfo", "MemTotal").split_whitespace())
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let facts = format!(
        "- CPU: {cpu}, {cores} cores\n- Kernel: Linux {}\n- RAM: {:.1} GiB\n\
         - Load average when the report was written (1, 5, 15 min): {load}\n",
        kernel.trim(),
        ram_kib / 1024.0 / 1024.0
    );
    let date = output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let repo_s = repo.to_string_lossy();
    let rev = output("git", &["-C", &repo_s, "rev-parse", "--short=12", "HEAD"]);
    let dirty = Command::new("git")
        .args([
            "-C",
            &repo_s,
            "status",
            "--porcelain",
            "--untracked-files=no",
        ])
        .output()
        .is_ok_and(|o| !o.stdout.is_empty());
    let rev = if dirty {
        format!("{rev} (uncommitted changes)")
    } else {
        rev
    };
    (facts, date, rev)
}

/// How each program was started and driven (facts; see the module docs of peers.rs).
const DRIVEN: &str = "\
- **winx** (this repository): `winx-code-agent` serving MCP on stdio. *daemon* is the \
default runtime (the adapter starts `winxd`, which forks one `winx-guardian` per session \
to own the shell); *embedded* is `WINX_RUNTIME=embedded` (the shell lives in the \
adapter). Arguments: `Initialize {type: first_call, workspace_root}`, then `thread_id` \
and `workspace_root` on every call; `BashCommand {action_json: {command}}`; \
`ReadFiles {file_paths}`; `FileWriteOrEdit {file_path, text_or_search_replace_blocks}`; \
the repeated Initialize is `type: status`. Every answer must carry `status: completed`.
- **winx 0.2.358**: the last release of the original winx-code-agent, built from crates.io \
with `cargo install --locked`; the same two runtimes, selected the same way. Arguments in \
wcgw's shape (`any_workspace_path`, `mode_name`, `thread_id`), `BashCommand \
{action_json: {type: command, command}, thread_id}`, `FileWriteOrEdit` with \
`percentage_to_change: 1`; the repeated Initialize is its read-only `type: status`.
- **wcgw**: the PyPI package in a virtualenv, its `wcgw_mcp` entry point (stdio is its \
default transport). Flat `BashCommand {type: command, command, thread_id}`; the \
`thread_id` is read from the Initialize text. wcgw has no read-only Initialize: every type \
restarts the shell, so the repeated Initialize is `user_asked_mode_change` to the mode it \
is already in. wcgw prefers GNU screen when it is installed; this machine has none, so it \
runs its shell directly (its own fallback).
- **bash, raw PTY**: bash on a PTY driven directly by the bench (no echo, a \
`PROMPT_COMMAND` printing a marker, as in `make bench`'s shell bench): the floor under \
every shell round trip. Its start is fork/exec until the first prompt.
";

const DEFINITIONS: &str = "\
- **spawn → first answer**: from the process start until the answer to the first \
`tools/call Initialize` (`first_call`) has been read, the MCP `initialize` handshake \
included; every process of the previous start (daemons, guardians, shells) is killed \
first, so each start is cold (state and page cache stay warm). One unmeasured start first.
- **echo**: `BashCommand` `echo hello`, from the request's write to its answer line, \
after warm-up calls; the answer must contain the line `hello`.
- **Initialize again**: a repeated Initialize on the live session (see below).
- **ReadFiles 10k**: one `ReadFiles` of a 10,000-line, 500 KB file (each program cuts it \
to its own output budget; the answer size is given).
- **edit**: `FileWriteOrEdit` with one SEARCH/REPLACE block on a 1,000-line file, checked \
on disk after every call (the file is read first, untimed). winx commits durably (fsync), so \
this column follows the shared disk: the same binary has measured 1.4 ms in one run and 12 ms \
in the next.
- **peak RSS**: the sum of the peak resident sets (VmHWM) of the server and every process \
it started (daemons, guardians, shells), read at the end of the run: an upper bound of \
what the program held at once. Each process counts every page it maps in full, shared ones \
too: winx's adapter, winxd and guardians are one binary, whose code pages this counts once \
per process. `make bench` reports what each winx process and each added session really \
costs (proportional and private memory, from `/proc/PID/smaps_rollup`); the README quotes it.
- **tools/list**: the size of the `tools/list` answer line, what every agent pays in its \
context window.
";

pub fn write(rows: &[Row], docs: &Path) {
    let repo = docs.parent().expect("docs is in the repository");
    let (facts, date, rev) = machine(repo);
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "# Benchmarks: winx next to its peers\n");
    let _ = writeln!(
        w,
        "Generated by `make bench-peers` (tests/bench/peers.rs) on {date}; every figure is from \
         that one run on the machine below. Medians unless marked; the machine is shared and \
         noisy, so read the ratios rather than the third digit. Regenerate with \
         `make bench-peers`.\n"
    );
    let _ = writeln!(w, "## Machine\n\n{facts}");
    let _ = writeln!(w, "## Versions\n\n| program | version |\n| --- | --- |");
    for row in rows {
        let v = match &row.missing {
            Some(why) => why.clone(),
            None if row.ours() => format!("{} (git {rev})", row.version),
            None => row.version.clone(),
        };
        let _ = writeln!(w, "| {} | {v} |", row.label);
    }
    let _ = writeln!(
        w,
        "\n## Results\n\n![echo round trip per program](benchmarks.svg)\n"
    );
    let _ = writeln!(
        w,
        "| program | spawn → first answer | echo p50 | echo p99 | Initialize again | \
         ReadFiles 10k (answer) | edit | peak RSS | tools/list |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for row in rows {
        if row.missing.is_some() {
            let _ = writeln!(w, "| {} | not installed |||||||| ", row.label);
            continue;
        }
        let p99 = Row::ok(&row.echo).map_or("n/a".into(), |m| ms(m.p99()));
        let read = match (cell(&row.read), row.read_bytes) {
            (c, Some(b)) => format!("{c} ({:.0} KB)", b as f64 / 1000.0),
            (c, None) => c,
        };
        let rss = row.rss().map_or("n/a".into(), |m| format!("{m:.1} MiB"));
        let list = row.list_bytes.map_or("n/a".into(), |b| {
            format!("{:.1} KB, {} tools", b as f64 / 1000.0, row.list_tools)
        });
        let _ = writeln!(
            w,
            "| {} | {} | {} | {p99} | {} | {read} | {} | {rss} | {list} |",
            row.label,
            cell(&row.spawn),
            cell(&row.echo),
            cell(&row.init),
            cell(&row.edit)
        );
    }
    ratio_table(w, rows);
    let _ = writeln!(w, "\n### Samples and processes\n");
    for row in rows.iter().filter(|r| r.missing.is_none()) {
        let counts: Vec<String> = (row.figs().iter())
            .filter_map(|(name, f)| Some(format!("{name} {}", Row::ok(f)?.n)))
            .collect();
        let procs: Vec<String> = (row.hwm.iter())
            .map(|(name, m)| format!("{name} {m:.1}"))
            .collect();
        let _ = writeln!(
            w,
            "- {}: samples: {}; peak RSS (MiB): {}{}",
            row.label,
            counts.join(", "),
            procs.join(" + "),
            match row.edit_reads {
                0 => String::new(),
                n => format!("; {n} edits refused until the file was read again"),
            }
        );
    }
    let failures = failures(rows);
    if !failures.is_empty() {
        let _ = writeln!(w, "\n¹ Failures in this run:\n\n{failures}");
    }
    let _ = writeln!(w, "\n## What each figure is\n\n{DEFINITIONS}");
    let _ = writeln!(w, "## How each program is driven\n\n{DRIVEN}");
    std::fs::write(docs.join("benchmarks.md"), md).expect("write docs/benchmarks.md");
    let svg = super::peers_svg::chart(rows, &date);
    std::fs::write(docs.join("benchmarks.svg"), svg).expect("write docs/benchmarks.svg");
    readme_headline(&repo.join("README.md"), rows, &date);
}

/// Between README's two markers, the headline figures of this run (nothing is written
/// without both markers).
const BEGIN: &str = "<!-- bench-peers:begin";
const END: &str = "<!-- bench-peers:end -->";

fn readme_headline(readme: &Path, rows: &[Row], date: &str) {
    let Ok(text) = std::fs::read_to_string(readme) else {
        return;
    };
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        return;
    };
    let Some(b) = text[b..].find('\n').map(|n| b + n + 1).filter(|&b| b <= e) else {
        return;
    };
    let body = headline(rows, date);
    let text = format!("{}{body}{}", &text[..b], &text[e..]);
    std::fs::write(readme, text).expect("write README.md");
}

/// Medians of echo, start and peak RSS, each peer as a multiple of winx (daemon).
fn headline(rows: &[Row], date: &str) -> String {
    let Some(winx) = find(rows, "winx-daemon") else {
        return String::new();
    };
    let peers = rows.iter().filter(|r| !r.ours() && r.missing.is_none());
    let peers: Vec<&Row> = peers.filter(|r| r.key != "bash-raw-pty").collect();
    let median = |f: &Fig| Row::ok(f).map(Measured::p50);
    let vs = |a: Option<f64>, b: Option<f64>, show: &dyn Fn(f64) -> String| match (a, b) {
        (Some(a), Some(b)) => format!("{} ({}× winx)", show(a), ratio_plain(a / b)),
        (Some(a), None) => show(a),
        _ => "failed".into(),
    };
    let line = |what: &str,
                ours: String,
                get: &dyn Fn(&Row) -> Option<f64>,
                show: &dyn Fn(f64) -> String| {
        let others =
            (peers.iter()).map(|p| format!("; {} {}", p.label, vs(get(p), get(winx), show)));
        format!(
            "- {what}: winx (daemon) {ours}{}.\n",
            others.collect::<String>()
        )
    };
    let echo = |r: &Row| median(&r.echo);
    let raw = find(rows, "bash-raw-pty").and_then(echo);
    let ours = match (echo(winx), raw) {
        (Some(w), Some(raw)) => format!(
            "{} ({}× the raw PTY round trip of bash, {})",
            ms(w),
            ratio_plain(w / raw),
            ms(raw)
        ),
        (w, _) => w.map_or("failed".into(), ms),
    };
    let mut out = format!(
        "Last run: {date}, on a shared 2-core machine ([docs/benchmarks.md]\
         (docs/benchmarks.md) has the details).\n\n"
    );
    out += &line("`echo hello` round trip, median", ours, &echo, &ms);
    let spawn = |r: &Row| median(&r.spawn);
    let ours = spawn(winx).map_or("failed".into(), ms);
    out += &line("spawn → first answer", ours, &spawn, &ms);
    let mib = |m: f64| format!("{m:.0} MiB");
    let ours = winx.rss().map_or("n/a".into(), mib);
    out += &line(
        "peak RSS of all its processes",
        ours,
        &|r: &Row| r.rss(),
        &mib,
    );
    out
}

/// A multiple for prose: "12", "1,403", "0.72".
fn ratio_plain(v: f64) -> String {
    if v < 10.0 {
        return format!("{v:.2}");
    }
    let n = v.round() as u64;
    match n {
        n if n >= 1000 => format!("{},{:03}", n / 1000, n % 1000),
        n => n.to_string(),
    }
}

/// Medians over the reference's: raw PTY for echo and start, winx (daemon) for all.
fn ratio_table(w: &mut String, rows: &[Row]) {
    let Some(winx) = find(rows, "winx-daemon") else {
        return;
    };
    let raw = find(rows, "bash-raw-pty");
    let _ = writeln!(
        w,
        "\nRatios of medians (how many times the reference's time; below 1 is faster):\n\n\
         | program | echo vs raw PTY | echo vs winx (daemon) | spawn vs winx | \
         Initialize vs winx | ReadFiles vs winx | edit vs winx | peak RSS vs winx |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let over = |a: &Fig, b: &Fig| match (Row::ok(a), Row::ok(b)) {
        (Some(a), Some(b)) => ratio(a.p50() / b.p50()),
        _ => "n/a".into(),
    };
    for row in rows.iter().filter(|r| r.missing.is_none()) {
        let vs_raw = raw.map_or("n/a".into(), |raw| over(&row.echo, &raw.echo));
        let rss = match (row.rss(), winx.rss()) {
            (Some(a), Some(b)) => ratio(a / b),
            _ => "n/a".into(),
        };
        let _ = writeln!(
            w,
            "| {} | {vs_raw} | {} | {} | {} | {} | {} | {rss} |",
            row.label,
            over(&row.echo, &winx.echo),
            over(&row.spawn, &winx.spawn),
            over(&row.init, &winx.init),
            over(&row.read, &winx.read),
            over(&row.edit, &winx.edit),
        );
    }
}

/// Every error of the run, one markdown list line each.
fn failures(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        if let Some(e) = &row.failure {
            let _ = writeln!(out, "- {}: {}", row.label, one_line(e));
        }
        for (name, f) in row.figs() {
            if let Some(Err(e)) = f {
                let _ = writeln!(out, "- {} {name}: {}", row.label, one_line(e));
            }
        }
    }
    out
}

fn one_line(s: &str) -> String {
    let s: String = s.chars().take(300).collect();
    s.replace(['\n', '|'], " ")
}
