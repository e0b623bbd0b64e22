//! What the functions print, parsed: the flat JSON log lines and the EMF metric documents of
//! real deliveries through the ingest and fulfil handlers on the emulators. Its own test binary:
//! the subscriber and the metrics recorder are process-wide, and the counts must be this
//! test's alone.

#![allow(
    clippy::too_many_lines,
    reason = "an emulator test reads top to bottom as one scenario"
)]

use std::collections::BTreeMap;
use std::str::FromStr as _;

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::fulfil::QueueVisibility;
use paymos_inbox_lambda::ingest::respond;
use paymos_inbox_lambda::telemetry::{self, metric};
use paymos_inbox_local::poller::poll_once;
use serde_json::{Value, json};
use tracing::Instrument;

use paymos_inbox_testkit::*;

/// The span Lambda's runtime opens around an invocation.
fn invocation(request_id: &str) -> tracing::Span {
    let mut context = lambda_runtime::Context::default();
    context.request_id = request_id.to_owned();
    lambda_runtime::layers::trace::request_span(&context)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_emf_metrics_tell_what_happened_to_every_delivery() {
    let out = Captured::default();
    let writer = out.clone();
    tracing::subscriber::set_global_default(telemetry::json_subscriber(move || writer.clone()))
        .expect("the only subscriber of this process");
    telemetry::init_metrics("test");

    let aws = Aws::new();
    let stack = aws.stack().await;
    let queue = aws.queue_with(1, 3).await.queue_url;
    let ingest = Ingest::new(
        Verifier::new(
            vec![
                SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET)),
                SigningKey::new("test", &WebhookSecret::new(TEST_SECRET)),
            ],
            300,
        ),
        DynamoLedger::new(aws.dynamodb.clone(), stack.table("DeliveriesTable"), None),
        SqsQueue::new(aws.sqs.clone(), &queue),
        IngestSettings::default(),
    );
    let fulfil = Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        stack.table("StateTable"),
        stack.table("DeliveriesTable"),
    ))
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));

    // What Paymos sends: three paid invoices (one of them twice), a deposit, and a forgery.
    let mut sends: Vec<(String, String, String)> = (1..=3)
        .map(|i| {
            let id = format!("evt_obs{i}");
            let body = invoice_paid(&id, &format!("inv_obs{i}"));
            let sig = sign(&body, NOW, &[LIVE_SECRET]);
            (id, body, sig)
        })
        .collect();
    let again = sends[0].clone();
    let deposit = envelope(
        "evt_obs_dep",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_obs", "is_final": true, "payment_channel_external_id": "payer-1", "currency": "USDT", "net": "7.25"}),
    );
    let sig = sign(&deposit, NOW, &[LIVE_SECRET]);
    sends.push(("evt_obs_dep".into(), deposit, sig));
    let forged = invoice_paid("evt_obs_forged", "inv_obs_forged");
    sends.push((
        "evt_obs_forged".into(),
        forged.clone(),
        sign(&forged, NOW, &["whsec_live_not_ours"]),
    ));

    for (i, (id, body, sig)) in sends.iter().enumerate() {
        // As the ingest binary does per invocation.
        async {
            telemetry::invocation_started();
            respond(&ingest, &delivery(body, id, sig), NOW_MS).await;
            telemetry::flush_metrics_to(out.clone());
        }
        .instrument(invocation(&format!("req-ingest-{i}")))
        .await;
    }
    // Another body under a recorded `event_id`, queued as a work item (a put that lost its
    // condition leaves one): acknowledged, not applied, and counted as such.
    aws.sqs
        .send_message()
        .queue_url(&queue)
        .message_body(live(&invoice_paid("evt_obs2", "inv_obs_other")).encode())
        .send()
        .await
        .unwrap();
    for i in 0..5 {
        let polled = async {
            let polled = poll_once((&aws.sqs, &queue, &QueueVisibility), &fulfil, 10, 0, || {
                NOW_MS + 250
            })
            .await
            .unwrap();
            telemetry::flush_metrics_to(out.clone());
            polled
        }
        .instrument(invocation(&format!("req-fulfil-{i}")))
        .await;
        if polled.received == 0 {
            break;
        }
    }

    // The first invoice's event again, once it was processed: a duplicate. Then a sandbox
    // delivery reusing its id: recorded on its own, and the reuse counted.
    let reused = envelope(
        &again.0,
        "invoice.paid",
        json!({"invoice_id": "inv_obs1", "is_test": true}),
    );
    let reused_sig = sign(&reused, NOW, &[TEST_SECRET]);
    async {
        respond(&ingest, &delivery(&again.1, &again.0, &again.2), NOW_MS).await;
        respond(&ingest, &delivery(&reused, &again.0, &reused_sig), NOW_MS).await;
        telemetry::flush_metrics_to(out.clone());
    }
    .instrument(invocation("req-ingest-again"))
    .await;

    let text = out.text();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();

    // Lambda's JSON log format: every line, logs and EMF alike, has an RFC 3339 timestamp and
    // a level; with ApplicationLogLevel at INFO (what the docs say to keep), Lambda keeps a
    // line whose level is INFO or above, so every metric survives it.
    let kept_at = |level: &str| {
        ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]
            .iter()
            .position(|l| *l == level)
            .unwrap_or(0)
            >= 2
    };
    for line in &lines {
        let at = line["timestamp"].as_str().unwrap_or_default();
        assert!(
            jiff::Timestamp::from_str(at).is_ok(),
            "an RFC 3339 timestamp: {line}"
        );
        let level = line["level"].as_str().unwrap_or_default();
        assert!(!level.is_empty(), "a level: {line}");
        if line.get("_aws").is_some() {
            assert!(
                kept_at(level),
                "EMF survives ApplicationLogLevel=INFO: {line}"
            );
        }
    }
    assert!(
        lines.iter().any(|l| l.get("_aws").is_some()),
        "EMF lines were written"
    );

    // EMF: valid documents, and the counts match what was sent.
    let mut sums: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut ages = 0;
    for doc in lines.iter().filter(|l| l.get("_aws").is_some()) {
        let aws_block = &doc["_aws"];
        assert!(aws_block["Timestamp"].as_u64().is_some(), "{doc}");
        let directives = aws_block["CloudWatchMetrics"].as_array().unwrap();
        assert_eq!(directives.len(), 1, "{doc}");
        let directive = &directives[0];
        assert_eq!(directive["Namespace"], metric::NAMESPACE);
        let dimension_sets = directive["Dimensions"].as_array().unwrap();
        for set in dimension_sets {
            let names: Vec<&str> = set
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().unwrap())
                .collect();
            assert_eq!(names[0], metric::STACK, "{doc}");
            assert!(
                names
                    .iter()
                    .all(|n| [metric::STACK, metric::OUTCOME].contains(n))
            );
            for n in names {
                assert!(doc[n].is_string(), "dimension {n} has a value: {doc}");
            }
        }
        assert_eq!(doc[metric::STACK], "local");
        for m in directive["Metrics"].as_array().unwrap() {
            let name = m["Name"].as_str().unwrap();
            assert!(metric::ALL.contains(&name), "{name}");
            if name == metric::DELIVERY_AGE {
                assert_eq!(m["Unit"], "Milliseconds");
                let values = doc[name]
                    .as_array()
                    .expect("a histogram is a list of values");
                assert!(values.iter().all(|v| v.as_f64() == Some(250.0)), "{doc}");
                ages += values.len();
                continue;
            }
            let value = doc[name]
                .as_f64()
                .unwrap_or_else(|| panic!("{name} has a value: {doc}"));
            let outcome = doc[metric::OUTCOME].as_str().unwrap_or("").to_owned();
            *sums.entry((name.to_owned(), outcome)).or_default() += value;
        }
    }
    let sum = |name: &str, outcome: &str| {
        sums.get(&(name.to_owned(), outcome.to_owned()))
            .copied()
            .unwrap_or(0.0)
    };
    assert_eq!(sum(metric::INGEST_ANSWERS, "new"), 5.0, "{sums:?}");
    assert_eq!(sum(metric::CROSS_ENVIRONMENT_IDS, ""), 1.0, "{sums:?}");
    assert_eq!(sum(metric::INGEST_ANSWERS, "duplicate"), 1.0, "{sums:?}");
    assert_eq!(
        sum(metric::INGEST_ANSWERS, "signature_mismatch"),
        1.0,
        "{sums:?}"
    );
    assert_eq!(sum(metric::FULFIL_OUTCOMES, "fulfilled"), 3.0, "{sums:?}");
    assert_eq!(sum(metric::FULFIL_OUTCOMES, "credited"), 1.0, "{sums:?}");
    assert_eq!(
        sum(metric::FULFIL_OUTCOMES, "not_applied"),
        1.0,
        "the other body, acknowledged unapplied: {sums:?}"
    );
    assert_eq!(sum(metric::DEPOSITS_CREDITED, ""), 1.0, "{sums:?}");
    assert_eq!(
        sum(metric::COLD_STARTS, ""),
        1.0,
        "one cold start: {sums:?}"
    );
    assert_eq!(ages, 4, "an age per applied delivery");

    // Logs: flat, and every line about a delivery names its event and the invocation (ingest's
    // answer is one line that also counts it: an EMF document with the delivery's fields).
    let deliveries: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("event_id").is_some())
        .collect();
    assert!(deliveries.len() >= 10, "{text}");
    for line in &deliveries {
        assert!(
            line["requestId"]
                .as_str()
                .is_some_and(|r| r.starts_with("req-")),
            "{line}"
        );
        assert!(
            line.get("fields").is_none() && line.get("span").is_none(),
            "flat: {line}"
        );
    }
    let refused = deliveries
        .iter()
        .find(|l| l["message"] == "delivery refused")
        .expect("the forgery's refusal is logged");
    assert_eq!(refused["event_id"], "evt_obs_forged", "from X-Webhook-Id");
    assert_eq!(refused["error"], "signature_mismatch");
    let applied: Vec<_> = deliveries
        .iter()
        .filter(|l| l["message"] == "delivery applied")
        .collect();
    assert_eq!(applied.len(), 4);
    assert!(
        applied
            .iter()
            .all(|l| l["requestId"].as_str().unwrap().starts_with("req-fulfil-"))
    );
    for line in lines
        .iter()
        .filter(|l| l["message"] == "delivery acknowledged")
    {
        assert!(
            line["event_type"].is_string() && line["event_id"].is_string(),
            "{line}"
        );
        assert_eq!(
            line[metric::INGEST_ANSWERS],
            1,
            "counted once, by itself: {line}"
        );
        assert_eq!(line[metric::OUTCOME], line["outcome"], "{line}");
    }
    assert_eq!(refused[metric::OUTCOME], "signature_mismatch", "{refused}");

    // Never a secret or a body.
    assert!(
        !text.contains(LIVE_SECRET) && !text.contains("whsec_"),
        "a secret leaked"
    );
    assert!(
        !text.contains("payment_channel_external_id") && !text.contains("10.50"),
        "a body leaked"
    );
}
