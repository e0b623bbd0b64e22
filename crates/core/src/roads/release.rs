//! Releasing an invoice by hand: an operator fulfils a held or late-paid payment on their word.
//! The rules here decide whether an invoice waits for a release (a payment recorded here must
//! wait: anything only an unconfirmed delivery names is for `recheck`, never shipped on a
//! release, since a forged delivery names just the same) and what a store's report of the
//! release write means; the store reads and writes only.

use std::future::Future;

use crate::money::change::{Applied, OrderRef, Source};
use crate::money::effect::{FulfilmentEffect, PaidInvoice};
use crate::money::outcome::{Refusal, Written, refusal, winner};
use crate::money::write;
use crate::roads::fulfil::ResourceStore;
use crate::roads::ingest::PortError;

pub use crate::money::invoice::InvoiceSeen;
use crate::money::invoice::Standing;

pub use crate::money::write::Waiting;

/// What the unconfirmed deliveries naming an invoice hold, as a release reads them (the first
/// that applies: a refund, then a payment, then a change that pays nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// No unconfirmed delivery names it.
    Nothing,
    /// An unconfirmed refund of it (`wdr_…`): the order may have been paid back, so nothing is
    /// released before the refund is rechecked.
    Refund(String),
    /// An unconfirmed payment (`invoice.paid`, `invoice.paid_over`) naming this order: Paymos
    /// does not show it paid, so `recheck` applies it once Paymos does; never a release (a
    /// forged delivery names an order just the same).
    Payment(OrderRef),
    /// Only changes that pay nothing (a closure such as `invoice.expired`, or an open status;
    /// the event type): `recheck` applies them, a release has nothing to ship.
    NoPayment(String),
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
/// (it is fulfilled already), `Err(Err(why))` when it must not be released. Only a payment
/// recorded here that waits for a person is released (held, or paid late); never one only an
/// unconfirmed delivery names, never while a refund of it waits unconfirmed.
///
/// # Errors
/// As above.
pub fn waiting(
    invoice_id: &str,
    fulfilled: bool,
    seen: Option<&InvoiceSeen>,
    named: &Named,
) -> Result<Waiting, Result<Applied, ReleaseError>> {
    let refuse = |why: String| Err(Err(ReleaseError::NotReleasable(why)));
    if fulfilled {
        return Err(Ok(Applied::AlreadyFinal));
    }
    let standing = seen.map_or(Standing::Clear, InvoiceSeen::standing);
    match standing {
        Standing::Refunded => {
            return refuse(format!(
                "{invoice_id} was refunded in full: nothing to release"
            ));
        }
        Standing::DuplicateOf(other) => {
            return refuse(format!(
                "{invoice_id} is a second payment for an order {other} fulfilled: refund it, do not release it"
            ));
        }
        Standing::Released | Standing::ShippedOtherwise(_) => {
            return Err(Ok(Applied::AlreadyFinal));
        }
        Standing::OrderUnknown => {
            return refuse(format!(
                "{invoice_id} is paid, but its order is known nowhere: nothing to release. Name it: `paymos-inbox mark-paid {invoice_id} --order-id <order> --actor <you>`"
            ));
        }
        Standing::Clear | Standing::Held | Standing::PaidLate | Standing::AfterRefund => {}
    }
    if seen.is_some_and(|s| s.projects_disagree) {
        // The record's project is one delivery's word against another's: a release would ship
        // that project's order on it.
        return refuse(format!(
            "{invoice_id}'s events named two projects: nothing ships on either's word. Check at Paymos which project's invoice it is, then `paymos-inbox release {invoice_id} --project <its project> --actor <you> --reason …` (or `paymos-inbox reconcile --apply` with the API: Paymos' project replaces the record's)"
        ));
    }
    if let Some(s) = seen
        && let Some(disputed) = &s.order_disputed
    {
        // An invoice pays one order: which of the two its events named is a person's to say.
        let recorded = s.order.external_id.as_deref().unwrap_or("?");
        return refuse(format!(
            "{invoice_id}'s events named two orders, {recorded} and then {disputed} with its payment: an invoice pays one order, and nothing ships on either word. Check the invoice's order at Paymos, then `paymos-inbox release {invoice_id} --order-id <its order> --actor <you>` (it ships that order, once), or refund it in full"
        ));
    }
    match (seen.and_then(|s| s.status), named) {
        (_, Named::Refund(withdrawal_id)) => refuse(format!(
            "a refund of {invoice_id} ({withdrawal_id}) waits unconfirmed: the order may have been paid back. Run `paymos-inbox recheck {withdrawal_id}` first; release only if the payment still waits after it"
        )),
        (Some(status), _) if status.fulfils() && standing == Standing::Held => {
            Ok(Waiting::Held(status))
        }
        (Some(status), _) if status.fulfils() && standing == Standing::AfterRefund => {
            Ok(Waiting::AfterRefund(status))
        }
        (Some(status), _)
            if standing == Standing::PaidLate
                || (standing == Standing::AfterRefund && seen.is_some_and(|s| s.paid_late)) =>
        {
            Ok(Waiting::PaidLate(status))
        }
        (Some(status), _) if status.fulfils() => Err(Ok(Applied::AlreadyFinal)),
        (Some(status), _) if status.is_final() => refuse(format!(
            "{invoice_id} closed {status} and was never paid: nothing to release"
        )),
        (_, Named::Payment(_)) => refuse(format!(
            "{invoice_id} is paid only by an unconfirmed delivery: Paymos does not show it paid, and a forged delivery would look the same. `paymos-inbox recheck {invoice_id}` applies it once Paymos does; if Paymos shows it paid otherwise, `paymos-inbox mark-paid {invoice_id} --actor <you>` with the API applies Paymos' own payment; a person's word without Paymos' ships nothing Paymos did not confirm"
        )),
        (_, Named::NoPayment(event_type)) => refuse(format!(
            "{invoice_id} is named only by an unconfirmed {event_type}, which is not a payment: nothing to release. `paymos-inbox recheck {invoice_id}` applies what Paymos says now"
        )),
        (None, Named::Nothing) => refuse(format!(
            "{invoice_id} is unknown here and no unconfirmed payment names it: check the invoice id (`paymos-inbox exceptions` lists what waits)"
        )),
        (Some(status), Named::Nothing) => refuse(format!(
            "{invoice_id} is open ({status}) and no payment of it waits here: wait for its payment, or run `paymos-inbox reconcile` if Paymos shows it paid"
        )),
    }
}

