//! The fulfil half against DynamoDB Local (and fauxqs for batches): the scenarios merchants
//! meet, each asserting what the state table and the ledger hold afterwards.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources, balance_key};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::money::change::{Applied, OrderRef};
use paymos_inbox_core::money::effect::fulfilment_key;
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::fulfil::QueueVisibility;
use paymos_inbox_lambda::ingest::respond;
use paymos_inbox_local::poller::poll_once;
use serde_json::json;

use paymos_inbox_testkit::*;

type Item = HashMap<String, AttributeValue>;

struct Rig {
    aws: Aws,
    state: String,
    ledger: String,
    fulfil: Fulfil<DynamoResources>,
}

impl Rig {
    async fn new() -> Self {
        let aws = Aws::new();
        let state = aws.state_table().await;
        let ledger = aws.deliveries_table().await;
        let fulfil = Fulfil::new(DynamoResources::new(aws.dynamodb.clone(), &state, &ledger))
            .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
        Self {
            aws,
            state,
            ledger,
            fulfil,
        }
    }

    async fn apply(&self, body: &str) -> Applied {
        self.fulfil
            .apply(&live(body), NOW_MS)
            .await
            .expect("applied")
            .1
    }

    async fn state_item(&self, pk: &str) -> Option<Item> {
        self.aws.item(&self.state, "pk", pk).await
    }

    async fn fulfilments(&self) -> Vec<Item> {
        self.aws
            .scan(&self.state)
            .await
            .into_iter()
            .filter(|i| get_s(i, "kind") == "fulfilment")
            .collect()
    }

    async fn outcome(&self, event_id: &str) -> String {
        let item = self
            .aws
            .item(&self.ledger, "event_id", event_id)
            .await
            .expect("ledger item");
        assert_eq!(
            get_s(&item, "state"),
            "processed",
            "{event_id} is marked processed"
        );
        get_s(&item, "outcome").to_owned()
    }
}

fn invoice_event(event_id: &str, event_type: &str, invoice_id: &str, occurred_at: u64) -> String {
    json!({
        "event_id": event_id, "event_type": event_type, "version": 1, "occurred_at": occurred_at,
        "data": {"invoice_id": invoice_id, "status": event_type.trim_start_matches("invoice."),
                 "order": {"external_id": format!("order-{invoice_id}"), "amount": "10.50", "currency": "USDT"}}
    })
    .to_string()
}

#[tokio::test]
async fn one_paid_delivery_fulfils_once_in_one_transaction_then_marks_its_record() {
    let rig = Rig::new().await;
    rig.aws.calls.reset();
    assert_eq!(
        rig.apply(&invoice_event("evt_p1", "invoice.paid", "inv_p1", NOW))
            .await,
        Applied::Fulfilled
    );
    // A read of the invoice (a refused transaction is billed as written); the invoice, its
    // fulfilment, the order's claim and guard in one transaction; the ledger's mark after it,
    // alone.
    assert_eq!(
        rig.aws.calls.operations(),
        [
            "DynamoDB.GetItem",
            "DynamoDB.TransactWriteItems",
            "DynamoDB.UpdateItem"
        ]
    );

    let invoice = rig.state_item("inv_p1").await.unwrap();
    assert_eq!(get_s(&invoice, "status"), "paid");
    assert_eq!(get_s(&invoice, "order_id"), "order-inv_p1");
    assert_eq!(invoice["amount"].as_n().unwrap(), "10.50");
    assert_eq!(get_s(&invoice, "currency"), "USDT");
    let fulfilment = rig.state_item(&fulfilment_key("inv_p1")).await.unwrap();
    assert_eq!(get_s(&fulfilment, "won_by"), "evt_p1");
    assert_eq!(get_s(&fulfilment, "order_id"), "order-inv_p1");
    assert_eq!(rig.fulfilments().await.len(), 1);
    assert_eq!(rig.outcome("evt_p1").await, "fulfilled");
}

#[tokio::test]
async fn the_same_event_again_changes_nothing() {
    let rig = Rig::new().await;
    let paid = invoice_event("evt_same", "invoice.paid", "inv_same", NOW);
    rig.apply(&paid).await;
    let before = rig.aws.scan(&rig.state).await;
    rig.aws.calls.reset();
    assert_eq!(rig.apply(&paid).await, Applied::AlreadyProcessed);
    assert_eq!(
        rig.aws.calls.operations(),
        ["DynamoDB.GetItem", "DynamoDB.UpdateItem"],
        "a read (the invoice holds this event's own change: no transaction) and a refused mark"
    );
    assert_eq!(rig.aws.scan(&rig.state).await, before);
    assert_eq!(
        rig.outcome("evt_same").await,
        "fulfilled",
        "the first outcome stays"
    );
}

