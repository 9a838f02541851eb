//! The names in a directory, read with `getdents64` on a descriptor the caller opened.
//!
//! Why not `nix::dir::Dir` (`fdopendir`): per directory it adds an `fstat`, two `fcntl`
//! and, when its iterator is dropped, an `lseek`; the temporary directory's audit walks
//! two or more directories after every Bash action and on every `Initialize` status, and
//! these were half its system calls. Here a directory costs its `getdents64` calls only.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Room for ~1,000 typical entries per system call.
const BUF_BYTES: usize = 32 * 1024;
/// `struct linux_dirent64`: `d_ino` u64, `d_off` i64, `d_reclen` u16, `d_type` u8, then
/// the NUL-terminated name.
const RECLEN_AT: usize = 16;
const NAME_AT: usize = 19;

/// The entries of `dir` from its current offset (a freshly opened directory: all of
/// them), without `.` and `..`, in the order the filesystem gives; at most `limit`.
pub fn dir_names(dir: BorrowedFd<'_>, limit: usize) -> io::Result<Vec<CString>> {
    let mut buf = vec![0u8; BUF_BYTES];
    let mut names = Vec::new();
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
        let n = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(names);
        }
        let mut at = 0;
        while at < n as usize {
            let record = &buf[at..n as usize];
            let reclen = record
                .get(RECLEN_AT..RECLEN_AT + 2)
                .map(|b| u16::from_ne_bytes([b[0], b[1]]) as usize)
                .filter(|&r| r > NAME_AT && r <= record.len())
                .ok_or_else(|| io::Error::other("malformed directory record"))?;
            let name = &record[NAME_AT..reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            at += reclen;
            if matches!(name, b"." | b"..") {
                continue;
            }
            if names.len() == limit {
                return Ok(names);
            }
            // A name holds no NUL (it ended at the first one).
            names.push(CString::new(name).expect("no NUL in a directory entry"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn open(path: &std::path::Path) -> std::fs::File {
        std::fs::File::open(path).unwrap()
    }

    #[test]
    fn lists_every_name_but_dot_and_dotdot() {
        let d = tempfile::tempdir().unwrap();
        let mut want: Vec<String> = (0..3_000).map(|i| format!("entry-{i:04}-é")).collect();
        for n in &want {
            std::fs::write(d.path().join(n), b"").unwrap();
        }
        std::fs::create_dir(d.path().join("sub")).unwrap();
        want.push("sub".into());
        let f = open(d.path());
        let mut got: Vec<String> = dir_names(f.as_fd(), usize::MAX)
            .unwrap()
            .into_iter()
            .map(|c| c.into_string().unwrap())
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn stops_at_the_limit_and_lists_an_empty_directory() {
        let d = tempfile::tempdir().unwrap();
        assert!(dir_names(open(d.path()).as_fd(), 10).unwrap().is_empty());
        for i in 0..20 {
            std::fs::write(d.path().join(i.to_string()), b"").unwrap();
        }
        assert_eq!(dir_names(open(d.path()).as_fd(), 7).unwrap().len(), 7);
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), b"x").unwrap();
        assert!(dir_names(open(&d.path().join("f")).as_fd(), 10).is_err());
    }
}
