//! The second line of defence through the official `paymos` crate and the fake Paymos API:
//! Paymos' answer is the fact. Forged events (a leaked secret signs them) change nothing and are
//! listed; reconciliation reports late payments and refunds by Paymos' facts; a wrong key is the
//! stack's problem, found at start.

use std::time::Duration;

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::paymos_api::PaymosApi;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::money::effect::RecordFulfilment;
use paymos_inbox_core::roads::confirm::NOT_YET_RECEIVES;
use paymos_inbox_core::roads::exceptions;
use paymos_inbox_core::roads::fulfil::{Fulfil, FulfilError};
use paymos_inbox_core::roads::ingest::PortErrorKind;
use paymos_inbox_core::wire::signature::Environment;
use serde_json::{Value, json};

use paymos_inbox_testkit::paymos_fake::{self, Answer, FakePaymos, invoice};
use paymos_inbox_testkit::*;

struct Rig {
    aws: Aws,
    state: String,
    ledger: String,
    api: FakePaymos,
}

impl Rig {
    async fn new() -> Self {
        let aws = Aws::new();
        let stack = aws.stack().await;
        Self {
            state: stack.table("StateTable").to_owned(),
            ledger: stack.table("DeliveriesTable").to_owned(),
            aws,
            api: FakePaymos::start().await,
        }
    }

    fn store(&self) -> DynamoResources {
        DynamoResources::new(self.aws.dynamodb.clone(), &self.state, &self.ledger)
    }

    fn checked(&self) -> Fulfil<DynamoResources, PaymosApi> {
        Fulfil::new(self.store())
            .for_projects(crate::one_project())
            .with_confirmation(PaymosApi::new(self.api.client()))
    }

    /// Records `body` in the ledger as ingest would, then applies it as its last receive.
    async fn deliver(&self, body: &str) -> Result<Applied, FulfilError> {
        DynamoLedger::new(self.aws.dynamodb.clone(), &self.ledger, None)
            .record(
                &recorded_delivery(body, Environment::Live, NOW_MS),
                NOW_MS + 60_000,
            )
            .await
            .unwrap();
        self.checked()
            .apply_received(&live(body), NOW_MS, NOT_YET_RECEIVES)
            .await
            .map(|(_, a)| a)
    }

    async fn item(
        &self,
        pk: &str,
    ) -> Option<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
        self.aws.item(&self.state, "pk", pk).await
    }

    async fn reason(&self, event_id: &str) -> String {
        let record = self
            .aws
            .item(&self.ledger, "event_id", event_id)
            .await
            .unwrap();
        format!(
            "{} {}",
            get_s(&record, "outcome"),
            get_s(&record, "outcome_reason")
        )
    }
}

use paymos_inbox_core::roads::ingest::DeliveryLedger as _;

fn paid(event_id: &str, invoice_id: &str, order: Value) -> String {
    envelope(
        event_id,
        "invoice.paid",
        json!({"invoice_id": invoice_id, "is_test": false, "order": order}),
    )
}

