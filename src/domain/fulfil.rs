//! The fulfil use case: turn one recorded delivery into a change of the resource it names, and
//! apply it at most once. The rules live in [`super::state`]; the store applies a change, the
//! fulfilment it guards and the ledger's processed mark in ONE transaction, conditional on the
//! resource's status, so neither a second event nor a second endpoint nor a manual fix can
//! fulfil an invoice twice.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use super::envelope::{Category, Envelope, EnvelopeError};
use super::ingest::PortError;
use super::state::{Amount, DepositStatus, InvoiceStatus, WithdrawalStatus};

/// The merchant's order as Paymos echoes it on an invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRef {
    /// `data.order.external_id`: the merchant's order id.
    pub external_id: Option<String>,
    /// The invoice amount (exact decimal), if the event carries it.
    pub amount: Option<Amount>,
    /// The invoice currency, upper case.
    pub currency: Option<String>,
}

/// A change to apply, decided from the event alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Move an invoice to `status` (and fulfil it, for `paid`/`paid_over`).
    Invoice {
        /// `inv_…`.
        invoice_id: String,
        /// The status the event announces.
        status: InvoiceStatus,
        /// `occurred_at` of the event (orders open statuses).
        occurred_at: u64,
        /// The order it pays for.
        order: OrderRef,
    },
    /// Move a withdrawal (payout or refund) forward.
    Withdrawal {
        /// `wdr_…`.
        withdrawal_id: String,
        /// The status the event announces.
        status: WithdrawalStatus,
        /// `occurred_at` of the event.
        occurred_at: u64,
        /// `refund` for refunds, else `payout`.
        kind: String,
        /// For refunds, the refunded invoice.
        invoice_id: Option<String>,
        /// The amount, if given.
        amount: Option<Amount>,
        /// The currency, if given.
        currency: Option<String>,
    },
    /// Record a deposit's status, crediting the payer once on a final confirmation.
    Deposit {
        /// `pcd_…`.
        deposit_id: String,
        /// The status the event announces.
        status: DepositStatus,
        /// `occurred_at` of the event.
        occurred_at: u64,
        /// The payer and the net amount to credit, present only for a final confirmation.
        credit: Option<Credit>,
    },
    /// Nothing to apply (an unknown event type or status).
    Ignore {
        /// Why, for the ledger and the log.
        reason: String,
    },
    /// A paid event the reverse check refused: recorded as `unconfirmed`, nothing applied.
    Unconfirmed {
        /// Why Paymos does not confirm it.
        reason: String,
    },
}

/// A credit of a payer's balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credit {
    /// `data.payment_channel_external_id`: the merchant's id for the payer.
    pub payer: String,
    /// `data.net`.
    pub net: Amount,
    /// `data.currency` (balances are kept per payer and currency).
    pub currency: String,
}

/// Why a work item cannot be applied (retrying will not help; it ends in the DLQ).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoisonError {
    /// The message is not a Paymos envelope.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// A money event misses what it needs to be applied.
    #[error("{event_type} cannot be applied: {reason}")]
    Unusable {
        /// The event type.
        event_type: String,
        /// What is missing or wrong.
        reason: String,
    },
}

/// How a delivery was applied (stored as the ledger's `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The invoice became paid and the order was fulfilled by this delivery.
    Fulfilled,
    /// The resource moved to the announced status.
    Updated,
    /// The payer was credited by this delivery.
    Credited,
    /// The resource was already final (paid by another event, endpoint, or by hand): nothing
    /// changed.
    AlreadyFinal,
    /// A late event: the resource is already further along.
    Stale,
    /// The paid amount or currency differs from the registered order: held for review, not
    /// fulfilled.
    Held,
    /// A payment arrived after the invoice closed unpaid: the final status stays, `paid_late_at`
    /// is set, nothing is fulfilled.
    PaidLate,
    /// Nothing to apply.
    Ignored,
    /// The reverse check found Paymos does not confirm the payment (status, amount or
    /// currency): nothing was fulfilled; a forged or mistaken event.
    Unconfirmed,
    /// This delivery was applied before (a second message): nothing changed.
    AlreadyProcessed,
}

impl Applied {
    /// The stored name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fulfilled => "fulfilled",
            Self::Updated => "updated",
            Self::Credited => "credited",
            Self::AlreadyFinal => "already_final",
            Self::Stale => "stale",
            Self::Held => "held",
            Self::PaidLate => "paid_late",
            Self::Ignored => "ignored",
            Self::Unconfirmed => "unconfirmed",
            Self::AlreadyProcessed => "already_processed",
        }
    }
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who caused a change: a recorded delivery (whose ledger record is marked processed in the
/// same transaction) or a person or job acting by hand (no ledger record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A delivery from the ledger.
    Delivery {
        /// Its `event_id`.
        event_id: String,
    },
    /// A manual action (`mark-paid`) or a reconciliation run.
    Manual {
        /// Who or what did it, e.g. `support:alice` or `reconcile`.
        actor: String,
    },
}

