use super::*;
use proptest::prelude::*;

/// `name:kind:line-end(parent)` for each symbol.
fn brief(lang: Language, src: &str) -> Vec<String> {
    outline(lang, src.as_bytes())
        .into_iter()
        .map(|s| {
            let parent = s.parent.map(|p| format!("({p})")).unwrap_or_default();
            format!(
                "{}:{}:{}-{}{parent}",
                s.name,
                s.kind.as_str(),
                s.line,
                s.end_line
            )
        })
        .collect()
}

#[test]
fn rust_items_nest_and_impls_take_their_types_name() {
    let src = "mod m {\n    pub struct S<T>(T);\n    impl<T: Clone> fmt::Display for S<T> {\n        fn fmt(&self) {}\n    }\n}\nmacro_rules! mac { () => {} }\nconst fn f() { fn inner() {} }\n";
    assert_eq!(
        brief(Language::Rust, src),
        [
            "m:module:1-6",
            "S:struct:2-2(m)",
            "S:impl:3-5(m)",
            "fmt:method:4-4(S)",
            "mac:macro:7-7",
            "f:function:8-8",
            "inner:function:8-8(f)",
        ]
    );
}

#[test]
fn python_blocks_end_at_the_dedent() {
    let src = "@dec\nclass A:\n    def m(self):\n        return 1\n\n    x = 2\n\nasync def g():\n    pass\n";
    assert_eq!(
        brief(Language::Python, src),
        ["A:class:2-6", "m:method:3-4(A)", "g:function:8-9"]
    );
}

#[test]
fn javascript_functions_classes_and_objects() {
    let src = "class A extends B {\n  static m() {}\n  get x() { return 1 }\n}\nconst f = (a) => a\nfunction g() {}\nconst o = { k: 1, h() {} }\n";
    assert_eq!(
        brief(Language::JavaScript, src),
        [
            "A:class:1-4",
            "m:method:2-2(A)",
            "x:method:3-3(A)",
            "f:function:5-5",
            "g:function:6-6",
            "o:object:7-7",
            "h:method:7-7(o)",
        ]
    );
}

#[test]
fn c_functions_typedefs_and_macros() {
    let src = "#define N 3\ntypedef struct pt { int x; } pt_t;\nstatic int\nadd(int a, int b)\n{\n  return a + b;\n}\nint proto(void);\n";
    assert_eq!(
        brief(Language::C, src),
        [
            "N:macro:1-1",
            "pt:struct:2-2",
            "pt_t:type:2-2",
            "add:function:4-7",
        ]
    );
}

#[test]
fn go_methods_name_their_receiver() {
    let src = "package p\n\ntype T struct {\n\tA int\n}\n\nfunc (t *T) M() int {\n\treturn 1\n}\n\nconst (\n\tX = iota\n\tY\n)\n";
    assert_eq!(
        brief(Language::Go, src),
        [
            "T:struct:3-5",
            "M:method:7-9(T)",
            "X:constant:12-12",
            "Y:constant:13-13",
        ]
    );
}

#[test]
fn java_types_and_methods() {
    let src = "package p;\n@Ann\npublic class A<T> {\n  private int f = 1;\n  public A() {}\n  <U> U m(U u) throws E { return u; }\n  enum E { X, Y; void e() {} }\n}\n";
    assert_eq!(
        brief(Language::Java, src),
        [
            "A:class:3-8",
            "A:method:5-5(A)",
            "m:method:6-6(A)",
            "E:enum:7-7(A)",
            "e:method:7-7(E)",
        ]
    );
}

#[test]
fn deep_nesting_is_bounded() {
    let src = "fn f() {".repeat(10_000) + &"}".repeat(10_000);
    let syms = outline(Language::Rust, src.as_bytes());
    assert!(syms.len() <= MAX_DEPTH + 2, "{}", syms.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]
    /// Arbitrary bytes outline without a panic, and every symbol ends at or after its line.
    #[test]
    fn arbitrary_bytes_outline_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), which in 0usize..8) {
        for s in outline(Language::ALL[which], &bytes) {
            prop_assert!(s.end_line >= s.line && s.line >= 1 && !s.name.is_empty());
        }
    }

    /// Code-shaped noise (keywords, brackets, quotes) reaches the readers' deeper paths.
    #[test]
    fn code_shaped_noise_outlines_without_panic(parts in proptest::collection::vec(prop_oneof![
        Just("fn "), Just("def "), Just("class "), Just("struct "), Just("impl "), Just("function "),
        Just("{"), Just("}"), Just("("), Just(")"), Just("<"), Just(">"), Just(";"), Just("\n"),
        Just("    "), Just("x"), Just("="), Just("=>"), Just("\""), Just("'"), Just("`"), Just("#if 0\n"),
        Just("#else\n"), Just("typedef "), Just("template"), Just("::"), Just(":"), Just("func "),
        Just("type "), Just("const "), Just("namespace "), Just("@"), Just("/"), Just("${"),
    ], 0..120), which in 0usize..8) {
        let src: String = parts.concat();
        for s in outline(Language::ALL[which], src.as_bytes()) {
            prop_assert!(s.end_line >= s.line && s.line >= 1);
        }
    }
}
