//! The write contract: the domain's guards (`paymos_inbox_core::money::write`) rendered as DynamoDB
//! condition expressions and evaluated by the memory twin give the same outcome for every pair
//! of changes. Each pair runs on `DynamoResources` (DynamoDB Local) and on `MemoryResources`
//! (which evaluates the same guards with `Guard::holds`), and the outcomes and
//! fulfilments must agree; the use-case tests in `crates/core/src/tests` then hold for DynamoDB
//! too. The deliveries ledger's conditions likewise, against `MemoryLedger`.

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_core::money::change::{Applied, Change, Credit, OrderRef, Source};
use paymos_inbox_core::money::effect::RecordFulfilment;
use paymos_inbox_core::money::status::{Amount, DepositStatus, InvoiceStatus, WithdrawalStatus};
use paymos_inbox_core::money::write::{self, Key};
use paymos_inbox_core::roads::fulfil::{ResourceStore, settle};
use paymos_inbox_core::roads::ingest::{
    DeliveryLedger, DeliveryState, PortError, Recorded, TakeOver,
};
use paymos_inbox_core::testkit::memory::{MemoryLedger, MemoryResources};
use paymos_inbox_core::wire::signature::Environment;

use paymos_inbox_testkit::*;

/// Applies `changes` in order (delivery `evt_<n>_<i>`) and returns each outcome.
async fn outcomes<S: ResourceStore>(store: &S, n: usize, changes: &[Change]) -> Vec<Applied> {
    let mut out = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        let source = Source::Delivery {
            event_id: format!("evt_{n}_{i}"),
        };
        let applied = settle(store, &source, change, &RecordFulfilment, NOW_MS)
            .await
            .expect("store answers");
        out.push(applied);
    }
    out
}

fn invoice(id: &str, order: &str, status: InvoiceStatus, at: u64, amount: &str) -> Change {
    Change::Invoice {
        invoice_id: id.to_owned(),
        status,
        occurred_at: at,
        paid_at: Some(at),
        order: OrderRef {
            external_id: Some(order.to_owned()),
            amount: Amount::parse(amount),
            currency: Some("USD".into()),
            project: None,
            home: false,
            unlisted: false,
        },
    }
}

/// Every history the contract covers: all invoice status pairs at an earlier, the same and a
/// later event time; all withdrawal pairs; deposits with and without credits; two invoices
/// for one order; the guard with equal and different amounts; a delivery's second message.
fn histories(run: &str) -> Vec<Vec<Change>> {
    let mut out = Vec::new();
    let mut n = 0;
    let mut id = |prefix: &str| {
        n += 1;
        format!("{prefix}_{run}_{n}")
    };
    for first in InvoiceStatus::ALL {
        for second in InvoiceStatus::ALL {
            for at in [9, 10, 11] {
                let (inv, order) = (id("inv"), id("o"));
                out.push(vec![
                    invoice(&inv, &order, first, 10, "10.50"),
                    invoice(&inv, &order, second, at, "10.50"),
                ]);
            }
        }
    }
    for first in WithdrawalStatus::ALL {
        for second in WithdrawalStatus::ALL {
            let wdr = id("wdr");
            let change = |status| Change::Withdrawal {
                withdrawal_id: wdr.clone(),
                status,
                occurred_at: 10,
                kind: "payout".into(),
                invoice_id: None,
                amount: None,
                currency: None,
                mode: None,
            };
            out.push(vec![change(first), change(second)]);
        }
    }
    for (first, second) in [(true, true), (true, false), (false, true), (false, false)] {
        for at in [9, 10, 11] {
            let pcd = id("pcd");
            let change = |credit: bool, at| Change::Deposit {
                deposit_id: pcd.clone(),
                status: if credit {
                    DepositStatus::Confirmed
                } else {
                    DepositStatus::Confirming
                },
                occurred_at: at,
                credit: credit.then(|| Credit {
                    payer: format!("payer_{run}"),
                    net: Amount::parse("1.5").unwrap(),
                    currency: "TRX".into(),
                    project: None,
                }),
            };
            out.push(vec![change(first, 10), change(second, at)]);
        }
    }
    let order = id("o");
    out.push(vec![
        invoice(&id("inv"), &order, InvoiceStatus::Paid, 10, "10.50"),
        invoice(&id("inv"), &order, InvoiceStatus::PaidOver, 11, "10.50"),
    ]);
    out
}

