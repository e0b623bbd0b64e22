//! Secrets Manager: the webhook secrets, read at start and again after a rotation.

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::error::DisplayErrorContext;

use paymos_inbox_core::ingest::{KeySource, PortError, PortErrorKind};
use paymos_inbox_core::signature::{SigningKey, parse_keys};

/// A [`KeySource`] on one Secrets Manager secret (JSON, `label=secret` lines, or one secret).
#[derive(Debug, Clone)]
pub struct SecretsManagerKeys {
    client: Client,
    secret_id: String,
}

impl SecretsManagerKeys {
    /// The secret `secret_id` (name or ARN), read with `client`.
    #[must_use]
    pub fn new(client: Client, secret_id: impl Into<String>) -> Self {
        Self {
            client,
            secret_id: secret_id.into(),
        }
    }
}

impl KeySource for SecretsManagerKeys {
    async fn keys(&self) -> Result<Vec<SigningKey>, PortError> {
        let secret = self
            .client
            .get_secret_value()
            .secret_id(&self.secret_id)
            .send()
            .await
            .map_err(|e| {
                PortError::new(
                    "Secrets Manager GetSecretValue",
                    format!(
                        "could not read the webhook secrets ({}): {}",
                        self.secret_id,
                        DisplayErrorContext(e)
                    ),
                )
            })?;
        let text = secret.secret_string().ok_or_else(|| {
            PortError::new(
                "Secrets Manager GetSecretValue",
                "the webhook secret has no SecretString: store it as text or JSON",
            )
        })?;
        parse_keys(text, true).map_err(|e| {
            PortError::new("webhook secrets", format!("secret {}: {e}", self.secret_id))
        })
    }
}

/// The Paymos API client, from a Secrets Manager secret `{"api_key": …, "api_secret": …}`.
///
/// # Errors
/// [`PortError`] naming `var` (never a secret): of the SDK's kind when the secret cannot be
/// read, [`PortErrorKind::Misconfigured`] when it does not hold a key and a secret.
pub async fn paymos_client(
    client: &Client,
    secret_id: &str,
    var: &str,
    base_url: &str,
    timeout: std::time::Duration,
    max_retries: u32,
) -> Result<paymos::PaymosClient, PortError> {
    const OPERATION: &str = "Paymos API credentials";
    let secret = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| {
            let e = crate::aws::port_error("Secrets Manager GetSecretValue", e);
            PortError::of_kind(
                e.operation,
                e.kind,
                format!(
                    "could not read the Paymos API credentials ({var}): {}",
                    e.message
                ),
            )
        })?;
    let wrong = |why: String| {
        PortError::of_kind(
            OPERATION,
            PortErrorKind::Misconfigured,
            format!("{var}: {why}"),
        )
    };
    let json: serde_json::Value = serde_json::from_str(secret.secret_string().unwrap_or_default())
        .map_err(|_| wrong("expected JSON {\"api_key\": …, \"api_secret\": …}".into()))?;
    let field = |k: &str| {
        json[k]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| wrong(format!("no {k}")))
    };
    paymos::PaymosClient::builder(field("api_key")?, field("api_secret")?)
        .base_url(base_url)
        .timeout(timeout)
        .max_retries(max_retries)
        .build()
        .map_err(|e| wrong(e.to_string()).with_source(e))
}

/// The outbound signing key from a Secrets Manager secret: `{"key": "<base64>"}` (what the
/// template generates) or the bare `whsec_…` text.
///
/// # Errors
/// What could not be read, naming `var` (never the secret).
pub async fn outbound_secret(
    client: &Client,
    secret_id: &str,
    var: &'static str,
) -> Result<paymos_inbox_core::outbound::OutboundSecret, PortError> {
    let secret = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| {
            PortError::new(
                "Secrets Manager GetSecretValue",
                format!(
                    "could not read the signing secret ({var}): {}",
                    DisplayErrorContext(e)
                ),
            )
        })?;
    let text = secret.secret_string().unwrap_or_default();
    let key = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["key"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.to_owned());
    paymos_inbox_core::outbound::OutboundSecret::parse(&key)
        .map_err(|e| PortError::new("signing secret", format!("{var}: {e}")))
}
