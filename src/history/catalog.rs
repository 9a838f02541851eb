//! The read side of the execution history: one caller's scope over the catalog.
//!
//! `History::catalog` opens a `Catalog` for a (principal, thread, workspace) scope: it
//! opens the history on first use and, on this process's first look at the session,
//! reconciles with the session's guardian. Every read then brings the catalog up to date
//! itself — `sync` with the recorder, and one refresh from the guardian of a record still
//! open — before it reads on a pooled reader connection, and it seals every cursor it
//! hands out and opens every cursor it is given. A caller (the `Execution` and `Agent`
//! tools) parses, calls one method and renders the typed answer: it never sees a
//! connection, the cursor key or the scope's tag.
//!
//! Invariant: a record is found only in the catalog's scope; an id from another scope is
//! `NotFound`, exactly like an unknown one.

use super::cursor::{self, Kind};
use super::page::{self, Page, PageError, PageReq, Source};
use super::{History, HistoryError, Limits, Open};
use crate::deadline::Deadline;
use crate::ipc::GuardianClient;
use crate::runtime::Runtime;
use crate::store::history as table;
pub use crate::store::history::{ProcessStatus, Record, Scope, Screen};
use crate::store::history_scope;
use rusqlite::Connection;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Budget of a read that only reads the catalog (list, get, read, explain).
pub const READ_BUDGET: Duration = Duration::from_secs(5);

/// A caller's scope over the opened, reconciled catalog.
pub struct Catalog {
    /// Who may see the records read through this catalog.
    pub scope: Scope,
    pub(super) open: Arc<Open>,
    /// The scope's digest inside cursors.
    pub(super) tag: String,
}

/// Why a catalog read has no answer.
#[derive(Debug)]
pub enum CatalogError {
    /// No record with this id in the scope.
    NotFound(String),
    /// A cursor that is not valid here (forged, cut, another scope, execution or source).
    Cursor(String),
    /// The catalog cannot be read or brought up to date.
    Unavailable(HistoryError),
}

impl From<HistoryError> for CatalogError {
    fn from(e: HistoryError) -> CatalogError {
        CatalogError::Unavailable(e)
    }
}

impl From<PageError> for CatalogError {
    fn from(e: PageError) -> CatalogError {
        match e {
            PageError::Cursor(detail) => CatalogError::Cursor(detail),
            PageError::Db(e) => CatalogError::Unavailable(HistoryError(e.to_string())),
        }
    }
}

/// `list`: the newest records, newest first, and the catalog's position.
pub struct Listing {
    pub records: Vec<Record>,
    pub catalog_cursor: String,
}

/// One item of an observation, in the order asked.
pub struct Observed {
    /// The id as asked.
    pub execution_id: String,
    pub source: Source,
    /// `None`: no such record in the scope.
    pub record: Option<Record>,
    /// The refresh of the record's guardian failed: retained data is shown.
    pub refresh_error: Option<String>,
    /// The page, unless `cursor_error` says why not.
    pub page: Option<Page>,
    pub cursor_error: Option<String>,
}

/// `observe`: every item read in one catalog transaction, and that transaction's position.
pub struct Observation {
    pub items: Vec<Observed>,
    pub catalog_cursor: String,
}

impl History {
    /// The catalog of one scope, reconciled with the session's guardian on this process's
    /// first look at it (within `deadline`).
    pub fn catalog(
        &self,
        principal: &str,
        thread_id: &str,
        workspace_root: &str,
        runtime: &Runtime,
        deadline: &Deadline,
    ) -> Result<Catalog, HistoryError> {
        let scope = super::scope(principal, thread_id, workspace_root);
        let tag = cursor::scope_tag(principal, thread_id, workspace_root);
        let open = self.open()?;
        let key = crate::runtime::session_key(principal, thread_id);
        open.reconcile_session(&key, || runtime.client(&key), deadline);
        Ok(Catalog { scope, open, tag })
    }
}

impl Catalog {
    /// The retention limits and the turn recognizer's rules in force.
    pub fn limits(&self) -> &Limits {
        &self.open.limits
    }

    /// The scope's catalog position now: its own change counter (`store::history_scope`),
    /// never the install's global sequence, so a cursor counts nobody else's activity.
    pub(super) fn position(&self, c: &Connection) -> rusqlite::Result<i64> {
        history_scope::seq(c, &self.scope)
    }

    /// Seal catalog position `seq` for this scope.
    pub(super) fn catalog_cursor(&self, seq: i64) -> String {
        self.open.key.seal(&self.tag, &Kind::Catalog { seq })
    }

    /// The catalog position `cursor` holds, when it is a catalog cursor of this scope.
    pub(super) fn catalog_position(&self, cursor: &str) -> Option<i64> {
        match self.open.key.open(&self.tag, cursor) {
            Some(Kind::Catalog { seq }) => Some(seq),
            _ => None,
        }
    }

