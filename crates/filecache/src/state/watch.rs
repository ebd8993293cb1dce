//! Changes to the store not made by the mount (docs/design.md §14 "Changes to the store"):
//! the state's side of `--watch-store`. Every store directory the mount meets is watched
//! (inotify); an event is checked against what the mount itself did:
//! - a name: the mount's table of the directory's names ([`State::dirs`]) against the store
//!   (`lstat`); the mount's own namespace operations update the table under the lock before
//!   the watcher can look, so only a foreign create, remove or rename disagrees;
//! - a file's content: the store file's (size, mtime, ctime) against its *stamp*, what the
//!   mount recorded after its own last change of the file (a write-back or write-through, a
//!   truncate, a create, a setattr, a rename) or when it last met the file; the mount's own
//!   changes re-stamp under the lock, so only a foreign change differs. No timing is used.
//!
//! A foreign change of a file drops its clean cached blocks (a new content version, so no
//! kept image of it is taken again) and keeps its dirty ones: the mount's acknowledged writes
//! win, and the conflict is counted and said once per file. A name that disagrees is put
//! right in the table. What the kernel must forget is queued as [`Invalidation`]s, sent by
//! the watcher thread outside the mount's lock (`fs/watch.rs`).

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use super::State;
use crate::core::BlockKey;
use crate::inotify::{Event, Inotify};

/// What the kernel must forget after a change to the store (sent through fuser's
/// `Notifier`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidation {
    /// A name in a directory was created, removed or now names another file
    /// (`inval_entry`): a negative or stale entry must not hide the store's.
    Entry {
        /// The directory's node id.
        parent: u64,
        /// The name.
        name: OsString,
    },
    /// A file's content changed: its attributes and its pages (`inval_inode`, whole range).
    Inode(u64),
    /// A directory's attributes (times, link count) changed with its entries.
    Attributes(u64),
}

/// What a store file was when the mount last changed or met it: another value means
/// someone else changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Stamp {
    fn of(md: &std::fs::Metadata) -> Stamp {
        Stamp {
            size: md.len(),
            mtime_ns: md.mtime() * 1_000_000_000 + md.mtime_nsec(),
            ctime_ns: md.ctime() * 1_000_000_000 + md.ctime_nsec(),
        }
    }
}

/// The watch's state, in [`State`] (empty and inert unless the mount watches its store).
#[derive(Debug, Default)]
pub(super) struct Watch {
    inotify: Option<Arc<Inotify>>,
    /// Watch descriptor to the directory's node id.
    dirs: HashMap<i32, u64>,
    /// Stamps of the regular files the mount knows.
    stamps: HashMap<u64, Stamp>,
    /// Files whose conflict was said on stderr (once each).
    conflicted: HashSet<u64>,
    /// Invalidations to send, and files whose content changed (for their images).
    pending: Vec<Invalidation>,
    changed: Vec<u64>,
    /// Names whose file had an uncached write in flight when checked: checked again at the
    /// watcher's next wake.
    deferred: Vec<(u64, OsString)>,
    /// Files someone else changed just before a change of the mount's own, found before it
    /// (the stamp after it would hide theirs): handled as changed at the watcher's next wake.
    forced: Vec<u64>,
}

impl State {
    /// Watches the store from now on with `inotify`: its root at once, every directory as
    /// the mount meets it.
    pub fn watch_store(&mut self, inotify: Arc<Inotify>) {
        self.watch.inotify = Some(inotify);
        self.watch_dir(super::ROOT);
    }

    /// Whether the store is watched.
    pub fn watching(&self) -> bool {
        self.watch.inotify.is_some()
    }

    /// Adds the watch of directory node `id`. The per-user watch limit (or another error) is
    /// said once and counted: the mount goes on, without seeing changes in that directory.
    pub(super) fn watch_dir(&mut self, id: u64) {
        let Some(inotify) = self.watch.inotify.clone() else {
            return;
        };
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        let path = self.store_path(&node.path.clone());
        match inotify.watch_dir(&path) {
            Ok(wd) => {
                self.watch.dirs.insert(wd, id);
            }
            Err(e) => {
                if self.stats.store_dirs_unwatched == 0 {
                    let hint = if e.raw_os_error() == Some(libc::ENOSPC) {
                        " (the inotify watch limit, fs.inotify.max_user_watches)"
                    } else {
                        ""
                    };
                    eprintln!(
                        "tiercache mount: {} cannot be watched{hint}: {e}; changes made to the \
                         store there behind the mount are not seen (counted in \
                         store_dirs_unwatched)",
                        path.display()
                    );
                }
                self.stats.store_dirs_unwatched += 1;
            }
        }
    }

