//! A model's value as the scan found it ([`ModelText`]).

use super::give_back;

/// A model's value as the scan found it: its text's bytes (escapes decoded), valid UTF-8.
///
/// An unescaped value is the scan's own buffer, taken as it is (no copy, no allocation) and
/// checked by words when it is ASCII (not byte by byte as `str::from_utf8` checks a short
/// string); the gateway compares it with the workers' models as bytes and keeps the model
/// it matches, so the usual model is never turned into a `String`. The buffer goes back to
/// the thread's spares when the value is dropped.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ModelText(pub(super) Vec<u8>);

impl ModelText {
    /// `bytes` when they are valid UTF-8.
    pub(super) fn checked(bytes: Vec<u8>) -> Result<Self, Vec<u8>> {
        if bytes.is_ascii() || std::str::from_utf8(&bytes).is_ok() {
            Ok(Self(bytes))
        } else {
            Err(bytes)
        }
    }

    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text (checked again: for a model no worker serves, and tests).
    pub fn as_str(&self) -> &str {
        // (valid UTF-8 by construction: the fallback is never taken)
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The text as a `String` (its buffer, no copy).
    pub fn into_string(mut self) -> String {
        String::from_utf8(std::mem::take(&mut self.0)).unwrap_or_default()
    }
}

impl Drop for ModelText {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.0));
    }
}

impl From<&str> for ModelText {
    fn from(s: &str) -> Self {
        Self(s.as_bytes().to_vec())
    }
}

impl From<String> for ModelText {
    fn from(s: String) -> Self {
        Self(s.into_bytes())
    }
}

impl std::fmt::Debug for ModelText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}
