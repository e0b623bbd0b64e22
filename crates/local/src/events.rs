//! The function-URL events in `events/` are inputs for `sam local invoke -e` / `cargo lambda
//! invoke` AND the tests' fixtures. They are signed with a fixture secret at a fixed time; this
//! re-signs them (for example with the current time, so a local invoke passes the tolerance).
//!
//! A file's name says how it is signed: `*bad-signature*` with a wrong secret, `*stale*` an
//! hour before `at`, `*rotation*` with two `v1` (a retired secret's first), others plainly.

use std::path::Path;

use base64::Engine as _;
use serde_json::Value;

use paymos_inbox_core::wire::signature::{WebhookSecret, signature_header};

use crate::error::LocalError;

/// Re-signs every `ingest-*.json` function-URL event in `dir` at Unix time `at` with `secret`.
/// Returns the files it rewrote.
///
/// # Errors
/// A file that cannot be read, parsed or written ([`LocalError::File`], naming it).
pub fn refresh(dir: &Path, secret: &WebhookSecret, at: u64) -> Result<Vec<String>, LocalError> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| LocalError::file(dir.display(), e))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ingest-") && n.ends_with(".json"))
        .collect();
    names.sort();
    for name in &names {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| LocalError::file(name, e))?;
        let mut event: Value =
            serde_json::from_str(&text).map_err(|e| LocalError::file(name, e))?;
        let raw = event["body"].as_str().unwrap_or_default();
        let body = if event["isBase64Encoded"].as_bool() == Some(true) {
            base64::engine::general_purpose::STANDARD
                .decode(raw)
                .map_err(|e| LocalError::file(name, format!("body is not base64: {e}")))?
        } else {
            raw.as_bytes().to_vec()
        };
        let wrong = WebhookSecret::new("whsec_test_not_the_configured_secret");
        let retired = WebhookSecret::new("whsec_test_retired_secret");
        let (t, header) = if name.contains("bad-signature") {
            (at, signature_header(at, &body, &[&wrong]))
        } else if name.contains("stale") {
            (at - 3600, signature_header(at - 3600, &body, &[secret]))
        } else if name.contains("rotation") {
            (at, signature_header(at, &body, &[&retired, secret]))
        } else {
            (at, signature_header(at, &body, &[secret]))
        };
        let headers = event["headers"]
            .as_object_mut()
            .ok_or_else(|| LocalError::file(name, "no headers object"))?;
        headers.insert("x-webhook-signature".into(), header.into());
        headers.insert("x-webhook-timestamp".into(), t.to_string().into());
        event["requestContext"]["timeEpoch"] = Value::from(at * 1000);
        let mut out =
            serde_json::to_string_pretty(&event).map_err(|e| LocalError::file(name, e))?;
        out.push('\n');
        std::fs::write(&path, out).map_err(|e| LocalError::file(name, e))?;
    }
    Ok(names)
}
