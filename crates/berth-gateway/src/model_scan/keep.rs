//! What the scan keeps of the bytes it passes: runs passed at once (`pass`), bytes kept one at
//! a time (`keep`), both bounded by the kept value's limit.

use super::{MAX_FIELD, MAX_KEY, MAX_MODEL, ModelScan, Target};

impl ModelScan {
    /// How many of `bytes`' first bytes `step` would only keep (or skip): the rest of a
    /// string up to its next quote or backslash, the bytes of a nested value up to its next
    /// quote or bracket. What a kept value or key would keep of them is kept here.
    pub(super) fn pass(&mut self, bytes: &[u8]) -> usize {
        if self.in_string {
            if self.escape {
                return 0;
            }
            let limit = if self.in_key {
                Some(MAX_KEY)
            } else {
                self.value_limit().filter(|_| !self.overflow)
            };
            let Some(limit) = limit else {
                // Inside a string nobody keeps (message text, mostly): only its next quote or
                // backslash matters.
                return super::skip::stop(bytes);
            };
            let n = super::skip::stop(bytes);
            self.keep_run(&bytes[..n], limit);
            return n;
        }
        if self.depth > 1 && !self.in_scalar {
            let n = bytes
                .iter()
                .position(|&b| matches!(b, b'"' | b'{' | b'}' | b'[' | b']'))
                .unwrap_or(bytes.len());
            if let Some(limit) = self.value_limit() {
                self.keep_run(&bytes[..n], limit);
            }
            return n;
        }
        0
    }

    /// The limit of the value being kept, if one is.
    fn value_limit(&self) -> Option<usize> {
        match self.keeping {
            Some(Target::Model) => Some(MAX_MODEL),
            Some(Target::Field(_)) => Some(MAX_FIELD),
            _ => None,
        }
    }

    /// [`Self::keep`] of each byte of `run`, at once.
    fn keep_run(&mut self, run: &[u8], limit: usize) {
        if run.is_empty() {
            return;
        }
        let room = limit.saturating_sub(self.buf.len());
        if room > 0 && self.buf.capacity() == 0 {
            self.buf = super::spare_buf();
        }
        self.buf.extend_from_slice(&run[..run.len().min(room)]);
        if run.len() > room {
            self.overflow = true;
        }
    }

    pub(super) fn keep(&mut self, b: u8, limit: usize) {
        if self.buf.len() < limit {
            if self.buf.capacity() == 0 {
                // one buffer for the scan (a spare one of the thread's): keys and most values fit
                self.buf = super::spare_buf();
            }
            self.buf.push(b);
        } else {
            self.overflow = true;
        }
    }

    /// Keeps `b` as part of the value being kept, if one is.
    pub(super) fn keep_value(&mut self, b: u8) {
        match self.keeping {
            Some(Target::Model) => self.keep(b, MAX_MODEL),
            Some(Target::Field(_)) => self.keep(b, MAX_FIELD),
            _ => {}
        }
    }
}
