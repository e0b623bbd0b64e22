//! Issue 51, lever 2: only the reconciliation reads the `open` list, so a stack without it
//! writes none (fulfil's store `without_open_list`). Turning the reconciliation on later runs
//! `exceptions --reindex` first, which lists the open invoices written meanwhile: the
//! reconciliation then re-reads every one.

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::roads::fulfil::Fulfil;
use serde_json::json;

use paymos_inbox_testkit::*;

/// As `invoice_paid` names its order.
fn awaiting(event_id: &str, invoice_id: &str) -> String {
    envelope(
        event_id,
        "invoice.awaiting_payment",
        json!({"invoice_id": invoice_id,
            "order": {"external_id": format!("order-{invoice_id}"), "amount": "10.50", "currency": "USDT"}}),
    )
}

/// The invoices the `open` lists hold, by id.
pub(crate) async fn open_ids(resources: &DynamoResources) -> Vec<String> {
    let mut ids: Vec<String> = resources
        .open_invoices()
        .await
        .unwrap()
        .into_iter()
        .map(|(invoice, _)| invoice)
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn without_the_reconciliation_an_open_invoice_is_listed_nowhere_until_the_reindex() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let fulfil =
        Fulfil::new(resources.clone().without_open_list()).for_projects(crate::one_project());
    for (event_id, invoice_id) in [("evt_a", "inv_open"), ("evt_b", "inv_paid")] {
        let (_, applied) = fulfil
            .apply(&live(&awaiting(event_id, invoice_id)), NOW_MS)
            .await
            .unwrap();
        assert_eq!(applied, Applied::Updated, "{invoice_id}");
    }
    let (_, applied) = fulfil
        .apply(&live(&invoice_paid("evt_c", "inv_paid")), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Fulfilled);
    let open = aws.item(state, "pk", "inv_open").await.unwrap();
    assert!(!open.contains_key("listed_in"), "{open:?}");
    assert!(
        resources.open_invoices().await.unwrap().is_empty(),
        "no open list"
    );
    // What the hand-off reads since a time is unchanged: the paid invoice is listed by its day.
    let paid = aws.item(state, "pk", "inv_paid").await.unwrap();
    assert!(get_s(&paid, "listed_in").starts_with("day#"), "{paid:?}");

    // The reconciliation is turned on: the re-index lists the open invoice, once.
    assert_eq!(resources.reindex_listed().await.unwrap(), 1);
    assert_eq!(resources.reindex_listed().await.unwrap(), 0, "idempotent");
    assert_eq!(
        open_ids(&resources).await,
        ["inv_open"],
        "re-read at Paymos"
    );

    // A stack with the reconciliation lists an open invoice as it is written.
    Fulfil::new(resources.clone())
        .for_projects(crate::one_project())
        .apply(&live(&awaiting("evt_d", "inv_later")), NOW_MS)
        .await
        .unwrap();
    assert_eq!(resources.open_invoices().await.unwrap().len(), 2);
}

// A DynamoDB page holds at most 1 MB: a list, or a scan, longer than that is read page after
// page. Thirty invoices of about 40 KB each, in one open list, make two pages of the list and
// two of the table: each read returns all thirty, each once.
#[tokio::test]
async fn a_list_or_a_scan_longer_than_a_page_is_read_whole() {
    const INVOICES: usize = 30;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let list = paymos_inbox_core::money::write::open_lists().remove(0);
    let padding = "x".repeat(40_000);
    for i in 0..INVOICES {
        aws.dynamodb
            .put_item()
            .table_name(state)
            .item("pk", AttributeValue::S(format!("inv_{i:02}")))
            .item("kind", AttributeValue::S("invoice".to_owned()))
            .item("listed_in", AttributeValue::S(list.clone()))
            .item("updated_at", AttributeValue::N(i.to_string()))
            .item("padding", AttributeValue::S(padding.clone()))
            .send()
            .await
            .unwrap();
    }
    let every: Vec<String> = (0..INVOICES).map(|i| format!("inv_{i:02}")).collect();
    assert_eq!(
        open_ids(&resources).await,
        every,
        "the list's every page, each item once"
    );
    let mut keys = resources.keys().await.unwrap();
    keys.sort();
    assert_eq!(keys, every, "the table's every page, each item once");
}
