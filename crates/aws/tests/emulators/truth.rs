//! One invoice, one truth, on DynamoDB: each road of issue 20 (an event without its order,
//! `mark-paid` without `--order-id`, a refund before its payment, a partial refund of a held
//! payment, a refund naming a raw key, a manual road run twice, `release` of what no payment
//! waits for) decided by DynamoDB's conditions, asserting the fulfilments and what waits.

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::change::{Applied, OrderRef};
use paymos_inbox_core::money::status::{Amount, InvoiceStatus};
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::testkit::model::{Ids, Inspect, Naming, Op, REGISTERED_AMOUNT, run};
use serde_json::json;

use paymos_inbox_testkit::*;

fn deliver(invoice: u8, status: InvoiceStatus, naming: Naming, price: Option<&'static str>) -> Op {
    Op::Deliver {
        invoice,
        status,
        at: 10 + u64::from(status.rank().min(5)),
        naming,
        price,
        endpoint: 0,
        sandbox: false,
    }
}

struct Rig {
    aws: Aws,
    store: DynamoResources,
}

impl Rig {
    async fn new() -> Self {
        let aws = Aws::new();
        let state = aws.state_table().await;
        let ledger = aws.deliveries_table().await;
        let store = DynamoResources::new(aws.dynamodb.clone(), &state, &ledger);
        Self { aws, store }
    }

    async fn ids(&self) -> Ids {
        let ids = Ids {
            run: unique("t").replace('-', ""),
        };
        let amount = Amount::parse(REGISTERED_AMOUNT).unwrap();
        self.store
            .register_order((None, &ids.order(0)), &amount, "USD")
            .await
            .unwrap();
        ids
    }

    /// The fulfilments and the invoices waiting for a person, of run `ids`.
    async fn outcome(&self, ids: &Ids) -> (Vec<(String, Option<String>)>, Vec<String>) {
        let mut fulfilled: Vec<_> = Inspect::fulfilments(&Inspected(&self.store))
            .await
            .into_iter()
            .filter(|(i, _)| i.contains(&ids.run))
            .collect();
        fulfilled.sort();
        let mut waiting: Vec<String> = self
            .store
            .invoices_under_review()
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.invoice_id)
            .filter(|i| i.contains(&ids.run))
            .collect();
        waiting.sort();
        (fulfilled, waiting)
    }
}

