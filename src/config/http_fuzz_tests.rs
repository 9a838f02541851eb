//! Property tests for the principal config parser (`principals::load_principal_config`).

use super::*;
use proptest::prelude::*;
use std::os::unix::fs::PermissionsExt;

const TOKEN_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const TOKEN_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const TOKEN_C: &str = "cccccccccccccccccccccccccccccccccccccccc";
const SHORT: &str = "short";

fn env(var: &str) -> Option<String> {
    match var {
        "TOK_A" => Some(TOKEN_A.into()),
        "TOK_B" => Some(TOKEN_B.into()),
        "SHORT" => Some(SHORT.into()),
        "SPACED" => Some(format!("{TOKEN_B} {TOKEN_B}")),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A directory holding the token files a config may name.
fn token_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("tok_a"), &format!("{TOKEN_A}\n"), 0o600);
    write(&d.join("tok_c"), TOKEN_C, 0o600);
    write(&d.join("short"), SHORT, 0o600);
    write(&d.join("open"), TOKEN_C, 0o644);
    std::fs::create_dir(d.join("dir")).unwrap();
    std::os::unix::fs::symlink(d.join("tok_c"), d.join("link")).unwrap();
    dir
}

fn arb_string_lit() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "alice", "Alice", "bob", "ci-runner_2", "alice", "bob", "carol", "", "bad name", "ünï", "a/b",
            "local", "Default",
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ])
        .prop_map(str::to_string),
        1 => any::<String>(),
    ]
    .prop_map(|s| format!("{s:?}")) // Rust debug quoting is valid TOML for most strings.
}

fn arb_entry() -> impl Strategy<Value = String> {
    let token_file = prop::sample::select(vec![
        "tok_a",
        "tok_c",
        "tok_a",
        "tok_c",
        "short",
        "open",
        "dir",
        "link",
        "missing",
        "/nonexistent/winx-fuzz",
    ]);
    let token_env = prop::sample::select(vec![
        "TOK_A", "TOK_B", "TOK_B", "SHORT", "SPACED", "EMPTY", "UNSET",
    ]);
    let profile = prop::sample::select(vec!["full", "coding", "read-only", "terminal", "bogus"]);
    let tools = proptest::collection::vec(
        prop::sample::select(vec![
            "Initialize",
            "ReadFiles",
            "BashCommand",
            "VerifyEdit",
            "Nope",
        ]),
        0..3,
    );
    let source = prop_oneof![
        3 => token_file.clone().prop_map(|f| (Some(f), None)),
        3 => token_env.clone().prop_map(|v| (None, Some(v))),
        1 => (token_file, token_env).prop_map(|(f, v)| (Some(f), Some(v))),
        1 => Just((None, None)),
    ];
    (
        prop_oneof![6 => arb_string_lit().prop_map(Some), 1 => Just(None)],
        source,
        proptest::option::of(profile),
        proptest::option::of(tools),
        prop_oneof![
            6 => Just(None),
            1 => prop::sample::select(vec!["extra = 1", "name = 1", "token_env = []"]).prop_map(Some),
        ],
    )
        .prop_map(|(name, (file, var), profile, tools, junk)| {
            let mut s = String::from("[[principals]]\n");
            if let Some(n) = name {
                s += &format!("name = {n}\n");
            }
            if let Some(f) = file {
                s += &format!("token_file = {f:?}\n");
            }
            if let Some(v) = var {
                s += &format!("token_env = {v:?}\n");
            }
            if let Some(p) = profile {
                s += &format!("tool_profile = {p:?}\n");
            }
            if let Some(t) = tools {
                s += &format!("allowed_tools = {t:?}\n");
            }
            if let Some(j) = junk {
                s += j;
                s += "\n";
            }
            s
        })
}

/// Distinct principals with distinct tokens: loads (short tokens only when weak_ok).
fn arb_valid_config() -> impl Strategy<Value = String> {
    let entries = vec![
        "name = \"alice\"\ntoken_file = \"tok_a\"\n",
        "name = \"bob\"\ntoken_env = \"TOK_B\"\ntool_profile = \"coding\"\n",
        "name = \"carol\"\ntoken_file = \"tok_c\"\nallowed_tools = [\"Initialize\", \"ReadFiles\"]\n",
        "name = \"dave-2\"\ntoken_env = \"SHORT\"\ntool_profile = \"read-only\"\n",
    ];
    prop::sample::subsequence(entries, 1..=4)
        .prop_shuffle()
        .prop_map(|v| v.iter().map(|e| format!("[[principals]]\n{e}\n")).collect())
}

