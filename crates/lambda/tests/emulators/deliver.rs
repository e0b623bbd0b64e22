//! The signed hand-off: hand-off events, as an EventBridge rule delivers them to the
//! deliverer's queue, posted to a receiver on loopback as Standard Webhooks messages, and
//! verified there with the `standardwebhooks` packages from PyPI and npm (reference
//! implementations in two languages we did not write, which must agree). A tampered body, an
//! old timestamp or a rotated-out key does not verify; an endpoint that refuses gets the
//! message again on the schedule, one that redirects never counts as delivered, one that is
//! gone has it parked.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use paymos_inbox_aws::events::envelope as eventbridge_envelope;
use paymos_inbox_aws::webhook::HttpWebhookTarget;
use paymos_inbox_core::money::change::OrderRef;
use paymos_inbox_core::money::record::{FulfilmentRecord, StateRecord};
use paymos_inbox_core::money::status::{Amount, InvoiceStatus};
use paymos_inbox_core::roads::handoff::events_of;
use paymos_inbox_core::roads::outbound::{OutboundSecret, outbound_of};
use paymos_inbox_core::testkit::memory::MemoryRetries;
use paymos_inbox_core::wire::signature::Environment;
use paymos_inbox_lambda::deliver::handle_batch;
use paymos_inbox_testkit::standard_webhooks::{Received, verifies_with};
use serde_json::Value;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A receiver on loopback that keeps every request and answers `status`.
pub(crate) async fn receiver(status: u16) -> (String, Received) {
    let received: Received = Arc::default();
    let kept = received.clone();
    let url = paymos_inbox_local::stub::serve(move |req: hyper::Request<hyper::body::Incoming>| {
        let kept = kept.clone();
        async move {
            let headers = req
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        v.to_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            kept.lock()
                .unwrap()
                .push((headers, String::from_utf8_lossy(&body).into_owned()));
            let mut r = hyper::Response::new(Full::new(Bytes::new()));
            *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
            r
        }
    })
    .await
    .unwrap();
    (url, received)
}

/// An Order Paid as the publisher emits it, in the envelope a rule delivers to SQS.
fn order_paid(invoice: &str) -> String {
    let item = StateRecord::Fulfilment(FulfilmentRecord {
        invoice_id: invoice.into(),
        order: OrderRef {
            external_id: Some(format!("order-{invoice}")),
            amount: Amount::parse("10.50"),
            currency: Some("USDT".into()),
            project: None,
            home: false,
            unlisted: false,
        },
        status: Some(InvoiceStatus::Paid),
        won_by: "evt_1".into(),
        fulfilled_at_ms: Some(1_700_000_000_000),
    });
    let event = events_of(None, Some(&item), Environment::Live).remove(0);
    eventbridge_envelope(&event, 1_700_000_000_000).to_string()
}

fn batch(bodies: &[String]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            let mut m = SqsMessage::default();
            m.message_id = Some(format!("m{i}"));
            m.receipt_handle = Some(format!("r{i}"));
            m.body = Some(body.clone());
            m
        })
        .collect();
    event
}

/// Whether the reference implementations verify `body` with `headers` and `SECRET`.
fn verifies(headers: &[(String, String)], body: &str) -> Result<(), String> {
    verifies_with(SECRET, headers, body)
}

fn now_s() -> u64 {
    paymos_inbox_lambda::now_ms() / 1000
}

#[tokio::test]
async fn a_delivery_verifies_with_the_standard_webhooks_package_and_a_tampered_one_does_not() {
    let (url, received) = receiver(204).await;
    let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
    let secret = OutboundSecret::parse(SECRET).unwrap();
    let response = handle_batch(
        &target,
        &MemoryRetries::new(),
        &secret,
        batch(&[order_paid("inv_d1")]),
        now_s(),
    )
    .await;
    assert!(response.batch_item_failures.is_empty());
    let (headers, body) = received.lock().unwrap()[0].clone();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        header("webhook-id"),
        "order-paid:inv_d1",
        "the fact's id, to dedupe on"
    );
    // Issue 52: the version reaches the endpoint's logs, and the documented request is this one.
    let agent = format!("paymos-inbox/{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(header("user-agent"), agent);
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/handoff.md"
    ))
    .unwrap();
    assert!(
        doc.contains(&format!("  user-agent: {agent}\n")),
        "docs/handoff.md shows the request with user-agent {agent}"
    );
    let payload: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(payload["type"], "Order Paid");
    assert_eq!(payload["data"]["amount"], "10.50");
    println!(
        "{}\n{body}",
        headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    verifies(&headers, &body).expect("the reference library verifies it");
    let tampered = body.replace("10.50", "0.01");
    assert!(
        verifies(&headers, &tampered).is_err(),
        "a tampered body is refused"
    );
}

