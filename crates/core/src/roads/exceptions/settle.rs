//! The ways out on a person's word: a release (a held, late or unconfirmed payment
//! fulfilled), and a resolution (a delivery settled outside the stack, taken off the list).

use crate::money::change::Applied;
use crate::money::effect::FulfilmentEffect;
use crate::roads::ingest::PortError;
use crate::roads::release::{ReleaseBy, ReleaseError, release_named};
use crate::wire::signature::Environment;

use super::pending::{named, refund_waiting, settled_since, waiting};
use super::{ExceptionStore, OutcomeRecord, Resolution, ReviewLedger};

/// Releases `invoice_id` with the stack's `effect` (see [`crate::roads::release::release_named`]):
/// only where a payment waits (held, paid late, or an unconfirmed payment), never while a
/// refund of it waits unconfirmed; the unconfirmed payments of it are marked resolved.
///
/// # Errors
/// [`ReleaseError`] when it is not releasable or a call fails.
pub async fn release<S: ExceptionStore, L: ReviewLedger>(
    state: &S,
    ledger: &L,
    invoice_id: &str,
    by: &ReleaseBy<'_>,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Result<Applied, ReleaseError> {
    let waiting = waiting(ledger, &[Applied::Unconfirmed]).await?;
    let named = named(invoice_id, &waiting);
    let applied = release_named(state, invoice_id, &named, by, effect, now_ms).await?;
    for paid in waiting
        .iter()
        .filter(|w| w.pending.payment_of(invoice_id).is_some())
    {
        ledger
            .mark_resolved(
                &paid.record.delivery.key(),
                Resolution::Released,
                &format!("manual:{}", by.actor),
                now_ms,
            )
            .await?;
    }
    Ok(applied)
}

/// Why a person's word that `invoice_id` was paid, given without Paymos' (`mark-paid` with no
/// API), is refused, if it is. On a stack that runs the reverse check (`checked`), always: only
/// Paymos' word makes an invoice paid there (a signature alone is not enough, nor is a word),
/// whatever waits or was resolved, so neither a forgery taken off the list nor an invoice no
/// delivery named ships on a word. Elsewhere, where Paymos was asked about a payment or a
/// refund of it and did not confirm it (a delivery of it waits `unconfirmed`, not settled
/// since: a stack whose check the caller was not told of). Only Paymos' word ships it
/// (`recheck`, or `mark-paid` with the API); a forgery is taken off the list by
/// `exceptions --resolve`.
///
/// # Errors
/// [`PortError`] when the ledger or the store fails.
pub async fn refuses_word<S: ExceptionStore, L: ReviewLedger>(
    state: &S,
    ledger: &L,
    invoice_id: &str,
    checked: bool,
) -> Result<Option<String>, PortError> {
    if checked {
        return Ok(Some(format!(
            "{invoice_id}: this stack runs the reverse check, so only Paymos' word makes an invoice paid here: a person's word without the API ships nothing. `paymos-inbox mark-paid {invoice_id} --actor <you>` with the API's key (PAYMOS_API_KEY, PAYMOS_API_SECRET) applies Paymos' own invoice, once; `paymos-inbox recheck {invoice_id}` applies a delivery Paymos now confirms"
        )));
    }
    let waiting = waiting(ledger, &[Applied::Unconfirmed]).await?;
    if let Some(withdrawal_id) = refund_waiting(&waiting, invoice_id) {
        return Ok(Some(format!(
            "{invoice_id}: a refund of it ({withdrawal_id}) waits unconfirmed: the order may have been paid back. Run `paymos-inbox recheck {withdrawal_id}` first, with the API"
        )));
    }
    for w in &waiting {
        if w.pending.payment_of(invoice_id).is_some() && !settled_since(state, w).await? {
            let event_id = &w.record.delivery.event_id;
            let why = w.record.reason.as_deref().unwrap_or("no answer recorded");
            return Ok(Some(format!(
                "{invoice_id}: Paymos was asked about the payment delivery {event_id} announced and did not confirm it ({why}); a person's word without Paymos' does not ship it. `paymos-inbox recheck {invoice_id}` applies it once Paymos shows it paid; `paymos-inbox mark-paid {invoice_id} --actor <you>` with the API applies Paymos' own payment; if Paymos shows it never paid (forged: rotate the webhook secret), `paymos-inbox exceptions --resolve {event_id} --actor <you> --reason \"…\"`"
            )));
        }
    }
    Ok(None)
}

