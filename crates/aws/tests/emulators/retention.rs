//! Issue 32, "years of data": a delivery's raw body (payer addresses, e-mails, transaction ids)
//! is kept apart from its ledger record, as an item of its own that DynamoDB's TTL removes after
//! the body retention, while the record keeps its ids, outcome and hash for good. Every reader
//! of a body reads it back, and a record whose body is gone still reads.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources, KeptBody, encode_body};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::roads::exceptions::{self, DELIVERY_OUTCOMES, ReviewLedger as _};
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{DeliveryState, Ingest, IngestSettings, sha256_hex};
use paymos_inbox_core::roads::sweep::StrandedDeliveries as _;
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::ingest::respond;
use serde_json::json;

use paymos_inbox_testkit::*;

/// What the stack keeps a body for unless told otherwise (`BodyRetentionDays`' default).
const DEFAULT_DAYS: u64 = 90;

struct Rig {
    aws: Aws,
    deliveries: String,
    ledger: DynamoLedger,
    fulfil: Fulfil<DynamoResources>,
    queue: String,
}

impl Rig {
    async fn new() -> Self {
        Self::keeping_records(None).await
    }

    /// With `DeliveryRetentionDays` = `days`.
    async fn keeping_records(days: Option<u64>) -> Self {
        let aws = Aws::new();
        let stack = aws.stack().await;
        let deliveries = stack.table("DeliveriesTable").to_owned();
        let ledger = DynamoLedger::new(aws.dynamodb.clone(), &deliveries, days);
        let fulfil = Fulfil::new(DynamoResources::new(
            aws.dynamodb.clone(),
            stack.table("StateTable"),
            &deliveries,
        ))
        .for_projects(crate::one_project());
        let queue = aws.queue().await.queue_url;
        Self {
            aws,
            deliveries,
            ledger,
            fulfil,
            queue,
        }
    }

    /// Posts `body` to ingest at `now_ms` (signed by the live secret): the HTTP status.
    async fn post(&self, body: &str, event_id: &str, now_ms: u64) -> u16 {
        let ingest = Ingest::new(
            Verifier::new(
                vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
                300,
            ),
            self.ledger.clone(),
            WorkAlone(SqsQueue::new(self.aws.sqs.clone(), &self.queue)),
            IngestSettings::default(),
        );
        let signed = sign(body, now_ms / 1000, &[LIVE_SECRET]);
        respond(&ingest, &delivery(body, event_id, &signed), now_ms)
            .await
            .status()
            .as_u16()
    }

    async fn item(&self, key: &str) -> Option<HashMap<String, AttributeValue>> {
        self.aws.item(&self.deliveries, "event_id", key).await
    }

    async fn delete(&self, key: &str) {
        self.aws
            .dynamodb
            .delete_item()
            .table_name(&self.deliveries)
            .key("event_id", AttributeValue::S(key.to_owned()))
            .send()
            .await
            .unwrap();
    }

    /// The record's body as `with_outcomes` (what `exceptions` reads) gives it.
    async fn waiting_body(&self, event_id: &str) -> Option<Vec<u8>> {
        self.ledger
            .with_outcomes(&DELIVERY_OUTCOMES, None)
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.delivery.event_id == event_id)
            .map(|r| r.delivery.body)
    }
}

/// The work queue without delayed checks: each record is listed for the sweep at its put, as
/// before issue 51. These tests are about bodies and expiries; how a straggler is found with a
/// check is `checks.rs`'.
struct WorkAlone(SqsQueue);

impl paymos_inbox_core::roads::ingest::WorkQueue for WorkAlone {
    async fn enqueue(
        &self,
        delivery: &paymos_inbox_core::roads::ingest::Delivery,
    ) -> Result<(), paymos_inbox_core::port::PortError> {
        self.0.enqueue(delivery).await
    }
}

/// The body item's key: the record's key and the body's hash.
fn body_key(delivery_key: &str, body: &str) -> String {
    format!("body#{delivery_key}#{}", sha256_hex(body.as_bytes()))
}

