//! The adapter process (`winx-code-agent`): transports that feed one bounded worker pool
//! and one `mcp::Server`.
//!
//! Invariant: only this module and `jsonrpc/` touch transport bytes; everything below
//! `mcp::Server::handle` is transport-free.

pub mod pool;
pub mod stdio;
pub mod writer;

/// Logs go to stderr only: stdout carries protocol bytes and nothing else.
pub fn init_logging(level: log::LevelFilter) {
    let config = simplelog::ConfigBuilder::new()
        .set_thread_level(log::LevelFilter::Error)
        .set_target_level(log::LevelFilter::Off)
        .build();
    let _ = simplelog::WriteLogger::init(level, config, std::io::stderr());
}