    /// Everything admitted before this call is in the catalog (within `deadline`).
    pub(super) fn sync(&self, deadline: &Deadline) -> Result<(), HistoryError> {
        self.open.sync(deadline)
    }

    /// `sync` within a fresh read budget, which is returned for what follows.
    fn synced(&self) -> Result<Deadline, HistoryError> {
        let deadline = Deadline::after("history read", READ_BUDGET);
        self.sync(&deadline)?;
        Ok(deadline)
    }

    /// The newest `limit` records of the scope, newest first.
    pub fn list(&self, limit: usize) -> Result<Listing, HistoryError> {
        self.synced()?;
        let (records, seq) = self
            .open
            .read_snapshot(|c| Ok((table::list(c, &self.scope, limit)?, self.position(c)?)))?;
        Ok(Listing {
            records,
            catalog_cursor: self.catalog_cursor(seq),
        })
    }

    /// The record of `id` as the catalog holds it now (no sync, no refresh).
    pub fn find(&self, id: &str) -> Result<Record, CatalogError> {
        self.open
            .read(|c| table::get(c, &self.scope, id))?
            .ok_or_else(|| CatalogError::NotFound(id.to_string()))
    }

    /// The record of `id`, up to date: synced, and refreshed once from its guardian while
    /// it is open (running or still capturing). A failed refresh leaves the retained data,
    /// which is still answered.
    pub fn get(&self, id: &str) -> Result<Record, CatalogError> {
        let deadline = self.synced()?;
        let r = self.find(id)?;
        if !r.is_open() {
            return Ok(r);
        }
        let client = GuardianClient::new(std::path::Path::new(&r.socket));
        match self.open.refresh(&client, &deadline) {
            Ok(()) => self.find(id),
            Err(e) => {
                log::debug!("history refresh of {id}: {e}");
                Ok(r)
            }
        }
    }

    /// The newest recorded screen of `r` (a record of this catalog).
    pub fn screen(&self, r: &Record) -> Result<Option<Screen>, HistoryError> {
        self.open.read(|c| table::screen(c, r.rowid))
    }

    /// The record of `id`, up to date (`get`), and the page `req` asks for.
    pub fn read(&self, id: &str, req: &PageReq) -> Result<(Record, Page), CatalogError> {
        let r = self.get(id)?;
        let page = self
            .open
            .read(|c| Ok(page::page(c, &self.open.key, &self.tag, &r, req)))??;
        Ok((r, page))
    }

    /// Observe `items` within `deadline`: each distinct guardian with an open record
    /// among them is refreshed once; then every item's record and page come from one
    /// catalog transaction, with that transaction's position. One item's failure (no such
    /// record, a bad cursor, a failed refresh) is that item's, never its siblings'.
    pub fn observe(
        &self,
        items: &[(String, PageReq)],
        deadline: &Deadline,
    ) -> Result<Observation, HistoryError> {
        self.sync(deadline)?;
        let before = self.open.read(|c| {
            items
                .iter()
                .map(|(id, _)| Ok((id.clone(), table::get(c, &self.scope, id)?)))
                .collect::<rusqlite::Result<BTreeMap<_, _>>>()
        })?;
        // One refresh per guardian with an open record among the items.
        let mut refresh_errors: BTreeMap<String, String> = BTreeMap::new();
        let mut refreshed = HashSet::new();
        for r in before.values().flatten() {
            if r.is_open() && refreshed.insert(r.guardian.clone()) {
                let client = GuardianClient::new(std::path::Path::new(&r.socket));
                if let Err(e) = self.open.refresh(&client, deadline) {
                    refresh_errors.insert(r.guardian.clone(), e);
                }
            }
        }
        if deadline.expired() {
            return Err(HistoryError(
                "the observation deadline passed before the catalog was read".into(),
            ));
        }
        let (items, seq) = self
            .open
            .read_snapshot(|c| self.read_items(c, items, &refresh_errors))?;
        Ok(Observation {
            items,
            catalog_cursor: self.catalog_cursor(seq),
        })
    }

    fn read_items(
        &self,
        c: &Connection,
        items: &[(String, PageReq)],
        refresh_errors: &BTreeMap<String, String>,
    ) -> rusqlite::Result<(Vec<Observed>, i64)> {
        let mut out = Vec::with_capacity(items.len());
        for (id, req) in items {
            let record = table::get(c, &self.scope, id)?;
            let mut item = Observed {
                execution_id: id.clone(),
                source: req.source,
                refresh_error: None,
                page: None,
                cursor_error: None,
                record: None,
            };
            if let Some(r) = &record {
                item.refresh_error = refresh_errors.get(&r.guardian).cloned();
                match page::page(c, &self.open.key, &self.tag, r, req) {
                    Ok(p) => item.page = Some(p),
                    Err(PageError::Cursor(detail)) => item.cursor_error = Some(detail),
                    Err(PageError::Db(e)) => return Err(e),
                }
            }
            item.record = record;
            out.push(item);
        }
        Ok((out, self.position(c)?))
    }
}