    /// The mount met node `id` for the first time with metadata `md`: a directory is watched,
    /// a file stamped.
    pub(super) fn met_new(&mut self, id: u64, md: &std::fs::Metadata) {
        if !self.watching() {
            return;
        }
        if md.is_dir() {
            self.watch_dir(id);
        } else if md.is_file() {
            self.watch.stamps.insert(id, Stamp::of(md));
        }
    }

    /// The mount is about to change store file `id` itself: if the file differs from its
    /// stamp already, someone else changed it since, and the stamp the mount takes after its
    /// own change would hide that; it is handled as changed at the watcher's next wake (not
    /// here: a write-back calls this in the middle of executing a plan).
    pub(crate) fn before_own_change(&mut self, id: u64) {
        let Some(&old) = self.watch.stamps.get(&id) else {
            return;
        };
        if self.store_stamp(id).is_some_and(|now| now != old) && !self.watch.forced.contains(&id) {
            self.watch.forced.push(id);
        }
    }

    /// The store file's stamp now: from its open file, else by path.
    fn store_stamp(&self, id: u64) -> Option<Stamp> {
        let node = self.nodes.get(&id)?;
        let md = match &node.file {
            Some(f) => f.metadata(),
            None => std::fs::symlink_metadata(self.store_path(&node.path)),
        };
        md.ok().filter(|md| md.is_file()).map(|md| Stamp::of(&md))
    }

    /// The mount changed store file `id` itself (a write, truncate, setattr, rename): its
    /// stamp is taken again, under the lock, so the watcher does not take the change for
    /// someone else's.
    pub(crate) fn own_change(&mut self, id: u64) {
        if !self.watching() {
            return;
        }
        match self.store_stamp(id) {
            Some(stamp) => self.watch.stamps.insert(id, stamp),
            None => self.watch.stamps.remove(&id),
        };
    }

    /// [`State::own_change`] with the metadata at hand (a create's).
    pub(crate) fn own_change_to(&mut self, id: u64, md: &std::fs::Metadata) {
        if self.watching() && md.is_file() {
            self.watch.stamps.insert(id, Stamp::of(md));
        }
    }

    /// The mount meets store file `id`'s metadata `md` (a lookup or getattr that asked the
    /// store, or the watcher): if it differs from the stamp, someone else changed the file.
    /// Returns whether it did.
    pub fn met_store(&mut self, id: u64, md: &std::fs::Metadata) -> bool {
        if !self.watching() || !md.is_file() || !self.nodes.get(&id).is_some_and(|n| n.regular) {
            return false;
        }
        let now = Stamp::of(md);
        match self.watch.stamps.insert(id, now) {
            Some(old) if old != now => {
                if let Err(e) = self.foreign_change(id, md) {
                    eprintln!("tiercache mount: dropping node {id}'s stale blocks failed: {e}");
                }
                true
            }
            _ => false,
        }
    }

    /// Store file `id` changed behind the mount: its clean blocks go (a new content version),
    /// its dirty ones stay (a conflict, counted), and the kernel forgets its attributes and
    /// pages.
    fn foreign_change(&mut self, id: u64, md: &std::fs::Metadata) -> io::Result<()> {
        self.stats.store_changes_seen += 1;
        let dirty = self.core.dirty_blocks_of(id) > 0 || self.stranded.keys().any(|k| k.file == id);
        let mut ops = Vec::new();
        for block in self.core.cached_blocks_of(id) {
            let key = BlockKey::new(id, block);
            if self.core.lookup(key).is_some_and(|(_, dirty)| !dirty) {
                self.core.discard(key, &mut ops);
            }
        }
        self.core.content_changed(id);
        // Store data read off the lock before this change (staged.rs) may be the old bytes:
        // a new generation makes the request that read it read again.
        State::content_changed(self, id);
        if let Some(node) = self.nodes.get_mut(&id) {
            node.attr = None;
            // The store's size, unless the mount's own unwritten data reaches further.
            node.size = if dirty {
                node.size.max(md.len())
            } else {
                md.len()
            };
        }
        if dirty {
            self.store_conflict(id);
        }
        self.watch.pending.push(Invalidation::Inode(id));
        // With FUSE writeback caching the kernel trusts its own size of a file it has an
        // inode of, whatever the mount answers: its entry goes too, so that once no handle
        // holds the inode the next lookup makes a new one with the store's size.
        if let Some((parent, name)) = self.entry_of(id) {
            self.watch
                .pending
                .push(Invalidation::Entry { parent, name });
        }
        self.watch.changed.push(id);
        self.execute(&ops, 0, &mut [], None)
    }

