//! Screens recorded from the real programs (issue 35): Codex CLI 0.169.0 and Claude Code
//! 2.1.328, each run in a 200×40 PTY against a scripted model on loopback and captured
//! while busy, awaiting input, awaiting approval, and with text in the composer. Each is
//! kept twice in `tests/fixtures/turn/`, named with the version it came from: `.ansi` (the
//! cells with their attributes, then the cursor) and `.txt` (that screen as winx's
//! terminal model renders it, which is what a recognizer reads). When a release changes
//! its screens, record new fixtures beside these rather than editing them.

use std::fs;
use std::num::NonZeroU16;
use std::path::PathBuf;

use super::composer::{self, Composer};
use super::*;

fn path(name: &str) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/turn", name]
        .iter()
        .collect()
}

/// The recorded screen `name` (without extension) in winx's terminal model.
fn replay(name: &str) -> vt100::Parser {
    let p = path(&format!("{name}.ansi"));
    let bytes = fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let nz = |n| NonZeroU16::new(n).unwrap();
    let mut vt = vt100::Parser::new(nz(40), nz(200), 0);
    vt.process(&bytes);
    vt
}

/// The screen as the guardian hands it to a recognizer: rows trimmed, trailing empty
/// rows dropped.
fn rendered(vt: &vt100::Parser) -> String {
    let rows: Vec<String> = vt
        .screen()
        .rows(0, 200)
        .map(|r| r.trim_end().to_string())
        .collect();
    let end = rows
        .iter()
        .rposition(|r| !r.is_empty())
        .map_or(0, |i| i + 1);
    rows[..end].join("\n")
}

fn recognize_named(choice: &str, screen: &str) -> Detection {
    let input = RecognitionInput {
        screen,
        quiet_ms: 5_000,
        running: true,
    };
    recognize(&Choice::parse(choice).unwrap(), &input, None).unwrap()
}

use TurnState::{AwaitingApproval as Approval, AwaitingInput as Input, Busy};

/// Recorded screen, its program's recognizer, the state, the deciding rule, and what the
/// composer check finds (`None`: not asked, the program is not waiting for input).
const RECORDED: [(&str, &str, TurnState, &str, Option<Composer>); 12] = [
    (
        "codex_0.169.0_input_fresh",
        "codex",
        Input,
        "composer",
        Some(Composer::Empty),
    ),
    (
        "codex_0.169.0_input",
        "codex",
        Input,
        "composer",
        Some(Composer::Empty),
    ),
    (
        "codex_0.169.0_composer_text",
        "codex",
        Input,
        "composer",
        Some(Composer::HoldsText),
    ),
    (
        "codex_0.169.0_busy",
        "codex",
        Busy,
        "status_esc_to_interrupt",
        None,
    ),
    (
        "codex_0.169.0_busy_composer_text",
        "codex",
        Busy,
        "status_esc_to_interrupt",
        None,
    ),
    (
        "codex_0.169.0_approval",
        "codex",
        Approval,
        "approval_question",
        None,
    ),
    (
        "claude_code_2.1.328_input_fresh",
        "claude_code",
        Input,
        "input_box",
        Some(Composer::Empty),
    ),
    (
        "claude_code_2.1.328_input",
        "claude_code",
        Input,
        "input_box",
        Some(Composer::Empty),
    ),
    (
        "claude_code_2.1.328_input_manual",
        "claude_code",
        Input,
        "input_box",
        Some(Composer::Empty),
    ),
    (
        "claude_code_2.1.328_composer_text",
        "claude_code",
        Input,
        "input_box",
        Some(Composer::HoldsText),
    ),
    (
        "claude_code_2.1.328_busy",
        "claude_code",
        Busy,
        "spinner_verb",
        None,
    ),
    (
        "claude_code_2.1.328_approval",
        "claude_code",
        Approval,
        "approval_menu",
        None,
    ),
];

