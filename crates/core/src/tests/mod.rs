//! Use-case tests: the domain's use cases on the in-memory ports, table-driven, in
//! milliseconds and with no emulator. What only DynamoDB and SQS can prove (their conditions,
//! the transaction's atomicity, the queue's redelivery) is proven in `crates/aws/tests/emulators` and `crates/lambda/tests/emulators`, which also runs
//! these histories against DynamoDB and asserts the same outcomes.

#![allow(
    clippy::too_many_lines,
    reason = "a use-case test reads top to bottom as one history"
)]

mod allin;
mod conditions;
mod confirm;
mod exceptions;
mod fulfil;
mod heat;
mod ingest;
mod layers;
mod no_list;
mod outbound;
mod paymos_word;
mod projects;
mod reconcile;
mod release;
mod schemas;
mod until_a_person;
mod world;

/// A stack of one project (`prj_a`, its home): a delivery naming no project is its own, keyed
/// as before projects. A stack that lists none keys each project apart and holds a payment
/// naming none for its project ([`crate::money::change::Projects::several`]).
pub(crate) fn one_shop<S: crate::roads::fulfil::ResourceStore>(
    store: S,
) -> crate::roads::fulfil::Fulfil<S> {
    crate::roads::fulfil::Fulfil::new(store).for_projects(one_project())
}

/// [`one_shop`] with the merchant's own effect.
pub(crate) fn one_shop_with_effect<S: crate::roads::fulfil::ResourceStore>(
    store: S,
    effect: Box<dyn crate::money::effect::FulfilmentEffect>,
) -> crate::roads::fulfil::Fulfil<S> {
    crate::roads::fulfil::Fulfil::with_effect(store, effect).for_projects(one_project())
}

/// The one project of [`one_shop`].
pub(crate) fn one_project() -> crate::money::change::Projects {
    crate::money::change::Projects::only(vec!["prj_a".into()])
}