    /// The directory and name node `id` is known by (a scan of the known nodes for its
    /// directory: foreign changes are rare).
    fn entry_of(&self, id: u64) -> Option<(u64, OsString)> {
        let path = &self.nodes.get(&id)?.path;
        let name = path.file_name()?.to_os_string();
        let parent = path.parent()?;
        if parent.as_os_str().is_empty() {
            return Some((super::ROOT, name));
        }
        self.nodes
            .iter()
            .find(|(_, n)| !n.regular && n.path == parent)
            .map(|(&dir, _)| (dir, name))
    }

    /// A foreign change met file `id` with writes of the mount's not yet in the store (dirty
    /// blocks, or an open passthrough image written): the mount's win. Counted each time,
    /// said once per file.
    pub fn store_conflict(&mut self, id: u64) {
        self.stats.store_conflicts += 1;
        if self.watch.conflicted.insert(id) {
            let path = self
                .nodes
                .get(&id)
                .map(|n| self.store_path(&n.path).display().to_string())
                .unwrap_or_else(|| format!("node {id}"));
            eprintln!(
                "tiercache mount: {path} was changed in the store while the mount held writes \
                 of it not yet written back; the mount's writes win where they fall"
            );
        }
    }

    /// The invalidations to send and the files whose content changed since the last call.
    pub fn take_store_changes(&mut self) -> (Vec<Invalidation>, Vec<u64>) {
        (
            std::mem::take(&mut self.watch.pending),
            std::mem::take(&mut self.watch.changed),
        )
    }

    /// Whether names wait to be checked again ([`State::store_events`] with no events
    /// checks them).
    pub fn store_checks_deferred(&self) -> bool {
        !self.watch.deferred.is_empty() || !self.watch.forced.is_empty()
    }

    /// Applies a batch of the watch's events (docs/design.md §14 "Changes to the store"),
    /// after the names deferred by the last batch.
    pub fn store_events(&mut self, events: &[Event]) {
        if events.iter().any(Event::overflowed) {
            self.stats.store_watch_overflows += 1;
            self.watch.deferred.clear();
            return self.rescan();
        }
        let mut from: HashMap<u32, (u64, OsString)> = HashMap::new();
        let mut moved = HashSet::new();
        let mut names: Vec<(u64, OsString)> = std::mem::take(&mut self.watch.deferred);
        let mut seen: HashSet<(u64, OsString)> = names.iter().cloned().collect();
        for e in events {
            if e.ignored() {
                self.watch.dirs.remove(&e.wd);
                continue;
            }
            let Some(&dir) = self.watch.dirs.get(&e.wd) else {
                continue;
            };
            if e.name.is_empty() {
                continue; // the directory itself: its parent's watch reports its name
            }
            if e.mask & libc::IN_MOVED_FROM != 0 {
                from.insert(e.cookie, (dir, e.name.clone()));
            }
            if e.mask & libc::IN_MOVED_TO != 0 {
                if let Some((fdir, fname)) = from.get(&e.cookie).cloned() {
                    if let Some(id) = self.foreign_move(fdir, &fname, dir, &e.name) {
                        moved.insert(id);
                    }
                }
            }
            if seen.insert((dir, e.name.clone())) {
                names.push((dir, e.name.clone()));
            }
        }
        for (dir, name) in names {
            self.check_name(dir, &name, &moved);
        }
        for id in std::mem::take(&mut self.watch.forced) {
            let md = self.nodes.get(&id).and_then(|n| match &n.file {
                Some(f) => f.metadata().ok(),
                None => std::fs::symlink_metadata(self.store_path(&n.path)).ok(),
            });
            if let Some(md) = md.filter(|md| md.is_file()) {
                self.watch.stamps.insert(id, Stamp::of(&md));
                if let Err(e) = self.foreign_change(id, &md) {
                    eprintln!("tiercache mount: dropping node {id}'s stale blocks failed: {e}");
                }
            }
        }
    }

