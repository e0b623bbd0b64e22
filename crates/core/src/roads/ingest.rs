//! The ingest use case: verify the raw bytes, record the delivery once, hand it to the queue.
//!
//! Crash safety without a third write. The record is put with state `received` and a short
//! lease (longer than the ingest function can live), then the work item is sent. Until the
//! fulfil side marks it `processed`, nobody can tell whether that send happened, so:
//! - a duplicate inside the lease is answered 503 (the first attempt may still be sending);
//! - a duplicate after the lease takes the record over (a conditional update on the lease it
//!   saw) and sends again: a message twice is harmless, fulfil applies each delivery once;
//! - a duplicate of a `processed` record costs the one conditional put that found it.
//!
//! So every 2xx means: recorded, and either processed or sent by this very attempt.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

use crate::wire::envelope::{Category, Envelope, EnvelopeError};
use crate::wire::signature::{Environment, SignatureError, SigningKey, Verifier};

// The ports' error lives in `port`; named here too, for the modules that still import it from
// the ingest use case.
pub use crate::port::{PortError, PortErrorKind};
pub use crate::wire::work::{DeliveryState, delivery_key, event_id_of_key};

/// How often at most a failed signature makes ingest re-read its secrets (a rotation then
/// reaches warm instances within a minute; a flood of forged requests costs one read a minute).
pub const KEY_REFRESH_INTERVAL_MS: u64 = 60_000;

/// Where the webhook secrets are kept (Secrets Manager on AWS), read again after a rotation.
pub trait KeySource: Send + Sync {
    /// The secrets as configured now.
    fn keys(&self) -> impl Future<Output = Result<Vec<SigningKey>, PortError>> + Send;
}

/// The default largest body accepted (Paymos bodies are 1–3 KiB); it keeps the ledger item
/// under DynamoDB's 400 KB and the work item under SQS's 256 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 128 * 1024;
/// SQS' largest message, its attributes included (256 KiB).
pub const SQS_MAX_MESSAGE_BYTES: usize = 262_144;
/// The largest body a stack may accept (`MaxBodyBytes`' bound): its work item, base64 and all,
/// with the longest event id, event type and resource id as attributes, fits one SQS message
/// (192 KiB would not: its base64 alone is 256 KiB).
pub const LIMIT_MAX_BODY_BYTES: usize = 195_000;
/// The default lease of a fresh record, in seconds: longer than the ingest timeout, shorter
/// than the sender's first retry gap (one minute).
pub const DEFAULT_LEASE_SECS: u64 = 30;

/// When a new delivery's delayed check comes due (issue 51): 10 minutes after arrival, when the
/// sweep first looked for it before checks, within SQS' longest message timer.
pub const DEFAULT_CHECK_AFTER_SECS: u32 = 600;

/// SQS' longest message timer (`DelaySeconds`), 15 minutes.
pub const MAX_CHECK_AFTER_SECS: u32 = 900;

/// Lower-case hex SHA-256 of a body, as the ledger stores it.
#[must_use]
pub fn sha256_hex(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

/// A delivery as the ledger records it: the exact bytes and what they were routed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// `evt_…`; with the environment, the ledger key ([`Delivery::key`]).
    pub event_id: String,
    /// `invoice.paid`, …
    pub event_type: String,
    /// Derived from the type.
    pub category: Category,
    /// `inv_…`, `wdr_…`, `pcd_…`.
    pub resource_id: Option<String>,
    /// The environment of the secret that verified it.
    pub environment: Option<Environment>,
    /// The label of the secret that verified it.
    pub secret_label: String,
    /// The envelope version.
    pub version: u64,
    /// `occurred_at` of the envelope (Unix seconds).
    pub occurred_at: u64,
    /// `t` of the signature (Unix seconds).
    pub signed_at: u64,
    /// When we received it (Unix milliseconds).
    pub received_at_ms: u64,
    /// The exact raw body.
    pub body: Vec<u8>,
    /// SHA-256 of the raw body, lower-case hex.
    pub body_sha256: String,
}

impl Delivery {
    /// Its ledger key: [`delivery_key`] of its environment and `event_id`.
    #[must_use]
    pub fn key(&self) -> String {
        delivery_key(self.environment, &self.event_id)
    }
}

