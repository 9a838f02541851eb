//! Build script: embeds the build identity (package version, git revision, dirty flag).
//! Outside a git checkout, or without git, the revision is the literal "unknown".
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let rev = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(s) if s.is_empty() => "false",
        Some(_) => "true",
        None => "unknown",
    };
    println!("cargo:rustc-env=WINX_GIT_REV={rev}");
    println!("cargo:rustc-env=WINX_GIT_DIRTY={dirty}");
    // In a linked worktree `.git` is a file: ask git where HEAD and the index live (a path
    // that does not exist would make cargo rerun this script, and rebuild, every time).
    for (name, fallback) in [("HEAD", ".git/HEAD"), ("index", ".git/index")] {
        let path = git(&["rev-parse", "--git-path", name]).unwrap_or_else(|| fallback.into());
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=src");
    // The binary is a position-independent executable (ASLR); its ~9,000 relative
    // relocations take 24 bytes each in `.rela.dyn` (210 KB). Packed (DT_RELR, glibc ≥ 2.36
    // and binutils ≥ 2.38) they take about 2 KB. An older linker ignores the option with a
    // warning, and ld records the glibc version it needs, so nothing breaks silently.
    let target = |v: &str| std::env::var(v).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
