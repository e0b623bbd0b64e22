//! One trace per payment: each function's span continues the trace its input carries (Paymos'
//! `traceparent` header at ingest, the work item's message attribute at fulfil, the state
//! item's at the publisher, the SQS message's `AWSTraceHeader` at the hand-off) and names the
//! trace its output carries on ([`hop`]; the adapters put it there:
//! [`paymos_inbox_aws::trace`]). Spans are exported over OTLP (HTTP/protobuf) only when an
//! endpoint is set ([`ENDPOINT`]: the ADOT layer's collector on localhost, which sends them to
//! X-Ray, or any collector); with none, there is no exporter and no span is recorded: a hop
//! passes on the valid `traceparent` it received, and starts none.

use std::future::Future;
use std::sync::OnceLock;

use aws_lambda_events::sqs::SqsMessage;
use tracing::Instrument as _;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use paymos_inbox_aws::trace::{AWS_TRACE_HEADER, carrying, format, from_xray, parse};

/// The setting naming the OTLP endpoint (OpenTelemetry's standard variable; spans go to its
/// `/v1/traces`). Unset or empty: tracing export is off.
pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The layer that exports our spans (`paymos_inbox…` targets, INFO and above, the local
/// stand-ins' aside) to `endpoint`,
/// named `service`; `None` (no exporter, nothing recorded) when `endpoint` is unset or empty.
/// Trace ids carry their start time, as X-Ray asks. Installed once per process.
///
/// # Errors
/// When the exporter cannot be built (an endpoint that is not a URL), in words.
pub fn layer<S>(service: &str, endpoint: Option<&str>) -> Result<Option<impl Layer<S>>, String>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(endpoint) = endpoint.map(str::trim).filter(|e| !e.is_empty()) else {
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .build()
        .map_err(|e| format!("{ENDPOINT}: {e}"))?;
    let provider = PROVIDER.get_or_init(|| {
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_id_generator(paymos_inbox_aws::trace::XrayIdGenerator::default())
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service.to_owned())
                    .build(),
            )
            .build()
    });
    // Our code's spans; not the local stand-ins' (`dev`'s invocation around every poll).
    let ours = tracing_subscriber::filter::Targets::new()
        .with_target("paymos_inbox", tracing::Level::INFO)
        .with_target(
            "paymos_inbox_local",
            tracing::level_filters::LevelFilter::OFF,
        );
    Ok(Some(
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("paymos-inbox"))
            .with_filter(ours),
    ))
}

/// Whether spans are exported (an endpoint is set).
#[must_use]
pub fn exporting() -> bool {
    PROVIDER.get().is_some()
}

/// Hands the spans ended so far to the exporter and waits for it: after each invocation, as
/// Lambda may freeze the process once it has answered. Nothing when export is off.
pub fn flush() {
    if let Some(provider) = PROVIDER.get()
        && let Err(e) = provider.force_flush()
    {
        tracing::warn!(error = %e, "could not export the spans");
    }
}

/// Continues in `span` the trace that `incoming` (a W3C `traceparent`) names, and returns the
/// `traceparent` to carry on: `span`'s own when spans are exported (a new trace when `incoming`
/// is absent or malformed), else `incoming` itself when valid. A malformed one is dropped,
/// never logged. Call it before `span` is first entered.
pub fn hop(span: &tracing::Span, incoming: Option<&str>) -> Option<String> {
    let parent = incoming.and_then(parse);
    if exporting() {
        if let Some(parent) = &parent {
            let _ = span.set_parent(parent.clone());
        }
        // A span the level turned off records nothing: the trace passes through it.
        if let Some(own) = format(&span.context()) {
            return Some(own);
        }
    }
    parent.as_ref().and_then(format)
}

/// Sets OpenTelemetry attributes on `span` (none when export is off): what a trace is
/// searched by, not written to the log lines.
pub fn attributes(span: &tracing::Span, attributes: &[(&'static str, Option<&str>)]) {
    if !exporting() {
        return;
    }
    for (key, value) in attributes {
        if let Some(value) = value {
            span.set_attribute(*key, (*value).to_owned());
        }
    }
}

/// Runs `post`, the hand-off of `message` to the merchant, in a span continuing the trace of
/// its `AWSTraceHeader` (the trace header EventBridge hands its SQS target): the POST carries
/// that span's `traceparent`, and the span the event's `event_id`, resource and project.
pub async fn handing_off<F: Future>(message: &SqsMessage, post: F) -> F::Output {
    let incoming = message
        .attributes
        .get(AWS_TRACE_HEADER)
        .and_then(|header| from_xray(header));
    let span = tracing::info_span!("hand-off");
    let traceparent = hop(&span, incoming.as_deref());
    if exporting() {
        let event: serde_json::Value = message
            .body
            .as_deref()
            .and_then(|body| serde_json::from_str(body).ok())
            .unwrap_or_default();
        let detail = |name: &str| event["detail"][name].as_str();
        let resource = ["invoice_id", "withdrawal_id", "deposit_id"]
            .into_iter()
            .find_map(detail);
        attributes(
            &span,
            &[
                ("event_id", detail("event_id")),
                ("resource_id", resource),
                ("project", detail("project_id")),
            ],
        );
    }
    carrying(traceparent, post).instrument(span).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_export_a_hop_passes_a_valid_traceparent_on_and_starts_none() {
        let valid = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01";
        let span = tracing::info_span!("delivery");
        assert_eq!(hop(&span, Some(valid)).as_deref(), Some(valid));
        assert_eq!(hop(&span, Some("00-nonsense-01")), None);
        assert_eq!(hop(&span, None), None);
    }
}
