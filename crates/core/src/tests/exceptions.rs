//! The operator's use cases on the in-memory ports: what `exceptions` lists and what each way
//! out (`release`, `recheck`) does, in milliseconds.

use std::sync::Arc;

use crate::money::change::Applied;
use crate::money::effect::RecordFulfilment;
use crate::money::status::Amount;
use crate::roads::confirm::ConfirmedInvoice;
use crate::roads::exceptions::{list, recheck, release};
use crate::roads::ingest::Delivery;
use crate::roads::release::{ReleaseBy, ReleaseError};
use crate::testkit::memory::{MemoryPaymos, MemoryResources, MemoryReviews};
use crate::wire::envelope::Category;
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

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
    let (_, applied) = crate::tests::one_shop(Arc::clone(&store))
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
        project: None,
        order: None,
    }
}

#[tokio::test]
async fn every_payment_that_waits_is_listed_with_its_way_out_and_nothing_else() {
    let store = held().await;
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivery("evt_u", "inv_u"),
        Applied::Unconfirmed,
        "invoice.paid: Paymos does not know it",
        5,
    );
    reviews.processed(
        delivery("evt_x", "inv_x"),
        Applied::Unusable,
        "no invoice_id",
        6,
    );
    reviews.processed(delivery("evt_f", "inv_f"), Applied::Fulfilled, "", 7);
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
    assert!(listed[0].why.starts_with("2 messages in"));
    assert!(listed[1].action.contains("paymos-inbox recheck inv_u"));
    assert_eq!(
        listed[2].why, "invoice.paid: no invoice_id",
        "the type named once"
    );
    // Only a person can apply an unusable delivery: the way out prints its kept body (under
    // its environment's key), never a recheck. A payment's way out on a stack with the reverse
    // check is Paymos' own invoice: a word without the API ships nothing there (issue 49, H1:
    // it suggested the word alone, and a forged payment dated hours ahead shipped on it).
    assert_eq!(
        listed[2].action,
        "with the reverse check, `paymos-inbox mark-paid inv_x --actor <you>` given the API's key applies Paymos' own invoice (a word without it ships nothing there); without it, print its body with `paymos-inbox exceptions --body evt_x --environment live`, apply it by hand; then `paymos-inbox exceptions --resolve evt_x --actor <you> --reason \"…\"`"
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
        Applied::Unconfirmed,
        "not at Paymos yet",
        5,
    );
    let applied = release(
        store.as_ref(),
        &reviews,
        "inv_held",
        &alice(),
        &RecordFulfilment,
        NOW_MS,
    )
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
    let again = release(
        store.as_ref(),
        &reviews,
        "inv_held",
        &alice(),
        &RecordFulfilment,
        NOW_MS,
    )
    .await;
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
    reviews.processed(
        delivery("evt_p", "inv_p"),
        Applied::Unconfirmed,
        "not paid yet",
        5,
    );
    reviews.processed(
        delivery("evt_w", "inv_w"),
        Applied::Unconfirmed,
        "not paid yet",
        6,
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_p", at_paymos("paid", "inv_p"));
    paymos.invoice("inv_w", at_paymos("awaiting_payment", "inv_w"));
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    let outcomes: Vec<_> = rechecked
        .iter()
        .map(|r| (r.resource_id.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(outcomes, [("inv_p", "fulfilled"), ("inv_w", "unconfirmed")]);
    // What still waits is what the command line's exit code counts.
    assert!(!rechecked[0].outcome.waits() && rechecked[1].outcome.waits());
    assert_eq!(
        rechecked[1].outcome.reason(),
        Some("still awaiting_payment at Paymos")
    );
    assert_eq!(store.fulfilled(), ["inv_p"]);
    assert_eq!(reviews.resolved("evt_p").unwrap().0, "rechecked_fulfilled");
    assert_eq!(reviews.resolved("evt_w"), None);
    // Run again: only what still waits is read again.
    let again = recheck_live(&store, &reviews, &paymos, None).await;
    assert_eq!(again.len(), 1);
}

#[tokio::test]
async fn a_second_payment_is_listed_to_refund_and_an_invoice_only_a_delivery_names_is_never_released()
 {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
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

    // Only an unconfirmed delivery told us of inv_new: a forgery would look the same, so it is
    // never released (recheck applies it once Paymos shows it paid), and nothing ships.
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivery("evt_n", "inv_new"),
        Applied::Unconfirmed,
        "not at Paymos yet",
        5,
    );
    let by = ReleaseBy {
        actor: "alice",
        reason: None,
        override_amount: false,
        project: None,
        order: None,
    };
    let refused = release(
        store.as_ref(),
        &reviews,
        "inv_new",
        &by,
        &RecordFulfilment,
        NOW_MS,
    )
    .await;
    assert!(
        matches!(&refused, Err(ReleaseError::NotReleasable(why)) if why.contains("recheck inv_new")),
        "{refused:?}"
    );
    assert!(!store.fulfilled().contains(&"inv_new".to_owned()));
}

/// A delivery of `event_type` about `resource` with `data`, as ingest records it.
fn delivered(
    event_id: &str,
    event_type: &str,
    resource: &str,
    data: &serde_json::Value,
) -> Delivery {
    let body = serde_json::json!({"event_id": event_id, "event_type": event_type, "version": 1,
        "occurred_at": 1_700_000_000u64, "data": data});
    Delivery {
        event_type: event_type.into(),
        category: Category::of(event_type),
        resource_id: Some(resource.into()),
        body: body.to_string().into_bytes(),
        ..delivery(event_id, resource)
    }
}

/// The work item of a delivery (as the queue carries it).
fn item_of(d: &Delivery) -> WorkItem {
    WorkItem {
        event_id: d.event_id.clone(),
        environment: Some(Environment::Live),
        body: d.body.clone(),
        received_at_ms: Some(NOW_MS),
    }
}

/// `recheck` as the command line runs it on a live stack, with the recording effect, now.
async fn recheck_live(
    store: &MemoryResources,
    reviews: &MemoryReviews,
    paymos: &MemoryPaymos,
    resource: Option<&str>,
) -> Vec<crate::roads::exceptions::Rechecked> {
    recheck(
        store,
        reviews,
        paymos,
        &RecordFulfilment,
        Environment::Live,
        resource,
        NOW_MS,
    )
    .await
    .unwrap()
}

// The attack on `dev` (G7): a recheck that applied a payment Paymos has paid late answered
// `paid_late` and exited 0, though the payment then waits for a person (`exceptions` lists it
// PAID_LATE) and `recheck --help` says "exit 1 while something still waits". What a recheck
// applied to wait for a person counts as waiting.
#[tokio::test]
async fn a_recheck_that_applies_a_payment_to_wait_for_a_person_still_waits() {
    let store = MemoryResources::new();
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivery("evt_l", "inv_l"),
        Applied::Unconfirmed,
        "not paid yet",
        5,
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_l",
        ConfirmedInvoice {
            paid_late: true,
            ..at_paymos("expired", "inv_l")
        },
    );
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    assert_eq!(rechecked[0].outcome.as_str(), "paid_late");
    assert!(rechecked[0].outcome.waits(), "{rechecked:?}");
    assert_eq!(store.fulfilled(), Vec::<String>::new());
}

