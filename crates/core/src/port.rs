//! What a port's failure is: one error type for every port (DynamoDB, SQS, Secrets Manager,
//! EventBridge, the Paymos API, the merchant's endpoint) whose [`kind`](PortError::kind) tells
//! the caller what to do next, and which keeps the adapter's own error as its source.

use std::sync::Arc;

/// What kind of failure a port met: what the caller does next follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortErrorKind {
    /// The service asked us to slow down (throttling, capacity): retry later, and not at once.
    Throttled,
    /// The service or the network failed (timeouts, 5xx, connection errors): retry.
    Unavailable,
    /// Our configuration is wrong (a missing table or queue, a refused credential, a malformed
    /// request): retries fail alike until an operator fixes it; still never the sender's fault.
    Misconfigured,
    /// Another writer held the same items (a transaction conflict): retry at once.
    Conflict,
}

impl PortErrorKind {
    /// The name in logs and metrics.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::Unavailable => "unavailable",
            Self::Misconfigured => "misconfigured",
            Self::Conflict => "conflict",
        }
    }

    /// Seconds a sender should wait before it retries (the `Retry-After` of a 503).
    #[must_use]
    pub fn retry_after_secs(self) -> u64 {
        match self {
            Self::Conflict | Self::Unavailable => 1,
            Self::Throttled => 10,
            Self::Misconfigured => 60,
        }
    }
}

impl std::fmt::Display for PortErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of a port (DynamoDB, SQS, …): never the sender's fault, so always answered with a
/// 5xx and retried; its [`kind`](PortError::kind) says how, and the SDK's error is kept as the
/// [`source`](std::error::Error::source).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{operation} failed ({kind}{}): {message}", credential_note(*.refused_credential))]
pub struct PortError {
    /// The call that failed, e.g. `DynamoDB PutItem`.
    pub operation: &'static str,
    /// What kind of failure it was.
    pub kind: PortErrorKind,
    /// What the SDK said (no item contents).
    pub message: String,
    refused_credential: bool,
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// How [`PortError`]'s `Display` names a refused credential after its kind.
fn credential_note(refused: bool) -> &'static str {
    if refused {
        ": a refused credential"
    } else {
        ""
    }
}

impl PortError {
    /// An [`PortErrorKind::Unavailable`] error for `operation`.
    pub fn new(operation: &'static str, message: impl std::fmt::Display) -> Self {
        Self::of_kind(operation, PortErrorKind::Unavailable, message)
    }

    /// An error of `kind` for `operation`.
    pub fn of_kind(
        operation: &'static str,
        kind: PortErrorKind,
        message: impl std::fmt::Display,
    ) -> Self {
        Self {
            operation,
            kind,
            message: message.to_string(),
            refused_credential: false,
            source: None,
        }
    }

    /// A [`PortErrorKind::Misconfigured`] error for `operation` whose service refused our
    /// credential: an unknown, expired or revoked key or token, a signature it does not accept,
    /// or a principal its policy does not allow. Every retry fails alike until an operator
    /// fixes the role, the policy or the secret; [`PortError::is_refused_credential`] says so.
    pub fn refused_credential(operation: &'static str, message: impl std::fmt::Display) -> Self {
        Self {
            refused_credential: true,
            ..Self::of_kind(operation, PortErrorKind::Misconfigured, message)
        }
    }

    /// Whether the service refused our credential (see [`PortError::refused_credential`]).
    #[must_use]
    pub fn is_refused_credential(&self) -> bool {
        self.refused_credential
    }

    /// With the error that caused it.
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// With `context` before its message (what was being done, e.g. which secret was read);
    /// the kind and the source stay.
    #[must_use]
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl PartialEq for PortError {
    fn eq(&self, other: &Self) -> bool {
        (
            self.operation,
            self.kind,
            &self.message,
            self.refused_credential,
        ) == (
            other.operation,
            other.kind,
            &other.message,
            other.refused_credential,
        )
    }
}

impl Eq for PortError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_credential_is_misconfigured_and_says_so() {
        let error = PortError::refused_credential("SQS SendMessage", "InvalidClientTokenId");
        assert_eq!(error.kind, PortErrorKind::Misconfigured);
        assert!(error.is_refused_credential());
        assert_eq!(
            error.to_string(),
            "SQS SendMessage failed (misconfigured: a refused credential): InvalidClientTokenId"
        );
        let missing = PortError::of_kind(
            "SQS SendMessage",
            PortErrorKind::Misconfigured,
            "NonExistentQueue",
        );
        assert!(!missing.is_refused_credential());
        assert_eq!(
            missing.to_string(),
            "SQS SendMessage failed (misconfigured): NonExistentQueue"
        );
        assert_ne!(error, missing.clone());
    }

    #[test]
    fn context_keeps_the_kind_and_the_source() {
        let io = std::io::Error::other("refused");
        let error = PortError::refused_credential("Secrets Manager GetSecretValue", "denied")
            .with_source(io)
            .context("could not read the webhook secrets (webhook-secrets)");
        assert!(error.is_refused_credential());
        assert_eq!(
            error.message,
            "could not read the webhook secrets (webhook-secrets): denied"
        );
        assert_eq!(
            std::error::Error::source(&error).map(ToString::to_string),
            Some("refused".to_owned())
        );
        assert_eq!(
            PortError::new("x", "y").kind,
            PortErrorKind::Unavailable,
            "new stays unavailable"
        );
    }
}
