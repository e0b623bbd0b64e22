//! The emulator harness of paymos-inbox's tests: AWS's DynamoDB Local and fauxqs started once
//! per test process on free loopback ports (or the running ones `AWS_ENDPOINT_URL_DYNAMODB` and
//! `AWS_ENDPOINT_URL_SQS` name), fresh tables and queues from `template.yaml` per test, signed
//! requests, the fake Paymos API ([`paymos_fake`]), the 69 official signature vectors
//! ([`vectors`]), the Standard Webhooks reference verifiers ([`standard_webhooks`]), and moto's
//! server for CloudWatch and CloudFormation ([`moto`]).
//!
//! A test-support crate: a dev-dependency of the crates whose emulator tests use it, never
//! published, never in the tree of the Lambda binaries or the installed command line. Nothing
//! here skips: if an emulator cannot start, every test that needs it fails and says why.

pub mod moto;
pub mod paymos_fake;
pub use tempfile::TempDir;
pub mod standard_webhooks;
pub mod vectors;

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::aws::CallCounter;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources, LedgerSchema};
use paymos_inbox_core::money::invoice::InvoiceSeen;
use paymos_inbox_core::roads::handoff::StateRecords as _;
use paymos_inbox_core::testkit::model::Inspect;
use paymos_inbox_core::testkit::world::Observe;
use paymos_inbox_core::wire::signature::{WebhookSecret, signature_header};
use paymos_inbox_local::emulators::{self, Emulator};
use paymos_inbox_local::tables::{self, QueuePair};
use paymos_inbox_local::template;
/// What [`Aws::stack`] created: its tables and queues by logical name.
pub use paymos_inbox_local::template::Created;

/// The fixed secrets the tests (and events/) sign with.
pub const LIVE_SECRET: &str = "whsec_live_paymos_inbox_fixture";
pub const TEST_SECRET: &str = "whsec_test_paymos_inbox_fixture";
/// The fixed clock of the fixtures.
pub const NOW: u64 = 1_760_000_000;
pub const NOW_MS: u64 = NOW * 1000;

struct Endpoints {
    dynamodb: String,
    sqs: String,
    _running: Vec<Emulator>,
}

fn endpoints() -> &'static Endpoints {
    static ENDPOINTS: OnceLock<Endpoints> = OnceLock::new();
    ENDPOINTS.get_or_init(|| {
        let mut running = Vec::new();
        let dynamodb = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").unwrap_or_else(|_| {
            let e = emulators::start_dynamodb_local()
                .unwrap_or_else(|e| panic!("DynamoDB Local could not start: {e}"));
            let url = e.endpoint().to_owned();
            running.push(e);
            url
        });
        let sqs = std::env::var("AWS_ENDPOINT_URL_SQS").unwrap_or_else(|_| {
            let e = emulators::start_fauxqs()
                .unwrap_or_else(|e| panic!("the SQS emulator (fauxqs) could not start: {e}"));
            let url = e.endpoint().to_owned();
            running.push(e);
            url
        });
        Endpoints {
            dynamodb,
            sqs,
            _running: running,
        }
    })
}

/// The DynamoDB and SQS endpoints the tests use.
pub fn endpoint_urls() -> (String, String) {
    let ep = endpoints();
    (ep.dynamodb.clone(), ep.sqs.clone())
}

/// A scratch folder named after `prefix`, removed with everything in it when the value is dropped
/// (at the end of the test, even a failing one).
pub fn scratch(prefix: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .tempdir()
        .expect("a scratch folder")
}

pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn clients(counter: Option<&CallCounter>) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
    let ep = endpoints();
    let timeouts = aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .build();
    let mut ddb = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .endpoint_url(&ep.dynamodb)
        .timeout_config(timeouts.clone())
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled());
    let mut sqs = aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .endpoint_url(&ep.sqs)
        .timeout_config(timeouts)
        .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled());
    if let Some(counter) = counter {
        ddb = ddb.interceptor(counter.clone());
        sqs = sqs.interceptor(counter.clone());
    }
    (
        aws_sdk_dynamodb::Client::from_conf(ddb.build()),
        aws_sdk_sqs::Client::from_conf(sqs.build()),
    )
}

/// Clients on the emulators: `dynamodb`/`sqs` for the code under test (their requests are
/// counted in `calls`), and uncounted ones for the test's own set-up and inspection.
#[derive(Clone)]
pub struct Aws {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub calls: CallCounter,
    inspect_dynamodb: aws_sdk_dynamodb::Client,
    inspect_sqs: aws_sdk_sqs::Client,
}