#[tokio::test]
async fn two_endpoints_two_event_ids_one_fulfilment() {
    let rig = Rig::new().await;
    assert_eq!(
        rig.apply(&invoice_event("evt_ep_a", "invoice.paid", "inv_ep", NOW))
            .await,
        Applied::Fulfilled
    );
    rig.aws.calls.reset();
    assert_eq!(
        rig.apply(&invoice_event("evt_ep_b", "invoice.paid", "inv_ep", NOW))
            .await,
        Applied::AlreadyFinal
    );
    assert_eq!(
        rig.aws.calls.operations(),
        ["DynamoDB.GetItem", "DynamoDB.UpdateItem"],
        "already final: a read, then the mark alone (no transaction of 8 units refused)"
    );
    assert_eq!(rig.fulfilments().await.len(), 1);
    assert_eq!(rig.outcome("evt_ep_b").await, "already_final");
}

#[tokio::test]
async fn confirming_after_paid_keeps_paid() {
    let rig = Rig::new().await;
    rig.apply(&invoice_event("evt_cp_paid", "invoice.paid", "inv_cp", NOW))
        .await;
    assert_eq!(
        rig.apply(&invoice_event(
            "evt_cp_conf",
            "invoice.confirming",
            "inv_cp",
            NOW - 30
        ))
        .await,
        Applied::AlreadyFinal
    );
    assert_eq!(
        get_s(&rig.state_item("inv_cp").await.unwrap(), "status"),
        "paid"
    );
    assert_eq!(rig.fulfilments().await.len(), 1);
}

#[tokio::test]
async fn a_late_open_event_never_moves_an_invoice_backwards() {
    let rig = Rig::new().await;
    assert_eq!(
        rig.apply(&invoice_event("evt_o2", "invoice.confirming", "inv_o", NOW))
            .await,
        Applied::Updated
    );
    assert_eq!(
        rig.apply(&invoice_event(
            "evt_o1",
            "invoice.awaiting_payment",
            "inv_o",
            NOW - 10
        ))
        .await,
        Applied::Stale
    );
    assert_eq!(
        get_s(&rig.state_item("inv_o").await.unwrap(), "status"),
        "confirming"
    );
    // A reorg announced later does move it back to awaiting_payment.
    assert_eq!(
        rig.apply(&invoice_event(
            "evt_o3",
            "invoice.awaiting_payment",
            "inv_o",
            NOW + 10
        ))
        .await,
        Applied::Updated
    );
    assert_eq!(
        get_s(&rig.state_item("inv_o").await.unwrap(), "status"),
        "awaiting_payment"
    );
}

#[tokio::test]
async fn a_replay_after_support_marked_the_invoice_paid_fulfils_nothing() {
    let rig = Rig::new().await;
    // Support names the order the invoice pays (one naming another waits as `order_conflict`).
    let order = OrderRef {
        external_id: Some("order-inv_manual".into()),
        amount: Amount::parse("10.50"),
        currency: Some("USDT".into()),
        project: None,
        home: false,
        unlisted: false,
    };
    assert_eq!(
        rig.fulfil
            .mark_paid("inv_manual", order, "support:alice", NOW_MS)
            .await
            .unwrap(),
        Applied::Fulfilled
    );
    assert_eq!(
        rig.apply(&invoice_event(
            "evt_replay",
            "invoice.paid",
            "inv_manual",
            NOW
        ))
        .await,
        Applied::AlreadyFinal
    );
    let fulfilments = rig.fulfilments().await;
    assert_eq!(fulfilments.len(), 1);
    assert_eq!(get_s(&fulfilments[0], "won_by"), "manual:support:alice");
    assert_eq!(rig.outcome("evt_replay").await, "already_final");
    // Marking it paid by hand twice is harmless too.
    let again = OrderRef {
        external_id: None,
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    assert_eq!(
        rig.fulfil
            .mark_paid("inv_manual", again, "support:bob", NOW_MS)
            .await
            .unwrap(),
        Applied::AlreadyFinal
    );
    assert_eq!(rig.fulfilments().await.len(), 1);
}

#[tokio::test]
async fn twenty_concurrent_paid_events_for_one_invoice_fulfil_once() {
    let rig = Rig::new().await;
    let items: Vec<_> = (0..20)
        .map(|i| {
            live(&invoice_event(
                &format!("evt_c{i}"),
                "invoice.paid",
                "inv_concurrent",
                NOW,
            ))
        })
        .collect();
    let results =
        futures::future::join_all(items.iter().map(|b| rig.fulfil.apply(b, NOW_MS))).await;
    let outcomes: Vec<Applied> = results
        .into_iter()
        .map(|r| r.expect("no store error").1)
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == Applied::Fulfilled)
            .count(),
        1,
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Applied::Fulfilled | Applied::AlreadyFinal)),
        "{outcomes:?}"
    );
    assert_eq!(rig.fulfilments().await.len(), 1);
}

