//! Watching a session's PTY output for `KEY=value` assignments of secret-named keys, so
//! their values are known (and redacted) from then on.

use crate::shell::output::clean;
use crate::shell::secrets::KnownSecrets;

/// Longest unfinished output line carried between PTY reads while looking for
/// assignments; a longer line is scanned in pieces.
const MAX_CARRY_BYTES: usize = 16 * 1024;

/// Finds assignments in a stream of PTY output, line by line across reads.
#[derive(Default)]
pub struct Harvester {
    carry: Vec<u8>,
}

impl Harvester {
    /// Feeds output bytes; complete lines holding `=` or `:` are scanned (cleaned of
    /// terminal sequences first). Returns how many values were new.
    pub fn feed(&mut self, bytes: &[u8], known: &mut KnownSecrets) -> usize {
        let mut learned = 0;
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(nl + 1);
            if self.carry.is_empty() {
                learned += scan(line, known);
            } else {
                self.carry.extend_from_slice(line);
                learned += scan(&self.carry, known);
                self.carry.clear();
            }
            rest = tail;
        }
        if self.carry.len() + rest.len() > MAX_CARRY_BYTES {
            self.carry.extend_from_slice(rest);
            learned += scan(&self.carry, known);
            self.carry.clear();
        } else {
            self.carry.extend_from_slice(rest);
        }
        learned
    }
}

/// The cheap byte test first: most output lines hold neither `=` nor `:`.
fn scan(line: &[u8], known: &mut KnownSecrets) -> usize {
    if !line.iter().any(|&b| b == b'=' || b == b':') {
        return 0;
    }
    known.learn_text(&clean(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_split_across_reads_and_coloured_is_learned() {
        let mut known = KnownSecrets::new();
        let printed = "k3Y".repeat(9);
        let mut h = Harvester::default();
        let line = format!("\x1b[1mAPI_KEY\x1b[0m={printed}\r\n");
        let (a, b) = line.as_bytes().split_at(10);
        assert_eq!(h.feed(a, &mut known) + h.feed(b, &mut known), 1);
        assert_eq!(known.values(), [printed]);
        assert_eq!(h.feed(b"no assignment here\n", &mut known), 0);
    }
}
