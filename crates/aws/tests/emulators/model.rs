//! The model test of Paymos' whole world on DynamoDB Local: a deterministic sample of the
//! histories that `core/src/tests/world.rs` runs by the thousand on the in-memory store. Each
//! history runs on both stores; both end where the oracle (`paymos_inbox_core::testkit::oracle`, written
//! from Paymos' contract) says, so DynamoDB's conditions and the domain's rules agree with it.

use std::sync::Arc;

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::testkit::memory::{MemoryResources, MemoryReviews};
use paymos_inbox_core::testkit::world::{Ids, REGISTERED, judge, run, world};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use paymos_inbox_testkit::*;

/// Histories sampled (each runs a few dozen DynamoDB calls).
const HISTORIES: usize = 60;

#[tokio::test]
async fn paymos_world_ends_as_the_oracle_says_on_dynamodb_as_in_memory() {
    let aws = Aws::new();
    let state = aws.state_table().await;
    let ledger = aws.deliveries_table().await;
    let dynamo = DynamoResources::new(aws.dynamodb.clone(), &state, &ledger);
    let mut runner = TestRunner::deterministic();
    let strategy = world();
    for n in 0..HISTORIES {
        let (truth, acts) = strategy.new_tree(&mut runner).expect("a world").current();
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