/// (name, history, fulfilled (invoice, order) indices, invoices waiting for a person).
type Case = (&'static str, Vec<Op>, Vec<(u8, u8)>, Vec<u8>);

#[tokio::test]
async fn every_road_to_a_fulfilment_obeys_the_invoices_record() {
    use InvoiceStatus as I;
    use Naming::{Own, Silent};
    let rig = Rig::new().await;
    // (name, history, fulfilled: (invoice, order) indices, waiting invoices)
    let refund = |invoice, seq, amount, mode| Op::Refund {
        invoice,
        seq,
        amount,
        mode,
    };
    let cases: Vec<Case> = vec![
        (
            "a paid event without the order the invoice named; a second invoice for it",
            vec![
                deliver(0, I::AwaitingPayment, Own, Some("10.50")),
                deliver(0, I::Paid, Silent, None),
                deliver(2, I::Paid, Own, Some("10.50")),
            ],
            vec![(0, 0)],
            vec![2],
        ),
        (
            "the recorded price meets the registered order's guard",
            vec![
                deliver(0, I::AwaitingPayment, Own, Some("12")),
                deliver(0, I::Paid, Silent, None),
            ],
            vec![],
            vec![0],
        ),
        (
            "mark-paid without --order-id, twice for one order",
            vec![
                deliver(0, I::AwaitingPayment, Own, Some("10.50")),
                deliver(2, I::AwaitingPayment, Own, Some("10.50")),
                Op::MarkPaid {
                    invoice: 0,
                    with_order: false,
                },
                Op::MarkPaid {
                    invoice: 2,
                    with_order: false,
                },
            ],
            vec![(0, 0)],
            vec![2],
        ),
        (
            "a refund before its payment",
            vec![
                refund(1, 0, "0.10", "overpayment"),
                deliver(1, I::PaidOver, Own, Some("10.50")),
            ],
            vec![(1, 1)],
            vec![],
        ),
        (
            "a partial refund of a held payment leaves it held; a full one settles it",
            vec![
                deliver(0, I::Paid, Own, Some("12")),
                refund(0, 0, "2", "overpayment"),
                deliver(2, I::Paid, Own, Some("12")),
                refund(2, 0, "12", "full"),
            ],
            vec![],
            vec![0],
        ),
        (
            "release refuses an unknown and an open invoice",
            vec![
                deliver(1, I::Confirming, Own, None),
                Op::Release {
                    invoice: 1,
                    override_amount: true,
                },
                Op::Release {
                    invoice: 2,
                    override_amount: true,
                },
            ],
            vec![],
            vec![],
        ),
        (
            "release checks the amount unless overridden",
            vec![
                deliver(0, I::Paid, Own, Some("12")),
                Op::Release {
                    invoice: 0,
                    override_amount: false,
                },
            ],
            vec![],
            vec![0],
        ),
    ];
    for (name, ops, fulfilled, waiting) in cases {
        let ids = rig.ids().await;
        run(&rig.store, &ids, &ops)
            .await
            .expect("DynamoDB Local answers");
        let expected = (
            fulfilled
                .iter()
                .map(|(i, o)| (ids.invoice(*i), Some(ids.order(*o))))
                .collect::<Vec<_>>(),
            waiting.iter().map(|i| ids.invoice(*i)).collect::<Vec<_>>(),
        );
        assert_eq!(rig.outcome(&ids).await, expected, "{name}");
    }
}

#[tokio::test]
async fn a_manual_road_run_twice_reports_what_exists_and_a_raw_key_refund_writes_nothing() {
    let rig = Rig::new().await;
    let ids = rig.ids().await;
    let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
    let registered = |invoice: u8, amount: &str| OrderRef {
        external_id: Some(ids.order_of(invoice)),
        amount: Amount::parse(amount),
        currency: Some("USD".into()),
        project: None,
        home: false,
        unlisted: false,
    };
    // reconcile --apply on a payment it holds (12 paid, 10.50 registered), twice.
    for _ in 0..2 {
        let applied = fulfil
            .apply_by_hand(
                &ids.invoice(0),
                InvoiceStatus::Paid,
                registered(0, "12"),
                "reconcile",
                NOW_MS,
            )
            .await
            .unwrap();
        assert_eq!(applied, Applied::Held, "never `fulfilled` for a hold");
    }
    // mark-paid of a second invoice for a fulfilled order, twice by the same person.
    let first = fulfil
        .mark_paid(&ids.invoice(2), registered(2, "10.50"), "alice", NOW_MS)
        .await
        .unwrap();
    assert_eq!(first, Applied::Fulfilled);
    for _ in 0..2 {
        let again = fulfil
            .mark_paid(&ids.invoice(4), registered(4, "10.50"), "alice", NOW_MS)
            .await
            .unwrap();
        assert_eq!(again, Applied::DuplicatePayment);
    }
    // A signed refund naming another kind's key is refused at parse: unusable, nothing written.
    let body = envelope(
        &format!("evt_{}_raw", ids.run),
        "withdrawal.completed",
        json!({"withdrawal_id": format!("wdr_{}_raw", ids.run),
               "invoice_id": format!("fulfilment#{}", ids.invoice(1)), "mode": "full"}),
    );
    // (Ingest answers such a body 400; one recorded before this rule still reaches fulfil.)
    let item = paymos_inbox_core::wire::work::WorkItem {
        event_id: format!("evt_{}_raw", ids.run),
        ..live(&body)
    };
    let (_, applied) = fulfil.apply(&item, NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::Unusable);
    let keys = Inspect::keys(&Inspected(&rig.store)).await;
    assert!(
        !keys.contains(&format!("fulfilment#{}", ids.invoice(1))),
        "{keys:?}"
    );
    let (fulfilled, waiting) = rig.outcome(&ids).await;
    assert_eq!(fulfilled, [(ids.invoice(2), Some(ids.order(0)))]);
    assert_eq!(waiting, [ids.invoice(0), ids.invoice(4)]);
    drop(rig.aws);
}

/// inv_1's event at `at` (Paymos' clock): paid for order o-1 at 10 USD, or the full refund
/// `wdr` of it.
fn at(event_id: &str, at: u64, refund: Option<&str>) -> paymos_inbox_core::wire::work::WorkItem {
    let (event_type, data) = match refund {
        None => (
            "invoice.paid",
            json!({"invoice_id": "inv_1", "order": {"external_id": "o-1", "amount": "10", "currency": "USD"}}),
        ),
        Some(wdr) => (
            "withdrawal.completed",
            json!({"withdrawal_id": wdr, "invoice_id": "inv_1", "type": "refund", "mode": "full", "amount": "10", "currency": "USDT"}),
        ),
    };
    let body = json!({"event_id": event_id, "event_type": event_type, "version": 1, "occurred_at": at, "data": data});
    live(&body.to_string())
}

// A payment made after the full refund that returned an earlier one (issue 49, finding 4),
// decided by DynamoDB's conditions on two times (`RefundedInFullAt`, `PaymentAt`) and the
// fulfilment's absence: where the invoice shipped, it waits duplicate_payment until a full
// refund completed after it; where nothing shipped, it ships once.
#[tokio::test]
async fn a_payment_after_a_full_refund_ships_once_or_waits_for_a_refund_on_dynamodb() {
    use Applied::*;
    for (history, outcomes, waits) in [
        (
            vec![
                at("evt_e1", 100, None),
                at("evt_e2", 140, Some("wdr_1")),
                at("evt_e3", 150, None),
            ],
            vec![Fulfilled, Updated, DuplicatePayment],
            true,
        ),
        (
            vec![
                at("evt_e1", 140, Some("wdr_1")),
                at("evt_e2", 100, None),
                at("evt_e3", 150, None),
            ],
            vec![Updated, Refunded, Fulfilled],
            false,
        ),
    ] {
        let rig = Rig::new().await;
        let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
        let mut got = Vec::new();
        for work in &history {
            got.push(fulfil.apply(work, NOW_MS).await.expect("DynamoDB Local").1);
        }
        assert_eq!(got, outcomes);
        let shipped = rig.store.fulfilments().await.unwrap();
        assert_eq!(shipped.len(), 1, "the order ships once: {shipped:?}");
        let waiting = rig.store.invoices_under_review().await.unwrap();
        assert_eq!(waiting.len(), usize::from(waits), "{waiting:?}");
        if waits {
            // A full refund completed after the new payment settles it.
            let refund = at("evt_e4", 160, Some("wdr_2"));
            assert_eq!(fulfil.apply(&refund, NOW_MS).await.unwrap().1, Updated);
            assert!(rig.store.invoices_under_review().await.unwrap().is_empty());
        }
    }
}

/// inv_1's completed refund `wdr` at `at` as the official `ton_refund_v1` vector has it: no
/// `mode`, no `completed_at`.
fn refund_of_unknown_mode(
    event_id: &str,
    at: u64,
    wdr: &str,
) -> paymos_inbox_core::wire::work::WorkItem {
    let data = json!({"withdrawal_id": wdr, "invoice_id": "inv_1", "type": "refund", "status": "completed", "is_test": false, "network": "TON", "currency": "USDT", "amount": "10.00"});
    let body = json!({"event_id": event_id, "event_type": "withdrawal.completed", "version": 1, "occurred_at": at, "data": data});
    live(&body.to_string())
}

// A refund of unknown mode may have been `full` (which returns every payment received until it
// completed): decided by DynamoDB's condition on `refund_of_unknown_mode_by`/`_at`, a payment
// made at or before it (or undated: `mark-paid`) waits held for a person, one made after it
// ships; a release ships the held one once, and a `full` refund recorded later settles it.
#[tokio::test]
async fn a_payment_made_before_a_refund_of_unknown_mode_waits_held_on_dynamodb() {
    use Applied::*;
    use paymos_inbox_core::money::effect::RecordFulfilment;
    use paymos_inbox_core::roads::release::{ReleaseBy, release};
    for (history, outcomes, ships) in [
        (
            vec![
                refund_of_unknown_mode("evt_e1", 140, "wdr_1"),
                at("evt_e2", 100, None),
            ],
            vec![Updated, Held],
            false,
        ),
        (
            vec![
                refund_of_unknown_mode("evt_e1", 100, "wdr_1"),
                at("evt_e2", 100, None),
            ],
            vec![Updated, Held],
            false,
        ),
        (
            vec![
                refund_of_unknown_mode("evt_e1", 100, "wdr_1"),
                at("evt_e2", 150, None),
            ],
            vec![Updated, Fulfilled],
            true,
        ),
    ] {
        let rig = Rig::new().await;
        let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
        let mut got = Vec::new();
        for work in &history {
            got.push(fulfil.apply(work, NOW_MS).await.expect("DynamoDB Local").1);
        }
        assert_eq!(got, outcomes);
        let shipped = rig.store.fulfilments().await.unwrap();
        assert_eq!(shipped.len(), usize::from(ships), "{shipped:?}");
        let waiting = rig.store.invoices_under_review().await.unwrap();
        assert_eq!(waiting.len(), usize::from(!ships), "{waiting:?}");
    }
    // The held one ships on a person's word, once.
    let rig = Rig::new().await;
    let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
    fulfil
        .apply(&refund_of_unknown_mode("evt_e1", 140, "wdr_1"), NOW_MS)
        .await
        .unwrap();
    assert_eq!(
        fulfil
            .apply(&at("evt_e2", 100, None), NOW_MS)
            .await
            .unwrap()
            .1,
        Held
    );
    let by = ReleaseBy {
        actor: "bob",
        reason: Some("Paymos shows it an overpayment refund"),
        override_amount: false,
        project: None,
        order: None,
    };
    let released = release(&rig.store, "inv_1", None, &by, &RecordFulfilment, NOW_MS).await;
    assert_eq!(released.unwrap(), Fulfilled);
    let again = release(&rig.store, "inv_1", None, &by, &RecordFulfilment, NOW_MS).await;
    assert!(!matches!(again, Ok(Fulfilled)), "{again:?}");
    assert_eq!(rig.store.fulfilments().await.unwrap().len(), 1);
    assert!(rig.store.invoices_under_review().await.unwrap().is_empty());
    // `mark-paid` (no payment time) after it waits too; a full refund recorded later settles it.
    let rig = Rig::new().await;
    let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
    fulfil
        .apply(&refund_of_unknown_mode("evt_e1", 140, "wdr_1"), NOW_MS)
        .await
        .unwrap();
    let order = OrderRef {
        external_id: Some("o-1".into()),
        ..OrderRef::none()
    };
    assert_eq!(
        fulfil
            .mark_paid("inv_1", order, "alice", NOW_MS)
            .await
            .unwrap(),
        Held
    );
    assert_eq!(rig.store.invoices_under_review().await.unwrap().len(), 1);
    assert_eq!(
        fulfil
            .apply(&at("evt_e3", 160, Some("wdr_2")), NOW_MS)
            .await
            .unwrap()
            .1,
        Updated
    );
    assert!(rig.store.invoices_under_review().await.unwrap().is_empty());
    assert!(rig.store.fulfilments().await.unwrap().is_empty());
}

// Issue 49 (attack H2) on DynamoDB: an open event named order o-1, the payment o-2. The hold
// keeps the order the payment named (`order_disputed`); a release ships neither word's order
// until a person names one of the two, and the named one replaces the record's under
// DynamoDB's condition (the record as read, nothing released), then ships once. A release
// naming one that is refused (o-2 is registered at another price) puts the record back as it
// was (`as_before`, under its own condition).
#[tokio::test]
async fn a_payment_naming_another_order_than_its_open_event_ships_the_order_a_person_names_on_dynamodb()
 {
    use paymos_inbox_core::roads::release::{ReleaseBy, ReleaseError};
    let event = |event_id: &str, event_type: &str, order: &str| {
        let data = json!({"invoice_id": "inv_1", "order": {"external_id": order, "amount": "10.50", "currency": "USD"}});
        let body = json!({"event_id": event_id, "event_type": event_type, "version": 1, "occurred_at": 100, "data": data});
        live(&body.to_string())
    };
    let rig = Rig::new().await;
    for (order, price) in [("o-1", "10.50"), ("o-2", "99")] {
        rig.store
            .register_order((None, order), &Amount::parse(price).unwrap(), "USD")
            .await
            .unwrap();
    }
    let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
    let open = event("evt_e1", "invoice.awaiting_payment", "o-1");
    fulfil.apply(&open, NOW_MS).await.unwrap();
    let paid = event("evt_e2", "invoice.paid", "o-2");
    assert_eq!(fulfil.apply(&paid, NOW_MS).await.unwrap().1, Applied::Held);
    let ledger = paymos_inbox_core::testkit::memory::MemoryReviews::new();
    let by = |order| ReleaseBy {
        actor: "bob",
        reason: None,
        override_amount: false,
        project: None,
        order,
    };
    for order in [None, Some("o-3"), Some("o-2")] {
        let refused = fulfil.release(&ledger, "inv_1", &by(order), NOW_MS).await;
        assert!(
            matches!(refused, Err(ReleaseError::NotReleasable(_))),
            "{refused:?}"
        );
    }
    assert!(rig.store.fulfilments().await.unwrap().is_empty());
    use paymos_inbox_core::roads::fulfil::ResourceStore;
    let fields = rig
        .store
        .read(&paymos_inbox_core::money::write::Key::state("inv_1"))
        .await
        .unwrap()
        .unwrap();
    let seen = paymos_inbox_core::money::write::invoice_seen(&fields);
    assert_eq!(
        (
            seen.order.external_id.as_deref(),
            seen.order_disputed.as_deref()
        ),
        (Some("o-1"), Some("o-2")),
        "as it was"
    );
    let shipped = fulfil
        .release(&ledger, "inv_1", &by(Some("o-1")), NOW_MS)
        .await;
    assert_eq!(shipped, Ok(Applied::Fulfilled));
    let fulfilments = rig.store.fulfilments().await.unwrap();
    assert_eq!(fulfilments.len(), 1, "{fulfilments:?}");
    assert!(
        format!("{fulfilments:?}").contains("o-1"),
        "{fulfilments:?}"
    );
    assert!(rig.store.invoices_under_review().await.unwrap().is_empty());
}

// Attack F1 on DynamoDB: a forged `full` refund (a leaked secret, no reverse check) settles the
// genuine payment as refunded; Paymos has it paid at 100 and lists no refund. `reconcile
// --apply` keeps Paymos' refunds alone on the record (under DynamoDB's condition on the count
// of refunds it read) and ships the payment once; a second run applies nothing more.
#[tokio::test]
async fn a_refund_paymos_does_not_list_gives_way_to_the_payment_paymos_has_on_dynamodb() {
    use paymos_inbox_core::testkit::memory::MemoryPaymos;
    let rig = Rig::new().await;
    let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
    let mut got = Vec::new();
    for work in [at("evt_e1", 150, Some("wdr_9")), at("evt_e2", 100, None)] {
        got.push(fulfil.apply(&work, NOW_MS).await.expect("DynamoDB Local").1);
    }
    assert_eq!(got, [Applied::Updated, Applied::Refunded]);
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_1", crate::paid_at_paymos("o-1", None, 100));
    let window = (0, 2_000_000_000);
    let report =
        paymos_inbox_core::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
            .await
            .unwrap();
    assert_eq!(
        report.applied.get("inv_1"),
        Some(&Ok(Applied::Fulfilled)),
        "{report:?}"
    );
    let again =
        paymos_inbox_core::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
            .await
            .unwrap();
    assert!(again.clean(), "{again:?}");
    let shipped = rig.store.fulfilments().await.unwrap();
    assert_eq!(shipped.len(), 1, "the order ships once: {shipped:?}");
    drop(rig.aws);
}

// Attack round 3, F5 on DynamoDB: Paymos has inv_1 paid, naming no time, and refunded in full
// at 140: its payment waits `after_refund`. A person who finds at Paymos that the refund
// returned it resolves it (under DynamoDB's condition: once, only while it waits so): nothing
// ships and nothing waits; Paymos' time after the refund, once named, ships it once.
#[tokio::test]
async fn a_payment_the_full_refund_returned_is_resolved_shipping_nothing_on_dynamodb() {
    use paymos_inbox_core::money::invoice::{Refund, RefundMode};
    use paymos_inbox_core::roads::exceptions::resolve_invoice;
    use paymos_inbox_core::testkit::memory::MemoryPaymos;
    let rig = Rig::new().await;
    let fulfil = Fulfil::new(rig.store.clone()).for_projects(crate::one_project());
    let (_, applied) = fulfil
        .apply(&at("evt_e1", 140, Some("wdr_1")), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Updated);
    let paymos_with = |paid_at: Option<u64>| {
        let paymos = MemoryPaymos::new();
        let mut invoice = crate::paid_at_paymos("o-1", None, 0);
        invoice.paid_at = paid_at;
        paymos.invoice("inv_1", invoice);
        paymos.refund(
            "inv_1",
            Refund {
                withdrawal_id: "wdr_1".into(),
                amount: paymos_inbox_core::money::status::Amount::parse("10"),
                currency: Some("USDT".into()),
                mode: Some(RefundMode::Full),
                completed_at: Some(140),
            },
        );
        paymos
    };
    let window = (0, 2_000_000_000);
    let run = async |paid_at: Option<u64>| {
        paymos_inbox_core::roads::reconcile::reconcile(
            &paymos_with(paid_at),
            &fulfil,
            window,
            true,
            NOW_MS,
        )
        .await
        .unwrap()
    };
    run(None).await;
    assert_eq!(rig.store.invoices_under_review().await.unwrap().len(), 1);
    let resolved = resolve_invoice(&rig.store, "inv_1", "alice", NOW_MS).await;
    assert_eq!(resolved, Ok(Applied::Held));
    assert!(
        resolve_invoice(&rig.store, "inv_1", "alice", NOW_MS)
            .await
            .is_err()
    );
    assert!(rig.store.invoices_under_review().await.unwrap().is_empty());
    run(None).await;
    assert!(rig.store.fulfilments().await.unwrap().is_empty());
    for _ in 0..2 {
        run(Some(150)).await;
    }
    let shipped = rig.store.fulfilments().await.unwrap();
    assert_eq!(shipped.len(), 1, "the order ships once: {shipped:?}");
    drop(rig.aws);
}
