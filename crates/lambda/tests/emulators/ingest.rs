//! The ingest half against DynamoDB Local and fauxqs: each test asserts what the tables and the
//! queue hold afterwards, and how many AWS calls the path made.

use paymos_inbox_aws::dynamodb::DynamoLedger;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::ingest::{DeliveryLedger, Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::ingest::respond;

use paymos_inbox_testkit::*;

type RealIngest = Ingest<DynamoLedger, SqsQueue>;

struct Rig {
    aws: Aws,
    table: String,
    queue_url: String,
}

impl Rig {
    async fn new() -> Self {
        let aws = Aws::new();
        let table = aws.deliveries_table().await;
        let queue_url = aws.queue().await.queue_url;
        Self {
            aws,
            table,
            queue_url,
        }
    }

    fn ingest_with(&self, queue_url: &str, settings: IngestSettings) -> RealIngest {
        let keys = vec![
            SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET)),
            SigningKey::new("test", &WebhookSecret::new(TEST_SECRET)),
        ];
        self.ingest_holding(keys, queue_url, settings)
    }

    fn ingest_holding(
        &self,
        keys: Vec<SigningKey>,
        queue_url: &str,
        settings: IngestSettings,
    ) -> RealIngest {
        Ingest::new(
            Verifier::new(keys, 300),
            DynamoLedger::new(self.aws.dynamodb.clone(), &self.table, None),
            SqsQueue::new(self.aws.sqs.clone(), queue_url),
            settings,
        )
    }

    fn ingest(&self) -> RealIngest {
        self.ingest_with(&self.queue_url, IngestSettings::default())
    }

    /// Marks a record processed, as the fulfil side does.
    async fn mark_processed(&self, event_id: &str) {
        self.aws
            .dynamodb
            .update_item()
            .table_name(&self.table)
            .key(
                "event_id",
                aws_sdk_dynamodb::types::AttributeValue::S(event_id.into()),
            )
            .update_expression("SET #s = :p")
            .expression_attribute_names("#s", "state")
            .expression_attribute_values(
                ":p",
                aws_sdk_dynamodb::types::AttributeValue::S("processed".into()),
            )
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn first_delivery_is_recorded_once_and_enqueued_once_in_two_calls() {
    let rig = Rig::new().await;
    let body = invoice_paid("evt_first", "inv_first");
    let sig = sign(&body, NOW, &[LIVE_SECRET]);
    // A stack holding only live secrets (one holding a sandbox secret too adds one GetItem: the
    // same id's sandbox record, counted when found).
    let live_only = rig.ingest_holding(
        vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
        &rig.queue_url,
        IngestSettings::default(),
    );

    let response = respond(&live_only, &delivery(&body, "evt_first", &sig), NOW_MS).await;

    assert_eq!(response.status(), 200);
    assert_eq!(response_json(&response)["status"], "new");
    assert_eq!(
        rig.aws.calls.operations(),
        [
            "DynamoDB.PutItem",
            "SQS.SendMessageBatch",
            "DynamoDB.PutItem"
        ],
        "a new delivery costs exactly three sequential calls: its body, its work and its check, its record"
    );
    let items = rig.aws.scan(&rig.table).await;
    assert_eq!(items.len(), 1);
    let item = &items[0];
    assert_eq!(get_s(item, "event_id"), "evt_first");
    assert_eq!(get_s(item, "resource_id"), "inv_first");
    assert_eq!(get_s(item, "category"), "invoice");
    assert_eq!(get_s(item, "environment"), "live");
    assert_eq!(get_s(item, "secret_label"), "live");
    assert_eq!(get_s(item, "state"), "received");
    assert_eq!(get_n(item, "signed_at"), NOW);
    assert_eq!(get_n(item, "received_at"), NOW_MS);
    assert_eq!(
        rig.aws.body_of(&rig.table, item).await.as_slice(),
        body.as_bytes(),
        "the exact raw body is archived"
    );
    let messages = rig.aws.drain(&rig.queue_url).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(
        message_event(&messages[0]),
        body,
        "the message carries the exact event"
    );
}

// Issue 54: a sender's `traceparent` is advisory. Without span export, a valid one rides on the
// work item to fulfil as sent, a malformed one is dropped (never a refusal), and neither costs a
// call: each delivery is the same three calls as one without.
#[tokio::test]
async fn a_senders_traceparent_rides_on_the_work_item_and_a_malformed_one_is_dropped() {
    let rig = Rig::new().await;
    let live_only = rig.ingest_holding(
        vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
        &rig.queue_url,
        IngestSettings::default(),
    );
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let sent = [
        ("evt_tp_valid", Some(valid)),
        (
            "evt_tp_malformed",
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-01"),
        ),
        ("evt_tp_none", None),
    ];
    for (event, traceparent) in sent {
        let body = invoice_paid(event, &format!("inv_{event}"));
        let signature = sign(&body, NOW, &[LIVE_SECRET]);
        let timestamp = NOW.to_string();
        let mut headers = vec![
            ("X-Webhook-Id", event),
            ("X-Webhook-Timestamp", timestamp.as_str()),
            ("X-Webhook-Signature", signature.as_str()),
        ];
        headers.extend(traceparent.map(|t| ("traceparent", t)));
        let request = function_url_request("POST", &headers, body.as_bytes(), false);
        let response = respond(&live_only, &request, NOW_MS).await;
        assert_eq!(response.status(), 200, "{traceparent:?}");
    }
    assert_eq!(
        rig.aws.calls.operations(),
        [
            "DynamoDB.PutItem",
            "SQS.SendMessageBatch",
            "DynamoDB.PutItem"
        ]
        .repeat(3),
        "no call of its own"
    );
    let carried: std::collections::BTreeMap<String, Option<String>> = rig
        .aws
        .drain(&rig.queue_url)
        .await
        .iter()
        .map(|m| {
            let attributes = m.message_attributes.clone().unwrap_or_default();
            let attribute = |name: &str| attributes.get(name).and_then(|a| a.string_value.clone());
            (attribute("event_id").unwrap(), attribute("traceparent"))
        })
        .collect();
    assert_eq!(
        carried,
        std::collections::BTreeMap::from([
            ("evt_tp_malformed".to_owned(), None),
            ("evt_tp_none".to_owned(), None),
            ("evt_tp_valid".to_owned(), Some(valid.to_owned())),
        ])
    );
}

#[tokio::test]
async fn same_event_again_changes_nothing_and_costs_two_calls() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    let body = invoice_paid("evt_again", "inv_again");
    let sig = sign(&body, NOW, &[LIVE_SECRET]);
    assert_eq!(
        respond(&ingest, &delivery(&body, "evt_again", &sig), NOW_MS)
            .await
            .status(),
        200
    );
    rig.mark_processed("evt_again").await;
    let before = rig.aws.scan(&rig.table).await;
    rig.aws.calls.reset();

    // Paymos retries a minute later (its attempt had timed out), re-signed.
    let later = NOW + 60;
    let sig = sign(&body, later, &[LIVE_SECRET]);
    let response = respond(&ingest, &delivery(&body, "evt_again", &sig), later * 1000).await;

    assert_eq!(response.status(), 200);
    assert_eq!(response_json(&response)["status"], "duplicate");
    assert_eq!(
        rig.aws.calls.operations(),
        ["DynamoDB.PutItem", "DynamoDB.PutItem"],
        "the body's put (the same item again) and one conditional put, nothing else"
    );
    assert_eq!(
        rig.aws.scan(&rig.table).await,
        before,
        "the record is untouched"
    );
    assert_eq!(
        rig.aws.drain(&rig.queue_url).await.len(),
        1,
        "still only the first message"
    );
}

