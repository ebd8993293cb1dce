//! Errors of trace reading, writing and conversion.

use std::io;

/// Everything that can go wrong reading, writing or converting a trace.
///
/// Every variant names the file and, where it applies, the line or byte offset and the field, so
/// a user can find the bad record.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// An I/O error on a file.
    #[error("{path}: {source}")]
    Io {
        /// File being read or written.
        path: String,
        /// Underlying error.
        #[source]
        source: io::Error,
    },
    /// A malformed record in a text trace.
    #[error("{path}:{line}: field `{field}`: {msg}")]
    Parse {
        /// File being read.
        path: String,
        /// 1-based line number (of the decompressed text).
        line: u64,
        /// Field that could not be decoded.
        field: &'static str,
        /// What is wrong with it.
        msg: String,
    },
    /// A malformed record in a binary trace.
    #[error("{path}: record at byte offset {offset}: field `{field}`: {msg}")]
    BadRecord {
        /// File being read.
        path: String,
        /// Byte offset of the record's first byte (in the decompressed stream).
        offset: u64,
        /// Field that could not be decoded.
        field: &'static str,
        /// What is wrong with it.
        msg: String,
    },
    /// A binary file ends before the data its header or record size promises.
    #[error("{path}: truncated at byte offset {offset}: {msg}")]
    Truncated {
        /// File being read.
        path: String,
        /// Byte offset where the missing data should start (usually the file length, or the
        /// start of the incomplete record).
        offset: u64,
        /// What was expected there.
        msg: String,
    },
    /// A binary file whose header is not valid.
    #[error("{path}: bad header: {msg}")]
    BadHeader {
        /// File being read.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// The format could not be recognised from the file name nor its content.
    #[error("{path}: cannot detect the trace format ({msg}); name it with --format")]
    UnknownFormat {
        /// File being read.
        path: String,
        /// What was seen.
        msg: String,
    },
    /// A trace names more volumes than tiercache can address.
    #[error("{path}: more than {limit} distinct volumes (at volume key `{key}`)")]
    TooManyVolumes {
        /// File being read.
        path: String,
        /// Most volumes accepted.
        limit: u32,
        /// First key beyond the limit.
        key: String,
    },
    /// A request that the output format cannot represent.
    #[error("{path}: cannot write record {index}: {msg}")]
    Unrepresentable {
        /// File being written.
        path: String,
        /// 0-based index of the request in the input stream.
        index: u64,
        /// Why.
        msg: String,
    },
    /// A bad generic-CSV column mapping.
    #[error("bad CSV mapping `{spec}`: {msg}")]
    CsvSpec {
        /// The mapping as given.
        spec: String,
        /// What is wrong.
        msg: String,
    },
    /// A request for something this crate does not do (e.g. writing a read-only format).
    #[error("{0}")]
    Unsupported(String),
}

impl TraceError {
    /// Wraps an I/O error with the file it happened on.
    pub fn io(path: &str, source: io::Error) -> Self {
        TraceError::Io {
            path: path.to_string(),
            source,
        }
    }
}
