//! Issue 38, projects: a merchant's account holds several projects, an endpoint without a
//! project filter receives every one, and withdrawals ignore filters. Order and payer ids are
//! unique only within a project; another project's event applies nothing.

use std::sync::Arc;

use crate::money::change::{Applied, OrderRef, Projects};
use crate::roads::fulfil::Fulfil;
use crate::testkit::memory::MemoryResources;
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

use Applied::*;

pub(super) fn item(event_id: &str, event_type: &str, data: &str) -> WorkItem {
    let body = format!(
        r#"{{"event_id":"{event_id}","event_type":"{event_type}","version":1,"occurred_at":20,"data":{data}}}"#
    );
    WorkItem {
        event_id: event_id.to_owned(),
        environment: Some(Environment::Live),
        body: body.into_bytes(),
        received_at_ms: None,
    }
}

pub(super) fn paid(event_id: &str, invoice: &str, project: &str, order: &str) -> WorkItem {
    item(
        event_id,
        "invoice.paid",
        &format!(
            r#"{{"invoice_id":"{invoice}","project_id":"{project}","order":{{"external_id":"{order}","amount":"10.00","currency":"USD"}}}}"#
        ),
    )
}

pub(super) fn deposit(event_id: &str, id: &str, project: &str, payer: &str, net: &str) -> WorkItem {
    item(
        event_id,
        "payment_channel.deposit.confirmed",
        &format!(
            r#"{{"id":"{id}","project_id":"{project}","is_final":true,"payment_channel_external_id":"{payer}","net":"{net}","currency":"USDT"}}"#
        ),
    )
}

pub(super) async fn run(
    projects: Projects,
    history: &[WorkItem],
) -> (Vec<Applied>, Arc<MemoryResources>) {
    let store = Arc::new(MemoryResources::new());
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(projects);
    let mut out = Vec::new();
    for (i, work) in history.iter().enumerate() {
        out.push(fulfil.apply(work, 1_000 + i as u64).await.unwrap().1);
    }
    (out, store)
}

fn two_shops() -> Projects {
    Projects::only(vec!["prj_a".into(), "prj_b".into()])
}

#[tokio::test]
async fn order_1001_of_two_projects_ships_twice_once_each() {
    let history = [
        paid("evt_a", "inv_a", "prj_a", "1001"),
        paid("evt_b", "inv_b", "prj_b", "1001"),
        // A second payment of shop B's order is shop B's duplicate, not shop A's.
        paid("evt_b2", "inv_b2", "prj_b", "1001"),
    ];
    let (outcomes, store) = run(two_shops(), &history).await;
    assert_eq!(outcomes, [Fulfilled, Fulfilled, DuplicatePayment]);
    assert_eq!(
        store.fulfilments(),
        [
            ("inv_a".into(), Some("1001".into())),
            ("inv_b".into(), Some("1001".into()))
        ]
    );
    // A stack that names no projects keys them apart too (`no_list`).
    let (outcomes, _) = run(Projects::all(), &history).await;
    assert_eq!(outcomes, [Fulfilled, Fulfilled, DuplicatePayment]);
    // The home project (listed first) keeps the keys it had before projects.
    let (_, store) = run(two_shops(), &history).await;
    let keys = store.keys();
    assert!(keys.contains(&"order_paid#1001".to_owned()), "{keys:?}");
    assert!(
        keys.contains(&"order_paid#prj_b#1001".to_owned()),
        "{keys:?}"
    );
}

#[tokio::test]
async fn another_projects_events_apply_nothing_and_wait_for_no_one() {
    let refund = item(
        "evt_r",
        "withdrawal.completed",
        r#"{"withdrawal_id":"wdr_r","type":"refund","mode":"full","invoice_id":"inv_b","project_id":"prj_b","amount":"10","currency":"USDT"}"#,
    );
    let payout = item(
        "evt_p",
        "withdrawal.completed",
        r#"{"withdrawal_id":"wdr_p","type":"payout","amount":"5","currency":"USDT"}"#,
    );
    let history = [
        paid("evt_b", "inv_b", "prj_b", "1001"),
        deposit("evt_d", "pcd_b", "prj_b", "42", "3"),
        refund,
        // A plain payout names no project: merchant-wide, recorded.
        payout,
        paid("evt_a", "inv_a", "prj_a", "1001"),
    ];
    let (outcomes, store) = run(Projects::only(vec!["prj_a".into()]), &history).await;
    assert_eq!(
        outcomes,
        [OtherProject, OtherProject, OtherProject, Updated, Fulfilled]
    );
    assert_eq!(store.fulfilments(), [("inv_a".into(), Some("1001".into()))]);
    // Marked as prj_b's, with nothing else: no status, no order, nothing shipped.
    let b = store.invoice("inv_b").unwrap();
    assert_eq!((b.status, b.order.external_id), (None, None));
    assert!(store.balances_by_key().is_empty());
    assert!(store.reviews().is_empty(), "never listed as waiting");
    assert_eq!(
        store.outcome("evt_b").map(|(a, _)| a),
        Some(OtherProject),
        "the ledger names why"
    );
}

