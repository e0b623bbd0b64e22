//! `template.yaml` and the code cannot drift: every table key, stream, redrive, binary name and
//! environment variable the code relies on is read from the template and checked here.

use std::collections::HashMap;

use paymos_inbox_aws::dynamodb::{LedgerSchema, ResourceSchema};
use paymos_inbox_lambda::config::{
    self, FulfilConfig, IngestConfig, PublishConfig, ReconcileConfig, SweepConfig,
};
use yaml_serde::Value;

use crate::conditions::Stack;

fn template() -> Value {
    let text = include_str!("../../../../template.yaml");
    yaml_serde::from_str(text).expect("template.yaml parses")
}

fn resource<'t>(t: &'t Value, name: &str) -> &'t Value {
    let r = &t["Resources"][name];
    assert!(!r.is_null(), "template.yaml has no resource {name}");
    r
}

fn props<'t>(t: &'t Value, name: &str) -> &'t Value {
    &resource(t, name)["Properties"]
}

/// `!Ref X` / `!GetAtt X.Arn` → "X".
fn target(v: &Value) -> String {
    match v {
        Value::Tagged(tagged) => tagged
            .value
            .as_str()
            .unwrap_or_default()
            .split('.')
            .next()
            .unwrap_or_default()
            .to_owned(),
        other => panic!("expected !Ref or !GetAtt, got {other:?}"),
    }
}

fn env_vars(t: &Value, function: &str) -> HashMap<String, String> {
    props(t, function)["Environment"]["Variables"]
        .as_mapping()
        .unwrap_or_else(|| panic!("{function} has no Environment.Variables"))
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_owned(), format!("{v:?}")))
        .collect()
}

fn hash_key(t: &Value, table: &str) -> String {
    let p = props(t, table);
    let schema = p["KeySchema"].as_sequence().expect("KeySchema");
    assert_eq!(schema.len(), 1, "{table} has a single hash key");
    assert_eq!(schema[0]["KeyType"].as_str(), Some("HASH"));
    let key = schema[0]["AttributeName"].as_str().unwrap().to_owned();
    let defs = p["AttributeDefinitions"]
        .as_sequence()
        .expect("AttributeDefinitions");
    assert!(
        defs.iter()
            .any(|d| d["AttributeName"].as_str() == Some(&key)
                && d["AttributeType"].as_str() == Some("S")),
        "{table}.{key} is a string"
    );
    key
}

