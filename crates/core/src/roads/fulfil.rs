//! The fulfil use case: turn one recorded delivery into a change of the resource it names, and
//! apply it at most once. The transition rules live in [`crate::money::status`], the outcomes in
//! [`crate::money::outcome`]; the store writes a paid invoice together with the fulfilment it guards
//! and the order's claim, conditional on the invoice's status, so neither a second event nor a
//! second endpoint nor a manual fix can fulfil an invoice twice; the ledger's processed mark
//! follows.

use std::future::Future;
use std::sync::Arc;

use crate::money::change::{
    Applied, Change, OrderRef, Projects, Source, as_paymos_says, change_of,
};
use crate::money::effect::{FulfilmentEffect, RecordFulfilment};
use crate::money::outcome::{MAX_WRITES, Step, next_as, plan, read, writes};
use crate::money::status::{Amount, InvoiceStatus};
use crate::money::write::{self, Field, Fields, Key, Refused, Stored, Value, Write};
use crate::roads::confirm::{NOT_YET_RECEIVES, Verdict, check};
use crate::roads::confirm::{NoConfirmation, PaymentConfirmation};
use crate::roads::ingest::PortError;
use crate::wire::envelope::Envelope;
use crate::wire::signature::Environment;
use crate::wire::work::{Check, WorkItem, WorkItemError};

/// Why a queue message cannot be applied at all (it was not written by ingest, so nothing
/// acknowledged is lost by sending it to the DLQ).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoisonError {
    /// The message is not a work item.
    #[error(transparent)]
    WorkItem(#[from] WorkItemError),
}

/// The stores of resources and the ledger's processed mark: each commits a list of typed
/// [`Write`]s all or nothing, each under its guard, or reports the writes it refused with what
/// their items hold ([`Stored`]). It decides nothing: the writes and their guards are the
/// domain's ([`crate::money::write`]), and so is what a refusal means ([`crate::money::outcome::read`]).
pub trait ResourceStore: Send + Sync {
    /// Writes `writes` all or nothing.
    fn write(&self, writes: &[Write]) -> impl Future<Output = Result<Stored, PortError>> + Send;

    /// What the item at `key` holds now (`None`: absent): a strongly consistent read, so that
    /// a guard it fails would fail a write made at the same moment.
    fn read(&self, key: &Key) -> impl Future<Output = Result<Option<Fields>, PortError>> + Send;
}

impl<T: ResourceStore> ResourceStore for Arc<T> {
    fn write(&self, writes: &[Write]) -> impl Future<Output = Result<Stored, PortError>> + Send {
        (**self).write(writes)
    }

    fn read(&self, key: &Key) -> impl Future<Output = Result<Option<Fields>, PortError>> + Send {
        (**self).read(key)
    }
}

/// Writes `writes` (none: nothing to do).
///
/// A transaction is billed two units per item whether it commits or not (a paid invoice's is
/// 8), and most refusals are a second copy of a change already made. So the write whose
/// refusal would win ([`crate::money::outcome::winner`]: the least [`What`]) is read first, and a
/// guard it fails is reported as the store would report it, without the transaction. A read
/// that passes leaves the decision to the conditional write, as before.
///
/// # Errors
/// [`PortError`] when the store fails.
pub async fn store<S: ResourceStore>(store: &S, writes: &[Write]) -> Result<Stored, PortError> {
    let Some(first) = writes.iter().min_by_key(|w| w.what) else {
        return Ok(Stored::Committed);
    };
    if writes.len() > 1 {
        let found = store.read(&first.key).await?;
        if !first.guard.holds(found.as_ref()) {
            return Ok(Stored::Refused(vec![Refused {
                write: first.what,
                found: found.unwrap_or_default(),
            }]));
        }
    }
    store.write(writes).await
}