/// What the ledger already held under a delivery's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingDelivery {
    /// The delivery as first recorded (its body is the one that counts).
    pub delivery: Delivery,
    /// Received or processed.
    pub state: DeliveryState,
    /// Until when (Unix ms) the attempt that holds the record may still be sending it.
    pub lease_until_ms: u64,
}

/// The answer of [`DeliveryLedger::record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// The record is new; this attempt holds its lease.
    New,
    /// A record existed already; it is returned as it was (nothing was written).
    Existing(Box<ExistingDelivery>),
}

/// The answer of [`DeliveryLedger::take_over`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeOver {
    /// This attempt now holds the lease and must send the work item.
    Won,
    /// Someone else changed the record first (took it over, or processed it).
    Lost(Option<DeliveryState>),
}

/// Whose the body of a delivery is: put by this attempt, or by an earlier one with the same
/// bytes ([`DeliveryLedger::keep_body`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKept {
    /// Put now: the first attempt with these bytes.
    New,
    /// Kept already: an earlier attempt put it (and may have recorded the delivery).
    Seen,
}

/// How a new record is found again if nothing applies it (issue 51).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Its delayed check was queued before it: the check lists it if it strands.
    ByCheck,
    /// Listed at once where the sweep reads the stragglers (`pending-by-age`): no check was
    /// queued for it (a retry, or the check's send failed).
    Listed,
}

/// What [`WorkQueue::enqueue_checked`] queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// The work item.
    pub work: bool,
    /// Its delayed check.
    pub check: bool,
}

impl Queued {
    /// Nothing queued.
    pub const NOTHING: Self = Self {
        work: false,
        check: false,
    };
}

/// The deliveries table: one record per delivery key ([`delivery_key`]), written once. The
/// methods after `record` address a record by that key.
pub trait DeliveryLedger: Send + Sync {
    /// Writes `delivery` with state `received` and the lease, unless a record with its key
    /// exists; then returns that record (one conditional write, no read).
    fn record(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
    ) -> impl Future<Output = Result<Recorded, PortError>> + Send;

    /// Puts the body of `delivery` (only if absent: the same key is the same bytes) and says
    /// whether this attempt put it. A ledger that keeps bodies with its records answers
    /// [`BodyKept::Seen`], and [`Self::record_listed`] then records and lists as `record` does.
    fn keep_body(
        &self,
        _delivery: &Delivery,
    ) -> impl Future<Output = Result<BodyKept, PortError>> + Send {
        async { Ok(BodyKept::Seen) }
    }

    /// Writes the record of `delivery`, whose body [`Self::keep_body`] put, as
    /// [`Self::record`] does, listed as `listing` says.
    fn record_listed(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
        _listing: Listing,
    ) -> impl Future<Output = Result<Recorded, PortError>> + Send {
        self.record(delivery, lease_until_ms)
    }

