//! CodeMap's engine: outlines of source files, a ranked map of a repository, and the
//! references of a name — pure scanning, ranking and caching; the `CodeMap` tool
//! (`tools::codemap`) adds arguments, path authority and the envelope.
//!
//! Role: `lex` turns bytes into tokens with one hand-written scanner per language family;
//! `outline` reads definitions from the tokens; `walk` lists a tree (honouring
//! `.gitignore`, skipping binaries and large files) within a budget; `cache` keeps each
//! file's outline keyed by its identity and stat; `rank` orders files for a query;
//! `repo_map` pages the result under a snapshot hash; `references` finds a name's uses.
//!
//! Invariant: nothing here writes a file, starts a process or follows a symlink out of
//! the directory it was given; every loop is bounded by the input (tokens, entries) or by
//! an explicit budget, so a hostile tree or file gives a truncated answer, never a hang.
//! Invariant: no grammar crate — the scanners are lexical (strings, comments, brackets,
//! indentation); see docs/architecture.md ("CodeMap") for the decision and its cost.

pub mod batch;
pub mod cache;
pub mod cursor;
pub mod gitignore;
pub mod lang;
pub mod lex;
pub mod outline;
pub mod rank;
pub mod references;
pub mod repo_map;
pub mod walk;

pub use lang::Language;

/// Files larger than this are not scanned (generated code, data, bundles).
pub const MAX_SCAN_BYTES: u64 = 2 * 1024 * 1024;

/// What a definition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Function,
    Method,
    Class,
    Struct,
    Enum,
    Union,
    Trait,
    Interface,
    /// A Rust `impl` block (named after its type).
    Impl,
    Module,
    Namespace,
    Constant,
    /// A Rust `static`.
    Static,
    /// A type alias (`type`, `typedef`, `using X =`).
    Type,
    Macro,
    /// A JavaScript object literal bound to a name (`const config = {…}`), whose members
    /// are outlined like a class's.
    Object,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Function => "function",
            Kind::Method => "method",
            Kind::Class => "class",
            Kind::Struct => "struct",
            Kind::Enum => "enum",
            Kind::Union => "union",
            Kind::Trait => "trait",
            Kind::Interface => "interface",
            Kind::Impl => "impl",
            Kind::Module => "module",
            Kind::Namespace => "namespace",
            Kind::Constant => "constant",
            Kind::Static => "static",
            Kind::Type => "type",
            Kind::Macro => "macro",
            Kind::Object => "object",
        }
    }

    /// Types and modules rank above their members in a repository map's "top symbols".
    pub fn weight(self) -> u32 {
        match self {
            Kind::Class
            | Kind::Struct
            | Kind::Enum
            | Kind::Trait
            | Kind::Interface
            | Kind::Union
            | Kind::Module
            | Kind::Namespace => 3,
            Kind::Function | Kind::Type | Kind::Macro | Kind::Object => 2,
            Kind::Method | Kind::Impl | Kind::Constant | Kind::Static => 1,
        }
    }
}

/// One definition: `line`..=`end_line` (1-based) and the name of the definition it is
/// nested in, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub kind: Kind,
    pub line: u32,
    pub end_line: u32,
    pub parent: Option<String>,
}

/// The outline of `src` read as `lang`.
pub fn outline_of(lang: Language, src: &[u8]) -> Vec<Symbol> {
    outline::outline(lang, src)
}
