//! Release: what a person may fulfil by hand, and what they may not.

use std::sync::Arc;

use crate::adapters::memory::MemoryResources;
use crate::domain::fulfil::{Applied, Fulfil, OrderRef, RecordFulfilment};
use crate::domain::release::{ReleaseError, release};
use crate::domain::signature::Environment;
use crate::domain::status::{Amount, InvoiceStatus};
use crate::domain::work::WorkItem;

fn paid(event_id: &str, status: &str, at: u64, invoice_id: &str, order: &str) -> WorkItem {
    let body = format!(
        r#"{{"event_id":"{event_id}","event_type":"invoice.{status}","version":1,"occurred_at":{at},"data":{{"invoice_id":"{invoice_id}","order":{{"external_id":"{order}","amount":"10.50","currency":"USD"}}}}}}"#
    );
    WorkItem {
        event_id: event_id.to_owned(),
        environment: Some(Environment::Live),
        body: body.into_bytes(),
        received_at_ms: None,
    }
}

fn no_order() -> OrderRef {
    OrderRef {
        external_id: None,
        amount: None,
        currency: None,
    }
}

/// Applies `history`, then releases `invoice_id` twice; both answers and the store.
async fn released_twice(
    history: &[WorkItem],
    invoice_id: &str,
    prepare: impl FnOnce(&MemoryResources),
) -> (
    Result<Applied, ReleaseError>,
    Result<Applied, ReleaseError>,
    Arc<MemoryResources>,
) {
    let store = Arc::new(MemoryResources::new());
    prepare(&store);
    let fulfil = Fulfil::new(Arc::clone(&store));
    for item in history {
        fulfil.apply(item, 1).await.unwrap();
    }
    let once = release(
        &*store,
        invoice_id,
        &no_order(),
        "support:a",
        None,
        &RecordFulfilment,
        2,
    )
    .await;
    let twice = release(
        &*store,
        invoice_id,
        &no_order(),
        "support:b",
        None,
        &RecordFulfilment,
        3,
    )
    .await;
    (once, twice, store)
}

#[tokio::test]
async fn a_held_payment_is_fulfilled_once_on_a_persons_word() {
    let (once, twice, store) =
        released_twice(&[paid("evt_a", "paid", 20, "inv_1", "o-1")], "inv_1", |s| {
            s.register_order("o-1", &Amount::parse("99").unwrap(), "USD");
        })
        .await;
    assert_eq!(once, Ok(Applied::Fulfilled));
    assert_eq!(twice, Ok(Applied::AlreadyFinal));
    assert_eq!(store.fulfilled(), ["inv_1"]);
    let invoice = store.invoice("inv_1").unwrap();
    assert!(!invoice.held);
    assert_eq!(invoice.released_by.as_deref(), Some("manual:support:a"));
}

#[tokio::test]
async fn a_late_payment_is_fulfilled_and_keeps_its_close() {
    let history = [
        paid("evt_x", "expired", 15, "inv_1", "o-1"),
        paid("evt_a", "paid", 20, "inv_1", "o-1"),
    ];
    let (once, twice, store) = released_twice(&history, "inv_1", |_| {}).await;
    assert_eq!(
        (once, twice),
        (Ok(Applied::Fulfilled), Ok(Applied::AlreadyFinal))
    );
    assert_eq!(
        store.invoice("inv_1").unwrap().status.map(|(s, _)| s),
        Some(InvoiceStatus::Expired)
    );
    assert_eq!(store.fulfilled(), ["inv_1"]);
}

#[tokio::test]
async fn what_must_not_be_released() {
    let duplicate = [
        paid("evt_a", "paid", 20, "inv_1", "o-1"),
        paid("evt_b", "paid", 21, "inv_2", "o-1"),
    ];
    let never_paid = [paid("evt_c", "cancelled", 20, "inv_1", "o-1")];
    let refunded_late = [
        paid("evt_x", "expired", 15, "inv_1", "o-1"),
        paid("evt_a", "paid", 20, "inv_1", "o-1"),
        WorkItem {
            body: br#"{"event_id":"evt_r","event_type":"withdrawal.completed","version":1,"occurred_at":30,"data":{"withdrawal_id":"wdr_1","invoice_id":"inv_1","mode":"full"}}"#.to_vec(),
            event_id: "evt_r".into(),
            environment: Some(Environment::Live),
            received_at_ms: None,
        },
    ];
    for (name, history, invoice, expected_words, fulfilled) in [
        (
            "a second payment for a fulfilled order",
            &duplicate[..],
            "inv_2",
            "refund it",
            vec!["inv_1"],
        ),
        (
            "an invoice closed unpaid",
            &never_paid[..],
            "inv_1",
            "never paid",
            vec![],
        ),
        (
            "a late payment already refunded",
            &refunded_late[..],
            "inv_1",
            "refunded",
            vec![],
        ),
    ] {
        let (once, _, store) = released_twice(history, invoice, |_| {}).await;
        assert!(
            matches!(&once, Err(ReleaseError::NotReleasable(why)) if why.contains(expected_words)),
            "{name}: {once:?}"
        );
        assert_eq!(store.fulfilled(), fulfilled, "{name}");
    }
}

#[tokio::test]
async fn an_invoice_known_only_from_an_unconfirmed_delivery_is_created_paid() {
    let store = MemoryResources::new();
    let order = OrderRef {
        external_id: Some("o-9".into()),
        amount: Amount::parse("5"),
        currency: Some("USD".into()),
    };
    let applied = release(
        &store,
        "inv_9",
        &order,
        "support:a",
        Some("checked by phone"),
        &RecordFulfilment,
        1,
    )
    .await;
    assert_eq!(applied, Ok(Applied::Fulfilled));
    let invoice = store.invoice("inv_9").unwrap();
    assert_eq!(invoice.status.map(|(s, _)| s), Some(InvoiceStatus::Paid));
    assert_eq!(invoice.order_id.as_deref(), Some("o-9"));
    // The order is claimed: a webhook paying it with another invoice is a duplicate payment.
    let fulfil = Fulfil::new(store);
    let (_, later) = fulfil
        .apply(&paid("evt_z", "paid", 40, "inv_10", "o-9"), 2)
        .await
        .unwrap();
    assert_eq!(later, Applied::DuplicatePayment);
}
