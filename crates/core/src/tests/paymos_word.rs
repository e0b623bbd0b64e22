//! Paymos' word on every road (issue 49): whatever road asked Paymos writes with Paymos'
//! status, order, price, project and time; an event's own `occurred_at` and `project_id` count
//! only where Paymos was not asked; a road that knows no payment time never settles a payment
//! as refunded in silence. Each test is a defect that was reproduced against `dev`, asserting
//! the business outcome: what was fulfilled, credited and listed for a person.

use std::sync::Arc;

use crate::money::change::{Applied, OrderRef, Projects};
use crate::money::invoice::{Refund, RefundMode, Standing};
use crate::money::status::Amount;
use crate::roads::confirm::{ConfirmedDeposit, ConfirmedInvoice, ConfirmedWithdrawal};
use crate::roads::exceptions::{list, recheck};
use crate::roads::fulfil::Fulfil;
use crate::roads::ingest::Delivery;
use crate::roads::release::{ReleaseBy, ReleaseStore};
use crate::testkit::memory::{MemoryPaymos, MemoryResources, MemoryReviews};
use crate::wire::envelope::Category;
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

use Applied::*;

const NOW_MS: u64 = 1_800_000_000_000;

fn body(event_id: &str, event_type: &str, at: u64, data: &str) -> String {
    format!(
        r#"{{"event_id":"{event_id}","event_type":"{event_type}","version":1,"occurred_at":{at},"data":{data}}}"#
    )
}

fn item(event_id: &str, event_type: &str, at: u64, data: &str) -> WorkItem {
    WorkItem {
        event_id: event_id.to_owned(),
        environment: Some(Environment::Live),
        body: body(event_id, event_type, at, data).into_bytes(),
        received_at_ms: Some(at * 1000),
    }
}

/// An event of inv_1 (order o-1, priced 10 USD) at `status`, at `at` by the event's clock.
fn invoice(event_id: &str, status: &str, at: u64) -> WorkItem {
    item(
        event_id,
        &format!("invoice.{status}"),
        at,
        r#"{"invoice_id":"inv_1","order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
    )
}

/// A completed `full` refund of inv_1's 4.00 USDT, dated `at` by its event.
fn full_refund(event_id: &str, at: u64) -> WorkItem {
    item(
        event_id,
        "withdrawal.completed",
        at,
        r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_1","mode":"full","type":"refund","amount":"4.00","currency":"USDT"}"#,
    )
}

fn at_paymos(status: &str, paid_at: Option<u64>) -> ConfirmedInvoice {
    ConfirmedInvoice {
        status: status.into(),
        is_test: false,
        order_id: Some("o-1".into()),
        order_amount: Amount::parse("10"),
        order_currency: Some("USD".into()),
        token_amount: None,
        token_currency: None,
        paid_late: false,
        project_id: None,
        paid_at,
    }
}

/// Paid in full at `paid_at` after it closed (`closed`), as Paymos has it.
fn late_at_paymos(closed: &str, paid_at: Option<u64>) -> ConfirmedInvoice {
    ConfirmedInvoice {
        paid_late: true,
        ..at_paymos(closed, paid_at)
    }
}

fn refund_at_paymos(completed_at: u64) -> ConfirmedWithdrawal {
    ConfirmedWithdrawal {
        status: "completed".into(),
        is_test: false,
        invoice_id: Some("inv_1".into()),
        full: Some(true),
        amount: Amount::parse("4.00"),
        currency: Some("USDT".into()),
        project_id: None,
        completed_at: Some(completed_at),
    }
}

fn paymos_refund(completed_at: u64) -> Refund {
    Refund {
        withdrawal_id: "wdr_1".into(),
        amount: Amount::parse("4.00"),
        currency: Some("USDT".into()),
        mode: Some(RefundMode::Full),
        completed_at: Some(completed_at),
    }
}

fn order() -> OrderRef {
    OrderRef {
        external_id: Some("o-1".into()),
        amount: Amount::parse("10"),
        currency: Some("USD".into()),
        project: None,
        home: false,
        unlisted: false,
    }
}

/// `history` applied by webhooks without the reverse check: each outcome, and the store.
async fn webhooks(history: &[WorkItem]) -> (Vec<Applied>, Arc<MemoryResources>) {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let mut outcomes = Vec::new();
    for work in history {
        outcomes.push(fulfil.apply(work, NOW_MS).await.expect("memory").1);
    }
    (outcomes, store)
}

/// inv_1's paid delivery at `at` as the reverse check first refused it (a 404), waiting.
fn unconfirmed_payment(reviews: &MemoryReviews, at: u64) {
    let paid = body(
        "evt_p",
        "invoice.paid",
        at,
        r#"{"invoice_id":"inv_1","order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
    );
    reviews.processed(
        Delivery {
            event_id: "evt_p".into(),
            event_type: "invoice.paid".into(),
            category: Category::Invoice,
            resource_id: Some("inv_1".into()),
            environment: Some(Environment::Live),
            secret_label: "live".into(),
            version: 1,
            occurred_at: at,
            signed_at: at,
            received_at_ms: NOW_MS,
            body: paid.into_bytes(),
            body_sha256: String::new(),
        },
        Unconfirmed,
        "invoice: Paymos does not know it (404)",
        5,
    );
}

/// `recheck` on a live stack over the memory twins (of `resource`, or of everything waiting).
async fn recheck_live(
    store: &MemoryResources,
    reviews: &MemoryReviews,
    paymos: &MemoryPaymos,
    resource: Option<&str>,
) -> Vec<crate::roads::exceptions::Rechecked> {
    let effect = crate::money::effect::RecordFulfilment;
    recheck(
        store,
        reviews,
        paymos,
        &effect,
        Environment::Live,
        resource,
        NOW_MS,
    )
    .await
    .expect("memory")
}

/// Four of ten paid, then those four refunded in full at 20 (the customer then pays in full
/// at 30, by Paymos' clock).
fn partial_then_refunded() -> [WorkItem; 2] {
    [
        invoice("evt_u", "underpaid_waiting", 10),
        full_refund("evt_r", 20),
    ]
}

