//! Write units per path, as DynamoDB reports them (`ReturnConsumedCapacity`): the figures
//! the README's cost table is built from. A change of the write plan changes these numbers
//! and must change the README with them.

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::ingest::respond;
use serde_json::json;

use paymos_inbox_testkit::*;

struct Tables {
    aws: Aws,
    ledger: DynamoLedger,
    fulfil: Fulfil<DynamoResources>,
}

impl Tables {
    async fn new() -> Self {
        let aws = Aws::new();
        let state = aws.state_table().await;
        let deliveries = aws.deliveries_table().await;
        let ledger = DynamoLedger::new(aws.dynamodb.clone(), &deliveries, None);
        let fulfil = Fulfil::new(DynamoResources::new(
            aws.dynamodb.clone(),
            &state,
            &deliveries,
        ))
        .for_projects(crate::one_project());
        Self {
            aws,
            ledger,
            fulfil,
        }
    }

    /// Records `body` as ingest does, then applies it: the outcome, the units DynamoDB reported
    /// for ingest and for fulfil, and the items fulfil wrote in transactions.
    async fn deliver(&self, body: &str, event_id: &str) -> (Applied, f64, f64, u64) {
        let queue = self.aws.queue().await;
        let ingest = Ingest::new(
            Verifier::new(
                vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
                300,
            ),
            self.ledger.clone(),
            SqsQueue::new(self.aws.sqs.clone(), &queue.queue_url),
            IngestSettings::default(),
        );
        let before = self.ledger.write_units().reported();
        let response = respond(
            &ingest,
            &delivery(body, event_id, &sign(body, NOW, &[LIVE_SECRET])),
            NOW_MS,
        )
        .await;
        assert_eq!(response.status(), 200);
        let ingest_units = self.ledger.write_units().reported() - before;
        let units = self.fulfil.store().write_units();
        let (before, before_items) = (units.reported(), units.transaction_items());
        let (_, applied) = self.fulfil.apply(&live(body), NOW_MS).await.unwrap();
        (
            applied,
            ingest_units,
            units.reported() - before,
            units.transaction_items() - before_items,
        )
    }
}

fn invoice(event_id: &str, status: &str, invoice_id: &str, order: &str, at: u64) -> String {
    let mut body: serde_json::Value = serde_json::from_str(&envelope(
        event_id,
        &format!("invoice.{status}"),
        json!({"invoice_id": invoice_id, "order": {"external_id": order, "amount": "10.50", "currency": "USD"}}),
    ))
    .unwrap();
    body["occurred_at"] = json!(at);
    body.to_string()
}

async fn measure() -> Vec<(&'static str, f64, f64, u64)> {
    let t = Tables::new().await;
    let deposit = envelope(
        "evt_w_dep",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_w", "is_final": true, "payment_channel_external_id": "c-1", "net": "5", "currency": "TRX"}),
    );
    let unusable = envelope(
        "evt_w_unusable",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_w2", "is_final": true, "payment_channel_external_id": "c-1", "net": "abc", "currency": "USDT"}),
    );
    let paths = [
        (
            "fulfilled",
            invoice("evt_w_paid", "paid", "inv_w1", "o-w1", NOW),
            "evt_w_paid",
        ),
        (
            "already_final",
            invoice("evt_w_again", "paid", "inv_w1", "o-w1", NOW + 1),
            "evt_w_again",
        ),
        (
            "duplicate_payment",
            invoice("evt_w_dup", "paid", "inv_w2", "o-w1", NOW + 2),
            "evt_w_dup",
        ),
        (
            "updated",
            invoice("evt_w_open", "confirming", "inv_w3", "o-w3", NOW),
            "evt_w_open",
        ),
        (
            "stale",
            invoice("evt_w_late", "awaiting_payment", "inv_w3", "o-w3", NOW - 1),
            "evt_w_late",
        ),
        ("credited", deposit, "evt_w_dep"),
        (
            "ignored",
            envelope("evt_w_ping", "subscription.renewed", json!({"id": "sub_1"})),
            "evt_w_ping",
        ),
        ("unusable", unusable, "evt_w_unusable"),
    ];
    let mut measured = Vec::new();
    for (expected, body, event_id) in paths {
        let (applied, ingest, fulfil, items) = t.deliver(&body, event_id).await;
        assert_eq!(applied.as_str(), expected);
        measured.push((expected, ingest, fulfil, items));
    }
    measured
}

#[tokio::test]
async fn write_units_per_path_are_what_the_readme_prices() {
    // (path, ingest units reported, fulfil units reported, items in fulfil's transactions).
    // Ingest: the body item (1, kept apart so that it can expire alone) and the record (1),
    // listed nowhere since issue 51 (its delayed check lists it only if it strands). The record
    // no longer carries the body, so every later update of it (the mark, a take-over) is billed
    // on a smaller item. The ledger mark, alone: the record (1), no index entry to remove. A
    // plain update of a resource: 1. For any transaction DynamoDB Local reports 2 per table
    // touched (and 2 for the ledger's index), whatever its items, so transactions are read by
    // their items (AWS bills 2 units per item and KB).
    //
    // Every item that stands for an event is listed in the state table's `listed` index
    // (`review`, `open` or its day), so each change of one also writes its entry there: in a
    // transaction DynamoDB Local reports 2 more per table whose index it touches (AWS: 1 WRU
    // per entry written, 2 when the entry moves from one list to another).
    let expected = [
        // The invoice's and the fulfilment's entries (AWS: 2 WRU; 3 for an invoice that was
        // open, its `open` entry removed).
        ("fulfilled", 2.0, 1.0 + 2.0 + 4.0, 4),
        ("already_final", 2.0, 1.0, 0),
        // A payment that waits for a person (here paid twice): its invoice's `review` entry.
        ("duplicate_payment", 2.0, 6.0, 2),
        // An open invoice's update: its `open` entry (the reconciliation re-reads it), 1 more.
        ("updated", 2.0, 1.0 + 2.0, 0),
        ("stale", 2.0, 1.0, 0),
        // The deposit's entry under its day (AWS: 1 WRU); the balance is not listed.
        ("credited", 2.0, 1.0 + 2.0 + 4.0, 2),
        ("ignored", 2.0, 1.0, 0),
        // The mark of a delivery that waits for a person writes its entry in the deliveries'
        // sparse `waiting` index, and its review note its entry under its day (AWS: 1 WRU
        // each): only such deliveries pay them.
        ("unusable", 2.0, 6.0 + 2.0, 2),
    ];
    assert_eq!(measure().await, expected);
}
