//! The ingest Lambda (function URL): config, clients and secrets once at INIT, then serve.

use std::sync::Arc;
use std::time::Duration;

use lambda_http::{Error, Request, service_fn};
use paymos_inbox::adapters::aws::load_config;
use paymos_inbox::adapters::dynamodb::DynamoLedger;
use paymos_inbox::adapters::secrets::SecretsManagerKeys;
use paymos_inbox::adapters::sqs::SqsQueue;
use paymos_inbox::config::IngestConfig;
use paymos_inbox::domain::ingest::{Ingest, KeySource};
use paymos_inbox::domain::signature::Verifier;
use paymos_inbox::lambda::{self, ingest::respond_with_keys};

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox::telemetry::init_json();
    paymos_inbox::telemetry::init_metrics("ingest");
    let config = IngestConfig::from_lookup(|k| std::env::var(k).ok())?;
    // Two attempts of at most 1 s per call: the put and the send together stay under the 6 s
    // function timeout, itself well inside the sender's 10 s.
    let aws = load_config(Duration::from_secs(1), 2).await;

    let key_source = SecretsManagerKeys::new(
        aws_sdk_secretsmanager::Client::new(&aws),
        &config.secrets_id,
    );
    let keys = key_source.keys().await?;
    tracing::info!(
        secrets = ?keys.iter().map(|k| k.label()).collect::<Vec<_>>(),
        tolerance_secs = config.tolerance_secs,
        max_body_bytes = config.settings.max_body_bytes,
        "ingest configured"
    );

    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    paymos_inbox::adapters::aws::warm_up(
        &dynamodb,
        &sqs,
        &config.deliveries_table,
        &config.work_queue_url,
    )
    .await;

    let ingest = Arc::new(Ingest::new(
        Verifier::new(keys, config.tolerance_secs),
        DynamoLedger::new(dynamodb, config.deliveries_table, config.retention_days),
        SqsQueue::new(sqs, config.work_queue_url),
        config.settings,
    ));
    let key_source = Arc::new(key_source);
    lambda_http::run(service_fn(move |request: Request| {
        let ingest = Arc::clone(&ingest);
        let key_source = Arc::clone(&key_source);
        async move {
            paymos_inbox::telemetry::invocation_started();
            let response =
                respond_with_keys(&ingest, &request, lambda::now_ms(), key_source.as_ref()).await;
            paymos_inbox::telemetry::flush_metrics();
            Ok::<_, Error>(response)
        }
    }))
    .await
}
