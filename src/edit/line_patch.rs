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
        // Saturating: `start_line` and `delete_lines` come from arbitrary JSON integers.
        let end = self.start_line.saturating_add(self.delete_lines.max(1) - 1);
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
        let last = p.start_line.saturating_add(p.delete_lines);
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
    // Deleting every line leaves an empty file, not a single blank line; lines inserted
    // into an empty file end with a newline (even one blank line, whose text is empty).
    if !lines.is_empty() && (ends_with_newline || total == 0) {
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

    /// Found by `fuzz::line_counts_add_up`: one blank line inserted into an empty file was
    /// lost (the file stayed empty), since the joined text of one empty line is empty.
    #[test]
    fn a_blank_line_inserted_into_an_empty_file_is_kept() {
        assert_eq!(apply("", &[p(1, 0, "\n")]).unwrap(), "\n");
        assert_eq!(apply("", &[p(1, 0, "\n\n")]).unwrap(), "\n\n");
        assert_eq!(apply("", &[p(1, 0, "a")]).unwrap(), "a\n");
        assert_eq!(apply("", &[p(1, 0, "")]).unwrap(), "");
        assert_eq!(apply("a\n", &[p(1, 1, "")]).unwrap(), "");
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

    /// Regression (fuzz): huge `delete_lines`/`start_line` overflowed `start_line +
    /// delete_lines` (a debug panic; in release a wrapped bound reached `splice` and
    /// panicked with an out-of-range index).
    #[test]
    fn huge_line_numbers_are_refused_not_overflowed() {
        assert_eq!(p(2, usize::MAX, "").span(), (2, usize::MAX));
        assert_eq!(p(usize::MAX, 0, "").span(), (usize::MAX, usize::MAX));
        assert_eq!(p(3, 2, "").span(), (3, 4));
        assert_eq!(p(3, 0, "").span(), (3, 3));
        assert!(
            apply("", &[p(2, usize::MAX, "")])
                .unwrap_err()
                .contains("beyond")
        );
        assert!(
            apply("a\nb\nc\n", &[p(1, usize::MAX, "")])
                .unwrap_err()
                .contains("beyond")
        );
        assert!(
            apply("a\n", &[p(usize::MAX, usize::MAX, "x")])
                .unwrap_err()
                .contains("beyond")
        );
    }

    /// Regression (fuzz): deleting every line of a newline-terminated file produced "\n"
    /// (one blank line) instead of an empty file.
    #[test]
    fn deleting_every_line_leaves_an_empty_file() {
        assert_eq!(apply("a\n", &[p(1, 1, "")]).unwrap(), "");
        assert_eq!(apply("a\r\nb\r\n", &[p(1, 2, "")]).unwrap(), "");
        assert_eq!(apply("a\nb", &[p(1, 2, "")]).unwrap(), "");
        // A file that is one blank line keeps it; an empty file gets what is inserted.
        assert_eq!(apply("\n", &[]).unwrap(), "\n");
        assert_eq!(apply("a\n", &[p(1, 1, "\n")]).unwrap(), "\n");
        assert_eq!(apply("", &[p(1, 0, "x")]).unwrap(), "x\n");
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Line numbers: small, or at the edges of `usize` (ApplyPatch passes any JSON u64).
    fn arb_line() -> impl Strategy<Value = usize> {
        prop_oneof![
            8 => 0usize..12,
            1 => Just(usize::MAX),
            1 => Just(usize::MAX - 1),
            1 => any::<usize>(),
        ]
    }

    fn arb_patch() -> impl Strategy<Value = Patch> {
        (arb_line(), arb_line(), "[a-z\r\n]{0,12}").prop_map(
            |(start_line, delete_lines, replacement)| Patch {
                start_line,
                delete_lines,
                replacement,
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        /// Arbitrary content and patches: `Ok` or a numbered refusal, never a panic; a
        /// span always starts at its patch and never ends before it.
        #[test]
        fn apply_and_span_are_total(
            content in prop_oneof![any::<String>(), "[ab\r\n]{0,24}"],
            patches in proptest::collection::vec(arb_patch(), 0..5),
        ) {
            for p in &patches {
                let (start, end) = p.span();
                prop_assert_eq!(start, p.start_line);
                prop_assert!(end >= start);
            }
            if let Err(e) = apply(&content, &patches) {
                prop_assert!(e.starts_with("patch "), "{}", e);
            }
        }

        /// On LF text with a final newline (or empty), valid patches change the line count
        /// by exactly what they delete and insert, and no patch is the identity.
        #[test]
        fn line_counts_add_up(
            lines in proptest::collection::vec("[a-z]{0,3}", 0..6),
            raw in proptest::collection::vec(
                (0usize..8, 0usize..5, proptest::collection::vec("[A-Z]{0,3}", 0..3), any::<bool>()),
                0..4,
            ),
        ) {
            let content: String = lines.iter().map(|l| format!("{l}\n")).collect();
            prop_assert_eq!(apply(&content, &[]).unwrap(), content.clone());
            let patches: Vec<Patch> = raw
                .into_iter()
                .map(|(start_line, delete_lines, rep, trailing)| {
                    let mut replacement = rep.join("\n");
                    if trailing && !rep.is_empty() {
                        replacement.push('\n');
                    }
                    Patch { start_line, delete_lines, replacement }
                })
                .collect();
            if let Ok(out) = apply(&content, &patches) {
                let added: usize = patches.iter().map(|p| p.replacement.lines().count()).sum();
                let deleted: usize = patches.iter().map(|p| p.delete_lines).sum();
                let expected = lines.len() + added - deleted;
                prop_assert_eq!(out.lines().count(), expected, "{:?} -> {:?}", content, out);
                prop_assert!(out.is_empty() || out.ends_with('\n'), "{:?}", out);
            }
        }
    }
}
