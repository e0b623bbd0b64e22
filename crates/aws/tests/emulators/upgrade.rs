//! Issue 42, item 1: a stack upgraded from a release whose full refund's note set no flag on its
//! invoice. The upgrade's `exceptions --reindex` flags every such invoice from the refunds it
//! records, so the late payment of a customer refunded in full settles as on a new stack: the
//! customer keeps the money back and nothing ships.

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::change::Applied;
use paymos_inbox_core::fulfil::Fulfil;
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
    let fulfil = Fulfil::new(resources.clone());
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
