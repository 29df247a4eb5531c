//! Progress output: a redrawn bar on a terminal, a plain line every few seconds otherwise.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::run::context::RunContext;

/// The progress reporter of one run.
#[derive(Debug)]
pub struct Progress {
    task: Option<JoinHandle<()>>,
    tty: bool,
}

impl Progress {
    /// Starts reporting on stderr (nothing when progress is off).
    pub fn start(ctx: Arc<RunContext>) -> Self {
        if !ctx.config.progress {
            return Self {
                task: None,
                tty: false,
            };
        }
        let tty = std::io::stderr().is_terminal();
        let expected = ctx.config.num_sessions.map(|n| {
            let shape = &ctx.config.shape;
            (n as f64 * shape.sessions_per_tree() as f64 * shape.turns_mean.max(1.0)) as u64
        });
        let period = if tty {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(5)
        };
        let task = tokio::spawn(async move {
            loop {
                if !ctx.sleep(period).await {
                    break;
                }
                let line = status_line(&ctx, expected, tty);
                let mut err = std::io::stderr().lock();
                let _ = if tty {
                    write!(err, "\r{line}\x1b[K")
                } else {
                    writeln!(err, "{line}")
                };
                let _ = err.flush();
            }
        });
        Self {
            task: Some(task),
            tty,
        }
    }

    /// Stops reporting and clears the bar.
    pub async fn finish(self) {
        if let Some(task) = self.task {
            let _ = task.await;
            if self.tty {
                eprint!("\r\x1b[K");
            }
        }
    }
}

fn status_line(ctx: &RunContext, expected: Option<u64>, tty: bool) -> String {
    let sent = ctx.sent.load(Ordering::Relaxed);
    let ok = ctx.succeeded.load(Ordering::Relaxed);
    let failed = ctx.failed.load(Ordering::Relaxed);
    let secs = ctx.started.elapsed().as_secs_f64();
    let rate = if secs > 0.0 {
        (ok + failed) as f64 / secs
    } else {
        0.0
    };
    let bar = match (tty, expected) {
        (true, Some(total)) if total > 0 => {
            let filled = ((ok + failed) as f64 / total as f64 * 30.0).min(30.0) as usize;
            format!("[{}{}] ", "#".repeat(filled), " ".repeat(30 - filled))
        }
        _ => String::new(),
    };
    let of = expected.map(|t| format!(" of ~{t}")).unwrap_or_default();
    format!("{bar}{secs:6.1}s  sent {sent}{of}  ok {ok}  errors {failed}  {rate:.1} req/s")
}
