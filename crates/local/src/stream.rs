//! What Lambda's DynamoDB stream event source does, for `dev` and the tests: read the state
//! table's stream (DynamoDB Local serves it), hand each batch to the hand-off's publisher, retry
//! a failed batch from the failed record, and after the last retry send the batch's coordinates
//! to an on-failure queue, as `DestinationConfig.OnFailure` does.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodbstreams::types::{AttributeValue, ShardIteratorType};

use paymos_inbox_aws::aws::port_error;
use paymos_inbox_aws::dynamodb::{item_change, stream_image};
use paymos_inbox_core::port::{PortError, PortErrorKind};
use paymos_inbox_core::roads::handoff::{EventPublisher, ItemChange};

/// Reads one table's stream from its beginning.
pub struct StreamReader {
    client: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
    /// Shard id → its next iterator (`None` once the shard is closed and read).
    shards: BTreeMap<String, Option<String>>,
    /// Shard id → the last sequence number read from it.
    read: BTreeMap<String, String>,
    /// Shards read from what comes next rather than from their start (those open when a
    /// follower started: what they held before is not its to read).
    from_latest: std::collections::BTreeSet<String>,
    /// Whether the shards found at open are read from what comes next.
    latest_at_open: bool,
}

/// An image of DynamoDB Streams' API as the item it holds, through the same conversion as
/// Lambda's stream event (serde_dynamo's attribute values, then the adapter's one reading).
fn item_of_image(
    image: Option<&std::collections::HashMap<String, AttributeValue>>,
) -> Option<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    let image: std::collections::HashMap<String, serde_dynamo::AttributeValue> = image?
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    stream_image(&image.into())
}

impl StreamReader {
    /// The stream of `table`.
    ///
    /// # Errors
    /// When the table has no stream or a call fails, of its kind.
    pub async fn open(
        dynamodb: &aws_sdk_dynamodb::Client,
        client: aws_sdk_dynamodbstreams::Client,
        table: &str,
    ) -> Result<Self, PortError> {
        Self::open_at(dynamodb, client, table, false).await
    }

    /// The stream of `table` from now on: what its shards held before is not read (shards that
    /// appear later are read from their start).
    ///
    /// # Errors
    /// When the table has no stream or a call fails, of its kind.
    pub async fn open_latest(
        dynamodb: &aws_sdk_dynamodb::Client,
        client: aws_sdk_dynamodbstreams::Client,
        table: &str,
    ) -> Result<Self, PortError> {
        Self::open_at(dynamodb, client, table, true).await
    }