// Issue 54: the merchant's endpoint receives the payment's trace. The trace header EventBridge
// hands the delivery queue (`AWSTraceHeader`, X-Ray's spelling) reaches it as a W3C
// `traceparent` of the same trace; an event that carries none is posted without one.
#[tokio::test]
async fn the_post_carries_the_events_trace_as_a_traceparent_header() {
    let (url, received) = receiver(204).await;
    let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
    let secret = OutboundSecret::parse(SECRET).unwrap();
    let mut event = batch(&[order_paid("inv_t1"), order_paid("inv_t2")]);
    event.records[0].attributes.insert(
        "AWSTraceHeader".into(),
        "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1".into(),
    );
    let response = handle_batch(&target, &MemoryRetries::new(), &secret, event, now_s()).await;
    assert!(response.batch_item_failures.is_empty());
    let traceparents: std::collections::BTreeMap<String, Option<String>> = received
        .lock()
        .unwrap()
        .iter()
        .map(|(headers, _)| {
            let header = |name: &str| {
                headers
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            };
            (header("webhook-id").unwrap(), header("traceparent"))
        })
        .collect();
    assert_eq!(
        traceparents,
        std::collections::BTreeMap::from([
            (
                "order-paid:inv_t1".to_owned(),
                Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned())
            ),
            ("order-paid:inv_t2".to_owned(), None),
        ])
    );
}

#[tokio::test]
async fn an_old_timestamp_does_not_verify() {
    let secret = OutboundSecret::parse(SECRET).unwrap();
    let old = outbound_of(&order_paid("inv_d2"), &secret, now_s() - 3600).unwrap();
    let headers = vec![
        ("webhook-id".to_owned(), old.id.clone()),
        ("webhook-timestamp".to_owned(), old.timestamp.to_string()),
        ("webhook-signature".to_owned(), old.signature.clone()),
    ];
    let err = verifies(&headers, &old.body).unwrap_err();
    assert!(
        err.contains("too old") || err.contains("timestamp"),
        "{err}"
    );
    let fresh = outbound_of(&order_paid("inv_d2"), &secret, now_s()).unwrap();
    let headers = vec![
        ("webhook-id".to_owned(), fresh.id.clone()),
        ("webhook-timestamp".to_owned(), fresh.timestamp.to_string()),
        ("webhook-signature".to_owned(), fresh.signature.clone()),
    ];
    verifies(&headers, &fresh.body).expect("the same message, signed now");
}

#[tokio::test]
async fn an_endpoint_that_refuses_or_is_down_gets_the_message_again() {
    let secret = OutboundSecret::parse(SECRET).unwrap();
    let (url, received) = receiver(500).await;
    let refusing = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
    let down = HttpWebhookTarget::new("http://127.0.0.1:9/hook", Duration::from_secs(2)).unwrap();
    let retries = MemoryRetries::new();
    for target in [&refusing, &down] {
        let response = handle_batch(
            target,
            &retries,
            &secret,
            batch(&[order_paid("inv_d3"), "not an event".to_owned()]),
            now_s(),
        )
        .await;
        let failed: Vec<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(failed.len(), 2, "both retried, then parked: {failed:?}");
    }
    // Each comes back on the schedule's first delay (5 s, spread by a tenth), by its receipt.
    let asked = retries.asked();
    assert_eq!(asked.len(), 4, "{asked:?}");
    assert!(
        asked
            .iter()
            .all(|(r, d)| r.starts_with("r") && (4..=6).contains(d)),
        "{asked:?}"
    );
    assert_eq!(
        received.lock().unwrap().len(),
        1,
        "the malformed one is never posted"
    );
}

