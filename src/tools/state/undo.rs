//! One session's undo checkpoints: the pre-edit bytes of its last edits, oldest first,
//! bounded in count and bytes.

use std::collections::VecDeque;
use std::path::PathBuf;

/// Checkpoints kept per session: enough to walk back a burst of edits.
pub const MAX_CHECKPOINTS: usize = 16;
/// Bytes of pre-edit content kept per session; older checkpoints are dropped beyond it.
pub const MAX_CHECKPOINT_BYTES: usize = 64 * 1024 * 1024;

/// One file of one edit.
pub struct FileState {
    pub path: PathBuf,
    /// `None`: the edit created the file.
    pub before: Option<Vec<u8>>,
    pub after_revision: String,
}

/// One committed edit: every file it wrote.
pub type Checkpoint = Vec<FileState>;

/// A session's checkpoints, oldest first.
#[derive(Default)]
pub struct Checkpoints {
    stack: VecDeque<Checkpoint>,
    bytes: usize,
}

fn size(cp: &Checkpoint) -> usize {
    cp.iter()
        .map(|f| f.before.as_ref().map_or(0, Vec::len))
        .sum()
}

impl Checkpoints {
    /// Remember an edit; the oldest are dropped beyond the bounds (the newest is always
    /// kept, however large).
    pub fn push(&mut self, cp: Checkpoint) {
        self.bytes += size(&cp);
        self.stack.push_back(cp);
        while self.stack.len() > MAX_CHECKPOINTS
            || (self.stack.len() > 1 && self.bytes > MAX_CHECKPOINT_BYTES)
        {
            if let Some(old) = self.stack.pop_front() {
                self.bytes -= size(&old);
            }
        }
    }

    /// The newest checkpoint matching `wanted`, by index.
    pub fn newest(&self, wanted: impl Fn(&Checkpoint) -> bool) -> Option<usize> {
        self.stack.iter().rposition(wanted)
    }

    pub fn get(&self, idx: usize) -> Option<&Checkpoint> {
        self.stack.get(idx)
    }

    pub fn remove(&mut self, idx: usize) -> Option<Checkpoint> {
        let cp = self.stack.remove(idx)?;
        self.bytes -= size(&cp);
        Some(cp)
    }

    pub fn len(&self) -> usize {
        self.stack.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(bytes: usize) -> Checkpoint {
        vec![FileState {
            path: "/w/a".into(),
            before: Some(vec![0; bytes]),
            after_revision: "r".into(),
        }]
    }

    #[test]
    fn bounded_in_count_and_bytes() {
        let mut c = Checkpoints::default();
        for _ in 0..MAX_CHECKPOINTS + 5 {
            c.push(edit(1));
        }
        assert_eq!(c.len(), MAX_CHECKPOINTS);
        c.push(edit(MAX_CHECKPOINT_BYTES));
        assert_eq!(c.len(), 1, "the newest is kept alone");
        c.push(edit(1));
        assert_eq!(c.len(), 1);
        assert_eq!(c.remove(0).map(|cp| size(&cp)), Some(1));
        assert!(c.is_empty());
        assert_eq!(c.bytes, 0);
    }
}
