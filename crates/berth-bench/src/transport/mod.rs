//! Sending one request and measuring it.
//!
//! - [`client`]: the pooled HTTP/1 client and the timing of one exchange.
//! - [`response`]: reading answers, usage and errors out of JSON and server-sent-event bodies
//!   (OpenAI chat and completions, SGLang `/generate`).

pub mod client;
pub mod response;

pub use client::{Exchange, HttpClient};
pub use response::{ResponseReader, Usage};
