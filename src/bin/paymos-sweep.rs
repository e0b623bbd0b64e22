//! The sweep Lambda (EventBridge Scheduler, every few minutes): re-sends deliveries recorded but
//! still not processed long after they arrived, so one whose sender gave up is applied anyway.

use std::time::Duration;

use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox::adapters::aws::load_config;
use paymos_inbox::adapters::dynamodb::DynamoLedger;
use paymos_inbox::adapters::sqs::SqsQueue;
use paymos_inbox::config::SweepConfig;
use paymos_inbox::domain::sweep::resend_stranded;
use paymos_inbox::lambda;
use paymos_inbox::telemetry::metric;

/// At most this many records per run; a larger backlog is taken by the next runs.
const PER_RUN: usize = 500;

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox::telemetry::init_json();
    paymos_inbox::telemetry::init_metrics("sweep");
    let config = SweepConfig::from_lookup(|k| std::env::var(k).ok())?;
    let aws = load_config(Duration::from_secs(3), 3).await;
    let ledger = DynamoLedger::new(
        aws_sdk_dynamodb::Client::new(&aws),
        config.deliveries_table.clone(),
        None,
    );
    let queue = SqsQueue::new(
        aws_sdk_sqs::Client::new(&aws),
        config.work_queue_url.clone(),
    );
    let (ledger, queue, config) = (&ledger, &queue, &config);
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<serde_json::Value>| async move {
            paymos_inbox::telemetry::invocation_started();
            let now = lambda::now_ms();
            let swept = resend_stranded(
                ledger,
                queue,
                config.lease_secs,
                now.saturating_sub(config.sweep_after_secs * 1000),
                now,
                PER_RUN,
            )
            .await?;
            metrics::counter!(metric::STRANDED_RESENT).increment(swept.resent as u64);
            // The oldest delivery still not processed (after this run's re-sends).
            let oldest = ledger.pending(1).await?.first().map_or(0, |p| {
                lambda::now_ms().saturating_sub(p.received_at_ms) / 1000
            });
            #[allow(clippy::cast_precision_loss)]
            metrics::gauge!(metric::OLDEST_PENDING).set(oldest as f64);
            paymos_inbox::telemetry::flush_metrics();
            tracing::info!(
                oldest_pending_secs = oldest,
                found = swept.found,
                resent = swept.resent,
                skipped = swept.skipped,
                failed = swept.failed,
                "sweep done"
            );
            Ok::<_, Error>(serde_json::to_value(swept)?)
        },
    ))
    .await
}
