//! Every adapter keeps the kind of its failure: a refused credential (an unknown, expired or
//! unauthorised key, a signature the other side does not accept) comes back as one, of kind
//! misconfigured with the adapter's own error as its source, never as "unavailable; retry".
//!
//! Each adapter's client talks to a local HTTP server on 127.0.0.1 that answers every request
//! the way the service answers a bad credential: AWS's JSON error (with SQS's query-compatible
//! header), or a 401/403 from the Paymos API and the merchant's endpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use aws_sdk_dynamodb::config::{Credentials, Region};
use serde_json::json;

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::events::EventBridgePublisher;
use paymos_inbox_aws::paymos_api::PaymosApi;
use paymos_inbox_aws::secrets::{self, SecretsManagerKeys};
use paymos_inbox_aws::sqs::{self, SqsQueue};
use paymos_inbox_aws::webhook::HttpWebhookTarget;
use paymos_inbox_core::port::{PortError, PortErrorKind};
use paymos_inbox_core::roads::confirm::PaymentConfirmation;
use paymos_inbox_core::roads::handoff::{DomainEvent, EventPublisher, StateRecords};
use paymos_inbox_core::roads::ingest::{Delivery, DeliveryLedger, KeySource, WorkQueue};
use paymos_inbox_core::roads::outbound::{DeliverError, Outbound, OutboundSecret, WebhookTarget};
use paymos_inbox_core::wire::envelope::Category;

/// What an AWS JSON service answers to a token it does not know.
const UNRECOGNIZED: &str = r#"{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}"#;

/// A server on 127.0.0.1 that answers every request with `status`, `headers` and `body` (and
/// closes the connection); its URL.
fn serve(status: u16, headers: &[(&str, &str)], body: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let mut response = format!(
        "HTTP/1.1 {status} Refused\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        response.push_str(&format!("{name}: {value}\r\n"));
    }
    response.push_str("\r\n");
    response.push_str(body);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let response = response.clone();
            std::thread::spawn(move || {
                if read_request(&mut stream).is_ok() {
                    let _ = stream.write_all(response.as_bytes());
                    let _ = stream.flush();
                }
            });
        }
    });
    url
}

/// Reads one request (its head, then `content-length` bytes of body).
fn read_request(stream: &mut std::net::TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)
}

/// An AWS service's refusal of a credential: HTTP 400 and its JSON error, plus `headers`.
fn aws_refusing(content_type: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut all = vec![
        ("content-type", content_type),
        ("x-amzn-requestid", "00000000-0000-0000-0000-000000000000"),
    ];
    all.extend_from_slice(headers);
    serve(400, &all, body)
}

/// The settings every SDK client of these tests shares: a region, a (refused) key, no retry.
macro_rules! client {
    ($sdk:ident, $url:expr) => {
        $sdk::Client::from_conf(
            $sdk::Config::builder()
                .behavior_version_latest()
                .region(Region::new("eu-west-1"))
                .credentials_provider(Credentials::new(
                    "AKIDREFUSED",
                    "refused",
                    None,
                    None,
                    "tests",
                ))
                .retry_config($sdk::config::retry::RetryConfig::disabled())
                .endpoint_url($url)
                .build(),
        )
    };
}

/// `error` is a refused credential of `operation`: misconfigured (never unavailable), named as
/// a refused credential, and the adapter's error kept as its source.
fn assert_refused(error: &PortError, operation: &str) {
    assert_eq!(error.operation, operation, "{error}");
    assert_ne!(error.kind, PortErrorKind::Unavailable, "{error}");
    assert_eq!(error.kind, PortErrorKind::Misconfigured, "{error}");
    assert!(error.is_refused_credential(), "{error}");
    assert!(
        error.to_string().contains("a refused credential"),
        "{error}"
    );
    assert!(
        std::error::Error::source(error).is_some(),
        "the source is kept: {error:?}"
    );
}

