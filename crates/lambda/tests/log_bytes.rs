//! Issue 39: what the functions write to CloudWatch Logs, measured. Ten deliveries shaped like
//! the typical mix (four open invoices, two withdrawals, two deposits, a paid invoice and its
//! second endpoint's copy), each through ingest in its own invocation, then through fulfil as
//! one batch of ten; and the committed stream fixture through the publisher. Every line and
//! EMF document is counted, written inside the span Lambda's runtime opens (a request id and
//! an X-Ray trace header of AWS's lengths). The bytes are the figures the all-in cost table
//! prices (`crates/core/src/tests/allin.rs`): this test holds them. Its own test binary: the
//! metrics recorder is process-wide.

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::testkit::memory::{
    MemoryLedger, MemoryPublisher, MemoryQueue, MemoryResources, MemoryRetries,
};
use paymos_inbox_core::wire::signature::{Environment, SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::telemetry::{self, FlatJson, filter_for};
use paymos_inbox_testkit::{Captured, LIVE_SECRET, NOW, NOW_MS, delivery, envelope, live, sign};
use serde_json::json;
use tracing::Instrument;
use tracing_subscriber::fmt::format::JsonFields;

/// The bytes of `text`'s lines, without the newlines (CloudWatch stores each line as one log
/// event).
fn line_bytes(text: &str) -> u64 {
    text.lines().map(|l| l.len() as u64).sum()
}

/// The span Lambda's runtime opens around an invocation, with ids of the lengths AWS gives: a
/// request id is a UUID, the trace header names a root, a parent, the sampling decision and
/// the lineage.
fn invocation(n: usize) -> tracing::Span {
    let mut context = lambda_runtime::Context::default();
    context.request_id = format!("8f5b1c2e-4d3a-4b6f-9e1d-{n:012}");
    context.xray_trace_id = Some(format!(
        "Root=1-674d9a3f-{n:024};Parent=53995c3f42cd8ad8;Sampled=0;Lineage=1:a1b2c3d4:0"
    ));
    lambda_runtime::layers::trace::request_span(&context)
}

/// An id of 30 characters: a prefix and 26 (a ULID's length).
fn id(prefix: &str, n: usize) -> String {
    format!("{prefix}_01JDX4K9Q8ZB7N3M5P2R6T{n:04}")
}

/// Ten deliveries shaped like the mix.
fn ten() -> Vec<String> {
    let paid = json!({"invoice_id": id("inv", 9), "status": "paid", "is_final": true,
        "order": {"external_id": "order-10042", "amount": "10.50", "currency": "USDT"}});
    let mut out: Vec<String> = (0..4)
        .map(|n| {
            envelope(
                &id("evt", n),
                "invoice.confirming",
                json!({"invoice_id": id("inv", n), "status": "confirming"}),
            )
        })
        .collect();
    for n in 4..6 {
        out.push(envelope(
            &id("evt", n),
            "withdrawal.completed",
            json!({"withdrawal_id": id("wdr", n), "type": "payout", "amount": "5.00",
                "currency": "USDT"}),
        ));
    }
    for n in 6..8 {
        out.push(envelope(
            &id("evt", n),
            "payment_channel.deposit.confirmed",
            json!({"id": id("pcd", n), "is_final": true,
                "payment_channel_external_id": format!("payer-{n}"), "net": "1.00",
                "currency": "TRX"}),
        ));
    }
    out.push(envelope(&id("evt", 8), "invoice.paid", paid.clone()));
    out.push(envelope(&id("evt", 9), "invoice.paid", paid));
    out
}

/// Bytes per delivery (ingest's, fulfil's) at `level`.
async fn logged_at(level: &str) -> (u64, u64) {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter_for(level))
        .fmt_fields(JsonFields::new())
        .event_format(FlatJson)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // Whether a callsite is enabled is cached: asked again with this level's subscriber.
    tracing::callsite::rebuild_interest_cache();
    let ingest = Ingest::new(
        Verifier::new(
            vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
            300,
        ),
        MemoryLedger::new(),
        MemoryQueue::new(),
        IngestSettings::default(),
    );
    let bodies = ten();
    for (n, body) in bodies.iter().enumerate() {
        // As the ingest binary does per invocation.
        async {
            telemetry::invocation_started();
            let event_id = id("evt", n);
            let request = delivery(body, &event_id, &sign(body, NOW, &[LIVE_SECRET]));
            paymos_inbox_lambda::ingest::respond(&ingest, &request, NOW_MS).await;
            telemetry::flush_metrics_to(out.clone());
        }
        .instrument(invocation(n))
        .await;
    }
    let ingest_bytes = line_bytes(&out.take());

    let mut event = SqsEvent::default();
    event.records = bodies
        .iter()
        .enumerate()
        .map(|(n, body)| {
            let mut message = SqsMessage::default();
            message.message_id = Some(format!("3a7e9f10-6c2b-4d8e-a5f1-{n:012}"));
            message.receipt_handle = Some("AQEB".into());
            // What ingest sent (`crates/aws/src/sqs.rs`): the delivery as a work item.
            message.body = Some(live(body).encode());
            message
                .attributes
                .insert("ApproximateReceiveCount".into(), "1".into());
            message
        })
        .collect();
    assert_eq!(event.records.len(), 10, "every delivery enqueued");
    let fulfil = Fulfil::new(MemoryResources::new())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    // Recorded by ingest before fulfil receives them.
    for body in &bodies {
        fulfil.store().record(&live(body));
    }
    async {
        let response = paymos_inbox_lambda::fulfil::handle_batch(
            &fulfil,
            &MemoryRetries::new(),
            event,
            NOW_MS + 250,
        )
        .await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        telemetry::flush_metrics_to(out.clone());
    }
    .instrument(invocation(10))
    .await;
    let written = out.take();
    // `Monitoring=essential`: no essential alarm reads a delivery's outcome, its age or a
    // credit, so the batch writes no metrics document (`Monitoring=full` writes them).
    assert!(
        !written.lines().any(|l| l.contains("\"_aws\"")),
        "{written}"
    );
    let fulfil_bytes = line_bytes(&written);
    (ingest_bytes / 10, fulfil_bytes / 10)
}

