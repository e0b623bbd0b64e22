//! Least privilege, proven: each function's code paths run against the emulators with an SDK
//! interceptor that records the IAM action and the target of every call (a transaction counts
//! as its items' actions); every recorded (action, resource) must be granted by that
//! function's policy in `template.yaml`, and every granted action must be one the function
//! uses. A missing grant would be `AccessDenied` on the first real delivery; an unused one is
//! a permission nobody needs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use paymos_inbox_aws::aws::{CallCounter, Grant};
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{
    DeliveryLedger as _, Inbound, Ingest, IngestSettings, KeySource as _,
};
use paymos_inbox_core::wire::signature::{Environment, Verifier, WebhookSecret, signature_header};
use paymos_inbox_local::template::Created;
use serde_json::json;
use yaml_serde::Value;

use paymos_inbox_testkit::paymos_fake::{Answer, FakePaymos, invoice};
use paymos_inbox_testkit::*;

/// The secret ids the functions read here, by the template parameter or resource that names
/// them in a policy.
const SECRETS: [(&str, &str); 3] = [
    ("paymos-inbox/webhook-secrets", "WebhookSecretsName"),
    ("paymos-inbox/api", "PaymosApiSecretName"),
    ("paymos-inbox/signing", "WebhookSigningSecret"),
];
const BUS: &str = "paymos-inbox-it-bus";

/// Grants a function needs that its own code never calls: Lambda's on-failure destination of a
/// stream sends with the function's role.
const SERVICE_USED: [(&str, &str, &str); 1] = [(
    "PublisherFunction",
    "sqs:SendMessage",
    "PublishFailuresQueue",
)];

/// A Secrets Manager client on the local stand-in, its calls recorded by `calls`.
async fn secrets_client(calls: &CallCounter) -> aws_sdk_secretsmanager::Client {
    let url = paymos_inbox_local::secrets::serve(HashMap::from([
        (
            SECRETS[0].0.to_owned(),
            // Both environments: a new delivery then looks for its id's other record.
            json!({"test": TEST_SECRET, "live": LIVE_SECRET}).to_string(),
        ),
        (
            SECRETS[1].0.to_owned(),
            json!({"api_key": paymos_inbox_testkit::paymos_fake::KEY, "api_secret": paymos_inbox_testkit::paymos_fake::SECRET})
                .to_string(),
        ),
        (
            SECRETS[2].0.to_owned(),
            json!({"key": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}).to_string(),
        ),
    ]))
    .await
    .unwrap();
    let config = aws_sdk_secretsmanager::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_secretsmanager::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_secretsmanager::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .endpoint_url(url)
        .interceptor(calls.clone())
        .build();
    aws_sdk_secretsmanager::Client::from_conf(config)
}

/// The logical resource a recorded target is.
fn logical(created: &Created, target: &str) -> String {
    if let Some((_, name)) = SECRETS.iter().find(|(id, _)| *id == target) {
        return (*name).to_owned();
    }
    if target == BUS {
        return "EventBus".into();
    }
    if matches!(target, "*" | "event-source-mapping") {
        return target.into();
    }
    let (table, index) = target
        .split_once("/index/")
        .map_or((target, None), |(t, i)| (t, Some(i)));
    if let Some((logical, _)) = created.tables.iter().find(|(_, n)| *n == table) {
        return index.map_or_else(|| logical.clone(), |i| format!("{logical}/index/{i}"));
    }
    if let Some((logical, _)) = created
        .queues
        .iter()
        .find(|(_, url)| url.rsplit('/').next() == Some(target))
    {
        return logical.clone();
    }
    format!("unknown:{target}")
}

fn used(created: &Created, calls: &CallCounter) -> BTreeSet<(String, String)> {
    calls
        .grants()
        .into_iter()
        .map(|Grant { action, target }| (action, logical(created, &target)))
        .collect()
}

