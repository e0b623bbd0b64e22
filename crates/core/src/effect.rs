//! What "fulfil" means is the merchant's: the items written inside the transaction that marks
//! an invoice paid, so they exist if and only if the invoice became paid exactly once and was
//! the first to pay its order.

use super::change::{OrderRef, Source};
use super::status::{Amount, InvoiceStatus};

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

/// What "fulfil" means is the merchant's: the items written IN the transaction that marks the
/// invoice paid, so they exist if and only if the invoice became paid exactly once. Downstream
/// systems (shipping, licences) react to them on the state table's stream; an external side
/// effect stays idempotent by using the invoice id as its idempotency key.
pub trait FulfilmentEffect: Send + Sync {
    /// The items to create (each conditional on not existing yet). The first must be the
    /// fulfilment record `fulfilment#<invoice_id>`, which guards against a second fulfilment.
    fn writes(&self, paid: &PaidInvoice<'_>) -> Vec<EffectWrite>;
}

/// The key of an invoice's fulfilment record.
#[must_use]
pub fn fulfilment_key(invoice_id: &str) -> String {
    format!("fulfilment#{invoice_id}")
}

/// The default effect: one fulfilment record (order id, invoice id, amount, currency, the event
/// that won, time).
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordFulfilment;

impl FulfilmentEffect for RecordFulfilment {
    fn writes(&self, paid: &PaidInvoice<'_>) -> Vec<EffectWrite> {
        let mut attributes = vec![
            ("kind".into(), EffectValue::Text("fulfilment".into())),
            (
                "invoice_id".into(),
                EffectValue::Text(paid.invoice_id.into()),
            ),
            (
                "status".into(),
                EffectValue::Text(paid.status.as_str().into()),
            ),
            ("won_by".into(), EffectValue::Text(paid.source.id())),
            (
                "fulfilled_at".into(),
                EffectValue::Number(Amount::parse(&paid.at_ms.to_string()).expect("digits")),
            ),
        ];
        if let Some(order) = &paid.order.external_id {
            attributes.push(("order_id".into(), EffectValue::Text(order.clone())));
        }
        if let Some(amount) = &paid.order.amount {
            attributes.push(("amount".into(), EffectValue::Number(amount.clone())));
            // The text Paymos sent ("10.00"), for the hand-off: a Number drops trailing zeros.
            attributes.push((
                "amount_text".into(),
                EffectValue::Text(amount.as_str().to_owned()),
            ));
        }
        if let Some(currency) = &paid.order.currency {
            attributes.push(("currency".into(), EffectValue::Text(currency.clone())));
        }
        vec![EffectWrite {
            key: fulfilment_key(paid.invoice_id),
            attributes,
        }]
    }
}
