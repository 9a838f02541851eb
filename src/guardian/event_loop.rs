//! The guardian's poll loop (dtach shape): one `poll` over the SIGCHLD wake pipe, the
//! listening socket, every PTY master and every client; one handler per fd kind.
//! Deferred answers (waits) are `Waiter`s whose deadlines bound the poll timeout.
//!
//! Invariant: one wake-up does a bounded amount of work per fd — one read of each PTY
//! master, a bounded read of each client (`client_io`), non-blocking writes only — so a
//! PTY that floods at full speed never keeps requests (Ctrl-C included) from being served.

use super::client_io::Client;
use super::codex_targets::CodexTargets;
use super::poll_set::{LISTENER, PollSet, WAKE};
use super::reaper;
use super::session::{Activity, Session};
use super::sigchld::WakePipe;
use super::waiter::{WaitKind, Waiter};
use crate::deadline::Deadline;
use crate::wire::Hello;
use crate::wire::guardian::{GuardianError, PROTOCOL, Request, Response, SecretValues};
use crossbeam_channel::Sender;
use nix::libc;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::time::Duration;

mod driving;
mod waits;
pub use driving::{InProcessLoop, Shared, drive};

/// Connections allowed to wait for their hello at once.
const MAX_GREETING: usize = 64;
/// How long a (re)started shell may take to print its first prompt marker.
pub const SHELL_START_TIMEOUT: Duration = Duration::from_secs(15);
/// Housekeeping cadence (tombstone expiry) when nothing else is pending.
const HOUSEKEEPING: Duration = Duration::from_secs(30);
/// How long processes get between SIGTERM and SIGKILL when the session is shut down.
const TERMINATE_GRACE: Duration = Duration::from_secs(2);
/// How often the session's processes are looked for during that grace: orphans
/// re-parented to init (embedded runtime) send us no SIGCHLD.
const TERMINATE_POLL: Duration = Duration::from_millis(20);
/// Bytes read from a PTY per wake-up (one read call): the bound on work a flooding
/// command can cause between two looks at the clients.
const READ_CHUNK: usize = 64 * 1024;
/// Most transcript bytes in one `Read` answer: it fits a socket buffer, so a reader that
/// pauses (an operator's `attach` piped into a pager) never blocks this loop on a write.
const READ_REPLY_MAX: usize = 32 * 1024;

/// Called once with the outcome of the first shell start.
pub type OnReady = Box<dyn FnOnce(Result<(), String>) + Send>;

pub struct EventLoop {
    listener: UnixListener,
    session: Session,
    clients: HashMap<u64, Client>,
    waiters: Vec<Waiter>,
    next_client: u64,
    wake: WakePipe,
    on_ready: Option<OnReady>,
    startup: Deadline,
    stop: bool,
    /// Set by `Shutdown`: processes were sent SIGTERM; SIGKILL when this passes.
    terminating: Option<Deadline>,
    /// Our socket file, removed as soon as we start shutting down so nobody finds us.
    socket: std::path::PathBuf,
    /// This process is a child subreaper (`winx-guardian`): every orphan of the session
    /// is our child, so our descendants are exactly the session's processes.
    subreaper: bool,
    /// Processes sent SIGTERM at shutdown (their ancestry may be gone by the time the
    /// grace ends, so they are remembered, not only searched for again).
    doomed: Vec<i32>,
    /// Codex agents' rollouts, followed incrementally.
    codex: CodexTargets,
    /// Where PTY reads land: allocated once (a fresh 64 KiB per read cost a `memset` and
    /// a heap consolidation on every wake-up); pages are touched only as output needs them.
    read_buf: Vec<u8>,
    /// What each turn polls, refilled in place.
    poll_set: PollSet,
    /// Our process id, for `Expect` (asked once: `getpid` is a system call each time).
    pid: u32,
    /// Callers on this process's threads awaiting an answer (`driving::InProcessLoop`),
    /// by client number: their answers go down these channels, not to a socket.
    in_process: HashMap<u64, Sender<Response>>,
}

/// One turn of the loop between its two halves: what is polled, for how long, and
/// whether idle-time work waits.
struct Turn {
    set: PollSet,
    timeout: i32,
    chores: bool,
}

impl EventLoop {
    pub fn new(
        listener: UnixListener,
        socket: &std::path::Path,
        session: Session,
        on_ready: OnReady,
    ) -> std::io::Result<EventLoop> {
        listener.set_nonblocking(true)?;
        Ok(EventLoop {
            listener,
            session,
            clients: HashMap::new(),
            waiters: Vec::new(),
            next_client: 0,
            wake: WakePipe::new()?,
            on_ready: Some(on_ready),
            startup: Deadline::after("shell start", SHELL_START_TIMEOUT),
            stop: false,
            terminating: None,
            socket: socket.to_path_buf(),
            subreaper: false,
            doomed: Vec::new(),
            codex: CodexTargets::default(),
            read_buf: vec![0; READ_CHUNK],
            poll_set: PollSet::default(),
            pid: std::process::id(),
            in_process: HashMap::new(),
        })
    }

