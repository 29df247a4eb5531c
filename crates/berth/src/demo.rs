//! Placeholder for `berth demo` (issue #5).

/// Flags of `berth demo`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {}

/// Runs the demo.
pub(crate) async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
