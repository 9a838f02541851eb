//! Opaque, scoped, authenticated cursors: `wx1.<hex payload>.<hex HMAC-SHA256>` (the
//! `hmac` crate; verification is constant-time). Nothing in a cursor is secret, so
//! nothing is encrypted: a page cursor holds the caller's own offsets, and a catalog
//! cursor holds the caller's per-scope change counter (`store::history_scope`), never the
//! install's global history sequence, so one principal cannot count another's activity
//! from it (issue 36 item 14).
//!
//! Invariant: a cursor is accepted only if its MAC verifies under this install's key
//! (32 random bytes in `<state>/history.key`, 0600) and its scope, execution and source
//! equal the caller's; anything else is `None` (the tool answers `invalid_cursor`), so a
//! cursor can never read another scope's data. The peer's cursors are unsigned JSON.

use crate::hex::lower as hex;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

const VERSION: &str = "wx1";
const KEY_FILE: &str = "history.key";

/// What a cursor points into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A page position: execution, source (`output` | `screen` | `detection`), byte offset,
    /// and the snapshot it was taken from (screen / detection generations; 0 for output).
    Page {
        execution_id: String,
        source: String,
        offset: u64,
        snapshot: i64,
    },
    /// A catalog position, for `wait.after`: the scope's own change counter
    /// (`store::history_scope::seq`), never the global `history_seq`.
    Catalog { seq: i64 },
}

/// The install's cursor key.
pub struct Key([u8; 32]);

