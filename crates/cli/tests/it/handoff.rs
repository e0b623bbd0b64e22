//! The hand-off against DynamoDB Local's stream and the SQS emulator: what the publisher sends
//! (the envelope an EventBridge rule delivers to an SQS target) for what fulfil committed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use paymos_inbox::tools::handoff;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_aws::events::QueuePublisher;
use paymos_inbox_core::money::change::OrderRef;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::handoff::{DomainEvent, EventPublisher};
use paymos_inbox_core::roads::ingest::PortError;
use paymos_inbox_core::testkit::schemas::assert_valid;
use paymos_inbox_core::wire::signature::Environment;
use paymos_inbox_local::stream::{Retries, StreamReader, deliver};
use serde_json::{Value, json};

use paymos_inbox_testkit::*;

struct Rig {
    aws: Aws,
    state: String,
    events: String,
    failures: String,
    fulfil: Fulfil<DynamoResources>,
    reader: StreamReader,
}

impl Rig {
    async fn new() -> Self {
        let aws = Aws::new();
        let stack = aws.stack().await;
        let state = stack.table("StateTable").to_owned();
        let events = aws.queue().await.queue_url;
        let failures = aws.queue().await.queue_url;
        let fulfil = Fulfil::new(DynamoResources::new(
            aws.dynamodb.clone(),
            &state,
            stack.table("DeliveriesTable"),
        ))
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
        let streams = aws_sdk_dynamodbstreams::Client::from_conf(
            aws_sdk_dynamodbstreams::Config::builder()
                .behavior_version_latest()
                .region(aws_sdk_dynamodbstreams::config::Region::new("us-east-1"))
                .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
                    "test", "test", None, None, "tests",
                ))
                .endpoint_url(endpoint_urls().0)
                .build(),
        );
        let reader = StreamReader::open(&aws.dynamodb, streams, &state)
            .await
            .expect("the state table has a stream");
        Self {
            aws,
            state,
            events,
            failures,
            fulfil,
            reader,
        }
    }

    /// Reads the stream until it is quiet, publishing each batch through `publisher`.
    async fn pump<P: EventPublisher>(&mut self, publisher: &P) {
        let retries = Retries {
            attempts: 2,
            pause: Duration::from_millis(10),
        };
        let mut quiet = 0;
        while quiet < 3 {
            let batch = self.reader.next_batch().await.unwrap();
            if batch.is_empty() {
                quiet += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            quiet = 0;
            deliver(
                publisher,
                &batch,
                &Environment::Live.into(),
                retries,
                &self.aws.sqs,
                &self.failures,
            )
            .await
            .unwrap();
        }
    }

    /// What reached the events queue, each checked against its published JSON Schema.
    async fn published(&self) -> Vec<Value> {
        let events: Vec<Value> = self
            .aws
            .drain(&self.events)
            .await
            .iter()
            .map(|m| serde_json::from_str(m.body().unwrap()).unwrap())
            .collect();
        for e in &events {
            assert_valid(e["detail-type"].as_str().unwrap(), &e["detail"]);
        }
        events
    }

    async fn apply(&self, body: &str) {
        self.fulfil.apply(&live(body), NOW_MS).await.unwrap();
    }
}

fn paid(event_id: &str, invoice: &str) -> String {
    envelope(
        event_id,
        "invoice.paid",
        json!({"invoice_id": invoice, "status": "paid",
               "order": {"external_id": format!("order-{invoice}"), "amount": "10.50", "currency": "USDT"}}),
    )
}

