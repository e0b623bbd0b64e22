//! The model test of Paymos' whole world, judged by [`crate::testkit::oracle`]: a generated Paymos (its
//! invoices with their orders, prices, final statuses and late payments; refunds of both modes;
//! payouts; deposits; whether the reverse check is on) and a history of what reaches the
//! receiver (genuine deliveries of every category, with and without `data.order`, token-only,
//! relabelled, repeated, through two endpoints; sandbox copies reusing live ids; forged events of
//! every status signed with a leaked live secret; deliveries the reverse check cannot confirm
//! yet) interleaved with the operator's roads (`mark-paid`, `release`, `recheck`,
//! `reconcile --apply`). [`run`] drives the use cases on a store; [`judge`] compares the end
//! state (orders shipped, payments waiting for a person, balances, refunds) with the oracle's.
//!
//! Paymos has a clock: each payment and each refund happens at a Paymos time, which every
//! delivery body carries (`occurred_at`, and a refund's `data.completed_at`) whatever its
//! arrival position. A refund event's `occurred_at` may stand apart from its completion
//! (`refund_skew`, either way), and a forged event says any time its signer likes (far in the
//! future, long ago: [`FORGED_AT`]). Besides refunds after a payment, an invoice may be partly paid, its partial
//! payment returned by a `full` refund, and then paid in full (open: `paid`; closed `underpaid`:
//! paid late): a new payment, which that refund does not return.
//!
//! Paymos has projects too: each invoice and deposit belongs to one of [`PROJECTS`], and the
//! stack applies one, two or every project. Order ids (`o_0`, `o_1`) and the payer ids are
//! shared by the projects, so one order or payer exists in several; events of a project the
//! stack does not apply still arrive (no project filter; refunds ignore any filter); plain
//! payouts name no project; and an invoice event may leave `project_id` out once an earlier one
//! of the invoice named it (or, under the reverse check, where Paymos' invoice says it). On a
//! stack of two or more listed projects, or of none listed, without the reverse check (rule
//! 19), half the payment
//! events of an invoice no earlier event named a project for leave it out too, and half the
//! final deposit confirmations.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use proptest::prelude::*;

use crate::money::change::{Applied, OrderRef, Projects};
use crate::money::effect::RecordFulfilment;
use crate::money::invoice::{InvoiceSeen, Refund, RefundMode};
use crate::money::status::Amount;
use crate::roads::confirm::{ConfirmedDeposit, ConfirmedInvoice, ConfirmedWithdrawal};
use crate::roads::exceptions::{self, ExceptionStore};
use crate::roads::fulfil::{Fulfil, FulfilError};
use crate::roads::ingest::{Delivery, PortError};
use crate::roads::reconcile::{ReconcileStore, reconcile};
use crate::roads::release::ReleaseBy;
use crate::testkit::memory::{MemoryPaymos, MemoryReviews};
use crate::testkit::oracle::{self as o, Env, Mode, Status};
use crate::wire::envelope::Category;
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

/// Invoices per world (invoice `i` is for order `i % 2` of its project, or for no usable order).
pub const INVOICES: u8 = 3;
/// Projects of the merchant (`prj_…_0` .. `prj_…_2`).
pub const PROJECTS: u8 = 3;
/// Payer ids the deposits use (each may pay in several projects).
pub const PAYERS: u8 = 2;
/// The registered order: `o_0` of the stack's home project (the first it lists) at this price
/// in USD.
pub const REGISTERED: &str = "10.5";
const PRICES: [&str; 2] = ["10.50", "12"];

/// Paymos' clock (Unix seconds). Open events happen from `OPENED_AT` (`awaiting_payment`,
/// `confirming`, then `underpaid_waiting`: a partial payment).
pub const OPENED_AT: u64 = 100;
/// When an invoice is paid (`paid`/`paid_over`).
pub const PAID_AT: u64 = 105;
/// When an invoice closes (`expired`, `underpaid`, `cancelled`).
pub const CLOSED_AT: u64 = 110;
/// When a closed invoice is paid late.
pub const PAID_LATE_AT: u64 = 115;
/// When a partial payment is returned by a `full` refund.
pub const RETURNED_AT: u64 = 120;
/// When an invoice whose partial payment was returned is paid in full (in time or late).
pub const PAID_AGAIN_AT: u64 = 130;
/// When the other refunds complete (plus their index): after every payment.
pub const REFUNDED_AT: u64 = 140;
/// When a plain payout completes.
pub const PAID_OUT_AT: u64 = 200;

/// Paymos' truth about one invoice.
#[derive(Debug, Clone)]
pub struct TrueInvoice {
    /// Its project (`data.project_id`).
    pub project: u8,
    /// Its order (`i % 2`) within its project, or none usable (an empty `external_order_id`).
    pub order: Option<u8>,
    /// Index into the prices (USD).
    pub price: usize,
    /// Its status at Paymos.
    pub status: Status,
    /// Paid in full after it closed.
    pub paid_late: bool,
    /// Its paid event carries only the payment (no `data.order`), as the official TON vector.
    pub silent: bool,
    /// When it was paid (its paying status, or its late payment) by Paymos' clock; None: never.
    pub paid_at: Option<u64>,
}

/// A completed refund at Paymos.
#[derive(Debug, Clone)]
pub struct TrueRefund {
    /// The invoice it refunds.
    pub invoice: u8,
    /// `full` (else `overpayment`).
    pub full: bool,
    /// When it completed by Paymos' clock (`data.completed_at`).
    pub at: u64,
}

/// A deposit at Paymos.
#[derive(Debug, Clone)]
pub struct TrueDeposit {
    /// Its project.
    pub project: u8,
    /// Its payer (`data.payment_channel_external_id`), unique only within the project.
    pub payer: u8,
    /// Confirmed and final (else still confirming).
    pub confirmed: bool,
}

/// A generated Paymos: the truth the oracle and the reverse check's twin share.
#[derive(Debug, Clone)]
pub struct Truth {
    /// The invoices.
    pub invoices: Vec<TrueInvoice>,
    /// Completed refunds.
    pub refunds: Vec<TrueRefund>,
    /// Deposits, confirmed or not.
    pub deposits: Vec<TrueDeposit>,
    /// Completed plain payouts (no project).
    pub payouts: u8,
    /// The projects the stack applies, the first its home (None: every project).
    pub projects: Option<Vec<u8>>,
    /// Whether the reverse check is on.
    pub reverse_check: bool,
    /// How far a refund event's `occurred_at` is from its completion (`data.completed_at`) by
    /// Paymos' clock, in seconds, either way: the event's clock apart from Paymos' record.
    pub refund_skew: i64,
}

