//! A page's arguments (`source`, `page_bytes`, `cursor` of a read or an observe item) and
//! how a `history::Page` looks in `data`.

use super::{int_in, refuse, with};
use crate::history::{Page, PageReq, Source};
use crate::tools::error::ToolError;
use serde_json::{Map, Value, json};

/// `read` pages: default and bounds (a UTF-8 character needs up to 4 bytes).
pub const DEFAULT_PAGE_BYTES: usize = 16 * 1024;
pub const MIN_PAGE_BYTES: usize = 4;
pub const MAX_PAGE_BYTES: usize = 64 * 1024;

/// `source`, `page_bytes` and `cursor` of a read or an observe item.
pub(crate) fn page_req(a: &Map<String, Value>, default_bytes: usize) -> Result<PageReq, ToolError> {
    let source = match a.get("source") {
        None => Source::Output,
        Some(v) => Source::ALL
            .into_iter()
            .find(|s| v.as_str() == Some(s.as_str()))
            .ok_or_else(|| {
                refuse(
                    "source must be one of output, screen, detection",
                    "source is output (the default), screen or detection.",
                    with(a, "source", json!("output")),
                )
            })?,
    };
    let bounds = MIN_PAGE_BYTES..=MAX_PAGE_BYTES;
    let page_bytes = int_in(a, "page_bytes", bounds, default_bytes)?;
    let cursor = match a.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(refuse(
                "cursor must be a string from an earlier next_cursor",
                "Start without a cursor; continue with each page's next_cursor.",
                with(a, "cursor", Value::Null),
            ));
        }
    };
    Ok(PageReq {
        source,
        page_bytes,
        cursor,
    })
}

/// The page as `data.page` shows it.
pub fn json(p: &Page) -> Value {
    match p {
        Page::Output {
            offset,
            next_offset,
            text,
            has_more,
            next_cursor,
            retention_gap,
            resync_required,
        } => json!({
            "source": Source::Output.as_str(),
            "offset": offset,
            "next_offset": next_offset,
            "text": text,
            "has_more": has_more,
            "next_cursor": next_cursor,
            "retention_gap": retention_gap.map(|(from, to)| json!({"from": from, "to": to})),
            "resync_required": resync_required,
        }),
        Page::Snapshot {
            source,
            snapshot,
            offset,
            next_offset,
            text,
            has_more,
            next_cursor,
            resync_required,
        } => json!({
            "source": source.as_str(),
            "snapshot": snapshot,
            "offset": offset,
            "next_offset": next_offset,
            "text": text,
            "has_more": has_more,
            "next_cursor": next_cursor,
            "resync_required": resync_required,
        }),
        Page::NoScreen { source } => json!({
            "source": source.as_str(),
            "available": false,
            "text": "",
            "has_more": false,
            "detail": "no screen has been recorded for this execution (background commands \
                       have none; a foreground one gets one while it runs)",
        }),
    }
}
