//! Volume keys (host+disk, LUN, device id, major:minor, file name) mapped to dense ids.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use tiercache_core::{VolumeId, MAX_VOLUMES};

/// Dense volume ids and the original key of each, in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub struct VolumeMap {
    names: Vec<String>,
    ids: FxHashMap<Vec<u8>, u32>,
}

impl From<Vec<String>> for VolumeMap {
    fn from(names: Vec<String>) -> Self {
        let mut map = VolumeMap::new();
        for n in names {
            // Duplicate names in a serialized map keep their first id; later copies are dropped.
            let _ = map.intern(n.as_bytes());
        }
        map
    }
}

impl From<VolumeMap> for Vec<String> {
    fn from(map: VolumeMap) -> Self {
        map.names
    }
}

impl VolumeMap {
    /// Empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Id of `key`, assigning the next dense id on first sight. `None` once [`MAX_VOLUMES`]
    /// volumes exist and `key` is new.
    pub fn intern(&mut self, key: &[u8]) -> Option<VolumeId> {
        if let Some(&id) = self.ids.get(key) {
            return Some(VolumeId(id));
        }
        let id = self.names.len() as u32;
        if id >= MAX_VOLUMES {
            return None;
        }
        self.names.push(String::from_utf8_lossy(key).into_owned());
        self.ids.insert(key.to_vec(), id);
        Some(VolumeId(id))
    }

    /// Id of an already known key, as bytes.
    pub(crate) fn id_of(&self, key: &[u8]) -> Option<VolumeId> {
        self.ids.get(key).map(|&id| VolumeId(id))
    }

    /// Id of an already known key.
    pub fn get(&self, key: &str) -> Option<VolumeId> {
        self.id_of(key.as_bytes())
    }

    /// Original key of volume `id`.
    pub fn name(&self, id: VolumeId) -> Option<&str> {
        self.names.get(id.0 as usize).map(String::as_str)
    }

    /// Number of volumes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no volume is known.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Keys in id order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_ids_in_order_of_appearance() {
        let mut m = VolumeMap::new();
        assert_eq!(m.intern(b"hm_0"), Some(VolumeId(0)));
        assert_eq!(m.intern(b"web_1"), Some(VolumeId(1)));
        assert_eq!(m.intern(b"hm_0"), Some(VolumeId(0)));
        assert_eq!(m.len(), 2);
        assert_eq!(m.name(VolumeId(1)), Some("web_1"));
        assert_eq!(m.get("web_1"), Some(VolumeId(1)));
        assert_eq!(m.name(VolumeId(2)), None);
    }

    #[test]
    fn limit_enforced() {
        let mut m = VolumeMap::new();
        for i in 0..MAX_VOLUMES {
            assert!(m.intern(i.to_string().as_bytes()).is_some());
        }
        assert_eq!(m.intern(b"one-too-many"), None);
        assert_eq!(m.intern(b"7"), Some(VolumeId(7)));
    }

    #[test]
    fn serde_round_trip() {
        let mut m = VolumeMap::new();
        m.intern(b"a");
        m.intern(b"b");
        let s = serde_json::to_string(&m).unwrap();
        assert_eq!(s, r#"["a","b"]"#);
        let back: VolumeMap = serde_json::from_str(&s).unwrap();
        assert_eq!(back, m);
    }
}
