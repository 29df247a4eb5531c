//! PD mode's flags and config-file keys (`--pd-disaggregation`, `--prefill URL [PORT|none]`,
//! `--decode`, `--prefill-policy`, `--decode-policy`), and the refusals naming the flag.
#![allow(clippy::unwrap_used, missing_docs)]

use berth_gateway::cli::Args;
use berth_gateway::routing::PolicyKind;
use berth_gateway::{GatewayConfig, PrefillUrl};
use clap::{Args as _, FromArgMatches as _};

fn parse(argv: &[&str]) -> Args {
    let m = Args::augment_args(clap::Command::new("serve"))
        .try_get_matches_from(std::iter::once("serve").chain(argv.iter().copied()))
        .unwrap();
    Args::from_arg_matches(&m).unwrap()
}

fn refused(argv: &[&str]) -> String {
    GatewayConfig::from_args(&parse(argv).resolve().unwrap())
        .unwrap_err()
        .to_string()
}

#[test]
fn smg_pd_flags_parse_with_ports_none_and_per_leg_policies() {
    let a = parse(&[
        "--pd-disaggregation",
        "--prefill",
        "http://p1:8000",
        "9000",
        "--prefill",
        "http://p2:8000",
        "none",
        "--prefill",
        "http://p3:8000",
        "--decode",
        "http://d1:8000",
        "--decode",
        "http://d2:8000",
        "--policy",
        "round_robin",
        "--prefill-policy",
        "manual",
    ]);
    let c = GatewayConfig::from_args(&a).unwrap();
    let pd = c.pd.as_ref().unwrap();
    assert_eq!(
        pd.prefill,
        [
            PrefillUrl {
                url: "http://p1:8000".into(),
                bootstrap_port: Some(9000)
            },
            PrefillUrl {
                url: "http://p2:8000".into(),
                bootstrap_port: None
            },
            PrefillUrl {
                url: "http://p3:8000".into(),
                bootstrap_port: None
            },
        ]
    );
    assert_eq!(pd.prefill_policy, PolicyKind::Manual);
    assert_eq!(c.worker_urls, ["http://d1:8000", "http://d2:8000"]);
    assert_eq!(
        c.router.policy,
        PolicyKind::RoundRobin,
        "decode defaults to --policy"
    );
    let c = GatewayConfig::from_args(&parse(&[
        "--pd-disaggregation",
        "--prefill",
        "http://p1:8000",
        "--decode",
        "http://d1:8000",
        "--policy",
        "manual",
        "--decode-policy",
        "consistent_hashing",
    ]))
    .unwrap();
    assert_eq!(c.router.policy, PolicyKind::ConsistentHashing);
    assert_eq!(c.pd.unwrap().prefill_policy, PolicyKind::Manual);
}

#[test]
fn the_config_file_takes_the_same_keys() {
    let path = std::env::temp_dir().join(format!("berth-pd-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        r#"
pd-disaggregation = true
prefill = ["http://p1:8000 8998", "http://p2:8000 none"]
decode = ["http://d1:8000"]
prefill-policy = "manual"
decode-policy = "round_robin"
"#,
    )
    .unwrap();
    let a = parse(&["--config", path.to_str().unwrap()])
        .resolve()
        .unwrap();
    let c = GatewayConfig::from_args(&a).unwrap();
    let pd = c.pd.unwrap();
    assert_eq!(pd.prefill[0].bootstrap_port, Some(8998));
    assert_eq!(pd.prefill[1].bootstrap_port, None);
    assert_eq!(pd.prefill_policy, PolicyKind::Manual);
    assert_eq!(c.router.policy, PolicyKind::RoundRobin);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn bad_pd_configuration_is_refused_naming_the_flag() {
    let pd = ["--pd-disaggregation"];
    let cases: [(&[&str], &str); 7] = [
        (&["--decode", "http://d:1"], "--prefill"),
        (&["--prefill", "http://p:1"], "--decode"),
        (
            &["--prefill", "http://p:1", "port", "--decode", "http://d:1"],
            "--prefill",
        ),
        (
            &[
                "--prefill",
                "http://p:1",
                "--decode",
                "http://d:1",
                "--worker-urls",
                "http://w:1",
            ],
            "--worker-urls",
        ),
        (
            &[
                "--prefill",
                "http://p:1",
                "--decode",
                "http://d:1",
                "--prefill-policy",
                "best",
            ],
            "--prefill-policy",
        ),
        (
            &["--prefill", "grpc://p:1", "--decode", "http://d:1"],
            "--prefill",
        ),
        (
            &[
                "--prefill",
                "http://p:1",
                "--decode",
                "http://d:1",
                "--policy",
                "manual",
                "--sticky-store",
                "redis://127.0.0.1:1",
            ],
            "--sticky-store",
        ),
    ];
    for (extra, flag) in cases {
        let argv: Vec<&str> = pd.iter().chain(extra).copied().collect();
        let msg = refused(&argv);
        assert!(msg.contains(flag), "{argv:?}: {msg}");
    }
    // PD flags without --pd-disaggregation
    let msg = refused(&["--worker-urls", "http://w:1", "--decode", "http://d:1"]);
    assert!(msg.contains("--decode: needs --pd-disaggregation"), "{msg}");
}