/// What the store's report of a release write means.
///
/// # Errors
/// [`ReleaseError::NotReleasable`] when another invoice fulfilled the order meanwhile.
pub fn released(written: Written, order: &OrderRef) -> Result<Applied, ReleaseError> {
    match written {
        Written::Committed => Ok(Applied::Fulfilled),
        Written::Refused(Refusal::OrderMismatch) => Err(ReleaseError::NotReleasable(format!(
            "the payment ({} {}) is not what order {} was registered for: check it, then release with --override-amount --reason \"…\", or refund it",
            order.amount.as_ref().map_or("?", |a| a.as_str()),
            order.currency.as_deref().unwrap_or("?"),
            order.external_id.as_deref().unwrap_or("?"),
        ))),
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

/// Who releases, why, and whether they override the amount check.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseBy<'a> {
    /// The person (kept as `manual:<actor>`).
    pub actor: &'a str,
    /// Why, as they said (required to override the amount check).
    pub reason: Option<&'a str>,
    /// Fulfil although the amount differs from the registered order.
    pub override_amount: bool,
    /// The project whose order this is, as the person checked it (`--project`): required where
    /// the invoice's events named two projects, and refused where it is not the record's.
    pub project: Option<&'a str>,
    /// The order this payment is for, as the person checked it at Paymos (`--order-id`):
    /// required where the invoice's events named two orders (one of the two), and refused where
    /// it is not the record's.
    pub order: Option<&'a str>,
}

/// What a release reads; it writes through [`ResourceStore`].
pub trait ReleaseStore: ResourceStore {
    /// The invoice, if recorded, and whether it has its fulfilment.
    fn invoice_seen(
        &self,
        invoice_id: &str,
    ) -> impl Future<Output = Result<(Option<InvoiceSeen>, bool), PortError>> + Send;
}

impl<T: ReleaseStore> ReleaseStore for std::sync::Arc<T> {
    fn invoice_seen(
        &self,
        invoice_id: &str,
    ) -> impl Future<Output = Result<(Option<InvoiceSeen>, bool), PortError>> + Send {
        (**self).invoice_seen(invoice_id)
    }
}

/// Fulfils a held, late-paid or unconfirmed invoice on a person's word, through the same
/// conditional writes as a webhook: the fulfilment only if absent, the order's claim only if
/// absent, the registered order's amount guard unless the person overrides it, and the invoice
/// only as it was read (so a racing webhook, a second release or a refund makes the outcome
/// `already_final`, never a second fulfilment). `unconfirmed` is the order of the unconfirmed
/// payment that names the invoice, if one does ([`release_named`] with [`Named::Payment`]).
///
/// # Errors
/// As [`release_named`].
pub async fn release<S: ReleaseStore>(
    store: &S,
    invoice_id: &str,
    unconfirmed: Option<&OrderRef>,
    by: &ReleaseBy<'_>,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Result<Applied, ReleaseError> {
    let named = unconfirmed.map_or(Named::Nothing, |order| Named::Payment(order.clone()));
    release_named(store, invoice_id, &named, by, effect, now_ms).await
}

/// [`release`], with what the unconfirmed deliveries naming the invoice hold (`named`): only a
/// payment is shipped; an invoice named only by an unconfirmed closure, or whose refund waits
/// unconfirmed, is refused with the `recheck` to run.
///
/// # Errors
/// [`ReleaseError::NotReleasable`] for an invoice that is not waiting for a release (unknown,
/// open, never paid, refunded, named only by a change that pays nothing, a refund of it waiting
/// unconfirmed, a duplicate payment to refund, its order fulfilled by another invoice, or an
/// amount that differs without an override).
pub async fn release_named<S: ReleaseStore>(
    store: &S,
    invoice_id: &str,
    named: &Named,
    by: &ReleaseBy<'_>,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Result<Applied, ReleaseError> {
    if by.override_amount && by.reason.is_none_or(|r| r.trim().is_empty()) {
        return Err(ReleaseError::NotReleasable(
            "--override-amount needs --reason: say why this amount is accepted".into(),
        ));
    }
    let (seen, fulfilled) = store.invoice_seen(invoice_id).await?;
    let waiting = match waiting(invoice_id, fulfilled, seen.as_ref(), named) {
        Ok(waiting) => waiting,
        Err(decided) => return decided,
    };
    let refunds_seen = seen.as_ref().map_or(0, |s| s.refunds.len());
    // The record's order only: what an unconfirmed delivery names is not a fact (a forgery
    // names an order just the same).
    let order = seen.map_or_else(OrderRef::none, |s| s.order);
    if order.external_id.is_none() {
        // Never shipped as "no order": a person names it with `mark-paid --order-id`.
        return Err(ReleaseError::NotReleasable(format!(
            "no order is known for {invoice_id}: nothing can ship under it. If the payment is genuine, `paymos-inbox mark-paid {invoice_id} --order-id <order> --actor <you>`"
        )));
    }
    let source = Source::Manual {
        actor: by.actor.to_owned(),
    };
    let paid = PaidInvoice {
        invoice_id,
        status: waiting.paid_status(),
        order: &order,
        source: &source,
        at_ms: now_ms,
    };
    let writes = write::release(
        &paid,
        (waiting, refunds_seen),
        by.reason.unwrap_or("released by hand"),
        !by.override_amount,
        effect.writes(&paid),
    );
    let refused = winner(store.write(&writes).await?)?;
    let written = refused.map_or(Written::Committed, |r| refusal(&source, None, &r));
    let applied = released(written, &order)?;
    tracing::warn!(
        invoice_id,
        actor = by.actor,
        reason = by.reason,
        amount_overridden = by.override_amount,
        outcome = %applied,
        "invoice released by hand"
    );
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::money::invoice::Refund;
    use crate::money::status::InvoiceStatus;

    fn paid() -> Named {
        Named::Payment(OrderRef::none())
    }

    fn seen(status: InvoiceStatus) -> InvoiceSeen {
        InvoiceSeen {
            order: OrderRef {
                external_id: Some("o-1".into()),
                amount: None,
                currency: None,
                project: None,
                home: false,
                unlisted: false,
            },
            ..InvoiceSeen::with_status(Some(status))
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
        // Only an unconfirmed payment names it: recheck, never release (a forgery looks alike).
        for unrecorded_or_open in [None, Some(&seen(I::Confirming))] {
            assert!(matches!(
                waiting("inv_1", false, unrecorded_or_open, &paid()),
                Err(Err(ReleaseError::NotReleasable(why))) if why.contains("recheck inv_1")
            ));
        }
        assert_eq!(
            waiting("inv_1", false, Some(&held), &Named::Nothing),
            Ok(Waiting::Held(I::PaidOver))
        );
        assert_eq!(
            waiting("inv_1", false, Some(&late), &Named::Nothing),
            Ok(Waiting::PaidLate(I::Expired))
        );
        assert_eq!(
            waiting("inv_1", true, Some(&held), &Named::Nothing),
            Err(Ok(Applied::AlreadyFinal)),
            "fulfilled already"
        );
        assert_eq!(
            waiting("inv_1", false, Some(&seen(I::Paid)), &Named::Nothing),
            Err(Ok(Applied::AlreadyFinal))
        );
        assert!(matches!(
            waiting("inv_1", false, Some(&duplicate), &Named::Nothing),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("refund")
        ));
        assert!(matches!(
            waiting("inv_1", false, Some(&seen(I::Cancelled)), &Named::Nothing),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("never paid")
        ));
        let refunded = InvoiceSeen {
            refunds: vec![Refund {
                withdrawal_id: "wdr_1".into(),
                amount: None,
                currency: None,
                mode: Some(crate::money::invoice::RefundMode::Full),
                completed_at: None,
            }],
            ..held.clone()
        };
        assert!(matches!(
            waiting("inv_1", false, Some(&refunded), &Named::Nothing),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("refunded")
        ));
        // Unknown or open with no unconfirmed delivery: nothing was paid here to release.
        assert!(matches!(
            waiting("inv_1", false, None, &Named::Nothing),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("unknown")
        ));
        assert!(matches!(
            waiting("inv_1", false, Some(&seen(I::Confirming)), &Named::Nothing),
            Err(Err(ReleaseError::NotReleasable(why))) if why.contains("open")
        ));
        // A partial refund leaves a held payment waiting.
        let partly = InvoiceSeen {
            refunds: vec![Refund {
                amount: crate::money::status::Amount::parse("5"),
                currency: Some("USDT".into()),
                mode: Some(crate::money::invoice::RefundMode::Overpayment),
                ..refunded.refunds[0].clone()
            }],
            ..held.clone()
        };
        assert_eq!(
            waiting("inv_1", false, Some(&partly), &Named::Nothing),
            Ok(Waiting::Held(I::PaidOver))
        );
        // Only a payment is shipped: a closure or an open status named by an unconfirmed
        // delivery is for `recheck`, and a refund waiting unconfirmed blocks every release.
        let closure = Named::NoPayment("invoice.expired".into());
        for invoice in [None, Some(&seen(I::Confirming))] {
            assert!(matches!(
                waiting("inv_1", false, invoice, &closure),
                Err(Err(ReleaseError::NotReleasable(why))) if why.contains("invoice.expired, which is not a payment")
            ));
        }
        let refund = Named::Refund("wdr_9".into());
        for invoice in [None, Some(&seen(I::Confirming)), Some(&held), Some(&late)] {
            assert!(matches!(
                waiting("inv_1", false, invoice, &refund),
                Err(Err(ReleaseError::NotReleasable(why))) if why.contains("recheck wdr_9")
            ));
        }
        assert_eq!(
            waiting("inv_1", false, Some(&held), &closure),
            Ok(Waiting::Held(I::PaidOver)),
            "a held payment waits whatever else is unconfirmed"
        );
        assert_eq!(Waiting::Held(I::PaidOver).paid_status(), I::PaidOver);
        assert_eq!(Waiting::PaidLate(I::Expired).paid_status(), I::Paid);
    }
}