#[tokio::test]
async fn forged_events_change_nothing_and_are_listed_with_their_reason() {
    let rig = Rig::new().await;
    // Paymos: inv_a paid 1.00 USD for order-inv_a; inv_b still awaiting payment; inv_c paid.
    for (id, status) in [
        ("inv_a", "paid"),
        ("inv_b", "awaiting_payment"),
        ("inv_c", "paid"),
    ] {
        rig.api.answer(
            id,
            Answer::Invoices(vec![invoice(id, status, ("1.00", "USD"), ("1.00", "USDT"))]),
        );
    }
    let forged = [
        (
            paid("evt_f1", "inv_a", json!({"external_id": "dear"})),
            "order dear",
        ),
        (
            paid(
                "evt_f2",
                "inv_a",
                json!({"external_id": "dear", "amount": "1.00", "currency": "USD"}),
            ),
            "order dear",
        ),
        (
            paid(
                "evt_f3",
                "inv_a",
                json!({"external_id": "order-inv_a", "amount": "500", "currency": "USD"}),
            ),
            "500 USD",
        ),
        (
            envelope("evt_f4", "invoice.expired", json!({"invoice_id": "inv_b"})),
            "still awaiting_payment",
        ),
        (
            envelope(
                "evt_f5",
                "invoice.cancelled",
                json!({"invoice_id": "inv_c"}),
            ),
            "is paid",
        ),
        (
            envelope(
                "evt_f6",
                "payment_channel.deposit.confirmed",
                json!({"id": "pcd_fake", "is_final": true, "payment_channel_external_id": "thief",
                       "net": "1000", "currency": "USDT"}),
            ),
            "404",
        ),
        (
            envelope(
                "evt_f7",
                "withdrawal.completed",
                json!({"withdrawal_id": "wdr_fake", "invoice_id": "inv_c", "type": "refund",
                       "mode": "full", "amount": "1.00", "currency": "USDT"}),
            ),
            "404",
        ),
    ];
    for (body, words) in &forged {
        let applied = rig.deliver(body).await.unwrap();
        let event_id = serde_json::from_str::<Value>(body).unwrap()["event_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(applied, Applied::Unconfirmed, "{event_id}");
        let reason = rig.reason(&event_id).await;
        assert!(reason.contains(words), "{event_id}: {reason}");
    }
    assert!(rig.item("fulfilment#inv_a").await.is_none());
    assert!(
        rig.item("order_paid#dear").await.is_none(),
        "no claim for the forged order"
    );
    assert!(rig.item("balance#thief#USDT").await.is_none(), "no credit");
    assert!(
        rig.item("inv_c").await.is_none(),
        "no refund, no close on inv_c"
    );
    assert!(rig.item("inv_b").await.is_none());
    // Each is listed for a person, with the difference named.
    let listed = exceptions::list(
        &rig.store(),
        &DynamoLedger::new(rig.aws.dynamodb.clone(), &rig.ledger, None),
        0,
    )
    .await
    .unwrap();
    let unconfirmed = listed.iter().filter(|e| e.kind == "unconfirmed").count();
    assert_eq!(unconfirmed, forged.len(), "{listed:#?}");
    // The genuine payment then fulfils with Paymos' order, though its event names none.
    let genuine = rig
        .deliver(&envelope(
            "evt_a",
            "invoice.paid",
            json!({"invoice_id": "inv_a"}),
        ))
        .await
        .unwrap();
    assert_eq!(genuine, Applied::Fulfilled);
    let fulfilment = rig.item("fulfilment#inv_a").await.unwrap();
    assert_eq!(
        (
            get_s(&fulfilment, "order_id"),
            get_s(&fulfilment, "amount_text")
        ),
        ("order-inv_a", "1.00")
    );
}

#[tokio::test]
async fn a_wrong_key_is_the_stacks_problem_found_at_start_never_a_payments_verdict() {
    let rig = Rig::new().await;
    rig.api.answer(
        "inv_k",
        Answer::Invoices(vec![invoice("inv_k", "paid", ("1", "USD"), ("1", "USDT"))]),
    );
    let api = PaymosApi::new(rig.api.client());
    api.prove(Environment::Live).await.expect("the right key");
    // A sandbox project's key on a live stack: what it reads is sandbox.
    let err = api.prove(Environment::Test).await.unwrap_err();
    assert_eq!(err.kind, PortErrorKind::Misconfigured);
    assert!(err.message.contains("PAYMOS_API_SECRETS_ID"), "{err}");
    // A revoked key: 401 at start names the setting, and a payment is retried, not unconfirmed.
    rig.api.refuse_key();
    let err = api.prove(Environment::Live).await.unwrap_err();
    assert_eq!(err.kind, PortErrorKind::Misconfigured);
    assert!(err.message.contains("PAYMOS_API_SECRETS_ID"), "{err}");
    let result = rig
        .deliver(&paid(
            "evt_k",
            "inv_k",
            json!({"external_id": "order-inv_k"}),
        ))
        .await;
    assert!(
        matches!(&result, Err(FulfilError::Unavailable(e)) if e.kind == PortErrorKind::Misconfigured),
        "{result:?}"
    );
    assert!(rig.item("inv_k").await.is_none(), "nothing decided");
}

// A refund in full listed after a page of others (the fake pages two a call; Paymos a hundred)
// still returns the payment: the run reads every page of an invoice's refunds, and never ships
// an order refunded in full.
#[tokio::test]
async fn a_full_refund_on_a_later_page_of_refunds_keeps_the_payment_from_shipping() {
    let rig = Rig::new().await;
    let mut doc = invoice("inv_many", "paid", ("25.00", "USDT"), ("25.00", "USDT"));
    doc["created_at"] = json!((NOW - 100) as i64);
    rig.api.answer("inv_many", Answer::Invoices(vec![doc]));
    for (id, mode, amount) in [
        ("wdr_m1", "overpayment", "1.00"),
        ("wdr_m2", "overpayment", "1.00"),
        ("wdr_m3", "full", "25.00"),
    ] {
        rig.api
            .refund(paymos_fake::refund(id, "inv_many", mode, amount));
    }
    let fulfil = Fulfil::new(rig.store()).for_projects(crate::one_project());
    let api = rig.api.client();
    let report = reconcile(
        &api,
        &fulfil,
        (NOW - 3600) as i64,
        (NOW + 3600) as i64,
        true,
        NOW_MS,
    )
    .await
    .unwrap();
    let refunded: Vec<&str> = report
        .refunded
        .iter()
        .map(|p| p.invoice_id.as_str())
        .collect();
    assert_eq!(refunded, ["inv_many"], "{report:?}");
    assert!(
        report.missing.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    assert!(
        rig.item("fulfilment#inv_many").await.is_none(),
        "nothing shipped"
    );
}

#[tokio::test]
async fn reconciliation_reports_late_and_refunded_payments_by_paymos_facts() {
    let rig = Rig::new().await;
    let created = json!((NOW - 100) as i64);
    let doc = |id: &str, status: &str, late: bool| {
        let mut d = invoice(id, status, ("25.00", "USDT"), ("25.00", "USDT"));
        d["created_at"] = created.clone();
        if late {
            d["paid_late_at"] = json!((NOW - 50) as i64);
        }
        d
    };
    // inv_late: expired, then paid late; its webhooks were lost. inv_back: paid and refunded
    // in full; its webhooks were lost. inv_part: paid, a partial refund: still missing.
    rig.api.answer(
        "inv_late",
        Answer::Invoices(vec![doc("inv_late", "expired", true)]),
    );
    rig.api.answer(
        "inv_back",
        Answer::Invoices(vec![doc("inv_back", "paid", false)]),
    );
    rig.api.answer(
        "inv_part",
        Answer::Invoices(vec![doc("inv_part", "paid", false)]),
    );
    rig.api
        .refund(paymos_fake::refund("wdr_back", "inv_back", "full", "25.00"));
    rig.api.refund(paymos_fake::refund(
        "wdr_part",
        "inv_part",
        "overpayment",
        "1.00",
    ));
    // A stack of the fake Paymos' project: its invoices name it, its records name none.
    let fulfil = Fulfil::new(rig.store())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    let api = rig.api.client();
    let run = |apply| {
        reconcile(
            &api,
            &fulfil,
            (NOW - 3600) as i64,
            (NOW + 3600) as i64,
            apply,
            NOW_MS,
        )
    };
    let report = run(false).await.unwrap();
    let ids = |list: &[paymos_inbox_core::roads::reconcile::PaidAtPaymos]| {
        list.iter()
            .map(|p| p.invoice_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&report.paid_late), ["inv_late"]);
    assert_eq!(ids(&report.refunded), ["inv_back"]);
    assert_eq!(ids(&report.missing), ["inv_part"]);
    assert!(!report.clean());
    let report = run(true).await.unwrap();
    assert_eq!(report.applied["inv_late"], Ok(Applied::PaidLate));
    assert_eq!(report.applied["inv_part"], Ok(Applied::Fulfilled));
    assert!(
        !report.applied.contains_key("inv_back"),
        "a refunded payment is never applied"
    );
    assert!(rig.item("fulfilment#inv_back").await.is_none());
    assert!(
        rig.item("fulfilment#inv_late").await.is_none(),
        "a late payment waits for a person"
    );
    let late = rig.item("inv_late").await.unwrap();
    assert_eq!(get_s(&late, "status"), "expired");
    assert!(late.contains_key("paid_late_at"));
    // Recorded here now: the next run has nothing late to report; exceptions lists it.
    let again = run(true).await.unwrap();
    assert!(
        again.paid_late.is_empty() && again.missing.is_empty(),
        "{again:?}"
    );
    let listed = exceptions::list(
        &rig.store(),
        &DynamoLedger::new(rig.aws.dynamodb.clone(), &rig.ledger, None),
        0,
    )
    .await
    .unwrap();
    assert!(
        listed
            .iter()
            .any(|e| e.kind == "paid_late" && e.resource_id.as_deref() == Some("inv_late")),
        "{listed:#?}"
    );
}

#[tokio::test]
async fn two_invoices_of_one_paymos_order_fulfilled_by_different_roads_are_double() {
    let rig = Rig::new().await;
    let fulfil = Fulfil::new(rig.store()).for_projects(crate::one_project());
    // A webhook fulfils inv_one for order-x; support fulfils inv_two by hand without naming
    // any order (nothing here ties it to order-x): only Paymos' grouping can see it.
    fulfil
        .apply(
            &live(&paid(
                "evt_one",
                "inv_one",
                json!({"external_id": "order-x"}),
            )),
            NOW_MS,
        )
        .await
        .unwrap();
    fulfil
        .mark_paid(
            "inv_two",
            // Fulfilled here under a mistyped order: Paymos says it pays order-x too.
            paymos_inbox_core::money::change::OrderRef {
                external_id: Some("order-x-typo".into()),
                ..paymos_inbox_core::money::change::OrderRef::none()
            },
            "support",
            NOW_MS,
        )
        .await
        .unwrap();
    let listed = |id: &str| {
        json!({"invoice_id": id, "project_id": "prj_1", "external_order_id": "order-x",
               "status": "paid", "is_final": true, "is_test": false, "amount": "5",
               "currency": "USDT", "created_at": NOW - 100})
    };
    rig.api.list(vec![listed("inv_one"), listed("inv_two")]);
    let report = reconcile(
        &rig.api.client(),
        &fulfil,
        (NOW - 3600) as i64,
        (NOW + 3600) as i64,
        false,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(
        report.double["order-x"],
        ["inv_one", "inv_two"],
        "{report:?}"
    );
    assert!(!report.clean());
}

#[tokio::test]
async fn recheck_says_what_paymos_says_and_lands_a_late_payment_as_late() {
    let rig = Rig::new().await;
    rig.api.answer(
        "inv_r",
        Answer::Invoices(vec![invoice(
            "inv_r",
            "expired",
            ("5", "USDT"),
            ("5", "USDT"),
        )]),
    );
    let body = paid("evt_r", "inv_r", json!({"external_id": "order-inv_r"}));
    assert_eq!(rig.deliver(&body).await.unwrap(), Applied::Unconfirmed);
    assert!(
        rig.reason("evt_r")
            .await
            .contains("closed expired and was not paid")
    );
    let ledger = DynamoLedger::new(rig.aws.dynamodb.clone(), &rig.ledger, None);
    let api = PaymosApi::new(rig.api.client()).with_deadline(Duration::from_secs(5));
    let first = exceptions::recheck(
        &rig.store(),
        &ledger,
        &api,
        &RecordFulfilment,
        Environment::Live,
        None,
        NOW_MS,
    )
    .await
    .unwrap();
    let reason = first[0].outcome.reason().unwrap().to_owned();
    assert!(!reason.contains("4294967295"), "{reason}");
    assert!(reason.contains("expired"), "{reason}");
    // Paymos now marks it paid late: recheck records it as a late payment, for a person.
    let mut late = invoice("inv_r", "expired", ("5", "USDT"), ("5", "USDT"));
    late["paid_late_at"] = json!(1);
    rig.api.answer("inv_r", Answer::Invoices(vec![late]));
    let second = exceptions::recheck(
        &rig.store(),
        &ledger,
        &api,
        &RecordFulfilment,
        Environment::Live,
        None,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(second[0].outcome.as_str(), "paid_late");
    assert!(rig.item("fulfilment#inv_r").await.is_none());
    assert!(
        rig.item("inv_r")
            .await
            .unwrap()
            .contains_key("paid_late_at")
    );
}

// Issue 38, case 3, where DynamoDB's conditions decide: an order and price a delivery set
// before anything confirmed it (the stack checked nothing yet) give way to Paymos' answer; the
// confirmed payment ships Paymos' order.
#[tokio::test]
async fn paymos_order_replaces_an_unconfirmed_one_on_dynamodb() {
    let rig = Rig::new().await;
    rig.api.answer(
        "inv_p",
        Answer::Invoices(vec![invoice(
            "inv_p",
            "paid",
            ("1.00", "USD"),
            ("1.00", "USDT"),
        )]),
    );
    let planted = envelope(
        "evt_plant",
        "invoice.awaiting_payment",
        json!({"invoice_id": "inv_p", "order": {"external_id": "dear", "amount": "500.00", "currency": "USD"}}),
    );
    let unchecked = Fulfil::new(rig.store()).for_projects(crate::one_project());
    assert_eq!(
        unchecked.apply(&live(&planted), NOW_MS).await.unwrap().1,
        Applied::Updated
    );
    let genuine = paid(
        "evt_genuine",
        "inv_p",
        json!({"external_id": "order-inv_p", "amount": "1.00", "currency": "USD"}),
    );
    assert_eq!(rig.deliver(&genuine).await.unwrap(), Applied::Fulfilled);
    let invoice = rig.item("inv_p").await.unwrap();
    assert_eq!(get_s(&invoice, "order_id"), "order-inv_p");
    assert_eq!(get_s(&invoice, "amount_text"), "1.00");
    let fulfilment = rig.item("fulfilment#inv_p").await.unwrap();
    assert_eq!(get_s(&fulfilment, "order_id"), "order-inv_p");
    assert!(
        rig.item("order_paid#dear").await.is_none(),
        "the planted order ships nothing"
    );
}

// Issue 49, where DynamoDB's conditions decide. A forged close (written while nothing checked)
// named order "dear" and a late payment; the genuine late payment, checked, puts Paymos' order
// on the record before a release ships it. And a close naming no order, then a late payment
// naming it: the record learns the order (set once) so a release can ship it.
#[tokio::test]
async fn a_late_payment_carries_paymos_order_or_teaches_the_missing_one_on_dynamodb() {
    let rig = Rig::new().await;
    let unchecked = Fulfil::new(rig.store()).for_projects(crate::one_project());
    let forged = envelope(
        "evt_forged",
        "invoice.expired",
        json!({"invoice_id": "inv_p", "paid_late_at": 1, "order": {"external_id": "dear", "amount": "500.00", "currency": "USD"}}),
    );
    assert_eq!(
        unchecked.apply(&live(&forged), NOW_MS).await.unwrap().1,
        Applied::PaidLate
    );
    let mut late = invoice("inv_p", "expired", ("1.00", "USD"), ("1.00", "USDT"));
    late["paid_late_at"] = json!(1);
    rig.api.answer("inv_p", Answer::Invoices(vec![late]));
    let genuine = paid(
        "evt_genuine",
        "inv_p",
        json!({"external_id": "order-inv_p", "amount": "1.00", "currency": "USD"}),
    );
    assert_eq!(rig.deliver(&genuine).await.unwrap(), Applied::PaidLate);
    let record = rig.item("inv_p").await.unwrap();
    assert_eq!(get_s(&record, "order_id"), "order-inv_p");
    assert_eq!(get_s(&record, "amount_text"), "1.00");

    let silent = envelope(
        "evt_close",
        "invoice.expired",
        json!({"invoice_id": "inv_q"}),
    );
    assert_eq!(
        unchecked.apply(&live(&silent), NOW_MS).await.unwrap().1,
        Applied::Updated
    );
    let paying = paid("evt_q", "inv_q", json!({"external_id": "order-q"}));
    assert_eq!(
        unchecked.apply(&live(&paying), NOW_MS).await.unwrap().1,
        Applied::PaidLate
    );
    let record = rig.item("inv_q").await.unwrap();
    assert_eq!(get_s(&record, "order_id"), "order-q");
    assert!(record.contains_key("paid_late_at"));
    assert!(rig.item("fulfilment#inv_q").await.is_none());
}

// The reference-only attack of this stop (its F1, money-losing), on DynamoDB Local through the
// official crate: with the reverse check on, a second payment after the full refund of a
// shipped invoice was acknowledged `already_final` and listed nowhere. Paymos shows inv_r paid
// at 100, refunded in full at 140, then paid again at 150 (`paid_late_at` where it says so).
#[tokio::test]
async fn with_the_check_a_payment_after_the_full_refund_of_a_shipped_invoice_waits_on_dynamodb() {
    for late in [false, true] {
        let rig = Rig::new().await;
        let id = if late { "inv_rl" } else { "inv_r" };
        let doc = |paid_at: Option<u64>, late: bool| {
            let mut d = invoice(id, "paid", ("25.00", "USDT"), ("25.00", "USDT"));
            if let Some(at) = paid_at {
                d["completed_at"] = json!(at);
                if late {
                    d["paid_late_at"] = json!(at);
                }
            }
            d
        };
        // Paymos gives no time of the first payment (the shape the attack's API answered).
        rig.api.answer(id, Answer::Invoices(vec![doc(None, false)]));
        let order =
            json!({"external_id": format!("order-{id}"), "amount": "25.00", "currency": "USDT"});
        let first = envelope(
            "evt_r1",
            "invoice.paid",
            json!({"invoice_id": id, "is_test": false, "order": order}),
        );
        assert_eq!(rig.deliver(&first).await.unwrap(), Applied::Fulfilled);
        let mut refund = paymos_fake::refund("wdr_r", id, "full", "25.00");
        refund["completed_at"] = json!(140);
        rig.api.refund(refund);
        let refunded = envelope(
            "evt_r2",
            "withdrawal.completed",
            json!({"withdrawal_id": "wdr_r", "type": "refund", "mode": "full", "invoice_id": id,
                   "amount": "25.00", "currency": "USDT", "completed_at": 140, "is_test": false}),
        );
        let applied = rig.deliver(&refunded).await.unwrap();
        assert_eq!(applied, Applied::Updated, "{}", rig.reason("evt_r2").await);
        rig.api
            .answer(id, Answer::Invoices(vec![doc(Some(150), late)]));
        let mut data = json!({"invoice_id": id, "is_test": false, "order": order});
        if late {
            data["paid_late_at"] = json!(150);
        }
        let again = envelope("evt_r3", "invoice.paid", data);
        let applied = rig.deliver(&again).await.unwrap();
        assert_eq!(
            applied,
            Applied::DuplicatePayment,
            "late {late}: {}",
            rig.reason("evt_r3").await
        );
    }
}

// Issue 49 (A7), where DynamoDB keeps the reason: a payment unconfirmed by a 404 that a
// recheck then finds paid for another order waits with the latest reason, which `exceptions`
// says; a delivery resolved meanwhile is left as it is.
#[tokio::test]
async fn a_recheck_keeps_the_latest_reason_an_unconfirmed_payment_waits_for() {
    use paymos_inbox_core::roads::exceptions::ReviewLedger as _;
    let rig = Rig::new().await;
    rig.api.answer("inv_why", Answer::NotFound);
    let body = paid("evt_why", "inv_why", json!({"external_id": "order-mine"}));
    assert_eq!(rig.deliver(&body).await.unwrap(), Applied::Unconfirmed);
    assert!(rig.reason("evt_why").await.contains("404"));
    let mut other = invoice("inv_why", "paid", ("5", "USDT"), ("5", "USDT"));
    other["order"]["external_id"] = json!("order-other");
    rig.api.answer("inv_why", Answer::Invoices(vec![other]));
    let ledger = DynamoLedger::new(rig.aws.dynamodb.clone(), &rig.ledger, None);
    let api = PaymosApi::new(rig.api.client()).with_deadline(Duration::from_secs(5));
    let rechecked = exceptions::recheck(
        &rig.store(),
        &ledger,
        &api,
        &RecordFulfilment,
        Environment::Live,
        None,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(rechecked[0].outcome.as_str(), "unconfirmed");
    let why = rig.reason("evt_why").await;
    assert!(
        why.contains("Paymos' invoice order order-other") && !why.contains("404"),
        "{why}"
    );
    let listed = exceptions::list(&rig.store(), &ledger, NOW_MS)
        .await
        .unwrap();
    let listed = listed
        .iter()
        .find(|e| e.event_id.as_deref() == Some("evt_why"))
        .expect("listed");
    assert!(listed.why.contains("order-other"), "{listed:?}");

    ledger
        .mark_resolved("evt_why", exceptions::Resolution::ByHand, "alice", NOW_MS)
        .await
        .unwrap();
    ledger
        .note_reason("evt_why", "stale", NOW_MS)
        .await
        .unwrap();
    let after = rig.reason("evt_why").await;
    assert!(
        after.starts_with("resolved_by_hand ")
            && after.ends_with("Paymos' invoice order order-other"),
        "resolved: left as it is: {after}"
    );
}
