//! Native prompt receipts (migration 8): one row per (principal, prompt_id), inserted as
//! `uncertain` before the prompt is sent and updated from the guardian's answer.
//!
//! Invariants: a row is created once per (principal, prompt_id) and its payload never
//! changes; `delivery` goes from `uncertain` to `delivered` only on the guardian's answer
//! (a refused prompt's row is deleted: nothing was written); `activity_observed` never
//! goes back to false.

use super::{Store, StoreError};
use rusqlite::{Connection, OptionalExtension, Row, params};

pub const MIGRATION: &str = "CREATE TABLE agent_receipts (
        principal TEXT NOT NULL,
        prompt_id TEXT NOT NULL,
        payload_sha256 TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        workspace_root TEXT NOT NULL,
        target TEXT NOT NULL,
        recognizer TEXT NOT NULL,
        generation TEXT NOT NULL,
        guardian_key TEXT NOT NULL,
        socket TEXT NOT NULL,
        delivery TEXT NOT NULL,
        baseline_seq INTEGER,
        suppressed INTEGER NOT NULL DEFAULT 0,
        activity_observed INTEGER NOT NULL DEFAULT 0,
        outcome TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        delivered_at_ms INTEGER,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (principal, prompt_id)
    ) STRICT;
    CREATE INDEX agent_receipts_generation ON agent_receipts (generation);";

/// Receipts older than this are pruned when a new one is claimed.
pub const KEEP_MS: i64 = 24 * 60 * 60 * 1000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentReceipt {
    pub principal: String,
    pub prompt_id: String,
    pub payload_sha256: String,
    pub thread_id: String,
    pub workspace_root: String,
    pub target: String,
    pub recognizer: String,
    pub generation: String,
    /// Where the target's guardian listens (to observe the receipt later).
    pub guardian_key: String,
    pub socket: String,
    /// `uncertain` or `delivered`.
    pub delivery: String,
    pub baseline_seq: Option<i64>,
    pub suppressed: bool,
    pub activity_observed: bool,
    /// `waiting`, `awaiting_input`, `awaiting_approval`, `exited`, `timed_out` or
    /// `generation_changed`.
    pub outcome: String,
    pub created_at_ms: i64,
    pub delivered_at_ms: Option<i64>,
    pub updated_at_ms: i64,
}

/// What claiming a prompt id found.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// A new row (delivery `uncertain`): the caller may send, once.
    New,
    /// The id was claimed before: the stored receipt, never sent again.
    Existing(Box<AgentReceipt>),
    /// The generation already holds this many receipts.
    Full(i64),
}

const COLUMNS: &str = "principal, prompt_id, payload_sha256, thread_id, workspace_root,
    target, recognizer, generation, guardian_key, socket, delivery, baseline_seq,
    suppressed, activity_observed, outcome, created_at_ms, delivered_at_ms, updated_at_ms";

fn from_row(r: &Row) -> rusqlite::Result<AgentReceipt> {
    Ok(AgentReceipt {
        principal: r.get(0)?,
        prompt_id: r.get(1)?,
        payload_sha256: r.get(2)?,
        thread_id: r.get(3)?,
        workspace_root: r.get(4)?,
        target: r.get(5)?,
        recognizer: r.get(6)?,
        generation: r.get(7)?,
        guardian_key: r.get(8)?,
        socket: r.get(9)?,
        delivery: r.get(10)?,
        baseline_seq: r.get(11)?,
        suppressed: r.get::<_, i64>(12)? != 0,
        activity_observed: r.get::<_, i64>(13)? != 0,
        outcome: r.get(14)?,
        created_at_ms: r.get(15)?,
        delivered_at_ms: r.get(16)?,
        updated_at_ms: r.get(17)?,
    })
}

fn get(c: &Connection, principal: &str, prompt_id: &str) -> rusqlite::Result<Option<AgentReceipt>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM agent_receipts WHERE principal = ?1 AND prompt_id = ?2"),
        params![principal, prompt_id],
        from_row,
    )
    .optional()
}