// Defect 1, `recheck`: the paid delivery was unconfirmed (a 404 at Paymos); once Paymos shows
// the invoice paid at 30, after the refund at 20, the recheck ships it. Before: `refunded`,
// resolved, listed nowhere.
#[tokio::test]
async fn a_recheck_ships_a_payment_paymos_dates_after_a_full_refund() {
    let (outcomes, store) = webhooks(&partial_then_refunded()).await;
    assert_eq!(outcomes, [Updated, Updated]);
    let reviews = MemoryReviews::new();
    unconfirmed_payment(&reviews, 30);
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    assert_eq!(rechecked[0].outcome.as_str(), "fulfilled", "{rechecked:?}");
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Defect 1, `mark-paid`: a person's road names no payment time. With a full refund recorded it
// neither ships nor settles in silence: the payment waits for a person ("paid after a full
// refund?"), `exceptions` lists it, and `release` is its way out. Before: `refunded`, exit 0,
// listed nowhere, and `release` said "refunded in full: nothing to release".
#[tokio::test]
async fn an_undated_payment_after_a_full_refund_waits_for_a_person_and_release_ships_it() {
    let (_, store) = webhooks(&partial_then_refunded()).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let by_hand = fulfil
        .mark_paid("inv_1", order(), "support", NOW_MS)
        .await
        .unwrap();
    assert_eq!(by_hand, Held);
    assert!(store.fulfilments().is_empty());
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert_eq!(seen.unwrap().standing(), Standing::AfterRefund);
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].why.contains("after a full refund"), "{listed:?}");
    let released = fulfil
        .release(
            &MemoryReviews::new(),
            "inv_1",
            &ReleaseBy {
                actor: "alice",
                reason: None,
                override_amount: false,
                project: None,
                order: None,
            },
            NOW_MS,
        )
        .await;
    assert_eq!(released, Ok(Fulfilled));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    assert!(
        list(&*store, &MemoryReviews::new(), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

// Defect 1, a person's undated word, then the dated delivery: a full refund at 20, then
// support's `mark-paid` of an invoice whose order nothing names (it waits for its order, after
// a full refund), then the paid event at 30 naming the order at a price other than its
// registration. The event's time judges the refund (the payment is new), so the price holds
// it: `held`, for a person to release or refund, no longer "paid after a full refund?".
#[tokio::test]
async fn a_dated_payment_replaces_a_persons_undated_word_after_a_full_refund() {
    let (_, store) = webhooks(&[full_refund("evt_r", 20)]).await;
    store.register_order("o-1", &Amount::parse("12").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let by_hand = fulfil
        .mark_paid("inv_1", OrderRef::none(), "support", NOW_MS)
        .await
        .unwrap();
    assert_eq!(by_hand, OrderUnknown);
    let paid = fulfil
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!(paid, Held);
    assert!(store.fulfilments().is_empty());
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert_eq!(seen.unwrap().standing(), Standing::Held);
}

// Defect 1, `reconcile --apply`: the paid webhook was lost; Paymos lists the invoice paid at 30
// and its refund at 20. The run applies it with Paymos' time and ships it; the next run is
// clean. Before: `MISSING … → refunded`, and `MISSING` on every later run.
#[tokio::test]
async fn reconcile_applies_a_payment_with_paymos_time_and_ships_it_after_an_earlier_refund() {
    let (_, store) = webhooks(&partial_then_refunded()).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    paymos.refund("inv_1", paymos_refund(20));
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert_eq!(
        report.applied.get("inv_1"),
        Some(&Ok(Fulfilled)),
        "{report:?}"
    );
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    let again = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, false, NOW_MS)
        .await
        .unwrap();
    assert!(again.clean(), "{again:?}");
}

// Defect 1, clock skew: Paymos' refund completed at 100, its event says 110; the payment was
// made at 105. Paymos' clock says the payment came after the refund: with the reverse check
// the webhook ships it, as the reconciliation would judge it.
#[tokio::test]
async fn with_the_check_a_refund_and_a_payment_are_dated_by_paymos_clock() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", at_paymos("paid", Some(105)));
    paymos.withdrawal("wdr_1", refund_at_paymos(100));
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let mut outcomes = Vec::new();
    for work in [
        invoice("evt_u", "underpaid_waiting", 90),
        full_refund("evt_r", 110),
        invoice("evt_p", "paid", 105),
    ] {
        outcomes.push(fulfil.apply(&work, NOW_MS).await.unwrap().1);
    }
    assert_eq!(outcomes, [Updated, Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Defect 1, clock skew without the check: the refund's body says Paymos completed it at 100
// (`data.completed_at`), its event at 110; the payment was made at 105. A refund returns what
// was paid until it completed, so the webhook ships the payment, as the reconciliation (which
// reads Paymos' `completed_at`) judges it. Before: `refunded`, while `reconcile` said
// MISSING every run.
#[tokio::test]
async fn without_the_check_a_refund_is_dated_by_its_completion_not_its_event() {
    let refund = item(
        "evt_r",
        "withdrawal.completed",
        110,
        r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_1","mode":"full","type":"refund","amount":"4.00","currency":"USDT","completed_at":100}"#,
    );
    let (outcomes, store) = webhooks(&[
        invoice("evt_u", "underpaid_waiting", 90),
        refund,
        invoice("evt_p", "paid", 105),
    ])
    .await;
    assert_eq!(outcomes, [Updated, Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Defect 6: a leaked secret signs a new `invoice.paid` of the real order and price, dated far
// in the future. Paymos has the invoice paid at 100 and refunded in full at 150: by Paymos'
// clock the refund returned that payment, and nothing ships. Before: `fulfilled`.
#[tokio::test]
async fn a_forged_payment_dated_in_the_future_ships_nothing_paymos_refunded() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    paymos.withdrawal("wdr_1", refund_at_paymos(150));
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let mut outcomes = Vec::new();
    for work in [
        full_refund("evt_r", 150),
        invoice("evt_forged", "paid", 100_000),
    ] {
        outcomes.push(fulfil.apply(&work, NOW_MS).await.unwrap().1);
    }
    assert_eq!(outcomes, [Updated, Refunded]);
    assert!(store.fulfilments().is_empty());
}

// Defect 2: an invoice closed underpaid, its partial payment refunded in full at 20, then paid
// late at 30 at Paymos, and the webhook lost. The reconciliation reports the late payment (by
// Paymos' clock the refund did not return it). Before: `paid at Paymos: 0`, exit 0, named
// nowhere for ever.
#[tokio::test]
async fn a_late_payment_after_a_full_refund_whose_webhook_was_lost_is_reported() {
    let (_, store) = webhooks(&[invoice("evt_u", "underpaid", 10), full_refund("evt_r", 20)]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", late_at_paymos("underpaid", Some(30)));
    paymos.refund("inv_1", paymos_refund(20));
    let report =
        crate::roads::reconcile::reconcile(&paymos, &fulfil, (0, 2_000_000_000), false, NOW_MS)
            .await
            .unwrap();
    let late: Vec<&str> = report
        .paid_late
        .iter()
        .map(|p| p.invoice_id.as_str())
        .collect();
    assert_eq!(late, ["inv_1"], "{report:?}");
    assert!(!report.clean());
}

fn deposit(event_id: &str, deposit_id: &str, project: Option<&str>) -> WorkItem {
    let project = project.map_or(String::new(), |p| format!(r#","project_id":"{p}""#));
    item(
        event_id,
        "payment_channel.deposit.confirmed",
        50,
        &format!(
            r#"{{"id":"{deposit_id}","is_final":true,"payment_channel_external_id":"42","net":"9","currency":"USDT"{project}}}"#
        ),
    )
}

fn deposit_at_paymos(project: &str) -> ConfirmedDeposit {
    ConfirmedDeposit {
        status: "confirmed".into(),
        is_final: true,
        is_test: false,
        payer: "42".into(),
        net: Amount::parse("9"),
        currency: "USDT".into(),
        project_id: Some(project.into()),
    }
}

// Defect 3: a stack of three projects with the reverse check. Paymos says pcd_c is prj_c's
// (its event names none) and pcd_b prj_b's (its event names prj_a): pcd_c credits prj_c's payer
// 42, pcd_b credits no one. Before: both credited the home project's payer 42 (18.00 USDT of
// other shops' money), and prj_c's payer was short.
#[tokio::test]
async fn a_deposit_is_credited_to_the_payer_of_the_project_paymos_names() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.deposit("pcd_c", deposit_at_paymos("prj_c"));
    paymos.deposit("pcd_b", deposit_at_paymos("prj_b"));
    let fulfil = crate::tests::one_shop(Arc::clone(&store))
        .with_confirmation(Arc::clone(&paymos))
        .for_projects(Projects::parse("prj_a,prj_b,prj_c"));
    let c = fulfil.apply(&deposit("evt_c", "pcd_c", None), NOW_MS).await;
    let b = fulfil
        .apply(&deposit("evt_b", "pcd_b", Some("prj_a")), NOW_MS)
        .await;
    assert_eq!((c.unwrap().1, b.unwrap().1), (Credited, Unconfirmed));
    let balances: Vec<_> = store.balances().into_iter().collect();
    assert_eq!(
        balances,
        [(
            (Some("prj_c".into()), "42".into(), "USDT".into()),
            "9".into()
        )]
    );
}

fn open_of(project: &str) -> WorkItem {
    item(
        "evt_open",
        "invoice.awaiting_payment",
        10,
        &format!(
            r#"{{"invoice_id":"inv_1","project_id":"{project}","order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
        ),
    )
}

fn home_paid_at_paymos() -> ConfirmedInvoice {
    ConfirmedInvoice {
        project_id: Some("prj_a".into()),
        ..at_paymos("paid", Some(30))
    }
}

// Defect 5: a leaked secret signs an open event of the real invoice naming another project. It
// is not read back, so under the check it marks no project: the genuine `invoice.paid`, which
// Paymos confirms as paid and of the home project, ships. Before: `other_project`, listed
// nowhere, `MISSING` at every reconciliation.
#[tokio::test]
async fn a_forged_open_event_naming_another_project_blocks_nothing() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", home_paid_at_paymos());
    let fulfil = crate::tests::one_shop(Arc::clone(&store))
        .with_confirmation(Arc::clone(&paymos))
        .for_projects(Projects::parse("prj_a"));
    let forged = fulfil.apply(&open_of("prj_x"), NOW_MS).await.unwrap().1;
    let genuine = fulfil
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!((forged, genuine), (Updated, Fulfilled));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Defect 5, a mark written before: an open event naming another project marked the invoice on
// a stack without the check (or before this release). A payment Paymos confirms for a project
// the stack applies clears the mark and ships.
#[tokio::test]
async fn a_payment_paymos_confirms_for_an_applied_project_overrides_a_project_mark() {
    let store = Arc::new(MemoryResources::new());
    let unchecked =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a"));
    let marked = unchecked.apply(&open_of("prj_x"), NOW_MS).await.unwrap().1;
    assert_eq!(marked, OtherProject);
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", home_paid_at_paymos());
    let checked = crate::tests::one_shop(Arc::clone(&store))
        .with_confirmation(Arc::clone(&paymos))
        .for_projects(Projects::parse("prj_a"));
    let paid = checked
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!(paid, Fulfilled);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

fn paid_of(project: &str) -> WorkItem {
    item(
        "evt_paid",
        "invoice.paid",
        30,
        &format!(
            r#"{{"invoice_id":"inv_1","project_id":"{project}","order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
        ),
    )
}

// Defect 7: the invoice's events named the home project; a person's `mark-paid --project
// prj_b` must not ship B's order o-1 from it. Before: `fulfilled`, B's order claimed (the home
// project's record stored no project, so any project's guard passed).
#[tokio::test]
async fn a_person_naming_another_project_ships_nothing_from_a_home_invoice() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let open = fulfil.apply(&open_of("prj_a"), NOW_MS).await.unwrap().1;
    let b = OrderRef {
        project: Some("prj_b".into()),
        ..order()
    };
    let marked = fulfil
        .mark_paid("inv_1", b, "support", NOW_MS)
        .await
        .unwrap();
    assert_eq!((open, marked), (Updated, Held));
    assert_eq!(store.fulfilments(), []);
    let waiting = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    let held: Vec<_> = waiting
        .iter()
        .map(|e| (e.kind, e.resource_id.as_deref()))
        .collect();
    assert_eq!(held, [("held", Some("inv_1"))]);
}

// Defect 4, events that disagree: an invoice whose open event named one project and whose paid
// event names the other ships neither project's order; it waits for a person, listed with why.
// Before: fulfilled under one of them silently (or refused until the dead-letter queue).
#[tokio::test]
async fn an_invoice_whose_events_name_two_projects_ships_neither_and_waits() {
    for (open, paid) in [("prj_a", "prj_b"), ("prj_b", "prj_a")] {
        let (outcomes, store) = {
            let store = Arc::new(MemoryResources::new());
            let fulfil = crate::tests::one_shop(Arc::clone(&store))
                .for_projects(Projects::parse("prj_a,prj_b"));
            let mut out = Vec::new();
            for work in [open_of(open), paid_of(paid)] {
                out.push(fulfil.apply(&work, NOW_MS).await.expect("memory").1);
            }
            (out, store)
        };
        assert_eq!(outcomes, [Updated, Held], "{open} then {paid}");
        assert_eq!(store.fulfilments(), [], "{open} then {paid}");
    }
}

// Defect 4: a stack of two projects without the reverse check. A payment naming no project
// (the official partial vectors' shape), of an invoice whose record names none, ships no one's
// order: it waits as `project_unknown`, and a person naming its project ships that project's
// order once. A deposit naming none credits no one. Before: both were the home project's
// (project B's payment of order o-1 claimed A's o-1; A's own payment then became a duplicate).
#[tokio::test]
async fn without_the_check_a_payment_naming_no_project_waits_for_its_project() {
    let store = Arc::new(MemoryResources::new());
    let ledger = MemoryReviews::new();
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let paid = fulfil
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap();
    let credited = fulfil
        .apply(&deposit("evt_d", "pcd_1", None), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!((paid.1, credited), (ProjectUnknown, ProjectUnknown));
    assert_eq!(store.fulfilments(), []);
    assert!(store.balances().is_empty());
    for work in [
        invoice("evt_p", "paid", 30),
        deposit("evt_d", "pcd_1", None),
    ] {
        ledger.processed(waited(&work), ProjectUnknown, "no project", 1);
    }
    let kinds = |found: Vec<crate::roads::exceptions::Exception>| -> Vec<_> {
        found
            .iter()
            .map(|e| (e.kind, e.resource_id.clone()))
            .collect()
    };
    let waiting = list(&*store, &ledger, 0).await.unwrap();
    assert_eq!(
        kinds(waiting),
        [
            ("project_unknown", Some("inv_1".to_owned())),
            ("project_unknown", Some("pcd_1".to_owned()))
        ]
    );
    assert_eq!(
        fulfil
            .refuses_person("inv_1", None)
            .await
            .unwrap()
            .map(|w| w.contains("--project")),
        Some(true)
    );
    let b = OrderRef {
        project: Some("prj_b".into()),
        ..order()
    };
    let marked = fulfil
        .mark_paid("inv_1", b, "support", NOW_MS)
        .await
        .unwrap();
    assert_eq!(marked, Fulfilled);
    assert_eq!(claims(&store), ["order_paid#prj_b#o-1"]);
    let waiting = list(&*store, &ledger, 0).await.unwrap();
    assert_eq!(
        kinds(waiting),
        [("project_unknown", Some("pcd_1".to_owned()))]
    );
}

// Defect 4, with the project on record: an open event named prj_b, the paid event names none;
// it ships B's order (the record's project), as on a stack of one project.
#[tokio::test]
async fn without_the_check_a_payment_naming_no_project_takes_its_records() {
    let (outcomes, store) = {
        let store = Arc::new(MemoryResources::new());
        let fulfil =
            crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
        let mut out = Vec::new();
        for work in [open_of("prj_b"), invoice("evt_p", "paid", 30)] {
            out.push(fulfil.apply(&work, NOW_MS).await.expect("memory").1);
        }
        (out, store)
    };
    assert_eq!(outcomes, [Updated, Fulfilled]);
    assert_eq!(claims(&store), ["order_paid#prj_b#o-1"]);
}

/// The order claims the store holds.
fn claims(store: &MemoryResources) -> Vec<String> {
    let mut keys = store.keys();
    keys.retain(|k| k.starts_with("order_paid#"));
    keys
}

/// `work` as the ledger records it, once processed.
pub(super) fn waited(work: &WorkItem) -> Delivery {
    let envelope = crate::wire::envelope::Envelope::parse(&work.body).unwrap();
    Delivery {
        event_id: work.event_id.clone(),
        event_type: envelope.event_type.clone(),
        category: Category::of(&envelope.event_type),
        resource_id: envelope.resource_id.clone(),
        environment: work.environment,
        secret_label: "live".into(),
        version: 1,
        occurred_at: envelope.occurred_at,
        signed_at: envelope.occurred_at,
        received_at_ms: NOW_MS,
        body: work.body.clone(),
        body_sha256: String::new(),
    }
}

// Found by the attack on `dev` (a reference-only helper): a key of the other environment lists
// sandbox invoices to a live stack; `reconcile --apply` shipped them as live fulfilments, while
// the webhook's check refuses the same answer. Now the run fails as the stack's problem (a
// misconfigured key) and ships nothing; the same on the open invoices it re-reads.
#[tokio::test]
async fn reconcile_ships_nothing_of_the_other_environment_and_names_the_key() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            is_test: true,
            ..at_paymos("paid", Some(30))
        },
    );
    let err =
        crate::roads::reconcile::reconcile(&paymos, &fulfil, (0, 2_000_000_000), true, NOW_MS)
            .await
            .unwrap_err();
    assert_eq!(
        err.kind,
        crate::roads::ingest::PortErrorKind::Misconfigured,
        "{err}"
    );
    assert!(err.to_string().contains("sandbox"), "{err}");
    assert_eq!(store.fulfilments(), []);
}

// Found by the attack on `dev`: `recheck --environment sandbox` on a live stack re-checked a
// live delivery against a sandbox key and shipped its order. A delivery is rechecked only by
// the environment that verified it: the other environment's recheck reads none of it.
#[tokio::test]
async fn a_recheck_of_the_other_environment_ships_nothing_of_a_live_delivery() {
    let store = Arc::new(MemoryResources::new());
    let reviews = MemoryReviews::new();
    reviews.processed(
        waited(&invoice("evt_p", "paid", 30)),
        Unconfirmed,
        "invoice: Paymos does not know it (404)",
        5,
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            is_test: true,
            ..at_paymos("paid", Some(30))
        },
    );
    let rechecked = recheck(
        &*store,
        &reviews,
        &paymos,
        &crate::money::effect::RecordFulfilment,
        Environment::Test,
        None,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(rechecked, []);
    assert_eq!(store.fulfilments(), []);
    assert_eq!(reviews.resolved("evt_p"), None);
}

// Found by the model (a seed now kept): a person marked inv_1 paid (no time), a full refund
// completed at 120 was recorded, then the paid webhook says the payment was made at 130. The
// refund returned only what was paid before it: the record takes 130, and the payment is not
// refunded. Before: `refunded in full`, judged by arrival order.
#[tokio::test]
async fn a_webhook_dates_a_persons_undated_payment_and_a_refund_before_it_returns_nothing() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let marked = fulfil
        .mark_paid("inv_1", order(), "support", NOW_MS)
        .await
        .unwrap();
    let refund = fulfil
        .apply(&full_refund("evt_r", 120), NOW_MS)
        .await
        .unwrap()
        .1;
    let paid = fulfil
        .apply(&invoice("evt_p", "paid", 130), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!((marked, refund, paid), (Fulfilled, Updated, AlreadyFinal));
    let seen = store.invoice("inv_1").unwrap().seen();
    assert_eq!(seen.payment_at, Some(130));
    assert!(!seen.refunded_in_full(), "{seen:?}");
}

// Found by the model's rule 19 (a reference-only helper wrote it): a person marked inv_1 paid
// naming project B but no order; the paid event that follows names the order and no project.
// It is B's: B's order ships. Before: `project_unknown` (the person's project was not kept).
#[tokio::test]
async fn a_persons_project_is_kept_while_the_payment_waits_for_its_order() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let b = OrderRef {
        project: Some("prj_b".into()),
        ..OrderRef::none()
    };
    let marked = fulfil
        .mark_paid("inv_1", b, "support", NOW_MS)
        .await
        .unwrap();
    let paid = fulfil
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!((marked, paid), (OrderUnknown, Fulfilled));
    assert_eq!(claims(&store), ["order_paid#prj_b#o-1"]);
}

// Found by the model's rule 19: the home project's deposit was credited; a copy of its
// confirmation naming no project (another event id) changes nothing and waits for no one.
// Before: listed `project_unknown`, inviting a second credit by hand.
#[tokio::test]
async fn a_credited_deposit_meets_a_copy_naming_no_project_as_already_final() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let first = fulfil
        .apply(&deposit("evt_d1", "pcd_1", Some("prj_a")), NOW_MS)
        .await
        .unwrap()
        .1;
    let copy = fulfil
        .apply(&deposit("evt_d2", "pcd_1", None), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!((first, copy), (Credited, AlreadyFinal));
    assert_eq!(store.balances().len(), 1);
}

// Found by the attack on `dev`: a late payment announced by a close carrying `paid_late_at`
// (the reference: the status stays final and `paid_late_at` is added; no source says which event
// announces it) was acknowledged `already_final` and dropped, listed nowhere. It now lands
// `paid_late` and waits for a person, whether the close was known before or not; nothing ships.
#[tokio::test]
async fn a_close_announcing_a_late_payment_lands_paid_late_and_waits() {
    let late = |event_id: &str| {
        item(
            event_id,
            "invoice.underpaid",
            100,
            r#"{"invoice_id":"inv_1","paid_late_at":130,"order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
        )
    };
    let (outcomes, store) = webhooks(&[invoice("evt_u", "underpaid", 90), late("evt_l")]).await;
    assert_eq!(outcomes, [Updated, PaidLate]);
    let (first, fresh) = webhooks(&[late("evt_l")]).await;
    assert_eq!(first, [PaidLate]);
    for store in [store, fresh] {
        assert_eq!(store.fulfilments(), []);
        let seen = store.invoice("inv_1").unwrap().seen();
        assert!(seen.paid_late, "{seen:?}");
        assert_eq!(seen.payment_at, Some(130));
    }
}

// Found by the attack on `dev`: restarted with `--project prj_b --project prj_a` on the tables
// of a run that listed prj_a first, the stack read prj_a's records (whose keys carry no
// project) as prj_b's, and prj_a's order 7001, paid again, shipped twice. The home project is
// now pinned where a stack starts: another listed first is refused as misconfigured.
#[tokio::test]
async fn a_stack_refuses_another_home_project_than_its_records() {
    let store = Arc::new(MemoryResources::new());
    let a_first =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    a_first.pin_home_project().await.unwrap();
    a_first.pin_home_project().await.unwrap();
    let b_first =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_b,prj_a"));
    let err = b_first.pin_home_project().await.unwrap_err();
    assert_eq!(
        err.kind,
        crate::roads::ingest::PortErrorKind::Misconfigured,
        "{err}"
    );
    assert!(err.to_string().contains("keep prj_a first"), "{err}");
    let every = crate::tests::one_shop(Arc::clone(&store));
    every.pin_home_project().await.unwrap();
}

// A missed mutant (`||` → `&&` in `on_record`): two projects neither of which is the home one
// disagree on one invoice (its open event names prj_b, its paid event prj_c). Neither order
// ships; the payment is held.
#[tokio::test]
async fn an_invoice_whose_events_name_two_other_projects_ships_neither() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store))
        .for_projects(Projects::parse("prj_a,prj_b,prj_c"));
    let open = fulfil.apply(&open_of("prj_b"), NOW_MS).await.unwrap().1;
    let paid = fulfil.apply(&paid_of("prj_c"), NOW_MS).await.unwrap().1;
    assert_eq!((open, paid), (Updated, Held));
    assert_eq!(claims(&store), Vec::<String>::new());
}

// Found by the attack on `dev` (a reference-only helper), settled against the contract: `data`
// is the resource's state at the event, and every official `invoice.paid` carries `status`
// `paid`. Without the reverse check, an `invoice.paid` whose own snapshot says `cancelled`
// shipped its order. A payment event whose snapshot says the invoice did not pay ships nothing
// now and waits as `unusable` with why; one whose snapshot announces a late payment
// (`paid_late_at`) lands `paid_late`.
#[tokio::test]
async fn a_payment_event_whose_snapshot_says_unpaid_ships_nothing_and_waits() {
    let data = |status: &str, late: &str| {
        format!(
            r#"{{"invoice_id":"inv_1","status":"{status}"{late},"order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
        )
    };
    for status in ["cancelled", "expired", "confirming"] {
        let paid = item("evt_p", "invoice.paid", 100, &data(status, ""));
        let (outcomes, store) = webhooks(std::slice::from_ref(&paid)).await;
        assert_eq!(outcomes, [Unusable], "{status}");
        assert_eq!(store.fulfilments(), [], "{status}");
        assert_eq!(claims(&store), Vec::<String>::new(), "{status}");
    }
    // The snapshot agrees: as before; it announces a late payment: that.
    let agrees = item("evt_a", "invoice.paid", 100, &data("paid", ""));
    assert_eq!(webhooks(&[agrees]).await.0, [Fulfilled]);
    let over = item("evt_o", "invoice.paid_over", 100, &data("paid_over", ""));
    assert_eq!(webhooks(&[over]).await.0, [Fulfilled]);
    let late = item(
        "evt_l",
        "invoice.paid",
        100,
        &data("expired", r#","paid_late_at":90"#),
    );
    assert_eq!(webhooks(&[late]).await.0, [PaidLate]);
    let unknown = item("evt_x", "invoice.paid", 100, &data("settled_somehow", ""));
    assert_eq!(webhooks(&[unknown]).await.0, [Fulfilled]);
}

// The attack on `dev` (F6), the same rule the other way: a close or open event whose own
// snapshot says the invoice paid (and announces no late payment) closed it by its type
// (`invoice.expired` with `data.status` `paid_over` wrote `expired`, and the genuine
// `invoice.paid_over` then waited `paid_late`), and a `deposit.confirmed` whose snapshot
// says `confirming` credited the payer. A type its snapshot contradicts on whether money moved
// applies nothing and waits as `unusable` with why.
#[tokio::test]
async fn an_event_whose_snapshot_contradicts_its_type_on_money_applies_nothing_and_waits() {
    let data = |status: &str| {
        format!(
            r#"{{"invoice_id":"inv_1","status":"{status}","order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
        )
    };
    for (kind, status) in [
        ("invoice.expired", "paid_over"),
        ("invoice.confirming", "paid"),
        ("invoice.cancelled", "paid"),
    ] {
        let close = item("evt_c", kind, 90, &data(status));
        let paid = item("evt_p", "invoice.paid_over", 100, &data("paid_over"));
        let (outcomes, store) = webhooks(&[close, paid]).await;
        assert_eq!(outcomes, [Unusable, Fulfilled], "{kind} saying {status}");
        assert_eq!(store.fulfilments().len(), 1, "{kind} saying {status}");
    }
    // A close naming another close, or an open status: applied by its type, as before.
    let close = item("evt_c", "invoice.expired", 90, &data("cancelled"));
    assert_eq!(webhooks(&[close]).await.0, [Updated]);
    let deposit = |status: &str| {
        item(
            "evt_d",
            "payment_channel.deposit.confirmed",
            100,
            &format!(
                r#"{{"id":"pcd_1","status":"{status}","is_final":true,"payment_channel_external_id":"payer-1","net":"4.90","currency":"USDT"}}"#
            ),
        )
    };
    assert_eq!(webhooks(&[deposit("confirming")]).await.0, [Unusable]);
    // An advisory event saying what it is stays advisory.
    let advisory = item(
        "evt_a",
        "payment_channel.deposit.confirming",
        90,
        r#"{"id":"pcd_1","status":"confirming","payment_channel_external_id":"payer-1","net":"4.90","currency":"USDT"}"#,
    );
    assert_eq!(webhooks(&[advisory]).await.0, [Updated]);
    assert_eq!(webhooks(&[deposit("reorged")]).await.0, [Unusable]);
    assert_eq!(webhooks(&[deposit("confirmed")]).await.0, [Credited]);
}

// Found by the attack on `dev` (a reference-only helper): a held payment whose refund webhook
// was lost was released on a person's word although Paymos had refunded it in full after the
// payment; with the API configured, `release` never asked. Now it records Paymos' completed
// full refunds of the invoice first (dated by Paymos, as the reconciliation records them), and
// the refund-in-time rule decides: a refund after the payment returned it (nothing ships), one
// before it returned an earlier payment (the release ships).
#[tokio::test]
async fn a_release_asks_paymos_about_refunds_first() {
    let alice = ReleaseBy {
        actor: "alice",
        reason: Some("price agreed by email"),
        override_amount: true,
        project: None,
        order: None,
    };
    // Paid at 30, for a price other than its order's registration: held for a person.
    let held = || {
        item(
            "evt_p",
            "invoice.paid",
            30,
            r#"{"invoice_id":"inv_1","order":{"external_id":"o-1","amount":"9","currency":"USD"}}"#,
        )
    };
    for (refunded_at, ships) in [(40, false), (20, true)] {
        let store = Arc::new(MemoryResources::new());
        store.register_order("o-1", &Amount::parse("10").unwrap(), "USD");
        let fulfil = crate::tests::one_shop(Arc::clone(&store));
        assert_eq!(fulfil.apply(&held(), NOW_MS).await.unwrap().1, Held);
        let paymos = MemoryPaymos::new();
        paymos.invoice("inv_1", at_paymos("paid", Some(30)));
        paymos.refund("inv_1", paymos_refund(refunded_at));
        let released = fulfil
            .release_asking(&MemoryReviews::new(), &paymos, "inv_1", &alice, NOW_MS)
            .await;
        if ships {
            assert_eq!(released, Ok(Fulfilled), "refunded at {refunded_at}");
            assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
        } else {
            assert!(
                matches!(&released, Err(crate::roads::release::ReleaseError::NotReleasable(why)) if why.contains("refunded in full")),
                "refunded at {refunded_at}: {released:?}"
            );
            assert_eq!(store.fulfilments(), []);
        }
    }
}

// A missed mutant (`!seen.after_refund` → `seen.after_refund` in `refusal`) showed no test
// walked this rule: a payment a person recorded undated, waiting for its order, its invoice
// then closed and refunded in full; the person's undated word again is `refunded`: that
// refund returned the payment it waited with. Nothing ships.
#[tokio::test]
async fn a_persons_word_again_after_a_full_refund_of_the_payment_that_waited_for_its_order() {
    let open = item(
        "evt_o",
        "invoice.confirming",
        5,
        r#"{"invoice_id":"inv_1"}"#,
    );
    let (outcomes, store) = webhooks(&[open]).await;
    assert_eq!(outcomes, [Updated]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let unnamed = OrderRef::none();
    let first = fulfil.mark_paid("inv_1", unnamed, "support", NOW_MS).await;
    let closed = item("evt_x", "invoice.expired", 10, r#"{"invoice_id":"inv_1"}"#);
    assert_eq!(fulfil.apply(&closed, NOW_MS).await.unwrap().1, Updated);
    let refund = fulfil
        .apply(&full_refund("evt_r", 20), NOW_MS)
        .await
        .unwrap()
        .1;
    let again = fulfil
        .mark_paid("inv_1", OrderRef::none(), "support", NOW_MS)
        .await;
    assert_eq!(
        (first, refund, again),
        (Ok(OrderUnknown), Updated, Ok(Refunded))
    );
    assert_eq!(store.fulfilments(), []);
}

// Found by the attack on `dev` (a reference-only helper): support's `mark-paid --order-id A`
// of a payment whose order was known nowhere shipped order A; a later delivery of the same
// invoice naming order B (Paymos' own word: an invoice has one order) answered
// `already_final` and was listed nowhere, so B, paid, never shipped and nobody heard. It now
// waits as `order_conflict`, listed although the invoice is fulfilled, until a person resolves
// it; a delivery naming the order that shipped stays `already_final`.
#[tokio::test]
async fn a_delivery_naming_another_order_than_the_one_shipped_waits_for_a_person() {
    let unnamed = item("evt_u", "invoice.paid", 100, r#"{"invoice_id":"inv_1"}"#);
    let (outcomes, store) = webhooks(&[unnamed]).await;
    assert_eq!(outcomes, [OrderUnknown]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let a = OrderRef {
        external_id: Some("o-A".into()),
        ..OrderRef::none()
    };
    let by_hand = fulfil.mark_paid("inv_1", a, "support", NOW_MS).await;
    assert_eq!(by_hand, Ok(Fulfilled));
    let naming = |event_id: &str, order: &str| {
        item(
            event_id,
            "invoice.paid",
            100,
            &format!(r#"{{"invoice_id":"inv_1","order":{{"external_id":"{order}"}}}}"#),
        )
    };
    let same = fulfil
        .apply(&naming("evt_a", "o-A"), NOW_MS)
        .await
        .unwrap()
        .1;
    let other = fulfil
        .apply(&naming("evt_b", "o-B"), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!((same, other), (AlreadyFinal, OrderConflict));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-A".into()))]);
    // As the ledger records it (the memory twin of the `waiting` index).
    let reviews = MemoryReviews::new();
    let why = "it pays order o-B, but this invoice shipped order o-A";
    reviews.processed(waited(&naming("evt_b", "o-B")), OrderConflict, why, NOW_MS);
    let listed = list(&*store, &reviews, 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].kind, "order_conflict");
    assert_eq!(listed[0].event_id.as_deref(), Some("evt_b"));
    assert!(
        listed[0].action.contains("exceptions --resolve evt_b"),
        "{listed:?}"
    );
    // A person settles it (ships o-B, or finds o-A right) and resolves it: it leaves the list.
    let resolved =
        crate::roads::exceptions::resolve(&reviews, "evt_b", None, "alice", NOW_MS).await;
    assert_eq!(resolved, Ok(OrderConflict));
    assert!(list(&*store, &reviews, 0).await.unwrap().is_empty());
    assert_eq!(
        reviews.resolved("evt_b"),
        Some(("resolved_by_hand".into(), "manual:alice".into()))
    );
    // Only what waits for a person's own act is resolved so; a second time, nothing waits.
    let again = crate::roads::exceptions::resolve(&reviews, "evt_b", None, "alice", NOW_MS).await;
    assert!(matches!(
        again,
        Err(crate::roads::exceptions::ResolveError::NotResolvable(_))
    ));
}

// Missed mutant (the `OrderConflict` guard in `noted`): a delivery naming another order than
// the one a person shipped writes its note alone; the shipped record learns nothing of it
// (its time would date the person's payment, and a full refund would be judged by it).
#[tokio::test]
async fn a_conflicting_delivery_teaches_the_shipped_record_nothing() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let a = OrderRef {
        external_id: Some("o-A".into()),
        ..OrderRef::none()
    };
    assert_eq!(
        fulfil.mark_paid("inv_1", a, "support", NOW_MS).await,
        Ok(Fulfilled)
    );
    let before = store.invoice("inv_1").unwrap();
    let b = item(
        "evt_b",
        "invoice.paid",
        100,
        r#"{"invoice_id":"inv_1","order":{"external_id":"o-B"}}"#,
    );
    let outcome = fulfil.apply(&b, NOW_MS).await.unwrap().1;
    assert_eq!(outcome, OrderConflict);
    let after = store.invoice("inv_1").unwrap();
    assert_eq!((after.payment_at, after.order), (None, before.order));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-A".into()))]);
}

// A person's `mark-paid --order-id B` of an invoice that shipped order A answered
// `already_final`, exit 0, as if B shipped. It is the same conflict as a delivery's: the
// person hears `order_conflict` (the command line exits 1 and says why); nothing is written.
#[tokio::test]
async fn a_persons_word_naming_another_order_than_the_one_shipped_is_a_conflict() {
    let (outcomes, store) = webhooks(&[invoice("evt_p", "paid", 100)]).await;
    assert_eq!(outcomes, [Fulfilled]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let named = |id: &str| OrderRef {
        external_id: Some(id.into()),
        ..OrderRef::none()
    };
    let before = store.keys();
    let other = fulfil
        .mark_paid("inv_1", named("o-B"), "support", NOW_MS)
        .await;
    let same = fulfil
        .mark_paid("inv_1", named("o-1"), "support", NOW_MS)
        .await;
    assert_eq!((other, same), (Ok(OrderConflict), Ok(AlreadyFinal)));
    assert_eq!(store.keys(), before, "nothing written");
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Found by the model's new shapes (a reference-only helper): no source says which event
// announces a late payment; an `invoice.paid` whose snapshot keeps the closed status with
// `paid_late_at` (the contract's shape of a late payment) shipped as if paid in time without
// the reverse check. It lands `paid_late`, dated by `paid_late_at`, and waits for a person.
#[tokio::test]
async fn a_payment_event_whose_snapshot_says_closed_and_paid_late_lands_paid_late() {
    let late = item(
        "evt_l",
        "invoice.paid",
        120,
        r#"{"invoice_id":"inv_1","status":"expired","paid_late_at":115,"order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
    );
    let (outcomes, store) = webhooks(&[late]).await;
    assert_eq!(outcomes, [PaidLate]);
    assert_eq!(store.fulfilments(), []);
    let seen = store.invoice("inv_1").unwrap().seen();
    assert!(seen.paid_late, "{seen:?}");
    assert_eq!(seen.payment_at, Some(115));
    assert_eq!(
        seen.status,
        Some(crate::money::status::InvoiceStatus::Expired)
    );
}

/// inv_1's close at `at` by an event naming no order (the contract's partial snapshots).
fn closed_naming_nothing(event_id: &str, at: u64) -> WorkItem {
    item(event_id, "invoice.expired", at, r#"{"invoice_id":"inv_1"}"#)
}

fn alice() -> ReleaseBy<'static> {
    ReleaseBy {
        actor: "alice",
        reason: None,
        override_amount: false,
        project: None,
        order: None,
    }
}

/// Alice's release of inv_1, as `release` without the API.
async fn release_by_alice(
    fulfil: &Fulfil<Arc<MemoryResources>>,
) -> Result<Applied, crate::roads::release::ReleaseError> {
    fulfil
        .release(&MemoryReviews::new(), "inv_1", &alice(), NOW_MS)
        .await
}

/// `reconcile` over every invoice Paymos lists (`--apply` when `apply`).
async fn reconcile_all(
    paymos: &MemoryPaymos,
    fulfil: &Fulfil<Arc<MemoryResources>>,
    apply: bool,
) -> crate::roads::reconcile::Report {
    crate::roads::reconcile::reconcile(paymos, fulfil, (0, 2_000_000_000), apply, NOW_MS)
        .await
        .unwrap()
}

// Found by the model's new shapes: an invoice closed by an event naming no order, then paid
// late by one naming it. `release` said "no order is known: mark-paid --order-id", and
// `mark-paid` answered `paid_late` and learned nothing: the payment could never ship. The late
// payment's order is learned (set once, as every order), and `release` ships it.
#[tokio::test]
async fn a_late_payment_teaches_the_order_its_close_did_not_name() {
    let (outcomes, store) = webhooks(&[
        closed_naming_nothing("evt_x", 100),
        invoice("evt_l", "paid", 120),
    ])
    .await;
    assert_eq!(outcomes, [Updated, PaidLate]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let released = release_by_alice(&fulfil).await;
    assert_eq!(released, Ok(Fulfilled));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// The same, the late payment naming no order either: the person's `mark-paid --order-id` that
// `release` asks for names it (before: `paid_late`, nothing learned, `release` refused again).
#[tokio::test]
async fn a_persons_word_names_the_order_of_a_late_payment_known_nowhere() {
    let late = item("evt_l", "invoice.paid", 120, r#"{"invoice_id":"inv_1"}"#);
    let (outcomes, store) = webhooks(&[closed_naming_nothing("evt_x", 100), late]).await;
    assert_eq!(outcomes, [Updated, PaidLate]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let refused = release_by_alice(&fulfil).await;
    assert!(refused.is_err(), "{refused:?}");
    let named = OrderRef {
        external_id: Some("o-1".into()),
        ..OrderRef::none()
    };
    let by_hand = fulfil.mark_paid("inv_1", named, "support", NOW_MS).await;
    assert_eq!(by_hand, Ok(PaidLate));
    assert!(
        store.fulfilments().is_empty(),
        "a late payment waits for release"
    );
    let released = release_by_alice(&fulfil).await;
    assert_eq!(released, Ok(Fulfilled));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Missed mutant (the `||` before `refunded_in_full_at` in `exceptions::list`): a payment that
// waited for its order, whose invoice now waits `paid_late` (unrefunded), is listed once, by
// its invoice's line, not again by its delivery's.
#[tokio::test]
async fn a_payment_waiting_for_its_order_then_paid_late_is_listed_once() {
    let late = item("evt_l", "invoice.paid", 120, r#"{"invoice_id":"inv_1"}"#);
    let (outcomes, store) = webhooks(&[closed_naming_nothing("evt_x", 100), late]).await;
    assert_eq!(outcomes, [Updated, PaidLate]);
    let reviews = MemoryReviews::new();
    let copy = item("evt_c", "invoice.paid", 120, r#"{"invoice_id":"inv_1"}"#);
    reviews.processed(waited(&copy), OrderUnknown, "order known nowhere", NOW_MS);
    let listed = list(&*store, &reviews, 0).await.unwrap();
    let kinds: Vec<_> = listed.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["paid_late"], "{listed:?}");
}

// G13: a payment Paymos dates before its invoice closed, whose delivery arrives after the
// closure was applied, rightly waits `paid_late` for a person; but it was listed as "paid after
// it closed", which Paymos' own date contradicts. The words now say what holds for it and for
// a payment made after the close alike: its payment arrived after the invoice closed.
#[tokio::test]
async fn a_payment_dated_before_the_close_that_arrives_after_it_is_listed_as_arriving_late() {
    let (outcomes, store) = webhooks(&[
        invoice("evt_x", "expired", 200),
        invoice("evt_p", "paid", 150),
    ])
    .await;
    assert_eq!(outcomes, [Updated, PaidLate]);
    assert!(store.fulfilments().is_empty(), "it waits for a person");
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    let kinds: Vec<_> = listed.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["paid_late"], "{listed:?}");
    assert_eq!(
        listed[0].why, "its payment arrived after the invoice closed as expired (order o-1)",
        "{listed:?}"
    );
}

// Found by the model's new shapes: an open event naming the order that arrives after a later
// one naming none (a late event) taught nothing, so the payment naming none waited
// `order_unknown` though a delivery had named its order. A late event still teaches what the
// record leaves out (set once): the payment ships its order.
#[tokio::test]
async fn a_late_open_event_teaches_the_order_the_record_leaves_out() {
    let pending = item(
        "evt_2",
        "invoice.confirming",
        110,
        r#"{"invoice_id":"inv_1"}"#,
    );
    let paid = item("evt_p", "invoice.paid", 120, r#"{"invoice_id":"inv_1"}"#);
    let (outcomes, store) =
        webhooks(&[pending, invoice("evt_1", "awaiting_payment", 100), paid]).await;
    assert_eq!(outcomes, [Updated, Stale, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Found by the attack on `dev`: a forged close (no reverse check) named order o-X and a late
// payment; `reconcile --apply`, which asked Paymos, kept o-X, and `release` shipped it. Paymos'
// order replaces the record's on a late payment as on a hold: `release` ships o-1.
#[tokio::test]
async fn reconcile_puts_paymos_order_on_a_late_payment_a_forged_close_named() {
    let forged = item(
        "evt_f",
        "invoice.expired",
        100,
        r#"{"invoice_id":"inv_1","paid_late_at":110,"order":{"external_id":"o-X","amount":"10","currency":"USD"}}"#,
    );
    let (outcomes, store) = webhooks(&[forged]).await;
    assert_eq!(outcomes, [PaidLate]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", late_at_paymos("expired", Some(110)));
    reconcile_all(&paymos, &fulfil, true).await;
    let released = release_by_alice(&fulfil).await;
    assert_eq!(released, Ok(Fulfilled));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Found by the model's new shapes (a reference-only helper): support's undated word of a
// payment whose order was known nowhere, then a full refund at 20, then the same word again
// settled `refunded` (the refund returned the payment that waited). Paymos' own word then came:
// the payment, naming its order, made at 30, after that refund: a new payment, which the
// refund did not return. Before: dated, `already_final`, neither shipped nor listed.
#[tokio::test]
async fn a_dated_payment_after_the_full_refund_that_settled_a_persons_word_ships() {
    let open = item(
        "evt_o",
        "invoice.confirming",
        5,
        r#"{"invoice_id":"inv_1"}"#,
    );
    let (_, store) = webhooks(&[open]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let first = fulfil
        .mark_paid("inv_1", OrderRef::none(), "support", NOW_MS)
        .await;
    let refund = fulfil
        .apply(&full_refund("evt_r", 20), NOW_MS)
        .await
        .unwrap()
        .1;
    let again = fulfil
        .mark_paid("inv_1", OrderRef::none(), "support", NOW_MS)
        .await;
    assert_eq!(
        (first, refund, again),
        (Ok(OrderUnknown), Updated, Ok(Refunded))
    );
    let paid = fulfil
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap()
        .1;
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(
        (paid, store.fulfilments()),
        (Fulfilled, vec![("inv_1".into(), Some("o-1".into()))]),
        "listed: {listed:?}"
    );
}

// The same after the invoice closed at 10: the payment at 30 is a late one, listed for a
// person (`paid_late`), never settled by the refund before it.
#[tokio::test]
async fn a_dated_late_payment_after_the_full_refund_that_settled_a_persons_word_waits() {
    let open = item(
        "evt_o",
        "invoice.confirming",
        5,
        r#"{"invoice_id":"inv_1"}"#,
    );
    let (_, store) = webhooks(&[open]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let first = fulfil
        .mark_paid("inv_1", OrderRef::none(), "support", NOW_MS)
        .await;
    let closed = item("evt_x", "invoice.expired", 10, r#"{"invoice_id":"inv_1"}"#);
    let closing = fulfil.apply(&closed, NOW_MS).await.unwrap().1;
    let refund = fulfil
        .apply(&full_refund("evt_r", 20), NOW_MS)
        .await
        .unwrap()
        .1;
    let again = fulfil
        .mark_paid("inv_1", OrderRef::none(), "support", NOW_MS)
        .await;
    assert_eq!(
        (first, closing, refund, again),
        (Ok(OrderUnknown), Updated, Updated, Ok(Refunded))
    );
    let paid = fulfil
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap()
        .1;
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(paid, PaidLate, "listed: {listed:?}");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(store.fulfilments(), []);
    let released = release_by_alice(&fulfil).await;
    assert_eq!(released, Ok(Fulfilled));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Found by the attack on `dev`: a forged payment (signed with a leaked secret) that Paymos
// contradicts (the invoice closed unpaid) stays listed `unconfirmed`, as it must (a person
// must see the leak), but had no way out: recheck kept it, `exceptions --resolve` refused it,
// and the only command offered was `mark-paid`, which would ship the forgery. A person who
// checked resolves it; nothing ships.
#[tokio::test]
async fn a_forged_payment_paymos_contradicts_is_resolved_by_a_person_and_ships_nothing() {
    let forged = invoice("evt_f", "paid", 100);
    let store = Arc::new(MemoryResources::new());
    let reviews = MemoryReviews::new();
    reviews.processed(
        waited(&forged),
        Unconfirmed,
        "Paymos says the invoice closed expired and was not paid",
        NOW_MS,
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("expired", None));
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    assert_eq!(
        rechecked[0].outcome.as_str(),
        "unconfirmed",
        "{rechecked:?}"
    );
    let listed = list(&*store, &reviews, 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].action.contains("exceptions --resolve evt_f"),
        "{listed:?}"
    );
    let resolved =
        crate::roads::exceptions::resolve(&reviews, "evt_f", None, "alice", NOW_MS).await;
    assert_eq!(resolved, Ok(Unconfirmed));
    assert!(list(&*store, &reviews, 0).await.unwrap().is_empty());
    assert_eq!(store.fulfilments(), []);
}

// A person's undated word of a payment whose order is known nowhere, after a full refund, then
// the same word naming the order: nothing says whether it was paid again after the refund, so
// it waits for a person (held, listed), never settled `refunded` in silence.
#[tokio::test]
async fn a_persons_word_after_a_full_refund_then_naming_the_order_waits_for_a_person() {
    let (_, store) = webhooks(&[full_refund("evt_r", 20)]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let unnamed = fulfil
        .mark_paid("inv_1", OrderRef::none(), "support", NOW_MS)
        .await;
    let named = fulfil.mark_paid("inv_1", order(), "support", NOW_MS).await;
    assert_eq!((unnamed, named), (Ok(OrderUnknown), Ok(Held)));
    assert_eq!(store.fulfilments(), []);
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert!(
        listed.iter().any(|e| e.why.contains("after a full refund")),
        "{listed:?}"
    );
}

// A late payment released here is known: Paymos listing it paid late is no news, the run is
// clean and ships nothing more, also in a later run whose window begins after the release (its
// fulfilment is not among the window's).
#[tokio::test]
async fn a_released_late_payment_is_known_to_the_reconciliation() {
    let (_, store) = webhooks(&[
        closed_naming_nothing("evt_x", 100),
        invoice("evt_l", "paid", 120),
    ])
    .await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let released = release_by_alice(&fulfil).await;
    assert_eq!(released, Ok(Fulfilled));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", late_at_paymos("expired", Some(120)));
    for from in [0, 1_800_100_000] {
        let report = crate::roads::reconcile::reconcile(
            &paymos,
            &fulfil,
            (from, 2_000_000_000),
            true,
            NOW_MS,
        )
        .await
        .unwrap();
        assert!(report.paid_late.is_empty(), "{from}: {report:?}");
        assert!(report.clean(), "{from}: {report:?}");
    }
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// What the reconciliation counts as a late payment known here, by Paymos' clock: one a full
// refund returned (refunded at 20, paid at 15), and a person's undated word after a full refund
// while Paymos names no time either (it waits for a person already). Paymos' time of such a
// word is news: the run reports it, and `--apply` dates it.
#[tokio::test]
async fn a_late_payment_a_refund_returned_or_a_person_holds_is_known_to_the_reconciliation() {
    let late = |paid_at: Option<u64>| {
        let paymos = MemoryPaymos::new();
        paymos.invoice("inv_1", late_at_paymos("expired", paid_at));
        paymos.refund("inv_1", paymos_refund(20));
        paymos
    };
    let reported = async |store: &Arc<MemoryResources>, paymos: &MemoryPaymos| {
        let fulfil = crate::tests::one_shop(Arc::clone(store));
        let report =
            crate::roads::reconcile::reconcile(paymos, &fulfil, (0, 2_000_000_000), false, NOW_MS)
                .await
                .unwrap();
        let ids = |facts: &[crate::roads::reconcile::PaidAtPaymos]| {
            facts
                .iter()
                .map(|p| p.invoice_id.clone())
                .collect::<Vec<_>>()
        };
        (ids(&report.paid_late), ids(&report.late_recorded))
    };
    let returned = [
        closed_naming_nothing("evt_x", 10),
        invoice("evt_l", "paid", 15),
        full_refund("evt_r", 20),
    ];
    let (outcomes, store) = webhooks(&returned).await;
    assert_eq!(outcomes, [Updated, PaidLate, Updated]);
    let known = (Vec::<String>::new(), vec!["inv_1".to_owned()]);
    assert_eq!(reported(&store, &late(Some(15))).await, known);

    let (_, store) =
        webhooks(&[closed_naming_nothing("evt_x", 10), full_refund("evt_r", 20)]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let by_hand = fulfil.mark_paid("inv_1", order(), "support", NOW_MS).await;
    assert_eq!(by_hand, Ok(PaidLate));
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert_eq!(seen.unwrap().standing(), Standing::AfterRefund);
    assert_eq!(reported(&store, &late(None)).await, known);
    assert_eq!(
        reported(&store, &late(Some(30))).await,
        (vec!["inv_1".to_owned()], Vec::new())
    );
}

// Found by the attack on `dev`: support's `mark-paid --order-id 1007` of a payment whose order
// was known nowhere shipped 1007; Paymos' invoice names order 1008. The reconciliation counted
// it "fulfilled here once" and was clean, so 1008, paid, never shipped and nobody heard. It is
// reported now (SHIPPED OTHERWISE), the run is not clean, and nothing more ships.
#[tokio::test]
async fn reconcile_reports_an_invoice_shipped_under_another_order_than_paymos_names() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let named = |id: &str| OrderRef {
        external_id: Some(id.into()),
        ..OrderRef::none()
    };
    let by_hand = fulfil
        .mark_paid("inv_1", named("o-7"), "support", NOW_MS)
        .await;
    assert_eq!(by_hand, Ok(Fulfilled));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    for apply in [false, true] {
        let report =
            crate::roads::reconcile::reconcile(&paymos, &fulfil, (0, 2_000_000_000), apply, NOW_MS)
                .await
                .unwrap();
        let otherwise: Vec<_> = report
            .shipped_otherwise
            .iter()
            .map(|o| {
                (
                    o.paid.invoice_id.as_str(),
                    o.shipped_order_id.as_deref(),
                    o.paid.order_id.as_str(),
                )
            })
            .collect();
        assert_eq!(otherwise, [("inv_1", Some("o-7"), "o-1")], "{report:?}");
        assert_eq!(report.matched, 0);
        assert!(!report.clean());
    }
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-7".into()))]);
    // The same order as Paymos': clean.
    let paymos = MemoryPaymos::new();
    let mut same = at_paymos("paid", Some(30));
    same.order_id = Some("o-7".into());
    paymos.invoice("inv_1", same);
    let report = reconcile_all(&paymos, &fulfil, false).await;
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.matched, 1);
}

// Found by the attack on `dev` (two projects, no reverse check): a person's `mark-paid
// --project prj_b` of a payment whose project was known nowhere, then the paid event naming
// prj_a: held, as it must be (neither project's order ships on two words), but listed as
// "differs from what order o-1 was registered for", though nothing was registered. The hold
// keeps why, and the listing says it.
#[tokio::test]
async fn a_hold_for_another_project_than_the_record_is_listed_with_that_reason() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let b = OrderRef {
        project: Some("prj_b".into()),
        ..OrderRef::none()
    };
    let marked = fulfil.mark_paid("inv_1", b, "support", NOW_MS).await;
    assert_eq!(marked, Ok(OrderUnknown));
    let paid = fulfil.apply(&paid_of("prj_a"), NOW_MS).await.unwrap().1;
    assert_eq!(paid, Held);
    assert_eq!(store.fulfilments(), []);
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    let held: Vec<_> = listed.iter().filter(|e| e.kind == "held").collect();
    assert_eq!(held.len(), 1, "{listed:?}");
    assert!(held[0].why.contains("project prj_b"), "{held:?}");
    assert!(!held[0].why.contains("registered"), "{held:?}");
}

// Found by the model's new shapes (a reference-only helper): a forged close (no reverse check)
// named order o-X; Paymos has the invoice paid in time, order o-1. `reconcile --apply` held the
// payment on the record's o-X (Paymos' order replaced only an open, held or late record's), and
// `release` shipped the forgery's order. Nothing shipped under the closed record: Paymos'
// order replaces it, and the release ships o-1.
#[tokio::test]
async fn reconcile_puts_paymos_order_on_an_invoice_a_forged_close_named() {
    let forged = item(
        "evt_f",
        "invoice.underpaid",
        100,
        r#"{"invoice_id":"inv_1","order":{"external_id":"o-X","amount":"10","currency":"USD"}}"#,
    );
    let (outcomes, store) = webhooks(&[forged]).await;
    assert_eq!(outcomes, [Updated]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(110)));
    reconcile_all(&paymos, &fulfil, true).await;
    let _ = release_by_alice(&fulfil).await;
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// A paid delivery naming order o-X waited unconfirmed (a 404 at Paymos); Paymos now has the
// invoice paid for order o-1. A recheck applies only what Paymos confirms of the delivery: the
// claim stays listed for a person (a leaked secret, or a late payment Paymos has not marked
// yet) with its way out (`exceptions --resolve`), and nothing of it ships. Paymos' own payment,
// its webhook lost, is the reconciliation's: `reconcile --apply` ships it with Paymos' order
// (reading Paymos' refunds of it first), once; a late one waits `paid_late`. The model found a
// recheck that applied Paymos' payment itself shipping what Paymos had refunded in full, and
// the refuted delivery's order where Paymos named none.
#[tokio::test]
async fn a_recheck_leaves_paymos_own_payment_to_the_reconciliation() {
    let naming_x = item(
        "evt_x",
        "invoice.paid",
        30,
        r#"{"invoice_id":"inv_1","order":{"external_id":"o-X","amount":"10","currency":"USD"}}"#,
    );
    for (at_paymos, shipped, listed) in [
        (at_paymos("paid", Some(30)), true, None),
        (
            late_at_paymos("expired", Some(30)),
            false,
            Some("paid_late"),
        ),
    ] {
        let store = Arc::new(MemoryResources::new());
        let reviews = MemoryReviews::new();
        reviews.processed(
            waited(&naming_x),
            Unconfirmed,
            "invoice: Paymos does not know it (404): forged, or another project's",
            NOW_MS,
        );
        let paymos = MemoryPaymos::new();
        paymos.invoice("inv_1", at_paymos);
        let rechecked = recheck_live(&store, &reviews, &paymos, Some("inv_1")).await;
        assert_eq!(rechecked.len(), 1, "{rechecked:?}");
        assert_eq!(
            rechecked[0].outcome.as_str(),
            "unconfirmed",
            "{rechecked:?}"
        );
        let why = rechecked[0].outcome.reason().unwrap_or_default();
        assert!(why.contains("o-X") && why.contains("o-1"), "{why}");
        assert_eq!(store.fulfilments(), []);
        let kinds = |listed: Vec<crate::roads::exceptions::Exception>| -> Vec<_> {
            listed
                .iter()
                .map(|e| (e.kind, e.resource_id.clone()))
                .collect()
        };
        assert_eq!(
            kinds(list(&*store, &reviews, 0).await.unwrap()),
            [("unconfirmed", Some("inv_1".to_owned()))]
        );
        let fulfil = crate::tests::one_shop(Arc::clone(&store));
        reconcile_all(&paymos, &fulfil, true).await;
        let want: &[(String, Option<String>)] = if shipped {
            &[("inv_1".into(), Some("o-1".into()))]
        } else {
            &[]
        };
        assert_eq!(store.fulfilments(), want);
        assert!(!store.keys().contains(&"order_paid#o-X".to_owned()));
        // The claim's line stays until a person resolves it, or Paymos' payment of the
        // invoice ships.
        let mut want: Vec<_> = listed
            .map(|k| (k, Some("inv_1".to_owned())))
            .into_iter()
            .collect();
        if !shipped {
            want.push(("unconfirmed", Some("inv_1".to_owned())));
        }
        let mut got = kinds(list(&*store, &reviews, 0).await.unwrap());
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
}

/// `item` of `invoice_id` for order o-1 (10 USD) at `status`.
fn invoice_of(event_id: &str, invoice_id: &str, status: &str, at: u64) -> WorkItem {
    item(
        event_id,
        &format!("invoice.{status}"),
        at,
        &format!(
            r#"{{"invoice_id":"{invoice_id}","order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
        ),
    )
}

// Found by the attack on `dev`: a late payment of an order another invoice shipped was listed
// "ship anyway with `release`", and `release` refused it (the order is fulfilled). Its line now
// says the order shipped with the other invoice, and offers only what works: a refund.
#[tokio::test]
async fn a_late_payment_of_an_order_another_invoice_shipped_is_listed_for_a_refund() {
    let (outcomes, store) = webhooks(&[
        invoice_of("evt_a", "inv_a", "paid", 10),
        invoice_of("evt_e", "inv_1", "expired", 20),
        invoice_of("evt_l", "inv_1", "paid", 30),
    ])
    .await;
    assert_eq!(outcomes, [Fulfilled, Updated, PaidLate]);
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].resource_id.as_deref(), Some("inv_1"));
    assert!(
        listed[0].why.contains("shipped already with inv_a"),
        "{listed:?}"
    );
    assert!(
        listed[0].action.contains("refund inv_1") && !listed[0].action.contains("release"),
        "{listed:?}"
    );
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    assert!(release_by_alice(&fulfil).await.is_err());
    assert_eq!(store.fulfilments(), [("inv_a".into(), Some("o-1".into()))]);
}

// Found by the attack on `dev`: a customer whose first payment was refunded in full pays the
// same order again on a new invoice; its line said "refund it" as for any second payment. The
// order shipped once (never again), and the payment that pays for it now is this one: its line
// says so, and leaves the choice to the person.
#[tokio::test]
async fn a_second_payment_after_the_first_was_refunded_in_full_is_not_simply_refunded() {
    let refund = item(
        "evt_r",
        "withdrawal.completed",
        20,
        r#"{"withdrawal_id":"wdr_a","invoice_id":"inv_a","mode":"full","type":"refund","amount":"10","currency":"USD"}"#,
    );
    let (outcomes, store) = webhooks(&[
        invoice_of("evt_a", "inv_a", "paid", 10),
        refund,
        invoice_of("evt_2", "inv_2", "paid", 30),
    ])
    .await;
    assert_eq!(outcomes, [Fulfilled, Updated, DuplicatePayment]);
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].kind, "duplicate_payment");
    assert!(
        listed[0]
            .why
            .contains("inv_a's payment was refunded in full"),
        "{listed:?}"
    );
    assert!(
        listed[0].action.contains("keep it") && listed[0].action.contains("refund inv_2"),
        "{listed:?}"
    );
    assert_eq!(store.fulfilments(), [("inv_a".into(), Some("o-1".into()))]);
}

// Found by the attack on `dev`: refunds that are not `full` summing to the whole payment were
// listed as "refunded so far, not all of it". Only a `full` refund settles a payment; the line
// says what was refunded and that none of it was `full`.
#[tokio::test]
async fn refunds_that_are_not_full_are_listed_as_such_whatever_their_sum() {
    let over = |id: &str, amount: &str| {
        item(
            &format!("evt_{id}"),
            "withdrawal.completed",
            40,
            &format!(
                r#"{{"withdrawal_id":"{id}","invoice_id":"inv_1","mode":"overpayment","type":"refund","amount":"{amount}","currency":"USD"}}"#
            ),
        )
    };
    let (_, store) = webhooks(&[
        invoice("evt_e", "expired", 20),
        invoice("evt_l", "paid", 30),
        over("wdr_1", "4"),
        over("wdr_2", "6"),
    ])
    .await;
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(!listed[0].why.contains("not all of it"), "{listed:?}");
    assert!(
        listed[0]
            .why
            .contains("10 USD refunded so far, by no `full` refund"),
        "{listed:?}"
    );
}

// A held payment's line names another invoice its order shipped with, never itself (a record
// written so by hand, or by a build before the claim and the hold agreed).
#[tokio::test]
async fn a_held_line_never_names_its_own_invoice_as_the_one_its_order_shipped_with() {
    use crate::money::write::{Field, Guard, Key, Set, Value, What, Write};
    use crate::roads::fulfil::ResourceStore as _;
    let store = Arc::new(MemoryResources::new());
    let put = |key: Key, set: Vec<Set>| Write {
        what: What::Transition,
        key,
        guard: Guard::Always,
        set,
    };
    store
        .write(&[
            put(
                Key::state("inv_1"),
                vec![
                    Set::Put(Field::Kind, Value::text("invoice")),
                    Set::Put(Field::Status, Value::text("paid")),
                    Set::Put(Field::Held, Value::Bool(true)),
                    Set::Put(Field::OrderId, Value::text("o-1")),
                ],
            ),
            put(
                Key::state(crate::money::write::order_paid_key(None, "o-1")),
                vec![Set::Put(Field::InvoiceId, Value::text("inv_1"))],
            ),
        ])
        .await
        .unwrap();
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].kind, "held");
    assert!(!listed[0].why.contains("shipped already"), "{listed:?}");
    assert!(listed[0].action.contains("release inv_1"), "{listed:?}");
}

// Found by the model: a forged close (a leaked secret) naming order o-X of an invoice Paymos
// has closed with no order (an empty `external_order_id`). Paymos confirms the status, and its
// answer's missing order was filled from the event's: the late payment Paymos then reported
// shipped o-X on a release. Paymos' answer is the whole order: nothing of the event's fills it.
#[tokio::test]
async fn a_forged_close_plants_no_order_where_paymos_names_none() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            order_id: None,
            paid_late: true,
            ..at_paymos("expired", Some(30))
        },
    );
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let forged = item(
        "evt_f",
        "invoice.expired",
        20,
        r#"{"invoice_id":"inv_1","order":{"external_id":"o-X","amount":"10","currency":"USD"}}"#,
    );
    assert_eq!(fulfil.apply(&forged, NOW_MS).await.unwrap().1, Updated);
    assert_eq!(store.invoice("inv_1").unwrap().order.external_id, None);
    reconcile_all(&paymos, &crate::tests::one_shop(Arc::clone(&store)), true).await;
    let released = release_by_alice(&crate::tests::one_shop(Arc::clone(&store))).await;
    assert!(released.is_err(), "{released:?}");
    assert_eq!(store.fulfilments(), []);
}

// Found by the model: on a stack of two projects without the check, a payment naming no
// project (at 30) waits project_unknown; support's `mark-paid --project prj_a` (no order) then
// recorded it undated, and the full refund completed at 20 (before the payment: it returned an
// earlier one) settled it as refunded: the payment at 30 was shipped by nothing and listed for
// no one. The delivery teaches the record its time, as a payment of an order known nowhere
// does: the refund before it returns nothing of it, and it waits for its order.
#[tokio::test]
async fn a_persons_word_of_a_payment_naming_no_project_keeps_its_time() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let paid = item("evt_p", "invoice.paid", 30, r#"{"invoice_id":"inv_1"}"#);
    assert_eq!(fulfil.apply(&paid, NOW_MS).await.unwrap().1, ProjectUnknown);
    let a = OrderRef {
        project: Some("prj_a".into()),
        ..OrderRef::none()
    };
    let marked = fulfil.mark_paid("inv_1", a.clone(), "support", NOW_MS);
    assert_eq!(marked.await.unwrap(), OrderUnknown);
    fulfil
        .apply(&full_refund("evt_r", 20), NOW_MS)
        .await
        .unwrap();
    let seen = store.invoice("inv_1").unwrap();
    assert_eq!(seen.payment_at, Some(30), "{seen:?}");
    // One line, the invoice's: the person named the project, and its order waits (the
    // delivery's own line, which asked for the project, is done).
    let ledger = MemoryReviews::new();
    ledger.processed(waited(&paid), ProjectUnknown, "no project", 1);
    let listed = list(&*store, &ledger, 0).await.unwrap();
    let kinds: Vec<_> = listed
        .iter()
        .map(|e| (e.kind, e.resource_id.clone()))
        .collect();
    assert_eq!(kinds, [("order_unknown", Some("inv_1".to_owned()))]);
    // The record names its project: the way out asks only for the order.
    assert!(
        !listed[0].action.contains("--project"),
        "{}",
        listed[0].action
    );
    // Its order named, it ships (once).
    let with_order = OrderRef {
        external_id: Some("o-1".into()),
        ..a
    };
    let shipped = fulfil.mark_paid("inv_1", with_order, "support", NOW_MS);
    assert_eq!(shipped.await.unwrap(), Fulfilled);
    assert_eq!(claims(&store), ["order_paid#o-1"]);
}

// Found by this turn's attack on `dev` (finding 1): with the reverse check on, a delayed
// `invoice.paid` shipped an invoice Paymos shows paid at 100 and refunded in full at 150. The
// check read the invoice, never its refunds, so the refund whose webhook was still on its way
// returned nothing. Paymos' completed full refunds are now recorded before a payment it
// confirms: nothing ships, and the payment is refunded (nothing for a person). Before:
// `fulfilled`, Order Paid, listed nowhere.
#[tokio::test]
async fn with_the_check_a_payment_paymos_refunded_in_full_before_it_arrived_never_ships() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    paymos.refund("inv_1", paymos_refund(150));
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let outcome = fulfil
        .apply(&invoice("evt_p", "paid", 100), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!(outcome, Refunded);
    assert!(store.fulfilments().is_empty());
    assert!(
        list(&*store, &MemoryReviews::new(), 0)
            .await
            .unwrap()
            .is_empty()
    );
    // A payment Paymos dates after that refund is a new one: it ships.
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", at_paymos("paid", Some(200)));
    paymos.refund("inv_1", paymos_refund(150));
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let outcome = fulfil
        .apply(&invoice("evt_p", "paid", 200), NOW_MS)
        .await
        .unwrap()
        .1;
    assert_eq!(outcome, Fulfilled);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Finding 1, `recheck`: the paid delivery waited unconfirmed (a 404); Paymos then shows the
// invoice paid at 100 and refunded in full at 150. Before: `fulfilled` by the recheck.
#[tokio::test]
async fn a_recheck_ships_nothing_of_a_payment_paymos_refunded_in_full() {
    let store = Arc::new(MemoryResources::new());
    let reviews = MemoryReviews::new();
    unconfirmed_payment(&reviews, 100);
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    paymos.refund("inv_1", paymos_refund(150));
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    assert_eq!(rechecked[0].outcome.as_str(), "refunded", "{rechecked:?}");
    assert!(store.fulfilments().is_empty());
}

// Finding 3, `reconcile --apply`: Paymos lists inv_1 paid with no payment time, and a full
// refund (of an earlier part payment) completed at 400. Nothing says whether that refund
// returned this payment: it neither ships nor settles in silence. Before: `REFUNDED … never
// fulfilled`, nothing applied, nothing listed.
#[tokio::test]
async fn reconcile_never_settles_an_undated_payment_as_refunded_in_silence() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", None));
    paymos.refund("inv_1", paymos_refund(400));
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert!(report.refunded.is_empty(), "{report:?}");
    assert!(!report.clean(), "a person must look: {report:?}");
    assert!(store.fulfilments().is_empty());
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|e| (e.kind, e.resource_id.as_deref()))
            .collect::<Vec<_>>(),
        [("after_refund", Some("inv_1"))],
        "{listed:?}"
    );
    assert!(listed[0].why.contains("after a full refund"), "{listed:?}");
}

// Finding 6 of this turn's attack (a leaked secret, no reverse check): a forged full refund of
// an expired invoice, dated a year ahead of its own receipt, made the genuine late payment
// that followed "returned" by it: listed nowhere, `release` refused it as refunded. A
// delivery naming a time later than its receipt by more than an hour is no report of Paymos':
// unusable (listed with why), and the late payment waits as `paid_late`. Before: `updated`,
// then the payment silently settled.
#[tokio::test]
async fn a_refund_dated_a_year_after_its_receipt_returns_nothing_and_is_listed() {
    let year_ahead = 100 + 365 * 86_400;
    let mut forged = item(
        "evt_f",
        "withdrawal.completed",
        year_ahead,
        &format!(
            r#"{{"withdrawal_id":"wdr_f","invoice_id":"inv_1","mode":"full","type":"refund","amount":"10","currency":"USD","completed_at":{year_ahead}}}"#
        ),
    );
    forged.received_at_ms = Some(110_000);
    let late = item(
        "evt_l",
        "invoice.paid",
        150,
        r#"{"invoice_id":"inv_1","status":"expired","paid_late_at":150,"order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
    );
    let (outcomes, store) = webhooks(&[invoice("evt_x", "expired", 100), forged, late]).await;
    assert_eq!(outcomes, [Updated, Unusable, PaidLate]);
    let reviews = MemoryReviews::new();
    assert!(store.fulfilments().is_empty());
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert_eq!(seen.unwrap().standing(), Standing::PaidLate);
    let listed = list(&*store, &reviews, 0).await.unwrap();
    assert!(listed.iter().any(|e| e.kind == "paid_late"), "{listed:?}");
}

// Finding 8: money that is no decimal of 0 or more (`-25.00`, `abc`) was applied: an Order
// Paid of -25.00, or of no amount at all, and a refund of -25.00. The reference: money is a
// decimal string. Such an event applies nothing and is listed `unusable` with the field.
#[tokio::test]
async fn money_that_is_no_decimal_of_zero_or_more_applies_nothing() {
    let paid = |event_id: &str, amount: &str| {
        item(
            event_id,
            "invoice.paid",
            100,
            &format!(
                r#"{{"invoice_id":"inv_1","order":{{"external_id":"o-1","amount":"{amount}","currency":"USD"}}}}"#
            ),
        )
    };
    let refund = item(
        "evt_r",
        "withdrawal.completed",
        100,
        r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_2","mode":"full","type":"refund","amount":"-25.00","currency":"USDT"}"#,
    );
    let (outcomes, store) =
        webhooks(&[paid("evt_n", "-25.00"), paid("evt_g", "abc"), refund]).await;
    assert_eq!(outcomes, [Unusable, Unusable, Unusable]);
    assert!(store.fulfilments().is_empty());
    assert!(store.invoice("inv_2").is_none(), "no refund recorded");
    // A genuine amount still ships.
    let (outcomes, _) = webhooks(&[paid("evt_p", "25.00")]).await;
    assert_eq!(outcomes, [Fulfilled]);
}

// Finding 4: inv_1 paid at 100 and shipped, refunded in full at 140 (the order shipped and was
// paid back), then the customer pays again at 150 (a new `invoice.paid`, Paymos' clock). The
// reference: a payment made after a full refund is a new payment, not returned by it, "shipped
// or named for a person". Its order shipped once already and never ships twice: it waits for a
// refund, listed, until a full refund completed at or after it settles it. Before:
// `already_final`, listed nowhere.
#[tokio::test]
async fn a_payment_after_the_full_refund_of_a_shipped_invoice_waits_for_a_refund() {
    let history = [
        invoice("evt_p", "paid", 100),
        full_refund("evt_r", 140),
        invoice("evt_again", "paid", 150),
    ];
    let (outcomes, store) = webhooks(&history).await;
    assert_eq!(outcomes, [Fulfilled, Updated, DuplicatePayment]);
    assert_eq!(store.fulfilments().len(), 1, "the order ships once");
    let reviews = MemoryReviews::new();
    let listed = list(&*store, &reviews, 0).await.unwrap();
    let line = listed.iter().find(|e| e.kind == "duplicate_payment");
    let line = line.unwrap_or_else(|| panic!("{listed:?}"));
    assert!(line.why.contains("refunded in full"), "{line:?}");
    assert!(line.action.contains("keep it"), "{line:?}");
    let by = ReleaseBy {
        actor: "ops",
        reason: Some("ship it again"),
        override_amount: true,
        project: None,
        order: None,
    };
    let effect = crate::money::effect::RecordFulfilment;
    let refused = crate::roads::release::release(&*store, "inv_1", None, &by, &effect, NOW_MS);
    assert!(
        !matches!(refused.await, Ok(Fulfilled)),
        "the order never ships twice"
    );
    assert_eq!(store.fulfilments().len(), 1);
    // A full refund Paymos completed at or after it settles it: nothing waits.
    let second = item(
        "evt_r2",
        "withdrawal.completed",
        160,
        r#"{"withdrawal_id":"wdr_2","invoice_id":"inv_1","mode":"full","type":"refund","amount":"10","currency":"USDT"}"#,
    );
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    assert_eq!(fulfil.apply(&second, NOW_MS).await.unwrap().1, Updated);
    assert!(list(&*store, &reviews, 0).await.unwrap().is_empty());
    assert_eq!(store.fulfilments().len(), 1);
}

// Finding 4, the order never shipped: the refund at 140 was delivered before the payment at 100
// it returned (nothing shipped), then the customer pays again at 150: a new payment, which
// ships once. Before: `already_final`, nothing shipped, listed nowhere.
#[tokio::test]
async fn a_payment_after_the_full_refund_of_an_unshipped_invoice_ships_once() {
    let history = [
        full_refund("evt_r", 140),
        invoice("evt_p", "paid", 100),
        invoice("evt_again", "paid", 150),
        invoice("evt_again_too", "paid_over", 151),
    ];
    let (outcomes, store) = webhooks(&history).await;
    assert_eq!(outcomes, [Updated, Refunded, Fulfilled, AlreadyFinal]);
    assert_eq!(store.fulfilments().len(), 1, "shipped once");
    let reviews = MemoryReviews::new();
    assert!(list(&*store, &reviews, 0).await.unwrap().is_empty());
}

// Found by the reference-only attack on `dev` (its F1): support's `mark-paid` shipped inv_1 at
// NOW (its word knows no payment time), a full refund completed after it, then the customer
// paid again, dated after both. The payment the person saw was made before their word: this
// one is new, and the order shipped already, so it waits for a refund. Before:
// `already_final`, listed nowhere (the delivery only dated the person's word).
#[tokio::test]
async fn a_payment_after_the_full_refund_of_an_order_a_person_shipped_waits_for_a_refund() {
    let now = NOW_MS / 1000;
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let shipped = fulfil.mark_paid("inv_1", order(), "support", NOW_MS).await;
    assert_eq!(shipped.unwrap(), Fulfilled);
    let refund = full_refund("evt_r", now + 100);
    assert_eq!(fulfil.apply(&refund, NOW_MS).await.unwrap().1, Updated);
    let again = invoice("evt_again", "paid", now + 200);
    assert_eq!(
        fulfil.apply(&again, NOW_MS).await.unwrap().1,
        DuplicatePayment
    );
    assert_eq!(store.fulfilments().len(), 1, "the order ships once");
    let reviews = MemoryReviews::new();
    let listed = list(&*store, &reviews, 0).await.unwrap();
    assert!(
        listed.iter().any(|e| e.kind == "duplicate_payment"),
        "{listed:?}"
    );
    // The payment the person saw, delivered late, dated before the refund: returned by it.
    let seen = invoice("evt_seen", "paid", now - 100);
    let seen = fulfil.apply(&seen, NOW_MS).await.unwrap().1;
    assert_ne!(seen, Fulfilled);
    assert_eq!(store.fulfilments().len(), 1);
}

// Found by the reference-only attack on `dev` (its F3): Paymos lists a completed full refund
// of inv_1 with no `completed_at`; a delayed `invoice.paid` (paid at 100) came through the
// reverse check. Completed, it completed no later than it was read: it returns every payment
// made before then, as the reconciliation already judged (REFUNDED). Before: `fulfilled`.
#[tokio::test]
async fn with_the_check_a_full_refund_paymos_gives_no_time_returns_what_was_paid_before_it() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    paymos.refund(
        "inv_1",
        Refund {
            completed_at: None,
            ..paymos_refund(0)
        },
    );
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let paid = invoice("evt_p", "paid", 100);
    assert_eq!(fulfil.apply(&paid, NOW_MS).await.unwrap().1, Refunded);
    assert!(store.fulfilments().is_empty());
}

// A late payment a person recorded undated, which Paymos dates at 30, after its only full
// refund (at 20): `reconcile --apply` dates it by Paymos, so that refund's delivery, when it
// comes, returns nothing and the payment waits `paid_late`. Only a full refund at Paymos
// completed at or after 30 keeps it undated (seed b3779d88 of the model).
#[tokio::test]
async fn reconcile_dates_a_late_payment_its_only_full_refund_came_before() {
    let (_, store) = webhooks(&[invoice("evt_x", "expired", 10)]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let late = fulfil.mark_paid("inv_1", order(), "support", NOW_MS).await;
    assert_eq!(late.unwrap(), PaidLate);
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", late_at_paymos("expired", Some(30)));
    paymos.refund("inv_1", paymos_refund(20));
    let range = (0, 2_000_000_000);
    crate::roads::reconcile::reconcile(&paymos, &fulfil, range, true, NOW_MS)
        .await
        .unwrap();
    assert_eq!(
        fulfil
            .apply(&full_refund("evt_r", 20), NOW_MS)
            .await
            .unwrap()
            .1,
        Updated
    );
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert_eq!(seen.unwrap().standing(), Standing::PaidLate);
}

// The reference-only attack of this stop (its F1, money-losing): with the reverse check on, a
// customer's second payment after the full refund of a shipped invoice was acknowledged as
// `already_final` and listed nowhere, where the same history without the check waits
// `duplicate_payment`: every road must obey the one rule. Paymos shows the invoice paid at 150
// (after its full refund at 140), as a plain payment or as a late one (`paid_late_at`). Where
// Paymos gave no time of the first payment, the repayment's delivery was taken for that
// payment's time (as a person's undated word is dated by its delivery): the record then said
// the shipped payment came after the refund. Before: `already_final`, the record's payment
// dated 150.
#[tokio::test]
async fn with_the_check_a_payment_after_the_full_refund_of_a_shipped_invoice_waits_for_a_refund() {
    for (first_at, late) in [
        (None, false),
        (None, true),
        (Some(100), false),
        (Some(100), true),
    ] {
        let store = Arc::new(MemoryResources::new());
        let paymos = Arc::new(MemoryPaymos::new());
        let fulfil =
            crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
        paymos.invoice("inv_1", at_paymos("paid", first_at));
        let first = fulfil.apply(&invoice("evt_p", "paid", 100), NOW_MS).await;
        assert_eq!(first.unwrap().1, Fulfilled);
        paymos.withdrawal("wdr_1", refund_at_paymos(140));
        paymos.refund("inv_1", paymos_refund(140));
        let refund = full_refund("evt_r", 140);
        assert_eq!(fulfil.apply(&refund, NOW_MS).await.unwrap().1, Updated);
        paymos.invoice(
            "inv_1",
            ConfirmedInvoice {
                paid_late: late,
                ..at_paymos("paid", Some(150))
            },
        );
        // The delivery says so too where Paymos does (`paid_late_at`).
        let data = if late {
            r#"{"invoice_id":"inv_1","paid_late_at":150,"order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#
        } else {
            r#"{"invoice_id":"inv_1","order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#
        };
        let again = item("evt_again", "invoice.paid", 150, data);
        let again = fulfil.apply(&again, NOW_MS).await;
        assert_eq!(
            again.unwrap().1,
            DuplicatePayment,
            "{first_at:?} late: {late}"
        );
        assert_eq!(store.fulfilments().len(), 1, "the order ships once");
        let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
        assert!(
            listed.iter().any(|e| e.kind == "duplicate_payment"),
            "late: {late}: {listed:?}"
        );
    }
}

// This stop's attack (its F5): a forged payment naming order o-forged waited unconfirmed;
// the genuine payment then shipped Paymos' order o-1. `exceptions` lists nothing (the invoice
// shipped), but `recheck` answered "unconfirmed (the event names order o-forged …)" on every
// run, so its exit code said forever that something waits. It is settled: not reported.
#[tokio::test]
async fn a_recheck_reports_nothing_of_a_forgery_whose_invoice_shipped_since() {
    let store = Arc::new(MemoryResources::new());
    let reviews = MemoryReviews::new();
    let forged = body(
        "evt_f",
        "invoice.paid",
        100,
        r#"{"invoice_id":"inv_1","order":{"external_id":"o-forged","amount":"10","currency":"USD"}}"#,
    );
    let mut waited = super::paymos_word::waited(&WorkItem {
        event_id: "evt_f".into(),
        environment: Some(Environment::Live),
        body: forged.into_bytes(),
        received_at_ms: None,
    });
    waited.received_at_ms = NOW_MS;
    reviews.processed(waited, Unconfirmed, "the event names order o-forged", 5);
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    assert_eq!(
        rechecked.len(),
        1,
        "before anything shipped it waits: {rechecked:?}"
    );
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let genuine = fulfil.apply(&invoice("evt_p", "paid", 100), NOW_MS).await;
    assert_eq!(genuine.unwrap().1, Fulfilled);
    assert!(list(&*store, &reviews, 0).await.unwrap().is_empty());
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    assert!(rechecked.is_empty(), "{rechecked:?}");
    assert_eq!(store.fulfilments().len(), 1);
}

/// A confirmation of pcd_1 as Paymos sends it in the official partial vectors: no `is_final`,
/// payer, net or project (`data`: what it does carry).
fn partial_deposit(event_id: &str, data: &str) -> WorkItem {
    item(event_id, "payment_channel.deposit.confirmed", 100, data)
}

// This stop's reference-only attack (its F2 and F4): a `deposit.confirmed` shaped as the
// official `ton_channel_deposit_raw` vector (no `is_final`, payer, net or project) was
// `updated`, never credited nor listed, with or without the check; one naming no payer was
// `unusable` with no way out. Without the check it now waits `unconfirmed`, listed with
// `recheck` as its way out; with the check, and by that recheck, Paymos' deposit credits its
// own payer, once.
#[tokio::test]
async fn a_confirmation_that_leaves_out_what_it_credits_is_credited_by_paymos_word() {
    let partial = partial_deposit(
        "evt_d",
        r#"{"id":"pcd_1","status":"confirmed","gross":"10.50"}"#,
    );
    let no_payer = partial_deposit(
        "evt_n",
        r#"{"id":"pcd_2","is_final":true,"net":"9.00","currency":"USDT"}"#,
    );
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.deposit("pcd_1", deposit_at_paymos("prj_a"));
    paymos.deposit("pcd_2", deposit_at_paymos("prj_a"));
    // Without the check: listed, with its way out; nothing credited on its word.
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let reviews = MemoryReviews::new();
    for work in [&partial, &no_payer] {
        assert_eq!(fulfil.apply(work, NOW_MS).await.unwrap().1, Unconfirmed);
        let (outcome, why) = store.outcome(&work.event_id).unwrap();
        reviews.processed(waited(work), outcome, &why.unwrap_or_default(), 1);
    }
    assert!(store.balances().is_empty());
    let listed = list(&*store, &reviews, 0).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed.iter().all(|e| e.action.contains("recheck")),
        "{listed:?}"
    );
    // Once the API is configured, `recheck` credits Paymos' deposits, once each.
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    let outcomes: Vec<_> = rechecked.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["credited", "credited"], "{rechecked:?}");
    assert_eq!(store.balances().len(), 1, "{:?}", store.balances());
    // With the check: the delivery itself is credited as Paymos has it.
    let store = Arc::new(MemoryResources::new());
    let checked = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    for work in [&partial, &no_payer] {
        assert_eq!(checked.apply(work, NOW_MS).await.unwrap().1, Credited);
    }
    assert_eq!(
        checked.apply(&partial, NOW_MS).await.unwrap().1,
        AlreadyProcessed
    );
}

// This stop's attack (its F3): a confirmation crediting 99.00 where Paymos' deposit nets 9.00
// waited unconfirmed, rightly; `recheck` then "refuted" it, and Paymos' own deposit was never
// credited. A person asking Paymos is answered with Paymos' deposit: it credits 9.00, once.
#[tokio::test]
async fn a_recheck_credits_paymos_deposit_whatever_the_event_said_of_it() {
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.deposit("pcd_1", deposit_at_paymos("prj_a"));
    let store = Arc::new(MemoryResources::new());
    let checked = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let wrong = partial_deposit(
        "evt_w",
        r#"{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c-1","net":"99.00","currency":"USDT"}"#,
    );
    assert_eq!(checked.apply(&wrong, NOW_MS).await.unwrap().1, Unconfirmed);
    assert!(store.balances().is_empty());
    let reviews = MemoryReviews::new();
    let (outcome, why) = store.outcome("evt_w").unwrap();
    reviews.processed(waited(&wrong), outcome, &why.unwrap_or_default(), 1);
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    assert_eq!(rechecked[0].outcome.as_str(), "credited", "{rechecked:?}");
    let balances = store.balances();
    assert_eq!(balances.len(), 1, "{balances:?}");
}

/// Paymos' completed refund of inv_1 at `completed_at`, of `mode` (none: Paymos did not say).
fn paymos_refund_of(mode: Option<RefundMode>, completed_at: u64) -> Refund {
    Refund {
        mode,
        ..paymos_refund(completed_at)
    }
}

// A refund of unknown mode may have been `full`: with the reverse check, Paymos' refunds of the
// invoice are recorded before the payment it confirms, one of no mode too. A payment Paymos
// dates at or before it waits `held` for a person; after it, or after an `overpayment` refund,
// it ships. Before: `fulfilled` at 100 (the refund of no mode was not recorded).
#[tokio::test]
async fn with_the_check_a_paymos_refund_of_no_mode_holds_a_payment_made_before_it() {
    for (mode, paid_at, outcome) in [
        (None, 100, Held),
        (None, 150, Held),
        (None, 200, Fulfilled),
        (Some(RefundMode::Overpayment), 100, Fulfilled),
    ] {
        let store = Arc::new(MemoryResources::new());
        let paymos = Arc::new(MemoryPaymos::new());
        paymos.invoice("inv_1", at_paymos("paid", Some(paid_at)));
        paymos.refund("inv_1", paymos_refund_of(mode, 150));
        let fulfil =
            crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
        let got = fulfil
            .apply(&invoice("evt_p", "paid", paid_at), NOW_MS)
            .await
            .unwrap()
            .1;
        assert_eq!(got, outcome, "{mode:?} {paid_at}");
        assert_eq!(store.fulfilments().len(), usize::from(outcome == Fulfilled));
        let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
        assert_eq!(listed.len(), usize::from(outcome == Held), "{listed:?}");
    }
}

// `reconcile --apply` of a payment Paymos has, dated before a refund of no mode: never REFUNDED,
// never shipped in silence; it waits `held` for a person.
#[tokio::test]
async fn reconcile_holds_a_payment_made_before_a_paymos_refund_of_no_mode() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    paymos.refund("inv_1", paymos_refund_of(None, 150));
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert!(report.refunded.is_empty(), "{report:?}");
    assert!(store.fulfilments().is_empty(), "{report:?}");
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|e| (e.kind, e.resource_id.as_deref()))
            .collect::<Vec<_>>(),
        [("held", Some("inv_1"))],
        "{listed:?}"
    );
    assert!(listed[0].why.contains("refund of unknown mode, wdr_1"));
}

// With the reverse check, a refund delivery that leaves out its mode takes Paymos' (the fact is
// Paymos' where Paymos was asked): `full` settles the payment made before it as refunded,
// `overpayment` leaves it to ship. Before: recorded with no mode either way (then, held).
#[tokio::test]
async fn with_the_check_a_refund_delivered_without_mode_takes_paymos_mode() {
    for (full, outcome) in [(true, Refunded), (false, Fulfilled)] {
        let store = Arc::new(MemoryResources::new());
        let paymos = Arc::new(MemoryPaymos::new());
        paymos.invoice("inv_1", at_paymos("paid", Some(100)));
        paymos.withdrawal(
            "wdr_1",
            ConfirmedWithdrawal {
                full: Some(full),
                ..refund_at_paymos(150)
            },
        );
        let fulfil =
            crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
        let without_mode = item(
            "evt_r",
            "withdrawal.completed",
            150,
            r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_1","type":"refund","status":"completed","amount":"4.00","currency":"USDT"}"#,
        );
        let mut outcomes = Vec::new();
        for work in [without_mode, invoice("evt_p", "paid", 100)] {
            outcomes.push(fulfil.apply(&work, NOW_MS).await.unwrap().1);
        }
        assert_eq!(outcomes, [Updated, outcome], "full: {full}");
        let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
        let mode = seen.unwrap().refunds[0].mode;
        assert_eq!(
            mode,
            Some(if full {
                RefundMode::Full
            } else {
                RefundMode::Overpayment
            })
        );
    }
}

/// `mark-paid` of inv_1 with the API: asked of Paymos first, as `paymos` has it.
async fn mark_paid_asking(
    store: &Arc<MemoryResources>,
    paymos: &MemoryPaymos,
    given: OrderRef,
) -> Result<Applied, crate::roads::reconcile::AskedFirst> {
    let fulfil = crate::tests::one_shop(Arc::clone(store));
    crate::roads::reconcile::as_paymos_has_it(paymos, &fulfil, ("inv_1", &given), ("alice", NOW_MS))
        .await
}

// Attack F3 of the last turn: `mark-paid` never asked Paymos, even with the API at hand, so a
// person's undated word on an invoice refunded in full before waited `held`, and one on an
// invoice Paymos has unpaid shipped. With the API it is applied as Paymos has it: its payment
// time (after the refund: it ships), its order (a person naming another is refused), its
// status (unpaid, or unknown to Paymos: nothing ships).
#[tokio::test]
async fn mark_paid_with_the_api_is_applied_as_paymos_has_it() {
    // Paid at 30 by Paymos' clock, after the full refund at 20 of an earlier partial payment.
    let (_, store) = webhooks(&partial_then_refunded()).await;
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    paymos.refund("inv_1", paymos_refund(20));
    assert_eq!(
        mark_paid_asking(&store, &paymos, OrderRef::none()).await,
        Ok(Fulfilled)
    );
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    assert_eq!(store.invoice("inv_1").unwrap().payment_at, Some(30));
    // Once.
    assert_eq!(
        mark_paid_asking(&store, &paymos, order()).await,
        Ok(AlreadyFinal)
    );
    assert_eq!(store.fulfilments().len(), 1);

    // Refunded in full at Paymos after it was paid: nothing ships.
    let store = Arc::new(MemoryResources::new());
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    paymos.refund("inv_1", paymos_refund(40));
    assert_eq!(
        mark_paid_asking(&store, &paymos, OrderRef::none()).await,
        Ok(Refunded)
    );
    assert_eq!(store.fulfilments(), []);
}

// The model's finding: a person's undated word shipped inv_1; asked later, Paymos has it paid
// at 30 and refunded in full at 40. The answer was `refunded`, but the record kept the payment
// undated, so a full refund delivered later that completed at 20 (before the payment: it
// returned an earlier one) was judged by no time, and the invoice read as paid back. Paymos'
// time, once read, is the payment's: the refund at 20 returns nothing of it.
#[tokio::test]
async fn mark_paid_with_the_api_dates_a_shipped_payment_paymos_refunded_after_it() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    fulfil
        .mark_paid("inv_1", order(), "support", NOW_MS)
        .await
        .expect("memory");
    assert_eq!(store.fulfilments().len(), 1);
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    paymos.refund("inv_1", paymos_refund(40));
    assert_eq!(
        mark_paid_asking(&store, &paymos, OrderRef::none()).await,
        Ok(Refunded)
    );
    assert_eq!(store.invoice("inv_1").unwrap().payment_at, Some(30));
    fulfil
        .apply(&full_refund("evt_r20", 20), NOW_MS)
        .await
        .expect("memory");
    let seen = store.invoice("inv_1").unwrap().seen();
    assert!(!seen.refunded_in_full(), "{seen:?}");
    assert_eq!(store.fulfilments().len(), 1);
}

#[tokio::test]
async fn mark_paid_with_the_api_ships_nothing_paymos_does_not_have_paid_as_said() {
    use crate::roads::reconcile::AskedFirst;
    let store = Arc::new(MemoryResources::new());
    let paymos = MemoryPaymos::new();
    // Unknown to Paymos with this key.
    assert!(matches!(
        mark_paid_asking(&store, &paymos, OrderRef::none()).await,
        Err(AskedFirst::Unknown(_))
    ));
    // Unpaid at Paymos.
    paymos.invoice("inv_1", at_paymos("awaiting_payment", None));
    let refused = mark_paid_asking(&store, &paymos, order()).await;
    assert!(
        matches!(&refused, Err(AskedFirst::NotPaid(_, s)) if s == "awaiting_payment"),
        "{refused:?}"
    );
    // Paid, but the person names another order, or another price.
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    let other = OrderRef {
        external_id: Some("o-2".into()),
        ..order()
    };
    let refused = mark_paid_asking(&store, &paymos, other).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("you named order o-2, Paymos has order o-1"),
        "{refused}"
    );
    let dearer = OrderRef {
        amount: Amount::parse("12"),
        ..order()
    };
    assert!(matches!(
        mark_paid_asking(&store, &paymos, dearer).await,
        Err(AskedFirst::Contradicts(_))
    ));
    assert_eq!(store.fulfilments(), []);
    assert!(store.invoice("inv_1").is_none(), "nothing written");
}

// A missed mutant of `correct` (its guard that only a record closed unpaid takes Paymos' order):
// a person's word shipped order o-B; the genuine payment of o-1, which Paymos confirms, arrives
// after. Nothing more ships and nothing on the record moves: it waits as a conflict for a
// person (Paymos' order was paid, another shipped), as a webhook without the check would.
#[tokio::test]
async fn a_confirmed_payment_of_another_order_than_a_persons_shipped_one_waits_as_a_conflict() {
    let store = Arc::new(MemoryResources::new());
    let named_b = OrderRef {
        external_id: Some("o-B".into()),
        ..OrderRef::none()
    };
    let by_hand = crate::tests::one_shop(Arc::clone(&store))
        .mark_paid("inv_1", named_b, "support", NOW_MS)
        .await;
    assert_eq!(by_hand, Ok(Fulfilled));
    let paymos = Arc::new(MemoryPaymos::new());
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    let checked = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&paymos));
    let before = store.invoice("inv_1").unwrap();
    let (_, applied) = checked
        .apply(&invoice("evt_p", "paid", 30), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, OrderConflict);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-B".into()))]);
    assert_eq!(store.invoice("inv_1").unwrap().order, before.order);
}

// A missed mutant of `as_paymos_has_it` (its project filter): on a stack of one project, an
// invoice Paymos has in another project ships nothing there; one in its own project ships.
#[tokio::test]
async fn mark_paid_with_the_api_ships_only_an_invoice_of_a_project_the_stack_applies() {
    use crate::roads::reconcile::{AskedFirst, as_paymos_has_it};
    for (project, shipped) in [("prj_b", false), ("prj_a", true)] {
        let store = Arc::new(MemoryResources::new());
        let fulfil = crate::tests::one_shop(Arc::clone(&store))
            .for_projects(Projects::only(vec!["prj_a".into()]));
        let paymos = MemoryPaymos::new();
        paymos.invoice(
            "inv_1",
            ConfirmedInvoice {
                project_id: Some(project.into()),
                ..at_paymos("paid", Some(30))
            },
        );
        let applied = as_paymos_has_it(
            &paymos,
            &fulfil,
            ("inv_1", &OrderRef::none()),
            ("alice", NOW_MS),
        )
        .await;
        if shipped {
            assert_eq!(applied, Ok(Fulfilled));
            assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
        } else {
            assert!(
                matches!(&applied, Err(AskedFirst::OtherProject(_, p)) if p == "prj_b"),
                "{applied:?}"
            );
            assert_eq!(store.fulfilments(), []);
        }
    }
}

// A missed mutant of `contradicts` (the project's comparison): a person naming the project
// Paymos has the invoice in is heard; one naming another is refused, nothing written.
#[tokio::test]
async fn mark_paid_with_the_api_refuses_a_project_other_than_paymos() {
    use crate::roads::reconcile::{AskedFirst, as_paymos_has_it};
    for (named, heard) in [("prj_b", false), ("prj_a", true)] {
        let store = Arc::new(MemoryResources::new());
        let fulfil = crate::tests::one_shop(Arc::clone(&store));
        let paymos = MemoryPaymos::new();
        paymos.invoice(
            "inv_1",
            ConfirmedInvoice {
                project_id: Some("prj_a".into()),
                ..at_paymos("paid", Some(30))
            },
        );
        let given = OrderRef {
            project: Some(named.into()),
            ..OrderRef::none()
        };
        let applied =
            as_paymos_has_it(&paymos, &fulfil, ("inv_1", &given), ("alice", NOW_MS)).await;
        if heard {
            assert_eq!(applied, Ok(Fulfilled));
        } else {
            assert!(
                matches!(&applied, Err(AskedFirst::Contradicts(why)) if why.contains("you named project prj_b, Paymos has prj_a")),
                "{applied:?}"
            );
            assert!(store.invoice("inv_1").is_none(), "nothing written");
        }
    }
}

// The last attack on `dev` (its F6): `mark-paid --amount 10.00` was refused against Paymos'
// `10`, amounts compared as text. Money is compared by value, as the registered order's guard
// compares it: the same price written otherwise is no contradiction.
#[tokio::test]
async fn mark_paid_with_the_api_compares_the_price_by_value() {
    let store = Arc::new(MemoryResources::new());
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    let written_otherwise = OrderRef {
        amount: Amount::parse("10.00"),
        ..order()
    };
    assert_eq!(
        mark_paid_asking(&store, &paymos, written_otherwise).await,
        Ok(Fulfilled)
    );
}

/// inv_1's payment at 30, priced 9 against its order's registered 10 USD: held for a person,
/// on a stack of `projects`, its event naming `project`.
async fn held_for_its_price(
    projects: &str,
    project: Option<&str>,
) -> (Arc<MemoryResources>, Fulfil<Arc<MemoryResources>>) {
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-1", &Amount::parse("10").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse(projects));
    let named = project.map_or(String::new(), |p| format!(r#","project_id":"{p}""#));
    let paid = item(
        "evt_p",
        "invoice.paid",
        30,
        &format!(
            r#"{{"invoice_id":"inv_1"{named},"order":{{"external_id":"o-1","amount":"9","currency":"USD"}}}}"#
        ),
    );
    assert_eq!(fulfil.apply(&paid, NOW_MS).await.unwrap().1, Held);
    (store, fulfil)
}

// The last attack's A1: `release` with the API asked Paymos only for refunds, so it shipped a
// held payment Paymos does not know (404), has unpaid, has in a project the stack does not
// apply, or in another project than the person named, or for another order. Each must ship
// nothing, in words that say what Paymos has; what Paymos has paid as recorded ships once.
#[tokio::test]
async fn a_release_with_the_api_ships_only_what_paymos_has_paid_as_recorded() {
    let alice = |project| ReleaseBy {
        actor: "alice",
        reason: Some("price agreed by email"),
        override_amount: true,
        project,
        order: None,
    };
    let paid_in = |project: Option<&str>, order: &str, status: &str| ConfirmedInvoice {
        project_id: project.map(str::to_owned),
        order_id: Some(order.into()),
        ..at_paymos(status, Some(30))
    };
    let refused: [(Option<ConfirmedInvoice>, Option<&str>, &str); 5] = [
        (None, None, "Paymos does not know inv_1"),
        (
            Some(paid_in(Some("prj_a"), "o-1", "awaiting_payment")),
            None,
            "Paymos has inv_1 awaiting_payment",
        ),
        (
            Some(paid_in(Some("prj_c"), "o-1", "paid")),
            None,
            "project prj_c, which this stack does not apply",
        ),
        (
            Some(paid_in(Some("prj_a"), "o-1", "paid")),
            Some("prj_b"),
            "you named project prj_b, Paymos has prj_a",
        ),
        (
            Some(paid_in(Some("prj_a"), "o-2", "paid")),
            None,
            "Paymos has order o-2",
        ),
    ];
    for (at, project, why) in refused {
        let (store, fulfil) = held_for_its_price("prj_a,prj_b", Some("prj_a")).await;
        let paymos = MemoryPaymos::new();
        if let Some(at) = at {
            paymos.invoice("inv_1", at);
        }
        let released = fulfil
            .release_asking(
                &MemoryReviews::new(),
                &paymos,
                "inv_1",
                &alice(project),
                NOW_MS,
            )
            .await;
        assert!(
            matches!(&released, Err(crate::roads::release::ReleaseError::NotReleasable(w)) if w.contains(why) && w.contains("nothing released")),
            "{why}: {released:?}"
        );
        assert_eq!(store.fulfilments(), [], "{why}");
        assert!(store.invoice("inv_1").unwrap().held, "{why}");
    }
    // Paid as recorded: it ships, once.
    let (store, fulfil) = held_for_its_price("prj_a,prj_b", Some("prj_a")).await;
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", paid_in(Some("prj_a"), "o-1", "paid"));
    let reviews = MemoryReviews::new();
    for expected in [Ok(Fulfilled), Ok(AlreadyFinal)] {
        let released = fulfil
            .release_asking(&reviews, &paymos, "inv_1", &alice(None), NOW_MS)
            .await;
        assert!(
            released == expected
                || matches!(
                    &released,
                    Err(crate::roads::release::ReleaseError::NotReleasable(_))
                ) && expected == Ok(AlreadyFinal),
            "{released:?}"
        );
    }
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// A mutant no fast test caught: `release` with the API, naming no project, of a payment held
// because its invoice's events named two projects ships under the project Paymos names (the
// record takes Paymos' word); without it the release refused "named two projects".
#[tokio::test]
async fn a_release_with_the_api_settles_two_projects_by_paymos_project() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let event = |id: &str, ty: &str, project: &str| {
        item(
            id,
            ty,
            30,
            &format!(
                r#"{{"invoice_id":"inv_1","project_id":"{project}","order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
            ),
        )
    };
    fulfil
        .apply(&event("evt_o", "invoice.awaiting_payment", "prj_a"), NOW_MS)
        .await
        .unwrap();
    let paid = event("evt_p", "invoice.paid", "prj_b");
    assert_eq!(fulfil.apply(&paid, NOW_MS).await.unwrap().1, Held);
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            project_id: Some("prj_b".into()),
            ..at_paymos("paid", Some(30))
        },
    );
    let alice = ReleaseBy {
        actor: "alice",
        reason: Some("checked"),
        override_amount: false,
        project: None,
        order: None,
    };
    let reviews = MemoryReviews::new();
    let released = fulfil.release_asking(&reviews, &paymos, "inv_1", &alice, NOW_MS);
    assert_eq!(released.await, Ok(Fulfilled));
    let record = store.invoice("inv_1").unwrap();
    assert_eq!(record.order.project.as_deref(), Some("prj_b"), "{record:?}");
}

// The last attack's A2: a full refund Paymos shows was learned and not recorded. `mark-paid`
// with the API answered `refunded` and wrote nothing, `reconcile --apply` reported REFUNDED and
// wrote nothing; a person's `mark-paid` without the API then shipped the refunded order. The
// road that learns it now records Paymos' refund and payment, each dated by Paymos: the
// person's later word finds the payment returned, and nothing ships.
#[tokio::test]
async fn a_full_refund_learned_from_paymos_is_recorded_with_its_payment() {
    for road in ["mark-paid with the API", "reconcile --apply"] {
        let store = Arc::new(MemoryResources::new());
        let fulfil = crate::tests::one_shop(Arc::clone(&store));
        let paymos = MemoryPaymos::new();
        paymos.invoice("inv_1", at_paymos("paid", Some(30)));
        paymos.refund("inv_1", paymos_refund(40));
        if road == "reconcile --apply" {
            let report = reconcile_all(&paymos, &fulfil, true).await;
            assert_eq!(report.refunded.len(), 1, "{road}");
        } else {
            assert_eq!(
                mark_paid_asking(&store, &paymos, OrderRef::none()).await,
                Ok(Refunded),
                "{road}"
            );
        }
        // A person's word without the API, later: the payment was returned, nothing ships.
        let later = fulfil.mark_paid("inv_1", order(), "bob", NOW_MS).await;
        assert_eq!(store.fulfilments(), [], "{road}");
        assert!(
            matches!(later, Ok(Refunded | AlreadyFinal)),
            "{road}: {later:?}"
        );
        let recorded = store.invoice("inv_1").expect(road);
        assert_eq!(recorded.payment_at, Some(30), "{road}");
        assert_eq!(recorded.refunds.len(), 1, "{road}");
        let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
        assert_eq!(listed, [], "{road}: {listed:?}");
        // And a second run of the road says it again, writing nothing new.
        if road == "reconcile --apply" {
            let again = reconcile_all(&paymos, &fulfil, true).await;
            assert_eq!(again.refunded.len(), 1, "{road}");
        }
        assert_eq!(store.fulfilments(), [], "{road}");
    }
}

// The model's shape of the same: paid after it closed, refunded in full after that payment,
// the refund's webhook delivered. `reconcile --apply` records the late payment, which the
// refund returned: a person's later word ships nothing and leaves nothing waiting.
#[tokio::test]
async fn a_late_payment_paymos_refunded_in_full_is_recorded_as_returned() {
    let (_, store) = webhooks(&[full_refund("evt_r", 40)]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", late_at_paymos("expired", Some(30)));
    paymos.refund("inv_1", paymos_refund(40));
    let report = reconcile_all(&paymos, &fulfil, true).await;
    assert_eq!(report.refunded.len(), 1, "{report:?}");
    assert_eq!(store.invoice("inv_1").unwrap().payment_at, Some(30));
    // A person's word later ships nothing, and nothing waits: the refund returned it.
    let later = fulfil.mark_paid("inv_1", order(), "bob", NOW_MS).await;
    assert!(later.is_ok(), "{later:?}");
    assert_eq!(store.fulfilments(), []);
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert_eq!(seen.unwrap().standing(), Standing::Refunded);
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(listed, [], "{listed:?}");
}

// Found by the F1 helper while moving the emulator suites to a stack of one project: on a stack
// that lists its project, a late payment `reconcile --apply` recorded was reported PAID_LATE
// again by every later run (and applied again), since Paymos' invoice names the home project
// and the record, keyed as the home project's, names none: the orders "differed".
#[tokio::test]
async fn a_late_payment_reconcile_recorded_on_a_stack_of_its_project_is_reported_once() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            project_id: crate::tests::one_project().ids().first().cloned(),
            ..late_at_paymos("expired", Some(30))
        },
    );
    let first = reconcile_all(&paymos, &fulfil, true).await;
    assert_eq!(first.paid_late.len(), 1, "{first:?}");
    let again = reconcile_all(&paymos, &fulfil, true).await;
    assert_eq!(
        (again.paid_late.len(), again.late_recorded.len()),
        (0, 1),
        "{again:?}"
    );
}

// The last attack's A4: on a stack without the reverse check, a payment event naming no
// project shipped under the home project what Paymos has in a project the stack does not
// apply, and `reconcile` reported nothing (the invoice was paid at Paymos, so not UNKNOWN,
// and another project's, so not compared). It is an order shipped otherwise than Paymos'
// invoice says: SHIPPED OTHERWISE, for a person.
#[tokio::test]
async fn reconcile_reports_an_order_shipped_for_an_invoice_of_a_project_the_stack_does_not_apply() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a"));
    assert_eq!(
        fulfil
            .apply(&invoice("evt_p", "paid", 30), NOW_MS)
            .await
            .unwrap()
            .1,
        Fulfilled
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            project_id: Some("prj_c".into()),
            ..at_paymos("paid", Some(30))
        },
    );
    let report = reconcile_all(&paymos, &fulfil, false).await;
    assert!(!report.clean(), "{report:?}");
    let [found] = report.shipped_otherwise.as_slice() else {
        panic!("{report:?}");
    };
    assert_eq!(found.paid.invoice_id, "inv_1");
    assert_eq!(found.paid.project.as_deref(), Some("prj_c"));
    assert_eq!(found.shipped_order_id.as_deref(), Some("o-1"));
    // `--apply` ships nothing more.
    let _ = reconcile_all(&paymos, &fulfil, true).await;
    assert_eq!(store.fulfilments().len(), 1);
}