#[tokio::test]
async fn a_payer_of_two_projects_has_two_balances() {
    let history = [
        deposit("evt_1", "pcd_1", "prj_a", "42", "3"),
        deposit("evt_2", "pcd_2", "prj_b", "42", "5"),
        deposit("evt_3", "pcd_3", "prj_b", "42", "1"),
    ];
    let (outcomes, store) = run(two_shops(), &history).await;
    assert_eq!(outcomes, [Credited, Credited, Credited]);
    let balances = store.balances_by_key();
    assert_eq!(
        balances.get("balance#42#USDT").map(String::as_str),
        Some("3")
    );
    assert_eq!(
        balances.get("balance#prj_b#42#USDT").map(String::as_str),
        Some("6")
    );
}

#[tokio::test]
async fn each_project_registers_its_own_orders() {
    let store = Arc::new(MemoryResources::new());
    let price = |a: &str| crate::money::status::Amount::parse(a).unwrap();
    store.register_order("1001", &price("10"), "USD");
    store.register_scoped_order(Some("prj_b"), "1001", &price("99"), "USD");
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(two_shops());
    let a = fulfil
        .apply(&paid("evt_a", "inv_a", "prj_a", "1001"), 1)
        .await;
    let b = fulfil
        .apply(&paid("evt_b", "inv_b", "prj_b", "1001"), 2)
        .await;
    assert_eq!((a.unwrap().1, b.unwrap().1), (Fulfilled, Held));
}

#[tokio::test]
async fn an_event_naming_no_project_takes_its_invoices_recorded_project() {
    let silent = item(
        "evt_s",
        "invoice.paid",
        r#"{"invoice_id":"inv_b","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_b","project_id":"prj_b","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let (outcomes, store) = run(
        two_shops(),
        &[paid("evt_a", "inv_a", "prj_a", "1001"), opened, silent],
    )
    .await;
    assert_eq!(outcomes, [Fulfilled, Updated, Fulfilled]);
    assert!(store.keys().contains(&"order_paid#prj_b#1001".to_owned()));
}

#[tokio::test]
async fn a_person_names_the_project_of_the_order_they_mark_paid() {
    let (_, store) = run(two_shops(), &[paid("evt_a", "inv_a", "prj_a", "1001")]).await;
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(two_shops());
    let order = |project: Option<&str>| OrderRef {
        external_id: Some("1001".into()),
        amount: None,
        currency: None,
        project: project.map(str::to_owned),
        home: false,
        unlisted: false,
    };
    assert_eq!(
        fulfil
            .mark_paid("inv_b", order(Some("prj_b")), "support", 5_000)
            .await
            .unwrap(),
        Fulfilled,
        "shop B's 1001 is its own"
    );
    assert_eq!(
        fulfil
            .mark_paid("inv_c", order(None), "support", 5_000)
            .await
            .unwrap(),
        DuplicatePayment,
        "no project named: the home project's 1001, fulfilled already"
    );
    assert_eq!(
        fulfil
            .mark_paid("inv_d", order(Some("prj_z")), "support", 5_000)
            .await
            .unwrap(),
        OtherProject
    );
}

#[test]
fn a_stack_lists_its_projects_the_first_its_home() {
    let projects = Projects::parse(" prj_a, prj_b ,, ");
    assert_eq!(projects.ids(), ["prj_a", "prj_b"]);
    assert!(projects.applies(Some("prj_b")) && projects.applies(None));
    assert!(!projects.applies(Some("prj_c")));
    assert_eq!(projects.scope(Some("prj_a")), None);
    assert_eq!(projects.scope(Some("prj_b")).as_deref(), Some("prj_b"));
    assert_eq!(projects.project_of(None).as_deref(), Some("prj_a"));
    assert!(Projects::all().applies(Some("prj_anything")));
    assert_eq!(
        Projects::all().scope(Some("prj_a")).as_deref(),
        Some("prj_a")
    );
}