/// A policy resource as the logical resource it names.
fn resource_of(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().flat_map(resource_of).collect(),
        Value::Tagged(t) => {
            let tag = t.tag.to_string();
            let text = match &t.value {
                Value::String(s) => s.clone(),
                Value::Sequence(parts) => parts[0].as_str().unwrap_or_default().to_owned(),
                _ => String::new(),
            };
            if tag.contains("Sub") {
                // The first `${…}` that is not a pseudo parameter names the resource.
                let name = text
                    .split("${")
                    .skip(1)
                    .filter_map(|rest| rest.split_once('}').map(|(n, _)| n))
                    .find(|n| !n.starts_with("AWS::"));
                if let Some(name) = name {
                    let name = name.trim_end_matches(".Arn");
                    let suffix = text.split_once("/index/").map(|(_, i)| i);
                    return vec![match (name, suffix) {
                        ("Bus", _) => "EventBus".to_owned(),
                        (n, Some(i)) => format!("{n}/index/{i}"),
                        (n, None) => n.to_owned(),
                    }];
                }
                if text.contains(":event-source-mapping:") {
                    return vec!["event-source-mapping".to_owned()];
                }
                vec![text]
            } else {
                vec![text.split('.').next().unwrap_or_default().to_owned()]
            }
        }
        Value::String(any) if any == "*" => vec![any.clone()],
        other => vec![format!("{other:?}")],
    }
}

/// Every (action, logical resource) a function's policies grant (conditional statements too).
fn granted(function: &str) -> BTreeSet<(String, String)> {
    let t: Value = yaml_serde::from_str(include_str!("../../../../template.yaml")).unwrap();
    let mut out = BTreeSet::new();
    let mut statements = Vec::new();
    for policy in t["Resources"][function]["Properties"]["Policies"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        match policy {
            // `!If [condition, {Statement: …}, !Ref AWS::NoValue]`
            Value::Tagged(t) => {
                if let Some(branch) = t.value.as_sequence().and_then(|s| s.get(1)) {
                    statements.extend(
                        branch["Statement"]
                            .as_sequence()
                            .cloned()
                            .unwrap_or_default(),
                    );
                }
            }
            other => statements.extend(
                other["Statement"]
                    .as_sequence()
                    .cloned()
                    .unwrap_or_default(),
            ),
        }
    }
    for st in statements {
        // `!If [condition, statement, !Ref AWS::NoValue]`: the statement when it applies.
        let st = match st {
            Value::Tagged(t) => t
                .value
                .as_sequence()
                .and_then(|s| s.get(1))
                .cloned()
                .unwrap_or(Value::Null),
            other => other,
        };
        let actions: Vec<String> = match &st["Action"] {
            Value::String(a) => vec![a.clone()],
            Value::Sequence(list) => list
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect(),
            other => panic!("{function}: an action list: {other:?}"),
        };
        for resource in resource_of(&st["Resource"]) {
            for action in &actions {
                out.insert((action.clone(), resource.clone()));
            }
        }
    }
    out
}

/// The contract, for one function: named violations.
fn check(function: &str, used: &BTreeSet<(String, String)>) -> Vec<String> {
    let granted = granted(function);
    let mut out = Vec::new();
    for (action, resource) in used {
        if !granted.contains(&(action.clone(), resource.clone())) {
            out.push(format!(
                "{function} calls {action} on {resource}, which its policy does not grant"
            ));
        }
    }
    for (action, resource) in &granted {
        let service_used = SERVICE_USED
            .iter()
            .any(|(f, a, r)| *f == function && a == action && r == resource);
        // The merchant's key (KmsKeyArn): DynamoDB, SQS, Secrets Manager and the event sources
        // use it with the function's role, its code never calls KMS (so the emulators cannot
        // record it); `kms_grants_come_only_with_the_key_and_name_only_it` checks these.
        let key_used = resource == "KmsKeyArn" && action.starts_with("kms:");
        if !service_used && !key_used && !used.contains(&(action.clone(), resource.clone())) {
            out.push(format!(
                "{function} is granted {action} on {resource}, which it never uses"
            ));
        }
    }
    out
}

fn body(event_id: &str, event_type: &str, data: serde_json::Value) -> String {
    envelope(event_id, event_type, data)
}