    async fn open_at(
        dynamodb: &aws_sdk_dynamodb::Client,
        client: aws_sdk_dynamodbstreams::Client,
        table: &str,
        latest: bool,
    ) -> Result<Self, PortError> {
        let described = dynamodb
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| port_error("DynamoDB DescribeTable", e))?;
        let stream_arn = described
            .table()
            .and_then(|t| t.latest_stream_arn())
            .ok_or_else(|| {
                PortError::of_kind(
                    "DynamoDB DescribeTable",
                    PortErrorKind::Misconfigured,
                    format!("{table} has no stream"),
                )
            })?
            .to_owned();
        let mut reader = Self {
            client,
            stream_arn,
            shards: BTreeMap::new(),
            read: BTreeMap::new(),
            from_latest: std::collections::BTreeSet::new(),
            latest_at_open: latest,
        };
        reader.discover().await?;
        reader.latest_at_open = false;
        Ok(reader)
    }

    /// Adds shards that appeared since the last look, read from their beginning.
    async fn discover(&mut self) -> Result<(), PortError> {
        let stream = self
            .client
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await
            .map_err(|e| port_error("DynamoDB Streams DescribeStream", e))?;
        for shard in stream
            .stream_description()
            .map(|d| d.shards())
            .unwrap_or_default()
        {
            let Some(id) = shard.shard_id() else { continue };
            if self.shards.contains_key(id) {
                continue;
            }
            if self.latest_at_open {
                self.from_latest.insert(id.to_owned());
            }
            let iterator = self.iterator(id).await?;
            self.shards.insert(id.to_owned(), iterator);
        }
        Ok(())
    }

    /// An iterator just after what was read from `shard` (from its start if nothing was).
    async fn iterator(&self, shard: &str) -> Result<Option<String>, PortError> {
        let request = self
            .client
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(shard);
        let request = match self.read.get(shard) {
            Some(seq) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(seq),
            None if self.from_latest.contains(shard) => {
                request.shard_iterator_type(ShardIteratorType::Latest)
            }
            None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        Ok(request
            .send()
            .await
            .map_err(|e| port_error("DynamoDB Streams GetShardIterator", e))?
            .shard_iterator)
    }

    /// The next records of every shard, in order per shard.
    ///
    /// # Errors
    /// When a call fails, of its kind.
    pub async fn next_batch(&mut self) -> Result<Vec<ItemChange>, PortError> {
        self.discover().await?;
        let mut changes = Vec::new();
        let shards: Vec<(String, Option<String>)> = self
            .shards
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (shard, iterator) in shards {
            let Some(current) = iterator else {
                continue;
            };
            let got = match self
                .client
                .get_records()
                .shard_iterator(current)
                .limit(100)
                .send()
                .await
            {
                Ok(got) => got,
                // DynamoDB Local answers this for an iterator taken before the shard had its
                // first record: take a new one after what was read.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|e| e.is_trimmed_data_access_exception()) =>
                {
                    let fresh = self.iterator(&shard).await?;
                    self.shards.insert(shard, fresh);
                    continue;
                }
                Err(e) => return Err(port_error("DynamoDB Streams GetRecords", e)),
            };
            self.shards
                .insert(shard.clone(), got.next_shard_iterator().map(str::to_owned));
            for record in got.records() {
                let Some(change) = record.dynamodb() else {
                    continue;
                };
                let sequence = change.sequence_number().unwrap_or_default().to_owned();
                self.read.insert(shard.clone(), sequence.clone());
                changes.push(item_change(
                    sequence,
                    item_of_image(change.old_image()).as_ref(),
                    item_of_image(change.new_image()).as_ref(),
                ));
            }
        }
        Ok(changes)
    }
}

/// How the local event source retries, as the template configures the real one.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// Attempts of a failed batch after the first.
    pub attempts: u32,
    /// The pause between attempts.
    pub pause: Duration,
}

/// Publishes one batch as Lambda's event source would: retry from the failed record, then
/// send the coordinates of what could not be published to `on_failure` (a queue URL).
///
/// # Errors
/// When the on-failure queue cannot be written.
pub async fn deliver<P: EventPublisher>(
    publisher: &P,
    changes: &[ItemChange],
    stack: &paymos_inbox_core::money::change::Applying,
    retries: Retries,
    sqs: &aws_sdk_sqs::Client,
    on_failure: &str,
) -> Result<(), String> {
    let mut from = 0;
    let mut attempt = 0;
    while from < changes.len() {
        let rest = &changes[from..];
        let failed = paymos_inbox_lambda::publish::publish_traced(publisher, rest, stack).await;
        let Some(sequence) = failed else {
            return Ok(());
        };
        from += rest
            .iter()
            .position(|c| c.sequence == sequence)
            .unwrap_or(0);
        attempt += 1;
        if attempt > retries.attempts {
            let failure = serde_json::json!({
                "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempt},
                "DDBStreamBatchInfo": {
                    "startSequenceNumber": changes[from].sequence,
                    "endSequenceNumber": changes.last().map(|c| c.sequence.clone()),
                    "batchSize": changes.len() - from,
                },
            });
            sqs.send_message()
                .queue_url(on_failure)
                .message_body(failure.to_string())
                .send()
                .await
                .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
            tracing::error!(start = %changes[from].sequence, "events not published after the retries: the batch's coordinates are in the on-failure queue; `paymos-inbox events resend --since …` publishes them again");
            return Ok(());
        }
        tokio::time::sleep(retries.pause).await;
    }
    Ok(())
}