#[tokio::test]
async fn one_paid_delivery_publishes_exactly_one_order_paid_and_repeats_publish_nothing() {
    let mut rig = Rig::new().await;
    let publisher = QueuePublisher::new(
        rig.aws.sqs.clone(),
        &rig.events,
        paymos_inbox_lambda::now_ms,
    );
    rig.apply(&paid("evt_h1", "inv_h1")).await;
    rig.pump(&publisher).await;
    let events = rig.published().await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(
        (e["source"].as_str(), e["detail-type"].as_str()),
        (Some("paymos-inbox"), Some("Order Paid"))
    );
    let d = &e["detail"];
    assert_eq!(d["idempotency_key"], "order-paid:inv_h1");
    assert_eq!(
        (d["invoice_id"].as_str(), d["order_id"].as_str()),
        (Some("inv_h1"), Some("order-inv_h1"))
    );
    // The text Paymos sent, trailing zero kept (a DynamoDB Number would say "10.5").
    assert_eq!(
        (d["amount"].as_str(), d["currency"].as_str()),
        (Some("10.50"), Some("USDT"))
    );
    assert_eq!(d["event_id"], "evt_h1");
    assert_eq!(d["environment"], "live");
    assert_eq!(
        d["version"],
        paymos_inbox_core::roads::handoff::DETAIL_VERSION
    );

    // The same event again, a second endpoint, a replay, support marking it paid: nothing more.
    rig.apply(&paid("evt_h1", "inv_h1")).await;
    rig.apply(&paid("evt_h1_other_endpoint", "inv_h1")).await;
    let order = OrderRef {
        external_id: Some("order-inv_h1".into()),
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    rig.fulfil
        .mark_paid("inv_h1", order, "support:eve", NOW_MS)
        .await
        .unwrap();
    rig.pump(&publisher).await;
    assert!(rig.published().await.is_empty(), "no second Order Paid");
}

#[tokio::test]
async fn each_business_fact_is_one_event_with_its_documented_detail() {
    let mut rig = Rig::new().await;
    let publisher = QueuePublisher::new(
        rig.aws.sqs.clone(),
        &rig.events,
        paymos_inbox_lambda::now_ms,
    );
    // A second payment for a paid order, a closed invoice, a refund, a failed payout, a deposit.
    rig.apply(&paid("evt_f1", "inv_f1")).await;
    let second = envelope(
        "evt_f2",
        "invoice.paid",
        json!({"invoice_id": "inv_f2", "order": {"external_id": "order-inv_f1", "amount": "10.50", "currency": "USDT"}}),
    );
    rig.apply(&second).await;
    rig.apply(&envelope(
        "evt_f3",
        "invoice.expired",
        json!({"invoice_id": "inv_f3"}),
    ))
    .await;
    rig.apply(&envelope("evt_f4", "withdrawal.completed", json!({"withdrawal_id": "wdr_f4", "type": "refund", "invoice_id": "inv_f2", "amount": "10.50", "currency": "USDT"}))).await;
    rig.apply(&envelope(
        "evt_f5",
        "withdrawal.failed",
        json!({"withdrawal_id": "wdr_f5", "amount": "1", "currency": "USDT"}),
    ))
    .await;
    rig.apply(&envelope("evt_f6", "payment_channel.deposit.confirmed", json!({"id": "pcd_f6", "is_final": true, "payment_channel_external_id": "payer-1", "net": "3.30", "currency": "USDT"}))).await;
    rig.pump(&publisher).await;
    let events = rig.published().await;
    let mut kinds: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["detail-type"].as_str().unwrap().to_owned(),
                e["detail"]["idempotency_key"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            (
                "Deposit Credited".to_owned(),
                "deposit-credited:pcd_f6".to_owned()
            ),
            ("Invoice Closed".into(), "invoice-closed:inv_f3".into()),
            ("Order Paid".into(), "order-paid:inv_f1".into()),
            (
                "Payment Needs Review".into(),
                "payment-needs-review:inv_f2:duplicate_payment".into()
            ),
            ("Refund Completed".into(), "refund-completed:wdr_f4".into()),
            (
                "Withdrawal Failed".into(),
                "withdrawal-failed:wdr_f5".into()
            ),
        ]
    );
    for e in &events {
        let (_, fields) = paymos_inbox_core::roads::handoff::DETAIL_TYPES
            .iter()
            .find(|(t, _)| *t == e["detail-type"].as_str().unwrap())
            .unwrap();
        for f in fields.iter() {
            assert!(
                e["detail"].get(*f).is_some(),
                "{}: {f}: {e}",
                e["detail-type"]
            );
        }
    }
}

/// A publisher that refuses everything for its first `failures` calls.
struct Flaky {
    inner: QueuePublisher,
    failures: AtomicUsize,
}