#[tokio::test]
async fn twenty_concurrent_copies_make_one_record_and_at_most_two_messages() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    let body = invoice_paid("evt_storm", "inv_storm");
    let sig = sign(&body, NOW, &[LIVE_SECRET]);
    let requests: Vec<_> = (0..20)
        .map(|_| delivery(&body, "evt_storm", &sig))
        .collect();

    let responses =
        futures::future::join_all(requests.iter().map(|r| respond(&ingest, r, NOW_MS))).await;

    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    let new = responses
        .iter()
        .filter(|r| r.status() == 200 && response_json(r)["status"] == "new")
        .count();
    assert_eq!(new, 1, "exactly one attempt recorded it: {statuses:?}");
    // The others found the first attempt's live lease: "retry later", never a false 2xx.
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert_eq!(rig.aws.scan(&rig.table).await.len(), 1);
    // The attempt that put the body queued its work before its record; another may win the
    // record's put first and send it too (fulfil applies a delivery once).
    let messages = rig.aws.drain(&rig.queue_url).await.len();
    assert!((1..=2).contains(&messages), "{messages} messages");
}

#[tokio::test]
async fn a_failed_send_answers_5xx_and_the_retry_enqueues_once() {
    let rig = Rig::new().await;
    let body = invoice_paid("evt_sqs_down", "inv_sqs_down");
    let sig = sign(&body, NOW, &[LIVE_SECRET]);
    let broken = rig.ingest_with(
        &format!("{}-deleted", rig.queue_url),
        IngestSettings::default(),
    );

    let response = respond(&broken, &delivery(&body, "evt_sqs_down", &sig), NOW_MS).await;

    // A deleted queue is our configuration, not a passing outage: 500 `misconfigured` (the
    // sender retries any 5xx; the code tells the on-call engineer which kind it is).
    assert_eq!(
        response.status(),
        500,
        "not acknowledged: Paymos must retry"
    );
    assert_eq!(response_json(&response)["error"], "misconfigured");
    assert_eq!(response.headers()["retry-after"], "60");
    assert!(
        rig.aws.scan(&rig.table).await.is_empty(),
        "a new delivery's work is sent before its record: nothing recorded"
    );
    assert!(rig.aws.drain(&rig.queue_url).await.is_empty());

    // The retry, a minute later, with SQS back.
    let later = NOW + 60;
    let sig = sign(&body, later, &[LIVE_SECRET]);
    rig.aws.calls.reset();
    let response = respond(
        &rig.ingest(),
        &delivery(&body, "evt_sqs_down", &sig),
        later * 1000,
    )
    .await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        rig.aws.calls.operations(),
        [
            "DynamoDB.PutItem",
            "DynamoDB.PutItem",
            "SQS.SendMessage",
            "DynamoDB.GetItem"
        ],
        "the body (put already: no check), the record listed at its put, the send, the same id's sandbox record looked for"
    );
    let messages = rig.aws.drain(&rig.queue_url).await;
    assert_eq!(messages.len(), 1, "enqueued exactly once");
    assert_eq!(message_event(&messages[0]), body);
    let record = &rig.aws.scan(&rig.table).await[0];
    assert_eq!(get_n(record, "enqueue_attempts"), 1);
    assert!(record.contains_key("pending_shard"), "listed for the sweep");
}

