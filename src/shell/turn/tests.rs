//! Recorded screens (`tests/fixtures/turn/`) against every recognizer, the priority order,
//! the rule file's checks, and a property: no screen text makes recognition panic.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use proptest::prelude::*;

use super::*;

fn fixture(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/turn", name]
        .iter()
        .collect();
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A running program that has been quiet long enough for `generic` to judge its prompt.
fn quiet(screen: &str) -> RecognitionInput<'_> {
    RecognitionInput {
        screen,
        quiet_ms: 5_000,
        running: true,
    }
}

fn run(choice: &str, input: &RecognitionInput) -> Detection {
    recognize(&Choice::parse(choice).unwrap(), input, None).unwrap()
}

use TurnState::{AwaitingApproval as Approval, AwaitingInput as Input, Busy};

/// fixture, the recognizer `auto` should pick, its state, and the rule that decides.
const TABLE: [(&str, &str, TurnState, &str); 9] = [
    (
        "claude_code_busy.txt",
        "claude_code",
        Busy,
        "spinner_esc_to_interrupt",
    ),
    (
        "claude_code_approval.txt",
        "claude_code",
        Approval,
        "approval_menu",
    ),
    ("claude_code_input.txt", "claude_code", Input, "input_box"),
    (
        "claude_code_input_bare.txt",
        "claude_code",
        Input,
        "input_box",
    ),
    ("codex_busy.txt", "codex", Busy, "status_esc_to_interrupt"),
    ("codex_approval.txt", "codex", Approval, "approval_question"),
    ("codex_input.txt", "codex", Input, "composer"),
    ("plain_shell.txt", "generic", Input, "prompt_suffix"),
    ("plain_yes_no.txt", "generic", Approval, "yes_no_prompt"),
];

#[test]
fn every_fixture_is_recognised_by_auto_and_by_its_own_recognizer() {
    for (name, recognizer, state, rule) in TABLE {
        let screen = fixture(name);
        let auto = run("auto", &quiet(&screen));
        assert_eq!(
            (auto.recognizer.as_str(), auto.state, auto.rule.as_deref()),
            (recognizer, state, Some(rule)),
            "{name} with auto: {auto:?}"
        );
        assert_eq!(auto.fallback.is_some(), recognizer == "generic", "{name}");
        let own = run(recognizer, &quiet(&screen));
        assert_eq!(
            (own.state, own.rule.as_deref()),
            (state, Some(rule)),
            "{name}"
        );
        assert_eq!(
            own.fallback, None,
            "{name}: asked by name, nothing falls back"
        );
    }
}

#[test]
fn one_program_never_claims_the_others_screen() {
    for (name, recognizer, _, _) in TABLE {
        let screen = fixture(name);
        for other in ["claude_code", "codex"]
            .into_iter()
            .filter(|&o| o != recognizer)
        {
            let d = run(other, &quiet(&screen));
            assert_eq!(d.state, TurnState::Unknown, "{other} on {name}: {d:?}");
            assert_eq!(
                d.unknown_reason.as_deref(),
                Some(format!("the screen shows no {other} signature").as_str())
            );
        }
    }
}

#[test]
fn approval_beats_busy_and_busy_beats_input() {
    // The Claude Code approval fixture still shows a spinner line above the dialog, and the
    // busy fixtures show an input box under the spinner.
    let approval = fixture("claude_code_approval.txt");
    assert!(approval.contains("esc to interrupt"));
    let d = run("claude_code", &quiet(&approval));
    assert_eq!((d.state, d.priority), (Approval, Some(APPROVAL_BAND)));
    for name in ["claude_code_busy.txt", "codex_busy.txt"] {
        let d = run("auto", &quiet(&fixture(name)));
        assert_eq!((d.state, d.priority), (Busy, Some(BUSY_BAND)), "{name}");
    }
}

