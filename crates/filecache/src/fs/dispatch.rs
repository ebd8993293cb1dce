//! Parallel dispatch of the mount's requests (docs/design.md §14, "Dispatch"): one thread
//! reads the kernel's requests in the order the kernel queued them and hands each to a pool
//! of request threads, so requests of different files proceed in parallel. The one pair
//! whose order matters and that the kernel may have in flight at once is a `RELEASE` (sent
//! without waiting for its reply, after the `close` returned) and a later request that
//! depends on whether the file is still open (an unlink or rename over it, an open, a
//! truncate): such a request waits until every release read before it has run.

use std::collections::BTreeSet;
use std::io;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// One request's work, replying to the kernel itself.
type Job = Box<dyn FnOnce() + Send>;

/// How a request is ordered against the releases read before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    /// Runs as soon as a request thread takes it.
    Free,
    /// A release: later requests of kind [`Order::AfterReleases`] wait for it.
    Release,
    /// Waits until every release read before it has run (the request acts on whether a
    /// file is open: its handle count and its passthrough image).
    AfterReleases,
}

/// The releases read and not yet run, by their place in the reading order.
#[derive(Default)]
struct Releases {
    /// The next release's sequence number, and the numbers of those in flight.
    state: Mutex<(u64, BTreeSet<u64>)>,
    done: Condvar,
}

