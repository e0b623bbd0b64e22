//! In-memory ports for unit tests of the domain. Not for production: nothing survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::domain::effect::{
    EffectValue, EffectWrite, FulfilmentEffect, PaidInvoice, fulfilment_key,
};
use crate::domain::fulfil::{Applied, Change, OrderRef, ResourceStore, Source};
use crate::domain::ingest::{
    Delivery, DeliveryLedger, DeliveryState, ExistingDelivery, PortError, Recorded, TakeOver,
    WorkQueue,
};
use crate::domain::outcome::{Found, Mark, Plan, Refusal, Write, Written};
use crate::domain::release::{InvoiceSeen, Release, ReleaseStore, Waiting};
use crate::domain::status::{
    Amount, DepositSeen, InvoiceStatus, WithdrawalStatus, deposit_accepts, invoice_accepts,
    withdrawal_accepts,
};

/// A [`DeliveryLedger`] in a `HashMap`, with the same conditional semantics as DynamoDB's.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    records: Mutex<HashMap<String, ExistingDelivery>>,
    conflicts: Mutex<Vec<String>>,
    calls: AtomicUsize,
}

impl MemoryLedger {
    /// An empty ledger.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The record for `event_id`, if any.
    #[must_use]
    pub fn get(&self, event_id: &str) -> Option<ExistingDelivery> {
        self.records.lock().expect("lock").get(event_id).cloned()
    }

    /// How many records there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.records.lock().expect("lock").len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls made so far.
    #[must_use]
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Marks a record processed, as the fulfil side would.
    pub fn mark_processed(&self, event_id: &str) {
        if let Some(r) = self.records.lock().expect("lock").get_mut(event_id) {
            r.state = DeliveryState::Processed;
        }
    }

    /// Event ids whose conflicts were noted.
    #[must_use]
    pub fn conflicts(&self) -> Vec<String> {
        self.conflicts.lock().expect("lock").clone()
    }
}

impl DeliveryLedger for MemoryLedger {
    async fn record(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
    ) -> Result<Recorded, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut records = self.records.lock().expect("lock");
        if let Some(existing) = records.get(&delivery.event_id) {
            return Ok(Recorded::Existing(Box::new(existing.clone())));
        }
        records.insert(
            delivery.event_id.clone(),
            ExistingDelivery {
                delivery: delivery.clone(),
                state: DeliveryState::Received,
                lease_until_ms,
            },
        );
        Ok(Recorded::New)
    }

    async fn take_over(
        &self,
        event_id: &str,
        seen_lease_ms: u64,
        new_lease_ms: u64,
    ) -> Result<TakeOver, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut records = self.records.lock().expect("lock");
        match records.get_mut(event_id) {
            Some(r) if r.state == DeliveryState::Received && r.lease_until_ms == seen_lease_ms => {
                r.lease_until_ms = new_lease_ms;
                Ok(TakeOver::Won)
            }
            other => Ok(TakeOver::Lost(other.map(|r| r.state))),
        }
    }

    async fn release(&self, event_id: &str, lease_ms: u64) -> Result<(), PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(r) = self.records.lock().expect("lock").get_mut(event_id)
            && r.lease_until_ms == lease_ms
        {
            r.lease_until_ms = 0;
        }
        Ok(())
    }

    async fn mark_conflict(&self, event_id: &str, _sha: &str, _at: u64) -> Result<(), PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.conflicts
            .lock()
            .expect("lock")
            .push(event_id.to_owned());
        Ok(())
    }
}

impl crate::domain::sweep::StrandedDeliveries for MemoryLedger {
    async fn stranded(
        &self,
        received_before_ms: u64,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<ExistingDelivery>, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut found: Vec<ExistingDelivery> = self
            .records
            .lock()
            .expect("lock")
            .values()
            .filter(|r| {
                r.state == DeliveryState::Received
                    && r.delivery.received_at_ms < received_before_ms
                    && r.lease_until_ms < now_ms
            })
            .cloned()
            .collect();
        found.sort_by_key(|r| r.delivery.received_at_ms);
        found.truncate(limit);
        Ok(found)
    }
}

/// A [`crate::domain::ingest::KeySource`] whose secrets a test can rotate.
#[derive(Debug, Default)]
pub struct MemoryKeys {
    keys: Mutex<Vec<crate::domain::signature::SigningKey>>,
    reads: AtomicUsize,
}

