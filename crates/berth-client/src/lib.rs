//! Placeholder for the client library (issue #5).
