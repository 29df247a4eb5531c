//! Placeholder for the load generator (issue #5); replaced by that work.

/// Command-line entry point.
pub mod cli {
    /// Flags of this subcommand.
    #[derive(clap::Args, Debug)]
    pub struct Args {}

    /// Runs the subcommand until it finishes or is interrupted.
    pub async fn run(_args: Args) -> Result<(), std::io::Error> {
        Err(std::io::Error::other("not built yet"))
    }
}
