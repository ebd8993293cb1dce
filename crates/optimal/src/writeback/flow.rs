//! Weighted interval selection on `k` machines, exactly, as a min-cost flow (Arkin and
//! Silverberg 1987; FOO, Berger et al. 2018).
//!
//! Choose intervals `[start, end)`, at most `k` covering any point, to maximise their total
//! reward. The network: one node per distinct endpoint in order, a *central* arc from each to
//! the next (capacity `k`, cost 0) and an arc per interval from its start to its end
//! (capacity 1, cost −reward); `k` units go from the first node to the last. The flow across
//! any point is `k` = central flow + intervals covering it, so the intervals carrying flow are
//! a feasible choice and any feasible choice is such a flow. The constraint matrix (consecutive
//! ones) is totally unimodular, so the integral min-cost flow is the optimum of the LP too.
//!
//! Solved by successive shortest paths: potentials from one pass over the DAG (every arc goes
//! forward, costs may be negative), then rounds of Dijkstra on reduced costs, each followed by
//! as many augmenting paths of zero reduced cost as a depth-first search finds (all shortest;
//! ties are common, equal weights giving equal rewards), until the shortest path costs nothing
//! (the all-central path always remains) or `k` units flow. A round is O((m + n) log m) over m
//! nodes and n intervals, and there are at most `k' = min(k, most intervals covering one
//! point)` rounds (each augments at least one unit); `k' = max overlap` means every interval
//! fits and no round is run. Memory O(m + n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An interval `[start, end)` worth `reward` (positive) if chosen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Interval {
    pub start: u64,
    pub end: u64,
    pub reward: f64,
}

/// Most intervals covering one point (half-open: one ending where another starts does not
/// overlap it).
pub(crate) fn max_overlap(intervals: &[Interval]) -> u64 {
    // Ends sort before starts at the same point (−1 before +1).
    let mut events: Vec<(u64, i8)> = Vec::with_capacity(2 * intervals.len());
    for iv in intervals {
        events.push((iv.start, 1));
        events.push((iv.end, -1));
    }
    events.sort_unstable();
    let (mut now, mut most) = (0i64, 0i64);
    for (_, d) in events {
        now += d as i64;
        most = most.max(now);
    }
    most as u64
}

const FREE: u8 = 0;
const ON_PATH: u8 = 1;
const DEAD: u8 = 2;

