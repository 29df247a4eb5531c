//! Presenting a run.
//!
//! - [`console`]: the summary table printed at the end of a run.
//! - [`files`]: `--artifact-dir` outputs: `summary.json`, `summary.csv`, `records.jsonl`,
//!   `report.html`.
//! - [`html`]: the self-contained HTML report (one run, or several side by side for the demo).
//! - [`svg`]: the inline SVG charts the report embeds (no scripts, no external assets).

pub mod console;
pub mod files;
pub mod html;
pub mod svg;