impl EventPublisher for Flaky {
    async fn publish(&self, events: &[DomainEvent]) -> Result<Vec<Option<String>>, PortError> {
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(PortError::new("EventBridge PutEvents", "throttled"));
        }
        self.inner.publish(events).await
    }
}

#[tokio::test]
async fn a_failed_publish_is_retried_then_parked_and_resent_once_with_the_same_key() {
    let mut rig = Rig::new().await;
    // Fails once: the retry publishes it.
    let flaky = Flaky {
        inner: QueuePublisher::new(
            rig.aws.sqs.clone(),
            &rig.events,
            paymos_inbox_lambda::now_ms,
        ),
        failures: AtomicUsize::new(1),
    };
    rig.apply(&paid("evt_r1", "inv_r1")).await;
    rig.pump(&flaky).await;
    assert_eq!(rig.published().await.len(), 1, "retried");
    assert!(rig.aws.drain(&rig.failures).await.is_empty());

    // Fails past the retries: the batch's coordinates go to the on-failure queue, nothing else.
    let down = Flaky {
        inner: QueuePublisher::new(
            rig.aws.sqs.clone(),
            &rig.events,
            paymos_inbox_lambda::now_ms,
        ),
        failures: AtomicUsize::new(100),
    };
    rig.apply(&paid("evt_r2", "inv_r2")).await;
    rig.pump(&down).await;
    assert!(rig.published().await.is_empty());
    let parked = rig.aws.drain(&rig.failures).await;
    assert_eq!(parked.len(), 1);
    let info: Value = serde_json::from_str(parked[0].body().unwrap()).unwrap();
    assert!(
        info["DDBStreamBatchInfo"]["startSequenceNumber"].is_string(),
        "{info}"
    );

    // The operator re-sends what was committed since then: inv_r2's Order Paid, same key.
    let resources = DynamoResources::new(rig.aws.dynamodb.clone(), &rig.state, "");
    let since = paymos_inbox_core::roads::handoff::since(&resources, NOW_MS, Environment::Live)
        .await
        .unwrap();
    let missing: Vec<DomainEvent> = since
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| e.idempotency_key == "order-paid:inv_r2")
        .collect();
    let publisher = QueuePublisher::new(
        rig.aws.sqs.clone(),
        &rig.events,
        paymos_inbox_lambda::now_ms,
    );
    assert_eq!(handoff::resend(&publisher, &missing).await.unwrap(), 1);
    let events = rig.published().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["detail-type"], "Order Paid");
    assert_eq!(events[0]["detail"]["idempotency_key"], "order-paid:inv_r2");
}

