//! `--discovery-provider`, `--discovery-file`, `--discovery-check-interval-secs`: parsing, the
//! config file, and refusals that name the flag.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use berth_gateway::cli::Args;
use berth_gateway::{DiscoveryProvider, GatewayConfig};
use clap::{Args as _, FromArgMatches as _};

fn parse(argv: &[&str]) -> Args {
    let m = Args::augment_args(clap::Command::new("serve"))
        .try_get_matches_from(std::iter::once("serve").chain(argv.iter().copied()))
        .unwrap();
    Args::from_arg_matches(&m).unwrap()
}

fn refused(argv: &[&str]) -> String {
    GatewayConfig::from_args(&parse(argv))
        .unwrap_err()
        .to_string()
}

#[test]
fn file_discovery_needs_no_worker_urls() {
    let c = GatewayConfig::from_args(&parse(&[
        "--discovery-provider",
        "file",
        "--discovery-file",
        "/etc/berth/workers.json",
        "--discovery-check-interval-secs",
        "7",
    ]))
    .unwrap();
    let d = c.discovery.unwrap();
    assert_eq!(
        d.provider,
        DiscoveryProvider::File("/etc/berth/workers.json".into())
    );
    assert_eq!(d.check_interval, Duration::from_secs(7));
    let c = GatewayConfig::from_args(&parse(&[
        "--discovery-provider",
        "file",
        "--discovery-file",
        "w.json",
    ]))
    .unwrap();
    assert_eq!(c.discovery.unwrap().check_interval, Duration::from_secs(30));
}

#[test]
fn discovery_flags_come_from_the_config_file_too() {
    let file: Args = toml::from_str(
        "discovery-provider = \"file\"\ndiscovery-file = \"w.json\"\ndiscovery-check-interval-secs = 3\n",
    )
    .unwrap();
    let args = parse(&["--discovery-check-interval-secs", "9"]).merged_with(file);
    let d = GatewayConfig::from_args(&args).unwrap().discovery.unwrap();
    assert_eq!(d.provider, DiscoveryProvider::File("w.json".into()));
    assert_eq!(
        d.check_interval,
        Duration::from_secs(9),
        "command line wins"
    );
}

#[test]
fn discovery_refusals_name_the_flag() {
    for (argv, needle) in [
        (&["--discovery-provider", "file"][..], "--discovery-file"),
        (
            &["--worker-urls", "http://a:1", "--discovery-file", "w.json"][..],
            "--discovery-file: needs --discovery-provider file",
        ),
        (
            &[
                "--worker-urls",
                "http://a:1",
                "--discovery-check-interval-secs",
                "5",
            ][..],
            "--discovery-check-interval-secs: needs --discovery-provider",
        ),
        (
            &["--discovery-provider", "kubernetes"][..],
            "kubernetes discovery is not supported yet",
        ),
        (&["--discovery-provider", "consul"][..], "unknown provider"),
        (
            &[
                "--discovery-provider",
                "file",
                "--discovery-file",
                "w.json",
                "--discovery-check-interval-secs",
                "0",
            ][..],
            "--discovery-check-interval-secs: must be at least 1",
        ),
        (&[][..], "--worker-urls"),
        (
            &[
                "--pd-disaggregation",
                "--prefill",
                "http://p:1",
                "--decode",
                "http://d:1",
                "--discovery-provider",
                "file",
                "--discovery-file",
                "w.json",
            ][..],
            "--discovery-provider: not supported with --pd-disaggregation",
        ),
    ] {
        let err = refused(argv);
        assert!(err.contains(needle), "{argv:?}: {err}");
    }
}
