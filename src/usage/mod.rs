//! Usage telemetry (`WINX_USAGE_LOG`): privacy-safe JSONL events about tool calls and
//! HTTP requests, written by one `usage-writer` thread fed through a bounded channel.
//!
//! - `Sink` is the handle every emitter holds (cheap to clone; `Sink::off()` when no log
//!   is configured). `emit` stamps the time and `try_send`s: a full queue drops the event
//!   and counts it, so the log can never slow down or block a request.
//! - `event.rs` defines what a line may hold; `category.rs` the command category;
//!   `trace.rs` a call's phases; `file.rs` the file's lifecycle (private open, rotation,
//!   pruning, siblings); `period.rs` the UTC periods; `writer.rs` the thread.
//!
//! Invariant: without `WINX_USAGE_LOG` no thread is started and nothing is written
//! anywhere. Invariant: no emitter passes command text, contents, arguments, URLs,
//! output, cursors, raw paths, tokens or client identifiers into an event (the privacy
//! test in `tests/it/usage_privacy.rs` greps a log for canaries planted in all of them).

pub mod category;
pub mod event;
pub mod file;
pub mod period;
pub mod trace;
pub mod writer;

pub use event::{Event, Origin};
pub use period::Rotation;
pub use trace::{CallTrace, Phase};

use crossbeam_channel::{Sender, TrySendError, bounded};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Events queued for the writer. It drains the queue every few milliseconds while events
/// flow (`writer::TICK_MIN`), so at 20,000 events/s a tick finds about a hundred; the bound
/// only matters when the disk stalls, and then it caps memory.
pub const QUEUE_DEPTH: usize = 16_384;
/// Hex characters of a salted hash: 64 bits, enough to correlate, useless to reverse.
const HASH_HEX: usize = 16;
/// Bytes of the per-install salt.
const SALT_BYTES: usize = 32;

/// The log's configuration, decided once by `config`.
#[derive(Clone, Debug)]
pub struct Settings {
    pub path: PathBuf,
    pub rotation: Rotation,
    /// Rotated files older than this many days are pruned; 0 keeps everything.
    pub keep_days: u32,
    /// Added to the clock the log stamps and rotates by (`WINX_USAGE_CLOCK_SKEW_SECS`).
    pub clock_skew_ms: i64,
    /// Where the per-install salt of hashed identifiers lives (the state directory).
    pub salt_file: PathBuf,
}

/// The emitters' handle on the log.
#[derive(Clone, Default)]
pub struct Sink {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    tx: Sender<writer::Stamped>,
    /// Flush requests; dropping the last sender ends the writer.
    ctl: Sender<Sender<()>>,
    dropped: AtomicU64,
    /// Events the writer could not write (no file, a failed write).
    lost: Arc<AtomicU64>,
    warned_full: AtomicBool,
    skew_ms: i64,
    salt: [u8; SALT_BYTES],
    /// Random per process, so ids of two processes never collide.
    id_prefix: String,
    next_id: AtomicU64,
}

impl Sink {
    /// No log: every emission is a no-op.
    pub fn off() -> Sink {
        Sink::default()
    }

    /// Start the writer thread for `settings`. A log that cannot be opened is reported
    /// once on stderr; the sink still accepts events (and drops them) so the server
    /// serves on, and a later rotation period tries the file again.
    pub fn start(settings: &Settings) -> Sink {
        let skew_ms = settings.clock_skew_ms;
        let now = crate::deadline::unix_ms() + skew_ms;
        let (tx, rx) = bounded(QUEUE_DEPTH);
        let (ctl, ctl_rx) = bounded(1);
        let lost = Arc::new(AtomicU64::new(0));
        let inner = Inner {
            tx,
            ctl,
            dropped: AtomicU64::new(0),
            lost: lost.clone(),
            warned_full: AtomicBool::new(false),
            skew_ms,
            salt: load_salt(&settings.salt_file),
            id_prefix: random_hex(4),
            next_id: AtomicU64::new(0),
        };
        let path = settings.path.clone();
        let (rotation, keep) = (settings.rotation, settings.keep_days);
        let spawned = std::thread::Builder::new()
            .name("usage-writer".into())
            .spawn(move || {
                crate::process::run_in_background();
                let log = file::LogFile::start(path, rotation, keep, now);
                writer::run(rx, ctl_rx, log, lost)
            });
        match spawned {
            Ok(_) => Sink {
                inner: Some(Arc::new(inner)),
            },
            Err(e) => {
                log::warn!("usage log: cannot start its writer thread ({e}); no usage log");
                Sink::off()
            }
        }
    }

