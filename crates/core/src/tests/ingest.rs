//! Ingest: what each attempt answers and writes, with leases and take-overs.

use std::sync::Arc;

use crate::money::change::Applied;
use crate::roads::ingest::{
    Delivery, DeliveryState, Inbound, Ingest, IngestError, IngestSettings, Ingested, PortErrorKind,
    Receipt, delivery_key,
};
use crate::testkit::memory::{MemoryKeys, MemoryLedger, MemoryQueue, MemoryResources};
use crate::wire::signature::{
    Environment, SignatureError, SigningKey, Verifier, WebhookSecret, signature_header,
};
use crate::wire::work::WorkItem;

const NOW_MS: u64 = 1_800_000_000_000;
const LIVE: &str = "whsec_live_0123456789abcdef";

struct Rig {
    ingest: Ingest<Arc<MemoryLedger>, Arc<MemoryQueue>>,
    ledger: Arc<MemoryLedger>,
    queue: Arc<MemoryQueue>,
}

fn rig() -> Rig {
    let secret = WebhookSecret::new(LIVE);
    let verifier = Verifier::new(vec![SigningKey::new("live", &secret)], 300);
    let ledger = Arc::new(MemoryLedger::new());
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        verifier,
        Arc::clone(&ledger),
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    Rig {
        ingest,
        ledger,
        queue,
    }
}

fn body(event_id: &str, extra: &str) -> Vec<u8> {
    format!(
        r#"{{"event_id":"{event_id}","event_type":"invoice.paid","version":1,"occurred_at":1800000000,"data":{{"invoice_id":"inv_1"{extra}}}}}"#
    )
    .into_bytes()
}

fn signed(body: &[u8]) -> String {
    signature_header(NOW_MS / 1000, body, &[&WebhookSecret::new(LIVE)])
}

impl Rig {
    async fn post(&self, body: &[u8], at_ms: u64) -> Result<Ingested, IngestError> {
        let signature = signed(body);
        let req = Inbound {
            method: "POST",
            signature: Some(&signature),
            webhook_id: None,
            body,
        };
        self.ingest.handle(&req, at_ms).await.map(|r| r.ingested)
    }
}

const LEASE_MS: u64 = crate::roads::ingest::DEFAULT_LEASE_SECS * 1000;

#[tokio::test]
async fn a_new_delivery_is_recorded_then_sent() {
    let rig = rig();
    assert_eq!(
        rig.post(&body("evt_1", ""), NOW_MS).await,
        Ok(Ingested::New)
    );
    let record = rig.ledger.get("evt_1").expect("recorded");
    assert_eq!(record.state, DeliveryState::Received);
    assert_eq!(record.lease_until_ms, NOW_MS + LEASE_MS);
    assert_eq!(rig.queue.sent().len(), 1);
}