#[tokio::test]
async fn a_crash_between_put_and_send_loses_nothing() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    let body = invoice_paid("evt_crash", "inv_crash");
    let sig = sign(&body, NOW, &[LIVE_SECRET]);
    // The crashed attempt: it recorded the delivery (and its lease), then died before sending.
    let crashed = ingest
        .admit(
            &paymos_inbox_core::roads::ingest::Inbound {
                method: "POST",
                signature: Some(&sig),
                webhook_id: None,
                body: body.as_bytes(),
            },
            NOW_MS,
        )
        .unwrap();
    ingest
        .ledger()
        .record(&crashed, NOW_MS + 30_000)
        .await
        .unwrap();

    // Paymos timed out and retries while the lease could still belong to a live attempt...
    let soon = NOW + 10;
    let r = respond(
        &ingest,
        &delivery(&body, "evt_crash", &sign(&body, soon, &[LIVE_SECRET])),
        soon * 1000,
    )
    .await;
    assert_eq!(
        r.status(),
        503,
        "no 2xx while the first attempt might still be sending"
    );
    assert!(r.headers().contains_key("retry-after"));
    assert!(rig.aws.drain(&rig.queue_url).await.is_empty());

    // ...and again after the lease: that retry sends it.
    let later = NOW + 60;
    let r = respond(
        &ingest,
        &delivery(&body, "evt_crash", &sign(&body, later, &[LIVE_SECRET])),
        later * 1000,
    )
    .await;
    assert_eq!(r.status(), 200);
    let messages = rig.aws.drain(&rig.queue_url).await;
    assert_eq!(messages.len(), 1, "the delivery reached the queue");
    assert_eq!(rig.aws.scan(&rig.table).await.len(), 1);
}

