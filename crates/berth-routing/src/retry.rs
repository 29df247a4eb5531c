//! Which worker answers a gateway may retry elsewhere (before any byte reached the client).

/// 502, 503 and 504 from a worker mean "this worker could not serve it now": another may.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 502..=504)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_gateway_class_errors_retry() {
        let retry: Vec<u16> = (100..600)
            .filter(|s| super::is_retryable_status(*s))
            .collect();
        assert_eq!(retry, [502, 503, 504]);
    }
}
