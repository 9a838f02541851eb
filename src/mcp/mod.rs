//! The MCP layer: protocol eras, lifecycle methods and tool dispatch over parsed
//! JSON-RPC values. Transport-free: stdio and HTTP both call `Server::handle`.

mod call_log;
mod context;
pub mod lane;
pub mod origin;
mod prompts;
pub mod protocol;
mod resources;
pub mod server;
mod task_runner;
pub mod tasks;

pub use context::CallContext;
pub use server::Server;
