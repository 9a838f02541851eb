use super::*;
use proptest::prelude::*;

/// The identifiers of `src` lexed as `lang`, in order.
fn idents(lang: Language, src: &str) -> Vec<String> {
    let lx = lex(lang, src.as_bytes());
    (0..lx.len())
        .filter(|&i| lx.is_ident(i))
        .map(|i| lx.name(i))
        .collect()
}

#[test]
fn comments_and_strings_hide_code() {
    let src = "a /* b /* c */ d */ e // f\n\"g \\\" h\" 'i' j";
    // Rust nests block comments; `'i'` is a character.
    assert_eq!(idents(Language::Rust, src), ["a", "e", "j"]);
    // C does not nest: ` d */` is code again.
    assert_eq!(idents(Language::C, src), ["a", "d", "e", "j"]);
}

#[test]
fn raw_strings_and_lifetimes_in_rust() {
    let src =
        r####"let s = r#"fn fake() { "quoted" }"#; fn real<'a>(x: &'a str) -> char { 'x' }"####;
    assert_eq!(
        idents(Language::Rust, src),
        ["let", "s", "fn", "real", "x", "str", "char"]
    );
    let src = "let b = br##\"}\"##; let c = b'}'; let r = r#match;";
    assert_eq!(
        idents(Language::Rust, src),
        ["let", "b", "let", "c", "let", "r", "match"]
    );
}

#[test]
fn cpp_raw_strings_and_digit_separators() {
    let src = "auto s = R\"x(int fake() { )\" }\")x\"; int n = 1'000'000; int after;";
    assert_eq!(
        idents(Language::Cpp, src),
        ["auto", "s", "int", "n", "int", "after"]
    );
}

#[test]
fn template_literals_reopen_code_in_their_holes() {
    let src = "const t = `a ${ b + `c ${d}` } { e`; f(/re}`/g, g);";
    assert_eq!(
        idents(Language::JavaScript, src),
        ["const", "t", "b", "d", "f", "g"]
    );
    // A division is not a regular expression.
    assert_eq!(
        idents(Language::JavaScript, "x = a / b / c;"),
        ["x", "a", "b", "c"]
    );
}

#[test]
fn go_backquotes_and_java_text_blocks() {
    assert_eq!(idents(Language::Go, "s := `func x() {\n}` + y"), ["s", "y"]);
    let src = "String s = \"\"\"\n  class Fake {}\n  \"\"\"; int z;";
    assert_eq!(idents(Language::Java, src), ["String", "s", "int", "z"]);
}

#[test]
fn python_strings_and_logical_lines() {
    let src = "x = '''def f():\n  pass'''\ny = (1,\n     2)\nz = f\"{a}\" # def g(): pass\n";
    assert_eq!(idents(Language::Python, src), ["x", "y", "z"]);
    let lx = lex(Language::Python, src.as_bytes());
    let starts: Vec<String> = (0..lx.len())
        .filter(|&i| lx.flags(i) & LOGICAL_START != 0)
        .map(|i| lx.name(i))
        .collect();
    assert_eq!(starts, ["x", "y", "z"]);
}

#[test]
fn brackets_pair_and_strays_are_tolerated() {
    let lx = lex(Language::Rust, b"fn a() { ( ] } }");
    let open = (0..lx.len()).find(|&i| lx.is(i, b'{')).unwrap();
    assert_eq!(lx.partner(open), Some(lx.len() - 2));
    // The unclosed `(` runs to the end of the file.
    let paren = (0..lx.len()).rev().find(|&i| lx.is(i, b'(')).unwrap();
    assert_eq!(lx.skip_group(paren), lx.len());
}

#[test]
fn preprocessor_else_branches_are_set_aside_when_braces_would_not_balance() {
    let src = "#ifdef X\nint f(int a) {\n#else\nint f(int a, int b) {\n#endif\n return 0;\n}\n";
    let lx = lex(Language::C, src.as_bytes()).without_preproc();
    let open = (0..lx.len()).find(|&i| lx.is(i, b'{')).unwrap();
    assert_eq!(lx.partner(open), Some(lx.len() - 1));
    // Between statements, every branch is read.
    let src = "#ifdef Y\nint g1(void);\n#else\nint g2(void);\n#endif\n";
    assert_eq!(
        idents(Language::C, src)
            .iter()
            .filter(|w| w.starts_with('g'))
            .count(),
        2
    );
}

#[test]
fn unterminated_input_ends_at_the_end() {
    for lang in Language::ALL {
        for src in [
            "\"abc", "/* abc", "r#\"abc", "`abc ${", "'''abc", "R\"x(abc",
        ] {
            let lx = lex(lang, src.as_bytes());
            assert!(lx.toks.iter().all(|t| t.end as usize <= src.len()));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]
    /// Arbitrary bytes lex without a panic; tokens stay in bounds, in order, and their
    /// lines never decrease.
    #[test]
    fn arbitrary_bytes_lex_within_bounds(bytes in proptest::collection::vec(any::<u8>(), 0..400), which in 0usize..8) {
        let lang = Language::ALL[which];
        let lx = lex(lang, &bytes);
        let mut last = (0u32, 1u32);
        for t in &lx.toks {
            prop_assert!(t.start < t.end && t.end as usize <= bytes.len());
            prop_assert!(t.start >= last.0 && t.line >= last.1 && t.end_line >= t.line);
            last = (t.end, t.line);
        }
    }
}