#[tokio::test]
async fn rotation_header_with_two_v1_verifies_against_either_secret() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    let body = invoice_paid("evt_rotation", "inv_rotation");
    // The sender signs with the old and the new secret; we hold only the new one (and test).
    let sig = sign(&body, NOW, &["whsec_live_retired_secret", LIVE_SECRET]);
    let response = respond(&ingest, &delivery(&body, "evt_rotation", &sig), NOW_MS).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        get_s(&rig.aws.scan(&rig.table).await[0], "secret_label"),
        "live"
    );
    assert_eq!(rig.aws.drain(&rig.queue_url).await.len(), 1);
}

#[tokio::test]
async fn sandbox_and_live_secrets_record_their_environment() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    let sandbox = envelope(
        "evt_sandbox",
        "invoice.paid",
        serde_json::json!({"invoice_id": "inv_s", "is_test": true}),
    );
    let live = envelope(
        "evt_live",
        "invoice.paid",
        serde_json::json!({"invoice_id": "inv_l", "is_test": false}),
    );
    let r1 = respond(
        &ingest,
        &delivery(
            &sandbox,
            "evt_sandbox",
            &sign(&sandbox, NOW, &[TEST_SECRET]),
        ),
        NOW_MS,
    )
    .await;
    let r2 = respond(
        &ingest,
        &delivery(&live, "evt_live", &sign(&live, NOW, &[LIVE_SECRET])),
        NOW_MS,
    )
    .await;
    assert_eq!((r1.status().as_u16(), r2.status().as_u16()), (200, 200));
    let sandbox_item = rig
        .aws
        .item(&rig.table, "event_id", "test#evt_sandbox")
        .await
        .expect("a sandbox delivery is keyed by its environment");
    let live_item = rig
        .aws
        .item(&rig.table, "event_id", "evt_live")
        .await
        .unwrap();
    assert_eq!(get_s(&sandbox_item, "environment"), "test");
    assert_eq!(get_s(&live_item, "environment"), "live");
    assert_eq!(rig.aws.drain(&rig.queue_url).await.len(), 2);
}

#[tokio::test]
async fn a_base64_body_is_verified_and_archived_byte_exact() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    // Non-ASCII and odd spacing: any re-encoding would change the bytes and the signature.
    let body = "{\"event_id\":\"evt_b64\", \"event_type\":\"invoice.paid\",\"version\":1,\"occurred_at\":1,\"data\":{\"invoice_id\":\"inv_b64\",\"note\":\"caf\u{e9} \u{2713}\"}}\n";
    let sig = sign(body, NOW, &[LIVE_SECRET]);
    let request = function_url_request(
        "POST",
        &[("X-Webhook-Signature", &sig), ("X-Webhook-Id", "evt_b64")],
        body.as_bytes(),
        true,
    );
    let response = respond(&ingest, &request, NOW_MS).await;
    assert_eq!(response.status(), 200);
    let item = rig
        .aws
        .item(&rig.table, "event_id", "evt_b64")
        .await
        .unwrap();
    assert_eq!(
        rig.aws.body_of(&rig.table, &item).await.as_slice(),
        body.as_bytes()
    );
    assert_eq!(message_event(&rig.aws.drain(&rig.queue_url).await[0]), body);
}

#[tokio::test]
async fn same_event_id_with_another_body_keeps_the_first_and_flags_the_conflict() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    let first = invoice_paid("evt_conflict", "inv_conflict");
    let second = invoice_paid("evt_conflict", "inv_other");
    assert_eq!(
        respond(
            &ingest,
            &delivery(&first, "evt_conflict", &sign(&first, NOW, &[LIVE_SECRET])),
            NOW_MS
        )
        .await
        .status(),
        200
    );
    rig.mark_processed("evt_conflict").await;

    let response = respond(
        &ingest,
        &delivery(&second, "evt_conflict", &sign(&second, NOW, &[LIVE_SECRET])),
        NOW_MS,
    )
    .await;

    assert_eq!(response.status(), 200, "acknowledged as a duplicate");
    let item = rig
        .aws
        .item(&rig.table, "event_id", "evt_conflict")
        .await
        .unwrap();
    assert_eq!(
        rig.aws.body_of(&rig.table, &item).await.as_slice(),
        first.as_bytes(),
        "the first body is kept"
    );
    assert_eq!(get_s(&item, "resource_id"), "inv_conflict");
    assert_eq!(
        get_n(&item, "body_conflicts"),
        1,
        "the conflict is on the record"
    );
    // The second body's work was queued before its put, which the record refused: fulfil
    // reads the record and never applies it (`checks::only_the_recorded_body_…` in the
    // adapters' emulator tests).
    let messages = rig.aws.drain(&rig.queue_url).await;
    assert_eq!(messages.len(), 2, "the first body's work, and the second's");
    assert_eq!(message_event(&messages[1]), second);
}