// The model's shape of the same, after A2: a person's undated word after a full refund on
// record waits `after_refund`; Paymos has the payment at 130 and a second full refund at 140
// that returned it. `reconcile --apply` gives the word Paymos' time and records that refund:
// refunded, nothing waits, nothing ships (before: it kept waiting, the refund unrecorded).
#[tokio::test]
async fn a_persons_undated_word_paymos_refunded_after_is_recorded_as_returned() {
    let (_, store) = webhooks(&[full_refund("evt_r", 120)]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    assert_eq!(
        fulfil.mark_paid("inv_1", order(), "bob", NOW_MS).await,
        Ok(Held)
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(130)));
    paymos.refund("inv_1", paymos_refund(120));
    paymos.refund(
        "inv_1",
        Refund {
            withdrawal_id: "wdr_2".into(),
            ..paymos_refund(140)
        },
    );
    let report = reconcile_all(&paymos, &fulfil, true).await;
    assert_eq!(report.refunded.len(), 1, "{report:?}");
    assert_eq!(store.fulfilments(), []);
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert_eq!(seen.unwrap().standing(), Standing::Refunded);
    let listed = list(&*store, &MemoryReviews::new(), 0).await.unwrap();
    assert_eq!(listed, [], "{listed:?}");
}

// Paymos' invoice naming no project (`project_id: ""`, which the adapter reads as none) was
// taken as the home project's by `mark-paid` with the API: on a stack of several projects it
// shipped the home project's order on a guess, and a person naming the project was refused
// as contradicting Paymos. Where Paymos names none, the person's --project decides, and
// without one nothing ships (exit 2: name it).
#[tokio::test]
async fn mark_paid_with_the_api_asks_the_person_for_a_project_paymos_does_not_name() {
    use crate::roads::reconcile::{AskedFirst, as_paymos_has_it};
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    let asked = |project: Option<&str>| OrderRef {
        project: project.map(str::to_owned),
        ..OrderRef::none()
    };
    let refused =
        as_paymos_has_it(&paymos, &fulfil, ("inv_1", &asked(None)), ("alice", NOW_MS)).await;
    assert!(
        matches!(&refused, Err(AskedFirst::ProjectUnnamed(_))),
        "{refused:?}"
    );
    assert_eq!(store.fulfilments(), []);
    assert!(store.invoice("inv_1").is_none(), "nothing written");
    let named = as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_1", &asked(Some("prj_b"))),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(named, Ok(Fulfilled));
    assert_eq!(claims(&store), ["order_paid#prj_b#o-1"]);
}

