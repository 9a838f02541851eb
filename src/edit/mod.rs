//! The edit engine shared by every edit tool: SEARCH/REPLACE matching, line patches,
//! planning against read permits, atomic commits.

pub mod atomic;
pub mod engine;
pub mod journal;
pub mod line_patch;
pub mod lock;
pub mod search_replace;