    /// The record under `key`, if any. A read that lags a write may miss it: use it only
    /// where that costs nothing but a count.
    fn find(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<ExistingDelivery>, PortError>> + Send;

    /// Moves the lease of a `received` record from `seen_lease_ms` to `new_lease_ms`, if
    /// nobody moved it or processed the record since it was read.
    fn take_over(
        &self,
        key: &str,
        seen_lease_ms: u64,
        new_lease_ms: u64,
    ) -> impl Future<Output = Result<TakeOver, PortError>> + Send;

    /// Ends this attempt's lease early after a failed send, so the next retry need not wait.
    fn release(
        &self,
        key: &str,
        lease_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Notes on the record that a delivery with its key arrived with a different body.
    fn mark_conflict(
        &self,
        key: &str,
        body_sha256: &str,
        at_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// The queue between ingest and fulfil.
pub trait WorkQueue: Send + Sync {
    /// Sends one work item for `delivery`.
    fn enqueue(&self, delivery: &Delivery) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Sends the work item for `delivery` and its delayed check, due `check_after_secs` later
    /// (at most SQS' 900), in one request where the queue can; reports which it queued. A
    /// queue without checks sends the work alone.
    ///
    /// # Errors
    /// [`PortError`] when neither was queued.
    fn enqueue_checked(
        &self,
        delivery: &Delivery,
        _check_after_secs: u32,
    ) -> impl Future<Output = Result<Queued, PortError>> + Send {
        async move {
            self.enqueue(delivery).await?;
            Ok(Queued {
                work: true,
                check: false,
            })
        }
    }
}

// Shared ports: an `Arc` of a port is the same port.
impl<T: DeliveryLedger> DeliveryLedger for Arc<T> {
    fn record(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
    ) -> impl Future<Output = Result<Recorded, PortError>> + Send {
        (**self).record(delivery, lease_until_ms)
    }

    fn keep_body(
        &self,
        delivery: &Delivery,
    ) -> impl Future<Output = Result<BodyKept, PortError>> + Send {
        (**self).keep_body(delivery)
    }

    fn record_listed(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
        listing: Listing,
    ) -> impl Future<Output = Result<Recorded, PortError>> + Send {
        (**self).record_listed(delivery, lease_until_ms, listing)
    }

    fn find(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<ExistingDelivery>, PortError>> + Send {
        (**self).find(key)
    }

    fn take_over(
        &self,
        key: &str,
        seen_lease_ms: u64,
        new_lease_ms: u64,
    ) -> impl Future<Output = Result<TakeOver, PortError>> + Send {
        (**self).take_over(key, seen_lease_ms, new_lease_ms)
    }

    fn release(
        &self,
        key: &str,
        lease_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).release(key, lease_ms)
    }

    fn mark_conflict(
        &self,
        key: &str,
        body_sha256: &str,
        at_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).mark_conflict(key, body_sha256, at_ms)
    }
}

impl<T: WorkQueue> WorkQueue for Arc<T> {
    fn enqueue(&self, delivery: &Delivery) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).enqueue(delivery)
    }

    fn enqueue_checked(
        &self,
        delivery: &Delivery,
        check_after_secs: u32,
    ) -> impl Future<Output = Result<Queued, PortError>> + Send {
        (**self).enqueue_checked(delivery, check_after_secs)
    }
}

/// A webhook request as the trigger delivered it, reduced to what ingest reads.
#[derive(Debug, Clone, Copy)]
pub struct Inbound<'a> {
    /// The HTTP method.
    pub method: &'a str,
    /// `X-Webhook-Signature`, if present.
    pub signature: Option<&'a str>,
    /// `X-Webhook-Id`, if present.
    pub webhook_id: Option<&'a str>,
    /// The exact raw body bytes (base64 already decoded).
    pub body: &'a [u8],
}

/// The outcome of a 2xx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ingested {
    /// First time this delivery (its environment and `event_id`) was seen: recorded and sent.
    New,
    /// Seen before and already processed, or (`resent`) seen before, never processed, and
    /// sent again now because the attempt that recorded it is gone.
    Duplicate {
        /// Whether this attempt sent the work item again.
        resent: bool,
        /// Whether the body differed from the recorded one (kept: the first body wins).
        body_conflict: bool,
    },
}

impl Ingested {
    /// `new` or `duplicate`, for the response body and logs.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Duplicate { .. } => "duplicate",
        }
    }
}

/// What a 2xx acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The verified body's `event_id`.
    pub event_id: String,
    /// Its `event_type`.
    pub event_type: String,
    /// New or duplicate.
    pub ingested: Ingested,
    /// The same `event_id` is also recorded from a delivery verified by another environment's
    /// secret (found when this one was new). Both are kept, each under its own key; the reuse
    /// is counted and alarmed, since Paymos never sends one id to both environments.
    pub cross_environment: bool,
}

