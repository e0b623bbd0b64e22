//! What waits for a person stays listed until someone acts (issue 49, the attack's F6 and F7):
//! a 404 at Paymos is no refutation (the key may not read the project), and a final
//! confirmation that contradicts a credit already made is no copy of it. Each test asserts the
//! business outcome: what was credited, what `exceptions` lists and with which way out.

use std::sync::Arc;

use crate::money::change::{Applied, Projects};
use crate::roads::exceptions::{list, recheck, resolve};
use crate::testkit::memory::{MemoryPaymos, MemoryResources, MemoryReviews};
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

use super::paymos_word::waited;
use Applied::*;

const NOW_MS: u64 = 1_800_000_000_000;

fn item(event_id: &str, event_type: &str, data: &str) -> WorkItem {
    WorkItem {
        event_id: event_id.to_owned(),
        environment: Some(Environment::Live),
        body: format!(
            r#"{{"event_id":"{event_id}","event_type":"{event_type}","version":1,"occurred_at":100,"data":{data}}}"#
        )
        .into_bytes(),
        received_at_ms: Some(100_000),
    }
}

/// prj_b's final confirmation of `deposit_id` crediting payer 42 9 USDT.
fn deposit_of_b(event_id: &str, deposit_id: &str) -> WorkItem {
    item(
        event_id,
        "payment_channel.deposit.confirmed",
        &format!(
            r#"{{"id":"{deposit_id}","is_final":true,"payment_channel_external_id":"42","net":"9","currency":"USDT","project_id":"prj_b"}}"#
        ),
    )
}

/// prj_b's completed full refund of inv_b's 10 USDT.
fn refund_of_b(event_id: &str) -> WorkItem {
    item(
        event_id,
        "withdrawal.completed",
        r#"{"withdrawal_id":"wdr_b","type":"refund","invoice_id":"inv_b","mode":"full","amount":"10","currency":"USDT","project_id":"prj_b","completed_at":90}"#,
    )
}

/// `recheck` of everything waiting on a live stack of prj_a and prj_b.
async fn recheck_all(
    store: &MemoryResources,
    reviews: &MemoryReviews,
    paymos: &MemoryPaymos,
) -> Vec<(String, String)> {
    let applying = crate::money::change::Applying {
        environment: Environment::Live,
        projects: Projects::parse("prj_a,prj_b"),
    };
    let effect = crate::money::effect::RecordFulfilment;
    recheck(store, reviews, paymos, &effect, applying, None, NOW_MS)
        .await
        .expect("memory")
        .into_iter()
        .map(|r| (r.event_id, r.outcome.as_str().to_owned()))
        .collect()
}

// The attack's F6 (a stack of prj_a and prj_b with the check): prj_b's deposit and refund, both
// 404 at Paymos (forged, or of a project the key does not read), waited `unconfirmed`, rightly.
// `recheck` then "refuted" both, exit 0, and they left `exceptions`: nothing credited, the
// refund never recorded, on the word of a 404 that says nothing of either. As a payment's does,
// each now stays listed, its recheck says it still waits, and a person who checked at Paymos
// resolves it (`exceptions --resolve`).
#[tokio::test]
async fn a_deposit_or_refund_paymos_does_not_know_waits_for_a_person_through_its_recheck() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store))
        .with_confirmation(Arc::clone(&paymos))
        .for_projects(Projects::parse("prj_a,prj_b"));
    let reviews = MemoryReviews::new();
    for work in [deposit_of_b("evt_d", "pcd_b"), refund_of_b("evt_r")] {
        assert_eq!(fulfil.apply(&work, NOW_MS).await.unwrap().1, Unconfirmed);
        let (outcome, why) = store.outcome(&work.event_id).unwrap();
        assert!(
            why.as_deref().unwrap_or_default().contains("404"),
            "{why:?}"
        );
        reviews.processed(waited(&work), outcome, &why.unwrap_or_default(), 1);
    }
    let rechecked = recheck_all(&store, &reviews, &paymos).await;
    assert_eq!(
        rechecked,
        [
            ("evt_r".to_owned(), "unconfirmed".to_owned()),
            ("evt_d".to_owned(), "unconfirmed".to_owned())
        ],
        "a 404 refutes nothing"
    );
    assert_eq!(reviews.resolved("evt_d"), None);
    assert_eq!(reviews.resolved("evt_r"), None);
    let listed = list(&*store, &reviews, 0).await.unwrap();
    for (resource, event) in [("pcd_b", "evt_d"), ("wdr_b", "evt_r")] {
        let exception = listed
            .iter()
            .find(|e| e.resource_id.as_deref() == Some(resource))
            .unwrap_or_else(|| panic!("{resource} is not listed: {listed:?}"));
        assert_eq!(exception.kind, "unconfirmed");
        assert!(exception.why.contains("404"), "{exception:?}");
        assert!(
            exception.action.contains(&format!("recheck {resource}"))
                && exception.action.contains("at Paymos")
                && exception
                    .action
                    .contains(&format!("exceptions --resolve {event}")),
            "{exception:?}"
        );
    }
    assert!(store.balances().is_empty(), "nothing credited");
    // Paymos answers now (the key reads prj_b): the deposit credits once, the refund lands.
    paymos.deposit(
        "pcd_b",
        crate::roads::confirm::ConfirmedDeposit {
            status: "confirmed".into(),
            is_final: true,
            is_test: false,
            payer: "42".into(),
            net: crate::money::status::Amount::parse("9"),
            currency: "USDT".into(),
            project_id: Some("prj_b".into()),
        },
    );
    let rechecked = recheck_all(&store, &reviews, &paymos).await;
    assert!(
        rechecked.contains(&("evt_d".to_owned(), "credited".to_owned())),
        "{rechecked:?}"
    );
    assert_eq!(store.balances().len(), 1);
    // A person who found the refund forged at Paymos takes it off the list.
    assert_eq!(
        resolve(&reviews, "evt_r", None, "alice", NOW_MS).await,
        Ok(Unconfirmed)
    );
    assert!(list(&*store, &reviews, 0).await.unwrap().is_empty());
}

