//! Turn recognition: is the program in a terminal working, asking for approval, or waiting
//! for input? A pure function of the visible screen and two process facts.
//!
//! A recognizer is a list of named rules (regexes over the whole screen), each with a
//! priority number. Rules are tried in ascending priority number and the first match
//! wins, so within one recognizer the bands are ordered:
//!
//! | band | state | why it comes first |
//! |---|---|---|
//! | 100.. | `AwaitingApproval` | a dialog can be drawn while a spinner line is still visible |
//! | 200.. | `Busy` | agent TUIs draw their spinner above an input box that stays visible |
//! | 300.. | `AwaitingInput` | the input box alone means the program waits for a message |
//!
//! Recognizers: `claude_code` and `codex` (built in, each first checks a signature that the
//! screen belongs to that program, see `builtin`), `generic` (output quiescence plus a
//! prompt-looking last line, see `generic`), `configurable` (operator regexes from a private
//! JSON file, see `config`), and `auto` (the built-ins in order, then `generic`).
//!
//! `composer` answers a second question before a prompt is written: does the program's
//! input box already hold text?
//!
//! Invariant: nothing here reads a clock, a file descriptor or a process; callers pass
//! `quiet_ms` and `running` in. The one exception is `load_rules`, which reads the rule
//! file once. Recognition is heuristic: it never panics and says `Unknown` with a reason
//! rather than guessing.

mod builtin;
pub mod composer;
mod config;
mod generic;
#[cfg(test)]
mod recorded_tests;
#[cfg(test)]
mod tests;

use regex_lite::Regex;
use serde::{Deserialize, Serialize};

pub use config::{Rules, load_rules};

/// First priority number of each band (see the module table). Lower numbers are tried first.
pub const APPROVAL_BAND: u32 = 100;
pub const BUSY_BAND: u32 = 200;
pub const INPUT_BAND: u32 = 300;
/// The priority number reported when the process, not the screen, decided the state.
pub const PROCESS_PRIORITY: u32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    Busy,
    AwaitingInput,
    AwaitingApproval,
    /// No foreground command is running.
    Idle,
    Unknown,
}

/// What a recognizer sees. `screen` is the whole visible vt100 screen (rows joined by
/// '\n', trailing spaces trimmed) — detection uses all of it, independent of any display
/// line limit.
#[derive(Clone, Copy, Debug)]
pub struct RecognitionInput<'a> {
    pub screen: &'a str,
    /// Milliseconds since the last output byte.
    pub quiet_ms: u64,
    /// A foreground command is running.
    pub running: bool,
}

/// One recognition and its evidence, as `explain` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Detection {
    /// The recognizer that decided: `claude_code`, `codex`, `generic` or `configurable`.
    pub recognizer: String,
    pub state: TurnState,
    /// `"screen"` (a rule matched the screen) or `"process"` (running / output timing).
    pub source: &'static str,
    /// The rule's name, or for `configurable` the regex itself.
    pub rule: Option<String>,
    pub priority: Option<u32>,
    /// Set when `auto` fell back to `generic`, saying why.
    pub fallback: Option<String>,
    pub unknown_reason: Option<String>,
}

pub const SOURCE_SCREEN: &str = "screen";
pub const SOURCE_PROCESS: &str = "process";

/// The recognizer a caller asked for, parsed once from its wire string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Generic,
    Configurable,
    /// A built-in program recognizer: `claude_code` or `codex`.
    Named(String),
}

impl Choice {
    pub fn parse(s: &str) -> Result<Choice, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "generic" => Ok(Choice::Generic),
            "configurable" => Ok(Choice::Configurable),
            name if builtin::find(name).is_some() => Ok(Choice::Named(name.to_string())),
            other => Err(unknown_recognizer(other)),
        }
    }
}

fn unknown_recognizer(name: &str) -> String {
    format!(
        "unknown recognizer {name:?}; expected auto, generic, configurable, {}",
        builtin::NAMES.join(", ")
    )
}