async fn ingest_uses(aws: &Aws, created: &Created) -> BTreeSet<(String, String)> {
    let table = created.table("DeliveriesTable");
    let queue = created.queue("WorkQueue");
    let sm = secrets_client(&aws.calls).await;
    let keys = paymos_inbox_aws::secrets::SecretsManagerKeys::new(sm, SECRETS[0].0)
        .keys()
        .await
        .unwrap();
    paymos_inbox_aws::aws::warm_up(&aws.dynamodb, &aws.sqs, table, queue).await;
    let ingest = Ingest::new(
        Verifier::new(keys, 300),
        DynamoLedger::new(aws.dynamodb.clone(), table, Some(30)),
        SqsQueue::new(aws.sqs.clone(), queue),
        IngestSettings {
            lease_secs: 0,
            ..IngestSettings::default()
        },
    );
    let post = |text: String, now_ms: u64| {
        let ingest = &ingest;
        async move {
            let signature = signature_header(
                now_ms / 1000,
                text.as_bytes(),
                &[&WebhookSecret::new(TEST_SECRET)],
            );
            let req = Inbound {
                method: "POST",
                signature: Some(&signature),
                webhook_id: None,
                body: text.as_bytes(),
            };
            let _ = ingest.handle(&req, now_ms).await;
        }
    };
    let paid = |note: &str| {
        body(
            "evt_p",
            "invoice.paid",
            json!({"invoice_id": "inv_p", "note": note}),
        )
    };
    // New; again after the lease (a take-over and a send); again with another body (a conflict).
    post(paid("a"), NOW_MS).await;
    post(paid("a"), NOW_MS + 5_000).await;
    post(paid("b"), NOW_MS + 6_000).await;
    used(created, &aws.calls)
}

/// The ledger record ingest writes for `text` (set-up, through `setup`'s uncounted calls).
async fn recorded(setup: &Aws, table: &str, text: &str, received_at_ms: u64) {
    let delivery = recorded_delivery(text, Environment::Live, received_at_ms);
    DynamoLedger::new(setup.dynamodb.clone(), table, None)
        .record(&delivery, received_at_ms + 1_000)
        .await
        .unwrap();
}

async fn fulfil_uses(aws: &Aws, created: &Created) -> BTreeSet<(String, String)> {
    let setup = Aws::new();
    let (state, deliveries) = (
        created.table("StateTable"),
        created.table("DeliveriesTable"),
    );
    // INIT with the reverse check on: the API's secret.
    let fake = FakePaymos::start().await;
    let sm = secrets_client(&aws.calls).await;
    paymos_inbox_aws::secrets::paymos_client(
        &sm,
        SECRETS[1].0,
        "PAYMOS_API_SECRETS_ID",
        &fake.url,
        std::time::Duration::from_secs(3),
        0,
    )
    .await
    .unwrap();
    DynamoResources::new(setup.dynamodb.clone(), state, deliveries)
        .register_order((None, "o-held"), &Amount::parse("1").unwrap(), "USD")
        .await
        .unwrap();
    let fulfil = Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        state,
        deliveries,
    ))
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    let order =
        |id: &str, amount: &str| json!({"external_id": id, "amount": amount, "currency": "USD"});
    // Every kind of write: open, paid, paid again, held, closed then paid late, a refund, a
    // credit, a credit that waits for Paymos' word, a second message of a processed delivery.
    let history = [
        body(
            "evt_f1",
            "invoice.confirming",
            json!({"invoice_id": "inv_f", "order": order("o-f", "5")}),
        ),
        body(
            "evt_f2",
            "invoice.paid",
            json!({"invoice_id": "inv_f", "order": order("o-f", "5")}),
        ),
        body(
            "evt_f3",
            "invoice.paid",
            json!({"invoice_id": "inv_f", "order": order("o-f", "5")}),
        ),
        body(
            "evt_f4",
            "invoice.paid",
            json!({"invoice_id": "inv_h", "order": order("o-held", "2")}),
        ),
        body("evt_f5", "invoice.expired", json!({"invoice_id": "inv_l"})),
        body("evt_f6", "invoice.paid", json!({"invoice_id": "inv_l"})),
        body(
            "evt_f7",
            "withdrawal.completed",
            json!({"withdrawal_id": "wdr_f", "invoice_id": "inv_h", "type": "refund", "amount": "2", "currency": "USD"}),
        ),
        body(
            "evt_f8",
            "payment_channel.deposit.confirmed",
            json!({"id": "pcd_f", "is_final": true, "payment_channel_external_id": "c-1", "net": "1", "currency": "USDT"}),
        ),
        body(
            "evt_f9",
            "payment_channel.deposit.confirmed",
            json!({"id": "pcd_g", "is_final": true, "net": "1", "currency": "USDT"}),
        ),
        body(
            "evt_f2",
            "invoice.paid",
            json!({"invoice_id": "inv_f", "order": order("o-f", "5")}),
        ),
    ];
    for text in &history {
        recorded(&setup, deliveries, text, NOW_MS).await;
        fulfil.apply(&live(text), NOW_MS).await.unwrap();
    }
    // A message it cannot apply is given its visibility on the work queue (as the event source
    // received it: SAM's poller policy, not fulfil's code).
    let queue = created.queue("WorkQueue");
    setup.send_raw(queue, "not a work item").await;
    let received = setup
        .sqs
        .receive_message()
        .queue_url(queue)
        .max_number_of_messages(10)
        .wait_time_seconds(5)
        .send()
        .await
        .unwrap();
    // Ingest's work items are there too.
    let message = received
        .messages()
        .iter()
        .find(|m| m.body() == Some("not a work item"))
        .expect("the message sent");
    let mut event = aws_lambda_events::sqs::SqsEvent::default();
    let mut record = aws_lambda_events::sqs::SqsMessage::default();
    record.message_id = message.message_id().map(str::to_owned);
    record.receipt_handle = message.receipt_handle().map(str::to_owned);
    record.body = message.body().map(str::to_owned);
    event.records = vec![record];
    let response = paymos_inbox_lambda::fulfil::handle_batch(
        &fulfil,
        &SqsQueue::new(aws.sqs.clone(), queue),
        event,
        NOW_MS,
    )
    .await;
    assert_eq!(response.batch_item_failures.len(), 1);
    used(created, &aws.calls)
}

