//! Build identity embedded at compile time by `src/build.rs`.

/// Package version from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Short git revision, or "unknown" when built outside a git checkout.
pub const GIT_REV: &str = env!("WINX_GIT_REV");
/// "true", "false" or "unknown".
pub const GIT_DIRTY: &str = env!("WINX_GIT_DIRTY");

/// One-line identity, e.g. `0.1.0 (rev 1a2b3c4d5e6f)` or `0.1.0 (rev 1a2b3c4d5e6f, dirty)`.
pub fn identity() -> String {
    match GIT_DIRTY {
        "true" => format!("{VERSION} (rev {GIT_REV}, dirty)"),
        _ => format!("{VERSION} (rev {GIT_REV})"),
    }
}
