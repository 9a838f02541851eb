//! What the history keeps of a command's output is the program's output after terminal
//! rendering (escape sequences, CR, erasing), and nothing else removed (seed 000; issue
//! 37 item 7): blanks a program writes at a line's end survive, and a mixed-UTF-8 output
//! paged back through `Execution read` reassembles byte for byte.

use crate::support;

use serde_json::json;
use support::history::{id_of, read_all, spawn_with, until_recorded};
use support::{sc, text};

/// Lines of a 1-, 2-, 3- and 4-byte character each, and a trailing space.
fn line(i: usize) -> String {
    format!("L{i:07} \u{e9}\u{20ac}\u{1f600}\u{e9}\u{20ac}\u{1f600} \n")
}

#[test]
fn trailing_blanks_survive_and_paged_utf8_reassembles_byte_exact() {
    for rt in ["daemon", "embedded"] {
        let mut a = spawn_with(rt, &[]);
        let s = a.first_call();
        let n = 13_000; // ~390 KB: several 64 KiB pages, pages cut inside characters
        let cmd = format!(
            "for i in $(seq 0 {}); do printf 'L%07d \u{e9}\u{20ac}\u{1f600}\u{e9}\u{20ac}\u{1f600} \\n' $i; done; printf 'tab\\t \\n'",
            n - 1
        );
        let r = a.bash(&s, json!({"command": cmd}));
        assert_eq!(sc(&r)["data"]["exit_code"], 0, "{rt}: {r}");
        // The inline answer keeps the trailing blanks of its last lines too.
        assert!(
            text(&r).contains(&format!("{}tab\t \n", line(n - 1))),
            "{rt}: {}",
            &text(&r)[text(&r).len().saturating_sub(300)..]
        );
        let id = id_of(&r);
        until_recorded(&mut a, &s, &id);
        let got = read_all(&mut a, &s, &id);
        let want: String = (0..n).map(line).collect::<String>() + "tab\t \n";
        assert_eq!(got.len(), want.len(), "{rt}: retained length");
        assert!(
            got == want,
            "{rt}: the paged output differs from what was printed"
        );
    }
}

/// The retention cap holds exactly (1 MiB by default): the kept window is never a chunk
/// over it, and the pruned head is reported. Before the fix a straddling 64 KiB chunk was
/// kept whole (1,092,453 to 1,157,989 bytes retained).
#[test]
fn the_output_retention_cap_holds_exactly() {
    let cap = 1024 * 1024;
    let mut a = spawn_with("daemon", &[]);
    let s = a.first_call();
    // 3 MiB of 3-byte characters and newlines: cuts can fall inside a character.
    let cmd = format!("yes '{}' | head -n 24576", "\u{20ac}".repeat(42));
    let r = a.bash(&s, json!({"command": cmd}));
    assert_eq!(sc(&r)["data"]["exit_code"], 0, "{r}");
    let id = id_of(&r);
    until_recorded(&mut a, &s, &id);
    let g = support::history::exec(&mut a, &s, json!({"type": "get", "execution_id": id}));
    let out = &sc(&g)["data"]["output"];
    let kept = out["retained_bytes"].as_i64().unwrap();
    assert!(
        kept <= cap && kept >= cap - 3,
        "retained {kept} of a {cap} cap: {out}"
    );
    assert_eq!(out["head_truncated"], true, "{out}");
    let first = support::history::exec(
        &mut a,
        &s,
        json!({"type": "read", "execution_id": id, "page_bytes": 4096}),
    );
    let page = &sc(&first)["data"]["page"];
    assert!(
        page["text"].as_str().unwrap().starts_with('\u{20ac}')
            || page["text"].as_str().unwrap().starts_with('\n'),
        "{page}"
    );
}

/// Seed 000: an `observe` shows each item's output once, in its page: the structured
/// result carries no concatenated copy, while the text block (what other hosts show)
/// still has every page.
#[test]
fn observe_output_appears_once_in_the_item_pages() {
    let mut a = spawn_with("embedded", &[]);
    let s = a.first_call();
    let r = a.bash(&s, json!({"command": "echo observed-once"}));
    let id = id_of(&r);
    until_recorded(&mut a, &s, &id);
    let o = support::history::exec(
        &mut a,
        &s,
        json!({"type": "observe", "items": [{"execution_id": id}]}),
    );
    let structured = sc(&o);
    assert!(structured.get("text").is_none(), "{o}");
    let page = structured["data"]["items"][0]["page"]["text"]
        .as_str()
        .unwrap();
    assert_eq!(page.matches("observed-once").count(), 1, "{o}");
    assert!(text(&o).contains("observed-once"), "{o}");
}