impl Default for Aws {
    fn default() -> Self {
        Self::new()
    }
}

impl Aws {
    pub fn new() -> Self {
        let calls = CallCounter::new();
        let (dynamodb, sqs) = clients(Some(&calls));
        let (inspect_dynamodb, inspect_sqs) = clients(None);
        Self {
            dynamodb,
            sqs,
            calls,
            inspect_dynamodb,
            inspect_sqs,
        }
    }

    /// Every table and queue of template.yaml, freshly created under a unique prefix.
    pub async fn stack(&self) -> Created {
        template::create_all(&self.inspect_dynamodb, &self.inspect_sqs, &unique("stack"))
            .await
            .expect("create the template's tables and queues")
    }

    pub async fn deliveries_table(&self) -> String {
        self.stack().await.table("DeliveriesTable").to_owned()
    }

    pub async fn state_table(&self) -> String {
        self.stack().await.table("StateTable").to_owned()
    }

    pub async fn queue_with(&self, visibility_secs: u32, max_receive: u32) -> QueuePair {
        tables::create_queue_pair(
            &self.inspect_sqs,
            &unique("work"),
            visibility_secs,
            max_receive,
        )
        .await
        .expect("create queues")
    }

    pub async fn send_raw(&self, queue_url: &str, body: &str) {
        self.inspect_sqs
            .send_message()
            .queue_url(queue_url)
            .message_body(body)
            .send()
            .await
            .expect("send");
    }

    pub async fn queue(&self) -> QueuePair {
        tables::create_queue_pair(&self.inspect_sqs, &unique("work"), 30, 3)
            .await
            .expect("create queues")
    }

