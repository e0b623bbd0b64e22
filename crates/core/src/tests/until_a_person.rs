//! What waits for a person stays listed until someone acts (issue 49, the attack's F6 and F7):
//! a 404 at Paymos is no refutation (the key may not read the project), and a final
//! confirmation that contradicts a credit already made is no copy of it. Each test asserts the
//! business outcome: what was credited, what `exceptions` lists and with which way out.

use std::sync::Arc;

use crate::money::change::{Applied, Projects};
use crate::roads::exceptions::{list, recheck, resolve};
use crate::roads::fulfil::Fulfil;
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
    let fulfil = Fulfil::new(Arc::clone(&store))
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
