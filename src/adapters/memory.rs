//! In-memory ports for unit tests of the domain. Not for production: nothing survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::domain::ingest::{
    Delivery, DeliveryLedger, DeliveryState, ExistingDelivery, PortError, Recorded, TakeOver,
    WorkQueue,
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
