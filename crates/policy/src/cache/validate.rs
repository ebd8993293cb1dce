//! Checks of a cache configuration's policy fields, every invalid one named in the error
//! (geometry and partitions are checked where they are built).

use super::config_error;
use super::PolicyError;
use crate::config::{AdmissionConfig, CacheConfig, CleaningConfig, PromotionConfig};

/// Checks `cfg` for a cache of `lines` lines.
pub(super) fn check(cfg: &CacheConfig, lines: u64) -> Result<(), PolicyError> {
    if cfg.eviction == crate::config::EvictionKind::Belady {
        return Err(config_error(
            "eviction",
            "belady needs every line's next use, which only a whole-trace replay knows: \
             use it with run.mode = \"hit-ratio\" and a trace workload",
        ));
    }
    match cfg.promotion {
        PromotionConfig::Nhit {
            n,
            table_ratio,
            occupancy_threshold,
        } => {
            if n == 0 {
                return Err(config_error("promotion.n", "must be at least 1"));
            }
            if !(table_ratio > 0.0 && table_ratio <= 64.0) {
                return Err(config_error("promotion.table_ratio", "must be in (0, 64]"));
            }
            if !(0.0..=1.0).contains(&occupancy_threshold) {
                return Err(config_error(
                    "promotion.occupancy_threshold",
                    "must be in [0, 1]",
                ));
            }
        }
        PromotionConfig::Smq { hotspot_lines: 0 } => {
            return Err(config_error(
                "promotion.hotspot_lines",
                "must be at least 1",
            ));
        }
        _ => {}
    }
    match cfg.admission {
        AdmissionConfig::Probabilistic { probability, .. }
            if !(0.0..=1.0).contains(&probability) =>
        {
            return Err(config_error(
                "admission.probability",
                format!("{probability} is not a probability in [0, 1]"),
            ));
        }
        AdmissionConfig::Tinylfu { sketch_ratio }
            if !(sketch_ratio > 0.0 && sketch_ratio <= 64.0) =>
        {
            return Err(config_error("admission.sketch_ratio", "must be in (0, 64]"));
        }
        AdmissionConfig::Bloom { window_ratio, .. }
            if !(window_ratio > 0.0 && window_ratio <= 64.0) =>
        {
            return Err(config_error("admission.window_ratio", "must be in (0, 64]"));
        }
        AdmissionConfig::Bloom { bits_per_key, .. } if !(1..=64).contains(&bits_per_key) => {
            return Err(config_error("admission.bits_per_key", "must be in 1..=64"));
        }
        _ => {}
    }
    if let Err((field, reason)) = cfg.balancing.validate() {
        return Err(config_error(field, reason));
    }
    if let Err((field, reason)) = cfg.tenancy.validate() {
        return Err(config_error(field, reason));
    }
    if cfg.tenancy.fixed_lines(cfg.line_size) > lines {
        return Err(config_error(
            "tenancy.fixed",
            format!(
                "fixed sizes need {} lines, the cache has {lines}",
                cfg.tenancy.fixed_lines(cfg.line_size)
            ),
        ));
    }
    // Static partitions of volumes without a fixed size keep their lines next to the
    // fixed sizes (a fixed size replaces its volume's static partition).
    let fixed = cfg.tenancy.fixed_lines(cfg.line_size);
    let static_lines = cfg.static_lines_beside_fixed(cfg.line_size);
    if fixed > 0 && static_lines + fixed > lines {
        return Err(config_error(
            "tenancy.fixed",
            format!(
                "fixed sizes need {fixed} lines and the static partitions \
                 (cache.partitions) of other volumes {static_lines}: more than the \
                 cache's {lines}"
            ),
        ));
    }
    let duration = match cfg.cleaning {
        CleaningConfig::Aggressive { period_ns, .. } => Some(("cleaning.period_ns", period_ns)),
        CleaningConfig::Lazy { idle_ns, .. } => Some(("cleaning.idle_ns", idle_ns)),
        _ => None,
    };
    if let Some((field, ns)) = duration {
        if let Some(reason) = crate::config::duration_too_long(ns) {
            return Err(config_error(field, reason));
        }
    }
    match cfg.cleaning {
        CleaningConfig::Aggressive { period_ns, batch } => {
            if period_ns == 0 {
                return Err(config_error("cleaning.period_ns", "must be positive"));
            }
            if batch == 0 {
                return Err(config_error("cleaning.batch", "must be positive"));
            }
        }
        CleaningConfig::Lazy { batch: 0, .. } => {
            return Err(config_error("cleaning.batch", "must be positive"));
        }
        CleaningConfig::Threshold { high, low, batch } => {
            if !(0.0..=1.0).contains(&high) || !(0.0..=1.0).contains(&low) || low > high {
                return Err(config_error(
                    "cleaning",
                    format!("watermarks need 0 <= low <= high <= 1, got low {low} high {high}"),
                ));
            }
            if batch == 0 {
                return Err(config_error("cleaning.batch", "must be positive"));
            }
        }
        _ => {}
    }
    Ok(())
}
