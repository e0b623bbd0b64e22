//! Building SDK clients once, with timeouts that fit the sender's 10 s budget, and counting the
//! calls they make (the tests assert "new = 2 calls, duplicate = 1, invalid = 0").

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_config::SdkConfig;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_types::service_config::{LoadServiceConfig, ServiceConfigKey};

use paymos_inbox_core::port::{PortError, PortErrorKind};

/// Loads the shared AWS configuration from the environment (region, credentials, and the
/// `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL_SQS` overrides, an empty one read as unset:
/// [`without_empty_endpoints`]) with bounded timeouts.
///
/// `attempt_timeout` bounds each HTTP attempt; `max_attempts` includes the first.
pub async fn load_config(attempt_timeout: Duration, max_attempts: u32) -> SdkConfig {
    let loaded = aws_config::from_env()
        .app_name(app_name())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .operation_attempt_timeout(attempt_timeout)
                .operation_timeout(attempt_timeout * max_attempts + Duration::from_millis(500))
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(max_attempts))
        .load()
        .await;
    without_empty_endpoints(loaded)
}

/// This release, as every AWS call's user agent names it (`app/paymos-inbox-0.2.0`): a
/// merchant's CloudTrail and AWS's support can tell which release made a call.
///
/// # Panics
/// Never: the name is letters, digits, `-` and `.`, which an app name allows.
#[must_use]
pub fn app_name() -> aws_config::AppName {
    aws_config::AppName::new(concat!("paymos-inbox-", env!("CARGO_PKG_VERSION")))
        .expect("an app name of letters, digits, '-' and '.'")
}

/// An endpoint URL set to nothing is no endpoint: `sam local invoke` passes a template's
/// `!If [HasLocalX, !Ref LocalXEndpoint, !Ref AWS::NoValue]` as an empty `AWS_ENDPOINT_URL_X`
/// (it does not resolve `Fn::If`), and the SDK would take `""` as the endpoint and panic at the
/// first call ("URL was unset"). The service's own endpoint is used instead.
#[must_use]
pub fn without_empty_endpoints(config: SdkConfig) -> SdkConfig {
    let mut builder = config.to_builder();
    if config.endpoint_url().is_some_and(|u| u.trim().is_empty()) {
        builder.set_endpoint_url(None);
    }
    if config.service_config().is_some() {
        builder = builder.service_config(NonEmpty(config));
    }
    builder.build()
}

/// The service settings aws-config found (environment, profile), less those set to nothing.
#[derive(Debug)]
struct NonEmpty(SdkConfig);

impl LoadServiceConfig for NonEmpty {
    fn load_config(&self, key: ServiceConfigKey<'_>) -> Option<String> {
        self.0
            .service_config()?
            .load_config(key)
            .filter(|v| !v.trim().is_empty())
    }
}

/// Counts the HTTP requests an SDK client sends (retries included), by operation.
#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    inner: Arc<CounterInner>,
}

#[derive(Debug, Default)]
struct CounterInner {
    total: AtomicUsize,
    examined: AtomicUsize,
    log: std::sync::Mutex<Vec<String>>,
    grants: std::sync::Mutex<Vec<Grant>>,
}

/// What a call needs from IAM: the action (`dynamodb:PutItem`) on a target (a table, an index
/// `table/index/name`, a queue's name, a secret's id, a bus).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    /// The IAM action.
    pub action: String,
    /// The resource's name as the request names it.
    pub target: String,
}