fn at_paymos(status: &str, invoice: &str) -> ConfirmedInvoice {
    ConfirmedInvoice {
        status: status.into(),
        is_test: false,
        order_id: Some(format!("o-{invoice}")),
        order_amount: Amount::parse("10.00"),
        order_currency: Some("USD".into()),
        token_amount: None,
        token_currency: None,
        paid_late: false,
        project_id: None,
        paid_at: None,
    }
}

/// The listed exception about `resource`.
fn listed_about<'a>(listed: &'a [crate::roads::exceptions::Exception], resource: &str) -> &'a str {
    listed
        .iter()
        .find(|e| e.resource_id.as_deref() == Some(resource))
        .map_or_else(
            || panic!("{resource} is not listed: {listed:?}"),
            |e| e.action.as_str(),
        )
}

// Issue 28, case 4: an unconfirmed closure is not a payment.
#[tokio::test]
async fn an_unconfirmed_closure_is_rechecked_and_never_released() {
    let store = Arc::new(MemoryResources::new());
    let order =
        serde_json::json!({"external_id": "o-inv_open", "amount": "10.00", "currency": "USD"});
    let confirming = delivered(
        "evt_o",
        "invoice.confirming",
        "inv_open",
        &serde_json::json!({"invoice_id": "inv_open", "order": order}),
    );
    crate::tests::one_shop(Arc::clone(&store))
        .apply(&item_of(&confirming), NOW_MS)
        .await
        .unwrap();
    // Paymos' API lags: the closures could not be confirmed yet.
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivered(
            "evt_gone",
            "invoice.expired",
            "inv_gone",
            &serde_json::json!({"invoice_id": "inv_gone", "order": {"external_id": "o-inv_gone", "amount": "10.00", "currency": "USD"}}),
        ), Applied::Unconfirmed,
        "still awaiting_payment at Paymos after 3 receives",
        5,
    );
    reviews.processed(
        delivered(
            "evt_cancel",
            "invoice.cancelled",
            "inv_open",
            &serde_json::json!({"invoice_id": "inv_open", "order": order}),
        ),
        Applied::Unconfirmed,
        "still confirming at Paymos after 3 receives",
        6,
    );
    let listed = list(store.as_ref(), &reviews, 0).await.unwrap();
    for invoice in ["inv_gone", "inv_open"] {
        let action = listed_about(&listed, invoice);
        assert!(
            action.contains(&format!("paymos-inbox recheck {invoice}")),
            "{action}"
        );
        assert!(
            !action.contains("release"),
            "a closure is no payment to release: {action}"
        );
        let answer = release(
            store.as_ref(),
            &reviews,
            invoice,
            &alice(),
            &RecordFulfilment,
            NOW_MS,
        )
        .await;
        assert!(
            matches!(&answer, Err(ReleaseError::NotReleasable(why)) if why.contains("not a payment") && why.contains("recheck")),
            "{invoice}: {answer:?}"
        );
    }
    assert!(store.fulfilled().is_empty(), "nothing shipped");
    assert!(store.invoice("inv_gone").is_none(), "nothing invented");
    assert_eq!(
        reviews.resolved("evt_cancel"),
        None,
        "still waits for its recheck"
    );
    // Paymos answers now: the closures are applied as the webhook would have.
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_gone", at_paymos("expired", "inv_gone"));
    paymos.invoice("inv_open", at_paymos("cancelled", "inv_open"));
    let rechecked = recheck_live(store.as_ref(), &reviews, &paymos, None).await;
    assert_eq!(rechecked.len(), 2, "{rechecked:?}");
    assert_eq!(
        store.invoice("inv_open").unwrap().status.map(|(s, _)| s),
        Some(crate::money::status::InvoiceStatus::Cancelled)
    );
    assert_eq!(
        store.invoice("inv_gone").unwrap().status.map(|(s, _)| s),
        Some(crate::money::status::InvoiceStatus::Expired)
    );
    assert!(store.fulfilled().is_empty());
    assert!(list(store.as_ref(), &reviews, 0).await.unwrap().is_empty());
}