#[tokio::test]
async fn an_invoice_that_expired_was_paid_late_and_released_is_three_facts_with_three_ids() {
    use paymos_inbox_core::roads::release::{ReleaseBy, release};
    let mut rig = Rig::new().await;
    let publisher = QueuePublisher::new(
        rig.aws.sqs.clone(),
        &rig.events,
        paymos_inbox_lambda::now_ms,
    );
    let order = json!({"external_id": "order-inv_l", "amount": "10.50", "currency": "USDT"});
    rig.apply(&envelope(
        "evt_l1",
        "invoice.expired",
        json!({"invoice_id": "inv_l", "order": order}),
    ))
    .await;
    rig.apply(&envelope(
        "evt_l2",
        "invoice.paid",
        json!({"invoice_id": "inv_l", "order": order}),
    ))
    .await;
    let by = ReleaseBy {
        actor: "alice",
        reason: Some("paid on chain"),
        override_amount: false,
        project: None,
        order: None,
    };
    let released = release(
        rig.fulfil.store(),
        "inv_l",
        None,
        &by,
        &paymos_inbox_core::money::effect::RecordFulfilment,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(
        released,
        paymos_inbox_core::money::change::Applied::Fulfilled
    );
    rig.pump(&publisher).await;
    let mut ids: Vec<(String, String)> = rig
        .published()
        .await
        .iter()
        .map(|e| {
            (
                e["detail"]["idempotency_key"].as_str().unwrap().to_owned(),
                e["detail-type"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            (
                "invoice-closed:inv_l".to_owned(),
                "Invoice Closed".to_owned()
            ),
            ("order-paid:inv_l".into(), "Order Paid".into()),
            (
                "payment-needs-review:inv_l:paid_late".into(),
                "Payment Needs Review".into()
            ),
        ],
        "a consumer deduplicating on the id drops none of them"
    );
    // Published again (`events resend`): the same ids.
    let resources = DynamoResources::new(rig.aws.dynamodb.clone(), &rig.state, "");
    let again: Vec<String> =
        paymos_inbox_core::roads::handoff::since(&resources, 0, Environment::Live)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, e)| e.idempotency_key)
            .filter(|k| k.contains("inv_l"))
            .collect();
    let mut again = again;
    again.sort();
    assert_eq!(
        again,
        ids.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
    );
}

// Issue 32: `events tail --follow` scanned the whole state table every 2 s. It now follows the
// table's stream from the moment it starts: the history is not read again, a new fact is, and
// no poll reads the table.
#[tokio::test]
async fn following_reads_what_is_new_from_the_stream_never_the_history_or_the_table() {
    let rig = Rig::new().await;
    rig.apply(&paid("evt_follow_old", "inv_follow_old")).await;
    let calls = paymos_inbox_aws::aws::CallCounter::new();
    let streams = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_dynamodbstreams::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
                "test", "test", None, None, "tests",
            ))
            .endpoint_url(endpoint_urls().0)
            .interceptor(calls.clone())
            .build(),
    );
    let mut follow =
        handoff::Follow::open(&rig.aws.dynamodb, streams, &rig.state, Environment::Live)
            .await
            .expect("the state table has a stream");
    rig.aws.calls.reset();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.extend(follow.next().await.unwrap());
    }
    assert!(seen.is_empty(), "the history is not read again: {seen:?}");

    rig.apply(&paid("evt_follow_new", "inv_follow_new")).await;
    rig.aws.calls.reset();
    for _ in 0..50 {
        seen.extend(follow.next().await.unwrap());
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let keys: Vec<&str> = seen.iter().map(|(_, e)| e.detail_type).collect();
    assert!(
        keys.contains(&"Order Paid"),
        "the new payment is followed: {keys:?}"
    );
    assert!(
        seen.iter()
            .all(|(_, e)| !e.idempotency_key.contains("inv_follow_old")),
        "{seen:?}"
    );
    assert_eq!(
        rig.aws.calls.total(),
        0,
        "no poll reads the table: {:?}",
        rig.aws.calls.operations()
    );
    assert!(
        calls
            .operations()
            .iter()
            .all(|op| op.starts_with("DynamoDB Streams.") || op == "DynamoDB.DescribeTable"),
        "{:?}",
        calls.operations()
    );
}

// Issue 49, the attack on `dev` (F3): with the API on, the hand-off stopped for good at the
// first scheduled reconciliation. Its `reconciled#read` item, on the state table's stream,
// holds what the run found by kind; a run that found nothing wrote an empty map, and reading
// the stream failed on every poll after it ("Union did not contain a valid variant"): every
// `Order Paid` committed later never reached the shop.
#[tokio::test]
async fn a_reconciliation_that_found_nothing_does_not_stop_the_hand_off() {
    use paymos_inbox_core::roads::fulfil::ResourceStore as _;
    let mut rig = Rig::new().await;
    let publisher = QueuePublisher::new(
        rig.aws.sqs.clone(),
        &rig.events,
        paymos_inbox_lambda::now_ms,
    );
    rig.apply(&paid("evt_r1", "inv_r1")).await;
    let nothing = std::collections::BTreeMap::new();
    rig.fulfil
        .store()
        .write(&[paymos_inbox_core::money::write::reconcile_read(
            (NOW - 3_600, NOW),
            (false, &nothing),
            NOW_MS,
        )])
        .await
        .unwrap();
    rig.apply(&paid("evt_r2", "inv_r2")).await;
    rig.pump(&publisher).await;
    let keys: Vec<Value> = rig
        .published()
        .await
        .iter()
        .map(|e| e["detail"]["idempotency_key"].clone())
        .collect();
    assert_eq!(
        keys,
        [json!("order-paid:inv_r1"), json!("order-paid:inv_r2")],
        "both payments reach the shop"
    );
}
