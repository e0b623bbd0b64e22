//! Logging and metrics set-up: flat JSON lines for Lambda (CloudWatch parses them; the fields of
//! the enclosing spans, such as the runtime's `requestId` and our `event_id`, are merged into
//! every line), readable lines for the CLI, and metrics as CloudWatch embedded metric format
//! (EMF) documents on stdout, flushed after each invocation, or carried by the line that says
//! what they count ([`counted`]: ingest's answer is one line, not a line and a document).
//!
//! Our own code never logs a body or a secret. The AWS SDK, hyper, rustls and the Lambda
//! runtime do at DEBUG/TRACE (wire bodies, raw events), so they are capped at INFO whatever level
//! the function runs at; only an explicit `RUST_LOG` (local debugging) lifts that.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Crates whose DEBUG/TRACE output contains request or response bodies.
const WIRE_LOGGERS: [&str; 14] = [
    "aws_smithy_runtime",
    "aws_smithy_runtime_api",
    "aws_smithy_http_client",
    "aws_sdk_dynamodb",
    "aws_sdk_sqs",
    "aws_sdk_secretsmanager",
    "aws_config",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "reqwest",
    "lambda_runtime",
    "lambda_http",
];

/// The filter for an application level (`info`, `debug`, `trace`, …): that level for our
/// code, at most INFO for the crates that log wire contents.
#[must_use]
pub fn filter_for(level: &str) -> EnvFilter {
    let mut filter =
        EnvFilter::try_new(level.to_ascii_lowercase()).unwrap_or_else(|_| EnvFilter::new("info"));
    for quiet in WIRE_LOGGERS {
        filter = filter.add_directive(format!("{quiet}=info").parse().expect("a valid directive"));
    }
    filter
}

/// The level our lines are written at: [`crate::config::LOG_LEVEL`] (the template's
/// `LogLevel`), else `AWS_LAMBDA_LOG_LEVEL` (set by Lambda's `ApplicationLogLevel`), else INFO.
pub fn level(lookup: impl Fn(&str) -> Option<String>) -> String {
    [crate::config::LOG_LEVEL, "AWS_LAMBDA_LOG_LEVEL"]
        .into_iter()
        .filter_map(&lookup)
        .map(|v| v.trim().to_owned())
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| "info".into())
}

fn filter() -> EnvFilter {
    EnvFilter::try_from_env("RUST_LOG")
        .unwrap_or_else(|_| filter_for(&level(|k| std::env::var(k).ok())))
}

/// One JSON object per line: `level`, `message`, the event's fields and those of every
/// enclosing span, all at the top level (a span's field names an invocation or a delivery, so
/// a line logged deep in an adapter still carries `requestId` and `event_id`); a [`COUNTED`]
/// field's EMF members are written at the top level too.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlatJson;

struct Fields<'m>(&'m mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

impl<S> FormatEvent<S, JsonFields> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut line = Map::new();
        // Lambda's JSON log format: an RFC 3339 `timestamp` and a `level` (TRACE … ERROR),
        // which ApplicationLogLevel filters on.
        line.insert("timestamp".into(), Value::from(now_rfc3339()));
        line.insert(
            "level".into(),
            Value::from(event.metadata().level().as_str()),
        );
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<JsonFields>>()
                    && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(fields)
                {
                    line.extend(map);
                }
            }
        }
        event.record(&mut Fields(&mut line));
        // The runtime's X-Ray trace header names a trace only when the request was sampled:
        // an unsampled one (nearly all of them) says nothing a reader can follow.
        if line
            .get(XRAY_TRACE_ID)
            .and_then(Value::as_str)
            .is_some_and(|header| header.contains("Sampled=0"))
        {
            line.remove(XRAY_TRACE_ID);
        }
        // A line that counts itself ([`counted`]): its EMF members at the top level.
        if let Some(Value::String(members)) = line.remove(COUNTED)
            && let Ok(Value::Object(members)) = serde_json::from_str::<Value>(&members)
        {
            line.extend(members);
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// The field Lambda's runtime gives its invocation span: the X-Ray trace header.
const XRAY_TRACE_ID: &str = "xrayTraceId";

/// Now, as RFC 3339 in UTC with milliseconds (`2026-11-30T12:00:00.123Z`).
fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    format!("{:.3}", now)
}

/// The level every EMF line carries: metrics survive any `ApplicationLogLevel` up to INFO
/// (the README's Operating it says to keep it there).
pub const METRICS_LEVEL: &str = "INFO";

