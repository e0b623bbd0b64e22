//! Function URL (payload 2.0) → [`Ingest`] → HTTP status. Header names arrive lower-cased and a
//! base64 body arrives already decoded to its exact bytes by `lambda_http`.

use lambda_http::http::{HeaderMap, StatusCode, header};
use lambda_http::{Body, Request, Response};
use serde_json::json;
use tracing::Instrument;

use paymos_inbox_core::ingest::{
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
    let span = delivery_span(&inbound);
    async {
        let outcome = ingest.handle(&inbound, now_ms).await;
        answer(&inbound, outcome)
    }
    .instrument(span)
    .await
}

/// The span every log line of one request carries: `event_id` from `X-Webhook-Id` when it looks
/// like one (so refusals of unreadable bodies still name the event), else `unknown`; the
/// acknowledgement line names the verified one.
fn delivery_span(inbound: &Inbound<'_>) -> tracing::Span {
    let claimed = inbound
        .webhook_id
        .map(str::trim)
        .filter(|id| {
            !id.is_empty()
                && id.len() <= paymos_inbox_core::envelope::MAX_ID_LEN
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        .unwrap_or("unknown");
    tracing::info_span!("delivery", event_id = claimed)
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
    let span = delivery_span(&inbound);
    async {
        let outcome = ingest.handle_with_keys(&inbound, now_ms, keys).await;
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
    metrics::counter!(
        crate::telemetry::metric::INGEST_ANSWERS,
        crate::telemetry::metric::OUTCOME => code
    )
    .increment(1);
    if matches!(
        &outcome,
        Ok(Receipt {
            cross_environment: true,
            ..
        }) | Err(IngestError::EnvironmentConflict { .. })
    ) {
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
            tracing::info!(
                status = 200,
                outcome = ingested.as_str(),
                event_id = %receipt.event_id,
                event_type = %receipt.event_type,
                resent,
                body_conflict,
                cross_environment = receipt.cross_environment,
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
            let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
            if status.is_server_error() {
                tracing::error!(status = status.as_u16(), error = error.code(), reason = %error, bytes = inbound.body.len(), "delivery not acknowledged; the sender will retry");
            } else {
                tracing::warn!(status = status.as_u16(), error = error.code(), reason = %error, bytes = inbound.body.len(), "delivery refused");
            }
            let retry_after = match &error {
                IngestError::InProgress { retry_after_secs } => Some(*retry_after_secs),
                IngestError::Unavailable(e) => Some(e.kind.retry_after_secs()),
                _ => None,
            };
            // Internal details (SDK messages) stay in the log; the sender gets the code.
            let message = match &error {
                IngestError::Unavailable(_) => "temporarily unavailable; retry".to_owned(),
                other => other.to_string(),
            };
            let mut response = json_response(
                status,
                &json!({ "received": false, "error": error.code(), "message": message }),
                retry_after,
            );
            if status == StatusCode::METHOD_NOT_ALLOWED {
                response
                    .headers_mut()
                    .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
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
