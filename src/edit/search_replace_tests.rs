//! Unit and property tests of the SEARCH/REPLACE parser and matcher, on plain strings.

use super::*;
use proptest::prelude::*;

/// One block in the canonical format; an empty `replace` is a deletion.
fn block(search: &str, replace: &str) -> String {
    let replace: String = replace.lines().map(|l| format!("{l}\n")).collect();
    format!("<<<<<<< SEARCH\n{search}\n=======\n{replace}>>>>>>> REPLACE\n")
}

fn apply(content: &str, text: &str) -> Result<Applied, MatchError> {
    apply_blocks(content, &parse_blocks(text).expect("blocks parse"))
}

fn applied(content: &str, text: &str) -> Applied {
    apply(content, text).expect("blocks apply")
}

/// The content after applying, and the tolerance the first block matched at.
fn edit(content: &str, text: &str) -> (String, Tolerance) {
    let out = applied(content, text);
    (out.content, out.matched[0].tolerance)
}

fn closest_of(err: &MatchError) -> &Closest {
    match err {
        MatchError::NotFound {
            closest: Some(c), ..
        } => c,
        other => panic!("expected a miss with a closest region, got {other:?}"),
    }
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|l| l.to_string()).collect()
}

// ---- parse_blocks ----

#[test]
fn blocks_parse_between_prose_with_loose_markers() {
    let text = "Here is the change:\n\n```\n<<<<<<<<< SEARCH  \na\n  two\n=====\nb\n\
                >>>>>  replace\n```\nthen another\n<<<<<<< search\nc\n\
                =========   \n>>>>>>>REPLACE\n";
    let blocks = parse_blocks(text).unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(
        (&blocks[0].search, &blocks[0].replace),
        (&lines(&["a", "  two"]), &lines(&["b"]))
    );
    assert_eq!(
        (&blocks[1].search, blocks[1].replace.len()),
        (&lines(&["c"]), 0)
    );
    let canonical = format!("{}{}", block("a\n  two", "b"), block("c", ""));
    assert_eq!(blocks, parse_blocks(&canonical).unwrap());
    let crlf = canonical.replace('\n', "\r\n");
    assert_eq!(blocks, parse_blocks(&crlf).unwrap());
}

#[test]
fn marker_look_alikes_are_content() {
    // A divider inside REPLACE, an indented run, runs shorter than five.
    let blocks = parse_blocks(&block("Title", "Title\n=======")).unwrap();
    assert_eq!(blocks[0].replace, ["Title", "======="]);
    let blocks = parse_blocks(&block("  =======\nx", "y")).unwrap();
    assert_eq!(blocks[0].search, ["  =======", "x"]);
    let short = "<<<< SEARCH\na\n==\n>>>> REPLACE";
    assert_eq!(parse_blocks(short), Err(FormatError::NoBlock));
}

#[test]
fn every_malformation_is_named_with_its_lines() {
    use FormatError as E;
    let two = "<<<<<<< SEARCH\na\n=======\nb\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n";
    let cases: [(&str, FormatError, &str); 10] = [
        ("", E::NoBlock, "no `<<<<<<< SEARCH` line"),
        ("prose\n=======\n", E::NoBlock, "no `<<<<<<< SEARCH` line"),
        (
            "old\n=======\nnew\n>>>>>>> REPLACE\n",
            E::ReplaceWithoutSearch { line: 4 },
            "line 4: `>>>>>>> REPLACE` without",
        ),
        (
            "<<<<<<< SEARCH\na\n<<<<<<< SEARCH\nb\n",
            E::NestedSearch { opened: 1, line: 3 },
            "line 3: SEARCH inside the block from line 1",
        ),
        (
            "x\n<<<<<<< SEARCH\n\n  \n=======\nnew\n>>>>>>> REPLACE\n",
            E::EmptySearch { opened: 2 },
            "line 2: the SEARCH section is empty",
        ),
        (
            "<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n",
            E::EmptySearch { opened: 1 },
            "line 1: the SEARCH section is empty",
        ),
        (
            "<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n",
            E::MissingDivider {
                opened: 1,
                found: Some(3),
            },
            "before the REPLACE marker at line 3",
        ),
        (
            "<<<<<<< SEARCH\na\n",
            E::MissingDivider {
                opened: 1,
                found: None,
            },
            "before the end of the text",
        ),
        (
            two,
            E::MissingReplace {
                opened: 1,
                found: Some(5),
            },
            "before the next SEARCH marker at line 5",
        ),
        (
            "<<<<<<< SEARCH\na\n=======\nb\n",
            E::MissingReplace {
                opened: 1,
                found: None,
            },
            "REPLACE` before the end",
        ),
    ];
    assert_eq!(
        parse_blocks(FormatError::help()).unwrap().len(),
        1,
        "the help is a valid block"
    );
    for (text, expected, needle) in cases {
        let err = parse_blocks(text).unwrap_err();
        assert_eq!(err, expected, "{text:?}");
        let message = err.to_string();
        assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        assert!(
            !message.contains("=======\n"),
            "the format is help()'s job: {message}"
        );
        assert_eq!(err.code(), "search_block_malformed");
    }
}

