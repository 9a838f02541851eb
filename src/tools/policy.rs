//! Tool catalog profiles and exact allowlists (seed 003, "Tool catalog profiles").

use super::name::ToolName;
use std::collections::BTreeSet;
use std::fmt;

/// A named catalog profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    Full,
    Coding,
    ReadOnly,
    Terminal,
}

impl Profile {
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "full" => Some(Profile::Full),
            "coding" => Some(Profile::Coding),
            "read-only" => Some(Profile::ReadOnly),
            "terminal" => Some(Profile::Terminal),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Full => "full",
            Profile::Coding => "coding",
            Profile::ReadOnly => "read-only",
            Profile::Terminal => "terminal",
        }
    }

    pub fn tools(self) -> BTreeSet<ToolName> {
        use ToolName::*;
        let list: &[ToolName] = match self {
            Profile::Full => &ToolName::ALL,
            Profile::Coding => &[
                Initialize,
                BashCommand,
                ReadFiles,
                FileWriteOrEdit,
                MultiFileEdit,
                ApplyPatch,
                EditFiles,
                VerifyEdit,
                UndoEdit,
                CodeMap,
                Execution,
                Agent,
            ],
            // Seed 000: `Execution` in every profile, `Agent` wherever a shell is.
            Profile::ReadOnly => &[Initialize, ReadFiles, ReadImage, CodeMap, Execution],
            Profile::Terminal => &[Initialize, BashCommand, Execution, Agent],
        };
        list.iter().copied().collect()
    }
}

/// Why a policy could not be built; each is a startup error.
#[derive(Debug, PartialEq, Eq)]
pub enum PolicyError {
    UnknownProfile(String),
    UnknownTool(String),
    EmptyAllowlist,
    VerifyEditWithoutBash,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::UnknownProfile(p) => write!(
                f,
                "unknown tool profile {p:?}; expected full, coding, read-only or terminal"
            ),
            PolicyError::UnknownTool(t) => {
                let names: Vec<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
                write!(
                    f,
                    "unknown tool {t:?} in allowlist (names are case-sensitive): {}",
                    names.join(", ")
                )
            }
            PolicyError::EmptyAllowlist => write!(f, "the tool allowlist cannot be empty"),
            PolicyError::VerifyEditWithoutBash => {
                write!(f, "VerifyEdit requires BashCommand in the same allowlist")
            }
        }
    }
}

/// The set of tools one principal may discover and call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolPolicy {
    allowed: BTreeSet<ToolName>,
    /// How the policy was chosen, for diagnostics: a profile name or "allowlist".
    pub source: String,
    /// Canonical directories this principal may bind workspaces in (`workspace_roots` of
    /// the principal TOML); `None` means anywhere.
    pub workspace_roots: Option<Vec<std::path::PathBuf>>,
}

impl ToolPolicy {
    pub fn profile(p: Profile) -> ToolPolicy {
        ToolPolicy {
            allowed: p.tools(),
            source: p.as_str().to_string(),
            workspace_roots: None,
        }
    }

    /// Build from an optional profile name and an exact allowlist; explicit names replace
    /// the profile.
    pub fn build(profile: Option<&str>, allow: &[String]) -> Result<ToolPolicy, PolicyError> {
        let profile = match profile {
            None => Profile::Full,
            Some(p) => Profile::parse(p).ok_or_else(|| PolicyError::UnknownProfile(p.into()))?,
        };
        if allow.is_empty() {
            return Ok(ToolPolicy::profile(profile));
        }
        ToolPolicy::allowlist(allow)
    }

    pub fn allowlist(names: &[String]) -> Result<ToolPolicy, PolicyError> {
        if names.is_empty() {
            return Err(PolicyError::EmptyAllowlist);
        }
        let mut allowed = BTreeSet::new();
        for n in names {
            allowed.insert(ToolName::parse(n).ok_or_else(|| PolicyError::UnknownTool(n.clone()))?);
        }
        if allowed.contains(&ToolName::VerifyEdit) && !allowed.contains(&ToolName::BashCommand) {
            return Err(PolicyError::VerifyEditWithoutBash);
        }
        Ok(ToolPolicy {
            allowed,
            source: "allowlist".into(),
            workspace_roots: None,
        })
    }

    pub fn permits(&self, t: ToolName) -> bool {
        self.allowed.contains(&t)
    }

    /// May a workspace be bound at `workspace` (canonical)?
    pub fn permits_workspace(&self, workspace: &std::path::Path) -> bool {
        self.workspace_roots
            .as_ref()
            .is_none_or(|roots| roots.iter().any(|r| workspace.starts_with(r)))
    }

    /// Tools that are both permitted and implemented, in catalog order.
    pub fn served(&self) -> impl Iterator<Item = ToolName> + '_ {
        ToolName::ALL
            .into_iter()
            .filter(|t| t.implemented() && self.permits(*t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// Seed 003's table, extended by seed 000: `Execution` in every profile, `Agent` in
    /// `full`, `coding` and `terminal`.
    #[test]
    fn profiles_match_seeds_003_and_000() {
        use ToolName::*;
        assert_eq!(Profile::Full.tools().len(), 14);
        assert_eq!(
            Profile::ReadOnly.tools().into_iter().collect::<Vec<_>>(),
            vec![Initialize, ReadFiles, ReadImage, CodeMap, Execution]
        );
        assert_eq!(
            Profile::Terminal.tools().into_iter().collect::<Vec<_>>(),
            vec![Initialize, BashCommand, Execution, Agent]
        );
        let coding = Profile::Coding.tools();
        assert!(!coding.contains(&ReadImage));
        assert!(
            [VerifyEdit, Execution, Agent]
                .iter()
                .all(|t| coding.contains(t))
        );
    }

    #[test]
    fn allowlist_replaces_profile() {
        let p = ToolPolicy::build(Some("terminal"), &s(&["ReadFiles"])).unwrap();
        assert!(p.permits(ToolName::ReadFiles));
        assert!(!p.permits(ToolName::BashCommand));
    }

    #[test]
    fn bad_policies_are_refused() {
        assert_eq!(
            ToolPolicy::build(Some("everything"), &[]),
            Err(PolicyError::UnknownProfile("everything".into()))
        );
        assert_eq!(
            ToolPolicy::allowlist(&s(&["bashcommand"])),
            Err(PolicyError::UnknownTool("bashcommand".into()))
        );
        assert_eq!(ToolPolicy::allowlist(&[]), Err(PolicyError::EmptyAllowlist));
        assert_eq!(
            ToolPolicy::allowlist(&s(&["Initialize", "VerifyEdit"])),
            Err(PolicyError::VerifyEditWithoutBash)
        );
        assert!(ToolPolicy::allowlist(&s(&["BashCommand", "VerifyEdit"])).is_ok());
    }
}