#[test]
fn each_recording_renders_to_its_text() {
    for (name, ..) in RECORDED {
        let want = fs::read_to_string(path(&format!("{name}.txt"))).unwrap();
        let got = rendered(&replay(name));
        assert!(
            got == want.trim_end_matches('\n'),
            "{name}: the .txt is not the .ansi as winx renders it\n--- expected\n{want}\n--- \
             rendered\n{got}\n"
        );
    }
}

#[test]
fn recorded_screens_are_recognised_by_auto_and_by_their_own_recognizer() {
    for (name, recognizer, state, rule, _) in RECORDED {
        let screen = rendered(&replay(name));
        let auto = recognize_named("auto", &screen);
        assert_eq!(
            (auto.recognizer.as_str(), auto.state, auto.rule.as_deref()),
            (recognizer, state, Some(rule)),
            "{name} with auto: {auto:?}"
        );
        let own = recognize_named(recognizer, &screen);
        assert_eq!(
            (own.state, own.rule.as_deref()),
            (state, Some(rule)),
            "{name}"
        );
        for other in ["claude_code", "codex"]
            .into_iter()
            .filter(|&o| o != recognizer)
        {
            let d = recognize_named(other, &screen);
            assert_eq!(d.state, TurnState::Unknown, "{other} on {name}: {d:?}");
        }
    }
}

/// Claude Code 2.1.328 moved its interrupt hint from the spinner line to the footer;
/// the footer alone still says busy (the spinner verb is not always drawn).
#[test]
fn the_claude_code_footer_alone_says_busy() {
    let screen = rendered(&replay("claude_code_2.1.328_busy"));
    let without_spinner: String = screen
        .lines()
        .filter(|l| !l.contains('…'))
        .collect::<Vec<_>>()
        .join("\n");
    let d = recognize_named("claude_code", &without_spinner);
    assert_eq!(
        (d.state, d.rule.as_deref()),
        (Busy, Some("footer_esc_to_interrupt"))
    );
}

#[test]
fn the_composer_check_reads_recorded_screens() {
    for (name, recognizer, _, _, want) in RECORDED {
        let Some(want) = want else { continue };
        let vt = replay(name);
        assert_eq!(composer::on_screen(vt.screen(), recognizer), want, "{name}");
        // Both programs turned bracketed paste on (recorded: DECSET 2004).
        assert!(vt.screen().bracketed_paste(), "{name}");
    }
}

#[test]
fn the_composer_check_on_shapes_of_composers() {
    let rows = |s: &str| s.lines().map(str::to_string).collect::<Vec<_>>();
    use Composer::{Empty, HoldsText, NotFound};
    for (screen, cursor, depth, want) in [
        // Older Claude Code: a boxed input line; its right edge is no text.
        ("╭────╮\n│ >  │\n╰────╯", 1, 12, Empty),
        ("╭────╮\n│ > hi │\n╰────╯", 1, 12, HoldsText),
        // A draft over two rows, the cursor on the second.
        ("› first line\n  second", 1, 12, HoldsText),
        ("›\n", 1, 12, Empty),
        // The cursor below the composer, in the program's footer.
        ("› \n  ? for shortcuts", 1, 12, HoldsText),
        // No glyph near the cursor.
        ("output\n$ ", 1, 12, NotFound),
        ("", 0, 12, NotFound),
        // Any other program: only the cursor's own row counts.
        ("> printed earlier\nname: ", 1, 0, NotFound),
        ("> ", 0, 0, Empty),
        // A REPL's ">>>" is not a composer glyph followed by a blank.
        (">>> ", 0, 0, NotFound),
    ] {
        assert_eq!(
            composer::check(&rows(screen), cursor, depth),
            want,
            "{screen:?}"
        );
    }
    assert_eq!(composer::depth("codex"), composer::AGENT_DEPTH);
    assert_eq!(composer::depth("generic"), 0);
}