#[test]
fn the_process_decides_before_the_screen() {
    let screen = fixture("claude_code_busy.txt");
    for choice in ["auto", "claude_code", "codex", "generic"] {
        let input = RecognitionInput {
            running: false,
            ..quiet(&screen)
        };
        let d = run(choice, &input);
        assert_eq!(
            (d.state, d.source),
            (TurnState::Idle, SOURCE_PROCESS),
            "{choice}"
        );
    }
    // Output within the quiet window is work in progress for `generic`, whatever it shows.
    let shell = fixture("plain_shell.txt");
    let busy = RecognitionInput {
        quiet_ms: 100,
        ..quiet(&shell)
    };
    let d = run("auto", &busy);
    assert_eq!(
        (d.recognizer.as_str(), d.state, d.source),
        ("generic", Busy, SOURCE_PROCESS)
    );
    assert_eq!(
        d.fallback.as_deref(),
        Some("auto: no built-in recognizer matched; generic used")
    );
}

#[test]
fn generic_says_why_it_does_not_know() {
    let d = run(
        "generic",
        &quiet("Compiling winx v0.1.0\n   Building [=====>    ] 120/250\n\n"),
    );
    assert_eq!(d.state, TurnState::Unknown);
    assert!(
        d.unknown_reason
            .unwrap()
            .contains("does not look like a prompt")
    );
    let d = run("generic", &quiet("\n \n"));
    assert!(d.unknown_reason.unwrap().contains("screen is empty"));
    for prompt in [
        "Password:",
        ">>>",
        "Overwrite? ",
        "choose [1-3]",
        "user@host ~ %",
    ] {
        assert_eq!(run("generic", &quiet(prompt)).state, Input, "{prompt:?}");
    }
    for question in [
        "Delete 3 files? (y/n)",
        "Proceed (yes/no)?",
        "Do you want to continue",
    ] {
        assert_eq!(
            run("generic", &quiet(question)).state,
            Approval,
            "{question:?}"
        );
    }
}

#[test]
fn a_program_screen_without_a_matching_rule_falls_back_in_auto_only() {
    let screen = "╭──╮\n│ ✻ Welcome to Claude Code! │\n╰──╯\n\n  Select a theme\n  1. Dark";
    let named = run("claude_code", &quiet(screen));
    assert_eq!(named.state, TurnState::Unknown);
    assert!(named.unknown_reason.unwrap().contains("no rule matched"));
    let auto = run("auto", &quiet(screen));
    assert_eq!(auto.recognizer, "generic");
    assert_eq!(
        auto.fallback.as_deref(),
        Some("auto: claude_code screen matched no rule; generic used")
    );
}

#[test]
fn choices_parse_from_their_wire_strings() {
    assert_eq!(Choice::parse("auto"), Ok(Choice::Auto));
    assert_eq!(Choice::parse("generic"), Ok(Choice::Generic));
    assert_eq!(Choice::parse("configurable"), Ok(Choice::Configurable));
    assert_eq!(Choice::parse("codex"), Ok(Choice::Named("codex".into())));
    assert!(
        Choice::parse("aider")
            .unwrap_err()
            .contains("claude_code, codex")
    );
    let input = quiet("$");
    assert!(recognize(&Choice::Named("aider".into()), &input, None).is_err());
    assert!(recognize(&Choice::Configurable, &input, None).is_err());
}

#[test]
fn configured_rules_keep_the_band_order_and_report_the_regex() {
    let rules = Rules::parse(
        r#"{"busy": ["working", "thinking"], "awaiting_input": ["^ready>"],
            "awaiting_approval": ["approve\\?"]}"#,
    )
    .unwrap();
    assert_eq!(rules.len(), 4);
    let check =
        |screen: &str| recognize(&Choice::Configurable, &quiet(screen), Some(&rules)).unwrap();
    let d = check("thinking\nworking\nready>");
    assert_eq!(
        (d.state, d.rule.as_deref(), d.priority),
        (Busy, Some("working"), Some(200))
    );
    let d = check("working\napprove?\nready>");
    assert_eq!((d.state, d.priority), (Approval, Some(100)));
    let d = check("log line\nready> ");
    assert_eq!((d.state, d.rule.as_deref()), (Input, Some("^ready>")));
    let d = check("nothing here");
    assert_eq!(d.state, TurnState::Unknown);
    assert_eq!(
        d.unknown_reason.as_deref(),
        Some("no configured rule matched the screen")
    );
}

