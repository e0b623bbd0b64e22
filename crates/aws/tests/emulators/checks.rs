//! Issue 51, the delayed check on DynamoDB Local and fauxqs: a new delivery's work and its
//! check go in one `SendMessageBatch` before its record, the check with a message timer; its
//! record is listed for the sweep only when the check finds it unprocessed, or when no check
//! was queued. What decides here is the queue's timer and the ledger's conditions.

use std::time::Duration;

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::fulfil::{Checked, Fulfil, FulfilError};
use paymos_inbox_core::roads::ingest::{Delivery, Inbound, Ingest, IngestSettings, WorkQueue};
use paymos_inbox_core::roads::sweep::sweep_stranded;
use paymos_inbox_core::wire::signature::{Environment, SigningKey, Verifier, WebhookSecret};
use paymos_inbox_core::wire::work::{Check, QueueMessage, WorkItem};

use paymos_inbox_testkit::*;

const MINUTE: u64 = 60_000;

async fn deliver<Q: WorkQueue>(ingest: &Ingest<DynamoLedger, Q>, body: &str) {
    let signature = sign(body, NOW, &[LIVE_SECRET]);
    let request = Inbound {
        method: "POST",
        signature: Some(&signature),
        webhook_id: None,
        body: body.as_bytes(),
    };
    ingest.handle(&request, NOW_MS).await.expect("acknowledged");
}

fn ingest<Q: WorkQueue>(
    ledger: &DynamoLedger,
    queue: Q,
    check_after_secs: u32,
) -> Ingest<DynamoLedger, Q> {
    let verifier = Verifier::new(
        vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
        300,
    );
    let settings = IngestSettings {
        check_after_secs,
        ..IngestSettings::default()
    };
    Ingest::new(verifier, ledger.clone(), queue, settings)
}

fn decoded(message: &aws_sdk_sqs::types::Message) -> QueueMessage {
    QueueMessage::decode(message.body().unwrap_or_default()).expect("a queue message")
}

// The guarantee the dense index gave, kept: the sender gave up after one attempt and fulfil
// fails for longer than the check's delay (its work stays out of sight); the check, due after
// its timer, lists the record, the sweep finds it in the index and sends it again, and once
// fulfil recovers it is applied. No scan anywhere.
#[tokio::test]
async fn a_delivery_whose_sender_gave_up_is_found_by_its_check_and_applied() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let queue = aws.queue().await;
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let sqs = SqsQueue::new(aws.sqs.clone(), &queue.queue_url);
    deliver(
        &ingest(&ledger, sqs.clone(), 2),
        &invoice_paid("evt_c1", "inv_c1"),
    )
    .await;
    let record = aws.item(deliveries, "event_id", "evt_c1").await.unwrap();
    assert!(
        !record.contains_key("pending_shard"),
        "listed nowhere: no index write for a delivery that will be processed"
    );
    // Its work is there at once; its check is not (its message timer). Fulfil fails: the work
    // stays out of sight for the queue's visibility timeout.
    let now = aws.drain(&queue.queue_url).await;
    assert_eq!(now.len(), 1, "the work alone: the check waits");
    assert!(matches!(decoded(&now[0]), QueueMessage::Work(_)));
    let (l, q) = (&ledger, &sqs);
    let sweep_at = move |now: u64| async move {
        sweep_stranded(l, q, 30, now - 10 * MINUTE, now, 100)
            .await
            .unwrap()
    };
    assert_eq!(
        sweep_at(NOW_MS + 12 * MINUTE).await.found,
        0,
        "not yet listed"
    );
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let due = aws.drain(&queue.queue_url).await;
    assert_eq!(due.len(), 1, "the check, after its timer");
    let QueueMessage::Check(check) = decoded(&due[0]) else {
        panic!("a check");
    };
    assert_eq!(check, Check::of("evt_c1", Some(Environment::Live)));
    let fulfil = Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        state,
        deliveries,
    ))
    .for_projects(crate::one_project());
    assert_eq!(fulfil.check_delivery(&check).await, Ok(Checked::Straggler));
    assert_eq!(fulfil.check_delivery(&check).await, Ok(Checked::Listed));
    let swept = sweep_at(NOW_MS + 15 * MINUTE).await;
    assert_eq!((swept.found, swept.resent), (1, 1), "found in the index");
    let copy = aws.drain(&queue.queue_url).await;
    assert_eq!(copy.len(), 1);
    let QueueMessage::Work(item) = decoded(&copy[0]) else {
        panic!("a work item");
    };
    assert_eq!(item.body, invoice_paid("evt_c1", "inv_c1").into_bytes());
    let applied = fulfil.apply_queued(&item, NOW_MS + 16 * MINUTE, 1).await;
    assert_eq!(applied.unwrap().map(|(_, a)| a), Some(Applied::Fulfilled));
    let record = aws.item(deliveries, "event_id", "evt_c1").await.unwrap();
    assert_eq!(get_s(&record, "state"), "processed");
    assert!(
        !record.contains_key("pending_shard"),
        "off the list once applied"
    );
    assert_eq!(ledger.pending(10).await.unwrap(), []);
}