/// Flat JSON logs on stdout, without ANSI colours, each with its timestamp and level.
/// With [`crate::trace::ENDPOINT`] set, our spans are exported there too, named after the
/// function (`AWS_LAMBDA_FUNCTION_NAME`).
pub fn init_json() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let service =
        std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "paymos-inbox".into());
    let spans = crate::trace::layer(
        &service,
        std::env::var(crate::trace::ENDPOINT).ok().as_deref(),
    );
    let (spans, refused) = match spans {
        Ok(spans) => (spans, None),
        Err(e) => (None, Some(e)),
    };
    let _ = tracing::subscriber::set_global_default(json_subscriber(std::io::stdout).with(spans));
    if let Some(e) = refused {
        tracing::warn!(error = %e, "spans are not exported");
    }
}

/// The subscriber [`init_json`] installs, writing to `writer` (tests capture it).
pub fn json_subscriber<W>(
    writer: W,
) -> impl Subscriber + for<'a> LookupSpan<'a> + Send + Sync + 'static
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .fmt_fields(JsonFields::new())
        .event_format(FlatJson)
        .with_writer(writer)
        .finish()
}

/// Metric names and dimensions: the template's alarms and dashboard name the same (a test
/// checks).
pub mod metric {
    /// The CloudWatch namespace of every metric.
    pub const NAMESPACE: &str = "PaymosInbox";
    /// The dimension every metric has: the stack's name.
    pub const STACK: &str = "Stack";
    /// The other dimension: an outcome or an error code (never an id or an amount).
    pub const OUTCOME: &str = "Outcome";
    /// Ingest answers, by `Outcome`: `new`, `duplicate`, or the error code.
    pub const INGEST_ANSWERS: &str = "IngestAnswers";
    /// Fulfil results, by `Outcome`: what `Applied` says, or `retry_unavailable`,
    /// `retry_not_paid_yet`, `poison`.
    pub const FULFIL_OUTCOMES: &str = "FulfilOutcomes";
    /// Milliseconds from a delivery's receipt to its processing.
    pub const DELIVERY_AGE: &str = "DeliveryAgeMs";
    /// Deposits credited.
    pub const DEPOSITS_CREDITED: &str = "DepositsCredited";
    /// Invocations that started a new execution environment.
    pub const COLD_STARTS: &str = "ColdStarts";
    /// Stranded deliveries the sweep sent again.
    pub const STRANDED_RESENT: &str = "StrandedResent";
    /// Age of the oldest delivery recorded but not processed, seen by the sweep.
    pub const OLDEST_PENDING: &str = "OldestPendingSeconds";
    /// How many things wait for a person, as `exceptions` lists them (dead letters aside),
    /// seen by the sweep: `PaymentsNeedReviewAlarm` stays in ALARM while it is above zero.
    pub const PAYMENTS_WAITING: &str = "PaymentsWaiting";
    /// What a scheduled reconciliation found, by `Outcome`: `missing`, `applied`, `double`,
    /// `duplicate_payment`, `unknown`, `paid_late`, `refunded`, `api_error`.
    pub const RECONCILE_FINDINGS: &str = "ReconcileFindings";
    /// Seconds since the end of the last scheduled reconciliation that read its whole window,
    /// as each run starts (about the schedule's interval when runs finish):
    /// `ReconcileBehindAlarm`.
    pub const RECONCILE_BEHIND: &str = "ReconcileBehindSeconds";
    /// A function that could not start because its configuration is wrong (a refused Paymos
    /// API key, a key of the other environment's project), by `Outcome`: the setting.
    pub const MISCONFIGURED: &str = "Misconfigured";
    /// Deliveries whose `event_id` is also recorded from another environment's secret (a
    /// sandbox delivery reusing a live id, or the reverse), and those refused 409
    /// `environment_conflict` because a record of another environment holds their key.
    pub const CROSS_ENVIRONMENT_IDS: &str = "CrossEnvironmentIds";
    /// Posts of the signed hand-off, by `Outcome`: the status class (`2xx`, `4xx`, `5xx`),
    /// `410` (parked at once), `refused_credential` (401/403), `misconfigured` (a redirect, not
    /// followed) or `no_answer`.
    pub const WEBHOOK_ATTEMPTS: &str = "WebhookAttempts";
    /// Milliseconds each post of the signed hand-off took, answered or not.
    pub const WEBHOOK_LATENCY: &str = "WebhookLatencyMs";
    /// The deliverer paused a destination that had failed for `WebhookPauseAfterHours`:
    /// `WebhookTargetPausedAlarm`.
    pub const WEBHOOK_PAUSES: &str = "WebhookPauses";
    /// The metrics `Monitoring=essential`'s alarms read: all an essential stack writes (a
    /// series is billed a month, and its bytes in every invocation's log). `IngestAnswers`
    /// only by the outcomes of [`ESSENTIAL_OUTCOMES`]; the others with full monitoring, whose
    /// dashboard and early-warning alarms read them.
    pub const ESSENTIAL: [&str; 6] = [
        INGEST_ANSWERS,
        MISCONFIGURED,
        OLDEST_PENDING,
        PAYMENTS_WAITING,
        RECONCILE_BEHIND,
        WEBHOOK_PAUSES,
    ];
    /// The outcomes `Monitoring=essential`'s alarms read by their `Outcome` dimension (a wrong
    /// or mislabelled secret, a misconfigured stack); an essential stack counts no other
    /// outcome. `Misconfigured` keeps its setting.
    pub const ESSENTIAL_OUTCOMES: [(&str, &str); 3] = [
        (INGEST_ANSWERS, "signature_mismatch"),
        (INGEST_ANSWERS, "environment_mismatch"),
        (INGEST_ANSWERS, "misconfigured"),
    ];
    /// Every metric name the code emits.
    pub const ALL: [&str; 15] = [
        RECONCILE_BEHIND,
        WEBHOOK_PAUSES,
        WEBHOOK_ATTEMPTS,
        WEBHOOK_LATENCY,
        CROSS_ENVIRONMENT_IDS,
        MISCONFIGURED,
        RECONCILE_FINDINGS,
        INGEST_ANSWERS,
        FULFIL_OUTCOMES,
        DELIVERY_AGE,
        DEPOSITS_CREDITED,
        COLD_STARTS,
        STRANDED_RESENT,
        OLDEST_PENDING,
        PAYMENTS_WAITING,
    ];
}

