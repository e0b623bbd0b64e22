//! Settings read once at start-up through a lookup function (so tests never touch the process
//! environment), with errors that say what to set.

use std::str::FromStr;

use paymos_inbox_aws::dynamodb::LedgerSchema;
use paymos_inbox_core::money::change::Projects;
use paymos_inbox_core::roads::ingest::{
    DEFAULT_CHECK_AFTER_SECS, DEFAULT_LEASE_SECS, DEFAULT_MAX_BODY_BYTES, IngestSettings,
    LIMIT_MAX_BODY_BYTES, MAX_CHECK_AFTER_SECS,
};
use paymos_inbox_core::wire::signature::{
    DEFAULT_TOLERANCE_SECS, Environment, SigningKey, parse_keys,
};

/// Environment variable: the deliveries (ledger) table name.
pub const DELIVERIES_TABLE: &str = "DELIVERIES_TABLE";
/// Environment variable: the resource state table name.
pub const STATE_TABLE: &str = "STATE_TABLE";
/// Environment variable: the work queue URL.
pub const WORK_QUEUE_URL: &str = "WORK_QUEUE_URL";
/// Environment variable: the Secrets Manager secret (name or ARN) holding the webhook secrets.
pub const WEBHOOK_SECRETS_ID: &str = "WEBHOOK_SECRETS_ID";
/// Environment variable: signature tolerance in seconds (default 300).
pub const SIGNATURE_TOLERANCE_SECS: &str = "SIGNATURE_TOLERANCE_SECS";
/// Environment variable: largest accepted body in bytes (default 131072).
pub const MAX_BODY_BYTES: &str = "MAX_BODY_BYTES";
/// Environment variable: lease of a fresh delivery record in seconds (default 30).
pub const INGEST_LEASE_SECS: &str = "INGEST_LEASE_SECS";
/// When a new delivery's delayed check comes due, in seconds (600 by default, at most 900).
pub const CHECK_AFTER_SECS: &str = "CHECK_AFTER_SECS";
/// Environment variable: the Secrets Manager secret with the Paymos API key and secret
/// (`{"api_key": "…", "api_secret": "…"}`); when set, fulfil re-reads every paid invoice at
/// Paymos before fulfilling it (the reverse check).
pub const PAYMOS_API_SECRETS_ID: &str = "PAYMOS_API_SECRETS_ID";
/// Environment variable: the Paymos API base URL (default `https://api.paymos.io`).
pub const PAYMOS_API_BASE_URL: &str = "PAYMOS_API_BASE_URL";
/// Environment variable: the Paymos environment whose deliveries this stack applies, `live`
/// (default) or `sandbox`. Deliveries verified by a secret of the other environment are
/// recorded and acknowledged but change nothing (outcome `other_environment`).
pub const PAYMOS_ENVIRONMENT: &str = "PAYMOS_ENVIRONMENT";

/// Environment variable: the merchant's projects (`prj_…`, comma-separated) whose deliveries
/// this stack applies, the first its home project (template.yaml: `PaymosProjectIds`).
/// Another project's deliveries are recorded and acknowledged but change nothing (outcome
/// `other_project`). Required on a live stack: an endpoint without a project filter receives
/// every project, and withdrawals ignore filters.
pub const PAYMOS_PROJECT_IDS: &str = "PAYMOS_PROJECT_IDS";
/// Environment variable: the sweep re-sends deliveries still `received` this many seconds after
/// they arrived (default 600).
pub const SWEEP_AFTER_SECS: &str = "SWEEP_AFTER_SECS";
/// Environment variable: hours of paid invoices the scheduled reconciliation compares (48).
pub const RECONCILE_WINDOW_HOURS: &str = "RECONCILE_WINDOW_HOURS";
/// Environment variable: `true` to let the scheduled reconciliation fulfil what it finds
/// missing (default `false`: report and alarm only).
pub const RECONCILE_APPLY: &str = "RECONCILE_APPLY";
/// Environment variable: the stack's name, the `Stack` dimension of every metric (so two stacks
/// in one account never mix their numbers; default `local`).
pub const METRICS_STACK: &str = "PAYMOS_INBOX_STACK";

/// Environment variable: the level of our own log lines, `INFO` (default) or `WARN` (the
/// template's `LogLevel`). Lambda's `ApplicationLogLevel` stays INFO whatever this says: Lambda
/// files a line without a `level` as INFO and drops it above, and the metrics' EMF documents are
/// such lines.
pub const LOG_LEVEL: &str = "PAYMOS_INBOX_LOG_LEVEL";

