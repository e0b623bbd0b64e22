//! Issue 49, F1: a stack that lists no projects (`PaymosProjectIds` empty, `dev` without
//! `--project`) receives every project (an endpoint with no project filter), and order and payer
//! ids are unique only within a project: it keys each project's orders and payers apart, holds a
//! payment naming no project for its project, and keeps refusing an order shipped before the
//! upgrade under the key every project shared then.

use std::sync::Arc;

use super::projects::{deposit, item, paid, paymos_has_x_paid_in, run};
use crate::money::change::{Applied, OrderRef, Projects};
use crate::roads::fulfil::Fulfil;
use crate::testkit::memory::{MemoryResources, MemoryReviews};

use Applied::*;

fn claims(store: &MemoryResources) -> Vec<String> {
    let mut keys = store.keys();
    keys.retain(|k| k.starts_with("order_paid#"));
    keys
}

// Before: [Fulfilled, DuplicatePayment, DuplicatePayment]: shop B's invoice for order 1001
// claimed shop A's 1001 (`order_paid#1001`), so B's own order never shipped and its payment was
// listed "refund it"; payer 42's deposits of two shops credited one balance.
#[tokio::test]
async fn a_stack_listing_no_projects_ships_order_1001_of_each_project_once_and_keeps_two_balances()
{
    let history = [
        paid("evt_a", "inv_a", "prj_a", "1001"),
        paid("evt_b", "inv_b", "prj_b", "1001"),
        // A second payment of shop B's order is shop B's duplicate, not shop A's.
        paid("evt_b2", "inv_b2", "prj_b", "1001"),
        deposit("evt_d1", "pcd_1", "prj_a", "42", "3"),
        deposit("evt_d2", "pcd_2", "prj_b", "42", "5"),
    ];
    let (outcomes, store) = run(Projects::all(), &history).await;
    assert_eq!(
        outcomes,
        [Fulfilled, Fulfilled, DuplicatePayment, Credited, Credited]
    );
    assert_eq!(
        store.fulfilments(),
        [
            ("inv_a".into(), Some("1001".into())),
            ("inv_b".into(), Some("1001".into()))
        ]
    );
    assert_eq!(
        claims(&store),
        ["order_paid#prj_a#1001", "order_paid#prj_b#1001"]
    );
    let balances = store.balances_by_key();
    assert_eq!(
        (
            balances.get("balance#prj_a#42#USDT").map(String::as_str),
            balances.get("balance#prj_b#42#USDT").map(String::as_str),
            balances.get("balance#42#USDT")
        ),
        (Some("3"), Some("5"), None)
    );
}

// Before: `fulfilled` and `credited` under the shared keys (`order_paid#1001`, `balance#42#…`),
// whichever shop's they were. Now both wait `project_unknown`, as on a stack of several listed
// projects; a person names the project (required: `--project`) and that project's order ships
// once; an earlier event naming the project gives it.
#[tokio::test]
async fn a_payment_naming_no_project_on_a_stack_listing_none_waits_for_its_project() {
    let unnamed_paid = item(
        "evt_u",
        "invoice.paid",
        r#"{"invoice_id":"inv_u","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let unnamed_deposit = item(
        "evt_d",
        "payment_channel.deposit.confirmed",
        r#"{"id":"pcd_u","is_final":true,"payment_channel_external_id":"42","net":"3","currency":"USDT"}"#,
    );
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_k","project_id":"prj_b","order":{"external_id":"1002","amount":"10.00","currency":"USD"}}"#,
    );
    let known_paid = item(
        "evt_k",
        "invoice.paid",
        r#"{"invoice_id":"inv_k","order":{"external_id":"1002","amount":"10.00","currency":"USD"}}"#,
    );
    let (outcomes, store) = run(
        Projects::all(),
        &[unnamed_paid, unnamed_deposit, opened, known_paid],
    )
    .await;
    assert_eq!(
        outcomes,
        [ProjectUnknown, ProjectUnknown, Updated, Fulfilled]
    );
    assert_eq!(claims(&store), ["order_paid#prj_b#1002"]);
    assert!(store.balances_by_key().is_empty());
    let fulfil = Fulfil::new(Arc::clone(&store));
    let why = fulfil.refuses_person("inv_u", None).await.unwrap();
    assert!(why.is_some_and(|w| w.contains("--project")));
    assert_eq!(
        fulfil.refuses_person("inv_u", Some("prj_a")).await,
        Ok(None)
    );
    let a = OrderRef {
        external_id: Some("1001".into()),
        project: Some("prj_a".into()),
        ..OrderRef::none()
    };
    let marked = fulfil.mark_paid("inv_u", a, "support", 9_000).await;
    assert_eq!(marked, Ok(Fulfilled));
    assert_eq!(
        claims(&store),
        ["order_paid#prj_a#1001", "order_paid#prj_b#1002"]
    );
}