fn delivery() -> Delivery {
    Delivery {
        event_id: "evt_1".into(),
        event_type: "invoice.paid".into(),
        category: Category::Invoice,
        resource_id: Some("inv_1".into()),
        environment: None,
        secret_label: "live".into(),
        version: 1,
        occurred_at: 1_800_000_000,
        signed_at: 1_800_000_000,
        received_at_ms: 1_800_000_000_000,
        body: b"{}".to_vec(),
        body_sha256: paymos_inbox_core::roads::ingest::sha256_hex(b"{}"),
    }
}

#[tokio::test]
async fn secrets_manager_refusing_the_role_is_a_refused_credential() {
    let url = aws_refusing(
        "application/x-amz-json-1.1",
        &[],
        r#"{"__type":"AccessDeniedException","message":"User: arn:aws:sts::000000000000:assumed-role/ingest is not authorized to perform: secretsmanager:GetSecretValue"}"#,
    );
    let client = client!(aws_sdk_secretsmanager, &url);
    const OPERATION: &str = "Secrets Manager GetSecretValue";

    let error = SecretsManagerKeys::new(client.clone(), "webhook-secrets")
        .keys()
        .await
        .unwrap_err();
    assert_refused(&error, OPERATION);
    assert!(
        error
            .message
            .starts_with("could not read the webhook secrets (webhook-secrets): "),
        "what was being read comes first: {error}"
    );
    let error = secrets::outbound_secret(&client, "signing", "WEBHOOK_SIGNING_SECRET_ID")
        .await
        .unwrap_err();
    assert_refused(&error, OPERATION);
    assert!(
        error.message.contains("WEBHOOK_SIGNING_SECRET_ID"),
        "{error}"
    );
    let error = secrets::paymos_client(
        &client,
        "paymos-api",
        "PAYMOS_API_SECRETS_ID",
        "http://127.0.0.1:9",
        Duration::from_secs(1),
        0,
    )
    .await
    .err()
    .expect("refused");
    assert_refused(&error, OPERATION);
    assert!(error.message.contains("PAYMOS_API_SECRETS_ID"), "{error}");
}

#[tokio::test]
async fn an_sqs_queue_refusing_the_token_is_a_refused_credential() {
    // SQS speaks AWS JSON with its query protocol's error code in a header.
    let url = aws_refusing(
        "application/x-amz-json-1.0",
        &[("x-amzn-query-error", "InvalidClientTokenId;Sender")],
        UNRECOGNIZED,
    );
    let client = client!(aws_sdk_sqs, &url);
    let queue_url = format!("{url}/000000000000/work");

    let error = SqsQueue::new(client.clone(), &queue_url)
        .enqueue(&delivery())
        .await
        .unwrap_err();
    assert_refused(&error, "SQS SendMessage");
    let error = sqs::approximate_messages(&client, &queue_url)
        .await
        .unwrap_err();
    assert_refused(&error, "SQS GetQueueAttributes");
}

#[tokio::test]
async fn an_eventbridge_bus_refusing_the_token_is_a_refused_credential() {
    let url = aws_refusing("application/x-amz-json-1.1", &[], UNRECOGNIZED);
    let publisher = EventBridgePublisher::new(client!(aws_sdk_eventbridge, &url), "bus");
    let event = DomainEvent {
        detail_type: "Order Paid",
        idempotency_key: "order-paid:inv_1".into(),
        detail: json!({"invoice_id": "inv_1"}),
        traceparent: None,
    };
    let error = publisher.publish(&[event]).await.unwrap_err();
    assert_refused(&error, "EventBridge PutEvents");
}

#[tokio::test]
async fn the_dynamodb_ledger_refusing_an_expired_token_is_a_refused_credential() {
    let url = aws_refusing(
        "application/x-amz-json-1.0",
        &[],
        r#"{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"The security token included in the request is expired"}"#,
    );
    let ledger = DynamoLedger::new(client!(aws_sdk_dynamodb, &url), "deliveries", None);

    let error = ledger
        .record(&delivery(), 1_800_000_030_000)
        .await
        .unwrap_err();
    assert_refused(&error, "DynamoDB PutItem");
    let error = ledger.find("evt_1").await.unwrap_err();
    assert_refused(&error, "DynamoDB GetItem");
}

