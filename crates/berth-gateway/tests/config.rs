//! Flags, the config file, refusals at start-up, and the flag reference in docs/gateway.md.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::GatewayConfig;
use berth_gateway::cli::Args;
use clap::{Args as _, FromArgMatches as _};

fn command() -> clap::Command {
    Args::augment_args(clap::Command::new("serve"))
}

fn parse(argv: &[&str]) -> Args {
    let m = command()
        .try_get_matches_from(std::iter::once("serve").chain(argv.iter().copied()))
        .unwrap();
    Args::from_arg_matches(&m).unwrap()
}

fn refused(argv: &[&str]) -> String {
    let args = parse(argv).resolve().unwrap();
    GatewayConfig::from_args(&args).unwrap_err().to_string()
}

/// Values the flags accept but the clock cannot represent are refused at start, naming the flag
/// (they used to pass validation and panic later: `Instant + Duration` overflow,
/// `Duration::from_secs_f64` of an unrepresentable wait).
#[test]
fn times_the_clock_cannot_represent_are_refused_naming_the_flag() {
    let w = ["--worker-urls", "http://127.0.0.1:1"];
    let huge = u64::MAX.to_string();
    for flag in [
        "--request-timeout-secs",
        "--cb-timeout-duration-secs",
        "--health-check-interval-secs",
        "--health-check-timeout-secs",
        "--worker-startup-timeout-secs",
        "--shutdown-grace-period-secs",
        "--header-read-timeout-secs",
        "--request-body-timeout-secs",
        "--request-body-idle-timeout-secs",
        "--queue-timeout-secs",
        "--eviction-interval-secs",
    ] {
        let argv = [w[0], w[1], flag, huge.as_str()];
        let msg = refused(&argv);
        assert!(msg.contains(flag), "{argv:?}: {msg}");
    }
    let tiny_rate = [w[0], w[1], "--rate-limit-tokens-per-second", "1e-300"];
    assert!(refused(&tiny_rate).contains("--rate-limit-tokens-per-second"));
    // the largest accepted values still start
    let year = (100 * 365 * 86_400u64).to_string();
    let ok = parse(&[w[0], w[1], "--request-timeout-secs", year.as_str()]);
    GatewayConfig::from_args(&ok.resolve().unwrap()).unwrap();
}

#[test]
fn every_flag_and_alias_is_in_the_docs() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/gateway.md"
    ))
    .unwrap();
    let mut n = 0;
    for arg in command().get_arguments() {
        let names = arg
            .get_long()
            .into_iter()
            .chain(arg.get_all_aliases().unwrap_or_default());
        for long in names {
            n += 1;
            assert!(
                doc.contains(&format!("`--{long}`")),
                "docs/gateway.md lacks `--{long}`"
            );
        }
    }
    assert!(n >= 36, "{n} flags");
}

#[test]
fn smg_flag_names_parse() {
    let a = parse(&[
        "--worker-urls",
        "http://a:1",
        "http://b:2",
        "--policy",
        "manual",
        "--sticky-sessions",
        "--routing-key-headers",
        "x-a",
        "x-b",
        "--assignment-mode",
        "min_load",
        "--eviction-interval",
        "5",
        "--max-idle-secs",
        "60",
        "--cb-failure-threshold",
        "4",
        "--api-key",
        "k",
        "--log-level",
        "debug",
    ]);
    assert!(a.routing_key_override);
    let c = GatewayConfig::from_args(&a).unwrap();
    assert_eq!(c.worker_urls.len(), 2);
    assert_eq!(c.router.routing_key_headers, ["x-a", "x-b"]);
    assert_eq!(c.router.eviction_interval_secs, 5);
    assert_eq!(c.breaker.failure_threshold, 4);
    assert!(
        !format!("{c:?}").contains("\"k\""),
        "keys never in Debug output"
    );
}

#[test]
fn bad_configuration_is_refused_naming_the_flag() {
    let w = ["--worker-urls", "http://127.0.0.1:1"];
    let cases: [(&[&str], &str); 8] = [
        (
            &["--routing-key-headers", "bad header"],
            "--routing-key-headers",
        ),
        (
            &["--eviction-interval-secs", "0"],
            "--eviction-interval-secs",
        ),
        (&["--cache-threshold", "1.5"], "--cache-threshold"),
        (
            &["--balance-rel-threshold", "0.5"],
            "--balance-rel-threshold",
        ),
        (&["--cb-failure-threshold", "0"], "--cb-failure-threshold"),
        (
            &["--health-success-threshold", "0"],
            "--health-success-threshold",
        ),
        (&["--policy", "fastest"], "--policy"),
        (
            &["--policy", "manual", "--assignment-mode", "delegate"],
            "--assignment-mode",
        ),
    ];
    for (extra, flag) in cases {
        let argv: Vec<&str> = w.iter().chain(extra).copied().collect();
        let msg = refused(&argv);
        assert!(msg.contains(flag), "{argv:?}: {msg}");
    }
    assert!(refused(&[]).contains("--worker-urls"));
    assert!(refused(&["--worker-urls", "grpc://x:1"]).contains("--worker-urls"));
    // `--eviction-interval-secs 0` is fine with a policy other than cache_aware.
    let ok = parse(&[
        "--worker-urls",
        "http://a:1",
        "--policy",
        "manual",
        "--eviction-interval-secs",
        "0",
    ]);
    assert!(GatewayConfig::from_args(&ok).is_ok());
}