/// The IAM actions and targets a request needs, read from its JSON body (DynamoDB, SQS, Secrets
/// Manager and EventBridge all speak AWS JSON): a transaction needs its items' actions.
fn grants_of(service: &str, operation: &str, body: &[u8]) -> Vec<Grant> {
    let prefix = match service {
        "DynamoDB" => "dynamodb",
        "SQS" => "sqs",
        "Secrets Manager" | "SecretsManager" => "secretsmanager",
        "EventBridge" => "events",
        // Lambda's control plane speaks REST: the target is the kind of resource (the
        // deliverer's own mapping; ListEventSourceMappings takes no resource).
        "Lambda" => {
            let target = match operation {
                "ListEventSourceMappings" => "*",
                "UpdateEventSourceMapping" => "event-source-mapping",
                _ => "function",
            };
            let action = if operation == "Invoke" {
                "InvokeFunction"
            } else {
                operation
            };
            return vec![Grant {
                action: format!("lambda:{action}"),
                target: target.to_owned(),
            }];
        }
        other => {
            return vec![Grant {
                action: format!("{other}:{operation}"),
                target: String::new(),
            }];
        }
    };
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let grant = |action: &str, target: String| Grant {
        action: format!("{prefix}:{action}"),
        target,
    };
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    match (prefix, operation) {
        ("dynamodb", "TransactWriteItems" | "TransactGetItems") => json["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, inner) = item.as_object()?.iter().next()?;
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    _ => "GetItem",
                };
                Some(grant(action, text(&inner["TableName"])))
            })
            .collect(),
        // A batch names its tables as the keys of its requests.
        ("dynamodb", "BatchGetItem" | "BatchWriteItem") => json["RequestItems"]
            .as_object()
            .into_iter()
            .flat_map(|tables| tables.keys())
            .map(|table| grant(operation, table.clone()))
            .collect(),
        ("dynamodb", _) => {
            let table = text(&json["TableName"]);
            let target = match json["IndexName"].as_str() {
                Some(index) => format!("{table}/index/{index}"),
                None => table,
            };
            vec![grant(operation, target)]
        }
        ("sqs", _) => {
            let url = text(&json["QueueUrl"]);
            let name = url.rsplit('/').next().unwrap_or_default().to_owned();
            // SQS' batch actions are authorised by their single action (the SQS developer
            // guide, "Amazon SQS API permissions: Actions and resource reference").
            vec![grant(operation.trim_end_matches("Batch"), name)]
        }
        ("secretsmanager", _) => vec![grant(operation, text(&json["SecretId"]))],
        _ => {
            let buses: std::collections::BTreeSet<String> = json["Entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| text(&e["EventBusName"]))
                .collect();
            buses.into_iter().map(|b| grant(operation, b)).collect()
        }
    }
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

    /// Every IAM action and target the calls so far needed.
    #[must_use]
    pub fn grants(&self) -> Vec<Grant> {
        self.inner.grants.lock().expect("counter lock").clone()
    }

    /// Items DynamoDB examined to answer the reads so far: each Scan's and Query's
    /// `ScannedCount` (what they are billed by, before any filter), one per item a GetItem
    /// found.
    #[must_use]
    pub fn examined(&self) -> usize {
        self.inner.examined.load(Ordering::SeqCst)
    }

    /// Sets the count back to zero.
    pub fn reset(&self) {
        self.inner.total.store(0, Ordering::SeqCst);
        self.inner.examined.store(0, Ordering::SeqCst);
        self.inner.log.lock().expect("counter lock").clear();
        self.inner.grants.lock().expect("counter lock").clear();
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.inner.total.fetch_add(1, Ordering::SeqCst);
        let metadata = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>();
        let op = metadata.map_or_else(
            || "unknown".to_owned(),
            |m| format!("{}.{}", m.service(), m.name()),
        );
        if let Some(m) = metadata {
            let body = context.request().body().bytes().unwrap_or_default();
            self.inner
                .grants
                .lock()
                .expect("counter lock")
                .extend(grants_of(m.service(), m.name(), body));
        }
        self.inner.log.lock().expect("counter lock").push(op);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let service = cfg
            .load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            .map(|m| m.service().to_owned());
        if service.as_deref() != Some("DynamoDB") {
            return Ok(());
        }
        let Some(body) = context.response().body().bytes() else {
            return Ok(());
        };
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
            return Ok(());
        };
        let examined = json["ScannedCount"]
            .as_u64()
            .or_else(|| json.get("Item").map(|_| 1))
            .unwrap_or(0);
        self.inner.examined.fetch_add(
            usize::try_from(examined).unwrap_or(usize::MAX),
            Ordering::SeqCst,
        );
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

