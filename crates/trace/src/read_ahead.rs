//! Reading a trace on a thread of its own while the caller works on what was read.
//!
//! Decoding records and analysing them are independent: [`for_each_batch`] runs the reader's
//! [`TraceReader::next_batch`] on a second thread, a few batches ahead, and hands the caller
//! each batch in input order. Exactly what the plain loop
//!
//! ```text
//! loop { let n = reader.next_batch(&mut batch, max); consume(&batch)?; if n? == 0 { break } }
//! ```
//!
//! does, with the same batches: the requests read before a reader error are consumed first,
//! then the error is returned; an error of `consume` stops the reading thread (it stops at its
//! next batch) and is returned. Memory is bounded by [`BATCHES_AHEAD`] batches of `max`
//! requests.

use crate::{TraceError, TraceReader};
use std::sync::mpsc;
use tiercache_core::Request;

/// Batches read ahead of the one being consumed.
pub const BATCHES_AHEAD: usize = 4;

/// How a [`for_each_batch`] run ended early.
#[derive(Debug)]
pub enum BatchError<E> {
    /// The reader failed (the requests read before the error were consumed).
    Read(TraceError),
    /// `consume` failed; reading stopped.
    Consume(E),
}

/// Reads `reader` to its end in batches of up to `max` requests on a second thread and calls
/// `consume` on each batch in order, on this thread (see the module docs).
pub fn for_each_batch<R, E>(
    reader: &mut R,
    max: usize,
    mut consume: impl FnMut(&[Request]) -> Result<(), E>,
) -> Result<(), BatchError<E>>
where
    R: TraceReader + ?Sized,
{
    let max = max.max(1);
    std::thread::scope(|scope| {
        // A batch and whether the reader ended after it (Ok(true): the end; Err: an error).
        let (full_tx, full_rx) =
            mpsc::sync_channel::<(Vec<Request>, Result<bool, TraceError>)>(BATCHES_AHEAD);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<Request>>();
        scope.spawn(move || loop {
            let mut batch = empty_rx
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(max));
            batch.clear();
            let read = reader.next_batch(&mut batch, max);
            let last = !matches!(read, Ok(n) if n > 0);
            // The receiver is gone when the consumer stopped early.
            if full_tx.send((batch, read.map(|n| n == 0))).is_err() || last {
                return;
            }
        });
        // The sender is dropped only after its last message, so every run ends on one.
        while let Ok((batch, read)) = full_rx.recv() {
            consume(&batch).map_err(BatchError::Consume)?;
            match read {
                Ok(false) => {
                    let _ = empty_tx.send(batch);
                }
                Ok(true) => break,
                Err(e) => return Err(BatchError::Read(e)),
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{ReadCounters, TraceMeta};
    use crate::VolumeMap;
    use proptest::prelude::*;
    use tiercache_core::{Op, VolumeId};

    /// A reader of `n` requests whose batches are of `step` (at most `max`), failing after
    /// `fail_at` requests when set.
    struct Scripted {
        next: u64,
        n: u64,
        step: usize,
        fail_at: Option<u64>,
        meta: TraceMeta,
        volumes: VolumeMap,
        counters: ReadCounters,
    }

    impl Iterator for Scripted {
        type Item = Result<Request, TraceError>;
        fn next(&mut self) -> Option<Self::Item> {
            if self.fail_at == Some(self.next) {
                self.fail_at = None;
                return Some(Err(TraceError::io(
                    "scripted",
                    std::io::Error::other("scripted failure"),
                )));
            }
            (self.next < self.n).then(|| {
                self.next += 1;
                Ok(request(self.next - 1))
            })
        }
    }

    impl TraceReader for Scripted {
        fn meta(&self) -> &TraceMeta {
            &self.meta
        }
        fn volumes(&self) -> &VolumeMap {
            &self.volumes
        }
        fn counters(&self) -> &ReadCounters {
            &self.counters
        }
        fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
            let start = out.len();
            while out.len() - start < max.min(self.step) {
                match self.next() {
                    Some(Ok(r)) => out.push(r),
                    Some(Err(e)) => return Err(e),
                    None => break,
                }
            }
            Ok(out.len() - start)
        }
    }

    fn request(i: u64) -> Request {
        Request {
            time_ns: i,
            volume: VolumeId(0),
            op: Op::Read,
            offset: i * 4096,
            len: 4096,
        }
    }

    fn scripted(n: u64, step: usize, fail_at: Option<u64>) -> Scripted {
        Scripted {
            next: 0,
            n,
            step,
            fail_at,
            meta: TraceMeta {
                path: "scripted".into(),
                format: crate::Format::Native,
                compression: crate::Compression::None,
                epoch_unix_ns: None,
            },
            volumes: VolumeMap::default(),
            counters: ReadCounters::default(),
        }
    }

    /// The plain loop the module replaces, as the reference.
    fn plain(r: &mut Scripted, max: usize, stop_after: Option<usize>) -> (Vec<u64>, String) {
        let mut seen = Vec::new();
        let mut batch = Vec::new();
        let mut calls = 0;
        loop {
            batch.clear();
            let read = r.next_batch(&mut batch, max);
            if stop_after == Some(calls) {
                return (seen, "consume".into());
            }
            calls += 1;
            seen.extend(batch.iter().map(|q| q.time_ns));
            match read {
                Ok(0) => return (seen, "end".into()),
                Ok(_) => {}
                Err(_) => return (seen, "read".into()),
            }
        }
    }

    proptest! {
        /// Same requests, in the same order, and the same ending as the plain loop, whatever
        /// the batch sizes, a reader error's place, or a consumer that fails at some batch.
        #[test]
        fn same_as_the_plain_loop(
            n in 0u64..3000,
            step in 1usize..300,
            max in 1usize..300,
            fail_at in proptest::option::of(0u64..3000),
            stop_after in proptest::option::of(0usize..40),
        ) {
            let want = plain(&mut scripted(n, step, fail_at), max, stop_after);
            let mut r = scripted(n, step, fail_at);
            let mut seen = Vec::new();
            let mut calls = 0;
            let got = for_each_batch(&mut r, max, |b| {
                if stop_after == Some(calls) {
                    return Err(());
                }
                calls += 1;
                seen.extend(b.iter().map(|q| q.time_ns));
                Ok(())
            });
            let end = match &got {
                Ok(()) => "end",
                Err(BatchError::Read(_)) => "read",
                Err(BatchError::Consume(())) => "consume",
            };
            prop_assert_eq!((seen, end.to_string()), want);
        }
    }
}
