//! File workloads (docs/design.md §6, file-level): streams of creates, appends, reads and deletes
//! shaped like a mail server (Postmark), a file server and a web server. A stream is deterministic
//! in its seed; [`run_on_dir`] performs it on a real directory (a `tiercache mount`, a store),
//! and [`crate::sim`] executes it in the simulator.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// One file operation. Files are numbered; on disk file `n` is `f<n>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    /// Create file `file` and write `size` bytes into it.
    Create {
        /// File number.
        file: u32,
        /// Bytes written.
        size: u64,
    },
    /// Append `bytes` to `file`.
    Append {
        /// File number.
        file: u32,
        /// Bytes appended.
        bytes: u64,
    },
    /// Read the whole of `file`.
    Read {
        /// File number.
        file: u32,
    },
    /// Delete `file`.
    Delete {
        /// File number.
        file: u32,
    },
}

/// The three workload shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// Postmark-like: many 4–28 KiB files; transactions of (read or append) + (create or
    /// delete); every file deleted at the end.
    Mail,
    /// Large files (1–4 MiB), 1 MiB appends, writes outnumber reads.
    FileServer,
    /// Whole-file reads of small files (skewed popularity) and appends to one log.
    WebServer,
}

impl WorkloadKind {
    /// The three, in table order.
    pub const ALL: [WorkloadKind; 3] = [
        WorkloadKind::Mail,
        WorkloadKind::FileServer,
        WorkloadKind::WebServer,
    ];

    /// Name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Mail => "mail",
            WorkloadKind::FileServer => "fileserver",
            WorkloadKind::WebServer => "webserver",
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload name that is none of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown file workload {0:?}: expected mail, fileserver or webserver")]
pub struct UnknownWorkload(pub String);

impl FromStr for WorkloadKind {
    type Err = UnknownWorkload;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownWorkload(s.to_string()))
    }
}

/// A workload's size and seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// Shape.
    pub kind: WorkloadKind,
    /// Files created before the transactions.
    pub files: u32,
    /// Transactions.
    pub transactions: u32,
    /// Random seed.
    pub seed: u64,
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

struct Gen {
    rng: Xoshiro256PlusPlus,
    live: Vec<u32>,
    next: u32,
    ops: Vec<FileOp>,
}

impl Gen {
    fn create(&mut self, size: u64) {
        let file = self.next;
        self.next += 1;
        self.live.push(file);
        self.ops.push(FileOp::Create { file, size });
    }

    fn pick(&mut self) -> Option<u32> {
        if self.live.is_empty() {
            None
        } else {
            Some(self.live[self.rng.gen_range(0..self.live.len())])
        }
    }

    fn delete_random(&mut self) {
        if !self.live.is_empty() {
            let i = self.rng.gen_range(0..self.live.len());
            let file = self.live.swap_remove(i);
            self.ops.push(FileOp::Delete { file });
        }
    }
}

/// Generates the operation stream of `spec`.
pub fn generate(spec: &WorkloadSpec) -> Vec<FileOp> {
    let mut g = Gen {
        rng: Xoshiro256PlusPlus::seed_from_u64(spec.seed),
        live: Vec::new(),
        next: 0,
        ops: Vec::new(),
    };
    match spec.kind {
        WorkloadKind::Mail => {
            let size = |r: &mut Xoshiro256PlusPlus| r.gen_range(4 * KIB..=28 * KIB);
            for _ in 0..spec.files {
                let s = size(&mut g.rng);
                g.create(s);
            }
            for _ in 0..spec.transactions {
                if let Some(file) = g.pick() {
                    if g.rng.gen_bool(0.5) {
                        g.ops.push(FileOp::Read { file });
                    } else {
                        let bytes = size(&mut g.rng);
                        g.ops.push(FileOp::Append { file, bytes });
                    }
                }
                if g.rng.gen_bool(0.5) || g.live.is_empty() {
                    let s = size(&mut g.rng);
                    g.create(s);
                } else {
                    g.delete_random();
                }
            }
            while let Some(file) = g.live.pop() {
                g.ops.push(FileOp::Delete { file });
            }
        }
        WorkloadKind::FileServer => {
            let size = |r: &mut Xoshiro256PlusPlus| r.gen_range(1..=4u64) * MIB;
            for _ in 0..spec.files {
                let s = size(&mut g.rng);
                g.create(s);
            }
            for _ in 0..spec.transactions {
                let roll: f64 = g.rng.gen();
                match g.pick() {
                    Some(file) if roll < 0.40 => g.ops.push(FileOp::Append { file, bytes: MIB }),
                    Some(file) if roll < 0.65 => g.ops.push(FileOp::Read { file }),
                    _ if roll < 0.85 || g.live.len() < 2 => {
                        let s = size(&mut g.rng);
                        g.create(s);
                    }
                    _ => g.delete_random(),
                }
            }
        }
        WorkloadKind::WebServer => {
            // File 0 is the log; pages follow. Popularity is skewed: page i with weight 1/i.
            g.create(0);
            let pages = spec.files.max(1);
            for _ in 0..pages {
                let s = g.rng.gen_range(4 * KIB..=64 * KIB);
                g.create(s);
            }
            let harmonic: f64 = (1..=pages).map(|i| 1.0 / i as f64).sum();
            for _ in 0..spec.transactions {
                for _ in 0..10 {
                    let mut u = g.rng.gen::<f64>() * harmonic;
                    let mut page = pages;
                    for i in 1..=pages {
                        u -= 1.0 / i as f64;
                        if u <= 0.0 {
                            page = i;
                            break;
                        }
                    }
                    g.ops.push(FileOp::Read { file: page });
                }
                g.ops.push(FileOp::Append {
                    file: 0,
                    bytes: 16 * KIB,
                });
            }
        }
    }
    g.ops
}