// Issue 32, "years of data": the raw bodies expire by the table's TTL, always on, after a
// retention the ingest function is given, with the ledger's default and floor.
#[test]
fn raw_bodies_expire_by_the_tables_ttl_after_the_body_retention() {
    let t = template();
    assert_eq!(
        props(&t, "DeliveriesTable")["TimeToLiveSpecification"]["Enabled"].as_bool(),
        Some(true),
        "always on: the body items need it whatever DeliveryRetentionDays says"
    );
    let p = &t["Parameters"]["BodyRetentionDays"];
    assert_eq!(
        p["Default"].as_u64(),
        Some(LedgerSchema::DEFAULT_BODY_RETENTION_DAYS)
    );
    assert_eq!(
        p["MinValue"].as_u64(),
        Some(LedgerSchema::MIN_BODY_RETENTION_DAYS)
    );
    assert!(
        env_vars(&t, "IngestFunction")[config::BODY_RETENTION_DAYS].contains("BodyRetentionDays"),
        "the ingest function is given it"
    );
    let groups = format!(
        "{:?}",
        t["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    );
    assert!(groups.contains("BodyRetentionDays"), "in a parameter group");
}

#[test]
fn tables_have_the_keys_the_adapters_use() {
    let t = template();
    assert_eq!(hash_key(&t, "DeliveriesTable"), LedgerSchema::KEY);
    assert_eq!(hash_key(&t, "StateTable"), ResourceSchema::KEY);
    assert_eq!(
        props(&t, "DeliveriesTable")["TimeToLiveSpecification"]["AttributeName"].as_str(),
        Some(LedgerSchema::TTL)
    );
    for table in ["DeliveriesTable", "StateTable"] {
        let p = props(&t, table);
        // On demand unless the merchant asks for provisioned capacity (issue 39).
        assert_eq!(target(&p["BillingMode"]), "TableBillingMode", "{table}");
        assert_eq!(
            p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool(),
            Some(true),
            "{table} PITR"
        );
        assert_eq!(
            resource(&t, table)["DeletionPolicy"].as_str(),
            Some("Retain"),
            "{table} survives a stack delete"
        );
    }
    // The sparse index `pending` queries: name, hash and range keys as the adapter spells them.
    let index = props(&t, "DeliveriesTable")["GlobalSecondaryIndexes"]
        .as_sequence()
        .and_then(|gsis| {
            gsis.iter()
                .find(|g| g["IndexName"].as_str() == Some(LedgerSchema::PENDING_INDEX))
        })
        .expect("the deliveries table has the pending index");
    let keys: Vec<(&str, &str)> = index["KeySchema"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["AttributeName"].as_str().unwrap(),
                k["KeyType"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            (LedgerSchema::PENDING_SHARD, "HASH"),
            (LedgerSchema::PENDING_SORT, "RANGE")
        ]
    );
    assert!(
        props(&t, "StateTable")["StreamSpecification"]["StreamViewType"]
            .as_str()
            .is_some(),
        "downstream systems react to committed fulfilments on the state table's stream"
    );
}

// Issue 30: the hand-off gave up after about 24 minutes (visibility 120 s, 12 receives).
#[test]
fn the_hand_off_queue_parks_a_message_only_after_the_whole_retry_schedule() {
    let t = template();
    let queue = props(&t, "WebhookDeliveryQueue");
    assert_eq!(
        target(&queue["RedrivePolicy"]["deadLetterTargetArn"]),
        "WebhookTargetDeadLetterQueue"
    );
    assert_eq!(
        queue["RedrivePolicy"]["maxReceiveCount"].as_u64(),
        Some(u64::from(paymos_inbox_core::roads::outbound::ATTEMPTS)),
        "one receive per attempt of the schedule"
    );
    let timeout = props(&t, "DeliverFunction")["Timeout"].as_u64().unwrap();
    let visibility = queue["VisibilityTimeout"].as_u64().unwrap();
    assert!(
        visibility >= 6 * timeout,
        "visibility {visibility} >= 6 x {timeout}"
    );
    let source = &props(&t, "DeliverFunction")["Events"]["Deliveries"]["Properties"];
    assert_eq!(
        target(&source["ScalingConfig"]["MaximumConcurrency"]),
        "WebhookMaxConcurrency",
        "the endpoint's load is bounded by a parameter"
    );
    let schedule: u32 = paymos_inbox_core::roads::outbound::RETRY_DELAYS_S
        .iter()
        .sum();
    assert!(
        schedule >= 24 * 3600,
        "retried for a day at least: {schedule} s"
    );
    assert!(
        u64::from(schedule) < queue["MessageRetentionPeriod"].as_u64().unwrap(),
        "the queue keeps a message longer than its schedule"
    );
}

#[test]
fn the_queue_redrives_to_the_dlq_and_outlasts_the_fulfil_timeout() {
    let t = template();
    let queue = props(&t, "WorkQueue");
    assert_eq!(
        target(&queue["RedrivePolicy"]["deadLetterTargetArn"]),
        "DeadLetterQueue"
    );
    let max_receive = queue["RedrivePolicy"]["maxReceiveCount"]
        .as_u64()
        .expect("maxReceiveCount");
    assert_eq!(
        max_receive,
        u64::from(paymos_inbox_core::wire::work::WORK_RECEIVES),
        "the receives fulfil's redelivery schedule counts on"
    );
    // Issue 39: fulfil paces the redeliveries on the work queue itself.
    let fulfil = props(&t, "FulfilFunction");
    assert_eq!(
        target(&fulfil["Environment"]["Variables"]["WORK_QUEUE_URL"]),
        "WorkQueue"
    );
    let paces = fulfil["Policies"][0]["Statement"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|st| {
            st["Action"] == "sqs:ChangeMessageVisibility" && target(&st["Resource"]) == "WorkQueue"
        });
    assert!(
        paces,
        "fulfil may set the visibility of the work queue's messages"
    );
    let fulfil_timeout = props(&t, "FulfilFunction")["Timeout"]
        .as_u64()
        .expect("fulfil Timeout");
    let visibility = queue["VisibilityTimeout"]
        .as_u64()
        .expect("VisibilityTimeout");
    assert!(
        visibility >= 6 * fulfil_timeout,
        "visibility {visibility} >= 6 x {fulfil_timeout}"
    );
    for q in ["WorkQueue", "DeadLetterQueue"] {
        assert_eq!(
            props(&t, q)["MessageRetentionPeriod"].as_u64(),
            Some(1_209_600),
            "{q} keeps 14 days"
        );
    }
    let source = &props(&t, "FulfilFunction")["Events"]["Work"]["Properties"];
    assert_eq!(target(&source["Queue"]), "WorkQueue");
    assert_eq!(
        source["FunctionResponseTypes"][0].as_str(),
        Some("ReportBatchItemFailures")
    );
}

#[test]
fn each_function_gets_every_variable_its_binary_reads_and_no_secret() {
    let t = template();
    let ingest = env_vars(&t, "IngestFunction");
    IngestConfig::from_lookup(|k| {
        ingest.get(k).map(|_| {
            // Both retentions are at least 7 days.
            if k == config::BODY_RETENTION_DAYS || k == config::DELIVERY_RETENTION_DAYS {
                "90".to_owned()
            } else {
                "1".to_owned()
            }
        })
    })
    .expect("ingest config is complete");
    let fulfil = env_vars(&t, "FulfilFunction");
    FulfilConfig::from_lookup(|k| {
        fulfil.get(k).map(|_| {
            if k == config::PAYMOS_ENVIRONMENT {
                "live".to_owned()
            } else if k == config::PAYMOS_PROJECT_IDS {
                "prj_a,prj_b".to_owned()
            } else {
                "1".to_owned()
            }
        })
    })
    .expect("fulfil config is complete");
    let sweep = env_vars(&t, "SweepFunction");
    SweepConfig::from_lookup(|k| sweep.get(k).map(|_| "1".to_owned()))
        .expect("sweep config is complete");
    let publish = env_vars(&t, "PublisherFunction");
    PublishConfig::from_lookup(|k| {
        publish.get(k).map(|_| {
            if k == config::PAYMOS_ENVIRONMENT {
                "live".to_owned()
            } else {
                "1".to_owned()
            }
        })
    })
    .expect("publisher config is complete");
    let reconcile = env_vars(&t, "ReconcileFunction");
    ReconcileConfig::from_lookup(|k| {
        reconcile.get(k).map(|_| {
            match k {
                config::RECONCILE_APPLY => "false",
                config::PAYMOS_ENVIRONMENT => "live",
                config::PAYMOS_PROJECT_IDS => "prj_a",
                _ => "1",
            }
            .to_owned()
        })
    })
    .expect("reconcile config is complete");
    let deliver = env_vars(&t, "DeliverFunction");
    config::DeliverConfig::from_lookup(|k| {
        deliver.get(k).map(|_| {
            match k {
                config::WEBHOOK_TARGET_URL => "https://shop.example/hook",
                config::PAYMOS_ENVIRONMENT => "live",
                _ => "1",
            }
            .to_owned()
        })
    })
    .expect("deliverer config is complete");
    let known = [
        config::WEBHOOK_TARGET_URL,
        config::WEBHOOK_SIGNING_SECRET_ID,
        config::WEBHOOK_QUEUE_URL,
        config::WEBHOOK_DLQ_URL,
        config::WEBHOOK_PAUSE_AFTER_HOURS,
        config::WEBHOOK_QUEUE_ARN,
        config::DELIVERIES_TABLE,
        config::STATE_TABLE,
        config::WORK_QUEUE_URL,
        config::WEBHOOK_SECRETS_ID,
        config::SIGNATURE_TOLERANCE_SECS,
        config::MAX_BODY_BYTES,
        config::INGEST_LEASE_SECS,
        config::DELIVERY_RETENTION_DAYS,
        config::BODY_RETENTION_DAYS,
        config::PAYMOS_API_SECRETS_ID,
        config::PAYMOS_ENVIRONMENT,
        config::PAYMOS_PROJECT_IDS,
        config::REVERSE_CHECK_PATIENCE_MINUTES,
        config::SWEEP_AFTER_SECS,
        config::RECONCILE_WINDOW_HOURS,
        config::RECONCILE_APPLY,
        config::EVENT_BUS_NAME,
    ];
    for (name, value) in ingest
        .iter()
        .chain(&fulfil)
        .chain(&sweep)
        .chain(&reconcile)
        .chain(&publish)
        .chain(&deliver)
    {
        assert!(
            known.contains(&name.as_str()),
            "{name} is set in template.yaml but read by no binary"
        );
        assert!(
            !value.contains("whsec_"),
            "{name}: secrets never go into environment variables"
        );
    }
}

#[test]
fn functions_build_the_binaries_cargo_defines_and_fit_the_senders_clock() {
    let t = template();
    let cargo: toml_like::Bins = toml_like::bins(include_str!("../../../lambda/Cargo.toml"));
    for (function, binary) in [
        ("IngestFunction", "paymos-ingest"),
        ("FulfilFunction", "paymos-fulfil"),
        ("SweepFunction", "paymos-sweep"),
        ("ReconcileFunction", "paymos-reconcile"),
        ("PublisherFunction", "paymos-publish"),
        ("DeliverFunction", "paymos-deliver"),
    ] {
        let r = resource(&t, function);
        assert_eq!(
            r["Metadata"]["BuildMethod"].as_str(),
            Some("rust-cargolambda")
        );
        assert_eq!(
            r["Metadata"]["BuildProperties"]["Binary"].as_str(),
            Some(binary)
        );
        assert!(
            cargo.contains(&binary.to_owned()),
            "crates/lambda/Cargo.toml defines [[bin]] {binary}"
        );
    }
    let globals = &t["Globals"]["Function"];
    assert_eq!(globals["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(globals["Architectures"][0].as_str(), Some("arm64"));
    assert_eq!(globals["LoggingConfig"]["LogFormat"].as_str(), Some("JSON"));
    // Lambda files a line without a level (the metrics' EMF documents) as INFO: above INFO the
    // metrics, and every alarm on them, would go silent. `LogLevel` lowers our lines instead.
    assert_eq!(
        globals["LoggingConfig"]["ApplicationLogLevel"].as_str(),
        Some("INFO")
    );
    assert!(is_ref(
        &globals["Environment"]["Variables"][paymos_inbox_lambda::config::LOG_LEVEL],
        "LogLevel"
    ));
    assert!(is_ref(
        &globals["Environment"]["Variables"][paymos_inbox_lambda::config::MONITORING],
        "Monitoring"
    ));
    assert!(is_ref(&globals["Tracing"], "Tracing"));
    let ingest_timeout = props(&t, "IngestFunction")["Timeout"].as_u64().unwrap();
    assert!(ingest_timeout < 10, "ingest answers inside Paymos' 10 s");
    let lease: u64 = props(&t, "IngestFunction")["Environment"]["Variables"]
        [config::INGEST_LEASE_SECS]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("INGEST_LEASE_SECS is a number");
    assert!(
        lease > ingest_timeout && lease < 60,
        "the lease outlives an attempt and ends before Paymos' first retry"
    );
    assert_eq!(
        props(&t, "IngestFunction")["FunctionUrlConfig"]["AuthType"].as_str(),
        Some("NONE")
    );
}

#[test]
fn every_alarm_watches_a_resource_of_this_stack() {
    let t = template();
    let alarms: Vec<_> = t["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        // Metric math alarms (on our own metrics) have no top-level dimensions.
        .filter(|(_, r)| !r["Properties"]["Dimensions"].is_null())
        .map(|(name, r)| {
            (
                name.as_str().unwrap().to_owned(),
                target(&r["Properties"]["Dimensions"][0]["Value"]),
            )
        })
        .collect();
    let watched: Vec<&str> = alarms.iter().map(|(_, t)| t.as_str()).collect();
    for needed in [
        "DeadLetterQueue",
        "WorkQueue",
        "IngestFunction",
        "FulfilFunction",
        "SweepFunction",
        "ReconcileFunction",
        "PublisherFunction",
        "DeliverFunction",
        "EventsDeliveryDeadLetterQueue",
        "WebhookTargetDeadLetterQueue",
        "WebhookDeliveryQueue",
        "PublishFailuresQueue",
    ] {
        assert!(
            watched.contains(&needed),
            "an alarm watches {needed}: {alarms:?}"
        );
    }
}

/// The `[[bin]]` names of Cargo.toml, without a TOML dependency.
mod toml_like {
    pub type Bins = Vec<String>;

    pub fn bins(cargo: &str) -> Bins {
        cargo
            .split("[[bin]]")
            .skip(1)
            .filter_map(|section| {
                section.lines().find_map(|l| {
                    l.trim()
                        .strip_prefix("name = ")
                        .map(|v| v.trim_matches('"').to_owned())
                })
            })
            .collect()
    }
}

#[test]
fn every_alarm_on_our_metrics_names_a_metric_and_an_outcome_the_code_emits() {
    use paymos_inbox_lambda::telemetry::metric;
    let t = template();
    let mut checked = 0;
    let mut check = |alarm: &str, m: &yaml_serde::Value| {
        if m["Namespace"].as_str() != Some(metric::NAMESPACE) {
            return;
        }
        let name = m["MetricName"].as_str().unwrap();
        assert!(
            metric::ALL.contains(&name),
            "{alarm} watches {name}, which the code never emits"
        );
        for d in m["Dimensions"].as_sequence().unwrap() {
            let dim = d["Name"].as_str().unwrap();
            assert!(
                [metric::STACK, metric::OUTCOME].contains(&dim),
                "{alarm}: the code emits no {dim} dimension"
            );
            if dim == metric::OUTCOME {
                let outcome = d["Value"].as_str().unwrap();
                let emitted = if name == metric::INGEST_ANSWERS {
                    INGEST_OUTCOMES.contains(&outcome)
                } else if name == metric::MISCONFIGURED {
                    // `telemetry::misconfigured_at_start` is called with the setting's name.
                    misconfigured_settings().contains(outcome)
                } else {
                    fulfil_outcomes().contains(&outcome)
                };
                assert!(emitted, "{alarm}: {name} is never emitted with {outcome}");
            }
        }
        checked += 1;
    };
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::CloudWatch::Alarm") {
            continue;
        }
        let name = name.as_str().unwrap();
        let p = &r["Properties"];
        check(name, p);
        for m in p["Metrics"].as_sequence().into_iter().flatten() {
            check(name, &m["MetricStat"]["Metric"]);
        }
    }
    assert!(
        checked >= 8,
        "the alarms on our own metrics were found ({checked})"
    );
}

#[test]
fn an_event_id_reused_across_environments_is_alarmed_at_the_first_one() {
    use paymos_inbox_lambda::telemetry::metric;
    let t = template();
    let alarm = t["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .map(|r| &r["Properties"])
        .find(|p| p["MetricName"].as_str() == Some(metric::CROSS_ENVIRONMENT_IDS))
        .expect("an alarm watches the reuse of an event id across environments");
    assert_eq!(alarm["Namespace"].as_str(), Some(metric::NAMESPACE));
    assert_eq!(alarm["Statistic"].as_str(), Some("Sum"));
    assert_eq!(
        (
            alarm["Threshold"].as_u64(),
            alarm["ComparisonOperator"].as_str()
        ),
        (Some(0), Some("GreaterThanThreshold")),
        "one reuse is one too many"
    );
    assert!(
        !alarm["AlarmActions"].is_null(),
        "it notifies the alarm topic"
    );
    // Ingest finds the other environment's record with a GetItem: a missing grant would hide
    // every reuse behind AccessDenied (the read is best effort).
    let statements = props(&t, "IngestFunction")["Policies"][0]["Statement"]
        .as_sequence()
        .unwrap();
    assert!(
        statements.iter().any(|st| {
            target(&st["Resource"]) == "DeliveriesTable"
                && st["Action"]
                    .as_sequence()
                    .is_some_and(|a| a.iter().any(|a| a.as_str() == Some("dynamodb:GetItem")))
        }),
        "ingest may read the deliveries table"
    );
}

/// What `IngestAnswers` is emitted with: the two acknowledgements and every error code.
const INGEST_OUTCOMES: [&str; 17] = [
    "new",
    "duplicate",
    "method_not_allowed",
    "payload_too_large",
    "missing_signature",
    "malformed_header",
    "timestamp_outside_tolerance",
    "signature_mismatch",
    "invalid_payload",
    "webhook_id_mismatch",
    "environment_mismatch",
    "environment_conflict",
    "in_progress",
    "unavailable",
    "throttled",
    "conflict",
    "misconfigured",
];

/// What `FulfilOutcomes` is emitted with: every `Applied`, and what was not applied.
fn fulfil_outcomes() -> Vec<&'static str> {
    paymos_inbox_core::money::change::Applied::ALL
        .iter()
        .map(|a| a.as_str())
        .chain(paymos_inbox_lambda::fulfil::FAILURE_OUTCOMES)
        .collect()
}

#[test]
fn events_env_json_sets_what_the_template_sets_for_each_function() {
    let t = template();
    let text = include_str!("../../../../events/env.json");
    let env: serde_json::Value = serde_json::from_str(text).unwrap();
    for function in [
        "IngestFunction",
        "FulfilFunction",
        "SweepFunction",
        "PublisherFunction",
        "ReconcileFunction",
        "DeliverFunction",
    ] {
        let mut in_template: Vec<String> = env_vars(&t, function).into_keys().collect();
        in_template.push(config::METRICS_STACK.to_owned()); // from Globals
        if function != "ReconcileFunction" {
            // Only with the reverse check; reconcile always reads Paymos.
            in_template.retain(|v| v != config::PAYMOS_API_SECRETS_ID);
        }
        in_template.sort();
        let mut in_env: Vec<String> = env[function]
            .as_object()
            .unwrap_or_else(|| panic!("env.json has {function}"))
            .keys()
            .cloned()
            .collect();
        in_env.sort();
        assert_eq!(in_env, in_template, "{function}");
    }
}

#[test]
fn every_event_type_the_code_publishes_is_documented_with_its_detail() {
    let chapter = include_str!("../../../../docs/handoff.md");
    for (detail_type, fields) in paymos_inbox_core::roads::handoff::DETAIL_TYPES {
        let row = chapter
            .lines()
            .find(|l| l.starts_with(&format!("| `{detail_type}`")))
            .unwrap_or_else(|| panic!("{detail_type} has a row in docs/handoff.md's event table"));
        for field in fields {
            assert!(
                row.contains(&format!("`{field}`")),
                "{detail_type}: docs/handoff.md documents `{field}`: {row}"
            );
        }
    }
}

#[test]
fn the_schema_registry_registers_the_repositorys_schemas_in_draft_4() {
    use paymos_inbox_core::roads::handoff::{DETAIL_TYPES, DETAIL_VERSION, slug};
    let t = template();
    for (detail_type, _) in DETAIL_TYPES {
        let slug = slug(detail_type);
        let name: String = slug
            .split('-')
            .map(|w| w[..1].to_ascii_uppercase() + &w[1..])
            .collect::<String>()
            + "Schema";
        let p = props(&t, &name);
        assert_eq!(p["Type"].as_str(), Some("JSONSchemaDraft4"), "{name}");
        let registered: serde_json::Value =
            serde_json::from_str(p["Content"].as_str().unwrap()).unwrap();
        let file = paymos_inbox_core::testkit::schemas::path(DETAIL_VERSION, &slug);
        let mut published: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        // The registry speaks draft 4: the same schema, `const` as a one-value enum.
        published["$schema"] = "http://json-schema.org/draft-04/schema#".into();
        for (_, field) in published["properties"].as_object_mut().unwrap() {
            if let Some(value) = field.as_object_mut().unwrap().remove("const") {
                field["enum"] = serde_json::json!([value]);
            }
        }
        assert_eq!(
            registered, published,
            "{name} differs from schemas/v{DETAIL_VERSION}/{slug}.json"
        );
    }
}

#[test]
fn sam_local_can_point_every_function_at_local_aws_and_aws_sets_nothing() {
    // SAM's --env-vars overrides declared variables only: the endpoints are declared for every
    // function, from parameters that are empty (so absent) on AWS.
    let t = template();
    let globals = &t["Globals"]["Function"]["Environment"]["Variables"];
    for (variable, parameter) in [
        ("AWS_ENDPOINT_URL_DYNAMODB", "LocalDynamoDbEndpoint"),
        ("AWS_ENDPOINT_URL_SQS", "LocalSqsEndpoint"),
        (
            "AWS_ENDPOINT_URL_SECRETS_MANAGER",
            "LocalSecretsManagerEndpoint",
        ),
        ("AWS_ENDPOINT_URL_EVENTBRIDGE", "LocalEventBridgeEndpoint"),
        ("PAYMOS_API_BASE_URL", "LocalPaymosApiEndpoint"),
    ] {
        let declared = format!("{:?}", globals[variable]);
        assert!(
            declared.contains(parameter) && declared.contains("AWS::NoValue"),
            "{variable}: {declared}"
        );
        assert_eq!(t["Parameters"][parameter]["Default"].as_str(), Some(""));
    }
    let script = include_str!("../../../../scripts/sam-local.sh");
    assert!(
        script.contains("sam local invoke \"$function\""),
        "the function is named"
    );
}

/// A function's timeout: its own, the Globals', or Lambda's default (3 s).
fn function_timeout(t: &Value, function: &str) -> u64 {
    props(t, function)["Timeout"]
        .as_u64()
        .or_else(|| t["Globals"]["Function"]["Timeout"].as_u64())
        .unwrap_or(3)
}

/// The resources of one type, by logical id.
fn of_type<'t>(t: &'t Value, ty: &str) -> Vec<(&'t str, &'t Value)> {
    t["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(ty))
        .map(|(name, r)| (name.as_str().unwrap(), r))
        .collect()
}

fn is_ref(v: &Value, name: &str) -> bool {
    matches!(v, Value::Tagged(t) if t.tag == "Ref" && t.value.as_str() == Some(name))
}

/// `!If [HasKmsKey, then, else]` → (then, else); anything else fails, naming `what`.
fn under_the_key<'v>(v: &'v Value, what: &str) -> (&'v Value, &'v Value) {
    match v {
        Value::Tagged(t) if t.tag == "If" => {
            let branches = t.value.as_sequence().unwrap();
            assert_eq!(
                branches[0].as_str(),
                Some("HasKmsKey"),
                "{what}: depends on KmsKeyArn"
            );
            (&branches[1], &branches[2])
        }
        other => panic!("{what}: expected !If [HasKmsKey, …], got {other:?}"),
    }
}

/// The key when `KmsKeyArn` is set, nothing otherwise.
fn the_key_or_nothing(v: &Value, what: &str) {
    let (then, otherwise) = under_the_key(v, what);
    assert!(
        is_ref(then, "KmsKeyArn") && is_ref(otherwise, "AWS::NoValue"),
        "{what}: !If [HasKmsKey, !Ref KmsKeyArn, !Ref AWS::NoValue], got {v:?}"
    );
}

// Issue 32: AWS recommends a visibility timeout of at least 6 x the consumer's timeout, plus the
// batching window: a batch Lambda retries after a throttle must not reappear meanwhile. The
// webhook delivery queue had 6 x the timeout without the window.
#[test]
fn every_queue_a_function_consumes_outlasts_six_of_its_timeouts_and_the_batch_window() {
    let t = template();
    let mut checked = Vec::new();
    for (function, r) in of_type(&t, "AWS::Serverless::Function") {
        for (_, event) in r["Properties"]["Events"].as_mapping().into_iter().flatten() {
            if event["Type"].as_str() != Some("SQS") {
                continue;
            }
            let source = &event["Properties"];
            let queue = target(&source["Queue"]);
            let timeout = function_timeout(&t, function);
            let window = source["MaximumBatchingWindowInSeconds"]
                .as_u64()
                .unwrap_or(0);
            let declared = &props(&t, &queue)["VisibilityTimeout"];
            // SQS's default is 30 s; an intrinsic here could not be checked.
            let visibility = declared
                .as_u64()
                .or_else(|| declared.is_null().then_some(30))
                .unwrap_or_else(|| panic!("{queue}: VisibilityTimeout is a number"));
            assert!(
                visibility >= 6 * timeout + window,
                "{queue}: visibility {visibility} s < 6 x {function}'s {timeout} s + {window} s of batching window"
            );
            checked.push(format!("{queue} → {function}"));
        }
    }
    assert!(
        checked.len() >= 2,
        "the SQS event sources were found: {checked:?}"
    );
}

// Issue 32: clearing WebhookTargetUrl (a condition turning false) or deleting the stack deleted
// the parked events and the signing key; and only 2 of 7 queues said how they were encrypted.
#[test]
fn every_queue_and_secret_is_kept_and_every_store_takes_the_optional_key() {
    let t = template();
    let parameter = &t["Parameters"]["KmsKeyArn"];
    assert_eq!(
        parameter["Default"].as_str(),
        Some(""),
        "the key is optional"
    );
    assert!(
        parameter["AllowedPattern"]
            .as_str()
            .is_some_and(|p| p.starts_with("^$|") && p.contains(":kms:")),
        "empty or a KMS key ARN"
    );
    let queues = of_type(&t, "AWS::SQS::Queue");
    assert!(queues.len() >= 7, "{} queues", queues.len());
    let secrets = of_type(&t, "AWS::SecretsManager::Secret");
    assert!(!secrets.is_empty());
    for (name, r) in queues.iter().chain(&secrets) {
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            assert_eq!(
                r[policy].as_str(),
                Some("Retain"),
                "{name}: {policy} (it can hold what was not delivered yet)"
            );
        }
    }
    for (name, r) in &queues {
        let p = &r["Properties"];
        let (then, otherwise) = under_the_key(&p["SqsManagedSseEnabled"], name);
        assert_eq!(
            (then.as_bool(), otherwise.as_bool()),
            (Some(false), Some(true)),
            "{name}: SQS-managed encryption unless the key is set"
        );
        the_key_or_nothing(&p["KmsMasterKeyId"], name);
        let (reuse, _) = under_the_key(&p["KmsDataKeyReusePeriodSeconds"], name);
        assert!(
            reuse.as_u64().is_some_and(|s| (60..=86_400).contains(&s)),
            "{name}: a data key reuse period SQS accepts"
        );
    }
    for (name, r) in of_type(&t, "AWS::DynamoDB::Table") {
        let sse = &r["Properties"]["SSESpecification"];
        let (enabled, default) = under_the_key(&sse["SSEEnabled"], name);
        assert_eq!(
            (enabled.as_bool(), default.as_bool()),
            (Some(true), Some(false))
        );
        assert_eq!(under_the_key(&sse["SSEType"], name).0.as_str(), Some("KMS"));
        the_key_or_nothing(&sse["KMSMasterKeyId"], name);
    }
    for (name, r) in &secrets {
        the_key_or_nothing(&r["Properties"]["KmsKeyId"], name);
    }
    let log_groups = of_type(&t, "AWS::Logs::LogGroup");
    for (name, r) in &log_groups {
        the_key_or_nothing(&r["Properties"]["KmsKeyId"], name);
    }
    // Every function logs to a group the template declares, so every log is under the key.
    for (function, r) in of_type(&t, "AWS::Serverless::Function") {
        let group = target(&r["Properties"]["LoggingConfig"]["LogGroup"]);
        assert!(
            log_groups.iter().any(|(name, _)| *name == group),
            "{function} logs to {group}, a log group of this template"
        );
    }
    the_key_or_nothing(&props(&t, "EventBus")["KmsKeyIdentifier"], "EventBus");
    the_key_or_nothing(
        &props(&t, "EventArchive")["KmsKeyIdentifier"],
        "EventArchive",
    );
    the_key_or_nothing(
        &t["Globals"]["Function"]["KmsKeyArn"],
        "the functions' configuration",
    );
}

#[test]
fn every_parameter_is_constrained() {
    let t = template();
    let parameters = t["Parameters"].as_mapping().unwrap();
    assert!(parameters.len() >= 20);
    for (name, p) in parameters {
        let constrained = ["AllowedPattern", "AllowedValues", "MinValue", "MaxValue"]
            .iter()
            .any(|k| !p[*k].is_null());
        assert!(
            constrained,
            "{name:?}: AllowedPattern, AllowedValues or MinValue/MaxValue"
        );
        if p["Type"].as_str() == Some("Number") {
            assert!(
                !p["MinValue"].is_null() || !p["AllowedValues"].is_null(),
                "{name:?}: a number has a floor"
            );
        }
    }
    for rate in ["SweepRate", "ReconcileRate"] {
        let pattern = t["Parameters"][rate]["AllowedPattern"].as_str().unwrap();
        assert!(
            pattern.contains("rate") && pattern.contains("cron"),
            "{rate}: a rate or cron expression"
        );
    }
}

// Issue 32: no alarm on throttles or on an invocation spike. Issue 51: with `Monitoring=essential`
// (the default) only ingest's, fulfil's and the reconciliation's throttles alarm.
#[test]
fn every_function_alarms_when_throttled_and_ingest_on_an_invocation_spike() {
    let t = template();
    fn on<'t>(
        alarms: &[(&'t str, &'t Value)],
        metric: &str,
        function: &str,
    ) -> Option<(&'t str, &'t Value)> {
        alarms.iter().copied().find(|(_, a)| {
            let p = &a["Properties"];
            p["Namespace"].as_str() == Some("AWS/Lambda")
                && p["MetricName"].as_str() == Some(metric)
                && p["Dimensions"][0]["Name"].as_str() == Some("FunctionName")
                && target(&p["Dimensions"][0]["Value"]) == function
        })
    }
    let functions = of_type(&t, "AWS::Serverless::Function");
    assert_eq!(functions.len(), 6);
    for monitoring in ["essential", "full"] {
        for options in [&[][..], &OPTIONS[..]] {
            let mut set = options.to_vec();
            set.push(("Monitoring", monitoring));
            let stack = Stack::new(&t, &set);
            let (made, alarms) = (
                stack.resources("AWS::Serverless::Function"),
                stack.resources("AWS::CloudWatch::Alarm"),
            );
            for (function, _) in &functions {
                let expected = made.iter().any(|(f, _)| f == function)
                    && (monitoring == "full"
                        || ["IngestFunction", "FulfilFunction", "ReconcileFunction"]
                            .contains(function));
                let alarm = on(&alarms, "Throttles", function);
                assert_eq!(
                    alarm.is_some(),
                    expected,
                    "{function}'s throttles alarm with {set:?}"
                );
                if let Some((name, alarm)) = alarm {
                    assert!(
                        !alarm["Properties"]["AlarmActions"].is_null(),
                        "{name} notifies the alarm topic"
                    );
                }
            }
        }
    }
    let alarms = of_type(&t, "AWS::CloudWatch::Alarm");
    let (name, spike) =
        on(&alarms, "Invocations", "IngestFunction").expect("an ingest invocations alarm");
    let threshold = target(&spike["Properties"]["Threshold"]);
    assert_eq!(threshold, "IngestInvocationsAlarmThreshold", "{name}");
    assert!(!t["Parameters"][threshold.as_str()]["MinValue"].is_null());
    assert!(!spike["Properties"]["AlarmActions"].is_null());
}

