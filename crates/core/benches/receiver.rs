//! CPU cost of the receiver, each figure printed as a ratio against a baseline measured in the
//! same run: `make bench`.
//!
//! - verify: ours vs the official `paymos::WebhookVerifier` (one verifier per configured secret,
//!   tried in turn, as a merchant with several secrets must) vs the floor, one bare
//!   HMAC-SHA256 of `t.body` per configured secret. Two-`v1` rotation header, the matching
//!   secret configured last (the worst case for both).
//! - ingest per request with in-memory ports: new, duplicate, bad signature (1 KiB).
//! - fulfil per message with a no-op store: the CPU of parsing and deciding the change.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion};
use hmac::{KeyInit, Mac};
use paymos_inbox_core::money::write::{Stored, Write};
use paymos_inbox_core::roads::fulfil::{Fulfil, ResourceStore};
use paymos_inbox_core::roads::ingest::{Inbound, Ingest, IngestSettings, PortError};
use paymos_inbox_core::testkit::memory::{MemoryLedger, MemoryQueue};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret, signature_header};

const NOW: u64 = 1_700_000_000;

fn body_of(size: usize, event_id: &str) -> Vec<u8> {
    let head = format!(
        r#"{{"event_id":"{event_id}","event_type":"invoice.paid","version":1,"occurred_at":{NOW},"data":{{"invoice_id":"inv_bench","status":"paid","is_test":false,"order":{{"external_id":"order-1","amount":"25.00","currency":"USDT"}},"pad":""#
    );
    let mut body = head.into_bytes();
    let tail = b"\"}}";
    body.resize(size - tail.len(), b'x');
    body.extend_from_slice(tail);
    body
}

fn secrets(n: usize) -> Vec<WebhookSecret> {
    (0..n)
        .map(|i| WebhookSecret::new(format!("whsec_live_bench_secret_{i}")))
        .collect()
}

fn bench_verify(c: &mut Criterion) {
    for size in [1024, 64 * 1024] {
        let body = body_of(size, "evt_bench");
        for n in [1, 2, 4] {
            let configured = secrets(n);
            let current = configured.last().expect("one secret at least");
            let retired = WebhookSecret::new("whsec_live_bench_retired");
            let header = signature_header(NOW, &body, &[&retired, current]);
            let group_name = format!(
                "verify_{}KiB_{n}secret{}",
                size / 1024,
                if n > 1 { "s" } else { "" }
            );
            let mut group = c.benchmark_group(&group_name);
            let ours = Verifier::new(
                configured
                    .iter()
                    .enumerate()
                    .map(|(i, s)| SigningKey::new(format!("live-{i}"), s))
                    .collect(),
                300,
            );
            group.bench_function("ours", |b| {
                b.iter(|| {
                    black_box(ours.verify(Some(black_box(&header)), black_box(&body), NOW)).is_ok()
                })
            });
            let official: Vec<paymos::WebhookVerifier> = configured
                .iter()
                .map(|s| paymos::WebhookVerifier::new(s.expose()).expect("a verifier"))
                .collect();
            #[allow(clippy::cast_possible_wrap)]
            let now = NOW as i64;
            group.bench_function("paymos_sdk", |b| {
                b.iter(|| {
                    black_box(official.iter().any(|v| {
                        v.verify_at(black_box(&header), black_box(&body), now)
                            .is_ok()
                    }))
                })
            });
            let keys: Vec<hmac::Hmac<sha2::Sha256>> = configured
                .iter()
                .map(|s| {
                    <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(s.expose().as_bytes())
                        .expect("key")
                })
                .collect();
            group.bench_function("bare_hmac", |b| {
                b.iter(|| {
                    for k in &keys {
                        let mut mac = k.clone();
                        mac.update(b"1700000000.");
                        mac.update(black_box(&body));
                        black_box(mac.finalize());
                    }
                })
            });
            group.finish();
        }
    }
}

fn ingest_with(ledger: MemoryLedger) -> Ingest<MemoryLedger, MemoryQueue> {
    let secret = WebhookSecret::new("whsec_live_bench_secret_0");
    Ingest::new(
        Verifier::new(vec![SigningKey::new("live", &secret)], 300),
        ledger,
        MemoryQueue::new(),
        IngestSettings::default(),
    )
}

