//! The configurable recognizer: operator regexes from a private JSON file.
//!
//! ```json
//! {"busy": ["esc to interrupt"], "awaiting_input": ["^> "], "awaiting_approval": ["\\(y/n\\)"]}
//! ```
//!
//! Every list is optional, but the file must hold at least one pattern. Patterns match the
//! whole screen in multi-line mode (`^`/`$` are line ends) and keep the bands of `super`:
//! `awaiting_approval[i]` has priority 100 + i, `busy[i]` 200 + i, `awaiting_input[i]`
//! 300 + i. The file is refused unless it is a regular file owned by the current user,
//! not group- or world-writable, at most `MAX_FILE_BYTES`; unknown fields are refused and
//! every pattern must compile (the error names the one that did not).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use regex_lite::RegexBuilder;
use serde::Deserialize;

use super::{APPROVAL_BAND, BUSY_BAND, Detection, INPUT_BAND, RecognitionInput, Rule, TurnState};

pub const CONFIGURABLE: &str = "configurable";

/// A rule file is a handful of patterns; 64 KiB is far beyond any real one and bounds
/// what a misconfigured path (a log, a binary) can make us read and parse.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Patterns per list: priorities stay inside their band of 100.
pub const MAX_PATTERNS: usize = 64;
/// Compiled size per pattern. Matching time grows with pattern size times screen size, and
/// recognition runs on every observation; real patterns are a few hundred bytes compiled.
const PATTERN_SIZE_LIMIT: usize = 256 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    busy: Vec<String>,
    #[serde(default)]
    awaiting_input: Vec<String>,
    #[serde(default)]
    awaiting_approval: Vec<String>,
}

/// Compiled operator rules, in priority order.
#[derive(Debug)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// Parse and compile the JSON text of a rule file.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let file: RulesFile =
            serde_json::from_str(text).map_err(|e| format!("invalid rule file: {e}"))?;
        let mut rules = Vec::new();
        for (list, state, band, patterns) in [
            (
                "awaiting_approval",
                TurnState::AwaitingApproval,
                APPROVAL_BAND,
                &file.awaiting_approval,
            ),
            ("busy", TurnState::Busy, BUSY_BAND, &file.busy),
            (
                "awaiting_input",
                TurnState::AwaitingInput,
                INPUT_BAND,
                &file.awaiting_input,
            ),
        ] {
            if patterns.len() > MAX_PATTERNS {
                return Err(format!(
                    "{list} has {} patterns; at most {MAX_PATTERNS}",
                    patterns.len()
                ));
            }
            for (i, pattern) in patterns.iter().enumerate() {
                let regex = RegexBuilder::new(pattern)
                    .multi_line(true)
                    .size_limit(PATTERN_SIZE_LIMIT)
                    .build()
                    .map_err(|e| format!("{list}[{i}] {pattern:?} does not compile: {e}"))?;
                if regex.is_match("") {
                    return Err(format!(
                        "{list}[{i}] {pattern:?} matches an empty screen, so it would always match"
                    ));
                }
                rules.push(Rule {
                    name: pattern.clone(),
                    state,
                    priority: band + i as u32,
                    regex,
                });
            }
        }
        if rules.is_empty() {
            return Err("the rule file has no patterns".into());
        }
        Ok(Rules { rules })
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub(super) fn recognize(&self, input: &RecognitionInput) -> Detection {
        if !input.running {
            return Detection::not_running(CONFIGURABLE);
        }
        match super::first_match(&self.rules, input.screen) {
            Some(rule) => Detection::from_rule(CONFIGURABLE, rule),
            None => Detection::unknown(
                CONFIGURABLE,
                "no configured rule matched the screen".to_string(),
            ),
        }
    }
}

/// Read, check and compile a rule file (format and checks in the module docs).
pub fn load_rules(path: &Path) -> Result<Rules, String> {
    let shown = path.display();
    // O_NOFOLLOW: the checks below are about the file we read, not a link's target;
    // O_NONBLOCK: a FIFO planted at the path cannot hang the caller before the type check.
    let file = File::options()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open rule file {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect rule file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("rule file {shown} is not a regular file"));
    }
    let uid = nix::unistd::getuid().as_raw();
    if meta.uid() != uid {
        return Err(format!(
            "rule file {shown} is owned by uid {}, not by this user (uid {uid})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "rule file {shown} is writable by group or others (mode {:o}); chmod go-w it",
            meta.mode() & 0o7777
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "rule file {shown} has {} bytes; at most {MAX_FILE_BYTES}",
            meta.len()
        ));
    }
    let mut text = String::new();
    // The size can change after the check; never read more than the limit.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read rule file {shown}: {e}"))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "rule file {shown} grew past {MAX_FILE_BYTES} bytes"
        ));
    }
    Rules::parse(&text).map_err(|e| format!("{shown}: {e}"))
}