fn paid(event_id: &str, invoice_id: &str, note: &str) -> String {
    envelope(
        event_id,
        "invoice.paid",
        json!({"invoice_id": invoice_id, "note": note, "payer_email": "payer@example.com",
            "order": {"external_id": format!("o-{invoice_id}"), "amount": "10.50", "currency": "USD"}}),
    )
}

#[tokio::test]
async fn a_body_is_kept_apart_until_its_retention_and_the_record_keeps_what_happened() {
    let rig = Rig::new().await;
    let body = paid("evt_b1", "inv_b1", "first");
    assert_eq!(rig.post(&body, "evt_b1", NOW_MS).await, 200);
    let (_, applied) = rig.fulfil.apply(&live(&body), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::Fulfilled);

    // (1) The record: ids, outcome and the body's hash; not the body.
    let record = rig.item("evt_b1").await.expect("the record");
    assert_eq!(get_s(&record, "state"), "processed");
    assert_eq!(get_s(&record, "outcome"), "fulfilled");
    assert_eq!(get_s(&record, "resource_id"), "inv_b1");
    assert_eq!(
        get_s(&record, "body_sha256"),
        sha256_hex(body.as_bytes()),
        "the hash stays with the record"
    );
    assert!(!record.contains_key("body"), "no body in the record");
    assert!(!record.contains_key("body_encoding"));
    assert!(
        !record.contains_key("expires_at"),
        "no DeliveryRetentionDays: the record is kept for ever"
    );

    // (2) The body item: the exact bytes, removed by the table's TTL after the retention.
    let kept = rig
        .item(&body_key("evt_b1", &body))
        .await
        .expect("the body item");
    assert_eq!(stored_body(&kept), body.as_bytes(), "byte-exact");
    assert_eq!(
        get_n(&kept, "expires_at"),
        NOW_MS / 1000 + DEFAULT_DAYS * 86_400
    );
    assert!(!kept.contains_key("state"), "no state: not a delivery");

    // (4) The same id with other bytes: a conflict counted on the record, the first body kept.
    let other = paid("evt_b1", "inv_b1", "second");
    assert_eq!(rig.post(&other, "evt_b1", NOW_MS + 1_000).await, 200);
    let record = rig.item("evt_b1").await.unwrap();
    assert_eq!(get_n(&record, "body_conflicts"), 1);
    assert_eq!(get_s(&record, "body_sha256"), sha256_hex(body.as_bytes()));
    let first = rig.item(&body_key("evt_b1", &body)).await.unwrap();
    assert_eq!(stored_body(&first), body.as_bytes(), "never overwritten");
    assert!(
        rig.item(&body_key("evt_b1", &other)).await.is_some(),
        "the other bytes are an item of their own (they expire the same way)"
    );

    // Scans of the ledger list deliveries, never body items.
    let listed = rig.ledger.deliveries().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].event_id, "evt_b1");

    // (3) What the TTL does: the body item goes; the record still reads, outcome and hash.
    rig.delete(&body_key("evt_b1", &body)).await;
    rig.delete(&body_key("evt_b1", &other)).await;
    assert_eq!(
        rig.ledger.state_of("evt_b1").await.unwrap(),
        Some((DeliveryState::Processed, Some("fulfilled".into())))
    );
    let record = rig.item("evt_b1").await.unwrap();
    assert_eq!(get_s(&record, "body_sha256"), sha256_hex(body.as_bytes()));
    assert_eq!(rig.ledger.deliveries().await.unwrap().len(), 1);
    // A late retry of a processed delivery is still a duplicate, and applies nothing twice.
    assert_eq!(rig.post(&body, "evt_b1", NOW_MS + 2_000).await, 200);
    assert_eq!(
        rig.ledger.state_of("evt_b1").await.unwrap(),
        Some((DeliveryState::Processed, Some("fulfilled".into())))
    );
}

