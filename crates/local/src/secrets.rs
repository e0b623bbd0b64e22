//! A local stand-in for Secrets Manager's `GetSecretValue` (the only call the functions make,
//! at INIT), so the real binaries start locally exactly as on AWS: `dev` serves the secrets it
//! holds, the tests serve theirs.

use std::collections::HashMap;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};

use crate::error::LocalError;

/// Serves `secrets` (secret id → secret string) on a free loopback port; returns its URL (for
/// `AWS_ENDPOINT_URL_SECRETS_MANAGER`).
///
/// # Errors
/// When no port can be bound ([`LocalError::Listen`]).
pub async fn serve(secrets: HashMap<String, String>) -> Result<String, LocalError> {
    let secrets = Arc::new(secrets);
    super::stub::serve(move |req| {
        let secrets = Arc::clone(&secrets);
        async move { answer(req, &secrets).await }
    })
    .await
    .map_err(LocalError::Listen)
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    secrets: &HashMap<String, String>,
) -> hyper::Response<Full<Bytes>> {
    let target = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let asked: Value = serde_json::from_slice(&body).unwrap_or_default();
    let id = asked["SecretId"].as_str().unwrap_or_default();
    let (status, reply) = match (target.as_str(), secrets.get(id)) {
        ("secretsmanager.GetSecretValue", Some(secret)) => (
            200,
            json!({"ARN": format!("arn:aws:secretsmanager:us-east-1:000000000000:secret:{id}-local"),
                   "Name": id, "SecretString": secret, "VersionId": "local",
                   "VersionStages": ["AWSCURRENT"], "CreatedDate": 1.7e9}),
        ),
        ("secretsmanager.GetSecretValue", None) => (
            400,
            json!({"__type": "ResourceNotFoundException", "message": "Secrets Manager can't find the specified secret."}),
        ),
        _ => (
            400,
            json!({"__type": "InvalidRequestException", "message": "only GetSecretValue is served locally"}),
        ),
    };
    let mut response = hyper::Response::new(Full::new(Bytes::from(reply.to_string())));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status");
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/x-amz-json-1.1"),
    );
    response
}
