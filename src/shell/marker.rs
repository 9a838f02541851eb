//! The prompt marker: how a command's completion is recognised.
//!
//! The shell's `PROMPT_COMMAND` prints `ESC ] 6973 ; <nonce> ; <exit> ; <cwd> BEL` before
//! every prompt. The nonce is random per shell and never exported, so a command's output
//! cannot forge a completion. `Scanner` splits a byte stream into output and markers,
//! holding back only a possible partial marker at the end of a chunk.

/// The OSC number used for markers: unregistered, so terminals ignore it.
const OSC: &str = "6973";
/// Longest marker we wait for before treating held bytes as ordinary output (PATH_MAX plus
/// room for the nonce and exit code).
const MAX_MARKER_BYTES: usize = 4096 + 128;

/// A completion reported by the shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    pub exit_code: i32,
    pub cwd: String,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Output(Vec<u8>),
    Marker(Marker),
}

pub struct Scanner {
    prefix: Vec<u8>,
    held: Vec<u8>,
}

impl Scanner {
    pub fn new(nonce: &str) -> Scanner {
        Scanner {
            prefix: format!("\x1b]{OSC};{nonce};").into_bytes(),
            held: Vec::new(),
        }
    }

    /// Feed bytes; returns output and markers in stream order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Piece> {
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut plain_start = 0;
        let mut i = 0;
        while i < buf.len() {
            if buf[i] != 0x1b {
                i += 1;
                continue;
            }
            let rest = &buf[i..];
            let n = rest.len().min(self.prefix.len());
            if rest[..n] != self.prefix[..n] {
                i += 1;
                continue;
            }
            if rest.len() < self.prefix.len() {
                // A partial prefix at the end: hold it for the next feed.
                break;
            }
            let body = &rest[self.prefix.len()..];
            match body.iter().position(|&b| b == 0x07) {
                Some(end) => {
                    push_output(&mut out, &buf[plain_start..i]);
                    if let Some(m) = parse_body(&body[..end]) {
                        out.push(Piece::Marker(m));
                    }
                    i += self.prefix.len() + end + 1;
                    plain_start = i;
                }
                None if rest.len() < MAX_MARKER_BYTES => break,
                None => i += 1,
            }
        }
        if i < buf.len() {
            push_output(&mut out, &buf[plain_start..i]);
            self.held = buf[i..].to_vec();
        } else {
            push_output(&mut out, &buf[plain_start..]);
        }
        out
    }
}

fn push_output(out: &mut Vec<Piece>, bytes: &[u8]) {
    if !bytes.is_empty() {
        out.push(Piece::Output(bytes.to_vec()));
    }
}

fn parse_body(body: &[u8]) -> Option<Marker> {
    let text = String::from_utf8_lossy(body);
    let (code, cwd) = text.split_once(';')?;
    Some(Marker {
        exit_code: code.trim().parse().ok()?,
        cwd: cwd.to_string(),
    })
}

/// A fresh random nonce (128 bits, hex).
pub fn new_nonce() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No entropy source is a broken system; fall back to time and pid so markers still
        // differ between shells, and say so.
        log::warn!("getrandom failed; using a weak marker nonce");
        let t = crate::deadline::unix_ms() as u128 ^ ((std::process::id() as u128) << 64);
        b = t.to_le_bytes();
    }
    crate::hex::lower(&b)
}

/// The shell function installed as `precmd` (zsh).
pub fn prompt_function(nonce: &str) -> String {
    format!(
        "__winx_prompt() {{ local __winx_rc=$?; printf '\\033]{OSC};{nonce};%s;%s\\007' \"$__winx_rc\" \"$PWD\"; }}\n"
    )
}

/// bash's `PS1`, single-quoted for the rc: the marker itself. bash prints its primary
/// prompt whenever it is ready for a new command line, including after a line it
/// discarded without running `PROMPT_COMMAND` (a failed history expansion), so every
/// command line ends with a marker. Prompt escapes are decoded before `$?`/`$PWD` are
/// expanded, so a directory name cannot inject escapes; no fork, no function call.
pub fn bash_prompt(nonce: &str) -> String {
    format!("PS1='\\e]{OSC};{nonce};$?;$PWD\\a'\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(nonce: &str, code: i32, cwd: &str) -> Vec<u8> {
        format!("\x1b]{OSC};{nonce};{code};{cwd}\x07").into_bytes()
    }

    #[test]
    fn splits_output_and_markers() {
        let mut s = Scanner::new("abc");
        let mut input = b"hello\n".to_vec();
        input.extend(marker("abc", 3, "/tmp"));
        input.extend(b"after");
        assert_eq!(
            s.feed(&input),
            vec![
                Piece::Output(b"hello\n".to_vec()),
                Piece::Marker(Marker {
                    exit_code: 3,
                    cwd: "/tmp".into()
                }),
                Piece::Output(b"after".to_vec()),
            ]
        );
    }

    #[test]
    fn forged_markers_with_the_wrong_nonce_are_output() {
        let mut s = Scanner::new("secret");
        let fake = marker("guess", 0, "/");
        assert_eq!(s.feed(&fake), vec![Piece::Output(fake.clone())]);
    }

    #[test]
    fn a_marker_split_across_reads_is_found() {
        let m = marker("n0nce", 0, "/home/u");
        for cut in 1..m.len() {
            let mut s = Scanner::new("n0nce");
            let mut pieces = s.feed(&[b"x".as_slice(), &m[..cut]].concat());
            pieces.extend(s.feed(&m[cut..]));
            let markers: Vec<_> = pieces
                .iter()
                .filter(|p| matches!(p, Piece::Marker(_)))
                .collect();
            assert_eq!(markers.len(), 1, "cut at {cut}");
            assert_eq!(pieces[0], Piece::Output(b"x".to_vec()));
        }
    }

    #[test]
    fn other_escape_sequences_pass_through() {
        let mut s = Scanner::new("n");
        assert_eq!(
            s.feed(b"\x1b[31mred\x1b[0m"),
            vec![Piece::Output(b"\x1b[31mred\x1b[0m".to_vec())]
        );
    }

    #[test]
    fn nonces_are_random_hex() {
        let (a, b) = (new_nonce(), new_nonce());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_output_is_preserved(chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..64), 0..8)) {
            let mut s = Scanner::new("zz");
            let mut seen = Vec::new();
            for c in &chunks {
                for p in s.feed(c) {
                    if let Piece::Output(b) = p { seen.extend(b) }
                }
            }
            let all: Vec<u8> = chunks.concat();
            // Without a full marker, every byte comes back except a held partial prefix.
            proptest::prop_assert!(all.starts_with(&seen));
        }
    }
}
