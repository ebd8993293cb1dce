//! Belady's MIN at one cache size: on a miss with the cache full, evict the resident line whose
//! next use is furthest in the future (never used again counts as furthest). Every miss is
//! brought in (demand paging, as libCacheSim's Belady does), so the miss count is the least any
//! policy that caches every missed line can have. Which of several never-used-again lines goes
//! first does not change any count.

use crate::Future;

const NONE: u32 = u32::MAX;

/// MIN over the accesses of a [`crate::FutureIndex`], fed in order.
///
/// An indexed binary max-heap of the resident lines keyed by next use: a hit updates its line's
/// key, a miss in a full cache pops the top. Memory: 4 bytes per distinct line (its place in
/// the heap) and 12 per cache line.
pub struct Belady {
    capacity: usize,
    /// Per line id: its index in `heap`, or `NONE` when not resident.
    at: Vec<u32>,
    /// (next use, line id), a max-heap on next use.
    heap: Vec<(u64, u32)>,
    evictions: u64,
}

impl Belady {
    /// An empty cache of `capacity` lines over line ids below `distinct`.
    pub fn new(capacity: u64, distinct: u32) -> Self {
        let capacity = capacity.min(distinct as u64) as usize;
        Self {
            capacity,
            at: vec![NONE; distinct as usize],
            heap: Vec::with_capacity(capacity),
            evictions: 0,
        }
    }

    /// Simulates one access; true on a hit.
    #[inline]
    pub fn access(&mut self, f: &Future) -> bool {
        let at = self.at[f.id as usize];
        if at != NONE {
            // The old key was this very access (the earliest next use there is), so the new
            // one is larger: it can only move up.
            self.heap[at as usize].0 = f.next;
            self.sift_up(at as usize);
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        if self.heap.len() == self.capacity {
            let (_, victim) = self.heap[0];
            self.at[victim as usize] = NONE;
            let last = self.heap.pop().expect("full heap");
            if !self.heap.is_empty() {
                self.heap[0] = last;
                self.at[last.1 as usize] = 0;
                self.sift_down(0);
            }
            self.evictions += 1;
        }
        self.heap.push((f.next, f.id));
        let i = self.heap.len() - 1;
        self.at[f.id as usize] = i as u32;
        self.sift_up(i);
        false
    }

    /// Lines evicted so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Lines resident.
    pub fn resident(&self) -> u64 {
        self.heap.len() as u64
    }

    /// Whether line `id` is resident.
    pub fn contains(&self, id: u32) -> bool {
        self.at[id as usize] != NONE
    }

    /// The resident line used furthest in the future and that use ([`crate::NEVER`] for never), when
    /// the cache holds any line.
    pub fn furthest(&self) -> Option<(u32, u64)> {
        self.heap.first().map(|&(n, id)| (id, n))
    }

    /// Bytes of the structures (the figure the memory measurement reports).
    pub fn memory_bytes(&self) -> usize {
        self.at.capacity() * 4 + self.heap.capacity() * std::mem::size_of::<(u64, u32)>()
    }

    fn sift_up(&mut self, mut i: usize) {
        let item = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].0 >= item.0 {
                break;
            }
            self.heap[i] = self.heap[parent];
            self.at[self.heap[i].1 as usize] = i as u32;
            i = parent;
        }
        self.heap[i] = item;
        self.at[item.1 as usize] = i as u32;
    }

    fn sift_down(&mut self, mut i: usize) {
        let item = self.heap[i];
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.heap[r].0 > self.heap[l].0 {
                r
            } else {
                l
            };
            if self.heap[c].0 <= item.0 {
                break;
            }
            self.heap[i] = self.heap[c];
            self.at[self.heap[i].1 as usize] = i as u32;
            i = c;
        }
        self.heap[i] = item;
        self.at[item.1 as usize] = i as u32;
    }
}

/// Belady's miss counts at each of `sizes` (lines), one MIN cache per size side by side in one
/// pass over `index`: O(log c) per access and size, memory the caches' plus 4 bytes per distinct
/// line and size. Exact at the sizes given; [`crate::opt_curve`] gives every size at once, at a
/// cost that depends on the trace.
pub fn opt_misses_at(
    index: &crate::FutureIndex,
    sizes: &[u64],
) -> Result<Vec<u64>, crate::OptimalError> {
    let mut caches: Vec<Belady> = sizes
        .iter()
        .map(|&c| Belady::new(c, index.distinct()))
        .collect();
    let mut misses = vec![0u64; sizes.len()];
    let mut r = index.reader()?;
    while let Some(f) = r.next_future()? {
        for (b, m) in caches.iter_mut().zip(misses.iter_mut()) {
            *m += !b.access(&f) as u64;
        }
    }
    Ok(misses)
}
