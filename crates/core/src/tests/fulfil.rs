//! Fulfil: every outcome, from a history of deliveries.

use std::sync::Arc;

use crate::money::change::{Applied, Change, OrderRef, change_of};
use crate::money::effect::RecordFulfilment;
use crate::money::status::{Amount, InvoiceStatus, WithdrawalStatus};
use crate::roads::confirm::ConfirmedInvoice;
use crate::roads::fulfil::FulfilError;
use crate::roads::ingest::PortError;
use crate::testkit::memory::{MemoryPaymos, MemoryResources};
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

/// A delivery of `event_type` for `resource` at `at`, with `data` fields beside the id.
fn item(event_id: &str, event_type: &str, at: u64, data: &str) -> WorkItem {
    let body = format!(
        r#"{{"event_id":"{event_id}","event_type":"{event_type}","version":1,"occurred_at":{at},"data":{data}}}"#
    );
    WorkItem {
        event_id: event_id.to_owned(),
        environment: Some(Environment::Live),
        body: body.into_bytes(),
        received_at_ms: Some(at * 1000),
    }
}

fn invoice(event_id: &str, status: &str, at: u64, invoice_id: &str, order: &str) -> WorkItem {
    item(
        event_id,
        &format!("invoice.{status}"),
        at,
        &format!(
            r#"{{"invoice_id":"{invoice_id}","order":{{"external_id":"{order}","amount":"10.50","currency":"USD"}}}}"#
        ),
    )
}

