//! Command policy for session modes: a small hand-written bash tokenizer ([`parse()`]) that
//! finds every simple command of a command line, and the mode checks ([`check`]) run on it before
//! the line reaches the shell. Pure: no I/O, no file system, no environment.
//!
//! Invariant: anything the tokenizer cannot parse is denied. `check` never guesses: an unknown
//! construct, an unbalanced quote or a command name known only at run time is a denial in every
//! mode except `Wcgw`. Where unsure what is a command, the parser reports more commands, never
//! fewer: a wrapper (`sudo rm`) is reported together with the command it runs.

mod lex;
mod parse;
mod word;

pub use parse::*;

use std::path::{Component, Path};

/// Prefixes of variables whose assignment changes which program a checked name runs, or makes an
/// allowed program run another (`PATH=. ls`, `LD_PRELOAD=…`, `RUSTC_WRAPPER=rm cargo check`).
#[rustfmt::skip]
const DANGEROUS_VARS: &[&str] = &["PATH", "LD_", "BASH", "ENV", "IFS", "PROMPT_COMMAND", "GIT_",
    "PAGER", "EDITOR", "CARGO", "RUSTC"];
/// After these, a relative redirection target is no longer relative to the workspace.
const DIR_CHANGERS: &[&str] = &["cd", "pushd", "popd"];
/// Write targets that create or change no file.
const HARMLESS_TARGETS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr"];
/// Architect mode: read-only exploration commands (a wrapper passes only if what it wraps does).
#[rustfmt::skip]
const ARCHITECT_COMMANDS: &[&str] = &["ls", "cat", "head", "tail", "wc", "grep", "rg", "find",
    "file", "stat", "pwd", "cd", "echo", "printf", "which", "type", "tree", "du", "df", "git",
    "sort", "uniq", "cut", "tr", "awk", "sed", "true", "false", "test", "[", "env", "date", "uname",
    "whoami", "id", "basename", "dirname", "realpath", "readlink", "diff", "cmp", "jq", "cargo",
    "xargs", "time"];
/// Architect mode: arguments that make a read-only command write files or run programs (`-*x`: a
/// short-option cluster containing `x`; `p*`: a prefix; else exact). Listed commands also refuse
/// arguments known only at run time (`find . $X` may be `-delete`) or read from input by xargs.
#[rustfmt::skip]
const ARG_RULES: &[(&str, &[&str])] = &[
    ("find", &["-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint*", "-fls"]),
    ("sed", &["-*i", "--i*"]), ("sort", &["-*o", "--o*", "--compress*"]), ("date", &["-*s", "--s*"]),
    ("tree", &["-*o"]), ("rg", &["--pre*"]), ("awk", &["-*i", "--i*", "-*l", "--l*"]),
    ("git", &["--output*", "-O*", "--open-files*"]), ("cargo", &["--config*", "-Z*"])];
#[rustfmt::skip]
const GIT_READ_ONLY: &[&str] = &["status", "log", "show", "diff", "blame", "branch", "ls-files",
    "rev-parse", "grep"];
/// `git branch` options that only list; a plain word is a new branch unless `--list` is given.
#[rustfmt::skip]
const BRANCH_READ: &[&str] = &["-a", "-r", "-v", "-vv", "--all", "--remotes", "--list", "-l"];
const CARGO_READ_ONLY: &[&str] = &["check", "metadata", "tree", "--version", "-V", "help"];

/// The session mode a command line is checked against.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    Wcgw,
    Architect,
    CodeWriter {
        allowed_commands: &'a [String],
        allowed_globs: &'a [String],
        workspace: &'a Path,
    },
}

/// Why a command line may not run; `reason` is written for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: String,
    pub command: Option<String>,
}

/// Checks a command line against a session mode before it is sent to the shell.
pub fn check(src: &str, mode: &Mode) -> Result<(), Denial> {
    if let Mode::Wcgw = mode {
        return Ok(());
    }
    let script =
        parse(src).map_err(|e| deny(format!("cannot check this command line ({e})"), None))?;
    let is_cd = |c: &SimpleCommand| c.static_name().is_some_and(|n| DIR_CHANGERS.contains(&n));
    let changes_dir = script.commands.iter().any(is_cd);
    for cmd in &script.commands {
        match *mode {
            Mode::CodeWriter {
                allowed_commands,
                allowed_globs,
                workspace,
            } => {
                let policy = Writer {
                    allowed_commands,
                    allowed_globs,
                    workspace,
                    changes_dir,
                };
                policy.check(cmd)?;
            }
            _ => check_architect(cmd)?,
        }
    }
    Ok(())
}

