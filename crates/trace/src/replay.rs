//! Replaying a trace as a [`RequestSource`] for the simulator.

use crate::error::TraceError;
use crate::reader::TraceReader;
use tiercache_core::{Arrival, Request, RequestSource, SourceError};

/// Feeds a trace to an executor.
///
/// Open loop: requests arrive at their (optionally scaled) trace times; a request earlier than
/// its predecessor is delayed to the predecessor's time, since open-loop sources must be
/// non-decreasing (counted in [`ReplaySource::reordered`]). Closed loop (fast replay):
/// submitters share the one stream in file order, each taking the next request as soon as it
/// has a free slot; the trace's times are dropped (a closed-loop executor would otherwise wait
/// for each request's time, and "fast" would follow the trace's clock).
///
/// A read error ends the stream; [`ReplaySource::error`] then holds it.
pub struct ReplaySource {
    reader: Box<dyn TraceReader>,
    arrival: Arrival,
    speed: f64,
    last_time: u64,
    reordered: u64,
    error: Option<TraceError>,
    /// The speed was refused: no request, even after the error is taken.
    bad_speed: bool,
}

impl ReplaySource {
    /// Replays `reader` under `arrival`; `speed` divides trace times (2.0 replays twice as
    /// fast). A speed that is not finite and > 0 is an error naming `workload.speed`.
    pub fn try_new(
        reader: Box<dyn TraceReader>,
        arrival: Arrival,
        speed: f64,
    ) -> Result<Self, TraceError> {
        check_speed(speed)?;
        Ok(Self::new(reader, arrival, speed))
    }

    /// As [`ReplaySource::try_new`], but a bad speed surfaces as the stream's error: the
    /// source gives no request and [`ReplaySource::error`] (and
    /// [`RequestSource::take_error`]) hold the `workload.speed` error, so a run over it fails
    /// rather than replaying at another speed. Prefer `try_new`, which fails before the run.
    pub fn new(reader: Box<dyn TraceReader>, arrival: Arrival, speed: f64) -> Self {
        Self {
            reader,
            arrival,
            speed,
            last_time: 0,
            reordered: 0,
            error: check_speed(speed).err(),
            bad_speed: check_speed(speed).is_err(),
        }
    }

    /// The read error that ended the stream, if any.
    pub fn error(&self) -> Option<&TraceError> {
        self.error.as_ref()
    }

    /// Open loop: requests delayed to keep arrival times non-decreasing.
    pub fn reordered(&self) -> u64 {
        self.reordered
    }

    /// Replaces `out` with the next requests, up to `max`, exactly as that many calls of
    /// [`RequestSource::next_request`] would give them (one reader call per batch instead of
    /// one per request); leaves it empty at the end or after a read error, which
    /// [`ReplaySource::error`] then holds (the requests read before it are in `out`).
    pub fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) {
        out.clear();
        if self.error.is_some() || self.bad_speed {
            return;
        }
        let read = self.reader.next_batch(out, max);
        match self.arrival {
            // Closed loop: the times are dropped; no per-request state.
            Arrival::Closed { .. } => out.iter_mut().for_each(|r| r.time_ns = 0),
            Arrival::Open => {
                for r in out.iter_mut() {
                    self.retime(r);
                }
            }
        }
        if let Err(e) = read {
            self.error = Some(e);
        }
    }

    /// The arrival time of `r` under this replay's arrival and speed.
    #[inline]
    fn retime(&mut self, r: &mut Request) {
        match self.arrival {
            Arrival::Closed { .. } => r.time_ns = 0,
            Arrival::Open => {
                if self.speed != 1.0 {
                    r.time_ns = (r.time_ns as f64 / self.speed) as u64;
                }
                if r.time_ns < self.last_time {
                    self.reordered += 1;
                    r.time_ns = self.last_time;
                }
                self.last_time = r.time_ns;
            }
        }
    }

    /// The underlying reader (volumes, counters, metadata).
    pub fn reader(&self) -> &dyn TraceReader {
        self.reader.as_ref()
    }
}

/// Refuses a replay speed that is not finite and > 0: it divides the trace's times, and any
/// stand-in (such as 1.0) would replay at a speed the config does not say.
fn check_speed(speed: f64) -> Result<(), TraceError> {
    if speed.is_finite() && speed > 0.0 {
        Ok(())
    } else {
        Err(TraceError::Unsupported(format!(
            "workload.speed: {speed} must be a finite number > 0 (trace times are divided by it)"
        )))
    }
}

impl RequestSource for ReplaySource {
    fn arrival(&self) -> Arrival {
        self.arrival
    }