/// The project each `Order Paid` names, of order 1001 paid in prj_a (`inv_a`) and in prj_b
/// (`inv_b`), on a stack applying `projects`.
async fn projects_published(
    projects: fn() -> Projects,
) -> (Option<serde_json::Value>, Option<serde_json::Value>) {
    let history = [
        paid("evt_a", "inv_a", "prj_a", "1001"),
        paid("evt_b", "inv_b", "prj_b", "1001"),
    ];
    let (_, store) = run(projects(), &history).await;
    let stack = crate::money::change::Applying {
        environment: Environment::Live,
        projects: projects(),
    };
    let events = crate::roads::handoff::since(&*store, 0, stack)
        .await
        .unwrap();
    let project = |key: &str| {
        events
            .iter()
            .find(|(_, e)| e.idempotency_key == key)
            .map(|(_, e)| e.detail["project_id"].clone())
    };
    (project("order-paid:inv_a"), project("order-paid:inv_b"))
}

#[tokio::test]
async fn each_published_fact_names_its_project() {
    assert_eq!(
        projects_published(two_shops).await,
        (Some("prj_a".into()), Some("prj_b".into()))
    );
}

// The attack on `dev` (F2): on a stack that lists no projects the hand-off's `Order Paid` said
// `project_id: null` for invoices whose events named their project, so a shop of two projects
// sharing order ids could not tell which order to ship. Each project keyed apart, each fact
// names its project there too.
#[tokio::test]
async fn on_a_stack_listing_no_projects_each_published_fact_names_its_project() {
    assert_eq!(
        projects_published(Projects::all).await,
        (Some("prj_a".into()), Some("prj_b".into()))
    );
}

// Issue 43 (a mutant no fast test caught: the refusal "this invoice is another project's"
// re-planned as nothing): an invoice another project's event noted as its own, then paid by an
// event naming no project. The payment is that project's: `other_project`, nothing ships.
#[tokio::test]
async fn a_payment_naming_no_project_of_an_invoice_noted_as_another_projects_applies_nothing() {
    let noted = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_z","project_id":"prj_z","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let silent = item(
        "evt_s",
        "invoice.paid",
        r#"{"invoice_id":"inv_z","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let (outcomes, store) = run(two_shops(), &[noted, silent]).await;
    assert_eq!(outcomes, [OtherProject, OtherProject]);
    assert!(
        store.fulfilments().is_empty(),
        "another project's payment ships nothing here"
    );
}

/// An invoice whose open event names shop B and whose payment names shop A (the home project).
async fn two_projects_named() -> (Arc<MemoryResources>, Fulfil<Arc<MemoryResources>>) {
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_x","project_id":"prj_b","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let (outcomes, store) = run(
        two_shops(),
        &[opened, paid("evt_p", "inv_x", "prj_a", "1001")],
    )
    .await;
    assert_eq!(outcomes, [Updated, Held]);
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(two_shops());
    (store, fulfil)
}

// Missed mutant (`delete field project` in `invoice_transition`): the mirror of the hold
// below. The home project's open event, then shop B's payment: the record stays the home
// project's and learns none of B's, so it never names two projects.
#[tokio::test]
async fn a_hold_of_the_home_project_learns_none_of_the_other_shops_project() {
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_x","project_id":"prj_a","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let (outcomes, store) = run(
        two_shops(),
        &[opened, paid("evt_p", "inv_x", "prj_b", "1001")],
    )
    .await;
    assert_eq!(outcomes, [Updated, Held]);
    let held = store.invoice("inv_x").unwrap();
    assert!(held.projects_disagree);
    assert_eq!(
        (held.order.project.as_deref(), held.order.home),
        (None, true),
        "{held:?}"
    );
    assert!(store.fulfilled().is_empty());
}

/// Alice's release of inv_x, naming `project` (`--project`) or not.
async fn release_x(
    fulfil: &Fulfil<Arc<MemoryResources>>,
    project: Option<&str>,
    override_amount: bool,
) -> Result<Applied, crate::roads::release::ReleaseError> {
    let by = crate::roads::release::ReleaseBy {
        actor: "alice",
        reason: Some("checked at Paymos"),
        override_amount,
        project,
        order: None,
    };
    fulfil
        .release(
            &crate::testkit::memory::MemoryReviews::new(),
            "inv_x",
            &by,
            8_000,
        )
        .await
}

#[tokio::test]
async fn a_release_never_ships_an_invoice_whose_events_named_two_projects() {
    // Issue 49 (attack F3): the invoice's events disagree on its project: held, and a release
    // (even overriding the amount) shipped shop B's order on the record's word alone. Which
    // shop's invoice it is, only Paymos or a person naming the project can say.
    let (store, fulfil) = two_projects_named().await;
    // The hold keeps the record's project and adds none of the payment's: the record never
    // names two projects (a release naming either then ships under that one alone).
    let held = store.invoice("inv_x").unwrap();
    assert!(held.projects_disagree);
    assert_eq!(
        (held.order.project.as_deref(), held.order.home),
        (Some("prj_b"), false),
        "{held:?}"
    );
    let listed =
        crate::roads::exceptions::list(&*store, &crate::testkit::memory::MemoryReviews::new(), 0)
            .await
            .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].kind, "held");
    assert!(
        listed[0]
            .why
            .contains("names the home project, the invoice's record project prj_b")
            && listed[0].action.contains("release inv_x --project"),
        "{listed:?}"
    );
    for override_amount in [false, true] {
        let refused = release_x(&fulfil, None, override_amount)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("two projects") && refused.contains("--project"),
            "{refused}"
        );
    }
    let refused = release_x(&fulfil, Some("prj_z"), false).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("not a project this stack applies")
    );
    assert_eq!(store.fulfilments(), []);
    // The person names the project they checked: shop A's order ships, once, under its key.
    assert_eq!(
        release_x(&fulfil, Some("prj_a"), false).await,
        Ok(Fulfilled)
    );
    assert_eq!(
        release_x(&fulfil, Some("prj_a"), false).await,
        Ok(AlreadyFinal)
    );
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
    let keys = store.keys();
    assert!(keys.contains(&"order_paid#1001".to_owned()), "{keys:?}");
    assert!(
        !keys.contains(&"order_paid#prj_b#1001".to_owned()),
        "{keys:?}"
    );
    // Or shop B's, had they found it B's.
    let (store, fulfil) = two_projects_named().await;
    assert_eq!(
        release_x(&fulfil, Some("prj_b"), false).await,
        Ok(Fulfilled)
    );
    assert!(store.keys().contains(&"order_paid#prj_b#1001".to_owned()));
}