/// The largest total reward of intervals with at most `k` covering any point.
pub(crate) fn max_reward(intervals: &[Interval], k: u64) -> f64 {
    if intervals.is_empty() || k == 0 {
        return 0.0;
    }
    let over = max_overlap(intervals);
    if over <= k {
        return intervals.iter().map(|iv| iv.reward).sum();
    }
    let k = k as u32; // below the overlap, itself below the interval count
    let mut points: Vec<u64> = intervals.iter().flat_map(|iv| [iv.start, iv.end]).collect();
    points.sort_unstable();
    points.dedup();
    let m = points.len();
    let node = |p: u64| points.binary_search(&p).expect("an endpoint") as u32;

    // Arc 2i is forward, 2i + 1 its residual reverse.
    let mut to: Vec<u32> = Vec::with_capacity(2 * (m + intervals.len()));
    let mut cap: Vec<u32> = Vec::with_capacity(to.capacity());
    let mut cost: Vec<f64> = Vec::with_capacity(to.capacity());
    let mut from: Vec<u32> = Vec::with_capacity(to.capacity());
    let mut add = |u: u32, v: u32, c: u32, w: f64| {
        to.extend([v, u]);
        from.extend([u, v]);
        cap.extend([c, 0]);
        cost.extend([w, -w]);
    };
    for i in 0..m as u32 - 1 {
        add(i, i + 1, k, 0.0);
    }
    let first_interval_arc = 2 * (m - 1);
    for iv in intervals {
        add(node(iv.start), node(iv.end), 1, -iv.reward);
    }
    // Adjacency, compressed: the arcs leaving each node (forward and reverse).
    let mut head = vec![0u32; m + 1];
    for &u in &from {
        head[u as usize + 1] += 1;
    }
    for i in 0..m {
        head[i + 1] += head[i];
    }
    let mut fill = head.clone();
    let mut adj = vec![0u32; from.len()];
    for (a, &u) in from.iter().enumerate() {
        adj[fill[u as usize] as usize] = a as u32;
        fill[u as usize] += 1;
    }

    // Potentials: shortest distances over the forward arcs, in node order (a DAG).
    let mut pot = vec![f64::INFINITY; m];
    pot[0] = 0.0;
    for u in 0..m {
        for &a in &adj[head[u] as usize..head[u + 1] as usize] {
            if a % 2 == 0 {
                let v = to[a as usize] as usize;
                pot[v] = pot[v].min(pot[u] + cost[a as usize]);
            }
        }
    }

    let scale = intervals.iter().map(|iv| iv.reward).fold(0.0, f64::max);
    let sink = m - 1;
    let mut dist = vec![f64::INFINITY; m];
    let mut via = vec![u32::MAX; m];
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut flow = 0u32;
    let (mut next_arc, mut state, mut path) = (vec![0u32; m], vec![FREE; m], Vec::new());
    while flow < k {
        dist.fill(f64::INFINITY);
        via.fill(u32::MAX);
        dist[0] = 0.0;
        heap.push(Reverse((0f64.to_bits(), 0)));
        while let Some(Reverse((d, u))) = heap.pop() {
            let u = u as usize;
            let d = f64::from_bits(d);
            if d > dist[u] {
                continue;
            }
            for &a in &adj[head[u] as usize..head[u + 1] as usize] {
                let a = a as usize;
                if cap[a] == 0 {
                    continue;
                }
                let v = to[a] as usize;
                // Non-negative but for rounding.
                let rc = (cost[a] + pot[u] - pot[v]).max(0.0);
                let nd = d + rc;
                if nd < dist[v] {
                    dist[v] = nd;
                    via[v] = a as u32;
                    // Non-negative floats order as their bits.
                    heap.push(Reverse((nd.to_bits(), v as u32)));
                }
            }
        }
        for (p, d) in pot.iter_mut().zip(&dist) {
            // Every node is reachable: a central arc is never full before k units flow.
            *p += d;
        }
        // The path's true cost; the all-central one costs 0, so it is never positive.
        if pot[sink] - pot[0] >= -1e-12 * scale {
            break;
        }
        // Every path of arcs at zero reduced cost is a shortest one, and stays one after
        // another is augmented (reverse arcs come in at zero): augment as many as a depth-first
        // search finds (each a simple path; a node none leads on from is dead for the round).
        let tol = 1e-12 * (scale + pot[sink].abs());
        next_arc.copy_from_slice(&head[..m]);
        state.fill(FREE);
        path.clear();
        let mut u = 0usize;
        state[0] = ON_PATH;
        while flow < k {
            if u == sink {
                let push = path
                    .iter()
                    .map(|&a| cap[a as usize])
                    .fold(k - flow, u32::min);
                for &a in &path {
                    cap[a as usize] -= push;
                    cap[a as usize ^ 1] += push;
                    state[to[a as usize] as usize] = FREE;
                }
                flow += push;
                path.clear();
                u = 0;
                continue;
            }
            let end = head[u + 1];
            let mut advanced = false;
            while next_arc[u] < end {
                let a = adj[next_arc[u] as usize] as usize;
                let v = to[a] as usize;
                if cap[a] > 0 && state[v] == FREE && cost[a] + pot[u] - pot[v] <= tol {
                    path.push(a as u32);
                    state[v] = ON_PATH;
                    u = v;
                    advanced = true;
                    break;
                }
                next_arc[u] += 1;
            }
            if !advanced {
                state[u] = DEAD;
                let Some(a) = path.pop() else { break };
                u = from[a as usize] as usize;
                next_arc[u] += 1;
            }
        }
    }
    intervals
        .iter()
        .enumerate()
        .filter(|&(i, _)| cap[first_interval_arc + 2 * i] == 0)
        .map(|(_, iv)| iv.reward)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subset that fits, tried.
    fn brute(ivs: &[Interval], k: u64) -> f64 {
        let mut best = 0.0f64;
        for mask in 0u32..1 << ivs.len() {
            let chosen: Vec<Interval> = (0..ivs.len())
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| ivs[i])
                .collect();
            if max_overlap(&chosen) <= k {
                best = best.max(chosen.iter().map(|iv| iv.reward).sum());
            }
        }
        best
    }

    #[test]
    fn equals_trying_every_subset() {
        // A small deterministic generator (no time, no randomness source).
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..300 {
            let n = (next() % 11) as usize;
            let ivs: Vec<Interval> = (0..n)
                .map(|_| {
                    let start = next() % 12;
                    Interval {
                        start,
                        end: start + 1 + next() % 6,
                        reward: (1 + next() % 9) as f64 * 0.5,
                    }
                })
                .collect();
            for k in 0..4 {
                let got = max_reward(&ivs, k);
                let want = brute(&ivs, k);
                assert!((got - want).abs() < 1e-9, "{ivs:?} k={k}: {got} != {want}");
            }
        }
    }
}