// The same guess on the reconciliation's road: on a stack of several projects, a paid invoice
// whose Paymos record names no project was applied by `--apply` as the home project's. It is
// named for a person (UNREADABLE: Paymos' answer lacks what the run needs), never applied.
#[tokio::test]
async fn reconcile_applies_nothing_of_an_invoice_paymos_names_no_project_for_on_several() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    let report = reconcile_all(&paymos, &fulfil, true).await;
    assert_eq!(store.fulfilments(), [], "{report:?}");
    assert!(report.missing.is_empty(), "{report:?}");
    let [named] = report.unreadable.as_slice() else {
        panic!("{report:?}");
    };
    assert_eq!(named.about, "inv_1");
    assert!(named.why.contains("names no project"), "{named:?}");
    assert!(!report.clean());
    // One project: Paymos' invoice is the stack's, as before.
    let one = crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a"));
    let report = reconcile_all(&paymos, &one, true).await;
    assert_eq!(
        report.applied.get("inv_1"),
        Some(&Ok(Fulfilled)),
        "{report:?}"
    );
}

// Missed mutants of `holds_payment`: a payment the record holds otherwise than reopenable (a
// person's undated word held for its price, no refund here) is left as it was when Paymos
// shows it refunded in full: dated only where a refund recorded here returns it (rule 8), its
// refunds read, not recorded, by the run; nothing ships.
#[tokio::test]
async fn reconcile_leaves_a_held_undated_word_paymos_refunded_as_it_was() {
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-1", &Amount::parse("12").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    assert_eq!(
        fulfil.mark_paid("inv_1", order(), "bob", NOW_MS).await,
        Ok(Held)
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    paymos.refund("inv_1", paymos_refund(40));
    let report = reconcile_all(&paymos, &fulfil, true).await;
    assert_eq!(report.refunded.len(), 1, "{report:?}");
    let kept = store.invoice("inv_1").unwrap();
    assert_eq!((kept.payment_at, kept.refunds.len()), (None, 0), "{kept:?}");
    assert!(kept.held);
    assert_eq!(store.fulfilments(), []);
}

