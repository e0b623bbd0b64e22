//! The model test on DynamoDB Local: a deterministic sample of the histories that
//! `src/tests/model.rs` runs by the thousand on the in-memory store. Each history runs on both
//! stores; the invariants hold on DynamoDB, and both end with the same fulfilments and the same
//! invoices waiting for a person (DynamoDB's conditions and the domain's rules agree).

use std::sync::Arc;

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::memory::MemoryResources;
use paymos_inbox_core::model::{Ids, Inspect, REGISTERED_AMOUNT, history, run, violations};
use paymos_inbox_core::status::Amount;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use crate::harness::*;

/// Histories sampled (each runs a few dozen DynamoDB calls).
const HISTORIES: usize = 60;

async fn waiting<S: Inspect>(store: &S) -> Vec<String> {
    let mut out: Vec<String> = store
        .invoices()
        .await
        .into_iter()
        .filter(|(_, seen)| seen.standing().waits_for_person())
        .map(|(id, _)| id)
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn random_histories_keep_the_rules_of_money_on_dynamodb_as_in_memory() {
    let aws = Aws::new();
    let state = aws.state_table().await;
    let ledger = aws.deliveries_table().await;
    let dynamo = DynamoResources::new(aws.dynamodb.clone(), &state, &ledger);
    let mut runner = TestRunner::deterministic();
    let strategy = history();
    for n in 0..HISTORIES {
        let ops = strategy.new_tree(&mut runner).expect("a history").current();
        let ids = Ids {
            run: format!("{}{n}", unique("h")).replace('-', ""),
        };
        let amount = Amount::parse(REGISTERED_AMOUNT).unwrap();
        dynamo
            .register_order(&ids.order(0), &amount, "USD")
            .await
            .unwrap();
        let memory = Arc::new(MemoryResources::new());
        memory.register_order(&ids.order(0), &amount, "USD");
        run(&dynamo, &ids, &ops)
            .await
            .expect("DynamoDB Local answers");
        run(&memory, &ids, &ops).await.expect("memory answers");
        let found = violations(&Inspected(&dynamo), &ids, &ops).await;
        assert!(found.is_empty(), "{ops:#?}\n{found:#?}");
        let mine = |list: Vec<(String, Option<String>)>| {
            let mut l: Vec<_> = list
                .into_iter()
                .filter(|(i, _)| i.contains(&ids.run))
                .collect();
            l.sort();
            l
        };
        assert_eq!(
            mine(Inspect::fulfilments(&Inspected(&dynamo)).await),
            mine(Inspect::fulfilments(&memory).await),
            "fulfilments differ after {ops:#?}"
        );
        let waits = |l: Vec<String>| -> Vec<String> {
            l.into_iter().filter(|i| i.contains(&ids.run)).collect()
        };
        assert_eq!(
            waits(waiting(&Inspected(&dynamo)).await),
            waits(waiting(&memory).await),
            "what waits for a person differs after {ops:#?}"
        );
    }
}
