//! The flag reference in docs/bench.md keeps step with `berth bench --help`.
#![allow(clippy::unwrap_used)]

use clap::{Args as _, Command};

#[test]
fn every_flag_is_documented() {
    let docs = include_str!("../../../docs/bench.md");
    let cmd = berth_bench::cli::Args::augment_args(Command::new("berth-bench"));
    let mut missing = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        // `--x-mean`/`-stddev` documents both.
        let paired = long
            .strip_suffix("-stddev")
            .is_some_and(|stem| docs.contains(&format!("`--{stem}-mean`/`-stddev`")));
        if !docs.contains(&format!("`--{long}")) && !paired {
            missing.push(long.to_owned());
        }
        for alias in arg.get_visible_aliases().unwrap_or_default() {
            if !docs.contains(&format!("--{alias}")) {
                missing.push(alias.to_owned());
            }
        }
    }
    assert!(missing.is_empty(), "docs/bench.md lacks {missing:?}");
}
