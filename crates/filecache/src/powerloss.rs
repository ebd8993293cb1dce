//! Test support: a model of power loss. A `kill -9` keeps every write the process made (the
//! page cache has them); a power loss keeps what was synced and, of the writes made since a
//! file's last sync, any subset (the kernel writes dirty pages back when and in the order it
//! likes). The write path reports its writes and syncs of the blocks file, the journal and
//! the store files here; a test then builds the files a power loss may leave, one subset at a
//! time, at the end or at any earlier point ([`Recording::until`]).
//!
//! The log is per thread (each test runs on its own), off unless a test starts it, and keeps
//! only the files the test named (a store file's `set_len` is not modelled: a test that
//! truncates leaves the store out and takes it as the process left it).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A write or sync of one file, in the order the process made them.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// `data` written at byte `at`.
    Write {
        path: PathBuf,
        at: u64,
        data: Vec<u8>,
    },
    /// Everything written to the file so far is durable.
    Sync { path: PathBuf },
}

thread_local! {
    static LOG: RefCell<Option<Vec<Event>>> = const { RefCell::new(None) };
}

/// Whether the log is on and `path` is one of the files it follows.
fn followed(path: &Path) -> bool {
    BASE.with(|b| {
        b.borrow()
            .as_ref()
            .is_some_and(|base| base.contains_key(path))
    })
}

/// Reports a write (a no-op unless a test started the log for this file).
pub(crate) fn write(path: &Path, at: u64, data: &[u8]) {
    if !followed(path) {
        return;
    }
    LOG.with(|log| {
        if let Some(events) = log.borrow_mut().as_mut() {
            events.push(Event::Write {
                path: path.to_path_buf(),
                at,
                data: data.to_vec(),
            });
        }
    });
}

/// Reports a sync (a no-op unless a test started the log for this file).
pub(crate) fn sync(path: &Path) {
    if !followed(path) {
        return;
    }
    LOG.with(|log| {
        if let Some(events) = log.borrow_mut().as_mut() {
            events.push(Event::Sync {
                path: path.to_path_buf(),
            });
        }
    });
}

/// Events logged so far (where a test is in the recording).
pub(crate) fn logged() -> usize {
    LOG.with(|log| log.borrow().as_ref().map_or(0, Vec::len))
}

/// The files as a power loss may leave them, from the durable contents `base` (taken when the
/// log started, right after a sync of every file in it) and the events since.
pub(crate) struct Recording {
    base: HashMap<PathBuf, Vec<u8>>,
    events: Vec<Event>,
}

/// Starts logging, with `files` durable as they are now.
pub(crate) fn start(files: &[PathBuf]) -> std::io::Result<()> {
    let mut base = HashMap::new();
    for f in files {
        base.insert(f.clone(), std::fs::read(f)?);
    }
    BASE.with(|b| *b.borrow_mut() = Some(base));
    LOG.with(|log| *log.borrow_mut() = Some(Vec::new()));
    Ok(())
}

thread_local! {
    static BASE: RefCell<Option<HashMap<PathBuf, Vec<u8>>>> = const { RefCell::new(None) };
}

/// Stops logging; what was logged since [`start`].
pub(crate) fn stop() -> Recording {
    Recording {
        base: BASE.with(|b| b.borrow_mut().take()).unwrap_or_default(),
        events: LOG.with(|log| log.borrow_mut().take()).unwrap_or_default(),
    }
}

impl Recording {
    /// The points a power loss may strike at that matter: just before each sync and at the
    /// end (as event counts, for [`Recording::until`]). A power loss between two syncs is one
    /// of those just before the next sync that lost the writes made after it (a write not
    /// made and a write lost leave the same bytes; replay stops at a lost append's zeros as
    /// at the end of the file).
    pub(crate) fn points(&self) -> Vec<usize> {
        let mut at: Vec<usize> = (0..self.events.len())
            .filter(|&i| matches!(self.events[i], Event::Sync { .. }))
            .collect();
        at.push(self.events.len());
        at.dedup();
        at
    }

    /// The recording as it stood after its first `n` events (a power loss right then).
    pub(crate) fn until(&self, n: usize) -> Recording {
        Recording {
            base: self.base.clone(),
            events: self.events[..n].to_vec(),
        }
    }

    /// Whether the recording follows `path`.
    pub(crate) fn follows(&self, path: &Path) -> bool {
        self.base.contains_key(path)
    }

    /// Indexes (into the events) of the writes a power loss may lose: those after the last
    /// sync of their file.
    pub(crate) fn unsynced(&self) -> Vec<usize> {
        let mut last_sync: HashMap<&Path, usize> = HashMap::new();
        for (i, e) in self.events.iter().enumerate() {
            if let Event::Sync { path } = e {
                last_sync.insert(path, i);
            }
        }
        self.events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Event::Write { path, .. } => match last_sync.get(path.as_path()) {
                    Some(&s) if s > i => None,
                    _ => Some(i),
                },
                Event::Sync { .. } => None,
            })
            .collect()
    }

    /// The files' contents when, of the unsynced writes, only those `kept` says reached the
    /// disk (a lost append leaves zeros where it would have been, as a hole does).
    pub(crate) fn image(&self, kept: impl Fn(usize) -> bool) -> HashMap<PathBuf, Vec<u8>> {
        let unsynced: std::collections::HashSet<usize> = self.unsynced().into_iter().collect();
        let mut files = self.base.clone();
        for (i, e) in self.events.iter().enumerate() {
            if let Event::Write { path, at, data } = e {
                let bytes = files.entry(path.clone()).or_default();
                let end = *at as usize + data.len();
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                if !unsynced.contains(&i) || kept(i) {
                    bytes[*at as usize..end].copy_from_slice(data);
                }
            }
        }
        files
    }
}
