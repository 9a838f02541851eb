//! Line patches: `{start_line, delete_lines, replacement}` applied against one revision.
//! Patches must be ordered and must not overlap; they are applied bottom-up so earlier
//! line numbers stay valid.

/// One patch, 1-based. `delete_lines: 0` inserts before `start_line` (or appends when
/// `start_line` is one past the last line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    pub start_line: usize,
    pub delete_lines: usize,
    pub replacement: String,
}

impl Patch {
    /// The original lines this patch touches (for the read permit); an insertion touches
    /// the line it lands before.
    pub fn span(&self) -> (usize, usize) {
        let end = self.start_line + self.delete_lines.max(1) - 1;
        (self.start_line, end)
    }
}

/// Apply `patches` to `content`, keeping its line ending style and final newline.
pub fn apply(content: &str, patches: &[Patch]) -> Result<String, String> {
    let crlf = content.contains("\r\n");
    let nl = if crlf { "\r\n" } else { "\n" };
    let ends_with_newline = content.ends_with('\n');
    let mut lines: Vec<String> = content.lines().map(str::to_string).collect();
    let total = lines.len();
    let mut prev_end = 0usize;
    for (i, p) in patches.iter().enumerate() {
        if p.start_line == 0 {
            return Err(format!("patch {}: start_line is 1-based", i + 1));
        }
        if p.start_line <= prev_end {
            return Err(format!(
                "patch {}: starts at line {} but the previous patch ends at line {prev_end}; patches must be ordered and must not overlap",
                i + 1,
                p.start_line
            ));
        }
        let last = p.start_line + p.delete_lines;
        if p.start_line > total + 1 || last > total + 1 {
            return Err(format!(
                "patch {}: lines {}..{} are beyond the end of the file ({total} lines)",
                i + 1,
                p.start_line,
                last.saturating_sub(1)
            ));
        }
        prev_end = (p.start_line + p.delete_lines)
            .saturating_sub(1)
            .max(p.start_line);
        if p.delete_lines == 0 {
            prev_end = p.start_line - 1;
        }
    }
    for p in patches.iter().rev() {
        let at = p.start_line - 1;
        let new: Vec<String> = if p.replacement.is_empty() {
            Vec::new()
        } else {
            p.replacement.lines().map(str::to_string).collect()
        };
        lines.splice(at..at + p.delete_lines, new);
    }
    let mut out = lines.join(nl);
    if ends_with_newline || (total == 0 && !out.is_empty()) {
        out.push_str(nl);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: usize, del: usize, rep: &str) -> Patch {
        Patch {
            start_line: start,
            delete_lines: del,
            replacement: rep.into(),
        }
    }

    #[test]
    fn replace_insert_delete_append() {
        let c = "a\nb\nc\n";
        assert_eq!(apply(c, &[p(2, 1, "B")]).unwrap(), "a\nB\nc\n");
        assert_eq!(apply(c, &[p(1, 0, "top")]).unwrap(), "top\na\nb\nc\n");
        assert_eq!(apply(c, &[p(2, 2, "")]).unwrap(), "a\n");
        assert_eq!(apply(c, &[p(4, 0, "d")]).unwrap(), "a\nb\nc\nd\n");
        assert_eq!(
            apply(c, &[p(1, 1, "A"), p(3, 1, "C")]).unwrap(),
            "A\nb\nC\n"
        );
        assert_eq!(apply("x\r\ny", &[p(2, 1, "Y")]).unwrap(), "x\r\nY");
    }

    #[test]
    fn bad_patches_are_refused() {
        let c = "a\nb\nc\n";
        assert!(
            apply(c, &[p(2, 2, "x"), p(3, 1, "y")])
                .unwrap_err()
                .contains("overlap")
        );
        assert!(apply(c, &[p(3, 1, "x"), p(1, 1, "y")]).is_err());
        assert!(apply(c, &[p(3, 5, "x")]).unwrap_err().contains("beyond"));
        assert!(apply(c, &[p(0, 1, "x")]).is_err());
    }
}