#[tokio::test]
async fn duplicates_by_state_and_lease() {
    // (what happened to the first attempt, when the second arrives, answer, sends in all)
    type Case = (&'static str, bool, u64, Result<bool, u16>, usize);
    let cases: [Case; 4] = [
        ("processed", true, 1, Ok(false), 1),
        ("still in its lease", false, LEASE_MS - 1, Err(503), 1),
        (
            "its lease ran out: taken over and sent again",
            false,
            LEASE_MS + 1,
            Ok(true),
            2,
        ),
        ("processed long after", true, LEASE_MS * 10, Ok(false), 1),
    ];
    for (name, processed, later_ms, expected, sends) in cases {
        let rig = rig();
        rig.post(&body("evt_1", ""), NOW_MS).await.unwrap();
        if processed {
            rig.ledger.mark_processed("evt_1");
        }
        let answer = rig.post(&body("evt_1", ""), NOW_MS + later_ms).await;
        let answer = answer.map_err(|e| e.status()).map(|i| match i {
            Ingested::Duplicate {
                resent,
                body_conflict,
            } => {
                assert!(!body_conflict, "{name}");
                resent
            }
            Ingested::New => panic!("{name}: a second record"),
        });
        assert_eq!(answer, expected, "{name}");
        assert_eq!(rig.queue.sent().len(), sends, "{name}");
        assert_eq!(rig.ledger.len(), 1, "{name}");
    }
}

#[tokio::test]
async fn the_first_body_wins_and_the_conflict_is_noted() {
    let rig = rig();
    rig.post(&body("evt_1", ""), NOW_MS).await.unwrap();
    rig.ledger.mark_processed("evt_1");
    let other = body("evt_1", r#","note":"changed""#);
    let answer = rig.post(&other, NOW_MS + 1).await.unwrap();
    assert_eq!(
        answer,
        Ingested::Duplicate {
            resent: false,
            body_conflict: true
        }
    );
    assert_eq!(rig.ledger.conflicts(), ["evt_1"]);
    assert_eq!(
        rig.ledger.get("evt_1").unwrap().delivery.body,
        body("evt_1", "")
    );
}

#[tokio::test]
async fn a_failed_send_answers_503_and_frees_the_lease_for_the_next_attempt() {
    let rig = rig();
    // A first attempt queues the work and its check before the record (issue 51): when that
    // send fails, nothing is recorded.
    rig.queue.fail_next(1);
    let error = rig.post(&body("evt_1", ""), NOW_MS).await.unwrap_err();
    assert_eq!(error.status(), 503);
    assert!(matches!(&error, IngestError::Unavailable(e) if e.kind == PortErrorKind::Unavailable));
    assert!(rig.ledger.get("evt_1").is_none());
    // A retry records first, then sends: when its send fails, its lease is released.
    rig.queue.fail_next(1);
    let error = rig
        .post(&body("evt_1", ""), NOW_MS + 500)
        .await
        .unwrap_err();
    assert_eq!(error.status(), 503);
    assert_eq!(
        rig.ledger.get("evt_1").unwrap().lease_until_ms,
        0,
        "released"
    );
    let retry = rig.post(&body("evt_1", ""), NOW_MS + 1_000).await;
    assert_eq!(
        retry,
        Ok(Ingested::Duplicate {
            resent: true,
            body_conflict: false
        })
    );
    assert_eq!(rig.queue.sent().len(), 1);
}

#[tokio::test]
async fn refused_requests_write_nothing() {
    let good = body("evt_1", "");
    let signature = signed(&good);
    let forged = signed(&body("evt_2", ""));
    let big = vec![b' '; crate::roads::ingest::DEFAULT_MAX_BODY_BYTES + 1];
    let sandbox = body("evt_1", r#","is_test":true"#);
    let sandbox_signature = signed(&sandbox);
    let cases: [(&str, Inbound<'_>, u16); 6] = [
        (
            "GET",
            Inbound {
                method: "GET",
                signature: Some(&signature),
                webhook_id: None,
                body: &good,
            },
            405,
        ),
        (
            "no signature",
            Inbound {
                method: "POST",
                signature: None,
                webhook_id: None,
                body: &good,
            },
            401,
        ),
        (
            "another body's signature",
            Inbound {
                method: "POST",
                signature: Some(&forged),
                webhook_id: None,
                body: &good,
            },
            401,
        ),
        (
            "too large",
            Inbound {
                method: "POST",
                signature: Some(&signature),
                webhook_id: None,
                body: &big,
            },
            413,
        ),
        (
            "X-Webhook-Id differs",
            Inbound {
                method: "POST",
                signature: Some(&signature),
                webhook_id: Some("evt_9"),
                body: &good,
            },
            400,
        ),
        (
            "a sandbox body under a live secret",
            Inbound {
                method: "POST",
                signature: Some(&sandbox_signature),
                webhook_id: None,
                body: &sandbox,
            },
            403,
        ),
    ];
    for (name, req, status) in cases {
        let rig = rig();
        let error = rig.ingest.handle(&req, NOW_MS).await.unwrap_err();
        assert_eq!(error.status(), status, "{name}: {error}");
        assert_eq!(rig.ledger.calls(), 0, "{name}: no write");
        assert!(rig.queue.sent().is_empty(), "{name}");
    }
}

#[test]
fn port_failures_answer_5xx_by_kind() {
    use crate::roads::ingest::PortError;
    for (kind, status) in [
        (PortErrorKind::Unavailable, 503),
        (PortErrorKind::Throttled, 503),
        (PortErrorKind::Conflict, 503),
        (PortErrorKind::Misconfigured, 500),
    ] {
        let error = IngestError::Unavailable(PortError::of_kind("DynamoDB PutItem", kind, "x"));
        assert_eq!(error.status(), status, "{kind}");
        assert_eq!(error.code(), kind.as_str());
    }
}

#[tokio::test]
async fn a_sandbox_delivery_reusing_a_live_id_never_blocks_the_live_one() {
    let verifier = Verifier::new(
        vec![
            SigningKey::new("live", &WebhookSecret::new(LIVE)),
            SigningKey::new("test", &WebhookSecret::new(TEST)),
        ],
        300,
    );
    let ledger = Arc::new(MemoryLedger::new());
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        verifier,
        Arc::clone(&ledger),
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    let fulfil = crate::tests::one_shop(MemoryResources::new());
    let post = |body: Vec<u8>, secret: &'static str| {
        let ingest = &ingest;
        async move {
            let signature = signature_header(NOW_MS / 1000, &body, &[&WebhookSecret::new(secret)]);
            let req = Inbound {
                method: "POST",
                signature: Some(&signature),
                webhook_id: None,
                body: &body,
            };
            ingest.handle(&req, NOW_MS).await.map(|r| r.ingested)
        }
    };
    let apply = |delivery: &Delivery| {
        let item = WorkItem {
            event_id: delivery.event_id.clone(),
            environment: delivery.environment,
            body: delivery.body.clone(),
            received_at_ms: Some(delivery.received_at_ms),
        };
        let fulfil = &fulfil;
        async move {
            fulfil
                .apply(&item, NOW_MS)
                .await
                .map(|(_, applied)| applied)
        }
    };
    let order = r#","order":{"external_id":"o-1","amount":"10.50","currency":"USD"}"#;
    // A sandbox delivery takes the id first and is processed (it changes nothing live).
    let sandbox = body("evt_x", &format!(r#","is_test":true{order}"#));
    let live = body("evt_x", &format!(r#","is_test":false{order}"#));
    let sandbox_key = delivery_key(Some(Environment::Test), "evt_x");
    assert_eq!(post(sandbox.clone(), TEST).await, Ok(Ingested::New));
    assert_eq!(apply(&queue.sent()[0]).await, Ok(Applied::OtherEnvironment));
    // The genuine live delivery of the same id: recorded under its own key, sent, applied.
    let receipt = post_receipt(&ingest, &live, LIVE).await.unwrap();
    assert_eq!(receipt.ingested, Ingested::New);
    assert!(receipt.cross_environment, "the reuse of the id is counted");
    let record = ledger
        .get("evt_x")
        .expect("the live delivery keeps the plain key");
    assert_eq!(record.delivery.environment, Some(Environment::Live));
    let record = ledger
        .get(&sandbox_key)
        .expect("the sandbox one has its own");
    assert_eq!(record.delivery.environment, Some(Environment::Test));
    assert_eq!(queue.sent().len(), 2);
    assert_eq!(apply(&queue.sent()[1]).await, Ok(Applied::Fulfilled));
    assert_eq!(fulfil.store().fulfilled(), ["inv_1"]);
    // Each one's retry is a duplicate of its own record, nothing more.
    ledger.mark_processed("evt_x");
    ledger.mark_processed(&sandbox_key);
    assert!(matches!(
        post(live, LIVE).await,
        Ok(Ingested::Duplicate { resent: false, .. })
    ));
    assert!(matches!(
        post(sandbox, TEST).await,
        Ok(Ingested::Duplicate { resent: false, .. })
    ));
    assert_eq!(queue.sent().len(), 2);
    assert!(ledger.conflicts().is_empty());
}

#[tokio::test]
async fn the_reuse_of_an_id_is_counted_in_either_order_and_looked_for_only_when_possible() {
    let both = Verifier::new(
        vec![
            SigningKey::new("live", &WebhookSecret::new(LIVE)),
            SigningKey::new("test", &WebhookSecret::new(TEST)),
        ],
        300,
    );
    let ledger = Arc::new(MemoryLedger::new());
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        both,
        Arc::clone(&ledger),
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    // Live first, then a sandbox delivery with its id: both recorded, the second counted.
    let live = body("evt_y", r#","is_test":false"#);
    let sandbox = body("evt_y", r#","is_test":true"#);
    let first = post_receipt(&ingest, &live, LIVE).await.unwrap();
    assert_eq!(
        (first.ingested, first.cross_environment),
        (Ingested::New, false)
    );
    let second = post_receipt(&ingest, &sandbox, TEST).await.unwrap();
    assert_eq!(
        (second.ingested, second.cross_environment),
        (Ingested::New, true)
    );
    assert_eq!((ledger.len(), queue.sent().len()), (2, 2));

    // A stack holding only live secrets can record no sandbox delivery: it never looks.
    let rig = rig();
    let receipt = post_receipt(&rig.ingest, &live, LIVE).await.unwrap();
    assert!(!receipt.cross_environment);
    assert_eq!(rig.ledger.calls(), 1, "the one conditional write, no read");
}

/// Posts `body` signed with `secret` at [`NOW_MS`]; the whole receipt.
async fn post_receipt<
    L: crate::roads::ingest::DeliveryLedger,
    Q: crate::roads::ingest::WorkQueue,
>(
    ingest: &Ingest<L, Q>,
    body: &[u8],
    secret: &str,
) -> Result<Receipt, IngestError> {
    let signature = signature_header(NOW_MS / 1000, body, &[&WebhookSecret::new(secret)]);
    let req = Inbound {
        method: "POST",
        signature: Some(&signature),
        webhook_id: None,
        body,
    };
    ingest.handle(&req, NOW_MS).await
}

/// A body of exactly `len` bytes for `event_id`, padded inside its `data`.
fn body_of_len(event_id: &str, len: usize) -> Vec<u8> {
    let bare = body(event_id, r#","pad":"""#).len();
    body(event_id, &format!(r#","pad":"{}""#, "x".repeat(len - bare)))
}

#[tokio::test]
async fn a_body_at_the_size_limit_is_recorded_and_one_byte_more_is_refused_unwritten() {
    let rig = rig();
    let limit = crate::roads::ingest::DEFAULT_MAX_BODY_BYTES;
    assert_eq!(
        limit,
        128 * 1024,
        "Paymos bodies are 1–3 KiB; the default leaves room"
    );
    let at_limit = body_of_len("evt_big", limit);
    assert_eq!(at_limit.len(), limit);
    assert_eq!(rig.post(&at_limit, NOW_MS).await, Ok(Ingested::New));
    let over = body_of_len("evt_bigger", limit + 1);
    assert_eq!(
        rig.post(&over, NOW_MS).await,
        Err(IngestError::PayloadTooLarge {
            size: limit + 1,
            limit
        })
    );
    assert_eq!(
        rig.ledger.len(),
        1,
        "only the body at the limit is recorded"
    );
    assert_eq!(rig.queue.sent().len(), 1);
}

#[tokio::test]
async fn a_duplicate_inside_the_lease_is_told_to_retry_when_the_lease_ends() {
    // (ms after the first attempt, the Retry-After it is told): rounded up, never 0.
    for (later_ms, retry_after) in [(1, 30), (999, 30), (1_000, 29), (29_000, 1), (29_999, 1)] {
        let rig = rig();
        rig.post(&body("evt_1", ""), NOW_MS).await.unwrap();
        let error = rig
            .post(&body("evt_1", ""), NOW_MS + later_ms)
            .await
            .unwrap_err();
        let answer = error.answer();
        assert_eq!(
            (answer.status, answer.retry_after_secs),
            (503, Some(retry_after)),
            "{later_ms} ms after"
        );
        assert_eq!(
            rig.queue.sent().len(),
            1,
            "{later_ms} ms after: not sent again"
        );
    }
}

#[tokio::test]
async fn the_lease_ends_at_its_last_millisecond_and_a_take_over_holds_a_fresh_one() {
    let rig = rig();
    rig.post(&body("evt_1", ""), NOW_MS).await.unwrap();
    let end = NOW_MS + LEASE_MS;
    let early = rig.post(&body("evt_1", ""), end - 1).await.unwrap_err();
    assert_eq!(early.answer().retry_after_secs, Some(1));
    assert_eq!(
        rig.post(&body("evt_1", ""), end).await,
        Ok(Ingested::Duplicate {
            resent: true,
            body_conflict: false
        }),
        "at the lease's end the first attempt is gone: taken over"
    );
    assert_eq!(rig.queue.sent().len(), 2);
    assert_eq!(
        rig.ledger.get("evt_1").unwrap().lease_until_ms,
        end + LEASE_MS
    );
    // The attempt that took it over may still be sending: the next one waits a whole lease.
    let next = rig.post(&body("evt_1", ""), end + 1).await.unwrap_err();
    assert_eq!(
        (next.status(), next.answer().retry_after_secs),
        (503, Some(30))
    );
    assert_eq!(rig.queue.sent().len(), 2);
}

/// Posts `body` signed with `secret` at `at_ms`, re-reading the secrets from `source` when no
/// configured one verifies it.
async fn post_with_keys(
    ingest: &Ingest<Arc<MemoryLedger>, Arc<MemoryQueue>>,
    body: &[u8],
    secret: &str,
    at_ms: u64,
    source: &MemoryKeys,
) -> Result<Receipt, IngestError> {
    let signature = signature_header(at_ms / 1000, body, &[&WebhookSecret::new(secret)]);
    let req = Inbound {
        method: "POST",
        signature: Some(&signature),
        webhook_id: None,
        body,
    };
    ingest.handle_with_keys(&req, at_ms, source).await
}

fn live_key(secret: &str) -> SigningKey {
    SigningKey::new("live", &WebhookSecret::new(secret))
}

#[tokio::test]
async fn after_a_rotation_the_new_secret_verifies_on_a_warm_instance_and_the_old_one_is_gone() {
    const ROTATED: &str = "whsec_live_rotated_0123456789";
    let rig = rig();
    // The instance started with LIVE; the secret store now holds only the rotated secret.
    let source = MemoryKeys::new(vec![live_key(ROTATED)]);
    let new = post_with_keys(&rig.ingest, &body("evt_1", ""), ROTATED, NOW_MS, &source).await;
    assert_eq!(new.map(|r| r.ingested), Ok(Ingested::New));
    assert_eq!(source.reads(), 1, "one read, then verified");
    assert_eq!(
        rig.ledger.get("evt_1").unwrap().delivery.secret_label,
        "live"
    );
    // The new set keeps the tolerance: a delivery signed five minutes ago still verifies.
    let late = body("evt_3", "");
    let signature = signature_header(NOW_MS / 1000 - 299, &late, &[&WebhookSecret::new(ROTATED)]);
    let req = Inbound {
        method: "POST",
        signature: Some(&signature),
        webhook_id: None,
        body: &late,
    };
    let answer = rig
        .ingest
        .handle_with_keys(&req, NOW_MS + 1_000, &source)
        .await;
    assert_eq!(answer.map(|r| r.ingested), Ok(Ingested::New));
    let old = post_with_keys(
        &rig.ingest,
        &body("evt_2", ""),
        LIVE,
        NOW_MS + 1_000,
        &source,
    )
    .await;
    assert!(
        matches!(
            old,
            Err(IngestError::Signature(
                SignatureError::SignatureMismatch { .. }
            ))
        ),
        "{old:?}"
    );
    assert_eq!(rig.ledger.len(), 2);
}

#[tokio::test]
async fn forged_signatures_reread_the_secrets_at_most_once_a_minute() {
    let rig = rig();
    let source = MemoryKeys::new(vec![live_key(LIVE)]);
    let forged = |i: u64| body(&format!("evt_forged{i}"), "");
    // No signature at all is no sign of a rotation: nothing is read.
    let req = Inbound {
        method: "POST",
        signature: None,
        webhook_id: None,
        body: &forged(0),
    };
    let missing = rig.ingest.handle_with_keys(&req, NOW_MS, &source).await;
    assert_eq!(missing.unwrap_err().status(), 401);
    assert_eq!(source.reads(), 0);
    // (ms after the first forgery, reads in all): the window is one minute, its end included.
    for (after_ms, reads) in [(0, 1), (1, 1), (59_999, 1), (60_000, 2), (60_001, 2)] {
        let answer = post_with_keys(
            &rig.ingest,
            &forged(after_ms),
            "whsec_live_attacker",
            NOW_MS + after_ms,
            &source,
        )
        .await;
        assert_eq!(answer.unwrap_err().status(), 401, "{after_ms} ms after");
        assert_eq!(source.reads(), reads, "{after_ms} ms after");
    }
    assert!(rig.ledger.is_empty());
    // The secrets did not change: the genuine one still verifies.
    let genuine = post_with_keys(&rig.ingest, &body("evt_1", ""), LIVE, NOW_MS, &source).await;
    assert_eq!(genuine.map(|r| r.ingested), Ok(Ingested::New));
}

const TEST: &str = "whsec_test_0123456789abcdef";

/// Ingest holding the live and the sandbox secret, on `ledger`.
fn both_environments<L: crate::roads::ingest::DeliveryLedger>(
    ledger: L,
) -> (Ingest<L, Arc<MemoryQueue>>, Arc<MemoryQueue>) {
    let verifier = Verifier::new(
        vec![
            live_key(LIVE),
            SigningKey::new("test", &WebhookSecret::new(TEST)),
        ],
        300,
    );
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        verifier,
        ledger,
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    (ingest, queue)
}

#[tokio::test]
async fn the_reuse_of_an_id_is_counted_once_when_found_not_on_every_retry() {
    let ledger = Arc::new(MemoryLedger::new());
    let (ingest, queue) = both_environments(Arc::clone(&ledger));
    let live = body("evt_y", r#","is_test":false"#);
    let sandbox = body("evt_y", r#","is_test":true"#);
    post_receipt(&ingest, &live, LIVE).await.unwrap();
    let reuse = post_receipt(&ingest, &sandbox, TEST).await.unwrap();
    assert!(reuse.cross_environment);
    let sandbox_key = delivery_key(Some(Environment::Test), "evt_y");
    ledger.mark_processed(&sandbox_key);
    ledger.mark_processed("evt_y");
    let calls = ledger.calls();
    for (body, secret) in [(&sandbox, TEST), (&live, LIVE)] {
        let retry = post_receipt(&ingest, body, secret).await.unwrap();
        assert!(
            matches!(retry.ingested, Ingested::Duplicate { .. }),
            "{secret}"
        );
        assert!(
            !retry.cross_environment,
            "{secret}: counted when it was new"
        );
    }
    assert_eq!(
        ledger.calls(),
        calls + 2,
        "a retry costs its one conditional write, no read"
    );
    assert_eq!(queue.sent().len(), 2);
}

/// A ledger holding, besides `ledger`'s records, one `old` record under its bare `event_id`: a
/// sandbox delivery recorded before the environment was part of the key.
struct WithOldRecord {
    ledger: MemoryLedger,
    old: crate::roads::ingest::ExistingDelivery,
}

impl crate::roads::ingest::DeliveryLedger for WithOldRecord {
    async fn record(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
    ) -> Result<crate::roads::ingest::Recorded, crate::roads::ingest::PortError> {
        if delivery.key() == self.old.delivery.event_id {
            return Ok(crate::roads::ingest::Recorded::Existing(Box::new(
                self.old.clone(),
            )));
        }
        self.ledger.record(delivery, lease_until_ms).await
    }

    async fn find(
        &self,
        key: &str,
    ) -> Result<Option<crate::roads::ingest::ExistingDelivery>, crate::roads::ingest::PortError>
    {
        if key == self.old.delivery.event_id {
            return Ok(Some(self.old.clone()));
        }
        self.ledger.find(key).await
    }

    async fn take_over(
        &self,
        key: &str,
        seen_lease_ms: u64,
        new_lease_ms: u64,
    ) -> Result<crate::roads::ingest::TakeOver, crate::roads::ingest::PortError> {
        self.ledger
            .take_over(key, seen_lease_ms, new_lease_ms)
            .await
    }

    async fn release(
        &self,
        key: &str,
        lease_ms: u64,
    ) -> Result<(), crate::roads::ingest::PortError> {
        self.ledger.release(key, lease_ms).await
    }

    async fn mark_conflict(
        &self,
        key: &str,
        body_sha256: &str,
        at_ms: u64,
    ) -> Result<(), crate::roads::ingest::PortError> {
        self.ledger.mark_conflict(key, body_sha256, at_ms).await
    }
}

#[tokio::test]
async fn a_sandbox_record_keyed_before_the_environment_is_no_reuse_and_refuses_a_live_one_by_name()
{
    let sandbox = body("evt_old", r#","is_test":true"#);
    // What the sandbox delivery recorded then: its environment, under the bare id.
    let (recorder, _) = both_environments(MemoryLedger::new());
    let mut old = recorder
        .admit(
            &Inbound {
                method: "POST",
                signature: Some(&signature_header(
                    NOW_MS / 1000,
                    &sandbox,
                    &[&WebhookSecret::new(TEST)],
                )),
                webhook_id: None,
                body: &sandbox,
            },
            NOW_MS,
        )
        .unwrap();
    old.received_at_ms -= 86_400_000;
    let old = crate::roads::ingest::ExistingDelivery {
        delivery: old,
        state: DeliveryState::Processed,
        lease_until_ms: 0,
    };
    let (ingest, queue) = both_environments(WithOldRecord {
        ledger: MemoryLedger::new(),
        old,
    });
    // Its own environment's delivery, under today's key: recorded, and no reuse to count.
    let again = post_receipt(&ingest, &sandbox, TEST).await.unwrap();
    assert_eq!(
        (again.ingested, again.cross_environment),
        (Ingested::New, false)
    );
    // A live delivery of that id finds the sandbox record under its own key: refused, named.
    let live = body("evt_old", r#","is_test":false"#);
    let refused = post_receipt(&ingest, &live, LIVE).await.unwrap_err();
    assert_eq!(
        refused,
        IngestError::EnvironmentConflict {
            recorded: "test".into(),
            received: "live".into()
        }
    );
    assert_eq!(refused.status(), 409);
    assert_eq!(queue.sent().len(), 1, "only the sandbox delivery was sent");
}

#[tokio::test]
async fn a_live_delivery_of_an_id_an_unlabelled_secret_recorded_is_refused_and_names_both() {
    const UNLABELLED: &str = "whsec_0123456789abcdef";
    let verifier = Verifier::new(
        vec![
            SigningKey::new("primary", &WebhookSecret::new(UNLABELLED)),
            live_key(LIVE),
        ],
        300,
    );
    let ledger = Arc::new(MemoryLedger::new());
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        verifier,
        Arc::clone(&ledger),
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    let first = post_receipt(&ingest, &body("evt_u", ""), UNLABELLED)
        .await
        .unwrap();
    assert_eq!(first.ingested, Ingested::New);
    assert_eq!(ledger.get("evt_u").unwrap().delivery.environment, None);
    let refused = post_receipt(&ingest, &body("evt_u", ""), LIVE)
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        IngestError::EnvironmentConflict {
            recorded: "unlabelled".into(),
            received: "live".into()
        }
    );
    assert_eq!(
        ledger.get("evt_u").unwrap().delivery.environment,
        None,
        "the record is kept as it was"
    );
    assert_eq!(queue.sent().len(), 1);
}

// ---- Issue 51: a delivery's delayed check, queued with its work, instead of a listing of
// every delivery at its receipt. ----

mod checks {
    use super::*;
    use crate::roads::fulfil::Checked;
    use crate::roads::ingest::DEFAULT_CHECK_AFTER_SECS;
    use crate::roads::sweep::sweep_stranded;
    use crate::wire::work::Check;

    const MINUTE: u64 = 60_000;

    /// The scheduled sweep at `now_ms`, with its defaults (records 10 minutes old), reading the
    /// stragglers' list alone (the memory ledger has no other way to find a record).
    async fn sweep(rig: &Rig, now_ms: u64) -> crate::roads::sweep::Swept {
        sweep_stranded(
            rig.ledger.as_ref(),
            rig.queue.as_ref(),
            30,
            now_ms - 10 * MINUTE,
            now_ms,
            100,
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_new_delivery_queues_its_check_with_its_work_and_is_listed_nowhere() {
        let rig = rig();
        assert_eq!(
            rig.post(&body("evt_1", ""), NOW_MS).await,
            Ok(Ingested::New)
        );
        assert_eq!(rig.queue.sent().len(), 1, "its work");
        assert_eq!(
            rig.queue.checks(),
            [("evt_1".to_owned(), DEFAULT_CHECK_AFTER_SECS)],
            "its check, due in 10 minutes"
        );
        assert!(
            !rig.ledger.is_listed("evt_1"),
            "no index write for a delivery that will be processed"
        );
    }

    // The guarantee the dense index gave: a delivery whose sender gave up, and whose fulfil
    // keeps failing for longer than the check's delay, is found and applied without a scan.
    #[tokio::test]
    async fn a_delivery_whose_sender_gave_up_and_whose_fulfil_keeps_failing_is_found_by_its_check_and_applied()
     {
        let rig = rig();
        let paid = body(
            "evt_1",
            r#","order":{"external_id":"order-1","amount":"10","currency":"USDT"}"#,
        );
        // Acknowledged once; the sender never comes back. Fulfil fails on every receive.
        assert_eq!(rig.post(&paid, NOW_MS).await, Ok(Ingested::New));
        // Before its check is due, the sweep's list holds nothing: it sends nothing.
        assert_eq!(sweep(&rig, NOW_MS + 10 * MINUTE - 1).await.found, 0);
        // The check comes due (its message timer): the record is still `received`.
        let (key, due_s) = rig.queue.checks()[0].clone();
        let at = NOW_MS + u64::from(due_s) * 1000;
        let fulfil = crate::tests::one_shop(Arc::clone(&rig.ledger));
        let check = Check::of("evt_1", Some(Environment::Live));
        assert_eq!(check.key(), key);
        assert_eq!(fulfil.check_delivery(&check).await, Ok(Checked::Straggler));
        assert!(rig.ledger.is_listed("evt_1"));
        // A second receive of the same check (SQS delivers at least once) writes nothing more.
        assert_eq!(fulfil.check_delivery(&check).await, Ok(Checked::Listed));
        // The sweep sends it again from the list, spaced as any straggler, while fulfil fails.
        let mut resent = Vec::new();
        for run in 0..24 {
            let now = at + run * 5 * MINUTE;
            if sweep(&rig, now).await.resent == 1 {
                resent.push((now - NOW_MS) / MINUTE);
            }
        }
        // As the dense index had it: first at the first run a check and 10 minutes allow.
        assert_eq!(resent, [15, 35, 75], "sent at widening spaces, never lost");
        // Fulfil recovers: the copy it receives is applied, and the record leaves the list.
        let copy = rig.queue.sent().last().cloned().unwrap();
        assert_eq!(copy.event_id, "evt_1");
        assert_eq!(copy.body, paid, "sent with its body");
        let applied = crate::tests::one_shop(MemoryResources::default())
            .apply(
                &WorkItem {
                    event_id: copy.event_id.clone(),
                    environment: copy.environment,
                    body: copy.body.clone(),
                    received_at_ms: Some(copy.received_at_ms),
                },
                at + 2 * 60 * MINUTE,
            )
            .await
            .unwrap()
            .1;
        assert_eq!(applied, Applied::Fulfilled);
        rig.ledger.mark_processed("evt_1");
        assert!(!rig.ledger.is_listed("evt_1"));
        assert_eq!(sweep(&rig, at + 3 * 60 * MINUTE).await.found, 0);
    }

    // A check that is never queued (the batch's check entry refused) is never waited for: the
    // record is listed at its put, and the sweep, the backstop, finds it with no check at all.
    #[tokio::test]
    async fn a_delivery_whose_check_was_lost_is_listed_at_its_put_and_found_by_the_sweep() {
        let rig = rig();
        rig.queue.refuse_next_checks(1);
        assert_eq!(
            rig.post(&body("evt_1", ""), NOW_MS).await,
            Ok(Ingested::New)
        );
        assert!(rig.queue.checks().is_empty(), "its check was lost");
        assert!(rig.ledger.is_listed("evt_1"));
        let swept = sweep(&rig, NOW_MS + 15 * MINUTE).await;
        assert_eq!((swept.found, swept.resent), (1, 1));
        assert_eq!(rig.queue.sent().len(), 2, "its work, then the sweep's copy");
    }

    // A retry of bytes an earlier attempt kept queues no check (its work and check may be
    // queued already, or the attempt died before): its record is listed at its put.
    #[tokio::test]
    async fn a_retry_after_a_failed_send_is_listed_at_its_put() {
        let rig = rig();
        rig.queue.fail_next(1);
        assert!(rig.post(&body("evt_1", ""), NOW_MS).await.is_err());
        assert!(rig.ledger.get("evt_1").is_none(), "nothing recorded: 503");
        assert_eq!(
            rig.post(&body("evt_1", ""), NOW_MS + MINUTE).await,
            Ok(Ingested::New)
        );
        assert!(rig.ledger.is_listed("evt_1"));
        assert!(rig.queue.checks().is_empty());
        assert_eq!(rig.queue.sent().len(), 1, "its work, after its put");
    }

    #[tokio::test]
    async fn a_check_of_a_processed_or_unrecorded_delivery_writes_nothing() {
        let rig = rig();
        rig.post(&body("evt_1", ""), NOW_MS).await.unwrap();
        rig.ledger.mark_processed("evt_1");
        let fulfil = crate::tests::one_shop(Arc::clone(&rig.ledger));
        let live = Some(Environment::Live);
        assert_eq!(
            fulfil.check_delivery(&Check::of("evt_1", live)).await,
            Ok(Checked::Processed)
        );
        assert_eq!(
            fulfil.check_delivery(&Check::of("evt_2", live)).await,
            Ok(Checked::NotRecorded)
        );
        assert!(!rig.ledger.is_listed("evt_1"));
    }
}

// ---- A delivery's work is queued before its record's put (issue 51): fulfil applies only the
// delivery its record holds. ----

mod recorded_only {
    use super::*;
    use crate::money::write::{Fields, Key, Stored, Table, Write};
    use crate::port::PortError;
    use crate::roads::fulfil::ResourceStore;

    /// Fulfil's store as DynamoDB's is: the ledger's records as ingest wrote them, and the
    /// state table (with the ledger's marks) in the resources' twin.
    struct Tables {
        ledger: Arc<MemoryLedger>,
        resources: MemoryResources,
    }

    impl ResourceStore for Tables {
        async fn write(&self, writes: &[Write]) -> Result<Stored, PortError> {
            let stored = self.resources.write(writes).await?;
            if stored == Stored::Committed {
                for w in writes.iter().filter(|w| w.key.table == Table::Ledger) {
                    self.ledger.write(std::slice::from_ref(w)).await?;
                }
            }
            Ok(stored)
        }

        async fn read(&self, key: &Key) -> Result<Option<Fields>, PortError> {
            if key.table == Table::Ledger {
                return self.ledger.read(key).await;
            }
            self.resources.read(key).await
        }
    }

    fn paid(order: &str, amount: &str) -> Vec<u8> {
        body(
            "evt_1",
            &format!(
                r#","order":{{"external_id":"{order}","amount":"{amount}","currency":"USDT"}}"#
            ),
        )
    }

    fn work(delivery: &Delivery) -> WorkItem {
        WorkItem {
            event_id: delivery.event_id.clone(),
            environment: delivery.environment,
            body: delivery.body.clone(),
            received_at_ms: Some(delivery.received_at_ms),
        }
    }

    // Two signed bodies under one event_id: the second's work is queued before its put, which
    // the first's record refuses. Whichever fulfil receives first, only the recorded body is
    // applied: one fulfilment, the first body's order and amount.
    #[tokio::test]
    async fn a_second_body_under_a_recorded_event_id_is_never_applied() {
        for second_first in [true, false] {
            let rig = rig();
            let first = paid("order-1", "10");
            let second = paid("order-2", "99");
            assert_eq!(rig.post(&first, NOW_MS).await, Ok(Ingested::New));
            let _ = rig.post(&second, NOW_MS + 1).await;
            let mut queued = rig.queue.sent();
            assert_eq!(queued.len(), 2, "the second body's work was queued too");
            assert_eq!(queued[1].body, second);
            if second_first {
                queued.reverse();
            }
            let fulfil = crate::tests::one_shop(Tables {
                ledger: Arc::clone(&rig.ledger),
                resources: MemoryResources::default(),
            });
            let mut applied = Vec::new();
            for delivery in &queued {
                let done = fulfil.apply_queued(&work(delivery), NOW_MS + 2, 1).await;
                applied.push(done.unwrap().map(|(_, a)| a));
            }
            let resources = &fulfil.store().resources;
            assert_eq!(
                resources.fulfilments(),
                [("inv_1".to_owned(), Some("order-1".to_owned()))],
                "second first: {second_first}"
            );
            let invoice = resources.invoice("inv_1").unwrap();
            assert_eq!(
                invoice.order.amount.map(|a| a.to_string()),
                Some("10".to_owned()),
                "second first: {second_first}"
            );
            let expected = if second_first {
                [None, Some(Applied::Fulfilled)]
            } else {
                [Some(Applied::Fulfilled), None]
            };
            assert_eq!(applied, expected, "second first: {second_first}");
        }
    }

    // Fulfil may receive a new delivery's work before its record's put: it applies nothing
    // then, and the work comes back and is applied once the record exists. A work item whose
    // attempt never recorded it (the sender answered a failure) is dropped at its last
    // receive, never applied and never sent to the DLQ.
    #[tokio::test]
    async fn a_work_item_is_applied_only_once_its_delivery_is_recorded() {
        let rig = rig();
        let fulfil = crate::tests::one_shop(Tables {
            ledger: Arc::clone(&rig.ledger),
            resources: MemoryResources::default(),
        });
        let body = paid("order-1", "10");
        let early = WorkItem {
            event_id: "evt_1".into(),
            environment: Some(Environment::Live),
            body: body.clone(),
            received_at_ms: Some(NOW_MS),
        };
        assert_eq!(
            fulfil.apply_queued(&early, NOW_MS, 1).await,
            Err(crate::roads::fulfil::FulfilError::NotRecorded)
        );
        let last = crate::wire::work::WORK_RECEIVES;
        assert_eq!(fulfil.apply_queued(&early, NOW_MS, last).await, Ok(None));
        assert!(fulfil.store().resources.fulfilments().is_empty());
        assert_eq!(rig.post(&body, NOW_MS).await, Ok(Ingested::New));
        let applied = fulfil.apply_queued(&early, NOW_MS + 1, 2).await.unwrap();
        assert_eq!(applied.map(|(_, a)| a), Some(Applied::Fulfilled));
        assert_eq!(
            fulfil.store().resources.fulfilments(),
            [("inv_1".to_owned(), Some("order-1".to_owned()))]
        );
    }

    // A second body arriving after the first attempt's lease ran out takes the record over:
    // what it sends again is the recorded body, never its own (whose work fulfil skips).
    #[tokio::test]
    async fn a_take_over_by_a_second_body_sends_the_recorded_body_again() {
        let rig = rig();
        let first = paid("order-1", "10");
        let second = paid("order-2", "99");
        assert_eq!(rig.post(&first, NOW_MS).await, Ok(Ingested::New));
        let answer = rig.post(&second, NOW_MS + LEASE_MS + 1).await;
        assert_eq!(
            answer,
            Ok(Ingested::Duplicate {
                resent: true,
                body_conflict: true
            })
        );
        let bodies: Vec<Vec<u8>> = rig.queue.sent().into_iter().map(|d| d.body).collect();
        assert_eq!(
            bodies,
            [first.clone(), second, first],
            "the recorded body, sent again"
        );
    }
}
