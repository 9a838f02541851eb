//! How prompt text is submitted to a program on a terminal: the one byte sequence both
//! the native `Agent prompt` (`guardian::prompt`) and the operator's `agent admit`
//! (`guardian::codex_targets`) write, as one buffer.
//!
//! Why it is framed: agent TUIs tell typing from pasting by timing. Codex 0.169 takes 6 or
//! more characters arriving less than 8 ms apart as a paste, and an Enter within 120 ms of
//! such a burst as a newline in the draft, so text and Enter written together were typed
//! into the composer but never submitted (issue 35: measured with the real TUI, the text
//! stayed in the input box and was merged into the next message). Inside a bracketed
//! paste (`ESC[200~ … ESC[201~`, when the program turned DECSET 2004 on) the text is one
//! explicit paste, and the Enter after it submits: recorded with the real Codex 0.169.0
//! and Claude Code 2.1.328, a bracketed text + Enter in one write starts exactly one turn.
//!
//! Invariant: the text never holds the paste end marker (callers refuse such text), so a
//! bracketed text cannot end the paste early and type the rest.

/// The paste end marker a bracketed text must not contain.
pub const PASTE_END: &str = "\x1b[201~";

/// The paste start marker.
const PASTE_START: &str = "\x1b[200~";

/// The bytes that submit `text`: framed as a bracketed paste (`bracketed`) or as typed,
/// then Enter.
pub fn bytes(text: &str, bracketed: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(text.len() + 13);
    if bracketed {
        b.extend_from_slice(PASTE_START.as_bytes());
    }
    b.extend_from_slice(text.as_bytes());
    if bracketed {
        b.extend_from_slice(PASTE_END.as_bytes());
    }
    b.push(b'\r');
    b
}

/// Whether the program asked for bracketed pastes (it turned DECSET 2004 on).
pub fn bracketed(screen: &vt100::Screen) -> bool {
    screen.bracketed_paste()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_then_enter_framed_as_the_program_asked() {
        assert_eq!(bytes("do it", true), b"\x1b[200~do it\x1b[201~\r");
        assert_eq!(bytes("do it", false), b"do it\r");
        let mut vt = vt100::Parser::default();
        assert!(!bracketed(vt.screen()));
        vt.process(b"\x1b[?2004h");
        assert!(bracketed(vt.screen()));
        vt.process(b"\x1b[?2004l");
        assert!(!bracketed(vt.screen()));
    }
}
