//! The operator's use cases on the in-memory ports: what `exceptions` lists and what each way
//! out (`release`, `recheck`) does, in milliseconds.

use std::sync::Arc;

use crate::change::Applied;
use crate::confirm::ConfirmedInvoice;
use crate::envelope::Category;
use crate::exceptions::{list, recheck, release};
use crate::fulfil::Fulfil;
use crate::ingest::Delivery;
use crate::memory::{MemoryPaymos, MemoryResources, MemoryReviews};
use crate::release::{ReleaseBy, ReleaseError};
use crate::signature::Environment;
use crate::status::Amount;
use crate::work::WorkItem;

const NOW_MS: u64 = 1_800_000_000_000;

fn paid_body(event_id: &str, invoice: &str, amount: &str) -> String {
    format!(
        r#"{{"event_id":"{event_id}","event_type":"invoice.paid","version":1,"occurred_at":1700000000,"data":{{"invoice_id":"{invoice}","order":{{"external_id":"o-{invoice}","amount":"{amount}","currency":"USD"}}}}}}"#
    )
}

fn delivery(event_id: &str, invoice: &str) -> Delivery {
    Delivery {
        event_id: event_id.into(),
        event_type: "invoice.paid".into(),
        category: Category::Invoice,
        resource_id: Some(invoice.into()),
        environment: Some(Environment::Live),
        secret_label: "live".into(),
        version: 1,
        occurred_at: 1_700_000_000,
        signed_at: 1_700_000_000,
        received_at_ms: NOW_MS,
        body: paid_body(event_id, invoice, "10.00").into_bytes(),
        body_sha256: String::new(),
    }
}

fn paid(event_id: &str, invoice: &str, amount: &str) -> WorkItem {
    WorkItem {
        event_id: event_id.into(),
        environment: Some(Environment::Live),
        body: paid_body(event_id, invoice, amount).into_bytes(),
        received_at_ms: Some(NOW_MS),
    }
}

/// A store where `inv_held` was paid 12.00 for an order registered at 10.00.
async fn held() -> Arc<MemoryResources> {
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-inv_held", &Amount::parse("10.00").unwrap(), "USD");
    let (_, applied) = Fulfil::new(Arc::clone(&store))
        .apply(&paid("evt_h", "inv_held", "12.00"), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Held);
    store
}

fn alice() -> ReleaseBy<'static> {
    ReleaseBy {
        actor: "alice",
        reason: Some("the customer paid the new price"),
        override_amount: true,
    }
}