/// Paymos' record of inv_x: paid, order 1001 at 10.00 USD, in `project`.
pub(super) fn paymos_has_x_paid_in(project: &str) -> crate::testkit::memory::MemoryPaymos {
    let paymos = crate::testkit::memory::MemoryPaymos::new();
    paymos.invoice(
        "inv_x",
        crate::roads::confirm::ConfirmedInvoice {
            status: "paid".into(),
            is_test: false,
            order_id: Some("1001".into()),
            order_amount: crate::money::status::Amount::parse("10.00"),
            order_currency: Some("USD".into()),
            token_amount: None,
            token_currency: None,
            paid_late: false,
            project_id: Some(project.into()),
            paid_at: Some(30),
        },
    );
    paymos
}

// Paymos' word is the other way out, and it settles the hold: which shop's payment it is was
// the hold's only question, and Paymos answers it. `reconcile --apply` (as the webhook road
// with the reverse check does) puts Paymos' project on the record and ships that project's
// order, once. Before: the project was settled but the payment stayed `held` for a person,
// while the same payment confirmed on the webhook road shipped.
#[tokio::test]
async fn paymos_project_settles_an_invoice_whose_events_named_two_projects() {
    for (paymos_says, key) in [
        ("prj_a", "order_paid#1001"),
        ("prj_b", "order_paid#prj_b#1001"),
    ] {
        let (store, fulfil) = two_projects_named().await;
        let paymos = paymos_has_x_paid_in(paymos_says);
        let report =
            crate::roads::reconcile::reconcile(&paymos, &fulfil, (0, 2_000_000_000), true, 7_000)
                .await
                .unwrap();
        assert_eq!(
            report.applied.get("inv_x"),
            Some(&Ok(Fulfilled)),
            "{paymos_says}"
        );
        assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
        assert!(
            store.keys().contains(&key.to_owned()),
            "{paymos_says}: {:?}",
            store.keys()
        );
        let settled = store.invoice("inv_x").unwrap();
        assert!(!settled.projects_disagree && !settled.held, "{settled:?}");
        let listed = crate::roads::exceptions::list(
            &*store,
            &crate::testkit::memory::MemoryReviews::new(),
            0,
        )
        .await
        .unwrap();
        assert!(listed.is_empty(), "{listed:?}");
        // Run again: nothing more ships, nothing is missing.
        let again =
            crate::roads::reconcile::reconcile(&paymos, &fulfil, (0, 2_000_000_000), true, 8_000)
                .await
                .unwrap();
        assert!(again.clean(), "{again:?}");
        assert_eq!(store.fulfilments().len(), 1);
        // And a person's release after it ships nothing more.
        assert_ne!(release_x(&fulfil, None, false).await, Ok(Fulfilled));
        assert_eq!(store.fulfilments().len(), 1);
    }
}