#[tokio::test]
async fn every_reader_gets_the_body_back_and_still_works_once_it_expired() {
    let rig = Rig::new().await;
    // A delivery that waits for a person (a deposit to no channel: unusable): `exceptions`
    // reads its body.
    let unusable = envelope(
        "evt_b_wait",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_b", "is_final": true, "payment_channel_external_id": "c-1", "net": "abc", "currency": "USDT"}),
    );
    assert_eq!(rig.post(&unusable, "evt_b_wait", NOW_MS).await, 200);
    let (_, applied) = rig.fulfil.apply(&live(&unusable), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::Unusable);
    assert_eq!(
        rig.waiting_body("evt_b_wait").await.as_deref(),
        Some(unusable.as_bytes()),
        "exceptions reads the body kept apart"
    );

    // A delivery recorded long ago and never processed: the sweep re-sends its exact body.
    let stranded = paid("evt_b_old", "inv_b_old", "stranded");
    let old = NOW_MS - 3_600_000;
    assert_eq!(rig.post(&stranded, "evt_b_old", old).await, 200);
    rig.aws.drain(&rig.queue).await;
    let found = rig
        .ledger
        .stranded(NOW_MS - 600_000, NOW_MS, 10)
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].delivery.body,
        stranded.as_bytes(),
        "the sweep's body"
    );
    // A retry of it after its lease ran out sends the recorded body again.
    assert_eq!(rig.post(&stranded, "evt_b_old", NOW_MS).await, 200);
    let sent: Vec<String> = rig
        .aws
        .drain(&rig.queue)
        .await
        .iter()
        .map(message_event)
        .collect();
    assert_eq!(
        sent,
        std::slice::from_ref(&stranded),
        "ingest's resend reads the body item"
    );

    // The bodies expire (what the TTL does): every reader still answers, with an empty body.
    rig.delete(&body_key("evt_b_wait", &unusable)).await;
    rig.delete(&body_key("evt_b_old", &stranded)).await;
    assert_eq!(
        rig.waiting_body("evt_b_wait").await.as_deref(),
        Some(&b""[..]),
        "still listed, without its body"
    );
    let listed = exceptions::list(rig.fulfil.store(), &rig.ledger, 0)
        .await
        .unwrap();
    assert!(
        listed
            .iter()
            .any(|e| e.event_id.as_deref() == Some("evt_b_wait")),
        "{listed:#?}"
    );
    let found = rig
        .ledger
        .stranded(NOW_MS - 600_000, NOW_MS + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "the record is still found");
    assert!(found[0].delivery.body.is_empty());
}

/// A record as the ledger wrote it before bodies were kept apart: the body inline.
fn old_format_record(
    body: &str,
    state: &str,
    received_at_ms: u64,
) -> HashMap<String, AttributeValue> {
    let d = recorded_delivery(
        body,
        paymos_inbox_core::wire::signature::Environment::Live,
        received_at_ms,
    );
    let (stored, encoding) = encode_body(body.as_bytes());
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let n = |v: u64| AttributeValue::N(v.to_string());
    let mut item = HashMap::from([
        ("event_id".to_owned(), s(&d.event_id)),
        ("event_type".to_owned(), s(&d.event_type)),
        ("category".to_owned(), s(d.category.as_str())),
        ("environment".to_owned(), s("live")),
        ("secret_label".to_owned(), s("live")),
        ("version".to_owned(), n(1)),
        ("occurred_at".to_owned(), n(d.occurred_at)),
        ("signed_at".to_owned(), n(d.signed_at)),
        ("received_at".to_owned(), n(received_at_ms)),
        ("body".to_owned(), AttributeValue::B(stored.into())),
        ("body_sha256".to_owned(), s(&d.body_sha256)),
        ("state".to_owned(), s(state)),
        ("lease_until".to_owned(), n(received_at_ms + 30_000)),
        ("enqueue_attempts".to_owned(), n(1)),
    ]);
    if let Some(r) = d.resource_id {
        item.insert("resource_id".into(), s(&r));
    }
    if let Some(e) = encoding {
        item.insert("body_encoding".into(), s(e));
    }
    if state == "received" {
        item.insert("pending_shard".into(), s("p0"));
    }
    item
}

