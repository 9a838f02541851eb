//! A bounded worker pool fed by a crossbeam channel. Shared by every transport.
//!
//! At most `workers` jobs run at once, counted by `Slots`: a worker takes a slot before it
//! runs a job, and a slot taken with `try_reserve` runs a job on the caller's thread (the
//! stdio reader does, to spare the request a hand-off to another thread).

use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, bounded, select};
use parking_lot::{Condvar, Mutex};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// Jobs that may run at once, wherever they run.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn take(&self) {
        let mut free = self.free.lock();
        while *free == 0 {
            self.freed.wait(&mut free);
        }
        *free -= 1;
    }

    fn try_take(&self) -> bool {
        let mut free = self.free.lock();
        let taken = *free > 0;
        if taken {
            *free -= 1;
        }
        taken
    }

    fn give(&self) {
        *self.free.lock() += 1;
        self.freed.notify_one();
    }

    /// Run `job` in a slot taken by the caller, giving the slot back however it ends.
    fn run(&self, job: Job) {
        // A job maps its own panics to an answer; this keeps the thread alive regardless.
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            log::error!("a job panicked outside its own handler");
        }
        self.give();
    }
}

pub struct Pool {
    tx: Sender<Job>,
    slots: Arc<Slots>,
    /// Disconnects once every worker has exited.
    done: Receiver<()>,
    handles: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `workers` named threads; at most `queue` jobs wait before `submit` blocks.
    pub fn new(name: &str, workers: usize, queue: usize) -> std::io::Result<Pool> {
        let (tx, rx) = bounded::<Job>(queue);
        let (done_tx, done) = bounded::<()>(0);
        let slots = Arc::new(Slots {
            free: Mutex::new(workers),
            freed: Condvar::new(),
        });
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let rx = rx.clone();
            let done_tx = done_tx.clone();
            let slots = slots.clone();
            handles.push(
                thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || worker(rx, &slots, done_tx))?,
            );
        }
        Ok(Pool {
            tx,
            slots,
            done,
            handles,
        })
    }

    /// A slot for a job the caller will run on its own thread, if fewer than `workers`
    /// jobs are running; dropped unused, it is given back.
    pub fn try_reserve(&self) -> Option<Reserved> {
        self.slots.try_take().then(|| Reserved {
            slots: Some(self.slots.clone()),
        })
    }

    /// Queue a job, waiting while the queue is full (backpressure on the reader).
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.tx.send(job).map_err(|e| e.0)
    }

    /// Queue a job only if there is room now.
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        self.tx.try_send(job).map_err(|e| e.into_inner())
    }

    /// Stop taking jobs, let queued and running jobs finish until `grace` passes.
    /// Returns whether every worker finished in time.
    pub fn shutdown(self, grace: Deadline) -> bool {
        let Pool {
            tx, done, handles, ..
        } = self;
        drop(tx);
        let finished = select! {
            recv(done) -> _ => true,
            recv(grace.receiver()) -> _ => false,
        };
        if finished {
            for h in handles {
                let _ = h.join();
            }
        } else {
            log::warn!(
                "{} expired with jobs still running; exiting without them",
                grace.name()
            );
        }
        finished
    }
}

/// A slot of a pool, taken for a job run on the caller's thread.
pub struct Reserved {
    slots: Option<Arc<Slots>>,
}

impl Reserved {
    /// Run `job` here, in this slot, giving the slot back however the job ends.
    pub fn run(mut self, job: Job) {
        if let Some(slots) = self.slots.take() {
            slots.run(job);
        }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.give();
        }
    }
}

fn worker(rx: Receiver<Job>, slots: &Slots, _done: crossbeam_channel::Sender<()>) {
    for job in rx {
        slots.take();
        slots.run(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn runs_jobs_and_survives_panics() {
        let pool = Pool::new("t", 2, 4).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        pool.submit(Box::new(|| panic!("boom"))).ok().unwrap();
        for i in 0..10 {
            let tx = tx.clone();
            pool.submit(Box::new(move || tx.send(i).unwrap()))
                .ok()
                .unwrap();
        }
        let mut got: Vec<i32> = (0..10).map(|_| rx.recv().unwrap()).collect();
        got.sort();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        assert!(pool.shutdown(Deadline::after("test grace", Duration::from_secs(5))));
    }

    #[test]
    fn a_job_run_here_counts_against_the_workers() {
        let pool = Pool::new("t", 1, 4).unwrap();
        let (started_tx, started) = crossbeam_channel::unbounded();
        let (release, release_rx) = crossbeam_channel::unbounded::<()>();
        let blocker = {
            let (started_tx, release_rx) = (started_tx.clone(), release_rx.clone());
            Box::new(move || {
                started_tx.send("here").unwrap();
                release_rx.recv().unwrap();
            })
        };
        // The one slot is free: the job runs on a thread of ours, as the stdio reader's do.
        let pool = Arc::new(pool);
        let slot = pool.try_reserve().expect("the one slot is free");
        let here = thread::spawn(move || slot.run(blocker));
        assert_eq!(started.recv().unwrap(), "here");
        // Now no slot is free: none is reserved, and a queued job waits.
        assert!(pool.try_reserve().is_none());
        pool.submit(Box::new(move || started_tx.send("queued").unwrap()))
            .ok()
            .unwrap();
        assert!(started.recv_timeout(Duration::from_millis(50)).is_err());
        release.send(()).unwrap();
        here.join().unwrap();
        assert_eq!(started.recv().unwrap(), "queued");
        let pool = Arc::into_inner(pool).unwrap();
        assert!(pool.shutdown(Deadline::after("test grace", Duration::from_secs(5))));
    }

    #[test]
    fn a_reserved_slot_left_unused_is_given_back() {
        let pool = Pool::new("t", 1, 1).unwrap();
        let slot = pool.try_reserve().expect("the one slot is free");
        assert!(pool.try_reserve().is_none());
        drop(slot);
        let again = pool.try_reserve().expect("given back");
        again.run(Box::new(|| {}));
        assert!(pool.try_reserve().is_some());
        assert!(pool.shutdown(Deadline::after("test grace", Duration::from_secs(5))));
    }

    #[test]
    fn shutdown_gives_up_after_grace() {
        let pool = Pool::new("t", 1, 1).unwrap();
        let (block_tx, block_rx) = crossbeam_channel::bounded::<()>(0);
        pool.submit(Box::new(move || {
            let _ = block_rx.recv();
        }))
        .ok()
        .unwrap();
        assert!(!pool.shutdown(Deadline::after("test grace", Duration::from_millis(20))));
        drop(block_tx);
    }
}
