//! A local stand-in for the deliver function's SQS event source mapping, as Lambda's API
//! serves it (`ListEventSourceMappings`, `UpdateEventSourceMapping`): `dev --forward-to` posts
//! only while it is enabled, so `events pause`, `events resume` and the automatic pause run
//! locally through the same adapter (`paymos_inbox_aws::lambda::EventSourceSwitch`) as on AWS.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};

/// The one mapping's id.
const UUID: &str = "dev-deliver";

/// Serves the mapping whose state is `on`; returns its URL (for the Lambda client's
/// `endpoint_url`).
///
/// # Errors
/// When no port can be bound.
pub async fn serve(on: Arc<AtomicBool>) -> Result<String, String> {
    super::stub::serve(move |req| {
        let on = Arc::clone(&on);
        async move { answer(req, &on).await }
    })
    .await
    .map_err(|e| format!("cannot listen on loopback: {e}"))
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    on: &AtomicBool,
) -> hyper::Response<Full<Bytes>> {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let mapping = |state: &str| json!({"UUID": UUID, "State": state, "BatchSize": 10});
    let (status, reply) = match (method.as_str(), path.trim_end_matches('/')) {
        ("GET", "/2015-03-31/event-source-mappings") => {
            let state = if on.load(Ordering::SeqCst) {
                "Enabled"
            } else {
                "Disabled"
            };
            (200, json!({"EventSourceMappings": [mapping(state)]}))
        }
        ("PUT", p) if p == format!("/2015-03-31/event-source-mappings/{UUID}") => {
            let asked: Value = serde_json::from_slice(&body).unwrap_or_default();
            match asked["Enabled"].as_bool() {
                Some(enabled) => {
                    on.store(enabled, Ordering::SeqCst);
                    (202, mapping(if enabled { "Enabling" } else { "Disabling" }))
                }
                None => (
                    400,
                    json!({"Type": "User", "message": "only Enabled is served locally"}),
                ),
            }
        }
        _ => (
            404,
            json!({"Type": "User", "message": "only the deliverer's event source mapping is served locally"}),
        ),
    };
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header(
            "x-amzn-errortype",
            if status == 404 {
                "ResourceNotFoundException"
            } else {
                ""
            },
        )
        .body(Full::new(Bytes::from(reply.to_string())))
        .expect("a valid response")
}
