//! The reverse check on the in-memory ports: Paymos' answer is the fact. A table of forged
//! events (a leaked secret signs them) changes nothing and lists each with its reason; what
//! Paymos confirms is applied with Paymos' own order.

use std::sync::Arc;

use crate::money::change::Applied;
use crate::money::invoice::Standing;
use crate::money::status::Amount;
use crate::roads::confirm::{
    ConfirmedDeposit, ConfirmedInvoice, ConfirmedWithdrawal, NOT_YET_RECEIVES,
};
use crate::roads::fulfil::{Fulfil, FulfilError};
use crate::roads::ingest::PortErrorKind;
use crate::testkit::memory::{MemoryPaymos, MemoryResources};
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

fn item(event_id: &str, event_type: &str, data: &str) -> WorkItem {
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

fn invoice(status: &str, order: &str, amount: &str) -> ConfirmedInvoice {
    ConfirmedInvoice {
        status: status.into(),
        is_test: false,
        order_id: Some(order.into()),
        order_amount: Amount::parse(amount),
        order_currency: Some("USD".into()),
        token_amount: Amount::parse(amount),
        token_currency: Some("USDT".into()),
        paid_late: false,
        project_id: None,
        paid_at: None,
    }
}

/// Paymos as it is: inv_a paid 1.00 USD for order `cheap`; inv_b awaiting payment; inv_c
/// paid; inv_late closed expired, then paid late; a refund and a deposit that exist.
fn paymos() -> MemoryPaymos {
    let api = MemoryPaymos::new();
    api.invoice("inv_a", invoice("paid", "cheap", "1.00"));
    api.invoice("inv_b", invoice("awaiting_payment", "o-b", "5"));
    api.invoice("inv_c", invoice("paid", "o-c", "5"));
    api.invoice(
        "inv_late",
        ConfirmedInvoice {
            paid_late: true,
            ..invoice("expired", "o-late", "5")
        },
    );
    api.withdrawal(
        "wdr_real",
        ConfirmedWithdrawal {
            status: "completed".into(),
            is_test: false,
            invoice_id: Some("inv_c".into()),
            full: Some(false),
            amount: Amount::parse("0.50"),
            currency: Some("USDT".into()),
            project_id: None,
            completed_at: None,
        },
    );
    api.deposit(
        "pcd_real",
        ConfirmedDeposit {
            status: "confirmed".into(),
            is_final: true,
            is_test: false,
            payer: "c-1".into(),
            net: Amount::parse("9"),
            currency: "TRX".into(),
            project_id: None,
        },
    );
    api
}

type Checked = Fulfil<Arc<MemoryResources>, Arc<MemoryPaymos>>;

fn rig() -> (Checked, Arc<MemoryResources>, Arc<MemoryPaymos>) {
    let store = Arc::new(MemoryResources::new());
    let api = Arc::new(paymos());
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&api));
    (fulfil, store, api)
}

