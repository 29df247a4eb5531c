//! Active health checking as a state machine: a worker turns unhealthy after
//! `failure_threshold` consecutive failed probes and healthy again after `success_threshold`
//! consecutive good ones. The gateway runs the probes; this only counts.

/// One worker's health.
#[derive(Debug, Clone)]
pub struct HealthTracker {
    failure_threshold: u32,
    success_threshold: u32,
    healthy: bool,
    streak: u32,
}

impl HealthTracker {
    /// A tracker starting healthy (thresholds are clamped to at least 1).
    pub fn new(failure_threshold: u32, success_threshold: u32) -> Self {
        Self::starting(true, failure_threshold, success_threshold)
    }

    /// A tracker starting in the given state: a worker that failed its start-up probes starts
    /// unhealthy and needs `success_threshold` good probes to join.
    pub fn starting(healthy: bool, failure_threshold: u32, success_threshold: u32) -> Self {
        Self {
            failure_threshold: failure_threshold.max(1),
            success_threshold: success_threshold.max(1),
            healthy,
            streak: 0,
        }
    }

    /// Whether the worker is healthy.
    pub fn is_healthy(&self) -> bool {
        self.healthy
    }

    /// Records a probe result; returns the new health when it changed.
    pub fn on_probe(&mut self, ok: bool) -> Option<bool> {
        if ok == self.healthy {
            self.streak = 0;
            return None;
        }
        self.streak += 1;
        let needed = if self.healthy {
            self.failure_threshold
        } else {
            self.success_threshold
        };
        if self.streak >= needed {
            self.healthy = ok;
            self.streak = 0;
            Some(ok)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_need_consecutive_results() {
        let mut h = HealthTracker::new(3, 2);
        assert_eq!(h.on_probe(false), None);
        assert_eq!(h.on_probe(false), None);
        assert_eq!(h.on_probe(true), None); // streak broken
        assert_eq!(h.on_probe(false), None);
        assert_eq!(h.on_probe(false), None);
        assert_eq!(h.on_probe(false), Some(false));
        assert!(!h.is_healthy());
        assert_eq!(h.on_probe(true), None);
        assert_eq!(h.on_probe(false), None);
        assert_eq!(h.on_probe(true), None);
        assert_eq!(h.on_probe(true), Some(true));
        assert!(h.is_healthy());
    }

    #[test]
    fn can_start_unhealthy() {
        let mut h = HealthTracker::starting(false, 3, 2);
        assert!(!h.is_healthy());
        assert_eq!(h.on_probe(true), None);
        assert_eq!(h.on_probe(true), Some(true));
    }
}