#[tokio::test]
async fn a_payment_after_expiry_keeps_expired_and_sets_paid_late_at() {
    let rig = Rig::new().await;
    rig.apply(&invoice_event(
        "evt_exp",
        "invoice.expired",
        "inv_late",
        NOW,
    ))
    .await;
    assert_eq!(
        rig.apply(&invoice_event(
            "evt_late",
            "invoice.paid",
            "inv_late",
            NOW + 600
        ))
        .await,
        Applied::PaidLate
    );
    let invoice = rig.state_item("inv_late").await.unwrap();
    assert_eq!(get_s(&invoice, "status"), "expired");
    assert_eq!(get_n(&invoice, "paid_late_at"), NOW + 600);
    assert!(rig.fulfilments().await.is_empty());
}

#[tokio::test]
async fn the_amount_guard_compares_decimals_and_holds_mismatches() {
    let rig = Rig::new().await;
    let store = rig.fulfil.store();
    store
        .register_order(
            (None, "order-inv_ok"),
            &Amount::parse("10.5").unwrap(),
            "usdt",
        )
        .await
        .unwrap();
    store
        .register_order(
            (None, "order-inv_bad"),
            &Amount::parse("10.49").unwrap(),
            "USDT",
        )
        .await
        .unwrap();
    assert_eq!(
        rig.apply(&invoice_event("evt_ok", "invoice.paid", "inv_ok", NOW))
            .await,
        Applied::Fulfilled,
        "10.50 == 10.5"
    );
    assert_eq!(
        rig.apply(&invoice_event("evt_bad", "invoice.paid", "inv_bad", NOW))
            .await,
        Applied::Held
    );
    let held = rig.state_item("inv_bad").await.unwrap();
    assert_eq!(get_s(&held, "status"), "paid");
    assert_eq!(
        held["held"].as_bool().ok(),
        Some(&true),
        "visible to operators"
    );
    assert!(
        rig.state_item(&fulfilment_key("inv_bad")).await.is_none(),
        "not fulfilled"
    );
    assert_eq!(rig.outcome("evt_bad").await, "held");
    // A replay of the held payment does not fulfil it either.
    assert_eq!(
        rig.apply(&invoice_event("evt_bad2", "invoice.paid", "inv_bad", NOW))
            .await,
        Applied::AlreadyFinal
    );
    assert_eq!(rig.fulfilments().await.len(), 1);
}

fn deposit(event_id: &str, status: &str, id: &str, net: &str, is_final: bool, at: u64) -> String {
    json!({"event_id": event_id, "event_type": format!("payment_channel.deposit.{status}"), "version": 1, "occurred_at": at,
        "data": {"id": id, "status": status, "is_final": is_final, "payment_channel_external_id": "customer-42",
                 "currency": "TRX", "gross": net, "fee": "0", "net": net}})
    .to_string()
}

