//! Build identity embedded at compile time by `src/build.rs`.

/// Package version from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Short git revision, or "unknown" when built outside a git checkout.
pub const GIT_REV: &str = env!("WINX_GIT_REV");
/// "true", "false" or "unknown".
pub const GIT_DIRTY: &str = env!("WINX_GIT_DIRTY");

/// Set once by `config::apply_build_identity` (`WINX_BUILD_IDENTITY_OVERRIDE`).
static OVERRIDE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Report `identity` instead of the compiled one, for the rest of this process (the first
/// call wins). Upgrade drills and tests use it to make a process look like another build.
pub fn set_identity_override(identity: String) {
    let _ = OVERRIDE.set(identity);
}

/// One-line identity, e.g. `0.1.0 (rev 1a2b3c4d5e6f)` or `0.1.0 (rev 1a2b3c4d5e6f, dirty)`,
/// unless `set_identity_override` said otherwise.
pub fn identity() -> String {
    if let Some(o) = OVERRIDE.get() {
        return o.clone();
    }
    match GIT_DIRTY {
        "true" => format!("{VERSION} (rev {GIT_REV}, dirty)"),
        _ => format!("{VERSION} (rev {GIT_REV})"),
    }
}
