//! What "fulfil" means is the merchant's: the items written inside the transaction that marks
//! an invoice paid, so they exist if and only if the invoice became paid exactly once and was
//! the first to pay its order.

use crate::money::change::{OrderRef, Source};
use crate::money::status::{Amount, InvoiceStatus};

/// One write the fulfilment adds to the transaction, in table-neutral terms.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectWrite {
    /// The state table key (`pk`) of the item to create.
    pub key: String,
    /// Its attributes: strings, exact numbers (as [`Amount`]), booleans.
    pub attributes: Vec<(String, EffectValue)>,
}

/// An attribute value of an [`EffectWrite`].
#[derive(Debug, Clone, PartialEq)]
pub enum EffectValue {
    /// A string.
    Text(String),
    /// An exact number.
    Number(Amount),
}

/// A paid invoice about to be fulfilled.
#[derive(Debug, Clone)]
pub struct PaidInvoice<'a> {
    /// `inv_…`.
    pub invoice_id: &'a str,
    /// `paid` or `paid_over`.
    pub status: InvoiceStatus,
    /// The order.
    pub order: &'a OrderRef,
    /// The delivery (or manual actor) that wins.
    pub source: &'a Source,
    /// Now, Unix ms.
    pub at_ms: u64,
}

/// What "fulfil" means is the merchant's: items of their own written IN the transaction that
/// marks the invoice paid, beside the fulfilment record the store always writes
/// (`record::FulfilmentRecord`, which guards against a second fulfilment), so they
/// exist if and only if the invoice became paid exactly once. Downstream systems (shipping,
/// licences) react to them on the state table's stream; an external side effect stays
/// idempotent by using the invoice id as its idempotency key.
///
/// Two attribute names are the state table's index keys, so an effect item leaves them alone:
/// `listed_in` (it would list the item among the facts `events since` reads) and `updated_at`
/// (its range key: DynamoDB refuses the whole transaction if an item carries it as text).
pub trait FulfilmentEffect: Send + Sync {
    /// The merchant's own items to create, each conditional on not existing yet (keys other
    /// than the fulfilment record's).
    fn writes(&self, paid: &PaidInvoice<'_>) -> Vec<EffectWrite>;
}

/// The key of an invoice's fulfilment record.
#[must_use]
pub fn fulfilment_key(invoice_id: &str) -> String {
    format!("fulfilment#{invoice_id}")
}

/// The default effect: the fulfilment record alone (order id, invoice id, amount, currency, the
/// event that won, time), nothing of the merchant's.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordFulfilment;

impl FulfilmentEffect for RecordFulfilment {
    fn writes(&self, _: &PaidInvoice<'_>) -> Vec<EffectWrite> {
        Vec::new()
    }
}