impl Source {
    /// The id stored as "who won" on a fulfilment.
    #[must_use]
    pub fn id(&self) -> String {
        match self {
            Self::Delivery { event_id } => event_id.clone(),
            Self::Manual { actor } => format!("manual:{actor}"),
        }
    }
}

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

/// What Paymos' API says about an invoice (the reverse check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmedInvoice {
    /// Its status at Paymos.
    pub status: String,
    /// The order amount (exact decimal).
    pub amount: Option<Amount>,
    /// The order currency, upper case.
    pub currency: Option<String>,
}

/// Re-reads an invoice at the source before fulfilling on a webhook, as Paymos' own plugins do:
/// a valid signature proves the sender held the secret, not that the payment happened.
pub trait PaymentConfirmation: Send + Sync {
    /// The invoice as Paymos has it now.
    fn invoice(
        &self,
        invoice_id: &str,
    ) -> impl Future<Output = Result<ConfirmedInvoice, PortError>> + Send;
}

/// No reverse check (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoConfirmation;

impl PaymentConfirmation for NoConfirmation {
    async fn invoice(&self, _: &str) -> Result<ConfirmedInvoice, PortError> {
        Err(PortError::new("reverse check", "not configured"))
    }
}

/// The resource state table with the ledger's processed mark.
pub trait StateStore: Send + Sync {
    /// Applies `change` for `source` at `now_ms`, atomically with the ledger's processed mark
    /// (for a delivery) and, for a paid invoice, with `effect`'s writes.
    fn apply(
        &self,
        source: &Source,
        change: &Change,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> impl Future<Output = Result<Applied, PortError>> + Send;
}

impl<T: StateStore> StateStore for Arc<T> {
    fn apply(
        &self,
        source: &Source,
        change: &Change,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> impl Future<Output = Result<Applied, PortError>> + Send {
        (**self).apply(source, change, effect, now_ms)
    }
}

fn text<'v>(data: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter()
        .try_fold(data, |v, k| v.get(*k))
        .and_then(Value::as_str)
}

/// Decides the change a verified event asks for. Pure: the same body always gives the same
/// change.
///
/// # Errors
/// [`PoisonError`] when the body is not an envelope, or a money event lacks what it needs.
pub fn change_of(body: &[u8]) -> Result<(Envelope, Change), PoisonError> {
    let envelope = Envelope::parse(body)?;
    let raw: Value =
        serde_json::from_slice(body).map_err(|e| EnvelopeError::InvalidJson(e.to_string()))?;
    let data = raw.get("data").unwrap_or(&Value::Null);
    let suffix = envelope.event_type.rsplit('.').next().unwrap_or_default();
    let unusable = |reason: &str| PoisonError::Unusable {
        event_type: envelope.event_type.clone(),
        reason: reason.to_owned(),
    };
    let ignore = |reason: String| Change::Ignore { reason };
    let resource = envelope.resource_id.clone().unwrap_or_default();
    let change = match envelope.category {
        Category::Invoice => match InvoiceStatus::parse(suffix) {
            Some(status) => Change::Invoice {
                invoice_id: resource,
                status,
                occurred_at: envelope.occurred_at,
                order: OrderRef {
                    external_id: text(data, &["order", "external_id"]).map(str::to_owned),
                    amount: text(data, &["order", "amount"])
                        .or_else(|| text(data, &["amount"]))
                        .or_else(|| text(data, &["payment", "expected"]))
                        .and_then(Amount::parse),
                    currency: text(data, &["order", "currency"])
                        .or_else(|| text(data, &["currency"]))
                        .or_else(|| text(data, &["payment", "currency"]))
                        .map(str::to_ascii_uppercase),
                },
            },
            None => ignore(format!("unknown invoice event {}", envelope.event_type)),
        },
        Category::Withdrawal => match WithdrawalStatus::parse(suffix) {
            Some(status) => Change::Withdrawal {
                withdrawal_id: resource,
                status,
                occurred_at: envelope.occurred_at,
                kind: if text(data, &["type"]) == Some("refund") {
                    "refund".into()
                } else {
                    "payout".into()
                },
                invoice_id: text(data, &["invoice_id"]).map(str::to_owned),
                amount: text(data, &["amount"]).and_then(Amount::parse),
                currency: text(data, &["currency"]).map(str::to_ascii_uppercase),
            },
            None => ignore(format!("unknown withdrawal event {}", envelope.event_type)),
        },
        Category::Deposit => match DepositStatus::parse(suffix) {
            Some(status) => {
                let is_final = data.get("is_final").and_then(Value::as_bool) == Some(true);
                let credit = if status == DepositStatus::Confirmed && is_final {
                    let payer = text(data, &["payment_channel_external_id"])
                        .ok_or_else(|| unusable("data.payment_channel_external_id is missing"))?;
                    let net = text(data, &["net"])
                        .and_then(Amount::parse)
                        .ok_or_else(|| unusable("data.net is missing or not a decimal string"))?;
                    let currency = text(data, &["currency"])
                        .ok_or_else(|| unusable("data.currency is missing"))?;
                    Some(Credit {
                        payer: payer.to_owned(),
                        net,
                        currency: currency.to_ascii_uppercase(),
                    })
                } else {
                    None
                };
                Change::Deposit {
                    deposit_id: resource,
                    status,
                    occurred_at: envelope.occurred_at,
                    credit,
                }
            }
            None => ignore(format!("unknown deposit event {}", envelope.event_type)),
        },
        Category::Unknown => ignore(format!("unknown event type {}", envelope.event_type)),
    };
    Ok((envelope, change))
}

/// Why Paymos' own view does not confirm a paid event, if it does not.
fn mismatch(at_source: &ConfirmedInvoice, order: &OrderRef) -> Option<&'static str> {
    if !matches!(at_source.status.as_str(), "paid" | "paid_over") {
        return Some("the invoice is not paid at Paymos");
    }
    let differs = |a: &Option<Amount>, b: &Option<Amount>| match (a, b) {
        (Some(a), Some(b)) => !same_decimal(a.as_str(), b.as_str()),
        _ => false,
    };
    if differs(&at_source.amount, &order.amount) {
        return Some("the amount differs from Paymos' invoice");
    }
    if let (Some(a), Some(b)) = (&at_source.currency, &order.currency)
        && a != b
    {
        return Some("the currency differs from Paymos' invoice");
    }
    None
}

