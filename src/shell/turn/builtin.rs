//! The built-in program recognizers: Claude Code and OpenAI Codex CLI.
//!
//! Each has a signature (text only that program draws: its banner, footer hints, the
//! wording of its dialogs) and a rule table in the bands of `super`. Without its signature
//! a recognizer claims nothing, so `auto` moves on and one program's recognizer never
//! claims the other's screen. The patterns are facts about the programs' visible UI text;
//! when a release rewords a hint, the recognizer says `Unknown` (or `auto` falls back to
//! `generic`) rather than guessing.

use std::sync::OnceLock;

use regex_lite::Regex;

use super::{APPROVAL_BAND, BUSY_BAND, Detection, INPUT_BAND, RecognitionInput, Rule, TurnState};

pub const CLAUDE_CODE: &str = "claude_code";
pub const CODEX: &str = "codex";
/// In the order `auto` tries them.
pub const NAMES: [&str; 2] = [CLAUDE_CODE, CODEX];

pub struct Program {
    pub name: &'static str,
    signature: Regex,
    rules: Vec<Rule>,
}

pub enum Outcome {
    /// The signature is absent: the screen is not this program's.
    NotThisProgram,
    /// This program's screen, but no rule matched.
    NoRule,
    Decided(Detection),
}

/// A rule row: name, state, offset within its band, pattern.
type Row = (&'static str, TurnState, u32, &'static str);

// Claude Code. Busy: the spinner line, e.g. "✻ Thinking… (12s · esc to interrupt)" —
// a verb ending in an ellipsis and the interrupt hint on one line (or, lower, the
// spinner verb alone, as 2.1.328 draws it: "· Discombobulating…", with the interrupt hint
// moved to the footer: "⏵⏵ auto mode on (shift+tab to cycle) · esc to interrupt").
// Approval: a "Do you want to …?" (or "Do you trust …?") question over a numbered menu
// whose selected first option reads "❯ 1. Yes". Input: the "> " line (boxed "│ > " in
// older releases, between two horizontal rules in newer ones; "❯" followed by a
// no-break space in 2.1.328), or the "? for shortcuts" hint.
const CLAUDE_SIGNATURE: &str = concat!(
    r"(?m)Claude Code|tell Claude what to do|shift\+tab to cycle|auto-accept edits|",
    r"Context left until auto-compact|^\s*[·✢✳✶✻✽*] \S[^\n]*…[^\n]*esc to interrupt|",
    r"^│ >(?: |$)|^─{20,}\n[>❯](?:[ \x{A0}]|$)|Esc to cancel · Tab to amend|^(?:│ )? ?❯ 1\. Yes\b"
);
const CLAUDE_RULES: [Row; 6] = [
    (
        "approval_menu",
        TurnState::AwaitingApproval,
        0,
        r"(?s)Do you (?:want to|trust) [^\n]*\?.*❯ *1\. Yes",
    ),
    (
        "spinner_esc_to_interrupt",
        TurnState::Busy,
        0,
        r"(?m)…[^\n]*esc to interrupt",
    ),
    (
        "spinner_verb",
        TurnState::Busy,
        1,
        r"(?m)^\s*[·✢✳✶✻✽*] [A-Z]\w*…",
    ),
    (
        "footer_esc_to_interrupt",
        TurnState::Busy,
        2,
        r"(?m)\S · esc to interrupt$",
    ),
    (
        "input_box",
        TurnState::AwaitingInput,
        0,
        r"(?m)^(?:│ )?[>❯](?:[ \x{A0}]|$)",
    ),
    (
        "shortcuts_hint",
        TurnState::AwaitingInput,
        1,
        r"\? for shortcuts",
    ),
];