/// The optional parts that bring alarms of their own: the reverse check and reconciliation, the
/// events queue, the signed hand-off.
const OPTIONS: [(&str, &str); 3] = [
    ("PaymosApiSecretName", "paymos-inbox/api"),
    ("EventsQueue", "true"),
    ("WebhookTargetUrl", "https://shop.example/paymos-events"),
];
/// What `Monitoring=essential` keeps: the alarms that say money waits or is lost. What waits for
/// a person (and its daily reminder), the oldest pending delivery, dead letters (the work
/// queue's and the hand-off's), ingest's and fulfil's errors and throttles, the sweep's errors
/// (it counts what waits), a misconfigured stack (a setting, a refused call, a wrong or
/// mislabelled secret).
const ESSENTIAL: [&str; 14] = [
    "PaymentsNeedReviewAlarm",
    "PaymentsStillWaitingAlarm",
    "OldestPendingAlarm",
    "DeadLetterQueueAlarm",
    "PublishFailuresAlarm",
    "IngestErrorsAlarm",
    "IngestServerErrorsAlarm",
    "IngestThrottlesAlarm",
    "FulfilErrorsAlarm",
    "FulfilThrottlesAlarm",
    "SweepErrorsAlarm",
    "MisconfiguredAlarm",
    "SignatureRefusalsAlarm",
    "EnvironmentRefusalsAlarm",
];
/// And with the optional parts on: their dead letters, the reconciliation finding something or
/// falling behind.
const ESSENTIAL_OF_OPTIONS: [&str; 6] = [
    "EventsDeadLetterAlarm",
    "WebhookTargetDeadLetterAlarm",
    "WebhookTargetPausedAlarm",
    "ReconcileFindingsAlarm",
    "ReconcileBehindAlarm",
    "ReconcileThrottlesAlarm",
];
/// What only `Monitoring=full` adds: early warnings and signals a later alarm of `ESSENTIAL`
/// also gives when money waits (the work queue's age before the oldest pending delivery's, the
/// publisher's lag and errors before its parked batches, the endpoint's backlog before its dead
/// letters), and what is no money's (a reused event id, an invocation spike).
const FULL_ONLY: [&str; 7] = [
    "WorkQueueAgeAlarm",
    "PublisherIteratorAgeAlarm",
    "PublisherErrorsAlarm",
    "PublisherThrottlesAlarm",
    "SweepThrottlesAlarm",
    "CrossEnvironmentIdsAlarm",
    "IngestInvocationsSpikeAlarm",
];
const FULL_ONLY_OF_OPTIONS: [&str; 3] = [
    "WebhookTargetBacklogAlarm",
    "DeliverErrorsAlarm",
    "DeliverThrottlesAlarm",
];

