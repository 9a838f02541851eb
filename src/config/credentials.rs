//! Credentials that arrive in environment variables (`WINX_HTTP_TOKEN`, a principal's
//! `token_env`): read once at startup, then kept from every process winx starts and
//! erased from the server's own environment block (docs/decisions/002, "Credentials in
//! the environment").
//!
//! Invariant: after `forget`, no shell, winxd, guardian or helper the server starts is
//! given a credential variable, and `/proc/<server pid>/environ` shows none of their
//! values.

use super::Config;
use super::vars;

/// `WINX_*` variables that carry a secret: never handed to winxd, a guardian or a shell,
/// whatever the server serves.
pub const SECRET_VARS: &[&vars::Var] = &[&vars::HTTP_TOKEN];

/// Whether `name` is one of `SECRET_VARS`.
pub fn is_secret(name: &str) -> bool {
    SECRET_VARS.iter().any(|v| v.name == name)
}

/// Drop `names` from the environment the runtime hands down (winxd, guardians, shells),
/// and erase them from this process's environment. Call it on the main thread before any
/// other thread exists, once every credential has been read.
pub fn forget(config: &mut Config, names: &[String]) {
    config
        .runtime
        .base_env
        .retain(|(k, _)| !is_secret(k) && !names.contains(k));
    let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
    all.extend(SECRET_VARS.iter().map(|v| v.name));
    erase_from_process(&all);
}

/// Remove `names` from the environment children inherit, and overwrite their values in
/// the block the kernel placed at exec, which is what `/proc/<pid>/environ` shows:
/// `remove_var` only unlinks glibc's pointer and leaves those bytes in place.
fn erase_from_process(names: &[&str]) {
    for name in names {
        // SAFETY: called from `main` before any other thread exists (see `forget`).
        unsafe { std::env::remove_var(name) };
    }
    let Some((start, end)) = env_block() else {
        log::warn!(
            "cannot locate this process's environment block; credential variables stay \
             readable in /proc/{}/environ",
            std::process::id()
        );
        return;
    };
    // SAFETY: `start..end` is the process's own environment block (the top of the main
    // thread's stack, mapped read-write, as /proc/self/stat reports it); no other thread
    // exists, and after `remove_var` nothing in the process refers to the values erased.
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    erase_values(block, names);
}

/// `env_start` and `env_end` of `/proc/self/stat` (fields 50 and 51): the addresses of
/// the environment block the kernel set up at exec.
fn env_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; fields after it are plain.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3, so field N is `fields[N - 3]`.
    let start: usize = fields.get(47)?.parse().ok()?;
    let end: usize = fields.get(48)?.parse().ok()?;
    (start != 0 && end > start).then_some((start, end))
}

/// Overwrite with zero bytes the value of every `NAME=value` entry of a NUL-separated
/// environment block whose name is in `names`; the name stays (`NAME=`).
pub fn erase_values(block: &mut [u8], names: &[&str]) {
    let mut at = 0;
    while at < block.len() {
        let len = block[at..]
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(block.len() - at);
        let entry = &block[at..at + len];
        if let Some(eq) = entry.iter().position(|&b| b == b'=')
            && names.iter().any(|n| n.as_bytes() == &entry[..eq])
        {
            block[at + eq + 1..at + len].fill(0);
        }
        at += len + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_values_are_erased() {
        let mut block = b"PATH=/bin\0A_TOKEN=s3cret\0A_TOKEN_X=keep\0X=A_TOKEN=no\0".to_vec();
        erase_values(&mut block, &["A_TOKEN", "NOT_THERE"]);
        assert_eq!(
            block,
            b"PATH=/bin\0A_TOKEN=\0\0\0\0\0\0\0A_TOKEN_X=keep\0X=A_TOKEN=no\0".to_vec()
        );
        let mut unterminated = b"A_TOKEN=abc".to_vec();
        erase_values(&mut unterminated, &["A_TOKEN"]);
        assert_eq!(unterminated, b"A_TOKEN=\0\0\0".to_vec());
    }

    #[test]
    fn this_process_has_an_environment_block() {
        let (start, end) = env_block().expect("env_start and env_end");
        assert!(end > start);
    }
}
