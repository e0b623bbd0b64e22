//! The fulfil Lambda (SQS event source with ReportBatchItemFailures).

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox::adapters::aws::load_config;
use paymos_inbox::adapters::dynamodb::DynamoState;
use paymos_inbox::config::FulfilConfig;
use paymos_inbox::domain::fulfil::Fulfil;
use paymos_inbox::lambda::{self, fulfil::handle_batch};

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox::telemetry::init_json();
    let config = FulfilConfig::from_lookup(|k| std::env::var(k).ok())?;
    let aws = load_config(Duration::from_secs(3), 3).await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let fulfil = Arc::new(Fulfil::new(DynamoState::new(
        dynamodb,
        config.state_table,
        config.deliveries_table,
    )));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let fulfil = Arc::clone(&fulfil);
        async move { Ok::<_, Error>(handle_batch(&fulfil, event.payload, lambda::now_ms()).await) }
    }))
    .await
}