/// Environment variable: the template's `Monitoring`, `essential` or `full` (unset: `full`, as
/// `dev` and `sam local` run). With `essential` no dashboard reads an outcome, so only the
/// outcomes its alarms read are counted by `Outcome` ([`crate::telemetry::keeps_outcome`]).
pub const MONITORING: &str = "PAYMOS_INBOX_MONITORING";

/// Whether every metric is written, every outcome by its `Outcome` dimension ([`MONITORING`]
/// is not `essential`, which writes only what its alarms read:
/// [`crate::telemetry::metric::ESSENTIAL`]).
pub fn full_monitoring(lookup: impl Fn(&str) -> Option<String>) -> bool {
    lookup(MONITORING).is_none_or(|v| v.trim() != "essential")
}

/// The `Stack` dimension of the metrics, from [`METRICS_STACK`].
pub fn metrics_stack(lookup: impl Fn(&str) -> Option<String>) -> String {
    lookup(METRICS_STACK)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "local".to_owned())
}

/// Environment variable: the EventBridge bus (name or ARN) the hand-off publishes to.
pub const EVENT_BUS_NAME: &str = "EVENT_BUS_NAME";

/// Environment variable: days to keep ledger items (unset: forever; the table is the archive).
pub const DELIVERY_RETENTION_DAYS: &str = "DELIVERY_RETENTION_DAYS";

/// Environment variable: days to keep each delivery's raw body, after which the table's TTL
/// removes it and the record keeps its ids, outcome and hash (unset: the ledger's default, 90;
/// at least 7).
pub const BODY_RETENTION_DAYS: &str = "BODY_RETENTION_DAYS";
/// With the reverse check, the minutes a delivery waits for Paymos' API to show what it
/// announces before it is `unconfirmed` (template.yaml: `ReverseCheckPatienceMinutes`).
pub const REVERSE_CHECK_PATIENCE_MINUTES: &str = "REVERSE_CHECK_PATIENCE_MINUTES";

/// A setting is missing or wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required variable is not set.
    #[error("{var} is not set: {hint}")]
    Missing {
        /// The variable.
        var: &'static str,
        /// What it should hold.
        hint: &'static str,
    },
    /// A variable is set to something unusable.
    #[error("{var} is invalid: {reason}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// Why (never the value when it may be a secret).
        reason: String,
    },
}

/// What the ingest function needs.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// The ledger table.
    pub deliveries_table: String,
    /// The work queue.
    pub work_queue_url: String,
    /// Where the webhook secrets are kept.
    pub secrets_id: String,
    /// Signature tolerance in seconds.
    pub tolerance_secs: u64,
    /// Use-case settings.
    pub settings: IngestSettings,
    /// Ledger retention in days, if any.
    pub retention_days: Option<u64>,
    /// Raw body retention in days (at least [`LedgerSchema::MIN_BODY_RETENTION_DAYS`]).
    pub body_retention_days: u64,
}

impl IngestConfig {
    /// Reads the configuration through `lookup` (e.g. `|k| std::env::var(k).ok()`).
    ///
    /// # Errors
    /// The first missing or invalid variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            deliveries_table: deliveries_table(&lookup)?,
            work_queue_url: work_queue_url(&lookup)?,
            secrets_id: required(
                &lookup,
                WEBHOOK_SECRETS_ID,
                "the name or ARN of the Secrets Manager secret with the webhook secrets",
            )?,
            tolerance_secs: number(&lookup, SIGNATURE_TOLERANCE_SECS, DEFAULT_TOLERANCE_SECS)?,
            settings: IngestSettings {
                max_body_bytes: max_body_bytes(&lookup)?,
                lease_secs: number(&lookup, INGEST_LEASE_SECS, DEFAULT_LEASE_SECS)?,
                check_after_secs: check_after_secs(&lookup)?,
            },
            retention_days: delivery_retention_days(&lookup)?,
            body_retention_days: body_retention_days(&lookup)?,
        })
    }
}

