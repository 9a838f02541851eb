//! Shared by the bench programs (included with `#[path]`): the floor of every shell round
//! trip, bash on a raw PTY driven directly, with no server in between.
#![allow(dead_code)]

use super::server::HARD_TIMEOUT;
use crossbeam_channel::{Receiver, unbounded};
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The raw driver's completion marker: the same OSC shape the server's shells print.
const RAW_MARKER: &[u8] = b"\x1b]6973;rawbench;";

/// The floor: bash on a raw PTY (no echo, empty prompt, a `PROMPT_COMMAND` printing a
/// marker like the server's), driven directly. Dropping it kills bash and its group.
pub struct RawBash {
    child: Child,
    master: File,
    chunks: Receiver<Vec<u8>>,
    buf: Vec<u8>,
}

impl RawBash {
    pub fn start(home: &Path, cwd: &Path) -> RawBash {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        // `stty -echo`: the command line must not come back as output.
        let mut tio = tcgetattr(&pty.slave).expect("tcgetattr");
        tio.local_flags.remove(LocalFlags::ECHO);
        tcsetattr(&pty.slave, SetArg::TCSANOW, &tio).expect("tcsetattr");
        for fd in [&pty.master, &pty.slave] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).expect("set FD_CLOEXEC");
        }
        let slave = || Stdio::from(pty.slave.try_clone().expect("dup slave"));
        let marker = String::from_utf8_lossy(&RAW_MARKER[1..]).into_owned();
        let prompt = format!("printf '\\033{marker}%s;%s\\007' \"$?\" \"$PWD\"");
        let mut cmd = Command::new("bash");
        cmd.args(["--noediting", "--noprofile", "--norc", "-i"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("TERM", "xterm-256color")
            .env("PS1", "")
            .env("PROMPT_COMMAND", prompt)
            .current_dir(cwd)
            .stdin(slave())
            .stdout(slave())
            .stderr(slave());
        // SAFETY: setsid and ioctl only, between fork and exec: a new session whose
        // controlling terminal is the PTY (stdin is already the slave).
        // SAFETY: setsid and ioctl only, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::libc::setsid();
                nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn bash");
        drop(cmd);
        drop(pty.slave);
        let mut reader = File::from(pty.master.try_clone().expect("dup master"));
        let (tx, chunks) = unbounded();
        // Ends by itself on EIO once bash (the last slave holder) is gone.
        std::thread::spawn(move || {
            let mut b = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut b)
                && tx.send(b[..n].to_vec()).is_ok()
            {}
        });
        let mut raw = RawBash {
            child,
            master: File::from(pty.master),
            chunks,
            buf: Vec::new(),
        };
        raw.until_marker(); // the first prompt: bash is ready
        raw
    }

    /// Output before the next complete marker (which is consumed).
    fn until_marker(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + HARD_TIMEOUT;
        loop {
            let start = (self.buf.windows(RAW_MARKER.len())).position(|w| w == RAW_MARKER);
            if let Some(start) = start
                && let Some(bel) = self.buf[start..].iter().position(|&b| b == 0x07)
            {
                let output = self.buf[..start].to_vec();
                self.buf.drain(..start + bel + 1);
                return output;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok(chunk) => self.buf.extend_from_slice(&chunk),
                Err(e) => panic!("raw bash: no marker in {HARD_TIMEOUT:?} ({e})"),
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn round_trip(&mut self) -> Duration {
        let t = Instant::now();
        self.master
            .write_all(b"echo hello\n")
            .expect("write to PTY");
        let output = self.until_marker();
        let elapsed = t.elapsed();
        let text = String::from_utf8_lossy(&output);
        assert!(text.starts_with("hello"), "raw bash answered {text:?}");
        elapsed
    }
}

impl Drop for RawBash {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(-(self.child.id() as i32)),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
