//! `temporary_artifact_policy`: statically visible shell writes that bypass the managed
//! directory, judged with the mode policy's tokenizer (`shell::cmdpolicy::parse`).
//!
//! The rule, exactly. A **write target** is: the file of a redirection that opens one for
//! writing (`>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `>&file`, any fd); every file operand of
//! `tee` and `touch`; every directory `mkdir` and `install -d` create; the destination of
//! `cp`, `mv` and `install` (`-t DIR`, `--target-directory=DIR`, else the last operand;
//! into an existing directory, `/tmp` or a name ending in `/` the target is
//! `DIR/<source name>`); the FILE of `find -fls/-fprint/-fprint0/-fprintf`, `dd of=` and
//! `sort -o`. Options are told from operands per command (`touch -d DATE`, but `cp -r`
//! and `cp -d` take no value). Commands under a wrapper that runs them (`timeout 5`,
//! `nice`, `nohup`, `env`, `stdbuf`, `setsid`, `command`, `time`, `xargs`, `sudo`…) are
//! judged as if they stood alone. Only literal targets are judged: one with an expansion
//! (`$WINX_TEMP_DIR/x`, `"$OUT"`), a glob or a tilde is known only at run time, and a
//! relative one after `cd`/`pushd`/`popd` on the same line cannot be placed. A line the
//! tokenizer cannot parse is not judged (the mode policy decides about it).
//!
//! A target is placed against the shell's cwd, then resolved: through the symbolic links
//! `ln -s` makes earlier on the same line, `/proc/<pid|self|thread-self>/root/` (which is
//! `/`), and the symbolic links of its longest existing prefix (a workspace link to `/tmp`
//! is `/tmp`). It is **refused** when:
//!
//! 1. it lies outside the workspace in a system temporary directory: `/tmp`, `/var/tmp`,
//!    `/dev/shm` or below; or
//! 2. it is a new file (nothing by that name exists yet; not a directory being created)
//!    directly in the workspace root whose name is a scratch name: `.winx-*` /
//!    `.winx_tmp*` (seed 003 forbids them by name), a stem (the name up to its first `.`,
//!    lowercase) of `tmp`, `temp`, `scratch`, `debug`, `out` or `output`, or starting with
//!    `tmp_`, `temp_`, `scratch_`, `debug_`; or an extension `.tmp`, `.temp`, `.log` or
//!    `.out`.
//!
//! Never refused: writes to files that exist (`sed -i`, `>> CHANGELOG.md`, rewriting a
//! tracked `build.log`), anything in subdirectories of the project, `/dev/null` and the
//! other `/dev` files, and every other path outside the workspace (`~/.cargo`, `/etc`…).
//! Not seen at all: what a program writes on its own (`sh -c`, `eval`, a script, an
//! interpreter's `open()`, a compiler's output), which the audit after every action
//! counts against the budget when it lands in the managed directory.

use crate::shell::cmdpolicy::{self, SimpleCommand, Word};
use std::collections::HashMap;
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
/// `find` arguments that run programs or write files (`-fprint` covers `-fprint0` and
/// `-fprintf`).
const FIND_ACTIONS: &[&str] = &["-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls"];
/// `find` actions that write the file named by the next word.
const FIND_WRITES: &[&str] = &["-fls", "-fprint", "-fprint0", "-fprintf"];
/// Options that take the next word as their value, per command (`touch -d DATE`, but
/// `cp -d` and `cp -r` take none).
#[rustfmt::skip]
const VALUED: &[(&str, &[&str])] = &[
    ("touch", &["-d", "-r", "-t", "--date", "--reference"]),
    ("cp", &["-t", "-S", "--target-directory", "--suffix"]),
    ("mv", &["-t", "-S", "--target-directory", "--suffix"]),
    ("ln", &["-t", "-S", "--target-directory", "--suffix"]),
    ("install", &["-t", "-S", "-m", "-o", "-g", "--target-directory", "--suffix", "--mode",
        "--owner", "--group"]),
    ("mkdir", &["-m", "--mode"]),
    ("sort", &["-k", "-t", "-S", "-T", "--key", "--field-separator", "--buffer-size",
        "--temporary-directory"]),
];
/// How many symbolic links a target is followed through before judging it anyway.
const MAX_LINK_STEPS: usize = 16;

/// Where a command line runs.
pub struct Place<'a> {
    /// Canonical workspace root.
    pub workspace: &'a Path,
    /// The shell's current directory.
    pub cwd: &'a Path,
}

