use super::*;
use proptest::prelude::*;

fn names(src: &str) -> Vec<String> {
    let script = parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"));
    let mut v: Vec<_> = script
        .commands
        .iter()
        .filter_map(|c| c.static_name())
        .map(String::from)
        .collect();
    v.sort();
    v
}

#[test]
fn finds_every_simple_command() {
    #[rustfmt::skip]
    let cases: &[(&str, &str)] = &[
        ("for f in *.rs; do cargo fmt $f; done", "cargo"),
        ("if grep -q x f; then rm f; elif ! a; then b; else c; fi", "a b c grep rm"),
        ("a | b |& c && d || e & f; g\nh", "a b c d e f g h"),
        ("(a; { b; }) > /dev/null; for x do c; done", "a b c"),
        ("echo \"$(a) `b`\" <(c) >(d) $((1 + $(e))) ${x:-$(f)}", "a b c d e echo f"),
        ("FOO=1 sudo -u root env X=1 nice -n 5 rm -rf /", "env nice rm sudo"),
        ("f() { a; }\nfunction g { b; }; case $x in a|b) c;; (*) d;; esac", "a b c d"),
        ("while read l; do a; done <<EOF\n$(b)\nEOF\ncat <<'E'\n$(c)\nE", "a b cat read"),
        ("cat <<-EOF\n\trm x\n\tEOF\nls # rm y", "cat ls"),
        ("[[ -f x && $(a) =~ ^(b|c)$ ]] && (( i++ )) && [ -n x ] && until c; do :; done", ": [ a c"),
        ("'l's -la \"x y\" | xargs -0 grep -l foo; time -p $'ls' `echo \\`a\\``", "a echo grep ls ls time xargs"),
        ("timeout 5 touch x; timeout -s KILL -k 1 5s rm y; timeout $T a", "a rm timeout timeout timeout touch"),
        ("stdbuf -oL -e 0 b | setsid -f c; taskset 3 d; ionice -c 3 nohup nice -n 2 e", "b c d e ionice nice nohup setsid stdbuf taskset"),
    ];
    for (src, want) in cases {
        assert_eq!(names(src).join(" "), *want, "{src:?}");
    }
    let script = parse("X=1 cmd 'a b' c\\ d 2>&1 >>out &>all <in <<<s >&2").unwrap();
    let cmd = &script.commands[0];
    assert_eq!(
        (
            cmd.assignments.join(","),
            cmd.args[0].text.as_str(),
            cmd.args[1].text.as_str()
        ),
        ("X".into(), "a b", "c d")
    );
    let ops: Vec<_> = cmd
        .redirects
        .iter()
        .map(|r| (r.fd, r.op, r.target.text.as_str(), r.writes_file()))
        .collect();
    assert_eq!(
        ops[..3],
        [
            (Some(2), ">&", "1", false),
            (None, ">>", "out", true),
            (None, "&>", "all", true)
        ]
    );
    assert_eq!(
        ops[3..].iter().map(|o| o.3).collect::<Vec<_>>(),
        [false, false, false]
    );
}

#[test]
fn dynamic_names_code_strings_and_bad_syntax() {
    for src in [
        "$CMD args",
        "$(echo rm) x",
        "\"${X}\"",
        "r? x",
        "{rm,x}",
        "~/x",
        "env -S 'rm x'",
        "$'\\x72m'",
    ] {
        let script = parse(src).unwrap();
        assert!(
            script
                .commands
                .iter()
                .any(|c| matches!(c.name, Some(CommandName::Dynamic(_)))),
            "{src}"
        );
    }
    for src in [
        "eval x",
        "source f",
        ". f",
        "bash -c x",
        "sh -c x",
        "zsh -lc x",
        "ls | bash",
    ] {
        assert!(
            parse(src)
                .unwrap()
                .commands
                .iter()
                .any(SimpleCommand::evaluates_code),
            "{src}"
        );
    }
    #[rustfmt::skip]
    let bad = ["echo 'x", "echo \"x", "(ls", "echo $(ls", "for x in a; do ls", "if x; then y", "ls )",
        "cat <<EOF\nx", "echo $[1]", "echo `ls", "case x in a) ls", "{ ls; ", "fi", "echo ${x", "ls |",
        "f() ls (", "x=(a)", "echo $((1)", "ls\\", "do ls", "if a; done", "echo $'x", "[[ x; ]]"];
    for src in bad {
        assert!(parse(src).is_err_and(|e| e.offset <= src.len()), "{src}");
    }
    for src in ["$(", "${", "\"`", "<(", "(", "{ "].map(|s| s.repeat(3000)) {
        assert!(parse(&src).is_err());
    }
    assert_eq!(
        parse(&"$(".repeat(99)).map_err(|e| e.kind),
        Err(ParseErrorKind::TooDeep)
    );
}

