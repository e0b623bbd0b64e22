//! The signed hand-off Lambda (SQS event source with ReportBatchItemFailures): every hand-off
//! event as a Standard Webhooks message to the merchant's HTTPS endpoint.

use std::time::Duration;

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox_aws::aws::load_config;
use paymos_inbox_aws::secrets::outbound_secret;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_aws::webhook::HttpWebhookTarget;
use paymos_inbox_lambda::config::{DeliverConfig, WEBHOOK_SIGNING_SECRET_ID};
use paymos_inbox_lambda::{self, deliver::handle_batch};

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox_lambda::telemetry::init_json();
    paymos_inbox_lambda::telemetry::init_metrics("deliver");
    let config = DeliverConfig::from_lookup(|k| std::env::var(k).ok())?;
    let aws = load_config(Duration::from_secs(3), 3).await;
    let secret = outbound_secret(
        &aws_sdk_secretsmanager::Client::new(&aws),
        &config.signing_secret_id,
        WEBHOOK_SIGNING_SECRET_ID,
    )
    .await?;
    let target = HttpWebhookTarget::new(config.url, Duration::from_secs(10))?;
    let queue = SqsQueue::new(aws_sdk_sqs::Client::new(&aws), config.queue_url)
        .with_dead_letters(config.dead_letter_url);
    let (target, queue, secret) = (&target, &queue, &secret);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        paymos_inbox_lambda::telemetry::invocation_started();
        let response = handle_batch(
            target,
            queue,
            secret,
            event.payload,
            paymos_inbox_lambda::now_ms() / 1000,
        )
        .await;
        paymos_inbox_lambda::telemetry::flush_metrics();
        Ok::<_, Error>(response)
    }))
    .await
}
