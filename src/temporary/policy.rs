//! `temporary_artifact_policy`: statically visible shell writes that bypass the managed
//! directory, judged with the mode policy's tokenizer (`shell::cmdpolicy::parse`).
//!
//! The rule, exactly. A **write target** is: the file of a redirection that opens one for
//! writing (`>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `>&file`, any fd); every file operand of
//! `tee` and `touch`; the destination of `cp`, `mv` and `install` (`-t DIR`,
//! `--target-directory=DIR`, else the last operand; into an existing directory the target
//! is `DIR/<source name>`). Only literal targets are judged: one with an expansion
//! (`$WINX_TEMP_DIR/x`, `"$OUT"`), a glob or a tilde is known only at run time, and a
//! relative one after `cd`/`pushd`/`popd` on the same line cannot be placed. A line the
//! tokenizer cannot parse is not judged (the mode policy decides about it). A target is
//! **refused** when, resolved lexically against the shell's cwd:
//!
//! 1. it lies outside the workspace in a system temporary directory: `/tmp`, `/var/tmp`,
//!    `/dev/shm` or below; or
//! 2. it is a new file (nothing by that name exists yet) directly in the workspace root
//!    whose name is a scratch name: `.winx-*` / `.winx_tmp*` (seed 003 forbids them by
//!    name), a stem (the name up to its first `.`, lowercase) of `tmp`, `temp`, `scratch`,
//!    `debug`, `out` or `output`, or starting with `tmp_`, `temp_`, `scratch_`, `debug_`;
//!    or an extension `.tmp`, `.temp`, `.log` or `.out`.
//!
//! Never refused: writes to files that exist (`sed -i`, `>> CHANGELOG.md`, rewriting a
//! tracked `build.log`), anything in subdirectories of the project, `/dev/null` and the
//! other `/dev` files, and every other path outside the workspace (`~/.cargo`, `/etc`…).

use crate::shell::cmdpolicy::{self, SimpleCommand, Word};
use std::path::{Component, Path, PathBuf};

/// System temporary directories that helpers must not go to.
const SYSTEM_TEMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];
const SCRATCH_STEMS: &[&str] = &["tmp", "temp", "scratch", "debug", "out", "output"];
const SCRATCH_PREFIXES: &[&str] = &["tmp_", "temp_", "scratch_", "debug_", "tmp-", "temp-"];
const SCRATCH_EXTENSIONS: &[&str] = &["tmp", "temp", "log", "out"];
const DIR_CHANGERS: &[&str] = &["cd", "pushd", "popd"];
/// Commands that only inspect or remove: what an agent needs to get back under budget.
#[rustfmt::skip]
const RECOVERY: &[&str] = &["ls", "du", "df", "rm", "rmdir", "unlink", "find", "stat", "file",
    "wc", "head", "tail", "cat", "tree", "pwd", "cd", "true", "test", "["];
/// `find` arguments that run programs or write files.
const FIND_ACTIONS: &[&str] = &["-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0"];

/// Where a command line runs.
pub struct Place<'a> {
    /// Canonical workspace root.
    pub workspace: &'a Path,
    /// The shell's current directory.
    pub cwd: &'a Path,
}

/// One refused write: the target as resolved, and which rule it broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bypass {
    pub target: String,
    pub rule: Rule,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    SystemTemp,
    ProjectRootScratch,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::SystemTemp => "system_temporary_directory",
            Rule::ProjectRootScratch => "project_root_scratch_file",
        }
    }
}

/// The first write of `src` that bypasses the managed directory, if any. `exists` tells
/// whether a path exists and is a directory (`Some(is_dir)`), or not (`None`).
pub fn judge(src: &str, at: &Place, exists: &dyn Fn(&Path) -> Option<bool>) -> Option<Bypass> {
    let script = cmdpolicy::parse(src).ok()?;
    let changes_dir = script
        .commands
        .iter()
        .any(|c| c.static_name().is_some_and(|n| DIR_CHANGERS.contains(&n)));
    let place = |text: &str, dynamic: bool| -> Option<PathBuf> {
        let relative = !text.starts_with('/');
        let unplaceable = dynamic || text.is_empty() || (relative && changes_dir);
        (!unplaceable).then(|| clean(&at.cwd.join(text)))
    };
    for cmd in &script.commands {
        for target in targets(cmd, &place, exists) {
            if let Some(rule) = rule_for(&target, at.workspace, exists) {
                return Some(Bypass {
                    target: target.to_string_lossy().into_owned(),
                    rule,
                });
            }
        }
    }
    None
}