/// When a forged event says it happened: far in the future through endpoint 0, long ago
/// through endpoint 1 (a leaked secret signs any `occurred_at`).
pub const FORGED_AT: [u64; 2] = [1_000_000, 1];

/// One thing that reaches the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// An invoice event.
    Invoice {
        /// Invoice index.
        invoice: u8,
        /// The status it announces.
        status: Status,
        /// 0: no `data.order`; 1: the true order; 2: the other order (forged only).
        naming: u8,
        /// Whether it carries the price (forged: the other price).
        priced: bool,
        /// Whether it carries `data.project_id` (always its invoice's).
        project: bool,
        /// The endpoint (another event id for the same fact).
        endpoint: u8,
        /// Signed by the sandbox secret, reusing the live event id.
        sandbox: bool,
        /// Forged with a leaked live secret (reverse check on only).
        forged: bool,
        /// Forged, it names the next project instead of its invoice's (where it names one).
        elsewhere: bool,
        /// Paymos' API does not show it yet (reverse check on only).
        lagging: bool,
    },
    /// `withdrawal.completed` of a refund.
    Refund {
        /// Refund index.
        refund: u8,
        /// Sandbox copy.
        sandbox: bool,
        /// Not shown by the API yet.
        lagging: bool,
    },
    /// `payment_channel.deposit.*` of a deposit.
    Deposit {
        /// Deposit index.
        deposit: u8,
        /// `confirmed` with `is_final` (else the advisory `confirming`).
        confirmed: bool,
        /// Whether it carries `data.project_id` (always its deposit's; an advisory event
        /// always does).
        project: bool,
        /// Sandbox copy.
        sandbox: bool,
        /// Not shown by the API yet.
        lagging: bool,
    },
    /// `withdrawal.completed` of a plain payout (no `project_id`).
    Payout {
        /// Payout index.
        payout: u8,
        /// Sandbox copy.
        sandbox: bool,
        /// Not shown by the API yet.
        lagging: bool,
    },
    /// `mark-paid INV [--order-id …]`, naming the invoice's project.
    MarkPaid {
        /// Invoice index.
        invoice: u8,
        /// Whether the person names the true order.
        with_order: bool,
        /// With the Paymos API: Paymos is asked first.
        api: bool,
    },
    /// `release INV [--override-amount] [--project P]`.
    Release {
        /// Invoice index.
        invoice: u8,
        /// With the override.
        override_amount: bool,
        /// Naming the invoice's project (`--project`).
        project: bool,
        /// With the Paymos API: Paymos is asked first.
        api: bool,
    },
    /// `recheck ID` of an invoice (`0..`), refund (`10..`), deposit (`20..`) or payout (`30..`).
    Recheck(u8),
    /// `reconcile --apply`.
    Reconcile,
}

/// The projects a stack applies: one, two (either home), three, or every project.
fn stacks() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::sample::select(vec![
        Some(vec![0u8]),
        Some(vec![1]),
        Some(vec![0, 1]),
        Some(vec![1, 0]),
        Some(vec![0, 1, 2]),
        None,
    ])
}

fn truth() -> impl Strategy<Value = Truth> {
    let status = prop::sample::select(vec![
        Status::AwaitingPayment,
        Status::Paid,
        Status::Paid,
        Status::PaidOver,
        Status::Expired,
        Status::Underpaid,
        Status::Cancelled,
    ]);
    // Projects 0 and 1 often, so that one order id (invoices 0 and 2 are both `o_0`) and one
    // payer id exist in two projects; project 2 mostly one the stack does not apply.
    let project = || prop::sample::select(vec![0u8, 0, 1, 1, 2]);
    let invoice = (
        status,
        0..PRICES.len(),
        any::<bool>(),
        prop::bool::weighted(0.15),
        any::<bool>(),
        prop::bool::weighted(0.35),
        project(),
    );
    let deposit =
        (project(), 0..PAYERS, any::<bool>()).prop_map(|(project, payer, confirmed)| TrueDeposit {
            project,
            payer,
            confirmed,
        });
    let stack = stacks();
    (
        prop::collection::vec(invoice, INVOICES as usize),
        prop::collection::vec((0..INVOICES, any::<bool>()), 0..3),
        prop::collection::vec(deposit, 0..4),
        (0u8..3, stack),
        (any::<bool>(), prop::sample::select(vec![0i64, 0, 12, -12])),
    )
        .prop_map(
            |(invoices, refunds, deposits, (payouts, projects), (reverse_check, refund_skew))| {
                // `again`: partly paid, the partial payment returned in full, then paid in full.
                let repaid = |status: Status, twice: bool| {
                    twice && (status.pays() || status == Status::Underpaid)
                };
                let invoices: Vec<TrueInvoice> = invoices
                    .into_iter()
                    .enumerate()
                    .map(
                        |(i, (status, price, late, no_order, silent, twice, project))| {
                            let again = repaid(status, twice);
                            let closed = matches!(status, Status::Expired | Status::Underpaid);
                            let paid_late =
                                (late && closed) || (again && status == Status::Underpaid);
                            let paid_at = if again {
                                Some(PAID_AGAIN_AT)
                            } else if paid_late {
                                Some(PAID_LATE_AT)
                            } else {
                                status.pays().then_some(PAID_AT)
                            };
                            TrueInvoice {
                                project,
                                order: (!no_order).then_some(u8::try_from(i % 2).unwrap_or(0)),
                                price,
                                paid_late,
                                status,
                                silent,
                                paid_at,
                            }
                        },
                    )
                    .collect();
                // Only a payment is refunded, after it was made; a returned partial payment before.
                let returned = (0u8..)
                    .zip(&invoices)
                    .filter(|(_, inv)| inv.paid_at == Some(PAID_AGAIN_AT));
                let returned: Vec<TrueRefund> = returned
                    .map(|(invoice, _)| TrueRefund {
                        invoice,
                        full: true,
                        at: RETURNED_AT,
                    })
                    .collect();
                let refunds = refunds
                    .into_iter()
                    .filter(|(i, _)| invoices[usize::from(*i)].paid_at.is_some())
                    .zip(REFUNDED_AT..)
                    .map(|((invoice, full), at)| TrueRefund { invoice, full, at })
                    .chain(returned)
                    .collect();
                Truth {
                    invoices,
                    refunds,
                    deposits,
                    payouts,
                    projects,
                    reverse_check,
                    refund_skew,
                }
            },
        )
}

