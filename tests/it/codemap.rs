//! CodeMap through the real binary: golden outlines per language, the repository map of
//! this repository, cursor paging and stale cursors, references, and hostile input.

use crate::support;

use serde_json::{Value, json};
use support::golden::{assert_golden, normalise};
use support::{Agent, Opts, manifest_dir, pair_args, sc, text};

/// An agent on the embedded runtime (CodeMap needs no shell) bound to `workspace`.
fn agent_in(workspace: Option<std::path::PathBuf>) -> (Agent, Value) {
    let mut a = Agent::spawn_with(Opts {
        env: &[("WINX_RUNTIME", "embedded")],
        workspace,
        ..Default::default()
    });
    let s = a.first_call();
    (a, s)
}

fn code_map(a: &mut Agent, s: &Value, args: Value) -> Value {
    a.call("CodeMap", pair_args(s, args))
}

fn write(root: &std::path::Path, rel: &str, body: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

#[test]
fn golden_outlines_per_language() {
    let fixtures = manifest_dir().join("tests/fixtures/codemap");
    let (mut a, s) = agent_in(Some(fixtures.clone()));
    for file in [
        "sample.rs",
        "sample.py",
        "sample.js",
        "sample.ts",
        "sample.tsx",
        "sample.go",
        "sample.c",
        "sample.cpp",
        "Sample.java",
    ] {
        let r = code_map(&mut a, &s, json!({"operation": "outline", "path": file}));
        assert_eq!(r["isError"], false, "{file}: {r}");
        let d = &sc(&r)["data"];
        assert_eq!(d["language_supported"], true);
        for sym in d["symbols"].as_array().unwrap() {
            assert!(
                sym["end_line"].as_u64() >= sym["line"].as_u64(),
                "{file}: {sym}"
            );
        }
        let canonical = fixtures.canonicalize().unwrap();
        let shown = normalise(text(&r), &[(canonical.to_str().unwrap(), "<FIXTURES>")]);
        let name = format!("codemap_{}", file.replace('.', "_").to_lowercase());
        assert_golden(&name, &shown);
    }
}

/// Issue 17: the map of this repository for "guardian" leads with the guardian's code.
#[test]
fn repository_map_of_this_repository() {
    let (mut a, s) = agent_in(Some(manifest_dir()));
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "query": "guardian"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let d = &sc(&r)["data"];
    let paths: Vec<&str> = d["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        paths[..3].iter().any(|p| p.starts_with("src/guardian/")),
        "{paths:?}"
    );
    assert!(paths[0].contains("guardian"), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("target/")),
        ".gitignore: {paths:?}"
    );
    assert!(d["total_files"].as_u64().unwrap() > 100);
    assert!(d["next_cursor"].is_string() && d["snapshot_hash"].is_string());
    let top = &d["files"][0]["top"][0];
    assert!(
        top["line"].as_u64().unwrap() >= 1 && top["kind"].is_string(),
        "{top}"
    );
}

#[test]
fn cursor_pages_then_a_changed_tree_refuses_the_cursor() {
    let (mut a, s) = agent_in(None);
    let ws = a.workspace.clone();
    for i in 0..70 {
        write(
            &ws,
            &format!("src/m{i:02}.rs"),
            format!("pub fn f{i}() {{}}\n").as_bytes(),
        );
    }
    let first = code_map(&mut a, &s, json!({"operation": "outline"}));
    let d = sc(&first)["data"].clone();
    assert_eq!(d["files"].as_array().unwrap().len(), 30);
    assert_eq!(d["total_files"], 70);
    let cursor = d["next_cursor"].as_str().unwrap().to_string();
    let second = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "cursor": cursor}),
    );
    let d2 = &sc(&second)["data"];
    assert_eq!(d2["offset"], 30);
    assert_eq!(d2["snapshot_hash"], d["snapshot_hash"]);
    let seen: Vec<&Value> = d["files"]
        .as_array()
        .unwrap()
        .iter()
        .chain(d2["files"].as_array().unwrap())
        .collect();
    let mut paths: Vec<&str> = seen.iter().map(|f| f["path"].as_str().unwrap()).collect();
    paths.sort_unstable();
    paths.dedup();
    assert_eq!(paths.len(), 60, "pages do not overlap");
    // An edit makes a new snapshot: the old cursor is refused, with a way back.
    write(&ws, "src/m00.rs", b"pub fn changed() {}\n");
    let stale = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "cursor": cursor}),
    );
    assert_eq!(stale["isError"], true);
    let e = sc(&stale);
    assert_eq!(e["errorCode"], "stale_cursor", "{e}");
    assert_eq!(e["nextAction"]["tool"], "CodeMap");
    assert!(e["nextAction"]["arguments"].get("cursor").is_none());
    assert_ne!(e["data"]["snapshot_hash"], d["snapshot_hash"]);
    let forged = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "cursor": "cm1.zz.1"}),
    );
    assert_eq!(sc(&forged)["errorCode"], "invalid_cursor");
}