/// Why a delivery was not acknowledged; [`IngestError::answer`] is the HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// Not a POST.
    #[error("method {0} is not allowed: Paymos delivers with POST")]
    MethodNotAllowed(String),
    /// The body is larger than the configured limit.
    #[error("the body has {size} bytes, more than the {limit}-byte limit (MAX_BODY_BYTES)")]
    PayloadTooLarge {
        /// The body's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The signature did not verify.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// The verified body is not an envelope.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// `X-Webhook-Id` disagrees with the signed body's `event_id`.
    #[error("the X-Webhook-Id header does not match the body's event_id")]
    IdMismatch,
    /// The secret that verified the delivery is configured for the other environment.
    #[error(
        "the delivery has data.is_test={is_test} but verified with the secret labelled '{label}' ({environment}): check the labels of the configured secrets"
    )]
    EnvironmentMismatch {
        /// The label of the matching secret.
        label: String,
        /// Its environment.
        environment: Environment,
        /// `data.is_test` of the delivery.
        is_test: bool,
    },
    /// The delivery's key holds a record of another environment. Since the environment is
    /// part of the key, only two things do that: a sandbox record written before it was (keyed
    /// by the bare `event_id`, as live ones are), or a live and an unlabelled secret verifying
    /// the same id. Refused, never acknowledged: a 2xx would end the retries of a delivery that
    /// is never applied. Counted and alarmed: once the stale record is removed, the sender's
    /// next retry is recorded.
    #[error(
        "the record under this event_id was verified by a {recorded} secret; this delivery, verified by a {received} secret, is refused until that record is removed (see docs/operating.md)"
    )]
    EnvironmentConflict {
        /// The environment of the recorded delivery's secret.
        recorded: String,
        /// The environment of this delivery's secret.
        received: String,
    },
    /// A duplicate arrived while the attempt that recorded it may still be sending it.
    #[error("an earlier attempt of this delivery is still in progress; retry later")]
    InProgress {
        /// Seconds until its lease ends.
        retry_after_secs: u64,
    },
    /// DynamoDB or SQS failed: nothing acknowledged, the sender retries.
    #[error(transparent)]
    Unavailable(#[from] PortError),
}

/// The HTTP answer to a delivery that was not acknowledged, and the words of its log line:
/// [`IngestError::answer`], the one mapping from an error to what the sender sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status ([`IngestError::status`]).
    pub status: u16,
    /// The JSON body, `{"received": false, "error": <code>, "message": <text>}`: the
    /// [`code`](IngestError::code), and the error in words, except for a port's failure, whose
    /// details (the SDK's message) stay in the log.
    pub body: serde_json::Value,
    /// `Retry-After`, in seconds: when the sender should wait before it retries.
    pub retry_after_secs: Option<u64>,
    /// `Allow`, when the method was not allowed.
    pub allow: Option<&'static str>,
    /// The message of the request's log line: a refusal, or a failure of ours the sender will
    /// retry, naming a refused credential as one.
    pub log: &'static str,
}

impl Answer {
    /// Whether the failure is ours (5xx): the sender retries, and the log line is an error.
    #[must_use]
    pub fn is_server_error(&self) -> bool {
        self.status >= 500
    }
}

/// The log line of a refusal (4xx).
pub const LOG_REFUSED: &str = "delivery refused";
/// The log line of a failure of ours (5xx).
pub const LOG_NOT_ACKNOWLEDGED: &str = "delivery not acknowledged; the sender will retry";
/// The log line of a failure of ours because a service refused our credential.
pub const LOG_REFUSED_CREDENTIAL: &str = "delivery not acknowledged: a refused credential (the function's role, its policy or an expired token); the sender will retry";

impl IngestError {
    /// The whole HTTP answer: status, body, `Retry-After`, `Allow`, and the log line's words.
    /// A port's failure is always a 5xx, so the sender retries: 500 when the stack is
    /// misconfigured (a refused credential among them, which its log line names), 503 otherwise.
    #[must_use]
    pub fn answer(&self) -> Answer {
        let (retry_after_secs, message) = match self {
            Self::InProgress { retry_after_secs } => (Some(*retry_after_secs), self.to_string()),
            // Internal details (SDK messages) stay in the log; the sender gets the code.
            Self::Unavailable(e) => (
                Some(e.kind.retry_after_secs()),
                "temporarily unavailable; retry".to_owned(),
            ),
            _ => (None, self.to_string()),
        };
        let status = self.status();
        let log = match self {
            Self::Unavailable(e) if e.is_refused_credential() => LOG_REFUSED_CREDENTIAL,
            _ if status >= 500 => LOG_NOT_ACKNOWLEDGED,
            _ => LOG_REFUSED,
        };
        Answer {
            status,
            body: serde_json::json!({ "received": false, "error": self.code(), "message": message }),
            retry_after_secs,
            allow: matches!(self, Self::MethodNotAllowed(_)).then_some("POST"),
            log,
        }
    }