/// The redirections of `cmd` that create or change a file.
fn file_writes(cmd: &SimpleCommand) -> impl Iterator<Item = &Redirect> {
    let harmless = |t: &Word| !t.dynamic && HARMLESS_TARGETS.contains(&t.text.as_str());
    cmd.redirects
        .iter()
        .filter(move |r| r.writes_file() && !harmless(&r.target))
}

fn check_architect(cmd: &SimpleCommand) -> Result<(), Denial> {
    let name = cmd.static_name();
    vet(cmd)?;
    if let Some(n) = name.filter(|n| !ARCHITECT_COMMANDS.contains(n)) {
        let reason = format!("command `{n}` is not allowed in architect mode (read-only)");
        return Err(deny(reason, name));
    }
    architect_args(cmd).map_err(|reason| deny(reason, name))?;
    match file_writes(cmd).next() {
        Some(r) => {
            let reason = format!(
                "architect mode is read-only: `{}{}` writes a file",
                r.op, r.target.text
            );
            Err(deny(reason, name))
        }
        None => Ok(()),
    }
}

/// Code-writer mode's allowlists, with whether the command line changes directory (then a
/// relative redirection target cannot be placed).
struct Writer<'a> {
    allowed_commands: &'a [String],
    allowed_globs: &'a [String],
    workspace: &'a Path,
    changes_dir: bool,
}

impl Writer<'_> {
    fn check(&self, cmd: &SimpleCommand) -> Result<(), Denial> {
        let (name, allowed, globs) = (cmd.static_name(), self.allowed_commands, self.allowed_globs);
        if !is_all(allowed) {
            vet(cmd)?;
            if let Some(n) = name.filter(|n| !allowed.iter().any(|a| a == n)) {
                let reason = format!(
                    "command `{n}` is not in allowed_commands ({})",
                    allowed.join(", ")
                );
                return Err(deny(reason, name));
            }
        }
        for t in file_writes(cmd)
            .map(|r| &r.target)
            .filter(|_| !is_all(globs))
        {
            let why = match () {
                _ if t.dynamic => "is only known at run time",
                _ if self.changes_dir && !t.text.starts_with('/') => {
                    "is relative, after a directory change"
                }
                _ if !path_in_globs(self.workspace, globs, &t.text) => "is outside allowed_globs",
                _ => continue,
            };
            let reason = format!(
                "redirection target `{}` {why} ({})",
                t.text,
                globs.join(", ")
            );
            return Err(deny(reason, name));
        }
        Ok(())
    }
}

fn deny(reason: String, command: Option<&str>) -> Denial {
    Denial {
        reason,
        command: command.map(str::to_owned),
    }
}

fn is_all(list: &[String]) -> bool {
    matches!(list, [one] if one == "all")
}

/// Denies what no restricted mode can check: risky assignments, run-time names, code strings.
fn vet(cmd: &SimpleCommand) -> Result<(), Denial> {
    let name = cmd.static_name();
    let risky = cmd
        .assignments
        .iter()
        .find(|v| DANGEROUS_VARS.iter().any(|d| v.starts_with(d)));
    let reason = match (&cmd.name, risky) {
        (_, Some(v)) => format!("setting `{v}` can change which program runs"),
        (Some(CommandName::Dynamic(t)), _) => {
            format!("command name `{t}` is only known at run time")
        }
        (Some(CommandName::Static(n)), _) if cmd.evaluates_code() => {
            format!("`{n}` runs a string as shell code")
        }
        _ => return Ok(()),
    };
    Err(deny(reason, name))
}