impl Releases {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, BTreeSet<u64>)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A release read: its sequence number (called on the reading thread).
    fn begin(&self) -> u64 {
        let mut st = self.lock();
        let seq = st.0;
        st.0 += 1;
        st.1.insert(seq);
        seq
    }

    /// Release `seq` has run.
    fn end(&self, seq: u64) {
        self.lock().1.remove(&seq);
        self.done.notify_all();
    }

    /// The number every release read so far is below (called on the reading thread).
    fn barrier(&self) -> u64 {
        self.lock().0
    }

    /// Waits until no release numbered below `barrier` is in flight. It cannot wait for
    /// ever: the jobs go to the request threads in reading order, so a release read earlier
    /// was taken by another thread already, and a release waits for nothing.
    fn wait_before(&self, barrier: u64) {
        let mut st = self.lock();
        while st.1.first().is_some_and(|&s| s < barrier) {
            st = self.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// The request threads, fed in reading order.
pub(super) struct Pool {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    releases: Arc<Releases>,
}

impl Pool {
    /// A pool of `threads` request threads; with none (or if none could start), every
    /// request runs on the reading thread, in order.
    pub(super) fn new(threads: usize) -> Pool {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut workers = Vec::new();
        for i in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("tiercache-req-{i}"))
                .spawn(move || loop {
                    // The receiver's lock is held only to take the next job.
                    let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return, // the pool was shut down
                    }
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    eprintln!("tiercache mount: a request thread did not start ({e})");
                    break;
                }
            }
        }
        Pool {
            tx: Mutex::new((!workers.is_empty()).then_some(tx)),
            workers: Mutex::new(workers),
            releases: Arc::new(Releases::default()),
        }
    }

    /// The number of request threads running.
    #[cfg(test)]
    pub(super) fn threads(&self) -> usize {
        self.workers.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Hands `job` to a request thread, ordered as `order` says (called on the reading
    /// thread, in the order the kernel's requests were read).
    pub(super) fn submit(&self, order: Order, job: impl FnOnce() + Send + 'static) {
        let releases = self.releases.clone();
        let job: Job = match order {
            Order::Free => Box::new(job),
            Order::Release => {
                let seq = releases.begin();
                Box::new(move || {
                    job();
                    releases.end(seq);
                })
            }
            Order::AfterReleases => {
                let barrier = releases.barrier();
                Box::new(move || {
                    releases.wait_before(barrier);
                    job()
                })
            }
        };
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match tx {
            Some(tx) => {
                if let Err(mpsc::SendError(job)) = tx.send(job) {
                    job() // no thread left to take it (shutting down): run it here
                }
            }
            None => job(),
        }
    }

    /// Stops taking requests and waits for those handed out to finish (unmount).
    pub(super) fn shutdown(&self) -> io::Result<()> {
        drop(self.tx.lock().unwrap_or_else(|p| p.into_inner()).take());
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|p| p.into_inner()));
        let mut result = Ok(());
        for w in workers {
            if w.join().is_err() {
                result = Err(io::Error::other("a request thread panicked"));
            }
        }
        result
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A request ordered after releases runs only once every release submitted before it
    /// has run, though the release is slow and other threads are free; requests submitted
    /// after it, or free, do not wait.
    #[test]
    fn a_request_after_releases_waits_for_the_earlier_releases_only() {
        let pool = Pool::new(4);
        assert_eq!(pool.threads(), 4);
        let released = Arc::new(AtomicBool::new(false));
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel::<(&str, bool)>();
        {
            let released = released.clone();
            pool.submit(Order::Release, move || {
                go_rx.recv().unwrap(); // held until the free request has run
                released.store(true, Ordering::SeqCst);
            });
        }
        {
            let (released, seen) = (released.clone(), seen_tx.clone());
            pool.submit(Order::AfterReleases, move || {
                seen.send(("unlink", released.load(Ordering::SeqCst)))
                    .unwrap();
            });
        }
        {
            let (released, seen) = (released.clone(), seen_tx.clone());
            pool.submit(Order::Free, move || {
                seen.send(("free", released.load(Ordering::SeqCst)))
                    .unwrap();
            });
        }
        // The free request runs while the release is held (it would hang here otherwise).
        assert_eq!(seen_rx.recv().unwrap(), ("free", false));
        go_tx.send(()).unwrap();
        assert_eq!(seen_rx.recv().unwrap(), ("unlink", true));
        // A release submitted later does not hold back what came before it.
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        pool.submit(Order::Release, move || hold_rx.recv().unwrap());
        let barrier_before = pool.releases.barrier();
        assert_eq!(barrier_before, 2);
        hold_tx.send(()).unwrap();
        pool.shutdown().unwrap();
        assert!(pool.releases.lock().1.is_empty());
    }

    /// Without request threads every request runs at once, in order, on the caller.
    #[test]
    fn a_pool_without_threads_runs_requests_in_order_on_the_caller() {
        let pool = Pool::new(0);
        assert_eq!(pool.threads(), 0);
        let count = Arc::new(AtomicUsize::new(0));
        for (i, order) in [Order::Release, Order::AfterReleases, Order::Free]
            .into_iter()
            .enumerate()
        {
            let counter = count.clone();
            pool.submit(order, move || {
                assert_eq!(counter.fetch_add(1, Ordering::SeqCst), i)
            });
            assert_eq!(count.load(Ordering::SeqCst), i + 1);
        }
    }

    /// Many requests from many releases: every request ordered after releases sees all the
    /// releases submitted before it done (a counter of releases run is at least its rank).
    #[test]
    fn every_ordered_request_sees_every_earlier_release_done() {
        let pool = Pool::new(4);
        let done = Arc::new(AtomicUsize::new(0));
        let bad = Arc::new(AtomicUsize::new(0));
        let mut submitted = 0usize;
        for i in 0..2000u32 {
            if i % 3 == 0 {
                let done = done.clone();
                pool.submit(Order::Release, move || {
                    std::thread::yield_now();
                    done.fetch_add(1, Ordering::SeqCst);
                });
                submitted += 1;
            } else {
                let (done, bad) = (done.clone(), bad.clone());
                let before = submitted;
                let order = if i % 3 == 1 {
                    Order::AfterReleases
                } else {
                    Order::Free
                };
                pool.submit(order, move || {
                    if order == Order::AfterReleases && done.load(Ordering::SeqCst) < before {
                        bad.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        }
        pool.shutdown().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), submitted);
        assert_eq!(bad.load(Ordering::SeqCst), 0);
    }
}