#[test]
fn references_skip_strings_and_comments_and_list_definitions_first() {
    let (mut a, s) = agent_in(None);
    let ws = a.workspace.clone();
    write(
        &ws,
        "src/lib.rs",
        b"// target in a comment\nfn user() { let t = \"target\"; target(); }\npub fn target() {}\n",
    );
    write(
        &ws,
        "app.py",
        b"# target\nfrom lib import target\nprint('target')\ntarget()\n",
    );
    write(&ws, "notes.md", b"target target target\n");
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "references", "name": "target"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let d = &sc(&r)["data"];
    let occ: Vec<String> = d["occurrences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{}:{}:{}",
                o["path"].as_str().unwrap(),
                o["line"],
                o["definition"]
            )
        })
        .collect();
    assert_eq!(
        occ,
        [
            "src/lib.rs:3:\"function\"",
            "app.py:2:null",
            "app.py:4:null",
            "src/lib.rs:2:null",
        ]
    );
    // One file only.
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "references", "name": "target", "path": "app.py"}),
    );
    assert_eq!(sc(&r)["data"]["total"], 2);
    // Bad names are refused before anything is read.
    for name in [String::new(), "x".repeat(10 * 1024), "a.b".into()] {
        let r = code_map(&mut a, &s, json!({"operation": "references", "name": name}));
        assert_eq!(sc(&r)["errorCode"], "invalid_tool_input", "{r}");
    }
    let r = code_map(&mut a, &s, json!({"operation": "references"}));
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input");
}

#[test]
fn unsupported_binary_large_and_invalid_utf8_files() {
    let (mut a, s) = agent_in(None);
    let ws = a.workspace.clone();
    write(&ws, "README.md", b"# readme\n");
    write(&ws, "blob.c", b"int f(void) { return 0; }\0\x01\x02");
    write(&ws, "image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    write(
        &ws,
        "latin1.rs",
        b"// caf\xe9\nfn after_bad_bytes() {}\nconst S: &str = \"\xff\xfe\";\n",
    );
    write(&ws, "big.rs", &vec![b'\n'; 2 * 1024 * 1024 + 1]);
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "README.md"}),
    );
    let e = sc(&r);
    assert_eq!(
        (
            r["isError"].clone(),
            e["data"]["language_supported"].clone()
        ),
        (json!(false), json!(false))
    );
    assert_eq!(e["nextAction"]["tool"], "ReadFiles");
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "blob.c"}),
    );
    assert_eq!(sc(&r)["data"]["binary"], true);
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "latin1.rs"}),
    );
    let names: Vec<&str> = sc(&r)["data"]["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["after_bad_bytes", "S"]);
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "big.rs"}),
    );
    assert_eq!(sc(&r)["data"]["too_large"], true);
    // The map lists text files (large ones flagged) and leaves binaries out.
    let r = code_map(&mut a, &s, json!({"operation": "outline"}));
    let d = &sc(&r)["data"];
    let paths: Vec<&str> = d["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        !paths.contains(&"blob.c") && !paths.contains(&"image.png"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"latin1.rs") && paths.contains(&"README.md") && paths.contains(&"big.rs")
    );
    assert_eq!(d["skipped"]["binary"], 2);
}

#[test]
fn paths_outside_the_workspace_and_symlinks_out_are_refused() {
    let (mut a, s) = agent_in(None);
    let ws = a.workspace.clone();
    let outside = a.dir.path().join("outside");
    write(&outside, "secret.rs", b"fn secret() {}\n");
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.rs"), ws.join("file_link.rs")).unwrap();
    write(&ws, "ok.rs", b"fn ok() {}\n");
    for path in ["/etc", "link", "file_link.rs", "../outside/secret.rs"] {
        let r = code_map(&mut a, &s, json!({"operation": "outline", "path": path}));
        assert_eq!(
            sc(&r)["errorCode"],
            "path_outside_allowed_roots",
            "{path}: {r}"
        );
    }
    // The walk never follows a symlink: the linked tree is not in the map or the search.
    let r = code_map(&mut a, &s, json!({"operation": "outline"}));
    let d = &sc(&r)["data"];
    assert_eq!(d["total_files"], 1, "{d}");
    assert_eq!(d["skipped"]["symlinks"], 2);
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "references", "name": "secret"}),
    );
    assert_eq!(sc(&r)["data"]["total"], 0);
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "missing.rs"}),
    );
    assert_eq!(sc(&r)["errorCode"], "file_not_found");
}