fn deposit_data(pcd: &str) -> serde_json::Value {
    serde_json::json!({"id": pcd, "is_final": true, "payment_channel_external_id": "c-1",
        "net": "5.00", "currency": "USDT"})
}

fn deposit_at_paymos() -> crate::roads::confirm::ConfirmedDeposit {
    crate::roads::confirm::ConfirmedDeposit {
        status: "confirmed".into(),
        is_final: true,
        is_test: false,
        payer: "c-1".into(),
        net: Amount::parse("5"),
        currency: "USDT".into(),
        project_id: None,
    }
}

fn withdrawal_at_paymos(
    invoice: Option<&str>,
    full: Option<bool>,
    amount: &str,
) -> crate::roads::confirm::ConfirmedWithdrawal {
    crate::roads::confirm::ConfirmedWithdrawal {
        status: "completed".into(),
        is_test: false,
        invoice_id: invoice.map(str::to_owned),
        full,
        amount: Amount::parse(amount),
        currency: Some("USDT".into()),
        project_id: None,
        completed_at: None,
    }
}

// Issue 28, case 5: deposits and payouts that Paymos' API could not confirm have a way out.
#[tokio::test]
async fn unconfirmed_deposits_and_payouts_are_rechecked_and_a_deposit_credits_once() {
    let store = Arc::new(MemoryResources::new());
    let reviews = MemoryReviews::new();
    let why = "still confirming at Paymos after 3 receives";
    let deposit = delivered(
        "evt_d",
        "payment_channel.deposit.confirmed",
        "pcd_1",
        &deposit_data("pcd_1"),
    );
    reviews.processed(deposit.clone(), Applied::Unconfirmed, why, 5);
    reviews.processed(
        delivered(
            "evt_forged",
            "payment_channel.deposit.confirmed",
            "pcd_forged",
            &deposit_data("pcd_forged"),
        ),
        Applied::Unconfirmed,
        why,
        6,
    );
    reviews.processed(
        delivered(
            "evt_p",
            "withdrawal.completed",
            "wdr_p",
            &serde_json::json!({"withdrawal_id": "wdr_p", "type": "payout", "amount": "7", "currency": "USDT"}),
        ), Applied::Unconfirmed,
        why,
        7,
    );
    let listed = list(store.as_ref(), &reviews, 0).await.unwrap();
    for resource in ["pcd_1", "pcd_forged", "wdr_p"] {
        let action = listed_about(&listed, resource);
        assert!(
            action.contains(&format!("paymos-inbox recheck {resource}"))
                && !action.contains("release"),
            "{resource}: {action}"
        );
    }
    let paymos = MemoryPaymos::new();
    paymos.deposit("pcd_1", deposit_at_paymos());
    paymos.withdrawal("wdr_p", withdrawal_at_paymos(None, None, "7"));
    let rechecked = recheck_live(store.as_ref(), &reviews, &paymos, Some("pcd_1")).await;
    let outcomes: Vec<_> = rechecked.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["credited"], "{rechecked:?}");
    // Paymos' net, as Paymos writes it.
    let credited = store.credits("c-1", "USDT");
    assert_eq!(credited.len(), 1, "{credited:?}");
    assert!(credited[0].same_value(&Amount::parse("5.00").unwrap()));
    assert_eq!(reviews.resolved("evt_d").unwrap().0, "rechecked_credited");
    // Once: a second recheck finds nothing of it, and the same deposit through a second
    // endpoint credits nothing more.
    assert!(
        recheck_live(store.as_ref(), &reviews, &paymos, Some("pcd_1"))
            .await
            .is_empty()
    );
    let second_endpoint = Delivery {
        event_id: "evt_d2".into(),
        body: String::from_utf8(deposit.body.clone())
            .unwrap()
            .replace("evt_d", "evt_d2")
            .into_bytes(),
        ..deposit
    };
    let (_, again) = crate::tests::one_shop(Arc::clone(&store))
        .apply(&item_of(&second_endpoint), NOW_MS)
        .await
        .unwrap();
    assert_eq!(again, Applied::AlreadyFinal);
    assert_eq!(store.credits("c-1", "USDT").len(), 1, "credited once");
    // The rest: the payout is applied; the deposit Paymos does not know (a 404: forged, or of
    // a project the key does not read) credits nothing and waits for a person who checked.
    let rest = recheck_live(store.as_ref(), &reviews, &paymos, None).await;
    let outcomes: Vec<_> = rest
        .iter()
        .map(|r| (r.event_id.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [("evt_forged", "unconfirmed"), ("evt_p", "updated")]
    );
    assert_eq!(
        store.withdrawal("wdr_p"),
        Some(crate::money::status::WithdrawalStatus::Completed)
    );
    assert!(store.credits("c-1", "USDT").len() == 1);
    let listed = list(store.as_ref(), &reviews, 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed_about(&listed, "pcd_forged").contains("exceptions --resolve evt_forged"),
        "{listed:?}"
    );
}

