//! A delivery that waits for a person, read: what it would change (and so its way out),
//! whether its invoice settled it since, and what the unconfirmed ones say of an invoice.

use crate::money::change::{Applied, Change, OrderRef, change_of};
use crate::money::status::InvoiceStatus;
use crate::roads::ingest::PortError;
use crate::roads::release::Named;
use crate::wire::envelope::Envelope;

use super::{ExceptionStore, OutcomeRecord, ReviewLedger};

/// What a waiting delivery would change, and so its way out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pending {
    /// A payment (`invoice.paid`, `invoice.paid_over`) naming `order`: recheck (never a release:
    /// a forgery names an order just the same).
    Payment { invoice_id: String, order: OrderRef },
    /// Any other invoice status (a closure, an open status): it pays nothing; recheck.
    InvoiceStatus { invoice_id: String },
    /// A refund (of `invoice_id`, when it names one): recheck; its invoice ships nothing
    /// meanwhile.
    Refund {
        withdrawal_id: String,
        invoice_id: Option<String>,
    },
    /// A payout: recheck.
    Payout { withdrawal_id: String },
    /// A deposit: recheck (it credits its payer once).
    Deposit { deposit_id: String },
    /// A body that reads as no change (applied by hand).
    Other,
}

impl Pending {
    pub(super) fn of(change: &Change) -> Self {
        match change {
            Change::Invoice {
                invoice_id,
                status,
                order,
                ..
            } if status.fulfils() => Self::Payment {
                invoice_id: invoice_id.clone(),
                order: order.clone(),
            },
            Change::Invoice { invoice_id, .. } => Self::InvoiceStatus {
                invoice_id: invoice_id.clone(),
            },
            Change::Withdrawal {
                withdrawal_id,
                kind,
                invoice_id,
                ..
            } if kind == "refund" => Self::Refund {
                withdrawal_id: withdrawal_id.clone(),
                invoice_id: invoice_id.clone(),
            },
            Change::Withdrawal { withdrawal_id, .. } => Self::Payout {
                withdrawal_id: withdrawal_id.clone(),
            },
            Change::Deposit { deposit_id, .. } => Self::Deposit {
                deposit_id: deposit_id.clone(),
            },
            _ => Self::Other,
        }
    }

    /// The refund it is of `invoice_id`, if it is one.
    pub(super) fn refund_of(&self, invoice_id: &str) -> Option<&str> {
        match self {
            Self::Refund {
                withdrawal_id,
                invoice_id: Some(refunded),
            } if refunded == invoice_id => Some(withdrawal_id),
            _ => None,
        }
    }

    /// The payment it is of `invoice_id`, if it is one.
    pub(super) fn payment_of(&self, invoice_id: &str) -> Option<&OrderRef> {
        match self {
            Self::Payment {
                invoice_id: paid,
                order,
            } if paid == invoice_id => Some(order),
            _ => None,
        }
    }
}

/// A delivery that waits for a person, its body read once.
pub(super) struct Waiting {
    pub(super) record: OutcomeRecord,
    pub(super) read: Option<(Envelope, Change)>,
    pub(super) pending: Pending,
}

impl Waiting {
    pub(super) fn read(record: OutcomeRecord) -> Self {
        let read = Envelope::parse(&record.delivery.body).ok().map(|envelope| {
            let change = change_of(&envelope);
            (envelope, change)
        });
        let pending = read
            .as_ref()
            .map_or(Pending::Other, |(_, c)| Pending::of(c));
        Self {
            record,
            read,
            pending,
        }
    }

    pub(super) fn unconfirmed(&self) -> bool {
        self.record.outcome == Applied::Unconfirmed
    }

    pub(super) fn order_unknown(&self) -> bool {
        self.record.outcome == Applied::OrderUnknown
    }

    pub(super) fn project_unknown(&self) -> bool {
        self.record.outcome == Applied::ProjectUnknown
    }

    pub(super) fn order_conflict(&self) -> bool {
        self.record.outcome == Applied::OrderConflict
    }

    /// Whether a re-check of `resource_id` reads it: its own resource, or a refund of that
    /// invoice.
    pub(super) fn concerns(&self, resource_id: &str) -> bool {
        self.record.delivery.resource_id.as_deref() == Some(resource_id)
            || self.pending.refund_of(resource_id).is_some()
    }
}

/// Whether what a waiting delivery of an invoice asked for was settled since, by its invoice's
/// record: nothing of it waits any more (neither `exceptions` lists it nor `recheck` asks
/// Paymos about it again).
pub(super) async fn settled_since<S: ExceptionStore>(
    store: &S,
    delivery: &Waiting,
) -> Result<bool, PortError> {
    let resource = delivery.record.delivery.resource_id.as_deref();
    let Some(invoice) = resource.filter(|r| r.starts_with("inv_")) else {
        return Ok(false);
    };
    let (seen, fulfilled) = store.invoice_seen(invoice).await?;
    // Fulfilled since (released, reconciled, or another event); an order conflict is of a
    // fulfilled invoice, and waits until a person resolves it.
    if fulfilled && !delivery.order_conflict() {
        return Ok(true);
    }
    // A payment of an order known nowhere, applied since under its order (held, a duplicate,
    // late, refunded): the invoice's own line says what waits now. A refund settles it only if
    // it returned this payment (by Paymos' clock): a payment made after a full refund is a new
    // one, and still waits for its order.
    let paid_at = delivery.read.as_ref().map(|(e, _)| e.occurred_at);
    let paid_since = seen.as_ref().is_some_and(|s| {
        s.status.is_some_and(InvoiceStatus::fulfils)
            || s.paid_late
            || s.refunded_in_full_at(s.payment_at.or(paid_at))
    });
    if (delivery.order_unknown() || delivery.project_unknown()) && paid_since {
        return Ok(true);
    }
    // A person named its project (`mark-paid --project`): the invoice's own line says what
    // waits now (its order).
    Ok(delivery.project_unknown()
        && seen.is_some_and(|s| s.awaits_order && s.order.names_project()))
}

/// Every delivery with one of `outcomes`, read, oldest first.
pub(super) async fn waiting<L: ReviewLedger>(
    ledger: &L,
    outcomes: &[Applied],
) -> Result<Vec<Waiting>, PortError> {
    Ok(ledger
        .with_outcomes(outcomes, None)
        .await?
        .into_iter()
        .map(Waiting::read)
        .collect())
}

/// The unconfirmed refund of `invoice_id` among `waiting`, if one waits.
pub(super) fn refund_waiting<'a>(waiting: &'a [Waiting], invoice_id: &str) -> Option<&'a str> {
    waiting
        .iter()
        .filter(|w| w.unconfirmed())
        .find_map(|w| w.pending.refund_of(invoice_id))
}

/// What the unconfirmed deliveries among `waiting` say of `invoice_id`, for a release: a refund
/// of it first, then its latest payment, then a change of it that pays nothing.
pub(super) fn named(invoice_id: &str, waiting: &[Waiting]) -> Named {
    if let Some(withdrawal_id) = refund_waiting(waiting, invoice_id) {
        return Named::Refund(withdrawal_id.to_owned());
    }
    let unconfirmed = || waiting.iter().filter(|w| w.unconfirmed());
    if let Some(order) = unconfirmed()
        .rev()
        .find_map(|w| w.pending.payment_of(invoice_id))
    {
        return Named::Payment(order.clone());
    }
    unconfirmed()
        .find(|w| matches!(&w.pending, Pending::InvoiceStatus { invoice_id: i } if i == invoice_id))
        .map_or(Named::Nothing, |w| {
            Named::NoPayment(w.record.delivery.event_type.clone())
        })
}