// A missed mutant of `as_paymos_has_it` (`> 1` → `>= 1`): on a stack of one project, Paymos'
// invoice naming no project is that project's, as before: it ships with no project named.
#[tokio::test]
async fn mark_paid_with_the_api_on_one_project_takes_an_unnamed_invoice_as_its_own() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a"));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(30)));
    let shipped = crate::roads::reconcile::as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_1", &OrderRef::none()),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(shipped, Ok(Fulfilled));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Attack (finding 2): Paymos has inv_1 paid but its order empty ("treat an empty one as
// unknown": not known yet, not absent). `mark-paid --order-id o-1` with the API, the way out
// `exceptions` lists for it (`order_unknown`), was refused as contradicting Paymos ("Paymos has
// order none"), and every other road refused it too: a confirmed payment never shipped. Where
// Paymos names no order, the person's names it, as a person's project does where Paymos names
// none on a stack of several; Paymos' status, price and time still decide.
#[tokio::test]
async fn mark_paid_with_the_api_names_the_order_paymos_leaves_empty() {
    let store = Arc::new(MemoryResources::new());
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            order_id: Some(String::new()),
            ..at_paymos("paid", Some(30))
        },
    );
    assert_eq!(
        mark_paid_asking(&store, &paymos, OrderRef::none()).await,
        Ok(OrderUnknown)
    );
    assert_eq!(
        mark_paid_asking(&store, &paymos, order()).await,
        Ok(Fulfilled)
    );
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Attack F1: without the check, a leaked secret signs a `full` refund of inv_1 completing at
// 150; the genuine payment at 100 is then settled as refunded, on the forged refund's word.
// Paymos has the invoice paid at 100 and lists no refund of it: `reconcile --apply` (and
// `mark-paid` with the API, the same road) applies Paymos' word, the payment ships once, and
// the next run is clean. Before: `MISSING … → already_final` on every run, nothing shipped,
// nothing listed.
#[tokio::test]
async fn a_refund_paymos_does_not_list_gives_way_to_the_payment_paymos_has() {
    let forged = item(
        "evt_r",
        "withdrawal.completed",
        150,
        r#"{"withdrawal_id":"wdr_9","invoice_id":"inv_1","mode":"full","type":"refund","amount":"10","currency":"USDT","completed_at":150}"#,
    );
    let (outcomes, store) = webhooks(&[forged, invoice("evt_p", "paid", 100)]).await;
    assert_eq!(outcomes, [Updated, Refunded]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    // `release` with the API names the way out (before: "refunded in full: nothing to
    // release", though Paymos lists no refund).
    let alice = ReleaseBy {
        actor: "alice",
        reason: Some("paid, says Paymos"),
        override_amount: false,
        project: None,
        order: None,
    };
    let released = fulfil
        .release_asking(&MemoryReviews::new(), &paymos, "inv_1", &alice, NOW_MS)
        .await;
    assert!(
        matches!(&released, Err(crate::roads::release::ReleaseError::NotReleasable(why)) if why.contains("wdr_9, a refund Paymos does not list") && why.contains("mark-paid inv_1")),
        "{released:?}"
    );
    assert!(store.fulfilments().is_empty());
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert_eq!(
        report.applied.get("inv_1"),
        Some(&Ok(Fulfilled)),
        "{report:?}"
    );
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    let again = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert!(again.clean(), "{again:?}");
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Attack F3: on a stack of prj_a and prj_b without the check, inv_1's close and its late
// payment named prj_a; Paymos has the invoice prj_b's, closed and paid late. `release` with
// the API refuses (a delivery's project is not Paymos') and names the way out that works:
// `mark-paid` with the API puts Paymos' record on it, after which the release ships it under
// Paymos' project, once. Before: each refusal pointed at the other ("pass --project prj_a",
// then "you named project prj_a, Paymos has prj_b").
#[tokio::test]
async fn a_release_asking_paymos_names_the_way_to_paymos_project() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let of_a = |event_id: &str, at: u64, extra: &str| {
        item(
            event_id,
            "invoice.expired",
            at,
            &format!(
                r#"{{"invoice_id":"inv_1","project_id":"prj_a"{extra},"order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
            ),
        )
    };
    let mut outcomes = Vec::new();
    for work in [
        of_a("evt_x", 20, ""),
        of_a("evt_l", 40, r#","paid_late_at":30"#),
    ] {
        outcomes.push(fulfil.apply(&work, NOW_MS).await.unwrap().1);
    }
    assert_eq!(outcomes, [Updated, PaidLate]);
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            project_id: Some("prj_b".into()),
            ..late_at_paymos("expired", Some(30))
        },
    );
    let release = |project| {
        let alice = ReleaseBy {
            actor: "alice",
            reason: Some("paid late, says Paymos"),
            override_amount: false,
            project,
            order: None,
        };
        let fulfil = &fulfil;
        let paymos = &paymos;
        async move {
            fulfil
                .release_asking(&MemoryReviews::new(), paymos, "inv_1", &alice, NOW_MS)
                .await
        }
    };
    for project in [None, Some("prj_b")] {
        let refused = release(project).await;
        assert!(
            matches!(&refused, Err(crate::roads::release::ReleaseError::NotReleasable(why)) if why.contains("Paymos has it in prj_b") && why.contains("mark-paid inv_1")),
            "--project {project:?}: {refused:?}"
        );
    }
    assert_eq!(store.fulfilments(), []);
    let asked = crate::roads::reconcile::as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_1", &OrderRef::none()),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(asked, Ok(PaidLate));
    assert_eq!(release(None).await, Ok(Fulfilled));
    assert_eq!(release(Some("prj_b")).await, Ok(AlreadyFinal));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    assert_eq!(claims(&store), ["order_paid#prj_b#o-1"]);
}