#[tokio::test]
async fn deposits_credit_once_through_advisory_events_and_duplicates() {
    let rig = Rig::new().await;
    assert_eq!(
        rig.apply(&deposit("evt_d1", "confirming", "pcd_1", "0.1", false, NOW))
            .await,
        Applied::Updated
    );
    assert_eq!(
        rig.apply(&deposit(
            "evt_d2",
            "reorged",
            "pcd_1",
            "0.1",
            false,
            NOW + 1
        ))
        .await,
        Applied::Updated
    );
    assert_eq!(
        rig.apply(&deposit(
            "evt_d3",
            "confirmed",
            "pcd_1",
            "0.1",
            true,
            NOW + 2
        ))
        .await,
        Applied::Credited
    );
    assert_eq!(
        rig.apply(&deposit(
            "evt_d4",
            "confirming",
            "pcd_1",
            "0.1",
            false,
            NOW + 3
        ))
        .await,
        Applied::AlreadyFinal
    );
    assert_eq!(
        rig.apply(&deposit(
            "evt_d3",
            "confirmed",
            "pcd_1",
            "0.1",
            true,
            NOW + 2
        ))
        .await,
        Applied::AlreadyProcessed
    );
    assert_eq!(
        rig.apply(&deposit(
            "evt_d5",
            "confirmed",
            "pcd_1",
            "0.1",
            true,
            NOW + 2
        ))
        .await,
        Applied::AlreadyFinal,
        "second endpoint"
    );
    assert_eq!(
        rig.apply(&deposit("evt_d6", "reorged", "pcd_1", "0.1", true, NOW + 9))
            .await,
        Applied::AlreadyFinal,
        "never undone"
    );
    assert_eq!(
        rig.apply(&deposit("evt_d7", "confirmed", "pcd_2", "0.2", true, NOW))
            .await,
        Applied::Credited
    );

    let balance = rig
        .state_item(&balance_key(None, "customer-42", "TRX"))
        .await
        .unwrap();
    assert_eq!(
        balance["balance"].as_n().unwrap(),
        "0.3",
        "exact decimals: 0.1 + 0.2 == 0.3"
    );
    assert_eq!(
        get_s(&rig.state_item("pcd_1").await.unwrap(), "status"),
        "confirmed"
    );
}

#[tokio::test]
async fn withdrawals_move_forward_only_and_unknown_events_are_ignored() {
    let rig = Rig::new().await;
    let w = |id: &str, status: &str| {
        json!({"event_id": id, "event_type": format!("withdrawal.{status}"), "version": 1, "occurred_at": NOW,
        "data": {"withdrawal_id": "wdr_1", "type": "refund", "invoice_id": "inv_9", "amount": "5.00", "currency": "USDT", "status": status}}).to_string()
    };
    assert_eq!(
        rig.apply(&w("evt_w1", "processing")).await,
        Applied::Updated
    );
    assert_eq!(rig.apply(&w("evt_w2", "completed")).await, Applied::Updated);
    assert_eq!(
        rig.apply(&w("evt_w3", "created")).await,
        Applied::AlreadyFinal
    );
    assert_eq!(
        rig.apply(&w("evt_w4", "processing")).await,
        Applied::AlreadyFinal
    );
    let item = rig.state_item("wdr_1").await.unwrap();
    assert_eq!(
        (
            get_s(&item, "status"),
            get_s(&item, "type"),
            get_s(&item, "invoice_id")
        ),
        ("completed", "refund", "inv_9")
    );

    rig.aws.calls.reset();
    let unknown = envelope("evt_unknown", "payout.batch_settled", json!({"id": "pb_1"}));
    assert_eq!(rig.apply(&unknown).await, Applied::Ignored);
    assert_eq!(
        rig.aws.calls.operations(),
        ["DynamoDB.UpdateItem"],
        "ignored: one call"
    );
    assert_eq!(rig.outcome("evt_unknown").await, "ignored");
}

/// Any order and any multiplicity of one invoice's events ends in the same state, with exactly
/// one fulfilment if (and only if) it was paid.
mod property {
    use proptest::prelude::*;

    use super::*;

    const OPEN: [&str; 3] = [
        "invoice.awaiting_payment",
        "invoice.confirming",
        "invoice.underpaid_waiting",
    ];
    const FINAL: [&str; 5] = [
        "invoice.paid",
        "invoice.paid_over",
        "invoice.underpaid",
        "invoice.expired",
        "invoice.cancelled",
    ];

    fn runtime() -> &'static tokio::runtime::Runtime {
        static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
        RT.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap()
        })
    }

    fn rig() -> &'static Rig {
        static RIG: std::sync::OnceLock<Rig> = std::sync::OnceLock::new();
        RIG.get_or_init(|| runtime().block_on(Rig::new()))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
        #[test]
        fn any_order_and_multiplicity_ends_in_the_same_state(
            opens in proptest::collection::vec(0..OPEN.len(), 0..4),
            final_event in proptest::option::of(0..FINAL.len()),
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..16),
            case in any::<u64>(),
        ) {
            // One consistent life cycle: open events in time order, then at most one final one.
            let invoice = format!("inv_prop_{case}");
            let mut history: Vec<(String, &str, u64)> = opens.iter().enumerate()
                .map(|(i, o)| (format!("evt_{case}_{i}"), OPEN[*o], NOW + i as u64))
                .collect();
            if let Some(f) = final_event {
                history.push((format!("evt_{case}_final"), FINAL[f], NOW + 100));
            }
            prop_assume!(!history.is_empty());
            // Deliveries: every event at least once, then random extra copies, in random order.
            let mut deliveries: Vec<usize> = (0..history.len()).collect();
            deliveries.extend(picks.iter().map(|p| p.index(history.len())));
            let mut order: Vec<usize> = deliveries;
            let len = order.len();
            for (i, p) in picks.iter().enumerate() {
                order.swap(i % len, p.index(len));
            }
            let rig = rig();
            let status = runtime().block_on(async {
                for i in &order {
                    let (id, ty, at) = &history[*i];
                    rig.fulfil.apply(&live(&invoice_event(id, ty, &invoice, *at)), NOW_MS).await.unwrap();
                }
                get_s(&rig.state_item(&invoice).await.unwrap(), "status").to_owned()
            });
            let expected = match final_event {
                Some(f) => FINAL[f].trim_start_matches("invoice."),
                // Open only: the latest open event wins, whatever the delivery order.
                None => history.last().unwrap().1.trim_start_matches("invoice."),
            };
            prop_assert_eq!(status, expected);
            let fulfilled = runtime().block_on(rig.state_item(&fulfilment_key(&invoice))).is_some();
            let pays = final_event.is_some_and(|f| f < 2);
            prop_assert_eq!(fulfilled, pays);
        }
    }
}