/// Every refused request: the status, the error code, and not one AWS call.
#[tokio::test]
async fn bad_input_gets_a_precise_4xx_and_writes_nothing() {
    let rig = Rig::new().await;
    let ingest = rig.ingest_with(
        &rig.queue_url,
        IngestSettings {
            max_body_bytes: 4096,
            ..IngestSettings::default()
        },
    );
    let good = invoice_paid("evt_bad", "inv_bad");
    let good_sig = sign(&good, NOW, &[LIVE_SECRET]);
    let signed = |body: &str| sign(body, NOW, &[LIVE_SECRET]);
    let no_version = r#"{"event_id":"evt_bad","event_type":"invoice.paid","occurred_at":1,"data":{"invoice_id":"inv_1"}}"#;
    let no_resource = r#"{"event_id":"evt_bad","event_type":"invoice.paid","version":1,"occurred_at":1,"data":{}}"#;
    let version_zero = r#"{"event_id":"evt_bad","event_type":"invoice.paid","version":0,"occurred_at":1,"data":{"invoice_id":"inv_1"}}"#;
    let sandbox_flag = envelope(
        "evt_bad",
        "invoice.paid",
        serde_json::json!({"invoice_id": "inv_1", "is_test": true}),
    );
    let big = format!(
        "{{\"event_id\":\"evt_bad\",\"pad\":\"{}\"}}",
        "x".repeat(5000)
    );
    let cases: Vec<(&str, lambda_http::Request, u16, &str)> = vec![
        (
            "GET",
            function_url_request("GET", &[], b"", false),
            405,
            "method_not_allowed",
        ),
        (
            "no signature",
            function_url_request(
                "POST",
                &[("X-Webhook-Id", "evt_bad")],
                good.as_bytes(),
                false,
            ),
            401,
            "missing_signature",
        ),
        (
            "empty signature",
            delivery(&good, "evt_bad", ""),
            401,
            "malformed_header",
        ),
        (
            "two t",
            delivery(&good, "evt_bad", &format!("t={NOW},{good_sig}")),
            401,
            "malformed_header",
        ),
        (
            "wrong secret",
            delivery(
                &good,
                "evt_bad",
                &sign(&good, NOW, &["whsec_live_someone_else"]),
            ),
            401,
            "signature_mismatch",
        ),
        (
            "stale",
            delivery(&good, "evt_bad", &sign(&good, NOW - 301, &[LIVE_SECRET])),
            401,
            "timestamp_outside_tolerance",
        ),
        (
            "tampered body",
            delivery(&good.replace("10.50", "99.50"), "evt_bad", &good_sig),
            401,
            "signature_mismatch",
        ),
        (
            "no version",
            delivery(no_version, "evt_bad", &signed(no_version)),
            400,
            "invalid_payload",
        ),
        (
            "no resource id",
            delivery(no_resource, "evt_bad", &signed(no_resource)),
            400,
            "invalid_payload",
        ),
        (
            "version 0",
            delivery(version_zero, "evt_bad", &signed(version_zero)),
            400,
            "invalid_payload",
        ),
        (
            "id mismatch",
            delivery(&good, "evt_other", &good_sig),
            400,
            "webhook_id_mismatch",
        ),
        (
            "live secret, sandbox event",
            delivery(&sandbox_flag, "evt_bad", &signed(&sandbox_flag)),
            403,
            "environment_mismatch",
        ),
        (
            "too large",
            delivery(&big, "evt_bad", &signed(&big)),
            413,
            "payload_too_large",
        ),
    ];
    for (name, request, status, code) in cases {
        rig.aws.calls.reset();
        let response = respond(&ingest, &request, NOW_MS).await;
        assert_eq!(response.status(), status, "{name}");
        assert_eq!(response_json(&response)["error"], code, "{name}");
        assert_eq!(
            rig.aws.calls.total(),
            0,
            "{name}: refused before any AWS call"
        );
    }
    assert!(
        rig.aws.scan(&rig.table).await.is_empty(),
        "nothing was recorded"
    );
    assert!(
        rig.aws.drain(&rig.queue_url).await.is_empty(),
        "nothing was enqueued"
    );
}