fn writer(cmds: &[&str], globs: &[&str], src: &str) -> Result<(), Denial> {
    let to_vec = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (allowed_commands, allowed_globs) = (&to_vec(cmds)[..], &to_vec(globs)[..]);
    check(
        src,
        &Mode::CodeWriter {
            allowed_commands,
            allowed_globs,
            workspace: Path::new("/ws"),
        },
    )
}

#[test]
fn code_writer_mode() {
    #[rustfmt::skip]
    let denied = ["ls | rm x", "a; rm x", "ls && (rm x)", "ls `rm x`", "sudo ls", "PATH=. ls",
        "ls > /etc/passwd", "cat > src/../../x", "cat > $F", "cd /; cat > src/a", "ls; eval ls", "'l'`s`",
        "ls > src/*", "ls > ~/.bashrc", "bash -c ls"];
    for src in denied {
        assert!(
            writer(&["ls", "cat", "cd", "bash"], &["src/**"], src).is_err(),
            "{src}"
        );
    }
    let denial = writer(&["ls", "echo"], &["all"], "echo $(rm x)").unwrap_err();
    assert_eq!(denial.command.as_deref(), Some("rm"));
    assert_eq!(
        denial.reason,
        "command `rm` is not in allowed_commands (ls, echo)"
    );
    for src in [
        "ls src | cat",
        "cat > src/a.rs",
        "cat >> /ws/src/x/y.rs 2>&1",
        "ls >&- 2>/dev/null",
    ] {
        assert_eq!(writer(&["ls", "cat"], &["src/**"], src), Ok(()), "{src}");
    }
    assert_eq!(writer(&["all"], &["all"], "$X; eval y > /etc/z"), Ok(()));
    assert!(writer(&["all"], &["*.md"], "rm x > a/b.md").is_err());
    assert_eq!(
        writer(
            &["all"],
            &["*.md", "t?st/**/*.rs"],
            "rm > b.md; ls > test/a.rs"
        ),
        Ok(())
    );
}

#[test]
fn architect_mode() {
    #[rustfmt::skip]
    let denied = ["rm x", "echo hi > f", "sed -i s/a/b/ f", "find . -delete", "git commit -m x", "$X",
        "find . -exec rm {} +", "git -c core.pager=x log", "git branch new", "git branch -D x", "cargo build",
        "ls | xargs sed -n p", "awk '{system(\"rm\")}'", "sort -o f x", "find . $X", "echo 'x", "bash -c ls",
        "sudo ls", "env -S 'rm x'", "cat <<EOF > f\nx\nEOF", "{ ls; } > f", "find -{del,x}ete"];
    for src in denied {
        assert!(check(src, &Mode::Architect).is_err(), "{src}");
    }
    #[rustfmt::skip]
    let allowed = ["ls -la | grep foo > /dev/null 2>&1", "git log --oneline | head", "cd src && ls",
        "git branch -a --list 'f*'", "find . -name '*.rs' | xargs grep -n todo | sort | uniq -c", "env",
        "cargo check --all-targets", "for f in *.rs; do wc -l \"$f\"; done", "sed -n 1,5p f",
        "cat <<EOF\nhello $(pwd)\nEOF", "git -C src status", "if [[ -d x && ! -f y ]]; then ls; fi"];
    for src in allowed {
        assert_eq!(check(src, &Mode::Architect), Ok(()), "{src}");
    }
    assert_eq!(check("echo 'unterminated", &Mode::Wcgw), Ok(()));
}

proptest! {
    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        prop_assert!(parse(&s).is_ok() || parse(&s).is_err_and(|e| e.offset <= s.len()));
        let _ = check(&s, &Mode::Architect);
    }

    #[test]
    fn shell_like_strings_never_panic(s in "[a-z0-9 $(){}`'\"|;&<>\\\\\n#=*!~,.\\[\\]-]{0,60}") {
        prop_assert!(parse(&s).is_ok() || parse(&s).is_err_and(|e| e.offset <= s.len()));
        let _ = writer(&["ls"], &["src/**"], &s);
    }
}