#[tokio::test]
async fn records_written_before_the_update_keep_their_inline_body_and_read_as_before() {
    let rig = Rig::new().await;
    let old = NOW_MS - 3_600_000;
    let stranded = paid("evt_b_v1", "inv_b_v1", "written by the previous release");
    let waiting = envelope(
        "evt_b_v1w",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_b_v1", "is_final": true, "payment_channel_external_id": "c-1", "net": "abc", "currency": "USDT"}),
    );
    let mut waits = old_format_record(&waiting, "processed", old);
    waits.insert("outcome".into(), AttributeValue::S("unusable".into()));
    waits.insert("waiting".into(), AttributeValue::S("unusable".into()));
    waits.insert("processed_at".into(), AttributeValue::N(old.to_string()));
    for item in [old_format_record(&stranded, "received", old), waits] {
        rig.aws
            .dynamodb
            .put_item()
            .table_name(&rig.deliveries)
            .set_item(Some(item))
            .send()
            .await
            .unwrap();
    }
    // The upgrade's reindex (issue 50) moves the one that waits from its outcome's key to
    // its shard of the `waiting` index.
    assert_eq!(rig.ledger.reindex_waiting().await.unwrap(), 1);
    let found = rig
        .ledger
        .stranded(NOW_MS - 600_000, NOW_MS, 10)
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].delivery.body, stranded.as_bytes());
    assert_eq!(
        rig.waiting_body("evt_b_v1w").await.as_deref(),
        Some(waiting.as_bytes())
    );
    // Issue 42, item 7: `exceptions --body` reads it too (it has no body item).
    assert_eq!(
        rig.ledger.kept_body("evt_b_v1w", NOW).await.unwrap(),
        KeptBody::Kept(waiting.as_bytes().to_vec())
    );
    // A retry of the old stranded one: its inline body is what is sent again.
    assert_eq!(rig.post(&stranded, "evt_b_v1", NOW_MS).await, 200);
    let sent: Vec<String> = rig
        .aws
        .drain(&rig.queue)
        .await
        .iter()
        .map(message_event)
        .collect();
    assert_eq!(sent, std::slice::from_ref(&stranded));
    assert_eq!(rig.ledger.deliveries().await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_body_is_kept_at_least_a_week_and_never_longer_than_its_record() {
    let aws = Aws::new();
    let table = aws.deliveries_table().await;
    let kept_until = |retention: Option<u64>, body_days: u64, id: &'static str| {
        let (aws, table) = (aws.clone(), table.clone());
        async move {
            let ledger = DynamoLedger::new(aws.dynamodb.clone(), &table, retention)
                .with_body_retention_days(body_days);
            let body = paid(id, "inv_b_days", id);
            let d = recorded_delivery(
                &body,
                paymos_inbox_core::wire::signature::Environment::Live,
                NOW_MS,
            );
            paymos_inbox_core::roads::ingest::DeliveryLedger::record(&ledger, &d, NOW_MS)
                .await
                .unwrap();
            let record = aws.item(&table, "event_id", id).await.unwrap();
            let kept = aws
                .item(&table, "event_id", &body_key(id, &body))
                .await
                .unwrap();
            let days = |item: &HashMap<String, AttributeValue>| {
                item.get("expires_at")
                    .map(|_| (get_n(item, "expires_at") - NOW_MS / 1000) / 86_400)
            };
            (days(&record), days(&kept))
        }
    };
    assert_eq!(kept_until(None, 30, "evt_b_d30").await, (None, Some(30)));
    assert_eq!(
        kept_until(None, 1, "evt_b_d1").await,
        (None, Some(7)),
        "raised to the minimum"
    );
    assert_eq!(
        kept_until(Some(10), 30, "evt_b_r10").await,
        (Some(10), Some(10)),
        "a shorter record retention takes the body with the record"
    );
    assert_eq!(
        kept_until(Some(400), 90, "evt_b_r400").await,
        (Some(400), Some(90))
    );
}

