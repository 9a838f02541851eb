//! Opening and reading a rollout file safely (issue 36 items 7 and 8): a rollout is
//! opened with `O_NONBLOCK | O_NOFOLLOW` and refused unless the descriptor is a regular
//! file (a FIFO named `rollout-*.jsonl` must not block the guardian's loop or an
//! observer), and appended bytes are read in bounded chunks, so the memory a look holds
//! is one chunk whatever the file grew by (a sparse extension of hundreds of MiB
//! included; line assembly is bounded separately by `rollout::MAX_LINE`).

use nix::libc;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Bytes read per step: the most a look holds at once.
pub const READ_CHUNK: usize = 256 * 1024;

/// Open `path` for reading without following a final symlink and without blocking on
/// a FIFO or device; anything but a regular file is refused (`InvalidInput`).
pub fn open(path: &Path) -> std::io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a rollout must be a regular file",
        ));
    }
    Ok(f)
}

/// Read at most `budget` bytes of `f` from `from`, one chunk of at most [`READ_CHUNK`]
/// at a time, handing each to `each`; `each` returning `false` stops after that chunk.
/// Returns the bytes read (fewer than `budget` at end of file).
pub fn read_chunks(
    f: &mut File,
    from: u64,
    budget: u64,
    mut each: impl FnMut(&[u8]) -> bool,
) -> std::io::Result<u64> {
    f.seek(SeekFrom::Start(from))?;
    let mut buf = vec![0u8; READ_CHUNK];
    let mut done = 0u64;
    while done < budget {
        let want = usize::try_from(budget - done).map_or(READ_CHUNK, |r| r.min(READ_CHUNK));
        let n = match f.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        done += n as u64;
        if !each(&buf[..n]) {
            break;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rollout-2026-12-04T00-00-00-0000.jsonl");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = open(&path).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real.jsonl");
        std::fs::write(&real, b"{}\n").unwrap();
        let link = tmp.path().join("rollout-x.jsonl");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(open(&link).is_err());
        assert!(open(&real).is_ok());
    }

    #[test]
    fn chunks_are_bounded_and_stop_on_request() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("r.jsonl");
        let f = File::create(&path).unwrap();
        f.set_len(3 * READ_CHUNK as u64 + 10).unwrap();
        let mut f = open(&path).unwrap();
        let mut sizes = Vec::new();
        let n = read_chunks(&mut f, 10, u64::MAX, |c| {
            sizes.push(c.len());
            true
        })
        .unwrap();
        assert_eq!(n, 3 * READ_CHUNK as u64);
        assert!(sizes.iter().all(|s| *s <= READ_CHUNK));
        let mut calls = 0;
        let n = read_chunks(&mut f, 0, u64::MAX, |_| {
            calls += 1;
            false
        })
        .unwrap();
        assert_eq!((calls, n), (1, READ_CHUNK as u64));
        assert_eq!(read_chunks(&mut f, 0, 5, |_| true).unwrap(), 5);
    }
}
