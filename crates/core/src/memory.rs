//! In-memory ports for unit tests of the domain. Not for production: nothing survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::change::{Applied, Change, OrderRef, Source};
use crate::effect::{EffectValue, EffectWrite, FulfilmentEffect, PaidInvoice, fulfilment_key};
use crate::exceptions::{ExceptionStore, OutcomeRecord, ReviewLedger};
use crate::fulfil::ResourceStore;
use crate::handoff::StateRecords;
use crate::ingest::{
    Delivery, DeliveryLedger, DeliveryState, ExistingDelivery, PortError, Recorded, TakeOver,
    WorkQueue,
};
use crate::invoice::{Refund, RefundMode, Standing};
use crate::outcome::{Found, Mark, Plan, Refusal, Write, Written};
use crate::reconcile::{PaymosLedger, ReconcileStore};
use crate::record::{self, FulfilmentRecord, StateRecord};
use crate::release::{InvoiceSeen, Release, ReleaseStore, Waiting};
use crate::status::{
    Amount, DepositSeen, InvoiceStatus, WithdrawalStatus, deposit_accepts, invoice_accepts,
    withdrawal_accepts,
};

/// A [`DeliveryLedger`] in a `HashMap` by delivery key ([`crate::ingest::delivery_key`]), with
/// the same conditional semantics as DynamoDB's.
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

    /// The record under `key` (a live delivery's is its `event_id`), if any.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<ExistingDelivery> {
        self.records.lock().expect("lock").get(key).cloned()
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

    /// Marks the record under `key` processed, as the fulfil side would.
    pub fn mark_processed(&self, key: &str) {
        if let Some(r) = self.records.lock().expect("lock").get_mut(key) {
            r.state = DeliveryState::Processed;
        }
    }

    /// Keys of the records whose conflicts were noted.
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
        let key = delivery.key();
        if let Some(existing) = records.get(&key) {
            return Ok(Recorded::Existing(Box::new(existing.clone())));
        }
        records.insert(
            key,
            ExistingDelivery {
                delivery: delivery.clone(),
                state: DeliveryState::Received,
                lease_until_ms,
            },
        );
        Ok(Recorded::New)
    }

    async fn find(&self, key: &str) -> Result<Option<ExistingDelivery>, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(self.get(key))
    }

    async fn take_over(
        &self,
        key: &str,
        seen_lease_ms: u64,
        new_lease_ms: u64,
    ) -> Result<TakeOver, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut records = self.records.lock().expect("lock");
        match records.get_mut(key) {
            Some(r) if r.state == DeliveryState::Received && r.lease_until_ms == seen_lease_ms => {
                r.lease_until_ms = new_lease_ms;
                Ok(TakeOver::Won)
            }
            other => Ok(TakeOver::Lost(other.map(|r| r.state))),
        }
    }

    async fn release(&self, key: &str, lease_ms: u64) -> Result<(), PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(r) = self.records.lock().expect("lock").get_mut(key)
            && r.lease_until_ms == lease_ms
        {
            r.lease_until_ms = 0;
        }
        Ok(())
    }

    async fn mark_conflict(&self, key: &str, _sha: &str, _at: u64) -> Result<(), PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.conflicts.lock().expect("lock").push(key.to_owned());
        Ok(())
    }
}

impl crate::sweep::StrandedDeliveries for MemoryLedger {
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

/// A [`crate::ingest::KeySource`] whose secrets a test can rotate.
#[derive(Debug, Default)]
pub struct MemoryKeys {
    keys: Mutex<Vec<crate::signature::SigningKey>>,
    reads: AtomicUsize,
}

impl MemoryKeys {
    /// A source holding `keys`.
    #[must_use]
    pub fn new(keys: Vec<crate::signature::SigningKey>) -> Self {
        Self {
            keys: Mutex::new(keys),
            reads: AtomicUsize::new(0),
        }
    }

    /// Replaces the secrets (a rotation in the secret store).
    pub fn rotate(&self, keys: Vec<crate::signature::SigningKey>) {
        *self.keys.lock().expect("lock") = keys;
    }

