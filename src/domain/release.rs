//! Releasing an invoice by hand: an operator fulfils a held, late-paid or unconfirmed invoice on
//! their word. The rules here decide whether an invoice waits for a release and what a store's
//! report of the release write means; the store reads and writes only.

use std::future::Future;

use super::effect::FulfilmentEffect;
use super::fulfil::{Applied, OrderRef, Source};
use super::ingest::PortError;
use super::outcome::{Refusal, Written};
use super::status::InvoiceStatus;

/// An invoice as the resource table holds it, for a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceSeen {
    /// Its status, if it has one (a refund's note may have created the item first).
    pub status: Option<InvoiceStatus>,
    /// Paid, but not as the registered order says.
    pub held: bool,
    /// Paid after it closed.
    pub paid_late: bool,
    /// A second payment for an order another invoice fulfilled.
    pub duplicate_of: Option<String>,
    /// Paid back by a completed refund.
    pub refunded: bool,
    /// The order as recorded on the invoice (fields may be missing).
    pub order: OrderRef,
}

/// What an invoice waits for, and so the condition its release is written under (the invoice
/// still as it was read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Never recorded here (only an unconfirmed delivery names it): becomes paid.
    Unrecorded,
    /// Open at this status (an unconfirmed payment): becomes paid.
    Open(InvoiceStatus),
    /// Paid at this status and held: the hold is lifted.
    Held(InvoiceStatus),
    /// Closed at this status, paid late: fulfilled, the status kept.
    PaidLate(InvoiceStatus),
}

impl Waiting {
    /// Whether the release moves the invoice to `paid`.
    #[must_use]
    pub fn becomes_paid(self) -> bool {
        matches!(self, Self::Unrecorded | Self::Open(_))
    }

    /// The status the fulfilment records.
    #[must_use]
    pub fn paid_status(self) -> InvoiceStatus {
        match self {
            Self::Held(status) if status.fulfils() => status,
            _ => InvoiceStatus::Paid,
        }
    }
}

/// Why a release did not fulfil.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// Nothing there to release (named in words an operator acts on).
    #[error("{0}")]
    NotReleasable(String),
    /// The store failed.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// Whether `invoice_id` waits for a release: `Err(Ok(applied))` when there is nothing to do
/// (it is fulfilled already), `Err(Err(why))` when it must not be released.
///
/// # Errors
/// As above.
pub fn waiting(
    invoice_id: &str,
    fulfilled: bool,
    seen: Option<&InvoiceSeen>,
) -> Result<Waiting, Result<Applied, ReleaseError>> {
    if fulfilled {
        return Err(Ok(Applied::AlreadyFinal));
    }
    let Some(seen) = seen else {
        return Ok(Waiting::Unrecorded);
    };
    if seen.refunded {
        return Err(Err(ReleaseError::NotReleasable(format!(
            "{invoice_id} was refunded: nothing to release"
        ))));
    }
    if let Some(other) = &seen.duplicate_of {
        return Err(Err(ReleaseError::NotReleasable(format!(
            "{invoice_id} is a second payment for an order {other} fulfilled: refund it, do not release it"
        ))));
    }
    match seen.status {
        None => Err(Err(ReleaseError::NotReleasable(format!(
            "{invoice_id} has no status here, only a note: nothing to release"
        )))),
        Some(status) if !status.is_final() => Ok(Waiting::Open(status)),
        Some(status) if status.fulfils() && seen.held => Ok(Waiting::Held(status)),
        Some(status) if seen.paid_late => Ok(Waiting::PaidLate(status)),
        Some(status) if status.fulfils() => Err(Ok(Applied::AlreadyFinal)),
        Some(status) => Err(Err(ReleaseError::NotReleasable(format!(
            "{invoice_id} closed {status} and was never paid: nothing to release"
        )))),
    }
}

/// What the store's report of a release write means.
///
/// # Errors
/// [`ReleaseError::NotReleasable`] when another invoice fulfilled the order meanwhile.
pub fn released(written: Written, order: &OrderRef) -> Result<Applied, ReleaseError> {
    match written {
        Written::Committed => Ok(Applied::Fulfilled),
        Written::Refused(Refusal::OrderClaimed { invoice_id }) => {
            Err(ReleaseError::NotReleasable(format!(
                "order {} was already fulfilled by {invoice_id}: this payment is a duplicate; refund it",
                order.external_id.as_deref().unwrap_or("?"),
            )))
        }
        // A webhook, a reconciliation or another release got there first.
        Written::AlreadyProcessed | Written::Refused(_) => Ok(Applied::AlreadyFinal),
    }
}

/// The release as one write.
#[derive(Debug, Clone)]
pub struct Release<'a> {
    /// `inv_…`.
    pub invoice_id: &'a str,
    /// What it waited for (the write's condition).
    pub waiting: Waiting,
    /// The order it pays for (as recorded, else from its unconfirmed delivery).
    pub order: &'a OrderRef,
    /// The person who released it.
    pub source: &'a Source,
    /// Why, as they said.
    pub reason: &'a str,
}

