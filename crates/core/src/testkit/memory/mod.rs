//! In-memory ports for unit tests of the domain. Not for production: nothing survives a restart.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::money::change::Applied;
use crate::money::invoice::Refund;
use crate::money::status::InvoiceStatus;
use crate::money::write::{Field, Fields, Key, Refused, Set, Stored, Table, Value, Write};
use crate::roads::exceptions::{OutcomeRecord, Resolution, ReviewLedger};
use crate::roads::fulfil::ResourceStore;
use crate::roads::ingest::{
    BodyKept, Delivery, DeliveryLedger, DeliveryState, ExistingDelivery, Listing, PortError,
    Queued, Recorded, TakeOver, WorkQueue,
};
use crate::roads::reconcile::PaymosLedger;

mod resources;
pub use resources::{MemoryResources, StoredInvoice};

/// A [`DeliveryLedger`] in a `HashMap` by delivery key ([`crate::roads::ingest::delivery_key`]), with
/// the same conditional semantics as DynamoDB's. Its stragglers' list is the `pending-by-age`
/// index's twin: a record is on it only when it was recorded [`Listing::Listed`] (`record`
/// always lists, as every record was before issue 51) or listed later
/// ([`MemoryLedger::list_straggler`], what a delayed check writes), until it is processed;
/// `stranded` reads that list alone, never every record.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    records: Mutex<HashMap<String, ExistingDelivery>>,
    bodies: Mutex<HashSet<String>>,
    listed: Mutex<HashSet<String>>,
    conflicts: Mutex<Vec<String>>,
    kept: Mutex<Vec<(String, u64)>>,
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

    /// The unprocessed deliveries whose body was kept, and when (the sweep's
    /// [`crate::roads::sweep::StrandedDeliveries::keep_unprocessed_body`]).
    #[must_use]
    pub fn bodies_kept(&self) -> Vec<(String, u64)> {
        self.kept.lock().expect("lock").clone()
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

    /// Marks the record under `key` processed, as the fulfil side would (which takes it off
    /// the stragglers' list).
    pub fn mark_processed(&self, key: &str) {
        if let Some(r) = self.records.lock().expect("lock").get_mut(key) {
            r.state = DeliveryState::Processed;
        }
        self.listed.lock().expect("lock").remove(key);
    }

    /// Lists the record under `key` as a straggler if it is still received, as a delayed
    /// check's write does (`write::straggler`); whether it listed it now.
    pub fn list_straggler(&self, key: &str) -> bool {
        let received = self
            .records
            .lock()
            .expect("lock")
            .get(key)
            .is_some_and(|r| r.state == DeliveryState::Received);
        received && self.listed.lock().expect("lock").insert(key.to_owned())
    }

    /// Whether the record under `key` is on the stragglers' list.
    #[must_use]
    pub fn is_listed(&self, key: &str) -> bool {
        self.listed.lock().expect("lock").contains(key)
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
        self.keep_body(delivery).await?;
        self.record_listed(delivery, lease_until_ms, Listing::Listed)
            .await
    }

    // Counted with the record's put, as `record` counts both as one call.
    async fn keep_body(&self, delivery: &Delivery) -> Result<BodyKept, PortError> {
        let body = format!("{}#{}", delivery.key(), delivery.body_sha256);
        Ok(if self.bodies.lock().expect("lock").insert(body) {
            BodyKept::New
        } else {
            BodyKept::Seen
        })
    }

    async fn record_listed(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
        listing: Listing,
    ) -> Result<Recorded, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut records = self.records.lock().expect("lock");
        let key = delivery.key();
        if let Some(existing) = records.get(&key) {
            return Ok(Recorded::Existing(Box::new(existing.clone())));
        }
        if listing == Listing::Listed {
            self.listed.lock().expect("lock").insert(key.clone());
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

impl crate::roads::sweep::StrandedDeliveries for MemoryLedger {
    async fn stranded(
        &self,
        received_before_ms: u64,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<ExistingDelivery>, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let listed = self.listed.lock().expect("lock").clone();
        let mut found: Vec<ExistingDelivery> = self
            .records
            .lock()
            .expect("lock")
            .values()
            .filter(|r| {
                listed.contains(&r.delivery.key())
                    && r.state == DeliveryState::Received
                    && r.delivery.received_at_ms < received_before_ms
                    && r.lease_until_ms < now_ms
            })
            .cloned()
            .collect();
        found.sort_by_key(|r| r.delivery.received_at_ms);
        found.truncate(limit);
        Ok(found)
    }

    async fn keep_unprocessed_body(
        &self,
        delivery: &crate::roads::ingest::Delivery,
        now_ms: u64,
    ) -> Result<(), PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.kept
            .lock()
            .expect("lock")
            .push((delivery.event_id.clone(), now_ms));
        Ok(())
    }
}

/// The deliveries table as fulfil's ledger writes see it (a delivery's mark, a straggler's
/// listing): each write's guard evaluated with [`Guard::holds`] on the record's state and
/// listing, as DynamoDB renders it as one condition on the same item ingest wrote. Only the
/// ledger's items: a state item is refused as a misuse.
impl ResourceStore for MemoryLedger {
    async fn write(&self, writes: &[Write]) -> Result<Stored, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut refused = Vec::new();
        for w in writes {
            if w.key.table != Table::Ledger {
                return Err(PortError::new("memory ledger", "a state item's write"));
            }
            let found = self.fields(&w.key.id);
            if !w.guard.holds(found.as_ref()) {
                refused.push(Refused {
                    write: w.what,
                    found: found.unwrap_or_default(),
                });
            }
        }
        if !refused.is_empty() {
            return Ok(Stored::Refused(refused));
        }
        for w in writes {
            for set in &w.set {
                match set {
                    Set::Put(Field::State, value) if value == &Value::text("processed") => {
                        self.mark_processed(&w.key.id);
                    }
                    Set::Put(Field::PendingShard, _) => {
                        self.listed.lock().expect("lock").insert(w.key.id.clone());
                    }
                    Set::Remove(Field::PendingShard) => {
                        self.listed.lock().expect("lock").remove(&w.key.id);
                    }
                    _ => {}
                }
            }
        }
        Ok(Stored::Committed)
    }

    async fn read(&self, key: &Key) -> Result<Option<Fields>, PortError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(self.fields(&key.id))
    }
}