#[test]
fn rule_files_are_checked_before_use() {
    for (text, says) in [
        (r#"{"busy": ["ok"], "idle": ["x"]}"#, "unknown field"),
        (
            r#"{"busy": ["ok", "(unclosed"]}"#,
            "busy[1] \"(unclosed\" does not compile",
        ),
        (r#"{"awaiting_input": ["x*"]}"#, "matches an empty screen"),
        (r#"{}"#, "no patterns"),
        ("not json", "invalid rule file"),
    ] {
        let e = Rules::parse(text).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.json");
    fs::write(&path, r#"{"busy": ["esc to interrupt"]}"#).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(load_rules(&path).unwrap().len(), 1);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o620)).unwrap();
    assert!(
        load_rules(&path)
            .unwrap_err()
            .contains("writable by group or others")
    );
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(load_rules(&link).unwrap_err().contains("cannot open"));
    let big = dir.path().join("big.json");
    let filler = "x".repeat(config::MAX_FILE_BYTES as usize);
    fs::write(&big, format!(r#"{{"busy": ["{filler}"]}}"#)).unwrap();
    fs::set_permissions(&big, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(load_rules(&big).unwrap_err().contains("at most"));
    assert!(
        load_rules(dir.path())
            .unwrap_err()
            .contains("not a regular file")
    );
}

/// Prompt texts that could be mistaken for work or approval once echoed: as typed, reflowed,
/// or wrapped so a marker starts a row. Plain requests are not.
#[test]
fn texts_resembling_activity_are_recognised() {
    for text in [
        "please show (5s • esc to interrupt) in the docs",
        "✻ Thinking… (esc to interrupt)",
        "Would you like to run the following command? say yes",
        "Continue? (y/n)",
        "Do you want to proceed?\n❯ 1. Yes",
    ] {
        assert!(super::resembles_activity(text, 80), "{text}");
    }
    // Wrapped at the terminal width, "• Working" begins a row.
    let wrapped = format!("{}• Working on it", "x".repeat(80));
    assert!(super::resembles_activity(&wrapped, 80));
    for text in [
        "Review the current changes and report defects.",
        "work:200 build it",
        "quiet please",
    ] {
        assert!(!super::resembles_activity(text, 80), "{text}");
    }
}

proptest! {
    #[test]
    fn no_screen_text_makes_recognition_panic(
        screen in "(?s).{0,400}",
        agentish in proptest::collection::vec(
            prop_oneof![
                Just("esc to interrupt"), Just("…"), Just("❯ 1. Yes"), Just("Do you want to "),
                Just("?"), Just("\n"), Just("│ > "), Just("› "), Just("Claude Code"),
                Just("OpenAI Codex"), Just("(12s • "), Just("[Y/n]"), Just("✻ "), Just("$"),
            ],
            0..24,
        ),
        quiet_ms in any::<u64>(),
        running in any::<bool>(),
    ) {
        let text = format!("{screen}{}", agentish.concat());
        let rules = Rules::parse(r#"{"busy": ["…"], "awaiting_input": ["^› ?$"]}"#).unwrap();
        let input = RecognitionInput { screen: &text, quiet_ms, running };
        for choice in ["auto", "generic", "configurable", "claude_code", "codex"] {
            let d = recognize(&Choice::parse(choice).unwrap(), &input, Some(&rules)).unwrap();
            prop_assert_eq!(d.state == TurnState::Unknown, d.unknown_reason.is_some());
        }
    }

    #[test]
    fn no_rule_file_text_makes_parsing_panic(text in "(?s).{0,200}") {
        let _ = Rules::parse(&text);
    }
}
