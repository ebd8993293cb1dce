//! Several request sources as one: the volumes of a multi-tenant run, each with its own
//! workload, sharing one cache (docs/design.md §4.10).
//!
//! Each part is a source and the volume its requests go to (their own volume ids are replaced).
//! All parts must have the same arrival model:
//! - closed loop: part `i` with `jobs_i × iodepth_i` slots contributes that many submitters of
//!   queue depth 1 to the mix (slot order: part by part, then job, then depth), so each part
//!   keeps exactly its own concurrency and its jobs their own random streams;
//! - open loop: requests are merged by arrival time, ties going to the lower part, so the mix
//!   is as deterministic as its parts.

use crate::error::WorkloadError;
use tiercache_core::{Arrival, Nanos, Request, RequestSource, SourceError, VolumeId};

/// A boxed source a mix can hold.
pub type BoxedSource = Box<dyn RequestSource + Send>;

/// Sources of several volumes run side by side.
pub struct VolumeMix {
    parts: Vec<(VolumeId, BoxedSource)>,
    arrival: Arrival,
    /// Closed loop: (part, job of the part) of each submitter of the mix.
    slots: Vec<(usize, u32)>,
    /// Open loop: the next request of each part (`None` once it ended), fetched lazily.
    heads: Vec<Option<Request>>,
    started: bool,
}

impl VolumeMix {
    /// The mix of `parts` (volume, source); the error names the part whose arrival model
    /// differs from the first's.
    pub fn new(parts: Vec<(VolumeId, BoxedSource)>) -> Result<Self, WorkloadError> {
        if parts.is_empty() {
            return Err(WorkloadError::invalid("volumes", "no volume to run"));
        }
        let mut slots = Vec::new();
        let open = matches!(parts[0].1.arrival(), Arrival::Open);
        for (i, (_, s)) in parts.iter().enumerate() {
            match s.arrival() {
                Arrival::Open if open => {}
                Arrival::Closed { jobs, iodepth } if !open => {
                    for job in 0..jobs {
                        for _ in 0..iodepth {
                            slots.push((i, job));
                        }
                    }
                }
                _ => {
                    return Err(WorkloadError::invalid(
                        format!("volumes[{i}]"),
                        "every volume's workload must be closed loop (iodepth) or every one \
                         open loop (rate or trace times), not a mix",
                    ))
                }
            }
        }
        let arrival = if open {
            Arrival::Open
        } else {
            Arrival::Closed {
                jobs: slots.len() as u32,
                iodepth: 1,
            }
        };
        Ok(Self {
            heads: vec![None; parts.len()],
            parts,
            arrival,
            slots,
            started: false,
        })
    }

    fn tag(&self, part: usize, mut r: Request) -> Request {
        r.volume = self.parts[part].0;
        r
    }

    /// Open loop: the earliest head, refilled from its part.
    fn next_open(&mut self) -> Option<Request> {
        if !self.started {
            self.started = true;
            for i in 0..self.parts.len() {
                self.heads[i] = self.parts[i].1.next_request(0);
            }
        }
        let (i, _) = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|r| (i, r.time_ns)))
            .min_by_key(|&(i, t)| (t, i))?;
        let r = self.heads[i].take()?;
        self.heads[i] = self.parts[i].1.next_request(0);
        Some(self.tag(i, r))
    }
}

impl RequestSource for VolumeMix {
    fn arrival(&self) -> Arrival {
        self.arrival
    }

    fn next_request(&mut self, job: u32) -> Option<Request> {
        match self.arrival {
            Arrival::Open => self.next_open(),
            Arrival::Closed { .. } => {
                let &(part, inner) = self.slots.get(job as usize)?;
                let r = self.parts[part].1.next_request(inner)?;
                Some(self.tag(part, r))
            }
        }
    }

    fn next_request_at(&mut self, job: u32, now_ns: Nanos) -> Option<Request> {
        match self.arrival {
            Arrival::Open => self.next_open(),
            Arrival::Closed { .. } => {
                let &(part, inner) = self.slots.get(job as usize)?;
                let r = self.parts[part].1.next_request_at(inner, now_ns)?;
                Some(self.tag(part, r))
            }
        }
    }

