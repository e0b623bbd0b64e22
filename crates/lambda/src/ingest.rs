//! Function URL (payload 2.0) → [`Ingest`] → HTTP status. Header names arrive lower-cased and a
//! base64 body arrives already decoded to its exact bytes by `lambda_http`.

use lambda_http::http::{HeaderMap, StatusCode, header};
use lambda_http::{Body, Request, Response};
use serde_json::json;
use tracing::Instrument;

use paymos_inbox_aws::trace::{TRACEPARENT, carrying};

use paymos_inbox_core::roads::ingest::{
    DeliveryLedger, Inbound, Ingest, IngestError, Ingested, KeySource, Receipt, WorkQueue,
};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-webhook-signature";
/// The (unsigned) event id header.
pub const WEBHOOK_ID_HEADER: &str = "x-webhook-id";

/// Handles one function-URL request at `now_ms` and always answers (errors become statuses).
pub async fn respond<L: DeliveryLedger, Q: WorkQueue>(
    ingest: &Ingest<L, Q>,
    request: &Request,
    now_ms: u64,
) -> Response<Body> {
    let inbound = inbound(request);
    let (span, traceparent) = delivery_span(&inbound, request.headers());
    async {
        let outcome = carrying(traceparent, ingest.handle(&inbound, now_ms)).await;
        answer(&inbound, outcome)
    }
    .instrument(span)
    .await
}

/// The span every log line of one request carries: `event_id` from `X-Webhook-Id` when it looks
/// like one (so refusals of unreadable bodies still name the event), else `unknown`; the
/// acknowledgement line names the verified one. With it, the trace the work item carries on:
/// Paymos' `traceparent`, continued ([`crate::trace::hop`]).
fn delivery_span(inbound: &Inbound<'_>, headers: &HeaderMap) -> (tracing::Span, Option<String>) {
    let claimed = inbound
        .webhook_id
        .map(str::trim)
        .filter(|id| {
            !id.is_empty()
                && id.len() <= paymos_inbox_core::wire::envelope::MAX_ID_LEN
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        .unwrap_or("unknown");
    let span = tracing::info_span!("delivery", event_id = claimed);
    let traceparent = crate::trace::hop(&span, header_str(headers, TRACEPARENT));
    (span, traceparent)
}

/// [`respond`], re-reading the secrets from `keys` when a signature matches none of them (at
/// most once a minute), so a rotation reaches a warm instance.
pub async fn respond_with_keys<L: DeliveryLedger, Q: WorkQueue, K: KeySource>(
    ingest: &Ingest<L, Q>,
    request: &Request,
    now_ms: u64,
    keys: &K,
) -> Response<Body> {
    let inbound = inbound(request);
    let (span, traceparent) = delivery_span(&inbound, request.headers());
    async {
        let outcome = carrying(traceparent, ingest.handle_with_keys(&inbound, now_ms, keys)).await;
        answer(&inbound, outcome)
    }
    .instrument(span)
    .await
}

fn inbound(request: &Request) -> Inbound<'_> {
    let body: &[u8] = match request.body() {
        Body::Empty => &[],
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => &[],
    };
    Inbound {
        method: request.method().as_str(),
        signature: header_str(request.headers(), SIGNATURE_HEADER),
        webhook_id: header_str(request.headers(), WEBHOOK_ID_HEADER),
        body,
    }
}

/// A header's value, or `Some("")` when present but not visible ASCII (then malformed/mismatched).
fn header_str<'r>(headers: &'r HeaderMap, name: &str) -> Option<&'r str> {
    headers.get(name).map(|v| v.to_str().unwrap_or(""))
}

