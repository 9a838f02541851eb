//! Persisted mutation receipts: what a committed edit call produced, keyed by the exact
//! call, so an identical retry is answered without writing again.

use super::{Store, StoreError};
use rusqlite::{OptionalExtension, params};

/// A stored receipt. `targets` is JSON `[[path, revision], …]`; `data` the envelope data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    pub targets: String,
    pub text: String,
    pub data: String,
    pub created_at_ms: i64,
}

impl Store {
    /// The receipt for `key` newer than `not_before_ms`.
    pub fn receipt_get(
        &self,
        key: &str,
        not_before_ms: i64,
    ) -> Result<Option<Receipt>, StoreError> {
        self.with(
            |c| {
                c.query_row(
                    "SELECT targets, text, data, created_at_ms FROM mutation_receipts
                     WHERE key = ?1 AND created_at_ms >= ?2",
                    params![key, not_before_ms],
                    |r| {
                        Ok(Receipt {
                            targets: r.get(0)?,
                            text: r.get(1)?,
                            data: r.get(2)?,
                            created_at_ms: r.get(3)?,
                        })
                    },
                )
                .optional()
            },
            "read mutation receipt",
        )
    }

    /// Store a receipt and drop the expired ones.
    pub fn receipt_put(
        &self,
        key: &str,
        r: &Receipt,
        expire_before_ms: i64,
    ) -> Result<(), StoreError> {
        self.with(
            |c| {
                c.execute(
                    "INSERT OR REPLACE INTO mutation_receipts (key, targets, text, data, created_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![key, r.targets, r.text, r.data, r.created_at_ms],
                )?;
                c.execute(
                    "DELETE FROM mutation_receipts WHERE created_at_ms < ?1",
                    params![expire_before_ms],
                )
                .map(|_| ())
            },
            "write mutation receipt",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_and_expiry() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path()).unwrap();
        let r = Receipt {
            targets: "[]".into(),
            text: "t".into(),
            data: "{}".into(),
            created_at_ms: 100,
        };
        s.receipt_put("k", &r, 0).unwrap();
        assert_eq!(s.receipt_get("k", 50).unwrap(), Some(r.clone()));
        assert_eq!(s.receipt_get("k", 101).unwrap(), None, "expired");
        s.receipt_put(
            "k2",
            &Receipt {
                created_at_ms: 200,
                ..r
            },
            150,
        )
        .unwrap();
        assert_eq!(s.receipt_get("k", 0).unwrap(), None, "purged");
    }
}