/// Applies `change` for `source`: the first plan, then what each report asks for, until the
/// outcome (at most [`MAX_WRITES`] writes).
///
/// # Errors
/// [`PortError`] when the store fails, or keeps refusing beyond the rules' last write.
pub async fn settle<S: ResourceStore>(
    store: &S,
    source: &Source,
    change: &Change,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Result<Applied, PortError> {
    settle_as(store, source, change, effect, now_ms, false).await
}

/// [`settle`] for a change whose order Paymos confirmed (the reverse check, `recheck`,
/// `reconcile --apply`): Paymos' order and price replace a record's that differs
/// ([`crate::money::outcome::next_as`]).
///
/// # Errors
/// As [`settle`].
pub async fn settle_confirmed<S: ResourceStore>(
    store: &S,
    source: &Source,
    change: &Change,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Result<Applied, PortError> {
    settle_as(store, source, change, effect, now_ms, true).await
}

/// A completed refund of `invoice_id` as Paymos lists it, recorded through the webhook's use
/// case and dated by Paymos' `completed_at`, so a later delivery of it finds it applied.
async fn record_refund<S: ResourceStore>(
    store: &S,
    effect: &dyn FulfilmentEffect,
    invoice_id: &str,
    (refund, completed_at): (&crate::money::invoice::Refund, u64),
    actor: &str,
    now_ms: u64,
) -> Result<Applied, PortError> {
    let change = Change::Withdrawal {
        withdrawal_id: refund.withdrawal_id.clone(),
        status: crate::money::status::WithdrawalStatus::Completed,
        occurred_at: completed_at,
        kind: "refund".into(),
        invoice_id: Some(invoice_id.to_owned()),
        amount: refund.amount.clone(),
        currency: refund.currency.clone(),
        mode: refund.mode.map(|m| m.as_str().to_owned()),
    };
    let source = Source::Manual {
        actor: actor.to_owned(),
    };
    settle_as(store, &source, &change, effect, now_ms, true).await
}

/// Paymos' completed full refunds of the invoice `change` pays, each recorded (dated by its
/// completion) before the payment Paymos confirms is applied: a refund whose webhook is still
/// on its way returns what was paid before it, on the webhook's and `recheck`'s roads as on
/// the reconciliation's. Nothing for a change that pays nothing.
///
/// # Errors
/// The API's or the store's failure: the payment is not applied (retried, or said).
pub(crate) async fn paymos_refunds_first<S: ResourceStore, C: PaymentConfirmation>(
    (store, effect): (&S, &dyn FulfilmentEffect),
    confirmation: &C,
    (change, paid_at): (&Change, Option<u64>),
    actor: &str,
    now_ms: u64,
) -> Result<(), PortError> {
    let Change::Invoice {
        invoice_id, status, ..
    } = change
    else {
        return Ok(());
    };
    if !status.fulfils() {
        return Ok(());
    }
    for refund in confirmation.refunds_of(invoice_id).await? {
        // Completed, one Paymos gives no time for completed no later than it was read: it
        // returns every payment made before now (as the reconciliation judges it).
        let at = refund.completed_at.unwrap_or(now_ms / 1000);
        // A full one, and one whose mode Paymos does not say (it may have been full: the
        // payment it may have returned waits for a person). An overpayment returns none of it.
        if refund.mode != Some(crate::money::invoice::RefundMode::Overpayment) {
            record_refund(store, effect, invoice_id, (&refund, at), actor, now_ms).await?;
        }
    }
    // A payment a person's word left undated takes Paymos' time where a full refund completed
    // at or after it: that refund paid it back, whether it waits `after_refund` (paid again?)
    // or was released (shipped all the same, and known refunded). Any other is dated by the
    // change ([`crate::money::outcome`]: dated, or reopened where a refund recorded here
    // settled it by no time).
    if let Some(t) = paid_at
        && let Some(found) = store.read(&Key::state(invoice_id)).await?
        && let seen = write::invoice_seen(&found)
        && seen.payment_at.is_none()
        && seen.refunded_in_full_at(Some(t))
    {
        // Refused: the record moved since it was read.
        store
            .write(&[write::paymos_payment_time(invoice_id, t, false)])
            .await?;
    }
    Ok(())
}

async fn settle_as<S: ResourceStore>(
    store: &S,
    source: &Source,
    change: &Change,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
    confirmed: bool,
) -> Result<Applied, PortError> {
    Ok(
        settle_saying(store, source, change, effect, now_ms, confirmed)
            .await?
            .0,
    )
}

/// [`settle`] (or [`settle_confirmed`]), with why the outcome's plan said (a person's road
/// tells it: nothing notes it for them).
///
/// # Errors
/// As [`settle`].
pub(crate) async fn settle_saying<S: ResourceStore>(
    store: &S,
    source: &Source,
    change: &Change,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
    confirmed: bool,
) -> Result<(Applied, Option<String>), PortError> {
    let by = source.id();
    let mut change = std::borrow::Cow::Borrowed(change);
    let mut current = plan(&change);
    for _ in 0..MAX_WRITES {
        let writes = writes(source, &change, &current, effect, now_ms);
        let written = read(source, &change, self::store(store, &writes).await?)?;
        match next_as(source, &change, &current, written, confirmed) {
            Step::Done(applied) => {
                note(&by, &change, applied, current.reason.as_deref());
                return Ok((applied, current.reason));
            }
            Step::Then(p) => current = p,
            Step::Adopt(recorded) => {
                if let Change::Invoice { order, .. } = change.to_mut() {
                    order.adopt(&recorded);
                }
                current = plan(&change);
            }
            Step::Judge(recorded) => {
                if let Change::Invoice { order, .. } = change.to_mut() {
                    *order = recorded;
                }
                current = plan(&change);
            }
        }
    }
    Err(PortError::new(
        "resource store",
        format!("still refusing after {MAX_WRITES} writes; the store breaks the write contract"),
    ))
}

/// The warning an operator needs for outcomes that wait for a person, with why (`reason`,
/// the plan's) where the rules said.
fn note(by: &str, change: &Change, applied: Applied, reason: Option<&str>) {
    let Change::Invoice {
        invoice_id, order, ..
    } = change
    else {
        return;
    };
    let order_id = order.external_id.as_deref();
    match applied {
        Applied::DuplicatePayment => tracing::warn!(
            invoice_id,
            order_id,
            by,
            "a second paid invoice for an order already fulfilled: kept for a refund, nothing fulfilled"
        ),
        Applied::Held => {
            let why = reason.unwrap_or("the payment does not match the registered order");
            tracing::warn!(invoice_id, order_id, by, why, amount = ?order.amount.as_ref().map(Amount::as_str), currency = ?order.currency, "paid invoice held for review");
        }
        Applied::PaidLate => tracing::warn!(
            invoice_id,
            by,
            "payment after the invoice closed: paid_late_at set, nothing fulfilled"
        ),
        Applied::OrderConflict => tracing::warn!(
            invoice_id,
            order_id,
            by,
            "a payment naming another order than the one its invoice shipped: nothing more shipped, waits for a person"
        ),
        _ => {}
    }
}

/// A payment Paymos reports as paid after the invoice closed `closed`: records the close as
/// Paymos has it (by `actor`, with Paymos' `order`), and returns the payment with that order
/// and Paymos' payment time (`paid_at`), which then lands as `paid_late`. The reverse check
/// and `recheck` both take this road.
///
/// # Errors
/// [`PortError`] when the store fails.
pub async fn close_then_pay<S: ResourceStore>(
    store: &S,
    effect: &dyn FulfilmentEffect,
    change: Change,
    (closed, paid_at): (InvoiceStatus, Option<u64>),
    order: Option<OrderRef>,
    actor: &str,
    now_ms: u64,
) -> Result<Change, PortError> {
    let order = order.unwrap_or_else(OrderRef::none);
    if let Some(close) = close_of(&change, closed, &order) {
        let by = Source::Manual {
            actor: actor.to_owned(),
        };
        settle_confirmed(store, &by, &close, effect, now_ms).await?;
    }
    Ok(as_paymos_says(change, Some(order), paid_at))
}

/// The close `closed` of the invoice a late payment (`change`) pays, with `order` and no
/// payment time: recorded before the payment, so that lands `paid_late`.
fn close_of(change: &Change, closed: InvoiceStatus, order: &OrderRef) -> Option<Change> {
    let Change::Invoice {
        invoice_id,
        occurred_at,
        ..
    } = change
    else {
        return None;
    };
    Some(Change::Invoice {
        invoice_id: invoice_id.clone(),
        status: closed,
        occurred_at: *occurred_at,
        paid_at: None,
        order: order.clone(),
    })
}

/// An open invoice event is not read back, so under the reverse check it sets no order or
/// price: only what Paymos confirms names what a payment ships (a forged open event plants
/// nothing).
fn unread(change: Change) -> Change {
    match change {
        Change::Invoice {
            invoice_id,
            status,
            occurred_at,
            paid_at,
            ..
        } if !status.is_final() => Change::Invoice {
            invoice_id,
            status,
            occurred_at,
            paid_at,
            order: OrderRef::none(),
        },
        other => other,
    }
}

/// What a delivery's delayed check found ([`Fulfil::check_delivery`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Processed: nothing to do (what nearly every check finds).
    Processed,
    /// No record: the attempt that queued the check died before recording it, and answered
    /// nothing but a failure; the sender's retry records it.
    NotRecorded,
    /// Listed for the sweep already (by ingest, when the check could not be queued with it).
    Listed,
    /// Not processed: listed now, for the sweep to send again.
    Straggler,
}

impl Checked {
    /// Its name, for logs.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processed => "processed",
            Self::NotRecorded => "not_recorded",
            Self::Listed => "listed",
            Self::Straggler => "straggler",
        }
    }
}