// A person acts on what a waiting delivery said (`recheck` reads its order, `exceptions` shows
// it), so the sweep keeps its body for as long as its record, however long it waits; a
// delivery that waits for nobody keeps its body's expiry.
#[tokio::test]
async fn the_body_of_a_delivery_that_waits_for_a_person_is_kept_as_long_as_its_record() {
    let rig = Rig::new().await;
    let unusable = |id: &str| {
        envelope(
            id,
            "payment_channel.deposit.confirmed",
            json!({"id": format!("pcd_{id}"), "is_final": true, "payment_channel_external_id": "c-1", "net": "abc", "currency": "USDT"}),
        )
    };
    let (waits, waits_too) = (unusable("evt_k_wait"), unusable("evt_k_wait_2"));
    let shipped = paid("evt_k_paid", "inv_k", "fulfilled");
    for (body, id, expected) in [
        (&waits, "evt_k_wait", Applied::Unusable),
        (&waits_too, "evt_k_wait_2", Applied::Unusable),
        (&shipped, "evt_k_paid", Applied::Fulfilled),
    ] {
        assert_eq!(rig.post(body, id, NOW_MS).await, 200);
        let (_, applied) = rig.fulfil.apply(&live(body), NOW_MS).await.unwrap();
        assert_eq!(applied, expected);
    }
    // The second one's record expires (as DeliveryRetentionDays would have it).
    let record_expires = NOW_MS / 1000 + 400 * 86_400;
    rig.aws
        .dynamodb
        .update_item()
        .table_name(&rig.deliveries)
        .key("event_id", AttributeValue::S("evt_k_wait_2".into()))
        .update_expression("SET expires_at = :x")
        .expression_attribute_values(":x", AttributeValue::N(record_expires.to_string()))
        .send()
        .await
        .unwrap();
    let (wait_key, wait_2_key) = (
        body_key("evt_k_wait", &waits),
        body_key("evt_k_wait_2", &waits_too),
    );
    let before = rig.item(&wait_key).await.expect("its body");
    assert_eq!(
        get_n(&before, "expires_at"),
        NOW_MS / 1000 + DEFAULT_DAYS * 86_400
    );

    assert_eq!(rig.ledger.keep_waiting_bodies().await.unwrap(), 2);
    let kept = rig.item(&wait_key).await.expect("its body");
    assert!(
        !kept.contains_key("expires_at"),
        "kept while it waits: {kept:?}"
    );
    assert_eq!(stored_body(&kept), waits.as_bytes());
    assert!(
        !rig.item(&wait_2_key)
            .await
            .unwrap()
            .contains_key("expires_at"),
        "a record that expires keeps its body while it waits too"
    );
    let record = rig.item("evt_k_wait_2").await.unwrap();
    assert!(
        !record.contains_key("expires_at"),
        "nor does the record expire while it waits: {record:?}"
    );
    assert_eq!(get_n(&record, "lifted_expires_at"), record_expires);
    assert_eq!(
        get_n(
            &rig.item(&body_key("evt_k_paid", &shipped)).await.unwrap(),
            "expires_at"
        ),
        NOW_MS / 1000 + DEFAULT_DAYS * 86_400,
        "a delivery that waits for nobody keeps its body's expiry"
    );
    assert_eq!(rig.ledger.keep_waiting_bodies().await.unwrap(), 0, "once");
    // A replay of it by a person at Paymos (the same bytes, a day later) gives it no expiry
    // back: the body item is written only if absent.
    assert_eq!(
        rig.post(&waits, "evt_k_wait", NOW_MS + 86_400_000).await,
        200
    );
    assert!(
        !rig.item(&wait_key)
            .await
            .unwrap()
            .contains_key("expires_at"),
        "still kept after a replay"
    );
    assert_eq!(
        rig.waiting_body("evt_k_wait").await.as_deref(),
        Some(waits.as_bytes())
    );
}

