//! Cost of the `--routing-key-sources` list per request (issue #19): key derivation and the
//! body-path question, with berth's sources on (the default) against SMG's two sources alone
//! (the baseline, measured in the same run).
#![allow(missing_docs, clippy::unwrap_used)]

use berth_routing::{BodyKeys, DEFAULT_KEY_SOURCES, HeaderList, KeyConfig, Source};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

/// One case: name, configuration, headers, body fields.
type Case<'a> = (
    &'a str,
    &'a KeyConfig,
    &'a [(&'a str, &'a [u8])],
    Option<&'a BodyKeys>,
);

fn bench(c: &mut Criterion) {
    let smg = KeyConfig::try_new(false, &["x-smg-routing-key".to_owned()]).unwrap();
    let items: Vec<Source> = DEFAULT_KEY_SOURCES
        .iter()
        .map(|s| Source::parse(s).unwrap())
        .collect();
    let berth = smg.clone().with_sources(items);
    let uuid = "0f8e1c2a-4b5d-4e6f-8a9b-0c1d2e3f4a5b";
    // A typical client's other headers, so a miss walks a realistic list.
    let other: Vec<(&str, &[u8])> = vec![
        ("content-type", b"application/json"),
        ("authorization", b"Bearer sk-0123456789"),
        ("user-agent", b"OpenAI/Python 1.99.0"),
        ("accept", b"application/json"),
    ];
    let mut smg_hdr = other.clone();
    smg_hdr.push(("x-smg-routing-key", uuid.as_bytes()));
    let mut codex_hdr = other.clone();
    codex_hdr.push(("session_id", uuid.as_bytes()));
    let body = BodyKeys {
        prompt_cache_key: Some(uuid.to_owned()),
        ..BodyKeys::default()
    };
    let claude = BodyKeys {
        metadata_user_id: Some(format!("user_{}_account__session_{uuid}", "0".repeat(64))),
        ..BodyKeys::default()
    };
    let mut g = c.benchmark_group("key_sources");
    let cases: [Case<'_>; 7] = [
        ("smg_only/x_smg_routing_key", &smg, &smg_hdr, None),
        ("default/x_smg_routing_key", &berth, &smg_hdr, None),
        ("smg_only/keyless", &smg, &other, None),
        ("default/keyless_no_body", &berth, &other, None),
        ("default/codex_session_id_header", &berth, &codex_hdr, None),
        ("default/prompt_cache_key", &berth, &other, Some(&body)),
        (
            "default/claude_metadata_user_id",
            &berth,
            &other,
            Some(&claude),
        ),
    ];
    for (name, cfg, headers, body) in cases {
        g.bench_function(format!("derive/{name}"), |b| {
            b.iter(|| cfg.derive_with_body(None, black_box(body), &HeaderList(black_box(headers))))
        });
    }
    for (name, cfg, headers) in [
        ("smg_only/keyless", &smg, &other),
        ("default/keyless", &berth, &other),
        ("default/x_smg_routing_key", &berth, &smg_hdr),
    ] {
        g.bench_function(format!("needs_body/{name}"), |b| {
            b.iter(|| cfg.needs_body(&HeaderList(black_box(headers))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