/// `"10.5" == "10.50"`: compares decimal text exactly, without floats.
fn same_decimal(a: &str, b: &str) -> bool {
    fn norm(s: &str) -> (bool, String, String) {
        let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let int = int.trim_start_matches('0').to_owned();
        let frac = frac.trim_end_matches('0').to_owned();
        let zero = int.is_empty() && frac.is_empty();
        (neg && !zero, int, frac)
    }
    norm(a) == norm(b)
}

/// Why a work item was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FulfilError {
    /// It can never be applied (to the DLQ after the bounded receives).
    #[error(transparent)]
    Poison(#[from] PoisonError),
    /// A store failure: retry.
    #[error(transparent)]
    Unavailable(#[from] PortError),
}

/// The fulfil use case.
pub struct Fulfil<S, C = NoConfirmation> {
    store: S,
    effect: Box<dyn FulfilmentEffect>,
    confirmation: Option<C>,
}

impl<S: StateStore> Fulfil<S> {
    /// With the default effect ([`RecordFulfilment`]) and no reverse check.
    pub fn new(store: S) -> Self {
        Self::with_effect(store, Box::new(RecordFulfilment))
    }

    /// With the merchant's own effect.
    pub fn with_effect(store: S, effect: Box<dyn FulfilmentEffect>) -> Self {
        Self {
            store,
            effect,
            confirmation: None,
        }
    }

    /// With a reverse check before every webhook-driven fulfilment.
    pub fn with_confirmation<C: PaymentConfirmation>(self, confirmation: C) -> Fulfil<S, C> {
        Fulfil {
            store: self.store,
            effect: self.effect,
            confirmation: Some(confirmation),
        }
    }
}

impl<S: StateStore, C: PaymentConfirmation> Fulfil<S, C> {
    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Applies one work item (the exact Paymos event body).
    ///
    /// # Errors
    /// [`FulfilError`]: poison or unavailable; either way the message is reported failed.
    pub async fn apply(
        &self,
        body: &[u8],
        now_ms: u64,
    ) -> Result<(Envelope, Applied), FulfilError> {
        let (envelope, change) = change_of(body)?;
        let source = Source::Delivery {
            event_id: envelope.event_id.clone(),
        };
        if let (
            Some(confirmation),
            Change::Invoice {
                invoice_id,
                status,
                order,
                ..
            },
        ) = (&self.confirmation, &change)
            && status.fulfils()
        {
            // An API failure is retried (the message comes back); a mismatch is final.
            let at_source = confirmation.invoice(invoice_id).await?;
            if let Some(reason) = mismatch(&at_source, order) {
                tracing::warn!(invoice_id, event_id = %envelope.event_id, reason, "reverse check: Paymos does not confirm this payment; nothing fulfilled");
                let refused = Change::Unconfirmed {
                    reason: reason.to_owned(),
                };
                let applied = self
                    .store
                    .apply(&source, &refused, self.effect.as_ref(), now_ms)
                    .await?;
                return Ok((envelope, applied));
            }
        }
        let applied = self
            .store
            .apply(&source, &change, self.effect.as_ref(), now_ms)
            .await?;
        Ok((envelope, applied))
    }

    /// Support's manual path: marks an invoice paid through the SAME conditional transition as
    /// a webhook, so a later webhook or replay for it is `already_final` and fulfils nothing.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn mark_paid(
        &self,
        invoice_id: &str,
        order: OrderRef,
        actor: &str,
        now_ms: u64,
    ) -> Result<Applied, PortError> {
        self.apply_by_hand(invoice_id, InvoiceStatus::Paid, order, actor, now_ms)
            .await
    }

    /// [`Fulfil::mark_paid`] with the status to set (reconciliation sets `paid_over` where
    /// Paymos says so).
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn apply_by_hand(
        &self,
        invoice_id: &str,
        status: InvoiceStatus,
        order: OrderRef,
        actor: &str,
        now_ms: u64,
    ) -> Result<Applied, PortError> {
        let change = Change::Invoice {
            invoice_id: invoice_id.to_owned(),
            status,
            occurred_at: now_ms / 1000,
            order,
        };
        let source = Source::Manual {
            actor: actor.to_owned(),
        };
        self.store
            .apply(&source, &change, self.effect.as_ref(), now_ms)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(event_type: &str, data: &str) -> Vec<u8> {
        format!(r#"{{"event_id":"evt_1","event_type":"{event_type}","version":1,"occurred_at":7,"data":{data}}}"#).into_bytes()
    }

    #[test]
    fn invoice_events_carry_their_order() {
        let (_, change) = change_of(&body("invoice.paid", r#"{"invoice_id":"inv_1","order":{"external_id":"o-1","amount":"10.50","currency":"usdt"}}"#)).unwrap();
        let Change::Invoice { status, order, .. } = change else {
            panic!()
        };
        assert_eq!(status, InvoiceStatus::Paid);
        assert_eq!(order.external_id.as_deref(), Some("o-1"));
        assert_eq!(order.amount.unwrap().as_str(), "10.50");
        assert_eq!(order.currency.as_deref(), Some("USDT"));
    }

    #[test]
    fn deposits_credit_only_final_confirmations() {
        let confirmed = r#"{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c-42","net":"99.00","currency":"TRX"}"#;
        let (_, c) = change_of(&body("payment_channel.deposit.confirmed", confirmed)).unwrap();
        assert!(
            matches!(c, Change::Deposit { credit: Some(Credit { ref net, .. }), .. } if net.as_str() == "99.00")
        );
        let (_, c) = change_of(&body(
            "payment_channel.deposit.confirmed",
            r#"{"id":"pcd_1","is_final":false,"net":"1"}"#,
        ))
        .unwrap();
        assert!(matches!(c, Change::Deposit { credit: None, .. }));
        let (_, c) = change_of(&body(
            "payment_channel.deposit.reorged",
            r#"{"id":"pcd_1","is_final":true,"net":"1"}"#,
        ))
        .unwrap();
        assert!(matches!(
            c,
            Change::Deposit {
                credit: None,
                status: DepositStatus::Reorged,
                ..
            }
        ));
        let err = change_of(&body("payment_channel.deposit.confirmed", r#"{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c","net":1.5,"currency":"TRX"}"#)).unwrap_err();
        assert!(err.to_string().contains("data.net"), "{err}");
    }

    #[test]
    fn decimals_compare_exactly() {
        assert!(same_decimal("10.5", "10.50"));
        assert!(same_decimal("010.500", "10.5"));
        assert!(same_decimal("0", "-0.00"));
        assert!(!same_decimal("10.5", "10.05"));
        assert!(!same_decimal("10.500000000000000001", "10.5"));
    }

    #[test]
    fn unknown_types_and_statuses_are_ignored() {
        let (_, c) = change_of(&body("payout.batch", "{}")).unwrap();
        assert!(matches!(c, Change::Ignore { .. }));
        let (_, c) = change_of(&body("invoice.refunded", r#"{"invoice_id":"inv_1"}"#)).unwrap();
        assert!(matches!(c, Change::Ignore { .. }));
    }
}