/// What the judge may ask the file system. `Disk` asks the real one.
pub trait Fs {
    /// Whether `p` exists (a link is not followed): `Some(is_dir)`, else `None`.
    fn kind(&self, p: &Path) -> Option<bool>;
    /// `p` with every symbolic link resolved, if it exists.
    fn canonical(&self, p: &Path) -> Option<PathBuf>;
    /// What the symbolic link `p` holds, if it is one.
    fn link(&self, p: &Path) -> Option<PathBuf>;
}

/// The real file system.
pub struct Disk;

impl Fs for Disk {
    fn kind(&self, p: &Path) -> Option<bool> {
        std::fs::symlink_metadata(p).ok().map(|m| m.is_dir())
    }
    fn canonical(&self, p: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(p).ok()
    }
    fn link(&self, p: &Path) -> Option<PathBuf> {
        std::fs::read_link(p).ok()
    }
}

/// One refused write: the target as resolved, which rule it broke, and the word that
/// names it as the command line has it (`written`; with `into_dir`, the directory the
/// target goes into).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bypass {
    pub target: String,
    pub rule: Rule,
    pub written: String,
    pub into_dir: bool,
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

/// A write target of one command, before it is resolved.
struct Target {
    /// Placed lexically against the cwd.
    path: PathBuf,
    written: String,
    into_dir: bool,
    /// A directory being created (`mkdir`, `install -d`): judged by rule 1 only.
    dir: bool,
}

/// The first write of `src` that bypasses the managed directory, if any.
pub fn judge(src: &str, at: &Place, fs: &dyn Fs) -> Option<Bypass> {
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
    let links = new_links(&script.commands, &place, fs);
    for cmd in &script.commands {
        for t in targets(cmd, &place, fs) {
            let target = resolve(&t.path, &links, fs);
            if let Some(rule) = rule_for(&target, at.workspace, fs, t.dir) {
                return Some(Bypass {
                    target: target.to_string_lossy().into_owned(),
                    rule,
                    written: t.written,
                    into_dir: t.into_dir,
                });
            }
        }
    }
    None
}

fn rule_for(target: &Path, ws: &Path, fs: &dyn Fs, dir: bool) -> Option<Rule> {
    if !target.starts_with(ws) {
        let temp = SYSTEM_TEMP.iter().any(|t| target.starts_with(t));
        return temp.then_some(Rule::SystemTemp);
    }
    let at_root = target.parent() == Some(ws);
    let name = target.file_name()?.to_string_lossy();
    let scratch = at_root && !dir && scratch_name(&name) && fs.kind(target).is_none();
    scratch.then_some(Rule::ProjectRootScratch)
}

/// Where a write to `p` lands: through the links this command line makes (`links`),
/// `/proc/<pid>/root` (the same root for every process of the session), and the
/// symbolic links of its longest existing prefix, a dangling one included (a write
/// through it creates what it names).
fn resolve(p: &Path, links: &HashMap<PathBuf, PathBuf>, fs: &dyn Fs) -> PathBuf {
    let mut p = p.to_path_buf();
    for _ in 0..MAX_LINK_STEPS {
        let before = p.clone();
        p = proc_root(&p);
        if let Some((link, dest)) = p.ancestors().find_map(|a| Some((a, links.get(a)?))) {
            p = clean(&dest.join(p.strip_prefix(link).unwrap_or(Path::new(""))));
        }
        if let Some((a, real)) = p.ancestors().find_map(|a| Some((a, fs.canonical(a)?))) {
            let rest = p.strip_prefix(a).unwrap_or(Path::new("")).to_path_buf();
            p = clean(&real.join(&rest));
            // The first component past the existing prefix may be a dangling link.
            let next = rest.components().next().map(|c| real.join(c));
            if let Some((next, held)) = next.and_then(|n| Some((fs.link(&n)?, n))) {
                let tail = p.strip_prefix(&held).unwrap_or(Path::new(""));
                p = clean(&real.join(next).join(tail));
            }
        }
        if p == before {
            break;
        }
    }
    p
}

