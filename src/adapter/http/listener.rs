//! The listening socket and the `http-accept` thread: one `http-conn` thread per
//! accepted connection, up to a cap derived from the descriptor limit. And what the main
//! thread does until a signal: give free heap back once no connection is open.
//!
//! Invariant: the accept thread never reads from or waits on a client; over the cap it
//! writes one canned 503 without blocking and closes, so refusing costs no thread.

use super::Shared;
use super::conn::{Conn, HeadRead};
use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, bounded, never, select};
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Most connections served at once, whatever the descriptor limit allows.
const MAX_CONNECTIONS: usize = 1024;
/// Descriptors kept for everything else (state store, shells, logs, the listener).
const RESERVED_FDS: usize = 64;
/// Stack of a connection thread: it parses heads and JSON (serde_json's recursion is
/// capped at 128 levels) and answers the methods that read only fixed data
/// (`routes::inline`); other handlers run on `mcp-worker` threads.
const CONN_STACK: usize = 512 * 1024;
/// Pause after `accept` fails for lack of descriptors, instead of spinning on it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 22\r\n\
    Connection: close\r\n\r\ntoo many connections\r\n";

pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
}

/// Connections served at once: `MAX_CONNECTIONS`, or half the descriptors left after
/// `RESERVED_FDS` when `RLIMIT_NOFILE` is lower (each connection is one descriptor; the
/// other half stays for shells and files), never below 8.
pub fn connection_cap() -> usize {
    let mut lim = nix::libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let ok = unsafe { nix::libc::getrlimit(nix::libc::RLIMIT_NOFILE, &mut lim) } == 0;
    if !ok {
        return MAX_CONNECTIONS;
    }
    let soft = usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX);
    (soft.saturating_sub(RESERVED_FDS) / 2).clamp(8, MAX_CONNECTIONS)
}

/// Start the `http-accept` thread.
pub fn start(socket: TcpListener, shared: Arc<Shared>) -> std::io::Result<()> {
    let cap = connection_cap();
    log::info!("serving at most {cap} connections at once");
    std::thread::Builder::new()
        .name("http-accept".into())
        .spawn(move || accept(socket, shared, cap))?;
    Ok(())
}

/// The open connections, and a notice each time the last one closes.
pub struct Connections {
    open: AtomicUsize,
    idle_tx: Sender<()>,
    idle_rx: Receiver<()>,
}

impl Default for Connections {
    fn default() -> Connections {
        let (idle_tx, idle_rx) = bounded(1);
        Connections {
            open: AtomicUsize::new(0),
            idle_tx,
            idle_rx,
        }
    }
}

impl Connections {
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// Decrements the open-connection count when its connection thread ends; the last one
/// out leaves a notice for `until_signal` (one pending notice says it all).
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        let c = &self.0.connections;
        if c.open.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _ = c.idle_tx.try_send(());
        }
    }
}

/// How long the server must have had no connection before its free heap is handed back.
const TRIM_AFTER: Duration = Duration::from_millis(100);

/// Wait for a signal (returned; 0 if the signal thread is gone), and meanwhile give
/// memory back whenever no connection has been open for `TRIM_AFTER`. A burst of
/// connections leaves their buffers as free holes in the heap, which the allocator keeps
/// resident (RSS +0.5 MiB after 32 clients, more after larger bodies); `malloc_trim`
/// returns the free pages. Waiting for a quiet moment keeps it off the path of a client
/// that connects for every request. Runs on the main thread, which has nothing else to
/// do until the drain.
pub fn until_signal(shared: &Shared, signals: &Receiver<i32>) -> i32 {
    let mut quiet: Option<Deadline> = None;
    loop {
        let timer = quiet.map_or_else(never, |d| d.receiver());
        select! {
            recv(signals) -> sig => return sig.unwrap_or(0),
            recv(shared.connections.idle_rx) -> _ => {
                quiet = Some(Deadline::after("idle trim", TRIM_AFTER));
            }
            recv(timer) -> _ => {
                quiet = None;
                if shared.connections.open() == 0 {
                    release_free_memory();
                }
            }
        }
    }
}

/// Hand the heap's free pages back to the kernel.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it takes the
    // allocator's own lock and touches no memory of ours.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

fn accept(socket: TcpListener, shared: Arc<Shared>, cap: usize) {
    let open = &shared.connections.open;
    loop {
        let (stream, peer) = match socket.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                // EMFILE/ENFILE/ENOBUFS: the backlog keeps the client until we can.
                log::warn!("accept failed: {e}");
                let _ = Deadline::after("accept backoff", ACCEPT_BACKOFF)
                    .receiver()
                    .recv();
                continue;
            }
        };
        if open.fetch_add(1, Ordering::SeqCst) >= cap {
            open.fetch_sub(1, Ordering::SeqCst);
            refuse(stream);
            continue;
        }
        let guard = Open(shared.clone());
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("http-conn".into())
            .stack_size(CONN_STACK)
            .spawn(move || {
                let _guard = guard;
                serve(shared, stream, peer);
            });
        if let Err(e) = spawned {
            // The closure (stream and guard) was dropped: the connection is closed.
            log::warn!("cannot start a connection thread: {e}");
        }
    }
}

/// Over the cap: one non-blocking write of a canned 503, then close.
fn refuse(mut stream: TcpStream) {
    if stream.set_nonblocking(true).is_ok() {
        let _ = stream.write_all(OVER_CAPACITY);
    }
}

/// Serve one connection until it closes. Runs on its own `http-conn` thread.
fn serve(shared: Arc<Shared>, stream: TcpStream, peer: SocketAddr) {
    let mut conn = Conn::new(stream, peer, shared.cfg.io_timeout);
    loop {
        match conn.read_head() {
            HeadRead::Closed => return,
            HeadRead::Refuse(reply) => return conn.finish(&reply, false),
            HeadRead::Head(head) => {
                if !super::front::serve(&shared, &mut conn, head) {
                    return;
                }
            }
        }
    }
}