/// A [`PortError`] of the kind an SDK error shows: the service's error code first (throttling,
/// a transaction conflict, a missing resource or a refused credential, which it names as one),
/// then how the request failed (timeouts and connection errors are the service's, a request
/// that could not be built is ours). The SDK error stays as its source.
pub fn port_error<E, R>(operation: &'static str, error: SdkError<E, R>) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let (kind, refused_credential) = match &error {
        SdkError::ServiceError(service) => {
            let code = service.err().code();
            (kind_of_code(code), is_credential_code(code))
        }
        SdkError::ConstructionFailure(_) => (PortErrorKind::Misconfigured, false),
        _ => (PortErrorKind::Unavailable, false),
    };
    let message = DisplayErrorContext(&error).to_string();
    let port = if refused_credential {
        PortError::refused_credential(operation, message)
    } else {
        PortError::of_kind(operation, kind, message)
    };
    port.with_source(error)
}

/// The AWS error codes of a refused credential: an unknown, malformed, expired or revoked key
/// or token, a signature the service does not accept, or a principal its policy (or the key's
/// KMS policy) does not allow. Every service of ours answers with these (the query protocol's
/// names and the JSON protocol's `…Exception` ones).
const CREDENTIAL_CODES: [&str; 16] = [
    "AccessDenied",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "InvalidAccessKeyId",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "IncompleteSignatureException",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "ExpiredToken",
    "ExpiredTokenException",
    "AuthFailure",
    "NotAuthorized",
    "KmsAccessDenied",
];

/// Whether an AWS error code says the service refused our credential (see [`port_error`]).
#[must_use]
pub fn is_credential_code(code: Option<&str>) -> bool {
    code.is_some_and(|code| CREDENTIAL_CODES.contains(&code))
}

/// Whether an HTTP status refuses our credential: 401 (not authenticated: a wrong, revoked or
/// expired key, a signature not accepted) or 403 (not allowed). For the HTTP services that are
/// not AWS: the Paymos API and the merchant's endpoint.
#[must_use]
pub fn is_credential_status(status: u16) -> bool {
    matches!(status, 401 | 403)
}