/// Why a work item was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FulfilError {
    /// It can never be applied (to the DLQ after the bounded receives).
    #[error(transparent)]
    Poison(#[from] PoisonError),
    /// A store or API failure: retry.
    #[error(transparent)]
    Unavailable(#[from] PortError),
    /// The reverse check found Paymos not showing the event's status yet: retry later.
    #[error("{resource_id} is still {status} at Paymos; checked again on the next receive")]
    NotYet {
        /// `inv_…`, `wdr_…` or `pcd_…`.
        resource_id: String,
        /// What Paymos shows now.
        status: String,
    },
    /// The work item's delivery has no record yet (its work is queued before its record's
    /// put): retry, and apply it once it is recorded.
    #[error("the delivery is not recorded yet; applied on a later receive once it is")]
    NotRecorded,
}

/// The first wait before a work item that was not applied comes back, and the longest.
const REDELIVERY_FIRST_S: u32 = 15;
const REDELIVERY_LONGEST_S: u32 = 900;

impl FulfilError {
    /// How long the message stays out of sight before its next receive (its visibility, in
    /// seconds) after its `receives`-th receive failed, spread by `spread` (-1 … 1) over a tenth
    /// either way. Poison comes back at once: it can never be applied, so it reaches the
    /// dead-letter queue (and its alarm) in seconds. Anything else waits 15 s, then twice as
    /// long each time up to 15 minutes: over [`crate::wire::work::WORK_RECEIVES`] receives some two and a half
    /// hours of throttling, an outage or a payment Paymos shows late are waited out, and an
    /// overloaded table sees the queue slow down instead of the DLQ fill.
    #[must_use]
    pub fn redelivery_in_s(&self, receives: u32, spread: f64) -> u32 {
        if matches!(self, Self::Poison(_)) {
            return 0;
        }
        let doublings = receives.saturating_sub(1).min(16);
        let base = REDELIVERY_FIRST_S
            .saturating_mul(1 << doublings)
            .min(REDELIVERY_LONGEST_S);
        let jitter = f64::from(base) * 0.1 * spread.clamp(-1.0, 1.0);
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "at most 990 s, never negative"
        )]
        let delay = (f64::from(base) + jitter).round() as u32;
        delay
    }
}

