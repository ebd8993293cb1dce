//! Policies changed on a running cache (an operator's `tiercache set`): the write policy,
//! cleaning, promotion and load balancing. None of them is part of the cache device's layout
//! or of a line's state, so each is replaced between two requests: a new cleaner, promotion
//! policy or balancer starts with no history, dirty lines stay dirty (and are cleaned by the
//! cleaner now in force) and no acknowledged data changes place.

use super::{validate, Cache, PolicyError};
use crate::config::CacheConfig;

impl Cache {
    /// Puts `cfg`'s write policy, cleaning, promotion, admission and balancing in force where they differ
    /// from the ones in force, after checking them as [`Cache::new`] does (on an error nothing
    /// changed). A new write policy applies to every volume (per-volume ones are cleared). The
    /// other fields of `cfg` are not read: what is part of the layout (capacity, line size,
    /// shards, partitions) cannot change on a running cache.
    pub fn set_policies(&mut self, cfg: &CacheConfig) -> Result<(), PolicyError> {
        let mut next = self.cfg.clone();
        next.write_policy = cfg.write_policy;
        next.cleaning = cfg.cleaning.clone();
        next.promotion = cfg.promotion.clone();
        next.admission = cfg.admission.clone();
        next.balancing = cfg.balancing.clone();
        validate::check(&next, self.capacity_lines())?;
        if next.write_policy != self.cfg.write_policy {
            self.set_write_policy(None, next.write_policy);
        }
        if next.cleaning != self.cfg.cleaning {
            self.cleaner = crate::cleaning::build(&next.cleaning);
            self.cleaner_waits_for_idle = self.cleaner.acts_only_on_idle_cache();
        }
        if next.promotion != self.cfg.promotion {
            self.promotion = crate::promotion::build(&next.promotion, self.capacity_lines());
            self.promotion_learns = self.promotion.learns_from_hits();
        }
        if next.admission != self.cfg.admission {
            self.admission = crate::admission::build(&next.admission, self.capacity_lines());
            self.admission_learns = self.admission.learns_from_accesses();
            self.admission_filters = next.admission != crate::config::AdmissionConfig::All;
        }
        if next.balancing != self.cfg.balancing {
            self.set_balancer(crate::balancing::build(&next.balancing));
        }
        self.cfg = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{CacheConfig, CleaningConfig, WritePolicy};
    use crate::Cache;
    use tiercache_core::{Op, Request, VolumeId};

    fn write(c: &mut Cache, line: u64) {
        let req = Request {
            time_ns: line,
            volume: VolumeId(0),
            op: Op::Write,
            offset: line * 4096,
            len: 4096,
        };
        c.access(&req, None).unwrap();
    }

    #[test]
    fn a_write_policy_set_live_stops_new_dirty_lines_and_keeps_old_ones() {
        let cfg = CacheConfig {
            capacity: 64 * 4096,
            line_size: 4096,
            write_policy: WritePolicy::WriteBack,
            cleaning: CleaningConfig::None,
            ..CacheConfig::default()
        };
        let mut c = Cache::new(&cfg).unwrap();
        write(&mut c, 1);
        assert_eq!(c.dirty_lines(), 1);
        let mut next = cfg.clone();
        next.write_policy = WritePolicy::WriteThrough;
        next.cleaning = CleaningConfig::Threshold {
            high: 0.5,
            low: 0.1,
            batch: 8,
        };
        c.set_policies(&next).unwrap();
        assert_eq!(c.write_policy(VolumeId(0)), WritePolicy::WriteThrough);
        assert_eq!(c.config().cleaning, next.cleaning);
        write(&mut c, 2);
        assert_eq!(c.dirty_lines(), 1, "write-through makes no line dirty");
        crate::Report::audit(&c);
    }

    #[test]
    fn a_bad_setting_changes_nothing_and_names_the_field() {
        let cfg = CacheConfig {
            capacity: 64 * 4096,
            line_size: 4096,
            ..CacheConfig::default()
        };
        let mut c = Cache::new(&cfg).unwrap();
        let mut bad = cfg.clone();
        bad.write_policy = WritePolicy::WriteThrough;
        bad.cleaning = CleaningConfig::Threshold {
            high: 0.1,
            low: 0.5,
            batch: 8,
        };
        let e = c.set_policies(&bad).unwrap_err().to_string();
        assert!(e.contains("cleaning"), "{e}");
        assert_eq!(c.config(), &cfg);
        assert_eq!(c.write_policy(VolumeId(0)), cfg.write_policy);
    }
}
