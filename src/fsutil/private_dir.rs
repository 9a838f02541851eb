//! Private directories: state, sessions, sockets and journals are created 0700.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Create `dir` (and parents) with mode 0700, or tighten an existing directory to 0700.
/// A non-directory (a symlink included) at `dir` is an error.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    let context = |what: &'static str| {
        move |e: io::Error| io::Error::new(e.kind(), format!("{what} {}: {e}", dir.display()))
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(context("create directory"))?;
    let meta = fs::symlink_metadata(dir).map_err(context("inspect directory"))?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(context("restrict directory"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_tightens_and_refuses_non_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("a/b");
        ensure_private_dir(&d).unwrap();
        assert_eq!(
            fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&d).unwrap();
        assert_eq!(
            fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let f = tmp.path().join("file");
        fs::write(&f, "x").unwrap();
        assert!(ensure_private_dir(&f).is_err());
    }
}