// Attack F2: on a stack of prj_a and prj_b without the check, a forged open event names prj_b's
// order o-1; the genuine payment names no order nor project and ships prj_b's o-1 (rule 17).
// Paymos has the invoice prj_a's, of order o-2. `reconcile --apply` and `mark-paid` with the
// API find it shipped otherwise: `exceptions` lists it (order_conflict, with Paymos' order and
// the way out) until a person resolves it, after which no run brings it back. Before: only
// the run's report said so, and `mark-paid` answered order_conflict, "waits for a person",
// while nothing listed it.
#[tokio::test]
async fn an_invoice_paymos_has_of_another_order_than_shipped_waits_until_resolved() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let unnamed = item("evt_paid", "invoice.paid", 30, r#"{"invoice_id":"inv_1"}"#);
    let mut outcomes = Vec::new();
    for work in [open_of("prj_b"), unnamed] {
        outcomes.push(fulfil.apply(&work, NOW_MS).await.unwrap().1);
    }
    assert_eq!(outcomes, [Updated, Fulfilled]);
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            project_id: Some("prj_a".into()),
            order_id: Some("o-2".into()),
            ..at_paymos("paid", Some(30))
        },
    );
    let conflicts = || async {
        list(&*store, &MemoryReviews::new(), 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.resource_id.unwrap_or_default(), e.action))
            .collect::<Vec<_>>()
    };
    assert!(conflicts().await.is_empty());
    // Round 2's F4: `release` with the API names the conflict, not a road that cannot settle
    // it (before: "mark-paid … puts Paymos' record on it; then release it", in a loop).
    let alice = ReleaseBy {
        actor: "alice",
        reason: Some("paid, says Paymos"),
        override_amount: false,
        project: None,
        order: None,
    };
    let released = fulfil
        .release_asking(&MemoryReviews::new(), &paymos, "inv_1", &alice, NOW_MS)
        .await;
    assert!(
        matches!(&released, Err(crate::roads::release::ReleaseError::NotReleasable(why)) if why.contains("shipped here as order o-1 of prj_b") && why.contains("order o-2 of prj_a") && why.contains("order_conflict")),
        "{released:?}"
    );
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert_eq!(report.shipped_otherwise.len(), 1, "{report:?}");
    let listed = conflicts().await;
    assert!(
        matches!(&listed[..], [("order_conflict", id, action)] if id == "inv_1" && action.contains("ship order o-2 of prj_a by hand") && action.contains("exceptions --resolve inv_1")),
        "{listed:?}"
    );
    let asked = crate::roads::reconcile::as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_1", &OrderRef::none()),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(asked, Ok(OrderConflict));
    assert_eq!(conflicts().await.len(), 1);
    let resolved =
        crate::roads::exceptions::resolve_invoice(&*store, "inv_1", "alice", NOW_MS).await;
    assert_eq!(resolved, Ok(OrderConflict));
    assert!(conflicts().await.is_empty());
    let again = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert!(again.clean(), "{again:?}");
    assert!(conflicts().await.is_empty());
    assert!(
        crate::roads::exceptions::resolve_invoice(&*store, "inv_1", "alice", NOW_MS)
            .await
            .is_err()
    );
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// F5 (an earlier attack): an expired invoice's late payment (Paymos' time 100), then a full
// refund completed at 200, which returned it. A person's word that it was paid is that
// payment (the record holds it): it answers `refunded`, and nothing waits or ships. Before:
// `paid_late`, exit 1, though nothing waits.
#[tokio::test]
async fn a_persons_word_of_a_late_payment_refunded_in_full_answers_refunded() {
    let late = item(
        "evt_l",
        "invoice.expired",
        110,
        r#"{"invoice_id":"inv_1","paid_late_at":100,"order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
    );
    let refund = item(
        "evt_r",
        "withdrawal.completed",
        200,
        r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_1","mode":"full","type":"refund","amount":"10","currency":"USDT","completed_at":200}"#,
    );
    let (outcomes, store) = webhooks(&[invoice("evt_x", "expired", 90), late, refund]).await;
    assert_eq!(outcomes, [Updated, PaidLate, Updated]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let marked = fulfil
        .mark_paid("inv_1", order(), "support", NOW_MS)
        .await
        .unwrap();
    assert_eq!(marked, Refunded);
    assert_eq!(store.fulfilments(), []);
    assert!(
        list(&*store, &MemoryReviews::new(), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

// Attack round 2, F2: without the check, the genuine full refund's delivery says it completed
// at 150, after the payment at 100; Paymos lists that refund completed at 50, before it.
// `reconcile --apply` takes Paymos' time, and the payment, which the refund did not return,
// ships once. Before: `already_final` on every run, `mark-paid` with the API likewise (exit 0).
#[tokio::test]
async fn a_refund_paymos_dates_before_the_payment_returns_nothing_of_it() {
    let said = item(
        "evt_r",
        "withdrawal.completed",
        150,
        r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_1","mode":"full","type":"refund","amount":"4.00","currency":"USDT","completed_at":150}"#,
    );
    let (outcomes, store) = webhooks(&[said, invoice("evt_p", "paid", 100)]).await;
    assert_eq!(outcomes, [Updated, Refunded]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    paymos.refund("inv_1", paymos_refund(50));
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert_eq!(
        report.applied.get("inv_1"),
        Some(&Ok(Fulfilled)),
        "{report:?}"
    );
    let again = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert!(again.clean(), "{again:?}");
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Attack round 2, F1: an invoice closed underpaid (its partial payment at 10), paid late at
// 100; a refund's delivery says the full refund of the partial payment completed at 150, so
// the late payment stops waiting. Paymos lists the refund completed at 50, before the late
// payment (or lists none: a forged refund). `reconcile` reports the late payment, and
// `--apply` leaves it waiting for a person (`paid_late`). Before: "paid at Paymos: 0", exit 0,
// and nothing waited.
#[tokio::test]
async fn a_late_payment_a_refund_did_not_return_by_paymos_clock_waits() {
    for listed in [Some(50), None] {
        let late = item(
            "evt_l",
            "invoice.underpaid",
            110,
            r#"{"invoice_id":"inv_1","paid_late_at":100,"order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
        );
        let said = item(
            "evt_r",
            "withdrawal.completed",
            150,
            r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_1","mode":"full","type":"refund","amount":"4.00","currency":"USDT","completed_at":150}"#,
        );
        let (outcomes, store) = webhooks(&[invoice("evt_u", "underpaid", 10), late, said]).await;
        assert_eq!(outcomes, [Updated, PaidLate, Updated]);
        let waiting = || async {
            list(&*store, &MemoryReviews::new(), 0)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.kind)
                .collect::<Vec<_>>()
        };
        assert!(waiting().await.is_empty());
        let fulfil = crate::tests::one_shop(Arc::clone(&store));
        let paymos = MemoryPaymos::new();
        paymos.invoice("inv_1", late_at_paymos("underpaid", Some(100)));
        if let Some(at) = listed {
            paymos.refund("inv_1", paymos_refund(at));
        }
        let window = (0, 2_000_000_000);
        let read = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, false, NOW_MS)
            .await
            .unwrap();
        assert_eq!(
            read.paid_late.len(),
            1,
            "refund at Paymos {listed:?}: {read:?}"
        );
        let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
            .await
            .unwrap();
        assert_eq!(
            report.applied.get("inv_1"),
            Some(&Ok(PaidLate)),
            "{report:?}"
        );
        assert_eq!(
            waiting().await,
            ["paid_late"],
            "refund at Paymos {listed:?}"
        );
        assert_eq!(store.fulfilments(), []);
    }
}

// Two mutants of `only_paymos_refunds` (its `unshipped`): a payment that shipped keeps its
// status when a road asking Paymos corrects the refunds a forged delivery recorded after it
// (without the check); only the refunds change, and nothing ships again. And a record with no
// payment status (open, then the forged refund) keeps its open status until Paymos' payment
// lands on it.
#[tokio::test]
async fn a_refund_paymos_does_not_list_leaves_a_shipped_payment_as_it_is() {
    let forged = |at: u64| {
        item(
            "evt_r",
            "withdrawal.completed",
            at,
            &format!(
                r#"{{"withdrawal_id":"wdr_9","invoice_id":"inv_1","mode":"full","type":"refund","amount":"10","currency":"USDT","completed_at":{at}}}"#
            ),
        )
    };
    let (outcomes, store) = webhooks(&[invoice("evt_p", "paid", 100), forged(150)]).await;
    assert_eq!(outcomes, [Fulfilled, Updated]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    let asked = crate::roads::reconcile::as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_1", &OrderRef::none()),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(asked, Ok(AlreadyFinal));
    let seen = store.invoice("inv_1").unwrap().seen();
    assert_eq!(seen.status, Some(crate::money::status::InvoiceStatus::Paid));
    assert!(seen.refunds.is_empty(), "{seen:?}");
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    // Open, then the forged refund: Paymos' payment lands on the open record and ships.
    let (_, store) = webhooks(&[invoice("evt_o", "underpaid_waiting", 90), forged(95)]).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let asked = crate::roads::reconcile::as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_1", &OrderRef::none()),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(asked, Ok(Fulfilled));
    let story = store.invoice("inv_1").unwrap().seen();
    assert_eq!(
        story.status,
        Some(crate::money::status::InvoiceStatus::Paid)
    );
}

// Attack round 2, F5: order o-1 shipped with inv_1; inv_2 paid it again and waits as
// `duplicate_payment` ("its completed refund clears this"). Paymos refunded inv_2 in full, and
// the refund's webhook was lost. `reconcile --apply` records Paymos' refund, which clears it;
// nothing ships. Before: REFUNDED in the report, and the duplicate listed for ever.
#[tokio::test]
async fn a_duplicate_payment_paymos_refunded_in_full_is_cleared_by_the_reconciliation() {
    let paid = |event_id: &str, invoice_id: &str| {
        item(
            event_id,
            "invoice.paid",
            100,
            &format!(
                r#"{{"invoice_id":"{invoice_id}","order":{{"external_id":"o-1","amount":"10","currency":"USD"}}}}"#
            ),
        )
    };
    let (outcomes, store) = webhooks(&[paid("evt_1", "inv_1"), paid("evt_2", "inv_2")]).await;
    assert_eq!(outcomes, [Fulfilled, DuplicatePayment]);
    let waiting = || async {
        list(&*store, &MemoryReviews::new(), 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.resource_id.unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    assert_eq!(waiting().await, [("duplicate_payment", "inv_2".to_owned())]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", at_paymos("paid", Some(100)));
    paymos.invoice("inv_2", at_paymos("paid", Some(100)));
    paymos.refund("inv_2", paymos_refund(150));
    let report =
        crate::roads::reconcile::reconcile(&paymos, &fulfil, (0, 2_000_000_000), true, NOW_MS)
            .await
            .unwrap();
    assert_eq!(report.refunded.len(), 1, "{report:?}");
    assert!(waiting().await.is_empty(), "{:?}", waiting().await);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

/// inv_1 shipped here as order o-1 of prj_b (a forged open event named it); Paymos has it as
/// order o-2 of prj_a, paid. inv_2 is Paymos' other invoice of o-2 of prj_a, paid too.
async fn shipped_otherwise_and_a_second_payment(
    second_first: bool,
) -> (
    Arc<MemoryResources>,
    Vec<(&'static str, String, String)>,
    Applied,
) {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let unnamed = item("evt_paid", "invoice.paid", 30, r#"{"invoice_id":"inv_1"}"#);
    for work in [open_of("prj_b"), unnamed] {
        fulfil.apply(&work, NOW_MS).await.unwrap();
    }
    let second = item(
        "evt_paid_2",
        "invoice.paid",
        40,
        r#"{"invoice_id":"inv_2","project_id":"prj_a","order":{"external_id":"o-2","amount":"10","currency":"USD"}}"#,
    );
    let paymos = MemoryPaymos::new();
    let paid_at_paymos = |id: &str, at| {
        paymos.invoice(
            id,
            ConfirmedInvoice {
                project_id: Some("prj_a".into()),
                order_id: Some("o-2".into()),
                ..at_paymos("paid", Some(at))
            },
        );
    };
    paid_at_paymos("inv_1", 30);
    let mut second_applied = None;
    if second_first {
        paid_at_paymos("inv_2", 40);
        second_applied = Some(fulfil.apply(&second, NOW_MS).await.unwrap().1);
    }
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert_eq!(report.shipped_otherwise.len(), 1, "{report:?}");
    if !second_first {
        paid_at_paymos("inv_2", 40);
        second_applied = Some(fulfil.apply(&second, NOW_MS).await.unwrap().1);
    }
    let listed = list(&*store, &MemoryReviews::new(), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| {
            (
                e.kind,
                e.resource_id.unwrap_or_default(),
                format!("{} | {}", e.why, e.action),
            )
        })
        .collect();
    (store, listed, second_applied.unwrap())
}

// Attack round 2, F3: Paymos' word finds inv_1 shipped as o-1 of prj_b while Paymos has it
// as o-2 of prj_a, and `exceptions` tells a person to ship o-2 by hand. From that run on o-2
// is inv_1's payment's: inv_2, a second payment of it, waits as a duplicate payment to refund
// and ships nothing (rule 22). Before: inv_2 `fulfilled` o-2 too: twice in the world.
#[tokio::test]
async fn a_payment_of_an_order_a_person_is_told_to_ship_by_hand_ships_nothing() {
    let (store, listed, second) = shipped_otherwise_and_a_second_payment(false).await;
    assert_eq!(second, DuplicatePayment);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    assert!(
        matches!(&listed[..], [(a, inv_1, ship), (b, inv_2, refund)]
            if *a == "order_conflict" && inv_1 == "inv_1" && ship.contains("ship order o-2 of prj_a by hand")
            && *b == "duplicate_payment" && inv_2 == "inv_2" && refund.contains("refund")),
        "{listed:?}"
    );
}

// The same where inv_2 shipped o-2 before the run found the conflict: nothing is to ship by
// hand; inv_1's payment is a second payment of o-2, to refund, and the listing says so.
#[tokio::test]
async fn an_order_conflict_whose_order_shipped_otherwise_says_refund_not_ship() {
    let (store, listed, second) = shipped_otherwise_and_a_second_payment(true).await;
    assert_eq!(second, Fulfilled);
    assert_eq!(
        store.fulfilments(),
        [
            ("inv_1".into(), Some("o-1".into())),
            ("inv_2".into(), Some("o-2".into()))
        ]
    );
    assert!(
        matches!(&listed[..], [(a, inv_1, action)]
            if *a == "order_conflict" && inv_1 == "inv_1" && action.contains("which inv_2 paid and shipped")
            && action.contains("refund inv_1") && !action.contains("ship order o-2")),
        "{listed:?}"
    );
}

// Attack round 3, F1 (rule 24): inv_0 paid and shipped o-1; a forged open event planted o-1
// on inv_1, whose genuine payment then waited as o-1's duplicate ("refund inv_1"). Paymos has
// inv_1 as o-2, which never shipped: `mark-paid` with the API judges Paymos' payment of o-2
// anew, and it ships, once; nothing is left to refund or recover. Before: `order_conflict`
// "ship order o-2 by hand and recover order o-1" (the order inv_0's customer paid for).
#[tokio::test]
async fn a_persons_word_of_an_unshipped_payment_of_another_order_recovers_nothing() {
    let first = item(
        "evt_p0",
        "invoice.paid",
        20,
        r#"{"invoice_id":"inv_0","order":{"external_id":"o-1","amount":"10","currency":"USD"}}"#,
    );
    let planted = invoice("evt_open", "awaiting_payment", 25);
    let unnamed = item("evt_p1", "invoice.paid", 30, r#"{"invoice_id":"inv_1"}"#);
    let (outcomes, store) = webhooks(&[first, planted, unnamed]).await;
    assert_eq!(outcomes, [Fulfilled, Updated, DuplicatePayment]);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            order_id: Some("o-2".into()),
            ..at_paymos("paid", Some(30))
        },
    );
    let asked = crate::roads::reconcile::as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_1", &OrderRef::none()),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(asked, Ok(Fulfilled));
    let listed: Vec<_> = list(&*store, &MemoryReviews::new(), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.resource_id.unwrap_or_default(), e.action))
        .collect();
    assert!(
        listed
            .iter()
            .all(|(kind, _, action)| *kind != "order_conflict" && !action.contains("recover")),
        "{listed:?}"
    );
    assert!(listed.is_empty(), "{listed:?}");
    assert_eq!(
        store.fulfilments(),
        [
            ("inv_0".into(), Some("o-1".into())),
            ("inv_1".into(), Some("o-2".into()))
        ]
    );
}

// Attack round 3, F3: inv_1 shipped here as o-1 of prj_b (a forged open event named it);
// Paymos has it in prj_c, which this stack does not apply: prj_c's own stack ships its order.
// The line must not tell a person to ship it by hand too, and names the project of the order
// to recover. Before: "ship order o-1 of prj_c by hand and recover order o-1".
#[tokio::test]
async fn an_order_conflict_of_a_project_not_applied_here_ships_nothing_by_hand() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let unnamed = item("evt_paid", "invoice.paid", 30, r#"{"invoice_id":"inv_1"}"#);
    for work in [open_of("prj_b"), unnamed] {
        fulfil.apply(&work, NOW_MS).await.unwrap();
    }
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            project_id: Some("prj_c".into()),
            ..at_paymos("paid", Some(30))
        },
    );
    let window = (0, 2_000_000_000);
    let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    assert!(
        matches!(&report.shipped_otherwise[..], [o] if o.not_applied),
        "{report:?}"
    );
    let listed: Vec<_> = list(&*store, &MemoryReviews::new(), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.resource_id.unwrap_or_default(), e.action))
        .collect();
    assert!(
        matches!(&listed[..], [(kind, id, action)] if *kind == "order_conflict" && id == "inv_1"
            && !action.contains("by hand") && action.contains("recover order o-1 of prj_b")
            && action.contains("that project's own stack")),
        "{listed:?}"
    );
    use crate::roads::reconcile::ReconcileStore;
    assert_eq!(
        store
            .order_fulfilled_by(Some("prj_c"), "o-1")
            .await
            .unwrap(),
        None
    );
}

// Attack round 3, F4 (rule 25): inv_1 shipped here as o-1 of prj_b (a forged open event named
// it); Paymos has it in prj_a, this stack's too, and names no order yet. Orders are unique only
// within a project, so Paymos' project alone says inv_1 never paid o-1 of prj_b: listed at once,
// to recover o-1 of prj_b, while its payment is prj_a's, of an order Paymos names later;
// nothing more ships and no order is taken. Before: MATCHED, nothing listed.
#[tokio::test]
async fn a_payment_paymos_has_in_another_project_with_no_order_is_an_order_conflict() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let unnamed = item("evt_paid", "invoice.paid", 30, r#"{"invoice_id":"inv_1"}"#);
    for work in [open_of("prj_b"), unnamed] {
        fulfil.apply(&work, NOW_MS).await.unwrap();
    }
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_1",
        ConfirmedInvoice {
            project_id: Some("prj_a".into()),
            order_id: None,
            ..at_paymos("paid", Some(30))
        },
    );
    let window = (0, 2_000_000_000);
    for apply in [false, true] {
        let report = crate::roads::reconcile::reconcile(&paymos, &fulfil, window, apply, NOW_MS)
            .await
            .unwrap();
        assert!(
            matches!(&report.shipped_otherwise[..], [o] if !o.not_applied && o.paid.order_id.is_empty()),
            "{report:?}"
        );
        assert_eq!(report.matched, 0);
        assert!(!report.clean());
    }
    let listed: Vec<_> = list(&*store, &MemoryReviews::new(), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.resource_id.unwrap_or_default(), e.why, e.action))
        .collect();
    assert!(
        matches!(&listed[..], [(kind, id, why, action)] if *kind == "order_conflict" && id == "inv_1"
            && why.contains("prj_a") && why.contains("no order")
            && action.contains("recover order o-1 of prj_b")
            && action.contains("find at Paymos the order this payment is for")),
        "{listed:?}"
    );
    let (seen, _) = store.invoice_seen("inv_1").await.unwrap();
    assert!(seen.unwrap().paymos_order_unnamed);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Attack round 3, F5: Paymos has inv_1 paid, naming no time, and refunded in full at 20. No
// road knows whether the refund returned the payment: it waits `after_refund` for a person.
// Released, it ships; but where Paymos' dashboard shows it paid before the refund, that
// refund returned it, and the person had no way to take it off the list but to ship it or to
// leave it listed for ever. A resolve is that way out: nothing ships, the list is empty, and
// Paymos' time, once it names one, still decides (after the refund: it ships, once).
// Before: `resolve_invoice` refused it (not an order conflict).
#[tokio::test]
async fn a_payment_a_person_finds_the_full_refund_returned_is_resolved_shipping_nothing() {
    let (_, store) = webhooks(&[
        invoice("evt_open", "awaiting_payment", 10),
        full_refund("evt_r", 20),
    ])
    .await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let reconcile_with = |paid_at: Option<u64>| {
        let paymos = MemoryPaymos::new();
        paymos.invoice("inv_1", at_paymos("paid", paid_at));
        paymos.refund("inv_1", paymos_refund(20));
        paymos
    };
    let window = (0, 2_000_000_000);
    crate::roads::reconcile::reconcile(&reconcile_with(None), &fulfil, window, true, NOW_MS)
        .await
        .unwrap();
    let listed = async || {
        list(&*store, &MemoryReviews::new(), 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.action))
            .collect::<Vec<_>>()
    };
    assert!(
        matches!(&listed().await[..], [(kind, action)] if *kind == "after_refund"
            && action.contains("--resolve inv_1")),
        "{:?}",
        listed().await
    );
    let resolved =
        crate::roads::exceptions::resolve_invoice(&*store, "inv_1", "alice", NOW_MS).await;
    assert_eq!(resolved, Ok(Held));
    assert!(listed().await.is_empty());
    assert!(store.fulfilments().is_empty());
    assert!(
        crate::roads::exceptions::resolve_invoice(&*store, "inv_1", "alice", NOW_MS)
            .await
            .is_err(),
        "once"
    );
    // Attack round 4, F3: a person's word of it afterwards says it is refunded (nothing ships,
    // nothing is listed: exit 1). Before: `already_final`, exit 0.
    assert_eq!(
        fulfil.mark_paid("inv_1", order(), "support", NOW_MS).await,
        Ok(Refunded)
    );
    assert!(store.fulfilments().is_empty());
    // Paymos, naming no time still, changes nothing; naming one before the refund neither.
    for paid_at in [None, Some(15)] {
        crate::roads::reconcile::reconcile(&reconcile_with(paid_at), &fulfil, window, true, NOW_MS)
            .await
            .unwrap();
        assert!(store.fulfilments().is_empty(), "{paid_at:?}");
        assert!(listed().await.is_empty(), "{paid_at:?}");
    }
    // Paid after the refund by Paymos' clock: a new payment, which ships, once.
    for _ in 0..2 {
        crate::roads::reconcile::reconcile(
            &reconcile_with(Some(30)),
            &fulfil,
            window,
            true,
            NOW_MS,
        )
        .await
        .unwrap();
    }
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

// Attack round 4, F4: inv_1 paid and shipped, refunded in full, then paid again. Its line said
// "a second payment (10 USD) for order o-1, which inv_1 fulfilled; inv_1's payment was
// refunded in full", as if another invoice had paid (and 10 USD is the order's price, not
// what was paid again), and "its completed refund clears this" while that refund had
// completed already. It now says the invoice was paid again after its own full refund, and
// that only a full refund completed after this payment clears it.
#[tokio::test]
async fn a_payment_after_the_invoices_own_full_refund_is_said_as_such() {
    let (outcomes, store) = webhooks(&[
        invoice("evt_a", "paid", 10),
        full_refund("evt_r", 20),
        invoice("evt_b", "paid_over", 30),
    ])
    .await;
    assert_eq!(outcomes, [Fulfilled, Updated, DuplicatePayment]);
    let listed: Vec<_> = list(&*store, &MemoryReviews::new(), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.why, e.action))
        .collect();
    assert!(
        matches!(&listed[..], [(kind, why, action)] if *kind == "duplicate_payment"
            && why.starts_with("paid again after its own payment, which shipped order o-1, was refunded in full")
            && !why.contains("10 USD")
            && action.contains("a full refund completed after this payment clears it")),
        "{listed:?}"
    );
}
