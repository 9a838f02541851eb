//! Spill files: the cleaned (and redacted) text of a delivery's whole journal range, for
//! what the answer itself omitted.
//!
//! Invariant: the journal is streamed through a bounded buffer, never read whole, so the
//! adapter's memory does not grow with a command's output. Segments end at a newline,
//! where `output::clean` holds no state (its screen is one line); a line longer than
//! `MAX_SEGMENT_BYTES` is cut at a UTF-8 boundary. Limits of cutting: a forced cut splits
//! that line's cursor state and any escape sequence across it, and an OSC/DCS string that
//! spans a newline and a segment end shows its remainder as text. Redaction runs per
//! segment; the one rule that spans lines (a PEM private key) is held back until its END
//! line, up to `MAX_KEY_HOLD_BYTES`.

use crate::shell::output;
use crate::shell::redact::Redactor;
use crate::shell::secrets::{KnownSecrets, redact_all};
use crate::tools::ToolContext;
use crate::wire::guardian::ActionResult;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Most journal bytes spilled for one delivery. Memory no longer depends on it (the copy
/// is streamed); it bounds the disk and time one answer may spend, and a spill cut here
/// ends with a line saying so.
const MAX_SPILL_SOURCE_BYTES: u64 = 256 * 1024 * 1024;
/// Journal bytes read per step.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// A line longer than this is cleaned in pieces, bounding the segment (and `clean`'s
/// per-line buffer of chars, 4 bytes each).
const MAX_SEGMENT_BYTES: usize = 1024 * 1024;
/// Longest text held back waiting for a private key's END line. Real keys are a few KiB;
/// beyond this the BEGIN line and the base64 lines after it are still redacted, but key
/// lines arriving in later segments are not recognised.
const MAX_KEY_HOLD_BYTES: usize = 1024 * 1024;
/// Spill files kept per session; older ones (by modification time) are deleted.
const RETAINED_SPILLS: usize = 16;

/// Write the cleaned (and redacted) text of this delivery's whole range to a private file.
pub fn write(ctx: &ToolContext, key: &str, r: &ActionResult) -> Result<PathBuf, String> {
    let journal = r
        .journal_path
        .as_ref()
        .ok_or("no journal for this execution")?;
    let start = r.offset_start - r.omitted_bytes;
    let whole = r.offset_end - start;
    let len = whole.min(MAX_SPILL_SOURCE_BYTES);
    let mut f = std::fs::File::open(journal).map_err(|e| format!("open journal: {e}"))?;
    // The journal may be a segment shared with other executions: bytes of this one only.
    f.seek(SeekFrom::Start(r.journal_offset + start))
        .map_err(|e| format!("seek journal: {e}"))?;
    let dir = ctx.runtime.session_dir(key);
    let exec = r.state.execution_id.as_deref().unwrap_or("idle");
    let path = dir.join(format!("spill-{exec}-{}.txt", r.offset_end));
    let out = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("create spill file: {e}"))?;
    let mut out = io::BufWriter::new(out);
    let known = super::known::known_secrets(ctx, &r.secrets);
    stream(f.take(len), &mut out, known).map_err(|e| format!("write spill file: {e}"))?;
    if len < whole {
        writeln!(
            out,
            "\n[spill stops after {len} of {whole} bytes; the rest is bytes {}..{} of the \
             journal {journal}]",
            r.journal_offset + start + len,
            r.journal_offset + r.offset_end,
        )
        .map_err(|e| format!("write spill file: {e}"))?;
    }
    out.flush().map_err(|e| format!("write spill file: {e}"))?;
    prune(&dir);
    Ok(path)
}

/// Clean (and redact, with the session's known secrets; `None` is off) `src` into `out`
/// segment by segment.
fn stream(mut src: impl Read, out: impl Write, redact: Option<KnownSecrets>) -> io::Result<()> {
    let mut sink = Sink {
        out,
        redact,
        held: String::new(),
    };
    let mut chunk = vec![0; READ_CHUNK_BYTES];
    let mut pending = Vec::with_capacity(READ_CHUNK_BYTES);
    loop {
        let n = match src.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        pending.extend_from_slice(&chunk[..n]);
        if let Some(end) = output::segment_end(&pending, MAX_SEGMENT_BYTES) {
            sink.push(output::clean(&pending[..end]))?;
            pending.drain(..end);
        }
    }
    if !pending.is_empty() {
        sink.push(output::clean(&pending))?;
    }
    sink.finish()
}

/// Cleaned segments on their way to the file, redacted unless redaction is off.
struct Sink<W: Write> {
    out: W,
    redact: Option<KnownSecrets>,
    /// Text from the start of an unclosed private key's BEGIN line, waiting for its END.
    held: String,
}