// Issue 51, lever 2: fulfil lists open invoices only on a stack with the reconciliation, the
// list's one reader. It keeps the list when it has the Paymos API key, which the template gives
// it exactly when it makes the reconciliation.
#[test]
fn fulfil_keeps_the_open_list_exactly_when_the_reconciliation_runs() {
    let t = template();
    let key =
        &props(&t, "FulfilFunction")["Environment"]["Variables"][config::PAYMOS_API_SECRETS_ID];
    let Value::Tagged(given) = key else {
        panic!("fulfil's API key is given on a condition: {key:?}")
    };
    assert_eq!(given.tag, "If");
    let mut seen = Vec::new();
    for set in [&[][..], &[("PaymosApiSecretName", "paymos-inbox/api")][..]] {
        let stack = Stack::new(&t, set);
        let reconciles = stack
            .resources("AWS::Serverless::Function")
            .iter()
            .any(|(f, _)| *f == "ReconcileFunction");
        let has_key = stack.holds(given.value[0].as_str().unwrap());
        let fulfil = FulfilConfig::from_lookup(|k| match k {
            config::DELIVERIES_TABLE | config::STATE_TABLE => Some("t".to_owned()),
            config::PAYMOS_ENVIRONMENT => Some("sandbox".to_owned()),
            config::PAYMOS_API_SECRETS_ID if has_key => Some("paymos-inbox/api".to_owned()),
            _ => None,
        })
        .unwrap();
        assert_eq!(fulfil.keeps_open_list(), reconciles, "{set:?}");
        seen.push(reconciles);
    }
    assert_eq!(seen, [false, true], "both stacks were read");
}