    /// Every item of `table` (one page), except the deliveries ledger's body items: a ledger
    /// scan lists records (read a record's body with [`Aws::body_of`]).
    pub async fn scan(&self, table: &str) -> Vec<HashMap<String, AttributeValue>> {
        self.inspect_dynamodb
            .scan()
            .table_name(table)
            .consistent_read(true)
            .send()
            .await
            .expect("scan")
            .items
            .unwrap_or_default()
            .into_iter()
            .filter(|item| {
                !item
                    .get(LedgerSchema::KEY)
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|key| LedgerSchema::is_body_key(key))
            })
            .collect()
    }

    /// The exact body a ledger record archives: inline in a record written before bodies were
    /// kept apart, else its body item's (panics when that is gone).
    pub async fn body_of(&self, table: &str, record: &HashMap<String, AttributeValue>) -> Vec<u8> {
        if record.contains_key("body") {
            return stored_body(record);
        }
        let key = LedgerSchema::body_key(
            get_s(record, LedgerSchema::KEY),
            get_s(record, "body_sha256"),
        );
        let item = self
            .item(table, LedgerSchema::KEY, &key)
            .await
            .expect("the record's body item");
        stored_body(&item)
    }

    pub async fn item(
        &self,
        table: &str,
        key: &str,
        value: &str,
    ) -> Option<HashMap<String, AttributeValue>> {
        self.inspect_dynamodb
            .get_item()
            .table_name(table)
            .key(key, AttributeValue::S(value.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }

    /// Records in the deliveries `table`, as ingest does before fulfil receives them, the
    /// delivery of each work item of `event` (an SQS event's JSON, such as an `events/` file):
    /// fulfil applies a queued work item only once its delivery is recorded.
    pub async fn record_work_items(&self, table: &str, event: &str, received_at_ms: u64) {
        use paymos_inbox_core::roads::ingest::DeliveryLedger;
        let event: serde_json::Value = serde_json::from_str(event).expect("an SQS event");
        let ledger = DynamoLedger::new(self.inspect_dynamodb.clone(), table, None);
        for message in event["Records"].as_array().expect("its records") {
            let body = message["body"].as_str().unwrap_or_default();
            let Ok(item) = paymos_inbox_core::wire::work::WorkItem::decode(body) else {
                continue;
            };
            let body = String::from_utf8(item.body).expect("a UTF-8 body");
            let environment = item.environment.expect("an environment");
            ledger
                .record(&recorded_delivery(&body, environment, received_at_ms), 0)
                .await
                .expect("recorded");
        }
    }

    /// Receives everything currently visible in a queue (and hides it for the visibility timeout).
    pub async fn drain(&self, queue_url: &str) -> Vec<aws_sdk_sqs::types::Message> {
        let mut all = Vec::new();
        loop {
            let got = self
                .inspect_sqs
                .receive_message()
                .queue_url(queue_url)
                .max_number_of_messages(10)
                .message_attribute_names("All")
                .wait_time_seconds(0)
                .send()
                .await
                .expect("receive")
                .messages
                .unwrap_or_default();
            if got.is_empty() {
                break;
            }
            all.extend(got);
        }
        all
    }
}

/// The ledger record ingest writes for `body`, verified by a secret of `environment` and
/// received at `received_at_ms`.
pub fn recorded_delivery(
    body: &str,
    environment: paymos_inbox_core::wire::signature::Environment,
    received_at_ms: u64,
) -> paymos_inbox_core::roads::ingest::Delivery {
    let e = paymos_inbox_core::wire::envelope::Envelope::parse(body.as_bytes())
        .expect("a valid envelope");
    paymos_inbox_core::roads::ingest::Delivery {
        event_id: e.event_id,
        event_type: e.event_type,
        category: e.category,
        resource_id: e.resource_id,
        environment: Some(environment),
        secret_label: if environment.is_test() {
            "test"
        } else {
            "live"
        }
        .into(),
        version: e.version,
        occurred_at: e.occurred_at,
        signed_at: received_at_ms / 1000,
        received_at_ms,
        body_sha256: paymos_inbox_core::roads::ingest::sha256_hex(body.as_bytes()),
        body: body.as_bytes().to_vec(),
    }
}

/// The work item ingest would send for `body` verified by a live secret.
pub fn live(body: &str) -> paymos_inbox_core::wire::work::WorkItem {
    work_item(body, paymos_inbox_core::wire::signature::Environment::Live)
}

/// The work item ingest would send for `body` verified by a secret of `environment`.
pub fn work_item(
    body: &str,
    environment: paymos_inbox_core::wire::signature::Environment,
) -> paymos_inbox_core::wire::work::WorkItem {
    let event_id = paymos_inbox_core::wire::envelope::Envelope::parse(body.as_bytes())
        .map(|e| e.event_id)
        .unwrap_or_default();
    paymos_inbox_core::wire::work::WorkItem {
        event_id,
        environment: Some(environment),
        body: body.as_bytes().to_vec(),
        received_at_ms: Some(NOW_MS),
    }
}

/// The Paymos event a queue message carries (the work item's exact body).
pub fn message_event(message: &aws_sdk_sqs::types::Message) -> String {
    let item = paymos_inbox_core::wire::work::WorkItem::decode(message.body().unwrap_or_default())
        .expect("a work item");
    String::from_utf8(item.body).expect("UTF-8 body")
}

/// Signs `body` at `t` with each secret (one `v1` each).
pub fn sign(body: &str, t: u64, secrets: &[&str]) -> String {
    let secrets: Vec<WebhookSecret> = secrets.iter().map(|s| WebhookSecret::new(*s)).collect();
    let refs: Vec<&WebhookSecret> = secrets.iter().collect();
    signature_header(t, body.as_bytes(), &refs)
}

/// A Paymos envelope for tests.
pub fn envelope(event_id: &str, event_type: &str, data: serde_json::Value) -> String {
    serde_json::json!({
        "event_id": event_id,
        "event_type": event_type,
        "version": 1,
        "occurred_at": NOW - 5,
        "data": data,
    })
    .to_string()
}

pub fn invoice_paid(event_id: &str, invoice_id: &str) -> String {
    envelope(
        event_id,
        "invoice.paid",
        serde_json::json!({"invoice_id": invoice_id, "status": "paid", "is_final": true, "is_test": false,
            "order": {"external_id": format!("order-{invoice_id}"), "amount": "10.50", "currency": "USDT"}}),
    )
}

/// A function-URL (payload 2.0) event as Lambda would deliver it, turned into the request the
/// handler sees by `lambda_http` itself.
pub fn function_url_request(
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    base64: bool,
) -> lambda_http::Request {
    use base64::Engine as _;
    let headers: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), serde_json::Value::from(*v)))
        .chain([(
            "content-type".to_owned(),
            "application/json; charset=utf-8".into(),
        )])
        .collect();
    let body = if base64 {
        base64::engine::general_purpose::STANDARD.encode(body)
    } else {
        String::from_utf8(body.to_vec()).expect("plain bodies in tests are UTF-8")
    };
    let event = serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abcdefghijklmnopqrstuvwxyz",
            "domainName": "abcdefghijklmnopqrstuvwxyz.lambda-url.eu-west-1.on.aws",
            "domainPrefix": "abcdefghijklmnopqrstuvwxyz",
            "http": {"method": method, "path": "/", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7", "userAgent": "Paymos-Webhooks/1.0"},
            "requestId": "c0ffee00-0000-4000-8000-000000000000",
            "routeKey": "$default",
            "stage": "$default",
            "time": "09/Oct/2025:08:53:20 +0000",
            "timeEpoch": NOW_MS
        },
        "body": body,
        "isBase64Encoded": base64
    });
    lambda_http::request::from_str(&event.to_string()).expect("a valid function URL event")
}