/// TOML-ish text: structured principal lists (sometimes cut or spliced with garbage),
/// TOML fragments, and arbitrary text.
fn arb_config() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => arb_valid_config(),
        4 => (
            proptest::collection::vec(arb_entry(), 0..5),
            prop_oneof![3 => Just(None), 1 => (any::<prop::sample::Index>(), any::<String>()).prop_map(Some)],
        )
            .prop_map(|(entries, cut)| {
                let text = entries.concat();
                match cut {
                    None => text,
                    Some((at, junk)) => {
                        let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
                        let at = boundaries[at.index(boundaries.len())];
                        format!("{}{junk}", &text[..at])
                    }
                }
            }),
        2 => proptest::collection::vec(prop::sample::select(vec![
            "[[principals]]", "[principals]", "principals = []", "principals = 5", "[[other]]",
            "name = \"alice\"", "token_env = \"TOK_A\"", "token_file = \"tok_c\"", "= 1", "\"",
            "[", "]]", "name = '''", "\u{feff}", "\0", "# comment",
        ]), 0..8)
            .prop_map(|v| v.join("\n")),
        1 => any::<String>(),
    ]
}

fn token_digests(weak_ok: bool) -> Vec<[u8; 32]> {
    let mut t = vec![TOKEN_A, TOKEN_B, TOKEN_C];
    if weak_ok {
        t.push(SHORT);
    }
    t.iter().map(|t| token_digest(t.as_bytes())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    /// Any text loads to a valid principal list or to an error that names the file and
    /// never echoes a token; loaded principals have valid, distinct names and tokens.
    #[test]
    fn principal_config_is_total(
        text in arb_config(),
        weak_ok in any::<bool>(),
        mode in prop_oneof![4 => Just(0o600u32), 1 => prop::sample::select(vec![0o644u32, 0o400, 0o620, 0o602])],
    ) {
        let dir = token_dir();
        let path = dir.path().join("principals.toml");
        write(&path, &text, mode);
        let shown = path.display().to_string();
        match load_principal_config(&path, weak_ok, &env) {
            Err(e) => {
                prop_assert!(e.0.contains("principal config") && e.0.contains(&shown), "{}", e.0);
                for t in [TOKEN_A, TOKEN_B, TOKEN_C] {
                    prop_assert!(!e.0.contains(t), "token leaked: {}", e.0);
                }
                if mode & 0o022 != 0 {
                    prop_assert!(e.0.contains("writable by group or others"), "{}", e.0);
                }
            }
            Ok(list) => {
                prop_assert!(mode & 0o022 == 0);
                prop_assert!(!list.is_empty());
                prop_assert!(text.contains("principals"));
                let known = token_digests(weak_ok);
                for (i, p) in list.iter().enumerate() {
                    prop_assert!(!p.name.is_empty() && p.name.len() <= MAX_NAME_CHARS);
                    prop_assert!(p.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
                    prop_assert!(!RESERVED_NAMES.iter().any(|r| p.name.eq_ignore_ascii_case(r)));
                    prop_assert_eq!(&p.key, &format!("http:{}", p.name));
                    prop_assert!(known.contains(&p.token_digest));
                    for q in &list[..i] {
                        prop_assert!(!q.name.eq_ignore_ascii_case(&p.name));
                        prop_assert!(q.token_digest != p.token_digest);
                    }
                }
            }
        }
    }
}

#[test]
fn a_well_formed_config_loads() {
    let dir = token_dir();
    let path = dir.path().join("principals.toml");
    write(
        &path,
        "[[principals]]\nname = \"alice\"\ntoken_file = \"tok_a\"\n\n\
         [[principals]]\nname = \"bob\"\ntoken_env = \"TOK_B\"\nallowed_tools = [\"Initialize\"]\n",
        0o600,
    );
    let list = load_principal_config(&path, false, &env).unwrap();
    let names: Vec<&str> = list.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(list[0].token_digest, token_digest(TOKEN_A.as_bytes()));
}
