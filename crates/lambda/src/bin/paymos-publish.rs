//! The hand-off Lambda (the state table's DynamoDB stream): publishes the business facts fulfil
//! committed to EventBridge, with partial batch failures.

use std::time::Duration;

use aws_lambda_events::dynamodb::Event;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox_aws::aws::load_config;
use paymos_inbox_aws::events::EventBridgePublisher;
use paymos_inbox_lambda::config::PublishConfig;
use paymos_inbox_lambda::publish::handle_stream;

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox_lambda::telemetry::init_json();
    paymos_inbox_lambda::telemetry::init_metrics("publish");
    let config = PublishConfig::from_lookup(|k| std::env::var(k).ok())?;
    let aws = load_config(Duration::from_secs(3), 3).await;
    let publisher =
        EventBridgePublisher::new(aws_sdk_eventbridge::Client::new(&aws), config.event_bus);
    let stack = paymos_inbox_core::money::change::Applying {
        environment: config.environment,
        projects: config.projects,
    };
    let (publisher, stack) = (&publisher, &stack);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        paymos_inbox_lambda::telemetry::invocation_started();
        let response = handle_stream(publisher, event.payload, stack).await;
        paymos_inbox_lambda::telemetry::flush_metrics();
        Ok::<_, Error>(response)
    }))
    .await
}
