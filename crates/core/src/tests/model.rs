//! The model test on the in-memory store: random histories of deliveries (both environments,
//! with and without the order, relabelled, repeated, reordered), refunds and operator commands;
//! the invariants of `crate::model` hold after each. `tests/it/model.rs` runs a shorter
//! sample of the same on DynamoDB Local.

use std::sync::Arc;

use proptest::prelude::*;

use crate::memory::MemoryResources;
use crate::model::{Ids, REGISTERED_AMOUNT, history, run, violations};
use crate::status::Amount;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn every_history_keeps_the_rules_of_money(ops in history()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let found = runtime.block_on(async {
            let ids = Ids { run: "m".into() };
            let store = Arc::new(MemoryResources::new());
            store.register_order(&ids.order(0), &Amount::parse(REGISTERED_AMOUNT).unwrap(), "USD");
            run(&store, &ids, &ops).await.expect("memory never fails");
            violations(&store, &ids, &ops).await
        });
        prop_assert!(found.is_empty(), "{found:#?}");
    }
}