fn rule_for(target: &Path, ws: &Path, exists: &dyn Fn(&Path) -> Option<bool>) -> Option<Rule> {
    if !target.starts_with(ws) {
        let temp = SYSTEM_TEMP.iter().any(|t| target.starts_with(t));
        return temp.then_some(Rule::SystemTemp);
    }
    let at_root = target.parent() == Some(ws);
    let name = target.file_name()?.to_string_lossy();
    (at_root && scratch_name(&name) && exists(target).is_none()).then_some(Rule::ProjectRootScratch)
}

/// Whether a file name at the project root is a scratch name (module doc, rule 2).
pub fn scratch_name(name: &str) -> bool {
    if name.starts_with(".winx-") || name.starts_with(".winx_tmp") {
        return true;
    }
    let lower = name.to_ascii_lowercase();
    let stem = lower.split('.').next().unwrap_or_default();
    let ext = lower.rsplit_once('.');
    SCRATCH_STEMS.contains(&stem)
        || SCRATCH_PREFIXES.iter().any(|p| stem.starts_with(p))
        || ext.is_some_and(|(s, e)| !s.is_empty() && SCRATCH_EXTENSIONS.contains(&e))
}

/// The write targets of one simple command (module doc), placed by `place(text,
/// dynamic)`.
fn targets(
    cmd: &SimpleCommand,
    place: &dyn Fn(&str, bool) -> Option<PathBuf>,
    exists: &dyn Fn(&Path) -> Option<bool>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = cmd
        .redirects
        .iter()
        .filter(|r| r.writes_file())
        .filter_map(|r| place(&r.target.text, r.target.dynamic))
        .filter(|p| !p.starts_with("/dev") || p.starts_with("/dev/shm"))
        .collect();
    let operands = operands(cmd);
    match cmd.static_name() {
        Some("tee" | "touch") => {
            out.extend(operands.iter().filter_map(|w| place(&w.text, w.dynamic)))
        }
        Some("cp" | "mv" | "install") => {
            let explicit = target_dir(cmd);
            let (dest, sources) = match &explicit {
                Some(d) => (place(&d.0, d.1), &operands[..]),
                None => match operands.split_last() {
                    Some((d, s)) if !s.is_empty() => (place(&d.text, d.dynamic), s),
                    _ => (None, &operands[..0]),
                },
            };
            let Some(d) = dest else {
                return out;
            };
            if explicit.is_some() || exists(&d) == Some(true) || d == Path::new("/tmp") {
                for s in sources {
                    let name = Path::new(&s.text).file_name().map(PathBuf::from);
                    out.extend(name.map(|n| d.join(n)));
                }
            } else {
                out.push(d);
            }
        }
        _ => {}
    }
    out
}

/// Options of tee, touch, cp, mv and install that take the next word as their value.
const VALUED: &[&str] = &[
    "-d",
    "-r",
    "-t",
    "-S",
    "-m",
    "-o",
    "-g",
    "--target-directory",
];

/// The operands of `cmd`: words that are neither options nor an option's value.
fn operands(cmd: &SimpleCommand) -> Vec<&Word> {
    let mut skip = false;
    cmd.args
        .iter()
        .filter(|a| {
            let t = a.text.as_str();
            if std::mem::take(&mut skip) {
                return false;
            }
            skip = VALUED.contains(&t);
            !t.starts_with('-') || t == "-"
        })
        .collect()
}

/// `-t DIR` / `--target-directory[=]DIR` of cp, mv and install: its text and whether it
/// is dynamic.
fn target_dir(cmd: &SimpleCommand) -> Option<(String, bool)> {
    let args = &cmd.args;
    args.iter()
        .enumerate()
        .find_map(|(i, a)| match a.text.strip_prefix("--target-directory=") {
            Some(d) => Some((d.to_string(), a.dynamic)),
            None if matches!(a.text.as_str(), "-t" | "--target-directory") => {
                args.get(i + 1).map(|w| (w.text.clone(), w.dynamic))
            }
            None => None,
        })
}

/// `p` with `.` and `..` resolved lexically (no file system access).
pub fn clean(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(s) => out.push(s),
            _ => {}
        }
    }
    out
}

/// Whether `src` only inspects or removes (allowed while the directory is over budget):
/// every command is one of `RECOVERY` (`find` without actions that run or write), and
/// nothing writes a file.
pub fn only_inspects_or_removes(src: &str) -> bool {
    let Ok(script) = cmdpolicy::parse(src) else {
        return false;
    };
    script.commands.iter().all(|c| {
        let name_ok = c.static_name().is_some_and(|n| RECOVERY.contains(&n));
        let find_ok = c.static_name() != Some("find")
            || !c
                .args
                .iter()
                .any(|a| a.dynamic || FIND_ACTIONS.iter().any(|x| a.text.starts_with(x)));
        let writes = c
            .redirects
            .iter()
            .any(|r| r.writes_file() && (r.target.dynamic || r.target.text != "/dev/null"));
        name_ok && find_ok && !writes && c.wrapped_by.is_none()
    })
}