/// Why [`resolve`] resolved nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Nothing of that id waits for a person's own act (named in words an operator acts on).
    #[error("{0}")]
    NotResolvable(String),
    /// The ledger failed.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// The outcomes only a person's own act settles, which [`resolve`] takes off the list: an order
/// conflict, an unusable delivery applied by hand, and an unconfirmed one a person found forged
/// (Paymos says the invoice was never paid: the secret that signed it is rotated).
pub const RESOLVED_BY_HAND: [Applied; 3] = [
    Applied::OrderConflict,
    Applied::Unusable,
    Applied::Unconfirmed,
];

/// Takes the delivery `event_id` (of `environment`, or of either when it names none) off what
/// waits, once a person settled it outside the stack ([`RESOLVED_BY_HAND`]), noting who: its
/// outcome until then.
///
/// # Errors
/// [`ResolveError::NotResolvable`] when no such delivery waits so, or a live and a sandbox one
/// both do and no environment is named; [`ResolveError::Port`] when the ledger fails.
pub async fn resolve<L: ReviewLedger>(
    ledger: &L,
    event_id: &str,
    environment: Option<Environment>,
    actor: &str,
    now_ms: u64,
) -> Result<Applied, ResolveError> {
    let mut found: Vec<OutcomeRecord> = ledger
        .with_outcomes(&RESOLVED_BY_HAND, None)
        .await?
        .into_iter()
        .filter(|r| {
            r.delivery.event_id == event_id
                && environment.is_none_or(|e| r.delivery.environment == Some(e))
        })
        .collect();
    let record = match found.len() {
        1 => found.remove(0),
        0 => {
            return Err(ResolveError::NotResolvable(format!(
                "{event_id}: no delivery of that id waits as order_conflict, unusable or unconfirmed (see `paymos-inbox exceptions`)"
            )));
        }
        _ => {
            return Err(ResolveError::NotResolvable(format!(
                "{event_id}: a live and a sandbox delivery of that id both wait: name --environment"
            )));
        }
    };
    ledger
        .mark_resolved(
            &record.delivery.key(),
            Resolution::ByHand,
            &format!("manual:{actor}"),
            now_ms,
        )
        .await?;
    Ok(record.outcome)
}

/// Takes `invoice_id` off the list once a person settled it, noting who (`actor`): its
/// outcome until then. An order conflict a road asking Paymos found
/// ([`crate::money::write::shipped_otherwise`]: shipped here under another order than Paymos'
/// invoice names), once they shipped the paid order by hand (or refunded this payment, where
/// another invoice shipped it first) and recovered the other: a later run finds it settled and
/// lists it no more. A payment that waits `after_refund`, once they found at Paymos that the
/// full refund on record returned it (paid before it): settled as refunded, nothing ships
/// ([`crate::money::write::after_refund_returned`]); Paymos' time of it, once a road reads
/// one, still judges it.
///
/// # Errors
/// [`ResolveError::NotResolvable`] when the invoice waits neither way (or was settled
/// meanwhile); [`ResolveError::Port`] when the store fails.
pub async fn resolve_invoice<S: ExceptionStore>(
    store: &S,
    invoice_id: &str,
    actor: &str,
    now_ms: u64,
) -> Result<Applied, ResolveError> {
    let not = || {
        ResolveError::NotResolvable(format!(
            "{invoice_id}: it waits neither as an order conflict Paymos' word found nor as a payment after a full refund (see `paymos-inbox exceptions`)"
        ))
    };
    // Its guard is the question: noted, and not settled yet.
    let settled = crate::money::write::shipped_otherwise_settled(
        invoice_id,
        &format!("manual:{actor}"),
        now_ms,
    );
    if let crate::money::write::Stored::Committed = store.write(&[settled]).await? {
        return Ok(Applied::OrderConflict);
    }
    let returned =
        crate::money::write::after_refund_returned(invoice_id, &format!("manual:{actor}"), now_ms);
    match store.write(&[returned]).await? {
        // Its outcome until then: held, waiting `after_refund`.
        crate::money::write::Stored::Committed => Ok(Applied::Held),
        crate::money::write::Stored::Refused(_) => Err(not()),
    }
}
