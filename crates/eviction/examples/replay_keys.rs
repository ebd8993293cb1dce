//! Replays a list of line keys (one unsigned integer per line) through one policy and prints
//! the miss count, for comparing with other simulators such as libCacheSim.
//!
//! `cargo run --release -p tiercache-eviction --example replay_keys -- KEYS_FILE POLICY SIZE[,SIZE...]`

use std::collections::HashMap;
use std::process::ExitCode;
use tiercache_core::LineKey;
use tiercache_eviction::{build, EvictionKind, Slot};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, policy, sizes] = args.as_slice() else {
        eprintln!("usage: replay_keys KEYS_FILE POLICY SIZE[,SIZE...]");
        return ExitCode::FAILURE;
    };
    let kind: EvictionKind = match policy.parse() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        match line.trim().parse::<u64>() {
            Ok(k) => keys.push(k),
            Err(e) => {
                eprintln!("{path}:{}: {e}", n + 1);
                return ExitCode::FAILURE;
            }
        }
    }
    for size in sizes.split(',') {
        let Ok(capacity) = size.parse::<usize>() else {
            eprintln!("bad size {size:?}");
            return ExitCode::FAILURE;
        };
        let mut policy = build(kind, capacity, capacity);
        let mut slot_of: HashMap<u64, Slot> = HashMap::with_capacity(capacity);
        let mut key_of = vec![0u64; capacity];
        let mut misses = 0u64;
        for &key in &keys {
            if let Some(&s) = slot_of.get(&key) {
                policy.hit(s);
                continue;
            }
            misses += 1;
            let s = if slot_of.len() < capacity {
                slot_of.len() as Slot
            } else {
                let v = policy
                    .evict(LineKey(key), &|_| false)
                    .expect("nothing is pinned");
                slot_of.remove(&key_of[v as usize]);
                v
            };
            slot_of.insert(key, s);
            key_of[s as usize] = key;
            policy.insert(s, LineKey(key));
        }
        println!("{kind} {capacity} {misses}");
    }
    ExitCode::SUCCESS
}
