//! The generic recognizer: quiescence plus a prompt-looking last line.
//!
//! Order: not running → `Idle` (process); output within `QUIET_MS` → `Busy` (process);
//! quiet and the last non-empty line asks yes/no → `AwaitingApproval`; quiet and it ends
//! like a prompt → `AwaitingInput`; otherwise `Unknown` with the reason. It knows nothing
//! about any program, so it is the fallback of `auto`.

use std::sync::OnceLock;

use regex_lite::Regex;

use super::{
    APPROVAL_BAND, BUSY_BAND, Detection, INPUT_BAND, RecognitionInput, SOURCE_PROCESS,
    SOURCE_SCREEN, TurnState,
};

pub const GENERIC: &str = "generic";

/// Output this recent means the program is still working. Spinners and progress bars
/// redraw several times a second; a program waiting for a person prints nothing. 1.5 s is
/// past any redraw interval yet short enough for a caller polling once a second.
pub const QUIET_MS: u64 = 1_500;

/// A yes/no question: "(y/n)", "[Y/n]", "(yes/no)", or a "Do you want to …" line.
const YES_NO: &str = r"(?i)[(\[]\s*y(?:es)?\s*/\s*n(?:o)?\s*[)\]]|^\s*do you want to\b";
/// What a prompt ends with once trailing spaces are trimmed: shell (`$`, `#`, `%`, `>`,
/// `❯`, `»`, `›`), REPL (`>>>`), question (`?`), label (`:`), or bracketed choice (`]`).
const PROMPT_END: &str = r"[$#%>❯»›?:\]]$";

fn patterns() -> &'static (Regex, Regex) {
    static PATTERNS: OnceLock<(Regex, Regex)> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        // Constants, exercised by every unit test of this module.
        let compile = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        (compile(YES_NO), compile(PROMPT_END))
    })
}

fn decided(state: TurnState, source: &'static str, rule: &str, priority: u32) -> Detection {
    Detection {
        recognizer: GENERIC.to_string(),
        state,
        source,
        rule: Some(rule.to_string()),
        priority: Some(priority),
        fallback: None,
        unknown_reason: None,
    }
}

/// Does some line of `text` ask yes/no (the screen-based approval rule)?
pub fn yes_no_matches(text: &str) -> bool {
    text.lines().any(|l| patterns().0.is_match(l.trim_end()))
}

pub fn recognize(input: &RecognitionInput) -> Detection {
    if !input.running {
        return Detection::not_running(GENERIC);
    }
    if input.quiet_ms < QUIET_MS {
        return decided(TurnState::Busy, SOURCE_PROCESS, "recent_output", BUSY_BAND);
    }
    let Some(last) = input
        .screen
        .lines()
        .rev()
        .map(str::trim_end)
        .find(|l| !l.trim().is_empty())
    else {
        return Detection::unknown(
            GENERIC,
            format!(
                "output quiet for {} ms but the screen is empty",
                input.quiet_ms
            ),
        );
    };
    let (yes_no, prompt_end) = patterns();
    if yes_no.is_match(last) {
        return decided(
            TurnState::AwaitingApproval,
            SOURCE_SCREEN,
            "yes_no_prompt",
            APPROVAL_BAND,
        );
    }
    if prompt_end.is_match(last) {
        return decided(
            TurnState::AwaitingInput,
            SOURCE_SCREEN,
            "prompt_suffix",
            INPUT_BAND,
        );
    }
    Detection::unknown(
        GENERIC,
        format!(
            "output quiet for {} ms but the last screen line does not look like a prompt",
            input.quiet_ms
        ),
    )
}