/// A signed POST with the usual Paymos headers.
pub fn delivery(body: &str, event_id: &str, signature: &str) -> lambda_http::Request {
    function_url_request(
        "POST",
        &[
            ("X-Webhook-Id", event_id),
            ("X-Webhook-Timestamp", &NOW.to_string()),
            ("X-Webhook-Signature", signature),
        ],
        body.as_bytes(),
        false,
    )
}

pub fn get_s<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> &'a str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map_or("", String::as_str)
}

pub fn get_n(item: &HashMap<String, AttributeValue>, name: &str) -> u64 {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub fn response_json(response: &lambda_http::Response<lambda_http::Body>) -> serde_json::Value {
    match response.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).expect("JSON body"),
        other => panic!("unexpected body {other:?}"),
    }
}

/// The exact body a ledger item holds (a body item, or an old record's inline body; stored
/// compressed when that is smaller).
pub fn stored_body(item: &HashMap<String, AttributeValue>) -> Vec<u8> {
    let stored = item["body"].as_b().expect("body is binary").as_ref();
    let encoding = item
        .get("body_encoding")
        .and_then(|v| v.as_s().ok())
        .map(String::as_str);
    paymos_inbox_aws::dynamodb::decode_body(stored, encoding).expect("a body we can restore")
}

/// The model's view of the state table (the trait is the core crate's, the store the adapter's).
pub struct Inspected<'a>(pub &'a DynamoResources);

/// The oracle's view of the same table: what the model test judges.
impl Observe for Inspected<'_> {
    async fn fulfilments(&self) -> Vec<(String, Option<String>)> {
        Inspect::fulfilments(self).await
    }

    async fn invoices(&self) -> Vec<(String, InvoiceSeen)> {
        Inspect::invoices(self).await
    }

    async fn balances(
        &self,
    ) -> std::collections::BTreeMap<(Option<String>, String, String), String> {
        let records = self.0.records().await.expect("DynamoDB Local answers");
        records
            .into_iter()
            .filter_map(|r| match r {
                paymos_inbox_core::money::record::StateRecord::Balance(b) => Some((
                    (b.project.clone(), b.payer.clone(), b.currency.clone()),
                    paymos_inbox_core::money::status::Amount::sum([&b.balance]).unwrap_or_default(),
                )),
                _ => None,
            })
            .collect()
    }
}

impl Inspect for Inspected<'_> {
    async fn fulfilments(&self) -> Vec<(String, Option<String>)> {
        self.0
            .fulfilments()
            .await
            .expect("DynamoDB Local answers")
            .into_iter()
            .map(|f| (f.invoice_id, f.order.external_id))
            .collect()
    }

    async fn invoices(&self) -> Vec<(String, InvoiceSeen)> {
        self.0
            .invoice_records()
            .await
            .expect("DynamoDB Local answers")
    }

    async fn keys(&self) -> Vec<String> {
        self.0.keys().await.expect("DynamoDB Local answers")
    }
}

/// Reconciles through Paymos' API as the tools do: the client wrapped as the adapter.
pub async fn reconcile(
    api: &paymos::PaymosClient,
    fulfil: &paymos_inbox_core::roads::fulfil::Fulfil<DynamoResources>,
    from: i64,
    to: i64,
    apply: bool,
    now_ms: u64,
) -> Result<paymos_inbox_core::roads::reconcile::Report, String> {
    let api = paymos_inbox_aws::paymos_api::PaymosApi::new(api.clone());
    paymos_inbox_core::roads::reconcile::reconcile(&api, fulfil, (from, to), apply, now_ms)
        .await
        .map_err(|e| e.to_string())
}

/// A log writer that keeps what it is given, shared by its clones: a test's capture of what a
/// function logs (`.with_writer(move || captured.clone())`).
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn bytes(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Everything written so far.
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// What was written since the last take, taken.
    #[must_use]
    pub fn take(&self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut *self.bytes())).into_owned()
    }
}