    /// The HTTP status for the sender: 4xx when the request must change, 5xx when it should
    /// simply be retried.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::MethodNotAllowed(_) => 405,
            Self::PayloadTooLarge { .. } => 413,
            Self::Signature(_) => 401,
            Self::Envelope(_) | Self::IdMismatch => 400,
            Self::EnvironmentMismatch { .. } => 403,
            Self::EnvironmentConflict { .. } => 409,
            Self::InProgress { .. } => 503,
            // Retried by the sender either way; a 500 tells whoever watches the endpoint that
            // the stack, not the service, needs a person.
            Self::Unavailable(e) if e.kind == PortErrorKind::Misconfigured => 500,
            Self::Unavailable(_) => 503,
        }
    }

    /// A stable machine-readable code for the response body and the log.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::Signature(e) => e.code(),
            Self::Envelope(_) => "invalid_payload",
            Self::IdMismatch => "webhook_id_mismatch",
            Self::EnvironmentMismatch { .. } => "environment_mismatch",
            Self::EnvironmentConflict { .. } => "environment_conflict",
            Self::InProgress { .. } => "in_progress",
            Self::Unavailable(e) => e.kind.as_str(),
        }
    }
}

/// Settings of the ingest use case.
#[derive(Debug, Clone)]
pub struct IngestSettings {
    /// Largest accepted body in bytes.
    pub max_body_bytes: usize,
    /// Lease of a fresh record in seconds (see the module docs).
    pub lease_secs: u64,
    /// When a new delivery's check comes due, in seconds (at most SQS' 900).
    pub check_after_secs: u32,
}

impl Default for IngestSettings {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            lease_secs: DEFAULT_LEASE_SECS,
            check_after_secs: DEFAULT_CHECK_AFTER_SECS,
        }
    }
}

/// The ingest use case with its ports.
#[derive(Debug)]
pub struct Ingest<L, Q> {
    verifier: RwLock<Arc<Verifier>>,
    keys_read_at_ms: AtomicU64,
    ledger: L,
    queue: Q,
    settings: IngestSettings,
}

impl<L: DeliveryLedger, Q: WorkQueue> Ingest<L, Q> {
    /// Wires the use case.
    pub fn new(verifier: Verifier, ledger: L, queue: Q, settings: IngestSettings) -> Self {
        Self {
            verifier: RwLock::new(Arc::new(verifier)),
            keys_read_at_ms: AtomicU64::new(0),
            ledger,
            queue,
            settings,
        }
    }

    /// The ledger port (for tools and tests).
    pub fn ledger(&self) -> &L {
        &self.ledger
    }

    /// Checks everything that needs no I/O: method, size, signature, envelope, ids, environment.
    /// A request refused here has caused no write and no AWS call.
    ///
    /// # Errors
    /// Every 4xx [`IngestError`].
    pub fn admit(&self, req: &Inbound<'_>, now_ms: u64) -> Result<Delivery, IngestError> {
        if !req.method.eq_ignore_ascii_case("POST") {
            return Err(IngestError::MethodNotAllowed(req.method.to_owned()));
        }
        if req.body.len() > self.settings.max_body_bytes {
            return Err(IngestError::PayloadTooLarge {
                size: req.body.len(),
                limit: self.settings.max_body_bytes,
            });
        }
        // Verify the raw bytes: never a re-serialisation of the parsed JSON.
        let verifier = Arc::clone(&self.verifier.read().expect("verifier lock"));
        let verified = verifier.verify(req.signature, req.body, now_ms / 1000)?;
        let envelope = Envelope::parse(req.body)?;
        if req
            .webhook_id
            .is_some_and(|id| id.trim() != envelope.event_id)
        {
            return Err(IngestError::IdMismatch);
        }
        let environment = verified.key.environment();
        if let (Some(env), Some(is_test)) = (environment, envelope.is_test)
            && env.is_test() != is_test
        {
            return Err(IngestError::EnvironmentMismatch {
                label: verified.key.label().to_owned(),
                environment: env,
                is_test,
            });
        }
        Ok(Delivery {
            event_id: envelope.event_id,
            event_type: envelope.event_type,
            category: envelope.category,
            resource_id: envelope.resource_id,
            environment,
            secret_label: verified.key.label().to_owned(),
            version: envelope.version,
            occurred_at: envelope.occurred_at,
            signed_at: verified.timestamp,
            received_at_ms: now_ms,
            body_sha256: sha256_hex(req.body),
            body: req.body.to_vec(),
        })
    }

