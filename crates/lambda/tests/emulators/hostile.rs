//! Hostile input: each request gets its precise status, causes no AWS call and leaves the
//! tables and the queue empty. Boundaries (exactly at the tolerance) are accepted.

use paymos_inbox_aws::dynamodb::DynamoLedger;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::ingest::respond;

use paymos_inbox_testkit::*;

const TOLERANCE: u64 = 300;

#[tokio::test]
async fn every_hostile_request_is_refused_precisely_with_zero_writes() {
    let aws = Aws::new();
    let table = aws.deliveries_table().await;
    let queue = aws.queue().await.queue_url;
    let ingest = Ingest::new(
        Verifier::new(
            vec![
                SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET)),
                SigningKey::new("test", &WebhookSecret::new(TEST_SECRET)),
            ],
            TOLERANCE,
        ),
        DynamoLedger::new(aws.dynamodb.clone(), &table, None),
        SqsQueue::new(aws.sqs.clone(), &queue),
        IngestSettings {
            max_body_bytes: 16 * 1024,
            ..IngestSettings::default()
        },
    );
    let body = invoice_paid("evt_hostile", "inv_hostile");
    let sig = sign(&body, NOW, &[LIVE_SECRET]);
    let v1 = sig.split_once(",v1=").unwrap().1.to_owned();
    let signed = |b: &str| sign(b, NOW, &[LIVE_SECRET]);
    let post = |b: &[u8], headers: &[(&str, &str)], base64: bool| {
        function_url_request("POST", headers, b, base64)
    };
    let with_sig = |b: &str, s: &str| {
        post(
            b.as_bytes(),
            &[("X-Webhook-Signature", s), ("X-Webhook-Id", "evt_hostile")],
            false,
        )
    };

    let hundred_v1 = format!("t={NOW}{}", ",v1=00".repeat(100));
    let huge_header = format!("t={NOW},v1={v1}{}", ",x=".repeat(64 * 1024 / 3));
    let not_utf8: Vec<u8> = b"{\"event_id\":\"evt_hostile\",\"x\":\"\xff\xfe\"}".to_vec();
    let not_utf8_sig = paymos_inbox_core::wire::signature::signature_header(
        NOW,
        &not_utf8,
        &[&WebhookSecret::new(LIVE_SECRET)],
    );
    let dup_keys = r#"{"event_id":"evt_hostile","event_id":"evt_other","event_type":"invoice.paid","version":1,"occurred_at":1,"data":{"invoice_id":"inv_1"}}"#;
    let dup_data_keys = r#"{"event_id":"evt_hostile","event_type":"invoice.paid","version":1,"occurred_at":1,"data":{"invoice_id":"inv_1","invoice_id":"inv_2"}}"#;
    let no_resource = r#"{"event_id":"evt_hostile","event_type":"withdrawal.completed","version":1,"occurred_at":1,"data":{"id":"wdr_1"}}"#;
    let version_zero = r#"{"event_id":"evt_hostile","event_type":"invoice.paid","version":0,"occurred_at":1,"data":{"invoice_id":"inv_1"}}"#;
    let sandbox_body = envelope(
        "evt_hostile",
        "invoice.paid",
        serde_json::json!({"invoice_id": "inv_1", "is_test": true}),
    );
    let live_body_test_secret = envelope(
        "evt_hostile",
        "invoice.paid",
        serde_json::json!({"invoice_id": "inv_1", "is_test": false}),
    );
    let too_big = format!(
        "{{\"event_id\":\"evt_hostile\",\"pad\":\"{}\"}}",
        "x".repeat(17 * 1024)
    );

    let cases: Vec<(&str, lambda_http::Request, u64, u16, &str)> = vec![
        (
            "no signature header",
            post(body.as_bytes(), &[("X-Webhook-Id", "evt_hostile")], false),
            NOW,
            401,
            "missing_signature",
        ),
        (
            "empty header",
            with_sig(&body, ""),
            NOW,
            401,
            "malformed_header",
        ),
        (
            "two t",
            with_sig(&body, &format!("t={NOW},t={NOW},v1={v1}")),
            NOW,
            401,
            "malformed_header",
        ),
        (
            "non-digit t",
            with_sig(&body, &format!("t=17e8,v1={v1}")),
            NOW,
            401,
            "malformed_header",
        ),
        (
            "negative t",
            with_sig(&body, &format!("t=-{NOW},v1={v1}")),
            NOW,
            401,
            "malformed_header",
        ),
        (
            "t at +tolerance+1",
            with_sig(&body, &sig),
            NOW + TOLERANCE + 1,
            401,
            "timestamp_outside_tolerance",
        ),
        (
            "t at -tolerance-1",
            with_sig(&body, &sig),
            NOW - TOLERANCE - 1,
            401,
            "timestamp_outside_tolerance",
        ),
        (
            "v1 of wrong length",
            with_sig(&body, &format!("t={NOW},v1={}", &v1[..62])),
            NOW,
            401,
            "signature_mismatch",
        ),
        (
            "v1 not hex",
            with_sig(&body, &format!("t={NOW},v1={}", "zz".repeat(32))),
            NOW,
            401,
            "signature_mismatch",
        ),
        (
            "100 v1 values",
            with_sig(&body, &hundred_v1),
            NOW,
            401,
            "malformed_header",
        ),
        (
            "header of 64 KiB",
            with_sig(&body, &huge_header),
            NOW,
            401,
            "malformed_header",
        ),
        (
            "body over the limit",
            with_sig(&too_big, &signed(&too_big)),
            NOW,
            413,
            "payload_too_large",
        ),
        (
            "body not UTF-8",
            post(&not_utf8, &[("X-Webhook-Signature", &not_utf8_sig)], true),
            NOW,
            400,
            "invalid_payload",
        ),
        (
            "duplicate keys",
            with_sig(dup_keys, &signed(dup_keys)),
            NOW,
            400,
            "invalid_payload",
        ),
        (
            "duplicate keys in data",
            with_sig(dup_data_keys, &signed(dup_data_keys)),
            NOW,
            400,
            "invalid_payload",
        ),
        (
            "header and body event ids disagree",
            post(
                body.as_bytes(),
                &[
                    ("X-Webhook-Signature", &sig),
                    ("X-Webhook-Id", "evt_forged"),
                ],
                false,
            ),
            NOW,
            400,
            "webhook_id_mismatch",
        ),
        (
            "missing resource id",
            with_sig(no_resource, &signed(no_resource)),
            NOW,
            400,
            "invalid_payload",
        ),
        (
            "version 0",
            with_sig(version_zero, &signed(version_zero)),
            NOW,
            400,
            "invalid_payload",
        ),
        (
            "live secret, sandbox event",
            with_sig(&sandbox_body, &signed(&sandbox_body)),
            NOW,
            403,
            "environment_mismatch",
        ),
        (
            "sandbox secret, live event",
            with_sig(
                &live_body_test_secret,
                &sign(&live_body_test_secret, NOW, &[TEST_SECRET]),
            ),
            NOW,
            403,
            "environment_mismatch",
        ),
        (
            "replay of a captured request an hour later",
            with_sig(&body, &sig),
            NOW + 3600,
            401,
            "timestamp_outside_tolerance",
        ),
        (
            "GET",
            function_url_request("GET", &[("X-Webhook-Signature", &sig)], b"", false),
            NOW,
            405,
            "method_not_allowed",
        ),
    ];
    for (name, request, now, status, code) in cases {
        aws.calls.reset();
        let response = respond(&ingest, &request, now * 1000).await;
        assert_eq!(response.status(), status, "{name}");
        assert_eq!(response_json(&response)["error"], code, "{name}");
        assert_eq!(aws.calls.total(), 0, "{name}: refused before any AWS call");
    }
    assert!(aws.scan(&table).await.is_empty(), "nothing was recorded");
    assert!(aws.drain(&queue).await.is_empty(), "nothing was enqueued");

    // The boundaries themselves are inside the tolerance.
    for (i, now) in [NOW + TOLERANCE, NOW - TOLERANCE].into_iter().enumerate() {
        let id = format!("evt_edge_{i}");
        let b = invoice_paid(&id, "inv_edge");
        let r = respond(
            &ingest,
            &delivery(&b, &id, &sign(&b, NOW, &[LIVE_SECRET])),
            now * 1000,
        )
        .await;
        assert_eq!(r.status(), 200, "|now - t| == tolerance is accepted");
    }
}