    fn next_request(&mut self, _job: u32) -> Option<Request> {
        if self.error.is_some() || self.bad_speed {
            return None;
        }
        match self.reader.next()? {
            Ok(mut r) => {
                self.retime(&mut r);
                Some(r)
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }

    fn take_error(&mut self) -> Option<SourceError> {
        self.error.take().map(|e| Box::new(e) as SourceError)
    }

    fn input_notes(&self) -> Vec<String> {
        crate::stats::CounterNotes(self.reader.counters())
            .to_string()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{open, ReadOptions};

    const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/traces");

    #[test]
    fn open_loop_times_never_decrease() {
        let r = open(
            &format!("{TRACES}/systor17-sample.csv.gz"),
            None,
            &ReadOptions::default(),
        )
        .unwrap();
        let mut src = ReplaySource::new(r, Arrival::Open, 2.0);
        let mut times = Vec::new();
        while let Some(req) = src.next_request(0) {
            times.push(req.time_ns);
        }
        assert_eq!(times.len(), 999);
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*times.last().unwrap(), 2_440_976_000 / 2);
        assert!(src.reordered() > 0);
        assert!(src.error().is_none());
    }

    /// Batches give the requests, times, reorder count and error of request-by-request
    /// replay, under both arrivals, for batch sizes that split the stream anywhere.
    #[test]
    fn batches_equal_request_by_request_replay() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.csv");
        let mut text = String::new();
        for i in 0..50 {
            text.push_str(&format!(
                "{},h,{},Read,{},512,1\n",
                1000 - i * 7 % 23,
                i % 3,
                i * 512
            ));
        }
        text.push_str("9,h,0,Read,zz,512,1\n");
        std::fs::write(&bad, text).unwrap();
        let sample = format!("{TRACES}/systor17-sample.csv.gz");
        let arrivals = [
            Arrival::Open,
            Arrival::Closed {
                jobs: 3,
                iodepth: 2,
            },
        ];
        for path in [sample.as_str(), bad.to_str().unwrap()] {
            for arrival in arrivals {
                for max in [1, 7, 64, 4096] {
                    let open_src = || {
                        let r = open(path, None, &ReadOptions::default()).unwrap();
                        ReplaySource::new(r, arrival, 1.5)
                    };
                    let mut one = open_src();
                    let mut want = Vec::new();
                    while let Some(r) = one.next_request(0) {
                        want.push(r);
                    }
                    let mut batched = open_src();
                    let (mut got, mut buf) = (Vec::new(), Vec::new());
                    loop {
                        batched.next_batch(&mut buf, max);
                        if buf.is_empty() {
                            break;
                        }
                        assert!(buf.len() <= max);
                        got.extend_from_slice(&buf);
                    }
                    assert_eq!(got, want, "{path} {arrival:?} {max}");
                    assert_eq!(batched.reordered(), one.reordered());
                    assert_eq!(
                        batched.error().map(|e| e.to_string()),
                        one.error().map(|e| e.to_string())
                    );
                    assert_eq!(batched.reader().counters(), one.reader().counters());
                }
            }
        }
    }

    #[test]
    fn a_speed_not_finite_and_positive_is_an_error_naming_the_field() {
        let sample = format!("{TRACES}/systor17-sample.csv.gz");
        let reader = || open(&sample, None, &ReadOptions::default()).unwrap();
        for speed in [0.0, -2.0, f64::NAN, f64::INFINITY, -0.0] {
            let e = ReplaySource::try_new(reader(), Arrival::Open, speed)
                .err()
                .unwrap_or_else(|| panic!("speed {speed} accepted"))
                .to_string();
            assert!(e.starts_with("workload.speed: "), "{e}");
            // `new` does not replay at another speed either: no request, the same error.
            let mut src = ReplaySource::new(reader(), Arrival::Open, speed);
            assert!(src.next_request(0).is_none(), "speed {speed} replayed");
            let mut batch = Vec::new();
            src.next_batch(&mut batch, 64);
            assert!(batch.is_empty());
            assert_eq!(src.take_error().unwrap().to_string(), e);
            assert!(
                src.next_request(0).is_none(),
                "speed {speed} replayed after the error"
            );
        }
        let mut src = ReplaySource::try_new(reader(), Arrival::Open, 0.5).unwrap();
        assert!(src.next_request(0).is_some() && src.error().is_none());
    }

    #[test]
    fn read_errors_end_the_stream_and_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        std::fs::write(
            &p,
            "1,h,0,Read,0,512,1\n2,h,0,Read,zz,512,1\n3,h,0,Read,0,512,1\n",
        )
        .unwrap();
        let r = open(p.to_str().unwrap(), None, &ReadOptions::default()).unwrap();
        let mut src = ReplaySource::new(
            r,
            Arrival::Closed {
                jobs: 2,
                iodepth: 1,
            },
            1.0,
        );
        assert!(src.next_request(0).is_some());
        assert!(src.next_request(1).is_none());
        assert!(src.next_request(0).is_none());
        assert!(src
            .take_error()
            .unwrap()
            .to_string()
            .contains(":2: field `offset`"));
    }
}