#[tokio::test]
async fn one_poison_message_in_a_batch_of_ten_fails_alone_and_reaches_the_dlq() {
    let rig = Rig::new().await;
    let queues = rig.aws.queue_with(1, 3).await;
    let ledger =
        paymos_inbox_aws::dynamodb::DynamoLedger::new(rig.aws.dynamodb.clone(), &rig.ledger, None);
    for i in 0..9 {
        let body = invoice_event(
            &format!("evt_b{i}"),
            "invoice.paid",
            &format!("inv_b{i}"),
            NOW,
        );
        // Recorded by ingest, then sent.
        paymos_inbox_core::roads::ingest::DeliveryLedger::record(
            &ledger,
            &recorded_delivery(
                &body,
                paymos_inbox_core::wire::signature::Environment::Live,
                NOW_MS,
            ),
            0,
        )
        .await
        .unwrap();
        rig.aws
            .send_raw(&queues.queue_url, &live(&body).encode())
            .await;
    }
    rig.aws
        .send_raw(&queues.queue_url, "this is not a Paymos event")
        .await;

    let mut first = None;
    let mut receives_of_poison = 0;
    for _ in 0..12 {
        let polled = poll_once(
            (&rig.aws.sqs, &queues.queue_url, &QueueVisibility),
            &rig.fulfil,
            10,
            0,
            || NOW_MS,
        )
        .await
        .unwrap();
        if first.is_none() && polled.received > 0 {
            first = Some(polled);
        }
        receives_of_poison += polled.failed;
        if rig.aws.drain(&queues.dlq_url).await.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let first = first.expect("a batch was received");
    assert_eq!(
        first.failed, 1,
        "only the poison message is reported failed"
    );
    assert_eq!(receives_of_poison, 3, "it was tried maxReceiveCount times");
    assert_eq!(
        rig.fulfilments().await.len(),
        9,
        "the other nine were applied once"
    );
    for i in 0..9 {
        assert_eq!(rig.outcome(&format!("evt_b{i}")).await, "fulfilled");
    }
    assert!(
        rig.aws.drain(&queues.queue_url).await.is_empty(),
        "nothing left in the work queue"
    );
}

#[tokio::test]
async fn end_to_end_an_invoice_life_cycle_through_ingest_sqs_and_fulfil() {
    let rig = Rig::new().await;
    let queues = rig.aws.queue_with(30, 5).await;
    let ingest = Ingest::new(
        Verifier::new(
            vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
            300,
        ),
        DynamoLedger::new(rig.aws.dynamodb.clone(), &rig.ledger, None),
        SqsQueue::new(rig.aws.sqs.clone(), &queues.queue_url),
        IngestSettings::default(),
    );
    let life = [
        ("evt_l1", "invoice.awaiting_payment", NOW - 300),
        ("evt_l2", "invoice.confirming", NOW - 200),
        ("evt_l3", "invoice.paid", NOW - 100),
        ("evt_l4", "invoice.confirming", NOW - 150), // late
        ("evt_l5", "invoice.paid", NOW - 100),       // second endpoint
    ];
    for (id, ty, at) in life {
        let body = invoice_event(id, ty, "inv_life", at);
        let r = respond(
            &ingest,
            &delivery(&body, id, &sign(&body, NOW, &[LIVE_SECRET])),
            NOW_MS,
        )
        .await;
        assert_eq!(r.status(), 200, "{id}");
        poll_once(
            (&rig.aws.sqs, &queues.queue_url, &QueueVisibility),
            &rig.fulfil,
            10,
            0,
            || NOW_MS,
        )
        .await
        .unwrap();
    }
    // Paymos retries evt_l3 a minute later: the record is processed, so one call and a 200.
    let body = invoice_event("evt_l3", "invoice.paid", "inv_life", NOW - 100);
    let later = NOW + 60;
    let r = respond(
        &ingest,
        &delivery(&body, "evt_l3", &sign(&body, later, &[LIVE_SECRET])),
        later * 1000,
    )
    .await;
    assert_eq!(
        (r.status().as_u16(), response_json(&r)["status"].as_str()),
        (200, Some("duplicate"))
    );

    assert_eq!(
        get_s(&rig.state_item("inv_life").await.unwrap(), "status"),
        "paid"
    );
    assert_eq!(rig.fulfilments().await.len(), 1);
    let outcomes: Vec<String> = futures::future::join_all(
        ["evt_l1", "evt_l2", "evt_l3", "evt_l4", "evt_l5"].map(|id| rig.outcome(id)),
    )
    .await;
    assert_eq!(
        outcomes,
        [
            "updated",
            "updated",
            "fulfilled",
            "already_final",
            "already_final"
        ]
    );
    assert!(
        rig.aws.drain(&queues.queue_url).await.is_empty(),
        "every message was consumed"
    );
    assert!(rig.aws.drain(&queues.dlq_url).await.is_empty());
}

#[tokio::test]
async fn the_paths_that_need_a_person_cost_what_the_readme_says() {
    let rig = Rig::new().await;
    let calls = |expected: &[&str], what: &str| {
        assert_eq!(rig.aws.calls.operations(), expected, "{what}");
        rig.aws.calls.reset();
    };
    // Verified by the other environment's secret: the ledger mark alone.
    rig.aws.calls.reset();
    let sandbox = work_item(
        &invoice_event("evt_cost_sbx", "invoice.paid", "inv_cost_sbx", NOW),
        paymos_inbox_core::wire::signature::Environment::Test,
    );
    let (_, applied) = rig.fulfil.apply(&sandbox, NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::OtherEnvironment);
    calls(&["DynamoDB.UpdateItem"], "other_environment");
    // Unusable: the ledger mark and the review item, one transaction.
    let no_net = envelope(
        "evt_cost_unusable",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_cost", "is_final": true, "payment_channel_external_id": "p", "net": "abc", "currency": "USDT"}),
    );
    assert_eq!(rig.apply(&no_net).await, Applied::Unusable);
    // A transaction is read first: its refusal would be billed as its writes.
    calls(
        &["DynamoDB.GetItem", "DynamoDB.TransactWriteItems"],
        "unusable",
    );
    // A second paid invoice of an order: the refused fulfilment, then the invoice paid unfulfilled.
    rig.apply(&invoice_event(
        "evt_cost_a",
        "invoice.paid",
        "inv_cost_a",
        NOW,
    ))
    .await;
    rig.aws.calls.reset();
    let second = envelope(
        "evt_cost_b",
        "invoice.paid",
        json!({"invoice_id": "inv_cost_b", "order": {"external_id": "order-inv_cost_a", "amount": "10.50", "currency": "USDT"}}),
    );
    assert_eq!(rig.apply(&second).await, Applied::DuplicatePayment);
    calls(
        &[
            "DynamoDB.GetItem",
            "DynamoDB.TransactWriteItems",
            "DynamoDB.GetItem",
            "DynamoDB.TransactWriteItems",
        ],
        "duplicate_payment",
    );
    // Held: likewise (the amount guard refuses, then the invoice is paid and held).
    rig.fulfil
        .store()
        .register_order(
            (None, "order-inv_cost_h"),
            &Amount::parse("99").unwrap(),
            "USDT",
        )
        .await
        .unwrap();
    rig.aws.calls.reset();
    let held = invoice_event("evt_cost_h", "invoice.paid", "inv_cost_h", NOW);
    assert_eq!(rig.apply(&held).await, Applied::Held);
    calls(
        &[
            "DynamoDB.GetItem",
            "DynamoDB.TransactWriteItems",
            "DynamoDB.GetItem",
            "DynamoDB.TransactWriteItems",
        ],
        "held",
    );
}

#[tokio::test]
async fn a_crash_between_the_change_and_its_mark_ends_with_the_planned_outcome() {
    use paymos_inbox_core::money::change::{Source, change_of};
    use paymos_inbox_core::money::effect::RecordFulfilment;
    use paymos_inbox_core::money::outcome::{plan, writes};
    use paymos_inbox_core::roads::fulfil::ResourceStore;
    use paymos_inbox_core::wire::envelope::Envelope;
    let rig = Rig::new().await;
    for (body, expected) in [
        (
            invoice_event("evt_c1", "invoice.paid", "inv_c1", NOW),
            Applied::Fulfilled,
        ),
        (
            invoice_event("evt_c2", "invoice.confirming", "inv_c2", NOW),
            Applied::Updated,
        ),
    ] {
        // The change commits, then the function dies before the mark.
        let envelope = Envelope::parse(body.as_bytes()).unwrap();
        let change = change_of(&envelope);
        let source = Source::Delivery {
            event_id: envelope.event_id.clone(),
        };
        let writes = writes(&source, &change, &plan(&change), &RecordFulfilment, NOW_MS);
        rig.fulfil.store().write(&writes).await.unwrap();
        assert!(
            rig.aws
                .item(&rig.ledger, "event_id", &envelope.event_id)
                .await
                .is_none(),
            "not marked yet"
        );
        // SQS delivers the message again.
        assert_eq!(rig.apply(&body).await, expected, "{}", envelope.event_id);
        assert_eq!(rig.outcome(&envelope.event_id).await, expected.as_str());
    }
    assert_eq!(rig.fulfilments().await.len(), 1, "fulfilled once");
}

// Issue 28, case 1, where DynamoDB's condition decides: a full refund recorded before a late
// `invoice.paid` keeps the payment from shipping; the customer's new invoice for the order ships.
#[tokio::test]
async fn a_full_refund_recorded_first_keeps_the_late_payment_from_shipping_on_dynamodb() {
    let rig = Rig::new().await;
    let refund = json!({"event_id": "evt_rf", "event_type": "withdrawal.completed", "version": 1,
        "occurred_at": NOW, "data": {"withdrawal_id": "wdr_rf", "type": "refund", "mode": "full",
        "invoice_id": "inv_rf", "amount": "10.50", "currency": "USDT"}})
    .to_string();
    assert_eq!(rig.apply(&refund).await, Applied::Updated);
    assert_eq!(
        rig.apply(&invoice_event("evt_rp", "invoice.paid", "inv_rf", NOW))
            .await,
        Applied::Refunded
    );
    let invoice = rig.state_item("inv_rf").await.unwrap();
    assert_eq!(get_s(&invoice, "status"), "paid");
    assert_eq!(get_s(&invoice, "refunded_in_full_by"), "wdr_rf");
    assert!(rig.fulfilments().await.is_empty());
    assert!(rig.state_item("order_paid#order-inv_rf").await.is_none());
    assert_eq!(rig.outcome("evt_rp").await, "refunded");
    // An overpayment refund recorded first settles nothing: that payment ships.
    let overpayment = refund
        .replace("evt_rf", "evt_ro")
        .replace("wdr_rf", "wdr_ro")
        .replace("inv_rf", "inv_ro")
        .replace("\"full\"", "\"overpayment\"");
    assert_eq!(rig.apply(&overpayment).await, Applied::Updated);
    assert_eq!(
        rig.apply(&invoice_event("evt_rq", "invoice.paid", "inv_ro", NOW))
            .await,
        Applied::Fulfilled
    );
}

// Issue 28, case 8, where DynamoDB's condition decides: a payment naming no order, for an
// invoice nothing recorded names, is never fulfilled as "no order"; once the order is known
// (another delivery of the payment names it), it ships, once.
#[tokio::test]
async fn a_payment_with_no_known_order_waits_for_its_order_on_dynamodb() {
    let rig = Rig::new().await;
    let silent = |event_id: &str| {
        json!({"event_id": event_id, "event_type": "invoice.paid", "version": 1,
            "occurred_at": NOW, "data": {"invoice_id": "inv_ton",
            "payment": {"network": "TON", "currency": "USDT", "expected": "10.50"}}})
        .to_string()
    };
    assert_eq!(rig.apply(&silent("evt_s1")).await, Applied::OrderUnknown);
    assert!(rig.fulfilments().await.is_empty());
    // The invoice learns only when it was paid (for the refund rule, should a person name its
    // order later, with no time of their own): no status, no order.
    let invoice = rig.state_item("inv_ton").await.expect("the payment's time");
    assert_eq!(get_n(&invoice, "payment_at"), NOW);
    assert!(!invoice.contains_key("status") && !invoice.contains_key("order_id"));
    assert_eq!(rig.outcome("evt_s1").await, "order_unknown");
    let note = rig
        .state_item("review#evt_s1")
        .await
        .expect("a review note");
    assert_eq!(get_s(&note, "resource_id"), "inv_ton");
    assert_eq!(
        rig.apply(&invoice_event("evt_s2", "invoice.paid", "inv_ton", NOW))
            .await,
        Applied::Fulfilled
    );
    assert_eq!(rig.fulfilments().await.len(), 1);
    assert!(rig.state_item("order_paid#order-inv_ton").await.is_some());
}

// Issue 38, case 1, where DynamoDB's conditions decide: a full refund returns what was paid
// until it completed (Paymos' clock). A payment after it ships; the refund's time only moves
// forward, whichever refund arrives first.
#[tokio::test]
async fn a_full_refund_settles_only_what_was_paid_before_it_on_dynamodb() {
    let rig = Rig::new().await;
    let refund = |event_id: &str, invoice_id: &str, at: u64| {
        json!({"event_id": event_id, "event_type": "withdrawal.completed", "version": 1,
            "occurred_at": at, "data": {"withdrawal_id": format!("wdr_{event_id}"), "type": "refund",
            "mode": "full", "invoice_id": invoice_id, "amount": "4", "currency": "USDT"}})
        .to_string()
    };
    // Partly paid, refunded in full at NOW, paid in full a minute later: it ships.
    let partly = invoice_event("evt_u", "invoice.underpaid_waiting", "inv_t", NOW - 60);
    assert_eq!(rig.apply(&partly).await, Applied::Updated);
    assert_eq!(
        rig.apply(&refund("evt_r1", "inv_t", NOW)).await,
        Applied::Updated
    );
    let paid = invoice_event("evt_p", "invoice.paid", "inv_t", NOW + 60);
    assert_eq!(rig.apply(&paid).await, Applied::Fulfilled);
    let invoice = rig.state_item("inv_t").await.unwrap();
    assert_eq!(get_n(&invoice, "refunded_in_full_at"), NOW);
    assert_eq!(get_n(&invoice, "payment_at"), NOW + 60);
    // A second invoice: refunded at NOW + 120, then at NOW (arriving later), then its payment
    // of NOW + 60 arrives: the later refund returned it.
    assert_eq!(
        rig.apply(&refund("evt_r2", "inv_u", NOW + 120)).await,
        Applied::Updated
    );
    assert_eq!(
        rig.apply(&refund("evt_r3", "inv_u", NOW)).await,
        Applied::Updated
    );
    let invoice = rig.state_item("inv_u").await.unwrap();
    assert_eq!(get_n(&invoice, "refunded_in_full_at"), NOW + 120);
    let paid = invoice_event("evt_q", "invoice.paid", "inv_u", NOW + 60);
    assert_eq!(rig.apply(&paid).await, Applied::Refunded);
    assert_eq!(
        rig.fulfilments().await.len(),
        1,
        "inv_t ships, inv_u does not"
    );
}

// `dev`'s poller sets a failed message's visibility as fulfil asks, as the function does on
// AWS: it comes back on fulfil's own backoff (here a poison message's 0 s), not after the
// template's 181 s visibility timeout, which alone brings it back under `QueueVisibility`.
#[tokio::test]
async fn a_failed_message_comes_back_on_fulfils_backoff_not_the_queues_visibility() {
    let rig = Rig::new().await;
    let poll = |url: String, by_fulfil: bool| {
        let rig = &rig;
        async move {
            let retry = SqsQueue::new(rig.aws.sqs.clone(), &url);
            if by_fulfil {
                poll_once((&rig.aws.sqs, &url, &retry), &rig.fulfil, 10, 0, || NOW_MS).await
            } else {
                poll_once(
                    (&rig.aws.sqs, &url, &QueueVisibility),
                    &rig.fulfil,
                    10,
                    0,
                    || NOW_MS,
                )
                .await
            }
            .unwrap()
        }
    };
    for by_fulfil in [true, false] {
        let queues = rig.aws.queue_with(181, 5).await;
        rig.aws
            .send_raw(&queues.queue_url, "this is not a Paymos event")
            .await;
        let first = poll(queues.queue_url.clone(), by_fulfil).await;
        assert_eq!((first.received, first.failed), (1, 1));
        let again = poll(queues.queue_url.clone(), by_fulfil).await;
        assert_eq!(
            again.received,
            usize::from(by_fulfil),
            "by fulfil's backoff: {by_fulfil}"
        );
    }
}