    /// Handles one delivery attempt, and when its signature matches none of the secrets, reads
    /// the secrets again (at most once per [`KEY_REFRESH_INTERVAL_MS`]) and, if they changed,
    /// verifies once more: a rotation reaches a warm instance without a cold start.
    ///
    /// # Errors
    /// As [`Ingest::handle`].
    pub async fn handle_with_keys<K: KeySource>(
        &self,
        req: &Inbound<'_>,
        now_ms: u64,
        source: &K,
    ) -> Result<Receipt, IngestError> {
        match self.handle(req, now_ms).await {
            Err(IngestError::Signature(SignatureError::SignatureMismatch { .. }))
                if self.refresh_keys(source, now_ms).await =>
            {
                self.handle(req, now_ms).await
            }
            other => other,
        }
    }

    /// Re-reads the secrets unless that was done less than [`KEY_REFRESH_INTERVAL_MS`] ago;
    /// returns whether they changed. A failed read keeps the current secrets.
    pub async fn refresh_keys<K: KeySource>(&self, source: &K, now_ms: u64) -> bool {
        let last = self.keys_read_at_ms.load(Ordering::SeqCst);
        if now_ms < last.saturating_add(KEY_REFRESH_INTERVAL_MS)
            || self
                .keys_read_at_ms
                .compare_exchange(last, now_ms, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return false;
        }
        let keys = match source.keys().await {
            Ok(keys) => keys,
            Err(error) => {
                tracing::warn!(error = %error, "could not re-read the webhook secrets; keeping the current ones");
                return false;
            }
        };
        let mut current = self.verifier.write().expect("verifier lock");
        if current.keys() == keys.as_slice() {
            return false;
        }
        tracing::info!(secrets = ?keys.iter().map(SigningKey::label).collect::<Vec<_>>(), "webhook secrets changed: using the new set");
        *current = Arc::new(Verifier::new(keys, current.tolerance()));
        true
    }

    /// Handles one delivery attempt at Unix time `now_ms`.
    ///
    /// # Errors
    /// An [`IngestError`] whose [`answer`](IngestError::answer) is the answer to send.
    pub async fn handle(&self, req: &Inbound<'_>, now_ms: u64) -> Result<Receipt, IngestError> {
        let delivery = self.admit(req, now_ms)?;
        let lease = now_ms + self.settings.lease_secs * 1000;
        // New bytes: the work and its delayed check are queued before the record exists, so no
        // record exists that neither its check nor the stragglers' list finds (an attempt may
        // die right after its put, and its sender give up). Bytes seen before, or a check not
        // queued: the record is listed at its put, as every record was before issue 51.
        let queued = match self.ledger.keep_body(&delivery).await? {
            BodyKept::New => {
                self.queue
                    .enqueue_checked(&delivery, self.settings.check_after_secs)
                    .await?
            }
            BodyKept::Seen => Queued::NOTHING,
        };
        let listing = if queued.check {
            Listing::ByCheck
        } else {
            Listing::Listed
        };
        let ingested = match self.ledger.record_listed(&delivery, lease, listing).await? {
            Recorded::New => {
                if !queued.work {
                    self.send(&delivery, lease).await?;
                }
                Ingested::New
            }
            Recorded::Existing(existing) => {
                // This attempt's queued work stands for the record only if it is its body.
                let sent = queued.work && existing.delivery.body_sha256 == delivery.body_sha256;
                self.duplicate(&delivery, *existing, now_ms, sent).await?
            }
        };
        let cross_environment =
            ingested == Ingested::New && self.recorded_elsewhere(&delivery).await;
        Ok(Receipt {
            event_id: delivery.event_id,
            event_type: delivery.event_type,
            ingested,
            cross_environment,
        })
    }

