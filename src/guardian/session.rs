//! The session state machine: one shell, its foreground execution, background jobs, the
//! terminal model and the activity clocks. Driven by the event loop; owns no threads.
//!
//! Invariant: a command's state (running, exit code, cwd) changes only on a prompt marker
//! confirmed by the shell's idleness (`completion`) or a reaped process, never because of
//! text the command printed.

use super::completion::Pending;
use super::exec::{Execution, OutputLog};
use super::harvest::Harvester;
use super::journals::Journals;
use super::shell::{self, Shell, ShellSpec};
use crate::deadline::unix_ms;
use crate::shell::marker::{Marker, Piece, new_nonce};
use crate::shell::pty;
use crate::shell::secrets::KnownSecrets;
use crate::wire::guardian::{
    Admission, ExecScope, GuardianError, ProcessStatus, Response, SecretValues, Snapshot,
};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Background commands one session may run at once (seed 003 / issue: 8 per session).
pub const MAX_BACKGROUND: usize = 8;
/// Output read from a background PTY when its command exits, at most (a descendant still
/// writing cannot hold the loop).
const MAX_EXIT_DRAIN: usize = 4 * 1024 * 1024;
/// How long a finished background command stays answerable to `status_check`.
pub const TOMBSTONE_MS: i64 = 5 * 60 * 1000;
/// Rows of the terminal model kept for `screen`.
const SCREEN_SCROLLBACK: usize = 0;

fn new_screen() -> vt100::Parser {
    let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
    vt100::Parser::new(
        nz(pty::DEFAULT_ROWS),
        nz(pty::DEFAULT_COLS),
        SCREEN_SCROLLBACK,
    )
}

pub struct Background {
    pub exec: Execution,
    harvest: Harvester,
    pub pid: i32,
    pub master: Option<OwnedFd>,
    pub finished_at_ms: Option<i64>,
    /// Its terminal, while it runs (native prompts check readiness on it).
    pub screen: Option<super::exec::BgScreen>,
}

pub struct Clocks {
    pub created_ms: i64,
    pub last_activity_ms: i64,
    pub last_command_ms: Option<i64>,
    pub ever_ran_command: bool,
}

pub struct Session {
    pub spec: ShellSpec,
    pub shell: Shell,
    pub cwd: String,
    pub fg: Option<Execution>,
    pub(super) vt: vt100::Parser,
    pub(super) last_screen: Vec<String>,
    pub bg: BTreeMap<String, Background>,
    next_exec: u64,
    next_bg: u64,
    pub clocks: Clocks,
    tag: String,
    journals: Journals,
    /// Everything the foreground shell printed, for `attach` (memory window only).
    pub transcript: OutputLog,
    /// The newest marker not yet confirmed by the shell's idleness.
    pending: Pending,
    /// Secret values seen in this session (starting env, commands, output).
    pub secrets: KnownSecrets,
    harvest: Harvester,
    /// Activity counter and recently ended executions, for the history recorder.
    pub activity: super::activity::Activity,
    /// Prompts written to the foreground program, watched for activity.
    pub prompts: super::prompt_watch::Prompts,
}

/// What reading a PTY produced, for the event loop's waiters.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Activity {
    pub output: bool,
    pub fg_finished: bool,
    pub shell_exited: bool,
    pub became_ready: bool,
}

impl Session {
    pub fn start(spec: ShellSpec) -> Result<Session, String> {
        let shell = shell::start(&spec, &new_nonce())?;
        let now = unix_ms();
        let tag = format!("{:x}", now);
        Ok(Session {
            cwd: spec.workspace.clone(),
            shell,
            fg: None,
            vt: new_screen(),
            last_screen: Vec::new(),
            bg: BTreeMap::new(),
            next_exec: 0,
            next_bg: 0,
            clocks: Clocks {
                created_ms: now,
                last_activity_ms: now,
                last_command_ms: None,
                ever_ran_command: false,
            },
            journals: Journals::new(spec.session_dir.clone(), tag.clone()),
            tag,
            transcript: OutputLog::new(None),
            pending: Pending::default(),
            secrets: KnownSecrets::from_env(&spec.env),
            harvest: Harvester::default(),
            activity: Default::default(),
            prompts: Default::default(),
            spec,
        })
    }

