//! winxd's main thread owns shutdown: a `Shutdown` request ends every thread and the
//! process exits 0; control connections are bounded; a full descriptor table (EMFILE)
//! makes the accept loop back off instead of spinning. Each test drives the real binary
//! as `winxd` directly (its own runtime directory, kill on Drop).

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use winx::wire::{Hello, read_frame, write_frame};

/// No single wait in a test may exceed this; a hang fails instead of blocking CI.
const HARD_TIMEOUT: Duration = Duration::from_secs(20);
/// winxd's bound on control connections served at once (`winx::daemon::MAX_CONNECTIONS`).
const MAX_CONNECTIONS: usize = winx::daemon::MAX_CONNECTIONS;

/// A `winxd` process on a private runtime directory, with its stderr lines on a channel.
struct Winxd {
    child: Child,
    dir: tempfile::TempDir,
    socket: PathBuf,
    stderr: Receiver<String>,
}

impl Winxd {
    /// Start winxd and wait for its readiness verdict; `nofile` caps its descriptors.
    fn start(nofile: Option<u64>) -> Winxd {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let socket = run.join("winxd.sock");
        let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let w = ready_w.as_raw_fd();
        // The binary in its winxd role: started under that name, as the adapter starts it.
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_winx-code-agent"));
        cmd.arg0("winxd")
            .arg("--socket")
            .arg(&socket)
            .arg("--ready-fd")
            .arg("3")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("WINX_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: dup2 and setrlimit only, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if nix::libc::dup2(w, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(n) = nofile {
                    let lim = nix::libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if nix::libc::setrlimit(nix::libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn winxd");
        drop(ready_w);
        let err = child.stderr.take().unwrap();
        let (tx, stderr) = unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                eprintln!("winxd: {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let verdict = winx::ipc::ready::wait_verdict(
            ready_r,
            winx::deadline::Deadline::after("winxd ready", HARD_TIMEOUT),
        )
        .unwrap();
        assert_eq!(verdict, winx::ipc::ready::Verdict::Ready);
        Winxd {
            child,
            dir,
            socket,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Live threads of the winxd process.
    fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// User plus system CPU time, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        // After the command name: state is field 3, utime 14 and stime 15 (1-based).
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    /// Wait for a stderr line containing `needle`; whether it came within `within`.
    fn wait_line(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return true,
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// Wait for the process to exit within `d`.
    fn wait_exit(&mut self, d: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + d;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            // Synchronised on stderr closing (it closes only when the process exits).
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(_) => continue,
                Err(RecvTimeoutError::Disconnected) => return Some(self.child.wait().unwrap()),
                Err(RecvTimeoutError::Timeout) => return None,
            }
        }
    }

    /// A control connection that has exchanged hellos.
    fn connect(&self) -> UnixStream {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(HARD_TIMEOUT)).unwrap();
        write_frame(&mut s, &Hello::new(winx::wire::daemon::PROTOCOL, "test")).unwrap();
        let hello: Hello = read_frame(&mut s).unwrap();
        assert_eq!(hello.protocol, winx::wire::daemon::PROTOCOL);
        s
    }
}

impl Drop for Winxd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ask(s: &mut UnixStream, req: Value) -> Value {
    write_frame(s, &req).unwrap();
    read_frame(s).unwrap()
}

#[test]
fn shutdown_ends_every_thread_and_exits_zero() {
    let mut d = Winxd::start(None);
    // An idle client holding a connection open must not keep winxd alive.
    let mut idle = d.connect();
    let mut c = d.connect();
    assert_eq!(ask(&mut c, json!({"op": "shutdown"}))["kind"], "done");
    // Socket and lock are released before the answer, so a successor starts at once.
    assert!(
        !d.socket.exists(),
        "the socket is unlinked before the answer"
    );
    let lock = std::fs::File::open(d.dir.path().join("run/winxd.lock")).unwrap();
    assert_eq!(
        // SAFETY: flock(2) on a descriptor this test owns; no memory is passed.
        unsafe { nix::libc::flock(lock.as_raw_fd(), nix::libc::LOCK_EX | nix::libc::LOCK_NB) },
        0,
        "the lock is free once Shutdown is answered"
    );
    drop(c);
    // The line comes before the exit; waiting for it first keeps wait_exit from
    // consuming it.
    let stopped = d.wait_line("winxd stopped: every thread ended", HARD_TIMEOUT);
    let status = d
        .wait_exit(HARD_TIMEOUT)
        .expect("winxd exits after Shutdown");
    assert_eq!(status.code(), Some(0), "{status:?}");
    // The idle client sees its connection end.
    let r: std::io::Result<Value> = read_frame(&mut idle);
    assert!(r.is_err(), "{r:?}");
    assert!(
        stopped,
        "winxd's main thread did not report its threads ended before exiting"
    );
}

#[test]
fn connections_beyond_the_bound_are_refused_without_new_threads() {
    let d = Winxd::start(None);
    let idle: Vec<UnixStream> = (0..MAX_CONNECTIONS).map(|_| d.connect()).collect();
    // Beyond the bound: a clear typed answer, and no thread per connection.
    let mut extra = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..16 {
        let mut s = d.connect();
        answers.push(ask(&mut s, json!({"op": "list"})));
        extra.push(s);
    }
    let threads = d.threads();
    // Main, accept loop, sweeper, refuser, one per connection.
    assert!(
        threads <= MAX_CONNECTIONS + 4,
        "{threads} threads for {} connections",
        MAX_CONNECTIONS + 16
    );
    for r in answers {
        assert_eq!(r["kind"], "busy", "{r}");
        assert_eq!(r["limit"], MAX_CONNECTIONS, "{r}");
    }
    drop(extra);
    drop(idle);
    // The slots come back: a new client is served once the idle ones are gone (each
    // refusal until then is `busy`; a retry follows its round trip).
    served_again(&d, |r| assert_eq!(r["kind"], "busy", "{r}"));
}

/// Connect and list until winxd answers with its sessions (within the hard timeout);
/// `refused` checks each answer before that.
fn served_again(d: &Winxd, refused: impl Fn(&Value)) {
    let deadline = Instant::now() + HARD_TIMEOUT;
    loop {
        let mut s = d.connect();
        let r = ask(&mut s, json!({"op": "list"}));
        if r["kind"] == "sessions" {
            return;
        }
        refused(&r);
        assert!(Instant::now() < deadline, "never served again: {r}");
    }
}

#[test]
fn a_full_descriptor_table_backs_off_instead_of_spinning() {
    // Few descriptors: a handful of connections exhausts them and accept fails EMFILE.
    let d = Winxd::start(Some(12));
    let clients: Vec<UnixStream> = (0..24)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    let before = d.cpu_ticks();
    // Six logged retries span at least 10+20+40+80+160 ms of back-off.
    let mut retries = 0;
    while retries < 6 && d.wait_line("retrying in", Duration::from_secs(5)) {
        retries += 1;
    }
    let used = d.cpu_ticks() - before;
    assert!(
        retries == 6 && used < 30,
        "accept failures: {retries} back-off lines, {used} CPU ticks used"
    );
    drop(clients);
    // Once descriptors free up, clients are served again. Until winxd has read the hang-ups
    // of the dropped clients its table can still be full: a connection accepted then gets
    // one error answer naming the exhausted descriptors (EMFILE), never silence.
    served_again(&d, |r| {
        assert_eq!(r["kind"], "error", "{r}");
        assert!(r.to_string().contains("Too many open files"), "{r}");
    });
}
