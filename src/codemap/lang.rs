//! Which scanner reads a file: the language, chosen from the file name alone (never from
//! the contents, so a rename is the only thing that changes it).

use std::path::Path;

/// A language CodeMap outlines. Everything else is `None` from [`Language::of_path`]
/// (the tool then answers `language_supported: false`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Go,
    C,
    Cpp,
    Java,
}

impl Language {
    pub const ALL: [Language; 8] = [
        Language::Rust,
        Language::Python,
        Language::JavaScript,
        Language::TypeScript,
        Language::Go,
        Language::C,
        Language::Cpp,
        Language::Java,
    ];

    /// The language of a file, by extension. `.h` is C: a C++ header usually says so
    /// (`.hpp`, `.hh`), and the C scanner reads C++ declarations in a `.h` well enough.
    pub fn of_path(path: &Path) -> Option<Language> {
        let ext = path.extension()?.to_str()?;
        Some(match ext {
            "rs" => Language::Rust,
            "py" | "pyi" | "pyw" => Language::Python,
            "js" | "mjs" | "cjs" | "jsx" => Language::JavaScript,
            "ts" | "tsx" | "mts" | "cts" => Language::TypeScript,
            "go" => Language::Go,
            "c" | "h" => Language::C,
            "cc" | "cpp" | "cxx" | "c++" | "hh" | "hpp" | "hxx" | "h++" | "ipp" | "tcc" => {
                Language::Cpp
            }
            "java" => Language::Java,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Go => "go",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Java => "java",
        }
    }

    /// The lexical family: which scanner tokenizes it.
    pub fn is_js(self) -> bool {
        matches!(self, Language::JavaScript | Language::TypeScript)
    }

    pub fn is_c(self) -> bool {
        matches!(self, Language::C | Language::Cpp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_choose_the_language() {
        let of = |p: &str| Language::of_path(Path::new(p));
        assert_eq!(of("src/main.rs"), Some(Language::Rust));
        assert_eq!(of("a/b.tsx"), Some(Language::TypeScript));
        assert_eq!(of("x.hpp"), Some(Language::Cpp));
        assert_eq!(of("x.h"), Some(Language::C));
        assert_eq!(of("Makefile"), None);
        assert_eq!(of("notes.md"), None);
    }
}