/// Turns the use case's outcome into the response, and writes the one log line of the request.
/// Logs name the event and the problem, never the body or a secret.
#[must_use]
pub fn answer(inbound: &Inbound<'_>, outcome: Result<Receipt, IngestError>) -> Response<Body> {
    let code = match &outcome {
        Ok(receipt) => receipt.ingested.as_str(),
        Err(error) => error.code(),
    };
    // The line that says the answer counts it (an answer is said once, not in a line
    // and again in the invocation's metrics document); where no line is written (`LogLevel`
    // above it) or no EMF recorder is installed, the metrics document counts it.
    let count = |written: bool| {
        let counted = crate::telemetry::counted(crate::telemetry::metric::INGEST_ANSWERS, code)
            .filter(|_| written);
        if counted.is_none() {
            crate::telemetry::count_outcome(crate::telemetry::metric::INGEST_ANSWERS, code);
        }
        counted
    };
    if matches!(
        &outcome,
        Ok(Receipt {
            cross_environment: true,
            ..
        }) | Err(IngestError::EnvironmentConflict { .. })
    ) && crate::telemetry::writes(crate::telemetry::metric::CROSS_ENVIRONMENT_IDS)
    {
        metrics::counter!(crate::telemetry::metric::CROSS_ENVIRONMENT_IDS).increment(1);
    }
    match outcome {
        Ok(receipt) => {
            let ingested = &receipt.ingested;
            let (resent, body_conflict) = match *ingested {
                Ingested::New => (false, false),
                Ingested::Duplicate {
                    resent,
                    body_conflict,
                } => (resent, body_conflict),
            };
            let counted = count(tracing::enabled!(tracing::Level::INFO));
            tracing::info!(
                counted = counted.as_deref(),
                status = 200,
                outcome = ingested.as_str(),
                event_id = %receipt.event_id,
                event_type = %receipt.event_type,
                // Said only when true: most lines are of new deliveries, which are neither.
                resent = resent.then_some(true),
                body_conflict = body_conflict.then_some(true),
                cross_environment = receipt.cross_environment.then_some(true),
                bytes = inbound.body.len(),
                "delivery acknowledged"
            );
            json_response(
                StatusCode::OK,
                &json!({ "received": true, "status": ingested.as_str(), "event_id": receipt.event_id }),
                None,
            )
        }
        Err(error) => {
            // The error renders its own answer (status, body, Retry-After, Allow, the log's
            // words): nothing here reads its variants.
            let answer = error.answer();
            let status =
                StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if answer.is_server_error() {
                let counted = count(tracing::enabled!(tracing::Level::ERROR));
                tracing::error!(counted = counted.as_deref(), status = answer.status, error = error.code(), reason = %error, bytes = inbound.body.len(), "{}", answer.log);
            } else {
                let counted = count(tracing::enabled!(tracing::Level::WARN));
                tracing::warn!(counted = counted.as_deref(), status = answer.status, error = error.code(), reason = %error, bytes = inbound.body.len(), "{}", answer.log);
            }
            let mut response = json_response(status, &answer.body, answer.retry_after_secs);
            if let Some(allow) = answer.allow {
                response
                    .headers_mut()
                    .insert(header::ALLOW, header::HeaderValue::from_static(allow));
            }
            response
        }
    }
}

fn json_response(
    status: StatusCode,
    body: &serde_json::Value,
    retry_after: Option<u64>,
) -> Response<Body> {
    let mut builder = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(secs) = retry_after {
        builder = builder.header(header::RETRY_AFTER, secs.to_string());
    }
    builder
        .body(Body::Text(body.to_string()))
        .expect("status and headers are valid")
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use paymos_inbox_core::port::{PortError, PortErrorKind};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The response to `error`, and the log line it wrote.
    fn answered(error: IngestError) -> (Response<Body>, String) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        let inbound = Inbound {
            method: "POST",
            signature: None,
            webhook_id: None,
            body: b"{}",
        };
        let response =
            tracing::subscriber::with_default(subscriber, || answer(&inbound, Err(error)));
        let log = String::from_utf8(captured.0.lock().expect("log lock").clone()).expect("utf-8");
        (response, log)
    }

    fn header(response: &Response<Body>, name: header::HeaderName) -> Option<&str> {
        response.headers().get(name).and_then(|v| v.to_str().ok())
    }

    fn body(response: &Response<Body>) -> serde_json::Value {
        match response.body() {
            Body::Text(text) => serde_json::from_str(text).expect("a JSON body"),
            other => panic!("not a text body: {other:?}"),
        }
    }

    #[test]
    fn a_refused_credential_answers_500_to_retry_and_its_log_line_names_it() {
        let (response, log) = answered(IngestError::Unavailable(PortError::refused_credential(
            "DynamoDB PutItem",
            "UnrecognizedClientException: The security token included in the request is invalid.",
        )));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(header(&response, header::RETRY_AFTER), Some("60"));
        assert_eq!(
            body(&response),
            json!({"received": false, "error": "misconfigured", "message": "temporarily unavailable; retry"})
        );
        let line: serde_json::Value = serde_json::from_str(log.trim()).expect("one JSON line");
        assert_eq!(line["level"], "ERROR", "{log}");
        assert_eq!(
            line["fields"]["message"],
            paymos_inbox_core::roads::ingest::LOG_REFUSED_CREDENTIAL,
            "{log}"
        );
        assert!(
            line["fields"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("a refused credential")),
            "{log}"
        );
    }

    #[test]
    fn the_handler_sends_the_answer_the_error_renders() {
        for error in [
            IngestError::MethodNotAllowed("GET".into()),
            IngestError::IdMismatch,
            IngestError::InProgress {
                retry_after_secs: 4,
            },
            IngestError::Unavailable(PortError::of_kind(
                "SQS SendMessage",
                PortErrorKind::Throttled,
                "slow down",
            )),
        ] {
            let expected = error.answer();
            let (response, log) = answered(error);
            assert_eq!(response.status().as_u16(), expected.status);
            assert_eq!(body(&response), expected.body);
            assert_eq!(
                header(&response, header::RETRY_AFTER),
                expected.retry_after_secs.map(|s| s.to_string()).as_deref()
            );
            assert_eq!(header(&response, header::ALLOW), expected.allow);
            assert!(log.contains(expected.log), "{log}");
        }
    }
}
