//! Secrets Manager: the webhook secrets, read at start and again after a rotation.

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::error::DisplayErrorContext;

use crate::config::{WEBHOOK_SECRETS_ID, parse_secrets};
use crate::domain::ingest::{KeySource, PortError};
use crate::domain::signature::SigningKey;

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
                        "could not read the webhook secrets ({WEBHOOK_SECRETS_ID}): {}",
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
        parse_secrets(text, WEBHOOK_SECRETS_ID, true)
            .map_err(|e| PortError::new("webhook secrets", e))
    }
}