#[tokio::test]
async fn dynamodb_down_or_misconfigured_answers_5xx_by_kind_and_nothing_is_acknowledged() {
    let rig = Rig::new().await;
    // Nothing listens on port 9: a connection error, as in an outage.
    let unreachable = aws_sdk_dynamodb::Client::from_conf(
        rig.aws
            .dynamodb
            .config()
            .to_builder()
            .endpoint_url("http://127.0.0.1:9")
            .build(),
    );
    let cases = [
        (
            "unreachable",
            unreachable,
            rig.table.as_str(),
            503,
            "unavailable",
            "1",
        ),
        (
            "a missing table",
            rig.aws.dynamodb.clone(),
            "no-such-table",
            500,
            "misconfigured",
            "60",
        ),
    ];
    for (name, client, table, status, code, retry_after) in cases {
        let ingest = Ingest::new(
            Verifier::new(
                vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
                300,
            ),
            DynamoLedger::new(client, table, None),
            SqsQueue::new(rig.aws.sqs.clone(), &rig.queue_url),
            IngestSettings::default(),
        );
        let body = invoice_paid("evt_ddb_down", "inv_ddb_down");
        let response = respond(
            &ingest,
            &delivery(&body, "evt_ddb_down", &sign(&body, NOW, &[LIVE_SECRET])),
            NOW_MS,
        )
        .await;
        assert_eq!(response.status(), status, "{name}");
        assert_eq!(response_json(&response)["error"], code, "{name}");
        assert_eq!(response.headers()["retry-after"], retry_after, "{name}");
        assert!(
            rig.aws.drain(&rig.queue_url).await.is_empty(),
            "{name}: no work without a record"
        );
    }
    assert!(
        rig.aws.scan(&rig.table).await.is_empty(),
        "nothing recorded"
    );
}

#[tokio::test]
async fn an_unknown_event_type_is_recorded_and_acknowledged() {
    let rig = Rig::new().await;
    let body = envelope(
        "evt_future",
        "subscription.renewed",
        serde_json::json!({"id": "sub_1"}),
    );
    let response = respond(
        &rig.ingest(),
        &delivery(&body, "evt_future", &sign(&body, NOW, &[LIVE_SECRET])),
        NOW_MS,
    )
    .await;
    assert_eq!(response.status(), 200);
    let item = rig
        .aws
        .item(&rig.table, "event_id", "evt_future")
        .await
        .unwrap();
    assert_eq!(get_s(&item, "category"), "unknown");
    assert_eq!(rig.aws.drain(&rig.queue_url).await.len(), 1);
}

#[tokio::test]
async fn pending_lists_the_stragglers_their_checks_found_oldest_first_from_the_sparse_index() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    for (i, id) in ["evt_p_a", "evt_p_b", "evt_p_c"].iter().enumerate() {
        let body = invoice_paid(id, &format!("inv_{id}"));
        let at = NOW + i as u64;
        assert_eq!(
            respond(
                &ingest,
                &delivery(&body, id, &sign(&body, at, &[LIVE_SECRET])),
                at * 1000
            )
            .await
            .status(),
            200
        );
    }
    // Fulfil marks evt_p_b processed (the same mark the fulfil transaction writes).
    let state = paymos_inbox_aws::dynamodb::DynamoResources::new(
        rig.aws.dynamodb.clone(),
        rig.aws.state_table().await,
        &rig.table,
    );
    let fulfil = paymos_inbox_core::roads::fulfil::Fulfil::new(state)
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    fulfil
        .apply(&live(&invoice_paid("evt_p_b", "inv_evt_p_b")), NOW_MS)
        .await
        .unwrap();
    // Their checks come due: the two still received are listed, the processed one is not.
    for id in ["evt_p_a", "evt_p_b", "evt_p_c"] {
        let check = paymos_inbox_core::wire::work::Check::of(
            id,
            Some(paymos_inbox_core::wire::signature::Environment::Live),
        );
        fulfil.check_delivery(&check).await.unwrap();
    }

    let pending = DynamoLedger::new(rig.aws.dynamodb.clone(), &rig.table, None)
        .pending(10)
        .await
        .unwrap();
    let ids: Vec<&str> = pending.iter().map(|p| p.event_id.as_str()).collect();
    assert_eq!(
        ids,
        ["evt_p_a", "evt_p_c"],
        "oldest first, processed ones gone"
    );
    assert_eq!(pending[0].received_at_ms, NOW_MS);
    assert_eq!(pending[0].enqueue_attempts, 1);
    let processed = rig
        .aws
        .item(&rig.table, "event_id", "evt_p_b")
        .await
        .unwrap();
    assert!(
        !processed.contains_key("pending_shard"),
        "the processed mark leaves the index"
    );
}

