//! Directories a Landlock-sandboxed server provably does not allow, wherever the checkout
//! lives: `scratch` asks `doctor` for the sandbox's roots and takes the first of
//! `CARGO_TARGET_TMPDIR` and HOME under none of them (the sandbox leaves `/tmp` writable,
//! so a checkout under `/tmp` puts the target directory inside the allowed set) nor in a
//! system temporary directory (where the temporary-artifact policy refuses a shell's
//! writes before the sandbox could). Test trees are fresh directories in it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The isolated environment of a test binary plus `extra`, and a HOME in `dir`.
pub fn env_with(dir: &Path, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let mut env = super::isolated_env(dir, &dir.join("state"), &run);
    for (k, v) in extra {
        env.retain(|(n, _)| n != k);
        env.push((k.to_string(), v.to_string()));
    }
    env
}

/// `doctor`'s JSON under `env`, after `prepare` has adjusted the command.
pub fn doctor_with(env: &[(String, String)], prepare: impl FnOnce(&mut Command)) -> Value {
    let mut cmd = super::command(env);
    cmd.arg("doctor").stdin(Stdio::null());
    prepare(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "doctor failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A fresh directory under `scratch()`, outside everything the sandbox allows.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(scratch()).expect("tempdir in the scratch directory")
}

/// System temporary directories: the temporary-artifact policy refuses a shell's writes
/// there before the sandbox is reached, so "outside" is never in one.
const SYSTEM_TEMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// The parent of every test tree: the first candidate in no system temporary directory
/// and under none of the roots (writable, readable or device) of an enforcing sandbox
/// whose workspace and HOME live in it, as `doctor` lists them. Test trees are fresh
/// directories in it, so only their own workspace, HOME and named roots are allowed,
/// never a sibling. Panics, saying why each candidate was refused, when none qualifies.
pub fn scratch() -> &'static Path {
    static SCRATCH: OnceLock<PathBuf> = OnceLock::new();
    SCRATCH.get_or_init(|| {
        let mut candidates = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR"))];
        candidates.extend(std::env::var_os("HOME").map(PathBuf::from));
        let mut refused = Vec::new();
        for c in candidates {
            let Ok(c) = c.canonicalize() else {
                refused.push(format!("{} (missing)", c.display()));
                continue;
            };
            if let Some(t) = SYSTEM_TEMP.iter().find(|t| c.starts_with(t)) {
                refused.push(format!("{} (in {t})", c.display()));
                continue;
            }
            let Ok(probe) = tempfile::tempdir_in(&c) else {
                refused.push(format!("{} (not writable)", c.display()));
                continue;
            };
            let ws = probe.path().join("ws");
            std::fs::create_dir(&ws).unwrap();
            let d = doctor_with(
                &env_with(
                    probe.path(),
                    &[("WINX_SANDBOX", "1"), ("WINX_SANDBOX_WORKSPACE", s(&ws))],
                ),
                |_| {},
            );
            let roots: Vec<PathBuf> = ["writable", "readable", "devices"]
                .iter()
                .flat_map(|k| d["sandbox"][k].as_array().cloned().unwrap_or_default())
                .filter_map(|v| v.as_str().map(PathBuf::from))
                .collect();
            assert!(
                roots.iter().any(|r| ws.starts_with(r)),
                "doctor lists no root for the workspace: {d}"
            );
            match roots.iter().find(|r| c.starts_with(r)) {
                None => return c,
                Some(r) => refused.push(format!("{} (under {})", c.display(), r.display())),
            }
        }
        panic!("no scratch directory outside the sandbox's allowed set: {refused:?}")
    })
}
