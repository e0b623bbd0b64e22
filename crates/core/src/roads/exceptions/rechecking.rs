//! The reverse check run again for the unconfirmed deliveries, and what Paymos now confirms
//! applied through the webhook's own use case.

use crate::money::change::{Applied, Change, Source};
use crate::money::effect::FulfilmentEffect;
use crate::roads::confirm::{PaymentConfirmation, Verdict, check};
use crate::roads::fulfil::{close_then_pay, settle_confirmed, settle_saying};
use crate::roads::ingest::PortError;
use crate::wire::envelope::Envelope;

use super::pending::{Pending, settled_since, waiting};
use super::{Applying, ExceptionStore, Resolution, ReviewLedger};

/// What a re-check did with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recheck {
    /// Paymos confirms it now: applied through the webhook's own transition, with this outcome
    /// (`fulfilled`, `credited`, `updated`, `paid_late`, …); the delivery is resolved.
    Applied(Applied),
    /// It still waits (why): Paymos does not show it yet, or contradicts a payment a person may
    /// still release on their word.
    Waits(String),
    /// Paymos contradicts a change that pays nothing (a closure, a refund, a payout, a deposit:
    /// forged, failed or another's; why): nothing applied, the delivery resolved.
    Refuted(String),
}

impl Recheck {
    /// The outcome's name: the applied outcome's, `unconfirmed` or `refuted`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Applied(applied) => applied.as_str(),
            Self::Waits(_) => "unconfirmed",
            Self::Refuted(_) => "refuted",
        }
    }

    /// Why it waits or was refuted.
    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Applied(_) => None,
            Self::Waits(why) | Self::Refuted(why) => Some(why),
        }
    }

    /// Whether the delivery, or the payment it applied (held, paid late, …), still waits for a
    /// person.
    #[must_use]
    pub fn waits(&self) -> bool {
        match self {
            Self::Waits(_) => true,
            Self::Applied(applied) => applied.waits_for_person(),
            Self::Refuted(_) => false,
        }
    }
}

/// What a re-check found for one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rechecked {
    /// The delivery.
    pub event_id: String,
    /// The resource it is about (`inv_…`, `wdr_…`, `pcd_…`).
    pub resource_id: String,
    /// What the re-check did.
    pub outcome: Recheck,
}

impl serde::Serialize for Rechecked {
    fn serialize<Se: serde::Serializer>(&self, serializer: Se) -> Result<Se::Ok, Se::Error> {
        use serde::ser::SerializeStruct as _;
        let mut out = serializer.serialize_struct("Rechecked", 4)?;
        out.serialize_field("event_id", &self.event_id)?;
        out.serialize_field("resource_id", &self.resource_id)?;
        out.serialize_field("outcome", self.outcome.as_str())?;
        out.serialize_field("reason", &self.outcome.reason())?;
        out.end()
    }
}

/// Runs the reverse check again for unconfirmed deliveries of every category (those about
/// `resource_id` and the refunds of it, or all) and applies what Paymos now confirms through
/// the webhook's own use case ([`settle`]) with Paymos' answer and the stack's `effect`: a
/// payment is fulfilled with Paymos' order (a late one lands as `paid_late`), a closure closes,
/// a refund is recorded on its invoice, a payout moves, a deposit credits its payer once. What
/// Paymos confirms, or refutes for a change that pays nothing, is marked resolved.
///
/// # Errors
/// A store or ledger failure, or the API failing (nothing is decided then).
pub async fn recheck<S: ExceptionStore, L: ReviewLedger, C: PaymentConfirmation>(
    state: &S,
    ledger: &L,
    api: &C,
    effect: &dyn FulfilmentEffect,
    applying: impl Into<Applying>,
    resource_id: Option<&str>,
    now_ms: u64,
) -> Result<Vec<Rechecked>, PortError> {
    let applying = applying.into();
    let mut out = Vec::new();
    let mut deliveries = waiting(ledger, &[Applied::Unconfirmed, Applied::ProjectUnknown]).await?;
    // Refunds first: a payment Paymos paid back in full never ships, whichever came first.
    deliveries.sort_by_key(|d| !matches!(d.pending, Pending::Refund { .. }));
    for delivery in deliveries {
        // A delivery is rechecked by the environment that verified it, never by the other's
        // key (a live payment is no sandbox invoice's to confirm).
        if resource_id.is_some_and(|id| !delivery.concerns(id))
            || delivery.record.delivery.environment != Some(applying.environment)
        {
            continue;
        }
        let settled = settled_since(state, &delivery).await?;
        let Some((envelope, change)) = delivery.read else {
            continue;
        };
        let key = delivery.record.delivery.key();
        let event_id = delivery.record.delivery.event_id;
        let noted = delivery.record.reason;
        let outcome = recheck_one(state, api, effect, &applying, change, &envelope, now_ms).await?;
        let resolved = match &outcome {
            // Confirmed, but its order is known nowhere: it now waits for its order.
            Recheck::Applied(Applied::OrderUnknown) => Some(Resolution::WaitsForOrder),
            Recheck::Applied(applied) => Some(Resolution::Rechecked(*applied)),
            Recheck::Refuted(_) => Some(Resolution::Refuted),
            Recheck::Waits(_) => None,
        };
        if let Some(resolved) = resolved {
            ledger
                .mark_resolved(&key, resolved, "recheck", now_ms)
                .await?;
        }
        // Still not what Paymos shows, of an invoice settled since (shipped by the genuine
        // delivery or another road): `exceptions` lists it no more, so neither does the
        // recheck, whose exit code would otherwise say forever that something waits.
        if settled && matches!(outcome, Recheck::Waits(_)) {
            continue;
        }
        // Still waiting, for another reason than the one recorded (a 404 then, another order
        // now): `exceptions` says the latest.
        if let Recheck::Waits(why) = &outcome
            && noted.as_deref() != Some(why.as_str())
        {
            ledger.note_reason(&key, why, now_ms).await?;
        }
        out.push(Rechecked {
            event_id,
            resource_id: delivery.record.delivery.resource_id.unwrap_or_default(),
            outcome,
        });
    }
    Ok(out)
}