// Issue 51: 27 alarms and a dashboard cost a quiet shop more a month than its deliveries.
#[test]
fn essential_monitoring_keeps_the_alarms_that_say_money_waits_or_is_lost_and_full_adds_the_rest() {
    let t = template();
    assert_eq!(Stack::new(&t, &[]).parameter("Monitoring"), "essential");
    let made = |monitoring: &str, options: &[(&'static str, &'static str)], kind: &str| {
        let mut set = options.to_vec();
        set.push(("Monitoring", monitoring));
        Stack::new(&t, &set)
            .resources(kind)
            .into_iter()
            .map(|(name, _)| name)
            .collect::<std::collections::BTreeSet<_>>()
    };
    let listed = |lists: &[&[&'static str]]| -> std::collections::BTreeSet<&'static str> {
        lists.concat().into_iter().collect()
    };
    let alarm = "AWS::CloudWatch::Alarm";
    assert_eq!(made("essential", &[], alarm), listed(&[&ESSENTIAL[..]]));
    assert_eq!(
        made("essential", &OPTIONS, alarm),
        listed(&[&ESSENTIAL[..], &ESSENTIAL_OF_OPTIONS[..]])
    );
    assert_eq!(
        made("full", &[], alarm),
        listed(&[&ESSENTIAL[..], &FULL_ONLY[..]])
    );
    let every = listed(&[
        &ESSENTIAL[..],
        &ESSENTIAL_OF_OPTIONS[..],
        &FULL_ONLY[..],
        &FULL_ONLY_OF_OPTIONS[..],
    ]);
    assert_eq!(made("full", &OPTIONS, alarm), every);
    // A new alarm is a decision made here: essential or full.
    let in_template: std::collections::BTreeSet<&str> = of_type(&t, alarm)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        every, in_template,
        "each alarm of template.yaml is listed here"
    );
    for monitoring in ["essential", "full"] {
        let dashboards = made(monitoring, &OPTIONS, "AWS::CloudWatch::Dashboard");
        assert_eq!(dashboards.len(), usize::from(monitoring == "full"));
    }
    // Essential's alarms page: each notifies the topic.
    for name in listed(&[&ESSENTIAL[..], &ESSENTIAL_OF_OPTIONS[..]]) {
        let actions = &props(&t, name)["AlarmActions"];
        assert!(!actions.is_null(), "{name} notifies the alarm topic");
    }
    // Metric dimensions only where something reads them: an essential stack counts by
    // `Outcome` exactly the outcomes its alarms read (the dashboard, which reads every one,
    // comes with full).
    use paymos_inbox_lambda::telemetry::{keeps_outcome, metric};
    let (mut read, mut alarmed) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for alarm in listed(&[&ESSENTIAL[..], &ESSENTIAL_OF_OPTIONS[..]]) {
        let p = props(&t, alarm);
        let stats = p["Metrics"].as_sequence().into_iter().flatten();
        for m in std::iter::once(p).chain(stats.map(|m| &m["MetricStat"]["Metric"])) {
            if m["Namespace"].as_str() != Some(metric::NAMESPACE) {
                continue;
            }
            let name = m["MetricName"].as_str().unwrap();
            assert!(
                metric::ESSENTIAL.contains(&name),
                "{alarm} reads {name}: essential must write it"
            );
            alarmed.insert(name);
            for d in m["Dimensions"].as_sequence().into_iter().flatten() {
                if d["Name"].as_str() == Some(metric::OUTCOME) {
                    let outcome = d["Value"].as_str().unwrap();
                    assert!(
                        keeps_outcome(false, name, outcome),
                        "{alarm} reads {name} by {outcome}: essential must count it so"
                    );
                    read.insert((name, outcome));
                }
            }
        }
    }
    for kept in metric::ESSENTIAL_OUTCOMES {
        assert!(
            read.contains(&kept),
            "{kept:?} is kept, and no essential alarm reads it"
        );
    }
    // And no more (issue 51): a metric no essential alarm reads is a series billed a month and
    // bytes in every invocation's log; full writes it.
    assert_eq!(
        alarmed,
        metric::ESSENTIAL.into_iter().collect(),
        "an essential stack writes exactly the metrics its alarms read"
    );
    assert!(!keeps_outcome(false, metric::FULFIL_OUTCOMES, "fulfilled"));
    assert!(!keeps_outcome(false, metric::INGEST_ANSWERS, "new"));
    assert!(keeps_outcome(true, metric::INGEST_ANSWERS, "new"));
}

// Issue 32: checkov's failed checks were answered nowhere. A check that does not apply is skipped
// in the resource's metadata with its reason; a new kind of skip is a decision made here.
#[test]
fn every_checkov_skip_names_a_check_that_does_not_apply_and_says_why() {
    let t = template();
    let mut skipped = 0;
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        for skip in r["Metadata"]["checkov"]["skip"]
            .as_sequence()
            .into_iter()
            .flatten()
        {
            let id = skip["id"].as_str().unwrap_or_default();
            assert!(
                [
                    "CKV_AWS_115", // reserved concurrency: capped by the event source or schedule
                    "CKV_AWS_116", // a function DLQ: no asynchronous invocation carries data
                    "CKV_AWS_117", // a VPC: only AWS APIs and HTTPS endpoints are called
                ]
                .contains(&id),
                "{name:?} skips {id:?}"
            );
            let comment = skip["comment"].as_str().unwrap_or_default();
            assert!(
                comment.len() >= 60,
                "{name:?} skips {id} with a reason: {comment:?}"
            );
            skipped += 1;
        }
    }
    assert!(skipped >= 17, "{skipped} skips");
}