// ---- apply_blocks: tolerance levels ----

#[test]
fn an_exact_match_replaces_the_lines() {
    let out = applied("a\nb\nc\n", &block("b", "B1\nB2"));
    assert_eq!(out.content, "a\nB1\nB2\nc\n");
    let info = MatchInfo {
        block_index: 0,
        start_line: 2,
        end_line: 2,
        tolerance: Tolerance::Exact,
    };
    assert_eq!(out.matched, [info]);
}

#[test]
fn trailing_whitespace_is_ignored() {
    let text = block("fn a() {\n    x", "fn b() {\n    y");
    let expected = (
        "fn b() {\n    y\n}\n".to_string(),
        Tolerance::TrailingWhitespace,
    );
    assert_eq!(edit("fn a() {  \n    x\t\n}\n", &text), expected);
}

#[test]
fn a_smaller_indentation_matches_and_replace_is_reindented() {
    let file = "impl A {\n    fn f() {\n        one();\n\n        two();\n    }\n}\n";
    let text = block(
        "fn f() {\n    one();\n\n    two();\n}",
        "fn f() {\n    three();\n\n}",
    );
    let out = applied(file, &text);
    assert_eq!(
        out.content,
        "impl A {\n    fn f() {\n        three();\n\n    }\n}\n"
    );
    assert_eq!((out.matched[0].start_line, out.matched[0].end_line), (2, 6));
    assert_eq!(out.matched[0].tolerance, Tolerance::Indentation);
}

#[test]
fn a_larger_indentation_matches_and_replace_is_dedented() {
    let text = block(
        "        def f():\n            return 1",
        "        def g():\n            return 2\n  # less indented than the offset",
    );
    let expected = (
        "def g():\n    return 2\n# less indented than the offset\n".to_string(),
        Tolerance::Indentation,
    );
    assert_eq!(edit("def f():\n    return 1\n", &text), expected);
}

#[test]
fn tab_indentation_is_shifted_by_tabs() {
    let file = "func f() {\n\t\tif x {\n\t\t\ty()\n\t\t}\n}\n";
    let (content, tolerance) = edit(
        file,
        &block("\tif x {\n\t\ty()\n\t}", "\tif z {\n\t\tw()\n\t}"),
    );
    assert_eq!(content, "func f() {\n\t\tif z {\n\t\t\tw()\n\t\t}\n}\n");
    assert_eq!(tolerance, Tolerance::Indentation);
}

#[test]
fn mixed_or_uneven_indentation_is_no_offset() {
    let cases = [
        ("\tx = 1\n", "    x = 1"),
        ("    a\n        b\n", "a\nb"),
        ("  a\n  b\n", "a\n"),
    ];
    for (file, search) in cases {
        let err = apply(file, &block(search, "z")).unwrap_err();
        assert_eq!(err.code(), "search_block_not_found", "{file:?}");
    }
}

#[test]
fn leaked_line_numbers_are_stripped_from_search_and_replace() {
    let file = "fn main() {\n    let x = 1;\n    done();\n}\n";
    let cases = [
        (
            "2     let x = 1;\n3     done();",
            "2     let x = 2;\n3     done();",
        ),
        (
            "  2 |     let x = 1;\n  3 |     done();",
            "  2 |     let x = 2;\n    done();",
        ),
        (
            "2:    let x = 1;\n3:    done();",
            "2:    let x = 2;\n3:    done();",
        ),
        (
            "     2\t    let x = 1;\n     3\t    done();",
            "    let x = 2;\n    done();",
        ),
        (
            "     2→    let x = 1;\n     3→    done();",
            "     2→    let x = 2;\n     3→    done();",
        ),
    ];
    for (search, replace) in cases {
        let expected = (
            "fn main() {\n    let x = 2;\n    done();\n}\n".into(),
            Tolerance::LineNumbers,
        );
        assert_eq!(edit(file, &block(search, replace)), expected, "{search}");
    }
}

