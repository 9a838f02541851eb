//! The `http-unauthorized-delay` thread: holds 401 replies until their delay has passed,
//! so failed authentication is slow for the client without occupying a worker.
//!
//! Every entry gets the same delay, so arrival order is deadline order and a FIFO is the
//! whole schedule.

use super::reply::Replier;
use super::routes::Reply;
use crate::deadline::Deadline;
use crossbeam_channel::{Receiver, Sender, bounded, never, select};
use std::collections::VecDeque;

/// Replies waiting at once; beyond this a 401 is sent without its delay (the rate limiter
/// still bounds each source).
const MAX_WAITING: usize = 4096;

pub struct Delayed {
    pub rq: tiny_http::Request,
    pub reply: Reply,
    pub due: Deadline,
}

pub fn spawn(replier: Replier) -> std::io::Result<Sender<Delayed>> {
    let (tx, rx) = bounded(MAX_WAITING);
    std::thread::Builder::new()
        .name("http-unauthorized-delay".into())
        .spawn(move || run(rx, replier))?;
    Ok(tx)
}

fn run(rx: Receiver<Delayed>, replier: Replier) {
    let mut queue: VecDeque<Delayed> = VecDeque::new();
    loop {
        let next = queue.front().map_or_else(never, |d| d.due.receiver());
        select! {
            recv(rx) -> msg => match msg {
                Ok(d) if queue.len() < MAX_WAITING => queue.push_back(d),
                Ok(d) => replier.send(d.rq, d.reply),
                Err(_) => break,
            },
            recv(next) -> _ => {
                while queue.front().is_some_and(|d| d.due.expired()) {
                    if let Some(d) = queue.pop_front() {
                        replier.send(d.rq, d.reply);
                    }
                }
            }
        }
    }
    for d in queue {
        replier.send(d.rq, d.reply);
    }
}
