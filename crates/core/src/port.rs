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
    /// The service answered, with something we cannot read (not the contract this version was
    /// built for: a field missing or of another type): no connection failed, and a retry reads
    /// the same until the service or this tool changes.
    Unreadable,
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
            Self::Unreadable => "unreadable",
        }
    }

    /// Seconds a sender should wait before it retries (the `Retry-After` of a 503).
    #[must_use]
    pub fn retry_after_secs(self) -> u64 {
        match self {
            Self::Conflict | Self::Unavailable => 1,
            Self::Throttled => 10,
            Self::Misconfigured | Self::Unreadable => 60,
        }
    }
}

/// How many times at most a failure is tried again within one invocation
/// ([`PortErrorKind::retry_at_once_ms`]).
pub const RETRIES_AT_ONCE: u32 = 4;

impl PortErrorKind {
    /// How long (ms) to wait before trying again, within the same invocation, after the
    /// `attempt`-th (1-based) failure of this kind, spread by `spread` (-1 … 1, a message's
    /// own: [`crate::roads::outbound::spread_of`]) so that writers that met on one item do not meet
    /// again; `None`: no retry now (the queue's redelivery, or an operator, decides). A
    /// conflict (another writer held the item) passes in milliseconds and a throttle in a
    /// second or two, so neither should cost a redelivery, let alone the dead-letter queue:
    /// 20, 60, 180, 540 ms for a conflict; 100, 400, 1600, 6400 ms for a throttle; each ±50 %.
    /// What the SDK retries itself (unavailable) and what a retry cannot fix (misconfigured)
    /// are not tried again here.
    #[must_use]
    pub fn retry_at_once_ms(self, attempt: u32, spread: f64) -> Option<u64> {
        let (first, factor) = match self {
            Self::Conflict => (20.0, 3.0_f64),
            Self::Throttled => (100.0, 4.0),
            Self::Unavailable | Self::Misconfigured | Self::Unreadable => return None,
        };
        if attempt == 0 || attempt > RETRIES_AT_ONCE {
            return None;
        }
        let base = first * factor.powi(i32::try_from(attempt - 1).unwrap_or(0));
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive number of milliseconds, at most seconds"
        )]
        Some((base * (1.0 + 0.5 * spread.clamp(-1.0, 1.0))).round() as u64)
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

    // A conflict or a throttle is tried again within the invocation, a few times,
    // each wait longer and spread; what a retry at once cannot fix is left to the queue.
    #[test]
    fn only_a_conflict_or_a_throttle_is_tried_again_at_once_each_wait_longer() {
        for kind in [PortErrorKind::Conflict, PortErrorKind::Throttled] {
            let waits: Vec<u64> = (1..=RETRIES_AT_ONCE)
                .map(|a| kind.retry_at_once_ms(a, 0.0).expect("retried"))
                .collect();
            assert!(waits.windows(2).all(|w| w[0] < w[1]), "{kind}: {waits:?}");
            assert_eq!(kind.retry_at_once_ms(RETRIES_AT_ONCE + 1, 0.0), None);
            assert_eq!(kind.retry_at_once_ms(0, 0.0), None);
            // Spread: two messages that met on one item wait differently, within ±50 %.
            let (low, high) = (
                kind.retry_at_once_ms(1, -1.0).unwrap(),
                kind.retry_at_once_ms(1, 1.0).unwrap(),
            );
            assert_eq!((low * 2, high * 2), (waits[0], waits[0] * 3));
        }
        assert_eq!(PortErrorKind::Conflict.retry_at_once_ms(1, 0.0), Some(20));
        assert_eq!(PortErrorKind::Throttled.retry_at_once_ms(1, 0.0), Some(100));
        let total: u64 = (1..=RETRIES_AT_ONCE)
            .filter_map(|a| PortErrorKind::Throttled.retry_at_once_ms(a, 1.0))
            .sum();
        assert!(total <= 13_000, "well inside fulfil's 30 s: {total} ms");
        for kind in [PortErrorKind::Unavailable, PortErrorKind::Misconfigured] {
            assert_eq!(kind.retry_at_once_ms(1, 0.0), None, "{kind}");
        }
    }

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
