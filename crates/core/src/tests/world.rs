//! The model test of Paymos' whole world on the in-memory store: every generated history ends
//! where the oracle (`crate::oracle`, written from Paymos' contract) says it must.

use std::sync::Arc;

use proptest::prelude::*;

use crate::memory::{MemoryResources, MemoryReviews};
use crate::status::Amount;
use crate::world::{Ids, REGISTERED, judge, run, world};

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    #[test]
    fn every_history_of_paymos_world_ends_as_the_oracle_says((truth, acts) in world()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let found = runtime.block_on(async {
            let ids = Ids { run: "w".into() };
            let store = Arc::new(MemoryResources::new());
            store.register_order(&ids.order(0), &Amount::parse(REGISTERED).unwrap(), "USD");
            let reviews = MemoryReviews::new();
            run(&store, &reviews, &ids, &truth, &acts).await.expect("memory never fails");
            judge(&store, &store, &reviews, &ids, &truth, &acts).await
        });
        prop_assert!(found.is_empty(), "{truth:#?}\n{acts:#?}\n{found:#?}");
    }
}
