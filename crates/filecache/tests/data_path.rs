//! The data path of a mount (no FUSE) against a byte vector, for all four variants with a cache
//! far smaller than the file: every read agrees, and after a flush the store equals the model.

use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use tiercache_filecache::{MountConfig, State, Variant};

/// The data path alone (no FUSE) against a byte vector, all variants, tiny cache.
#[test]
fn data_path_matches_a_byte_vector_model() {
    for variant in Variant::ALL {
        for seed in 0..4u64 {
            let dir = tempfile::tempdir().unwrap();
            let store = dir.path().join("store");
            std::fs::create_dir(&store).unwrap();
            std::fs::write(store.join("f"), b"").unwrap();
            let mut st = State::open(MountConfig::new(
                store.clone(),
                dir.path().join("cache"),
                6,
                512,
                variant,
            ))
            .unwrap();
            let md = std::fs::metadata(store.join("f")).unwrap();
            let id = st.remember(PathBuf::from("f"), &md).unwrap();
            let mut model: Vec<u8> = Vec::new();
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            for step in 0..400 {
                match rng.gen_range(0..6) {
                    0..=2 => {
                        let off = rng.gen_range(0..8000usize);
                        let len = rng.gen_range(1..3000usize);
                        let b: u8 = rng.gen();
                        let data: Vec<u8> = (0..len).map(|i| b.wrapping_add(i as u8)).collect();
                        st.write(id, off as u64, &data).unwrap();
                        if model.len() < off + len {
                            model.resize(off + len, 0);
                        }
                        model[off..off + len].copy_from_slice(&data);
                    }
                    3 => {
                        let len = rng.gen_range(0..9000usize);
                        st.truncate(id, len as u64).unwrap();
                        model.resize(len, 0);
                    }
                    _ => {
                        let off = rng.gen_range(0..9000usize);
                        let len = rng.gen_range(1..5000u32);
                        let got = st.read(id, off as u64, len).unwrap();
                        let end = (off + len as usize).min(model.len());
                        let want = if off >= model.len() {
                            &[][..]
                        } else {
                            &model[off..end]
                        };
                        if got != want {
                            let first = (0..got.len()).find(|&i| got[i] != want[i]);
                            let f = first.unwrap();
                            let stored = std::fs::read(store.join("f")).unwrap();
                            let at = off + f;
                            panic!("{variant} seed {seed} step {step}: read {off}+{len}: first diff {first:?} lens {} {}: got {:?} want {:?} store {:?} (store len {})", got.len(), want.len(), &got[f..f+8], &want[f..f+8], stored.get(at..at+8), stored.len());
                        }
                    }
                }
            }
            st.flush_all().unwrap();
            let stored = std::fs::read(store.join("f")).unwrap();
            assert!(stored == model, "{variant} seed {seed}: store after flush");
        }
    }
}