#[test]
fn numbered_and_unnumbered_blank_lines_both_count() {
    assert_eq!(
        applied("a\n\nb\n", &block("10 a\n11\n12 b", "10 a\n11 \n12 c")).content,
        "a\n\nc\n"
    );
    assert_eq!(
        applied("a\n\nb\n", &block("10 a\n\n12 b", "x")).content,
        "x\n"
    );
}

#[test]
fn numbers_that_skip_or_change_style_are_content() {
    for search in ["3 a\n7 b", "3 a\n4: b"] {
        let err = apply("a\nb\n", &block(search, "c")).unwrap_err();
        assert!(matches!(err, MatchError::NotFound { .. }), "{search}");
    }
}

#[test]
fn replace_lines_in_another_number_style_are_content() {
    let file = "m = {\n    1: 'one',\n}\n";
    let search = "  1 | m = {\n  2 |     1: 'one',\n  3 | }";
    let replace = "  1 | m = {\n    0: 'zero',\n  2 |     1: 'one',\n42\n  3 | }";
    let out = applied(file, &block(search, replace));
    assert_eq!(out.content, "m = {\n    0: 'zero',\n    1: 'one',\n42\n}\n");
}

#[test]
fn typographic_quotes_and_dashes_compare_as_ascii() {
    let file = "say(“hi”) — ok\nkeep ‘this’ – here\n";
    let (content, tolerance) = edit(file, &block("say(\"hi\") - ok", "say(\"bye\")"));
    assert_eq!(
        content, "say(\"bye\")\nkeep ‘this’ – here\n",
        "the rest keeps its typography"
    );
    assert_eq!(tolerance, Tolerance::Typography);
    assert_eq!(
        applied("it's -- \"x\"\n", &block("it’s –— “x”", "y")).content,
        "y\n"
    );
}

#[test]
fn typography_combines_with_indentation_and_numbers() {
    let file = "    msg = ‘a’\n    end\n";
    let text = block("1 msg = 'a'\n2 end", "1 msg = 'b'\n2 end");
    assert_eq!(
        edit(file, &text),
        ("    msg = 'b'\n    end\n".into(), Tolerance::Typography)
    );
}

#[test]
fn the_strictest_matching_level_wins() {
    // Exact matches once; ignoring trailing whitespace would match twice.
    assert_eq!(
        edit("x  \ny\nx\n", &block("x", "z")),
        ("x  \ny\nz\n".into(), Tolerance::Exact)
    );
}

// ---- apply_blocks: line endings ----

#[test]
fn crlf_files_keep_crlf() {
    assert_eq!(
        applied("a\r\nb\r\nc\r\n", &block("b", "x\ny")).content,
        "a\r\nx\r\ny\r\nc\r\n"
    );
    let text = block("b", "x\ny").replace('\n', "\r\n");
    assert_eq!(applied("a\r\nb\r\nc", &text).content, "a\r\nx\r\ny\r\nc");
    let mixed = applied("a\r\nb\nc\r\nd\r\n", &block("c", "C"));
    assert_eq!(
        mixed.content, "a\r\nb\nC\r\nd\r\n",
        "other lines keep their own endings"
    );
}

#[test]
fn a_missing_final_newline_stays_missing() {
    assert_eq!(applied("a\nb", &block("b", "x\ny")).content, "a\nx\ny");
    assert_eq!(applied("a\nb\n", &block("b", "x\ny")).content, "a\nx\ny\n");
    assert_eq!(applied("only", &block("only", "new")).content, "new");
}

#[test]
fn an_empty_replace_deletes_the_lines() {
    let out = applied("a\nb\nc\nd\n", &block("b\nc", ""));
    assert_eq!(out.content, "a\nd\n");
    assert_eq!((out.matched[0].start_line, out.matched[0].end_line), (2, 3));
    let cases = [("a\nb", "a"), ("a\r\nb", "a"), ("a\nb\n", "a\n"), ("b", "")];
    for (file, expected) in cases {
        assert_eq!(applied(file, &block("b", "")).content, expected, "{file:?}");
    }
}

// ---- apply_blocks: several blocks ----

