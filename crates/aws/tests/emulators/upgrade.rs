//! Issue 42, item 1: a stack upgraded from a release whose full refund's note set no flag on its
//! invoice. The upgrade's `exceptions --reindex` flags every such invoice from the refunds it
//! records, so the late payment of a customer refunded in full settles as on a new stack: the
//! customer keeps the money back and nothing ships.

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::roads::fulfil::Fulfil;
use serde_json::json;

use paymos_inbox_testkit::*;

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// An invoice as the release before wrote it after a full refund: its `refunds` list (an old
/// entry knows only `full`, no mode, no time), and no `refunded_in_full_by`.
async fn put_old_refunded_invoice(aws: &Aws, table: &str, invoice_id: &str, status: &str) {
    let refund = AttributeValue::M(
        [
            ("withdrawal_id".to_owned(), s(&format!("wdr_{invoice_id}"))),
            ("amount".to_owned(), AttributeValue::N("10.5".into())),
            ("currency".to_owned(), s("USDT")),
            ("full".to_owned(), AttributeValue::Bool(true)),
        ]
        .into(),
    );
    aws.dynamodb
        .put_item()
        .table_name(table)
        .item("pk", s(invoice_id))
        .item("kind", s("invoice"))
        .item("status", s(status))
        .item("status_at", AttributeValue::N((NOW - 600).to_string()))
        .item("order_id", s(&format!("o-{invoice_id}")))
        .item("refunds", AttributeValue::L(vec![refund]))
        .item(
            "updated_at",
            AttributeValue::N((NOW_MS - 600_000).to_string()),
        )
        .send()
        .await
        .unwrap();
}

fn paid(event_id: &str, invoice_id: &str) -> String {
    envelope(
        event_id,
        "invoice.paid",
        json!({"invoice_id": invoice_id,
            "order": {"external_id": format!("o-{invoice_id}"), "amount": "10.50", "currency": "USD"}}),
    )
}

#[tokio::test]
async fn after_the_reindex_an_upgraded_invoice_refunded_in_full_never_ships_its_late_payment() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    put_old_refunded_invoice(&aws, state, "inv_up_open", "awaiting_payment").await;
    put_old_refunded_invoice(&aws, state, "inv_up_closed", "expired").await;

    // The upgrade's step: flags both, once.
    assert_eq!(resources.flag_full_refunds().await.unwrap(), 2);
    assert_eq!(
        resources.flag_full_refunds().await.unwrap(),
        0,
        "idempotent"
    );
    let flagged = aws.item(state, "pk", "inv_up_open").await.unwrap();
    assert_eq!(get_s(&flagged, "refunded_in_full_by"), "wdr_inv_up_open");
    assert!(
        !flagged.contains_key("refunded_in_full_at"),
        "a refund without its time settles any payment"
    );

    // The late payments arrive: the customer has the money back, nothing ships, and nothing
    // waits for a person (a closed invoice's payment is late, and settled by the refund).
    let fulfil = Fulfil::new(resources.clone()).for_projects(crate::one_project());
    for (invoice_id, expected) in [
        ("inv_up_open", Applied::Refunded),
        ("inv_up_closed", Applied::PaidLate),
    ] {
        let body = paid(&format!("evt_{invoice_id}"), invoice_id);
        let (_, applied) = fulfil.apply(&live(&body), NOW_MS).await.unwrap();
        assert_eq!(applied, expected, "{invoice_id}");
        assert!(!resources.is_fulfilled(invoice_id).await.unwrap());
        assert!(
            aws.item(state, "pk", &format!("order_paid#o-{invoice_id}"))
                .await
                .is_none(),
            "the order stays free for the customer's new invoice"
        );
    }
    assert!(resources.fulfilments().await.unwrap().is_empty());
    assert!(
        resources.invoices_under_review().await.unwrap().is_empty(),
        "a payment refunded in full waits for nobody"
    );
}