// The webhook road with the reverse check meets the same hold: a second endpoint's copy of the
// payment, confirmed by Paymos, ships Paymos' project's order once.
#[tokio::test]
async fn a_confirmed_copy_of_a_payment_held_for_two_projects_ships_paymos_project_order() {
    let (store, _) = two_projects_named().await;
    let paymos = Arc::new(paymos_has_x_paid_in("prj_a"));
    let checked = Fulfil::new(Arc::clone(&store))
        .for_projects(two_shops())
        .with_confirmation(Arc::clone(&paymos));
    let copy = paid("evt_p2", "inv_x", "prj_a", "1001");
    assert_eq!(checked.apply(&copy, 9_000).await.unwrap().1, Fulfilled);
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
    assert!(store.keys().contains(&"order_paid#1001".to_owned()));
    // An unconfirmed copy (the check off) ships nothing on an event's word: it waits beside the
    // hold, as a payment naming another project than the record's.
    let (store, fulfil) = two_projects_named().await;
    assert_eq!(fulfil.apply(&copy, 9_000).await.unwrap().1, OrderConflict);
    assert_eq!(store.fulfilments(), []);
}

// Finding 5 of this turn's attack on `dev` (two projects, no reverse check): shop A's payment
// of inv_x shipped order 4000, then a payment of the same invoice naming shop B answered
// `already_final`, listed nowhere, though an invoice is one project's (a forged or mistaken
// event, or the first was). Like a payment naming another order, it waits as `order_conflict`
// for a person; nothing more ships. Before: `already_final`, nothing listed.
#[tokio::test]
async fn a_payment_naming_another_project_than_its_invoice_shipped_waits_as_a_conflict() {
    let history = [
        paid("evt_a", "inv_x", "prj_a", "4000"),
        paid("evt_b", "inv_x", "prj_b", "4000"),
        // The same project again is a replay of what shipped: nothing waits.
        paid("evt_a2", "inv_x", "prj_a", "4000"),
    ];
    let (outcomes, store) = run(two_shops(), &history).await;
    assert_eq!(outcomes, [Fulfilled, OrderConflict, AlreadyFinal]);
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("4000".into()))]);
}

