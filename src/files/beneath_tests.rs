use super::*;
use std::fs;

struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    allow: AllowPaths,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    fs::create_dir_all(ws.join("sub")).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(ws.join("sub/f.txt"), "inside").unwrap();
    fs::write(outside.join("f.txt"), "outside").unwrap();
    Fixture {
        _tmp: tmp,
        ws,
        outside,
        allow: AllowPaths::default(),
    }
}

impl Fixture {
    fn roots(&self) -> Roots<'_> {
        Roots {
            workspace: &self.ws,
            allow: &self.allow,
        }
    }

    fn read(&self, rel: &str) -> Result<String, BeneathError> {
        let (_, mut f) = open_read(&self.roots(), &self.ws.join(rel))?;
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        Ok(s)
    }
}

#[test]
fn links_that_stay_inside_are_followed_and_links_out_are_denied() {
    let fx = fixture();
    std::os::unix::fs::symlink("sub", fx.ws.join("alias")).unwrap();
    std::os::unix::fs::symlink(&fx.outside, fx.ws.join("escape")).unwrap();
    assert_eq!(fx.read("sub/f.txt").unwrap(), "inside");
    assert_eq!(fx.read("alias/f.txt").unwrap(), "inside");
    assert!(matches!(
        fx.read("escape/f.txt"),
        Err(BeneathError::Denied(_))
    ));
    assert!(matches!(fx.read("sub/none"), Err(BeneathError::NotFound)));
}

#[test]
fn a_directory_that_became_a_symlink_after_canonicalisation_is_not_followed() {
    let fx = fixture();
    let canonical = fx.ws.join("sub/f.txt");
    // The race, frozen: `sub` was a directory when canonicalised, a link when walked.
    fs::rename(fx.ws.join("sub"), fx.ws.join("moved")).unwrap();
    std::os::unix::fs::symlink(&fx.outside, fx.ws.join("sub")).unwrap();
    assert!(walk(&fx.ws, &canonical, false).unwrap().is_none());
    assert!(walk(&fx.ws, &canonical, true).unwrap().is_none());
    assert!(matches!(
        read_canonical(&canonical, 100),
        Err(BeneathError::Changed)
    ));
    // Resolving again sees the link and refuses it by policy.
    assert!(matches!(fx.read("sub/f.txt"), Err(BeneathError::Denied(_))));
}

#[test]
fn special_files_are_refused_without_blocking() {
    let fx = fixture();
    let fifo = fx.ws.join("pipe");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
    let r = fx.read("pipe");
    assert!(
        matches!(r, Err(BeneathError::NotRegular(FileKind::Fifo))),
        "{r:?}"
    );
    let r = fx.read("sub");
    assert!(
        matches!(r, Err(BeneathError::NotRegular(FileKind::Directory))),
        "{r:?}"
    );
    let dev = read_canonical(Path::new("/dev/null"), 10);
    assert!(
        matches!(dev, Err(BeneathError::NotRegular(FileKind::CharDevice))),
        "{dev:?}"
    );
    let msg = BeneathError::NotRegular(FileKind::Fifo).to_string();
    assert!(msg.contains("FIFO"), "{msg}");
}

#[test]
fn the_root_is_the_longest_containing_one() {
    let fx = fixture();
    let allow = AllowPaths::parse(&format!("{}:/", fx.outside.display()));
    let roots = Roots {
        workspace: &fx.ws,
        allow: &allow,
    };
    assert_eq!(root_for(&fx.ws.join("sub/f.txt"), &roots), fx.ws);
    assert_eq!(root_for(&fx.outside.join("f.txt"), &roots), fx.outside);
    assert_eq!(root_for(Path::new("/etc/passwd"), &roots), Path::new("/"));
    // Unconfined reads anywhere, still without following a link mid-path.
    let (p, _) = open_read(&roots, &fx.outside.join("f.txt")).unwrap();
    assert_eq!(p, fx.outside.join("f.txt"));
}

#[test]
fn missing_directories_are_created_beneath_the_root() {
    let fx = fixture();
    let entry = entry_canonical(&fx.ws.join("a/b/new.txt")).unwrap();
    assert!(entry.stat().unwrap().is_none());
    assert!(matches!(entry.open_regular(), Ok(Some(None))));
    let dir = entry.dir().unwrap();
    assert!(fx.ws.join("a/b").is_dir());
    let st = fstat(&*dir).unwrap();
    assert_eq!(FileKind::of(&st), Some(FileKind::Directory));
    assert_eq!(entry.name(), "new.txt");
}
