//! The trace a payment carries from function to function: a W3C `traceparent`, parsed and
//! formatted by OpenTelemetry's own propagators, held for the task that handles one delivery so
//! the adapters put it where the next hop reads it: the work item's message attribute, the state
//! items a delivery changes (the stream's publisher reads it back), EventBridge's entry and the
//! hand-off's POST. EventBridge carries no attribute of ours outside the detail (whose schema
//! is the merchant's contract): the entry's X-Ray trace header does, and an SQS target receives
//! it as the `AWSTraceHeader` system attribute.

use std::collections::HashMap;
use std::future::Future;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_aws::trace::xray_propagator::{span_context_from_str, span_context_to_string};
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// Trace ids that begin with their start time, as X-Ray accepts them.
pub use opentelemetry_aws::trace::XrayIdGenerator;

/// The header, message attribute and item attribute that carry it.
pub const TRACEPARENT: &str = "traceparent";
/// X-Ray's trace header, as SQS names it on a message (Lambda's event lists it in `attributes`).
pub const AWS_TRACE_HEADER: &str = "AWSTraceHeader";

tokio::task_local! {
    static CARRIED: Option<String>;
}

/// Runs `work` carrying `traceparent`: what [`carried`] answers within it.
pub async fn carrying<F: Future>(traceparent: Option<String>, work: F) -> F::Output {
    CARRIED.scope(traceparent, work).await
}

/// The traceparent the current task carries, if any.
#[must_use]
pub fn carried() -> Option<String> {
    CARRIED.try_with(Clone::clone).ok().flatten()
}

/// The context a W3C `traceparent` names; `None` when it is not a valid one (a malformed
/// header is advisory: the hop starts a new trace).
#[must_use]
pub fn parse(traceparent: &str) -> Option<opentelemetry::Context> {
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// The W3C `traceparent` of `cx`'s span; `None` when it has no valid one.
#[must_use]
pub fn format(cx: &opentelemetry::Context) -> Option<String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// X-Ray's trace header of a `traceparent` (EventBridge's `TraceHeader`): the same trace and
/// parent, in X-Ray's spelling.
#[must_use]
pub fn to_xray(traceparent: &str) -> Option<String> {
    span_context_to_string(parse(traceparent)?.span().span_context())
}

/// The `traceparent` of X-Ray's trace header (an SQS message's `AWSTraceHeader`).
#[must_use]
pub fn from_xray(header: &str) -> Option<String> {
    let span = span_context_from_str(header).filter(opentelemetry::trace::SpanContext::is_valid)?;
    format(&opentelemetry::Context::new().with_remote_span_context(span))
}

#[cfg(test)]
mod tests {
    use super::*;

    const W3C: &str = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01";

    #[test]
    fn a_traceparent_crosses_x_rays_header_and_back_whole() {
        let xray = to_xray(W3C).expect("a valid traceparent");
        assert_eq!(
            xray,
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
        );
        assert_eq!(from_xray(&xray).as_deref(), Some(W3C));
    }

    #[test]
    fn a_malformed_traceparent_names_no_trace() {
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-53995c3f42cd8ad8-01",
            "00-5759e988bd862e3fe1be46a994272793-0000000000000000-01",
            "00-5759E988BD862E3FE1BE46A994272793-53995c3f42cd8ad8-01",
            "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01\u{1b}[2K",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
            assert!(to_xray(bad).is_none(), "{bad:?}");
        }
        assert!(from_xray("Root=nonsense").is_none());
    }

    #[tokio::test]
    async fn a_task_carries_its_traceparent_and_no_other_does() {
        assert_eq!(carried(), None);
        let inside = carrying(Some(W3C.into()), async { carried() }).await;
        assert_eq!(inside.as_deref(), Some(W3C));
        assert_eq!(carried(), None);
    }
}