/// A final confirmation of pcd_x by `event_id`: `net` USDT to `payer` of `project`.
fn confirmed(event_id: &str, net: &str, payer: &str, project: &str) -> WorkItem {
    item(
        event_id,
        "payment_channel.deposit.confirmed",
        &format!(
            r#"{{"id":"pcd_x","is_final":true,"gross":"50.00","payment_channel_external_id":"{payer}","net":"{net}","currency":"USDT","project_id":"{project}"}}"#
        ),
    )
}

// The attack's F7 (two projects, no check): pcd_x credited 49 to payer 42 of prj_a, then final
// confirmations of it saying net 99, payer 43, project prj_b: each was `already_final`, listed
// nowhere, and the difference vanished. A webhook's `data` is a snapshot of the deposit: one
// that contradicts the credit made credits nothing more and waits for a person with both
// values; a plain copy stays `already_final`, unlisted.
#[tokio::test]
async fn a_final_confirmation_contradicting_the_credit_waits_for_a_person() {
    let store = Arc::new(MemoryResources::new());
    let fulfil =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let reviews = MemoryReviews::new();
    let history = [
        (confirmed("evt_1", "49.00", "42", "prj_a"), Credited),
        (confirmed("evt_copy", "49", "42", "prj_a"), AlreadyFinal),
        (confirmed("evt_net", "99.00", "42", "prj_a"), Unconfirmed),
        (confirmed("evt_payer", "49.00", "43", "prj_a"), Unconfirmed),
        (
            confirmed("evt_project", "49.00", "42", "prj_b"),
            Unconfirmed,
        ),
    ];
    let mut outcomes = Vec::new();
    for (work, _) in &history {
        outcomes.push(fulfil.apply(work, NOW_MS).await.unwrap().1);
        if let Some((outcome @ Unconfirmed, why)) = store.outcome(&work.event_id) {
            reviews.processed(waited(work), outcome, &why.unwrap_or_default(), 1);
        }
    }
    let expected: Vec<_> = history.iter().map(|(_, o)| *o).collect();
    assert_eq!(outcomes, expected);
    let balances: Vec<_> = store.balances().into_iter().collect();
    assert_eq!(
        balances,
        [((None, "42".into(), "USDT".into()), "49".into())],
        "credited once, as first"
    );
    // The review note the hand-off publishes (Payment Needs Review) names the deposit.
    let note = store
        .fields(&crate::money::write::Key::state(
            crate::money::write::review_key("evt_net"),
        ))
        .unwrap_or_default();
    assert_eq!(
        note.get(&crate::money::write::Field::ResourceId),
        Some(&crate::money::write::Value::text("pcd_x")),
        "{note:?}"
    );
    let listed = list(&*store, &reviews, 0).await.unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
    for (event, said, credited) in [
        ("evt_net", "99.00", "49.00"),
        ("evt_payer", "43", "42"),
        ("evt_project", "prj_b", "home project"),
    ] {
        let e = listed
            .iter()
            .find(|e| e.event_id.as_deref() == Some(event))
            .unwrap_or_else(|| panic!("{event} not listed: {listed:?}"));
        assert_eq!(e.kind, "unconfirmed");
        assert!(
            e.why.contains(said) && e.why.contains(credited) && e.why.contains("evt_1"),
            "{e:?}"
        );
        assert!(
            e.action.contains("recheck pcd_x")
                && e.action.contains("at Paymos")
                && e.action.contains(&format!("exceptions --resolve {event}")),
            "{e:?}"
        );
    }
}