// Finding 5 again, a late payment: inv_x closed underpaid as shop A's, then paid in full late
// naming shop B. It waits `paid_late`, and `release` without `--project` shipped shop A's
// order on the record's word. It is marked as an invoice whose events named two projects:
// released only naming the project the person checked. Before: `fulfilled` under shop A.
#[tokio::test]
async fn a_late_payment_naming_another_project_than_its_record_is_released_only_naming_one() {
    let closed = item(
        "evt_u",
        "invoice.underpaid",
        r#"{"invoice_id":"inv_x","project_id":"prj_a","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let late = item(
        "evt_l",
        "invoice.paid",
        r#"{"invoice_id":"inv_x","status":"underpaid","paid_late_at":20,"project_id":"prj_b","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let store = Arc::new(MemoryResources::new());
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(two_shops());
    let mut outcomes = Vec::new();
    for work in [&closed, &late] {
        outcomes.push(fulfil.apply(work, 1_000).await.unwrap().1);
    }
    assert_eq!(outcomes, [Updated, PaidLate]);
    assert!(store.invoice("inv_x").unwrap().projects_disagree);
    let refused = release_x(&fulfil, None, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("--project"), "{refused}");
    assert!(store.fulfilments().is_empty());
    assert_eq!(
        release_x(&fulfil, Some("prj_b"), false).await,
        Ok(Fulfilled)
    );
    assert!(store.keys().contains(&"order_paid#prj_b#1001".to_owned()));
}

// Issue 49 (the last attack's F4, no reverse check): the first event naming another project
// pinned the invoice. A forged (or mistaken) open event naming shop Z marked inv_x as Z's; the
// genuine payment naming this stack's own project then answered `other_project`, listed
// nowhere, and `mark-paid --project prj_a` answered `other_project` too: an acknowledged
// payment of this shop that no one was told of, with no way out. The invoice's events disagree
// on its project: the payment waits `project_unknown` for a person (or `recheck`), and a person
// naming the project they checked at Paymos lifts the mark and ships it, once.
#[tokio::test]
async fn a_payment_of_this_shop_on_an_invoice_another_projects_event_marked_waits_for_a_person() {
    let one_shop = || Projects::only(vec!["prj_a".into()]);
    let forged = item(
        "evt_f",
        "invoice.confirming",
        r#"{"invoice_id":"inv_x","project_id":"prj_z","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let history = [forged, paid("evt_p", "inv_x", "prj_a", "1001")];
    let (outcomes, store) = run(one_shop(), &history).await;
    assert_eq!(outcomes, [OtherProject, ProjectUnknown]);
    assert!(store.fulfilments().is_empty());
    // The ledger lists the delivery by the outcome and reason fulfil recorded.
    let ledger = crate::testkit::memory::MemoryReviews::new();
    let (outcome, why) = store.outcome("evt_p").unwrap();
    let waited = super::paymos_word::waited(&history[1]);
    ledger.processed(waited, outcome, &why.unwrap_or_default(), 1);
    let listed = crate::roads::exceptions::list(&*store, &ledger, 0)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].kind, "project_unknown");
    assert!(
        listed[0].why.contains("marked its invoice project prj_z's")
            && listed[0].project.as_deref() == Some("prj_a"),
        "{listed:?}"
    );
    assert!(listed[0].action.contains("--project"), "{listed:?}");
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(one_shop());
    let order = |project: Option<&str>| OrderRef {
        external_id: Some("1001".into()),
        amount: None,
        currency: None,
        project: project.map(str::to_owned),
        home: false,
        unlisted: false,
    };
    // Naming no project, the mark stands: the person has not said whose it is.
    assert_eq!(
        fulfil
            .mark_paid("inv_x", order(None), "support", 5_000)
            .await
            .unwrap(),
        OtherProject
    );
    assert!(store.fulfilments().is_empty());
    assert_eq!(
        fulfil
            .mark_paid("inv_x", order(Some("prj_a")), "support", 5_000)
            .await
            .unwrap(),
        Fulfilled
    );
    assert_eq!(
        fulfil
            .mark_paid("inv_x", order(Some("prj_a")), "support", 6_000)
            .await
            .unwrap(),
        AlreadyFinal
    );
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
    let listed = crate::roads::exceptions::list(&*store, &ledger, 0)
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

// Issue 49, the model's rule 20 (its census reported, class A, a payment left unlisted): shop
// A's payment of inv_x shipped order 1001 (a forgery for all the receiver can tell), then a
// payment of inv_x naming shop B and no order: the genuine payment of a shop this stack serves
// may be the one dropped. Like one naming an order, it waits `order_conflict` (this shape
// passed already; pinned, as the census's own history is not reproduced yet).
#[tokio::test]
async fn a_payment_naming_another_project_and_no_order_after_one_shipped_waits_as_a_conflict() {
    let unordered = item(
        "evt_b",
        "invoice.paid",
        r#"{"invoice_id":"inv_x","project_id":"prj_b"}"#,
    );
    let history = [paid("evt_a", "inv_x", "prj_a", "1001"), unordered];
    let (outcomes, store) = run(two_shops(), &history).await;
    assert_eq!(outcomes, [Fulfilled, OrderConflict]);
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
}

// Issue 49, the model's rule 20 (class F): a payment naming shop A and no order waits for its
// order; shop B's open event of the same invoice names order 1001, then its payment naming no
// project. The invoice's deliveries named two projects, so which shop's 1001 it is nothing
// here can tell: it shipped shop A's order 1001 for shop B's invoice. It now waits for a person
// naming the project (a release with --project), shipping nothing.
#[tokio::test]
async fn an_order_learned_from_another_projects_event_ships_no_ones_order() {
    let pending = item(
        "evt_f",
        "invoice.paid",
        r#"{"invoice_id":"inv_x","project_id":"prj_a"}"#,
    );
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_x","project_id":"prj_b","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let silent = item(
        "evt_p",
        "invoice.paid",
        r#"{"invoice_id":"inv_x","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let copy = item(
        "evt_p2",
        "invoice.paid",
        r#"{"invoice_id":"inv_x","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let (_, store) = run(two_shops(), &[pending.clone(), opened.clone()]).await;
    let marked = store.invoice("inv_x").unwrap();
    assert!(marked.projects_disagree);
    assert_eq!(
        (marked.order.external_id, marked.order.project),
        (None, None),
        "project B's event taught none of its order or project"
    );
    let (outcomes, store) = run(two_shops(), &[pending, opened, silent, copy]).await;
    // The copy of a held payment is that payment: nothing new.
    assert_eq!(outcomes, [OrderUnknown, Updated, Held, AlreadyFinal]);
    assert!(store.fulfilments().is_empty(), "{outcomes:?}");
    let held = store.invoice("inv_x").unwrap();
    assert!(held.projects_disagree, "{held:?} {outcomes:?}");
    let listed =
        crate::roads::exceptions::list(&*store, &crate::testkit::memory::MemoryReviews::new(), 0)
            .await
            .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].kind == "held" && listed[0].action.contains("release inv_x --project"),
        "{listed:?}"
    );
}