fn act(truth: &Truth, contested: bool) -> BoxedStrategy<Act> {
    let rc = truth.reverse_check;
    let statuses = prop::sample::select(vec![
        Status::AwaitingPayment,
        Status::Confirming,
        Status::UnderpaidWaiting,
        Status::Paid,
        Status::PaidOver,
        Status::Underpaid,
        Status::Expired,
        Status::Cancelled,
    ]);
    let flag = |p: f64, on: bool| prop::bool::weighted(if on { p } else { 0.0 });
    let invoice = (
        (0..INVOICES, statuses, 0u8..3, any::<bool>(), 0u8..2),
        (
            flag(0.15, true),
            flag(0.25, rc || (contested && several(truth))),
            flag(0.15, rc),
            flag(0.7, true),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (invoice, status, naming, priced, endpoint),
                (sandbox, forged, lagging, project, elsewhere),
            )| {
                Act::Invoice {
                    invoice,
                    status,
                    naming,
                    priced,
                    project,
                    endpoint,
                    sandbox,
                    forged,
                    elsewhere: elsewhere && forged,
                    lagging: lagging && !forged,
                }
            },
        );
    let refunds = u8::try_from(truth.refunds.len()).unwrap_or(0).max(1);
    let deposits = u8::try_from(truth.deposits.len()).unwrap_or(0).max(1);
    let payouts = truth.payouts.max(1);
    prop_oneof![
        8 => invoice,
        2 => (0..refunds, flag(0.15, true), flag(0.2, rc))
            .prop_map(|(refund, sandbox, lagging)| Act::Refund { refund, sandbox, lagging }),
        2 => (0..deposits, any::<bool>(), flag(0.15, true), flag(0.2, rc), flag(0.5, several(truth)))
            .prop_map(|(deposit, confirmed, sandbox, lagging, unnamed)| Act::Deposit {
                deposit,
                confirmed,
                project: !(unnamed && confirmed),
                sandbox,
                lagging,
            }),
        1 => (0..payouts, flag(0.15, true), flag(0.2, rc))
            .prop_map(|(payout, sandbox, lagging)| Act::Payout { payout, sandbox, lagging }),
        1 => (0..INVOICES, any::<bool>(), any::<bool>())
            .prop_map(|(invoice, with_order, api)| Act::MarkPaid { invoice, with_order, api }),
        2 => (0..INVOICES, any::<bool>(), any::<bool>(), any::<bool>())
            .prop_map(|(invoice, override_amount, api, project)| {
                Act::Release { invoice, override_amount, project, api }
            }),
        1 => prop::sample::select(vec![0u8, 1, 2, 10, 11, 12, 20, 21, 22, 30]).prop_map(Act::Recheck),
        1 => Just(Act::Reconcile),
    ]
    .boxed()
}

/// A world: Paymos' truth and a history, with events that do not exist at Paymos dropped
/// (a refund, a deposit or a payout index beyond what Paymos holds).
pub fn world() -> impl Strategy<Value = (Truth, Vec<Act>)> {
    world_of(false)
}

/// [`world`], where on rule 19's stacks (several projects, no reverse check) a leaked secret
/// forges events too, each naming another project than its invoice's (rule 20's shape: one
/// invoice's deliveries naming two projects, which nothing but Paymos or a person can settle).
pub fn world_contested() -> impl Strategy<Value = (Truth, Vec<Act>)> {
    world_of(true)
}

fn world_of(contested: bool) -> impl Strategy<Value = (Truth, Vec<Act>)> {
    truth().prop_flat_map(move |t| {
        // Each act with a coin: whether an invoice payment event whose project is known nowhere
        // keeps the `project_id` it would leave out (rule 19's stacks only).
        let acts = prop::collection::vec((act(&t, contested), any::<bool>()), 1..16);
        (Just(t), acts).prop_map(|(t, acts)| {
            let acts: Vec<(Act, bool)> = acts
                .into_iter()
                .map(|(a, keep)| (genuine(&t, a), keep))
                .filter(|(a, _)| match a {
                    Act::Refund { refund, .. } => usize::from(*refund) < t.refunds.len(),
                    Act::Deposit { deposit, .. } => usize::from(*deposit) < t.deposits.len(),
                    Act::Payout { payout, .. } => *payout < t.payouts,
                    _ => true,
                })
                .collect();
            let acts = knowable_projects(&t, acts);
            (t, acts)
        })
    })
}

/// Rule 19's stacks: two or more listed projects, or none (every project: rule 18), and no
/// reverse check.
fn several(t: &Truth) -> bool {
    !t.reverse_check && t.projects.as_ref().is_none_or(|ps| ps.len() > 1)
}

/// An invoice event leaves `project_id` out only where its invoice's project can be known: an
/// earlier live event of the invoice named it, or, for a final status under the reverse check,
/// Paymos' invoice says it. Elsewhere the event names it, but for a payment event on a stack
/// of [`several`] projects, which leaves it out where its coin says so (half of them: rule
/// 19's shape, a payment whose project is known nowhere).
fn knowable_projects(t: &Truth, acts: Vec<(Act, bool)>) -> Vec<Act> {
    let mut named = BTreeSet::new();
    let mut out = Vec::with_capacity(acts.len());
    for (mut act, keep) in acts {
        if let Act::Invoice {
            invoice,
            status,
            project,
            sandbox: false,
            forged,
            ..
        } = &mut act
            && (!*forged || t.reverse_check)
        {
            let known = named.contains(invoice) || (t.reverse_check && status.is_final());
            if !known {
                // rule 19's stacks: a payment known nowhere names its project by its coin
                *project = !(several(t) && status.pays()) || keep;
            }
            if *project {
                named.insert(*invoice);
            }
        }
        out.push(act);
    }
    out
}

