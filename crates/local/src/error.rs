//! What setting up the local pipeline can meet, by kind: a file of ours, the stack's template,
//! a call to the emulators (or an account), a loopback port. Each says what it always said.

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use paymos_inbox_core::port::PortError;

/// A failure of the local pipeline's setup (the stack from its template, the event files, the
/// Secrets Manager stand-in).
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A file (an event under `events/`) could not be read, parsed or written: named first.
    #[error("{file}: {why}")]
    File {
        /// The file, or the folder.
        file: String,
        /// What went wrong with it.
        why: String,
    },
    /// The stack's template declares what cannot be built here (a key schema that is no
    /// list, a redrive target that is no queue of it, a part the SDK's builder refuses).
    #[error("{0}")]
    Template(String),
    /// A table of the template's name exists with other keys (an earlier run's, with this
    /// prefix).
    #[error("{0} exists with other keys than template.yaml's: delete it, or use another prefix")]
    OtherKeys(String),
    /// A call to DynamoDB or SQS failed; `port` keeps its kind (and the SDK's error), `said` is
    /// the call as this crate names it, with the SDK's whole error.
    #[error("{said}")]
    Service {
        /// `CreateTable prefix-DeliveriesTable: …`, `SQS: …`.
        said: String,
        /// The port's error, of its kind.
        #[source]
        port: PortError,
    },
    /// No loopback port could be bound.
    #[error("cannot listen on loopback: {0}")]
    Listen(#[source] std::io::Error),
}

impl LocalError {
    /// A DynamoDB call (`operation`, e.g. `DynamoDB CreateTable`) on the table `name` that
    /// failed, said as `CreateTable name: …`.
    pub(crate) fn dynamodb<E, R>(operation: &'static str, name: &str, e: SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        let call = operation.strip_prefix("DynamoDB ").unwrap_or(operation);
        Self::Service {
            said: format!("{call} {name}: {}", DisplayErrorContext(&e)),
            port: paymos_inbox_aws::aws::port_error(operation, e),
        }
    }

    /// An SQS call (`operation`, e.g. `SQS CreateQueue`) that failed.
    pub(crate) fn sqs<E, R>(operation: &'static str, e: SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        Self::Service {
            said: format!("SQS: {}", DisplayErrorContext(&e)),
            port: paymos_inbox_aws::aws::port_error(operation, e),
        }
    }

    /// A failure `file` met.
    pub(crate) fn file(file: impl std::fmt::Display, why: impl std::fmt::Display) -> Self {
        Self::File {
            file: file.to_string(),
            why: why.to_string(),
        }
    }
}

/// The words, for the callers that still carry text (`dev`'s start, the soak and the
/// end-to-end bench): what [`LocalError`] says, unchanged.
impl From<LocalError> for String {
    fn from(e: LocalError) -> Self {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use paymos_inbox_core::port::PortErrorKind;

    use super::*;

    // A folder that is not there is a file error that names it, as its text always began.
    #[test]
    fn a_missing_events_folder_is_a_file_error_that_names_it() {
        let scratch = tempfile::tempdir().unwrap();
        let missing = scratch.path().join("events");
        let secret = paymos_inbox_core::wire::signature::WebhookSecret::new("whsec_x");
        let error = crate::events::refresh(&missing, &secret, 1_700_000_000).unwrap_err();
        assert!(
            matches!(&error, LocalError::File { file, .. } if *file == missing.display().to_string()),
            "{error:?}"
        );
        assert!(
            String::from(error).starts_with(&format!("{}: ", missing.display())),
            "the text as before"
        );
    }

    // DynamoDB that does not answer: the call fails as the service unavailable (its kind kept
    // for a caller to act on), and says which call on which table, as it always did.
    #[tokio::test]
    async fn a_call_nothing_answers_keeps_its_kind_and_its_words() {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local", "local", None, None, "test",
            ))
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
            .endpoint_url("http://127.0.0.1:1")
            .build();
        let dynamodb = aws_sdk_dynamodb::Client::from_conf(config);
        let sqs = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::Config::builder()
                .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
                .build(),
        );
        let error = crate::template::create_all(&dynamodb, &sqs, "p")
            .await
            .unwrap_err();
        let LocalError::Service { said, port } = &error else {
            panic!("a service error: {error:?}");
        };
        assert_eq!(port.kind, PortErrorKind::Unavailable, "{port}");
        assert_eq!(port.operation, "DynamoDB CreateTable");
        assert!(said.starts_with("CreateTable p-"), "{said}");
        assert!(said.contains("Table: dispatch failure"), "{said}");
        assert_eq!(error.to_string(), *said);
    }
}