// Issue 42, item 2: with `DeliveryRetentionDays` set, a payment that waits for a person never
// expires while it waits: the sweep lifts its record's expiry with its body's, and `exceptions`
// lists it however long it waits; its resolution gives both an expiry back.
#[tokio::test]
async fn a_payment_that_waits_for_a_person_never_expires_while_it_waits() {
    const DAYS: u64 = 7;
    let rig = Rig::keeping_records(Some(DAYS)).await;
    let body = envelope(
        "evt_x1",
        "invoice.paid",
        json!({"invoice_id": "inv_x1", "payment": {"expected": "10.5", "currency": "USDT"}}),
    );
    assert_eq!(rig.post(&body, "evt_x1", NOW_MS).await, 200);
    let (_, applied) = rig.fulfil.apply(&live(&body), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::OrderUnknown);
    let receipt_expiry = NOW_MS / 1000 + DAYS * 86_400;
    assert_eq!(
        get_n(&rig.item("evt_x1").await.unwrap(), "expires_at"),
        receipt_expiry
    );

    // The sweep's next run: nothing of it can expire any more.
    assert_eq!(rig.ledger.keep_waiting_bodies().await.unwrap(), 1);
    let record = rig.item("evt_x1").await.unwrap();
    assert!(!record.contains_key("expires_at"), "{record:?}");
    let body_key = body_key("evt_x1", &body);
    assert!(
        !rig.item(&body_key)
            .await
            .unwrap()
            .contains_key("expires_at")
    );
    assert_eq!(rig.ledger.keep_waiting_bodies().await.unwrap(), 0, "once");
    assert_eq!(
        rig.waiting_body("evt_x1").await.as_deref(),
        Some(body.as_bytes()),
        "listed, with its body, past its retention"
    );

    // A resolution that leaves it waiting (for its order) keeps it.
    let resolved_at = NOW_MS + 30 * 86_400_000;
    rig.ledger
        .mark_resolved(
            "evt_x1",
            exceptions::Resolution::WaitsForOrder,
            "recheck",
            resolved_at,
        )
        .await
        .unwrap();
    assert!(!rig.item("evt_x1").await.unwrap().contains_key("expires_at"));

    // Resolved: the record's own expiry is back (past already: it goes), the body a week from
    // the resolution at the latest, never after its record.
    rig.ledger
        .mark_resolved(
            "evt_x1",
            exceptions::Resolution::Rechecked(Applied::Fulfilled),
            "recheck",
            resolved_at + 1,
        )
        .await
        .unwrap();
    let record = rig.item("evt_x1").await.unwrap();
    assert_eq!(get_n(&record, "expires_at"), receipt_expiry);
    assert!(!record.contains_key("lifted_expires_at"));
    assert_eq!(
        get_n(&rig.item(&body_key).await.unwrap(), "expires_at"),
        receipt_expiry
    );
    assert!(rig.waiting_body("evt_x1").await.is_none(), "resolved");
}