#[test]
fn blocks_apply_in_order_and_report_each_match() {
    let text = format!("{}\nprose\n{}", block("c", "C"), block("a", "A"));
    let out = applied("a\nb\nc\n", &text);
    assert_eq!(out.content, "A\nb\nC\n");
    let spans: Vec<_> = out
        .matched
        .iter()
        .map(|m| (m.block_index, m.start_line))
        .collect();
    assert_eq!(spans, [(0, 3), (1, 1)]);
}

#[test]
fn a_replacement_can_create_what_a_later_block_matches() {
    let text = format!(
        "{}{}",
        block("old", "new\nmiddle"),
        block("new\nmiddle", "done")
    );
    assert_eq!(applied("x\nold\ny\n", &text).content, "x\ndone\ny\n");
    let reversed = format!("{}{}", block("new", "done"), block("old", "new"));
    let err = apply("x\nold\n", &reversed).unwrap_err();
    assert!(matches!(err, MatchError::NotFound { block_index: 0, .. }));
}

#[test]
fn a_later_failure_returns_no_content() {
    let text = format!("{}{}", block("a", "A"), block("zzz", "Z"));
    let err = apply("a\nb\n", &text).unwrap_err();
    assert_eq!(err.block_index(), 1);
    assert!(
        err.to_string()
            .starts_with("SEARCH block 2 matches nothing"),
        "{err}"
    );
}

// ---- apply_blocks: refusals ----

#[test]
fn ambiguous_blocks_are_refused_with_every_start_line() {
    let err = apply("x\n}\ny\n}\n", &block("}", "]")).unwrap_err();
    assert_eq!(
        err,
        MatchError::Ambiguous {
            block_index: 0,
            lines: vec![2, 4]
        }
    );
    assert_eq!(err.code(), "search_block_ambiguous");
    assert!(
        err.to_string()
            .contains("matches 2 places (lines 2, 4); no block"),
        "{err}"
    );
    let looser = apply("    a\n  a\n", &block("a", "b")).unwrap_err();
    assert_eq!(
        looser,
        MatchError::Ambiguous {
            block_index: 0,
            lines: vec![1, 2]
        }
    );
}

