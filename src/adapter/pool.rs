//! A bounded worker pool fed by a crossbeam channel. Shared by every transport.

use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, bounded, select};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread::{self, JoinHandle};

pub type Job = Box<dyn FnOnce() + Send + 'static>;

pub struct Pool {
    tx: Sender<Job>,
    /// Disconnects once every worker has exited.
    done: Receiver<()>,
    handles: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `workers` named threads; at most `queue` jobs wait before `submit` blocks.
    pub fn new(name: &str, workers: usize, queue: usize) -> std::io::Result<Pool> {
        let (tx, rx) = bounded::<Job>(queue);
        let (done_tx, done) = bounded::<()>(0);
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let rx = rx.clone();
            let done_tx = done_tx.clone();
            handles.push(
                thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || worker(rx, done_tx))?,
            );
        }
        Ok(Pool { tx, done, handles })
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
        let Pool { tx, done, handles } = self;
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

fn worker(rx: Receiver<Job>, _done: crossbeam_channel::Sender<()>) {
    for job in rx {
        // A job maps its own panics to an answer; this keeps the worker alive regardless.
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            log::error!("a job panicked outside its own handler");
        }
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
