//! What one turn of the event loop waits on: the wake pipe, the listener, the PTY masters
//! and the clients, as `poll` entries. Kept across turns and refilled in place, so a turn
//! allocates nothing here.
//!
//! Why it matters: a `Vec` grown by `extend` is a `realloc`, and glibc's `realloc` always
//! takes the malloc arena's lock. The embedded guardian shares the one arena
//! (`alloc::single_arena`) with the adapter's threads, the history recorder's SQLite work
//! above all; rebuilding these lists every turn made its thread wait on that lock about
//! once every three commands (issue 18), where the guardian process never did.

use crate::shell::pty::poll_in;
use nix::libc;
use std::os::fd::RawFd;

/// Index of the wake pipe's entry in `fds`.
pub const WAKE: usize = 0;
/// Index of the listener's entry in `fds`.
pub const LISTENER: usize = 1;

#[derive(Default)]
pub struct PollSet {
    pub fds: Vec<libc::pollfd>,
    /// The PTY masters polled this turn (background id, or `None` for the shell); their
    /// entries follow the listener's.
    pub masters: Vec<(Option<String>, RawFd)>,
    /// The clients polled this turn; their entries follow the masters'.
    pub clients: Vec<u64>,
}

impl PollSet {
    /// Empty the lists, keeping their room, and enter the wake pipe and the listener.
    /// The caller fills `masters` and `clients`, then calls `enter`.
    pub fn start(&mut self, wake: RawFd, listener: RawFd) {
        self.fds.clear();
        self.masters.clear();
        self.clients.clear();
        self.fds.push(poll_in(wake));
        self.fds.push(poll_in(listener));
    }

    /// Enter the masters, then each client's socket (`fd`, and whether it waits to write).
    pub fn enter(&mut self, mut client: impl FnMut(u64) -> (RawFd, bool)) {
        for (_, fd) in &self.masters {
            self.fds.push(poll_in(*fd));
        }
        for id in &self.clients {
            let (fd, wants_write) = client(*id);
            let mut p = poll_in(fd);
            if wants_write {
                p.events |= libc::POLLOUT;
            }
            self.fds.push(p);
        }
    }

    /// What `poll` reported for master `i`.
    pub fn master_events(&self, i: usize) -> libc::c_short {
        self.fds[LISTENER + 1 + i].revents
    }

    /// What `poll` reported for client `i`.
    pub fn client_events(&self, i: usize) -> libc::c_short {
        self.fds[LISTENER + 1 + self.masters.len() + i].revents
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refilled_set_keeps_its_room_and_its_order() {
        let mut set = PollSet::default();
        let mut first = None;
        for _ in 0..3 {
            set.start(10, 11);
            set.masters.push((None, 20));
            set.masters.push((Some("bg".into()), 21));
            set.clients.extend([7, 8]);
            set.enter(|id| (id as RawFd + 30, id == 8));
            let fds: Vec<_> = set.fds.iter().map(|p| (p.fd, p.events)).collect();
            let (r, w) = (libc::POLLIN, libc::POLLIN | libc::POLLOUT);
            assert_eq!(fds, [(10, r), (11, r), (20, r), (21, r), (37, r), (38, w)]);
            set.fds[3].revents = libc::POLLIN;
            set.fds[5].revents = libc::POLLOUT;
            assert_eq!(set.master_events(1), libc::POLLIN);
            assert_eq!(set.client_events(1), libc::POLLOUT);
            assert_eq!(set.client_events(0), 0);
            // Every turn after the first fills the same buffers: nothing is reallocated.
            let now = (set.fds.as_ptr(), set.masters.as_ptr(), set.clients.as_ptr());
            assert_eq!(*first.get_or_insert(now), now);
        }
    }
}