    pub fn touch(&mut self) {
        self.clocks.last_activity_ms = unix_ms();
    }

    pub fn running_bg(&self) -> usize {
        self.bg.values().filter(|b| !b.exec.finished()).count()
    }

    /// Bytes arrived on the shell's master.
    pub fn on_shell_output(&mut self, bytes: &[u8]) -> Activity {
        let mut act = Activity::default();
        for piece in self.shell.scanner.feed(bytes) {
            match piece {
                Piece::Output(b) => {
                    self.vt.process(&b);
                    self.harvest.feed(&b, &mut self.secrets);
                    self.transcript.append(&b);
                    if let Some(e) = self.fg.as_mut().filter(|e| !e.finished()) {
                        e.log.append_masking(&b, self.secrets.values());
                    }
                    act.output = true;
                }
                Piece::Marker(m) => self.pending.offer(m),
            }
        }
        if act.output {
            self.touch();
        }
        self.confirm_marker(&mut act, true);
        self.activity.bump();
        act
    }

    /// When the loop must look at an unconfirmed marker again.
    pub fn marker_recheck(&self) -> Option<&crate::deadline::Deadline> {
        self.pending.due()
    }

    /// Look again at an unconfirmed marker (its recheck is due).
    pub fn recheck_marker(&mut self) -> Activity {
        let mut act = Activity::default();
        if self.pending.due().is_some_and(|d| d.expired()) {
            self.confirm_marker(&mut act, false);
            self.activity.bump();
        }
        act
    }

    /// Apply the pending marker if the shell is idle at its prompt now.
    fn confirm_marker(&mut self, act: &mut Activity, spin: bool) {
        if !self.shell.alive {
            return;
        }
        let master = self.shell.master.as_raw_fd();
        if let Some(m) = self.pending.confirm(self.shell.pid, master, spin) {
            self.apply_marker(m, act);
        }
    }

    fn apply_marker(&mut self, m: Marker, act: &mut Activity) {
        self.cwd = m.cwd;
        if !self.shell.ready {
            self.shell.ready = true;
            act.became_ready = true;
        } else if let Some(e) = self.fg.as_mut().filter(|e| !e.finished()) {
            e.finish(Some(m.exit_code), self.secrets.values());
            act.fg_finished = true;
        }
    }

    /// The shell's master hung up: reap it and end what ran in it.
    pub fn on_shell_hangup(&mut self) -> Activity {
        self.shell.alive = false;
        self.pending.clear();
        self.shell.exit_code = pty::try_reap(self.shell.pid);
        if let Some(e) = self.fg.as_mut().filter(|e| !e.finished()) {
            e.shell_died = true;
            e.finish(None, self.secrets.values());
        }
        self.activity.bump();
        Activity {
            shell_exited: true,
            fg_finished: true,
            ..Activity::default()
        }
    }

    pub fn on_bg_output(&mut self, id: &str, bytes: &[u8]) {
        if let Some(b) = self.bg.get_mut(id) {
            b.harvest.feed(bytes, &mut self.secrets);
            b.exec.log.append_masking(bytes, self.secrets.values());
            if let Some(s) = b.screen.as_mut() {
                s.feed(bytes);
            }
        }
        self.activity.bump();
        self.touch();
    }

