//! Secrets Manager: the webhook secrets, read at start and again after a rotation.

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueOutput;

use crate::aws::port_error;
use paymos_inbox_core::port::{PortError, PortErrorKind};
use paymos_inbox_core::roads::ingest::KeySource;
use paymos_inbox_core::wire::signature::{SigningKey, parse_keys};

/// The one call every secret is read with.
const GET_SECRET_VALUE: &str = "Secrets Manager GetSecretValue";

/// Reads `secret_id`; a failure keeps the SDK's kind (a refused credential named as one) and
/// its source, after `what` (which secret, by its setting: never its value).
async fn read(
    client: &Client,
    secret_id: &str,
    what: &str,
) -> Result<GetSecretValueOutput, PortError> {
    client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| port_error(GET_SECRET_VALUE, e).context(format!("could not read {what}")))
}

/// A secret's content that is not what it should be: ours to fix, never worth a retry.
fn malformed(operation: &'static str, message: impl std::fmt::Display) -> PortError {
    PortError::of_kind(operation, PortErrorKind::Misconfigured, message)
}

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
        let secret = read(
            &self.client,
            &self.secret_id,
            &format!("the webhook secrets ({})", self.secret_id),
        )
        .await?;
        let text = secret.secret_string().ok_or_else(|| {
            malformed(
                GET_SECRET_VALUE,
                "the webhook secret has no SecretString: store it as text or JSON",
            )
        })?;
        parse_keys(text, true).map_err(|e| {
            malformed("webhook secrets", format!("secret {}: {e}", self.secret_id)).with_source(e)
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
    let secret = read(
        client,
        secret_id,
        &format!("the Paymos API credentials ({var})"),
    )
    .await?;
    let wrong = |why: String| malformed(OPERATION, format!("{var}: {why}"));
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
/// [`PortError`] naming `var` (never the secret): of the SDK's kind when the secret cannot be
/// read, [`PortErrorKind::Misconfigured`] when it is not a signing key.
pub async fn outbound_secret(
    client: &Client,
    secret_id: &str,
    var: &'static str,
) -> Result<paymos_inbox_core::roads::outbound::OutboundSecret, PortError> {
    let secret = read(client, secret_id, &format!("the signing secret ({var})")).await?;
    signing_keys(secret.secret_string().unwrap_or_default(), var)
}

/// The signing key(s) in a secret's text: `{"key": "whsec_…"}` (or the key alone), with
/// `"previous"` during a rotation: what the deliver function signs with.
///
/// # Errors
/// [`PortErrorKind::Misconfigured`], naming `var` (never the secret), when it holds no key.
pub fn signing_keys(
    text: &str,
    var: &'static str,
) -> Result<paymos_inbox_core::roads::outbound::OutboundSecret, PortError> {
    let json = serde_json::from_str::<serde_json::Value>(text).ok();
    let field = |name: &str| {
        json.as_ref()
            .and_then(|v| v[name].as_str().map(str::to_owned))
    };
    let parse = |key: &str, which: &str| {
        paymos_inbox_core::roads::outbound::OutboundSecret::parse(key).map_err(|e| {
            malformed("signing secret", format!("{var} ({which}): {e}")).with_source(e)
        })
    };
    let current = parse(&field("key").unwrap_or_else(|| text.to_owned()), "key")?;
    // During a rotation the secret also holds the key being retired: both sign until it is
    // removed (docs/handoff.md, "Rotating the signing key").
    Ok(match field("previous") {
        Some(previous) => current.with_previous(parse(&previous, "previous")?),
        None => current,
    })
}

#[cfg(test)]
mod signing_key_tests {
    use super::signing_keys;

    const NEW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const OLD: &str = "whsec_c2VjcmV0LW9mLXRoZS1vbGQta2V5";

    #[test]
    fn a_secret_in_rotation_signs_with_both_keys_and_names_a_bad_one() {
        let one = signing_keys(&format!(r#"{{"key":"{NEW}"}}"#), "V").unwrap();
        let bare = signing_keys(NEW, "V").unwrap();
        assert_eq!(one.signatures("m", 1, "{}"), bare.signatures("m", 1, "{}"));
        assert!(!one.signatures("m", 1, "{}").contains(' '));
        let both = signing_keys(&format!(r#"{{"key":"{NEW}","previous":"{OLD}"}}"#), "V").unwrap();
        let header = both.signatures("m", 1, "{}");
        assert_eq!(header.split(' ').count(), 2);
        assert!(header.starts_with(&one.signatures("m", 1, "{}")));
        let error = signing_keys(&format!(r#"{{"key":"{NEW}","previous":"short"}}"#), "V")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("previous") && !error.contains("short"),
            "{error}"
        );
    }
}