/// The fulfil use case.
pub struct Fulfil<S, C = NoConfirmation> {
    store: S,
    effect: Box<dyn FulfilmentEffect>,
    confirmation: Option<C>,
    environment: Environment,
    projects: Projects,
    /// The receive at which Paymos' "not yet" is final ([`crate::roads::confirm::receives_for`]),
    /// and the minutes since the delivery's receipt after which it is, whichever comes first (a
    /// copy the sweep re-sends starts its receives again, never the time).
    patience: (u32, u32),
}

impl<S: ResourceStore> Fulfil<S> {
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
            environment: Environment::Live,
            projects: Projects::all(),
            patience: (
                NOT_YET_RECEIVES,
                crate::roads::confirm::DEFAULT_PATIENCE_MINUTES,
            ),
        }
    }

    /// With a reverse check before every webhook-driven fulfilment.
    pub fn with_confirmation<C: PaymentConfirmation>(self, confirmation: C) -> Fulfil<S, C> {
        Fulfil {
            store: self.store,
            effect: self.effect,
            confirmation: Some(confirmation),
            environment: self.environment,
            projects: self.projects,
            patience: self.patience,
        }
    }
}

impl<S: ResourceStore, C: PaymentConfirmation> Fulfil<S, C> {
    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// What fulfilling means for this stack: written on every road that fulfils (a webhook,
    /// `mark-paid`, `release`, `recheck`, `reconcile --apply`).
    pub fn effect(&self) -> &dyn FulfilmentEffect {
        self.effect.as_ref()
    }

    /// The environment whose deliveries this stack applies (live by default). Deliveries
    /// verified by a secret of any other environment are recorded as
    /// [`Applied::OtherEnvironment`] and change nothing: one stack, one environment's money.
    #[must_use]
    pub fn for_environment(mut self, environment: Environment) -> Self {
        self.environment = environment;
        self
    }

    /// The environment this stack applies.
    pub fn environment(&self) -> Environment {
        self.environment
    }

    /// The projects whose deliveries this stack applies (every project by default). A delivery
    /// of another project is recorded as [`Applied::OtherProject`] and changes nothing; each
    /// applied project's orders, registrations and balances are its own ([`Projects`]).
    #[must_use]
    pub fn for_projects(mut self, projects: Projects) -> Self {
        self.projects = projects;
        self
    }

    /// The projects this stack applies.
    pub fn projects(&self) -> &Projects {
        &self.projects
    }

    /// How long the reverse check waits for Paymos to show a payment (or a closure, a refund, a
    /// deposit) a delivery announces before it is `unconfirmed`: `minutes` after its first
    /// receive ([`crate::roads::confirm::receives_for`]; 15 by default).
    #[must_use]
    pub fn with_patience_minutes(mut self, minutes: u32) -> Self {
        self.patience = (crate::roads::confirm::receives_for(minutes), minutes);
        self
    }

    /// A delivery's delayed check, come due (issue 51): one read of its record; if it is not
    /// processed, it is listed where the sweep reads the stragglers (`write::straggler`, a
    /// conditional write), and the sweep sends it again from there, spaced as any straggler.
    /// The record is listed only here, never at its receipt: the list holds what strands.
    ///
    /// # Errors
    /// [`FulfilError::Unavailable`] when the ledger fails: the check comes back (retry).
    pub async fn check_delivery(&self, check: &Check) -> Result<Checked, FulfilError> {
        let key = check.key();
        let Some(record) = self.store.read(&Key::delivery(&key)).await? else {
            // Its attempt died before the record's put: nothing was acknowledged.
            return Ok(Checked::NotRecorded);
        };
        if record.get(&Field::State) == Some(&Value::text("processed")) {
            return Ok(Checked::Processed);
        }
        if record.contains_key(&Field::PendingShard) {
            return Ok(Checked::Listed);
        }
        Ok(match self.store.write(&[write::straggler(&key)]).await? {
            Stored::Committed => {
                tracing::warn!(event_id = %check.event_id, "a delivery still not processed when its check came due: listed for the sweep");
                Checked::Straggler
            }
            // Processed (or listed) between the read and the write.
            Stored::Refused(_) => Checked::Processed,
        })
    }