    /// This process was made a child subreaper (`reaper::become_subreaper`): reap the
    /// orphans it adopts, and count them as the session's at shutdown.
    pub fn adopting_orphans(mut self) -> EventLoop {
        self.subreaper = true;
        self
    }

    /// Every live process of the session (see `reaper`), plus those already sent SIGTERM.
    fn session_processes(&self) -> Vec<i32> {
        let mut roots = self.session.own_pids();
        if self.subreaper {
            roots.push(std::process::id() as i32);
        }
        let mut v = reaper::session_processes(&roots, &self.session.terminal_sessions());
        v.extend(self.doomed.iter().filter(|p| reaper::alive(**p)));
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A turn's first half, under the loop's lock: what to poll, for how long, and whether
    /// idle-time work (the journals) waits: then the look is without waiting, and one
    /// piece of that work is done per look that finds nothing.
    fn begin_turn(&mut self) -> Turn {
        // Refilled in place (see `poll_set`); put back at the end of the turn.
        let mut set = std::mem::take(&mut self.poll_set);
        set.start(self.wake.read.as_raw_fd(), self.listener.as_raw_fd());
        self.session.masters_into(&mut set.masters);
        set.clients.extend(self.clients.keys());
        set.enter(|id| {
            let c = &self.clients[&id];
            (c.stream.as_raw_fd(), c.wants_write())
        });
        let chores = self.session.has_chores();
        let timeout = if chores { 0 } else { self.poll_timeout() };
        Turn {
            set,
            timeout,
            chores,
        }
    }

    /// A turn's second half, under the loop's lock: handle what `poll` found (`n` ready).
    fn end_turn(&mut self, turn: Turn, n: i32) {
        let Turn { set, chores, .. } = turn;
        if chores && n == 0 {
            self.session.chore();
        }
        if set.fds[WAKE].revents != 0 {
            self.wake.drain();
            if self.session.reap_background() {
                self.check_startup_failure();
            }
            if self.subreaper {
                reaper::reap_strays(&self.session.own_pids());
            }
        }
        // Clients first: a request waiting behind a chunk of flood output is served
        // in this wake-up, not after it.
        for (i, id) in set.clients.iter().enumerate() {
            let revents = set.client_events(i);
            if revents & libc::POLLOUT != 0 {
                self.flush_client(*id);
            }
            if revents & !libc::POLLOUT != 0 {
                self.read_client(*id);
            }
        }
        if set.fds[LISTENER].revents != 0 {
            self.accept();
        }
        for (i, (bg, fd)) in set.masters.iter().enumerate() {
            if set.master_events(i) != 0 {
                self.read_master(bg.as_deref(), *fd);
            }
        }
        self.poll_set = set;
        let act = self.session.recheck_marker();
        self.on_activity(act);
        if self.on_ready.is_some() && self.startup.expired() {
            self.fail_startup("the shell printed no prompt in time".into());
        }
        self.session.expire_tombstones();
        self.session.observe_prompts();
        self.answer_waiters();
        if let Some(grace) = self.terminating
            && ((self.session.reap_all() && self.session_processes().is_empty()) || grace.expired())
        {
            self.stop = true;
        }
    }

    /// After the last turn: end the shell, then whatever survived SIGTERM and the grace,
    /// detached or not.
    fn finish(&mut self) {
        self.session.shutdown();
        reaper::signal_all(&self.session_processes(), libc::SIGKILL);
        if self.subreaper {
            reaper::reap_strays(&self.session.own_pids());
        }
    }

    fn poll_timeout(&self) -> i32 {
        let mut next = HOUSEKEEPING;
        let mut consider = |d: &Deadline| {
            if let Some(left) = d.remaining() {
                next = next.min(left);
            }
        };
        for w in &self.waiters {
            consider(&w.deadline);
            if let Some(s) = &w.settle_at {
                consider(s);
            }
        }
        if self.on_ready.is_some() {
            consider(&self.startup);
        }
        if let Some(d) = self.session.marker_recheck() {
            consider(d);
        }
        if let Some(g) = &self.terminating {
            consider(g);
            next = next.min(TERMINATE_POLL);
        }
        // Round up so a deadline 0.4 ms away does not spin with a 0 ms timeout.
        next.as_millis().min(i32::MAX as u128) as i32 + i32::from(!next.is_zero())
    }

    /// One read per wake-up: output arriving faster than we handle it waits in the PTY
    /// (the writer blocks), instead of keeping this loop from the clients.
    fn read_master(&mut self, bg: Option<&str>, fd: RawFd) {
        let mut buf = std::mem::take(&mut self.read_buf);
        // SAFETY: reads at most `buf.len()` bytes into memory we own.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            let bytes = &buf[..n as usize];
            match bg {
                None => {
                    let act = self.session.on_shell_output(bytes);
                    self.on_activity(act);
                }
                Some(id) => self.session.on_bg_output(id, bytes),
            }
            self.read_buf = buf;
            return;
        }
        self.read_buf = buf;
        let err = nix::Error::last();
        if n < 0 && (err == nix::Error::EAGAIN || err == nix::Error::EINTR) {
            return;
        }
        // EOF or EIO: the other side of the PTY is closed.
        match bg {
            None => {
                let act = self.session.on_shell_hangup();
                self.on_activity(act);
                self.check_startup_failure();
            }
            Some(id) => {
                self.session.close_bg_master(id);
                self.session.reap_background();
            }
        }
    }

