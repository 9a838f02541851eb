//! Tests of the variable table (`vars.rs`).

use super::*;
use log::LevelFilter::*;

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn rust_log_module_filters_keep_the_plain_level() {
    let level = |v: &'static str| parse_filters(v);
    assert_eq!(level("info,tiny_http=warn"), Some(Info));
    assert_eq!(level("tiny_http=warn,debug"), Some(Debug));
    assert_eq!(level("winx=debug,tiny_http=warn"), Some(Debug));
    assert_eq!(level("warn/some.*regex"), Some(Warn));
    assert_eq!(level("winx"), Some(Trace));
    assert_eq!(level("error,info"), Some(Info));
    assert_eq!(level("tiny_http=loud"), None);
    assert_eq!(
        log_level(&env_of(&[("RUST_LOG", "info,tiny_http=warn")])).unwrap(),
        Info
    );
}

#[test]
fn log_errors_name_the_variable_at_fault() {
    let e = log_level(&env_of(&[("RUST_LOG", "x=loud")])).unwrap_err();
    assert!(e.0.contains("RUST_LOG") && !e.0.contains("WINX_LOG"), "{e}");
    let e = log_level(&env_of(&[("WINX_LOG", "loud"), ("RUST_LOG", "info")])).unwrap_err();
    assert!(e.0.contains("WINX_LOG"), "{e}");
    // WINX_LOG wins over RUST_LOG.
    let both = env_of(&[("WINX_LOG", "error"), ("RUST_LOG", "x=loud")]);
    assert_eq!(log_level(&both).unwrap(), Error);
    assert_eq!(log_level(&env_of(&[])).unwrap(), Warn);
}

#[test]
fn numbers_are_checked_by_their_entry() {
    assert_eq!(number(&WORKERS, &env_of(&[])).unwrap(), 8);
    assert_eq!(
        number(&WORKERS, &env_of(&[("WINX_WORKERS", " 3 ")])).unwrap(),
        3
    );
    let e = number(&WORKERS, &env_of(&[("WINX_WORKERS", "0")])).unwrap_err();
    assert_eq!(
        e.0,
        "WINX_WORKERS must be a whole number in 1..=256, got \"0\""
    );
    let e = number(&MAX_GUARDIANS, &env_of(&[("WINX_MAX_GUARDIANS", "x")])).unwrap_err();
    assert!(
        e.0.contains("WINX_MAX_GUARDIANS") && e.0.contains("1..=1024"),
        "{e}"
    );
    assert!(
        number(&RUNTIME, &env_of(&[])).is_err(),
        "not a number entry"
    );
    assert_eq!(one_of(&RUNTIME, &env_of(&[])).unwrap(), "daemon");
    assert!(one_of(&RUNTIME, &env_of(&[("WINX_RUNTIME", "x")])).is_err());
}

#[test]
fn every_name_is_unique_and_in_the_help() {
    let help = help_section();
    for (i, v) in ALL.iter().enumerate() {
        assert!(
            ALL[..i].iter().all(|w| w.name != v.name),
            "{} twice",
            v.name
        );
        assert!(help.contains(v.name), "{} missing from --help", v.name);
        assert!(!v.help.contains('|'), "{}: no | in a table cell", v.name);
    }
}

/// The README's table (between `<!-- vars -->` markers) is this table.
#[test]
fn the_readme_table_is_the_config_table() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let block = readme
        .split("<!-- vars -->")
        .nth(1)
        .expect("README.md has a <!-- vars --> block");
    let rows: Vec<Vec<String>> = block
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let expected: Vec<Vec<String>> = readme_rows().into_iter().map(Vec::from).collect();
    assert!(
        rows == expected,
        "README.md's variable table is out of date; replace the block with:\n{}",
        readme_table()
    );
}