/// The reverse check of one change, and what applying Paymos' answer did.
async fn recheck_one<S: ExceptionStore, C: PaymentConfirmation>(
    state: &S,
    api: &C,
    effect: &dyn FulfilmentEffect,
    applying: &Applying,
    change: Change,
    envelope: &Envelope,
    now_ms: u64,
) -> Result<Recheck, PortError> {
    let pays = matches!(&change, Change::Invoice { status, .. } if status.fulfils());
    // A person asks Paymos about a deposit: Paymos' deposit is what credits, whatever the event
    // said of it (what Paymos confirms wins; a forged amount was only the reason to ask).
    let (change, data) = match change {
        Change::Deposit {
            deposit_id,
            status,
            occurred_at,
            credit: Some(_),
        } => (
            Change::Deposit {
                deposit_id,
                status,
                occurred_at,
                credit: None,
            },
            crate::wire::envelope::EventData::default(),
        ),
        change => (change, envelope.data.clone()),
    };
    let checked = check(api, &change, &data, applying.environment).await?;
    if let Some(project) = checked
        .project
        .as_deref()
        .filter(|p| !applying.projects.applies(Some(p)))
    {
        // Another project's invoice, by Paymos' word: it leaves this stack's list.
        let other = Change::OtherProject {
            project: project.to_owned(),
            invoice_id: envelope.resource_id.clone(),
        };
        let source = Source::Manual {
            actor: "recheck".into(),
        };
        return Ok(Recheck::Applied(
            settle_confirmed(state, &source, &other, effect, now_ms).await?,
        ));
    }
    if matches!(
        checked.verdict,
        Verdict::Confirmed | Verdict::PaidLate { .. }
    ) {
        let store = (state, effect);
        let paid = (&change, checked.paid_at);
        crate::roads::fulfil::paymos_refunds_first(store, api, paid, "recheck", now_ms).await?;
    }
    let confirmed = match checked.verdict {
        Verdict::Confirmed => checked.applied_to(change),
        Verdict::PaidLate { closed } => {
            close_then_pay(
                state,
                effect,
                change,
                (closed, checked.paid_at),
                checked.order.map(|o| applying.projects.scoped(o)),
                "recheck",
                now_ms,
            )
            .await?
        }
        Verdict::NotYet { status } => {
            return Ok(Recheck::Waits(format!("still {status} at Paymos")));
        }
        // A payment Paymos contradicts stays listed (Paymos may yet record it paid late, and a
        // forged one is a leaked secret a person must see); anything else it contradicts is
        // Paymos' word against it, read and closed. A 404 is no word against anything (the key
        // may not read its project): whatever it is, it waits for a person who checked.
        Verdict::Unconfirmed(reason) if pays => return Ok(Recheck::Waits(reason)),
        Verdict::Unknown(reason) => return Ok(Recheck::Waits(reason)),
        Verdict::Unconfirmed(reason) => return Ok(Recheck::Refuted(reason)),
    };
    let source = Source::Manual {
        actor: "recheck".into(),
    };
    // Paymos was asked: its answer names the project (the event's own word counts for nothing).
    let confirmed = applying.projects.apply_to(confirmed, None);
    Ok(
        match settle_saying(state, &source, &confirmed, effect, now_ms, true).await? {
            // Paymos' deposit is not what was credited: a person settles it, never a second
            // credit.
            (Applied::Unconfirmed, why) => Recheck::Waits(why.unwrap_or_default()),
            (applied, _) => Recheck::Applied(applied),
        },
    )
}