impl Key {
    /// Load the key, creating it (0600, published atomically) on first use.
    pub fn load_or_create(state_dir: &Path) -> std::io::Result<Key> {
        let path = state_dir.join(KEY_FILE);
        if let Some(k) = read_key(&path)? {
            return Ok(k);
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        let tmp = state_dir.join(format!("{KEY_FILE}.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        // A hard link never replaces: the first process to publish wins, the others read it.
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(Key(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                read_key(&path)?.ok_or_else(|| std::io::Error::other("history key vanished"))
            }
            Err(e) => Err(e),
        }
    }

    #[cfg(test)]
    pub fn fixed(bytes: [u8; 32]) -> Key {
        Key(bytes)
    }

    /// HMAC-SHA256 of `msg` under this key (the `hmac` crate).
    fn hmac(&self) -> Hmac<Sha256> {
        // A 32-byte key is always accepted (HMAC takes any length).
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }

    fn mac(&self, msg: &[u8]) -> [u8; 32] {
        self.hmac().chain_update(msg).finalize().into_bytes().into()
    }

    /// Seal `kind` for `scope` (an opaque scope digest, see `scope_tag`).
    pub fn seal(&self, scope: &str, kind: &Kind) -> String {
        let payload = match kind {
            Kind::Page {
                execution_id,
                source,
                offset,
                snapshot,
            } => format!("{VERSION}|p|{scope}|{execution_id}|{source}|{offset}|{snapshot}"),
            // `s`, not the `c` an older global-sequence cursor carried: those never open.
            Kind::Catalog { seq } => format!("{VERSION}|s|{scope}|{seq}"),
        };
        format!(
            "{VERSION}.{}.{}",
            hex(payload.as_bytes()),
            hex(&self.mac(payload.as_bytes()))
        )
    }

    /// Open a cursor sealed for `scope`; `None` for anything forged, truncated, from
    /// another scope or of another version.
    pub fn open(&self, scope: &str, cursor: &str) -> Option<Kind> {
        let mut parts = cursor.split('.');
        let (v, payload, mac) = (parts.next()?, parts.next()?, parts.next()?);
        if v != VERSION || parts.next().is_some() {
            return None;
        }
        let payload = unhex(payload)?;
        let mac = unhex(mac)?;
        // Constant-time comparison (`verify_slice`); a MAC of another length is refused.
        self.hmac().chain_update(&payload).verify_slice(&mac).ok()?;
        let text = String::from_utf8(payload).ok()?;
        let f: Vec<&str> = text.split('|').collect();
        match f.as_slice() {
            [VERSION, "p", s, exec, source, offset, snapshot] if *s == scope => Some(Kind::Page {
                execution_id: exec.to_string(),
                source: source.to_string(),
                offset: offset.parse().ok()?,
                snapshot: snapshot.parse().ok()?,
            }),
            [VERSION, "s", s, seq] if *s == scope => Some(Kind::Catalog {
                seq: seq.parse().ok().filter(|n: &i64| *n >= 0)?,
            }),
            _ => None,
        }
    }
}

/// A digest naming one scope inside cursors (the scope's fields never appear in clear).
pub fn scope_tag(principal: &str, thread_id: &str, workspace: &str) -> String {
    let d = Sha256::new()
        .chain_update(principal)
        .chain_update([0])
        .chain_update(thread_id)
        .chain_update([0])
        .chain_update(workspace)
        .finalize();
    hex(&d[..16])
}

fn read_key(path: &Path) -> std::io::Result<Option<Key>> {
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    let key: [u8; 32] = bytes
        .try_into()
        .map_err(|_| std::io::Error::other("history key file is not 32 bytes"))?;
    Ok(Some(Key(key)))
}

/// Lower-case hex only: one encoding per cursor, so no two spellings open alike.
fn unhex(s: &str) -> Option<Vec<u8>> {
    let canonical = s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !canonical || !s.len().is_multiple_of(2) || s.len() > 4096 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(offset: u64) -> Kind {
        Kind::Page {
            execution_id: "19a-3".into(),
            source: "output".into(),
            offset,
            snapshot: 0,
        }
    }

    #[test]
    fn round_trip_and_every_tampering_is_refused() {
        let key = Key::fixed([7; 32]);
        let scope = scope_tag("alice", "t1", "/w");
        let c = key.seal(&scope, &page(65536));
        assert_eq!(key.open(&scope, &c), Some(page(65536)));
        let cat = key.seal(&scope, &Kind::Catalog { seq: 9 });
        assert_eq!(key.open(&scope, &cat), Some(Kind::Catalog { seq: 9 }));
        // Another scope, another key, a flipped payload byte, a truncation, garbage.
        assert_eq!(key.open(&scope_tag("bob", "t1", "/w"), &c), None);
        assert_eq!(Key::fixed([8; 32]).open(&scope, &c), None);
        let mut flipped = c.clone().into_bytes();
        flipped[10] = if flipped[10] == b'0' { b'1' } else { b'0' };
        assert_eq!(key.open(&scope, &String::from_utf8(flipped).unwrap()), None);
        assert_eq!(key.open(&scope, &c[..c.len() - 2]), None);
        for junk in [
            "",
            "wx1",
            "wx1..",
            "wx2.00.00",
            "wx1.zz.zz",
            &format!("{c}.x"),
        ] {
            assert_eq!(key.open(&scope, junk), None, "{junk}");
        }
    }

    #[test]
    fn a_catalog_cursor_is_sealed_and_old_forms_never_open() {
        let key = Key::fixed([7; 32]);
        let scope = scope_tag("alice", "t1", "/w");
        let a = key.seal(&scope, &Kind::Catalog { seq: 41 });
        assert_eq!(
            a,
            key.seal(&scope, &Kind::Catalog { seq: 41 }),
            "deterministic"
        );
        assert_eq!(key.open(&scope, &a), Some(Kind::Catalog { seq: 41 }));
        assert_eq!(key.open(&scope_tag("bob", "t1", "/w"), &a), None);
        assert_eq!(Key::fixed([8; 32]).open(&scope, &a), None);
        for at in 0..a.len() {
            let mut changed = a.clone().into_bytes();
            changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
            let changed = String::from_utf8(changed).unwrap();
            if changed != a {
                assert_eq!(key.open(&scope, &changed), None, "{changed}");
            }
        }
        for cut in 1..a.len() {
            assert_eq!(key.open(&scope, &a[..cut]), None, "{}", &a[..cut]);
        }
        // The global-sequence form an older build issued (`|c|`), even correctly MACed,
        // and a negative position never open.
        for payload in [format!("wx1|c|{scope}|41"), format!("wx1|s|{scope}|-1")] {
            let old = format!(
                "wx1.{}.{}",
                hex(payload.as_bytes()),
                hex(&key.mac(payload.as_bytes()))
            );
            assert_eq!(key.open(&scope, &old), None, "{payload}");
        }
    }

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // RFC 4231 test case 2 uses a 4-byte key; ours are 32 bytes, so check case 1's
        // construction with its 20-byte key padded as HMAC pads it.
        let mut k = [0u8; 32];
        k[..20].copy_from_slice(&[0x0b; 20]);
        let mac = Key::fixed(k).mac(b"Hi There");
        assert_eq!(
            hex(&mac),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    proptest::proptest! {
        /// Fuzzed cursor text never opens, and never panics.
        #[test]
        fn arbitrary_text_never_opens(text in "(?s).{0,300}", hexy in "wx1\\.[0-9a-f]{0,80}\\.[0-9a-f]{0,70}") {
            let key = Key::fixed([3; 32]);
            let scope = scope_tag("p", "t", "/w");
            proptest::prop_assert!(key.open(&scope, &text).is_none());
            proptest::prop_assert!(key.open(&scope, &hexy).is_none());
        }

        /// Changing any one character of a real cursor makes it invalid.
        #[test]
        fn every_single_change_is_refused(at in 0usize..400, to in proptest::char::range('!', '~')) {
            let key = Key::fixed([3; 32]);
            let scope = scope_tag("p", "t", "/w");
            let c = key.seal(&scope, &page(4096));
            let at = at % c.len();
            let mut changed: Vec<char> = c.chars().collect();
            proptest::prop_assume!(changed[at] != to);
            changed[at] = to;
            let changed: String = changed.into_iter().collect();
            proptest::prop_assert!(key.open(&scope, &changed).is_none(), "{changed}");
        }
    }

    #[test]
    fn the_key_is_created_once_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = Key::load_or_create(dir.path()).unwrap();
        let b = Key::load_or_create(dir.path()).unwrap();
        assert_eq!(a.0, b.0);
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
