//! The ingest Lambda (function URL): config, clients and secrets once at INIT, then serve.

use std::sync::Arc;
use std::time::Duration;

use lambda_http::{Error, Request, service_fn};
use paymos_inbox_aws::aws::load_config;
use paymos_inbox_aws::dynamodb::DynamoLedger;
use paymos_inbox_aws::secrets::SecretsManagerKeys;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::ingest::{Ingest, KeySource};
use paymos_inbox_core::wire::signature::Verifier;
use paymos_inbox_lambda::config::{IngestConfig, WEBHOOK_SECRETS_ID};
use paymos_inbox_lambda::{self, ingest::respond_with_keys};

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox_lambda::telemetry::init_json();
    paymos_inbox_lambda::telemetry::init_metrics("ingest");
    let config = IngestConfig::from_lookup(|k| std::env::var(k).ok())?;
    // Two attempts of at most 1 s per call (2.5 s with `aws::load_config`'s margin). A delivery
    // makes 3 to 5 sequential calls, so when DynamoDB or SQS hangs on every one the worst case
    // (7.5-12.5 s) runs past the 6 s function timeout: that invocation ends without a 2xx,
    // Paymos retries, and what was recorded is taken over or swept, never lost
    // (docs/performance.md).
    let aws = load_config(Duration::from_secs(1), 2).await;

    let key_source = SecretsManagerKeys::new(
        aws_sdk_secretsmanager::Client::new(&aws),
        &config.secrets_id,
    );
    let keys = match key_source.keys().await {
        Ok(keys) => keys,
        Err(e) => {
            paymos_inbox_lambda::telemetry::misconfigured_at_start(WEBHOOK_SECRETS_ID, &e);
            return Err(Error::from(format!("{WEBHOOK_SECRETS_ID}: {e}")));
        }
    };
    tracing::info!(
        secrets = ?keys.iter().map(|k| k.label()).collect::<Vec<_>>(),
        tolerance_secs = config.tolerance_secs,
        max_body_bytes = config.settings.max_body_bytes,
        delivery_retention_days = ?config.retention_days,
        body_retention_days = config.body_retention_days,
        "ingest configured"
    );
    if config
        .retention_days
        .is_some_and(|days| days < config.body_retention_days)
    {
        tracing::warn!(
            delivery_retention_days = ?config.retention_days,
            body_retention_days = config.body_retention_days,
            "DeliveryRetentionDays is shorter than BodyRetentionDays: each body goes with its record"
        );
    }

    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    paymos_inbox_aws::aws::warm_up(
        &dynamodb,
        &sqs,
        &config.deliveries_table,
        &config.work_queue_url,
    )
    .await;

    let ingest = Arc::new(Ingest::new(
        Verifier::new(keys, config.tolerance_secs),
        DynamoLedger::new(dynamodb, config.deliveries_table, config.retention_days)
            .with_body_retention_days(config.body_retention_days),
        SqsQueue::new(sqs, config.work_queue_url),
        config.settings,
    ));
    let key_source = Arc::new(key_source);
    lambda_http::run(service_fn(move |request: Request| {
        let ingest = Arc::clone(&ingest);
        let key_source = Arc::clone(&key_source);
        async move {
            paymos_inbox_lambda::telemetry::invocation_started();
            let response = respond_with_keys(
                &ingest,
                &request,
                paymos_inbox_lambda::now_ms(),
                key_source.as_ref(),
            )
            .await;
            paymos_inbox_lambda::telemetry::flush_metrics();
            Ok::<_, Error>(response)
        }
    }))
    .await
}