impl Store {
    /// Claim `r.prompt_id` for `r.principal` in one transaction: an existing row is
    /// returned as it is; otherwise, unless `r.generation` holds `limit` receipts, `r` is
    /// inserted (as given: `uncertain`). Receipts past `KEEP_MS` are pruned first.
    pub fn receipt_claim(&self, r: &AgentReceipt, limit: i64) -> Result<Claim, StoreError> {
        self.with(
            |c| {
                let tx = c.unchecked_transaction()?;
                tx.execute(
                    "DELETE FROM agent_receipts WHERE created_at_ms < ?1",
                    params![r.created_at_ms - KEEP_MS],
                )?;
                if let Some(old) = get(&tx, &r.principal, &r.prompt_id)? {
                    return Ok(Claim::Existing(Box::new(old)));
                }
                let n: i64 = tx.query_row(
                    "SELECT count(*) FROM agent_receipts WHERE generation = ?1",
                    params![r.generation],
                    |x| x.get(0),
                )?;
                if n >= limit {
                    return Ok(Claim::Full(n));
                }
                tx.execute(
                    &format!(
                        "INSERT INTO agent_receipts ({COLUMNS}) VALUES
                         (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
                          ?16, ?17, ?18)"
                    ),
                    params![
                        r.principal,
                        r.prompt_id,
                        r.payload_sha256,
                        r.thread_id,
                        r.workspace_root,
                        r.target,
                        r.recognizer,
                        r.generation,
                        r.guardian_key,
                        r.socket,
                        r.delivery,
                        r.baseline_seq,
                        r.suppressed as i64,
                        r.activity_observed as i64,
                        r.outcome,
                        r.created_at_ms,
                        r.delivered_at_ms,
                        r.updated_at_ms,
                    ],
                )?;
                tx.commit()?;
                Ok(Claim::New)
            },
            "claim prompt receipt",
        )
    }

    /// The receipt of `prompt_id` for `principal`.
    pub fn receipt_of(
        &self,
        principal: &str,
        prompt_id: &str,
    ) -> Result<Option<AgentReceipt>, StoreError> {
        self.with(|c| get(c, principal, prompt_id), "read prompt receipt")
    }

    /// Store what is known now: delivery only moves to `delivered`, activity only to true.
    pub fn receipt_update(&self, r: &AgentReceipt) -> Result<(), StoreError> {
        self.with(
            |c| {
                c.execute(
                    "UPDATE agent_receipts SET
                        delivery = CASE WHEN ?3 = 'delivered' THEN ?3 ELSE delivery END,
                        baseline_seq = coalesce(baseline_seq, ?4),
                        suppressed = max(suppressed, ?5),
                        activity_observed = max(activity_observed, ?6),
                        outcome = ?7,
                        delivered_at_ms = coalesce(delivered_at_ms, ?8),
                        updated_at_ms = ?9
                     WHERE principal = ?1 AND prompt_id = ?2",
                    params![
                        r.principal,
                        r.prompt_id,
                        r.delivery,
                        r.baseline_seq,
                        r.suppressed as i64,
                        r.activity_observed as i64,
                        r.outcome,
                        r.delivered_at_ms,
                        r.updated_at_ms,
                    ],
                )
                .map(drop)
            },
            "update prompt receipt",
        )
    }

    /// Forget a claim whose prompt was refused (nothing was written).
    pub fn receipt_release(&self, principal: &str, prompt_id: &str) -> Result<(), StoreError> {
        self.with(
            |c| {
                c.execute(
                    "DELETE FROM agent_receipts WHERE principal = ?1 AND prompt_id = ?2
                     AND delivery = 'uncertain' AND delivered_at_ms IS NULL",
                    params![principal, prompt_id],
                )
                .map(drop)
            },
            "release prompt receipt",
        )
    }
}
