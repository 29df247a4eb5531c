//! Capturing the gateway's log output in a test.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Everything written to the captured log so far.
#[derive(Clone, Default)]
pub struct LogBuf(Arc<Mutex<Vec<u8>>>);

impl LogBuf {
    /// The captured text.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs a thread-local subscriber at `berth_gateway=debug` writing into the returned
/// buffer, for as long as the guard lives. Use a current-thread runtime (and the default
/// `io_threads = 0`) so every gateway task runs under it.
pub fn capture_debug_logs() -> (LogBuf, tracing::subscriber::DefaultGuard) {
    let buf = LogBuf::default();
    let sink = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("berth_gateway=debug")
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    (buf, tracing::subscriber::set_default(subscriber))
}
