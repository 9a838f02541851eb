//! Scanning files on a few threads at once: a map or a search reads and lexes thousands of
//! files, and the walk hands them over in batches (of at most [`BATCH`] open files, so a
//! large tree never holds many descriptors).
//!
//! Invariant: results come back in the order of the items, whatever the threads' timing,
//! so answers never depend on scheduling; if no thread can be started, the calling thread
//! does the work itself.

use crossbeam_channel::unbounded;

/// Files open at once in one batch: well under the usual 1,024-descriptor limit.
pub const BATCH: usize = 128;
/// Threads one batch may use, whatever the configuration says.
pub const MAX_THREADS: usize = 8;

/// `f` over `items` on up to `threads` threads, results in item order.
pub fn map_in_order<I: Send, T: Send>(
    items: Vec<I>,
    threads: usize,
    f: impl Fn(I) -> T + Sync,
) -> Vec<T> {
    let n = items.len();
    // More threads than cores only adds switching: scanning is CPU work once the files
    // are in the page cache.
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let threads = threads.clamp(1, MAX_THREADS).min(cores).min(n);
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let (work_tx, work_rx) = unbounded::<(usize, I)>();
    let (done_tx, done_rx) = unbounded::<(usize, T)>();
    // Queued before any worker starts; `work_rx` is alive, so a send cannot fail.
    for job in items.into_iter().enumerate() {
        let _ = work_tx.send(job);
    }
    drop(work_tx);
    let f = &f;
    std::thread::scope(|scope| {
        for k in 0..threads {
            let (work_rx, done_tx) = (work_rx.clone(), done_tx.clone());
            let worker = move || {
                for (i, item) in work_rx {
                    // `done_rx` outlives every worker, so a send cannot fail.
                    let _ = done_tx.send((i, f(item)));
                }
            };
            let spawned = std::thread::Builder::new()
                .name(format!("winx-codemap-{k}"))
                .spawn_scoped(scope, worker);
            if spawned.is_err() {
                break;
            }
        }
    });
    // Jobs no worker took (none could start) are done here.
    for (i, item) in work_rx.try_iter() {
        let _ = done_tx.send((i, f(item)));
    }
    drop(done_tx);
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for (i, t) in done_rx {
        slots[i] = Some(t);
    }
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order() {
        let items: Vec<u32> = (0..1000).collect();
        let out = map_in_order(items.clone(), 4, |x| x * 2);
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert_eq!(map_in_order(Vec::<u32>::new(), 4, |x| x), Vec::<u32>::new());
        assert_eq!(map_in_order(vec![7], 1, |x| x + 1), vec![8]);
    }
}
