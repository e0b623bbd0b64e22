//! The sweep: re-sends deliveries that were recorded (and so acknowledged, or about to be) but
//! never processed, long after the attempt that recorded them is gone. Paymos' retries usually
//! do this; the sweep covers the cases where nobody will retry any more (the sender gave up, a
//! DLQ message aged out, a send failed on the last attempt), so every acknowledged delivery is
//! applied or sits in a named outcome.

use std::future::Future;

use crate::port::PortError;
use crate::roads::ingest::{DeliveryLedger, ExistingDelivery, TakeOver, WorkQueue};

/// The default age after which a `received` record counts as stranded: well past the 30 s
/// lease and Paymos' first retries (1 and 5 minutes).
pub const DEFAULT_SWEEP_AFTER_SECS: u64 = 600;

/// The longest the sweep leaves a record between two sends: an hour.
pub const MAX_RESEND_GAP_MS: u64 = 3_600_000;

/// Whether the sweep sends `record` again at `now_ms`: when its last send (the end of the lease
/// that send took; a released lease is long past) lies at least half the record's age back, at
/// most [`MAX_RESEND_GAP_MS`]. A delivery that waits through an outage is then sent again at
/// ever wider spaces, not once a run: each copy is one more message for a fulfil that cannot
/// apply the first (it waits in the queue, paced), and none is lost by waiting.
#[must_use]
pub fn due(record: &ExistingDelivery, now_ms: u64) -> bool {
    let age = now_ms.saturating_sub(record.delivery.received_at_ms);
    now_ms.saturating_sub(record.lease_until_ms) >= (age / 2).min(MAX_RESEND_GAP_MS)
}

