//! Building SDK clients once, with timeouts that fit the sender's 10 s budget, and counting the
//! calls they make (the tests assert "new = 2 calls, duplicate = 1, invalid = 0").

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_config::SdkConfig;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;

/// Loads the shared AWS configuration from the environment (region, credentials, and the
/// `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL_SQS` overrides) with bounded timeouts.
///
/// `attempt_timeout` bounds each HTTP attempt; `max_attempts` includes the first.
pub async fn load_config(attempt_timeout: Duration, max_attempts: u32) -> SdkConfig {
    aws_config::from_env()
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .operation_attempt_timeout(attempt_timeout)
                .operation_timeout(attempt_timeout * max_attempts + Duration::from_millis(500))
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(max_attempts))
        .load()
        .await
}

/// Counts the HTTP requests an SDK client sends (retries included), by operation.
#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    inner: Arc<CounterInner>,
}

#[derive(Debug, Default)]
struct CounterInner {
    total: AtomicUsize,
    log: std::sync::Mutex<Vec<String>>,
}

impl CallCounter {
    /// A new counter at zero.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests sent so far.
    #[must_use]
    pub fn total(&self) -> usize {
        self.inner.total.load(Ordering::SeqCst)
    }

    /// The operations sent so far, in order (e.g. `["DynamoDB.PutItem", "SQS.SendMessage"]`).
    #[must_use]
    pub fn operations(&self) -> Vec<String> {
        self.inner.log.lock().expect("counter lock").clone()
    }

    /// Sets the count back to zero.
    pub fn reset(&self) {
        self.inner.total.store(0, Ordering::SeqCst);
        self.inner.log.lock().expect("counter lock").clear();
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.inner.total.fetch_add(1, Ordering::SeqCst);
        let op = cfg
            .load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            .map_or_else(
                || "unknown".to_owned(),
                |m| format!("{}.{}", m.service(), m.name()),
            );
        self.inner.log.lock().expect("counter lock").push(op);
        Ok(())
    }
}

/// Opens the connections to DynamoDB and SQS during INIT (when CPU is free and the sender is not
/// waiting), and checks that the configured table and queue exist. Failures are only logged:
/// the first delivery will then report the real error.
pub async fn warm_up(
    dynamodb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    table: &str,
    queue_url: &str,
) {
    let (table_check, queue_check) = tokio::join!(
        dynamodb.describe_table().table_name(table).send(),
        sqs.get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
    );
    if let Err(e) = table_check {
        tracing::warn!(table, error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), "warm-up: DescribeTable failed");
    }
    if let Err(e) = queue_check {
        tracing::warn!(queue_url, error = %aws_sdk_sqs::error::DisplayErrorContext(e), "warm-up: GetQueueAttributes failed");
    }
}
