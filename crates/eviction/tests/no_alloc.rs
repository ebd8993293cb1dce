//! After construction the policies do not allocate: hits, inserts, evictions and removals
//! (including ARC's and S3-FIFO's ghost bookkeeping) run on preallocated arrays, and so do
//! capacity changes within the capacity given at build and cold inserts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use tiercache_core::LineKey;
use tiercache_eviction::{build, EvictionKind, Slot, NO_INCOMING};

/// Counts the allocations of the threads that asked for it: the test's own. Counting every
/// thread made the test fail on a loaded machine, where the harness's thread allocates to say
/// a test has run for over 60 seconds.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set on the thread whose allocations count (a const initialiser, so reading it never
    /// allocates).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call unchanged to the system allocator; the counter has no effect
// on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_operations_do_not_allocate() {
    const CAPACITY: usize = 1000;
    const KEYS: u64 = 5000;
    COUNTED.with(|c| c.set(true));
    let probe = ALLOCATIONS.load(Ordering::Relaxed);
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert!(
        ALLOCATIONS.load(Ordering::Relaxed) > probe,
        "the counter sees this thread's allocations"
    );
    for kind in EvictionKind::ALL {
        let mut policy = build(kind, CAPACITY, CAPACITY);
        // Core stand-in on plain arrays (slot → key, key → slot) so the loop itself does not
        // allocate either.
        let mut key_of = vec![u64::MAX; CAPACITY];
        let mut slot_of = vec![u32::MAX; KEYS as usize];
        let mut free: Vec<Slot> = (0..CAPACITY as Slot).collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for i in 0..200_000u64 {
            // xorshift; half the accesses go to a hot tenth of the keys.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = if i % 2 == 0 {
                x % (KEYS / 10)
            } else {
                x % KEYS
            };
            let pinned = |s: Slot| (s as u64 + i).is_multiple_of(97);
            if i % 20_000 == 10_000 {
                // Shrink to half (the caller evicts the excess), later grow back.
                let capacity = if policy.capacity() == CAPACITY {
                    CAPACITY / 2
                } else {
                    CAPACITY
                };
                policy.set_capacity(capacity);
                while policy.len() > capacity {
                    let Some(v) = policy.evict(NO_INCOMING, &pinned) else {
                        break;
                    };
                    slot_of[key_of[v as usize] as usize] = u32::MAX;
                    free.push(v);
                }
            }
            match slot_of[key as usize] {
                u32::MAX => {
                    if policy.len() >= policy.capacity() {
                        let Some(v) = policy.evict(LineKey(key), &pinned) else {
                            continue;
                        };
                        slot_of[key_of[v as usize] as usize] = u32::MAX;
                        free.push(v);
                    }
                    let s = free.pop().unwrap();
                    key_of[s as usize] = key;
                    slot_of[key as usize] = s;
                    if i.is_multiple_of(7) {
                        policy.insert_cold(s, LineKey(key));
                    } else {
                        policy.insert(s, LineKey(key));
                    }
                }
                s if i.is_multiple_of(50) => {
                    policy.remove(s);
                    slot_of[key as usize] = u32::MAX;
                    free.push(s);
                }
                s => policy.hit(s),
            }
        }
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(allocations, 0, "{kind} allocated {allocations} times");
        assert_eq!(policy.len(), CAPACITY - free.len());
    }
}
