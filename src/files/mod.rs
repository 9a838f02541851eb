//! File reading for agents: path specs with ranges, line-numbered reads with revisions,
//! read coverage (the permit for edits) and path authority.

pub mod beneath;
pub mod coverage;
pub mod policy;
pub mod ranges;
pub mod read;