/// [`CHECK_AFTER_SECS`]: at most SQS' longest message timer.
fn check_after_secs(lookup: &impl Fn(&str) -> Option<String>) -> Result<u32, ConfigError> {
    let secs = number(lookup, CHECK_AFTER_SECS, DEFAULT_CHECK_AFTER_SECS)?;
    if secs > MAX_CHECK_AFTER_SECS {
        return Err(ConfigError::Invalid {
            var: CHECK_AFTER_SECS,
            reason: format!(
                "{secs} is more than {MAX_CHECK_AFTER_SECS}: SQS delays a message 15 minutes at most"
            ),
        });
    }
    Ok(secs)
}

/// [`MAX_BODY_BYTES`]: at most [`LIMIT_MAX_BODY_BYTES`], so every accepted body's work item
/// fits one SQS message.
fn max_body_bytes(lookup: &impl Fn(&str) -> Option<String>) -> Result<usize, ConfigError> {
    let bytes = number(lookup, MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES)?;
    if bytes > LIMIT_MAX_BODY_BYTES {
        return Err(ConfigError::Invalid {
            var: MAX_BODY_BYTES,
            reason: format!(
                "{bytes} is more than {LIMIT_MAX_BODY_BYTES}: a larger body's work item does not fit one SQS message"
            ),
        });
    }
    Ok(bytes)
}

/// [`BODY_RETENTION_DAYS`]: a whole number of days, at least the ledger's minimum (a body must
/// outlive every retry and re-send of its delivery), else an error that says so.
fn body_retention_days(lookup: &impl Fn(&str) -> Option<String>) -> Result<u64, ConfigError> {
    let days = number(
        lookup,
        BODY_RETENTION_DAYS,
        LedgerSchema::DEFAULT_BODY_RETENTION_DAYS,
    )?;
    if days < LedgerSchema::MIN_BODY_RETENTION_DAYS {
        return Err(ConfigError::Invalid {
            var: BODY_RETENTION_DAYS,
            reason: format!(
                "at least {} days (a body must outlive Paymos' retries and the sweep's re-sends), got {days}",
                LedgerSchema::MIN_BODY_RETENTION_DAYS
            ),
        });
    }
    Ok(days)
}

/// [`DELIVERY_RETENTION_DAYS`]: none (records kept for ever), or a whole number of days of at
/// least the bodies' minimum (a record must outlive its body, and the sweep must have days to
/// lift the expiry of one that waits for a person), else an error that says so.
fn delivery_retention_days(
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<Option<u64>, ConfigError> {
    let days = optional_number(lookup, DELIVERY_RETENTION_DAYS)?;
    if let Some(days) = days.filter(|d| *d < LedgerSchema::MIN_BODY_RETENTION_DAYS) {
        return Err(ConfigError::Invalid {
            var: DELIVERY_RETENTION_DAYS,
            reason: format!(
                "empty or at least {} days (a record must outlive its body and the sweep's re-sends), got {days}",
                LedgerSchema::MIN_BODY_RETENTION_DAYS
            ),
        });
    }
    Ok(days)
}

/// What the fulfil function needs.
#[derive(Debug, Clone)]
pub struct FulfilConfig {
    /// The ledger table.
    pub deliveries_table: String,
    /// The state table.
    pub state_table: String,
    /// Where the Paymos API credentials are, if the reverse check is on.
    pub api_secrets_id: Option<String>,
    /// The Paymos API base URL.
    pub api_base_url: String,
    /// The environment whose deliveries are applied.
    pub environment: Environment,
    /// The projects whose deliveries are applied.
    pub projects: Projects,
    /// The work queue ([`WORK_QUEUE_URL`]), on which a message that was not applied is given
    /// the visibility its failure asks; without it, the queue's visibility timeout applies.
    pub work_queue_url: Option<String>,
    /// [`REVERSE_CHECK_PATIENCE_MINUTES`]: 1 to 135, default 15.
    pub patience_minutes: u32,
}

impl FulfilConfig {
    /// Whether fulfil lists open invoices `open`: only with the reconciliation, the one reader
    /// of that list, which runs with the Paymos API key (listing costs a write unit or two an
    /// invoice otherwise). `exceptions --reindex` lists them when it is turned on later.
    #[must_use]
    pub fn keeps_open_list(&self) -> bool {
        self.api_secrets_id.is_some()
    }

    /// Reads the configuration through `lookup`.
    ///
    /// # Errors
    /// The first missing variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            deliveries_table: deliveries_table(&lookup)?,
            state_table: required(
                &lookup,
                STATE_TABLE,
                "the name of the state table (template.yaml: StateTable)",
            )?,
            api_secrets_id: lookup(PAYMOS_API_SECRETS_ID)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty()),
            api_base_url: lookup(PAYMOS_API_BASE_URL)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "https://api.paymos.io".to_owned()),
            environment: environment(&lookup)?,
            projects: projects(&lookup, environment(&lookup)?)?,
            work_queue_url: lookup(WORK_QUEUE_URL)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty()),
            patience_minutes: patience_minutes(&lookup)?,
        })
    }
}