/// The kind of an AWS error code (DynamoDB, SQS, Secrets Manager, EventBridge and the
/// `TransactWriteItems` cancellation reasons use these); a refused credential
/// ([`is_credential_code`]) is [`PortErrorKind::Misconfigured`].
#[must_use]
pub fn kind_of_code(code: Option<&str>) -> PortErrorKind {
    if is_credential_code(code) {
        return PortErrorKind::Misconfigured;
    }
    match code.unwrap_or_default() {
        "ThrottlingException"
        | "Throttling"
        | "ThrottlingError"
        | "ProvisionedThroughputExceededException"
        | "ProvisionedThroughputExceeded"
        | "RequestLimitExceeded"
        | "TooManyRequestsException"
        | "RequestThrottled"
        | "AWS.SimpleQueueService.RequestThrottled"
        | "KMSThrottlingException"
        | "LimitExceededException" => PortErrorKind::Throttled,
        "TransactionConflictException"
        | "TransactionConflict"
        | "TransactionInProgressException" => PortErrorKind::Conflict,
        "ResourceNotFoundException"
        | "ValidationException"
        | "ValidationError"
        | "QueueDoesNotExist"
        | "AWS.SimpleQueueService.NonExistentQueue"
        | "KMS.DisabledException"
        | "InvalidParameterException"
        | "InvalidParameterValue"
        | "InvalidRequestException"
        | "DecryptionFailure" => PortErrorKind::Misconfigured,
        _ => PortErrorKind::Unavailable,
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn every_aws_call_names_this_release_in_its_user_agent() {
        let config = super::load_config(std::time::Duration::from_secs(1), 1).await;
        let name = config.app_name().map(ToString::to_string);
        assert_eq!(
            name.as_deref(),
            Some(concat!("paymos-inbox-", env!("CARGO_PKG_VERSION")))
        );
    }

    /// What aws-config found for every service: `value`.
    #[derive(Debug)]
    struct Everywhere(&'static str);

    impl LoadServiceConfig for Everywhere {
        fn load_config(&self, _: ServiceConfigKey<'_>) -> Option<String> {
            Some(self.0.to_owned())
        }
    }

    fn configured(value: &'static str, global: Option<&str>) -> SdkConfig {
        let mut builder = SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .service_config(Everywhere(value));
        builder.set_endpoint_url(global.map(str::to_owned));
        builder.build()
    }

    /// The endpoint a DynamoDB client built from `config` is given: the service's own setting
    /// (`AWS_ENDPOINT_URL_DYNAMODB`), else the global one, as the SDK's generated code reads them.
    fn dynamodb_endpoint(config: &SdkConfig) -> Option<String> {
        let key = ServiceConfigKey::builder()
            .service_id("DynamoDB")
            .env("AWS_ENDPOINT_URL")
            .profile("endpoint_url")
            .build()
            .unwrap();
        config
            .service_config()
            .and_then(|c| c.load_config(key))
            .or_else(|| config.endpoint_url().map(str::to_owned))
    }

    // `sam local invoke` hands a function an empty AWS_ENDPOINT_URL_X; the SDK took
    // it as the endpoint and panicked at INIT ("URL was unset").
    #[test]
    fn an_empty_endpoint_url_is_no_endpoint_and_a_set_one_is_kept() {
        assert_eq!(
            dynamodb_endpoint(&configured("", None)),
            Some(String::new()),
            "what the SDK is given alone"
        );
        assert_eq!(
            dynamodb_endpoint(&without_empty_endpoints(configured("", None))),
            None
        );
        assert_eq!(
            dynamodb_endpoint(&without_empty_endpoints(configured(" ", Some("")))),
            None
        );
        assert_eq!(
            dynamodb_endpoint(&without_empty_endpoints(configured(
                "http://10.88.0.1:8000",
                None
            ))),
            Some("http://10.88.0.1:8000".to_owned())
        );
        assert_eq!(
            dynamodb_endpoint(&without_empty_endpoints(configured(
                "",
                Some("http://127.0.0.1:4566")
            ))),
            Some("http://127.0.0.1:4566".to_owned()),
            "an empty service setting falls back to the global one"
        );
    }

    use super::*;

    #[test]
    fn error_codes_keep_their_kind() {
        for (code, kind) in [
            (
                Some("ProvisionedThroughputExceededException"),
                PortErrorKind::Throttled,
            ),
            (Some("ThrottlingError"), PortErrorKind::Throttled),
            (Some("TransactionConflict"), PortErrorKind::Conflict),
            (
                Some("ResourceNotFoundException"),
                PortErrorKind::Misconfigured,
            ),
            (
                Some("AWS.SimpleQueueService.NonExistentQueue"),
                PortErrorKind::Misconfigured,
            ),
            (Some("InternalServerError"), PortErrorKind::Unavailable),
            (None, PortErrorKind::Unavailable),
        ] {
            assert_eq!(kind_of_code(code), kind, "{code:?}");
            assert!(!is_credential_code(code), "{code:?}");
        }
        for code in CREDENTIAL_CODES {
            assert_eq!(
                kind_of_code(Some(code)),
                PortErrorKind::Misconfigured,
                "{code}"
            );
            assert!(is_credential_code(Some(code)), "{code}");
        }
    }

    #[test]
    fn a_refused_credential_is_named_as_one_with_its_source() {
        use aws_sdk_sqs::operation::send_message::SendMessageError;
        let service = SendMessageError::generic(
            aws_sdk_sqs::error::ErrorMetadata::builder()
                .code("InvalidClientTokenId")
                .message("The security token included in the request is invalid.")
                .build(),
        );
        let error = port_error("SQS SendMessage", SdkError::service_error(service, ()));
        assert_eq!(error.kind, PortErrorKind::Misconfigured);
        assert!(error.is_refused_credential(), "{error}");
        assert!(std::error::Error::source(&error).is_some());
        assert!(error.message.contains("InvalidClientTokenId"), "{error}");
    }

    #[test]
    fn a_service_error_keeps_its_source_and_kind() {
        use aws_sdk_dynamodb::operation::get_item::GetItemError;
        use aws_sdk_dynamodb::types::error::ResourceNotFoundException;
        let service = GetItemError::ResourceNotFoundException(
            ResourceNotFoundException::builder()
                .message("Requested resource not found")
                .meta(
                    aws_sdk_dynamodb::error::ErrorMetadata::builder()
                        .code("ResourceNotFoundException")
                        .build(),
                )
                .build(),
        );
        let error = port_error("DynamoDB GetItem", SdkError::service_error(service, ()));
        assert_eq!(error.kind, PortErrorKind::Misconfigured);
        assert!(
            std::error::Error::source(&error).is_some(),
            "the SDK error is kept"
        );
        assert!(error.to_string().contains("misconfigured"), "{error}");
    }
}
