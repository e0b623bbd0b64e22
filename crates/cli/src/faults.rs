//! Fault injection around the real ports, for the soak: a call may fail before it is made, be
//! made and then report failure (the reply was lost), or crash (be made or not, then never
//! return: the process "dies" and the caller's timeout, like Lambda's, drops it).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use paymos_inbox_core::money::write::{Fields, Key, Stored, Write};
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::fulfil::ResourceStore;
use paymos_inbox_core::roads::ingest::{
    BodyKept, Delivery, DeliveryLedger, ExistingDelivery, Listing, Queued, Recorded, TakeOver,
    WorkQueue,
};

/// What happens to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing.
    None,
    /// Fails before reaching the service.
    Fail,
    /// Reaches the service, then the reply is lost: the caller sees an error.
    LostReply,
    /// The process dies: before the call, or after it succeeded.
    Crash {
        /// Whether the call reached the service first.
        after: bool,
    },
}

/// Shared fault settings and counters (a seeded xorshift, so a run can be repeated).
#[derive(Debug)]
pub struct Faults {
    fail_rate: f64,
    crash_rate: f64,
    enabled: AtomicBool,
    state: Mutex<u64>,
    /// Calls made through the wrappers.
    pub calls: AtomicU64,
    /// Calls failed before the service.
    pub failed: AtomicU64,
    /// Calls whose reply was lost.
    pub lost_replies: AtomicU64,
    /// Simulated crashes.
    pub crashes: AtomicU64,
}

impl Faults {
    /// `fail_rate` of the calls fail (half before, half after reaching the service);
    /// `crash_rate` of them crash.
    #[must_use]
    pub fn new(fail_rate: f64, crash_rate: f64, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            fail_rate,
            crash_rate,
            enabled: AtomicBool::new(true),
            state: Mutex::new(seed | 1),
            calls: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            lost_replies: AtomicU64::new(0),
            crashes: AtomicU64::new(0),
        })
    }

    /// Turns injection on or off (off for the final checks).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
    }

    /// A number in [0, 1).
    pub fn uniform(&self) -> f64 {
        let mut s = self.state.lock().expect("rng");
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        #[allow(clippy::cast_precision_loss)]
        let x = (*s >> 11) as f64 / (1u64 << 53) as f64;
        x
    }

    fn roll(&self) -> Fault {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if !self.enabled.load(Ordering::SeqCst) {
            return Fault::None;
        }
        let x = self.uniform();
        if x < self.fail_rate / 2.0 {
            self.failed.fetch_add(1, Ordering::Relaxed);
            Fault::Fail
        } else if x < self.fail_rate {
            self.lost_replies.fetch_add(1, Ordering::Relaxed);
            Fault::LostReply
        } else if x < self.fail_rate + self.crash_rate {
            self.crashes.fetch_add(1, Ordering::Relaxed);
            Fault::Crash {
                after: self.uniform() < 0.5,
            }
        } else {
            Fault::None
        }
    }

    async fn around<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, PortError>>,
    ) -> Result<T, PortError> {
        match self.roll() {
            Fault::None => call.await,
            Fault::Fail => Err(PortError::new(
                operation,
                "injected failure before the call",
            )),
            Fault::LostReply => {
                let _ = call.await;
                Err(PortError::new(
                    operation,
                    "injected failure: the reply was lost",
                ))
            }
            Fault::Crash { after } => {
                if after {
                    let _ = call.await;
                }
                std::future::pending().await
            }
        }
    }
}

/// A port with faults injected into every call.
#[derive(Debug, Clone)]
pub struct Faulty<P> {
    inner: P,
    faults: Arc<Faults>,
}

impl<P> Faulty<P> {
    /// Wraps `inner`.
    pub fn new(inner: P, faults: Arc<Faults>) -> Self {
        Self { inner, faults }
    }

    /// The wrapped port.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

impl<L: DeliveryLedger> DeliveryLedger for Faulty<L> {
    async fn record(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
    ) -> Result<Recorded, PortError> {
        self.faults
            .around("PutItem", self.inner.record(delivery, lease_until_ms))
            .await
    }

    async fn keep_body(&self, delivery: &Delivery) -> Result<BodyKept, PortError> {
        self.faults
            .around("PutItem", self.inner.keep_body(delivery))
            .await
    }

    async fn record_listed(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
        listing: Listing,
    ) -> Result<Recorded, PortError> {
        self.faults
            .around(
                "PutItem",
                self.inner.record_listed(delivery, lease_until_ms, listing),
            )
            .await
    }

    async fn find(&self, key: &str) -> Result<Option<ExistingDelivery>, PortError> {
        self.faults.around("GetItem", self.inner.find(key)).await
    }

    async fn take_over(&self, key: &str, seen: u64, new: u64) -> Result<TakeOver, PortError> {
        self.faults
            .around("UpdateItem", self.inner.take_over(key, seen, new))
            .await
    }

    async fn release(&self, key: &str, lease_ms: u64) -> Result<(), PortError> {
        self.faults
            .around("UpdateItem", self.inner.release(key, lease_ms))
            .await
    }

    async fn mark_conflict(&self, key: &str, sha: &str, at_ms: u64) -> Result<(), PortError> {
        self.faults
            .around("UpdateItem", self.inner.mark_conflict(key, sha, at_ms))
            .await
    }
}

impl<Q: WorkQueue> WorkQueue for Faulty<Q> {
    async fn enqueue(&self, delivery: &Delivery) -> Result<(), PortError> {
        self.faults
            .around("SendMessage", self.inner.enqueue(delivery))
            .await
    }

    async fn enqueue_checked(
        &self,
        delivery: &Delivery,
        check_after_secs: u32,
    ) -> Result<Queued, PortError> {
        self.faults
            .around(
                "SendMessageBatch",
                self.inner.enqueue_checked(delivery, check_after_secs),
            )
            .await
    }
}

impl<S: ResourceStore> ResourceStore for Faulty<S> {
    async fn write(&self, writes: &[Write]) -> Result<Stored, PortError> {
        self.faults
            .around("TransactWriteItems", self.inner.write(writes))
            .await
    }

    async fn read(&self, key: &Key) -> Result<Option<Fields>, PortError> {
        self.faults.around("GetItem", self.inner.read(key)).await
    }
}