/// A genuine event says what Paymos' invoice said at some moment: an open status, its final
/// status (or `paid` for a late payment), its own order and price. Forged ones say anything
/// under the reverse check; without it (on rule 19's stacks only) a forgery is rule 20's: it
/// names another project than its invoice's, and its order and price, at any time (a
/// signature is all there is to trust: what else it could forge, it ships as a genuine event).
fn genuine(t: &Truth, act: Act) -> Act {
    match act {
        Act::Invoice {
            invoice,
            status,
            endpoint,
            sandbox,
            forged: true,
            ..
        } if !t.reverse_check => Act::Invoice {
            invoice,
            status,
            naming: 1,
            priced: true,
            project: true,
            endpoint,
            sandbox,
            forged: true,
            elsewhere: true,
            lagging: false,
        },
        Act::Invoice {
            invoice,
            status,
            project,
            endpoint,
            sandbox,
            forged: false,
            lagging,
            ..
        } => {
            let truth = &t.invoices[usize::from(invoice)];
            let said = if !status.is_final() {
                status
            } else if truth.paid_late && status.pays() {
                Status::Paid
            } else if truth.status.is_final() {
                truth.status
            } else {
                Status::Confirming
            };
            // One fact, one body: a genuine event names its order and price, but a silent
            // invoice's paid event, which carries only the payment.
            let silent = truth.silent && said.pays();
            Act::Invoice {
                invoice,
                status: said,
                naming: u8::from(!silent),
                priced: !silent,
                project,
                endpoint,
                sandbox,
                forged: false,
                elsewhere: false,
                lagging,
            }
        }
        Act::Deposit {
            deposit,
            confirmed: true,
            sandbox,
            lagging,
            ..
        } if !t.reverse_check
            && !t
                .deposits
                .get(usize::from(deposit))
                .is_some_and(|d| d.confirmed) =>
        {
            // an advisory event names its project
            Act::Deposit {
                deposit,
                confirmed: false,
                project: true,
                sandbox,
                lagging,
            }
        }
        other => other,
    }
}

pub use crate::testkit::model::Ids;

/// The true order of invoice `i` (empty: Paymos' record gives none).
fn true_order(ids: &Ids, t: &Truth, i: u8) -> String {
    t.invoices[usize::from(i)]
        .order
        .map_or_else(String::new, |o| ids.order(o))
}

/// The project of invoice `i`.
fn project_of(ids: &Ids, t: &Truth, i: u8) -> String {
    ids.project(t.invoices[usize::from(i)].project)
}

/// The project an event of invoice `i` names: its invoice's, or (`elsewhere`) the next one.
fn said_project(ids: &Ids, t: &Truth, i: u8, elsewhere: bool) -> String {
    let own = t.invoices[usize::from(i)].project;
    ids.project(if elsewhere { (own + 1) % PROJECTS } else { own })
}

/// The projects the stack applies, as the product is configured.
#[must_use]
pub fn stack(ids: &Ids, t: &Truth) -> Projects {
    t.projects.as_ref().map_or_else(Projects::all, |ps| {
        Projects::only(ps.iter().map(|p| ids.project(*p)).collect())
    })
}

fn name(status: Status) -> &'static str {
    match status {
        Status::AwaitingPayment => "awaiting_payment",
        Status::Confirming => "confirming",
        Status::UnderpaidWaiting => "underpaid_waiting",
        Status::Paid => "paid",
        Status::PaidOver => "paid_over",
        Status::Underpaid => "underpaid",
        Status::Expired => "expired",
        Status::Cancelled => "cancelled",
    }
}

fn at_paymos_invoice(ids: &Ids, t: &Truth, i: u8, lagging: bool) -> ConfirmedInvoice {
    let truth = &t.invoices[usize::from(i)];
    ConfirmedInvoice {
        status: if lagging {
            "awaiting_payment"
        } else {
            name(truth.status)
        }
        .into(),
        is_test: false,
        order_id: Some(true_order(ids, t, i)),
        order_amount: Amount::parse(PRICES[truth.price]),
        order_currency: Some("USD".into()),
        token_amount: None,
        token_currency: None,
        paid_late: truth.paid_late && !lagging,
        project_id: Some(project_of(ids, t, i)),
        // Paymos' own clock: when it was paid, once Paymos shows it.
        paid_at: truth.paid_at.filter(|_| !lagging),
    }
}

fn at_paymos_refund(ids: &Ids, t: &Truth, r: u8, lagging: bool) -> ConfirmedWithdrawal {
    let TrueRefund { invoice, full, at } = t.refunds[usize::from(r)];
    ConfirmedWithdrawal {
        status: if lagging { "processing" } else { "completed" }.into(),
        is_test: false,
        invoice_id: Some(ids.invoice(invoice)),
        full: Some(full),
        amount: Amount::parse("1"),
        currency: Some("USDT".into()),
        project_id: Some(project_of(ids, t, invoice)),
        completed_at: (!lagging).then_some(at),
    }
}

fn at_paymos_payout(lagging: bool) -> ConfirmedWithdrawal {
    ConfirmedWithdrawal {
        status: if lagging { "processing" } else { "completed" }.into(),
        is_test: false,
        invoice_id: None,
        full: None,
        amount: Amount::parse("2"),
        currency: Some("USDT".into()),
        project_id: None,
        completed_at: None,
    }
}

fn at_paymos_deposit(ids: &Ids, t: &Truth, d: u8, lagging: bool) -> ConfirmedDeposit {
    let deposit = &t.deposits[usize::from(d)];
    let confirmed = deposit.confirmed && !lagging;
    ConfirmedDeposit {
        status: if confirmed { "confirmed" } else { "confirming" }.into(),
        is_final: confirmed,
        is_test: false,
        payer: ids.payer_of(deposit.payer),
        net: Amount::parse("5"),
        currency: "TRX".into(),
        project_id: Some(ids.project(deposit.project)),
    }
}

/// Paymos' API as the truth has it (or, for `lagging`, not showing `lag` yet).
fn paymos(ids: &Ids, t: &Truth, lag: Option<&Act>) -> MemoryPaymos {
    let api = MemoryPaymos::new();
    for i in 0..INVOICES {
        let lagging = matches!(lag, Some(Act::Invoice { invoice, .. }) if *invoice == i);
        api.invoice(&ids.invoice(i), at_paymos_invoice(ids, t, i, lagging));
    }
    for (r, refund) in (0u8..).zip(&t.refunds) {
        let lagging = matches!(lag, Some(Act::Refund { refund, .. }) if *refund == r);
        api.withdrawal(&ids.refund(r), at_paymos_refund(ids, t, r, lagging));
        let mode = if refund.full {
            RefundMode::Full
        } else {
            RefundMode::Overpayment
        };
        api.refund(
            &ids.invoice(refund.invoice),
            Refund {
                withdrawal_id: ids.refund(r),
                amount: Amount::parse("1"),
                currency: Some("USDT".into()),
                mode: Some(mode),
                completed_at: Some(refund.at),
            },
        );
    }
    for d in (0u8..).take(t.deposits.len()) {
        let lagging = matches!(lag, Some(Act::Deposit { deposit, .. }) if *deposit == d);
        api.deposit(&ids.deposit(d), at_paymos_deposit(ids, t, d, lagging));
    }
    for p in 0..t.payouts {
        let lagging = matches!(lag, Some(Act::Payout { payout, .. }) if *payout == p);
        api.withdrawal(&ids.payout(p), at_paymos_payout(lagging));
    }
    api
}