fn withdrawal(event_id: &str, status: &str, at: u64, extra: &str) -> WorkItem {
    item(
        event_id,
        &format!("withdrawal.{status}"),
        at,
        &format!(r#"{{"withdrawal_id":"wdr_1"{extra}}}"#),
    )
}

fn deposit(event_id: &str, status: &str, at: u64, is_final: bool) -> WorkItem {
    item(
        event_id,
        &format!("payment_channel.deposit.{status}"),
        at,
        &format!(
            r#"{{"id":"pcd_1","is_final":{is_final},"payment_channel_external_id":"c-1","net":"99.5","currency":"trx"}}"#
        ),
    )
}

/// Applies `history` in order on a fresh store; each outcome, and the store.
async fn run(
    history: &[WorkItem],
    prepare: impl FnOnce(&MemoryResources),
) -> (Vec<Applied>, Arc<MemoryResources>) {
    let store = Arc::new(MemoryResources::new());
    prepare(&store);
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let mut outcomes = Vec::new();
    for (i, work) in history.iter().enumerate() {
        let (_, applied) = fulfil
            .apply(work, 1_000 + i as u64)
            .await
            .expect("memory never fails");
        outcomes.push(applied);
    }
    (outcomes, store)
}

use Applied::*;

#[tokio::test]
async fn every_outcome_from_a_history_of_deliveries() {
    let paid = || invoice("evt_paid", "paid", 20, "inv_1", "o-1");
    // (name, deliveries in order, their outcomes, the invoices fulfilled)
    type Case = (&'static str, Vec<WorkItem>, Vec<Applied>, Vec<&'static str>);
    let cases: Vec<Case> = vec![
        ("paid once", vec![paid()], vec![Fulfilled], vec!["inv_1"]),
        (
            "the same delivery twice",
            vec![paid(), paid()],
            vec![Fulfilled, AlreadyProcessed],
            vec!["inv_1"],
        ),
        (
            "two events paying one invoice",
            vec![paid(), invoice("evt_b", "paid", 21, "inv_1", "o-1")],
            vec![Fulfilled, AlreadyFinal],
            vec!["inv_1"],
        ),
        (
            "paid_over after paid",
            vec![paid(), invoice("evt_b", "paid_over", 21, "inv_1", "o-1")],
            vec![Fulfilled, AlreadyFinal],
            vec!["inv_1"],
        ),
        (
            "a second invoice for a paid order",
            vec![paid(), invoice("evt_b", "paid", 21, "inv_2", "o-1")],
            vec![Fulfilled, DuplicatePayment],
            vec!["inv_1"],
        ),
        (
            "open statuses in order",
            vec![
                invoice("evt_a", "awaiting_payment", 10, "inv_1", "o-1"),
                invoice("evt_b", "confirming", 11, "inv_1", "o-1"),
                paid(),
            ],
            vec![Updated, Updated, Fulfilled],
            vec!["inv_1"],
        ),
        (
            "a late open status",
            vec![
                invoice("evt_b", "confirming", 11, "inv_1", "o-1"),
                invoice("evt_a", "awaiting_payment", 10, "inv_1", "o-1"),
            ],
            vec![Updated, Stale],
            vec![],
        ),
        (
            "a late open status after paid",
            vec![paid(), invoice("evt_a", "confirming", 11, "inv_1", "o-1")],
            vec![Fulfilled, AlreadyFinal],
            vec!["inv_1"],
        ),
        (
            "expired, then paid",
            vec![invoice("evt_x", "expired", 15, "inv_1", "o-1"), paid()],
            vec![Updated, PaidLate],
            vec![],
        ),
        (
            "cancelled, then paid twice",
            vec![
                invoice("evt_x", "cancelled", 15, "inv_1", "o-1"),
                paid(),
                invoice("evt_b", "paid_over", 22, "inv_1", "o-1"),
            ],
            vec![Updated, PaidLate, PaidLate],
            vec![],
        ),
        (
            "withdrawal forward",
            vec![
                withdrawal("evt_a", "created", 1, ""),
                withdrawal("evt_b", "processing", 2, ""),
                withdrawal("evt_c", "completed", 3, ""),
            ],
            vec![Updated, Updated, Updated],
            vec![],
        ),
        (
            "withdrawal late",
            vec![
                withdrawal("evt_b", "processing", 2, ""),
                withdrawal("evt_a", "created", 1, ""),
            ],
            vec![Updated, Stale],
            vec![],
        ),
        (
            "withdrawal after final",
            vec![
                withdrawal("evt_c", "failed", 3, ""),
                withdrawal("evt_b", "processing", 2, ""),
            ],
            vec![Updated, AlreadyFinal],
            vec![],
        ),
        (
            "deposit credited once",
            vec![
                deposit("evt_a", "confirmed", 5, true),
                deposit("evt_b", "confirmed", 6, true),
            ],
            vec![Credited, AlreadyFinal],
            vec![],
        ),
        (
            "deposit advisory, then credit",
            vec![
                deposit("evt_a", "confirming", 5, false),
                deposit("evt_b", "confirmed", 6, true),
            ],
            vec![Updated, Credited],
            vec![],
        ),
        (
            "a reorg after the credit",
            vec![
                deposit("evt_b", "confirmed", 6, true),
                deposit("evt_c", "reorged", 7, false),
            ],
            vec![Credited, AlreadyFinal],
            vec![],
        ),
        (
            "an older advisory",
            vec![
                deposit("evt_b", "confirming", 6, false),
                deposit("evt_a", "confirming", 5, false),
            ],
            vec![Updated, Stale],
            vec![],
        ),
        (
            "an unknown event type",
            vec![item("evt_u", "payout.batch", 1, "{}")],
            vec![Ignored],
            vec![],
        ),
        (
            "a final deposit without net",
            vec![item(
                "evt_u",
                "payment_channel.deposit.confirmed",
                1,
                r#"{"id":"pcd_1","is_final":true}"#,
            )],
            vec![Unconfirmed],
            vec![],
        ),
        (
            "a partial confirmation, redelivered",
            vec![
                item(
                    "evt_u",
                    "payment_channel.deposit.confirmed",
                    1,
                    r#"{"id":"pcd_1","is_final":true}"#,
                ),
                item(
                    "evt_u",
                    "payment_channel.deposit.confirmed",
                    1,
                    r#"{"id":"pcd_1","is_final":true}"#,
                ),
            ],
            // It credits nothing on its own word and waits for Paymos' (listed, `recheck`).
            vec![Unconfirmed, AlreadyProcessed],
            vec![],
        ),
    ];
    for (name, history, expected, fulfilled) in cases {
        let (outcomes, store) = run(&history, |_| {}).await;
        assert_eq!(outcomes, expected, "{name}");
        assert_eq!(store.fulfilled(), fulfilled, "{name}: fulfilments");
    }
}

#[tokio::test]
async fn a_paid_invoice_that_differs_from_its_registered_order_is_held() {
    let (outcomes, store) = run(&[invoice("evt_a", "paid", 20, "inv_1", "o-1")], |s| {
        s.register_order("o-1", &Amount::parse("10.5").unwrap(), "usd");
    })
    .await;
    assert_eq!(
        outcomes,
        [Fulfilled],
        "10.50 is 10.5: the guard compares numbers"
    );

    let (outcomes, store2) = run(&[invoice("evt_a", "paid", 20, "inv_1", "o-1")], |s| {
        s.register_order("o-1", &Amount::parse("11").unwrap(), "USD");
    })
    .await;
    assert_eq!(outcomes, [Held]);
    assert!(store2.fulfilled().is_empty());
    let held = store2.invoice("inv_1").unwrap();
    assert!(held.held);
    assert_eq!(held.status.map(|(s, _)| s), Some(InvoiceStatus::Paid));
    assert!(!store.invoice("inv_1").unwrap().held);
}

#[tokio::test]
async fn a_duplicate_payment_names_the_invoice_that_won() {
    let (_, store) = run(
        &[
            invoice("evt_a", "paid", 20, "inv_1", "o-1"),
            invoice("evt_b", "paid", 21, "inv_2", "o-1"),
        ],
        |_| {},
    )
    .await;
    assert_eq!(
        store.invoice("inv_2").unwrap().duplicate_of.as_deref(),
        Some("inv_1")
    );
    assert_eq!(store.outcome("evt_b").map(|o| o.0), Some(DuplicatePayment));
}

#[tokio::test]
async fn a_completed_refund_notes_its_invoice_and_a_late_payment_keeps_the_close() {
    let (_, store) = run(
        &[
            invoice("evt_x", "expired", 15, "inv_1", "o-1"),
            invoice("evt_a", "paid", 20, "inv_1", "o-1"),
            withdrawal(
                "evt_r",
                "completed",
                30,
                r#","invoice_id":"inv_1","mode":"full""#,
            ),
        ],
        |_| {},
    )
    .await;
    let inv = store.invoice("inv_1").unwrap();
    assert_eq!(inv.status.map(|(s, _)| s), Some(InvoiceStatus::Expired));
    assert_eq!(inv.paid_late_at, Some(20));
    assert_eq!(inv.refunds.len(), 1);
    assert_eq!(
        inv.refunds[0].mode,
        Some(crate::money::invoice::RefundMode::Full)
    );
    assert_eq!(store.withdrawal("wdr_1"), Some(WithdrawalStatus::Completed));
}

#[tokio::test]
async fn deposits_credit_the_payer_once_per_deposit() {
    let (_, store) = run(
        &[
            deposit("evt_a", "confirmed", 5, true),
            deposit("evt_b", "confirmed", 6, true),
            deposit("evt_a", "confirmed", 5, true),
        ],
        |_| {},
    )
    .await;
    assert_eq!(
        store.credits("c-1", "TRX"),
        [Amount::parse("99.5").unwrap()]
    );
}

#[tokio::test]
async fn another_environments_delivery_and_a_mismatched_work_item_change_nothing() {
    let mut sandbox = invoice("evt_s", "paid", 20, "inv_1", "o-1");
    sandbox.environment = Some(Environment::Test);
    let mut mismatched = invoice("evt_m", "paid", 20, "inv_2", "o-2");
    mismatched.event_id = "evt_other".into();
    let (outcomes, store) = run(&[sandbox, mismatched], |_| {}).await;
    assert_eq!(outcomes, [OtherEnvironment, Unusable]);
    assert!(store.fulfilled().is_empty());
    let (_, reason) = store.outcome("test#evt_s").unwrap();
    assert!(reason.unwrap().contains("test"));
    assert_eq!(
        store.reviews().len(),
        1,
        "the unusable delivery waits for a person"
    );
}

#[tokio::test]
async fn by_hand_and_by_webhook_fulfil_once() {
    let fulfil = crate::tests::one_shop(MemoryResources::new());
    let order = OrderRef {
        external_id: Some("o-1".into()),
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    assert_eq!(
        fulfil
            .mark_paid("inv_1", order.clone(), "support:a", 1)
            .await
            .unwrap(),
        Fulfilled
    );
    assert_eq!(
        fulfil
            .mark_paid("inv_1", order, "support:b", 2)
            .await
            .unwrap(),
        AlreadyFinal
    );
    let (_, applied) = fulfil
        .apply(&invoice("evt_a", "paid", 20, "inv_1", "o-1"), 3)
        .await
        .unwrap();
    assert_eq!(applied, AlreadyFinal);
    assert_eq!(fulfil.store().fulfilled(), ["inv_1"]);
}

/// A reverse check that answers one invoice as given.
fn paymos(status: Option<&str>) -> MemoryPaymos {
    let api = MemoryPaymos::new();
    if let Some(status) = status {
        api.invoice(
            "inv_1",
            ConfirmedInvoice {
                status: status.into(),
                is_test: false,
                order_id: Some("o-1".into()),
                order_amount: Amount::parse("10.50"),
                order_currency: Some("USD".into()),
                token_amount: None,
                token_currency: None,
                paid_late: false,
                project_id: None,
                paid_at: None,
            },
        );
    }
    api
}

#[tokio::test]
async fn the_reverse_check_fulfils_only_what_paymos_confirms() {
    let paid = invoice("evt_a", "paid", 20, "inv_1", "o-1");
    for (at_source, receives, expected) in [
        (Some("paid"), 1, Ok(Fulfilled)),
        (None, 1, Ok(Unconfirmed)),
        (Some("awaiting_payment"), 1, Err("not yet")),
    ] {
        let fulfil =
            crate::tests::one_shop(MemoryResources::new()).with_confirmation(paymos(at_source));
        let result = fulfil.apply_received(&paid, 1, receives).await;
        match (result, expected) {
            (Ok((_, applied)), Ok(expected)) => assert_eq!(applied, expected, "{at_source:?}"),
            (Err(FulfilError::NotYet { .. }), Err(_)) => {
                assert!(
                    fulfil.store().outcome("evt_a").is_none(),
                    "retried, not recorded"
                );
            }
            (other, expected) => panic!("{at_source:?}: {other:?}, expected {expected:?}"),
        }
        let fulfilled = fulfil.store().fulfilled();
        assert_eq!(
            fulfilled.len(),
            usize::from(expected == Ok(Fulfilled)),
            "{at_source:?}"
        );
    }
}

/// A store that loses the first processed mark written alone (a crash between a change and
/// its mark).
struct CrashBeforeMark {
    inner: MemoryResources,
    crashed: std::sync::atomic::AtomicBool,
}

impl crate::roads::fulfil::ResourceStore for CrashBeforeMark {
    async fn write(
        &self,
        writes: &[crate::money::write::Write],
    ) -> Result<crate::money::write::Stored, PortError> {
        let mark_alone = matches!(writes, [w] if w.what == crate::money::write::What::Processed);
        if mark_alone && !self.crashed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(PortError::new(
                "test",
                "the function crashed before the mark",
            ));
        }
        self.inner.write(writes).await
    }

    async fn read(
        &self,
        key: &crate::money::write::Key,
    ) -> Result<Option<crate::money::write::Fields>, PortError> {
        self.inner.read(key).await
    }
}

#[tokio::test]
async fn a_crash_between_the_change_and_its_mark_is_recognised_on_the_next_receive() {
    let open = invoice("evt_o", "confirming", 10, "inv_2", "o-2");
    let deposit = deposit("evt_d", "confirmed", 5, true);
    let withdrawal = withdrawal("evt_w", "processing", 3, "");
    for (work, expected) in [
        (invoice("evt_a", "paid", 20, "inv_1", "o-1"), Fulfilled),
        (open, Updated),
        (deposit, Credited),
        (withdrawal, Updated),
    ] {
        let store = CrashBeforeMark {
            inner: MemoryResources::new(),
            crashed: std::sync::atomic::AtomicBool::new(false),
        };
        let fulfil = crate::tests::one_shop(store);
        assert!(
            matches!(
                fulfil.apply(&work, 1).await,
                Err(FulfilError::Unavailable(_))
            ),
            "{}: the first receive fails after the change",
            work.event_id
        );
        assert_eq!(
            fulfil.store().inner.outcome(&work.event_id),
            None,
            "not marked"
        );
        let (_, again) = fulfil.apply(&work, 2).await.unwrap();
        assert_eq!(
            again, expected,
            "{}: its own change, recognised",
            work.event_id
        );
        let (_, third) = fulfil.apply(&work, 3).await.unwrap();
        assert_eq!(third, AlreadyProcessed, "{}", work.event_id);
        let inner = &fulfil.store().inner;
        assert_eq!(inner.outcome(&work.event_id).map(|o| o.0), Some(expected));
        assert!(inner.fulfilled().len() <= 1);
        assert!(inner.credits("c-1", "TRX").len() <= 1, "credited once");
    }
}

// ---- One invoice, one truth: every road obeys the invoice's record (issue 20) ----

/// An invoice event with `data` as given (no order unless it names one).
fn bare(event_id: &str, event_type: &str, at: u64, data: &str) -> WorkItem {
    item(event_id, event_type, at, data)
}

fn order_ref(id: Option<&str>) -> OrderRef {
    OrderRef {
        external_id: id.map(str::to_owned),
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    }
}

#[tokio::test]
async fn a_paid_event_without_its_order_fulfils_the_order_the_invoice_named_once() {
    // The official ton_invoice vectors carry no data.order: the order comes from the record.
    let history = [
        invoice("evt_await", "awaiting_payment", 10, "inv_1", "o-1"),
        bare(
            "evt_paid",
            "invoice.paid",
            20,
            r#"{"invoice_id":"inv_1","payment":{"expected":"10.50","currency":"USDT"}}"#,
        ),
        invoice("evt_second", "paid", 30, "inv_2", "o-1"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Fulfilled, DuplicatePayment]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
    assert_eq!(
        store.invoice("inv_2").unwrap().duplicate_of.as_deref(),
        Some("inv_1")
    );
}

#[tokio::test]
async fn the_registered_amount_is_checked_against_the_price_the_invoice_recorded() {
    // awaiting_payment named the order at 10.50 USD; the paid event names neither.
    let history = [
        invoice("evt_await", "awaiting_payment", 10, "inv_1", "o-1"),
        bare("evt_paid", "invoice.paid", 20, r#"{"invoice_id":"inv_1"}"#),
    ];
    let (outcomes, store) = run(&history, |s| {
        s.register_order("o-1", &Amount::parse("500").unwrap(), "USD");
    })
    .await;
    assert_eq!(outcomes, [Updated, Held]);
    assert!(store.fulfilled().is_empty());
    let (ok, store) = run(&history, |s| {
        s.register_order("o-1", &Amount::parse("10.5").unwrap(), "USD");
    })
    .await;
    assert_eq!(ok, [Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

#[tokio::test]
async fn an_event_naming_another_order_than_the_record_is_held_not_fulfilled() {
    let history = [
        invoice("evt_await", "awaiting_payment", 10, "inv_1", "o-cheap"),
        invoice("evt_paid", "paid", 20, "inv_1", "o-dear"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Held]);
    assert!(store.fulfilled().is_empty());
    let record = store.invoice("inv_1").unwrap();
    assert_eq!(record.order.external_id.as_deref(), Some("o-cheap"));
    assert_eq!(
        record.seen().standing(),
        crate::money::invoice::Standing::Held
    );
    let reason = store.outcome("evt_paid").unwrap().1.unwrap();
    assert!(
        reason.contains("o-dear") && reason.contains("o-cheap"),
        "{reason}"
    );
}

#[tokio::test]
async fn mark_paid_without_an_order_id_claims_the_recorded_order_once() {
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    for (i, inv) in ["inv_1", "inv_2"].into_iter().enumerate() {
        let work = invoice(&format!("evt_{i}"), "awaiting_payment", 10, inv, "o-1");
        fulfil.apply(&work, 1).await.unwrap();
    }
    let first = fulfil
        .mark_paid("inv_1", order_ref(None), "x", 2)
        .await
        .unwrap();
    let second = fulfil
        .mark_paid("inv_2", order_ref(None), "x", 3)
        .await
        .unwrap();
    assert_eq!((first, second), (Fulfilled, DuplicatePayment));
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

fn refund(event_id: &str, at: u64, invoice: &str, amount: &str, mode: &str) -> WorkItem {
    item(
        event_id,
        "withdrawal.completed",
        at,
        &format!(
            r#"{{"withdrawal_id":"wdr_{event_id}","invoice_id":"{invoice}","mode":"{mode}","type":"refund","amount":"{amount}","currency":"USDT"}}"#
        ),
    )
}

#[tokio::test]
async fn a_refund_before_its_payment_never_loses_the_payment() {
    let history = [
        refund("evt_r", 10, "inv_1", "0.50", "overpayment"),
        invoice("evt_paid", "paid_over", 20, "inv_1", "o-1"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Fulfilled]);
    assert_eq!(store.fulfilled(), ["inv_1"]);
    assert_eq!(store.invoice("inv_1").unwrap().refunds.len(), 1);
}

#[tokio::test]
async fn only_a_full_refund_clears_a_payment_from_review() {
    let usdt = |event_id: &str, inv: &str, order: &str, amount: &str| {
        item(
            event_id,
            "invoice.paid",
            20,
            &format!(
                r#"{{"invoice_id":"{inv}","order":{{"external_id":"{order}","amount":"{amount}","currency":"USDT"}}}}"#
            ),
        )
    };
    let history = [
        // Held: 90 paid, the order was registered at 100.
        usdt("evt_h", "inv_h", "o-h", "90"),
        refund("evt_r1", 30, "inv_h", "5", "overpayment"),
        // A duplicate payment with a 0.10 refund.
        usdt("evt_d1", "inv_d1", "o-d", "10"),
        usdt("evt_d2", "inv_d2", "o-d", "10"),
        refund("evt_r2", 31, "inv_d2", "0.10", "overpayment"),
    ];
    let (outcomes, store) = run(&history, |s| {
        s.register_order("o-h", &Amount::parse("100").unwrap(), "USDT");
    })
    .await;
    assert_eq!(
        outcomes,
        [Held, Updated, Fulfilled, DuplicatePayment, Updated]
    );
    let waits = |inv: &str| {
        store
            .invoice(inv)
            .unwrap()
            .seen()
            .standing()
            .waits_for_person()
    };
    assert!(waits("inv_h"), "a 5 USDT refund of 90 leaves it held");
    assert!(waits("inv_d2"), "0.10 of a duplicate leaves it to refund");
    // Overpayment refunds adding up to the whole payment still return none of the price: only
    // a refund of mode `full` settles it.
    let (_, store) = run(
        &[
            usdt("evt_d1", "inv_d1", "o-d", "10"),
            usdt("evt_d2", "inv_d2", "o-d", "10"),
            refund("evt_r2", 31, "inv_d2", "0.10", "overpayment"),
            refund("evt_r3", 32, "inv_d2", "9.90", "overpayment"),
        ],
        |_| {},
    )
    .await;
    assert!(
        waits_in(&store, "inv_d2"),
        "overpayment refunds settle nothing"
    );
    let (_, store) = run(
        &[
            usdt("evt_d1", "inv_d1", "o-d", "10"),
            usdt("evt_d2", "inv_d2", "o-d", "10"),
            refund("evt_r3", 32, "inv_d2", "10", "full"),
        ],
        |_| {},
    )
    .await;
    assert!(!waits_in(&store, "inv_d2"), "a full refund settles it");
}

fn waits_in(store: &MemoryResources, invoice: &str) -> bool {
    store
        .invoice(invoice)
        .unwrap()
        .seen()
        .standing()
        .waits_for_person()
}

#[tokio::test]
async fn a_refund_naming_a_raw_key_writes_nothing_and_the_genuine_payment_fulfils() {
    let forged = [r#""fulfilment#inv_z""#, r#""order_paid#o-1""#];
    let mut history: Vec<WorkItem> = forged
        .iter()
        .enumerate()
        .map(|(i, id)| {
            item(
                &format!("evt_f{i}"),
                "withdrawal.completed",
                10,
                &format!(r#"{{"withdrawal_id":"wdr_f{i}","invoice_id":{id},"mode":"full"}}"#),
            )
        })
        .collect();
    history.push(invoice("evt_paid", "paid", 20, "inv_z", "o-1"));
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Unusable, Unusable, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_z".into(), Some("o-1".into()))]);
    assert!(
        store
            .keys()
            .iter()
            .all(|k| k == "inv_z" || k == "fulfilment#inv_z" || k == "order_paid#o-1"),
        "{:?}",
        store.keys()
    );
}

#[tokio::test]
async fn manual_roads_run_twice_report_what_exists() {
    let history = [
        invoice("evt_h", "paid", 20, "inv_h", "o-h"),
        invoice("evt_a", "paid", 20, "inv_a", "o-d"),
        invoice("evt_b", "paid", 21, "inv_b", "o-d"),
    ];
    let store = Arc::new(MemoryResources::new());
    store.register_order("o-h", &Amount::parse("1").unwrap(), "USD");
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    // By hand first (mark-paid, reconcile --apply), then again by the same person: the second
    // run says what exists (a hold, a duplicate, a fulfilment), never its own earlier write.
    let expected = [
        (Held, Held),
        (Fulfilled, AlreadyFinal),
        (DuplicatePayment, DuplicatePayment),
    ];
    for (work, expected) in history.iter().zip(expected) {
        let Change::Invoice {
            invoice_id, order, ..
        } = change_of(&crate::wire::envelope::Envelope::parse(&work.body).unwrap())
        else {
            panic!()
        };
        let once = fulfil
            .apply_by_hand(
                &invoice_id,
                InvoiceStatus::Paid,
                order.clone(),
                "reconcile",
                5,
            )
            .await
            .unwrap();
        let twice = fulfil
            .apply_by_hand(&invoice_id, InvoiceStatus::Paid, order, "reconcile", 6)
            .await
            .unwrap();
        assert_eq!((once, twice), expected, "{invoice_id}");
    }
    assert_eq!(store.fulfilled(), ["inv_a"]);
    let again = fulfil
        .mark_paid("inv_h", order_ref(None), "alice", 7)
        .await
        .unwrap();
    assert_eq!(again, Held);
    let again = fulfil
        .mark_paid("inv_b", order_ref(None), "alice", 8)
        .await
        .unwrap();
    assert_eq!(again, DuplicatePayment);
}

#[tokio::test]
async fn references_past_the_key_limits_are_unusable_never_an_error() {
    let long = "o".repeat(2048);
    let history = [
        item(
            "evt_o",
            "invoice.paid",
            20,
            &format!(r#"{{"invoice_id":"inv_1","order":{{"external_id":"{long}"}}}}"#),
        ),
        item(
            "evt_p",
            "payment_channel.deposit.confirmed",
            20,
            &format!(
                r#"{{"id":"pcd_1","is_final":true,"payment_channel_external_id":"{long}","net":"1","currency":"TRX"}}"#
            ),
        ),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Unusable, Unusable]);
    assert!(store.keys().is_empty(), "{:?}", store.keys());
    assert_eq!(store.reviews().len(), 2, "each listed for an operator");
}

#[tokio::test]
async fn smaller_rules_of_the_invoice_and_the_deposit() {
    // 10 TON is not 10 USD; an amount without a currency is not the registered order's.
    let ton = item(
        "evt_ton",
        "invoice.paid",
        20,
        r#"{"invoice_id":"inv_t","order":{"external_id":"o-t","currency":"USD"},"payment":{"expected":"10","currency":"TON"}}"#,
    );
    let bare_amount = item(
        "evt_amt",
        "invoice.paid",
        20,
        r#"{"invoice_id":"inv_a","order":{"external_id":"o-a"},"amount":"10"}"#,
    );
    // A deposit with net 0 credits nothing.
    let zero = item(
        "evt_zero",
        "payment_channel.deposit.confirmed",
        20,
        r#"{"id":"pcd_0","is_final":true,"payment_channel_external_id":"c-1","net":"0","currency":"TRX"}"#,
    );
    // A type matched by its last segment only.
    let odd = item(
        "evt_odd",
        "invoice.x.paid",
        20,
        r#"{"invoice_id":"inv_x","order":{"external_id":"o-x"}}"#,
    );
    let (outcomes, store) = run(&[ton, bare_amount, zero, odd], |s| {
        s.register_order("o-t", &Amount::parse("10").unwrap(), "USD");
        s.register_order("o-a", &Amount::parse("10").unwrap(), "USD");
    })
    .await;
    assert_eq!(outcomes, [Held, Held, Unusable, Ignored]);
    assert!(store.fulfilled().is_empty());
    assert!(store.credits("c-1", "TRX").is_empty());
}

#[tokio::test]
async fn after_a_late_payment_is_released_a_second_endpoints_payment_waits_for_no_one() {
    use crate::roads::release::{ReleaseBy, release};
    let store = Arc::new(MemoryResources::new());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    for work in [
        invoice("evt_x", "expired", 15, "inv_1", "o-1"),
        invoice("evt_a", "paid", 20, "inv_1", "o-1"),
    ] {
        fulfil.apply(&work, 1).await.unwrap();
    }
    let by = ReleaseBy {
        actor: "alice",
        reason: Some("paid on chain"),
        override_amount: false,
        project: None,
        order: None,
    };
    assert_eq!(
        release(&*store, "inv_1", None, &by, &RecordFulfilment, 2).await,
        Ok(Fulfilled)
    );
    let (_, second) = fulfil
        .apply(&invoice("evt_b", "paid", 20, "inv_1", "o-1"), 3)
        .await
        .unwrap();
    assert_eq!(second, AlreadyFinal);
    assert!(
        !store
            .invoice("inv_1")
            .unwrap()
            .seen()
            .standing()
            .waits_for_person()
    );
}

#[tokio::test]
async fn a_redelivery_after_a_later_event_moved_the_invoice_changes_nothing() {
    let fulfil = crate::tests::one_shop(CrashBeforeMark {
        inner: MemoryResources::new(),
        crashed: std::sync::atomic::AtomicBool::new(false),
    });
    let confirming = invoice("evt_c", "confirming", 10, "inv_1", "o-1");
    assert!(fulfil.apply(&confirming, 1).await.is_err(), "crashed");
    fulfil
        .apply(&invoice("evt_p", "paid", 20, "inv_1", "o-1"), 2)
        .await
        .unwrap();
    let (_, again) = fulfil.apply(&confirming, 3).await.unwrap();
    // Its open status was applied before the crash and moved past since: nothing to do, and
    // nothing done twice (an open status is not kept among what the invoice holds, so the set
    // stays bounded: `a_flood_of_forward_moving_events_keeps_the_invoice_small`).
    assert_eq!(again, AlreadyFinal);
    assert_eq!(fulfil.store().inner.fulfilments().len(), 1);
    // With nothing in between, the redelivery keeps its own outcome (`last_event_id`).
    let fulfil = crate::tests::one_shop(CrashBeforeMark {
        inner: MemoryResources::new(),
        crashed: std::sync::atomic::AtomicBool::new(false),
    });
    assert!(fulfil.apply(&confirming, 1).await.is_err(), "crashed");
    assert_eq!(fulfil.apply(&confirming, 3).await.unwrap().1, Updated);
}

/// `events since`: the facts committed at or after a time, as the stream published them, read
/// back from the store's records (here the memory twin's).
#[tokio::test]
async fn events_since_a_time_are_the_facts_committed_from_then_with_their_stream_ids() {
    use crate::roads::handoff::since;
    let (outcomes, store) = run(
        &[
            invoice("evt_1", "paid", 10, "inv_1", "o-1"),
            invoice("evt_2", "expired", 11, "inv_2", "o-2"),
        ],
        |_| {},
    )
    .await;
    assert_eq!(outcomes, [Fulfilled, Updated]);
    let all = since(store.as_ref(), 0, Environment::Live).await.unwrap();
    let keys: Vec<_> = all
        .iter()
        .map(|(_, e)| e.idempotency_key.as_str())
        .collect();
    assert_eq!(keys, ["order-paid:inv_1", "invoice-closed:inv_2"]);
    assert!(all.windows(2).all(|w| w[0].0 <= w[1].0), "oldest first");
    // The fulfilment was committed at 1,000 ms, the close at 11 s: only the close is later.
    let later = since(store.as_ref(), 1_001, Environment::Live)
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].1.idempotency_key, "invoice-closed:inv_2");
}

// Issue 28, case 1: a refund of mode `full` recorded before its (retried) paid event.
#[tokio::test]
async fn a_full_refund_recorded_first_keeps_the_late_payment_from_shipping() {
    let history = [
        refund("evt_r", 30, "inv_1", "10.50", "full"),
        invoice("evt_p", "paid", 20, "inv_1", "o-1"),
        // The customer pays the same order again, on a new invoice: that one ships.
        invoice("evt_q", "paid", 40, "inv_2", "o-1"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Refunded, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_2".into(), Some("o-1".into()))]);
    let first = store.invoice("inv_1").unwrap();
    assert_eq!(first.status.map(|(s, _)| s), Some(InvoiceStatus::Paid));
    assert!(!first.seen().standing().waits_for_person());
    assert!(!store.keys().contains(&"fulfilment#inv_1".to_owned()));
}

// Issue 28, case 1, by hand: `mark-paid` of an invoice refunded in full ships nothing either;
// its word names no payment time, so (issue 49) it waits for a person, never settled silently.
#[tokio::test]
async fn mark_paid_of_an_invoice_refunded_in_full_ships_nothing() {
    let (_, store) = run(&[refund("evt_r", 30, "inv_1", "1", "full")], |_| {}).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let applied = fulfil
        .mark_paid("inv_1", order_ref(Some("o-1")), "support", 5_000)
        .await
        .unwrap();
    assert_eq!(applied, Held);
    assert!(store.fulfilments().is_empty());
    let seen = store.invoice("inv_1").unwrap().seen();
    assert_eq!(
        seen.standing(),
        crate::money::invoice::Standing::AfterRefund
    );
}

// Issue 28, case 8: an order known nowhere is learned before anything ships.
#[tokio::test]
async fn a_payment_naming_no_order_known_nowhere_waits_and_ships_once_learned() {
    let silent = |event_id: &str, inv: &str| {
        item(
            event_id,
            "invoice.paid",
            20,
            &format!(
                r#"{{"invoice_id":"{inv}","payment":{{"expected":"10.5","currency":"USDT"}}}}"#
            ),
        )
    };
    let history = [
        silent("evt_a", "inv_a"),
        silent("evt_b", "inv_b"),
        // The second endpoint's copy of inv_a's payment names its order.
        invoice("evt_a2", "paid", 20, "inv_a", "o-1"),
        // inv_b pays the same order: a duplicate once its order is known.
        invoice("evt_b2", "paid", 20, "inv_b", "o-1"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(
        outcomes,
        [OrderUnknown, OrderUnknown, Fulfilled, DuplicatePayment]
    );
    assert_eq!(store.fulfilments(), [("inv_a".into(), Some("o-1".into()))]);
    assert_eq!(store.reviews().get("evt_a"), Some(&OrderUnknown));
    assert!(
        store.fulfilments().iter().all(|(_, order)| order.is_some()),
        "nothing ships with no order"
    );
    // An order recorded by an earlier event is adopted: that payment ships.
    let (outcomes, store) = run(
        &[
            invoice("evt_o", "confirming", 10, "inv_c", "o-c"),
            silent("evt_c", "inv_c"),
        ],
        |_| {},
    )
    .await;
    assert_eq!(outcomes, [Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_c".into(), Some("o-c".into()))]);
    // mark-paid without --order-id cannot name it either; with it, it ships.
    let (_, store) = run(&[silent("evt_d", "inv_d")], |_| {}).await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let by_hand = |order| fulfil.mark_paid("inv_d", order, "support", 5_000);
    assert_eq!(by_hand(OrderRef::none()).await.unwrap(), OrderUnknown);
    assert!(store.fulfilments().is_empty());
    assert_eq!(by_hand(order_ref(Some("o-d"))).await.unwrap(), Fulfilled);
    assert_eq!(store.fulfilments(), [("inv_d".into(), Some("o-d".into()))]);
}

// Issue 28, case 8: an empty order id is no order.
#[tokio::test]
async fn an_empty_order_id_is_no_order() {
    let empty = |event_id: &str, inv: &str| {
        item(
            event_id,
            "invoice.paid",
            20,
            &format!(
                r#"{{"invoice_id":"{inv}","order":{{"external_id":"","amount":"1","currency":"USD"}}}}"#
            ),
        )
    };
    let (outcomes, store) = run(&[empty("evt_1", "inv_1"), empty("evt_2", "inv_2")], |_| {}).await;
    assert_eq!(outcomes, [OrderUnknown, OrderUnknown]);
    assert!(store.fulfilments().is_empty());
    assert!(!store.keys().iter().any(|k| k.starts_with("order_paid#")));
}

// Issue 28, case 9: a payment's token amount is not the order's price.
#[tokio::test]
async fn a_token_only_payment_is_never_compared_with_a_fiat_registration() {
    let token_only = item(
        "evt_t",
        "invoice.paid",
        20,
        r#"{"invoice_id":"inv_t","order":{"external_id":"o-t"},"payment":{"expected":"10.5","currency":"USDT"}}"#,
    );
    // Priced earlier by the invoice's own open event: that price, in USD, is compared.
    let (outcomes, store) = run(
        &[
            invoice("evt_o", "confirming", 10, "inv_t", "o-t"),
            token_only.clone(),
        ],
        |s| s.register_order("o-t", &Amount::parse("10.5").unwrap(), "USD"),
    )
    .await;
    assert_eq!(outcomes, [Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_t".into(), Some("o-t".into()))]);
    // No price anywhere: held, and the record carries no token amount as a price.
    let (outcomes, store) = run(&[token_only], |s| {
        s.register_order("o-t", &Amount::parse("10.5").unwrap(), "USD");
    })
    .await;
    assert_eq!(outcomes, [Held]);
    let record = store.invoice("inv_t").unwrap();
    assert_eq!((record.order.amount, record.order.currency), (None, None));
}

// A review note is what the hand-off publishes of a delivery that waits for a person: it names
// the resource when the delivery does (an unusable invoice event, a payment of no known order).
#[tokio::test]
async fn a_review_note_names_the_resource_its_delivery_names() {
    use crate::roads::handoff::StateRecords as _;
    let long = "o".repeat(crate::wire::envelope::MAX_REFERENCE_LEN + 1);
    let history = [
        item(
            "evt_u",
            "invoice.paid",
            20,
            &format!(r#"{{"invoice_id":"inv_u","order":{{"external_id":"{long}"}}}}"#),
        ),
        item("evt_o", "invoice.paid", 20, r#"{"invoice_id":"inv_o"}"#),
        item(
            "evt_x",
            "invoice.paid",
            20,
            r#"{"order":{"external_id":"o-1"}}"#,
        ),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Unusable, OrderUnknown, Unusable]);
    let mut named: Vec<(String, Option<String>, String)> = store
        .records()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            crate::money::record::StateRecord::Review(r) => {
                Some((r.event_id, r.resource_id, r.reason))
            }
            _ => None,
        })
        .collect();
    named.sort();
    assert_eq!(
        named,
        [
            ("evt_o".into(), Some("inv_o".into()), "order_unknown".into()),
            ("evt_u".into(), Some("inv_u".into()), "unusable".into()),
            ("evt_x".into(), None, "unusable".into()),
        ]
    );
}

// Issue 38, case 1: a `full` refund returns what was paid until it completed, by Paymos'
// clock. A payment made after it is a new payment: it ships (open invoice) or waits for a
// person (paid late), never `refunded`.
fn underpaid(event_id: &str, status: &str, at: u64) -> WorkItem {
    invoice(event_id, status, at, "inv_1", "o-1")
}

#[tokio::test]
async fn a_payment_after_a_full_refund_of_a_partial_payment_ships() {
    let history = [
        underpaid("evt_u", "underpaid_waiting", 10),
        refund("evt_r", 20, "inv_1", "4.00", "full"),
        underpaid("evt_p", "paid", 30),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

#[tokio::test]
async fn a_late_payment_after_a_full_refund_of_a_partial_payment_waits_for_a_person() {
    let history = [
        underpaid("evt_u", "underpaid", 10),
        refund("evt_r", 20, "inv_1", "4.00", "full"),
        underpaid("evt_p", "paid", 30),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Updated, PaidLate]);
    assert!(store.fulfilments().is_empty());
    let seen = store.invoice("inv_1").unwrap().seen();
    assert_eq!(seen.standing(), crate::money::invoice::Standing::PaidLate);
    assert!(seen.standing().waits_for_person());
}

#[tokio::test]
async fn a_full_refund_completed_after_the_payment_settles_it_in_any_arrival_order() {
    // Refunded at 20, paid again at 30, refunded again at 40: the payment at 30 was returned
    // by the refund at 40, whichever refund arrives first.
    for refunds in [[40, 20], [20, 40]] {
        let history = [
            underpaid("evt_u", "underpaid_waiting", 10),
            refund(
                &format!("evt_r{}", refunds[0]),
                refunds[0],
                "inv_1",
                "4",
                "full",
            ),
            refund(
                &format!("evt_r{}", refunds[1]),
                refunds[1],
                "inv_1",
                "10",
                "full",
            ),
            underpaid("evt_p", "paid", 30),
        ];
        let (outcomes, store) = run(&history, |_| {}).await;
        assert_eq!(
            outcomes,
            [Updated, Updated, Updated, Refunded],
            "{refunds:?}"
        );
        assert!(store.fulfilments().is_empty(), "{refunds:?}");
    }
}

// Issue 38, case 5: a blank order id names no order, on a person's road as on a webhook's: no
// claim `order_paid#` is ever written, and the next payment is not a "duplicate".
#[tokio::test]
async fn a_blank_order_id_by_hand_names_no_order() {
    for blank in ["", " ", "\t"] {
        let (_, store) = run(&[], |_| {}).await;
        let fulfil = crate::tests::one_shop(Arc::clone(&store));
        let applied = fulfil
            .mark_paid("inv_1", order_ref(Some(blank)), "support", 5_000)
            .await
            .unwrap();
        assert_eq!(applied, OrderUnknown, "{blank:?}");
        assert!(store.fulfilments().is_empty(), "{blank:?}");
        assert!(
            !store.keys().iter().any(|k| k.starts_with("order_paid#")),
            "{blank:?}: {:?}",
            store.keys()
        );
        let applied = fulfil
            .mark_paid("inv_2", order_ref(Some("o-2")), "support", 5_000)
            .await
            .unwrap();
        assert_eq!(applied, Fulfilled, "{blank:?}");
    }
    assert_eq!(crate::money::change::named(" \t"), None);
    assert_eq!(crate::money::change::named(" o-1"), Some(" o-1"));
}

// Issue 38: an invoice's `applied` set stays bounded under a flood of forward-moving events
// (each open status later than the last is applied): the item never grows toward DynamoDB's
// 400 KB, whatever a leaked secret sends.
#[tokio::test]
async fn a_flood_of_forward_moving_events_keeps_the_invoice_small() {
    let flood: Vec<WorkItem> = (0..500)
        .map(|i| {
            invoice(
                &format!("evt_{i}"),
                if i % 2 == 0 {
                    "confirming"
                } else {
                    "underpaid_waiting"
                },
                10 + i,
                "inv_1",
                "o-1",
            )
        })
        .chain([invoice("evt_paid", "paid", 1_000, "inv_1", "o-1")])
        .collect();
    let (outcomes, store) = run(&flood, |_| {}).await;
    assert!(
        outcomes[..500].iter().all(|o| *o == Updated),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[500], Fulfilled);
    assert_eq!(
        story(&store, "inv_1").len(),
        3,
        "one step per status reached"
    );
    let applied = store.invoice("inv_1").unwrap().applied;
    assert!(
        applied.len() <= 4,
        "{} ids kept: {applied:?}",
        applied.len()
    );
    assert!(applied.contains("evt_paid"));
}

// Issue 38, refunds in time on a person's road: `mark-paid` of an invoice closed unpaid whose
// partial payment was refunded in full names no payment time: it is recorded late and waits
// for a person (issue 49: never settled in silence), and so does the payment Paymos dates
// after the refund.
#[tokio::test]
async fn an_undated_late_payment_after_a_full_refund_leaves_the_dated_one_its_way_out() {
    let (_, store) = run(
        &[
            underpaid("evt_u", "underpaid", 10),
            refund("evt_r", 20, "inv_1", "4", "full"),
        ],
        |_| {},
    )
    .await;
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let by_hand = fulfil
        .mark_paid("inv_1", order_ref(Some("o-1")), "support", 5_000)
        .await
        .unwrap();
    assert_eq!(by_hand, PaidLate);
    assert_eq!(
        store.invoice("inv_1").unwrap().seen().standing(),
        crate::money::invoice::Standing::AfterRefund,
        "undated after a full refund: a person says whether it was paid again"
    );
    let (_, late) = fulfil
        .apply(&underpaid("evt_p", "paid", 30), 6_000)
        .await
        .unwrap();
    // The payment a person recorded undated keeps waiting: a later dated event of it is final
    // already (issue 49: it does not date a payment recorded before it).
    assert_eq!(late, AlreadyFinal);
    assert!(
        store
            .invoice("inv_1")
            .unwrap()
            .seen()
            .standing()
            .waits_for_person()
    );
}

// Issue 39: a message that was not applied came back after the queue's 181 s visibility and
// reached the DLQ after 5 receives (15 minutes of overload). It now waits longer each time.
#[test]
fn a_message_not_applied_waits_out_hours_of_trouble_and_poison_reaches_the_dlq_at_once() {
    use crate::port::PortErrorKind;
    use crate::roads::fulfil::PoisonError;
    use crate::wire::work::WORK_RECEIVES;
    let poison = FulfilError::Poison(PoisonError::from(
        WorkItem::decode("not a work item").unwrap_err(),
    ));
    let troubles = [
        FulfilError::Unavailable(PortError::of_kind(
            "put",
            PortErrorKind::Throttled,
            "slow down",
        )),
        FulfilError::Unavailable(PortError::of_kind(
            "put",
            PortErrorKind::Misconfigured,
            "no table",
        )),
        FulfilError::NotYet {
            resource_id: "inv_1".into(),
            status: "pending".into(),
        },
    ];
    for receives in 1..=WORK_RECEIVES {
        for spread in [-1.0, 0.0, 1.0] {
            assert_eq!(
                poison.redelivery_in_s(receives, spread),
                0,
                "poison comes back at once"
            );
        }
    }
    for trouble in &troubles {
        let waits: Vec<u32> = (1..WORK_RECEIVES)
            .map(|r| trouble.redelivery_in_s(r, -1.0))
            .collect();
        assert_eq!(
            waits[..3],
            [14, 27, 54],
            "15 s, then twice as long, a tenth less at most"
        );
        assert!(
            waits.windows(2).all(|w| w[0] <= w[1]),
            "never shorter: {waits:?}"
        );
        assert!(
            (1..=WORK_RECEIVES).all(|r| trouble.redelivery_in_s(r, 1.0) <= 990),
            "at most 15 minutes and a tenth: a person sees it within the hour it clears"
        );
        let before_the_dlq: u32 = waits.iter().sum();
        assert!(
            before_the_dlq >= 2 * 3_600,
            "{before_the_dlq} s of trouble are waited out before the DLQ: {waits:?}"
        );
        assert_eq!(
            [-0.5, 0.0, 0.5].map(|spread| trouble.redelivery_in_s(3, spread)),
            [57, 60, 63],
            "messages that failed together come back apart, within a tenth of 60 s"
        );
    }
}

// Issue 43 (a mutant no fast test caught: the rule's second try writing nothing): two full
// refunds arriving latest first. The earlier one is still recorded (its withdrawal and its
// note on the invoice), and the invoice keeps the later one's time, which settles more.
#[tokio::test]
async fn a_full_refund_arriving_after_a_later_one_is_recorded_and_keeps_the_later_time() {
    let history = [
        invoice("evt_p", "paid", 10, "inv_1", "o-1"),
        refund("evt_later", 40, "inv_1", "10.50", "full"),
        refund("evt_earlier", 30, "inv_1", "10.50", "full"),
        // Paid again at 35: before the later full refund, so it returns this one too.
        invoice("evt_again", "paid", 35, "inv_1", "o-1"),
    ];
    let (_, store) = run(&history, |_| {}).await;
    for w in ["wdr_evt_later", "wdr_evt_earlier"] {
        assert_eq!(
            store.withdrawal(w),
            Some(WithdrawalStatus::Completed),
            "{w} is recorded"
        );
    }
    let first = store.invoice("inv_1").unwrap();
    let mut refunds: Vec<_> = first
        .refunds
        .iter()
        .map(|r| (r.withdrawal_id.clone(), r.completed_at))
        .collect();
    refunds.sort();
    assert_eq!(
        refunds,
        [
            ("wdr_evt_earlier".to_owned(), Some(30)),
            ("wdr_evt_later".to_owned(), Some(40))
        ]
    );
    assert_eq!(
        store.fulfilled(),
        ["inv_1"],
        "the first payment shipped, once"
    );
}

// Issue 43 (mutants no fast test caught: an open status's rank deleted): two open statuses
// stamped the same second are ordered by Paymos' flow, awaiting the client, awaiting payment,
// confirming, underpaid and waiting; a later one replaces an earlier one, never the reverse.
#[test]
fn open_statuses_of_the_same_second_move_only_forward_in_paymos_flow() {
    use crate::money::write::{Field, Fields, Value, transition};
    let flow = [
        InvoiceStatus::AwaitingClient,
        InvoiceStatus::AwaitingPayment,
        InvoiceStatus::Confirming,
        InvoiceStatus::UnderpaidWaiting,
    ];
    let at = 1_760_000_000;
    for (i, held) in flow.iter().enumerate() {
        let item: Fields = [
            (Field::Status, Value::text(held.as_str())),
            (Field::StatusAt, Value::Int(at)),
            (Field::StatusRank, Value::Int(u64::from(held.rank()))),
        ]
        .into_iter()
        .collect();
        for (j, incoming) in flow.iter().enumerate() {
            assert_eq!(
                transition(*incoming, at).holds(Some(&item)),
                j > i,
                "{incoming} over {held}, the same second"
            );
            assert!(
                transition(*incoming, at + 1).holds(Some(&item)),
                "{incoming} a second after {held}"
            );
        }
    }
}

/// The memory store, with every write list tried and every item read.
#[derive(Default)]
struct Billed {
    inner: MemoryResources,
    tried: std::sync::Mutex<Vec<Vec<crate::money::write::What>>>,
    reads: std::sync::atomic::AtomicUsize,
}

impl crate::roads::fulfil::ResourceStore for Billed {
    async fn write(
        &self,
        writes: &[crate::money::write::Write],
    ) -> Result<crate::money::write::Stored, PortError> {
        self.tried
            .lock()
            .unwrap()
            .push(writes.iter().map(|w| w.what).collect());
        self.inner.write(writes).await
    }

    async fn read(
        &self,
        key: &crate::money::write::Key,
    ) -> Result<Option<crate::money::write::Fields>, PortError> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.read(key).await
    }
}

// Issue 39: a transaction is billed two units per item, refused or not. The second endpoint's
// copy of a paid invoice (some 9 % of a typical mix) tried the payment's whole transaction
// (8 units) only to be told the invoice was final. One read of the write whose refusal would
// win now tells it, and the copy writes its mark alone; the first copy still fulfils once.
#[tokio::test]
async fn a_paid_invoices_second_copy_is_refused_by_a_read_and_writes_only_its_mark() {
    use crate::money::write::What;
    let store = Arc::new(Billed::default());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let first = invoice("evt_a", "paid", 20, "inv_1", "o-1");
    let copy = invoice("evt_b", "paid", 20, "inv_1", "o-1");
    let (_, applied) = fulfil.apply(&first, 1_000).await.unwrap();
    assert_eq!(applied, Fulfilled);
    let paid: Vec<Vec<What>> = store.tried.lock().unwrap().drain(..).collect();
    assert!(
        paid[0].len() > 1 && paid[0].contains(&What::Fulfilment),
        "{paid:?}"
    );

    let (_, applied) = fulfil.apply(&copy, 1_001).await.unwrap();
    assert_eq!(applied, AlreadyFinal);
    assert_eq!(
        *store.tried.lock().unwrap(),
        vec![vec![What::Processed]],
        "the copy's transaction is never tried"
    );
    assert_eq!(store.inner.fulfilled(), vec!["inv_1"]);
    assert_eq!(
        store.inner.outcome("evt_b").map(|(a, _)| a),
        Some(AlreadyFinal)
    );
}

// A read is not a write: a transaction whose writes would be taken is still written whole,
// and a change of one item is written without a read.
#[tokio::test]
async fn a_transaction_that_would_commit_and_a_single_write_are_written_as_before() {
    let store = Arc::new(Billed::default());
    let fulfil = crate::tests::one_shop(Arc::clone(&store));
    let (_, applied) = fulfil
        .apply(&invoice("evt_o", "confirming", 10, "inv_1", "o-1"), 1_000)
        .await
        .unwrap();
    assert_eq!(applied, Updated);
    assert_eq!(store.reads.load(std::sync::atomic::Ordering::SeqCst), 0);
    let (_, applied) = fulfil
        .apply(&invoice("evt_a", "paid", 20, "inv_1", "o-1"), 1_001)
        .await
        .unwrap();
    assert_eq!(applied, Fulfilled);
    assert_eq!(store.reads.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(store.inner.fulfilled(), vec!["inv_1"]);
}

/// The lines `f` logs at WARN and above, as text.
async fn warnings<F: std::future::Future<Output = ()>>(f: F) -> String {
    #[derive(Clone, Default)]
    struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // A callsite another test's thread hit first, while no subscriber of its own wanted WARN,
    // may be cached as never enabled: ask every callsite again now that this one listens.
    tracing::callsite::rebuild_interest_cache();
    f.await;
    String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
}

// A payment that waits for a person is said at WARN with its invoice and order: with the
// stack's `LogLevel=WARN` it is the one line that says so.
#[tokio::test]
async fn a_held_a_duplicate_and_a_late_payment_each_warn_with_their_invoice() {
    let logged = warnings(async {
        let (outcomes, _) = run(
            &[
                invoice("evt_a", "paid", 20, "inv_1", "o-1"),
                invoice("evt_b", "paid", 21, "inv_2", "o-1"),
                invoice("evt_c", "paid", 22, "inv_3", "o-3"),
                invoice("evt_d", "expired", 23, "inv_4", "o-4"),
                invoice("evt_e", "paid", 24, "inv_4", "o-4"),
            ],
            |store| store.register_order("o-3", &Amount::parse("99.00").unwrap(), "USD"),
        )
        .await;
        assert_eq!(
            outcomes,
            [Fulfilled, DuplicatePayment, Held, Updated, PaidLate]
        );
    })
    .await;
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(lines.len(), 3, "{logged}");
    for (line, invoice, what) in [
        (
            lines[0],
            "inv_2",
            "a second paid invoice for an order already fulfilled",
        ),
        (
            lines[1],
            "inv_3",
            "why=\"the payment does not match the registered order\"",
        ),
        (lines[2], "inv_4", "payment after the invoice closed"),
    ] {
        assert!(
            line.contains(what) && line.contains(&format!("invoice_id=\"{invoice}\"")),
            "{line}"
        );
    }
    assert!(lines[0].contains("order_id=\"o-1\"") && lines[1].contains("order_id=\"o-3\""));
}

// Found by the attack on `dev`: support's `mark-paid` of an invoice whose earlier payment was
// refunded in full waits for a person ("paid after a full refund?"), but its warning said the
// payment "does not match the registered order", which sends support to the wrong place. A
// held payment's warning now says why it is held.
#[tokio::test]
async fn a_held_payment_warns_with_why_it_is_held() {
    let logged = warnings(async {
        let (outcomes, store) = run(
            &[
                invoice("evt_u", "underpaid_waiting", 10, "inv_1", "o-1"),
                withdrawal(
                    "evt_r",
                    "completed",
                    20,
                    r#","type":"refund","invoice_id":"inv_1","mode":"full","amount":"4.00","currency":"USDT""#,
                ),
            ],
            |_| {},
        )
        .await;
        assert_eq!(outcomes, [Updated, Updated]);
        let by_hand = crate::tests::one_shop(Arc::clone(&store))
            .mark_paid("inv_1", OrderRef::none(), "support", 5_000)
            .await
            .unwrap();
        assert_eq!(by_hand, Held);
        assert!(store.fulfilments().is_empty());
    })
    .await;
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(lines.len(), 1, "{logged}");
    assert!(lines[0].contains("paid after a full refund?"), "{logged}");
    assert!(!lines[0].contains("registered order"), "{logged}");
    assert!(lines[0].contains("invoice_id=\"inv_1\""), "{logged}");
}

/// The steps of `id`'s story in the store: (status, when, who moved it there).
fn story(store: &MemoryResources, id: &str) -> Vec<(String, u64, String)> {
    let fields = store
        .fields(&crate::money::write::Key::state(id))
        .unwrap_or_default();
    crate::money::write::story(&fields)
        .into_iter()
        .map(|s| (s.status, s.at, s.by))
        .collect()
}

// Issue 40, one payment's story: each status a resource reached, when Paymos says, and the
// delivery that moved it there; a copy, a late event and a flood add nothing; a person's road
// names the person.
#[tokio::test]
async fn a_resource_keeps_when_and_by_whom_it_reached_each_status_once() {
    let step = |status: &str, at, by: &str| (status.to_owned(), at, by.to_owned());
    let mut sandbox = invoice("evt_w2", "paid", 20, "inv_1", "o-1");
    sandbox.environment = Some(Environment::Test);
    let (outcomes, store) = run(
        &[
            invoice("evt_c", "confirming", 10, "inv_1", "o-1"),
            invoice("evt_c2", "confirming", 12, "inv_1", "o-1"),
            invoice("evt_p", "paid", 20, "inv_1", "o-1"),
            invoice("evt_p2", "paid", 20, "inv_1", "o-1"),
            invoice("evt_late", "underpaid_waiting", 15, "inv_1", "o-1"),
            withdrawal("evt_w0", "created", 5, r#","type":"payout""#),
            withdrawal("evt_w1", "completed", 9, r#","type":"payout""#),
            withdrawal("evt_w1", "completed", 9, r#","type":"payout""#),
            deposit("evt_d0", "confirming", 30, false),
            deposit("evt_d1", "confirmed", 31, true),
        ],
        |_| {},
    )
    .await;
    assert_eq!(
        outcomes,
        [
            Updated,
            Updated,
            Fulfilled,
            AlreadyFinal,
            AlreadyFinal,
            Updated,
            Updated,
            AlreadyProcessed,
            Updated,
            Credited
        ]
    );
    assert_eq!(
        story(&store, "inv_1"),
        [step("confirming", 10, "evt_c"), step("paid", 20, "evt_p")],
        "the second `confirming` moved it forward but reached no new status"
    );
    assert_eq!(
        story(&store, "wdr_1"),
        [step("created", 5, "evt_w0"), step("completed", 9, "evt_w1")]
    );
    assert_eq!(
        story(&store, "pcd_1"),
        [
            step("confirming", 30, "evt_d0"),
            step("confirmed", 31, "evt_d1")
        ]
    );

    // A sandbox delivery names its ledger key; a person's road, the person.
    let fulfil = crate::tests::one_shop(MemoryResources::new()).for_environment(Environment::Test);
    fulfil.apply(&sandbox, 1).await.unwrap();
    assert_eq!(
        story(fulfil.store(), "inv_1"),
        [step("paid", 20, "test#evt_w2")]
    );
    let fulfil = crate::tests::one_shop(MemoryResources::new());
    fulfil
        .mark_paid("inv_1", order_ref(Some("o-1")), "support:a", 7)
        .await
        .unwrap();
    let by_hand = story(fulfil.store(), "inv_1");
    assert_eq!(
        by_hand
            .iter()
            .map(|(s, _, by)| (s.as_str(), by.as_str()))
            .collect::<Vec<_>>(),
        [("paid", "manual:support:a")]
    );
}

// Found by the last attack on `dev`: a person's `mark-paid` naming an order and no amount, of an
// invoice a full refund is on record for, waits `after_refund`; its line read "Paid ? for order
// o-9", a question mark where the amount goes. An amount no road gave is said in words.
#[tokio::test]
async fn a_payment_no_road_gave_an_amount_for_is_listed_in_words() {
    let (outcomes, store) = run(
        &[withdrawal(
            "evt_r",
            "completed",
            20,
            r#","type":"refund","invoice_id":"inv_9","mode":"full","amount":"4.00","currency":"USDT""#,
        )],
        |_| {},
    )
    .await;
    assert_eq!(outcomes, [Updated]);
    let by_hand = crate::tests::one_shop(Arc::clone(&store))
        .mark_paid("inv_9", order_ref(Some("o-9")), "support", 5_000)
        .await
        .unwrap();
    assert_eq!(by_hand, Held);
    assert!(store.fulfilments().is_empty());
    let listed = crate::roads::exceptions::list(
        store.as_ref(),
        &crate::testkit::memory::MemoryReviews::new(),
        0,
    )
    .await
    .unwrap();
    let [only] = listed.as_slice() else {
        panic!("{listed:?}")
    };
    assert_eq!(only.kind, "after_refund", "{only:?}");
    assert!(only.why.contains("for order o-9"), "{}", only.why);
    assert!(!only.why.contains("Paid ?"), "{}", only.why);
    assert!(only.why.contains("an amount no road gave"), "{}", only.why);
}

// A refund of unknown mode (the official `ton_refund_v1`/`v2` shape: `type: refund`,
// `invoice_id`, `amount`, no `mode`, no `completed_at`) may have been `full`, which returns
// every payment received until it completed: a payment made at or before it waits for a
// person, never ships in silence.
fn refund_of_unknown_mode(event_id: &str, at: u64, invoice: &str) -> WorkItem {
    item(
        event_id,
        "withdrawal.completed",
        at,
        &format!(
            r#"{{"withdrawal_id":"wdr_{event_id}","invoice_id":"{invoice}","type":"refund","status":"completed","is_test":false,"network":"TON","currency":"USDT","amount":"10.00"}}"#
        ),
    )
}

fn bob() -> crate::roads::release::ReleaseBy<'static> {
    crate::roads::release::ReleaseBy {
        actor: "bob",
        reason: Some("Paymos shows an overpayment refund: the whole payment stayed"),
        override_amount: false,
        project: None,
        order: None,
    }
}

#[tokio::test]
async fn a_payment_made_before_a_refund_of_unknown_mode_waits_for_a_person_and_ships_on_a_release()
{
    use crate::roads::exceptions::{list, release};
    use crate::testkit::memory::MemoryReviews;
    // Refunded at T-100 (no mode), delivered first; paid at T-200 by Paymos' clock.
    let history = [
        refund_of_unknown_mode("evt_r", 1_699_999_900, "inv_x"),
        invoice("evt_p", "paid", 1_699_999_800, "inv_x", "o-x"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Held]);
    assert!(store.fulfilments().is_empty(), "nothing ships in silence");
    let reviews = MemoryReviews::new();
    let listed = list(store.as_ref(), &reviews, 0).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].kind, listed[0].resource_id.as_deref()),
        ("held", Some("inv_x"))
    );
    assert!(
        listed[0].why.contains(
            "a refund of unknown mode, wdr_evt_r, completed after this payment was made: check at Paymos whether it returned the whole payment"
        ),
        "{}",
        listed[0].why
    );
    assert!(
        listed[0]
            .action
            .contains("release inv_x --actor <you> --reason")
            && !listed[0].action.contains("--override-amount"),
        "its way out is a person's word, the amount is right: {}",
        listed[0].action
    );
    let released = release(
        store.as_ref(),
        &reviews,
        "inv_x",
        &bob(),
        &RecordFulfilment,
        1_800_000_000_000,
    )
    .await
    .unwrap();
    assert_eq!(released, Fulfilled);
    assert_eq!(store.fulfilments(), [("inv_x".into(), Some("o-x".into()))]);
    assert!(list(store.as_ref(), &reviews, 0).await.unwrap().is_empty());
    let again = release(
        store.as_ref(),
        &reviews,
        "inv_x",
        &bob(),
        &RecordFulfilment,
        1_800_000_000_001,
    )
    .await;
    assert!(!matches!(again, Ok(Fulfilled)), "{again:?}");
    assert_eq!(store.fulfilments().len(), 1, "once");
}

#[tokio::test]
async fn a_payment_at_the_second_of_a_refund_of_unknown_mode_waits_and_a_full_refund_settles_it() {
    let history = [
        refund_of_unknown_mode("evt_r", 50, "inv_x"),
        invoice("evt_p", "paid", 50, "inv_x", "o-x"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Held]);
    assert!(waits_in(&store, "inv_x"));
    // Paymos says later that it was a full refund: the payment is settled as refunded.
    let (outcomes, store) = run(
        &[
            refund_of_unknown_mode("evt_r", 50, "inv_x"),
            invoice("evt_p", "paid", 50, "inv_x", "o-x"),
            refund("evt_f", 60, "inv_x", "10.00", "full"),
        ],
        |_| {},
    )
    .await;
    assert_eq!(outcomes, [Updated, Held, Updated]);
    assert_eq!(
        store.invoice("inv_x").unwrap().seen().standing(),
        crate::money::invoice::Standing::Refunded
    );
    assert!(store.fulfilments().is_empty());
}

#[tokio::test]
async fn a_payment_made_after_a_refund_of_unknown_mode_ships() {
    let history = [
        underpaid("evt_u", "underpaid_waiting", 10),
        refund_of_unknown_mode("evt_r", 20, "inv_1"),
        underpaid("evt_p", "paid", 30),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

#[tokio::test]
async fn an_overpayment_refund_completed_after_the_payment_changes_nothing() {
    let history = [
        refund("evt_r", 100, "inv_1", "0.50", "overpayment"),
        invoice("evt_p", "paid", 50, "inv_1", "o-1"),
    ];
    let (outcomes, store) = run(&history, |_| {}).await;
    assert_eq!(outcomes, [Updated, Fulfilled]);
    assert_eq!(store.fulfilments(), [("inv_1".into(), Some("o-1".into()))]);
}

#[tokio::test]
async fn mark_paid_after_a_refund_of_unknown_mode_waits_for_a_person() {
    let (_, store) = run(&[refund_of_unknown_mode("evt_r", 30, "inv_1")], |_| {}).await;
    let applied = crate::tests::one_shop(Arc::clone(&store))
        .mark_paid("inv_1", order_ref(Some("o-1")), "support", 5_000)
        .await
        .unwrap();
    assert_eq!(applied, Held);
    assert!(store.fulfilments().is_empty());
    assert!(waits_in(&store, "inv_1"));
}

// The attack on `dev` (G12): "nothing leaves a final status". A refund recorded `failed` and
// then delivered `completed` (or the reverse) was `already_final` and listed nowhere: one of
// the two deliveries is wrong (a forged one, or a refund that did complete, returning the
// payment), and nothing said so. The second final status applies nothing and waits for a
// person, with both statuses named.
#[tokio::test]
async fn a_withdrawal_delivered_with_another_final_status_than_its_record_waits_for_a_person() {
    let refund =
        r#","type":"refund","invoice_id":"inv_1","mode":"full","amount":"10.50","currency":"USD""#;
    for (first, second) in [("failed", "completed"), ("completed", "failed")] {
        let history = [
            withdrawal("evt_1", first, 10, refund),
            withdrawal("evt_2", second, 11, refund),
            withdrawal("evt_3", first, 12, refund),
        ];
        let (outcomes, _) = run(&history, |_| {}).await;
        assert_eq!(
            outcomes,
            [Updated, Unusable, AlreadyFinal],
            "{first} then {second}"
        );
    }
}
