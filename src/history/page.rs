//! Bounded pages of a record's retained output, screen or detection snapshot, with
//! scoped page cursors (sealed and opened here, never by a caller).
//!
//! Invariant: a page never ends inside a UTF-8 character and never silently skips a byte:
//! text that left retention is reported as `retention_gap`, and a screen that changed
//! since the cursor's snapshot answers `resync_required` from the new snapshot's start.

use super::cursor::{Key, Kind};
use crate::store::history::{self as table, Record};
use rusqlite::Connection;

/// What a page reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The retained output text.
    Output,
    /// The newest recorded screen.
    Screen,
    /// The `auto` detection with the inputs it was made from, as pretty JSON.
    Detection,
}

impl Source {
    pub const ALL: [Source; 3] = [Source::Output, Source::Screen, Source::Detection];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Output => "output",
            Source::Screen => "screen",
            Source::Detection => "detection",
        }
    }
}

/// One page asked for: where (`cursor`, else the start) and how many bytes at most.
#[derive(Clone, Debug)]
pub struct PageReq {
    pub source: Source,
    pub page_bytes: usize,
    pub cursor: Option<String>,
}

/// A page of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Page {
    /// Retained output text from `offset` (text offsets, from the execution's first byte).
    Output {
        offset: u64,
        next_offset: u64,
        text: String,
        has_more: bool,
        next_cursor: String,
        /// `[from, to)`: bytes between the cursor and the retained start that were pruned.
        retention_gap: Option<(u64, u64)>,
        resync_required: bool,
    },
    /// A page of a snapshot text (screen or detection).
    Snapshot {
        source: Source,
        snapshot: i64,
        offset: u64,
        next_offset: u64,
        text: String,
        has_more: bool,
        next_cursor: String,
        resync_required: bool,
    },
    /// No screen was recorded for the record (screen and detection sources).
    NoScreen { source: Source },
}

impl Page {
    /// The page's text (empty for `NoScreen`).
    pub fn text(&self) -> &str {
        match self {
            Page::Output { text, .. } | Page::Snapshot { text, .. } => text,
            Page::NoScreen { .. } => "",
        }
    }
}

/// Why a page could not be read.
#[derive(Debug)]
pub enum PageError {
    /// The cursor is not valid here (forged, another scope, execution or source).
    Cursor(String),
    Db(rusqlite::Error),
}

impl From<rusqlite::Error> for PageError {
    fn from(e: rusqlite::Error) -> PageError {
        PageError::Db(e)
    }
}

/// Where a page starts: the cursor's offset and snapshot when it belongs to this record
/// and source, else an error.
fn start(
    key: &Key,
    scope: &str,
    r: &Record,
    req: &PageReq,
) -> Result<Option<(u64, i64)>, PageError> {
    let Some(c) = &req.cursor else {
        return Ok(None);
    };
    match key.open(scope, c) {
        Some(Kind::Page {
            execution_id,
            source,
            offset,
            snapshot,
        }) if execution_id == r.execution_id && source == req.source.as_str() => {
            Ok(Some((offset, snapshot)))
        }
        Some(Kind::Page { .. }) => Err(PageError::Cursor(
            "the cursor belongs to another execution or source".into(),
        )),
        Some(Kind::Catalog { .. }) => Err(PageError::Cursor(
            "a catalog cursor is for wait.after, not for pages".into(),
        )),
        None => Err(PageError::Cursor(
            "the cursor is not valid in this session".into(),
        )),
    }
}

/// The page `req` asks for of `r`, read on `c`; its cursor sealed for `scope` (a tag).
pub(crate) fn page(
    c: &Connection,
    key: &Key,
    scope: &str,
    r: &Record,
    req: &PageReq,
) -> Result<Page, PageError> {
    let from = start(key, scope, r, req)?;
    if req.source == Source::Output {
        return output(c, key, scope, r, req, from.map(|(o, _)| o));
    }
    let Some(shot) = table::screen(c, r.rowid)? else {
        return Ok(Page::NoScreen { source: req.source });
    };
    // The detection snapshot: the `auto` verdict with the inputs it was made from.
    let text = match req.source {
        Source::Screen => shot.text,
        _ => detection_text(&shot),
    };
    Ok(snapshot_page(
        key,
        scope,
        r,
        req,
        from,
        shot.snapshot,
        &text,
    ))
}