#[tokio::test]
async fn nothing_forged_changes_state_and_each_is_listed_with_its_reason() {
    let (fulfil, store, _) = rig();
    // (name, the forged delivery, words its reason must hold)
    let forged = [
        (
            "order relabelled, no amounts",
            item(
                "evt_f1",
                "invoice.paid",
                r#"{"invoice_id":"inv_a","order":{"external_id":"dear"}}"#,
            ),
            "dear",
        ),
        (
            "order relabelled, the true amount",
            item(
                "evt_f2",
                "invoice.paid",
                r#"{"invoice_id":"inv_a","order":{"external_id":"dear","amount":"1.00","currency":"USD"}}"#,
            ),
            "cheap",
        ),
        (
            "amount changed",
            item(
                "evt_f3",
                "invoice.paid",
                r#"{"invoice_id":"inv_a","order":{"external_id":"cheap","amount":"100","currency":"USD"}}"#,
            ),
            "order amount 100 USD",
        ),
        (
            "expired forged on an invoice Paymos still waits on",
            item("evt_f4", "invoice.expired", r#"{"invoice_id":"inv_b"}"#),
            "still awaiting_payment",
        ),
        (
            "cancelled forged on a paid invoice",
            item("evt_f5", "invoice.cancelled", r#"{"invoice_id":"inv_c"}"#),
            "Paymos says the invoice is paid",
        ),
        (
            "a deposit Paymos never saw",
            item(
                "evt_f6",
                "payment_channel.deposit.confirmed",
                r#"{"id":"pcd_fake","is_final":true,"payment_channel_external_id":"c-9","net":"1000","currency":"TRX"}"#,
            ),
            "404",
        ),
        (
            "a real deposit credited to another payer",
            item(
                "evt_f7",
                "payment_channel.deposit.confirmed",
                r#"{"id":"pcd_real","is_final":true,"payment_channel_external_id":"c-9","net":"9","currency":"TRX"}"#,
            ),
            "payer c-9",
        ),
        (
            "a refund Paymos never made",
            item(
                "evt_f8",
                "withdrawal.completed",
                r#"{"withdrawal_id":"wdr_fake","invoice_id":"inv_c","type":"refund","mode":"full"}"#,
            ),
            "404",
        ),
        (
            "a real refund claimed full",
            item(
                "evt_f9",
                "withdrawal.completed",
                r#"{"withdrawal_id":"wdr_real","invoice_id":"inv_c","type":"refund","mode":"full","amount":"0.50"}"#,
            ),
            "not full",
        ),
    ];
    for (name, work, words) in &forged {
        let (_, applied) = fulfil
            .apply_received(work, 1, NOT_YET_RECEIVES)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(applied, Applied::Unconfirmed, "{name}");
        let (_, reason) = store.outcome(&work.event_id).unwrap();
        let reason = reason.unwrap_or_default();
        assert!(reason.contains(words), "{name}: {reason}");
        assert!(
            store.reviews().contains_key(&work.event_id),
            "{name}: listed for a person"
        );
    }
    assert!(store.fulfilled().is_empty(), "nothing fulfilled");
    assert!(store.credits("c-9", "TRX").is_empty() && store.credits("c-1", "TRX").is_empty());
    assert!(
        store
            .invoices()
            .iter()
            .all(|(_, r)| r.refunds.is_empty() && r.status.is_none())
    );
    // The genuine events still apply afterwards: the forged closure blocked nothing.
    let (_, paid) = fulfil
        .apply(
            &item("evt_c", "invoice.paid", r#"{"invoice_id":"inv_c"}"#),
            2,
        )
        .await
        .unwrap();
    assert_eq!(paid, Applied::Fulfilled);
}

#[tokio::test]
async fn a_confirmed_payment_is_fulfilled_with_paymos_order_whatever_the_event_left_out() {
    let (fulfil, store, _) = rig();
    let (_, applied) = fulfil
        .apply(
            &item("evt_a", "invoice.paid", r#"{"invoice_id":"inv_a"}"#),
            1,
        )
        .await
        .unwrap();
    assert_eq!(applied, Applied::Fulfilled);
    assert_eq!(
        store.fulfilments(),
        [("inv_a".into(), Some("cheap".into()))]
    );
    let record = store.invoice("inv_a").unwrap();
    assert_eq!(
        (
            record.order.amount.unwrap().as_str(),
            record.order.currency.as_deref()
        ),
        ("1.00", Some("USD"))
    );
}

#[tokio::test]
async fn a_late_payment_is_a_verdict_of_its_own() {
    let (fulfil, store, _) = rig();
    let (_, applied) = fulfil
        .apply(
            &item("evt_l", "invoice.paid", r#"{"invoice_id":"inv_late"}"#),
            1,
        )
        .await
        .unwrap();
    assert_eq!(applied, Applied::PaidLate);
    assert!(store.fulfilled().is_empty());
    let seen = store.invoice("inv_late").unwrap().seen();
    assert_eq!(seen.standing(), Standing::PaidLate, "listed for a person");
    assert_eq!(seen.order.external_id.as_deref(), Some("o-late"));
}

#[tokio::test]
async fn not_yet_is_retried_then_unconfirmed_without_sentinel_numbers() {
    let (fulfil, store, _) = rig();
    let early = item("evt_b", "invoice.paid", r#"{"invoice_id":"inv_b"}"#);
    let first = fulfil.apply_received(&early, 1, 1).await;
    assert!(
        matches!(&first, Err(FulfilError::NotYet { status, .. }) if status == "awaiting_payment"),
        "{first:?}"
    );
    assert!(store.outcome("evt_b").is_none(), "retried, not recorded");
    let (_, last) = fulfil
        .apply_received(&early, 2, NOT_YET_RECEIVES)
        .await
        .unwrap();
    assert_eq!(last, Applied::Unconfirmed);
    let reason = store.outcome("evt_b").unwrap().1.unwrap();
    assert_eq!(
        reason,
        format!("still awaiting_payment at Paymos after {NOT_YET_RECEIVES} receives")
    );
}

// Issue 49 (attack H3): the patience counted receives only. A copy the sweep re-sends starts
// at its first receive again, so a delivery Paymos never shows paid could be retried past the
// patience, listed nowhere. The patience is also time since the delivery's receipt: a copy
// received for the first time, of a delivery received longer ago than the patience, is
// unconfirmed, listed, at once.
#[tokio::test]
async fn the_patience_counts_from_the_deliverys_receipt_not_from_a_resent_copy() {
    let (fulfil, store, _) = rig();
    let fulfil = fulfil.with_patience_minutes(15);
    let now_ms = 1_800_000_000_000;
    let received = |minutes_ago: u64| WorkItem {
        received_at_ms: Some(now_ms - minutes_ago * 60_000),
        ..item("evt_r", "invoice.paid", r#"{"invoice_id":"inv_b"}"#)
    };
    let within = fulfil.apply_received(&received(14), now_ms, 1).await;
    assert!(
        matches!(&within, Err(FulfilError::NotYet { .. })),
        "{within:?}"
    );
    let (_, past) = fulfil
        .apply_received(&received(15), now_ms, 1)
        .await
        .unwrap();
    assert_eq!(past, Applied::Unconfirmed);
    let reason = store.outcome("evt_r").unwrap().1.unwrap();
    assert!(reason.contains("15 minutes"), "{reason}");
}

#[tokio::test]
async fn a_key_of_the_other_environment_is_a_stack_error_not_a_payment_verdict() {
    let store = Arc::new(MemoryResources::new());
    let api = MemoryPaymos::new();
    api.invoice(
        "inv_s",
        ConfirmedInvoice {
            is_test: true,
            ..invoice("paid", "o-s", "5")
        },
    );
    let fulfil = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(api);
    let result = fulfil
        .apply(
            &item("evt_s", "invoice.paid", r#"{"invoice_id":"inv_s"}"#),
            1,
        )
        .await;
    assert!(
        matches!(&result, Err(FulfilError::Unavailable(e)) if e.kind == PortErrorKind::Misconfigured),
        "{result:?}"
    );
    assert!(
        store.outcome("evt_s").is_none(),
        "retried, never unconfirmed"
    );
}

#[tokio::test]
async fn open_statuses_and_moving_withdrawals_are_not_read_back() {
    let (fulfil, store, api) = rig();
    // Paymos has inv_c paid and wdr_real completed already: an older open event is not judged
    // against them (it moves no money), and costs no API call.
    for work in [
        item("evt_o1", "invoice.confirming", r#"{"invoice_id":"inv_c"}"#),
        item(
            "evt_o2",
            "withdrawal.processing",
            r#"{"withdrawal_id":"wdr_real","invoice_id":"inv_c","type":"refund"}"#,
        ),
    ] {
        let (_, applied) = fulfil.apply(&work, 1).await.unwrap();
        assert_eq!(applied, Applied::Updated, "{}", work.event_id);
    }
    assert_eq!(api.reads(), 0, "nothing read back");
    // A confirmed closure records Paymos' order.
    let (_, closed) = fulfil
        .apply(
            &item("evt_x", "invoice.expired", r#"{"invoice_id":"inv_late"}"#),
            2,
        )
        .await
        .unwrap();
    assert_eq!(closed, Applied::Updated);
    assert_eq!(
        store
            .invoice("inv_late")
            .unwrap()
            .order
            .external_id
            .as_deref(),
        Some("o-late")
    );
}

// Issue 28, case 6: a forged open event (a leaked live secret) plants no order.
#[tokio::test]
async fn a_forged_open_event_plants_nothing_paymos_confirms_the_order_that_ships() {
    let (fulfil, store, _) = rig();
    let planted = item(
        "evt_plant",
        "invoice.confirming",
        r#"{"invoice_id":"inv_a","order":{"external_id":"dear","amount":"500","currency":"USD"}}"#,
    );
    let genuine = item(
        "evt_paid",
        "invoice.paid",
        r#"{"invoice_id":"inv_a","payment":{"expected":"1.00","currency":"USDT"}}"#,
    );
    assert_eq!(fulfil.apply(&planted, 1).await.unwrap().1, Applied::Updated);
    assert_eq!(
        fulfil.apply(&genuine, 2).await.unwrap().1,
        Applied::Fulfilled
    );
    assert_eq!(
        store.fulfilments(),
        [("inv_a".into(), Some("cheap".into()))],
        "Paymos' order ships, not the planted one"
    );
    let record = store.invoice("inv_a").unwrap();
    assert_eq!(record.order.external_id.as_deref(), Some("cheap"));
    assert_eq!(
        record
            .order
            .amount
            .as_ref()
            .map(crate::money::status::Amount::as_str),
        Some("1.00")
    );
    assert_eq!(record.seen().standing(), Standing::Clear);
}

// Issue 38, case 3: an order a delivery set before anything confirmed it (a stack that turned
// the reverse check on later, `dev`) gives way to Paymos' answer: the confirmed payment ships
// Paymos' order at Paymos' price, on the webhook's road as on a recheck's.
#[tokio::test]
async fn paymos_order_replaces_what_an_unconfirmed_delivery_set() {
    let (fulfil, store, api) = rig();
    let planted = item(
        "evt_plant",
        "invoice.awaiting_payment",
        r#"{"invoice_id":"inv_a","order":{"external_id":"dear","amount":"500.00","currency":"USD"}}"#,
    );
    // Taken at its word: this stack did not check yet.
    let unchecked = crate::tests::one_shop(Arc::clone(&store));
    assert_eq!(
        unchecked.apply(&planted, 1).await.unwrap().1,
        Applied::Updated
    );
    let genuine = item(
        "evt_paid",
        "invoice.paid",
        r#"{"invoice_id":"inv_a","order":{"external_id":"cheap","amount":"1.00","currency":"USD"}}"#,
    );
    assert_eq!(
        fulfil.apply(&genuine, 2).await.unwrap().1,
        Applied::Fulfilled
    );
    assert_eq!(
        store.fulfilments(),
        [("inv_a".into(), Some("cheap".into()))]
    );
    let record = store.invoice("inv_a").unwrap();
    assert_eq!(record.order.external_id.as_deref(), Some("cheap"));
    assert_eq!(
        record.order.amount.as_ref().map(Amount::as_str),
        Some("1.00")
    );

    // Held on the record's word before the check: a recheck of nothing changes nothing, and
    // the release ships Paymos' order once the confirmed payment corrected the record.
    let (_, store, _) = rig();
    let unchecked = crate::tests::one_shop(Arc::clone(&store));
    assert_eq!(
        unchecked.apply(&planted, 1).await.unwrap().1,
        Applied::Updated
    );
    assert_eq!(unchecked.apply(&genuine, 2).await.unwrap().1, Applied::Held);
    let checked = crate::tests::one_shop(Arc::clone(&store)).with_confirmation(Arc::clone(&api));
    let replay = item(
        "evt_paid_2",
        "invoice.paid",
        r#"{"invoice_id":"inv_a","payment":{"expected":"1.00","currency":"USDT"}}"#,
    );
    checked.apply(&replay, 3).await.unwrap();
    let record = store.invoice("inv_a").unwrap();
    assert_eq!(
        (
            record.order.external_id.as_deref(),
            record.order.amount.as_ref().map(Amount::as_str)
        ),
        (Some("cheap"), Some("1.00")),
        "the held payment now names what Paymos confirmed"
    );
    assert!(store.fulfilments().is_empty(), "still held for a person");
}

// Issue 43 (mutants no fast test caught in `differs`): a payment held on the word of a record
// an unconfirmed delivery planted, where the record differs from what Paymos confirms in one
// thing only (the price in the same currency, the currency at the same amount, or the order at
// the same price). The checked replay corrects the record to Paymos' order and price, and the
// payment still waits for a person; a record that agrees ships at once, unchanged.
#[tokio::test]
async fn paymos_order_replaces_a_held_record_that_differs_in_one_thing_only() {
    // (case, the planted order, the merchant's registration of it: what holds the payment when
    // the order is the same, whether the record differs from Paymos)
    let cases = [
        (
            "another price, same currency",
            r#""external_id":"cheap","amount":"500.00","currency":"USD""#,
            Some(("500.00", "USD")),
            true,
        ),
        (
            "another currency, same amount",
            r#""external_id":"cheap","amount":"1.00","currency":"EUR""#,
            Some(("1.00", "EUR")),
            true,
        ),
        (
            "another order, same price",
            r#""external_id":"dear","amount":"1.00","currency":"USD""#,
            None,
            true,
        ),
        (
            "the same order and price",
            r#""external_id":"cheap","amount":"1.00","currency":"USD""#,
            None,
            false,
        ),
    ];
    let genuine = item(
        "evt_paid",
        "invoice.paid",
        r#"{"invoice_id":"inv_a","order":{"external_id":"cheap","amount":"1.00","currency":"USD"}}"#,
    );
    let replay = item(
        "evt_paid_2",
        "invoice.paid",
        r#"{"invoice_id":"inv_a","payment":{"expected":"1.00","currency":"USDT"}}"#,
    );
    for (name, planted, registered, differs) in cases {
        let (checked, store, _) = rig();
        if let Some((amount, currency)) = registered {
            store.register_order("cheap", &Amount::parse(amount).unwrap(), currency);
        }
        let unchecked = crate::tests::one_shop(Arc::clone(&store));
        let plant = item(
            "evt_plant",
            "invoice.awaiting_payment",
            &format!(r#"{{"invoice_id":"inv_a","order":{{{planted}}}}}"#),
        );
        unchecked.apply(&plant, 1).await.unwrap();
        let first = unchecked.apply(&genuine, 2).await.unwrap().1;
        if !differs {
            assert_eq!(first, Applied::Fulfilled, "{name}");
            continue;
        }
        assert_eq!(first, Applied::Held, "{name}: held on the record's word");
        checked.apply(&replay, 3).await.unwrap();
        let order = store.invoice("inv_a").unwrap().order;
        assert_eq!(
            (
                order.external_id.as_deref(),
                order.amount.as_ref().map(Amount::as_str),
                order.currency.as_deref()
            ),
            (Some("cheap"), Some("1.00"), Some("USD")),
            "{name}: the record now says what Paymos confirmed"
        );
        assert!(
            store.fulfilments().is_empty(),
            "{name}: still held for a person"
        );
    }
}

/// What `check` finds for `event_type` of inv_c (Paymos: paid, order o-c, project prj_a)
/// naming `order` and `project`.
async fn checked_c(event_type: &str, order: &str, project: &str) -> crate::roads::confirm::Checked {
    let api = MemoryPaymos::new();
    api.invoice(
        "inv_c",
        ConfirmedInvoice {
            project_id: Some("prj_a".into()),
            ..invoice("paid", "o-c", "5")
        },
    );
    let work = item(
        "evt_c",
        event_type,
        &format!(
            r#"{{"invoice_id":"inv_c","project_id":"{project}","order":{{"external_id":"{order}","amount":"5","currency":"USD"}}}}"#
        ),
    );
    let envelope = crate::wire::envelope::Envelope::parse(&work.body).unwrap();
    let change = crate::money::change::change_of(&envelope);
    crate::roads::confirm::check(&api, &change, &envelope.data, Environment::Live)
        .await
        .unwrap()
}

// The project is confirmed as the order is (cargo mutants found it unpinned): the same project
// confirms, another refutes, with Paymos' order and project carried only by what it confirms.
#[tokio::test]
async fn the_check_confirms_the_project_as_the_order() {
    use crate::roads::confirm::Verdict;
    let same = checked_c("invoice.paid", "o-c", "prj_a").await;
    assert_eq!(same.verdict, Verdict::Confirmed);
    assert_eq!(
        same.order.and_then(|o| o.external_id).as_deref(),
        Some("o-c")
    );
    let other = checked_c("invoice.paid", "o-c", "prj_b").await;
    assert!(
        matches!(&other.verdict, Verdict::Unconfirmed(why) if why.contains("project prj_b")),
        "{other:?}"
    );
    assert_eq!(other.order, None);
    let forged = checked_c("invoice.paid", "o-x", "prj_a").await;
    assert!(matches!(forged.verdict, Verdict::Unconfirmed(_)));
}