// With the reverse check: what was credited is a deposit as some road had it; a delivery that
// Paymos now confirms otherwise (a stack that turned the check on later) credits nothing more
// and waits, also through its recheck; one Paymos confirms as credited is a plain copy.
#[tokio::test]
async fn with_the_check_a_credit_paymos_contradicts_is_never_credited_twice() {
    let store = Arc::new(MemoryResources::new());
    let unchecked =
        crate::tests::one_shop(Arc::clone(&store)).for_projects(Projects::parse("prj_a,prj_b"));
    let first = confirmed("evt_1", "49.00", "42", "prj_a");
    assert_eq!(unchecked.apply(&first, NOW_MS).await.unwrap().1, Credited);
    let paymos = Arc::new(MemoryPaymos::new());
    let at_paymos = |net: &str| crate::roads::confirm::ConfirmedDeposit {
        status: "confirmed".into(),
        is_final: true,
        is_test: false,
        payer: "42".into(),
        net: crate::money::status::Amount::parse(net),
        currency: "USDT".into(),
        project_id: Some("prj_a".into()),
    };
    paymos.deposit("pcd_x", at_paymos("99.00"));
    let checked = crate::tests::one_shop(Arc::clone(&store))
        .with_confirmation(Arc::clone(&paymos))
        .for_projects(Projects::parse("prj_a,prj_b"));
    let later = confirmed("evt_99", "99.00", "42", "prj_a");
    assert_eq!(checked.apply(&later, NOW_MS).await.unwrap().1, Unconfirmed);
    let (outcome, why) = store.outcome("evt_99").unwrap();
    let why = why.unwrap_or_default();
    assert!(why.contains("99.00") && why.contains("49.00"), "{why}");
    let reviews = MemoryReviews::new();
    reviews.processed(waited(&later), outcome, &why, 1);
    let rechecked = recheck_all(&store, &reviews, &paymos).await;
    assert_eq!(
        rechecked,
        [("evt_99".to_owned(), "unconfirmed".to_owned())],
        "Paymos' 99 is not what was credited: a person settles it"
    );
    assert_eq!(reviews.resolved("evt_99"), None);
    assert_eq!(list(&*store, &reviews, 0).await.unwrap().len(), 1);
    // Paymos as credited: a delivery saying so is a plain copy.
    paymos.deposit("pcd_x", at_paymos("49"));
    let copy = confirmed("evt_copy", "49", "42", "prj_a");
    assert_eq!(checked.apply(&copy, NOW_MS).await.unwrap().1, AlreadyFinal);
    let balances: Vec<_> = store.balances().into_iter().collect();
    assert_eq!(
        balances,
        [((None, "42".into(), "USDT".into()), "49".into())],
        "credited once"
    );
}

// Issue 49 (A7): a payment first unconfirmed by a 404 kept "Paymos does not know it (404)" in
// `exceptions` after `recheck` found the invoice paid for another order: a person read the old
// reason and went looking for a forgery. The line says the latest reason; a recheck that finds
// the same reason again writes nothing.
#[tokio::test]
async fn an_unconfirmed_payment_is_listed_with_the_reason_its_latest_recheck_found() {
    let store = Arc::new(MemoryResources::new());
    let paymos = Arc::new(MemoryPaymos::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store))
        .with_confirmation(Arc::clone(&paymos))
        .for_projects(Projects::parse("prj_a,prj_b"));
    let reviews = MemoryReviews::new();
    let paid = item(
        "evt_p",
        "invoice.paid",
        r#"{"invoice_id":"inv_p","project_id":"prj_a","order":{"external_id":"o-mine","amount":"10","currency":"USDT"}}"#,
    );
    assert_eq!(fulfil.apply(&paid, NOW_MS).await.unwrap().1, Unconfirmed);
    let (outcome, why) = store.outcome("evt_p").unwrap();
    reviews.processed(waited(&paid), outcome, &why.unwrap_or_default(), 1);
    let why_listed = async || {
        let listed = list(&*store, &reviews, 0).await.unwrap();
        let found = listed
            .iter()
            .find(|e| e.event_id.as_deref() == Some("evt_p"))
            .unwrap_or_else(|| panic!("evt_p is not listed: {listed:?}"));
        assert_eq!(found.kind, "unconfirmed");
        found.why.clone()
    };
    assert!(why_listed().await.contains("404"));

    paymos.invoice(
        "inv_p",
        crate::roads::confirm::ConfirmedInvoice {
            status: "paid".into(),
            is_test: false,
            order_id: Some("o-other".into()),
            order_amount: crate::money::status::Amount::parse("10"),
            order_currency: Some("USDT".into()),
            token_amount: None,
            token_currency: None,
            paid_late: false,
            paid_at: None,
            project_id: Some("prj_a".into()),
        },
    );
    let rechecked = recheck_all(&store, &reviews, &paymos).await;
    assert_eq!(rechecked, [("evt_p".to_owned(), "unconfirmed".to_owned())]);
    let why = why_listed().await;
    assert!(
        why.contains("order o-mine, Paymos' invoice order o-other") && !why.contains("404"),
        "{why}"
    );
    assert_eq!(reviews.reasons_noted(), 1);
    recheck_all(&store, &reviews, &paymos).await;
    assert_eq!(
        reviews.reasons_noted(),
        1,
        "the same reason is not written again"
    );
}
