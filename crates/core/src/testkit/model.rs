//! Scripted histories for the truth tests on DynamoDB Local (`crates/aws/tests/emulators/truth.rs`): deliveries of
//! invoice facts (live and sandbox, with and without the order, relabelled, with and without a
//! price, through one or two endpoints), refunds, `mark-paid`, `release` and
//! `reconcile --apply`, run through the use cases, and what a store holds after them
//! ([`Inspect`]). Generated histories of Paymos' whole world, judged by the oracle, are
//! [`crate::testkit::world`]'s.

use std::future::Future;

use crate::money::change::OrderRef;
use crate::money::effect::RecordFulfilment;
use crate::money::invoice::InvoiceSeen;
use crate::money::status::{Amount, InvoiceStatus};
use crate::roads::fulfil::{Fulfil, ResourceStore};
use crate::roads::ingest::PortError;
use crate::roads::release::{ReleaseBy, ReleaseStore, release};
use crate::wire::signature::Environment;
use crate::wire::work::WorkItem;

/// Invoices per history (invoice `i` belongs to order `i % 2`).
pub const INVOICES: u8 = 3;
/// The registered order (order 0): paid with this amount in USD, or held.
pub const REGISTERED_AMOUNT: &str = "10.5";

/// Which order an invoice event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// No `data.order` (as the official `ton_invoice` vectors).
    Silent,
    /// The invoice's own order.
    Own,
    /// The other order (a relabelled or mistaken event).
    Other,
}

/// One step of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A delivery of an invoice event.
    Deliver {
        /// Invoice index.
        invoice: u8,
        /// Its status.
        status: InvoiceStatus,
        /// `occurred_at`.
        at: u64,
        /// What order it names.
        naming: Naming,
        /// Its price in USD, if it carries one.
        price: Option<&'static str>,
        /// The endpoint (a second endpoint sends the same fact with another event id).
        endpoint: u8,
        /// Signed by the sandbox secret (this stack applies live).
        sandbox: bool,
    },
    /// A completed refund of an invoice.
    Refund {
        /// Invoice index.
        invoice: u8,
        /// `wdr_` sequence.
        seq: u8,
        /// Amount in USD.
        amount: &'static str,
        /// `full` or `overpayment`.
        mode: &'static str,
    },
    /// `paymos-inbox mark-paid INV --actor support` (with `--order-id` or not).
    MarkPaid {
        /// Invoice index.
        invoice: u8,
        /// Whether the command names the order.
        with_order: bool,
    },
    /// `paymos-inbox release INV --actor ops` (with `--override-amount --reason` or not).
    Release {
        /// Invoice index.
        invoice: u8,
        /// Whether the amount check is overridden.
        override_amount: bool,
    },
    /// `reconcile --apply` finding the invoice paid at Paymos.
    ReconcileApply {
        /// Invoice index.
        invoice: u8,
    },
}

/// The ids of one run (a prefix keeps runs apart in one table).
#[derive(Debug, Clone)]
pub struct Ids {
    /// Unique per run.
    pub run: String,
}

impl Ids {
    /// Invoice `i`.
    #[must_use]
    pub fn invoice(&self, i: u8) -> String {
        format!("inv_{}_{i}", self.run)
    }

    /// Order `o`.
    #[must_use]
    pub fn order(&self, o: u8) -> String {
        format!("o_{}_{o}", self.run)
    }

    /// The order invoice `i` belongs to.
    #[must_use]
    pub fn order_of(&self, i: u8) -> String {
        self.order(i % 2)
    }

    /// Refund (or payout) `r`.
    #[must_use]
    pub fn refund(&self, r: u8) -> String {
        format!("wdr_{}_{r}", self.run)
    }

    /// Deposit `d`.
    #[must_use]
    pub fn deposit(&self, d: u8) -> String {
        format!("pcd_{}_{d}", self.run)
    }

    /// The payer of the run's deposits (payer 0).
    #[must_use]
    pub fn payer(&self) -> String {
        self.payer_of(0)
    }

    /// Payer `k` (one payer id may pay in several projects).
    #[must_use]
    pub fn payer_of(&self, k: u8) -> String {
        format!("c_{}_{k}", self.run)
    }

    /// Project `p` (`prj_…`).
    #[must_use]
    pub fn project(&self, p: u8) -> String {
        format!("prj_{}_{p}", self.run)
    }

    /// Payout `p` (a withdrawal that is not a refund).
    #[must_use]
    pub fn payout(&self, p: u8) -> String {
        format!("wdr_{}_p{p}", self.run)
    }
}