#[tokio::test]
async fn every_payment_that_waits_is_listed_with_its_way_out_and_nothing_else() {
    let store = held().await;
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivery("evt_u", "inv_u"),
        "unconfirmed",
        "invoice.paid: Paymos does not know it",
        5,
    );
    reviews.processed(delivery("evt_x", "inv_x"), "unusable", "no invoice_id", 6);
    reviews.processed(delivery("evt_f", "inv_f"), "fulfilled", "", 7);
    let listed = list(store.as_ref(), &reviews, 2).await.unwrap();
    let kinds: Vec<_> = listed
        .iter()
        .map(|e| (e.kind, e.resource_id.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("dead_letter", None),
            ("unconfirmed", Some("inv_u")),
            ("unusable", Some("inv_x")),
            ("held", Some("inv_held")),
        ],
        "oldest first; a fulfilled delivery is not an exception"
    );
    assert!(listed[0].why.starts_with("2 message(s)"));
    assert!(listed[1].action.contains("paymos-inbox recheck inv_u"));
    assert_eq!(
        listed[2].why, "invoice.paid: no invoice_id",
        "the type named once"
    );
    assert!(
        listed[3].why.contains("paid 12.00 USD"),
        "{}",
        listed[3].why
    );
    assert!(listed[3].action.contains("--override-amount"));
    assert!(
        list(&MemoryResources::new(), &MemoryReviews::new(), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_release_fulfils_once_and_resolves_the_deliveries_that_waited() {
    let store = held().await;
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivery("evt_u", "inv_held"),
        "unconfirmed",
        "not at Paymos yet",
        5,
    );
    let applied = release(store.as_ref(), &reviews, "inv_held", &alice(), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Fulfilled);
    assert_eq!(store.fulfilled(), ["inv_held"]);
    assert_eq!(
        reviews.resolved("evt_u"),
        Some(("released".into(), "manual:alice".into()))
    );
    assert!(
        list(store.as_ref(), &reviews, 0).await.unwrap().is_empty(),
        "nothing waits"
    );
    let again = release(store.as_ref(), &reviews, "inv_held", &alice(), NOW_MS).await;
    assert!(
        matches!(
            again,
            Ok(Applied::AlreadyFinal) | Err(ReleaseError::NotReleasable(_))
        ),
        "{again:?}"
    );
    assert_eq!(store.fulfilled(), ["inv_held"], "never twice");
}

#[tokio::test]
async fn a_recheck_applies_what_paymos_now_confirms_and_leaves_the_rest_waiting() {
    let store = MemoryResources::new();
    let reviews = MemoryReviews::new();
    reviews.processed(delivery("evt_p", "inv_p"), "unconfirmed", "not paid yet", 5);
    reviews.processed(delivery("evt_w", "inv_w"), "unconfirmed", "not paid yet", 6);
    let paymos = MemoryPaymos::new();
    let at_paymos = |status: &str, invoice: &str| ConfirmedInvoice {
        status: status.into(),
        is_test: false,
        order_id: Some(format!("o-{invoice}")),
        order_amount: Amount::parse("10.00"),
        order_currency: Some("USD".into()),
        token_amount: None,
        token_currency: None,
        paid_late: false,
    };
    paymos.invoice("inv_p", at_paymos("paid", "inv_p"));
    paymos.invoice("inv_w", at_paymos("awaiting_payment", "inv_w"));
    let rechecked = recheck(&store, &reviews, &paymos, Environment::Live, None, NOW_MS)
        .await
        .unwrap();
    let outcomes: Vec<_> = rechecked
        .iter()
        .map(|r| (r.invoice_id.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(outcomes, [("inv_p", "fulfilled"), ("inv_w", "unconfirmed")]);
    assert_eq!(
        rechecked[1].reason.as_deref(),
        Some("still awaiting_payment at Paymos")
    );
    assert_eq!(store.fulfilled(), ["inv_p"]);
    assert_eq!(reviews.resolved("evt_p").unwrap().0, "rechecked_fulfilled");
    assert_eq!(reviews.resolved("evt_w"), None);
    // Run again: only what still waits is read again.
    let again = recheck(&store, &reviews, &paymos, Environment::Live, None, NOW_MS)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
}

#[tokio::test]
async fn a_second_payment_is_listed_to_refund_and_an_invoice_only_a_delivery_named_is_released_with_its_order()
 {
    let store = Arc::new(MemoryResources::new());
    let fulfil = Fulfil::new(Arc::clone(&store));
    let second = |event_id: &str, invoice: &str| {
        WorkItem {
        event_id: event_id.into(),
        environment: Some(Environment::Live),
        body: format!(
            r#"{{"event_id":"{event_id}","event_type":"invoice.paid","version":1,"occurred_at":1700000000,"data":{{"invoice_id":"{invoice}","order":{{"external_id":"o-1","amount":"10.00","currency":"USD"}}}}}}"#
        )
        .into_bytes(),
        received_at_ms: Some(NOW_MS),
    }
    };
    fulfil
        .apply(&second("evt_1", "inv_1"), NOW_MS)
        .await
        .unwrap();
    fulfil
        .apply(&second("evt_2", "inv_2"), NOW_MS)
        .await
        .unwrap();
    let listed = list(store.as_ref(), &MemoryReviews::new(), 0)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].kind, "duplicate_payment");
    assert!(
        listed[0].why.contains("which inv_1 fulfilled"),
        "{}",
        listed[0].why
    );
    assert!(
        listed[0]
            .action
            .starts_with("refund inv_2 at Paymos in full")
    );

    // Only an unconfirmed delivery told us of inv_new: released with the order it names.
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivery("evt_n", "inv_new"),
        "unconfirmed",
        "not at Paymos yet",
        5,
    );
    let by = ReleaseBy {
        actor: "alice",
        reason: None,
        override_amount: false,
    };
    let applied = release(store.as_ref(), &reviews, "inv_new", &by, NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Fulfilled);
    assert!(
        store
            .fulfilments()
            .contains(&("inv_new".into(), Some("o-inv_new".into())))
    );
}
