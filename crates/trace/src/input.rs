//! How a command reads its input trace, before the reader options are resolved.

use crate::csv::CsvSpec;
use crate::format::Format;
use crate::reader::ReadOptions;
use crate::text::BlkAction;
use crate::TraceError;

/// How to read an input trace, as a command (`tiercache trace`, `tiercache analyze`, the Python
/// package) is given it: the column mapping still as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputOptions {
    /// Input format (detected from the name and content when `None`).
    pub format: Option<Format>,
    /// Count and skip malformed records instead of stopping at the first.
    pub skip_bad: bool,
    /// Column mapping for [`Format::Csv`] (see [`CsvSpec`]).
    pub csv_map: Option<String>,
    /// blkparse: the action kept per I/O.
    pub blkparse_action: BlkAction,
    /// oracleGeneral input: bytes per object id (object ids are read as line keys).
    pub oracle_line_size: u64,
}

impl Default for InputOptions {
    fn default() -> Self {
        let read = ReadOptions::default();
        Self {
            format: None,
            skip_bad: read.skip_bad,
            csv_map: None,
            blkparse_action: read.blkparse_action,
            oracle_line_size: read.oracle_line_size,
        }
    }
}

impl InputOptions {
    /// The reader options these describe (a bad column mapping is an error).
    pub fn read_options(&self) -> Result<ReadOptions, TraceError> {
        let csv = match &self.csv_map {
            Some(m) => Some(m.parse::<CsvSpec>()?),
            None => None,
        };
        Ok(ReadOptions {
            skip_bad: self.skip_bad,
            blkparse_action: self.blkparse_action,
            oracle_line_size: self.oracle_line_size,
            csv,
        })
    }
}