    /// Applies a work item the queue brought, received for the `receives`-th time, only if it
    /// is the delivery its record holds: one strongly consistent read of the record first. A
    /// new delivery's work is queued before its record's put (issue 51), so another body under
    /// the same `event_id`, whose put the first record refused, has its work queued too: the
    /// record's body hash decides, and such a copy is acknowledged unapplied (`None`). A work
    /// item with no record yet comes back ([`FulfilError::NotRecorded`]) until its last
    /// receive, then is dropped: its attempt answered a failure, and the sender's retry
    /// records it and queues it again.
    ///
    /// # Errors
    /// [`FulfilError::NotRecorded`] before the record's put, else as
    /// [`Fulfil::apply_received`].
    pub async fn apply_queued(
        &self,
        item: &WorkItem,
        now_ms: u64,
        receives: u32,
    ) -> Result<Option<(Option<Envelope>, Applied)>, FulfilError> {
        let key = crate::wire::work::delivery_key(item.environment, &item.event_id);
        let Some(record) = self.store.read(&Key::delivery(&key)).await? else {
            if receives < crate::wire::work::WORK_RECEIVES {
                return Err(FulfilError::NotRecorded);
            }
            tracing::warn!(event_id = %item.event_id, receives, "a work item whose delivery was never recorded: its attempt answered a failure; dropped, the sender's retry queues it again");
            return Ok(None);
        };
        let body_sha256 = crate::roads::ingest::sha256_hex(&item.body);
        // A record of a release that kept no hash is the body its work was queued after.
        if record
            .get(&Field::BodySha256)
            .is_some_and(|recorded| *recorded != Value::Text(body_sha256))
        {
            tracing::warn!(event_id = %item.event_id, "a work item whose body is not the recorded one (another body under its event_id): not applied, the first body stands");
            return Ok(None);
        }
        self.apply_received(item, now_ms, receives).await.map(Some)
    }

    /// Applies one work item as its last receive (a "not paid yet" from the reverse check is
    /// final here); the SQS trigger uses [`Fulfil::apply_received`].
    ///
    /// # Errors
    /// [`FulfilError::Unavailable`] when the store or the API fails (retry).
    pub async fn apply(
        &self,
        item: &WorkItem,
        now_ms: u64,
    ) -> Result<(Option<Envelope>, Applied), FulfilError> {
        self.apply_received(item, now_ms, self.patience.0).await
    }

    /// Applies one work item received for the `receives`-th time. Whatever ingest accepted is
    /// decided here without error: a body that cannot be applied is recorded with an outcome of
    /// its own ([`Applied::Unusable`], [`Applied::OtherEnvironment`]), never left to the DLQ.
    ///
    /// # Errors
    /// [`FulfilError::Unavailable`] when the store or the API fails, [`FulfilError::NotYet`]
    /// while Paymos does not show the invoice paid yet (both: retry).
    pub async fn apply_received(
        &self,
        item: &WorkItem,
        now_ms: u64,
        receives: u32,
    ) -> Result<(Option<Envelope>, Applied), FulfilError> {
        let source = Source::delivery(item.environment, &item.event_id);
        let envelope = match Envelope::parse(&item.body) {
            Ok(envelope) if envelope.event_id == item.event_id => envelope,
            parsed => {
                let reason = match parsed {
                    Ok(_) => "the body's event_id differs from the work item's".to_owned(),
                    Err(e) => e.to_string(),
                };
                let change = Change::Unusable {
                    reason,
                    resource_id: None,
                };
                let applied =
                    settle(&self.store, &source, &change, self.effect.as_ref(), now_ms).await?;
                return Ok((None, applied));
            }
        };
        let mut change = if item.environment == Some(self.environment) {
            match crate::money::change::dated_ahead(&envelope, item.received_at_ms) {
                Some(reason) => Change::Unusable {
                    reason,
                    resource_id: envelope.resource_id.clone(),
                },
                None => change_of(&envelope),
            }
        } else {
            Change::OtherEnvironment {
                environment: item.environment,
            }
        };
        let mut by_paymos = false;
        if let Some(confirmation) = &self.confirmation {
            let waited_ms = item.received_at_ms.map(|at| now_ms.saturating_sub(at));
            (change, by_paymos) = self
                .confirmed(
                    confirmation,
                    change,
                    &envelope,
                    (receives, waited_ms),
                    now_ms,
                )
                .await?;
        } else if let Some(reason) = crate::money::change::unsaid_deposit(&change, &envelope.data) {
            // Acknowledged, and perhaps a payer's money: it waits, listed, for Paymos' word.
            change = Change::Unconfirmed {
                reason,
                resource_id: envelope.resource_id.clone(),
            };
        }
        // Another project's delivery applies nothing (its project as the event names it, or,
        // under the check, as Paymos' answer does: the event's own word then counts for
        // nothing, so a forged open event marks no project); an applied one's order and credit
        // take their project's key scope.
        let named = match self.confirmation {
            Some(_) => None,
            None => envelope.data.project_id.as_deref(),
        };
        let unnamed = match &change {
            Change::Invoice { order, .. } => !order.names_project(),
            Change::Deposit {
                credit: Some(c), ..
            } => c.project.is_none(),
            _ => false,
        };
        let mut change = self.projects.apply_to(change, named);
        if unnamed {
            change = self.project_known(change).await?;
        }
        if let Some(project) = named {
            change = self.refund_of_its_project(change, project).await?;
        }
        // A close announcing a late payment, taken at its word (without the check; with it,
        // Paymos' answer does the same): the close first, so the payment lands `paid_late`
        // and waits for a person, never shipped as an open invoice's.
        if self.confirmation.is_none()
            && let Some((closed, _)) = crate::money::change::late_payment(&envelope)
            && let Change::Invoice { order, .. } = &change
            && let Some(close) = close_of(&change, closed, order)
        {
            let by = Source::Manual {
                actor: "webhook".into(),
            };
            settle(&self.store, &by, &close, self.effect.as_ref(), now_ms).await?;
        }
        let applied = settle_as(
            &self.store,
            &source,
            &change,
            self.effect.as_ref(),
            now_ms,
            by_paymos,
        )
        .await?;
        Ok((Some(envelope), applied))
    }

