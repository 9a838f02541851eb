//! Engine unit tests: permits, all-or-nothing planning, partial commits.

use super::*;
use crate::files::coverage::Coverage;
use crate::files::policy::AllowPaths;
use crate::session::Mode;

struct Fix {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    coverage: Coverage,
    allow: AllowPaths,
    mode: Mode,
}

fn fix() -> Fix {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().canonicalize().unwrap();
    Fix {
        _tmp: tmp,
        ws,
        coverage: Coverage::default(),
        allow: AllowPaths::default(),
        mode: Mode::Wcgw,
    }
}

impl Fix {
    fn ctx(&self) -> EditContext<'_> {
        EditContext {
            coverage: &self.coverage,
            stored: &|_| None,
            workspace: &self.ws,
            allow: &self.allow,
            mode: &self.mode,
        }
    }
}

fn sr(path: &Path, search: &str, replace: &str) -> FileEdit {
    FileEdit {
        path: path.to_path_buf(),
        op: Op::SearchReplace {
            text: format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"),
        },
    }
}

#[test]
fn the_read_is_the_permit() {
    let f = fix();
    let p = f.ws.join("a.txt");
    std::fs::write(&p, "one\ntwo\nthree\n").unwrap();
    let err = plan(&f.ctx(), &[sr(&p, "two", "2")]).unwrap_err();
    assert!(
        matches!(err, PlanError::NeedsRead { ref ranges, .. } if ranges == &vec![(2, 2)]),
        "{err:?}"
    );
    f.coverage
        .grant(&p, &revision(b"one\ntwo\nthree\n"), (2, 2));
    let planned = plan(&f.ctx(), &[sr(&p, "two", "2")]).unwrap();
    assert_eq!(planned[0].new, "one\n2\nthree\n");
    commit(&planned, None).unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\n2\nthree\n");
}

#[test]
fn one_failing_file_means_nothing_is_written() {
    let f = fix();
    let (a, b) = (f.ws.join("a.txt"), f.ws.join("b.txt"));
    std::fs::write(&a, "x\n").unwrap();
    std::fs::write(&b, "y\n").unwrap();
    f.coverage.grant(&a, &revision(b"x\n"), (1, 1));
    f.coverage.grant(&b, &revision(b"y\n"), (1, 1));
    let err = plan(&f.ctx(), &[sr(&a, "x", "X"), sr(&b, "nope", "Y")]);
    assert!(matches!(err, Err(PlanError::Match { .. })));
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "x\n");
}

#[test]
fn line_patches_compare_and_swap_the_revision() {
    let f = fix();
    let p = f.ws.join("c.txt");
    std::fs::write(&p, "a\nb\n").unwrap();
    let rev = revision(b"a\nb\n");
    f.coverage.grant(&p, &rev, (1, 2));
    let patch = |expected: &str| FileEdit {
        path: p.clone(),
        op: Op::LinePatch {
            patches: vec![Patch {
                start_line: 2,
                delete_lines: 1,
                replacement: "B".into(),
            }],
            expected_revision: expected.into(),
        },
    };
    assert!(matches!(
        plan(&f.ctx(), &[patch("sha256:old")]),
        Err(PlanError::NeedsRead { .. })
    ));
    assert_eq!(plan(&f.ctx(), &[patch(&rev)]).unwrap()[0].new, "a\nB\n");
}

#[test]
fn a_failure_while_staging_writes_nothing() {
    let f = fix();
    let ok = f.ws.join("ok.txt");
    let dir = f.ws.join("d");
    std::fs::create_dir(&dir).unwrap();
    let doomed = dir.join("child.txt");
    let planned = plan(
        &f.ctx(),
        &[
            FileEdit {
                path: ok.clone(),
                op: Op::Replace {
                    content: "1".into(),
                },
            },
            FileEdit {
                path: doomed.clone(),
                op: Op::Replace {
                    content: "2".into(),
                },
            },
        ],
    )
    .unwrap();
    // The directory turns into a file between planning and commit.
    std::fs::remove_dir(&dir).unwrap();
    std::fs::write(&dir, "not a directory").unwrap();
    let Err(CommitError::Partial(p)) = commit(&planned, None) else {
        panic!("a staging failure is a partial commit");
    };
    // Staging failed before any rename: every target is untouched, and nothing is left over.
    assert!(p.committed.is_empty());
    assert_eq!(p.failed, doomed);
    assert_eq!(p.untouched, vec![ok.clone()]);
    assert!(!ok.exists());
    assert_eq!(
        std::fs::read_dir(&f.ws).unwrap().count(),
        1,
        "no temp files left"
    );
}

#[test]
fn a_multi_file_commit_records_and_then_clears_its_intent() {
    let f = fix();
    let journal = tempfile::tempdir().unwrap();
    let jdir = journal.path().join("commits");
    let edit = |name: &str| FileEdit {
        path: f.ws.join(name),
        op: Op::Replace {
            content: format!("{name}\n"),
        },
    };
    let planned = plan(&f.ctx(), &[edit("x.txt"), edit("y.txt")]).unwrap();
    commit(&planned, Some(&jdir)).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("y.txt")).unwrap(),
        "y.txt\n"
    );
    // The intent existed for the renames and is gone once they are done.
    assert_eq!(std::fs::read_dir(&jdir).unwrap().count(), 0);
    // One file needs no intent: a rename is atomic on its own.
    let planned = plan(&f.ctx(), &[edit("z.txt")]).unwrap();
    let single = tempfile::tempdir().unwrap();
    commit(&planned, Some(&single.path().join("commits"))).unwrap();
    assert!(!single.path().join("commits").exists());
}

#[test]
fn a_target_changed_after_planning_is_never_committed_over() {
    let f = fix();
    let (a, b) = (f.ws.join("a.txt"), f.ws.join("b.txt"));
    std::fs::write(&a, "a\n").unwrap();
    f.coverage.grant(&a, &revision(b"a\n"), (1, 1));
    let new_b = FileEdit {
        path: b.clone(),
        op: Op::Replace {
            content: "b\n".into(),
        },
    };
    let planned = plan(&f.ctx(), &[sr(&a, "a", "A"), new_b.clone()]).unwrap();
    // Another writer (one that takes no lock) changes `a` after the plan.
    std::fs::write(&a, "theirs\nmore\n").unwrap();
    let err = commit(&planned, None).unwrap_err();
    let CommitError::Changed { path, now, lines } = err else {
        panic!("{err:?}");
    };
    assert_eq!((path, lines), (a.clone(), 2));
    assert_eq!(now, Some(revision(b"theirs\nmore\n")));
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "theirs\nmore\n");
    assert!(!b.exists(), "nothing of the commit was written");
    // A file planned as new that appeared since is a change too.
    let planned = plan(&f.ctx(), &[new_b]).unwrap();
    std::fs::write(&b, "someone else's\n").unwrap();
    let err = commit(&planned, None).unwrap_err();
    assert!(matches!(err, CommitError::Changed { .. }), "{err:?}");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "someone else's\n");
    let left = std::fs::read_dir(&f.ws).unwrap().count();
    assert_eq!(left, 2, "temp files left");
}

#[test]
fn the_diff_shows_the_change() {
    let d = unified_diff(Path::new("/f"), "a\nb\nc\n", "a\nB\nc\n");
    assert!(d.contains("-b\n+B\n"), "{d}");
}