static METRICS: std::sync::OnceLock<&'static metrics_cloudwatch_embedded::Collector> =
    std::sync::OnceLock::new();
/// The `Stack` dimension and the `function` property, as [`init_metrics`] installed them.
static COUNTING: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
/// Whether every outcome keeps its `Outcome` dimension ([`crate::config::full_monitoring`]).
static FULL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether the monitoring [`init_metrics`] read is full (the default where it read none).
fn full() -> bool {
    FULL.get().copied().unwrap_or(true)
}

/// Whether `metric` counts `outcome`: always with `Monitoring=full` (the dashboard reads each),
/// else only what an essential alarm reads ([`metric::ESSENTIAL_OUTCOMES`]; `Misconfigured`
/// always).
#[must_use]
pub fn keeps_outcome(full: bool, metric: &str, outcome: &str) -> bool {
    full || metric == metric::MISCONFIGURED
        || metric::ESSENTIAL_OUTCOMES.contains(&(metric, outcome))
}

/// Whether this stack writes `metric` (one counted without an outcome, a gauge or a
/// histogram): every one with `Monitoring=full`, else those an essential alarm reads
/// ([`metric::ESSENTIAL`]).
#[must_use]
pub fn writes(metric: &str) -> bool {
    full() || metric::ESSENTIAL.contains(&metric)
}

/// Counts 1 of `metric` (a counter by `Outcome`) by `outcome`, where [`keeps_outcome`] says so
/// with the setting [`init_metrics`] read.
pub fn count_outcome(metric: &'static str, outcome: &str) {
    if keeps_outcome(full(), metric, outcome) {
        metrics::counter!(metric, metric::OUTCOME => outcome.to_owned()).increment(1);
    }
}
static WARM: AtomicBool = AtomicBool::new(false);

/// Installs the EMF recorder (once per process): every metric with the `Stack` dimension
/// ([`crate::config::METRICS_STACK`]), every document with the `function` property.
pub fn init_metrics(function: &str) {
    init_metrics_with(function, |k| std::env::var(k).ok());
}