#[test]
fn admission_flags_follow_smg() {
    let w = ["--worker-urls", "http://127.0.0.1:1"];
    let off = GatewayConfig::from_args(&parse(&w)).unwrap();
    assert!(!off.admission.enabled(), "off by default, as in SMG");
    assert_eq!(off.admission.queue_size, 100);
    assert_eq!(off.admission.queue_timeout, Duration::from_secs(60));
    let minus = parse(&[w[0], w[1], "--max-concurrent-requests", "-1"]);
    assert!(
        !GatewayConfig::from_args(&minus)
            .unwrap()
            .admission
            .enabled()
    );
    let on = parse(&[
        w[0],
        w[1],
        "--max-concurrent-requests",
        "64",
        "--queue-size",
        "0",
        "--queue-timeout-secs",
        "5",
        "--rate-limit-tokens-per-second",
        "12.5",
    ]);
    let a = GatewayConfig::from_args(&on).unwrap().admission;
    assert_eq!(a.max_concurrent, Some(64));
    assert_eq!(a.queue_size, 0);
    assert_eq!(a.queue_timeout, Duration::from_secs(5));
    assert_eq!(a.rate, Some(12.5));
    assert_eq!(a.burst(), 64.0);
    let bad_rate = [w[0], w[1], "--rate-limit-tokens-per-second", "0"];
    assert!(refused(&bad_rate).contains("--rate-limit-tokens-per-second"));
    let bad_timeout = [
        w[0],
        w[1],
        "--max-concurrent-requests",
        "4",
        "--queue-timeout-secs",
        "0",
    ];
    assert!(refused(&bad_timeout).contains("--queue-timeout-secs"));
    let path = std::env::temp_dir().join(format!("berth-adm-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "worker-urls = [\"http://f:1\"]\nmax-concurrent-requests = 8\nqueue-size = 3\n",
    )
    .unwrap();
    let a = parse(&["--config", path.to_str().unwrap()])
        .resolve()
        .unwrap();
    let c = GatewayConfig::from_args(&a).unwrap().admission;
    assert_eq!((c.max_concurrent, c.queue_size), (Some(8), 3));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn the_config_file_fills_what_the_command_line_leaves_out() {
    let path = std::env::temp_dir().join(format!("berth-gw-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "worker-urls = [\"http://f:1\"]\npolicy = \"consistent_hashing\"\nport = 1234\nsticky-sessions = true\nmax-sticky-keys = 7\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let a = parse(&["--config", p, "--port", "4321"]).resolve().unwrap();
    assert_eq!(a.port, Some(4321), "command line wins");
    assert_eq!(a.worker_urls, ["http://f:1"]);
    assert!(a.routing_key_override);
    let c = GatewayConfig::from_args(&a).unwrap();
    assert_eq!(c.router.policy.as_str(), "consistent_hashing");
    assert_eq!(c.router.max_sticky_keys, 7);
    std::fs::write(&path, "no-such-flag = 1\n").unwrap();
    let err = parse(&["--config", p]).resolve().unwrap_err().to_string();
    assert!(
        err.contains("--config") && err.contains("no-such-flag"),
        "{err}"
    );
    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn an_unreachable_worker_is_registered_unhealthy() {
    let w = common::sims(1).await;
    let spare = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let spare_url = format!("http://{}", spare.local_addr().unwrap());
    drop(spare);
    let mut c = common::config(&w);
    c.worker_urls.push(spare_url.clone());
    c.worker_startup_timeout = Duration::from_millis(300);
    let g = common::start(c).await;
    assert!(!common::healthy(&g.client, &spare_url).await);
    assert!(common::healthy(&g.client, &w[0].url()).await);
    g.gw.shutdown().await;
}

#[test]
fn load_monitoring_and_overload_protection_take_smg_flags() {
    let args = parse(&[
        "--worker-urls",
        "http://a:1",
        "--worker-overload-waiting-requests",
        "4",
        "--worker-overload-token-usage",
        "0.9",
        "--worker-overload-protection",
        "--worker-overload-shed",
        "--load-monitor-interval",
        "3",
        "--disable-load-monitoring",
    ]);
    let c = GatewayConfig::from_args(&args.resolve().unwrap()).unwrap();
    let o = c.router.overload;
    assert!(o.enabled && o.shed);
    assert_eq!((o.waiting_requests, o.token_usage), (4, 0.9));
    assert_eq!(c.load_monitor.interval, Duration::from_secs(3));
    assert!(!c.load_monitor.always);
    // defaults are SMG's: on, 8 waiting, 0.8 usage, polled every 10 s, no shedding
    let d = GatewayConfig::from_args(&parse(&["--worker-urls", "http://a:1"])).unwrap();
    let o = d.router.overload;
    assert!(o.enabled && !o.shed);
    assert_eq!((o.waiting_requests, o.token_usage), (8, 0.8));
    assert_eq!(d.load_monitor.interval, Duration::from_secs(10));
    assert!(d.load_monitor.always);
    let off = parse(&[
        "--worker-urls",
        "http://a:1",
        "--disable-worker-overload-protection",
    ]);
    assert!(
        !GatewayConfig::from_args(&off)
            .unwrap()
            .router
            .overload
            .enabled
    );
    for (flag, value) in [
        ("--worker-overload-waiting-requests", "0"),
        ("--worker-overload-token-usage", "0"),
        ("--worker-overload-token-usage", "1.5"),
        ("--load-monitor-interval", "0"),
    ] {
        let msg = refused(&["--worker-urls", "http://a:1", flag, value]);
        assert!(msg.contains(flag), "{msg}");
    }
}