fn detection_text(shot: &table::Screen) -> String {
    let detection: serde_json::Value = shot
        .detection
        .as_deref()
        .and_then(|d| serde_json::from_str(d).ok())
        .unwrap_or(serde_json::Value::Null);
    let doc = serde_json::json!({
        "detection": detection,
        "snapshot": shot.snapshot,
        "captured_at_unix_ms": shot.captured_at_ms,
        "quiet_ms": shot.quiet_ms,
        "screen": shot.text,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

fn output(
    c: &Connection,
    key: &Key,
    scope: &str,
    r: &Record,
    req: &PageReq,
    from: Option<u64>,
) -> Result<Page, PageError> {
    let retained = r.retained_start as u64;
    let end = r.text_end as u64;
    let mut resync = false;
    let mut offset = from.unwrap_or(retained);
    if offset > end {
        // A cursor past everything stored: the record was recreated; start over.
        resync = true;
        offset = retained;
    }
    let gap = (offset < retained).then_some((offset, retained));
    offset = offset.max(retained);
    let bytes = table::read_text(c, r.rowid, offset as i64, req.page_bytes)?;
    // A pruned head may start inside a character: its continuation bytes belong to the gap.
    let lead = if offset == retained {
        bytes.iter().take_while(|b| **b & 0xC0 == 0x80).count()
    } else {
        0
    };
    let text = utf8_prefix(&bytes[lead..]);
    let start = offset + lead as u64;
    let next = start + text.len() as u64;
    let live = r.is_open();
    let next_cursor = key.seal(
        scope,
        &Kind::Page {
            execution_id: r.execution_id.clone(),
            source: Source::Output.as_str().into(),
            offset: next,
            snapshot: 0,
        },
    );
    Ok(Page::Output {
        offset: start,
        next_offset: next,
        text,
        has_more: next < end || live,
        next_cursor,
        retention_gap: gap,
        resync_required: resync,
    })
}

/// A page of a snapshot text (screen or detection): a cursor from another snapshot
/// restarts at 0 with `resync_required`.
fn snapshot_page(
    key: &Key,
    scope: &str,
    r: &Record,
    req: &PageReq,
    from: Option<(u64, i64)>,
    snapshot: i64,
    text: &str,
) -> Page {
    let (mut offset, resync) = match from {
        Some((o, s)) if s == snapshot && o as usize <= text.len() => (o as usize, false),
        Some(_) => (0, true),
        None => (0, false),
    };
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let page = utf8_prefix(&text.as_bytes()[offset..(offset + req.page_bytes).min(text.len())]);
    let next = offset + page.len();
    let next_cursor = key.seal(
        scope,
        &Kind::Page {
            execution_id: r.execution_id.clone(),
            source: req.source.as_str().into(),
            offset: next as u64,
            snapshot,
        },
    );
    Page::Snapshot {
        source: req.source,
        snapshot,
        offset: offset as u64,
        next_offset: next as u64,
        has_more: next < text.len(),
        text: page,
        next_cursor,
        resync_required: resync,
    }
}

/// The longest prefix of `bytes` that is whole UTF-8 characters.
fn utf8_prefix(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        // Stored text is valid UTF-8; anything else is shown, never dropped.
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::utf8_prefix;

    #[test]
    fn pages_end_on_character_boundaries() {
        let s = "a€b";
        assert_eq!(utf8_prefix(&s.as_bytes()[..2]), "a");
        assert_eq!(utf8_prefix(&s.as_bytes()[..4]), "a€");
        assert_eq!(utf8_prefix(s.as_bytes()), s);
    }
}