/// A receiver on loopback that answers every request `status` with `Location: location`.
async fn redirecting(status: u16, location: &str) -> (String, Received) {
    let received: Received = Arc::default();
    let kept = received.clone();
    let location = location.to_owned();
    let url = paymos_inbox_local::stub::serve(move |req: hyper::Request<hyper::body::Incoming>| {
        let kept = kept.clone();
        let location = location.clone();
        async move {
            let method = req.method().to_string();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            kept.lock().unwrap().push((
                vec![("method".into(), method)],
                String::from_utf8_lossy(&body).into(),
            ));
            let mut r = hyper::Response::new(Full::new(Bytes::new()));
            *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
            r.headers_mut()
                .insert("location", location.parse().unwrap());
            r
        }
    })
    .await
    .unwrap();
    (url, received)
}

// Issue 30: a redirect was followed (301/302/303 as a body-less GET whose 2xx counted as
// delivered; 307/308 re-posted the signed body to the new host). Now a 3xx is a failure that
// names where it pointed, and nothing reaches that place.
#[tokio::test]
async fn an_endpoint_that_redirects_never_counts_as_delivered_and_nothing_follows_it() {
    let secret = OutboundSecret::parse(SECRET).unwrap();
    let (elsewhere, reached) = receiver(200).await;
    for status in [301, 302, 303, 307, 308] {
        let (url, received) = redirecting(status, &elsewhere).await;
        let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
        let response = handle_batch(
            &target,
            &MemoryRetries::new(),
            &secret,
            batch(&[order_paid("inv_r")]),
            now_s(),
        )
        .await;
        assert_eq!(
            response.batch_item_failures.len(),
            1,
            "{status}: not delivered, retried then parked"
        );
        assert_eq!(received.lock().unwrap().len(), 1, "{status}: one POST");
        let message = outbound_of(&order_paid("inv_r"), &secret, now_s()).unwrap();
        let error = paymos_inbox_core::roads::outbound::WebhookTarget::post(&target, &message)
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains(&elsewhere)
                && error.to_string().contains(&status.to_string()),
            "{status}: the failure names the status and the Location: {error}"
        );
    }
    assert!(
        reached.lock().unwrap().is_empty(),
        "no GET and no POST reached the redirect's target"
    );
}

// Issue 30: a 410 Gone was retried like a 503. It says the endpoint will never take the event:
// parked at once (the dead-letter queue's alarm pages), never posted again.
#[tokio::test]
async fn an_endpoint_that_answers_gone_has_the_event_parked_at_once() {
    let secret = OutboundSecret::parse(SECRET).unwrap();
    let (url, received) = receiver(410).await;
    let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
    let retries = MemoryRetries::new();
    let event = order_paid("inv_g");
    let response = handle_batch(
        &target,
        &retries,
        &secret,
        batch(std::slice::from_ref(&event)),
        now_s(),
    )
    .await;
    assert!(
        response.batch_item_failures.is_empty(),
        "removed from the delivery queue"
    );
    let parked = retries.parked();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].0, event, "the event as it came, to redrive later");
    assert!(parked[0].1.contains("410"), "{}", parked[0].1);
    assert!(retries.asked().is_empty(), "no retry scheduled");
    assert_eq!(received.lock().unwrap().len(), 1);
}

// Issue 30: one signing key, no overlap on rotation. During a rotation both keys sign (Standard
// Webhooks' space-separated signatures): a consumer holding either verifies with the reference
// library; once the old key is retired, a consumer still holding it is refused.
#[tokio::test]
async fn during_a_rotation_a_consumer_holding_either_key_verifies() {
    const OLD: &str = "whsec_c2VjcmV0LW9mLXRoZS1vbGQta2V5";
    let (url, received) = receiver(204).await;
    let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
    let new = OutboundSecret::parse(SECRET).unwrap();
    let rotating = new
        .clone()
        .with_previous(OutboundSecret::parse(OLD).unwrap());
    for secret in [&rotating, &new] {
        let response = handle_batch(
            &target,
            &MemoryRetries::new(),
            secret,
            batch(&[order_paid("inv_k")]),
            now_s(),
        )
        .await;
        assert!(response.batch_item_failures.is_empty());
    }
    let received = received.lock().unwrap().clone();
    let (during, after) = (&received[0], &received[1]);
    verifies_with(SECRET, &during.0, &during.1).expect("the new key verifies during the rotation");
    verifies_with(OLD, &during.0, &during.1).expect("the old key verifies during the rotation");
    verifies_with(SECRET, &after.0, &after.1).expect("the new key verifies after it");
    assert!(
        verifies_with(OLD, &after.0, &after.1).is_err(),
        "a rotated-out key is refused"
    );
}