/// When the fact an invoice event announces happened by Paymos' clock: a paying status at the
/// invoice's payment (a forged one where it never paid: at `PAID_AT`), a closing status at its
/// close, an open one before both.
fn said_at(t: &Truth, invoice: u8, status: Status) -> u64 {
    match status {
        Status::AwaitingPayment => OPENED_AT,
        Status::Confirming => OPENED_AT + 1,
        Status::UnderpaidWaiting => OPENED_AT + 2,
        Status::Paid | Status::PaidOver => {
            t.invoices[usize::from(invoice)].paid_at.unwrap_or(PAID_AT)
        }
        Status::Underpaid | Status::Expired | Status::Cancelled => CLOSED_AT,
    }
}

/// The `occurred_at` an invoice event carries: a genuine one [`said_at`], one forged through
/// `endpoint` (`Some`) any time its signer likes ([`FORGED_AT`]).
fn event_at(t: &Truth, invoice: u8, status: Status, forged: Option<u8>) -> u64 {
    forged.map_or_else(
        || said_at(t, invoice, status),
        |endpoint| FORGED_AT[usize::from(endpoint % 2)],
    )
}

/// The `data.order` an invoice event carries: no order (`naming` 0), its true one (1) or the
/// other (2), with its price where `priced` (forged under the reverse check, the other price).
fn said_order(
    ids: &Ids,
    t: &Truth,
    invoice: u8,
    naming: u8,
    priced: bool,
    forged: bool,
) -> serde_json::Map<String, serde_json::Value> {
    let mut order = serde_json::Map::new();
    match naming {
        0 => {}
        1 => drop(order.insert("external_id".into(), true_order(ids, t, invoice).into())),
        _ => drop(order.insert("external_id".into(), ids.order((invoice + 1) % 2).into())),
    }
    if priced {
        let price = t.invoices[usize::from(invoice)].price ^ usize::from(forged && t.reverse_check);
        order.insert("amount".into(), PRICES[price].into());
        order.insert("currency".into(), "USD".into());
    }
    order
}

/// The delivery of an event act: its work item (sandbox copies reuse the live event id), its
/// body carrying the Paymos time of the fact it announces.
fn item(ids: &Ids, t: &Truth, act: &Act) -> Option<WorkItem> {
    let (event_id, event_type, data, sandbox, at) = match *act {
        Act::Invoice {
            invoice,
            status,
            naming,
            priced,
            project,
            endpoint,
            sandbox,
            forged,
            elsewhere,
            ..
        } => {
            let order = said_order(ids, t, invoice, naming, priced, forged);
            let mut data = serde_json::json!({"invoice_id": ids.invoice(invoice)});
            if project {
                data["project_id"] = said_project(ids, t, invoice, elsewhere).into();
            }
            if !order.is_empty() {
                data["order"] = order.into();
            }
            let id = format!(
                "evt_{}_{}_i{invoice}_{}_{naming}{}{}_{endpoint}",
                ["t", "f", "e"][usize::from(forged) + usize::from(elsewhere)],
                ids.run,
                name(status),
                u8::from(priced),
                u8::from(project)
            );
            let at = event_at(t, invoice, status, forged.then_some(endpoint));
            (id, format!("invoice.{}", name(status)), data, sandbox, at)
        }
        Act::Refund {
            refund, sandbox, ..
        } => {
            let TrueRefund { invoice, full, at } = t.refunds[usize::from(refund)];
            let data = serde_json::json!({
                "withdrawal_id": ids.refund(refund), "invoice_id": ids.invoice(invoice),
                "project_id": project_of(ids, t, invoice),
                "type": "refund", "mode": if full { "full" } else { "overpayment" },
                "amount": "1", "currency": "USDT", "completed_at": at});
            let id = format!("evt_{}_r{refund}", ids.run);
            let said = at.saturating_add_signed(t.refund_skew);
            (id, "withdrawal.completed".to_owned(), data, sandbox, said)
        }
        Act::Payout {
            payout, sandbox, ..
        } => {
            let at = PAID_OUT_AT;
            let data = serde_json::json!({
                "withdrawal_id": ids.payout(payout), "type": "payout",
                "amount": "2", "currency": "USDT", "completed_at": at});
            let id = format!("evt_{}_p{payout}", ids.run);
            (id, "withdrawal.completed".to_owned(), data, sandbox, at)
        }
        Act::Deposit {
            deposit,
            confirmed,
            project,
            sandbox,
            ..
        } => {
            let truth = &t.deposits[usize::from(deposit)];
            let mut data = serde_json::json!({
                "id": ids.deposit(deposit),
                "is_final": confirmed, "payment_channel_external_id": ids.payer_of(truth.payer),
                "gross": "5", "fee": "0", "net": "5", "currency": "TRX"});
            if project {
                data["project_id"] = ids.project(truth.project).into();
            }
            let status = if confirmed { "confirmed" } else { "confirming" };
            // one naming no project is another event (another endpoint's, say)
            let unnamed = if project { "" } else { "_np" };
            let id = format!("evt_{}_d{deposit}_{status}{unnamed}", ids.run);
            let event_type = format!("payment_channel.deposit.{status}");
            (id, event_type, data, sandbox, 20)
        }
        _ => return None,
    };
    let body = serde_json::json!({"event_id": event_id, "event_type": event_type, "version": 1,
                                  "occurred_at": at, "data": data});
    Some(WorkItem {
        event_id,
        environment: Some(if sandbox {
            Environment::Test
        } else {
            Environment::Live
        }),
        body: body.to_string().into_bytes(),
        received_at_ms: None,
    })
}

/// What the deliveries ledger records of a delivery that waits for a person.
fn delivery(work: &WorkItem, now_ms: u64) -> Delivery {
    let envelope =
        crate::wire::envelope::Envelope::parse(&work.body).expect("the model's bodies parse");
    Delivery {
        event_id: work.event_id.clone(),
        event_type: envelope.event_type.clone(),
        category: Category::of(&envelope.event_type),
        resource_id: envelope.resource_id.clone(),
        environment: work.environment,
        secret_label: "live".into(),
        version: 1,
        occurred_at: envelope.occurred_at,
        signed_at: 0,
        received_at_ms: now_ms,
        body: work.body.clone(),
        body_sha256: String::new(),
    }
}