    /// `change`, unless it is a payment or a deposit naming no project (nor Paymos, where
    /// asked) on a stack of several projects or of every project ([`Projects::several`]), of a
    /// resource whose record names none: which project's order or payer it is, nothing here can
    /// tell ([`Change::ProjectUnknown`]).
    async fn project_known(&self, change: Change) -> Result<Change, PortError> {
        if !self.projects.several() {
            return Ok(change);
        }
        let (resource_id, paid_at) = match &change {
            Change::Invoice {
                invoice_id,
                status,
                order,
                paid_at,
                ..
            } if status.fulfils() && !order.names_project() => (invoice_id, *paid_at),
            Change::Deposit {
                deposit_id,
                credit: Some(_),
                ..
            } => (deposit_id, None),
            _ => return Ok(change),
        };
        let recorded = self.store.read(&Key::state(resource_id)).await?;
        // A record that names its project (or another project's mark) decides, as ever; so
        // does a deposit credited already (once: a copy naming none changes nothing).
        if recorded.is_some_and(|r| {
            write::order_of(&r).names_project()
                || r.contains_key(&Field::OtherProject)
                || r.contains_key(&Field::Credited)
        }) {
            return Ok(change);
        }
        Ok(Change::ProjectUnknown {
            resource_id: Some(resource_id.clone()),
            paid_at,
        })
    }

    /// `change`, unless it is a refund naming `project` of an invoice whose record names
    /// another, on a stack of several projects or of every project: an invoice is one
    /// project's, so one of the two words is wrong and nothing says which. It returns nothing
    /// on either word and waits for a person ([`Change::Unusable`], the reason naming both).
    async fn refund_of_its_project(
        &self,
        change: Change,
        project: &str,
    ) -> Result<Change, PortError> {
        // Only a refund names an invoice; on a stack of one project, another's is refused
        // before (`OtherProject`).
        let Change::Withdrawal {
            invoice_id: Some(invoice_id),
            withdrawal_id,
            ..
        } = &change
        else {
            return Ok(change);
        };
        let Some(fields) = self.store.read(&Key::state(invoice_id)).await? else {
            return Ok(change);
        };
        let recorded = write::order_of(&fields);
        let named = self.projects.scoped(OrderRef {
            project: Some(project.to_owned()),
            ..OrderRef::none()
        });
        let same =
            (recorded.project.as_deref(), recorded.home) == (named.project.as_deref(), named.home);
        if !recorded.names_project() || same {
            return Ok(change);
        }
        let recorded_name = recorded
            .project
            .clone()
            .unwrap_or_else(|| "the home project".to_owned());
        Ok(Change::Unusable {
            reason: format!(
                "the refund names project {project}, its invoice {invoice_id}'s record {recorded_name}: an invoice is one project's, so nothing is returned on either word; check at Paymos whose refund {withdrawal_id} is"
            ),
            resource_id: Some(withdrawal_id.clone()),
        })
    }

