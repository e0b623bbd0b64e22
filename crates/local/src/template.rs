//! Creates the stack's tables and queues on an emulator (or any account) exactly as
//! `template.yaml` declares them: key schemas, indexes, streams, TTL, visibility, retention and
//! redrive are read from the template, never written twice.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use yaml_serde::Value;

use crate::error::LocalError;

/// The template shipped with this build (`build.rs`: the repository's, or the package's copy).
pub const TEMPLATE: &str = include_str!(concat!(env!("OUT_DIR"), "/template.yaml"));

/// What was created: logical id → physical table name, queue URL and queue ARN.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Created {
    /// `DeliveriesTable` → `prefix-DeliveriesTable`, …
    pub tables: BTreeMap<String, String>,
    /// `WorkQueue` → URL, …
    pub queues: BTreeMap<String, String>,
    /// `WorkQueue` → ARN, …
    #[serde(skip)]
    pub queue_arns: BTreeMap<String, String>,
}

impl Created {
    /// The physical name of a table.
    #[must_use]
    pub fn table(&self, logical: &str) -> &str {
        self.tables.get(logical).map_or("", String::as_str)
    }

    /// The URL of a queue.
    #[must_use]
    pub fn queue(&self, logical: &str) -> &str {
        self.queues.get(logical).map_or("", String::as_str)
    }
}

fn parse() -> Result<Value, LocalError> {
    yaml_serde::from_str(TEMPLATE).map_err(|e| LocalError::Template(format!("template.yaml: {e}")))
}

fn resources_of<'t>(t: &'t Value, ty: &str) -> Vec<(&'t str, &'t Value)> {
    t["Resources"]
        .as_mapping()
        .map(|m| {
            m.iter()
                .filter(|(_, r)| r["Type"].as_str() == Some(ty))
                .filter_map(|(k, r)| Some((k.as_str()?, &r["Properties"])))
                .collect()
        })
        .unwrap_or_default()
}

fn key_schema(v: &Value) -> Result<Vec<KeySchemaElement>, LocalError> {
    v.as_sequence()
        .ok_or_else(|| LocalError::Template("KeySchema is not a list".to_owned()))?
        .iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(k["AttributeName"].as_str().unwrap_or_default())
                .key_type(KeyType::from(k["KeyType"].as_str().unwrap_or_default()))
                .build()
                .map_err(|e| LocalError::Template(e.to_string()))
        })
        .collect()
}

/// `!Ref X`, `!GetAtt X.Arn` → `X`.
fn referenced(v: &Value) -> Option<&str> {
    match v {
        Value::Tagged(t) => t.value.as_str().and_then(|s| s.split('.').next()),
        _ => None,
    }
}

/// Creates every `AWS::DynamoDB::Table` and `AWS::SQS::Queue` of the template, named
/// `<prefix>-<LogicalId>` (queue names are shortened to SQS's 80 characters).
///
/// # Errors
/// The first call that fails ([`LocalError::Service`], of its kind), or what the template
/// declares that cannot be built.
pub async fn create_all(
    dynamodb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    prefix: &str,
) -> Result<Created, LocalError> {
    let t = parse()?;
    let mut created = Created::default();
    for (logical, p) in resources_of(&t, "AWS::DynamoDB::Table") {
        let name = format!("{prefix}-{logical}");
        create_table(dynamodb, &name, p).await?;
        created.tables.insert(logical.to_owned(), name);
    }
    let queues = resources_of(&t, "AWS::SQS::Queue");
    for (logical, p) in &queues {
        let mut name = format!("{prefix}-{logical}");
        name.truncate(80);
        let (url, arn) = create_queue(sqs, &name, p).await?;
        created.queues.insert((*logical).to_owned(), url);
        created.queue_arns.insert((*logical).to_owned(), arn);
    }
    for (logical, p) in &queues {
        redrive_policy(sqs, &created, logical, p).await?;
    }
    Ok(created)
}

