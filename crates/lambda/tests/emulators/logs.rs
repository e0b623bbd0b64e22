//! The logs of a full run never contain a secret or a body, even at TRACE: they name the event
//! and the problem only (and the SDK's wire logs stay capped at INFO).

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::ingest::respond;

use paymos_inbox_testkit::*;

#[tokio::test(flavor = "current_thread")]
async fn logs_of_a_full_run_hold_no_secret_and_no_body() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        // The most a merchant can ask for (ApplicationLogLevel: TRACE), with our filter.
        .with_env_filter(paymos_inbox_lambda::telemetry::filter_for("trace"))
        .with_writer(move || writer.clone())
        .finish();
    // Process-wide: a thread-local subscriber misses events while other tests' threads hit the
    // same callsites (tracing caches callsite interest globally). So this also sees every
    // other test's logs, which must hold no secret either.
    tracing::subscriber::set_global_default(subscriber)
        .expect("only this test installs a subscriber");

    let aws = Aws::new();
    let stack = aws.stack().await;
    let ingest = Ingest::new(
        Verifier::new(
            vec![
                SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET)),
                SigningKey::new("test", &WebhookSecret::new(TEST_SECRET)),
            ],
            300,
        ),
        DynamoLedger::new(aws.dynamodb.clone(), stack.table("DeliveriesTable"), None),
        SqsQueue::new(aws.sqs.clone(), stack.queue("WorkQueue")),
        IngestSettings::default(),
    );
    let fulfil = Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        stack.table("StateTable"),
        stack.table("DeliveriesTable"),
    ))
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    let sentinel = "SENTINEL-card-4242-4242";
    let body = envelope(
        "evt_logs",
        "invoice.paid",
        serde_json::json!({"invoice_id": "inv_logs", "is_test": false, "note": sentinel,
        "order": {"external_id": "order-logs", "amount": "10.50", "currency": "USDT"}}),
    );
    let other = body.replace("10.50", "99.99");
    let bad_type = body.replace("\"version\":1", &format!("\"version\":\"{sentinel}\""));
    let requests = [
        delivery(&body, "evt_logs", &sign(&body, NOW, &[LIVE_SECRET])),
        delivery(&body, "evt_logs", &sign(&body, NOW, &["whsec_live_wrong"])),
        delivery(&body, "evt_logs", &sign(&body, NOW, &[TEST_SECRET])),
        delivery(&bad_type, "evt_logs", &sign(&bad_type, NOW, &[LIVE_SECRET])),
    ];
    for r in &requests {
        respond(&ingest, r, NOW_MS).await;
    }
    fulfil.apply(&live(&body), NOW_MS).await.unwrap();
    respond(
        &ingest,
        &delivery(&other, "evt_logs", &sign(&other, NOW, &[LIVE_SECRET])),
        NOW_MS,
    )
    .await;
    let messages = aws.drain(stack.queue("WorkQueue")).await;
    let event: aws_lambda_events::sqs::SqsEvent = serde_json::from_value(serde_json::json!({"Records": messages.iter().map(|m| serde_json::json!({
        "messageId": m.message_id(), "body": m.body(), "attributes": {}, "messageAttributes": {}})).collect::<Vec<_>>()})).unwrap();
    paymos_inbox_lambda::fulfil::handle_batch(
        &fulfil,
        &paymos_inbox_lambda::fulfil::QueueVisibility,
        event,
        NOW_MS,
    )
    .await;

    let logs = captured.text();
    for expected in [
        "delivery acknowledged",
        "delivery refused",
        "signature_mismatch",
        "environment_mismatch",
        "invalid_payload",
        "different body",
        "delivery applied",
    ] {
        assert!(
            logs.contains(expected),
            "the logs say {expected:?}:\n{logs}"
        );
    }
    for secret in [
        LIVE_SECRET,
        TEST_SECRET,
        "whsec_live_wrong",
        sentinel,
        &body,
        "order-logs",
    ] {
        assert!(
            !logs.contains(secret),
            "the logs must not contain {secret:?}:\n{logs}"
        );
    }
}
