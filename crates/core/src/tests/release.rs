//! Release: what a person may fulfil by hand, and what they may not.

use std::sync::Arc;

use crate::money::change::{Applied, OrderRef};
use crate::money::effect::RecordFulfilment;
use crate::money::status::{Amount, InvoiceStatus};
use crate::roads::release::{ReleaseBy, ReleaseError, release};
use crate::testkit::memory::MemoryResources;
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

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

/// A person releasing with a reason, overriding the amount check.
fn overriding(actor: &str) -> ReleaseBy<'_> {
    ReleaseBy {
        actor,
        reason: Some("checked with the customer"),
        override_amount: true,
        project: None,
        order: None,
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
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    for item in history {
        fulfil.apply(item, 1).await.unwrap();
    }
    let once = release(
        &*store,
        invoice_id,
        None,
        &overriding("support:a"),
        &RecordFulfilment,
        2,
    )
    .await;
    let twice = release(
        &*store,
        invoice_id,
        None,
        &overriding("support:b"),
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
    assert_eq!(
        invoice.seen().standing(),
        crate::money::invoice::Standing::Released
    );
    assert!(!invoice.seen().standing().waits_for_person());
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
async fn an_invoice_known_only_from_an_unconfirmed_delivery_is_never_released() {
    let store = MemoryResources::new();
    let order = OrderRef {
        external_id: Some("o-9".into()),
        amount: Amount::parse("5"),
        currency: Some("USD".into()),
        project: None,
        home: false,
        unlisted: false,
    };
    // A forged delivery names an order just as a genuine one does: `recheck` applies it once
    // Paymos shows it paid; a person who knows better says so with `mark-paid --order-id`.
    let applied = release(
        &store,
        "inv_9",
        Some(&order),
        &ReleaseBy {
            actor: "support:a",
            reason: Some("checked by phone"),
            override_amount: false,
            project: None,
            order: None,
        },
        &RecordFulfilment,
        1,
    )
    .await;
    assert!(
        matches!(&applied, Err(ReleaseError::NotReleasable(why)) if why.contains("recheck inv_9") && why.contains("mark-paid")),
        "{applied:?}"
    );
    assert!(store.fulfilled().is_empty() && store.invoice("inv_9").is_none());
    let fulfil = crate::tests::one_shop(store);
    let by_hand = fulfil.mark_paid("inv_9", order, "support:a", 2).await;
    assert_eq!(by_hand, Ok(Applied::Fulfilled));
    // The order is claimed: a webhook paying it with another invoice is a duplicate payment.
    let (_, later) = fulfil
        .apply(&paid("evt_z", "paid", 40, "inv_10", "o-9"), 3)
        .await
        .unwrap();
    assert_eq!(later, Applied::DuplicatePayment);
}

/// A person releasing with no override.
fn plainly(actor: &str) -> ReleaseBy<'_> {
    ReleaseBy {
        actor,
        reason: None,
        override_amount: false,
        project: None,
        order: None,
    }
}

#[tokio::test]
async fn release_refuses_what_no_payment_waits_for_and_what_the_order_was_not_registered_for() {
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-dear", &Amount::parse("500").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    fulfil
        .apply(&paid("evt_o", "confirming", 10, "inv_open", "o-1"), 1)
        .await
        .unwrap();
    // 1 USD paid for an order registered at 500 USD: held.
    let one_usd = WorkItem {
        body: String::from_utf8(paid("evt_c", "paid", 20, "inv_cheap", "o-dear").body)
            .unwrap()
            .replace("10.50", "1")
            .into_bytes(),
        ..paid("evt_c", "paid", 20, "inv_cheap", "o-dear")
    };
    fulfil.apply(&one_usd, 1).await.unwrap();
    let cases: [(&str, &str, &str); 3] = [
        ("a mistyped invoice id", "inv_typo", "unknown"),
        ("an open invoice nobody paid", "inv_open", "open"),
        (
            "1 USD for an order registered at 500 USD",
            "inv_cheap",
            "not what order o-dear was registered for",
        ),
    ];
    for (name, invoice, words) in cases {
        let answer = release(
            &*store,
            invoice,
            None,
            &plainly("support:a"),
            &RecordFulfilment,
            2,
        )
        .await;
        assert!(
            matches!(&answer, Err(ReleaseError::NotReleasable(why)) if why.contains(words)),
            "{name}: {answer:?}"
        );
    }
    assert!(store.fulfilled().is_empty(), "nothing fulfilled");
    // The override is explicit, needs a reason, and the reason is kept.
    let no_reason = release(
        &*store,
        "inv_cheap",
        None,
        &ReleaseBy {
            actor: "support:a",
            reason: None,
            override_amount: true,
            project: None,
            order: None,
        },
        &RecordFulfilment,
        3,
    )
    .await;
    assert!(matches!(no_reason, Err(ReleaseError::NotReleasable(why)) if why.contains("--reason")));
    let overridden = release(
        &*store,
        "inv_cheap",
        None,
        &overriding("support:a"),
        &RecordFulfilment,
        4,
    )
    .await;
    assert_eq!(overridden, Ok(Applied::Fulfilled));
    assert_eq!(
        store
            .invoice("inv_cheap")
            .unwrap()
            .release_reason
            .as_deref(),
        Some("checked with the customer")
    );
}

#[tokio::test]
async fn a_held_payment_is_not_released_without_the_override() {
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-1", &Amount::parse("99").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    fulfil
        .apply(&paid("evt_a", "paid", 20, "inv_1", "o-1"), 1)
        .await
        .unwrap();
    let answer = release(
        &*store,
        "inv_1",
        None,
        &plainly("support:a"),
        &RecordFulfilment,
        2,
    )
    .await;
    assert!(
        matches!(&answer, Err(ReleaseError::NotReleasable(why)) if why.contains("--override-amount")),
        "{answer:?}"
    );
    assert!(store.fulfilled().is_empty());
    assert!(store.invoice("inv_1").unwrap().held, "still listed");
}

// Issue 28, cases 4 and 5: only a payment ships; a closure or a refund waiting unconfirmed
// never does.
#[tokio::test]
async fn a_closure_or_a_refund_waiting_unconfirmed_is_never_released() {
    use crate::roads::release::{Named, release_named};
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-1", &Amount::parse("99").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    fulfil
        .apply(&paid("evt_a", "paid", 20, "inv_held", "o-1"), 1)
        .await
        .unwrap();
    fulfil
        .apply(&paid("evt_o", "confirming", 20, "inv_open", "o-2"), 1)
        .await
        .unwrap();
    let expired = Named::NoPayment("invoice.expired".into());
    let refund = Named::Refund("wdr_1".into());
    for (name, invoice, named, words) in [
        (
            "an unknown invoice only a closure names",
            "inv_gone",
            &expired,
            "not a payment",
        ),
        (
            "an open invoice only a closure names",
            "inv_open",
            &expired,
            "not a payment",
        ),
        (
            "a held payment whose refund waits",
            "inv_held",
            &refund,
            "recheck wdr_1",
        ),
    ] {
        let answer = release_named(
            &*store,
            invoice,
            named,
            &overriding("support:a"),
            &RecordFulfilment,
            2,
        )
        .await;
        assert!(
            matches!(&answer, Err(ReleaseError::NotReleasable(why)) if why.contains(words)),
            "{name}: {answer:?}"
        );
    }
    assert!(store.fulfilled().is_empty(), "nothing shipped");
    assert!(store.invoice("inv_gone").is_none(), "nothing invented");
    assert!(store.invoice("inv_held").unwrap().held, "still waits");
    // The same held payment, with only a closure unconfirmed beside it, is released.
    let answer = release_named(
        &*store,
        "inv_held",
        &expired,
        &overriding("support:a"),
        &RecordFulfilment,
        3,
    )
    .await;
    assert_eq!(answer, Ok(Applied::Fulfilled));
}

// Issue 38, case 6: what the stream published is what `events since` returns. A payment held,
// then released, keeps its `held` review among the facts (one id per fact, as published).
#[tokio::test]
async fn a_released_payment_still_has_the_review_it_was_held_for() {
    use crate::roads::handoff::since;
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-1", &Amount::parse("99").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let held = fulfil
        .apply(&paid("evt_a", "paid", 20, "inv_1", "o-1"), 1)
        .await
        .unwrap()
        .1;
    assert_eq!(held, Applied::Held);
    let keys = |events: Vec<(u64, crate::roads::handoff::DomainEvent)>| -> Vec<String> {
        events.into_iter().map(|(_, e)| e.idempotency_key).collect()
    };
    let before = keys(since(&*store, 0, Environment::Live).await.unwrap());
    assert!(
        before.contains(&"payment-needs-review:inv_1:held".to_owned()),
        "{before:?}"
    );
    release(
        &*store,
        "inv_1",
        None,
        &overriding("support:a"),
        &RecordFulfilment,
        2,
    )
    .await
    .unwrap();
    let after = keys(since(&*store, 0, Environment::Live).await.unwrap());
    for fact in &before {
        assert!(
            after.contains(fact),
            "{fact} published, then gone: {after:?}"
        );
    }
    assert!(after.contains(&"order-paid:inv_1".to_owned()), "{after:?}");
}

/// Without the API: inv_1's open event named o-A (registered at 10.50), its payment o-B
/// (registered at `b_price`), 10.50 USD: held, the orders disputed.
async fn orders_disputed(
    b_price: &str,
) -> (
    Arc<MemoryResources>,
    crate::roads::fulfil::Fulfil<Arc<MemoryResources>>,
) {
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-A", &Amount::parse("10.50").unwrap(), "USD");
    store.register_order("o-B", &Amount::parse(b_price).unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let open = paid("evt_open", "awaiting_payment", 10, "inv_1", "o-A");
    fulfil.apply(&open, 1).await.unwrap();
    let paid = paid("evt_paid", "paid", 20, "inv_1", "o-B");
    assert_eq!(fulfil.apply(&paid, 1).await.unwrap().1, Applied::Held);
    (store, fulfil)
}

// Issue 49 (attack H2): without the API, an open event of inv_1 named order o-A and its
// payment named o-B: held. A plain release shipped o-A, the order the open event planted,
// though an invoice has one order ("every invoice is created with an external_order_id") and
// nothing says which snapshot is right: a release cannot choose. It refuses, naming both; a
// person who read the invoice's order at Paymos names it (`release --order-id`), and that
// order ships, once.
#[tokio::test]
async fn a_payment_naming_another_order_than_its_open_event_ships_only_the_order_a_person_names() {
    let (store, fulfil) = orders_disputed("10.50").await;
    for by in [plainly("support:a"), overriding("support:a")] {
        let refused = release(&*store, "inv_1", None, &by, &RecordFulfilment, 2).await;
        assert!(
            matches!(&refused, Err(ReleaseError::NotReleasable(why))
                if why.contains("o-A") && why.contains("o-B") && why.contains("--order-id")),
            "{refused:?}"
        );
    }
    assert!(store.fulfilments().is_empty(), "{:?}", store.fulfilments());
    let by = |order| ReleaseBy {
        order: Some(order),
        ..plainly("support:a")
    };
    let ledger = crate::testkit::memory::MemoryReviews::new();
    let neither = fulfil.release(&ledger, "inv_1", &by("o-C"), 3).await;
    assert!(
        matches!(&neither, Err(ReleaseError::NotReleasable(why)) if why.contains("not o-C")),
        "{neither:?}"
    );
    assert_eq!(
        fulfil.release(&ledger, "inv_1", &by("o-B"), 3).await,
        Ok(Applied::Fulfilled)
    );
    let again = fulfil.release(&ledger, "inv_1", &by("o-A"), 4).await;
    assert!(
        matches!(&again, Err(ReleaseError::NotReleasable(why)) if why.contains("not o-A")),
        "{again:?}"
    );
    assert_eq!(
        store.fulfilments(),
        [("inv_1".to_owned(), Some("o-B".to_owned()))]
    );
}

// The same for an order (attack finding 1, on H2's way out): a release naming o-B, refused by
// the amount guard (o-B was registered at another price), leaves the record disputed as it was;
// naming o-A then ships o-A.
#[tokio::test]
async fn a_refused_release_naming_an_order_leaves_the_record_as_it_was() {
    let (store, fulfil) = orders_disputed("99").await;
    let before = store.invoice("inv_1").unwrap().seen();
    let by = |order| ReleaseBy {
        order: Some(order),
        ..plainly("support:a")
    };
    let ledger = crate::testkit::memory::MemoryReviews::new();
    let refused = fulfil.release(&ledger, "inv_1", &by("o-B"), 3).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(store.invoice("inv_1").unwrap().seen(), before);
    assert_eq!(
        fulfil.release(&ledger, "inv_1", &by("o-A"), 4).await,
        Ok(Applied::Fulfilled)
    );
    assert_eq!(
        store.fulfilments(),
        [("inv_1".to_owned(), Some("o-A".to_owned()))]
    );
}

// A missed mutant (the plain release's arm in `Fulfil::release`): a refused release, naming
// nothing, writes nothing: the record is byte for byte as it was (no put-back either).
#[tokio::test]
async fn a_refused_plain_release_writes_nothing() {
    use crate::money::write::Key;
    use crate::roads::fulfil::ResourceStore;
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-1", &Amount::parse("99").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let held = paid("evt_h", "paid", 20, "inv_1", "o-1");
    assert_eq!(fulfil.apply(&held, 1).await.unwrap().1, Applied::Held);
    let before = store.read(&Key::state("inv_1")).await.unwrap();
    let ledger = crate::testkit::memory::MemoryReviews::new();
    let refused = fulfil
        .release(&ledger, "inv_1", &plainly("support:a"), 9)
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(store.read(&Key::state("inv_1")).await.unwrap(), before);
}

// Read again (issue 49, H2's way out with the API): `release --order-id` asks Paymos first when
// the API is configured, and compared Paymos' order with the record's alone. Where the payment
// named o-B, Paymos has o-B and the person names o-B, the release was refused ("the payment
// waits under order o-A, Paymos has order o-B"): the disputed hold could not ship on the API's
// road. The order Paymos is held to is the one the person names, once it is one of the two.
#[tokio::test]
async fn a_release_asking_paymos_ships_the_disputed_order_paymos_and_the_person_name() {
    use crate::roads::confirm::ConfirmedInvoice;
    let (store, fulfil) = orders_disputed("10.50").await;
    let paymos = crate::testkit::memory::MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            status: "paid".into(),
            is_test: false,
            order_id: Some("o-B".into()),
            order_amount: Amount::parse("10.50"),
            order_currency: Some("USD".into()),
            token_amount: None,
            token_currency: None,
            paid_late: false,
            project_id: None,
            paid_at: Some(20),
        },
    );
    let ledger = crate::testkit::memory::MemoryReviews::new();
    let by = |order| ReleaseBy {
        order,
        ..plainly("support:a")
    };
    for (order, shipped) in [(None, false), (Some("o-A"), false), (Some("o-B"), true)] {
        let released = fulfil
            .release_asking(&ledger, &paymos, "inv_1", &by(order), 3)
            .await;
        assert_eq!(released.is_ok(), shipped, "{order:?}: {released:?}");
    }
    assert_eq!(
        store.fulfilments(),
        [("inv_1".to_owned(), Some("o-B".to_owned()))]
    );
}