/// `/proc/self/root/x`, `/proc/thread-self/root/x`, `/proc/<n>/root/x` and
/// `/proc/<n>/task/<t>/root/x` are `/x`.
fn proc_root(p: &Path) -> PathBuf {
    let parts: Vec<String> = (p.components().skip(1))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let pid = |s: &str| {
        s == "self"
            || s == "thread-self"
            || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    };
    let skip = match parts.as_slice() {
        [proc, n, task, t, root, ..]
            if proc == "proc" && pid(n) && task == "task" && pid(t) && root == "root" =>
        {
            5
        }
        [proc, n, root, ..] if proc == "proc" && pid(n) && root == "root" => 3,
        _ => return p.to_path_buf(),
    };
    let mut out = PathBuf::from("/");
    out.extend(&parts[skip..]);
    proc_root(&out)
}

/// The symbolic links `ln -s` makes on this command line, placed: link → where it points.
fn new_links(
    commands: &[SimpleCommand],
    place: &dyn Fn(&str, bool) -> Option<PathBuf>,
    fs: &dyn Fs,
) -> HashMap<PathBuf, PathBuf> {
    let mut links = HashMap::new();
    for cmd in commands.iter().filter(|c| c.static_name() == Some("ln")) {
        let symbolic = cmd.args.iter().any(|a| {
            let t = a.text.as_str();
            t == "--symbolic" || (t.starts_with('-') && !t.starts_with("--") && t.contains('s'))
        });
        let ops = operands(cmd);
        if !symbolic || ops.iter().any(|w| w.dynamic) {
            continue;
        }
        let explicit = target_dir(cmd).and_then(|(d, dynamic)| place(&d, dynamic));
        let (dir, sources) = match (&explicit, ops.split_last()) {
            (Some(d), _) => (Some(d.clone()), &ops[..]),
            (None, Some((last, s))) if !s.is_empty() => match place(&last.text, false) {
                Some(l) if fs.kind(&l) == Some(true) && s.len() == 1 => (Some(l), s),
                Some(l) if s.len() == 1 => {
                    links.insert(l.clone(), link_dest(&l, &s[0].text));
                    continue;
                }
                Some(l) => (Some(l), s),
                None => continue,
            },
            (None, Some((only, []))) => (place(".", false), std::slice::from_ref(only)),
            _ => continue,
        };
        let Some(dir) = dir else { continue };
        for s in sources {
            if let Some(name) = Path::new(&s.text).file_name() {
                let link = dir.join(name);
                links.insert(link.clone(), link_dest(&link, &s.text));
            }
        }
    }
    links
}

/// Where a link at `link` holding `text` points (relative to the link's directory).
fn link_dest(link: &Path, text: &str) -> PathBuf {
    clean(&link.parent().unwrap_or(Path::new("/")).join(text))
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
    fs: &dyn Fs,
) -> Vec<Target> {
    let file = |text: &str, dynamic: bool, dir: bool| {
        place(text, dynamic).map(|path| Target {
            path,
            written: text.to_string(),
            into_dir: false,
            dir,
        })
    };
    let mut out: Vec<Target> = cmd
        .redirects
        .iter()
        .filter(|r| r.writes_file())
        .filter_map(|r| file(&r.target.text, r.target.dynamic, false))
        .filter(|t| !t.path.starts_with("/dev") || t.path.starts_with("/dev/shm"))
        .collect();
    let operands = operands(cmd);
    let each = |dir: bool| {
        operands
            .iter()
            .filter_map(move |w| file(&w.text, w.dynamic, dir))
    };
    let args = &cmd.args;
    let install_dirs = || {
        let short = |t: &str| t.starts_with('-') && !t.starts_with("--") && t.contains('d');
        args.iter()
            .any(|a| a.text == "--directory" || short(&a.text))
    };
    match cmd.static_name() {
        Some("tee" | "touch") => out.extend(each(false)),
        Some("mkdir") => out.extend(each(true)),
        Some("install") if install_dirs() => out.extend(each(true)),
        Some("cp" | "mv" | "install") => out.extend(copy_targets(cmd, &operands, place, fs)),
        Some("find") => out.extend(args.windows(2).filter_map(|w| {
            let writes = FIND_WRITES.contains(&w[0].text.as_str());
            writes
                .then(|| file(&w[1].text, w[1].dynamic, false))
                .flatten()
        })),
        Some("dd") => out.extend(args.iter().filter_map(|a| {
            let of = a.text.strip_prefix("of=")?;
            file(of, a.dynamic, false)
        })),
        Some("sort") => out.extend(args.iter().enumerate().filter_map(|(i, a)| {
            let t = a.text.as_str();
            match t.strip_prefix("--output=") {
                Some(f) => file(f, a.dynamic, false),
                None if t == "-o" || t == "--output" => args
                    .get(i + 1)
                    .and_then(|w| file(&w.text, w.dynamic, false)),
                None => None,
            }
        })),
        _ => {}
    }
    out
}