async fn sweep_uses(aws: &Aws, created: &Created) -> BTreeSet<(String, String)> {
    let setup = Aws::new();
    let deliveries = created.table("DeliveriesTable");
    let stranded = body("evt_s1", "invoice.paid", json!({"invoice_id": "inv_s"}));
    let now = paymos_inbox_lambda::now_ms();
    recorded(&setup, deliveries, &stranded, now - 3_600_000).await;
    // What waits for a person, which the sweep counts as `exceptions` reads it: a payment of
    // an order known nowhere (its delivery waits; its invoice is read by key).
    let waits = body("evt_s2", "invoice.paid", json!({"invoice_id": "inv_s2"}));
    recorded(&setup, deliveries, &waits, now).await;
    Fulfil::new(DynamoResources::new(
        setup.dynamodb.clone(),
        created.table("StateTable"),
        deliveries,
    ))
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
    .apply(&live(&waits), now)
    .await
    .unwrap();
    let run = paymos_inbox_lambda::sweep::sweep_once(
        (
            &DynamoLedger::new(aws.dynamodb.clone(), deliveries, None),
            &DynamoResources::new(
                aws.dynamodb.clone(),
                created.table("StateTable"),
                deliveries,
            ),
        ),
        &SqsQueue::new(aws.sqs.clone(), created.queue("WorkQueue")),
        30,
        600,
        now,
    )
    .await
    .unwrap();
    assert!(run.waiting >= 1, "the payment waits for a person: {run:?}");
    used(created, &aws.calls)
}

async fn reconcile_uses(aws: &Aws, created: &Created) -> BTreeSet<(String, String)> {
    let (state, deliveries) = (
        created.table("StateTable"),
        created.table("DeliveriesTable"),
    );
    let fake = FakePaymos::start().await;
    let sm = secrets_client(&aws.calls).await;
    let api = paymos_inbox_aws::secrets::paymos_client(
        &sm,
        SECRETS[1].0,
        "PAYMOS_API_SECRETS_ID",
        &fake.url,
        std::time::Duration::from_secs(3),
        0,
    )
    .await
    .unwrap();
    let now = paymos_inbox_lambda::now_ms();
    let mut paid = invoice("inv_rc", "paid", ("5", "USD"), ("5", "USDT"));
    paid["created_at"] = json!(now / 1000 - 60);
    let mut late = invoice("inv_rl", "expired", ("5", "USD"), ("5", "USDT"));
    late["created_at"] = json!(now / 1000 - 60);
    late["paid_late_at"] = json!(now / 1000 - 30);
    fake.answer("inv_rc", Answer::Invoices(vec![paid]));
    fake.answer("inv_rl", Answer::Invoices(vec![late]));
    let fulfil = Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        state,
        deliveries,
    ))
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    let now_s = i64::try_from(now / 1000).unwrap();
    paymos_inbox_testkit::reconcile(&api, &fulfil, now_s - 3600, now_s + 60, true, now)
        .await
        .unwrap();
    used(created, &aws.calls)
}

