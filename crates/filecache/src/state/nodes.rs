//! The node table's store side (docs/design.md §4.9): store paths, directory listings, the
//! nodes the mount remembers, and the store files it keeps open for them (and their handles).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Node, State, OPEN_FILES_KEPT, ROOT};

impl State {
    /// The absolute store path of a relative one.
    pub fn store_path(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.cfg.store.clone()
        } else {
            self.cfg.store.join(rel)
        }
    }

    /// The names of directory `dir`, listed from the store (one operation) on first use;
    /// `None` if it cannot be listed.
    pub fn dir_names(&mut self, dir: u64) -> Option<&mut HashMap<std::ffi::OsString, Option<u64>>> {
        if !self.dirs.contains_key(&dir) {
            let rel = self.nodes.get(&dir)?.path.clone();
            let path = self.store_path(&rel);
            self.meta_op();
            let mut names = HashMap::new();
            for entry in std::fs::read_dir(path).ok()? {
                names.insert(entry.ok()?.file_name(), None);
            }
            self.dirs.insert(dir, names);
        }
        self.dirs.get_mut(&dir)
    }

    /// Records that `name` in `dir` now names `id` (`None`: exists, id not known yet).
    pub fn name_added(&mut self, dir: u64, name: &std::ffi::OsStr, id: Option<u64>) {
        if let Some(names) = self.dirs.get_mut(&dir) {
            names.insert(name.to_os_string(), id);
        }
    }

    /// Records that `name` is gone from `dir`.
    pub fn name_removed(&mut self, dir: u64, name: &std::ffi::OsStr) {
        if let Some(names) = self.dirs.get_mut(&dir) {
            names.remove(name);
        }
    }

    /// FUSE id of a store inode number.
    pub fn node_id(&self, ino: u64) -> u64 {
        if ino == self.root_ino {
            ROOT
        } else {
            ino
        }
    }

    /// Registers (or re-paths) a node seen at `rel` with store metadata `md`; returns its id.
    /// A node on another file system than the store's root (a mount inside the store) is
    /// refused with EXDEV: its inode number could be another file's.
    pub fn remember(&mut self, rel: PathBuf, md: &std::fs::Metadata) -> io::Result<u64> {
        if md.dev() != self.root_dev {
            if self.stats.cross_device_refused == 0 {
                eprintln!(
                    "tiercache mount: {} is on another file system than the store; it is not \
                     served (files are known by inode number, unique within one file system)",
                    self.store_path(&rel).display()
                );
            }
            self.stats.cross_device_refused += 1;
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        let id = self.node_id(md.ino());
        if !self.warm.is_empty() && !self.nodes.contains_key(&id) {
            self.check_restored(id, md)?;
        }
        match self.nodes.get_mut(&id) {
            Some(node) => {
                if id != ROOT {
                    node.path = rel;
                }
            }
            None => {
                let data_gen = self.next_gen();
                self.nodes.insert(
                    id,
                    Node {
                        path: rel,
                        regular: md.is_file(),
                        size: md.len(),
                        unlinked: false,
                        handles: 0,
                        file: None,
                        attr: None,
                        io: Arc::default(),
                        data_gen,
                    },
                );
                self.met_new(id, md);
                return Ok(id);
            }
        }
        self.met_store(id, md);
        Ok(id)
    }

    /// The store file of node `id`, opened on first use.
    pub(super) fn store_file(&mut self, id: u64) -> io::Result<Arc<File>> {
        if let Some(f) = self.nodes.get(&id).and_then(|n| n.file.clone()) {
            return Ok(f);
        }
        if self.open_files >= OPEN_FILES_KEPT {
            for node in self.nodes.values_mut() {
                if node.handles == 0 && !node.unlinked && node.file.take().is_some() {
                    self.open_files -= 1;
                }
            }
        }
        let node = self
            .nodes
            .get(&id)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let path = self.store_path(&node.path);
        let file = Arc::new(OpenOptions::new().read(true).write(true).open(path)?);
        self.nodes.get_mut(&id).expect("checked").file = Some(file.clone());
        self.open_files += 1;
        Ok(file)
    }

    /// Writes `data` at byte `at` of node `id`'s store file (one store data operation).
    pub(super) fn store_write(&mut self, id: u64, data: &[u8], at: u64) -> io::Result<()> {
        let f = self.store_file(id)?;
        self.before_own_change(id);
        self.cfg.latency.data_op();
        f.write_all_at(data, at)?;
        self.stats.store_writes += 1;
        self.stats.store_bytes_written += data.len() as u64;
        self.own_change(id);
        #[cfg(test)]
        if let Some(node) = self.nodes.get(&id) {
            crate::powerloss::write(&self.store_path(&node.path), at, data);
        }
        Ok(())
    }

    /// Makes node `id`'s store file durable (one fdatasync).
    pub(super) fn sync_store(&mut self, id: u64) -> io::Result<()> {
        let f = self.store_file(id)?;
        f.sync_data()?;
        self.stats.store_syncs += 1;
        #[cfg(test)]
        if let Some(node) = self.nodes.get(&id) {
            crate::powerloss::sync(&self.store_path(&node.path));
        }
        self.unsynced_store.remove(&id);
        Ok(())
    }

    /// Keeps `file` (just created in the store) as node `id`'s open store file, so the open
    /// that follows a create costs the store nothing.
    pub fn adopt_file(&mut self, id: u64, file: File) {
        if let Some(node) = self.nodes.get_mut(&id) {
            if node.file.is_none() {
                node.file = Some(Arc::new(file));
                self.open_files += 1;
            }
        }
    }

    /// An open of node `id`: keeps its store file open while handles exist.
    pub fn open_handle(&mut self, id: u64) -> io::Result<()> {
        self.store_file(id)?;
        if let Some(node) = self.nodes.get_mut(&id) {
            node.handles += 1;
        }
        Ok(())
    }

    /// A release of node `id`.
    pub fn release_handle(&mut self, id: u64) {
        let drop_node = match self.nodes.get_mut(&id) {
            Some(node) => {
                node.handles = node.handles.saturating_sub(1);
                node.handles == 0 && node.unlinked
            }
            None => false,
        };
        if drop_node {
            if let Some(node) = self.nodes.remove(&id) {
                if node.file.is_some() {
                    self.open_files -= 1;
                }
            }
        }
    }

    /// Re-paths every known node under `from` to lie under `to` (a directory rename).
    pub fn rename_paths(&mut self, from: &Path, to: &Path) {
        for node in self.nodes.values_mut() {
            if let Ok(rest) = node.path.strip_prefix(from) {
                node.path = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        }
    }
}