/// A store the world runs on.
pub trait WorldStore: ExceptionStore + ReconcileStore + Clone + 'static {}
impl<T: ExceptionStore + ReconcileStore + Clone + 'static> WorldStore for T {}

/// Runs `acts` of world `t` through the use cases on `store`; the deliveries that wait for a
/// person are kept in `reviews` (the deliveries ledger's part `exceptions` reads).
///
/// # Errors
/// A store failure.
pub async fn run<S: WorldStore>(
    store: &S,
    reviews: &MemoryReviews,
    ids: &Ids,
    t: &Truth,
    acts: &[Act],
) -> Result<(), PortError> {
    let api = std::sync::Arc::new(paymos(ids, t, None));
    let projects = stack(ids, t);
    let by_hand = Fulfil::new(store.clone()).for_projects(projects.clone());
    let mut delivered = BTreeSet::new();
    for (step, act) in acts.iter().enumerate() {
        let now = 1_000_000 + step as u64 * 1_000;
        if let Some(work) = item(ids, t, act) {
            // Ingest's part: a second delivery of one event (per environment) is a duplicate,
            // answered 200 and never sent to the queue again.
            if !delivered.insert((
                work.environment.map(Environment::as_str),
                work.event_id.clone(),
            )) {
                continue;
            }
            let lagging = matches!(
                act,
                Act::Invoice { lagging: true, .. }
                    | Act::Refund { lagging: true, .. }
                    | Act::Deposit { lagging: true, .. }
                    | Act::Payout { lagging: true, .. }
            );
            let api = std::sync::Arc::new(paymos(ids, t, lagging.then_some(act)));
            let applied = if t.reverse_check {
                let fulfil = Fulfil::new(store.clone())
                    .for_projects(projects.clone())
                    .with_confirmation(api);
                fulfil.apply(&work, now).await
            } else {
                by_hand.apply(&work, now).await
            };
            let applied = applied.map_err(|e| match e {
                FulfilError::Unavailable(p) => p,
                other => PortError::new("world", other),
            })?;
            if matches!(
                applied.1,
                Applied::Unconfirmed
                    | Applied::Unusable
                    | Applied::OrderUnknown
                    | Applied::ProjectUnknown
            ) {
                let why = applied.1.as_str();
                reviews.processed(delivery(&work, now), applied.1, why, now);
            }
            continue;
        }
        operate(store, reviews, &by_hand, &api, ids, t, act, now).await?;
    }
    Ok(())
}

#[allow(
    clippy::too_many_arguments,
    reason = "the world's parts, passed through"
)]
async fn operate<S: WorldStore>(
    store: &S,
    reviews: &MemoryReviews,
    by_hand: &Fulfil<S>,
    api: &std::sync::Arc<MemoryPaymos>,
    ids: &Ids,
    t: &Truth,
    act: &Act,
    now: u64,
) -> Result<(), PortError> {
    match *act {
        Act::MarkPaid {
            invoice,
            with_order,
            api: asking,
        } => {
            let named = true_order(ids, t, invoice);
            let order = OrderRef {
                external_id: (with_order && !named.is_empty()).then_some(named),
                project: Some(project_of(ids, t, invoice)),
                ..OrderRef::none()
            };
            let id = ids.invoice(invoice);
            if !asking {
                // Refused naming another project than the record's (exit 2), and on a stack with
                // the reverse check (rule 21), as the command line refuses them.
                let other = by_hand
                    .refuses_person(&id, order.project.as_deref())
                    .await?;
                let refused =
                    crate::roads::exceptions::refuses_word(store, reviews, &id, t.reverse_check)
                        .await?;
                if other.is_none() && refused.is_none() {
                    by_hand.mark_paid(&id, order, "support", now).await?;
                }
            } else if let Err(crate::roads::reconcile::AskedFirst::Port(e)) =
                crate::roads::reconcile::as_paymos_has_it(
                    &**api,
                    by_hand,
                    (&id, &order),
                    ("support", now),
                )
                .await
            {
                // Paymos' refusal is an answer; only a port's failure stops the history.
                return Err(e);
            }
        }
        Act::Release {
            invoice,
            override_amount,
            project,
            api: asking,
        } => {
            let named = project.then(|| project_of(ids, t, invoice));
            let by = ReleaseBy {
                actor: "ops",
                reason: Some("model"),
                override_amount,
                project: named.as_deref(),
                order: None,
            };
            let id = ids.invoice(invoice);
            let released = if asking {
                by_hand.release_asking(reviews, &**api, &id, &by, now).await
            } else {
                by_hand.release(reviews, &id, &by, now).await
            };
            // A refusal is an answer; only a store failure stops the history.
            if let Err(crate::roads::release::ReleaseError::Port(e)) = released {
                return Err(e);
            }
        }
        Act::Recheck(id) => {
            let applying = exceptions::Applying {
                environment: Environment::Live,
                projects: by_hand.projects().clone(),
            };
            exceptions::recheck(
                store,
                reviews,
                api,
                &RecordFulfilment,
                applying,
                Some(&recheck_id(ids, id)),
                now,
            )
            .await?;
        }
        Act::Reconcile => {
            reconcile(api.as_ref(), by_hand, (0, 4_000_000_000), true, now).await?;
        }
        _ => {}
    }
    Ok(())
}

/// The resource `recheck` act `id` names.
fn recheck_id(ids: &Ids, id: u8) -> String {
    match id {
        0..10 => ids.invoice(id),
        10..20 => ids.refund(id - 10),
        20..30 => ids.deposit(id - 20),
        _ => ids.payout(id - 30),
    }
}