async fn publisher_uses(aws: &Aws, created: &Created) -> BTreeSet<(String, String)> {
    use paymos_inbox_core::roads::handoff::EventPublisher as _;
    let url =
        paymos_inbox_local::stub::serve(|_req: hyper::Request<hyper::body::Incoming>| async {
            let body = json!({"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]}).to_string();
            hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(body)))
        })
        .await
        .unwrap();
    let config = aws_sdk_eventbridge::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_eventbridge::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_eventbridge::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .endpoint_url(url)
        .interceptor(aws.calls.clone())
        .build();
    let publisher = paymos_inbox_aws::events::EventBridgePublisher::new(
        aws_sdk_eventbridge::Client::from_conf(config),
        BUS,
    );
    let event = paymos_inbox_core::roads::handoff::DomainEvent {
        detail_type: "Order Paid",
        idempotency_key: "order-paid:inv_1".into(),
        detail: json!({"invoice_id": "inv_1"}),
        traceparent: None,
    };
    publisher.publish(&[event]).await.unwrap();
    used(created, &aws.calls)
}

async fn deliver_uses(aws: &Aws, created: &Created) -> BTreeSet<(String, String)> {
    let sm = secrets_client(&aws.calls).await;
    paymos_inbox_aws::secrets::outbound_secret(&sm, SECRETS[2].0, "WEBHOOK_SIGNING_SECRET_ID")
        .await
        .unwrap();
    // A message the endpoint refused comes back on the schedule: received (by the event
    // source, as SAM grants it), then its visibility set by the function.
    let url = created.queue("WebhookDeliveryQueue");
    let setup = Aws::new();
    setup
        .sqs
        .send_message()
        .queue_url(url)
        .message_body("{}")
        .send()
        .await
        .unwrap();
    let received = setup
        .sqs
        .receive_message()
        .queue_url(url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let receipt = received.messages()[0].receipt_handle().unwrap().to_owned();
    let queue = SqsQueue::new(aws.sqs.clone(), url)
        .with_dead_letters(created.queue("WebhookTargetDeadLetterQueue"));
    paymos_inbox_core::roads::outbound::RetryQueue::retry_in(&queue, &receipt, 5)
        .await
        .unwrap();
    // An endpoint that answers 410 Gone: the event is parked at once.
    paymos_inbox_core::roads::outbound::RetryQueue::park(&queue, "{}", "410 Gone")
        .await
        .unwrap();
    // A destination failing past WebhookPauseAfterHours: its own event source mapping found
    // and switched off (on dev's stand-in of Lambda's API), the Endpoint Paused fact published.
    let on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let lambda_url = paymos_inbox_local::switch::serve(on).await.unwrap();
    let lambda = aws_sdk_lambda::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_lambda::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_lambda::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .endpoint_url(lambda_url)
        .interceptor(aws.calls.clone())
        .build();
    let switch = paymos_inbox_aws::lambda::EventSourceSwitch::new(
        aws_sdk_lambda::Client::from_conf(lambda),
        "arn:aws:sqs:us-east-1:000000000000:WebhookDeliveryQueue",
    );
    let bus_url =
        paymos_inbox_local::stub::serve(|_req: hyper::Request<hyper::body::Incoming>| async {
            let body = json!({"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]}).to_string();
            hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(body)))
        })
        .await
        .unwrap();
    let events = aws_sdk_eventbridge::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_eventbridge::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_eventbridge::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .endpoint_url(bus_url)
        .interceptor(aws.calls.clone())
        .build();
    let bus = paymos_inbox_aws::events::EventBridgePublisher::new(
        aws_sdk_eventbridge::Client::from_conf(events),
        BUS,
    );
    let fact = paymos_inbox_core::roads::endpoint::endpoint_paused(Environment::Live, 1, "503", 2);
    assert!(
        paymos_inbox_core::roads::endpoint::pause_failing(&switch, &bus, fact)
            .await
            .unwrap()
    );
    used(created, &aws.calls)
}

#[tokio::test]
async fn every_call_is_granted_and_every_grant_is_used() {
    let aws = Aws::new();
    let created = aws.stack().await;
    let mut uses: BTreeMap<&str, BTreeSet<(String, String)>> = BTreeMap::new();
    for function in [
        "IngestFunction",
        "FulfilFunction",
        "SweepFunction",
        "ReconcileFunction",
        "PublisherFunction",
        "DeliverFunction",
    ] {
        // A client pair of its own per function: its calls alone are recorded.
        let aws = Aws::new();
        let found = match function {
            "IngestFunction" => ingest_uses(&aws, &created).await,
            "FulfilFunction" => fulfil_uses(&aws, &created).await,
            "SweepFunction" => sweep_uses(&aws, &created).await,
            "ReconcileFunction" => reconcile_uses(&aws, &created).await,
            "PublisherFunction" => publisher_uses(&aws, &created).await,
            _ => deliver_uses(&aws, &created).await,
        };
        uses.insert(function, found);
    }
    let violations: Vec<String> = uses
        .iter()
        .flat_map(|(function, used)| check(function, used))
        .collect();
    assert!(violations.is_empty(), "{violations:#?}\nused: {uses:#?}");
    drop(aws);
}

#[test]
fn a_missing_or_an_unused_grant_is_named() {
    let used: BTreeSet<(String, String)> = [
        ("sqs:SendMessage".to_owned(), "WorkQueue".to_owned()),
        (
            "dynamodb:Query".to_owned(),
            "DeliveriesTable/index/pending-by-age".to_owned(),
        ),
        ("dynamodb:GetItem".to_owned(), "DeliveriesTable".to_owned()),
        (
            "dynamodb:DeleteItem".to_owned(),
            "DeliveriesTable".to_owned(),
        ),
    ]
    .into_iter()
    .collect();
    let said = check("SweepFunction", &used);
    assert!(
        said.iter()
            .any(|v| v.contains("calls dynamodb:DeleteItem on DeliveriesTable")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|v| v.contains("granted dynamodb:UpdateItem on DeliveriesTable")),
        "{said:?}"
    );
}

/// The actions of one policy statement.
fn actions_of(statement: &Value) -> Vec<String> {
    match &statement["Action"] {
        Value::String(a) => vec![a.clone()],
        Value::Sequence(list) => list
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect(),
        other => panic!("an action list: {other:?}"),
    }
}

// Issue 32: with the optional customer managed key (KmsKeyArn), every function may decrypt and
// generate data keys with that key and no other, and only when it is set: each statement is
// `!If [HasKmsKey, {…, Resource: !Ref KmsKeyArn}, !Ref AWS::NoValue]`.
#[test]
fn kms_grants_come_only_with_the_key_and_name_only_it() {
    let t: Value = yaml_serde::from_str(include_str!("../../../../template.yaml")).unwrap();
    let is_ref = |v: &Value, name: &str| matches!(v, Value::Tagged(t) if t.tag == "Ref" && t.value.as_str() == Some(name));
    // HasKmsKey: !Not [!Equals [!Ref KmsKeyArn, ""]]
    let set = match &t["Conditions"]["HasKmsKey"] {
        Value::Tagged(not) if not.tag == "Not" => match &not.value[0] {
            Value::Tagged(eq) if eq.tag == "Equals" => {
                is_ref(&eq.value[0], "KmsKeyArn") && eq.value[1].as_str() == Some("")
            }
            _ => false,
        },
        _ => false,
    };
    assert!(set, "HasKmsKey is KmsKeyArn being set");
    assert_eq!(t["Parameters"]["KmsKeyArn"]["Default"].as_str(), Some(""));
    let resources = t["Resources"].as_mapping().unwrap();
    let mut functions = 0;
    for (name, r) in resources {
        let name = name.as_str().unwrap();
        if r["Type"].as_str() != Some("AWS::Serverless::Function") {
            // No policy elsewhere in the template (a queue or bus policy, an IAM resource).
            assert!(
                !format!("{r:?}").contains("kms:"),
                "{name} grants a KMS action"
            );
            continue;
        }
        functions += 1;
        let mut on_the_key = 0;
        for policy in r["Properties"]["Policies"]
            .as_sequence()
            .into_iter()
            .flatten()
        {
            assert!(
                !matches!(policy, Value::Tagged(_)),
                "{name}: conditions go on statements"
            );
            for st in policy["Statement"].as_sequence().into_iter().flatten() {
                match st {
                    Value::Tagged(t) if t.tag == "If" => {
                        let branches = t.value.as_sequence().unwrap();
                        if !actions_of(&branches[1])
                            .iter()
                            .any(|a| a.starts_with("kms:"))
                        {
                            continue;
                        }
                        assert_eq!(
                            branches[0].as_str(),
                            Some("HasKmsKey"),
                            "{name}: a KMS grant only when KmsKeyArn is set"
                        );
                        assert!(
                            is_ref(&branches[2], "AWS::NoValue"),
                            "{name}: nothing otherwise"
                        );
                        let statement = &branches[1];
                        assert_eq!(statement["Effect"].as_str(), Some("Allow"));
                        assert!(
                            is_ref(&statement["Resource"], "KmsKeyArn"),
                            "{name}: on the key parameter alone, got {:?}",
                            statement["Resource"]
                        );
                        assert_eq!(
                            actions_of(statement),
                            ["kms:Decrypt", "kms:GenerateDataKey"],
                            "{name}"
                        );
                        on_the_key += 1;
                    }
                    plain => assert!(
                        !actions_of(plain).iter().any(|a| a.starts_with("kms:")),
                        "{name}: a KMS grant without the condition"
                    ),
                }
            }
        }
        assert_eq!(on_the_key, 1, "{name}: one statement on the key");
        // As the least-privilege contract reads the policy: those two actions, on the key.
        let kms: BTreeSet<(String, String)> = granted(name)
            .into_iter()
            .filter(|(action, _)| action.starts_with("kms:"))
            .collect();
        let expected: BTreeSet<(String, String)> = ["kms:Decrypt", "kms:GenerateDataKey"]
            .iter()
            .map(|a| ((*a).to_owned(), "KmsKeyArn".to_owned()))
            .collect();
        assert_eq!(kms, expected, "{name}");
    }
    assert_eq!(functions, 6, "every function was read");
}

// Issue 42, item 10: docs/deploy.md's IAM sentences left out ingest's `GetItem`, the sweep's
// `Query` on `waiting` and the deliver function. Each function's bullet there names every
// action its policies grant (KMS has its own bullet), and docs/security.md's summary names
// ingest's and fulfil's.
#[test]
fn every_granted_action_is_named_where_the_docs_list_the_grants() {
    let chapter = include_str!("../../../../docs/deploy.md");
    let bullet = |short: &str| {
        let start = chapter
            .find(&format!("- **{short}**"))
            .unwrap_or_else(|| panic!("docs/deploy.md has an IAM bullet for {short}"));
        let rest = &chapter[start + 2..];
        rest[..rest.find("\n- ").unwrap_or(rest.len())].to_owned()
    };
    let mut failures = Vec::new();
    for (function, short) in [
        ("IngestFunction", "ingest"),
        ("FulfilFunction", "fulfil"),
        ("SweepFunction", "sweep"),
        ("ReconcileFunction", "reconcile"),
        ("PublisherFunction", "publish"),
        ("DeliverFunction", "deliver"),
    ] {
        let text = bullet(short);
        for (action, resource) in granted(function) {
            let (service, name) = action.split_once(':').unwrap();
            if service == "kms" {
                continue;
            }
            if !text.contains(&format!("`{name}`")) {
                failures.push(format!(
                    "{short}: {action} on {resource} is granted, docs/deploy.md's bullet does not name it"
                ));
            }
        }
    }
    // docs/security.md's summary names ingest's and fulfil's.
    let security = include_str!("../../../../docs/security.md");
    let summary = security
        .split("**Least privilege.** ")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .expect("docs/security.md summarises the functions' grants");
    let (ingest, fulfil) = summary
        .split_once("Fulfil:")
        .expect("ingest's, then fulfil's");
    for (function, text) in [("IngestFunction", ingest), ("FulfilFunction", fulfil)] {
        for (action, _) in granted(function) {
            let (service, name) = action.split_once(':').unwrap();
            if service != "kms" && !text.contains(&format!("`{name}`")) {
                failures.push(format!(
                    "{function}: {action} is granted, docs/security.md's summary does not name it"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