/// The destinations of `cp`, `mv` and `install` (module doc).
fn copy_targets(
    cmd: &SimpleCommand,
    operands: &[&Word],
    place: &dyn Fn(&str, bool) -> Option<PathBuf>,
    fs: &dyn Fs,
) -> Vec<Target> {
    let explicit = target_dir(cmd);
    let (dest, sources) = match &explicit {
        Some(d) => ((place(&d.0, d.1), d.0.clone()), operands),
        None => match operands.split_last() {
            Some((d, s)) if !s.is_empty() => ((place(&d.text, d.dynamic), d.text.clone()), s),
            _ => return Vec::new(),
        },
    };
    let (Some(d), written) = dest else {
        return Vec::new();
    };
    let into_dir = explicit.is_some()
        || fs.kind(&d) == Some(true)
        || d == Path::new("/tmp")
        || written.ends_with('/');
    if !into_dir {
        let (path, into_dir, dir) = (d, false, false);
        return vec![Target {
            path,
            written,
            into_dir,
            dir,
        }];
    }
    let name = |s: &&Word| Path::new(&s.text).file_name().map(PathBuf::from);
    (sources.iter().filter_map(name))
        .map(|n| Target {
            path: d.join(n),
            written: written.clone(),
            into_dir: true,
            dir: false,
        })
        .collect()
}

/// The operands of `cmd`: words that are neither options nor an option's value.
fn operands(cmd: &SimpleCommand) -> Vec<&Word> {
    let name = cmd.static_name().unwrap_or_default();
    let valued = VALUED
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&[][..], |v| v.1);
    let (mut skip, mut options) = (false, true);
    cmd.args
        .iter()
        .filter(|a| {
            let t = a.text.as_str();
            if std::mem::take(&mut skip) {
                return false;
            }
            if t == "--" && options {
                options = false;
                return false;
            }
            skip = options && valued.contains(&t);
            !options || !t.starts_with('-') || t == "-"
        })
        .collect()
}

/// `-t DIR` / `--target-directory[=]DIR` of cp, mv, install and ln: its text and whether
/// it is dynamic.
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

/// The command line that would pass: every refused write target rewritten, as written,
/// to `"$WINX_TEMP_DIR/<name>"` (a directory destination to `"$WINX_TEMP_DIR/"`), where
/// it stands as a whole word; `None` when some refused target cannot be rewritten so.
pub fn rewritten(src: &str, at: &Place, fs: &dyn Fs) -> Option<String> {
    let mut line = src.to_string();
    for _ in 0..8 {
        let Some(b) = judge(&line, at, fs) else {
            return (line != src).then_some(line);
        };
        let name = Path::new(&b.target)
            .file_name()?
            .to_string_lossy()
            .into_owned();
        let to = match b.into_dir {
            true => "$WINX_TEMP_DIR/".to_string(),
            false => format!("$WINX_TEMP_DIR/{name}"),
        };
        line = replace_word(&line, &b.written, &to)?;
    }
    None
}

/// `src` with each whole-word occurrence of `word` replaced by `to`, double-quoted (inside
/// double quotes as it stands; a single-quoted word loses its quotes); `None` if there
/// is none.
fn replace_word(src: &str, word: &str, to: &str) -> Option<String> {
    const BEFORE: &[u8] = b" \t\n;|&()<>='\"";
    const AFTER: &[u8] = b" \t\n;|&()<>'\"";
    let bytes = src.as_bytes();
    let (mut out, mut copied, mut found) = (String::new(), 0, false);
    for (i, _) in src.match_indices(word).filter(|_| !word.is_empty()) {
        let end = i + word.len();
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(end).copied();
        let whole =
            before.is_none_or(|b| BEFORE.contains(&b)) && after.is_none_or(|b| AFTER.contains(&b));
        if !whole || i < copied {
            continue;
        }
        let (from, till, text) = match (before, after) {
            (Some(b'\''), Some(b'\'')) => (i - 1, end + 1, format!("\"{to}\"")),
            (Some(b'"'), _) => (i, end, to.to_string()),
            _ => (i, end, format!("\"{to}\"")),
        };
        out.push_str(&src[copied..from]);
        out.push_str(&text);
        (copied, found) = (till, true);
    }
    out.push_str(&src[copied..]);
    found.then_some(out)
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