/// The work item of a delivery step.
fn delivery(ids: &Ids, op: &Op) -> Option<WorkItem> {
    let Op::Deliver {
        invoice,
        status,
        at,
        naming,
        price,
        endpoint,
        sandbox,
    } = *op
    else {
        return None;
    };
    let order = match naming {
        Naming::Silent => None,
        Naming::Own => Some(ids.order_of(invoice)),
        Naming::Other => Some(ids.order_of(invoice + 1)),
    };
    let mut data = serde_json::json!({ "invoice_id": ids.invoice(invoice) });
    let mut order_json = serde_json::Map::new();
    if let Some(o) = &order {
        order_json.insert("external_id".into(), o.clone().into());
    }
    if let Some(p) = price {
        order_json.insert("amount".into(), p.into());
        order_json.insert("currency".into(), "USD".into());
    }
    if !order_json.is_empty() {
        data["order"] = order_json.into();
    }
    // Sandbox deliveries get ids of their own here; one id from both environments (each
    // recorded under its own key) is proven by `tests/ingest.rs`.
    let event_id = format!(
        "{}_{}_{invoice}_{status}_{at}_{naming:?}_{}_{endpoint}",
        if sandbox { "evs" } else { "evt" },
        ids.run,
        price.unwrap_or("none").replace('.', "p"),
    );
    let body = serde_json::json!({
        "event_id": event_id, "event_type": format!("invoice.{status}"), "version": 1,
        "occurred_at": at, "data": data,
    });
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

fn refund_item(ids: &Ids, invoice: u8, seq: u8, amount: &str, mode: &str) -> WorkItem {
    let event_id = format!("evt_{}_r{invoice}_{seq}", ids.run);
    let body = serde_json::json!({
        "event_id": event_id, "event_type": "withdrawal.completed", "version": 1,
        "occurred_at": 20,
        "data": {"withdrawal_id": format!("wdr_{}_{invoice}_{seq}", ids.run),
                 "invoice_id": ids.invoice(invoice), "type": "refund", "mode": mode,
                 "amount": amount, "currency": "USD"},
    });
    WorkItem {
        event_id,
        environment: Some(Environment::Live),
        body: body.to_string().into_bytes(),
        received_at_ms: None,
    }
}

/// Runs `ops` through the use cases on `store` (which must have order 0 registered at
/// [`REGISTERED_AMOUNT`] USD).
///
/// # Errors
/// A store failure.
pub async fn run<S>(store: &S, ids: &Ids, ops: &[Op]) -> Result<(), PortError>
where
    S: ResourceStore + ReleaseStore + Clone,
{
    // One project, named by none of the deliveries: each is that project's.
    let fulfil = Fulfil::new(store.clone())
        .for_projects(crate::money::change::Projects::only(vec!["prj_1".into()]));
    let registered = || OrderRef {
        external_id: None,
        amount: Amount::parse("10.50"),
        currency: Some("USD".into()),
        project: None,
        home: false,
        unlisted: false,
    };
    for (step, op) in ops.iter().enumerate() {
        let now = 1_000 + step as u64;
        match *op {
            Op::Deliver { .. } => {
                let item = delivery(ids, op).expect("a delivery");
                fulfil.apply(&item, now).await.map_err(|e| match e {
                    crate::roads::fulfil::FulfilError::Unavailable(p) => p,
                    other => PortError::new("model", other),
                })?;
            }
            Op::Refund {
                invoice,
                seq,
                amount,
                mode,
            } => {
                let item = refund_item(ids, invoice, seq, amount, mode);
                fulfil
                    .apply(&item, now)
                    .await
                    .map_err(|e| PortError::new("model", e))?;
            }
            Op::MarkPaid {
                invoice,
                with_order,
            } => {
                let order = OrderRef {
                    external_id: with_order.then(|| ids.order_of(invoice)),
                    ..OrderRef::none()
                };
                fulfil
                    .mark_paid(&ids.invoice(invoice), order, "support", now)
                    .await?;
            }
            Op::Release {
                invoice,
                override_amount,
            } => {
                let by = ReleaseBy {
                    actor: "ops",
                    reason: Some("model"),
                    override_amount,
                    project: None,
                    order: None,
                };
                // Refusals are answers here; only a store failure stops the history.
                if let Err(crate::roads::release::ReleaseError::Port(e)) = release(
                    store,
                    &ids.invoice(invoice),
                    None,
                    &by,
                    &RecordFulfilment,
                    now,
                )
                .await
                {
                    return Err(e);
                }
            }
            Op::ReconcileApply { invoice } => {
                let order = OrderRef {
                    external_id: Some(ids.order_of(invoice)),
                    ..registered()
                };
                fulfil
                    .apply_by_hand(
                        &ids.invoice(invoice),
                        InvoiceStatus::Paid,
                        order,
                        "reconcile",
                        now,
                    )
                    .await?;
            }
        }
    }
    Ok(())
}

/// What the invariants read from a store after a history.
pub trait Inspect {
    /// Every fulfilment: its invoice and the order it names.
    fn fulfilments(&self) -> impl Future<Output = Vec<(String, Option<String>)>> + Send;
    /// Every invoice record.
    fn invoices(&self) -> impl Future<Output = Vec<(String, InvoiceSeen)>> + Send;
    /// Every key the store holds.
    fn keys(&self) -> impl Future<Output = Vec<String>> + Send;
}

impl Inspect for std::sync::Arc<crate::testkit::memory::MemoryResources> {
    async fn fulfilments(&self) -> Vec<(String, Option<String>)> {
        crate::testkit::memory::MemoryResources::fulfilments(self)
    }

    async fn invoices(&self) -> Vec<(String, InvoiceSeen)> {
        crate::testkit::memory::MemoryResources::invoices(self)
            .into_iter()
            .map(|(id, r)| (id, r.seen()))
            .collect()
    }

    async fn keys(&self) -> Vec<String> {
        crate::testkit::memory::MemoryResources::keys(self)
    }
}
