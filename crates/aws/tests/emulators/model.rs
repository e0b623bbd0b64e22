//! The model test of Paymos' whole world on DynamoDB Local: a deterministic sample of the
//! histories that `core/src/tests/world.rs` runs by the thousand on the in-memory store. Each
//! history runs on both stores; both end where the oracle (`paymos_inbox_core::testkit::oracle`, written
//! from Paymos' contract) says, so DynamoDB's conditions and the domain's rules agree with it.

use std::sync::Arc;

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::testkit::memory::{MemoryResources, MemoryReviews};
use paymos_inbox_core::testkit::oracle::Status;
use paymos_inbox_core::testkit::world::{
    Act, Ids, PAID_AGAIN_AT, REGISTERED, RETURNED_AT, TrueInvoice, TrueRefund, Truth, judge, run,
    world, world_contested,
};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use paymos_inbox_testkit::*;

/// Histories sampled (each runs a few dozen DynamoDB calls).
const HISTORIES: usize = 60;
/// Of them, drawn with rule 20's forged events (one invoice's deliveries naming two projects
/// on a stack of several projects without the reverse check), where the conditions of the
/// events' disagreement, its settling and Paymos' project decide.
const CONTESTED: usize = 30;

#[tokio::test]
async fn paymos_world_ends_as_the_oracle_says_on_dynamodb_as_in_memory() {
    let aws = Aws::new();
    let state = aws.state_table().await;
    let ledger = aws.deliveries_table().await;
    let dynamo = DynamoResources::new(aws.dynamodb.clone(), &state, &ledger);
    let mut runner = TestRunner::deterministic();
    let strategy = world();
    let fixed = std::iter::once(refunded_undated_then_dated_after());
    let drawn = (0..HISTORIES - CONTESTED)
        .map(|_| strategy.new_tree(&mut runner).expect("a world").current())
        .collect::<Vec<_>>();
    let contested = world_contested();
    let drawn = drawn
        .into_iter()
        .chain((0..CONTESTED).map(|_| contested.new_tree(&mut runner).expect("a world").current()));
    for (n, (truth, acts)) in fixed.chain(drawn).enumerate() {
        let ids = Ids {
            run: format!("{}{n}", unique("h")).replace(['-', '_'], ""),
        };
        let amount = Amount::parse(REGISTERED).unwrap();
        dynamo
            .register_order((None, &ids.order(0)), &amount, "USD")
            .await
            .unwrap();
        let memory = Arc::new(MemoryResources::new());
        memory.register_order(&ids.order(0), &amount, "USD");
        let (on_dynamo, in_memory) = (MemoryReviews::new(), MemoryReviews::new());
        run(&dynamo, &on_dynamo, &ids, &truth, &acts)
            .await
            .expect("DynamoDB Local answers");
        run(&memory, &in_memory, &ids, &truth, &acts)
            .await
            .expect("memory answers");
        let found = judge(
            &dynamo,
            &Inspected(&dynamo),
            &on_dynamo,
            &ids,
            &truth,
            &acts,
        )
        .await;
        assert!(
            found.is_empty(),
            "DynamoDB: {truth:#?}\n{acts:#?}\n{found:#?}"
        );
        let found = judge(&memory, &memory, &in_memory, &ids, &truth, &acts).await;
        assert!(
            found.is_empty(),
            "memory: {truth:#?}\n{acts:#?}\n{found:#?}"
        );
    }
}

/// A fixed history where the reopening's condition on the fulfilment decides: a person's word
/// with no order, the full refund Paymos completed at 120 delivered (it returns that undated
/// word), the person names the order, then the payment's own delivery, paid at 130 by
/// Paymos' clock: a new payment, judged as the person's word was (held: no price named).
fn refunded_undated_then_dated_after() -> (Truth, Vec<Act>) {
    let open = |order| TrueInvoice {
        project: 0,
        order: Some(order),
        price: 0,
        status: Status::AwaitingPayment,
        paid_late: false,
        silent: false,
        paid_at: None,
    };
    let truth = Truth {
        invoices: vec![
            TrueInvoice {
                status: Status::Paid,
                paid_at: Some(PAID_AGAIN_AT),
                ..open(0)
            },
            open(1),
            open(0),
        ],
        refunds: vec![TrueRefund {
            invoice: 0,
            full: true,
            at: RETURNED_AT,
        }],
        deposits: Vec::new(),
        payouts: 0,
        projects: Some(vec![0]),
        reverse_check: false,
        refund_skew: 0,
    };
    let word = |with_order| Act::MarkPaid {
        invoice: 0,
        with_order,
        api: false,
    };
    let acts = vec![
        word(false),
        Act::Refund {
            refund: 0,
            sandbox: false,
            lagging: false,
        },
        word(true),
        Act::Invoice {
            invoice: 0,
            status: Status::Paid,
            naming: 1,
            priced: true,
            project: true,
            endpoint: 0,
            sandbox: false,
            forged: false,
            elsewhere: false,
            lagging: false,
        },
    ];
    (truth, acts)
}
