//! Progress of a long `sim` run on a terminal: the requests the source has handed out, counted
//! by a wrapper around it and drawn by a bar a few times a second (nothing off a terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tiercache_core::{Arrival, Nanos, Request, RequestSource, SourceError};

/// A request source that counts what it hands out.
pub struct Counted<'a> {
    inner: &'a mut (dyn RequestSource + Send),
    count: Arc<AtomicU64>,
}

impl RequestSource for Counted<'_> {
    fn arrival(&self) -> Arrival {
        self.inner.arrival()
    }
    fn next_request(&mut self, job: u32) -> Option<Request> {
        let r = self.inner.next_request(job);
        if r.is_some() {
            self.count.fetch_add(1, Relaxed);
        }
        r
    }
    fn next_request_at(&mut self, job: u32, now_ns: Nanos) -> Option<Request> {
        let r = self.inner.next_request_at(job, now_ns);
        if r.is_some() {
            self.count.fetch_add(1, Relaxed);
        }
        r
    }
    fn streams_independent(&self) -> bool {
        self.inner.streams_independent()
    }
    fn take_error(&mut self) -> Option<SourceError> {
        self.inner.take_error()
    }
    fn input_notes(&self) -> Vec<String> {
        self.inner.input_notes()
    }
}

/// Runs `f` on `source`, showing a progress bar on a terminal. `expected` is the number of
/// requests the run will take, when known.
pub fn with_progress<T>(
    name: &str,
    expected: Option<u64>,
    source: &mut (dyn RequestSource + Send),
    f: impl FnOnce(&mut (dyn RequestSource + Send)) -> T,
) -> T {
    if !crate::show_progress() {
        return f(source);
    }
    let count = Arc::new(AtomicU64::new(0));
    let bar = match expected {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let template = if expected.is_some() {
        "{elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} requests {msg}"
    } else {
        "{elapsed_precise} {spinner} {pos} requests {msg}"
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(name.to_string());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drawer = {
        let (bar, count, done) = (bar.clone(), count.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Relaxed) {
                bar.set_position(count.load(Relaxed));
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        })
    };
    let out = f(&mut Counted {
        inner: source,
        count,
    });
    done.store(true, Relaxed);
    let _ = drawer.join();
    bar.finish_and_clear();
    out
}
