//! The fulfil Lambda (SQS event source with ReportBatchItemFailures).

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox_aws::aws::load_config;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_aws::paymos_api::PaymosApi;
use paymos_inbox_aws::secrets::paymos_client;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::confirm::PaymentConfirmation;
use paymos_inbox_core::roads::fulfil::{Fulfil, ResourceStore};
use paymos_inbox_lambda::config::{FulfilConfig, PAYMOS_API_SECRETS_ID, PAYMOS_PROJECT_IDS};
use paymos_inbox_lambda::fulfil::{QueueVisibility, handle_batch};

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox_lambda::telemetry::init_json();
    paymos_inbox_lambda::telemetry::init_metrics("fulfil");
    let config = FulfilConfig::from_lookup(|k| std::env::var(k).ok())?;
    let aws = load_config(Duration::from_secs(3), 3).await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let keeps_open_list = config.keeps_open_list();
    let resources = DynamoResources::new(dynamodb, config.state_table, config.deliveries_table);
    let resources = if keeps_open_list {
        resources
    } else {
        resources.without_open_list()
    };
    let fulfil = Fulfil::new(resources)
        .for_environment(config.environment)
        .for_projects(config.projects.clone())
        .with_patience_minutes(config.patience_minutes);
    // The home project is pinned once: another listed first would read its records (whose
    // keys carry no project) as its own and ship its orders again.
    if let Err(e) = fulfil.pin_home_project().await {
        paymos_inbox_lambda::telemetry::misconfigured_at_start(PAYMOS_PROJECT_IDS, &e);
        return Err(Error::from(e.to_string()));
    }
    tracing::info!(
        environment = %config.environment,
        projects = ?config.projects.ids(),
        "fulfil configured: deliveries verified by a secret of another environment change nothing"
    );
    let queue = config
        .work_queue_url
        .clone()
        .map(|url| SqsQueue::new(aws_sdk_sqs::Client::new(&aws), url));
    match &config.api_secrets_id {
        None => serve(fulfil, queue).await,
        Some(id) => {
            let client = paymos_client(
                &aws_sdk_secretsmanager::Client::new(&aws),
                id,
                PAYMOS_API_SECRETS_ID,
                &config.api_base_url,
                Duration::from_secs(3),
                1,
            )
            .await
            .map_err(|e| {
                paymos_inbox_lambda::telemetry::misconfigured_at_start(PAYMOS_API_SECRETS_ID, &e);
                Error::from(e.to_string())
            })?;
            let api = PaymosApi::new(client);
            // One authenticated call at start: a wrong key or a key of the other environment's
            // project fails here, naming the setting, not every payment as `unconfirmed`.
            if let Err(e) = api.prove(config.environment).await {
                paymos_inbox_lambda::telemetry::misconfigured_at_start(PAYMOS_API_SECRETS_ID, &e);
                return Err(Error::from(e.to_string()));
            }
            tracing::info!(
                "reverse check on: payments, closures, refunds, withdrawals and deposits are read back at Paymos before they are applied"
            );
            serve(fulfil.with_confirmation(api), queue).await
        }
    }
}

/// Serves `fulfil`; a message that was not applied is given its visibility on `queue` (the
/// work queue), else comes back after the queue's visibility timeout.
async fn serve<S, C>(fulfil: Fulfil<S, C>, queue: Option<SqsQueue>) -> Result<(), Error>
where
    S: ResourceStore + 'static,
    C: PaymentConfirmation + 'static,
{
    let fulfil = Arc::new(fulfil);
    let queue = Arc::new(queue);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let (fulfil, queue) = (Arc::clone(&fulfil), Arc::clone(&queue));
        async move {
            paymos_inbox_lambda::telemetry::invocation_started();
            let now = paymos_inbox_lambda::now_ms();
            let response = match queue.as_ref() {
                Some(queue) => handle_batch(&fulfil, queue, event.payload, now).await,
                None => handle_batch(&fulfil, &QueueVisibility, event.payload, now).await,
            };
            paymos_inbox_lambda::telemetry::flush_metrics();
            Ok::<_, Error>(response)
        }
    }))
    .await
}
