//! winx: a synchronous shell-and-files runtime for coding agents, served over MCP.
//!
//! The crate is one library behind three thin binaries (`winx-code-agent`, `winxd`,
//! `winx-guardian`). See `docs/architecture.md` for the process map and invariants.

pub mod adapter;
pub mod alloc;
pub mod build_info;
pub mod codemap;
pub mod codex;
pub mod config;
pub mod daemon;
pub mod deadline;
pub mod edit;
pub mod files;
pub mod fsutil;
pub mod guardian;
pub mod hex;
pub mod history;
pub mod ipc;
pub mod jsonrpc;
pub mod lru;
pub mod mcp;
pub mod operator;
pub mod process;
pub mod requests;
pub mod runtime;
pub mod sandbox;
pub mod session;
pub mod shell;
pub mod store;
pub mod tasks;
pub mod temporary;
pub mod tools;
pub mod usage;
pub mod wire;