impl MemoryKeys {
    /// A source holding `keys`.
    #[must_use]
    pub fn new(keys: Vec<crate::domain::signature::SigningKey>) -> Self {
        Self {
            keys: Mutex::new(keys),
            reads: AtomicUsize::new(0),
        }
    }

    /// Replaces the secrets (a rotation in the secret store).
    pub fn rotate(&self, keys: Vec<crate::domain::signature::SigningKey>) {
        *self.keys.lock().expect("lock") = keys;
    }

    /// How many times the secrets were read.
    #[must_use]
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl crate::domain::ingest::KeySource for MemoryKeys {
    async fn keys(&self) -> Result<Vec<crate::domain::signature::SigningKey>, PortError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.keys.lock().expect("lock").clone())
    }
}

/// A [`WorkQueue`] in a `Vec`, which can be told to fail the next sends.
#[derive(Debug, Default)]
pub struct MemoryQueue {
    sent: Mutex<Vec<Delivery>>,
    failures_left: AtomicUsize,
}

impl MemoryQueue {
    /// An empty queue.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `n` sends fail.
    pub fn fail_next(&self, n: usize) {
        self.failures_left.store(n, Ordering::SeqCst);
    }

    /// Everything sent so far.
    #[must_use]
    pub fn sent(&self) -> Vec<Delivery> {
        self.sent.lock().expect("lock").clone()
    }
}

impl WorkQueue for MemoryQueue {
    async fn enqueue(&self, delivery: &Delivery) -> Result<(), PortError> {
        if self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(PortError::new("memory send", "injected failure"));
        }
        self.sent.lock().expect("lock").push(delivery.clone());
        Ok(())
    }
}

/// An invoice as [`MemoryResources`] holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvoiceRecord {
    /// Its status and the event time (s) that set it; `None` for a note without a status (a
    /// refund that arrived first).
    pub status: Option<(InvoiceStatus, u64)>,
    /// The order it pays for.
    pub order_id: Option<String>,
    /// Paid, but not as the registered order says.
    pub held: bool,
    /// Paid after it closed (event time, s).
    pub paid_late_at: Option<u64>,
    /// The invoice that fulfilled its order first.
    pub duplicate_of: Option<String>,
    /// Refunded (Unix ms).
    pub refunded_at: Option<u64>,
    /// The delivery or actor that moved it last.
    pub last_event_id: Option<String>,
    /// Released by a person (`released_by`).
    pub released_by: Option<String>,
}

/// A deposit as [`MemoryResources`] holds it: what its rule reads, and who credited it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DepositRecord {
    seen: DepositSeen,
    credited_by: Option<String>,
}

#[derive(Debug, Default)]
struct Resources {
    invoices: HashMap<String, InvoiceRecord>,
    /// Status and the delivery that moved it last.
    withdrawals: HashMap<String, (WithdrawalStatus, String)>,
    deposits: HashMap<String, DepositRecord>,
    /// Effect items by key (the fulfilment record among them).
    effects: HashMap<String, Vec<(String, EffectValue)>>,
    /// `order_id` → the invoice that fulfilled it.
    order_claims: HashMap<String, String>,
    /// Registered orders: amount and currency.
    expected: HashMap<String, (Amount, String)>,
    /// Credits per (payer, currency), each one an amount.
    credits: HashMap<(String, String), Vec<Amount>>,
    /// Review notes by event id.
    reviews: HashMap<String, Applied>,
    /// The ledger's processed marks: outcome and reason by event id.
    processed: HashMap<String, (Applied, Option<String>)>,
}

/// A [`ResourceStore`] in memory: every write all-or-nothing under one lock, each condition
/// the domain's own rule ([`invoice_accepts`], [`withdrawal_accepts`], [`deposit_accepts`]).
/// `tests/it` runs the same histories against DynamoDB and asserts the same outcomes.
#[derive(Debug, Default)]
pub struct MemoryResources {
    inner: Mutex<Resources>,
}

impl MemoryResources {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the amount an order must be paid with (the amount guard).
    pub fn register_order(&self, external_id: &str, amount: &Amount, currency: &str) {
        self.lock().expected.insert(
            external_id.to_owned(),
            (amount.clone(), currency.to_ascii_uppercase()),
        );
    }

