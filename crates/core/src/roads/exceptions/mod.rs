//! Every payment waiting for a person, and the ways out: [`list`] names each with why, since
//! when and what to do; [`release`] fulfils a held, late or unconfirmed payment on a person's
//! word; [`recheck`] runs the reverse check again for unconfirmed deliveries of every category
//! (invoices, refunds, payouts, deposits) and applies what Paymos now confirms. Their ports: the
//! state table ([`ExceptionStore`]) and the deliveries ledger's reviews ([`ReviewLedger`]).
//!
//! Here: the ports and what they carry. Beside it, `pending` reads what a waiting delivery
//! would change; `listing` lists what waits; `settle` releases and resolves on a person's word;
//! `rechecking` runs the reverse check again; `manual` gives a stack's
//! [`Fulfil`](crate::roads::fulfil::Fulfil) these roads with its own store and effect.

use std::future::Future;

use crate::money::change::Applied;
pub use crate::money::change::Applying;
use crate::money::record::InvoiceRecord;
use crate::roads::fulfil::ResourceStore;
use crate::roads::ingest::{Delivery, PortError};
use crate::roads::release::ReleaseStore;

pub use crate::money::change::DELIVERY_OUTCOMES;

mod listing;
mod manual;
mod pending;
mod rechecking;
mod settle;

pub use listing::list;
pub use rechecking::{Recheck, Rechecked, recheck};
pub use settle::{RESOLVED_BY_HAND, ResolveError, refuses_word, release, resolve, resolve_invoice};

/// How a person's road resolved a delivery that waited: its new outcome in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Its payment was released by hand.
    Released,
    /// Re-checked at Paymos and applied with this outcome.
    Rechecked(Applied),
    /// Re-checked at Paymos, which contradicts it (a change that pays nothing).
    Refuted,
    /// Confirmed, but its order is known nowhere: it waits for its order now.
    WaitsForOrder,
    /// Settled by a person outside the stack (an order conflict, an unusable delivery applied
    /// by hand), who says so ([`resolve`]).
    ByHand,
}

impl Resolution {
    /// The stored name (`released`, `rechecked_<outcome>`, `rechecked_refuted`,
    /// `order_unknown`).
    #[must_use]
    pub fn name(self) -> String {
        match self {
            Self::Released => "released".into(),
            Self::Rechecked(applied) => format!("rechecked_{applied}"),
            Self::Refuted => "rechecked_refuted".into(),
            Self::WaitsForOrder => Applied::OrderUnknown.as_str().into(),
            Self::ByHand => "resolved_by_hand".into(),
        }
    }

    /// The outcome a person still acts on after this resolution, if any: a confirmed payment
    /// whose order is known nowhere waits for its order (`mark-paid --order-id`); every other
    /// resolution takes the delivery off what waits. Every ledger lists by this rule.
    #[must_use]
    pub fn still_waits(self) -> Option<Applied> {
        match self {
            Self::WaitsForOrder => Some(Applied::OrderUnknown),
            Self::Released | Self::Rechecked(_) | Self::Refuted | Self::ByHand => None,
        }
    }
}

/// A processed delivery whose outcome waits for a person (`unconfirmed`, `unusable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRecord {
    /// The delivery as recorded (with its exact body).
    pub delivery: Delivery,
    /// Its outcome.
    pub outcome: Applied,
    /// Why, when recorded.
    pub reason: Option<String>,
    /// When it was processed (Unix ms).
    pub processed_at_ms: u64,
}

/// The state table, as the operator's use cases read it.
pub trait ExceptionStore: ResourceStore + ReleaseStore {
    /// Invoices whose payment waits for a person ([`Standing::waits_for_person`]).
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn invoices_under_review(
        &self,
    ) -> impl Future<Output = Result<Vec<InvoiceRecord>, PortError>> + Send;
}

impl<T: ExceptionStore> ExceptionStore for std::sync::Arc<T> {
    fn invoices_under_review(
        &self,
    ) -> impl Future<Output = Result<Vec<InvoiceRecord>, PortError>> + Send {
        (**self).invoices_under_review()
    }
}

/// The deliveries ledger's reviews: what waits, and the note that a person or a re-check
/// resolved it.
pub trait ReviewLedger: Send + Sync {
    /// Every processed delivery with one of `outcomes` (of one resource, or all), oldest first.
    ///
    /// # Errors
    /// [`PortError`] when the ledger fails.
    fn with_outcomes(
        &self,
        outcomes: &[Applied],
        resource_id: Option<&str>,
    ) -> impl Future<Output = Result<Vec<OutcomeRecord>, PortError>> + Send;

    /// Notes that the delivery under `key` ([`crate::roads::ingest::delivery_key`]) was resolved (how,
    /// by whom, when), so it leaves the list.
    ///
    /// # Errors
    /// [`PortError`] when the ledger fails.
    fn mark_resolved(
        &self,
        key: &str,
        resolution: Resolution,
        by: &str,
        at_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Notes why the delivery under `key` still waits, after a re-check found another reason
    /// than the one recorded: what `exceptions` says of it is the latest. Only a delivery that
    /// still waits is changed.
    ///
    /// # Errors
    /// [`PortError`] when the ledger fails.
    fn note_reason(
        &self,
        key: &str,
        reason: &str,
        at_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// One thing waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Exception {
    /// `held`, `paid_late`, `duplicate_payment`, `unconfirmed`, `unusable`, `dead_letter`.
    pub kind: &'static str,
    /// The invoice (or other resource) it is about, when known.
    pub resource_id: Option<String>,
    /// The delivery it is about, when known.
    pub event_id: Option<String>,
    /// The project it is of, where it is not the stack's first: an order id means something
    /// only within its project.
    pub project: Option<String>,
    /// Since when (Unix ms).
    pub since_ms: u64,
    /// Why it waits.
    pub why: String,
    /// What to do.
    pub action: String,
}