/// [`REVERSE_CHECK_PATIENCE_MINUTES`]: 1 to [`MAX_PATIENCE_MINUTES`] minutes (the work queue's
/// last receive), by default as long as the official plugins wait before they re-read an open
/// invoice.
fn patience_minutes(lookup: &impl Fn(&str) -> Option<String>) -> Result<u32, ConfigError> {
    use paymos_inbox_core::roads::confirm::{DEFAULT_PATIENCE_MINUTES, MAX_PATIENCE_MINUTES};
    let minutes = number(
        lookup,
        REVERSE_CHECK_PATIENCE_MINUTES,
        DEFAULT_PATIENCE_MINUTES,
    )?;
    if !(1..=MAX_PATIENCE_MINUTES).contains(&minutes) {
        return Err(ConfigError::Invalid {
            var: REVERSE_CHECK_PATIENCE_MINUTES,
            reason: format!(
                "1 to {MAX_PATIENCE_MINUTES} minutes (the work queue's last receive comes some 135 minutes after the first), got {minutes}"
            ),
        });
    }
    Ok(minutes)
}

/// Reads [`PAYMOS_PROJECT_IDS`]: one or several `prj_…` ids (none on a sandbox stack: every
/// project).
///
/// # Errors
/// [`ConfigError::Invalid`] for an id that is no `prj_…` id, or none on a live stack.
pub fn projects(
    lookup: &impl Fn(&str) -> Option<String>,
    environment: Environment,
) -> Result<Projects, ConfigError> {
    let projects = Projects::parse(&lookup(PAYMOS_PROJECT_IDS).unwrap_or_default());
    if let Some(bad) = projects
        .ids()
        .iter()
        .find(|p| !p.starts_with("prj_") || p.contains('#') || p.len() > 64)
    {
        return Err(ConfigError::Invalid {
            var: PAYMOS_PROJECT_IDS,
            reason: format!(
                "{bad:?} is not a Paymos project id like prj_8f2a (comma-separated, the first the home project)"
            ),
        });
    }
    if projects.ids().is_empty() && !environment.is_test() {
        return Err(ConfigError::Invalid {
            var: PAYMOS_PROJECT_IDS,
            reason: "a live stack applies only its own projects: set PaymosProjectIds to the project ids of this stack (Paymos dashboard, Projects)".into(),
        });
    }
    Ok(projects)
}

/// Reads [`PAYMOS_ENVIRONMENT`]: `live` (default) or `sandbox`/`test`.
///
/// # Errors
/// [`ConfigError::Invalid`] for any other value.
pub fn environment(lookup: &impl Fn(&str) -> Option<String>) -> Result<Environment, ConfigError> {
    match lookup(PAYMOS_ENVIRONMENT)
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
    {
        None => Ok(Environment::Live),
        Some(v) => match v.as_str() {
            "live" => Ok(Environment::Live),
            "sandbox" | "test" => Ok(Environment::Test),
            _ => Err(ConfigError::Invalid {
                var: PAYMOS_ENVIRONMENT,
                reason: format!("expected live or sandbox, got {v:?}"),
            }),
        },
    }
}

/// What the sweep function needs.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The ledger table.
    pub deliveries_table: String,
    /// The state table (what waits for a person, as `exceptions` reads it).
    pub state_table: String,
    /// The work queue.
    pub work_queue_url: String,
    /// Age in seconds after which a `received` record is sent again.
    pub sweep_after_secs: u64,
    /// The lease the sweep takes while it sends (as ingest's).
    pub lease_secs: u64,
}

