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

/// Paymos' invoice as its API answers it: paid in full at `paid_at` (Unix s) for `order`,
/// priced 10 USD, of `project` (None: Paymos names none).
pub(crate) fn paid_at_paymos(
    order: &str,
    project: Option<&str>,
    paid_at: u64,
) -> paymos_inbox_core::roads::confirm::ConfirmedInvoice {
    paymos_inbox_core::roads::confirm::ConfirmedInvoice {
        status: "paid".into(),
        is_test: false,
        order_id: Some(order.into()),
        order_amount: paymos_inbox_core::money::status::Amount::parse("10"),
        order_currency: Some("USD".into()),
        token_amount: None,
        token_currency: None,
        paid_late: false,
        project_id: project.map(str::to_owned),
        paid_at: Some(paid_at),
    }
}