fn architect_args(cmd: &SimpleCommand) -> Result<(), String> {
    let Some(name) = cmd.static_name() else {
        return Ok(());
    };
    let args: Vec<&str> = cmd.args.iter().map(|a| a.text.as_str()).collect();
    if let Some(&(_, rules)) = ARG_RULES.iter().find(|(n, _)| *n == name) {
        if cmd.wrapped_by.as_deref() == Some("xargs") {
            return Err(format!(
                "`{name}` under xargs takes arguments from its input"
            ));
        } else if let Some(a) = cmd.args.iter().find(|a| a.dynamic) {
            return Err(format!(
                "argument `{}` of `{name}` is only known at run time",
                a.text
            ));
        } else if let Some(a) = args
            .iter()
            .find(|a| rules.iter().any(|r| option_matches(r, a)))
        {
            return Err(format!("`{name} {a}` can change files or run programs"));
        }
    }
    let mut positional = args.iter().filter(|a| !a.starts_with(['-', '+']));
    match (name, positional.next()) {
        ("git", _) => git_args(&args),
        ("cargo", Some(sub)) if !CARGO_READ_ONLY.contains(sub) => {
            Err(format!("`cargo {sub}` is not read-only"))
        }
        ("awk", _)
            if args
                .iter()
                .any(|a| a.contains("system") || a.replace("||", "").contains('|')) =>
        {
            Err("awk programs with `system` or pipes run commands".into())
        }
        _ => Ok(()),
    }
}

/// `-*x`: a short-option cluster containing `x`; `p*`: a prefix; anything else: exact.
fn option_matches(rule: &str, arg: &str) -> bool {
    match (rule.strip_prefix("-*"), rule.strip_suffix('*')) {
        (Some(c), _) => {
            arg.len() > 1 && arg.starts_with('-') && !arg.starts_with("--") && arg.contains(c)
        }
        (_, Some(prefix)) => arg.starts_with(prefix),
        _ => arg == rule,
    }
}

fn git_args(args: &[&str]) -> Result<(), String> {
    let skip = match args {
        ["-C", _, ..] => 2,
        [t, ..] if t.starts_with('-') => return Err(format!("git option `{t}` is not allowed")),
        _ => 0,
    };
    let Some((sub, rest)) = args[skip..].split_first() else {
        return Ok(());
    };
    let listing = rest.iter().any(|t| matches!(*t, "--list" | "-l"));
    let changes = |t: &&&str| !BRANCH_READ.contains(t) && (t.starts_with('-') || !listing);
    match rest.iter().find(changes).filter(|_| *sub == "branch") {
        _ if !GIT_READ_ONLY.contains(sub) => Err(format!("`git {sub}` is not read-only")),
        Some(t) => Err(format!(
            "`git branch {t}` can change branches; only listing is allowed"
        )),
        None => Ok(()),
    }
}

/// Whether `path` (absolute, or relative to `workspace`) matches one of `globs` (each
/// absolute or relative to `workspace`); `["all"]` matches everything. Shared by the shell
/// policy and the file tools so both enforce `allowed_globs` identically.
pub fn path_in_globs(workspace: &Path, globs: &[String], path: &str) -> bool {
    if is_all(globs) {
        return true;
    }
    let target = resolve(workspace, path);
    globs
        .iter()
        .any(|g| glob_match(resolve(workspace, g).as_bytes(), target.as_bytes()))
}

/// `p` as an absolute path (a relative one taken from `workspace`) with `.` and `..` resolved
/// lexically: the file system is never consulted, so symlinks are not followed.
fn resolve(workspace: &Path, p: &str) -> String {
    let (full, mut out) = (workspace.join(p), Vec::new());
    for c in full.components() {
        match c {
            Component::ParentDir => drop(out.pop()),
            Component::Normal(s) => out.push(s.to_string_lossy()),
            _ => {}
        }
    }
    format!("/{}", out.join("/"))
}

/// `**` matches across `/` (and `**/` also matches nothing); `*` and `?` stay within a segment.
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let one_segment = |i: usize| !s[..i].contains(&b'/');
    match (p, s.split_first()) {
        ([], _) => s.is_empty(),
        ([b'*', b'*', b'/', rest @ ..], _) if glob_match(rest, s) => true,
        ([b'*', b'*', rest @ ..], _) => (0..=s.len()).any(|i| glob_match(rest, &s[i..])),
        ([b'*', rest @ ..], _) => (0..=s.len())
            .take_while(|&i| one_segment(i))
            .any(|i| glob_match(rest, &s[i..])),
        ([c, rest @ ..], Some((h, tail))) => {
            (c == h || (*c == b'?' && *h != b'/')) && glob_match(rest, tail)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
