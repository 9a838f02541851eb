//! A session's known secret values: learned from the shell's starting environment, from
//! `KEY=value` assignments in command text and output, and from files `ContextSave` reads;
//! then replaced wherever they appear later, even without their key (`echo $TOKEN`).
//!
//! Invariant: a value is learned only under a secret-looking name (the rule `redact` uses
//! for `KEY=value`) and only when it is long enough that replacing it everywhere does not
//! shred ordinary text; replacement uses the plain `[REDACTED]` label, which no learned
//! value can be part of, so replacing twice finds nothing new.

use super::redact::{Redactor, is_secret_name};
use std::borrow::Cow;

/// Shortest value replaced wherever it appears. Shorter values stay redacted in their
/// `KEY=value` form only: `PASSWORD=dev` must not turn every "dev" into a label.
pub const MIN_SECRET_BYTES: usize = 6;
/// Longest value remembered: longer ones are blobs (certificates, JSON), not passwords.
pub const MAX_SECRET_BYTES: usize = 4096;
/// Values remembered per session; the oldest is forgotten first beyond this.
pub const MAX_SECRETS: usize = 256;

const LABEL: &str = "[REDACTED]";

/// The values, longest first so a value containing another is replaced whole.
#[derive(Clone, Default)]
pub struct KnownSecrets {
    values: Vec<String>,
    /// Learning order, for forgetting the oldest.
    order: Vec<String>,
}

impl std::fmt::Debug for KnownSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KnownSecrets({} values)", self.values.len())
    }
}

impl KnownSecrets {
    pub fn new() -> KnownSecrets {
        KnownSecrets::default()
    }

    /// The secret-named variables of a starting environment.
    pub fn from_env(env: &[(String, String)]) -> KnownSecrets {
        let mut known = KnownSecrets::new();
        for (name, value) in env {
            if is_secret_name(name) {
                known.learn(value);
            }
        }
        known
    }

    /// Learns one value; false when it was already known or does not qualify.
    pub fn learn(&mut self, value: &str) -> bool {
        let value = value.trim();
        let qualifies = (MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&value.len())
            && !value.contains("REDACTED")
            && !value.starts_with('$');
        if !qualifies || self.values.iter().any(|v| v == value) {
            return false;
        }
        if self.order.len() >= MAX_SECRETS {
            let oldest = self.order.remove(0);
            self.values.retain(|v| *v != oldest);
        }
        self.order.push(value.to_owned());
        let at = self.values.partition_point(|v| v.len() >= value.len());
        self.values.insert(at, value.to_owned());
        true
    }

    /// Learns the values assigned to secret-named keys in `text`; how many were new.
    pub fn learn_text(&mut self, text: &str) -> usize {
        let found = Redactor::global().assigned_secrets(text);
        found.iter().filter(|v| self.learn(v)).count()
    }

    /// Learns every value of `values` (a set passed on by another process).
    pub fn learn_all(&mut self, values: &[String]) {
        for v in values {
            self.learn(v);
        }
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Replaces every known value in `text`, counting replacements.
    pub fn redact<'a>(&self, text: Cow<'a, str>, count: &mut usize) -> Cow<'a, str> {
        let mut text = text;
        for value in &self.values {
            let hits = text.matches(value.as_str()).count();
            if hits > 0 {
                *count += hits;
                text = Cow::Owned(text.replace(value.as_str(), LABEL));
            }
        }
        text
    }
}

/// The built-in rules, then the known values: a `KEY=value` keeps its key, and the value
/// standing alone elsewhere is replaced too.
pub fn redact_all<'a>(text: &'a str, known: &KnownSecrets) -> (Cow<'a, str>, usize) {
    let (text, mut count) = Redactor::global().redact(text);
    let text = known.redact(text, &mut count);
    (text, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(n: usize) -> String {
        "k3Y".repeat(n)
    }

    #[test]
    fn learns_from_env_text_and_output_and_replaces_bare_values() {
        let env_secret = fake(5);
        let env = vec![
            ("AWS_SECRET_ACCESS_KEY".to_string(), env_secret.clone()),
            ("HOME".to_string(), "/home/someone".to_string()),
            ("GITHUB_TOKEN".to_string(), "short".to_string()),
        ];
        let mut known = KnownSecrets::from_env(&env);
        assert_eq!(known.values(), std::slice::from_ref(&env_secret));
        let typed = fake(7);
        assert_eq!(
            known.learn_text(&format!("export DB_PASSWORD='{typed}'; make")),
            1
        );
        let printed = fake(9);
        assert_eq!(
            known.learn_text(&format!("{{\"api_key\": \"{printed}\"}}")),
            1
        );
        let text = format!("{env_secret} and {typed}, {printed}; /home/someone");
        let mut n = 0;
        let out = known.redact(Cow::Borrowed(&text), &mut n);
        assert_eq!(out, "[REDACTED] and [REDACTED], [REDACTED]; /home/someone");
        assert_eq!(n, 3);
        let again = known.redact(out.clone(), &mut n);
        assert_eq!(again, out, "replacing twice finds nothing new");
    }

    #[test]
    fn short_placeholder_and_code_values_are_not_learned() {
        let mut known = KnownSecrets::new();
        let text = "PASSWORD=dev TOKEN=$GITHUB_TOKEN let token = parse(x) max_tokens=4096";
        assert_eq!(known.learn_text(text), 0);
        assert!(known.is_empty());
    }

    #[test]
    fn longest_value_wins_and_the_oldest_is_forgotten() {
        let mut known = KnownSecrets::new();
        known.learn("abcdef");
        known.learn("abcdefghij");
        let mut n = 0;
        assert_eq!(
            known.redact(Cow::Borrowed("abcdefghij"), &mut n),
            "[REDACTED]"
        );
        for i in 0..MAX_SECRETS {
            known.learn(&format!("value-{i:06}"));
        }
        assert_eq!(known.values().len(), MAX_SECRETS);
        assert!(!known.values().iter().any(|v| v == "abcdef"));
    }
}