/// The oracle's world and steps for world `t` and its `acts`.
#[must_use]
pub fn oracle_case(ids: &Ids, t: &Truth, acts: &[Act]) -> (o::World, Vec<o::Arrival>) {
    let invoices = (0..INVOICES)
        .map(|i| {
            let truth = &t.invoices[usize::from(i)];
            let invoice = o::Invoice {
                project: project_of(ids, t, i),
                order: true_order(ids, t, i),
                price: o::Price {
                    amount: PRICES[truth.price].into(),
                    currency: "USD".into(),
                },
                status: truth.status,
                paid_late: truth.paid_late,
            };
            (ids.invoice(i), invoice)
        })
        .collect();
    let refunds = (0u8..)
        .zip(&t.refunds)
        .map(|(r, refund)| {
            let mode = if refund.full {
                Mode::Full
            } else {
                Mode::Overpayment
            };
            let refund = o::Refund {
                invoice: ids.invoice(refund.invoice),
                mode,
                completed: true,
            };
            (ids.refund(r), refund)
        })
        .collect();
    let deposits = (0u8..)
        .zip(&t.deposits)
        .map(|(d, deposit)| {
            let deposit = o::Deposit {
                project: ids.project(deposit.project),
                payer: ids.payer_of(deposit.payer),
                net: "5".into(),
                currency: "TRX".into(),
                confirmed: deposit.confirmed,
            };
            (ids.deposit(d), deposit)
        })
        .collect();
    let payouts = (0..t.payouts)
        .map(|p| (ids.payout(p), o::Payout { completed: true }))
        .collect();
    // `o_0` is registered for the home project (the first the stack lists; with every
    // project, under no project: no project's order is registered).
    let home = t.projects.as_ref().and_then(|ps| ps.first());
    let registered = BTreeMap::from([(
        (
            home.map(|p| ids.project(*p)).unwrap_or_default(),
            ids.order(0),
        ),
        o::Price {
            amount: REGISTERED.into(),
            currency: "USD".into(),
        },
    )]);
    let projects = t
        .projects
        .as_ref()
        .map(|ps| ps.iter().map(|p| ids.project(*p)).collect());
    let world = o::World {
        invoices,
        refunds,
        payouts,
        deposits,
        registered,
        projects,
        reverse_check: t.reverse_check,
        environment: Env::Live,
    };
    let steps = acts.iter().map(|a| step(ids, t, a)).collect();
    (world, steps)
}

/// The oracle's step of an invoice act.
fn invoice_step(ids: &Ids, t: &Truth, act: &Act, event_id: Option<String>) -> o::Arrival {
    let Act::Invoice {
        invoice,
        status,
        naming,
        priced,
        project,
        endpoint,
        sandbox,
        forged,
        elsewhere,
        lagging,
    } = *act
    else {
        unreachable!("an invoice act")
    };
    let truth = &t.invoices[usize::from(invoice)];
    let order = match naming {
        0 => None,
        1 => Some(true_order(ids, t, invoice)),
        _ => Some(ids.order((invoice + 1) % 2)),
    };
    let price = priced.then(|| o::Price {
        amount: PRICES[truth.price ^ usize::from(forged && t.reverse_check)].into(),
        currency: "USD".into(),
    });
    o::Arrival::Invoice {
        event_id,
        invoice: ids.invoice(invoice),
        project: project.then(|| said_project(ids, t, invoice, elsewhere)),
        env: if sandbox { Env::Sandbox } else { Env::Live },
        genuine: !forged,
        lagging,
        at: event_at(t, invoice, status, forged.then_some(endpoint)),
        status,
        order,
        price,
    }
}

fn step(ids: &Ids, t: &Truth, act: &Act) -> o::Arrival {
    let env = |sandbox: bool| if sandbox { Env::Sandbox } else { Env::Live };
    let event_id = item(ids, t, act).map(|w| w.event_id);
    match *act {
        Act::Invoice { .. } => invoice_step(ids, t, act, event_id),
        Act::Refund {
            refund,
            sandbox,
            lagging,
        } => o::Arrival::Withdrawal {
            event_id,
            id: ids.refund(refund),
            env: env(sandbox),
            genuine: true,
            lagging,
            // the completion the event names (`data.completed_at`); its `occurred_at` is
            // `refund_skew` apart
            at: t.refunds[usize::from(refund)].at,
            completed: true,
        },
        Act::Deposit {
            deposit,
            confirmed,
            project,
            sandbox,
            lagging,
        } => {
            let truth = &t.deposits[usize::from(deposit)];
            o::Arrival::Deposit {
                event_id,
                id: ids.deposit(deposit),
                project: project.then(|| ids.project(truth.project)),
                env: env(sandbox),
                genuine: !confirmed || truth.confirmed,
                lagging,
                confirmed,
            }
        }
        Act::Payout {
            payout,
            sandbox,
            lagging,
        } => o::Arrival::Withdrawal {
            event_id,
            id: ids.payout(payout),
            env: env(sandbox),
            genuine: true,
            lagging,
            at: PAID_OUT_AT,
            completed: true,
        },
        Act::MarkPaid {
            invoice,
            with_order,
            api,
        } => {
            let named = true_order(ids, t, invoice);
            o::Arrival::MarkPaid {
                invoice: ids.invoice(invoice),
                order: (with_order && !named.is_empty()).then_some(named),
                project: Some(project_of(ids, t, invoice)),
                api,
            }
        }
        Act::Release {
            invoice,
            override_amount,
            project,
            api,
        } => o::Arrival::Release {
            invoice: ids.invoice(invoice),
            override_amount,
            project: project.then(|| project_of(ids, t, invoice)),
            api,
        },
        Act::Recheck(id) => o::Arrival::Recheck {
            id: recheck_id(ids, id),
        },
        Act::Reconcile => o::Arrival::Reconcile,
    }
}

/// What a store holds after a history, as the oracle states it.
pub trait Observe: Send + Sync {
    /// Every fulfilment: its invoice and the order it names.
    fn fulfilments(&self) -> impl Future<Output = Vec<(String, Option<String>)>> + Send;
    /// Every invoice record.
    fn invoices(&self) -> impl Future<Output = Vec<(String, InvoiceSeen)>> + Send;
    /// Each payer's balance per currency, by the project's key scope (none: the home project).
    fn balances(
        &self,
    ) -> impl Future<Output = BTreeMap<(Option<String>, String, String), String>> + Send;
}

/// The balances against the oracle's, each by (project, payer, currency).
async fn judge_balances<V: Observe>(
    view: &V,
    want: &o::Expected,
    projects: &Projects,
    mine: &impl Fn(&str) -> bool,
) -> Option<String> {
    let balances: BTreeMap<_, _> = view
        .balances()
        .await
        .into_iter()
        .filter(|((_, payer, _), v)| mine(payer) && v != "0")
        .map(|((scope, payer, currency), v)| {
            let project = projects.project_of(scope.as_deref()).unwrap_or_default();
            ((project, payer, currency), v)
        })
        .collect();
    (balances != want.balances)
        .then(|| format!("balances {balances:?}, the oracle says {:?}", want.balances))
}

/// Paymos' clock as the truth has it, for the oracle: when each invoice was paid and each
/// refund completed.
pub fn paymos_clock(ids: &Ids, t: &Truth) -> o::Clock {
    o::Clock {
        paid_at: (0u8..)
            .zip(&t.invoices)
            .filter_map(|(i, inv)| inv.paid_at.map(|at| (ids.invoice(i), at)))
            .collect(),
        completed_at: (0u8..)
            .zip(&t.refunds)
            .map(|(r, refund)| (ids.refund(r), refund.at))
            .collect(),
    }
}