/// Records still `received` well after they arrived.
pub trait StrandedDeliveries: Send + Sync {
    /// Up to `limit` records, oldest first, received before `received_before_ms`, not processed,
    /// and whose lease ended before `now_ms`.
    fn stranded(
        &self,
        received_before_ms: u64,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<ExistingDelivery>, PortError>> + Send;

    /// Keeps the body of `delivery`, not processed yet, for a whole body retention counted from
    /// `now_ms`: a body's retention runs from when its delivery is processed, never while it
    /// still waits to be applied.
    fn keep_unprocessed_body(
        &self,
        delivery: &crate::roads::ingest::Delivery,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Swept {
    /// Stranded records found.
    pub found: usize,
    /// Taken over and sent to the queue again.
    pub resent: usize,
    /// Changed by someone else meanwhile (a retry took it over, fulfil processed it).
    pub skipped: usize,
    /// Taken over but the send failed (the lease is released; the next sweep tries again).
    pub failed: usize,
    /// Not sent yet: sent again less than half its age ago ([`due`]).
    pub spaced: usize,
    /// Not sent: the body is gone (a record older than the body retention, never processed).
    /// Left `received`, listed by `pending`: a replay from Paymos' dashboard brings the body
    /// back (ingest puts it again), and the next sweep sends it.
    pub bodiless: usize,
}

/// The scheduled sweep: [`resend_stranded`] for the records that are [`due`] (the others are
/// counted `spaced`).
///
/// # Errors
/// As [`resend_stranded`].
pub async fn sweep_stranded<L, Q>(
    ledger: &L,
    queue: &Q,
    lease_secs: u64,
    received_before_ms: u64,
    now_ms: u64,
    limit: usize,
) -> Result<Swept, PortError>
where
    L: DeliveryLedger + StrandedDeliveries,
    Q: WorkQueue,
{
    let window = (received_before_ms, now_ms, limit);
    resend(ledger, queue, lease_secs, window, true).await
}

/// Takes over each stranded record (the same conditional take-over a late retry uses, so a
/// retry arriving at the same moment and the sweep never both send) and sends it again: a
/// person's `pending --resend`, which sends now whatever is stranded.
///
/// # Errors
/// [`PortError`] when the ledger cannot be read or a take-over fails.
pub async fn resend_stranded<L, Q>(
    ledger: &L,
    queue: &Q,
    lease_secs: u64,
    received_before_ms: u64,
    now_ms: u64,
    limit: usize,
) -> Result<Swept, PortError>
where
    L: DeliveryLedger + StrandedDeliveries,
    Q: WorkQueue,
{
    let window = (received_before_ms, now_ms, limit);
    resend(ledger, queue, lease_secs, window, false).await
}

async fn resend<L, Q>(
    ledger: &L,
    queue: &Q,
    lease_secs: u64,
    (received_before_ms, now_ms, limit): (u64, u64, usize),
    spaced: bool,
) -> Result<Swept, PortError>
where
    L: DeliveryLedger + StrandedDeliveries,
    Q: WorkQueue,
{
    let stranded = ledger.stranded(received_before_ms, now_ms, limit).await?;
    let mut swept = Swept {
        found: stranded.len(),
        ..Swept::default()
    };
    for record in stranded {
        if spaced && !due(&record, now_ms) {
            swept.spaced += 1;
            continue;
        }
        let event_id = &record.delivery.event_id;
        // Kept first: a record not processed never expires, its body gone or not.
        ledger
            .keep_unprocessed_body(&record.delivery, now_ms)
            .await?;
        if record.delivery.body.is_empty() {
            // Never an empty body on the queue: fulfil would close it `unusable`, and Paymos'
            // replay would then be a duplicate that applies nothing.
            tracing::error!(event_id = %event_id, event_type = %record.delivery.event_type, "a stranded delivery's body is gone: not sent; replay the event from Paymos' dashboard (ingest keeps the body again)");
            swept.bodiless += 1;
            continue;
        }
        let key = record.delivery.key();
        let lease = now_ms + lease_secs * 1000;
        match ledger.take_over(&key, record.lease_until_ms, lease).await? {
            TakeOver::Won => match queue.enqueue(&record.delivery).await {
                Ok(()) => {
                    tracing::warn!(event_id = %event_id, event_type = %record.delivery.event_type, received_at_ms = record.delivery.received_at_ms, "stranded delivery sent again by the sweep");
                    swept.resent += 1;
                }
                Err(error) => {
                    tracing::error!(event_id = %event_id, error = %error, "the sweep could not send a stranded delivery; the next sweep retries");
                    let _ = ledger.release(&key, lease).await;
                    swept.failed += 1;
                }
            },
            TakeOver::Lost(_) => swept.skipped += 1,
        }
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roads::ingest::{Delivery, Recorded};
    use crate::testkit::memory::{MemoryLedger, MemoryQueue};
    use crate::wire::envelope::Category;

    fn delivery(event_id: &str, received_at_ms: u64) -> Delivery {
        Delivery {
            event_id: event_id.into(),
            event_type: "invoice.paid".into(),
            category: Category::Invoice,
            resource_id: Some("inv_1".into()),
            environment: None,
            secret_label: "live".into(),
            version: 1,
            occurred_at: 1,
            signed_at: 1,
            received_at_ms,
            body: b"{}".to_vec(),
            body_sha256: String::new(),
        }
    }

    #[tokio::test]
    async fn only_old_unprocessed_records_past_their_lease_are_sent_again_once() {
        let ledger = MemoryLedger::new();
        let queue = MemoryQueue::new();
        let now = 10_000_000;
        for (id, at, lease) in [
            ("evt_old", 1_000, 31_000),               // stranded
            ("evt_processed", 1_000, 31_000),         // applied already
            ("evt_young", now - 1_000, now + 29_000), // its first attempt may still send it
            ("evt_leased", 1_000, now + 5_000),       // a retry holds it right now
        ] {
            assert_eq!(
                ledger.record(&delivery(id, at), lease).await.unwrap(),
                Recorded::New
            );
        }
        ledger.mark_processed("evt_processed");
        let swept = resend_stranded(&ledger, &queue, 30, now - 600_000, now, 100)
            .await
            .unwrap();
        assert_eq!((swept.found, swept.resent), (1, 1));
        let sent: Vec<_> = queue.sent().into_iter().map(|d| d.event_id).collect();
        assert_eq!(sent, ["evt_old"]);
        // It holds the record for one lease, as an attempt does: a retry within it is told to
        // wait, not sent a second copy.
        let held = ledger.find("evt_old").await.unwrap().unwrap();
        assert_eq!(held.lease_until_ms, now + 30_000);
        // Its lease is taken: a second sweep right after finds nothing to do.
        let again = resend_stranded(&ledger, &queue, 30, now - 600_000, now + 1, 100)
            .await
            .unwrap();
        assert_eq!(again.resent, 0);
        assert_eq!(queue.sent().len(), 1);
    }

    // A record whose body is gone is never sent with an empty body; one that
    // is sent keeps its body for a whole retention from now.
    #[tokio::test]
    async fn a_stranded_delivery_is_sent_with_its_body_or_not_at_all() {
        let ledger = MemoryLedger::new();
        let queue = MemoryQueue::new();
        let bodiless = Delivery {
            body: Vec::new(),
            ..delivery("evt_gone", 1_000)
        };
        ledger.record(&bodiless, 2_000).await.unwrap();
        ledger
            .record(&delivery("evt_kept", 1_000), 2_000)
            .await
            .unwrap();
        let swept = resend_stranded(&ledger, &queue, 30, 600_000, 1_000_000, 10)
            .await
            .unwrap();
        assert_eq!((swept.found, swept.resent, swept.bodiless), (2, 1, 1));
        let sent: Vec<_> = queue.sent().into_iter().map(|d| d.event_id).collect();
        assert_eq!(sent, ["evt_kept"], "never an empty body");
        assert!(queue.sent().iter().all(|d| !d.body.is_empty()));
        // Both records are kept from now (a record not processed never expires), the
        // bodiless one too; only the one with its body is sent.
        let mut kept = ledger.bodies_kept();
        kept.sort();
        assert_eq!(
            kept,
            [
                ("evt_gone".to_owned(), 1_000_000),
                ("evt_kept".to_owned(), 1_000_000)
            ]
        );
    }

    // A delivery that waits through an outage (fulfil cannot apply it; its copy waits
    // in the queue) was sent again by every run, one more message each time for a fulfil already
    // behind. Its sends now space out: half its age since the last one, at most an hour apart.
    #[tokio::test]
    async fn a_delivery_stranded_through_an_outage_is_sent_again_at_widening_spaces() {
        let ledger = MemoryLedger::new();
        let queue = MemoryQueue::new();
        let minute: u64 = 60_000;
        // Received at 0; ingest's attempt held it 30 s, then nothing applied it.
        ledger.record(&delivery("evt_1", 0), 30_000).await.unwrap();
        let mut sent_at = Vec::new();
        let mut spaced = 0;
        // A sweep every 5 minutes for 4 hours, each taking records 10 minutes old.
        for run in 1..=48 {
            let now = run * 5 * minute;
            let swept = sweep_stranded(
                &ledger,
                &queue,
                30,
                now.saturating_sub(10 * minute),
                now,
                10,
            )
            .await
            .unwrap();
            spaced += swept.spaced;
            if swept.resent == 1 {
                sent_at.push(now / minute);
            }
        }
        // Every run from minute 15 (the first to find it 10 minutes old) sent it: 46 copies.
        assert_eq!(sent_at, [15, 35, 75, 140, 205]);
        assert_eq!(queue.sent().len(), 5);
        assert_eq!(spaced, 46 - 5);
        // A person's `pending --resend` sends it now, spaced or not.
        let now = 241 * minute;
        let person = resend_stranded(&ledger, &queue, 30, now - 10 * minute, now, 10)
            .await
            .unwrap();
        assert_eq!((person.resent, person.spaced), (1, 0));
    }

    /// The memory ledger, where a retry takes each record over just before the sweep does.
    struct RetryFirst(MemoryLedger);

    impl DeliveryLedger for RetryFirst {
        async fn record(&self, d: &Delivery, lease: u64) -> Result<Recorded, PortError> {
            self.0.record(d, lease).await
        }
        async fn find(&self, key: &str) -> Result<Option<ExistingDelivery>, PortError> {
            self.0.find(key).await
        }
        async fn take_over(&self, key: &str, seen: u64, new: u64) -> Result<TakeOver, PortError> {
            assert_eq!(self.0.take_over(key, seen, new + 1).await?, TakeOver::Won);
            self.0.take_over(key, seen, new).await
        }
        async fn release(&self, key: &str, lease: u64) -> Result<(), PortError> {
            self.0.release(key, lease).await
        }
        async fn mark_conflict(&self, key: &str, sha: &str, at: u64) -> Result<(), PortError> {
            self.0.mark_conflict(key, sha, at).await
        }
    }

    impl StrandedDeliveries for RetryFirst {
        async fn stranded(
            &self,
            before: u64,
            now: u64,
            limit: usize,
        ) -> Result<Vec<ExistingDelivery>, PortError> {
            self.0.stranded(before, now, limit).await
        }
        async fn keep_unprocessed_body(&self, d: &Delivery, now: u64) -> Result<(), PortError> {
            self.0.keep_unprocessed_body(d, now).await
        }
    }

    // A retry that takes a stranded record over first sends it itself: the sweep counts it
    // skipped and sends nothing, so the two never both send.
    #[tokio::test]
    async fn a_record_a_retry_took_over_first_is_skipped_and_not_sent() {
        let ledger = RetryFirst(MemoryLedger::new());
        let queue = MemoryQueue::new();
        for id in ["evt_1", "evt_2"] {
            ledger.record(&delivery(id, 1), 2).await.unwrap();
        }
        let swept = resend_stranded(&ledger, &queue, 30, 1_000, 1_000_000, 10)
            .await
            .unwrap();
        assert_eq!((swept.found, swept.skipped, swept.resent), (2, 2, 0));
        assert!(queue.sent().is_empty());
    }

    #[tokio::test]
    async fn a_failed_send_releases_the_lease_for_the_next_sweep() {
        let ledger = MemoryLedger::new();
        let queue = MemoryQueue::new();
        ledger.record(&delivery("evt_1", 1), 2).await.unwrap();
        queue.fail_next(1);
        let swept = resend_stranded(&ledger, &queue, 30, 1_000, 1_000_000, 10)
            .await
            .unwrap();
        assert_eq!(swept.failed, 1);
        let swept = resend_stranded(&ledger, &queue, 30, 1_000, 1_000_001, 10)
            .await
            .unwrap();
        assert_eq!(swept.resent, 1);
    }
}