    fn on_activity(&mut self, act: Activity) {
        if act.became_ready {
            if let Some(cb) = self.on_ready.take() {
                cb(Ok(()));
            }
            let ready: Vec<u64> = self
                .waiters
                .iter()
                .filter(|w| matches!(w.kind, WaitKind::Reset))
                .map(|w| w.client)
                .collect();
            self.waiters.retain(|w| !matches!(w.kind, WaitKind::Reset));
            for c in ready {
                self.respond(c, Response::Snapshot(self.session.snapshot()));
            }
        }
    }

    fn check_startup_failure(&mut self) {
        if !self.session.shell.alive && !self.session.shell.ready && self.on_ready.is_some() {
            self.fail_startup(format!(
                "the shell exited during startup (status {:?})",
                self.session.shell.exit_code
            ));
        }
    }

    fn fail_startup(&mut self, why: String) {
        if let Some(cb) = self.on_ready.take() {
            cb(Err(why));
        }
        self.stop = true;
    }

    fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            // A client confined more than this guardian (a sandboxed shell) gets no shell
            // outside its sandbox (issue 36, item 1).
            if let Some(why) = crate::sandbox::peer::refusal(&stream, "the session guardian") {
                log::warn!("refusing a client: {why}");
                continue;
            }
            let Ok(client) = Client::new(stream) else {
                continue;
            };
            // The hello is read when it arrives (`read_client`): a client that connects
            // and stays silent never stalls the loop.
            let greeting = || self.clients.iter().filter(|(_, c)| !c.greeted);
            if greeting().count() >= MAX_GREETING {
                // Many silent connections: the oldest makes room.
                if let Some(oldest) = greeting().map(|(id, _)| *id).min() {
                    self.drop_client(oldest);
                }
            }
            self.next_client += 1;
            self.clients.insert(self.next_client, client);
        }
    }

    fn drop_client(&mut self, id: u64) {
        self.clients.remove(&id);
        self.waiters.retain(|w| w.client != id);
    }

    fn flush_client(&mut self, id: u64) {
        if let Some(c) = self.clients.get_mut(&id)
            && c.flush().is_err()
        {
            self.drop_client(id);
        }
    }

    /// Take in what the client sent and handle every whole frame: first its hello (ours
    /// is answered; a wrong protocol gets our hello, so it can say what it met, and is
    /// dropped), then its one request.
    fn read_client(&mut self, id: u64) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        if c.fill().is_err() {
            return self.drop_client(id);
        }
        loop {
            let Some(c) = self.clients.get_mut(&id) else {
                return;
            };
            if !c.greeted {
                let hello: std::io::Result<Hello> = match c.next_frame() {
                    Some(h) => h,
                    None => break,
                };
                c.greeted = true;
                let answered = c.send(&Hello::new(PROTOCOL, "guardian")).is_ok();
                match hello {
                    Ok(h) if h.protocol == PROTOCOL && answered => continue,
                    Ok(h) => log::warn!(
                        "refusing a {} client speaking protocol {}",
                        h.role,
                        h.protocol
                    ),
                    Err(e) => log::debug!("client hello failed: {e}"),
                }
                return self.drop_client(id);
            }
            let req: Request = match c.next_frame() {
                None => break,
                Some(Ok(r)) => r,
                Some(Err(_)) => return self.drop_client(id),
            };
            if self.waiters.iter().any(|w| w.client == id) {
                // One request at a time per connection.
                return self.drop_client(id);
            }
            self.take_request(id, req);
        }
        if self.clients.get(&id).is_some_and(|c| c.eof) {
            // Hung up: its waits have no one to answer.
            self.drop_client(id);
        }
    }

    /// Act on a client's request (from its socket or, in process, from its thread).
    fn take_request(&mut self, client: u64, req: Request) {
        // Observations (liveness probes, operator reads) are not session activity: they
        // must never keep an idle session alive or make an old one look new.
        if !matches!(
            req,
            Request::Snapshot | Request::Read { .. } | Request::Shutdown
        ) {
            self.session.touch();
        }
        self.handle(client, req);
    }

    fn handle(&mut self, client: u64, req: Request) {
        match req {
            Request::Snapshot => self.respond(client, Response::Snapshot(self.session.snapshot())),
            Request::Run {
                expect: Some(e), ..
            } if !e.holds(self.pid, self.session.clocks.created_ms, &self.session.cwd) => {
                self.respond(client, Response::Stale(self.session.snapshot()))
            }
            Request::Run {
                command,
                background: false,
                wait,
                scope,
                ..
            } => match self.session.run_foreground(&command, scope) {
                Ok(()) => self.wait_for(client, None, wait),
                Err(e) => self.respond(client, Response::Error(e)),
            },
            Request::Run {
                command,
                background: true,
                wait,
                scope,
                ..
            } => match self.session.run_background(&command, scope) {
                Ok(id) => self.wait_for(client, Some(id), wait),
                Err(e) => self.respond(client, Response::Error(e)),
            },
            Request::Status { bg_id, wait } => {
                if let Some(id) = &bg_id
                    && !self.session.bg.contains_key(id)
                {
                    let e = GuardianError::NoSuchBackgroundCommand { bg_id: id.clone() };
                    return self.respond(client, Response::Error(e));
                }
                self.wait_for(client, bg_id, wait)
            }
            Request::Input { bytes, bg_id, wait } => {
                match self.session.input(bg_id.as_deref(), &bytes) {
                    Ok(()) => self.wait_for(client, bg_id, wait),
                    Err(e) => self.respond(client, Response::Error(e)),
                }
            }
            Request::Read { offset, wait } => self.waiters.push(Waiter::plain(
                client,
                WaitKind::Read { offset },
                Deadline::after("read wait", Duration::from_millis(wait.timeout_ms)),
            )),
            Request::Watch {
                after,
                wait,
                screen,
                known,
            } => self.waiters.push(Waiter::plain(
                client,
                WaitKind::Watch {
                    after,
                    screen,
                    known,
                },
                Deadline::after("watch wait", Duration::from_millis(wait.timeout_ms)),
            )),
            Request::Prompt(ask) => {
                let reply = self.session.prompt(&ask);
                self.respond(client, Response::Prompt(reply))
            }
            Request::PromptStatus { key, seen, wait } => self.waiters.push(Waiter::plain(
                client,
                WaitKind::Prompt { key, seen },
                Deadline::after("prompt wait", Duration::from_millis(wait.timeout_ms)),
            )),
            Request::CodexTargets => {
                let targets = self.codex.list(&self.session);
                self.respond(client, Response::CodexTargets { targets })
            }
            Request::CodexAdmit(ask) => {
                let reply = self.codex.admit(&mut self.session, &ask);
                self.respond(client, Response::CodexAdmitted(reply))
            }
            Request::Secrets { learn } => {
                self.session.secrets.learn_all(&learn.0);
                let values = SecretValues(self.session.secrets.values().to_vec());
                self.respond(client, Response::Secrets { values })
            }
            Request::Screen { lines, diff } => {
                let r = self.session.screen(lines, diff);
                self.respond(client, r)
            }
            Request::Reset => match self.session.reset() {
                Ok(()) => self.waiters.push(Waiter::plain(
                    client,
                    WaitKind::Reset,
                    Deadline::after("shell start", SHELL_START_TIMEOUT),
                )),
                Err(detail) => self.respond(client, Response::Error(GuardianError::Io { detail })),
            },
            Request::Shutdown => {
                self.respond(client, Response::Done);
                let _ = std::fs::remove_file(&self.socket);
                self.session.terminate_groups();
                self.doomed = self.session_processes();
                reaper::signal_all(&self.doomed, libc::SIGTERM);
                self.terminating = Some(Deadline::after("terminate grace", TERMINATE_GRACE));
            }
        }
    }

    fn respond(&mut self, client: u64, resp: Response) {
        if let Some(caller) = self.in_process.remove(&client) {
            // Gone only when the caller gave up; its waiter is answered all the same.
            let _ = caller.send(resp);
            return;
        }
        let failed = match self.clients.get_mut(&client) {
            Some(c) => c.send(&resp).is_err(),
            None => false,
        };
        if failed {
            self.drop_client(client);
        }
    }
}