fn wait_of(kind: &str) -> Option<o::Wait> {
    Some(match kind {
        "held" => o::Wait::Held,
        "paid_late" => o::Wait::PaidLate,
        "duplicate_payment" => o::Wait::Duplicate,
        "unconfirmed" => o::Wait::Unconfirmed,
        "order_unknown" => o::Wait::OrderUnknown,
        "after_refund" => o::Wait::AfterRefund,
        "project_unknown" => o::Wait::ProjectUnknown,
        _ => return None,
    })
}

/// What shipped, each by (project, order id) as its claim's key scope says, and in `out`
/// what shipped with no order, with no claim, or twice.
async fn judge_shipped<S: WorldStore, V: Observe>(
    (store, view): (&S, &V),
    scopes: &[Option<String>],
    projects: &Projects,
    mine: &impl Fn(&str) -> bool,
    out: &mut Vec<String>,
) -> BTreeMap<(String, String), String> {
    let mut shipped = BTreeMap::new();
    // 22: an invoice may hold two claims, its shipment's and Paymos' order taken for a person
    // to ship by hand: its record's project says which one shipped.
    let recorded: BTreeMap<String, Option<String>> = view
        .invoices()
        .await
        .into_iter()
        .map(|(id, seen)| (id, seen.order.project))
        .collect();
    for (invoice, order) in view
        .fulfilments()
        .await
        .into_iter()
        .filter(|(i, _)| mine(i))
    {
        let Some(order) = order else {
            out.push(format!("{invoice} shipped with no order"));
            continue;
        };
        let mut scope = None;
        let first = recorded.get(&invoice).cloned().flatten();
        for s in std::iter::once(&first)
            .filter(|f| f.is_some())
            .chain(scopes)
        {
            let by = store.order_fulfilled_by(s.as_deref(), &order).await;
            if by.ok().flatten().as_deref() == Some(invoice.as_str()) {
                scope = Some(s.clone());
                break;
            }
        }
        let Some(scope) = scope else {
            out.push(format!("{invoice} shipped {order} with no claim of it"));
            continue;
        };
        let project = projects.project_of(scope.as_deref()).unwrap_or_default();
        if let Some(first) = shipped.insert((project.clone(), order.clone()), invoice.clone()) {
            out.push(format!(
                "order {order} of {project:?} shipped twice: {first} and {invoice}"
            ));
        }
    }
    shipped
}

/// Where the end state of run `ids` on `store` differs from the oracle's, in words (none: it
/// agrees). Besides the oracle: no fulfilment without an order, none twice for one order.
pub async fn judge<S: WorldStore, V: Observe>(
    store: &S,
    view: &V,
    reviews: &MemoryReviews,
    ids: &Ids,
    t: &Truth,
    acts: &[Act],
) -> Vec<String> {
    let (world, steps) = oracle_case(ids, t, acts);
    let want = o::expected_at(&world, &paymos_clock(ids, t), &steps);
    let mine = |id: &str| id.contains(&format!("_{}_", ids.run));
    let projects = stack(ids, t);
    // A fulfilment's order is (project, order id): the key scope whose claim of the order names
    // the invoice, as the project it stands for ("" for none).
    let scopes: Vec<Option<String>> = std::iter::once(None)
        .chain((0..PROJECTS).map(|p| Some(ids.project(p))))
        .collect();
    let mut out = Vec::new();
    let shipped = judge_shipped((store, view), &scopes, &projects, &mine, &mut out).await;
    if shipped != want.shipped {
        out.push(format!(
            "shipped {shipped:?}, the oracle says {:?}",
            want.shipped
        ));
    }
    let listed = exceptions::list(store, reviews, 0)
        .await
        .unwrap_or_default();
    let mut waiting: BTreeMap<String, BTreeSet<o::Wait>> = BTreeMap::new();
    for e in listed {
        if let (Some(id), Some(wait)) = (e.resource_id.filter(|r| mine(r)), wait_of(e.kind)) {
            waiting.entry(id).or_default().insert(wait);
        }
    }
    // 20: of a contested invoice, a payment that waits is listed under whatever name, and a
    // listing the oracle does not name is not a disagreement
    let contested = |i: &String| want.contested.contains(i);
    let agrees = waiting
        .keys()
        .all(|id| want.waiting.contains_key(id) || contested(id))
        && want.waiting.iter().all(|(id, w)| {
            waiting
                .get(id)
                .is_some_and(|ours| ours.contains(w) || *w == o::Wait::Contested || contested(id))
        });
    if !agrees {
        out.push(format!(
            "waiting {waiting:?}, the oracle says {:?}",
            want.waiting
        ));
    }
    out.extend(judge_balances(view, &want, &projects, &mine).await);
    // 20: of a contested payment the oracle says only that it waits (under whatever name)
    let refunded: BTreeSet<String> = view
        .invoices()
        .await
        .into_iter()
        .filter(|(i, _)| !contested(i))
        // Paid back in full; a payment waiting for its order, made after the refund, is not
        // the one it returned (the invoice's record knows no payment of it yet), and neither
        // is one no road dates that waits for a person (`after_refund`).
        .filter(|(i, seen)| {
            mine(i)
                && seen.refunded_in_full()
                && !seen.after_refund
                && !waiting
                    .get(i)
                    .is_some_and(|w| w.contains(&o::Wait::OrderUnknown))
        })
        .map(|(i, _)| i)
        .collect();
    let want_refunded: BTreeSet<String> = want
        .refunded
        .iter()
        .filter(|i| !contested(i))
        .cloned()
        .collect();
    if refunded != want_refunded {
        out.push(format!(
            "refunded {refunded:?}, the oracle says {:?}",
            want.refunded
        ));
    }
    out
}

impl Observe for std::sync::Arc<crate::testkit::memory::MemoryResources> {
    async fn fulfilments(&self) -> Vec<(String, Option<String>)> {
        crate::testkit::memory::MemoryResources::fulfilments(self)
    }

    async fn invoices(&self) -> Vec<(String, InvoiceSeen)> {
        crate::testkit::memory::MemoryResources::invoices(self)
            .into_iter()
            .map(|(id, r)| (id, r.seen()))
            .collect()
    }

    async fn balances(&self) -> BTreeMap<(Option<String>, String, String), String> {
        crate::testkit::memory::MemoryResources::balances(self)
    }
}