impl MemoryLedger {
    /// The record under `key` as the write vocabulary reads it: its state, and its list when it
    /// is on the stragglers'.
    fn fields(&self, key: &str) -> Option<Fields> {
        let record = self.get(key)?;
        let mut fields = Fields::new();
        fields.insert(Field::State, Value::text(record.state.as_str()));
        fields.insert(
            Field::BodySha256,
            Value::text(record.delivery.body_sha256.clone()),
        );
        if self.is_listed(key) {
            fields.insert(
                Field::PendingShard,
                Value::Text(crate::money::write::pending_shard(key)),
            );
        }
        Some(fields)
    }
}

/// A [`crate::roads::ingest::KeySource`] whose secrets a test can rotate.
#[derive(Debug, Default)]
pub struct MemoryKeys {
    keys: Mutex<Vec<crate::wire::signature::SigningKey>>,
    reads: AtomicUsize,
}

impl MemoryKeys {
    /// A source holding `keys`.
    #[must_use]
    pub fn new(keys: Vec<crate::wire::signature::SigningKey>) -> Self {
        Self {
            keys: Mutex::new(keys),
            reads: AtomicUsize::new(0),
        }
    }

    /// Replaces the secrets (a rotation in the secret store).
    pub fn rotate(&self, keys: Vec<crate::wire::signature::SigningKey>) {
        *self.keys.lock().expect("lock") = keys;
    }

    /// How many times the secrets were read.
    #[must_use]
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl crate::roads::ingest::KeySource for MemoryKeys {
    async fn keys(&self) -> Result<Vec<crate::wire::signature::SigningKey>, PortError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.keys.lock().expect("lock").clone())
    }
}

/// A [`WorkQueue`] in a `Vec`, which can be told to fail the next sends, or to refuse the next
/// checks (a batch whose check entry failed). Its checks are kept as (delivery key, due in
/// seconds).
#[derive(Debug, Default)]
pub struct MemoryQueue {
    sent: Mutex<Vec<Delivery>>,
    checks: Mutex<Vec<(String, u32)>>,
    failures_left: AtomicUsize,
    checks_refused: AtomicUsize,
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

    /// Makes the next `n` checks fail while their work items are sent.
    pub fn refuse_next_checks(&self, n: usize) {
        self.checks_refused.store(n, Ordering::SeqCst);
    }