impl<W: Write> Sink<W> {
    fn push(&mut self, cleaned: String) -> io::Result<()> {
        if self.redact.is_none() {
            return self.out.write_all(cleaned.as_bytes());
        }
        let mut text = std::mem::take(&mut self.held);
        if text.is_empty() {
            text = cleaned;
        } else {
            text.push_str(&cleaned);
        }
        let open = Redactor::global().open_private_key(&text);
        if let Some(at) = open.filter(|&at| text.len() - at <= MAX_KEY_HOLD_BYTES) {
            self.held = text.split_off(at);
        }
        self.write_redacted(&text)
    }

    fn finish(mut self) -> io::Result<()> {
        let rest = std::mem::take(&mut self.held);
        self.write_redacted(&rest)?;
        self.out.flush()
    }

    fn write_redacted(&mut self, text: &str) -> io::Result<()> {
        match &self.redact {
            Some(known) => self.out.write_all(redact_all(text, known).0.as_bytes()),
            None => self.out.write_all(text.as_bytes()),
        }
    }
}

fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut spills: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("spill-"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if spills.len() <= RETAINED_SPILLS {
        return;
    }
    spills.sort();
    for (_, p) in &spills[..spills.len() - RETAINED_SPILLS] {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spilled(raw: &[u8], redact: bool) -> String {
        let mut out = Vec::new();
        stream(raw, &mut out, redact.then(KnownSecrets::new)).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn streaming_matches_cleaning_the_whole() {
        let mut raw = Vec::new();
        for i in 0..40_000 {
            raw.extend_from_slice(format!("line {i}\r\x1b[32mLINE {i}\x1b[0m  \n").as_bytes());
        }
        raw.extend_from_slice("tail é without newline".as_bytes());
        assert!(raw.len() > 4 * READ_CHUNK_BYTES);
        assert_eq!(spilled(&raw, false), output::clean(&raw));
        assert_eq!(spilled(&raw, true), output::clean(&raw));
    }

    #[test]
    fn a_line_longer_than_a_segment_is_cut_on_a_char_boundary() {
        let line = "é".repeat(MAX_SEGMENT_BYTES); // two bytes each
        let raw = format!("{line}\nend\n");
        let out = spilled(raw.as_bytes(), false);
        // Not assert_eq: a failure would print megabytes.
        assert!(out == raw, "{} bytes out of {}", out.len(), raw.len());
        // Ending in the lead byte, or right after a whole char: both cut before that char.
        let odd = format!("x{line}");
        assert_eq!(
            output::segment_end(&odd.as_bytes()[..MAX_SEGMENT_BYTES], MAX_SEGMENT_BYTES),
            Some(MAX_SEGMENT_BYTES - 1)
        );
        assert_eq!(
            output::segment_end(&odd.as_bytes()[1..=MAX_SEGMENT_BYTES], MAX_SEGMENT_BYTES),
            Some(MAX_SEGMENT_BYTES - 2)
        );
    }

    #[test]
    fn a_private_key_across_a_segment_boundary_is_redacted_whole() {
        let body: String = (0..40)
            .map(|i| format!("MIIEvQIBADANBgkqhkiG9w0B{i:08}\n"))
            .collect();
        let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n");
        // Filler lines, so that the first read ends in the middle of the key's body.
        let mut raw = "f".repeat(READ_CHUNK_BYTES - 400);
        raw.push('\n');
        let straddle = raw.len() + key.len() / 2;
        raw.push_str(&key);
        raw.push_str("after\n");
        assert!(raw.len() > READ_CHUNK_BYTES && straddle > READ_CHUNK_BYTES);
        let out = spilled(raw.as_bytes(), true);
        assert!(!out.contains("MIIE"), "a key line leaked");
        assert!(
            out.ends_with("\n[REDACTED PRIVATE KEY]\nafter\n"),
            "{}",
            &out[out.len() - 80..]
        );
        // Redacting the two reads apart would have leaked the second half.
        let (second, _) = Redactor::global().redact(&raw[READ_CHUNK_BYTES..]);
        assert!(second.contains("MIIE"));
    }

    #[test]
    fn an_unclosed_key_is_held_only_up_to_its_bound() {
        let mut raw = String::from("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n");
        raw.push_str(&"filler line\n".repeat(2 * MAX_KEY_HOLD_BYTES / 12));
        let out = spilled(raw.as_bytes(), true);
        assert!(out.starts_with("[REDACTED PRIVATE KEY]\nfiller line\n"));
        assert_eq!(
            out.len(),
            raw.len() - "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN".len() + 22
        );
    }
}