/// One table as the template declares it: keys, attributes, indexes, stream, TTL.
async fn create_table(
    dynamodb: &aws_sdk_dynamodb::Client,
    name: &str,
    p: &Value,
) -> Result<(), LocalError> {
    let mut req = dynamodb
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_key_schema(Some(key_schema(&p["KeySchema"])?));
    for d in p["AttributeDefinitions"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        req = req.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(d["AttributeName"].as_str().unwrap_or_default())
                .attribute_type(ScalarAttributeType::from(
                    d["AttributeType"].as_str().unwrap_or("S"),
                ))
                .build()
                .map_err(|e| LocalError::Template(e.to_string()))?,
        );
    }
    for g in p["GlobalSecondaryIndexes"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        req = req.global_secondary_indexes(index(g)?);
    }
    if let Some(view) = p["StreamSpecification"]["StreamViewType"].as_str() {
        req = req.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(view))
                .build()
                .map_err(|e| LocalError::Template(e.to_string()))?,
        );
    }
    let wanted = key_schema(&p["KeySchema"])?;
    match req.send().await {
        Ok(_) => {}
        // Created already: by an attempt the SDK retried after its timeout (the first having
        // succeeded), or by an earlier run with this prefix. The same keys are the same table.
        Err(e)
            if e.as_service_error()
                .is_some_and(aws_sdk_dynamodb::operation::create_table::CreateTableError::is_resource_in_use_exception) =>
        {
            let existing = dynamodb
                .describe_table()
                .table_name(name)
                .send()
                .await
                .map_err(|e| LocalError::dynamodb("DynamoDB DescribeTable", name, e))?;
            let keys = existing
                .table()
                .map(|t| t.key_schema().to_vec())
                .unwrap_or_default();
            if keys != wanted {
                return Err(LocalError::OtherKeys(name.to_owned()));
            }
        }
        Err(e) => return Err(LocalError::dynamodb("DynamoDB CreateTable", name, e)),
    }
    if let Some(attr) = p["TimeToLiveSpecification"]["AttributeName"].as_str() {
        // The template enables TTL only when a retention is set; locally it is always on.
        let ttl = dynamodb
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(attr)
                    .enabled(true)
                    .build()
                    .map_err(|e| LocalError::Template(e.to_string()))?,
            )
            .send()
            .await;
        match ttl {
            // A table created before keeps its TTL: enabling it again is refused, and fine.
            Err(e)
                if aws_sdk_dynamodb::error::ProvideErrorMetadata::message(&e)
                    .is_some_and(|m| m.contains("already enabled")) => {}
            other => {
                other.map_err(|e| LocalError::dynamodb("DynamoDB UpdateTimeToLive", name, e))?;
            }
        }
    }
    Ok(())
}

fn index(g: &Value) -> Result<GlobalSecondaryIndex, LocalError> {
    let projection = &g["Projection"];
    let mut proj = Projection::builder().projection_type(ProjectionType::from(
        projection["ProjectionType"].as_str().unwrap_or("ALL"),
    ));
    for a in projection["NonKeyAttributes"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        proj = proj.non_key_attributes(a.as_str().unwrap_or_default());
    }
    GlobalSecondaryIndex::builder()
        .index_name(g["IndexName"].as_str().unwrap_or_default())
        .set_key_schema(Some(key_schema(&g["KeySchema"])?))
        .projection(proj.build())
        .build()
        .map_err(|e| LocalError::Template(e.to_string()))
}

/// One queue with the template's timeouts; its URL and ARN.
async fn create_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    p: &Value,
) -> Result<(String, String), LocalError> {
    let mut req = sqs.create_queue().queue_name(name);
    for (attr, key) in [
        (QueueAttributeName::VisibilityTimeout, "VisibilityTimeout"),
        (
            QueueAttributeName::MessageRetentionPeriod,
            "MessageRetentionPeriod",
        ),
    ] {
        if let Some(v) = p[key].as_u64() {
            req = req.attributes(attr, v.to_string());
        }
    }
    let url = req
        .send()
        .await
        .map_err(|e| LocalError::sqs("SQS CreateQueue", e))?
        .queue_url
        .unwrap_or_default();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| LocalError::sqs("SQS GetQueueAttributes", e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .unwrap_or_default();
    Ok((url, arn))
}

/// A queue's redrive policy, once its dead-letter queue exists.
async fn redrive_policy(
    sqs: &aws_sdk_sqs::Client,
    created: &Created,
    logical: &str,
    p: &Value,
) -> Result<(), LocalError> {
    let redrive = &p["RedrivePolicy"];
    if redrive.is_null() {
        return Ok(());
    }
    let target = referenced(&redrive["deadLetterTargetArn"])
        .and_then(|dlq| created.queue_arns.get(dlq))
        .ok_or_else(|| {
            LocalError::Template(format!(
                "{logical}: the redrive target is not a queue of this template"
            ))
        })?;
    let policy = serde_json::json!({
        "deadLetterTargetArn": target,
        "maxReceiveCount": redrive["maxReceiveCount"].as_u64().unwrap_or(5).to_string(),
    });
    sqs.set_queue_attributes()
        .queue_url(created.queue(logical))
        .attributes(QueueAttributeName::RedrivePolicy, policy.to_string())
        .send()
        .await
        .map_err(|e| LocalError::sqs("SQS SetQueueAttributes", e))?;
    Ok(())
}