/// A named pattern that, when it matches the screen, means `state`.
#[derive(Debug)]
struct Rule {
    name: String,
    state: TurnState,
    priority: u32,
    regex: Regex,
}

/// The first rule (in ascending priority) whose regex matches the screen.
fn first_match<'r>(rules: &'r [Rule], screen: &str) -> Option<&'r Rule> {
    rules
        .iter()
        .filter(|r| r.regex.is_match(screen))
        .min_by_key(|r| r.priority)
}

impl Detection {
    fn from_rule(recognizer: &str, rule: &Rule) -> Detection {
        Detection {
            recognizer: recognizer.to_string(),
            state: rule.state,
            source: SOURCE_SCREEN,
            rule: Some(rule.name.clone()),
            priority: Some(rule.priority),
            fallback: None,
            unknown_reason: None,
        }
    }

    /// The process decided: nothing runs in the foreground, so nothing on the screen is live.
    fn not_running(recognizer: &str) -> Detection {
        Detection {
            recognizer: recognizer.to_string(),
            state: TurnState::Idle,
            source: SOURCE_PROCESS,
            rule: Some("not_running".to_string()),
            priority: Some(PROCESS_PRIORITY),
            fallback: None,
            unknown_reason: None,
        }
    }

    fn unknown(recognizer: &str, reason: String) -> Detection {
        Detection {
            recognizer: recognizer.to_string(),
            state: TurnState::Unknown,
            source: SOURCE_SCREEN,
            rule: None,
            priority: None,
            fallback: None,
            unknown_reason: Some(reason),
        }
    }
}

/// Could `text`, typed into a terminal `cols` wide and echoed, match a work or approval
/// rule — its own words, laid out as typed, reflowed onto one line, or wrapped at the
/// terminal's width (or a little less, for an input box's prefix)? Built-in rules are
/// tried without their signatures, plus the generic yes/no question. Conservative by
/// design: a prompt for which this says yes never confirms activity (seed 000).
pub fn resembles_activity(text: &str, cols: usize) -> bool {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut variants = vec![text.to_string(), flat.clone()];
    for width in [cols, cols.saturating_sub(2), cols.saturating_sub(4)] {
        variants.push(wrap(&flat, width.max(8)));
    }
    variants.iter().any(|v| {
        builtin::all().iter().any(|p| p.activity_rule_matches(v)) || generic::yes_no_matches(v)
    })
}

/// `text` cut into rows of `width` characters, as a terminal lays out a long line.
fn wrap(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(width)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Recognise the turn state with the chosen recognizer. Errors: a named recognizer that
/// does not exist, or `configurable` without loaded rules.
pub fn recognize(
    choice: &Choice,
    input: &RecognitionInput,
    rules: Option<&Rules>,
) -> Result<Detection, String> {
    match choice {
        Choice::Generic => Ok(generic::recognize(input)),
        Choice::Configurable => match rules {
            Some(rules) => Ok(rules.recognize(input)),
            None => Err("the configurable recognizer needs a rule file; none is loaded".into()),
        },
        Choice::Named(name) => match builtin::find(name) {
            Some(program) => Ok(program.recognize_named(input)),
            None => Err(unknown_recognizer(name)),
        },
        Choice::Auto => Ok(auto(input)),
    }
}

/// The built-ins in order; the first whose signature is on the screen and one of whose
/// rules matches decides. Otherwise `generic`, with the reason in `fallback`.
fn auto(input: &RecognitionInput) -> Detection {
    let mut unmatched = Vec::new();
    for program in builtin::all() {
        match program.check(input) {
            builtin::Outcome::Decided(d) => return d,
            builtin::Outcome::NoRule => unmatched.push(program.name),
            builtin::Outcome::NotThisProgram => {}
        }
    }
    let mut d = generic::recognize(input);
    d.fallback = Some(if unmatched.is_empty() {
        "auto: no built-in recognizer matched; generic used".to_string()
    } else {
        format!(
            "auto: {} screen matched no rule; generic used",
            unmatched.join(", ")
        )
    });
    d
}