    /// A background PTY hung up or SIGCHLD arrived: reap whatever has exited.
    pub fn reap_background(&mut self) -> bool {
        let mut any = false;
        for b in self.bg.values_mut().filter(|b| !b.exec.finished()) {
            if let Some(code) = pty::try_reap(b.pid) {
                // Everything it wrote before exiting is in its PTY: read that first, so
                // the end is never reported ahead of the output (the history would stop
                // capturing at the end's byte count).
                // The master stays open: the poll loop holds its fd number for this
                // wake-up and closes it when it reads the hang-up (closing it here could
                // hand the number to a client accepted meanwhile).
                if let Some(fd) = b.master.as_ref().map(|m| m.as_raw_fd()) {
                    let secrets = &mut self.secrets;
                    pty::drain(fd, MAX_EXIT_DRAIN, |bytes| {
                        b.harvest.feed(bytes, secrets);
                        b.exec.log.append_masking(bytes, secrets.values());
                    });
                }
                b.exec.finish(Some(code), self.secrets.values());
                b.finished_at_ms = Some(unix_ms());
                b.screen = None;
                super::slots::release(&super::slots::dir_for(&self.spec.session_dir), b.pid);
                any = true;
            }
        }
        if any {
            self.activity.bump();
        }
        if self.shell.alive && !self.shell.ready {
            // A shell that dies during startup also only shows up here.
            if let Some(code) = pty::try_reap(self.shell.pid) {
                self.shell.alive = false;
                self.shell.exit_code = Some(code);
                any = true;
            }
        }
        any
    }

