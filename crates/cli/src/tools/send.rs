//! A simulated Paymos sender: realistic envelopes for every event type, signed like Paymos
//! signs them (one `v1` per active secret), POSTed with Paymos' headers, retried on its ladder.

use std::time::Duration;

use serde_json::{Value, json};

use paymos_inbox_core::wire::signature::{WebhookSecret, signature_header};

/// The 16 event types Paymos sends.
pub const EVENT_TYPES: [&str; 16] = [
    "invoice.awaiting_payment",
    "invoice.confirming",
    "invoice.underpaid_waiting",
    "invoice.paid",
    "invoice.paid_over",
    "invoice.underpaid",
    "invoice.expired",
    "invoice.cancelled",
    "withdrawal.created",
    "withdrawal.processing",
    "withdrawal.completed",
    "withdrawal.failed",
    "withdrawal.cancelled",
    "payment_channel.deposit.confirming",
    "payment_channel.deposit.reorged",
    "payment_channel.deposit.confirmed",
];

/// Paymos' retry gaps: 11 attempts, from one minute up to 8 h, the last ~16 h after the first.
pub const RETRY_LADDER: [Duration; 10] = [
    Duration::from_secs(60),
    Duration::from_secs(120),
    Duration::from_secs(240),
    Duration::from_secs(480),
    Duration::from_secs(960),
    Duration::from_secs(1920),
    Duration::from_secs(3600),
    Duration::from_secs(7200),
    Duration::from_secs(14_400),
    Duration::from_secs(28_800),
];

/// A fresh event id.
#[must_use]
pub fn new_event_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "evt_{:x}{:04x}",
        nanos,
        N.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}

/// The `data` Paymos would send for `event_type` about `resource`, with `overrides` merged in.
#[must_use]
pub fn data_for(
    event_type: &str,
    resource: &str,
    is_test: bool,
    occurred_at: u64,
    overrides: Option<&Value>,
) -> Value {
    let status = event_type.rsplit('.').next().unwrap_or_default();
    let mut data = if event_type.starts_with("invoice.") {
        json!({
            "invoice_id": resource, "project_id": "prj_local", "status": status,
            "is_final": matches!(status, "paid" | "paid_over" | "underpaid" | "expired" | "cancelled"),
            "is_test": is_test,
            "order": {"external_id": format!("order-{resource}"), "amount": "25.00", "currency": "USDT"},
            "payment": {"network": "TRC20", "currency": "USDT", "expected": "25.00",
                        "received": if matches!(status, "paid" | "paid_over") { "25.00" } else { "0" }},
            "created_at": occurred_at.saturating_sub(600), "updated_at": occurred_at,
        })
    } else if event_type.starts_with("withdrawal.") {
        json!({
            "withdrawal_id": resource, "project_id": "prj_local", "status": status,
            "is_final": matches!(status, "completed" | "failed" | "cancelled"), "is_test": is_test,
            "network": "TRC20", "currency": "USDT", "amount": "10.00",
            "destination_address": "TXk2nbbuuNdtrXZbH3HbA9bNPpbBz4vDmD",
            "created_at": occurred_at.saturating_sub(60),
        })
    } else if event_type.starts_with("payment_channel.deposit.") {
        json!({
            "id": resource, "payment_channel_id": "pc_local", "project_id": "prj_local",
            "payment_channel_external_id": "customer-42", "status": status,
            "is_final": status == "confirmed", "is_test": is_test,
            "currency": "USDT", "network": "TRC20", "gross": "100.00", "fee": "1.00", "net": "99.00",
            "tx_hash": "9a2f1c", "created_at": occurred_at.saturating_sub(60), "updated_at": occurred_at,
        })
    } else {
        json!({"id": resource, "is_test": is_test})
    };
    if let (Some(Value::Object(extra)), Value::Object(base)) = (overrides, &mut data) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    data
}

/// A complete envelope as exact bytes.
#[must_use]
pub fn envelope(event_id: &str, event_type: &str, occurred_at: u64, data: &Value) -> String {
    json!({"event_id": event_id, "event_type": event_type, "version": 1, "occurred_at": occurred_at, "data": data})
        .to_string()
}