// OpenAI Codex CLI (the Rust TUI). Busy: the status line, e.g.
// "• Working (12s • esc to interrupt)" (the bullet blinks "◦" in 0.169). Approval:
// "Would you like to run the following command?" / "… make the following edits?" and the
// "Press enter to confirm or esc to cancel" footer. Input: the composer ("› " or, in older
// releases, "▌ ") and its footer ("100% context left", "⏎ send"; 0.169: "← for agents · ?
// for shortcuts", or "tab to queue message" while a turn runs).
const CODEX_SIGNATURE: &str = concat!(
    r"OpenAI Codex|tell Codex what to do|Ask Codex to do anything|\d+% context left|",
    r"⏎ send|Would you like to (?:run the following command|make the following edits)|",
    r"← for agents · \? for shortcuts|tab to queue message|\(\d+[smh][^\n]* • esc to interrupt\)"
);
const CODEX_RULES: [Row; 6] = [
    (
        "approval_question",
        TurnState::AwaitingApproval,
        0,
        r"Would you like to (?:run the following command|make the following edits|grant these permissions)\?",
    ),
    (
        "confirm_footer",
        TurnState::AwaitingApproval,
        1,
        r"Press enter to confirm or esc to cancel",
    ),
    (
        "status_esc_to_interrupt",
        TurnState::Busy,
        0,
        r"\(\s*\d+[smh][^\n]*esc to interrupt\)",
    ),
    (
        "status_working",
        TurnState::Busy,
        1,
        r"(?m)^\s*[•◦] Working\b",
    ),
    ("composer", TurnState::AwaitingInput, 0, r"(?m)^[›▌](?: |$)"),
    (
        "composer_footer",
        TurnState::AwaitingInput,
        1,
        r"\d+% context left|⏎ send|\? for shortcuts",
    ),
];

fn band(state: TurnState) -> u32 {
    match state {
        TurnState::AwaitingApproval => APPROVAL_BAND,
        TurnState::Busy => BUSY_BAND,
        _ => INPUT_BAND,
    }
}

fn build(name: &'static str, signature: &str, rows: &[Row]) -> Program {
    // The patterns are constants checked by the unit tests; a typo fails every test run.
    let compile = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("{name}: {p}: {e}"));
    Program {
        name,
        signature: compile(signature),
        rules: rows
            .iter()
            .map(|&(rule, state, offset, pattern)| Rule {
                name: rule.to_string(),
                state,
                priority: band(state) + offset,
                regex: compile(pattern),
            })
            .collect(),
    }
}

/// The built-ins, compiled once (they are constants, not session state).
pub fn all() -> &'static [Program] {
    static PROGRAMS: OnceLock<Vec<Program>> = OnceLock::new();
    PROGRAMS.get_or_init(|| {
        vec![
            build(CLAUDE_CODE, CLAUDE_SIGNATURE, &CLAUDE_RULES),
            build(CODEX, CODEX_SIGNATURE, &CODEX_RULES),
        ]
    })
}

pub fn find(name: &str) -> Option<&'static Program> {
    all().iter().find(|p| p.name == name)
}

impl Program {
    pub fn check(&self, input: &RecognitionInput) -> Outcome {
        if !self.signature.is_match(input.screen) {
            return Outcome::NotThisProgram;
        }
        if !input.running {
            return Outcome::Decided(Detection::not_running(self.name));
        }
        match super::first_match(&self.rules, input.screen) {
            Some(rule) => Outcome::Decided(Detection::from_rule(self.name, rule)),
            None => Outcome::NoRule,
        }
    }

    /// Does a busy or approval rule match `text`, signature or not?
    pub fn activity_rule_matches(&self, text: &str) -> bool {
        self.rules.iter().any(|r| {
            matches!(r.state, TurnState::Busy | TurnState::AwaitingApproval)
                && r.regex.is_match(text)
        })
    }

    /// Asked for by name: a missing signature or no matching rule is `Unknown`, said why.
    pub fn recognize_named(&self, input: &RecognitionInput) -> Detection {
        match self.check(input) {
            Outcome::Decided(d) => d,
            Outcome::NotThisProgram if !input.running => Detection::not_running(self.name),
            Outcome::NotThisProgram => Detection::unknown(
                self.name,
                format!("the screen shows no {} signature", self.name),
            ),
            Outcome::NoRule => Detection::unknown(
                self.name,
                format!("a {} screen, but no rule matched it", self.name),
            ),
        }
    }
}