/// An unconfirmed `withdrawal.completed` refunding `invoice` (`mode`, `amount`).
fn refund_waiting(reviews: &MemoryReviews, invoice: &str, mode: &str, amount: &str) {
    reviews.processed(
        delivered(
            "evt_r",
            "withdrawal.completed",
            "wdr_r",
            &serde_json::json!({"withdrawal_id": "wdr_r", "type": "refund", "invoice_id": invoice,
                "mode": mode, "amount": amount, "currency": "USDT"}),
        ),
        Applied::Unconfirmed,
        "still processing at Paymos after 3 receives",
        5,
    );
}

// Issue 28, case 5: a refund whose reverse check lags keeps its invoice from shipping.
#[tokio::test]
async fn a_refund_waiting_unconfirmed_blocks_the_release_of_its_invoice_until_it_is_rechecked() {
    let store = held().await;
    let reviews = MemoryReviews::new();
    refund_waiting(&reviews, "inv_held", "full", "12.00");
    let listed = list(store.as_ref(), &reviews, 0).await.unwrap();
    let held_action = listed_about(&listed, "inv_held");
    assert!(
        held_action.contains("paymos-inbox recheck wdr_r") && !held_action.contains("release"),
        "{held_action}"
    );
    let refund_action = listed_about(&listed, "wdr_r");
    assert!(
        refund_action.contains("paymos-inbox recheck wdr_r") && !refund_action.contains("release"),
        "{refund_action}"
    );
    let answer = release(
        store.as_ref(),
        &reviews,
        "inv_held",
        &alice(),
        &RecordFulfilment,
        NOW_MS,
    )
    .await;
    assert!(
        matches!(&answer, Err(ReleaseError::NotReleasable(why)) if why.contains("recheck wdr_r")),
        "{answer:?}"
    );
    assert!(store.fulfilled().is_empty());
    // Paymos confirms the full refund: it is recorded on the invoice, which leaves the list.
    let paymos = MemoryPaymos::new();
    paymos.withdrawal(
        "wdr_r",
        withdrawal_at_paymos(Some("inv_held"), Some(true), "12"),
    );
    let rechecked = recheck_live(store.as_ref(), &reviews, &paymos, Some("wdr_r")).await;
    assert_eq!(rechecked.len(), 1, "{rechecked:?}");
    assert_eq!(rechecked[0].outcome.as_str(), "updated");
    assert_eq!(store.invoice("inv_held").unwrap().refunds.len(), 1);
    assert!(list(store.as_ref(), &reviews, 0).await.unwrap().is_empty());
    let answer = release(
        store.as_ref(),
        &reviews,
        "inv_held",
        &alice(),
        &RecordFulfilment,
        NOW_MS,
    )
    .await;
    assert!(
        matches!(&answer, Err(ReleaseError::NotReleasable(why)) if why.contains("refunded")),
        "{answer:?}"
    );
    assert!(store.fulfilled().is_empty(), "a refunded order never ships");

    // An overpayment refund, once rechecked, leaves the held payment to release.
    let store = held().await;
    let reviews = MemoryReviews::new();
    refund_waiting(&reviews, "inv_held", "overpayment", "2.00");
    paymos.withdrawal(
        "wdr_r",
        withdrawal_at_paymos(Some("inv_held"), Some(false), "2"),
    );
    assert!(
        release(
            store.as_ref(),
            &reviews,
            "inv_held",
            &alice(),
            &RecordFulfilment,
            NOW_MS
        )
        .await
        .is_err()
    );
    recheck_live(store.as_ref(), &reviews, &paymos, Some("inv_held")).await;
    assert_eq!(
        store.invoice("inv_held").unwrap().refunds.len(),
        1,
        "rechecked with its invoice"
    );
    assert!(
        listed_about(
            &list(store.as_ref(), &reviews, 0).await.unwrap(),
            "inv_held"
        )
        .contains("release")
    );
    assert_eq!(
        release(
            store.as_ref(),
            &reviews,
            "inv_held",
            &alice(),
            &RecordFulfilment,
            NOW_MS
        )
        .await,
        Ok(Applied::Fulfilled)
    );
}

