//! The top-level members [`super::ModelScan`] keeps besides `model`, and how it keeps them.

/// A top-level member kept for the routing key and session control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `prompt_cache_key`.
    PromptCacheKey,
    /// `previous_response_id`.
    PreviousResponseId,
    /// `conversation`.
    Conversation,
    /// `metadata` (its `user_id`).
    Metadata,
    /// `nvext` (its `session_control`).
    Nvext,
}

impl Field {
    /// Every field, in index order.
    pub const ALL: [Self; 5] = [
        Self::PromptCacheKey,
        Self::PreviousResponseId,
        Self::Conversation,
        Self::Metadata,
        Self::Nvext,
    ];

    /// The member's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::PromptCacheKey => "prompt_cache_key",
            Self::PreviousResponseId => "previous_response_id",
            Self::Conversation => "conversation",
            Self::Metadata => "metadata",
            Self::Nvext => "nvext",
        }
    }

    /// The field's bit in the scan's sets.
    pub(super) fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A kept member's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept {
    /// The raw JSON value.
    Raw(Vec<u8>),
    /// Longer than [`super::MAX_FIELD`]: seen, but not kept.
    TooLong,
}
