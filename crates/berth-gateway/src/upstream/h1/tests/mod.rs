//! The HTTP/1 client's framing, head by head and byte by byte (`framing`), and whole exchanges
//! against a scripted worker on the other end of an in-memory pipe (`exchanges`).

mod exchanges;
mod framing;