// Issue 30: a dead-letter record says why. The last attempt's failure parks the event itself,
// naming the attempts and the last answer (here a redirect's Location), instead of SQS moving
// it without a word.
#[tokio::test]
async fn the_last_failed_attempt_parks_the_event_with_its_last_answer() {
    let secret = OutboundSecret::parse(SECRET).unwrap();
    let (elsewhere, _) = receiver(200).await;
    let (url, _) = redirecting(302, &elsewhere).await;
    let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
    let retries = MemoryRetries::new();
    let mut event = batch(&[order_paid("inv_last")]);
    event.records[0].attributes.insert(
        "ApproximateReceiveCount".into(),
        paymos_inbox_core::roads::outbound::ATTEMPTS.to_string(),
    );
    let response = handle_batch(&target, &retries, &secret, event, now_s()).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "parked, not failed"
    );
    let parked = retries.parked();
    assert_eq!(parked.len(), 1);
    assert!(
        parked[0].1.contains("8 attempts") && parked[0].1.contains(&elsewhere),
        "{}",
        parked[0].1
    );
    assert!(retries.asked().is_empty());
}

/// The consumer's secret as `docs/handoff.md`'s Python snippet builds it from the secret's
/// text `stored`: its lines that name `key` and `secret`, run as written (with
/// `get_secret_value` answering `stored`).
fn documented_consumer_secret(doc: &str, stored: &str) -> String {
    let snippet = doc
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/handoff.md has the consumer's Python snippet");
    let lines: Vec<&str> = snippet
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("key =") || l.starts_with("secret ="))
        .collect();
    assert!(!lines.is_empty(), "the snippet builds `secret`: {snippet}");
    let program = format!(
        "import json, sys\nstored = sys.stdin.read()\nget_secret_value = lambda SecretId: {{'SecretString': stored}}\narn = None\n{}\nprint(secret)\n",
        lines.join("\n")
    );
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut child = std::process::Command::new(root.join(".venv/bin/python"))
        .args(["-c", &program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the .venv's python (make deps)");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stored.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{program}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

// Issue 52: the documented rotation stored `{"key":"whsec_NEW",…}` while the consumer's
// snippet builds `"whsec_" + key`, so after the rotation every consumer following the docs
// held `whsec_whsec_NEW` and refused every message (the deliver function strips one prefix, so
// nothing showed it). Each secret text the rotation steps store, with keys of the shape the
// template generates, signs through the deliver function's own reading of it, and the
// documented snippet's secret verifies with the reference libraries.
#[tokio::test]
async fn the_documented_rotation_and_the_consumer_snippet_agree() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/handoff.md"
    ))
    .unwrap();
    // Keys as the template generates them: 32 letters and digits.
    let (new, old) = (
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "c2VjcmV0LW9mLXRoZS1vbGQta2V5AbCd",
    );
    let stored: Vec<String> = doc
        .split("--secret-string '")
        .skip(1)
        .filter_map(|rest| rest.split('\'').next())
        .map(|s| s.replace("NEW", new).replace("OLD", old))
        .collect();
    assert!(
        stored.len() >= 2,
        "the rotation's steps store the secret: {stored:?}"
    );
    // Before the rotation: the template's own secret.
    let generated = format!(r#"{{"key":"{old}"}}"#);
    for text in std::iter::once(&generated).chain(&stored) {
        let signing = paymos_inbox_aws::secrets::signing_keys(text, "V").unwrap();
        let (url, received) = receiver(204).await;
        let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
        let response = handle_batch(
            &target,
            &MemoryRetries::new(),
            &signing,
            batch(&[order_paid("inv_rot")]),
            now_s(),
        )
        .await;
        assert!(response.batch_item_failures.is_empty());
        let (headers, body) = received.lock().unwrap()[0].clone();
        let consumer = documented_consumer_secret(&doc, text);
        verifies_with(&consumer, &headers, &body)
            .unwrap_or_else(|e| panic!("{text}: the documented consumer refuses: {e}"));
    }
}