#[tokio::test]
async fn the_dynamodb_resources_refusing_the_token_is_a_refused_credential() {
    let url = aws_refusing("application/x-amz-json-1.0", &[], UNRECOGNIZED);
    let resources = DynamoResources::new(client!(aws_sdk_dynamodb, &url), "state", "deliveries");

    let error = resources.records().await.unwrap_err();
    assert_refused(&error, "DynamoDB Scan");
    let error = resources.is_fulfilled("inv_1").await.unwrap_err();
    assert_refused(&error, "DynamoDB GetItem");
}

#[tokio::test]
async fn a_service_failure_stays_unavailable() {
    // The contrast: what is the service's to fix keeps its own kind, and is not a credential.
    let url = aws_refusing(
        "application/x-amz-json-1.1",
        &[],
        r#"{"__type":"InternalServiceError","message":"An internal error occurred."}"#,
    );
    let error = SecretsManagerKeys::new(client!(aws_sdk_secretsmanager, &url), "webhook-secrets")
        .keys()
        .await
        .unwrap_err();
    assert_eq!(error.kind, PortErrorKind::Unavailable, "{error}");
    assert!(!error.is_refused_credential(), "{error}");
}

fn outbound() -> Outbound {
    Outbound {
        id: "order-paid:inv_1".into(),
        timestamp: 1_800_000_000,
        signature: "v1,c2lnbmF0dXJl".into(),
        body: "{}".into(),
    }
}

#[tokio::test]
async fn the_merchant_endpoint_refusing_our_signature_is_a_refused_credential() {
    for status in [401, 403] {
        let url = serve(status, &[], "");
        let target = HttpWebhookTarget::new(format!("{url}/hook"), Duration::from_secs(5)).unwrap();
        let error = target.post(&outbound()).await.unwrap_err();
        assert_eq!(error.operation, "webhook POST");
        assert_eq!(
            error.kind,
            PortErrorKind::Misconfigured,
            "{status}: {error}"
        );
        assert!(error.is_refused_credential(), "{status}: {error}");
        assert!(
            error.message.contains("WEBHOOK_SIGNING_SECRET_ID"),
            "names the setting: {error}"
        );

        // Through the use case too: retried (an error), of its kind.
        let secret = OutboundSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let event = json!({"detail-type": "Order Paid", "time": "2027-01-15T08:00:00Z",
                           "detail": {"idempotency_key": "order-paid:inv_1"}})
        .to_string();
        let refused =
            paymos_inbox_core::roads::outbound::deliver(&target, &event, &secret, 1_800_000_000)
                .await
                .unwrap_err();
        assert!(
            matches!(&refused, DeliverError::Unavailable(e) if e.is_refused_credential()),
            "{refused:?}"
        );
    }
    // Any other answer is the endpoint's, as before; no answer at all is unavailable.
    let url = serve(500, &[], "");
    let target = HttpWebhookTarget::new(&url, Duration::from_secs(5)).unwrap();
    assert_eq!(target.post(&outbound()).await, Ok(500));
    let down = HttpWebhookTarget::new("http://127.0.0.1:9/hook", Duration::from_secs(2)).unwrap();
    let error = down.post(&outbound()).await.unwrap_err();
    assert_eq!(error.kind, PortErrorKind::Unavailable, "{error}");
    assert!(std::error::Error::source(&error).is_some(), "{error:?}");
}

#[tokio::test]
async fn the_paymos_api_refusing_our_key_is_a_refused_credential() {
    let problem =
        json!({"type": "https://docs.paymos.io/errors/unauthorized", "title": "Unauthorized",
                         "status": 401, "detail": "invalid API key", "code": "unauthorized"})
        .to_string();
    let url = serve(
        401,
        &[("content-type", "application/problem+json")],
        &problem,
    );
    let client = paymos::PaymosClient::builder("pk_refused", "sk_refused")
        .base_url(&url)
        .timeout(Duration::from_secs(5))
        .max_retries(0)
        .build()
        .unwrap();
    let error = PaymosApi::new(client).invoice("inv_1").await.unwrap_err();
    assert_refused(&error, "Paymos GET /v1/invoices/{id}");
    assert!(error.message.contains("PAYMOS_API_SECRETS_ID"), "{error}");
}