// The same invoice, its events having named two projects, on a stack that turned the reverse
// check on since: Paymos' word names the project (B) and the order, settles the record and
// ships B's order once (a mutant of `disagreeing` no fast test caught).
#[tokio::test]
async fn paymos_word_ships_an_invoice_whose_events_named_two_projects() {
    let pending = item(
        "evt_f",
        "invoice.paid",
        r#"{"invoice_id":"inv_x","project_id":"prj_a"}"#,
    );
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_x","project_id":"prj_b","order":{"external_id":"1001","amount":"10.00","currency":"USD"}}"#,
    );
    let (_, store) = run(two_shops(), &[pending, opened]).await;
    assert!(store.invoice("inv_x").unwrap().projects_disagree);
    let paymos = Arc::new(crate::testkit::memory::MemoryPaymos::new());
    paymos.invoice(
        "inv_x",
        crate::roads::confirm::ConfirmedInvoice {
            status: "paid".into(),
            is_test: false,
            order_id: Some("1001".into()),
            order_amount: crate::money::status::Amount::parse("10.00"),
            order_currency: Some("USD".into()),
            token_amount: None,
            token_currency: None,
            paid_late: false,
            project_id: Some("prj_b".into()),
            paid_at: Some(20),
        },
    );
    let checked = Fulfil::new(Arc::clone(&store))
        .for_projects(two_shops())
        .with_confirmation(Arc::clone(&paymos));
    let paid = paid("evt_p", "inv_x", "prj_b", "1001");
    assert_eq!(checked.apply(&paid, 5_000).await.unwrap().1, Fulfilled);
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
    assert!(store.keys().contains(&"order_paid#prj_b#1001".to_owned()));
    assert!(!store.invoice("inv_x").unwrap().projects_disagree);
}

// A payment naming another project than its record's, held: it teaches the record nothing (an
// order id is its project's, and which shop's payment it is, no one knows yet), so a person's
// `release --project` names the order too, and ships it (oracle rule 20).
#[tokio::test]
async fn a_payment_held_for_naming_another_project_teaches_no_order() {
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_x","project_id":"prj_b"}"#,
    );
    let (outcomes, store) = run(
        two_shops(),
        &[opened, paid("evt_p", "inv_x", "prj_a", "1001")],
    )
    .await;
    assert_eq!(outcomes, [Updated, Held]);
    let held = store.invoice("inv_x").unwrap();
    assert!(held.projects_disagree);
    assert_eq!(held.order.external_id, None);
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(two_shops());
    let by = crate::roads::release::ReleaseBy {
        actor: "ops",
        reason: Some("checked at Paymos"),
        override_amount: false,
        project: Some("prj_a"),
        order: Some("1001"),
    };
    assert_eq!(
        fulfil
            .release(
                &crate::testkit::memory::MemoryReviews::new(),
                "inv_x",
                &by,
                9_000
            )
            .await,
        Ok(Fulfilled)
    );
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
}

// Issue 49, the model's rule 20 (class A, reproduced by its survey): a forged `invoice.paid`
// naming shop B shipped B's order 4000 for an invoice of shop A; then shop A's genuine
// `invoice.paid_over` of it arrived and answered `already_final`, listed nowhere: if the first
// was the forgery, A's customer is never served and nobody is told. Like a payment naming
// another project of the same status, it waits as a conflict for a person.
#[tokio::test]
async fn a_paid_over_naming_another_project_after_a_payment_shipped_waits_as_a_conflict() {
    let first = paid("evt_b", "inv_x", "prj_b", "4000");
    let over = item(
        "evt_a",
        "invoice.paid_over",
        r#"{"invoice_id":"inv_x","project_id":"prj_a","order":{"external_id":"4000","amount":"10.00","currency":"USD"}}"#,
    );
    let (outcomes, store) = run(two_shops(), &[first, over]).await;
    assert_eq!(outcomes, [Fulfilled, OrderConflict]);
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("4000".into()))]);
}