#[test]
fn long_ambiguity_lists_are_cut_in_the_message() {
    let err = apply(&"}\n".repeat(30), &block("}", "")).unwrap_err();
    let MatchError::Ambiguous { lines, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(lines.len(), 30);
    assert!(err.to_string().contains("9, 10, …)"), "{err}");
}

#[test]
fn a_miss_reports_the_closest_region_with_the_diverging_line_marked() {
    let file = "use std::io;\n\nfn main() {\n    let x = 1;\n    let y = 2;\n    go(x, y);\n}\n";
    let err = apply(
        file,
        &block("fn main() {\n    let x = 1;\n    let y = 3;", "z"),
    )
    .unwrap_err();
    let c = closest_of(&err);
    assert_eq!((c.start_line, c.end_line), (3, 5));
    assert!(c.similarity > 0.8 && c.similarity < 1.0, "{}", c.similarity);
    assert_eq!(
        c.diff,
        "  fn main() {\n      let x = 1;\n-     let y = 3;\n+     let y = 2;\n"
    );
    let message = err.to_string();
    assert!(
        message.contains("lines 3-5") && message.contains(&c.diff),
        "{message}"
    );
    assert_eq!(err.code(), "search_block_not_found");
}

#[test]
fn a_miss_by_indentation_alone_marks_the_indented_lines() {
    let err = apply(
        "if a:\n    b\n      c\n",
        &block("if a:\n    b\n    c", "z"),
    )
    .unwrap_err();
    assert_eq!(
        closest_of(&err).diff,
        "  if a:\n      b\n-     c\n+       c\n"
    );
}

#[test]
fn a_miss_with_nothing_similar_has_no_closest_region() {
    for (file, search) in [("alpha\nbeta\n", "completely different"), ("", "a\nb")] {
        let err = apply(file, &block(search, "x")).unwrap_err();
        assert_eq!(
            err,
            MatchError::NotFound {
                block_index: 0,
                closest: None
            }
        );
        assert!(err.to_string().contains("No similar region"));
    }
}

#[test]
fn the_closest_region_is_found_in_a_file_past_the_scan_budget() {
    let search: Vec<String> = (0..50)
        .map(|k| format!("special_call_{k}(argument, {k});"))
        .collect();
    let mut file: Vec<String> = (0..60_000).map(|i| format!("x{i}")).collect();
    let at = 41_234;
    file.splice(at..at + 50, search.iter().cloned());
    file[at + 20] = "special_call_20(argument, 99);".to_string();
    assert!(
        file.len() * search.len() > 2 * CLOSEST_PAIR_BUDGET,
        "the sampled path runs"
    );
    let err = apply(&file.join("\n"), &block(&search.join("\n"), "x")).unwrap_err();
    let c = closest_of(&err);
    assert_eq!((c.start_line, c.end_line), (at + 1, at + 50));
    assert!(
        c.diff.contains("+ special_call_20(argument, 99);"),
        "{}",
        c.diff
    );
}

#[test]
fn long_diffs_are_cut_short() {
    let file: String = (0..100).map(|i| format!("value_{i} = {i}\n")).collect();
    let search: Vec<String> = (0..100)
        .map(|i| format!("value_{i} = {}", i + 1000))
        .collect();
    let err = apply(&file, &block(&search.join("\n"), "x")).unwrap_err();
    let diff = &closest_of(&err).diff;
    assert!(diff.lines().count() <= MAX_DIFF_LINES + 1);
    assert!(diff.ends_with("(diff cut short)\n"));
}

// ---- properties ----

fn line() -> impl Strategy<Value = String> {
    "[a-z]{1,6}( [a-z]{1,3})?"
}

proptest! {
    #[test]
    fn a_unique_line_always_applies_and_nothing_else_changes(
        lines in prop::collection::vec(line(), 1..40),
        pick in any::<prop::sample::Index>(),
        replace in "[A-Z]{1,8}( [A-Z]{1,4})?",
        crlf in any::<bool>(),
        final_newline in any::<bool>(),
    ) {
        let i = pick.index(lines.len());
        prop_assume!(lines.iter().filter(|l| **l == lines[i]).count() == 1);
        let eol = if crlf { "\r\n" } else { "\n" };
        let join = |v: &[String]| v.join(eol) + if final_newline { eol } else { "" };
        let out = applied(&join(&lines), &block(&lines[i], &replace));
        let mut expected = lines.clone();
        expected[i] = replace.clone();
        prop_assert!(out.content.contains(&replace));
        prop_assert_eq!(out.content, join(&expected));
        prop_assert_eq!(out.matched[0].start_line, i + 1);
        prop_assert_eq!(out.matched[0].tolerance, Tolerance::Exact);
    }

    #[test]
    fn a_uniform_indentation_offset_carries_over_to_replace(
        body in prop::collection::vec(line(), 1..8),
        replace in prop::collection::vec(line(), 0..5),
        offset in prop::sample::select(vec!["  ", "    ", "\t", "\t\t"]),
    ) {
        // Numbered so every line is unique and no window repeats at any level.
        let body: Vec<String> = body.iter().enumerate().map(|(k, l)| format!("{l}{k}")).collect();
        let file: String = body.iter().map(|l| format!("{offset}{l}\n")).collect();
        let text = block(&body.join("\n"), &replace.join("\n"));
        let out = applied(&format!("top\n{file}end\n"), &text);
        let moved: String = replace.iter().map(|l| format!("{offset}{l}\n")).collect();
        prop_assert_eq!(out.content, format!("top\n{moved}end\n"));
        prop_assert_eq!(out.matched[0].tolerance, Tolerance::Indentation);
    }

    #[test]
    fn parse_blocks_never_panics_on_any_text(text in any::<String>()) {
        let _ = parse_blocks(&text);
    }

    #[test]
    fn parse_and_apply_never_panic_on_marker_soup(
        lines in prop::collection::vec(prop_oneof![
            Just("<<<<<<< SEARCH".to_string()),
            Just("=======".to_string()),
            Just(">>>>>>> REPLACE".to_string()),
            Just(String::new()),
            "\\PC{0,8}",
            "[ \t]{0,3}[0-9]{1,3}[ :|\t]?[a-z’“–]{0,4}",
        ], 0..24),
        content in "([ \t]{0,2}[a-z0-9’“–]{0,5}(\r?\n)?){0,20}",
    ) {
        match parse_blocks(&lines.join("\n")) {
            Ok(blocks) => {
                prop_assert!(!blocks.is_empty());
                prop_assert!(blocks.iter().all(|b| b.search.iter().any(|l| !l.trim().is_empty())));
                let _ = apply_blocks(&content, &blocks);
            }
            Err(e) => prop_assert!(e.to_string().starts_with("malformed SEARCH/REPLACE text: ")),
        }
    }
}
