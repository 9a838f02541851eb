//! MCP Tasks: handles for tool calls that outlive their request (a long shell command).
//!
//! `store` keeps the tasks of this process, scoped by principal; `wire` renders them for
//! either protocol era; `durable` maps them to state-store rows. The protocol methods live
//! in `mcp::tasks`.

pub mod durable;
pub mod store;
pub mod wire;