/// A merchant's own effect: a shipment item beside each fulfilment.
struct Ship;

impl crate::money::effect::FulfilmentEffect for Ship {
    fn writes(
        &self,
        paid: &crate::money::effect::PaidInvoice<'_>,
    ) -> Vec<crate::money::effect::EffectWrite> {
        vec![crate::money::effect::EffectWrite {
            key: format!("shipment#{}", paid.invoice_id),
            attributes: vec![(
                "order".into(),
                crate::money::effect::EffectValue::Text(
                    paid.order.external_id.clone().unwrap_or_default(),
                ),
            )],
        }]
    }
}

// Issue 29: every road that fulfils writes the stack's own effect, and no other road does.
#[tokio::test]
async fn every_road_that_fulfils_writes_the_stacks_effect_and_no_other_does() {
    let store = held().await;
    store.register_order("o-inv_short", &Amount::parse("10.00").unwrap(), "USD");
    let stack = crate::tests::one_shop_with_effect(Arc::clone(&store), Box::new(Ship));
    let shipments = || -> Vec<String> {
        store
            .keys()
            .into_iter()
            .filter(|k| k.starts_with("shipment#"))
            .collect()
    };
    // Roads that fulfil nothing: a held payment, a closure, a duplicate of a shipped order.
    let apply = |item: WorkItem| {
        let stack = &stack;
        async move { stack.apply(&item, NOW_MS).await.unwrap().1 }
    };
    assert_eq!(
        apply(paid("evt_s", "inv_short", "9.00")).await,
        Applied::Held
    );
    let expired = String::from_utf8(paid_body("evt_x", "inv_x", "10.00").into_bytes())
        .unwrap()
        .replace("invoice.paid", "invoice.expired");
    let closed = WorkItem {
        body: expired.into_bytes(),
        ..paid("evt_x", "inv_x", "10.00")
    };
    assert_eq!(apply(closed).await, Applied::Updated);
    assert!(shipments().is_empty(), "{:?}", shipments());
    // The webhook.
    assert_eq!(
        apply(paid("evt_w", "inv_w", "10.00")).await,
        Applied::Fulfilled
    );
    // `mark-paid`.
    let order = crate::money::change::OrderRef {
        external_id: Some("o-inv_m".into()),
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    assert_eq!(
        stack.mark_paid("inv_m", order, "alice", NOW_MS).await,
        Ok(Applied::Fulfilled)
    );
    // `release`.
    let reviews = MemoryReviews::new();
    assert_eq!(
        stack.release(&reviews, "inv_held", &alice(), NOW_MS).await,
        Ok(Applied::Fulfilled)
    );
    // `recheck`.
    reviews.processed(
        delivery("evt_p", "inv_p"),
        Applied::Unconfirmed,
        "not paid yet",
        5,
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_p", at_paymos("paid", "inv_p"));
    let rechecked = stack
        .recheck(&reviews, &paymos, Some("inv_p"), NOW_MS)
        .await
        .unwrap();
    assert_eq!(rechecked[0].outcome.as_str(), "fulfilled");
    // `reconcile --apply`: paid at Paymos, never delivered here.
    paymos.invoice("inv_r", at_paymos("paid", "inv_r"));
    let report =
        crate::roads::reconcile::reconcile(&paymos, &stack, (0, 2_000_000_000), true, NOW_MS)
            .await
            .unwrap();
    assert_eq!(report.applied.get("inv_r"), Some(&Ok(Applied::Fulfilled)));
    // A second paid invoice for a shipped order ships nothing.
    let second = WorkItem {
        body: paid_body("evt_d", "inv_d", "10.00")
            .replace("o-inv_d", "o-inv_w")
            .into_bytes(),
        ..paid("evt_d", "inv_d", "10.00")
    };
    assert_eq!(apply(second).await, Applied::DuplicatePayment);
    assert_eq!(
        shipments(),
        [
            "shipment#inv_held",
            "shipment#inv_m",
            "shipment#inv_p",
            "shipment#inv_r",
            "shipment#inv_w"
        ]
    );
    assert_eq!(store.fulfilled().len(), 5, "one fulfilment per shipment");
}

// A recheck that confirms a payment whose order is known nowhere does not take its delivery
// off what waits: it waits for its order now (`order_unknown`, `mark-paid --order-id`), by its
// event id; a payment Paymos confirms with its order leaves the list.
#[tokio::test]
async fn a_confirmed_payment_without_an_order_still_waits_for_its_order_after_a_recheck() {
    let store = MemoryResources::new();
    let reviews = MemoryReviews::new();
    let without_order = r#"{"event_id":"evt_n","event_type":"invoice.paid","version":1,"occurred_at":1700000000,"data":{"invoice_id":"inv_n"}}"#;
    reviews.processed(
        Delivery {
            body: without_order.as_bytes().to_vec(),
            ..delivery("evt_n", "inv_n")
        },
        Applied::Unconfirmed,
        "not paid yet",
        5,
    );
    reviews.processed(
        delivery("evt_p", "inv_p"),
        Applied::Unconfirmed,
        "not paid yet",
        6,
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_n",
        ConfirmedInvoice {
            order_id: None,
            ..at_paymos("paid", "inv_n")
        },
    );
    paymos.invoice("inv_p", at_paymos("paid", "inv_p"));
    let rechecked = recheck_live(&store, &reviews, &paymos, None).await;
    let outcomes: Vec<_> = rechecked.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["order_unknown", "fulfilled"]);
    assert_eq!(store.fulfilled(), ["inv_p"]);
    let listed = list(&store, &reviews, 0).await.unwrap();
    let deliveries: Vec<_> = listed
        .iter()
        .filter_map(|e| Some((e.kind, e.event_id.as_deref()?)))
        .collect();
    assert_eq!(deliveries, [("order_unknown", "evt_n")]);
    let way_out = &listed
        .iter()
        .find(|e| e.event_id.as_deref() == Some("evt_n"))
        .unwrap()
        .action;
    assert!(
        way_out.starts_with("find the order this payment is for, then `paymos-inbox mark-paid inv_n --order-id <order>"),
        "{way_out}"
    );
}

// A recheck of one resource reads and applies that resource's deliveries alone; the others
// still wait for their own.
#[tokio::test]
async fn a_recheck_of_one_invoice_leaves_the_others_waiting() {
    let store = MemoryResources::new();
    let reviews = MemoryReviews::new();
    let paymos = MemoryPaymos::new();
    for (at, invoice) in [(5, "inv_p"), (6, "inv_q")] {
        reviews.processed(
            delivery(&format!("evt_{invoice}"), invoice),
            Applied::Unconfirmed,
            "not paid yet",
            at,
        );
        paymos.invoice(invoice, at_paymos("paid", invoice));
    }
    let rechecked = recheck_live(&store, &reviews, &paymos, Some("inv_q")).await;
    assert_eq!(rechecked.len(), 1);
    assert_eq!(store.fulfilled(), ["inv_q"]);
    let listed = list(&store, &reviews, 0).await.unwrap();
    let waiting: Vec<_> = listed.iter().map(|e| e.resource_id.as_deref()).collect();
    assert_eq!(waiting, [Some("inv_p")]);
}

// A payment of an order known nowhere that its invoice has since taken another way (paid and
// held, here) waits on the invoice's own line, once, not on the delivery's too.
#[tokio::test]
async fn an_order_unknown_payment_whose_invoice_was_paid_since_is_listed_once_by_its_invoice() {
    let store = Arc::new(MemoryResources::new());
    let reviews = MemoryReviews::new();
    reviews.processed(
        delivery("evt_u", "inv_held"),
        Applied::OrderUnknown,
        "order unknown",
        5,
    );
    store.register_order("o-inv_held", &Amount::parse("10.00").unwrap(), "USD");
    let (_, applied) = crate::tests::one_shop(Arc::clone(&store))
        .apply(&paid("evt_h", "inv_held", "12.00"), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Held);
    let listed = list(store.as_ref(), &reviews, 0).await.unwrap();
    let kinds: Vec<_> = listed
        .iter()
        .map(|e| (e.kind, e.event_id.as_deref()))
        .collect();
    assert_eq!(kinds, [("held", None)]);
}
