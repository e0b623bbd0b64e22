//! The sweep Lambda (EventBridge Scheduler, every few minutes): re-sends deliveries recorded but
//! still not processed long after they arrived, so one whose sender gave up is applied anyway.

use std::time::Duration;

use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox_aws::aws::load_config;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_lambda::config::SweepConfig;
use paymos_inbox_lambda::sweep::sweep_once;

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox_lambda::telemetry::init_json();
    paymos_inbox_lambda::telemetry::init_metrics("sweep");
    let config = SweepConfig::from_lookup(|k| std::env::var(k).ok())?;
    let aws = load_config(Duration::from_secs(3), 3).await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let ledger = DynamoLedger::new(dynamodb.clone(), config.deliveries_table.clone(), None);
    let state = DynamoResources::new(
        dynamodb,
        config.state_table.clone(),
        config.deliveries_table.clone(),
    );
    let queue = SqsQueue::new(
        aws_sdk_sqs::Client::new(&aws),
        config.work_queue_url.clone(),
    );
    let (ledger, state, queue, config) = (&ledger, &state, &queue, &config);
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<serde_json::Value>| async move {
            // No `ColdStarts`: the schedule's runs are each a cold start or nearly, and an
            // idle stack would pay a series a month to say so.
            let swept = sweep_once(
                (ledger, state),
                queue,
                config.lease_secs,
                config.sweep_after_secs,
                paymos_inbox_lambda::now_ms(),
            )
            .await;
            paymos_inbox_lambda::telemetry::flush_metrics();
            Ok::<_, Error>(serde_json::to_value(swept?)?)
        },
    ))
    .await
}