    /// Whether the same `event_id` is recorded from another environment: one read of the key
    /// the id takes there, made only when a configured secret belongs to another environment
    /// (otherwise no such record can be written). Best effort: it only counts, so a failed
    /// read is logged and answers no.
    async fn recorded_elsewhere(&self, delivery: &Delivery) -> bool {
        let own = delivery.key();
        let verifier = Arc::clone(&self.verifier.read().expect("verifier lock"));
        // Two environments, two key shapes: at most one other key.
        let Some(other_key) = verifier
            .keys()
            .iter()
            .map(|k| delivery_key(k.environment(), &delivery.event_id))
            .find(|key| *key != own)
        else {
            return false;
        };
        match self.ledger.find(&other_key).await {
            Ok(Some(other)) if other.delivery.environment != delivery.environment => {
                tracing::warn!(
                    event_id = %delivery.event_id,
                    environment = environment_name(delivery.environment),
                    other_environment = environment_name(other.delivery.environment),
                    "the same event_id is recorded from another environment's secret; each is kept under its own key"
                );
                true
            }
            Ok(_) => false,
            Err(error) => {
                tracing::warn!(event_id = %delivery.event_id, error = %error, "could not look for the same event_id from another environment");
                false
            }
        }
    }

    /// A delivery whose record exists; `sent` when this attempt queued the recorded body's work
    /// already (a record the previous release wrote, a body that expired): a take-over then
    /// sends nothing more.
    async fn duplicate(
        &self,
        delivery: &Delivery,
        existing: ExistingDelivery,
        now_ms: u64,
        sent: bool,
    ) -> Result<Ingested, IngestError> {
        if existing.delivery.environment != delivery.environment {
            // Another environment's record under this delivery's own key (see
            // `IngestError::EnvironmentConflict`): not its duplicate. Nothing is written.
            let (recorded, received) = (
                environment_name(existing.delivery.environment),
                environment_name(delivery.environment),
            );
            tracing::error!(
                event_id = %delivery.event_id,
                recorded,
                received,
                "the record under this key was verified by another environment's secret: refused until it is removed"
            );
            return Err(IngestError::EnvironmentConflict {
                recorded: recorded.to_owned(),
                received: received.to_owned(),
            });
        }
        let body_conflict = existing.delivery.body_sha256 != delivery.body_sha256;
        if body_conflict {
            tracing::warn!(
                event_id = %delivery.event_id,
                recorded_sha256 = %existing.delivery.body_sha256,
                received_sha256 = %delivery.body_sha256,
                "same event_id arrived with a different body; the first body is kept"
            );
            self.ledger
                .mark_conflict(&delivery.key(), &delivery.body_sha256, now_ms)
                .await?;
        }
        if existing.state == DeliveryState::Processed {
            return Ok(Ingested::Duplicate {
                resent: false,
                body_conflict,
            });
        }
        if existing.lease_until_ms > now_ms {
            return Err(IngestError::InProgress {
                retry_after_secs: (existing.lease_until_ms - now_ms).div_ceil(1000),
            });
        }
        // The attempt that recorded it is gone and nothing processed it: send it again,
        // with the body as first recorded.
        let lease = now_ms + self.settings.lease_secs * 1000;
        match self
            .ledger
            .take_over(&delivery.key(), existing.lease_until_ms, lease)
            .await?
        {
            TakeOver::Won => {
                if !sent {
                    self.send(&existing.delivery, lease).await?;
                }
                Ok(Ingested::Duplicate {
                    resent: true,
                    body_conflict,
                })
            }
            TakeOver::Lost(Some(DeliveryState::Processed)) => Ok(Ingested::Duplicate {
                resent: false,
                body_conflict,
            }),
            TakeOver::Lost(_) => Err(IngestError::InProgress {
                retry_after_secs: self.settings.lease_secs,
            }),
        }
    }

    async fn send(&self, delivery: &Delivery, lease: u64) -> Result<(), IngestError> {
        if let Err(error) = self.queue.enqueue(delivery).await {
            // Best effort: let the sender's next retry take over at once. If this fails too,
            // the lease simply runs out first.
            if let Err(release) = self.ledger.release(&delivery.key(), lease).await {
                tracing::warn!(event_id = %delivery.event_id, error = %release, "could not release the lease after a failed send");
            }
            return Err(error.into());
        }
        Ok(())
    }
}