/// The publisher's bytes per event published at `level`: the committed stream fixture
/// (`events/publish-stream.json`: a paid invoice's fulfilment, its invoice, an invoice that
/// closed unpaid, a credited deposit), its ids of 30 characters.
async fn published_at(level: &str) -> u64 {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter_for(level))
        .fmt_fields(JsonFields::new())
        .event_format(FlatJson)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // Whether a callsite is enabled is cached: asked again with this level's subscriber.
    tracing::callsite::rebuild_interest_cache();
    let fixture = include_str!("../../../events/publish-stream.json")
        .replace("inv_stream_1", &id("inv", 1))
        .replace("inv_stream_2", &id("inv", 2))
        .replace("pcd_stream_1", &id("pcd", 3))
        .replace("evt_sqs_single", &id("evt", 4));
    let event: aws_lambda_events::dynamodb::Event =
        serde_json::from_str(&fixture).expect("the stream fixture");
    let publisher = MemoryPublisher::new();
    async {
        let response =
            paymos_inbox_lambda::publish::handle_stream(&publisher, event, Environment::Live).await;
        assert!(response.batch_item_failures.is_empty());
        telemetry::flush_metrics_to(out.clone());
    }
    .instrument(invocation(11))
    .await;
    let events = publisher.published().len() as u64;
    assert_eq!(events, 3, "{:?}", publisher.published());
    line_bytes(&out.take()) / events
}

#[tokio::test]
async fn the_cost_table_prices_the_log_bytes_ingest_and_fulfil_write_for_a_delivery() {
    // The template's default, `Monitoring=essential`: the outcomes no essential alarm reads are
    // counted without their dimension.
    telemetry::init_metrics_with("ingest", |k| {
        (k == paymos_inbox_lambda::config::MONITORING).then(|| "essential".to_owned())
    });
    // The process's cold start, counted once, is not a delivery's.
    telemetry::invocation_started();
    telemetry::flush_metrics_to(std::io::sink());
    let (ingest_info, fulfil_info) = logged_at("INFO").await;
    let (ingest_warn, fulfil_warn) = logged_at("WARN").await;
    let publish = published_at("INFO").await;
    assert_eq!(published_at("WARN").await, 0, "no line per event at WARN");
    println!(
        "log bytes a delivery: ingest {ingest_info} (WARN {ingest_warn}), fulfil {fulfil_info} (WARN {fulfil_warn}); the publisher {publish} an event"
    );
    let priced = format!(
        "LOG_BYTES: Logged = Logged {{ ingest: {ingest_info}, fulfil: {fulfil_info}, ingest_warn: {ingest_warn}, fulfil_warn: {fulfil_warn}, publish: {publish} }};"
    );
    // Compared as rustfmt may lay it out: without spaces, a trailing comma or not.
    let flat = |text: &str| text.replace(char::is_whitespace, "").replace(",}", "}");
    assert!(
        flat(include_str!("../../core/src/tests/allin.rs")).contains(&flat(&priced)),
        "crates/core/src/tests/allin.rs prices other log bytes: write `const {priced}`"
    );
}
