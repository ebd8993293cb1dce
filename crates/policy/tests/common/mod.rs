//! Helpers shared by the partition and tenancy tests: a serial executor model that runs
//! plans and flush jobs on real bytes, and what the application may read back.

#![allow(dead_code)] // each test file uses its own subset

use tiercache_core::{Device, IoKind, Op, Plan, Request};
use tiercache_policy::ExecutorState;

pub const VOLUMES: u32 = 4;
pub const VOLUME_BYTES: u64 = 64 * 1024;
/// Requests reach a little past `VOLUME_BYTES`, and whole-line fetches past them.
pub const MODEL_BYTES: usize = VOLUME_BYTES as usize + 2 * 16384;

pub fn idle() -> ExecutorState {
    ExecutorState {
        now: 0,
        cache_idle_ns: u64::MAX / 2,
        ..ExecutorState::default()
    }
}

/// A serial executor moving real bytes (ops routed by their volume address), with what the
/// application may read back (`None` where a trim left it unspecified).
pub struct Bytes {
    pub cache: Vec<u8>,
    pub backend: Vec<Vec<u8>>,
    pub truth: Vec<Vec<Option<u8>>>,
}

impl Bytes {
    pub fn new(cache_bytes: u64) -> Self {
        Bytes {
            cache: vec![0; cache_bytes as usize],
            backend: vec![vec![0; MODEL_BYTES]; VOLUMES as usize],
            truth: vec![vec![Some(0); MODEL_BYTES]; VOLUMES as usize],
        }
    }

    /// Runs `plan` stage by stage; returns the bytes a read request receives.
    pub fn run(&mut self, plan: &Plan, req: Option<(&Request, &[u8])>) -> Vec<Option<u8>> {
        let mut scratch: std::collections::HashMap<(u32, u64), (u8, tiercache_core::Stage)> =
            Default::default();
        for o in &plan.ops {
            let vol = o.volume.0 as usize;
            match (o.device, o.kind) {
                (_, IoKind::Read) => {
                    for i in 0..o.len {
                        let b = match o.device {
                            Device::Cache => self.cache[(o.offset + i) as usize],
                            Device::Backend => self.backend[vol][(o.offset + i) as usize],
                        };
                        scratch.insert((o.volume.0, o.vaddr + i), (b, o.stage));
                    }
                }
                (_, IoKind::Write) => {
                    for i in 0..o.len {
                        let v = o.vaddr + i;
                        let from_client = req.and_then(|(r, data)| {
                            (r.op == Op::Write
                                && r.volume == o.volume
                                && v >= r.offset
                                && v < r.offset + r.len)
                                .then(|| data[(v - r.offset) as usize])
                        });
                        let b = match from_client {
                            Some(b) => b,
                            None => {
                                let &(b, st) = scratch
                                    .get(&(o.volume.0, v))
                                    .unwrap_or_else(|| panic!("no data for {o:?} in {plan:?}"));
                                assert!(st < o.stage, "data of {o:?} read in the same stage");
                                b
                            }
                        };
                        match o.device {
                            Device::Cache => self.cache[(o.offset + i) as usize] = b,
                            Device::Backend => self.backend[vol][(o.offset + i) as usize] = b,
                        }
                    }
                }
                (Device::Backend, IoKind::Trim) => {
                    self.backend[vol][o.offset as usize..(o.offset + o.len) as usize].fill(0)
                }
                _ => {}
            }
        }
        match req {
            Some((r, _)) if r.op == Op::Read => (r.offset..r.offset + r.len)
                .map(|v| scratch.get(&(r.volume.0, v)).map(|x| x.0))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Bytes {
    /// Records what a request did in `truth` and checks that a read returned the newest data
    /// (`got` from [`Bytes::run`], `data` the bytes a write carried).
    pub fn check_and_record(
        &mut self,
        req: &Request,
        got: &[Option<u8>],
        data: &[u8],
    ) -> Result<(), String> {
        let vol = req.volume.0 as usize;
        let range = req.offset as usize..(req.offset + req.len) as usize;
        match req.op {
            Op::Read => {
                for (i, (g, t)) in got.iter().zip(&self.truth[vol][range]).enumerate() {
                    match (g, t) {
                        (None, _) => return Err(format!("byte {i} of {req:?} not produced")),
                        (Some(g), Some(t)) if g != t => {
                            return Err(format!("byte {i} of {req:?}: read {g}, wrote {t}"))
                        }
                        _ => {}
                    }
                }
            }
            Op::Write => {
                for (t, d) in self.truth[vol][range].iter_mut().zip(data) {
                    *t = Some(*d);
                }
            }
            Op::Trim => self.truth[vol][range].fill(None),
            Op::Flush => {}
        }
        Ok(())
    }

    /// The first byte whose backend copy differs from the last data written to it, if any
    /// (to check after a final flush).
    pub fn first_lost_byte(&self) -> Option<(usize, usize)> {
        for (vol, truth) in self.truth.iter().enumerate() {
            for (i, t) in truth.iter().enumerate() {
                if t.is_some_and(|t| self.backend[vol][i] != t) {
                    return Some((vol, i));
                }
            }
        }
        None
    }
}