#[test]
fn gitignore_is_honoured() {
    let (mut a, s) = agent_in(None);
    let ws = a.workspace.clone();
    write(&ws, ".gitignore", b"build/\n*.gen.rs\n!keep.gen.rs\n");
    write(&ws, "src/sub/.gitignore", b"local.rs\n");
    for f in [
        "src/a.rs",
        "build/out.rs",
        "src/x.gen.rs",
        "src/keep.gen.rs",
        "src/sub/local.rs",
        "src/sub/b.rs",
    ] {
        write(&ws, f, b"fn f() {}\n");
    }
    let r = code_map(&mut a, &s, json!({"operation": "outline"}));
    let mut paths: Vec<String> = sc(&r)["data"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            ".gitignore",
            "src/a.rs",
            "src/keep.gen.rs",
            "src/sub/.gitignore",
            "src/sub/b.rs"
        ]
    );
}

/// Issue 17: a directory of 100,000 files gives a bounded answer, promptly.
#[test]
fn a_directory_of_100_000_files_gives_a_bounded_page() {
    let (mut a, s) = agent_in(None);
    let dir = a.workspace.join("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..100_000 {
        std::fs::write(dir.join(format!("f{i:06}.txt")), b"").unwrap();
    }
    let r = code_map(&mut a, &s, json!({"operation": "outline", "path": "many"}));
    assert_eq!(r["isError"], false, "{r}");
    let d = &sc(&r)["data"];
    assert_eq!(d["files"].as_array().unwrap().len(), 30);
    assert!(d["total_files"].as_u64().unwrap() <= 100_000);
    assert!(text(&r).len() < 32 * 1024);
}

/// The server's own state never appears in a map or a search, even when the workspace
/// holds it.
#[test]
fn the_servers_own_state_is_never_walked() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    write(&ws, "src/app.rs", b"fn app() { winx_secret_name(); }\n");
    let mut a = Agent::spawn_with(Opts {
        env: &[("WINX_RUNTIME", "embedded")],
        state: Some(ws.join("state")),
        workspace: Some(ws.clone()),
        ..Default::default()
    });
    let s = a.first_call();
    write(&ws, "state/planted.rs", b"fn winx_secret_name() {}\n");
    let r = code_map(&mut a, &s, json!({"operation": "outline"}));
    let paths: Vec<&str> = sc(&r)["data"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["src/app.rs"], "{r}");
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "references", "name": "winx_secret_name"}),
    );
    assert_eq!(sc(&r)["data"]["total"], 1, "{r}");
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "state/planted.rs"}),
    );
    assert_eq!(sc(&r)["errorCode"], "path_outside_allowed_roots", "{r}");
}

/// A missing path names where the file may be (issue 38 item 11): a file of the same name
/// elsewhere in the workspace, else what its nearest existing directory holds. And a
/// references answer says why files were skipped unread.
#[test]
fn a_missing_path_suggests_the_nearest_existing_ones_and_skips_are_explained() {
    let (mut a, s) = agent_in(None);
    let ws = a.workspace.clone();
    write(&ws, "src/bin/tool/main.rs", b"fn main() { helper(); }\n");
    write(&ws, "src/lib.rs", b"pub fn helper() {}\n");
    write(&ws, "src/other.rs", b"pub fn unrelated() {}\n");
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "src/main.rs"}),
    );
    assert_eq!(sc(&r)["errorCode"], "file_not_found", "{r}");
    assert!(
        sc(&r)["message"]
            .as_str()
            .unwrap()
            .contains("src/bin/tool/main.rs"),
        "{r}"
    );
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "outline", "path": "src/nothing/x.rs"}),
    );
    assert!(
        sc(&r)["message"].as_str().unwrap().contains("src/lib.rs"),
        "{r}"
    );
    // The first search indexes every file; the second skips the ones without the name.
    for _ in 0..2 {
        code_map(
            &mut a,
            &s,
            json!({"operation": "references", "name": "helper"}),
        );
    }
    let r = code_map(
        &mut a,
        &s,
        json!({"operation": "references", "name": "helper"}),
    );
    assert!(
        sc(&r)["data"]["files_skipped_unread"].as_u64().unwrap() > 0,
        "{r}"
    );
    assert!(text(&r).contains("skipped unread"), "{r}");
}