#[tokio::test]
async fn a_sandbox_delivery_reusing_a_live_id_never_blocks_the_live_one() {
    let rig = Rig::new().await;
    let ingest = rig.ingest();
    let fulfil = paymos_inbox_core::roads::fulfil::Fulfil::new(
        paymos_inbox_aws::dynamodb::DynamoResources::new(
            rig.aws.dynamodb.clone(),
            rig.aws.state_table().await,
            &rig.table,
        ),
    )
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    let paid = |is_test: bool| {
        envelope(
            "evt_shared",
            "invoice.paid",
            serde_json::json!({"invoice_id": "inv_env", "status": "paid", "is_final": true,
                "is_test": is_test,
                "order": {"external_id": "order-env", "amount": "10.50", "currency": "USDT"}}),
        )
    };
    let (sandbox, live) = (paid(true), paid(false));
    // The next work item in the queue, applied as the fulfil function would.
    let apply_next = || async {
        let messages = rig.aws.drain(&rig.queue_url).await;
        assert_eq!(messages.len(), 1, "one work item per new delivery");
        let item =
            paymos_inbox_core::wire::work::WorkItem::decode(messages[0].body().unwrap()).unwrap();
        fulfil.apply(&item, NOW_MS).await.unwrap().1.as_str()
    };

    let first = respond(
        &ingest,
        &delivery(&sandbox, "evt_shared", &sign(&sandbox, NOW, &[TEST_SECRET])),
        NOW_MS,
    )
    .await;
    assert_eq!(response_json(&first)["status"], "new");
    assert_eq!(apply_next().await, "other_environment");
    rig.aws.calls.reset();
    let genuine = respond(
        &ingest,
        &delivery(&live, "evt_shared", &sign(&live, NOW, &[LIVE_SECRET])),
        NOW_MS,
    )
    .await;
    assert_eq!(genuine.status(), 200, "{:?}", response_json(&genuine));
    assert_eq!(response_json(&genuine)["status"], "new");
    assert_eq!(
        rig.aws.calls.operations(),
        [
            "DynamoDB.PutItem",
            "SQS.SendMessageBatch",
            "DynamoDB.PutItem",
            "DynamoDB.GetItem"
        ],
        "sent with its check and recorded, then the sandbox record of its id found (and counted)"
    );
    assert_eq!(apply_next().await, "fulfilled");

    // The business outcome: the live payment fulfilled its order, once.
    assert!(fulfil.store().is_fulfilled("inv_env").await.unwrap());
    // Each delivery has its own record, processed with its own outcome.
    let live_record = rig
        .aws
        .item(&rig.table, "event_id", "evt_shared")
        .await
        .expect("the live delivery keeps the plain key");
    assert_eq!(get_s(&live_record, "environment"), "live");
    assert_eq!(get_s(&live_record, "outcome"), "fulfilled");
    let sandbox_record = rig
        .aws
        .item(&rig.table, "event_id", "test#evt_shared")
        .await
        .expect("the sandbox delivery is keyed by its environment");
    assert_eq!(get_s(&sandbox_record, "environment"), "test");
    assert_eq!(get_s(&sandbox_record, "outcome"), "other_environment");
    // A retry of either is a plain duplicate of its own record.
    for (body, secret) in [(&live, LIVE_SECRET), (&sandbox, TEST_SECRET)] {
        let again = respond(
            &ingest,
            &delivery(body, "evt_shared", &sign(body, NOW + 60, &[secret])),
            (NOW + 60) * 1000,
        )
        .await;
        assert_eq!(response_json(&again)["status"], "duplicate");
    }
    assert!(rig.aws.drain(&rig.queue_url).await.is_empty());
}