    /// Events were lost: every name of every directory listed so far, and every file known
    /// in them, is checked against the store.
    fn rescan(&mut self) {
        let dirs: Vec<u64> = self.dirs.keys().copied().collect();
        for dir in dirs {
            let Some(node) = self.nodes.get(&dir) else {
                continue;
            };
            let known: HashSet<OsString> = self.dirs[&dir].keys().cloned().collect();
            let listed: HashSet<OsString> = std::fs::read_dir(self.store_path(&node.path.clone()))
                .map(|list| list.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            // Names gone from the store first: a file created after another was removed may
            // have the removed one's inode number, and checked before the removal it would
            // be taken for that file (a change of it, then its loss: two changes, not one).
            let gone = known.difference(&listed);
            for name in gone.chain(listed.iter()) {
                self.check_name(dir, name, &HashSet::new());
            }
        }
    }

    /// `from_dir/from_name` was renamed to `to_dir/to_name` in the store: a node the mount
    /// still knows at the old path (not its own rename, which re-pathed it already) follows.
    fn foreign_move(
        &mut self,
        from_dir: u64,
        from_name: &OsStr,
        to_dir: u64,
        to_name: &OsStr,
    ) -> Option<u64> {
        let from = self.nodes.get(&from_dir)?.path.join(from_name);
        let to = self.nodes.get(&to_dir)?.path.join(to_name);
        let md = std::fs::symlink_metadata(self.store_path(&to)).ok()?;
        let id = self.node_id(md.ino());
        if self.nodes.get(&id)?.path != from {
            return None;
        }
        self.rename_paths(&from, &to);
        Some(id)
    }

    /// Checks `name` in directory `dir` against the store: its entry in the mount's table,
    /// and the content of the file it names. `moved`: nodes renamed by the same batch (they
    /// lost no name).
    fn check_name(&mut self, dir: u64, name: &OsStr, moved: &HashSet<u64>) {
        let Some(dir_node) = self.nodes.get(&dir) else {
            return;
        };
        let rel = dir_node.path.join(name);
        let now = std::fs::symlink_metadata(self.store_path(&rel))
            .ok()
            .filter(|md| md.dev() == self.root_dev);
        let now_id = now.as_ref().map(|md| self.node_id(md.ino()));
        if let Some(names) = self.dirs.get(&dir) {
            let had = names.get(name).copied();
            let agree = match (had, now_id) {
                (None, None) | (Some(None), Some(_)) => true,
                (Some(Some(a)), Some(b)) => a == b,
                _ => false,
            };
            if !agree {
                self.stats.store_changes_seen += 1;
                match now_id {
                    Some(_) => self.name_added(dir, name, None),
                    None => self.name_removed(dir, name),
                }
                if let Some(Some(old)) = had {
                    if !moved.contains(&old) {
                        self.name_lost(old);
                    }
                }
                if let Some(node) = self.nodes.get_mut(&dir) {
                    node.attr = None;
                }
                self.watch.pending.push(Invalidation::Entry {
                    parent: dir,
                    name: name.to_os_string(),
                });
                self.watch.pending.push(Invalidation::Attributes(dir));
            }
        }
        if let (Some(md), Some(id)) = (now, now_id) {
            // An uncached write of the mount's in flight (it holds the file's I/O lock, shared,
            // until it has re-stamped the file, §4.9) is checked once it is done: this thread
            // must not wait for it under the mount's lock, which it waits for.
            let busy = self
                .nodes
                .get(&id)
                .is_some_and(|n| n.io.try_write().is_err());
            if busy {
                self.watch.deferred.push((dir, name.to_os_string()));
            } else {
                self.met_store(id, &md);
            }
        }
    }

    /// Node `id` lost a name behind the mount (removed, renamed away, replaced). A directory
    /// is forgotten (listed again if met again). A file another name still holds (its open
    /// store file's link count) keeps its blocks; one the store deleted loses them, dirty ones
    /// too (there is no file to write them to: a conflict, counted), as a delete by the mount
    /// would, and an open one is served from its open store file.
    fn name_lost(&mut self, id: u64) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        if !node.regular {
            if node.handles == 0 {
                self.nodes.remove(&id);
                self.dirs.remove(&id);
            }
            return;
        }
        let links = node
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|md| md.nlink());
        if links.is_some_and(|n| n > 0) {
            return;
        }
        if self.core.dirty_blocks_of(id) > 0 || self.stranded.keys().any(|k| k.file == id) {
            self.store_conflict(id);
        }
        if let Err(e) = self.delete_file_with(id, || Ok(())) {
            eprintln!("tiercache mount: dropping deleted node {id}'s blocks failed: {e}");
        }
        self.watch.stamps.remove(&id);
        self.watch.pending.push(Invalidation::Inode(id));
        self.watch.changed.push(id);
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