    /// A sink whose events land in the returned channel (tests, benchmarks).
    pub fn capture(depth: usize) -> (Sink, crossbeam_channel::Receiver<writer::Stamped>) {
        let (tx, rx) = bounded(depth);
        let inner = Inner {
            tx,
            ctl: bounded(1).0,
            dropped: AtomicU64::new(0),
            lost: Arc::new(AtomicU64::new(0)),
            warned_full: AtomicBool::new(false),
            skew_ms: 0,
            salt: [7; SALT_BYTES],
            id_prefix: "test".into(),
            next_id: AtomicU64::new(0),
        };
        let sink = Sink {
            inner: Some(Arc::new(inner)),
        };
        (sink, rx)
    }

    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Queue `event`, stamped now. Never blocks: a full queue drops it (counted, and said
    /// once on stderr).
    pub fn emit(&self, event: Event) {
        let Some(inner) = &self.inner else { return };
        let ts = crate::deadline::unix_ms() + inner.skew_ms;
        match inner.tx.try_send(writer::Stamped(ts, event)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                if !inner.warned_full.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "usage log: the writer's queue is full; events are dropped and counted"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Events dropped because the queue was full, plus events the file could not take.
    pub fn dropped(&self) -> u64 {
        self.inner.as_ref().map_or(0, |i| {
            i.dropped.load(Ordering::Relaxed) + i.lost.load(Ordering::Relaxed)
        })
    }

    /// Wait up to `wait` for everything emitted so far to reach the file (shutdown,
    /// tests). `false` if the writer did not confirm in time.
    pub fn flush(&self, wait: Duration) -> bool {
        let Some(inner) = &self.inner else {
            return true;
        };
        let (ack, done) = bounded(1);
        inner.ctl.send_timeout(ack, wait).is_ok() && done.recv_timeout(wait).is_ok()
    }

    /// A fresh id for a call (`usage_call_id`) or a request (`request_id`): a random
    /// per-process prefix and a counter, so ids are unique and say nothing.
    pub fn new_id(&self, kind: char) -> Option<String> {
        let inner = self.inner.as_ref()?;
        let n = inner.next_id.fetch_add(1, Ordering::Relaxed);
        Some(format!("{kind}{}{n:08x}", inner.id_prefix))
    }

    /// A salted hash of a client-supplied identifier (thread id, MCP session): equal
    /// inputs correlate within one installation; the input cannot be recovered.
    pub fn hash(&self, kind: &str, raw: &str) -> Option<String> {
        let inner = self.inner.as_ref()?;
        let mut h = Sha256::new();
        h.update(inner.salt);
        h.update(kind.as_bytes());
        h.update([0]);
        h.update(raw.as_bytes());
        let digest = h.finalize();
        Some(crate::hex::lower(&digest[..HASH_HEX / 2]))
    }
}

fn random_hex(bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    if getrandom::fill(&mut raw).is_err() {
        // Only uniqueness across processes suffers; the pid still separates them.
        raw = std::process::id().to_be_bytes()[..bytes.min(4)].to_vec();
    }
    crate::hex::lower(&raw)
}

/// The per-install salt: read from `path`, or created there (0600, exclusively, never
/// through a symlink). When neither works, a per-process salt keeps hashes useless to an
/// outsider, at the cost of correlation across restarts.
fn load_salt(path: &Path) -> [u8; SALT_BYTES] {
    let mut salt = [0u8; SALT_BYTES];
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut f| f.read_exact(&mut salt));
    if read.is_ok() {
        return salt;
    }
    if getrandom::fill(&mut salt).is_err() {
        log::warn!("usage log: no randomness for the identifier salt");
        return salt;
    }
    if let Some(dir) = path.parent() {
        let _ = crate::fsutil::ensure_private_dir(dir);
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut f| f.write_all(&salt));
    if let Err(e) = created {
        log::info!("usage log: salt not persisted ({e}); hashes change on restart");
    }
    salt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path) -> Settings {
        Settings {
            path: dir.join("logs/usage.jsonl"),
            rotation: Rotation::Daily,
            keep_days: 7,
            clock_skew_ms: 0,
            salt_file: dir.join("state/usage-salt"),
        }
    }

    #[test]
    fn events_reach_the_file_as_json_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let s = settings(tmp.path());
        let sink = Sink::start(&s);
        let trace = CallTrace::with_min(&sink, sink.new_id('c').unwrap(), Duration::ZERO);
        drop(trace.phase(Phase::Wait));
        assert!(sink.flush(Duration::from_secs(5)));
        let text = std::fs::read_to_string(&s.path).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(v["event"], "tool_phase");
        assert_eq!(v["usage_schema"], 1);
        assert_eq!(sink.dropped(), 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_blocking() {
        let (sink, _rx) = Sink::capture(2);
        let trace = CallTrace::with_min(&sink, "c".into(), Duration::ZERO);
        for _ in 0..5 {
            drop(trace.phase(Phase::Catalog));
        }
        assert_eq!(sink.dropped(), 3);
        assert!(!Sink::off().is_on());
        assert_eq!(Sink::off().dropped(), 0);
    }

    #[test]
    fn hashes_are_salted_stable_and_short() {
        let tmp = tempfile::tempdir().unwrap();
        let s = settings(tmp.path());
        let a = Sink::start(&s);
        let b = Sink::start(&s);
        let h = a.hash("thread", "my-thread").unwrap();
        assert_eq!(h.len(), HASH_HEX);
        assert_eq!(
            Some(h.clone()),
            b.hash("thread", "my-thread"),
            "same install"
        );
        assert_ne!(Some(h), a.hash("session", "my-thread"));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&s.salt_file).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert_ne!(a.new_id('c'), a.new_id('c'));
        assert_eq!(Sink::off().hash("thread", "x"), None);
    }
}
