//! Validation errors of a workload specification.

use thiserror::Error;

/// Why a [`WorkloadSpec`](crate::WorkloadSpec) cannot be turned into a generator.
///
/// Every error names the offending field with its path in the spec (`block_sizes[1].weight`,
/// `distribution.zones[0].size_fraction`), so a config loader can point the user at it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WorkloadError {
    /// A field has a value outside its domain or inconsistent with other fields.
    #[error("workload field `{field}`: {reason}")]
    Invalid {
        /// Path of the field in the spec, e.g. `distribution.theta`.
        field: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
}

impl WorkloadError {
    /// Builds an [`WorkloadError::Invalid`] for `field`.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        WorkloadError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Path of the offending field.
    pub fn field(&self) -> &str {
        match self {
            WorkloadError::Invalid { field, .. } => field,
        }
    }
}