    /// Drop tombstones older than `TOMBSTONE_MS`.
    pub fn expire_tombstones(&mut self) {
        let now = unix_ms();
        let expired: Vec<String> = self
            .bg
            .iter()
            .filter(|(_, b)| b.finished_at_ms.is_some_and(|t| now - t >= TOMBSTONE_MS))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(b) = self.bg.remove(&id) {
                self.activity.retire(&b.exec, Some(&id));
                self.journals.retire_background(b.exec.log.journal_path());
            }
        }
    }

    /// Idle-time work on the journals (see `journals`); false when there is none.
    pub fn has_chores(&self) -> bool {
        self.journals.has_chores()
    }

    pub fn chore(&mut self) {
        self.journals.chore();
    }

    /// The PTY masters to poll (`None` is the shell, else a background id), into `v`.
    pub fn masters_into(&self, v: &mut Vec<(Option<String>, RawFd)>) {
        if self.shell.alive {
            v.push((None, self.shell.master.as_raw_fd()));
        }
        for (id, b) in &self.bg {
            if let Some(m) = &b.master {
                v.push((Some(id.clone()), m.as_raw_fd()));
            }
        }
    }

    pub fn close_bg_master(&mut self, id: &str) {
        if let Some(b) = self.bg.get_mut(id) {
            b.master = None;
        }
    }

    fn new_exec(&mut self, command: &str, scope: Option<ExecScope>, fg: bool) -> Execution {
        self.secrets.learn_text(command);
        self.activity.bump();
        self.next_exec += 1;
        let n = self.next_exec;
        let journal = if !fg {
            self.journals.take_background(n)
        } else {
            // After a failed write the next command must not continue the segment.
            let failed = self.fg.as_ref().is_some_and(|e| e.log.journal_failed());
            self.journals.take_foreground(!failed)
        };
        self.clocks.last_command_ms = Some(unix_ms());
        self.clocks.ever_ran_command = true;
        self.touch();
        let id = super::exec::execution_id(&self.tag, n);
        let mut exec = Execution::new(id, command.into(), Some(journal));
        let (cwd, started_ms) = (self.cwd.clone(), exec.started_ms);
        let command = command.into();
        exec.admission = scope.map(|scope| Admission {
            scope,
            command,
            cwd,
            started_ms,
        });
        exec
    }

    /// Start a foreground command.
    pub fn run_foreground(
        &mut self,
        command: &str,
        scope: Option<ExecScope>,
    ) -> Result<(), GuardianError> {
        if !self.shell.alive {
            return Err(GuardianError::ShellNotRunning);
        }
        if let Some(e) = self.fg.as_ref().filter(|e| !e.finished()) {
            return Err(GuardianError::CommandAlreadyRunning {
                execution_id: e.id.clone(),
                elapsed_ms: e.elapsed_ms(),
            });
        }
        let mut line = command.as_bytes().to_vec();
        line.push(b'\n');
        pty::write_all(self.shell.master.as_raw_fd(), &line).map_err(|e| GuardianError::Io {
            detail: e.to_string(),
        })?;
        // The shell runs while the execution is set up (no output is read before we return).
        let exec = self.new_exec(command, scope, true);
        if let Some(prev) = self.fg.take() {
            self.activity.retire(&prev, None);
        }
        // A marker still awaiting confirmation belongs to an earlier prompt (an extra one
        // printed after the shell got ready): it must never finish the command written now.
        self.pending.clear();
        self.fg = Some(exec);
        Ok(())
    }

    /// Start a background command in its own PTY; returns its id.
    pub fn run_background(
        &mut self,
        command: &str,
        scope: Option<ExecScope>,
    ) -> Result<String, GuardianError> {
        if self.running_bg() >= MAX_BACKGROUND {
            return Err(GuardianError::BackgroundLimit {
                limit: MAX_BACKGROUND,
            });
        }
        let slots = super::slots::dir_for(&self.spec.session_dir);
        let spawned = super::slots::with_slot(&slots, || {
            shell::spawn_background(&self.spec, &self.cwd, command).map(|s| (s.pid, s))
        })
        .map_err(|e| match e {
            None => GuardianError::BackgroundLimit {
                limit: super::slots::MAX_BACKGROUND_TOTAL,
            },
            Some(detail) => GuardianError::Io { detail },
        })?;
        let exec = self.new_exec(command, scope, false);
        self.next_bg += 1;
        let id = format!("bg{}", self.next_bg);
        self.bg.insert(
            id.clone(),
            Background {
                exec,
                harvest: Harvester::default(),
                pid: spawned.pid,
                master: Some(spawned.master),
                finished_at_ms: None,
                screen: Some(super::exec::BgScreen::new()),
            },
        );
        Ok(id)
    }

    /// Write input to the foreground terminal or a background PTY.
    pub fn input(&mut self, bg_id: Option<&str>, bytes: &[u8]) -> Result<(), GuardianError> {
        self.touch();
        let fd = match bg_id {
            None if self.shell.alive => self.shell.master.as_raw_fd(),
            None => return Err(GuardianError::ShellNotRunning),
            Some(id) => match self.bg.get(id).and_then(|b| b.master.as_ref()) {
                Some(m) => m.as_raw_fd(),
                None => return Err(GuardianError::NoSuchBackgroundCommand { bg_id: id.into() }),
            },
        };
        pty::write_all(fd, bytes).map_err(|e| GuardianError::Io {
            detail: e.to_string(),
        })
    }

    /// Deliver undelivered output and state for the foreground (or a background) command.
    pub fn deliver(&mut self, bg_id: Option<&str>) -> Response {
        let mut resp = self.deliver_target(bg_id);
        if let Response::Action(r) = &mut resp {
            r.secrets = SecretValues(self.secrets.values().to_vec());
        }
        resp
    }

    fn deliver_target(&mut self, bg_id: Option<&str>) -> Response {
        let cwd = self.cwd.clone();
        match bg_id {
            Some(id) => match self.bg.get_mut(id) {
                Some(b) => Response::Action(b.exec.deliver(&cwd, Some(id), self.secrets.values())),
                None => {
                    Response::Error(GuardianError::NoSuchBackgroundCommand { bg_id: id.into() })
                }
            },
            None => match self.fg.as_mut() {
                Some(e) => {
                    let mut r = e.deliver(&cwd, None, self.secrets.values());
                    if !self.shell.alive {
                        r.state.process_status = ProcessStatus::ShellExited;
                    }
                    Response::Action(r)
                }
                None => Response::Action(super::exec::idle_result(self.shell.alive, &self.cwd)),
            },
        }
    }

    /// Output bytes seen so far by the target, for settle detection.
    pub fn output_total(&self, bg_id: Option<&str>) -> u64 {
        match bg_id {
            Some(id) => self.bg.get(id).map_or(0, |b| b.exec.log.total()),
            None => self.fg.as_ref().map_or(0, |e| e.log.total()),
        }
    }

    pub fn target_finished(&self, bg_id: Option<&str>) -> bool {
        match bg_id {
            Some(id) => self.bg.get(id).is_none_or(|b| b.exec.finished()),
            None => !self.shell.alive || self.fg.as_ref().is_none_or(|e| e.finished()),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            labels: self.spec.labels.clone(),
            guardian_pid: std::process::id(),
            shell_pid: self.shell.pid,
            shell_alive: self.shell.alive,
            cwd: self.cwd.clone(),
            created_at_ms: self.clocks.created_ms,
            last_activity_ms: self.clocks.last_activity_ms,
            last_command_ms: self.clocks.last_command_ms,
            ever_ran_command: self.clocks.ever_ran_command,
            running: self
                .fg
                .as_ref()
                .filter(|e| !e.finished())
                .map(|e| e.id.clone()),
            background: self
                .bg
                .iter()
                .filter(|(_, b)| !b.exec.finished())
                .map(|(id, _)| id.clone())
                .collect(),
            build: crate::build_info::identity(),
            capabilities: crate::wire::guardian::CAPABILITIES
                .iter()
                .map(|c| c.to_string())
                .collect(),
        }
    }

    /// Kill the shell's process group and start a new shell (ready on its first marker).
    pub fn reset(&mut self) -> Result<(), String> {
        self.kill_shell();
        if let Some(e) = self.fg.as_mut().filter(|e| !e.finished()) {
            e.shell_died = true;
            e.finish(None, self.secrets.values());
        }
        self.pending.clear();
        self.shell = shell::start(&self.spec, &new_nonce())?;
        self.cwd = self.spec.workspace.clone();
        self.vt = new_screen();
        self.touch();
        Ok(())
    }

    fn kill_shell(&mut self) {
        if self.shell.alive {
            pty::signal_group(self.shell.pid, nix::libc::SIGHUP);
            pty::signal_group(self.shell.pid, nix::libc::SIGKILL);
            // The group is gone; reap the leader so it does not linger as a zombie.
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.shell.pid), None);
            self.shell.alive = false;
        }
    }

    /// Process groups still alive: the shell's and every running background command's.
    pub fn live_groups(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self
            .bg
            .values()
            .filter(|b| !b.exec.finished())
            .map(|b| b.pid)
            .collect();
        if self.shell.alive {
            v.push(self.shell.pid);
        }
        v
    }

    /// The shell's and every background command's pid, finished or not: their exit codes
    /// are ours to read, so nobody else may reap them.
    pub fn own_pids(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self.bg.values().map(|b| b.pid).collect();
        v.push(self.shell.pid);
        v
    }

    /// Terminal sessions the session started (each PTY child calls `setsid`): a process
    /// still in one belongs to the session even after its parent exited.
    pub fn terminal_sessions(&self) -> Vec<i32> {
        self.live_groups()
    }

    /// End everything: SIGHUP+SIGTERM to every group (the caller waits a grace period),
    /// then `kill_remaining` SIGKILLs and reaps what is left.
    pub fn terminate_groups(&self) {
        for pid in self.live_groups() {
            pty::signal_group(pid, nix::libc::SIGHUP);
            pty::signal_group(pid, nix::libc::SIGTERM);
        }
    }

    /// Reap groups that exited; `true` when none is left.
    pub fn reap_all(&mut self) -> bool {
        self.reap_background();
        if self.shell.alive
            && let Some(code) = pty::try_reap(self.shell.pid)
        {
            self.shell.alive = false;
            self.shell.exit_code = Some(code);
        }
        self.live_groups().is_empty()
    }

    pub fn shutdown(&mut self) {
        self.kill_shell();
        self.journals.discard_ready();
        let slots = super::slots::dir_for(&self.spec.session_dir);
        for b in self.bg.values_mut().filter(|b| !b.exec.finished()) {
            pty::signal_group(b.pid, nix::libc::SIGKILL);
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(b.pid), None);
            b.exec.finish(None, self.secrets.values());
            super::slots::release(&slots, b.pid);
        }
    }
}
