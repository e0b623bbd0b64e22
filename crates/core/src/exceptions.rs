//! Every payment waiting for a person, and the ways out: [`list`] names each with why, since
//! when and what to do; [`release`] fulfils a held, late or unconfirmed invoice on a person's
//! word; [`recheck`] runs the reverse check again for unconfirmed deliveries. Their ports: the
//! state table ([`ExceptionStore`]) and the deliveries ledger's reviews ([`ReviewLedger`]).

use std::future::Future;

use super::change::{Applied, Change, OrderRef, Source, change_of, with_order};
use super::confirm::{PaymentConfirmation, Verdict, check};
use super::effect::RecordFulfilment;
use super::envelope::Envelope;
use super::fulfil::{ResourceStore, close_then_pay, settle};
use super::ingest::{Delivery, PortError};
use super::invoice::Standing;
use super::record::InvoiceRecord;
use super::release::{ReleaseBy, ReleaseError, ReleaseStore, release as release_invoice};
use super::signature::Environment;
use super::status::InvoiceStatus;

/// The outcomes of a delivery that need a person.
pub const DELIVERY_OUTCOMES: [&str; 2] = ["unconfirmed", "unusable"];

/// A processed delivery whose outcome waits for a person (`unconfirmed`, `unusable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRecord {
    /// The delivery as recorded (with its exact body).
    pub delivery: Delivery,
    /// Its outcome.
    pub outcome: String,
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

/// The deliveries ledger's reviews: what waits, and the note that a person or a re-check
/// resolved it.
pub trait ReviewLedger: Send + Sync {
    /// Every processed delivery with one of `outcomes` (of one resource, or all), oldest first.
    ///
    /// # Errors
    /// [`PortError`] when the ledger fails.
    fn with_outcomes(
        &self,
        outcomes: &[&str],
        resource_id: Option<&str>,
    ) -> impl Future<Output = Result<Vec<OutcomeRecord>, PortError>> + Send;

    /// Notes that `event_id` was resolved (its new `outcome`, by whom, when), so it leaves the
    /// list.
    ///
    /// # Errors
    /// [`PortError`] when the ledger fails.
    fn mark_resolved(
        &self,
        event_id: &str,
        outcome: &str,
        by: &str,
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
    /// Since when (Unix ms).
    pub since_ms: u64,
    /// Why it waits.
    pub why: String,
    /// What to do.
    pub action: String,
}

/// Lists every exception: invoices under review, deliveries with an outcome that needs a
/// person (unless their invoice was fulfilled since), and `dead_letters` messages in the DLQ;
/// oldest first.
///
/// # Errors
/// [`PortError`] when the store or the ledger fails.
pub async fn list<S: ExceptionStore, L: ReviewLedger>(
    store: &S,
    ledger: &L,
    dead_letters: u64,
) -> Result<Vec<Exception>, PortError> {
    let mut out: Vec<Exception> = store
        .invoices_under_review()
        .await?
        .iter()
        .map(invoice_exception)
        .collect();
    for record in ledger.with_outcomes(&DELIVERY_OUTCOMES, None).await? {
        let resource = record.delivery.resource_id.as_deref();
        if let Some(invoice) = resource.filter(|r| r.starts_with("inv_"))
            && store.invoice_seen(invoice).await?.1
        {
            continue; // fulfilled since (released, reconciled, or another event)
        }
        out.push(delivery_exception(record));
    }
    if dead_letters > 0 {
        out.push(Exception {
            kind: "dead_letter",
            resource_id: None,
            event_id: None,
            since_ms: 0,
            why: format!(
                "{dead_letters} message(s) in the dead-letter queue: applying failed five times"
            ),
            action: "read the fulfil logs for the cause, fix it, then `paymos-inbox redrive`"
                .into(),
        });
    }
    out.sort_by_key(|e| e.since_ms);
    Ok(out)
}

/// An invoice under review: why it waits (a partial refund says how much went back) and the
/// way out for its standing.
fn invoice_exception(inv: &InvoiceRecord) -> Exception {
    let seen = &inv.seen;
    let id = &inv.invoice_id;
    let paid = format!(
        "{} {}",
        seen.order.amount.as_ref().map_or("?", |a| a.as_str()),
        seen.order.currency.as_deref().unwrap_or("")
    );
    let order = seen.order.external_id.as_deref().unwrap_or("?");
    let refunded = seen.refunded_text().map_or(String::new(), |r| {
        format!("; {r} refunded so far, not all of it")
    });
    let (kind, why, action) = match seen.standing() {
        Standing::DuplicateOf(first) => (
            "duplicate_payment",
            format!(
                "a second payment ({paid}) for order {order}, which {first} fulfilled{refunded}"
            ),
            format!("refund {id} at Paymos in full; its completed refund clears this"),
        ),
        Standing::Held => (
            "held",
            format!(
                "paid {paid}, which differs from what order {order} was registered for{refunded}"
            ),
            format!(
                "check the order; ship with `paymos-inbox release {id} --actor <you> --override-amount --reason …`, or refund in full"
            ),
        ),
        _ => (
            "paid_late",
            format!(
                "paid after it closed {} (order {order}){refunded}",
                seen.status.map_or("?", InvoiceStatus::as_str)
            ),
            format!(
                "ship anyway with `paymos-inbox release {id} --actor <you> --reason …`, or refund in full"
            ),
        ),
    };
    Exception {
        kind,
        resource_id: Some(id.clone()),
        event_id: None,
        since_ms: inv.updated_at_ms.unwrap_or_default(),
        why,
        action,
    }
}

/// A delivery that waits: unconfirmed (re-check, then release) or unusable (by hand).
fn delivery_exception(record: OutcomeRecord) -> Exception {
    let resource = record.delivery.resource_id;
    let event_id = record.delivery.event_id;
    let reason = record.reason.unwrap_or_default();
    let (kind, action) = if record.outcome == "unconfirmed" {
        let r = resource.as_deref().unwrap_or("inv_…");
        (
            "unconfirmed",
            format!(
                "`paymos-inbox recheck {r}`; if it is genuine, `paymos-inbox release {r} --actor <you>`"
            ),
        )
    } else {
        (
            "unusable",
            format!(
                "read the archived body of {event_id} in the deliveries table, apply it by hand"
            ),
        )
    };
    let event_type = &record.delivery.event_type;
    Exception {
        kind,
        resource_id: resource,
        event_id: Some(event_id),
        since_ms: record.processed_at_ms,
        why: if reason.starts_with(event_type.as_str()) {
            reason
        } else {
            format!("{event_type}: {reason}")
        },
        action,
    }
}

/// The order a delivery's body names, for releasing an invoice the state table never saw.
fn order_of(body: &[u8]) -> OrderRef {
    match Envelope::parse(body).map(|e| change_of(&e)) {
        Ok(Change::Invoice { order, .. }) => order,
        _ => OrderRef::none(),
    }
}

/// Releases `invoice_id` (see [`super::release::release`]); unconfirmed deliveries for it are
/// marked resolved.
///
/// # Errors
/// [`ReleaseError`] when it is not releasable or a call fails.
pub async fn release<S: ExceptionStore, L: ReviewLedger>(
    state: &S,
    ledger: &L,
    invoice_id: &str,
    by: &ReleaseBy<'_>,
    now_ms: u64,
) -> Result<Applied, ReleaseError> {
    let waiting = ledger
        .with_outcomes(&["unconfirmed"], Some(invoice_id))
        .await?;
    let named = waiting.last().map(|r| order_of(&r.delivery.body));
    let applied = release_invoice(
        state,
        invoice_id,
        named.as_ref(),
        by,
        &RecordFulfilment,
        now_ms,
    )
    .await?;
    for record in &waiting {
        ledger
            .mark_resolved(
                &record.delivery.event_id,
                "released",
                &format!("manual:{}", by.actor),
                now_ms,
            )
            .await?;
    }
    Ok(applied)
}

/// What a re-check found for one delivery.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rechecked {
    /// The delivery.
    pub event_id: String,
    /// Its invoice.
    pub invoice_id: String,
    /// `fulfilled`, `already_final`, … when Paymos confirms it now; else `unconfirmed`.
    pub outcome: String,
    /// Why it stays unconfirmed, if it does.
    pub reason: Option<String>,
}

