//! The signed hand-off Lambda (SQS event source with ReportBatchItemFailures): every hand-off
//! event as a Standard Webhooks message to the merchant's HTTPS endpoint. With
//! `WEBHOOK_PAUSE_AFTER_HOURS`, a destination failing that long is paused (its event source
//! switched off, an `Endpoint Paused` fact on the bus); invoked with `{"endpoint_test": true}`
//! (`paymos-inbox events test`), it posts one signed test event and answers what the endpoint
//! said.

use std::time::Duration;

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox_aws::aws::load_config;
use paymos_inbox_aws::events::EventBridgePublisher;
use paymos_inbox_aws::lambda::EventSourceSwitch;
use paymos_inbox_aws::secrets::outbound_secret;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_aws::webhook::HttpWebhookTarget;
use paymos_inbox_lambda::config::{DeliverConfig, WEBHOOK_SIGNING_SECRET_ID};
use paymos_inbox_lambda::deliver::{Watch, handle_watched, test_post};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox_lambda::telemetry::init_json();
    paymos_inbox_lambda::telemetry::init_metrics("deliver");
    let config = DeliverConfig::from_lookup(|k| std::env::var(k).ok())?;
    let environment = paymos_inbox_lambda::config::environment(&|k| std::env::var(k).ok())?;
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
    let watch = config.pause.map(|pause| {
        Watch::new(
            pause.after,
            EventSourceSwitch::new(aws_sdk_lambda::Client::new(&aws), pause.queue_arn),
            EventBridgePublisher::new(aws_sdk_eventbridge::Client::new(&aws), pause.event_bus),
            pause.environment,
        )
    });
    let (target, queue, secret, watch) = (&target, &queue, &secret, watch.as_ref());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        paymos_inbox_lambda::telemetry::invocation_started();
        let now_ms = paymos_inbox_lambda::now_ms();
        if event.payload.get("endpoint_test").is_some() {
            return Ok::<_, Error>(test_post(target, secret, environment, now_ms).await);
        }
        let batch: SqsEvent = serde_json::from_value(event.payload)?;
        let response = handle_watched(target, queue, secret, watch, batch, now_ms / 1000).await;
        paymos_inbox_lambda::telemetry::flush_metrics();
        Ok(serde_json::to_value(response)?)
    }))
    .await
}