#[tokio::test]
async fn dynamodb_and_the_domains_rules_agree_on_every_transition() {
    let aws = Aws::new();
    let state = aws.state_table().await;
    let ledger = aws.deliveries_table().await;
    let dynamo = DynamoResources::new(aws.dynamodb.clone(), &state, &ledger);
    let memory = MemoryResources::new();
    let run = unique("c");
    let histories = histories(&run);
    // The guard: one order registered at 10.5 (paid with 10.50: equal as numbers), one at 11.
    for (order, amount) in [("guard_eq", "10.5"), ("guard_ne", "11")] {
        let order = format!("{order}_{run}");
        let amount = Amount::parse(amount).unwrap();
        dynamo
            .register_order((None, &order), &amount, "usd")
            .await
            .unwrap();
        memory.register_order(&order, &amount, "usd");
    }
    let guarded = ["guard_eq", "guard_ne"].map(|o| {
        vec![invoice(
            &format!("inv_{o}_{run}"),
            &format!("{o}_{run}"),
            InvoiceStatus::Paid,
            10,
            "10.50",
        )]
    });
    let mut checked = 0;
    let mut seen = std::collections::BTreeSet::new();
    for (n, history) in histories.iter().chain(&guarded).enumerate() {
        let on_dynamo = outcomes(&dynamo, n, history).await;
        let on_memory = outcomes(&memory, n, history).await;
        assert_eq!(on_dynamo, on_memory, "{history:?}");
        seen.extend(on_dynamo.iter().map(|a| a.as_str()));
        checked += 1;
    }
    // A second message for a delivery already processed, on each store.
    let again = outcomes(&dynamo, 0, &histories[0][..1]).await;
    assert_eq!(again, outcomes(&memory, 0, &histories[0][..1]).await);
    seen.extend(again.iter().map(|a| a.as_str()));
    let fulfilled_on_dynamo: Vec<String> = {
        let mut v: Vec<String> = aws
            .scan(&state)
            .await
            .iter()
            .filter(|i| get_s(i, "kind") == "fulfilment")
            .map(|i| get_s(i, "invoice_id").to_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        fulfilled_on_dynamo,
        memory.fulfilled(),
        "the same fulfilments"
    );
    assert_eq!(checked, 243 + 25 + 12 + 1 + 2);
    // Each resource's story (the status it reached first, when, by which delivery): the same.
    let mut stories = 0;
    for change in histories.iter().chain(&guarded).flatten() {
        let id = match change {
            Change::Invoice { invoice_id: id, .. }
            | Change::Withdrawal {
                withdrawal_id: id, ..
            }
            | Change::Deposit { deposit_id: id, .. } => id,
            _ => continue,
        };
        let on_memory = write::story(&memory.fields(&Key::state(id)).unwrap_or_default());
        assert_eq!(dynamo.story(id).await.unwrap(), on_memory, "{id}");
        stories += usize::from(!on_memory.is_empty());
    }
    assert!(stories > 280, "{stories} resources with a story");
    // The histories reach every outcome a store decides.
    for outcome in [
        "fulfilled",
        "updated",
        "credited",
        "already_final",
        "stale",
        "paid_late",
        "held",
        "duplicate_payment",
        "already_processed",
    ] {
        assert!(seen.contains(outcome), "{outcome} not covered: {seen:?}");
    }
}

#[tokio::test]
async fn releases_agree_on_dynamodb_and_in_memory() {
    use paymos_inbox_core::roads::release::{ReleaseBy, release};
    let aws = Aws::new();
    let state = aws.state_table().await;
    let ledger = aws.deliveries_table().await;
    let dynamo = DynamoResources::new(aws.dynamodb.clone(), &state, &ledger);
    let memory = MemoryResources::new();
    let run = unique("r");
    let order = format!("held_{run}");
    let eleven = Amount::parse("11").unwrap();
    dynamo
        .register_order((None, &order), &eleven, "USD")
        .await
        .unwrap();
    memory.register_order(&order, &eleven, "USD");
    let id = |s: &str| format!("{s}_{run}");
    // (history, the invoice to release)
    let cases = [
        (
            vec![invoice(
                &id("inv_h"),
                &order,
                InvoiceStatus::Paid,
                10,
                "10.50",
            )],
            id("inv_h"),
        ),
        (
            vec![
                invoice(&id("inv_l"), &id("o_l"), InvoiceStatus::Expired, 9, "10.50"),
                invoice(&id("inv_l"), &id("o_l"), InvoiceStatus::Paid, 10, "10.50"),
            ],
            id("inv_l"),
        ),
        (
            vec![
                invoice(&id("inv_d1"), &id("o_d"), InvoiceStatus::Paid, 10, "10.50"),
                invoice(&id("inv_d2"), &id("o_d"), InvoiceStatus::Paid, 11, "10.50"),
            ],
            id("inv_d2"),
        ),
        (
            vec![invoice(
                &id("inv_c"),
                &id("o_c"),
                InvoiceStatus::Cancelled,
                10,
                "10.50",
            )],
            id("inv_c"),
        ),
        (
            vec![invoice(
                &id("inv_o"),
                &id("o_o"),
                InvoiceStatus::Confirming,
                10,
                "10.50",
            )],
            id("inv_o"),
        ),
        (
            vec![invoice(
                &id("inv_p"),
                &id("o_p"),
                InvoiceStatus::Paid,
                10,
                "10.50",
            )],
            id("inv_p"),
        ),
        (Vec::new(), id("inv_u")),
    ];
    let fallback = OrderRef {
        external_id: Some(id("o_u")),
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    for (n, (history, invoice_id)) in cases.iter().enumerate() {
        outcomes(&dynamo, 1000 + n, history).await;
        outcomes(&memory, 1000 + n, history).await;
        for actor in ["a", "b"] {
            let on_dynamo = release(
                &dynamo,
                invoice_id,
                Some(&fallback),
                &ReleaseBy {
                    actor,
                    reason: Some("contract"),
                    override_amount: true,
                    project: None,
                    order: None,
                },
                &RecordFulfilment,
                NOW_MS,
            )
            .await;
            let on_memory = release(
                &memory,
                invoice_id,
                Some(&fallback),
                &ReleaseBy {
                    actor,
                    reason: Some("contract"),
                    override_amount: true,
                    project: None,
                    order: None,
                },
                &RecordFulfilment,
                NOW_MS,
            )
            .await;
            assert_eq!(on_dynamo, on_memory, "{invoice_id} by {actor}");
        }
    }
}

/// What a ledger answered to one step, comparable across stores.
#[derive(Debug, PartialEq, Eq)]
enum Said {
    New,
    Existing(DeliveryState, u64, String),
    Won,
    Lost(Option<DeliveryState>),
    Done,
    Stranded(Vec<String>),
}

/// The ledger's conditions (record once, a take-over only of the lease that was read, a
/// release only of one's own lease, what is stranded) give the same answers on DynamoDB and in
/// the memory twin, step by step.
async fn ledger_steps<L>(ledger: &L, run: &str) -> Vec<Said>
where
    L: DeliveryLedger + paymos_inbox_core::roads::sweep::StrandedDeliveries,
{
    let body = invoice_paid(&format!("evt_l_{run}"), &format!("inv_l_{run}"));
    let d = recorded_delivery(&body, Environment::Live, NOW_MS);
    let id = d.event_id.as_str();
    let said = |r: Result<Recorded, PortError>| match r.expect("ledger answers") {
        Recorded::New => Said::New,
        Recorded::Existing(e) => Said::Existing(
            e.state,
            e.lease_until_ms,
            String::from_utf8_lossy(&e.delivery.body).into_owned(),
        ),
    };
    let took = |r: Result<TakeOver, PortError>| match r.expect("ledger answers") {
        TakeOver::Won => Said::Won,
        TakeOver::Lost(state) => Said::Lost(state),
    };
    let mut out = vec![
        said(ledger.record(&d, NOW_MS + 100).await),
        said(ledger.record(&d, NOW_MS + 200).await),
        took(ledger.take_over(id, NOW_MS + 999, NOW_MS + 300).await),
        took(ledger.take_over(id, NOW_MS + 100, NOW_MS + 300).await),
        took(ledger.take_over(id, NOW_MS + 100, NOW_MS + 400).await),
    ];
    ledger.release(id, NOW_MS + 999).await.unwrap();
    out.push(took(ledger.take_over(id, NOW_MS + 300, NOW_MS + 301).await));
    ledger.release(id, NOW_MS + 301).await.unwrap();
    out.push(Said::Done);
    out.push(took(ledger.take_over(id, 0, NOW_MS + 500).await));
    out.push(took(
        ledger.take_over(&format!("evt_none_{run}"), 0, 1).await,
    ));
    let stranded = |at: u64| async move {
        let found = ledger.stranded(NOW_MS + 1, at, 100).await.unwrap();
        Said::Stranded(
            found
                .into_iter()
                .map(|r| r.delivery.event_id)
                .filter(|e| e.ends_with(run))
                .collect(),
        )
    };
    out.push(stranded(NOW_MS + 500).await);
    out.push(stranded(NOW_MS + 501).await);
    out
}

#[tokio::test]
async fn the_ledgers_conditions_agree_on_dynamodb_and_in_memory() {
    let aws = Aws::new();
    let table = aws.deliveries_table().await;
    let dynamo = DynamoLedger::new(aws.dynamodb.clone(), &table, None);
    let run = unique("l");
    let on_dynamodb = ledger_steps(&dynamo, &run).await;
    let in_memory = ledger_steps(&MemoryLedger::new(), &run).await;
    assert_eq!(on_dynamodb, in_memory);
    // And they are the rules: written once, the lease moved only by whoever read it.
    assert_eq!(on_dynamodb[0], Said::New);
    assert!(
        matches!(&on_dynamodb[1], Said::Existing(DeliveryState::Received, lease, _) if *lease == NOW_MS + 100)
    );
    assert_eq!(
        on_dynamodb[2..6],
        [
            Said::Lost(Some(DeliveryState::Received)),
            Said::Won,
            Said::Lost(Some(DeliveryState::Received)),
            Said::Won,
        ]
    );
    assert_eq!(on_dynamodb[7..9], [Said::Won, Said::Lost(None)]);
    assert_eq!(
        on_dynamodb[9],
        Said::Stranded(vec![]),
        "its lease runs until 500"
    );
    assert!(matches!(&on_dynamodb[10], Said::Stranded(ids) if ids.len() == 1));
}