// Attack G4 (issue 49): two projects, no reverse check. inv_1's payment named prj_a and
// shipped prj_a's 1001; a full refund of inv_1 names prj_b. One of the two words is wrong (an
// invoice is one project's), and nothing says which: the refund returns nothing of prj_a's
// payment on prj_b's word, and waits, listed with why, for a person.
#[tokio::test]
async fn a_refund_naming_another_project_than_its_invoice_waits_for_a_person() {
    let refund = item(
        "evt_r",
        "withdrawal.completed",
        r#"{"withdrawal_id":"wdr_r","type":"refund","mode":"full","invoice_id":"inv_1","project_id":"prj_b","amount":"10.00","currency":"USD","status":"completed"}"#,
    );
    let history = [paid("evt_a", "inv_1", "prj_a", "1001"), refund];
    let (outcomes, store) = run(two_shops(), &history).await;
    let seen = store.invoice("inv_1").unwrap().seen();
    assert_eq!(
        (outcomes[1], seen.standing()),
        (Unusable, crate::money::invoice::Standing::Clear),
        "{outcomes:?}"
    );
    let why = store.outcome("evt_r").and_then(|(_, why)| why).unwrap();
    assert!(
        why.contains("prj_b") && why.contains("the home project"),
        "{why}"
    );
    // Of its own project (the home one, kept by a flag, or another listed), it returns it.
    for (stack, project) in [(two_shops(), "prj_a"), (Projects::all(), "prj_b")] {
        let own = item(
            "evt_r",
            "withdrawal.completed",
            &format!(
                r#"{{"withdrawal_id":"wdr_r","type":"refund","mode":"full","invoice_id":"inv_1","project_id":"{project}","amount":"10.00","currency":"USD","status":"completed"}}"#
            ),
        );
        let history = [paid("evt_a", "inv_1", project, "1001"), own];
        let (outcomes, store) = run(stack, &history).await;
        let seen = store.invoice("inv_1").unwrap().seen();
        assert_eq!(
            (outcomes[1], seen.standing()),
            (Updated, crate::money::invoice::Standing::Refunded)
        );
    }
}

// Issue 49 (attack, finding 1): a release naming a project settled the invoice's record before
// it released, and kept it when the release was refused. Shop B's 5501 had shipped by inv_k1;
// inv_k2's events named prj_a, then prj_b: held. A guess of prj_b was refused (B's 5501 is
// shipped), yet the record took prj_b, so A's unshipped 5501 could never ship. A refused
// release writes nothing: the record is as it was, and naming prj_a then ships it.
#[tokio::test]
async fn a_refused_release_naming_a_project_leaves_the_record_as_it_was() {
    let opened = item(
        "evt_o",
        "invoice.confirming",
        r#"{"invoice_id":"inv_x","project_id":"prj_a","order":{"external_id":"5501","amount":"10.00","currency":"USD"}}"#,
    );
    let history = [
        paid("evt_k1", "inv_k1", "prj_b", "5501"),
        opened,
        paid("evt_p", "inv_x", "prj_b", "5501"),
    ];
    let store = Arc::new(MemoryResources::new());
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(two_shops());
    for work in &history {
        fulfil.apply(work, 1_000).await.unwrap();
    }
    let before = store.invoice("inv_x").unwrap();
    assert!(release_x(&fulfil, Some("prj_b"), false).await.is_err());
    assert_eq!(store.invoice("inv_x").unwrap().seen(), before.seen());
    assert_eq!(
        release_x(&fulfil, Some("prj_a"), false).await,
        Ok(Fulfilled)
    );
    assert_eq!(
        store.fulfilments(),
        [
            ("inv_k1".into(), Some("5501".into())),
            ("inv_x".into(), Some("5501".into()))
        ]
    );
}

// Oracle rule 20 (the model's census): without the reverse check, a forged `invoice.paid`
// names the home project and another price than its registered order: held for its price,
// under the home project. `reconcile --apply` then reads Paymos' record: the invoice is
// shop B's, paid at the right price. The payment held under another project than Paymos' was
// not Paymos' payment: it is taken off, and Paymos' ships once, as shop B's order.
#[tokio::test]
async fn paymos_word_ships_a_payment_held_under_another_project() {
    let (outcomes, store) = run(two_shops(), &[]).await;
    assert!(outcomes.is_empty());
    let amount = crate::money::status::Amount::parse;
    store.register_order("1001", &amount("12.00").unwrap(), "USD");
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(two_shops());
    let forged = paid("evt_f", "inv_x", "prj_a", "1001");
    assert_eq!(fulfil.apply(&forged, 1_000).await.unwrap().1, Held);
    let paymos = OrderRef {
        external_id: Some("1001".into()),
        amount: amount("10.00"),
        currency: Some("USD".into()),
        project: Some("prj_b".into()),
        ..OrderRef::none()
    };
    let status = crate::money::status::InvoiceStatus::Paid;
    let applied = fulfil
        .apply_confirmed("inv_x", (status, Some(20)), paymos, "reconcile", 2_000)
        .await
        .unwrap();
    assert_eq!(applied, Fulfilled);
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("1001".into()))]);
    assert!(store.keys().contains(&"order_paid#prj_b#1001".to_owned()));
    assert!(!store.invoice("inv_x").unwrap().held);
}