impl SweepConfig {
    /// Reads the configuration through `lookup`.
    ///
    /// # Errors
    /// The first missing or invalid variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            deliveries_table: deliveries_table(&lookup)?,
            state_table: required(
                &lookup,
                STATE_TABLE,
                "the name of the state table (template.yaml: StateTable)",
            )?,
            work_queue_url: work_queue_url(&lookup)?,
            sweep_after_secs: number(
                &lookup,
                SWEEP_AFTER_SECS,
                paymos_inbox_core::roads::sweep::DEFAULT_SWEEP_AFTER_SECS,
            )?,
            lease_secs: number(&lookup, INGEST_LEASE_SECS, DEFAULT_LEASE_SECS)?,
        })
    }
}

/// What the scheduled reconciliation needs.
#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    /// The ledger table.
    pub deliveries_table: String,
    /// The state table.
    pub state_table: String,
    /// The Paymos API credentials.
    pub api_secrets_id: String,
    /// The Paymos API base URL.
    pub api_base_url: String,
    /// Hours back from now.
    pub window_hours: u64,
    /// Whether to fulfil what is missing.
    pub apply: bool,
    /// The environment the stack applies (the API key must read its project).
    pub environment: Environment,
    /// The projects the stack applies.
    pub projects: Projects,
}

impl ReconcileConfig {
    /// Reads the configuration through `lookup`.
    ///
    /// # Errors
    /// The first missing or invalid variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let fulfil = FulfilConfig::from_lookup(&lookup)?;
        Ok(Self {
            deliveries_table: fulfil.deliveries_table,
            state_table: fulfil.state_table,
            api_secrets_id: required(
                &lookup,
                PAYMOS_API_SECRETS_ID,
                "the Secrets Manager secret with the Paymos API key and secret",
            )?,
            api_base_url: fulfil.api_base_url,
            window_hours: number(&lookup, RECONCILE_WINDOW_HOURS, 48)?,
            environment: fulfil.environment,
            projects: fulfil.projects,
            apply: match lookup(RECONCILE_APPLY).as_deref().map(str::trim) {
                None | Some("" | "false") => false,
                Some("true") => true,
                Some(other) => {
                    return Err(ConfigError::Invalid {
                        var: RECONCILE_APPLY,
                        reason: format!("expected true or false, got {other:?}"),
                    });
                }
            },
        })
    }
}

/// Environment variable: the merchant's endpoint that receives the signed hand-off.
pub const WEBHOOK_TARGET_URL: &str = "WEBHOOK_TARGET_URL";
/// Environment variable: the Secrets Manager secret with the outbound signing key.
pub const WEBHOOK_SIGNING_SECRET_ID: &str = "WEBHOOK_SIGNING_SECRET_ID";

/// The deliverer's own queue, whose messages it makes visible again on the retry schedule.
pub const WEBHOOK_QUEUE_URL: &str = "WEBHOOK_QUEUE_URL";

/// Its dead-letter queue, where an event the endpoint answers `410 Gone` is parked at once.
pub const WEBHOOK_DLQ_URL: &str = "WEBHOOK_DLQ_URL";
/// Environment variable: hours the destination may fail before the deliverer pauses it
/// (template.yaml: `WebhookPauseAfterHours`; empty or 0: never).
pub const WEBHOOK_PAUSE_AFTER_HOURS: &str = "WEBHOOK_PAUSE_AFTER_HOURS";
/// Environment variable: the delivery queue's ARN, by which the deliverer finds its own event
/// source mapping to pause it.
pub const WEBHOOK_QUEUE_ARN: &str = "WEBHOOK_QUEUE_ARN";

/// What the deliverer function needs.
#[derive(Debug, Clone)]
pub struct DeliverConfig {
    /// The merchant's endpoint.
    pub url: String,
    /// The signing secret's id (name or ARN).
    pub signing_secret_id: String,
    /// The delivery queue (`WebhookDeliveryQueue`): a failed message's next delay is set there.
    pub queue_url: String,
    /// Its dead-letter queue (`WebhookTargetDeadLetterQueue`).
    pub dead_letter_url: String,
    /// The automatic pause, when set.
    pub pause: Option<PauseConfig>,
}

/// What the deliverer needs to pause a failing destination.
#[derive(Debug, Clone)]
pub struct PauseConfig {
    /// After how long of failing.
    pub after: paymos_inbox_core::roads::endpoint::PauseAfter,
    /// The delivery queue's ARN (its event source mapping is the switch).
    pub queue_arn: String,
    /// The bus the `Endpoint Paused` fact goes to.
    pub event_bus: String,
    /// The environment the stack applies (the fact says it).
    pub environment: Environment,
}