    /// The invoice, if any.
    #[must_use]
    pub fn invoice(&self, invoice_id: &str) -> Option<InvoiceRecord> {
        self.lock().invoices.get(invoice_id).cloned()
    }

    /// The withdrawal's status, if any.
    #[must_use]
    pub fn withdrawal(&self, withdrawal_id: &str) -> Option<WithdrawalStatus> {
        self.lock().withdrawals.get(withdrawal_id).map(|(s, _)| *s)
    }

    /// Invoices with a fulfilment record, sorted.
    #[must_use]
    pub fn fulfilled(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .lock()
            .effects
            .keys()
            .filter_map(|k| k.strip_prefix("fulfilment#").map(str::to_owned))
            .collect();
        out.sort();
        out
    }

    /// The credits of a payer in a currency, in order.
    #[must_use]
    pub fn credits(&self, payer: &str, currency: &str) -> Vec<Amount> {
        self.lock()
            .credits
            .get(&(payer.to_owned(), currency.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// The outcome and reason recorded on a delivery, if it was processed.
    #[must_use]
    pub fn outcome(&self, event_id: &str) -> Option<(Applied, Option<String>)> {
        self.lock().processed.get(event_id).cloned()
    }

    /// Review notes (deliveries waiting for a person), by event id.
    #[must_use]
    pub fn reviews(&self) -> HashMap<String, Applied> {
        self.lock().reviews.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Resources> {
        self.inner.lock().expect("lock")
    }
}

/// A refusal by the resource's condition.
fn resource(found: Found, last_by: Option<&String>) -> Refusal {
    Refusal::Resource {
        found,
        last_by: last_by.cloned(),
    }
}

impl Resources {
    /// The invoice's condition, as [`invoice_accepts`] states it.
    fn invoice_refusal(&self, invoice_id: &str, status: InvoiceStatus, at: u64) -> Option<Refusal> {
        let record = self.invoices.get(invoice_id);
        let last_by = record.and_then(|r| r.last_event_id.as_ref());
        let current = match record {
            None => None,
            Some(InvoiceRecord { status: None, .. }) => {
                return Some(resource(Found::Nothing, last_by));
            }
            Some(InvoiceRecord {
                status: Some(current),
                ..
            }) => Some(*current),
        };
        (!invoice_accepts(current, status, at)).then(|| {
            resource(
                current.map_or(Found::Nothing, |(s, _)| Found::Invoice(s)),
                last_by,
            )
        })
    }

    /// The fulfilment's conditions, in the order DynamoDB's adapter reports them: the effect's
    /// items absent, the order unclaimed, the registered order matching.
    fn fulfilment_refusal(&self, writes: &[EffectWrite], order: &OrderRef) -> Option<Refusal> {
        if writes.iter().any(|w| self.effects.contains_key(&w.key)) {
            return Some(Refusal::Fulfilled);
        }
        let external_id = order.external_id.as_ref()?;
        if let Some(winner) = self.order_claims.get(external_id) {
            return Some(Refusal::OrderClaimed {
                invoice_id: winner.clone(),
            });
        }
        let (amount, currency) = self.expected.get(external_id)?;
        let matches = order.amount.as_ref().is_some_and(|a| a.same_value(amount))
            && order.currency.as_ref().is_none_or(|c| c == currency);
        (!matches).then_some(Refusal::OrderMismatch)
    }

    fn set_invoice(
        &mut self,
        source: &Source,
        invoice_id: &str,
        status: InvoiceStatus,
        at: u64,
        order: &OrderRef,
    ) -> &mut InvoiceRecord {
        let record = self.invoices.entry(invoice_id.to_owned()).or_default();
        record.status = Some((status, at));
        if order.external_id.is_some() {
            record.order_id.clone_from(&order.external_id);
        }
        record.last_event_id = Some(source.id());
        record
    }

    /// Checks `plan`'s conditions and, if all hold, writes it. Nothing is written on refusal.
    #[allow(clippy::too_many_lines)]
    fn write(
        &mut self,
        source: &Source,
        change: &Change,
        plan: &Plan,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> Written {
        // The processed mark, when the plan writes it: once only, checked first.
        let mark = match source {
            Source::Delivery { event_id } if plan.with_mark => Some(event_id),
            _ => None,
        };
        if mark.is_some_and(|event_id| self.processed.contains_key(event_id)) {
            return Written::AlreadyProcessed;
        }
        let refused = match (&plan.write, change) {
            (Write::MarkOnly, _) => None,
            (Write::Review, _) => match source {
                Source::Delivery { event_id } if self.reviews.contains_key(event_id) => {
                    Some(Refusal::Noted)
                }
                Source::Delivery { event_id } => {
                    self.reviews.insert(event_id.clone(), plan.outcome);
                    None
                }
                Source::Manual { .. } => None,
            },
            (
                Write::Change | Write::Unfulfilled(_),
                Change::Invoice {
                    invoice_id,
                    status,
                    occurred_at,
                    order,
                },
            ) => {
                let fulfils = plan.write == Write::Change && status.fulfils();
                let paid = PaidInvoice {
                    invoice_id,
                    status: *status,
                    order,
                    source,
                    at_ms: now_ms,
                };
                let writes = if fulfils {
                    effect.writes(&paid)
                } else {
                    Vec::new()
                };
                let refused = self
                    .invoice_refusal(invoice_id, *status, *occurred_at)
                    .or_else(|| {
                        fulfils
                            .then(|| self.fulfilment_refusal(&writes, order))
                            .flatten()
                    });
                if refused.is_none() {
                    let record = self.set_invoice(source, invoice_id, *status, *occurred_at, order);
                    match &plan.write {
                        Write::Unfulfilled(Mark::Held) => record.held = true,
                        Write::Unfulfilled(Mark::DuplicateOf(winner)) => {
                            record.duplicate_of = Some(winner.clone());
                        }
                        _ => {}
                    }
                    for w in writes {
                        self.effects.insert(w.key, w.attributes);
                    }
                    if let (true, Some(external_id)) = (fulfils, &order.external_id) {
                        self.order_claims
                            .insert(external_id.clone(), invoice_id.clone());
                    }
                }
                refused
            }
            (
                Write::PaidLate { closed },
                Change::Invoice {
                    invoice_id,
                    occurred_at,
                    ..
                },
            ) => match self.invoices.get_mut(invoice_id) {
                Some(r) if r.status.map(|(s, _)| s) == Some(*closed) => {
                    r.paid_late_at.get_or_insert(*occurred_at);
                    None
                }
                other => Some(resource(
                    other
                        .as_ref()
                        .and_then(|r| r.status)
                        .map_or(Found::Nothing, |(s, _)| Found::Invoice(s)),
                    other.as_ref().and_then(|r| r.last_event_id.as_ref()),
                )),
            },
            (
                Write::Change,
                Change::Withdrawal {
                    withdrawal_id,
                    status,
                    kind,
                    invoice_id,
                    ..
                },
            ) => {
                let current = self.withdrawals.get(withdrawal_id).cloned();
                if withdrawal_accepts(current.as_ref().map(|(s, _)| *s), *status) {
                    self.withdrawals
                        .insert(withdrawal_id.clone(), (*status, source.id()));
                    if let (true, WithdrawalStatus::Completed, Some(invoice)) =
                        (kind == "refund", status, invoice_id)
                    {
                        self.invoices
                            .entry(invoice.clone())
                            .or_default()
                            .refunded_at
                            .get_or_insert(now_ms);
                    }
                    None
                } else {
                    Some(resource(
                        current
                            .as_ref()
                            .map_or(Found::Nothing, |(s, _)| Found::Withdrawal(*s)),
                        current.as_ref().map(|(_, by)| by),
                    ))
                }
            }
            (
                Write::Change,
                Change::Deposit {
                    deposit_id,
                    occurred_at,
                    credit,
                    ..
                },
            ) => {
                let record = self.deposits.get(deposit_id).cloned();
                let current = record.as_ref().map(|d| d.seen);
                if deposit_accepts(current, credit.is_some(), *occurred_at) {
                    let credited = credit.is_some();
                    self.deposits.insert(
                        deposit_id.clone(),
                        DepositRecord {
                            seen: DepositSeen {
                                credited,
                                status_at: *occurred_at,
                            },
                            credited_by: credited.then(|| source.id()),
                        },
                    );
                    if let Some(credit) = credit {
                        self.credits
                            .entry((credit.payer.clone(), credit.currency.clone()))
                            .or_default()
                            .push(credit.net.clone());
                    }
                    None
                } else {
                    Some(resource(
                        Found::Deposit {
                            credited: current.is_some_and(|c| c.credited),
                        },
                        record.as_ref().and_then(|d| d.credited_by.as_ref()),
                    ))
                }
            }
            // A plan the rules never make for this change: the mark alone, as DynamoDB's.
            _ => None,
        };
        if let Some(refusal) = refused {
            return Written::Refused(refusal);
        }
        if let Some(event_id) = mark {
            self.processed
                .insert(event_id.clone(), (plan.outcome, plan.reason.clone()));
        }
        Written::Committed
    }
}

impl ResourceStore for MemoryResources {
    async fn write(
        &self,
        source: &Source,
        change: &Change,
        plan: &Plan,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> Result<Written, PortError> {
        Ok(self.lock().write(source, change, plan, effect, now_ms))
    }
}

impl ReleaseStore for MemoryResources {
    async fn invoice_seen(
        &self,
        invoice_id: &str,
    ) -> Result<(Option<InvoiceSeen>, bool), PortError> {
        let inner = self.lock();
        let fulfilled = inner.effects.contains_key(&fulfilment_key(invoice_id));
        let seen = inner.invoices.get(invoice_id).map(|r| InvoiceSeen {
            status: r.status.map(|(s, _)| s),
            held: r.held,
            paid_late: r.paid_late_at.is_some(),
            duplicate_of: r.duplicate_of.clone(),
            refunded: r.refunded_at.is_some(),
            order: OrderRef {
                external_id: r.order_id.clone(),
                amount: None,
                currency: None,
            },
        });
        Ok((seen, fulfilled))
    }

    async fn write_release(
        &self,
        release: &Release<'_>,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> Result<Written, PortError> {
        let mut inner = self.lock();
        let current = inner.invoices.get(release.invoice_id);
        let waits = match (release.waiting, current) {
            (Waiting::Unrecorded, None) => true,
            (_, None) | (Waiting::Unrecorded, Some(_)) => false,
            (waiting, Some(r)) => {
                let status = r.status.map(|(s, _)| s);
                let still = r.released_by.is_none() && r.refunded_at.is_none();
                still
                    && match waiting {
                        Waiting::Open(st) => status == Some(st),
                        Waiting::Held(st) => status == Some(st) && r.held,
                        Waiting::PaidLate(st) => status == Some(st) && r.paid_late_at.is_some(),
                        Waiting::Unrecorded => false,
                    }
            }
        };
        if !waits {
            let found = current
                .and_then(|r| r.status)
                .map_or(Found::Nothing, |(s, _)| Found::Invoice(s));
            let last_by = current.and_then(|r| r.last_event_id.as_ref());
            return Ok(Written::Refused(resource(found, last_by)));
        }
        let paid = PaidInvoice {
            invoice_id: release.invoice_id,
            status: release.waiting.paid_status(),
            order: release.order,
            source: release.source,
            at_ms: now_ms,
        };
        let writes = effect.writes(&paid);
        // No amount guard: a person decided.
        if writes.iter().any(|w| inner.effects.contains_key(&w.key)) {
            return Ok(Written::Refused(Refusal::Fulfilled));
        }
        if let Some(winner) = release
            .order
            .external_id
            .as_ref()
            .and_then(|o| inner.order_claims.get(o))
        {
            return Ok(Written::Refused(Refusal::OrderClaimed {
                invoice_id: winner.clone(),
            }));
        }
        let record = inner
            .invoices
            .entry(release.invoice_id.to_owned())
            .or_default();
        if release.waiting.becomes_paid() {
            record.status = Some((InvoiceStatus::Paid, now_ms / 1000));
        }
        if release.order.external_id.is_some() {
            record.order_id.clone_from(&release.order.external_id);
        }
        record.held = false;
        record.released_by = Some(release.source.id());
        record.last_event_id = Some(release.source.id());
        for w in writes {
            inner.effects.insert(w.key, w.attributes);
        }
        if let Some(order) = &release.order.external_id {
            inner
                .order_claims
                .insert(order.clone(), release.invoice_id.to_owned());
        }
        Ok(Written::Committed)
    }
}