    /// `change` as Paymos confirms it: with Paymos' order for a payment (and `true`: Paymos'
    /// order replaces the record's), or, when Paymos contradicts the event,
    /// [`Change::Unconfirmed`] with the difference. A late payment first records the invoice's
    /// close as Paymos has it, so the payment lands as `paid_late`.
    async fn confirmed(
        &self,
        confirmation: &C,
        change: Change,
        envelope: &Envelope,
        (receives, waited_ms): (u32, Option<u64>),
        now_ms: u64,
    ) -> Result<(Change, bool), FulfilError> {
        let checked = check(confirmation, &change, &envelope.data, self.environment).await?;
        // Another project's invoice, by Paymos' word: nothing of this stack's to decide.
        if let Some(project) = checked
            .project
            .as_deref()
            .filter(|p| !self.projects.applies(Some(p)))
        {
            return Ok((
                Change::OtherProject {
                    project: project.to_owned(),
                    invoice_id: envelope.resource_id.clone(),
                },
                false,
            ));
        }
        let resource_id = envelope.resource_id.clone();
        let unconfirmed = |reason: String| {
            tracing::warn!(resource_id = ?resource_id, event_id = %envelope.event_id, reason, "reverse check: Paymos does not confirm this event; nothing applied");
            Change::Unconfirmed {
                reason,
                resource_id: resource_id.clone(),
            }
        };
        if matches!(
            checked.verdict,
            Verdict::Confirmed | Verdict::PaidLate { .. }
        ) {
            let store = (&self.store, self.effect.as_ref());
            let paid = (&change, checked.paid_at);
            paymos_refunds_first(store, confirmation, paid, "reverse-check", now_ms).await?;
        }
        Ok(match checked.verdict {
            Verdict::Confirmed => {
                let by_paymos = checked.order.is_some();
                (checked.applied_to(unread(change)), by_paymos)
            }
            Verdict::NotYet { status }
                if receives < self.patience.0
                    && waited_ms.is_none_or(|w| w < u64::from(self.patience.1) * 60_000) =>
            {
                return Err(FulfilError::NotYet {
                    resource_id: resource_id.unwrap_or_default(),
                    status,
                });
            }
            Verdict::NotYet { status } if receives < self.patience.0 => (
                unconfirmed(format!(
                    "still {status} at Paymos {} minutes after the delivery's receipt",
                    self.patience.1
                )),
                false,
            ),
            Verdict::NotYet { status } => (
                unconfirmed(format!(
                    "still {status} at Paymos after {receives} receives"
                )),
                false,
            ),
            Verdict::PaidLate { closed } => (
                close_then_pay(
                    &self.store,
                    self.effect.as_ref(),
                    change,
                    (closed, checked.paid_at),
                    checked.order.map(|o| self.projects.scoped(o)),
                    "reverse-check",
                    now_ms,
                )
                .await?,
                true,
            ),
            Verdict::Unconfirmed(reason) | Verdict::Unknown(reason) => (unconfirmed(reason), false),
        })
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
        self.by_hand(
            invoice_id,
            (InvoiceStatus::Paid, order, None),
            actor,
            now_ms,
            false,
        )
        .await
    }