/// [`init_metrics`] with the settings read through `lookup`.
pub fn init_metrics_with(function: &str, lookup: impl Fn(&str) -> Option<String>) {
    if METRICS.get().is_some() {
        return;
    }
    let _ = FULL.set(crate::config::full_monitoring(&lookup));
    let stack = crate::config::metrics_stack(&lookup);
    match metrics_cloudwatch_embedded::Builder::new()
        .cloudwatch_namespace(metric::NAMESPACE)
        .with_dimension(metric::STACK, stack.clone())
        .init()
    {
        Ok(collector) => {
            collector.set_property("function", function.to_owned());
            metrics::describe_histogram!(
                metric::DELIVERY_AGE,
                metrics::Unit::Milliseconds,
                "received to processed"
            );
            metrics::describe_gauge!(
                metric::OLDEST_PENDING,
                metrics::Unit::Seconds,
                "oldest delivery not processed"
            );
            let _ = METRICS.set(collector);
            let _ = COUNTING.set((stack, function.to_owned()));
        }
        Err(e) => tracing::warn!(error = %e, "metrics recorder not installed"),
    }
}

/// The field of a log line that carries its own count ([`counted`]).
pub const COUNTED: &str = "counted";

/// The EMF members (as a JSON object) that make one log line count 1 of `metric` by
/// `Outcome`, with the `Stack` dimension and the `function` property the flushed documents
/// have: logged as the [`COUNTED`] field, [`FlatJson`] writes them at the line's top level, so
/// the line that says a delivery's answer also counts it and the answer is said once. `None`
/// when the EMF recorder is not installed (the CLI, unit tests): count with [`count_outcome`]
/// then; `None` too when this stack does not count `outcome` ([`keeps_outcome`]).
#[must_use]
pub fn counted(metric: &str, outcome: &str) -> Option<String> {
    let (stack, function) = COUNTING.get()?;
    if !keeps_outcome(full(), metric, outcome) {
        return None;
    }
    let at_ms = jiff::Timestamp::now().as_millisecond();
    let mut members = Map::new();
    members.insert(
        "_aws".into(),
        serde_json::json!({"Timestamp": at_ms, "CloudWatchMetrics": [{
            "Namespace": metric::NAMESPACE,
            "Dimensions": [[metric::STACK, metric::OUTCOME]],
            "Metrics": [{"Name": metric}]}]}),
    );
    members.insert(metric.to_owned(), Value::from(1));
    members.insert(metric::OUTCOME.to_owned(), Value::from(outcome));
    members.insert(metric::STACK.to_owned(), Value::from(stack.as_str()));
    members.insert("function".into(), Value::from(function.as_str()));
    Some(Value::Object(members).to_string())
}

/// Marks the start of an invocation: the first one of the process counts a cold start.
pub fn invocation_started() {
    if !WARM.swap(true, Ordering::SeqCst) && writes(metric::COLD_STARTS) {
        metrics::counter!(metric::COLD_STARTS).increment(1);
    }
}

/// Writes the metrics gathered since the last flush to stdout as EMF documents (one line per
/// dimension set), as Lambda's log pipeline expects them.
/// The invocation's spans are handed to their exporter too ([`crate::trace::flush`]).
pub fn flush_metrics() {
    crate::trace::flush();
    flush_metrics_to(std::io::stdout().lock());
}

/// [`flush_metrics`] into `writer`: each EMF document on its own line, with the `timestamp`
/// and `level` ([`METRICS_LEVEL`]) Lambda's JSON log format filters on.
pub fn flush_metrics_to(mut writer: impl std::io::Write) {
    let Some(collector) = METRICS.get() else {
        return;
    };
    let mut documents = Vec::new();
    if let Err(e) = collector.flush(&mut documents) {
        tracing::warn!(error = %e, "could not write the metrics");
        return;
    }
    for line in String::from_utf8_lossy(&documents).lines() {
        let out = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(mut document)) => {
                document.insert("timestamp".into(), Value::from(now_rfc3339()));
                document.insert("level".into(), Value::from(METRICS_LEVEL));
                Value::Object(document).to_string()
            }
            _ => line.to_owned(),
        };
        if let Err(e) = writeln!(writer, "{out}") {
            tracing::warn!(error = %e, "could not write the metrics");
            return;
        }
    }
}

/// Records that the function cannot start because `setting` is wrong: logged, counted (the
/// misconfiguration alarm watches it) and flushed at once, since the process then exits.
pub fn misconfigured_at_start(setting: &'static str, error: &dyn std::fmt::Display) {
    tracing::error!(setting, error = %error, "cannot start: the configuration is wrong");
    metrics::counter!(metric::MISCONFIGURED, metric::OUTCOME => setting).increment(1);
    flush_metrics();
}