/// What a release reads and writes.
pub trait ReleaseStore: Send + Sync {
    /// The invoice, if recorded, and whether it has its fulfilment.
    fn invoice_seen(
        &self,
        invoice_id: &str,
    ) -> impl Future<Output = Result<(Option<InvoiceSeen>, bool), PortError>> + Send;

    /// Writes the release, conditional on the invoice still waiting as it was read, with
    /// `effect`'s items and the order's claim, all or nothing.
    fn write_release(
        &self,
        release: &Release<'_>,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> impl Future<Output = Result<Written, PortError>> + Send;
}

/// Fulfils a held, late-paid or unconfirmed invoice on a person's word, through the same
/// conditional writes as a webhook: the fulfilment only if absent, the order's claim only if
/// absent, and the invoice only as it was read (so a racing webhook, a second release or a
/// refund makes the outcome `already_final`, never a second fulfilment).
///
/// # Errors
/// [`ReleaseError::NotReleasable`] for an invoice that is not waiting for a release (never
/// paid, a duplicate payment to refund, or its order fulfilled by another invoice).
pub async fn release<S: ReleaseStore>(
    store: &S,
    invoice_id: &str,
    fallback_order: &OrderRef,
    actor: &str,
    reason: Option<&str>,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Result<Applied, ReleaseError> {
    let (seen, fulfilled) = store.invoice_seen(invoice_id).await?;
    let waiting = match waiting(invoice_id, fulfilled, seen.as_ref()) {
        Ok(waiting) => waiting,
        Err(decided) => return decided,
    };
    let recorded = seen.map(|s| s.order);
    let order = OrderRef {
        external_id: recorded
            .as_ref()
            .and_then(|o| o.external_id.clone())
            .or_else(|| fallback_order.external_id.clone()),
        amount: recorded
            .as_ref()
            .and_then(|o| o.amount.clone())
            .or_else(|| fallback_order.amount.clone()),
        currency: recorded
            .as_ref()
            .and_then(|o| o.currency.clone())
            .or_else(|| fallback_order.currency.clone()),
    };
    let source = Source::Manual {
        actor: actor.to_owned(),
    };
    let release = Release {
        invoice_id,
        waiting,
        order: &order,
        source: &source,
        reason: reason.unwrap_or("released by hand"),
    };
    let written = store.write_release(&release, effect, now_ms).await?;
    let applied = released(written, &order)?;
    if applied == Applied::Fulfilled {
        tracing::warn!(
            invoice_id,
            actor,
            reason,
            "invoice released by hand: fulfilled"
        );
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(status: InvoiceStatus) -> InvoiceSeen {
        InvoiceSeen {
            status: Some(status),
            held: false,
            paid_late: false,
            duplicate_of: None,
            refunded: false,
            order: OrderRef {
                external_id: Some("o-1".into()),
                amount: None,
                currency: None,
            },
        }
    }

    #[test]
    fn what_waits_for_a_release() {
        use InvoiceStatus as I;
        let held = InvoiceSeen {
            held: true,
            ..seen(I::PaidOver)
        };
        let late = InvoiceSeen {
            paid_late: true,
            ..seen(I::Expired)
        };
        let duplicate = InvoiceSeen {
            duplicate_of: Some("inv_0".into()),
            ..seen(I::Paid)
        };
        assert_eq!(waiting("inv_1", false, None), Ok(Waiting::Unrecorded));
        assert_eq!(
            waiting("inv_1", false, Some(&seen(I::Confirming))),
            Ok(Waiting::Open(I::Confirming))
        );
        assert_eq!(
            waiting("inv_1", false, Some(&held)),
            Ok(Waiting::Held(I::PaidOver))
        );
        assert_eq!(
            waiting("inv_1", false, Some(&late)),
            Ok(Waiting::PaidLate(I::Expired))
        );
        assert_eq!(
            waiting("inv_1", true, Some(&held)),
            Err(Ok(Applied::AlreadyFinal)),
            "fulfilled already"
        );
        assert_eq!(
            waiting("inv_1", false, Some(&seen(I::Paid))),
            Err(Ok(Applied::AlreadyFinal))
        );
        assert!(matches!(
            waiting("inv_1", false, Some(&duplicate)),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("refund")
        ));
        assert!(matches!(
            waiting("inv_1", false, Some(&seen(I::Cancelled))),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("never paid")
        ));
        let refunded = InvoiceSeen {
            refunded: true,
            ..held.clone()
        };
        assert!(matches!(
            waiting("inv_1", false, Some(&refunded)),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("refunded")
        ));
        assert_eq!(Waiting::Held(I::PaidOver).paid_status(), I::PaidOver);
        assert_eq!(Waiting::PaidLate(I::Expired).paid_status(), I::Paid);
        assert!(Waiting::Open(I::Confirming).becomes_paid());
        assert!(!Waiting::Held(I::Paid).becomes_paid());
    }
}