    /// The checks queued so far: (delivery key, due in seconds).
    #[must_use]
    pub fn checks(&self) -> Vec<(String, u32)> {
        self.checks.lock().expect("lock").clone()
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

    async fn enqueue_checked(
        &self,
        delivery: &Delivery,
        check_after_secs: u32,
    ) -> Result<Queued, PortError> {
        self.enqueue(delivery).await?;
        let refused = self
            .checks_refused
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !refused {
            self.checks
                .lock()
                .expect("lock")
                .push((delivery.key(), check_after_secs));
        }
        Ok(Queued {
            work: true,
            check: !refused,
        })
    }
}

/// The deliveries ledger's reviews in memory: processed deliveries whose outcome waits for a
/// person, as a test records them, and what resolved each.
#[derive(Debug, Default)]
pub struct MemoryReviews {
    waiting: Mutex<Vec<OutcomeRecord>>,
    resolved: Mutex<HashMap<String, (Resolution, String)>>,
    reasons_noted: AtomicUsize,
}

impl MemoryReviews {
    /// No delivery waits.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `delivery` was processed as `outcome` (`why`) at `at_ms`.
    pub fn processed(&self, delivery: Delivery, outcome: Applied, why: &str, at_ms: u64) {
        self.waiting.lock().expect("lock").push(OutcomeRecord {
            delivery,
            outcome,
            reason: Some(why.to_owned()),
            processed_at_ms: at_ms,
        });
    }

    /// How many times a re-check noted a new reason ([`ReviewLedger::note_reason`]).
    #[must_use]
    pub fn reasons_noted(&self) -> usize {
        self.reasons_noted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What resolved `event_id` (its new outcome as stored, and by whom), if anything did.
    #[must_use]
    pub fn resolved(&self, event_id: &str) -> Option<(String, String)> {
        self.resolved
            .lock()
            .expect("lock")
            .get(event_id)
            .map(|(r, by)| (r.name(), by.clone()))
    }
}

impl ReviewLedger for MemoryReviews {
    async fn with_outcomes(
        &self,
        outcomes: &[Applied],
        resource_id: Option<&str>,
    ) -> Result<Vec<OutcomeRecord>, PortError> {
        let resolved = self.resolved.lock().expect("lock").clone();
        let mut out: Vec<_> = self
            .waiting
            .lock()
            .expect("lock")
            .iter()
            // As it stands now: a resolution replaces the outcome, as DynamoDB's does (only one
            // that waits for its order is still an outcome a person acts on).
            .filter_map(|r| match resolved.get(&r.delivery.event_id) {
                None => Some(r.clone()),
                Some((resolution, _)) => resolution.still_waits().map(|outcome| OutcomeRecord {
                    outcome,
                    ..r.clone()
                }),
            })
            .filter(|r| {
                outcomes.contains(&r.outcome)
                    && resource_id.is_none_or(|id| r.delivery.resource_id.as_deref() == Some(id))
            })
            .collect();
        out.sort_by_key(|r| r.processed_at_ms);
        Ok(out)
    }

    async fn mark_resolved(
        &self,
        event_id: &str,
        resolution: Resolution,
        by: &str,
        _at_ms: u64,
    ) -> Result<(), PortError> {
        self.resolved
            .lock()
            .expect("lock")
            .insert(event_id.to_owned(), (resolution, by.to_owned()));
        Ok(())
    }