// Issue 38: the largest body the template lets a stack accept still fits one SQS message.
#[test]
fn the_largest_body_the_template_accepts_fits_one_sqs_message() {
    let t = template();
    let max = t["Parameters"]["MaxBodyBytes"]["MaxValue"]
        .as_u64()
        .unwrap();
    assert_eq!(
        usize::try_from(max).unwrap(),
        paymos_inbox_core::roads::ingest::LIMIT_MAX_BODY_BYTES
    );
}

/// The rows of the first markdown table in `text` whose header starts with `| {first} |`: each
/// row's cells, trimmed.
fn table_rows(text: &str, first: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip_while(|l| !l.starts_with(&format!("| {first} |")))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// A parameter's value as the docs write it: `` `value` ``, or "empty".
fn documented(v: &Value) -> String {
    match v {
        Value::String(s) if s.is_empty() => "empty".to_owned(),
        Value::String(s) => format!("`{s}`"),
        Value::Number(n) => format!("`{n}`"),
        other => panic!("a default of another kind: {other:?}"),
    }
}

// Issue 42, item 9: `docs/deploy.md` never named `WebhookMaxConcurrency` and gave no default for
// about ten parameters.
#[test]
fn every_parameter_has_a_row_in_deploy_md_with_its_default_and_bounds() {
    let t = template();
    let chapter = include_str!("../../../../docs/deploy.md");
    let rows = table_rows(chapter, "parameter");
    let mut failures = Vec::new();
    for (name, p) in t["Parameters"].as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        let Some(row) = rows.iter().find(|r| r[0] == format!("`{name}`")) else {
            failures.push(format!(
                "{name}: no row in docs/deploy.md's parameter table"
            ));
            continue;
        };
        let default = documented(&p["Default"]);
        if row[1] != default {
            failures.push(format!(
                "{name}: default {default}, the table says {}",
                row[1]
            ));
        }
        let allowed = &row[2];
        for bound in ["MinValue", "MaxValue"] {
            if let Some(n) = p[bound].as_u64()
                && !allowed.contains(&n.to_string())
            {
                failures.push(format!("{name}: {bound} {n} not in {allowed:?}"));
            }
        }
        for value in p["AllowedValues"].as_sequence().into_iter().flatten() {
            let value = match value {
                Value::String(s) => s.clone(),
                other => format!("{}", other.as_u64().unwrap()),
            };
            if !allowed.contains(&value) {
                failures.push(format!("{name}: allowed {value} not in {allowed:?}"));
            }
        }
        if row.get(3).is_none_or(String::is_empty) {
            failures.push(format!("{name}: says nothing about what it sets"));
        }
    }
    for row in &rows {
        let name = row[0].trim_matches('`');
        if t["Parameters"][name].is_null() {
            failures.push(format!("docs/deploy.md documents {name}, not a parameter"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Issue 42, item 9: three function variables were missing from `docs/deploy.md`'s table.
#[test]
fn every_function_variable_has_a_row_naming_its_functions() {
    let t = template();
    let chapter = include_str!("../../../../docs/deploy.md");
    let rows = table_rows(chapter, "variable");
    let functions = [
        ("IngestFunction", "ingest"),
        ("FulfilFunction", "fulfil"),
        ("SweepFunction", "sweep"),
        ("ReconcileFunction", "reconcile"),
        ("PublisherFunction", "publish"),
        ("DeliverFunction", "deliver"),
    ];
    let mut failures = Vec::new();
    for (function, short) in functions {
        for variable in env_vars(&t, function).keys() {
            let row = rows.iter().find(|r| {
                r[0].split(", ")
                    .any(|v| v.trim_matches('`') == variable.as_str())
            });
            match row {
                None => failures.push(format!("{variable} ({short}): no row in docs/deploy.md")),
                Some(row) if !row[1].split(", ").any(|f| f == short || f == "all") => {
                    failures.push(format!(
                        "{variable}: its row does not name {short}: {}",
                        row[1]
                    ));
                }
                Some(_) => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Issue 42, item 9: `MisconfiguredAlarm`, the throttle alarms, `IngestInvocationsSpikeAlarm` and
// `DeliverErrorsAlarm` had no row. The template sets no `AlarmName`: a notification names the
// alarm `<stack>-<logical id>-<suffix>`, so each row names the logical id.
#[test]
fn every_alarm_has_a_row_in_the_on_call_table_with_what_to_do() {
    let t = template();
    assert!(
        of_type(&t, "AWS::CloudWatch::Alarm")
            .iter()
            .all(|(_, a)| a["Properties"]["AlarmName"].is_null()),
        "an AlarmName would change the name a notification carries: update docs/operating.md"
    );
    let chapter = include_str!("../../../../docs/operating.md");
    let rows = table_rows(chapter, "alarm");
    let mut failures = Vec::new();
    for (name, _) in of_type(&t, "AWS::CloudWatch::Alarm") {
        let row = rows.iter().find(|r| r[0].contains(&format!("`{name}`")));
        match row {
            None => failures.push(format!("{name}: no row in docs/operating.md's alarm table")),
            Some(row) if row.len() < 4 || row[3].is_empty() => {
                failures.push(format!("{name}: its row says nothing to do"));
            }
            Some(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Issue 42, item 9: `Misconfigured`, `ReconcileFindings`, `WebhookAttempts` and
// `WebhookLatencyMs` were emitted and documented nowhere.
#[test]
fn every_metric_the_code_emits_has_a_row_in_the_metrics_table() {
    use paymos_inbox_lambda::telemetry::metric;
    let chapter = include_str!("../../../../docs/operating.md");
    let rows = table_rows(chapter, "metric");
    let documented: Vec<&str> = rows.iter().map(|r| r[0].trim_matches('`')).collect();
    for name in metric::ALL {
        assert!(
            documented.contains(&name),
            "{name}: no row in docs/operating.md's metrics table"
        );
    }
    for name in &documented {
        assert!(
            metric::ALL.contains(name),
            "docs/operating.md documents {name}, which the code never emits"
        );
    }
}

/// The number right after `before` in `text` (digits only).
fn number_after(text: &str, before: &str) -> u64 {
    let at = text
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} is not in the text"))
        + before.len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("a number after {before:?}"))
}

// Issue 42, item 11: "the SDK timeouts cap it ... under the 6 s function timeout" while 3 to 5
// sequential calls of up to 2.5 s each take 7.5-12.5 s; and the CHANGELOG's write units and
// cost disagreed with docs/performance.md's. The figures are computed here from the code, the
// template and the architecture's table of calls, and must be the ones the documents give.
#[test]
fn the_documented_figures_are_computed_from_the_code() {
    let ingest = include_str!("../../../lambda/src/bin/paymos-ingest.rs");
    let attempt_secs = number_after(ingest, "load_config(Duration::from_secs(");
    let attempts = number_after(ingest, &format!("from_secs({attempt_secs}), "));
    // `aws::load_config`: the operation timeout is the attempts' plus half a second.
    let aws = include_str!("../../../aws/src/aws.rs");
    assert!(
        aws.contains(
            ".operation_timeout(attempt_timeout * max_attempts + Duration::from_millis(500))"
        ),
        "aws::load_config's operation timeout changed: recompute the figures below"
    );
    let per_call_ms = attempt_secs * attempts * 1000 + 500;
    let architecture = include_str!("../../../../docs/architecture.md");
    let fewest = number_after(architecture, "| ingest, new delivery | ");
    let most = number_after(architecture, "| ingest, duplicate after a dead attempt | ");
    let secs = |ms: u64| {
        if ms.is_multiple_of(1000) {
            format!("{}", ms / 1000)
        } else {
            format!("{}.{}", ms / 1000, ms % 1000 / 100)
        }
    };
    let timeout = function_timeout(&template(), "IngestFunction");
    let performance = include_str!("../../../../docs/performance.md");
    let flat = performance.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        format!("bound each call at {} s", secs(per_call_ms)),
        format!("makes {fewest} to {most} sequential calls"),
        format!(
            "a worst case of {}–{} s, **beyond the {timeout} s function timeout**",
            secs(per_call_ms * fewest),
            secs(per_call_ms * most)
        ),
    ] {
        assert!(flat.contains(&said), "docs/performance.md says: {said}");
    }
    assert!(
        per_call_ms * fewest > timeout * 1000,
        "the worst case fits the timeout now: say so in docs/performance.md"
    );
    // The paid invoice's write units and DynamoDB's cost per million, as performance.md
    // derives them from the cost test, are the CHANGELOG's.
    let paid = performance
        .lines()
        .find(|l| l.starts_with("| `fulfilled` |"))
        .expect("performance.md's fulfilled row");
    let units = paid
        .trim_end_matches([' ', '|'])
        .rsplit("| ")
        .next()
        .unwrap();
    let cost = flat
        .split("DynamoDB's share is ≈ ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("performance.md gives DynamoDB's share");
    let changelog = include_str!("../../../../CHANGELOG.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        changelog.contains(&format!("a paid invoice {units} WRU")),
        "the CHANGELOG says a paid invoice is {units} WRU, as docs/performance.md"
    );
    assert!(
        changelog.contains(&format!("about {cost} per million deliveries for DynamoDB")),
        "the CHANGELOG says DynamoDB costs {cost} per million, as docs/performance.md"
    );
}

// Issue 42, item 4 (leftover): `MisconfiguredAlarm` watched only `PAYMOS_API_SECRETS_ID`'s
// start failures; ingest's (`WEBHOOK_SECRETS_ID`: its INIT fails, every delivery is refused)
// was counted in `Misconfigured` and alarmed nowhere. Every setting a function's binary counts
// as misconfigured at start is watched, and summed by the alarm's expression.
#[test]
fn the_misconfiguration_alarm_watches_every_setting_a_function_fails_to_start_on() {
    let settings = misconfigured_settings();
    assert_eq!(
        (config::WEBHOOK_SECRETS_ID, config::PAYMOS_API_SECRETS_ID),
        ("WEBHOOK_SECRETS_ID", "PAYMOS_API_SECRETS_ID"),
        "a setting's metric Outcome is its variable's name"
    );
    assert!(
        settings.contains("WEBHOOK_SECRETS_ID") && settings.len() >= 2,
        "{settings:?}"
    );
    let t = template();
    let metrics = props(&t, "MisconfiguredAlarm")["Metrics"]
        .as_sequence()
        .expect("a metric-math alarm");
    let expression = metrics
        .iter()
        .find_map(|m| m["Expression"].as_str())
        .expect("an expression");
    for setting in &settings {
        let watched = metrics.iter().find(|m| {
            let metric = &m["MetricStat"]["Metric"];
            metric["MetricName"].as_str() == Some("Misconfigured")
                && metric["Dimensions"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .any(|d| d["Name"] == "Outcome" && d["Value"].as_str() == Some(setting))
        });
        let Some(watched) = watched else {
            panic!("MisconfiguredAlarm does not watch Misconfigured's {setting}");
        };
        let id = watched["Id"].as_str().unwrap();
        assert!(
            expression.contains(&format!("FILL({id}, 0)")),
            "{expression} leaves out {id} ({setting})"
        );
    }
}

/// The settings the functions' binaries count as `Misconfigured` when they cannot start on
/// them (`telemetry::misconfigured_at_start(SETTING, …)`), by name.
fn misconfigured_settings() -> std::collections::BTreeSet<String> {
    let bins = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../lambda/src/bin"));
    let mut settings = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(bins).unwrap() {
        let source = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for call in source.split("misconfigured_at_start(").skip(1) {
            settings.insert(call.split(',').next().unwrap().trim().to_owned());
        }
    }
    settings
}

// Issue 39: provisioned capacity is an option, on demand the default; with it, every table and
// every index has its reads and its writes scaled, and nothing is provisioned without it.
#[test]
fn provisioned_capacity_scales_every_table_and_index_and_only_when_asked() {
    let t = template();
    assert_eq!(
        t["Parameters"]["TableBillingMode"]["Default"].as_str(),
        Some("PAY_PER_REQUEST")
    );
    let mut expected = std::collections::BTreeSet::new();
    for table in ["DeliveriesTable", "StateTable"] {
        let p = props(&t, table);
        assert!(
            format!("{:?}", p["ProvisionedThroughput"]).contains("IsProvisioned"),
            "{table}"
        );
        for dim in ["Read", "Write"] {
            expected.insert(format!("table/{table} dynamodb:table:{dim}CapacityUnits"));
        }
        for g in p["GlobalSecondaryIndexes"].as_sequence().unwrap() {
            let index = g["IndexName"].as_str().unwrap();
            assert!(
                format!("{:?}", g["ProvisionedThroughput"]).contains("IsProvisioned"),
                "{table}/{index}"
            );
            for dim in ["Read", "Write"] {
                expected.insert(format!(
                    "table/{table}/index/{index} dynamodb:index:{dim}CapacityUnits"
                ));
            }
        }
    }
    let mut scaled = std::collections::BTreeSet::new();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        match r["Type"].as_str() {
            Some("AWS::ApplicationAutoScaling::ScalableTarget") => {
                assert_eq!(r["Condition"].as_str(), Some("IsProvisioned"), "{name}");
                let p = &r["Properties"];
                let Value::Tagged(sub) = &p["ResourceId"] else {
                    panic!("{name}: !Sub table/${{…}}");
                };
                let id = sub.value.as_str().unwrap().replace(['$', '{', '}'], "");
                scaled.insert(format!("{id} {}", p["ScalableDimension"].as_str().unwrap()));
            }
            Some("AWS::ApplicationAutoScaling::ScalingPolicy") => {
                assert_eq!(r["Condition"].as_str(), Some("IsProvisioned"), "{name}");
                let c = &r["Properties"]["TargetTrackingScalingPolicyConfiguration"];
                assert_eq!(c["TargetValue"].as_u64(), Some(70), "{name}");
            }
            _ => {}
        }
    }
    assert_eq!(scaled, expected);
}

// Issue 49 (A3): `status` judges the reconciliation behind as `ReconcileBehindAlarm` does, and
// on a stack with Monitoring=essential the findings and behind alarms are there (no condition
// but the reverse check's).
#[test]
fn status_and_the_alarms_judge_the_reconciliation_by_one_threshold_in_essential_monitoring() {
    let t = template();
    let behind = props(&t, "ReconcileBehindAlarm");
    assert_eq!(
        behind["Threshold"].as_u64(),
        Some(paymos_inbox_core::roads::reconcile::BEHIND_FOR_A_PERSON_S)
    );
    for alarm in ["ReconcileFindingsAlarm", "ReconcileBehindAlarm"] {
        assert_eq!(
            resource(&t, alarm)["Condition"].as_str(),
            Some("HasReverseCheck"),
            "{alarm}: in essential monitoring"
        );
    }
}
