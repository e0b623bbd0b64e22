//! The adapters against AWS's DynamoDB Local and the fauxqs SQS emulator (the test kit starts
//! them on free loopback ports unless AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS point at
//! running ones): the store against its memory twin (contract), Paymos' worlds judged by the
//! oracle (model), one truth per invoice, the reverse check and reconciliation through the fake
//! Paymos API, and what each delivery costs. Nothing here is skipped: if an emulator cannot
//! start, every test that needs it fails and says why.

#![allow(
    clippy::too_many_lines,
    reason = "an emulator test reads top to bottom as one scenario"
)]

mod checks;
mod contract;
mod cost;
mod model;
mod open_list;
mod projects;
mod reconcile;
mod retention;
mod reverse;
mod scale;
mod truth;
mod upgrade;

/// A stack of one project (`prj_1`, the fake Paymos' own, its home): a delivery naming no
/// project is its own, keyed as before projects (a stack listing none holds it for its
/// project: `projects`).
pub(crate) fn one_project() -> paymos_inbox_core::money::change::Projects {
    paymos_inbox_core::money::change::Projects::only(vec!["prj_1".into()])
}
