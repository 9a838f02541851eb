//! The secret values a session's guardian reported, as the redaction of its output uses
//! them (render, spill files, screen).

use crate::shell::secrets::KnownSecrets;
use crate::tools::ToolContext;
use crate::wire::guardian::SecretValues;

/// What redaction replaces in this session's output: `None` when redaction is off.
pub fn known_secrets(ctx: &ToolContext, values: &SecretValues) -> Option<KnownSecrets> {
    ctx.redact.then(|| {
        let mut known = KnownSecrets::new();
        known.learn_all(&values.0);
        known
    })
}