// Issue 38, case 2: a payment Paymos confirms with no order stays listed after `recheck`
// resolves it as waiting for its order: what waits for a person never drops off the index.
#[tokio::test]
async fn a_delivery_resolved_as_waiting_for_its_order_stays_listed() {
    let rig = Rig::new().await;
    let body = envelope(
        "evt_w1",
        "invoice.paid",
        json!({"invoice_id": "inv_w1", "payment": {"expected": "10.5", "currency": "USDT"}}),
    );
    assert_eq!(rig.post(&body, "evt_w1", NOW_MS).await, 200);
    let (_, applied) = rig.fulfil.apply(&live(&body), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::OrderUnknown);
    assert!(rig.waiting_body("evt_w1").await.is_some(), "listed before");
    rig.ledger
        .mark_resolved(
            "evt_w1",
            exceptions::Resolution::WaitsForOrder,
            "recheck",
            NOW_MS + 1,
        )
        .await
        .unwrap();
    let listed = rig
        .ledger
        .with_outcomes(&DELIVERY_OUTCOMES, Some("inv_w1"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "still listed after the recheck");
    assert_eq!(listed[0].outcome, Applied::OrderUnknown);
    // Any other resolution takes it off the list.
    rig.ledger
        .mark_resolved(
            "evt_w1",
            exceptions::Resolution::Rechecked(Applied::Fulfilled),
            "recheck",
            NOW_MS + 2,
        )
        .await
        .unwrap();
    assert!(rig.waiting_body("evt_w1").await.is_none(), "resolved");
}

// Issue 38, case 4: a delivery still `received` (fulfil failing for days) keeps its body: each
// sweep that finds it stranded gives the body a whole retention from then; one whose body is
// gone anyway is never sent with an empty body.
#[tokio::test]
async fn a_delivery_not_yet_processed_keeps_its_body_and_is_never_sent_without_it() {
    use paymos_inbox_core::roads::sweep::resend_stranded;
    let rig = Rig::new().await;
    let body = paid("evt_s1", "inv_s1", "stuck");
    assert_eq!(rig.post(&body, "evt_s1", NOW_MS).await, 200);
    let key = body_key("evt_s1", &body);
    let received = get_n(&rig.item(&key).await.unwrap(), "expires_at");
    assert_eq!(received, NOW + DEFAULT_DAYS * 86_400);
    // 89 days later the delivery is still not processed: the sweep keeps its body.
    let later = NOW_MS + 89 * 86_400_000;
    let queue = SqsQueue::new(rig.aws.sqs.clone(), &rig.queue);
    let swept = resend_stranded(&rig.ledger, &queue, 30, later - 600_000, later, 10)
        .await
        .unwrap();
    assert_eq!((swept.resent, swept.bodiless), (1, 0));
    assert_eq!(
        get_n(&rig.item(&key).await.unwrap(), "expires_at"),
        later / 1000 + DEFAULT_DAYS * 86_400,
        "the retention runs from now, not from receipt"
    );
    // Its body gone anyway: the next sweep sends nothing, the record stays received.
    rig.delete(&key).await;
    let again = later + 3_600_000;
    let swept = resend_stranded(&rig.ledger, &queue, 30, again - 600_000, again, 10)
        .await
        .unwrap();
    assert_eq!((swept.found, swept.resent, swept.bodiless), (1, 0, 1));
    let record = rig.item("evt_s1").await.unwrap();
    assert_eq!(get_s(&record, "state"), "received");
}

// Issue 49, defect 8: with `DeliveryRetentionDays` set, a delivery that fulfil never manages to
// apply used to keep its record's expiry from receipt: after that many days TTL deleted the
// `received` record, `pending` and its alarm forgot it, and the sweep had nothing to send. A
// record never expires while its delivery is not processed: each sweep that finds it stranded
// gives it the whole retention again from then (and its body, never past the record).
#[tokio::test]
async fn a_record_never_expires_while_its_delivery_is_not_processed() {
    use paymos_inbox_core::roads::sweep::resend_stranded;
    let rig = Rig::keeping_records(Some(7)).await;
    let body = paid("evt_r1", "inv_r1", "never applied");
    assert_eq!(rig.post(&body, "evt_r1", NOW_MS).await, 200);
    let record = rig.item("evt_r1").await.unwrap();
    assert_eq!(get_n(&record, "expires_at"), NOW + 7 * 86_400);
    let queue = SqsQueue::new(rig.aws.sqs.clone(), &rig.queue);
    // Six days later it is still not processed: the sweep sends it again and keeps it.
    let later = NOW_MS + 6 * 86_400_000;
    let swept = resend_stranded(&rig.ledger, &queue, 30, later - 600_000, later, 10)
        .await
        .unwrap();
    assert_eq!(swept.resent, 1);
    let record = rig.item("evt_r1").await.unwrap();
    assert_eq!(get_s(&record, "state"), "received");
    assert_eq!(
        get_n(&record, "expires_at"),
        later / 1000 + 7 * 86_400,
        "an unprocessed record's retention runs from the last sweep that found it"
    );
    assert_eq!(
        get_n(
            &rig.item(&body_key("evt_r1", &body)).await.unwrap(),
            "expires_at"
        ),
        later / 1000 + 7 * 86_400,
        "its body is kept as long as the record"
    );
    // Its body gone anyway: the record still is not let go while it is not processed.
    rig.delete(&body_key("evt_r1", &body)).await;
    let again = later + 5 * 86_400_000;
    let swept = resend_stranded(&rig.ledger, &queue, 30, again - 600_000, again, 10)
        .await
        .unwrap();
    assert_eq!(swept.bodiless, 1);
    assert_eq!(
        get_n(&rig.item("evt_r1").await.unwrap(), "expires_at"),
        again / 1000 + 7 * 86_400
    );
}