/// What one attempt got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Attempt {
    /// 1-based attempt number.
    pub attempt: usize,
    /// HTTP status, or 0 when no answer came.
    pub status: u16,
    /// The response body (or the transport error).
    pub body: String,
    /// Milliseconds the attempt took.
    pub millis: u128,
}

/// Paymos gives up on an attempt after this long.
pub const SENDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends one delivery: signs `body` at `now` (one `v1` per secret) and POSTs it with Paymos'
/// headers, giving up after `timeout` like the sender does (see [`SENDER_TIMEOUT`]).
#[allow(clippy::too_many_arguments)]
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    event_id: &str,
    body: &str,
    secrets: &[WebhookSecret],
    now: u64,
    attempt: usize,
    timeout: Duration,
) -> Attempt {
    let refs: Vec<&WebhookSecret> = secrets.iter().collect();
    let signature = signature_header(now, body.as_bytes(), &refs);
    let started = std::time::Instant::now();
    let result = client
        .post(url)
        .timeout(timeout)
        .header("content-type", "application/json; charset=utf-8")
        .header("x-webhook-id", event_id)
        .header("x-webhook-timestamp", now.to_string())
        .header("x-webhook-signature", signature)
        .body(body.to_owned())
        .send()
        .await;
    let (status, body) = match result {
        Ok(r) => {
            let status = r.status().as_u16();
            (status, r.text().await.unwrap_or_default())
        }
        Err(e) if e.is_timeout() => (
            0,
            format!("no answer within {timeout:?} (the sender gives up and retries)"),
        ),
        Err(e) if e.is_connect() => (0, "connection refused or unreachable".to_owned()),
        Err(e) => (0, format!("no answer: {e}")),
    };
    Attempt {
        attempt,
        status,
        body,
        millis: started.elapsed().as_millis(),
    }
}

/// Sends until a 2xx, following Paymos' ladder with every gap divided by `time_scale`,
/// re-signing each attempt. Calls `progress` after each attempt. Returns every attempt.
#[allow(clippy::too_many_arguments)]
pub async fn with_retries(
    client: &reqwest::Client,
    url: &str,
    event_id: &str,
    body: &str,
    secrets: &[WebhookSecret],
    time_scale: f64,
    clock: impl Fn() -> u64,
    mut progress: impl FnMut(&Attempt),
) -> Vec<Attempt> {
    let mut attempts = Vec::new();
    let mut gaps = RETRY_LADDER.iter();
    loop {
        let n = attempts.len() + 1;
        let a = post(
            client,
            url,
            event_id,
            body,
            secrets,
            clock(),
            n,
            SENDER_TIMEOUT,
        )
        .await;
        progress(&a);
        let done = (200..300).contains(&a.status);
        attempts.push(a);
        match gaps.next() {
            Some(gap) if !done => tokio::time::sleep(gap.div_f64(time_scale.max(1.0))).await,
            _ => return attempts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_spans_about_sixteen_hours_in_eleven_attempts() {
        let total: Duration = RETRY_LADDER.iter().sum();
        assert_eq!(RETRY_LADDER.len() + 1, 11);
        assert!(
            (15.5..16.5).contains(&(total.as_secs_f64() / 3600.0)),
            "{total:?}"
        );
    }

    #[test]
    fn every_event_type_builds_an_envelope_ingest_accepts() {
        for ty in EVENT_TYPES {
            let resource =
                match paymos_inbox_core::wire::envelope::Category::of(ty).resource_field() {
                    Some((_, prefix)) => format!("{prefix}1"),
                    None => unreachable!("{ty} is a known type"),
                };
            let body = envelope("evt_1", ty, 5, &data_for(ty, &resource, true, 5, None));
            let parsed =
                paymos_inbox_core::wire::envelope::Envelope::parse(body.as_bytes()).unwrap();
            assert_eq!(
                parsed.resource_id.as_deref(),
                Some(resource.as_str()),
                "{ty}"
            );
            let change = paymos_inbox_core::money::change::change_of(&parsed);
            assert!(
                !matches!(
                    change,
                    paymos_inbox_core::money::change::Change::Unusable { .. }
                        | paymos_inbox_core::money::change::Change::Ignore { .. }
                ),
                "{ty}: {change:?}"
            );
        }
    }
}
