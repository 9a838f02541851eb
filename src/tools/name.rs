//! Tool names, parsed once at the boundary into an enum.

use std::fmt;

/// Every tool the product defines. Whether a tool is *served* is decided by
/// `ToolName::implemented` (the catalog grows as features land) and by the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolName {
    Initialize,
    BashCommand,
    ReadFiles,
    ReadImage,
    FileWriteOrEdit,
    MultiFileEdit,
    ApplyPatch,
    EditFiles,
    VerifyEdit,
    UndoEdit,
    CodeMap,
    ContextSave,
    Execution,
    Agent,
}

impl ToolName {
    pub const ALL: [ToolName; 14] = [
        ToolName::Initialize,
        ToolName::BashCommand,
        ToolName::ReadFiles,
        ToolName::ReadImage,
        ToolName::FileWriteOrEdit,
        ToolName::MultiFileEdit,
        ToolName::ApplyPatch,
        ToolName::EditFiles,
        ToolName::VerifyEdit,
        ToolName::UndoEdit,
        ToolName::CodeMap,
        ToolName::ContextSave,
        ToolName::Execution,
        ToolName::Agent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Initialize => "Initialize",
            ToolName::BashCommand => "BashCommand",
            ToolName::ReadFiles => "ReadFiles",
            ToolName::ReadImage => "ReadImage",
            ToolName::FileWriteOrEdit => "FileWriteOrEdit",
            ToolName::MultiFileEdit => "MultiFileEdit",
            ToolName::ApplyPatch => "ApplyPatch",
            ToolName::EditFiles => "EditFiles",
            ToolName::VerifyEdit => "VerifyEdit",
            ToolName::UndoEdit => "UndoEdit",
            ToolName::CodeMap => "CodeMap",
            ToolName::ContextSave => "ContextSave",
            ToolName::Execution => "Execution",
            ToolName::Agent => "Agent",
        }
    }

    /// Case-sensitive, as seed 003 requires for allowlists.
    pub fn parse(s: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Tools whose implementation has landed. A tool is advertised and dispatched only
    /// when this is true: the catalog never carries placeholders.
    pub fn implemented(self) -> bool {
        matches!(
            self,
            ToolName::Initialize
                | ToolName::BashCommand
                | ToolName::ReadFiles
                | ToolName::ReadImage
                | ToolName::FileWriteOrEdit
                | ToolName::MultiFileEdit
                | ToolName::ApplyPatch
                | ToolName::EditFiles
                | ToolName::UndoEdit
                | ToolName::Execution
                | ToolName::VerifyEdit
                | ToolName::ContextSave
                | ToolName::CodeMap
                | ToolName::Agent
        )
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for t in ToolName::ALL {
            assert_eq!(ToolName::parse(t.as_str()), Some(t));
        }
        assert_eq!(ToolName::parse("initialize"), None);
        assert_eq!(ToolName::parse(""), None);
    }
}