    /// [`Fulfil::mark_paid`] with the status to set, on a road that knows no payment time.
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
        self.by_hand(invoice_id, (status, order, None), actor, now_ms, false)
            .await
    }

    /// [`Fulfil::apply_by_hand`] with Paymos' own status, order and payment time (`reconcile
    /// --apply`): Paymos' order and price replace a record's that differs, and the refund rule
    /// reads Paymos' `paid_at` (`None`: Paymos named none).
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn apply_confirmed(
        &self,
        invoice_id: &str,
        (status, paid_at): (InvoiceStatus, Option<u64>),
        order: OrderRef,
        actor: &str,
        now_ms: u64,
    ) -> Result<Applied, PortError> {
        self.by_hand(invoice_id, (status, order, paid_at), actor, now_ms, true)
            .await
    }

    /// A completed refund of `invoice_id` as Paymos lists it (`reconcile --apply`, before the
    /// payment after it): recorded through the webhook's use case, dated by Paymos'
    /// `completed_at`, so a later delivery of it finds it applied.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn apply_refund_confirmed(
        &self,
        invoice_id: &str,
        (refund, completed_at): (&crate::money::invoice::Refund, u64),
        actor: &str,
        now_ms: u64,
    ) -> Result<Applied, PortError> {
        record_refund(
            &self.store,
            self.effect.as_ref(),
            invoice_id,
            (refund, completed_at),
            actor,
            now_ms,
        )
        .await
    }

    /// Pins the stack's home project (the first it lists) in its state table, once, and refuses
    /// to apply with another first: the home project's keys carry no project, so listing
    /// another first would read its records, claims and balances as that project's (order
    /// `1001` shipped twice). Called where a stack starts (fulfil, `dev`).
    ///
    /// # Errors
    /// [`PortErrorKind::Misconfigured`] naming both projects, or the store's failure.
    pub async fn pin_home_project(&self) -> Result<(), PortError> {
        let Some(home) = self.projects.ids().first() else {
            return Ok(());
        };
        if self.store.write(&[write::home_project(home)]).await? == Stored::Committed {
            return Ok(());
        }
        let pinned = self
            .store
            .read(&Key::state(write::STACK_KEY))
            .await?
            .and_then(|f| {
                f.get(&Field::ProjectId)
                    .and_then(Value::as_text)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        Err(PortError::of_kind(
            "state table",
            crate::port::PortErrorKind::Misconfigured,
            format!(
                "PaymosProjectIds lists {home} first, but this stack's records are of home project {pinned}: keep {pinned} first (its records' keys carry no project)"
            ),
        ))
    }

    /// Why a person's word of `invoice_id` naming the project `given` is refused, if it is
    /// ([`Projects::refuses_person`]), against what its record holds now.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn refuses_person(
        &self,
        invoice_id: &str,
        given: Option<&str>,
    ) -> Result<Option<String>, PortError> {
        let found = self.store.read(&Key::state(invoice_id)).await?;
        let recorded = found.as_ref().map_or(OrderRef::none(), write::order_of);
        Ok(self.projects.refuses_person(given, &recorded))
    }

    /// Paymos' time `paid_at` of an invoice's payment recorded here with none (a person's
    /// word), for the refund rule ([`write::paymos_payment_time`]); with `anew`, a payment that
    /// never shipped and was judged against a full refund by no time is reopened for the change
    /// the road applies next; without, it is dated only where a full refund recorded here
    /// returns it by that time (Paymos' refunds are read, never recorded, by the reconciliation).
    /// Whether the record holds a payment still (one reopened holds none).
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn paymos_dates(
        &self,
        invoice_id: &str,
        paid_at: u64,
        anew: bool,
    ) -> Result<bool, PortError> {
        let Some(found) = self.store.read(&Key::state(invoice_id)).await? else {
            return Ok(false);
        };
        let late = found.contains_key(&Field::PaidLateAt);
        let paid = late
            || write::invoice_seen(&found)
                .status
                .is_some_and(InvoiceStatus::fulfils);
        let undated = paid
            && !found.contains_key(&Field::PaymentAt)
            && !found.contains_key(&Field::ReleasedAt);
        // Without `anew`, dated only where a full refund recorded here returns it by then.
        if !undated || (!anew && !write::invoice_seen(&found).refunded_in_full_at(Some(paid_at))) {
            return Ok(paid);
        }
        // Settled by a full refund, or waiting `after_refund`: judged by no time. A late one
        // keeps its close and waits as it was.
        let unjudged = found.get(&Field::AfterRefund) == Some(&Value::Bool(true))
            || found.contains_key(&Field::RefundedInFullBy);
        let reopen = anew
            && unjudged
            && !late
            && self
                .store
                .read(&Key::state(crate::money::effect::fulfilment_key(
                    invoice_id,
                )))
                .await?
                .is_none();
        // Refused: the record moved since it was read; the change decides.
        let written = self
            .store
            .write(&[write::paymos_payment_time(invoice_id, paid_at, reopen)])
            .await?;
        Ok(!(reopen && written == Stored::Committed))
    }

    async fn by_hand(
        &self,
        invoice_id: &str,
        (status, order, paid_at): (InvoiceStatus, OrderRef, Option<u64>),
        actor: &str,
        now_ms: u64,
        by_paymos: bool,
    ) -> Result<Applied, PortError> {
        // A blank order id names no order: never a claim on `order_paid#`.
        let mut order = order;
        order.external_id = order
            .external_id
            .filter(|id| crate::money::change::named(id).is_some());
        let project = order.project.clone();
        // A person's word knows no time, but the payment it speaks of may be on record here,
        // dated by its delivery while it waited for its order: the refund rule reads that time.
        let paid_at = match paid_at {
            None if status.fulfils() => self
                .store
                .read(&Key::state(invoice_id))
                .await?
                .and_then(|f| f.get(&Field::PaymentAt).and_then(Value::as_int)),
            // Paymos' time of a payment recorded here undated (a person's word before it):
            // the record takes it once, so the refund rule judges that payment by Paymos.
            Some(t) if status.fulfils() && by_paymos => {
                let _holds_one = self.paymos_dates(invoice_id, t, true).await?;
                Some(t)
            }
            given => given,
        };
        let change = self.projects.apply_to(
            Change::Invoice {
                invoice_id: invoice_id.to_owned(),
                status,
                occurred_at: now_ms / 1000,
                paid_at,
                order,
            },
            project.as_deref(),
        );
        let source = Source::Manual {
            actor: actor.to_owned(),
        };
        settle_as(
            &self.store,
            &source,
            &change,
            self.effect.as_ref(),
            now_ms,
            by_paymos,
        )
        .await
    }
}
