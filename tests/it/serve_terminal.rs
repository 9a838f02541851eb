//! `serve` started by a person (stdin a terminal, as under `make run`) says on stderr, in
//! one line, what it serves, how a client connects and how to stop it; started by an MCP
//! host (stdin a pipe) it prints nothing. The real binary, under a real PTY.

use crate::support;

use crossbeam_channel::{Receiver, unbounded};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use support::HARD_TIMEOUT;

/// `serve` with `stdin`, its stderr read line by line on a thread (a closed channel means
/// stderr closed: the process ended); killed, with anything it started, on Drop.
struct Serve {
    child: Child,
    stderr: Receiver<String>,
    dir: tempfile::TempDir,
}

impl Serve {
    fn start(stdin: Stdio) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let env = support::isolated_env(dir.path(), &dir.path().join("state"), &run);
        let mut child = support::command(&env)
            .arg("serve")
            .current_dir(dir.path())
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start winx-code-agent serve");
        let (tx, stderr) = unbounded();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Serve { child, stderr, dir }
    }

    /// Every stderr line until the process closes it; panics after `HARD_TIMEOUT`.
    fn stderr_until_exit(&mut self) -> Vec<String> {
        let deadline = crossbeam_channel::after(HARD_TIMEOUT);
        let mut lines = Vec::new();
        loop {
            crossbeam_channel::select! {
                recv(self.stderr) -> line => match line {
                    Ok(l) => lines.push(l),
                    Err(_) => break,
                },
                recv(deadline) -> _ => panic!("serve did not exit; stderr so far: {lines:?}"),
            }
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}; stderr: {lines:?}");
        lines
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        support::kill_processes_mentioning(self.dir.path());
    }
}

#[test]
fn on_a_terminal_serve_says_in_one_line_what_it_serves_and_how_to_stop() {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut serve = Serve::start(Stdio::from(pty.slave));
    let line = serve
        .stderr
        .recv_timeout(HARD_TIMEOUT)
        .expect("a line on stderr");
    let exe = std::fs::canonicalize(support::bin()).unwrap();
    let command = format!("`{} serve`", exe.display());
    for part in ["serving MCP on stdio", &command, "Ctrl-D"] {
        assert!(line.contains(part), "{part:?} missing from {line:?}");
    }
    // Ctrl-D at the start of a line is end of input on a terminal: the server stops, and
    // says nothing more.
    let mut master = std::fs::File::from(pty.master);
    master.write_all(b"\x04").unwrap();
    let rest = serve.stderr_until_exit();
    assert!(rest.is_empty(), "more than one line: {rest:?}");
}

#[test]
fn under_an_mcp_host_serve_prints_nothing() {
    let mut serve = Serve::start(Stdio::piped());
    drop(serve.child.stdin.take());
    let lines = serve.stderr_until_exit();
    assert!(lines.is_empty(), "stderr under a host: {lines:?}");
}