    /// Closed loop with one slot per part's job: each job is one part's job, so the jobs are
    /// as independent as the parts'. A part with several slots per job (iodepth > 1) shares
    /// that job's one stream among them: drawing for one slot ahead takes requests another
    /// would have drawn, so it is not independent.
    fn streams_independent(&self) -> bool {
        matches!(self.arrival, Arrival::Closed { .. })
            && self.parts.iter().all(|(_, s)| {
                s.streams_independent() && matches!(s.arrival(), Arrival::Closed { iodepth: 1, .. })
            })
    }

    fn take_error(&mut self) -> Option<SourceError> {
        self.parts.iter_mut().find_map(|(_, s)| s.take_error())
    }

    fn input_notes(&self) -> Vec<String> {
        self.parts
            .iter()
            .flat_map(|(v, s)| {
                s.input_notes()
                    .into_iter()
                    .map(move |n| format!("volume {}: {n}", v.0))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SyntheticWorkload, WorkloadSpec};

    fn part(spec: WorkloadSpec) -> BoxedSource {
        Box::new(SyntheticWorkload::new(&spec).unwrap())
    }

    #[test]
    fn closed_parts_keep_their_slots_and_streams_under_their_volume() {
        let a = WorkloadSpec {
            jobs: 2,
            iodepth: Some(3),
            requests: Some(10),
            seed: 1,
            ..Default::default()
        };
        let b = WorkloadSpec {
            jobs: 1,
            iodepth: Some(1),
            requests: Some(4),
            seed: 2,
            ..Default::default()
        };
        let mut mix = VolumeMix::new(vec![
            (VolumeId(5), part(a.clone())),
            (VolumeId(9), part(b.clone())),
        ])
        .unwrap();
        assert_eq!(
            mix.arrival(),
            Arrival::Closed {
                jobs: 7,
                iodepth: 1
            }
        );
        // Slot 6 is part b's only job: its requests, in order, on volume 9.
        let mut alone = SyntheticWorkload::new(&b).unwrap();
        for _ in 0..4 {
            let r = mix.next_request(6).unwrap();
            let mut want = alone.next_request(0).unwrap();
            want.volume = VolumeId(9);
            assert_eq!(r, want);
        }
        assert_eq!(mix.next_request(6), None);
        // Slots 0..3 share part a's job 0; 3..6 its job 1.
        let mut alone = SyntheticWorkload::new(&a).unwrap();
        for slot in [0, 2, 1] {
            let r = mix.next_request(slot).unwrap();
            assert_eq!(r.volume, VolumeId(5));
            assert_eq!(r.offset, alone.next_request(0).unwrap().offset);
        }
        assert_eq!(mix.next_request(7), None, "no such slot");
    }

    #[test]
    fn open_parts_merge_by_time_and_mixed_models_are_refused() {
        let open = |seed, rate| WorkloadSpec {
            rate_iops: Some(rate),
            requests: Some(50),
            seed,
            ..Default::default()
        };
        let mut mix = VolumeMix::new(vec![
            (VolumeId(0), part(open(1, 1000.0))),
            (VolumeId(1), part(open(2, 3000.0))),
        ])
        .unwrap();
        let all: Vec<Request> = std::iter::from_fn(|| mix.next_request(0)).collect();
        assert_eq!(all.len(), 100);
        assert!(all.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        assert_eq!(all.iter().filter(|r| r.volume == VolumeId(1)).count(), 50);
        let closed = WorkloadSpec {
            iodepth: Some(1),
            requests: Some(5),
            ..Default::default()
        };
        let e = VolumeMix::new(vec![
            (VolumeId(0), part(open(1, 1000.0))),
            (VolumeId(1), part(closed)),
        ])
        .err()
        .unwrap();
        assert_eq!(e.field(), "volumes[1]");
    }
}