/// Human-readable logs on stderr, for the CLI.
pub fn init_human() {
    use std::io::IsTerminal as _;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        ))
        .try_init();
}

/// Whether human logs are coloured: only on a terminal, and never under `NO_COLOR`
/// (<https://no-color.org>), so no escape code lands in a file or a pipe.
#[must_use]
pub fn colour(terminal: bool, no_colour: bool) -> bool {
    terminal && !no_colour
}

#[cfg(test)]
mod colour_tests {
    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(super::colour(true, false));
        assert!(!super::colour(false, false), "a pipe or a file");
        assert!(!super::colour(true, true), "NO_COLOR");
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The lines written at `level`, by our code, by a wire logger and by Lambda's runtime.
    fn written_at(level: &str) -> String {
        written(level, || {
            tracing::info!(outcome = "new", "delivery acknowledged");
            tracing::warn!(code = "invalid_signature", "delivery refused");
            tracing::debug!(target: "aws_smithy_runtime", "a wire body");
        })
    }

    /// The lines `log` writes at `level`, as the functions write them.
    fn written(level: &str, log: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter_for(level))
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
    }

    // Ingest's answer is said once: the line that says it carries its count, its EMF
    // members at the line's top level beside the delivery's fields.
    #[test]
    fn a_line_that_counts_itself_is_one_flat_emf_document() {
        let members = r#"{"_aws":{"CloudWatchMetrics":[]},"IngestAnswers":1,"Outcome":"new"}"#;
        let text = written("INFO", || {
            tracing::info!(
                counted = members,
                event_id = "evt_1",
                "delivery acknowledged"
            );
            tracing::info!(
                counted = None::<&str>,
                event_id = "evt_2",
                "not counted here"
            );
        });
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0]["_aws"].is_object(), "{text}");
        assert_eq!(lines[0][metric::INGEST_ANSWERS], 1, "{text}");
        assert_eq!(lines[0]["event_id"], "evt_1", "{text}");
        assert!(lines[0].get(COUNTED).is_none(), "{text}");
        assert!(lines[1].get("_aws").is_none() && lines[1].get(COUNTED).is_none());
    }

    // A line names the X-Ray trace of its invocation only when there is one: an unsampled
    // invocation's header names none, and would cost some 115 bytes on every line.
    #[test]
    fn a_line_names_the_xray_trace_only_of_a_sampled_invocation() {
        let text = written("INFO", || {
            for sampled in [0, 1] {
                let header = format!(
                    "Root=1-674d9a3f-{sampled:024};Parent=53995c3f42cd8ad8;Sampled={sampled}"
                );
                let span = tracing::info_span!("Lambda runtime invoke", xrayTraceId = %header);
                span.in_scope(|| tracing::info!(event_id = "evt_1", "delivery applied"));
            }
        });
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].get(XRAY_TRACE_ID).is_none(), "{text}");
        assert!(
            lines[1][XRAY_TRACE_ID]
                .as_str()
                .is_some_and(|h| h.ends_with("Sampled=1")),
            "{text}"
        );
        assert!(lines.iter().all(|l| l["event_id"] == "evt_1"), "{text}");
    }

    #[test]
    fn the_stacks_log_level_wins_over_lambdas_and_info_is_the_default() {
        fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |k| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        }
        let lambda = "AWS_LAMBDA_LOG_LEVEL";
        let ours = crate::config::LOG_LEVEL;
        assert_eq!(level(env(&[(ours, "WARN"), (lambda, "INFO")])), "WARN");
        assert_eq!(level(env(&[(ours, " "), (lambda, "DEBUG")])), "DEBUG");
        assert_eq!(level(env(&[])), "info");
    }

    // A stack that keeps only what needs a person pays for the warnings' lines alone.
    #[test]
    fn at_warn_the_per_delivery_line_goes_and_refusals_stay() {
        let info = written_at("INFO");
        assert!(info.contains("delivery acknowledged"), "{info}");
        assert!(info.contains("delivery refused"), "{info}");
        let warn = written_at("WARN");
        assert!(!warn.contains("delivery acknowledged"), "{warn}");
        assert!(warn.contains("delivery refused"), "{warn}");
        // The wire loggers stay at INFO at most, whatever the level.
        assert!(!written_at("TRACE").contains("a wire body"));
    }
}