/// Runs the reverse check again for unconfirmed deliveries (of one invoice, or all), applying
/// each Paymos now confirms through the webhook's own transition, with Paymos' order; a late
/// payment lands as `paid_late`.
///
/// # Errors
/// A DynamoDB failure, or the API failing (nothing is decided then).
pub async fn recheck<S: ExceptionStore, L: ReviewLedger, C: PaymentConfirmation>(
    state: &S,
    ledger: &L,
    api: &C,
    environment: Environment,
    invoice_id: Option<&str>,
    now_ms: u64,
) -> Result<Vec<Rechecked>, PortError> {
    let mut out = Vec::new();
    let source = Source::Manual {
        actor: "recheck".into(),
    };
    for record in ledger.with_outcomes(&["unconfirmed"], invoice_id).await? {
        let Ok(envelope) = Envelope::parse(&record.delivery.body) else {
            continue;
        };
        let change = change_of(&envelope);
        let Change::Invoice { invoice_id, .. } = &change else {
            continue;
        };
        let invoice_id = invoice_id.clone();
        let checked = check(api, &change, &envelope.data, environment).await?;
        let applied = match checked.verdict {
            Verdict::Confirmed => {
                let paid = with_order(change, checked.order);
                Some(settle(state, &source, &paid, &RecordFulfilment, now_ms).await?)
            }
            Verdict::PaidLate { closed } => {
                let paid = close_then_pay(
                    state,
                    &RecordFulfilment,
                    change,
                    closed,
                    checked.order,
                    "recheck",
                    now_ms,
                )
                .await?;
                Some(settle(state, &source, &paid, &RecordFulfilment, now_ms).await?)
            }
            Verdict::NotYet { .. } | Verdict::Unconfirmed(_) => None,
        };
        let (outcome, reason) = match (applied, checked.verdict) {
            (Some(applied), _) => {
                ledger
                    .mark_resolved(
                        &record.delivery.event_id,
                        &format!("rechecked_{applied}"),
                        "recheck",
                        now_ms,
                    )
                    .await?;
                (applied.as_str().to_owned(), None)
            }
            (None, Verdict::NotYet { status }) => (
                "unconfirmed".to_owned(),
                Some(format!("still {status} at Paymos")),
            ),
            (None, Verdict::Unconfirmed(reason)) => ("unconfirmed".to_owned(), Some(reason)),
            (None, _) => ("unconfirmed".to_owned(), None),
        };
        out.push(Rechecked {
            event_id: record.delivery.event_id.clone(),
            invoice_id,
            outcome,
            reason,
        });
    }
    Ok(out)
}
