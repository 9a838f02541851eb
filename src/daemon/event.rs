//! What winxd's main thread hears from its other threads. One closed enum, one channel.

use std::os::unix::net::UnixStream;

/// An event on the main thread's channel.
pub enum Event {
    /// The accept loop took a client; the main thread decides whether it is served.
    Accepted(UnixStream),
    /// Connection `id` finished (its client left, failed, or was shut out).
    ConnectionEnded(u64),
    /// A client's `Shutdown` was answered: socket unlinked, lock dropped.
    ShutdownRequested,
    /// A long-lived worker (accept loop, sweeper, refuser) returned.
    Stopped(&'static str),
}