/// A queue that sends work alone: its checks are lost (a batch whose check entry SQS refused).
struct ChecksLost(SqsQueue);

impl WorkQueue for ChecksLost {
    async fn enqueue(&self, delivery: &Delivery) -> Result<(), PortError> {
        self.0.enqueue(delivery).await
    }
}

// A delivery whose check was never queued is listed at its put, and the sweep's index read, the
// backstop, finds it with no check at all.
#[tokio::test]
async fn a_delivery_whose_check_was_lost_is_found_by_the_sweep() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let deliveries = stack.table("DeliveriesTable");
    let queue = aws.queue().await;
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let sqs = SqsQueue::new(aws.sqs.clone(), &queue.queue_url);
    deliver(
        &ingest(&ledger, ChecksLost(sqs.clone()), 1),
        &invoice_paid("evt_c2", "inv_c2"),
    )
    .await;
    let record = aws.item(deliveries, "event_id", "evt_c2").await.unwrap();
    assert!(record.contains_key("pending_shard"), "listed at its put");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        aws.drain(&queue.queue_url).await.len(),
        1,
        "its work, no check"
    );
    let now = NOW_MS + 15 * MINUTE;
    let swept = sweep_stranded(&ledger, &sqs, 30, now - 10 * MINUTE, now, 100)
        .await
        .unwrap();
    assert_eq!((swept.found, swept.resent), (1, 1));
}

// The work goes before its record, so the record DynamoDB's condition kept decides what fulfil
// applies: a work item received before its record's put is not applied (it comes back), and a
// second body under a recorded event_id (its put refused) is never applied, whichever fulfil
// receives first: one fulfilment, the first body's order and amount.
#[tokio::test]
async fn only_the_recorded_body_of_an_event_id_is_applied() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let queue = aws.queue().await;
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let ingest = ingest(
        &ledger,
        SqsQueue::new(aws.sqs.clone(), &queue.queue_url),
        600,
    );
    let fulfil = Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        state,
        deliveries,
    ))
    .for_projects(crate::one_project());
    let first = invoice_paid("evt_c3", "inv_c3");
    let second = first.replace("10.50", "99.00");
    assert_eq!(
        fulfil.apply_queued(&live(&first), NOW_MS, 1).await,
        Err(FulfilError::NotRecorded),
        "before its record's put"
    );
    deliver(&ingest, &first).await;
    let signature = sign(&second, NOW, &[LIVE_SECRET]);
    let request = Inbound {
        method: "POST",
        signature: Some(&signature),
        webhook_id: None,
        body: second.as_bytes(),
    };
    let _ = ingest.handle(&request, NOW_MS + 1).await;
    let mut queued: Vec<WorkItem> = aws
        .drain(&queue.queue_url)
        .await
        .iter()
        .map(|m| match decoded(m) {
            QueueMessage::Work(item) => item,
            QueueMessage::Check(_) => panic!("the checks wait 10 minutes"),
        })
        .collect();
    assert_eq!(queued.len(), 2, "the second body's work was queued too");
    queued.sort_by_key(|item| item.body != second.as_bytes());
    let mut applied = Vec::new();
    for item in &queued {
        let done = fulfil.apply_queued(item, NOW_MS + 2, 1).await.unwrap();
        applied.push(done.map(|(_, a)| a));
    }
    assert_eq!(
        applied,
        [None, Some(Applied::Fulfilled)],
        "the second first"
    );
    let fulfilments: Vec<_> = aws
        .scan(state)
        .await
        .into_iter()
        .filter(|i| get_s(i, "kind") == "fulfilment")
        .collect();
    assert_eq!(fulfilments.len(), 1);
    let invoice = aws.item(state, "pk", "inv_c3").await.unwrap();
    assert_eq!(get_s(&invoice, "amount_text"), "10.50", "the first body's");
    let record = aws.item(deliveries, "event_id", "evt_c3").await.unwrap();
    assert_eq!(get_s(&record, "outcome"), "fulfilled");
}