impl PauseConfig {
    /// [`WEBHOOK_PAUSE_AFTER_HOURS`] and, when it is above 0, what a pause needs.
    ///
    /// # Errors
    /// Not a number, or a variable a pause needs missing.
    fn from_lookup(lookup: &impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let hours: Option<u64> = optional_number(lookup, WEBHOOK_PAUSE_AFTER_HOURS)?;
        let Some(hours) = hours.filter(|h| *h > 0) else {
            return Ok(None);
        };
        Ok(Some(Self {
            after: paymos_inbox_core::roads::endpoint::PauseAfter(hours * 3600),
            queue_arn: required(
                lookup,
                WEBHOOK_QUEUE_ARN,
                "the delivery queue's ARN (template.yaml: WebhookDeliveryQueue)",
            )?,
            event_bus: required(
                lookup,
                EVENT_BUS_NAME,
                "the bus of the Endpoint Paused fact (template.yaml: EventBus)",
            )?,
            environment: environment(lookup)?,
        }))
    }
}

impl DeliverConfig {
    /// Reads the configuration through `lookup`.
    ///
    /// # Errors
    /// The first missing or invalid variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let url = required(
            &lookup,
            WEBHOOK_TARGET_URL,
            "the merchant's HTTPS endpoint (template.yaml: WebhookTargetUrl)",
        )?;
        if let Err(reason) = paymos_inbox_aws::webhook::endpoint(&url) {
            return Err(ConfigError::Invalid {
                var: WEBHOOK_TARGET_URL,
                reason,
            });
        }
        Ok(Self {
            url,
            signing_secret_id: required(
                &lookup,
                WEBHOOK_SIGNING_SECRET_ID,
                "the secret with the outbound signing key (template.yaml: WebhookSigningSecret)",
            )?,
            queue_url: required(
                &lookup,
                WEBHOOK_QUEUE_URL,
                "the delivery queue's URL (template.yaml: WebhookDeliveryQueue)",
            )?,
            dead_letter_url: required(
                &lookup,
                WEBHOOK_DLQ_URL,
                "the delivery queue's dead-letter queue (template.yaml: WebhookTargetDeadLetterQueue)",
            )?,
            pause: PauseConfig::from_lookup(&lookup)?,
        })
    }
}

/// What the publisher function needs.
#[derive(Debug, Clone)]
pub struct PublishConfig {
    /// The bus.
    pub event_bus: String,
    /// The environment the stack applies (every detail says it).
    pub environment: Environment,
    /// The projects the stack applies (every detail names its project by them).
    pub projects: Projects,
}

impl PublishConfig {
    /// Reads the configuration through `lookup`.
    ///
    /// # Errors
    /// The first missing or invalid variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            event_bus: required(
                &lookup,
                EVENT_BUS_NAME,
                "the EventBridge bus to publish to (template.yaml: EventBus)",
            )?,
            environment: environment(&lookup)?,
            projects: Projects::parse(&lookup(PAYMOS_PROJECT_IDS).unwrap_or_default()),
        })
    }
}

/// [`DELIVERIES_TABLE`], which every function reads.
fn deliveries_table(lookup: &impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    required(
        lookup,
        DELIVERIES_TABLE,
        "the name of the deliveries table (template.yaml: DeliveriesTable)",
    )
}

/// [`WORK_QUEUE_URL`], which ingest and the sweep read.
fn work_queue_url(lookup: &impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    required(
        lookup,
        WORK_QUEUE_URL,
        "the URL of the work queue (template.yaml: WorkQueue)",
    )
}

fn required(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    hint: &'static str,
) -> Result<String, ConfigError> {
    lookup(var)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::Missing { var, hint })
}

fn optional_number<T: FromStr>(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<Option<T>, ConfigError> {
    match lookup(var)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
    {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| ConfigError::Invalid {
            var,
            reason: format!("expected a whole number, got {v:?}"),
        }),
    }
}

fn number<T: FromStr>(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: T,
) -> Result<T, ConfigError> {
    Ok(optional_number(lookup, var)?.unwrap_or(default))
}

