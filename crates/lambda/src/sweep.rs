//! One run of the sweep, as the scheduled function and `dev`'s local schedule both run it:
//! re-send the stranded deliveries, keep the bodies of what waits for a person, then report
//! the oldest delivery still not processed and how many things wait for a person.

use crate::telemetry::metric;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::sweep::{Swept, sweep_stranded};

/// At most this many records per run; a larger backlog is taken by the next runs.
pub const PER_RUN: usize = 500;

/// What one run did and saw.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SweepRun {
    /// The stranded deliveries it found and sent again.
    #[serde(flatten)]
    pub swept: Swept,
    /// The age of the oldest delivery still not processed, in seconds (0: none).
    pub oldest_pending_secs: u64,
    /// How many things wait for a person, as `exceptions` lists them (dead letters aside).
    pub waiting: usize,
}

/// Re-sends what was received more than `sweep_after_secs` before `now_ms` and is still not
/// processed, counts it (`StrandedResent`, when it sent any), keeps the bodies of the deliveries that newly wait
/// for a person (`DynamoLedger::keep_waiting_bodies`), gauges the oldest pending delivery
/// (`OldestPendingSeconds`, when there is one) and what waits for a person (`PaymentsWaiting`: the reads
/// `exceptions` makes, no scan), so that its alarm stays in ALARM while anything waits.
///
/// # Errors
/// [`PortError`] when DynamoDB or SQS fails.
pub async fn sweep_once(
    (ledger, state): (&DynamoLedger, &DynamoResources),
    queue: &SqsQueue,
    lease_secs: u64,
    sweep_after_secs: u64,
    now_ms: u64,
) -> Result<SweepRun, PortError> {
    let swept = sweep_stranded(
        ledger,
        queue,
        lease_secs,
        now_ms.saturating_sub(sweep_after_secs * 1000),
        now_ms,
        PER_RUN,
    )
    .await?;
    // An idle run writes `PaymentsWaiting` alone: each metric written is a series billed by
    // the month, and a count of nothing or the age of nothing tells an alarm no more than
    // their absence (`OldestPendingAlarm` treats missing data as OK). The recorder writes no
    // counter of 0; the guard says so here.
    if swept.resent > 0 && crate::telemetry::writes(metric::STRANDED_RESENT) {
        metrics::counter!(metric::STRANDED_RESENT).increment(swept.resent as u64);
    }
    // A person acts on what a waiting delivery said: its body outlives BodyRetentionDays.
    let bodies_kept = ledger.keep_waiting_bodies().await?;
    // The oldest delivery still not processed (after this run's re-sends).
    let oldest = ledger
        .pending(1)
        .await?
        .first()
        .map(|p| super::now_ms().saturating_sub(p.received_at_ms) / 1000);
    if let Some(oldest) = oldest {
        #[allow(clippy::cast_precision_loss)]
        metrics::gauge!(metric::OLDEST_PENDING).set(oldest as f64);
    }
    let oldest = oldest.unwrap_or(0);
    let waiting = paymos_inbox_core::roads::exceptions::list(state, ledger, 0)
        .await?
        .len();
    #[allow(clippy::cast_precision_loss)]
    metrics::gauge!(metric::PAYMENTS_WAITING).set(waiting as f64);
    tracing::info!(
        oldest_pending_secs = oldest,
        waiting,
        found = swept.found,
        resent = swept.resent,
        skipped = swept.skipped,
        failed = swept.failed,
        spaced = swept.spaced,
        bodiless = swept.bodiless,
        bodies_kept,
        "sweep done"
    );
    Ok(SweepRun {
        swept,
        oldest_pending_secs: oldest,
        waiting,
    })
}
