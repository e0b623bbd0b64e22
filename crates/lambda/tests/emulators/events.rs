//! The committed events/ files, loaded exactly as `sam local invoke -e` would hand them to the
//! handlers (through `lambda_http` and `aws_lambda_events`), signed with the fixture secret at
//! the fixture clock.

use aws_lambda_events::sqs::SqsEvent;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::fulfil::{QueueVisibility, handle_batch};
use paymos_inbox_lambda::ingest::respond;

use paymos_inbox_testkit::*;

fn event(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/events/{name}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
    ))
    .expect("event file")
}

#[tokio::test]
async fn every_function_url_event_gets_its_documented_answer() {
    let aws = Aws::new();
    let table = aws.deliveries_table().await;
    let queue = aws.queue().await.queue_url;
    let ingest = Ingest::new(
        Verifier::new(
            vec![SigningKey::new("test", &WebhookSecret::new(TEST_SECRET))],
            300,
        ),
        DynamoLedger::new(aws.dynamodb.clone(), &table, None),
        SqsQueue::new(aws.sqs.clone(), &queue),
        IngestSettings::default(),
    );
    let expected = [
        ("ingest-invoice-paid.json", 200),
        ("ingest-invoice-confirming.json", 200),
        ("ingest-invoice-paid-over.json", 200),
        ("ingest-withdrawal-completed.json", 200),
        ("ingest-deposit-confirmed.json", 200),
        ("ingest-base64-body.json", 200),
        ("ingest-rotation-two-v1.json", 200),
        ("ingest-bad-signature.json", 401),
        ("ingest-stale-timestamp.json", 401),
        ("ingest-id-mismatch.json", 400),
    ];
    let on_disk = std::fs::read_dir(format!(
        "{}/events",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
    ))
    .unwrap()
    .filter_map(Result::ok)
    .filter(|e| e.file_name().to_string_lossy().starts_with("ingest-"))
    .count();
    assert_eq!(
        on_disk,
        expected.len(),
        "every ingest event has an expected answer here"
    );
    for (name, status) in expected {
        let request =
            lambda_http::request::from_str(&event(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let response = respond(&ingest, &request, NOW_MS).await;
        assert_eq!(response.status(), status, "{name}: {:?}", response.body());
    }
    assert_eq!(
        aws.scan(&table).await.len(),
        7,
        "the seven good events are recorded"
    );
    assert_eq!(aws.drain(&queue).await.len(), 7);
}

#[tokio::test]
async fn sqs_events_apply_and_report_only_the_poison_message() {
    let aws = Aws::new();
    let deliveries = aws.deliveries_table().await;
    // The fixtures are sandbox deliveries (verified by the test secret), recorded by ingest.
    for name in ["fulfil-single.json", "fulfil-batch-with-poison.json"] {
        aws.record_work_items(&deliveries, &event(name), NOW_MS)
            .await;
    }
    let fulfil = Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        aws.state_table().await,
        deliveries,
    ))
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
    .for_environment(paymos_inbox_core::wire::signature::Environment::Test);

    let single: SqsEvent = serde_json::from_str(&event("fulfil-single.json")).unwrap();
    assert!(
        handle_batch(&fulfil, &QueueVisibility, single, NOW_MS)
            .await
            .batch_item_failures
            .is_empty()
    );

    let batch: SqsEvent = serde_json::from_str(&event("fulfil-batch-with-poison.json")).unwrap();
    let poison_id = batch.records[4].message_id.clone().unwrap();
    let response = handle_batch(&fulfil, &QueueVisibility, batch, NOW_MS).await;
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(failed, [poison_id]);
    let state = aws.scan(fulfil.store().table()).await;
    assert_eq!(
        state
            .iter()
            .filter(|i| get_s(i, "kind") == "fulfilment")
            .count(),
        10,
        "1 single + 9 batch"
    );
}