    /// How many times the secrets were read.
    #[must_use]
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl crate::ingest::KeySource for MemoryKeys {
    async fn keys(&self) -> Result<Vec<crate::signature::SigningKey>, PortError> {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredInvoice {
    /// Its status and the event time (s) that set it; `None` while only refunds are recorded.
    pub status: Option<(InvoiceStatus, u64)>,
    /// The order it pays for, set once by the first change that names it (the price likewise).
    pub order: OrderRef,
    /// Paid, but not as the registered order says.
    pub held: bool,
    /// Paid after it closed (event time, s).
    pub paid_late_at: Option<u64>,
    /// The invoice that fulfilled its order first.
    pub duplicate_of: Option<String>,
    /// Completed refunds.
    pub refunds: Vec<Refund>,
    /// The deliveries and actors whose change it holds.
    pub applied: std::collections::BTreeSet<String>,
    /// Released by a person (`released_by`).
    pub released_by: Option<String>,
    /// Why, as they said, and whether they overrode the amount check.
    pub release_reason: Option<String>,
}

impl Default for StoredInvoice {
    fn default() -> Self {
        Self {
            status: None,
            order: OrderRef::none(),
            held: false,
            paid_late_at: None,
            duplicate_of: None,
            refunds: Vec::new(),
            applied: std::collections::BTreeSet::new(),
            released_by: None,
            release_reason: None,
        }
    }
}

impl StoredInvoice {
    /// The record as the domain reads it.
    #[must_use]
    pub fn seen(&self) -> InvoiceSeen {
        InvoiceSeen {
            status: self.status.map(|(s, _)| s),
            held: self.held,
            paid_late: self.paid_late_at.is_some(),
            duplicate_of: self.duplicate_of.clone(),
            released: self.released_by.is_some(),
            refunds: self.refunds.clone(),
            order: self.order.clone(),
        }
    }

    /// The typed record of invoice `id`, as the adapter would read it (its last change is the
    /// time of its status).
    fn record(&self, id: &str) -> record::InvoiceRecord {
        record::InvoiceRecord {
            invoice_id: id.to_owned(),
            seen: self.seen(),
            updated_at_ms: self.status.map(|(_, at)| at * 1000),
        }
    }
}

/// A deposit as [`MemoryResources`] holds it: what its rule reads, and who credited it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StoredDeposit {
    seen: DepositSeen,
    credited_by: Option<String>,
}

#[derive(Debug, Default)]
struct Resources {
    invoices: HashMap<String, StoredInvoice>,
    /// Status and the delivery that moved it last.
    withdrawals: HashMap<String, (WithdrawalStatus, String)>,
    deposits: HashMap<String, StoredDeposit>,
    /// Fulfilment records by invoice id.
    fulfilments: HashMap<String, FulfilmentRecord>,
    /// The merchant's own effect items by key.
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
    pub fn invoice(&self, invoice_id: &str) -> Option<StoredInvoice> {
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
        let mut out: Vec<String> = self.lock().fulfilments.keys().cloned().collect();
        out.sort();
        out
    }

    /// Every invoice record, sorted by id.
    #[must_use]
    pub fn invoices(&self) -> Vec<(String, StoredInvoice)> {
        let mut out: Vec<_> = self
            .lock()
            .invoices
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Every fulfilment record: its invoice and the order it names, sorted.
    #[must_use]
    pub fn fulfilments(&self) -> Vec<(String, Option<String>)> {
        let inner = self.lock();
        let mut out: Vec<_> = inner
            .fulfilments
            .values()
            .map(|f| (f.invoice_id.clone(), f.order.external_id.clone()))
            .collect();
        out.sort();
        out
    }

    /// Every key the store holds, as the state table would name it.
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        let inner = self.lock();
        let mut out: Vec<String> = inner.invoices.keys().cloned().collect();
        out.extend(inner.withdrawals.keys().cloned());
        out.extend(inner.deposits.keys().cloned());
        out.extend(inner.fulfilments.keys().map(|i| fulfilment_key(i)));
        out.extend(inner.effects.keys().cloned());
        out.extend(inner.order_claims.keys().map(|o| format!("order_paid#{o}")));
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

    /// Every balance: the credits of each payer in each currency, summed exactly.
    #[must_use]
    pub fn balances(&self) -> std::collections::BTreeMap<(String, String), String> {
        self.lock()
            .credits
            .iter()
            .filter_map(|(key, credits)| Amount::sum(credits).map(|total| (key.clone(), total)))
            .collect()
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
fn resource(found: Found, last_by: Option<&String>, source: &Source) -> Refusal {
    Refusal::Resource {
        found,
        mine: last_by.is_some_and(|by| *by == source.id()),
        standing: Standing::Clear,
    }
}

/// A refusal by an invoice's condition: what it holds, whether this source's change is among
/// it, and where its payment stands.
fn invoice_refused(record: Option<&StoredInvoice>, source: &Source) -> Refusal {
    Refusal::Resource {
        found: record
            .and_then(|r| r.status)
            .map_or(Found::Nothing, |(s, _)| Found::Invoice(s)),
        mine: record.is_some_and(|r| r.applied.contains(&source.id())),
        standing: record.map_or(Standing::Clear, |r| r.seen().standing()),
    }
}

impl Resources {
    /// The invoice's conditions: its status as [`invoice_accepts`] states it and, for a change
    /// that fulfils (`order`), the order its record holds: the same order id (or none yet), and
    /// a price when the record has one.
    fn invoice_refusal(
        &self,
        source: &Source,
        invoice_id: &str,
        (status, at): (InvoiceStatus, u64),
        order: Option<&OrderRef>,
    ) -> Option<Refusal> {
        let record = self.invoices.get(invoice_id);
        if !invoice_accepts(record.and_then(|r| r.status), status, at) {
            return Some(invoice_refused(record, source));
        }
        let order = order?;
        if record.is_some_and(|r| r.seen().refunded_in_full()) {
            return Some(Refusal::Refunded);
        }
        let none = OrderRef::none();
        let recorded = record.map_or(&none, |r| &r.order);
        let other_order =
            recorded.external_id.is_some() && order.external_id != recorded.external_id;
        let price_left_out = !order.has_price() && recorded.has_price();
        (order.external_id.is_none() || other_order || price_left_out).then(|| {
            Refusal::OrderOnRecord {
                recorded: recorded.clone(),
            }
        })
    }

    /// The fulfilment's conditions, in the order DynamoDB's adapter reports them: the effect's
    /// items absent, the order unclaimed, the registered order matching (amount and currency).
    fn fulfilment_refusal(
        &self,
        invoice_id: &str,
        writes: &[EffectWrite],
        order: &OrderRef,
        amount_checked: bool,
    ) -> Option<Refusal> {
        if self.fulfilments.contains_key(invoice_id)
            || writes.iter().any(|w| self.effects.contains_key(&w.key))
        {
            return Some(Refusal::Fulfilled);
        }
        let external_id = order.external_id.as_ref()?;
        if let Some(winner) = self.order_claims.get(external_id) {
            return Some(Refusal::OrderClaimed {
                invoice_id: winner.clone(),
            });
        }
        if !amount_checked {
            return None;
        }
        let (amount, currency) = self.expected.get(external_id)?;
        let matches = order.amount.as_ref().is_some_and(|a| a.same_value(amount))
            && order.currency.as_ref() == Some(currency);
        (!matches).then_some(Refusal::OrderMismatch)
    }

    fn set_invoice(
        &mut self,
        source: &Source,
        invoice_id: &str,
        status: InvoiceStatus,
        at: u64,
        order: &OrderRef,
    ) -> &mut StoredInvoice {
        let record = self.invoices.entry(invoice_id.to_owned()).or_default();
        record.status = Some((status, at));
        // The record's order is set once, by the first change that names it.
        record.order.adopt(order);
        record.applied.insert(source.id());
        record
    }

    /// Fulfils an invoice: its fulfilment record, the effect's items and the order's claim.
    fn fulfil(&mut self, record: FulfilmentRecord, writes: Vec<EffectWrite>) {
        let (invoice_id, order) = (record.invoice_id.clone(), record.order.clone());
        self.fulfilments.insert(invoice_id.clone(), record);
        for w in writes {
            self.effects.insert(w.key, w.attributes);
        }
        if let Some(external_id) = &order.external_id {
            self.order_claims
                .insert(external_id.clone(), invoice_id.to_owned());
        }
    }

    /// Checks `plan`'s conditions and, if all hold, writes it. Nothing is written on refusal.
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
            (Write::Review, _) => self.write_review(source, plan.outcome),
            (Write::Change | Write::Unfulfilled(_), Change::Invoice { .. }) => {
                self.write_invoice(source, change, &plan.write, effect, now_ms)
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
                other => Some(invoice_refused(other.as_deref(), source)),
            },
            (Write::Change, Change::Withdrawal { .. }) => self.write_withdrawal(source, change),
            (Write::Change, Change::Deposit { .. }) => self.write_deposit(source, change),
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

    /// A delivery that waits for a person: its review note, once.
    fn write_review(&mut self, source: &Source, outcome: Applied) -> Option<Refusal> {
        match source {
            Source::Delivery { event_id } if self.reviews.contains_key(event_id) => {
                Some(Refusal::Noted)
            }
            Source::Delivery { event_id } => {
                self.reviews.insert(event_id.clone(), outcome);
                None
            }
            Source::Manual { .. } => None,
        }
    }

    /// An invoice's status (held or a duplicate when `write` says so), fulfilled with its
    /// order's claim when it pays: the invoice's rule, then the fulfilment's conditions.
    fn write_invoice(
        &mut self,
        source: &Source,
        change: &Change,
        write: &Write,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> Option<Refusal> {
        let Change::Invoice {
            invoice_id,
            status,
            occurred_at,
            order,
        } = change
        else {
            return None;
        };
        let fulfils = *write == Write::Change && status.fulfils();
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
            .invoice_refusal(
                source,
                invoice_id,
                (*status, *occurred_at),
                fulfils.then_some(order),
            )
            .or_else(|| {
                fulfils
                    .then(|| self.fulfilment_refusal(invoice_id, &writes, order, true))
                    .flatten()
            });
        if refused.is_none() {
            let record = self.set_invoice(source, invoice_id, *status, *occurred_at, order);
            match write {
                Write::Unfulfilled(Mark::Held) => record.held = true,
                Write::Unfulfilled(Mark::DuplicateOf(winner)) => {
                    record.duplicate_of = Some(winner.clone());
                }
                _ => {}
            }
            if fulfils {
                self.fulfil(FulfilmentRecord::of(&paid), writes);
            }
        }
        refused
    }

    /// A withdrawal's status by its rule; a completed refund recorded beside its invoice.
    fn write_withdrawal(&mut self, source: &Source, change: &Change) -> Option<Refusal> {
        let Change::Withdrawal {
            withdrawal_id,
            status,
            kind,
            invoice_id,
            amount,
            currency,
            mode,
            ..
        } = change
        else {
            return None;
        };
        let current = self.withdrawals.get(withdrawal_id).cloned();
        if !withdrawal_accepts(current.as_ref().map(|(s, _)| *s), *status) {
            return Some(resource(
                current
                    .as_ref()
                    .map_or(Found::Nothing, |(s, _)| Found::Withdrawal(*s)),
                current.as_ref().map(|(_, by)| by),
                source,
            ));
        }
        self.withdrawals
            .insert(withdrawal_id.clone(), (*status, source.id()));
        if let (true, WithdrawalStatus::Completed, Some(invoice)) =
            (kind == "refund", status, invoice_id)
        {
            // A fact beside the invoice's record: never a status.
            self.invoices
                .entry(invoice.clone())
                .or_default()
                .refunds
                .push(Refund {
                    withdrawal_id: withdrawal_id.clone(),
                    amount: amount.clone(),
                    currency: currency.clone(),
                    mode: mode.as_deref().and_then(RefundMode::parse),
                });
        }
        None
    }

    /// A deposit's status by its rule; its credit, once, with the balance.
    fn write_deposit(&mut self, source: &Source, change: &Change) -> Option<Refusal> {
        let Change::Deposit {
            deposit_id,
            occurred_at,
            credit,
            ..
        } = change
        else {
            return None;
        };
        let record = self.deposits.get(deposit_id).cloned();
        let current = record.as_ref().map(|d| d.seen);
        if !deposit_accepts(current, credit.is_some(), *occurred_at) {
            return Some(resource(
                Found::Deposit {
                    credited: current.is_some_and(|c| c.credited),
                },
                record.as_ref().and_then(|d| d.credited_by.as_ref()),
                source,
            ));
        }
        let credited = credit.is_some();
        self.deposits.insert(
            deposit_id.clone(),
            StoredDeposit {
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
    }
}

impl ExceptionStore for MemoryResources {
    async fn invoices_under_review(&self) -> Result<Vec<record::InvoiceRecord>, PortError> {
        let mut out: Vec<_> = self
            .lock()
            .invoices
            .iter()
            .map(|(id, r)| r.record(id))
            .filter(|r| r.seen.standing().waits_for_person())
            .collect();
        out.sort_by(|a, b| a.invoice_id.cmp(&b.invoice_id));
        Ok(out)
    }
}

/// The deliveries ledger's reviews in memory: processed deliveries whose outcome waits for a
/// person, as a test records them, and what resolved each.
#[derive(Debug, Default)]
pub struct MemoryReviews {
    waiting: Mutex<Vec<OutcomeRecord>>,
    resolved: Mutex<HashMap<String, (String, String)>>,
}

impl MemoryReviews {
    /// No delivery waits.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `delivery` was processed as `outcome` (`why`) at `at_ms`.
    pub fn processed(&self, delivery: Delivery, outcome: &str, why: &str, at_ms: u64) {
        self.waiting.lock().expect("lock").push(OutcomeRecord {
            delivery,
            outcome: outcome.to_owned(),
            reason: Some(why.to_owned()),
            processed_at_ms: at_ms,
        });
    }

    /// What resolved `event_id` (its new outcome and by whom), if anything did.
    #[must_use]
    pub fn resolved(&self, event_id: &str) -> Option<(String, String)> {
        self.resolved.lock().expect("lock").get(event_id).cloned()
    }
}

impl ReviewLedger for MemoryReviews {
    async fn with_outcomes(
        &self,
        outcomes: &[&str],
        resource_id: Option<&str>,
    ) -> Result<Vec<OutcomeRecord>, PortError> {
        let resolved = self.resolved.lock().expect("lock").clone();
        let mut out: Vec<_> = self
            .waiting
            .lock()
            .expect("lock")
            .iter()
            // The outcome as it stands now (a resolution replaces it, as DynamoDB's does).
            .map(|r| OutcomeRecord {
                outcome: resolved
                    .get(&r.delivery.event_id)
                    .map_or_else(|| r.outcome.clone(), |(o, _)| o.clone()),
                ..r.clone()
            })
            .filter(|r| {
                outcomes.contains(&r.outcome.as_str())
                    && resource_id.is_none_or(|id| r.delivery.resource_id.as_deref() == Some(id))
            })
            .collect();
        out.sort_by_key(|r| r.processed_at_ms);
        Ok(out)
    }

    async fn mark_resolved(
        &self,
        event_id: &str,
        outcome: &str,
        by: &str,
        _at_ms: u64,
    ) -> Result<(), PortError> {
        self.resolved
            .lock()
            .expect("lock")
            .insert(event_id.to_owned(), (outcome.to_owned(), by.to_owned()));
        Ok(())
    }
}

impl StateRecords for MemoryResources {
    async fn records(&self) -> Result<Vec<StateRecord>, PortError> {
        let inner = self.lock();
        let invoices = inner
            .invoices
            .iter()
            .map(|(id, r)| StateRecord::Invoice(r.record(id)));
        let fulfilments = inner
            .fulfilments
            .values()
            .cloned()
            .map(StateRecord::Fulfilment);
        let withdrawals = inner.withdrawals.iter().map(|(id, (status, _))| {
            StateRecord::Withdrawal(record::WithdrawalRecord {
                withdrawal_id: id.clone(),
                status: Some(*status),
                kind: None,
                invoice_id: None,
                amount: None,
                currency: None,
                updated_at_ms: None,
            })
        });
        let reviews = inner.reviews.iter().map(|(id, applied)| {
            StateRecord::Review(record::ReviewRecord {
                event_id: id.clone(),
                reason: applied.as_str().to_owned(),
                resource_id: None,
                why: None,
                created_at_ms: None,
            })
        });
        Ok(invoices
            .chain(fulfilments)
            .chain(withdrawals)
            .chain(reviews)
            .collect())
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
        let fulfilled = inner.fulfilments.contains_key(invoice_id);
        let seen = inner.invoices.get(invoice_id).map(StoredInvoice::seen);
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
        // The invoice still waits as it was read: not released, not refunded in full since.
        let waits = current.is_some_and(|r| {
            let seen = r.seen();
            let status = seen.status;
            r.released_by.is_none()
                && seen.refunds.len() == release.refunds_seen
                && match release.waiting {
                    Waiting::Held(st) => status == Some(st) && r.held,
                    Waiting::PaidLate(st) => status == Some(st) && r.paid_late_at.is_some(),
                }
        });
        if !waits {
            return Ok(Written::Refused(invoice_refused(current, release.source)));
        }
        let paid = PaidInvoice {
            invoice_id: release.invoice_id,
            status: release.waiting.paid_status(),
            order: release.order,
            source: release.source,
            at_ms: now_ms,
        };
        let writes = effect.writes(&paid);
        if let Some(refusal) = inner.fulfilment_refusal(
            release.invoice_id,
            &writes,
            release.order,
            release.amount_checked,
        ) {
            return Ok(Written::Refused(refusal));
        }
        let record = inner
            .invoices
            .entry(release.invoice_id.to_owned())
            .or_default();
        record.order.adopt(release.order);
        record.held = false;
        record.released_by = Some(release.source.id());
        record.release_reason = Some(release.reason.to_owned());
        record.applied.insert(release.source.id());
        inner.fulfil(FulfilmentRecord::of(&paid), writes);
        Ok(Written::Committed)
    }
}

/// Paymos' API in memory, for the reverse check's use-case tests: what it holds is what it
/// answers, anything else is 404.
#[derive(Debug, Default)]
pub struct MemoryPaymos {
    invoices: Mutex<HashMap<String, crate::confirm::ConfirmedInvoice>>,
    withdrawals: Mutex<HashMap<String, crate::confirm::ConfirmedWithdrawal>>,
    deposits: Mutex<HashMap<String, crate::confirm::ConfirmedDeposit>>,
    refunds: Mutex<HashMap<String, Vec<Refund>>>,
    created: Mutex<HashMap<String, i64>>,
    reads: AtomicUsize,
}

impl MemoryPaymos {
    /// An API that knows nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Holds `invoice` under `id`.
    pub fn invoice(&self, id: &str, invoice: crate::confirm::ConfirmedInvoice) {
        self.invoices
            .lock()
            .expect("lock")
            .insert(id.to_owned(), invoice);
    }

    /// Holds `withdrawal` (a payout or a refund) under `id`.
    pub fn withdrawal(&self, id: &str, withdrawal: crate::confirm::ConfirmedWithdrawal) {
        self.withdrawals
            .lock()
            .expect("lock")
            .insert(id.to_owned(), withdrawal);
    }

    /// Holds `deposit` under `id`.
    pub fn deposit(&self, id: &str, deposit: crate::confirm::ConfirmedDeposit) {
        self.deposits
            .lock()
            .expect("lock")
            .insert(id.to_owned(), deposit);
    }

    /// How many reads were answered.
    #[must_use]
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    /// Sets when `invoice_id` was created (Unix seconds); one without is in every window.
    pub fn created_at(&self, invoice_id: &str, at: i64) {
        self.created
            .lock()
            .expect("lock")
            .insert(invoice_id.to_owned(), at);
    }

    /// Records a completed refund of `invoice_id`.
    pub fn refund(&self, invoice_id: &str, refund: Refund) {
        self.refunds
            .lock()
            .expect("lock")
            .entry(invoice_id.to_owned())
            .or_default()
            .push(refund);
    }

    fn read<T: Clone>(
        &self,
        map: &Mutex<HashMap<String, T>>,
        id: &str,
    ) -> crate::confirm::AtSource<T> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        map.lock().expect("lock").get(id).cloned().map_or(
            crate::confirm::AtSource::NotFound,
            crate::confirm::AtSource::Found,
        )
    }
}

impl crate::confirm::PaymentConfirmation for MemoryPaymos {
    async fn invoice(
        &self,
        invoice_id: &str,
    ) -> Result<crate::confirm::AtSource<crate::confirm::ConfirmedInvoice>, PortError> {
        Ok(self.read(&self.invoices, invoice_id))
    }

    async fn withdrawal(
        &self,
        withdrawal_id: &str,
        _refund: bool,
    ) -> Result<crate::confirm::AtSource<crate::confirm::ConfirmedWithdrawal>, PortError> {
        Ok(self.read(&self.withdrawals, withdrawal_id))
    }

    async fn deposit(
        &self,
        deposit_id: &str,
    ) -> Result<crate::confirm::AtSource<crate::confirm::ConfirmedDeposit>, PortError> {
        Ok(self.read(&self.deposits, deposit_id))
    }
}

/// Paymos' books in memory (an invoice without a creation time is in every window).
impl PaymosLedger for MemoryPaymos {
    async fn invoices_created(
        &self,
        from: i64,
        to: i64,
    ) -> Result<Vec<(String, crate::confirm::ConfirmedInvoice)>, PortError> {
        let created = self.created.lock().expect("lock").clone();
        let mut out: Vec<_> = self
            .invoices
            .lock()
            .expect("lock")
            .iter()
            .filter(|(id, i)| {
                created.get(*id).is_none_or(|t| (from..=to).contains(t))
                    && InvoiceStatus::parse(&i.status).is_some_and(InvoiceStatus::is_final)
            })
            .map(|(id, i)| (id.clone(), i.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    async fn refunds_of(&self, invoice_id: &str) -> Result<Vec<Refund>, PortError> {
        Ok(self
            .refunds
            .lock()
            .expect("lock")
            .get(invoice_id)
            .cloned()
            .unwrap_or_default())
    }
}

impl ReconcileStore for MemoryResources {
    async fn fulfilments(&self) -> Result<Vec<FulfilmentRecord>, PortError> {
        let mut out: Vec<_> = self.lock().fulfilments.values().cloned().collect();
        out.sort_by(|a, b| a.invoice_id.cmp(&b.invoice_id));
        Ok(out)
    }

    async fn open_invoices(&self) -> Result<Vec<(String, Option<String>)>, PortError> {
        let mut out: Vec<_> = self
            .lock()
            .invoices
            .iter()
            .filter(|(_, r)| {
                r.status
                    .is_some_and(|(s, _)| InvoiceStatus::OPEN.contains(&s))
            })
            .map(|(id, r)| (id.clone(), r.order.external_id.clone()))
            .collect();
        out.sort();
        Ok(out)
    }
}

impl<T: crate::confirm::PaymentConfirmation> crate::confirm::PaymentConfirmation
    for std::sync::Arc<T>
{
    fn invoice(
        &self,
        invoice_id: &str,
    ) -> impl std::future::Future<
        Output = Result<crate::confirm::AtSource<crate::confirm::ConfirmedInvoice>, PortError>,
    > + Send {
        (**self).invoice(invoice_id)
    }

    fn withdrawal(
        &self,
        withdrawal_id: &str,
        refund: bool,
    ) -> impl std::future::Future<
        Output = Result<crate::confirm::AtSource<crate::confirm::ConfirmedWithdrawal>, PortError>,
    > + Send {
        (**self).withdrawal(withdrawal_id, refund)
    }

    fn deposit(
        &self,
        deposit_id: &str,
    ) -> impl std::future::Future<
        Output = Result<crate::confirm::AtSource<crate::confirm::ConfirmedDeposit>, PortError>,
    > + Send {
        (**self).deposit(deposit_id)
    }
}

/// An [`crate::handoff::EventPublisher`] in memory (EventBridge's twin): keeps what it
/// accepted, refuses events whose idempotency key a test names, or fails as a whole.
#[derive(Debug, Default)]
pub struct MemoryPublisher {
    published: Mutex<Vec<crate::handoff::DomainEvent>>,
    refuse: Mutex<Vec<String>>,
    down: std::sync::atomic::AtomicBool,
}

impl MemoryPublisher {
    /// A bus that accepts everything.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Refuses the event with this idempotency key (as `PutEvents` refuses one entry).
    pub fn refuse(&self, idempotency_key: &str) {
        self.refuse
            .lock()
            .expect("lock")
            .push(idempotency_key.to_owned());
    }

    /// Fails every call as a whole (the service is unavailable), or works again.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// The idempotency keys accepted, in order.
    #[must_use]
    pub fn published(&self) -> Vec<String> {
        self.published
            .lock()
            .expect("lock")
            .iter()
            .map(|e| e.idempotency_key.clone())
            .collect()
    }
}

impl crate::handoff::EventPublisher for MemoryPublisher {
    async fn publish(
        &self,
        events: &[crate::handoff::DomainEvent],
    ) -> Result<Vec<Option<String>>, PortError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(PortError::new("EventBridge PutEvents", "unavailable"));
        }
        let refuse = self.refuse.lock().expect("lock").clone();
        let mut published = self.published.lock().expect("lock");
        Ok(events
            .iter()
            .map(|e| {
                if refuse.contains(&e.idempotency_key) {
                    Some("refused".to_owned())
                } else {
                    published.push(e.clone());
                    None
                }
            })
            .collect())
    }
}