    async fn note_reason(
        &self,
        event_id: &str,
        reason: &str,
        _at_ms: u64,
    ) -> Result<(), PortError> {
        if self.resolved.lock().expect("lock").contains_key(event_id) {
            return Ok(());
        }
        for r in self.waiting.lock().expect("lock").iter_mut() {
            if r.delivery.event_id == event_id {
                r.reason = Some(reason.to_owned());
            }
        }
        self.reasons_noted
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

/// Paymos' API in memory, for the reverse check's use-case tests: what it holds is what it
/// answers, anything else is 404.
#[derive(Debug, Default)]
pub struct MemoryPaymos {
    invoices: Mutex<HashMap<String, crate::roads::confirm::ConfirmedInvoice>>,
    withdrawals: Mutex<HashMap<String, crate::roads::confirm::ConfirmedWithdrawal>>,
    deposits: Mutex<HashMap<String, crate::roads::confirm::ConfirmedDeposit>>,
    refunds: Mutex<HashMap<String, Vec<Refund>>>,
    created: Mutex<HashMap<String, i64>>,
    listings: Mutex<Vec<(i64, i64)>>,
    reads: AtomicUsize,
    unreadable: Mutex<std::collections::HashSet<String>>,
    twice: std::sync::atomic::AtomicBool,
}

impl MemoryPaymos {
    /// An API that knows nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists each invoice twice from now on, as overlapping cursor pages do.
    pub fn list_twice(&self) {
        self.twice.store(true, Ordering::SeqCst);
    }

    /// Holds `invoice` under `id`.
    pub fn invoice(&self, id: &str, invoice: crate::roads::confirm::ConfirmedInvoice) {
        self.invoices
            .lock()
            .expect("lock")
            .insert(id.to_owned(), invoice);
    }

    /// Holds `withdrawal` (a payout or a refund) under `id`.
    pub fn withdrawal(&self, id: &str, withdrawal: crate::roads::confirm::ConfirmedWithdrawal) {
        self.withdrawals
            .lock()
            .expect("lock")
            .insert(id.to_owned(), withdrawal);
    }

    /// Holds `deposit` under `id`.
    pub fn deposit(&self, id: &str, deposit: crate::roads::confirm::ConfirmedDeposit) {
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

    /// Each listing asked for (`created_from`, `created_to`), in order.
    #[must_use]
    pub fn listings(&self) -> Vec<(i64, i64)> {
        self.listings.lock().expect("lock").clone()
    }

    /// Sets when `invoice_id` was created (Unix seconds); one without is in every window (and
    /// in every slice of a scheduled run's: give it one there).
    pub fn created_at(&self, invoice_id: &str, at: i64) {
        self.created
            .lock()
            .expect("lock")
            .insert(invoice_id.to_owned(), at);
    }

    /// Answers `invoice_id` with something that does not decode (a field missing), as its own
    /// read and in any listing that holds it (one item fails its page).
    pub fn unreadable(&self, invoice_id: &str) {
        self.unreadable
            .lock()
            .expect("lock")
            .insert(invoice_id.to_owned());
    }

    /// Answers the refunds of `invoice_id` with something that does not decode.
    pub fn unreadable_refunds(&self, invoice_id: &str) {
        self.unreadable
            .lock()
            .expect("lock")
            .insert(format!("refunds:{invoice_id}"));
    }

    fn unreadable_error(&self, operation: &'static str, about: &str) -> PortError {
        PortError::of_kind(
            operation,
            crate::port::PortErrorKind::Unreadable,
            format!("{about}: missing field `amount`"),
        )
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
    ) -> crate::roads::confirm::AtSource<T> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        map.lock().expect("lock").get(id).cloned().map_or(
            crate::roads::confirm::AtSource::NotFound,
            crate::roads::confirm::AtSource::Found,
        )
    }
}

impl crate::roads::confirm::PaymentConfirmation for MemoryPaymos {
    async fn invoice(
        &self,
        invoice_id: &str,
    ) -> Result<crate::roads::confirm::AtSource<crate::roads::confirm::ConfirmedInvoice>, PortError>
    {
        if self.unreadable.lock().expect("lock").contains(invoice_id) {
            return Err(self.unreadable_error("Paymos GET /v1/invoices/{id}", invoice_id));
        }
        Ok(self.read(&self.invoices, invoice_id))
    }

    async fn withdrawal(
        &self,
        withdrawal_id: &str,
        _refund: bool,
    ) -> Result<
        crate::roads::confirm::AtSource<crate::roads::confirm::ConfirmedWithdrawal>,
        PortError,
    > {
        Ok(self.read(&self.withdrawals, withdrawal_id))
    }

    async fn deposit(
        &self,
        deposit_id: &str,
    ) -> Result<crate::roads::confirm::AtSource<crate::roads::confirm::ConfirmedDeposit>, PortError>
    {
        Ok(self.read(&self.deposits, deposit_id))
    }

    async fn refunds_of(&self, invoice_id: &str) -> Result<Vec<Refund>, PortError> {
        let key = format!("refunds:{invoice_id}");
        if self.unreadable.lock().expect("lock").contains(&key) {
            return Err(self.unreadable_error("Paymos GET /v1/refunds", invoice_id));
        }
        Ok(self
            .refunds
            .lock()
            .expect("lock")
            .get(invoice_id)
            .cloned()
            .unwrap_or_default())
    }
}

/// Paymos' books in memory (an invoice without a creation time is in every window).
impl PaymosLedger for MemoryPaymos {
    async fn invoices_created(
        &self,
        from: i64,
        to: i64,
    ) -> Result<Vec<(String, crate::roads::confirm::ConfirmedInvoice)>, PortError> {
        self.listings.lock().expect("lock").push((from, to));
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
        if self.twice.load(Ordering::SeqCst) {
            out.extend(out.clone());
        }
        let unreadable = self.unreadable.lock().expect("lock");
        if out.iter().any(|(id, _)| unreadable.contains(id)) {
            return Err(self.unreadable_error(
                "Paymos GET /v1/invoices",
                &format!("the invoices created from {from} to {to}"),
            ));
        }
        Ok(out)
    }
}

impl<T: crate::roads::confirm::PaymentConfirmation> crate::roads::confirm::PaymentConfirmation
    for std::sync::Arc<T>
{
    fn invoice(
        &self,
        invoice_id: &str,
    ) -> impl std::future::Future<
        Output = Result<
            crate::roads::confirm::AtSource<crate::roads::confirm::ConfirmedInvoice>,
            PortError,
        >,
    > + Send {
        (**self).invoice(invoice_id)
    }

    fn withdrawal(
        &self,
        withdrawal_id: &str,
        refund: bool,
    ) -> impl std::future::Future<
        Output = Result<
            crate::roads::confirm::AtSource<crate::roads::confirm::ConfirmedWithdrawal>,
            PortError,
        >,
    > + Send {
        (**self).withdrawal(withdrawal_id, refund)
    }

    fn deposit(
        &self,
        deposit_id: &str,
    ) -> impl std::future::Future<
        Output = Result<
            crate::roads::confirm::AtSource<crate::roads::confirm::ConfirmedDeposit>,
            PortError,
        >,
    > + Send {
        (**self).deposit(deposit_id)
    }

    fn refunds_of(
        &self,
        invoice_id: &str,
    ) -> impl std::future::Future<Output = Result<Vec<Refund>, PortError>> + Send {
        (**self).refunds_of(invoice_id)
    }
}

/// An [`crate::roads::handoff::EventPublisher`] in memory (EventBridge's twin): keeps what it
/// accepted, refuses events whose idempotency key a test names, or fails as a whole.
#[derive(Debug, Default)]
pub struct MemoryPublisher {
    published: Mutex<Vec<crate::roads::handoff::DomainEvent>>,
    refuse: Mutex<Vec<String>>,
    down: std::sync::atomic::AtomicBool,
    /// Each call's number of entries, in the order the calls began.
    calls: Mutex<Vec<usize>>,
    /// Calls begun and not yet answered, and the most there ever were at once.
    in_flight: std::sync::atomic::AtomicUsize,
    most_in_flight: std::sync::atomic::AtomicUsize,
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

    /// Each call's number of entries, in the order the calls began.
    #[must_use]
    pub fn calls(&self) -> Vec<usize> {
        self.calls.lock().expect("lock").clone()
    }

    /// The most calls that were in flight at once.
    #[must_use]
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
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

impl crate::roads::handoff::EventPublisher for MemoryPublisher {
    async fn publish(
        &self,
        events: &[crate::roads::handoff::DomainEvent],
    ) -> Result<Vec<Option<String>>, PortError> {
        self.calls.lock().expect("lock").push(events.len());
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        // A call takes a turn of the executor, as a network call would: others begun beside it
        // are in flight together.
        let mut waited = false;
        std::future::poll_fn(|cx| {
            if waited {
                std::task::Poll::Ready(())
            } else {
                waited = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
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

/// A [`crate::roads::outbound::RetryQueue`] in memory: the delays asked for, by receipt, and the
/// messages parked.
#[derive(Debug, Default)]
pub struct MemoryRetries {
    asked: Mutex<Vec<(String, u32)>>,
    parked: Mutex<Vec<(String, String)>>,
}

impl MemoryRetries {
    /// None asked yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The delays asked for, in order.
    #[must_use]
    pub fn asked(&self) -> Vec<(String, u32)> {
        self.asked.lock().expect("lock").clone()
    }

    /// The bodies parked, with why.
    #[must_use]
    pub fn parked(&self) -> Vec<(String, String)> {
        self.parked.lock().expect("lock").clone()
    }
}

impl crate::roads::outbound::RetryQueue for MemoryRetries {
    async fn retry_in(&self, receipt: &str, delay_s: u32) -> Result<(), PortError> {
        self.asked
            .lock()
            .expect("lock")
            .push((receipt.to_owned(), delay_s));
        Ok(())
    }

    async fn park(&self, body: &str, why: &str) -> Result<(), PortError> {
        self.parked
            .lock()
            .expect("lock")
            .push((body.to_owned(), why.to_owned()));
        Ok(())
    }
}

/// A [`crate::roads::endpoint::DeliverySwitch`] in memory (the deliver function's event source
/// mapping): on until turned off.
#[derive(Debug)]
pub struct MemorySwitch(std::sync::atomic::AtomicBool);

impl Default for MemorySwitch {
    fn default() -> Self {
        Self(std::sync::atomic::AtomicBool::new(true))
    }
}

impl crate::roads::endpoint::DeliverySwitch for MemorySwitch {
    async fn is_on(&self) -> Result<bool, PortError> {
        Ok(self.0.load(Ordering::SeqCst))
    }

    async fn turn(&self, on: bool) -> Result<bool, PortError> {
        Ok(self.0.swap(on, Ordering::SeqCst) != on)
    }
}