/// Parses the webhook secrets as kept in Secrets Manager (or given to the CLI): see
/// [`parse_keys`].
///
/// # Errors
/// [`ConfigError::Invalid`] for `var`, naming the label at fault but never a secret.
pub fn parse_secrets(
    text: &str,
    var: &'static str,
    require_environment: bool,
) -> Result<Vec<SigningKey>, ConfigError> {
    parse_keys(text, require_environment).map_err(|e| ConfigError::Invalid {
        var,
        reason: e.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use paymos_inbox_core::wire::signature::Environment;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn ingest_config_names_what_is_missing() {
        let err = IngestConfig::from_lookup(lookup(&[])).unwrap_err();
        assert!(
            err.to_string().starts_with("DELIVERIES_TABLE is not set"),
            "{err}"
        );
        let err = IngestConfig::from_lookup(lookup(&[
            (DELIVERIES_TABLE, "d"),
            (WORK_QUEUE_URL, "q"),
            (WEBHOOK_SECRETS_ID, "s"),
            (MAX_BODY_BYTES, "lots"),
        ]))
        .unwrap_err();
        assert!(
            err.to_string().contains("MAX_BODY_BYTES is invalid"),
            "{err}"
        );
        let ok = IngestConfig::from_lookup(lookup(&[
            (DELIVERIES_TABLE, "d"),
            (WORK_QUEUE_URL, "q"),
            (WEBHOOK_SECRETS_ID, "s"),
        ]))
        .unwrap();
        assert_eq!(ok.tolerance_secs, 300);
        assert_eq!(ok.retention_days, None);
        assert_eq!(ok.body_retention_days, 90, "the documented default");
    }

    #[test]
    fn body_retention_is_a_whole_number_of_at_least_seven_days() {
        let with = |days: &'static str| {
            IngestConfig::from_lookup(lookup(&[
                (DELIVERIES_TABLE, "d"),
                (WORK_QUEUE_URL, "q"),
                (WEBHOOK_SECRETS_ID, "s"),
                (BODY_RETENTION_DAYS, days),
            ]))
        };
        assert_eq!(with("30").unwrap().body_retention_days, 30);
        assert_eq!(
            with(" ").unwrap().body_retention_days,
            90,
            "empty: the default"
        );
        let err = with("6").unwrap_err().to_string();
        assert!(
            err.contains("BODY_RETENTION_DAYS is invalid: at least 7 days"),
            "{err}"
        );
        let err = with("a year").unwrap_err().to_string();
        assert!(
            err.contains("BODY_RETENTION_DAYS is invalid: expected a whole number"),
            "{err}"
        );
    }

    // The reverse check's patience is a setting, 1 to 135 minutes (the work
    // queue's last receive), 15 by default: as long as the official plugins wait.
    #[test]
    fn the_reverse_checks_patience_is_one_to_135_minutes_by_default_15() {
        let with = |minutes: &'static str| {
            FulfilConfig::from_lookup(lookup(&[
                (DELIVERIES_TABLE, "d"),
                (STATE_TABLE, "s"),
                (PAYMOS_ENVIRONMENT, "sandbox"),
                (REVERSE_CHECK_PATIENCE_MINUTES, minutes),
            ]))
        };
        assert_eq!(with("").unwrap().patience_minutes, 15);
        assert_eq!(with("135").unwrap().patience_minutes, 135);
        for bad in ["0", "136", "soon"] {
            let err = with(bad).unwrap_err().to_string();
            assert!(
                err.contains("REVERSE_CHECK_PATIENCE_MINUTES is invalid"),
                "{bad}: {err}"
            );
        }
    }

    // A record retention shorter than a week would take a record (and what
    // waits on it) before the sweep could keep it.
    #[test]
    fn delivery_retention_is_empty_or_at_least_seven_days() {
        let with = |days: &'static str| {
            IngestConfig::from_lookup(lookup(&[
                (DELIVERIES_TABLE, "d"),
                (WORK_QUEUE_URL, "q"),
                (WEBHOOK_SECRETS_ID, "s"),
                (DELIVERY_RETENTION_DAYS, days),
            ]))
        };
        assert_eq!(with("").unwrap().retention_days, None);
        assert_eq!(with("7").unwrap().retention_days, Some(7));
        assert_eq!(with("365").unwrap().retention_days, Some(365));
        for short in ["0", "1", "6"] {
            let err = with(short).unwrap_err().to_string();
            assert!(
                err.contains("DELIVERY_RETENTION_DAYS is invalid: empty or at least 7 days"),
                "{short}: {err}"
            );
        }
    }

    #[test]
    fn secrets_parse_in_every_documented_form() {
        let json = parse_secrets(
            r#"{"live":"whsec_live_a","test":"whsec_test_b"}"#,
            "X",
            true,
        )
        .unwrap();
        assert_eq!(json.len(), 2);
        let list = parse_secrets(
            "live=whsec_live_a, live-previous=whsec_live_old\ntest=whsec_test_b",
            "X",
            true,
        )
        .unwrap();
        assert_eq!(list[1].label(), "live-previous");
        assert_eq!(list[1].environment(), Some(Environment::Live));
        let bare = parse_secrets("whsec_test_b", "X", true).unwrap();
        assert_eq!(
            (bare[0].label(), bare[0].environment()),
            ("test", Some(Environment::Test))
        );
    }

    #[test]
    fn secret_errors_never_show_the_secret() {
        for text in [
            "primary=whsec_hidden_1",
            "a=whsec_hidden_1,a=whsec_hidden_2",
            "",
            r#"{"live": 5}"#,
        ] {
            let err = parse_secrets(text, "X", true).unwrap_err().to_string();
            assert!(!err.contains("hidden"), "{err}");
        }
        assert!(parse_secrets("primary=whsec_x", "X", false).is_ok());
    }

    #[test]
    fn a_label_that_contradicts_its_secrets_prefix_stops_the_start() {
        for text in [
            "live=whsec_test_hidden",
            r#"{"test":"whsec_live_hidden"}"#,
            "sandbox=whsec_live_hidden",
        ] {
            let err = parse_secrets(text, "X", true).unwrap_err().to_string();
            assert!(err.contains("environment"), "{err}");
            assert!(!err.contains("hidden"), "{err}");
        }
        assert!(parse_secrets("live-previous=whsec_live_a,test=whsec_test_b", "X", true).is_ok());
    }

    #[test]
    fn a_live_stack_names_its_projects_each_a_project_id() {
        let live = |ids: &str| projects(&lookup(&[(PAYMOS_PROJECT_IDS, ids)]), Environment::Live);
        assert_eq!(live("prj_a, prj_b").unwrap().ids(), ["prj_a", "prj_b"]);
        let none = live(" ").unwrap_err().to_string();
        assert!(none.contains("PaymosProjectIds"), "{none}");
        assert!(
            live("shop-1")
                .unwrap_err()
                .to_string()
                .contains("\"shop-1\"")
        );
        assert!(live("prj_a#b").is_err());
        // A sandbox stack naming none applies every project.
        let all = projects(&lookup(&[]), Environment::Test).unwrap();
        assert!(all.ids().is_empty() && all.applies(Some("prj_any")));
    }

    #[test]
    fn the_applied_environment_is_live_unless_sandbox_is_asked() {
        assert_eq!(environment(&lookup(&[])).unwrap(), Environment::Live);
        assert_eq!(
            environment(&lookup(&[(PAYMOS_ENVIRONMENT, "sandbox")])).unwrap(),
            Environment::Test
        );
        assert!(environment(&lookup(&[(PAYMOS_ENVIRONMENT, "prod")])).is_err());
    }

    // The check was a string prefix, so `http://127.0.0.1.evil.example/` passed.
    #[test]
    fn the_webhook_endpoint_is_https_or_a_loopback_host_by_its_parsed_host() {
        let config = |url: &str| {
            DeliverConfig::from_lookup(lookup(&[
                (WEBHOOK_TARGET_URL, url),
                ("WEBHOOK_SIGNING_SECRET_ID", "whsec"),
                (WEBHOOK_QUEUE_URL, "http://localhost/q"),
                (WEBHOOK_DLQ_URL, "http://localhost/dlq"),
            ]))
        };
        for good in [
            "https://shop.example/hooks",
            "https://127.0.0.1.evil.example/",
            "http://127.0.0.1:8080/hooks",
            "http://localhost:3000/hooks",
            "http://[::1]:9/",
        ] {
            assert!(config(good).is_ok(), "{good}: {:?}", config(good).err());
        }
        for bad in [
            "http://127.0.0.1.evil.example/",
            "http://shop.example/hooks",
            "http://localhost.evil.example/",
            "ftp://127.0.0.1/",
            "https://",
            "not a url",
        ] {
            let err = config(bad).unwrap_err().to_string();
            assert!(err.contains(WEBHOOK_TARGET_URL), "{bad}: {err}");
        }
    }
}