fn bench_ingest(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let secret = WebhookSecret::new("whsec_live_bench_secret_0");
    let mut group = c.benchmark_group("ingest_1KiB");
    let ingest = ingest_with(MemoryLedger::new());
    let mut n = 0u64;
    group.bench_function("new", |b| {
        b.iter_batched(
            || {
                n += 1;
                let body = body_of(1024, &format!("evt_new_{n}"));
                let header = signature_header(NOW, &body, &[&secret]);
                (body, header)
            },
            |(body, header)| {
                let req = Inbound {
                    method: "POST",
                    signature: Some(&header),
                    webhook_id: None,
                    body: &body,
                };
                black_box(rt.block_on(ingest.handle(&req, NOW * 1000)).is_ok())
            },
            BatchSize::SmallInput,
        );
    });
    let body = body_of(1024, "evt_dup");
    let header = signature_header(NOW, &body, &[&secret]);
    let req = Inbound {
        method: "POST",
        signature: Some(&header),
        webhook_id: None,
        body: &body,
    };
    rt.block_on(ingest.handle(&req, NOW * 1000))
        .expect("first delivery");
    ingest.ledger().mark_processed("evt_dup");
    group.bench_function("duplicate", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(ingest.handle(black_box(&req), NOW * 1000))
                    .is_ok(),
            )
        })
    });
    let bad = signature_header(NOW, b"something else", &[&secret]);
    let bad_req = Inbound {
        method: "POST",
        signature: Some(&bad),
        webhook_id: None,
        body: &body,
    };
    group.bench_function("bad_signature", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(ingest.handle(black_box(&bad_req), NOW * 1000))
                    .is_err(),
            )
        })
    });
    group.finish();
}

/// A store that applies nothing: the fulfil figure is the CPU of parsing and deciding.
struct NoopStore;

impl ResourceStore for NoopStore {
    async fn write(&self, _: &[Write]) -> Result<Stored, PortError> {
        Ok(Stored::Committed)
    }

    async fn read(
        &self,
        _: &paymos_inbox_core::money::write::Key,
    ) -> Result<Option<paymos_inbox_core::money::write::Fields>, PortError> {
        Ok(None)
    }
}

fn bench_fulfil(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let fulfil = Fulfil::new(NoopStore);
    let body = paymos_inbox_core::wire::work::WorkItem {
        event_id: "evt_fulfil".into(),
        environment: Some(paymos_inbox_core::wire::signature::Environment::Live),
        body: body_of(1024, "evt_fulfil"),
        received_at_ms: None,
    };
    let mut group = c.benchmark_group("fulfil_1KiB");
    group.bench_function("decide", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(fulfil.apply(black_box(&body), NOW * 1000))
                    .is_ok(),
            )
        })
    });
    group.finish();
}

/// Reads criterion's mean estimate (ns) of `group/bench` from this run.
fn mean_ns(group: &str, bench: &str) -> Option<f64> {
    let dir = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/target", concat!(env!("CARGO_MANIFEST_DIR"), "/../..")));
    let path = format!("{dir}/criterion/{group}/{bench}/new/estimates.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

fn print_ratios() {
    println!("\n== ratios (same run; lower is faster) ==");
    println!(
        "{:<24} {:>10} {:>12} {:>12} {:>16} {:>18}",
        "verify", "ours µs", "official µs", "floor µs", "official / ours", "ours / bare HMAC"
    );
    for size in [1, 64] {
        for n in [1, 2, 4] {
            let g = format!("verify_{size}KiB_{n}secret{}", if n > 1 { "s" } else { "" });
            if let (Some(o), Some(p), Some(b)) = (
                mean_ns(&g, "ours"),
                mean_ns(&g, "paymos_sdk"),
                mean_ns(&g, "bare_hmac"),
            ) {
                println!(
                    "{g:<24} {:>10.2} {:>12.2} {:>12.2} {:>15.2}x {:>17.2}x",
                    o / 1e3,
                    p / 1e3,
                    b / 1e3,
                    p / o,
                    o / b
                );
            }
        }
    }
    for (bench, target) in [("new", 50.0), ("duplicate", 30.0), ("bad_signature", 10.0)] {
        if let Some(t) = mean_ns("ingest_1KiB", bench) {
            println!(
                "ingest 1 KiB {bench:<14} {:>8.2} µs   (target <= {target} µs: {:.2} of it)",
                t / 1e3,
                t / 1e3 / target
            );
        }
    }
    if let Some(t) = mean_ns("fulfil_1KiB", "decide") {
        println!("fulfil 1 KiB decide        {:>8.2} µs", t / 1e3);
    }
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_verify(&mut c);
    bench_ingest(&mut c);
    bench_fulfil(&mut c);
    c.final_summary();
    print_ratios();
}