/// An environment as logs and errors name it.
fn environment_name(environment: Option<Environment>) -> &'static str {
    environment.map_or("unlabelled", Environment::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::wire::envelope::EnvelopeError;
    use crate::wire::signature::SignatureError;

    fn answer_of(error: &IngestError) -> (u16, serde_json::Value, Option<u64>, Option<&str>, &str) {
        let a = error.answer();
        (a.status, a.body, a.retry_after_secs, a.allow, a.log)
    }

    #[test]
    fn every_refusal_answers_its_status_code_and_words() {
        let cases = [
            IngestError::MethodNotAllowed("GET".into()),
            IngestError::PayloadTooLarge { size: 9, limit: 8 },
            IngestError::Signature(SignatureError::MissingHeader),
            IngestError::Envelope(EnvelopeError::InvalidEventId),
            IngestError::IdMismatch,
            IngestError::EnvironmentMismatch {
                label: "live".into(),
                environment: Environment::Live,
                is_test: true,
            },
            IngestError::EnvironmentConflict {
                recorded: "sandbox".into(),
                received: "live".into(),
            },
        ];
        let statuses = [405, 413, 401, 400, 400, 403, 409];
        for (error, status) in cases.iter().zip(statuses) {
            let (got, body, retry_after, allow, log) = answer_of(error);
            assert_eq!(got, status, "{error}");
            assert_eq!(
                body,
                json!({"received": false, "error": error.code(), "message": error.to_string()}),
                "{error}"
            );
            assert_eq!(retry_after, None, "{error}");
            assert_eq!(allow, (status == 405).then_some("POST"), "{error}");
            assert_eq!(log, LOG_REFUSED, "{error}");
            assert!(!error.answer().is_server_error());
        }
    }

    #[test]
    fn the_receipt_calls_a_first_delivery_new_and_every_later_one_duplicate() {
        // What the 2xx body's `status` and the log's `outcome` say, as the sender reads them.
        assert_eq!(Ingested::New.as_str(), "new");
        for (resent, body_conflict) in [(false, false), (true, false), (false, true)] {
            let duplicate = Ingested::Duplicate {
                resent,
                body_conflict,
            };
            assert_eq!(duplicate.as_str(), "duplicate", "{duplicate:?}");
        }
    }

    #[test]
    fn a_duplicate_in_progress_answers_503_after_its_lease() {
        let error = IngestError::InProgress {
            retry_after_secs: 7,
        };
        assert_eq!(
            answer_of(&error),
            (
                503,
                json!({"received": false, "error": "in_progress",
                       "message": "an earlier attempt of this delivery is still in progress; retry later"}),
                Some(7),
                None,
                LOG_NOT_ACKNOWLEDGED
            )
        );
    }

    #[test]
    fn a_port_failure_answers_5xx_by_kind_and_keeps_its_details_in_the_log() {
        for (kind, status, retry_after) in [
            (PortErrorKind::Unavailable, 503, 1),
            (PortErrorKind::Throttled, 503, 10),
            (PortErrorKind::Conflict, 503, 1),
            (PortErrorKind::Misconfigured, 500, 60),
        ] {
            let error = IngestError::Unavailable(PortError::of_kind(
                "SQS SendMessage",
                kind,
                "the SDK's words",
            ));
            assert_eq!(
                answer_of(&error),
                (
                    status,
                    json!({"received": false, "error": kind.as_str(),
                           "message": "temporarily unavailable; retry"}),
                    Some(retry_after),
                    None,
                    LOG_NOT_ACKNOWLEDGED
                ),
                "{kind}"
            );
        }
    }

    #[test]
    fn a_refused_credential_is_ours_retried_and_named_in_the_log() {
        let error = IngestError::Unavailable(PortError::refused_credential(
            "DynamoDB PutItem",
            "UnrecognizedClientException: The security token included in the request is invalid.",
        ));
        let answer = error.answer();
        assert!(answer.is_server_error(), "a 5xx: the sender retries");
        assert_eq!(
            (answer.status, answer.retry_after_secs, answer.allow),
            (500, Some(60), None)
        );
        assert_eq!(
            answer.body,
            json!({"received": false, "error": "misconfigured",
                   "message": "temporarily unavailable; retry"}),
            "the same body as any misconfiguration: nothing of ours reaches the sender"
        );
        assert_eq!(answer.log, LOG_REFUSED_CREDENTIAL);
        assert!(answer.log.contains("credential"), "{}", answer.log);
        assert!(
            error.to_string().contains("a refused credential"),
            "{error}"
        );
    }
}