// With the reverse check, Paymos' project keys the order; Paymos naming none (nor the event)
// waits `project_unknown` as without it. Before: both keyed under the shared `order_paid#1001`.
#[tokio::test]
async fn with_the_check_a_stack_listing_no_projects_keys_by_paymos_project() {
    let unnamed = item(
        "evt_x",
        "invoice.paid",
        r#"{"invoice_id":"inv_x","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let store = Arc::new(MemoryResources::new());
    let checked =
        Fulfil::new(Arc::clone(&store)).with_confirmation(Arc::new(paymos_has_x_paid_in("prj_b")));
    assert_eq!(checked.apply(&unnamed, 1_000).await.unwrap().1, Fulfilled);
    assert_eq!(claims(&store), ["order_paid#prj_b#1001"]);

    let store = Arc::new(MemoryResources::new());
    let paymos = paymos_has_x_paid_in("prj_b");
    let mut at = match crate::roads::confirm::PaymentConfirmation::invoice(&paymos, "inv_x")
        .await
        .unwrap()
    {
        crate::roads::confirm::AtSource::Found(at) => at,
        crate::roads::confirm::AtSource::NotFound => unreachable!(),
    };
    at.project_id = None;
    paymos.invoice("inv_x", at);
    let checked = Fulfil::new(Arc::clone(&store)).with_confirmation(Arc::new(paymos));
    assert_eq!(
        checked.apply(&unnamed, 1_000).await.unwrap().1,
        ProjectUnknown
    );
    assert_eq!(claims(&store), Vec::<String>::new());
}

/// A store where `inv_old` shipped order 1001 before the upgrade, as a stack listing none keyed
/// it then: no project on the record, the claim by id alone (`order_paid#1001`).
async fn shipped_before_the_upgrade() -> Arc<MemoryResources> {
    let store = Arc::new(MemoryResources::new());
    let before = Fulfil::new(Arc::clone(&store)).for_projects(Projects::parse("prj_a"));
    let old = item(
        "evt_old",
        "invoice.paid",
        r#"{"invoice_id":"inv_old","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    assert_eq!(before.apply(&old, 1_000).await.unwrap().1, Fulfilled);
    store
}

// The upgrade: order 1001 shipped before it under the key every project shared
// (`order_paid#1001`, as a stack of one home project still writes it). After it, a payment of
// 1001 naming any project is a duplicate naming the invoice that shipped it, never a second
// shipment; that invoice's own replay changes nothing; an order never shipped ships per project.
// Before this fix (keys per project, no look at the old key): `fulfilled`, a second shipment.
#[tokio::test]
async fn an_order_shipped_before_the_upgrade_ships_no_second_time_under_a_projects_key() {
    let store = shipped_before_the_upgrade().await;
    assert_eq!(claims(&store), ["order_paid#1001"]);

    let after = Fulfil::new(Arc::clone(&store));
    let mut outcomes = Vec::new();
    for work in [
        paid("evt_b", "inv_b", "prj_b", "1001"),
        paid("evt_a", "inv_a", "prj_a", "1001"),
        paid("evt_old2", "inv_old", "prj_a", "1001"),
        paid("evt_c", "inv_c", "prj_b", "1002"),
    ] {
        outcomes.push(after.apply(&work, 2_000).await.unwrap().1);
    }
    assert_eq!(
        outcomes,
        [DuplicatePayment, DuplicatePayment, AlreadyFinal, Fulfilled]
    );
    assert_eq!(
        store.fulfilments(),
        [
            ("inv_c".into(), Some("1002".into())),
            ("inv_old".into(), Some("1001".into()))
        ]
    );
    let b = store.invoice("inv_b").unwrap();
    assert_eq!(b.duplicate_of.as_deref(), Some("inv_old"), "{b:?}");
}

#[test]
fn a_stack_listing_no_projects_scopes_every_project_and_has_no_home() {
    let all = Projects::all();
    assert_eq!(all.scope(Some("prj_a")).as_deref(), Some("prj_a"));
    assert_eq!(all.scope(None), None);
    assert!(!all.is_home(Some("prj_a")));
    assert!(all.several());
    assert!(Projects::parse("prj_a,prj_b").several());
    assert!(!Projects::parse("prj_a").several());
}

/// `invoice` of `project`'s order 1001, closed (expired) and then paid: it waits `paid_late`.
async fn paid_after_its_close(fulfil: &Fulfil<Arc<MemoryResources>>, invoice: &str, project: &str) {
    let closed = item(
        "evt_exp",
        "invoice.expired",
        &format!(
            r#"{{"invoice_id":"{invoice}","project_id":"{project}","order":{{"external_id":"1001","amount":"10.00","currency":"USD"}}}}"#
        ),
    );
    assert_eq!(fulfil.apply(&closed, 2_000).await.unwrap().1, Updated);
    let late = paid("evt_late", invoice, project, "1001");
    assert_eq!(fulfil.apply(&late, 2_000).await.unwrap().1, PaidLate);
}

/// A person's release, checked.
fn alice() -> crate::roads::release::ReleaseBy<'static> {
    crate::roads::release::ReleaseBy {
        actor: "alice",
        reason: Some("paid late, checked"),
        override_amount: false,
        project: None,
        order: None,
    }
}

// The upgrade, by a person's road: a payment of order 1001 that waits (paid after its invoice
// closed) is released after the upgrade, while 1001 shipped before it under the key every
// project shared. Before: `fulfilled`, 1001 shipped a second time (the release checked only its
// project's key); now refused, naming the invoice that shipped it.
#[tokio::test]
async fn a_release_after_the_upgrade_ships_no_order_shipped_before_it() {
    let store = shipped_before_the_upgrade().await;
    let after = Fulfil::new(Arc::clone(&store));
    paid_after_its_close(&after, "inv_late", "prj_a").await;
    let by = alice();
    let released = after
        .release(&MemoryReviews::new(), "inv_late", &by, 3_000)
        .await;
    assert!(
        matches!(&released, Err(crate::roads::release::ReleaseError::NotReleasable(why)) if why.contains("inv_old")),
        "{released:?}"
    );
    assert_eq!(
        store.fulfilments(),
        [("inv_old".into(), Some("1001".into()))]
    );
    // An invoice the old key names itself (a record naming its project, as a stack that
    // listed none wrote it) is released no second time, and refused for nothing else.
    let shipped = paid("evt_y", "inv_y", "prj_a", "1003");
    assert_eq!(after.apply(&shipped, 2_000).await.unwrap().1, Fulfilled);
    use crate::money::write::{Field, Guard, Key, Set, Value, What, Write};
    let old_claim = Write {
        what: What::OrderClaim,
        key: Key::state("order_paid#1003"),
        guard: Guard::Always,
        set: vec![Set::Put(Field::InvoiceId, Value::text("inv_y"))],
    };
    crate::roads::fulfil::ResourceStore::write(&*store, &[old_claim])
        .await
        .unwrap();
    let reviews = MemoryReviews::new();
    let again = after.release(&reviews, "inv_y", &by, 3_000).await;
    assert_eq!(again, Ok(AlreadyFinal));
}

// Only a stack that lists no projects reads the key every project shared: on a stack listing
// prj_a (home: its orders keep that key) and prj_b, prj_b's order 1001 is another order than the
// home's 1001, and its late payment is released.
#[tokio::test]
async fn a_release_on_a_listed_stack_ships_another_projects_order_of_the_home_orders_id() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let home = paid("evt_home", "inv_home", "prj_a", "1001");
    assert_eq!(fulfil.apply(&home, 1_000).await.unwrap().1, Fulfilled);
    paid_after_its_close(&fulfil, "inv_b", "prj_b").await;
    let by = alice();
    let reviews = MemoryReviews::new();
    let released = fulfil.release(&reviews, "inv_b", &by, 3_000).await;
    assert_eq!(released, Ok(Fulfilled));
    assert_eq!(store.fulfilments().len(), 2);
}
