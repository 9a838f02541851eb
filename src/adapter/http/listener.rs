//! The listening socket and the tiny_http servers that accept on it.
//!
//! tiny_http gives no per-connection socket options, so the I/O timeout is set on the
//! listening socket, from which Linux copies it to every accepted connection: a stalled
//! client's reads and writes then fail after `io_timeout` instead of holding a thread
//! forever. The same timeout also applies to `accept` itself, which ends tiny_http's
//! accept thread after an idle period; two things keep the server listening:
//! `http-accept-keeper` connects to the listener every third of the timeout (tiny_http
//! reads EOF and drops it), and if the accept thread stops anyway, the accept loop starts
//! a fresh tiny_http server on the same socket (`restart`). Each server has an
//! `http-forward` thread that moves its requests into one channel the accept loop selects on.

use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, bounded, select};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Requests waiting between tiny_http and the accept loop.
const FORWARD_QUEUE: usize = 256;

pub enum Event {
    Request(tiny_http::Request),
    /// tiny_http's accept thread ended (with this error); call `restart`.
    AcceptStopped(std::io::Error),
}

pub struct Listener {
    socket: TcpListener,
    servers: Vec<Arc<tiny_http::Server>>,
    tx: Sender<Event>,
    stopping: Arc<AtomicBool>,
    keeper_stop: Sender<()>,
}

/// Bind `addr` with the per-connection I/O timeout in place.
pub fn bind(addr: SocketAddr, io_timeout: Duration) -> std::io::Result<TcpListener> {
    let socket = TcpListener::bind(addr)?;
    let tv = TimeVal::new(io_timeout.as_secs() as _, io_timeout.subsec_micros() as _);
    setsockopt(&socket, sockopt::ReceiveTimeout, &tv).map_err(std::io::Error::from)?;
    setsockopt(&socket, sockopt::SendTimeout, &tv).map_err(std::io::Error::from)?;
    Ok(socket)
}

/// Start accepting on `socket`; requests arrive on the returned channel.
pub fn start(
    socket: TcpListener,
    io_timeout: Duration,
) -> std::io::Result<(Listener, Receiver<Event>)> {
    let (tx, rx) = bounded(FORWARD_QUEUE);
    let (keeper_stop, stop_rx) = bounded(0);
    let target = connect_target(socket.local_addr()?);
    let interval = io_timeout / 3;
    std::thread::Builder::new()
        .name("http-accept-keeper".into())
        .spawn(move || keep_accepting(target, interval, stop_rx))?;
    let mut l = Listener {
        socket,
        servers: Vec::new(),
        tx,
        stopping: Arc::new(AtomicBool::new(false)),
        keeper_stop,
    };
    l.restart()?;
    Ok((l, rx))
}

impl Listener {
    /// Start a tiny_http server (and its forwarder) on a duplicate of the socket. Older
    /// servers keep serving the connections they accepted.
    pub fn restart(&mut self) -> std::io::Result<()> {
        let dup = self.socket.try_clone()?;
        let server = tiny_http::Server::from_listener(dup, None)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let server = Arc::new(server);
        let (s, tx, stopping) = (server.clone(), self.tx.clone(), self.stopping.clone());
        std::thread::Builder::new()
            .name("http-forward".into())
            .spawn(move || forward(s, tx, stopping))?;
        self.servers.push(server);
        Ok(())
    }

    /// Stop accepting: wake the forwarders, stop the keeper, close the socket.
    pub fn stop(self) {
        self.stopping.store(true, Ordering::SeqCst);
        for s in &self.servers {
            s.unblock();
        }
        drop(self.keeper_stop);
    }
}

fn forward(server: Arc<tiny_http::Server>, tx: Sender<Event>, stopping: Arc<AtomicBool>) {
    loop {
        let ev = match server.recv() {
            Ok(rq) => Event::Request(rq),
            Err(_) if stopping.load(Ordering::SeqCst) => return,
            // The accept thread is gone; connections it accepted still send requests here.
            Err(e) => Event::AcceptStopped(e),
        };
        if tx.send(ev).is_err() {
            return;
        }
    }
}

/// Where the keeper connects: the bound address, or loopback for a wildcard bind.
fn connect_target(bound: SocketAddr) -> SocketAddr {
    let ip = match bound.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, bound.port())
}

fn keep_accepting(target: SocketAddr, interval: Duration, stop: Receiver<()>) {
    loop {
        let tick = Deadline::after("accept keep-alive", interval);
        select! {
            recv(stop) -> _ => return,
            recv(tick.receiver()) -> _ => {
                if let Err(e) = TcpStream::connect_timeout(&target, interval) {
                    log::debug!("accept keep-alive connect failed: {e}");
                }
            }
        }
    }
}