/// What a stream did, counted from its operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StreamSummary {
    /// Files created.
    pub files_created: u64,
    /// Files deleted.
    pub files_deleted: u64,
    /// Whole-file reads.
    pub reads: u64,
    /// Appends.
    pub appends: u64,
    /// Bytes written (creates and appends).
    pub bytes_written: u64,
    /// Bytes read.
    pub bytes_read: u64,
}

/// Counts a stream's operations and bytes (reads count the file's size at the time).
pub fn summarize(ops: &[FileOp]) -> StreamSummary {
    let mut sizes = std::collections::HashMap::new();
    let mut s = StreamSummary::default();
    for op in ops {
        match *op {
            FileOp::Create { file, size } => {
                s.files_created += 1;
                s.bytes_written += size;
                sizes.insert(file, size);
            }
            FileOp::Append { file, bytes } => {
                s.appends += 1;
                s.bytes_written += bytes;
                *sizes.entry(file).or_insert(0) += bytes;
            }
            FileOp::Read { file } => {
                s.reads += 1;
                s.bytes_read += sizes.get(&file).copied().unwrap_or(0);
            }
            FileOp::Delete { file } => {
                s.files_deleted += 1;
                sizes.remove(&file);
            }
        }
    }
    s
}

/// Bytes a creating or appending write hands the file system at once.
pub const WRITE_CHUNK: usize = 64 * 1024;

fn fill(buf: &mut [u8], file: u32, at: u64) {
    // Content depends on file and offset, so a read can be checked.
    for (i, b) in buf.iter_mut().enumerate() {
        *b = ((at + i as u64).wrapping_mul(31) ^ file as u64) as u8;
    }
}

/// Performs `ops` on the directory `dir` (files `f<n>`), writing in [`WRITE_CHUNK`] pieces and
/// checking every byte read; returns the elapsed time.
pub fn run_on_dir(ops: &[FileOp], dir: &Path) -> io::Result<Duration> {
    let start = Instant::now();
    let mut sizes = std::collections::HashMap::new();
    let mut buf = vec![0u8; WRITE_CHUNK];
    let name = |file: u32| dir.join(format!("f{file}"));
    let write_range = |f: &mut File, file: u32, from: u64, len: u64, buf: &mut [u8]| {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            fill(&mut buf[..n], file, from + done);
            f.write_all(&buf[..n])?;
            done += n as u64;
        }
        io::Result::Ok(())
    };
    for op in ops {
        match *op {
            FileOp::Create { file, size } => {
                let mut f = File::create(name(file))?;
                write_range(&mut f, file, 0, size, &mut buf)?;
                sizes.insert(file, size);
            }
            FileOp::Append { file, bytes } => {
                let mut f = OpenOptions::new().append(true).open(name(file))?;
                let at = sizes.get(&file).copied().unwrap_or(0);
                write_range(&mut f, file, at, bytes, &mut buf)?;
                sizes.insert(file, at + bytes);
            }
            FileOp::Read { file } => {
                let mut content = Vec::new();
                File::open(name(file))?.read_to_end(&mut content)?;
                let expected = sizes.get(&file).copied().unwrap_or(0);
                let mut want = vec![0u8; content.len()];
                fill(&mut want, file, 0);
                if content.len() as u64 != expected || content != want {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("file f{file}: read back differs from what was written"),
                    ));
                }
            }
            FileOp::Delete { file } => {
                std::fs::remove_file(name(file))?;
                sizes.remove(&file);
            }
        }
    }
    Ok(start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_consistent() {
        for kind in WorkloadKind::ALL {
            let spec = WorkloadSpec {
                kind,
                files: 50,
                transactions: 200,
                seed: 7,
            };
            let a = generate(&spec);
            assert_eq!(a, generate(&spec));
            assert_ne!(a, generate(&WorkloadSpec { seed: 8, ..spec }));
            // Every operation names a live file; no file is created twice.
            let mut live = std::collections::HashSet::new();
            let mut ever = std::collections::HashSet::new();
            for op in &a {
                match *op {
                    FileOp::Create { file, .. } => {
                        assert!(ever.insert(file));
                        live.insert(file);
                    }
                    FileOp::Append { file, .. } | FileOp::Read { file } => {
                        assert!(live.contains(&file), "{kind}: {op:?} on a dead file")
                    }
                    FileOp::Delete { file } => assert!(live.remove(&file)),
                }
            }
        }
    }

    #[test]
    fn mail_is_postmark_shaped() {
        let ops = generate(&WorkloadSpec {
            kind: WorkloadKind::Mail,
            files: 100,
            transactions: 1000,
            seed: 1,
        });
        let s = summarize(&ops);
        assert_eq!(
            s.files_created, s.files_deleted,
            "all files deleted at the end"
        );
        assert!(ops.iter().all(|op| match *op {
            FileOp::Create { size, .. } => (4 * KIB..=28 * KIB).contains(&size),
            _ => true,
        }));
        assert_eq!(s.reads + s.appends, 1000);
    }

    #[test]
    fn run_on_dir_writes_and_checks_content() {
        let dir = tempfile::tempdir().unwrap();
        let ops = generate(&WorkloadSpec {
            kind: WorkloadKind::Mail,
            files: 10,
            transactions: 40,
            seed: 3,
        });
        run_on_dir(&ops, dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