/// An item as the previous release left it: `attributes` as given.
async fn put(aws: &Aws, table: &str, attributes: &[(&str, AttributeValue)]) {
    let mut put = aws.dynamodb.put_item().table_name(table);
    for (name, value) in attributes {
        put = put.item(*name, value.clone());
    }
    put.send().await.unwrap();
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

// Issue 42, the upgrade as one checklist: from tables in the previous releases' layouts (an
// open invoice written before the `listed` index, one in the unsharded `open` list, a delivery
// that waited for a person before the `waiting` index and whose record expires, one still
// pending in an old `pending-by-age` shard; issue 50: one waiting under its outcome's key, a
// held invoice in the one `review` list), the checklist's after-deploy step
// (`exceptions --reindex`: the three calls below) and the sweep's next run leave every money
// rule holding: what waits is listed and never expires, what is open is re-read, what is
// pending is found.
#[tokio::test]
async fn after_the_checklist_every_record_of_the_previous_layouts_is_read_as_before() {
    use paymos_inbox_aws::dynamodb::DynamoLedger;
    use paymos_inbox_core::roads::exceptions::{DELIVERY_OUTCOMES, ReviewLedger as _};
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, Some(30));
    // The state table: an open invoice from before the index, one in the unsharded list.
    put(
        &aws,
        state,
        &[
            ("pk", s("inv_old_open")),
            ("kind", s("invoice")),
            ("status", s("awaiting_payment")),
            ("order_id", s("order-old")),
            ("updated_at", n(NOW_MS - 86_400_000)),
        ],
    )
    .await;
    put(
        &aws,
        state,
        &[
            ("pk", s("inv_listed_open")),
            ("kind", s("invoice")),
            ("status", s("confirming")),
            ("listed_in", s("open")),
            ("updated_at", n(NOW_MS - 3_600_000)),
        ],
    )
    .await;
    // The ledger: an unconfirmed payment that waited before the `waiting` index (its record
    // expiring by DeliveryRetentionDays), and a delivery pending in shard p7 of eight.
    let expires = NOW_MS / 1000 + 30 * 86_400;
    let old_record = |id: &str, invoice: &str, rest: &[(&'static str, AttributeValue)]| {
        let mut item = vec![
            ("event_id", s(id)),
            ("event_type", s("invoice.paid")),
            ("category", s("invoice")),
            ("resource_id", s(invoice)),
            ("environment", s("live")),
            ("secret_label", s("live")),
            ("version", n(1)),
            ("occurred_at", n(NOW - 5)),
            ("signed_at", n(NOW)),
            ("received_at", n(NOW_MS)),
            ("body", AttributeValue::B(b"{}".to_vec().into())),
            ("body_sha256", s("0")),
        ];
        item.extend_from_slice(rest);
        item
    };
    let waited = old_record(
        "evt_old_wait",
        "inv_old_wait",
        &[
            ("state", s("processed")),
            ("outcome", s("unconfirmed")),
            ("processed_at", n(NOW_MS + 1)),
            ("expires_at", n(expires)),
        ],
    );
    put(&aws, deliveries, &waited).await;
    let pending = old_record(
        "evt_old_pending",
        "inv_old_pending",
        &[
            ("state", s("received")),
            ("lease_until", n(NOW_MS + 30_000)),
            ("enqueue_attempts", n(1)),
            ("pending_shard", s("p7")),
        ],
    );
    put(&aws, deliveries, &pending).await;

    // Issue 50's layouts: a payment waiting for its order under its outcome's key (a recheck
    // left it so), a held invoice in the one `review` list. Neither is where the readers of
    // the shards look until the reindex moves it.
    let keyed_by_outcome = old_record(
        "evt_old_unknown",
        "inv_old_unknown",
        &[
            ("state", s("processed")),
            ("outcome", s("order_unknown")),
            ("processed_at", n(NOW_MS + 2)),
            ("resolved_by", s("recheck")),
            ("waiting", s("order_unknown")),
        ],
    );
    put(&aws, deliveries, &keyed_by_outcome).await;
    put(
        &aws,
        state,
        &[
            ("pk", s("inv_old_held")),
            ("kind", s("invoice")),
            ("status", s("paid")),
            ("held", AttributeValue::Bool(true)),
            ("listed_in", s("review")),
            ("updated_at", n(NOW_MS - 7_200_000)),
        ],
    )
    .await;
    assert!(resources.invoices_under_review().await.unwrap().is_empty());

    // The checklist's step after the deploy: exceptions --reindex.
    assert_eq!(ledger.reindex_waiting().await.unwrap(), 2);
    assert_eq!(ledger.reindex_waiting().await.unwrap(), 0, "idempotent");
    assert!(resources.reindex_listed().await.unwrap() >= 2);
    resources.flag_full_refunds().await.unwrap();
    // The sweep's next run keeps what waits.
    assert_eq!(ledger.keep_waiting_bodies().await.unwrap(), 2);
    let held: Vec<String> = resources
        .invoices_under_review()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.invoice_id)
        .collect();
    assert_eq!(
        held,
        ["inv_old_held"],
        "the one review list's is in its shard"
    );

    let waiting = ledger
        .with_outcomes(&DELIVERY_OUTCOMES, None)
        .await
        .unwrap();
    assert_eq!(
        waiting
            .iter()
            .map(|w| w.delivery.event_id.as_str())
            .collect::<Vec<_>>(),
        ["evt_old_wait", "evt_old_unknown"],
        "what waited is listed, under its outcome's key before or in no index"
    );
    let record = aws
        .item(deliveries, "event_id", "evt_old_wait")
        .await
        .unwrap();
    assert!(
        !record.contains_key("expires_at"),
        "and never expires while it waits"
    );
    assert_eq!(
        crate::open_list::open_ids(&resources).await,
        ["inv_listed_open", "inv_old_open"],
        "both are re-read at Paymos"
    );
    let pending = ledger.pending(10).await.unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|p| p.event_id.as_str())
            .collect::<Vec<_>>(),
        ["evt_old_pending"],
        "an old shard is still read"
    );
}
