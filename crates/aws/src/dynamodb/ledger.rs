//! The deliveries ledger: the merchant's archive of every verified delivery, keyed by its
//! environment and `event_id` (core's `delivery_key`).
//!
//! Two kinds of item share the table. A delivery's **record** (what happened, kept until
//! `DeliveryRetentionDays`, for ever by default):
//!
//! | attribute | type | meaning |
//! |---|---|---|
//! | `event_id` | S (hash key) | the delivery key: `evt_…` from the verified body for a live (or unlabelled) delivery, `test#evt_…` for a sandbox one |
//! | `event_type`, `category` | S | `invoice.paid`, `invoice` |
//! | `resource_id` | S | `inv_…` / `wdr_…` / `pcd_…` (absent for unknown types without one) |
//! | `environment`, `secret_label` | S | `live`/`test` and the label of the secret that verified it |
//! | `version`, `occurred_at`, `signed_at` | N | envelope version, event time, signature `t` (Unix s) |
//! | `received_at` | N | Unix ms |
//! | `body_sha256` | S | hex SHA-256 of the raw body: names its body item, and stays when the body is gone |
//! | `body`, `body_encoding` | B, S | only in records written before bodies were kept apart (see below): the raw body inline, kept as long as the record |
//! | `state` | S | `received` → `processed` |
//! | `lease_until` | N | Unix ms until which the recording attempt may still be sending it |
//! | `enqueue_attempts` | N | how many attempts sent it to the queue |
//! | `outcome`, `processed_at` | S, N | set by fulfil |
//! | `waiting` | S | `w0`…`w7` (core's `waiting_shard` of its key; the outcome in releases before, until `exceptions --reindex`), only while it waits for a person (the processed mark sets it, a resolution removes it unless the delivery still waits, as a payment waiting for its order does): the sparse `waiting` index |
//! | `body_conflicts`, `last_conflict_sha256`, `last_conflict_at` | N, S, N | same id, other body |
//! | `body_kept` | BOOL | its body item's expiry was lifted because the delivery waits for a person (`keep_waiting_bodies`) |
//! | `lifted_expires_at` | N | the record's own `expires_at`, put aside while it waits for a person, restored by its resolution |
//! | `pending_shard` | S | `p0`…`p63` while not processed (removed by the processed mark): the sparse `pending-by-age` index |
//! | `expires_at` | N | only when `DeliveryRetentionDays` is set (the table's TTL attribute): the whole record goes then, unless it waits for a person (then lifted until its resolution); while its delivery is not processed, each sweep that finds it stranded gives it the whole retention again (`keep_unprocessed_body`), so an unprocessed record never expires |
//!
//! A delivery's **body item** (the raw body: payer addresses, e-mails, transaction ids; removed
//! by the table's TTL after `BodyRetentionDays`, 90 by default, while the record stays):
//!
//! | attribute | type | meaning |
//! |---|---|---|
//! | `event_id` | S (hash key) | `body#<delivery key>#<body_sha256>`: a same-id delivery with other bytes is another item, so a first body is never overwritten |
//! | `body` | B | the exact raw body, raw DEFLATE-compressed when `body_encoding` is `deflate` (restored byte-exact; a typical 1.5 KiB event then fits a 1 KB write unit) |
//! | `body_encoding` | S | `deflate`, or absent for a body stored as is |
//! | `expires_at` | N | received (Unix s) + the body retention, never later than the record's own `expires_at`; while its delivery is not processed, the sweep gives it the whole retention again from each run that finds it stranded (`keep_unprocessed_body`); while its delivery waits for a person, none (`keep_waiting_bodies`); once resolved, a week from the resolution, never after the record |
//!
//! A body item has no `state`, `pending_shard` or `waiting`: no index lists it, and the ledger's
//! scans skip it. Ingest writes it before the record (a crash between leaves only a body item
//! that expires; the sender retries), so a record never exists without its body having been
//! written. A record whose body item has expired reads with an empty body.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure,
};

use super::item::{
    Conditional, Item, WriteUnits, conditional, get, get_b, get_s, get_u64, n, query_all, s, scan,
};
use super::records::delivery_record;
use crate::aws::port_error;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::money::record::DeliveryRecord;
use paymos_inbox_core::money::write;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::exceptions::{OutcomeRecord, Resolution, ReviewLedger};
use paymos_inbox_core::roads::ingest::{
    BodyKept, Delivery, DeliveryLedger, DeliveryState, ExistingDelivery, Listing, Recorded,
    TakeOver, event_id_of_key,
};
use paymos_inbox_core::wire::envelope::Category;
use paymos_inbox_core::wire::signature::Environment;

/// Names the code relies on; `template.yaml` must create the table with the same.
pub struct LedgerSchema;

impl LedgerSchema {
    /// The hash key: a delivery's key (`delivery_key`), not always its bare `event_id`.
    pub const KEY: &'static str = "event_id";
    /// The TTL attribute: a body item's always, a record's when `DeliveryRetentionDays` is set.
    pub const TTL: &'static str = "expires_at";
    /// How a body item's key starts (`body#<delivery key>#<body_sha256>`).
    pub const BODY_PREFIX: &'static str = "body#";
    /// How long a raw body is kept when nothing else is said (`BodyRetentionDays`' default).
    pub const DEFAULT_BODY_RETENTION_DAYS: u64 = 90;
    /// The shortest body retention: well beyond Paymos' 16 hours of retries and the sweep's
    /// minutes, so no delivery still to be processed can lose its body.
    pub const MIN_BODY_RETENTION_DAYS: u64 = 7;
    /// The sparse index of deliveries not yet processed.
    pub const PENDING_INDEX: &'static str = "pending-by-age";
    /// Its hash key, present only while a delivery is not processed.
    pub const PENDING_SHARD: &'static str = "pending_shard";
    /// Its range key.
    pub const PENDING_SORT: &'static str = "received_at";
    /// How many shards the index is spread over (`write::PENDING_SHARDS`). Records of
    /// releases with 8 shards are in `p0`…`p7`, which the readers read too.
    pub const PENDING_SHARDS: u8 = paymos_inbox_core::money::write::PENDING_SHARDS;
    /// The sparse index of processed deliveries that wait for a person: hash `waiting` (a
    /// shard of the delivery's key, `w0`…`w7`, present only while it waits: a storm of one
    /// outcome heats no key, and a reader queries eight keys whatever the outcomes), range
    /// `processed_at`.
    pub const WAITING_INDEX: &'static str = "waiting";
    /// Its hash key.
    pub const WAITING: &'static str = "waiting";

    /// The shard of a delivery key.
    #[must_use]
    pub fn pending_shard(key: &str) -> String {
        paymos_inbox_core::money::write::pending_shard(key)
    }

    /// The key of the body item of the record under `delivery_key` whose body hashes to
    /// `body_sha256`.
    #[must_use]
    pub fn body_key(delivery_key: &str, body_sha256: &str) -> String {
        format!("{}{delivery_key}#{body_sha256}", Self::BODY_PREFIX)
    }

    /// Whether `key` is a body item's (not a delivery's record).
    #[must_use]
    pub fn is_body_key(key: &str) -> bool {
        key.starts_with(Self::BODY_PREFIX)
    }
}

/// A delivery recorded but not processed yet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PendingDelivery {
    /// Its record's key: `evt_…`, or `test#evt_…` for a sandbox delivery.
    pub event_id: String,
    /// Its type.
    pub event_type: String,
    /// The resource it names.
    pub resource_id: Option<String>,
    /// When it was received (Unix ms).
    pub received_at_ms: u64,
    /// How many attempts sent it to the queue.
    pub enqueue_attempts: u64,
    /// Until when (Unix ms) its recording attempt may still be sending it.
    pub lease_until_ms: u64,
}

/// A [`DeliveryLedger`] on a DynamoDB table.
#[derive(Debug, Clone)]
pub struct DynamoLedger {
    client: Client,
    table: String,
    retention_secs: Option<u64>,
    body_retention_secs: u64,
    units: WriteUnits,
}

impl DynamoLedger {
    /// The ledger in `table`; with `retention_days`, records carry `expires_at` for the table's
    /// TTL. Bodies are kept [`LedgerSchema::DEFAULT_BODY_RETENTION_DAYS`] (see
    /// [`Self::with_body_retention_days`]).
    #[must_use]
    pub fn new(client: Client, table: impl Into<String>, retention_days: Option<u64>) -> Self {
        Self {
            client,
            table: table.into(),
            retention_secs: retention_days.map(|d| d * 86_400),
            body_retention_secs: LedgerSchema::DEFAULT_BODY_RETENTION_DAYS * 86_400,
            units: WriteUnits::default(),
        }
    }

    /// Keeps the raw bodies it records `days` days (at least
    /// [`LedgerSchema::MIN_BODY_RETENTION_DAYS`]: a shorter value is raised to it), and never
    /// longer than the records themselves: with a shorter record retention, a body goes with its
    /// record.
    #[must_use]
    pub fn with_body_retention_days(mut self, days: u64) -> Self {
        self.body_retention_secs = days.max(LedgerSchema::MIN_BODY_RETENTION_DAYS) * 86_400;
        self
    }

    /// When (Unix s) the body of a delivery received at `received_at_ms` expires.
    fn body_expires_at(&self, received_at_ms: u64) -> u64 {
        let keep = self.retention_secs.map_or(self.body_retention_secs, |r| {
            r.min(self.body_retention_secs)
        });
        received_at_ms / 1000 + keep
    }

    /// The write units DynamoDB reported for this ledger's committed writes so far.
    #[must_use]
    pub fn write_units(&self) -> &WriteUnits {
        &self.units
    }

    /// The table name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The DynamoDB client.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn item_of(&self, d: &Delivery, lease_until_ms: u64, listed: bool) -> Item {
        let mut item = Item::with_capacity(16);
        let key = d.key();
        item.insert(LedgerSchema::KEY.into(), s(&key));
        item.insert("event_type".into(), s(&d.event_type));
        item.insert("category".into(), s(d.category.as_str()));
        if let Some(r) = &d.resource_id {
            item.insert("resource_id".into(), s(r));
        }
        if let Some(e) = d.environment {
            item.insert("environment".into(), s(e.as_str()));
        }
        item.insert("secret_label".into(), s(&d.secret_label));
        item.insert("version".into(), n(d.version));
        item.insert("occurred_at".into(), n(d.occurred_at));
        item.insert("signed_at".into(), n(d.signed_at));
        item.insert("received_at".into(), n(d.received_at_ms));
        item.insert("body_sha256".into(), s(&d.body_sha256));
        item.insert("state".into(), s(DeliveryState::Received.as_str()));
        item.insert("lease_until".into(), n(lease_until_ms));
        item.insert("enqueue_attempts".into(), n(1));
        if listed {
            item.insert(
                LedgerSchema::PENDING_SHARD.into(),
                s(LedgerSchema::pending_shard(&key)),
            );
        }
        if let Some(secs) = self.retention_secs {
            item.insert(LedgerSchema::TTL.into(), n(d.received_at_ms / 1000 + secs));
        }
        item
    }

    fn body_item_of(&self, d: &Delivery) -> Item {
        let mut item = Item::with_capacity(4);
        item.insert(
            LedgerSchema::KEY.into(),
            s(LedgerSchema::body_key(&d.key(), &d.body_sha256)),
        );
        let (body, encoding) = encode_body(&d.body);
        item.insert("body".into(), AttributeValue::B(body.into()));
        if let Some(encoding) = encoding {
            item.insert("body_encoding".into(), s(encoding));
        }
        item.insert(
            LedgerSchema::TTL.into(),
            n(self.body_expires_at(d.received_at_ms)),
        );
        item
    }
}

/// Compresses a body when that saves space (raw DEFLATE, level 6); small bodies stay as they are.
#[must_use]
pub fn encode_body(body: &[u8]) -> (Vec<u8>, Option<&'static str>) {
    let packed = miniz_oxide::deflate::compress_to_vec(body, 6);
    if packed.len() < body.len() {
        (packed, Some("deflate"))
    } else {
        (body.to_vec(), None)
    }
}

/// The exact body back from its stored form (`None` for an encoding we do not know, or a
/// corrupt stream: never a guess).
#[must_use]
pub fn decode_body(stored: &[u8], encoding: Option<&str>) -> Option<Vec<u8>> {
    match encoding {
        None => Some(stored.to_vec()),
        Some("deflate") => miniz_oxide::inflate::decompress_to_vec_with_limit(stored, 1 << 20).ok(),
        Some(_) => None,
    }
}

/// The size DynamoDB bills an item at: attribute names plus values (strings and binaries by
/// length, numbers by about one byte per two digits plus one), per the DynamoDB item size rules.
#[must_use]
pub fn item_size(item: &Item) -> usize {
    fn value_size(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(s) => s.len(),
            AttributeValue::N(n) => {
                n.trim_start_matches('-').replace('.', "").len().div_ceil(2) + 1
            }
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
            AttributeValue::L(l) => 3 + l.iter().map(|x| 1 + value_size(x)).sum::<usize>(),
            AttributeValue::M(m) => {
                3 + m
                    .iter()
                    .map(|(k, x)| 1 + k.len() + value_size(x))
                    .sum::<usize>()
            }
            _ => 0,
        }
    }
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

impl DynamoLedger {
    /// The record a new delivery is written as (for size reports).
    #[must_use]
    pub fn new_item(&self, d: &Delivery, lease_until_ms: u64) -> Item {
        self.item_of(d, lease_until_ms, false)
    }

    /// The body item a new delivery's raw body is written as (for size reports).
    #[must_use]
    pub fn new_body_item(&self, d: &Delivery) -> Item {
        self.body_item_of(d)
    }
}

/// Whether a ledger item is a body item rather than a delivery's record.
pub(crate) fn is_body_item(item: &Item) -> bool {
    get_s(item, LedgerSchema::KEY).is_some_and(LedgerSchema::is_body_key)
}

/// A record's processing state, as written (`None` when it has none: a body item).
fn item_state(item: &Item) -> Option<DeliveryState> {
    get_s(item, "state").map(DeliveryState::parse)
}

/// Reads a record back into the domain's shape (the `event_id` out of its key), with the body
/// it holds inline (records written before bodies were kept apart), else an empty body: see
/// [`DynamoLedger::with_body`]. `None` for a body item, or an inline body we cannot restore.
pub(crate) fn existing_of(item: &Item) -> Option<ExistingDelivery> {
    if is_body_item(item) {
        return None;
    }
    let delivery = Delivery {
        event_id: event_id_of_key(get_s(item, "event_id")?).to_owned(),
        event_type: get_s(item, "event_type").unwrap_or_default().to_owned(),
        category: Category::parse(get_s(item, "category").unwrap_or_default()),
        resource_id: get_s(item, "resource_id").map(str::to_owned),
        environment: get_s(item, "environment").and_then(Environment::from_label),
        secret_label: get_s(item, "secret_label").unwrap_or_default().to_owned(),
        version: get_u64(item, "version").unwrap_or(1),
        occurred_at: get_u64(item, "occurred_at").unwrap_or_default(),
        signed_at: get_u64(item, "signed_at").unwrap_or_default(),
        received_at_ms: get_u64(item, "received_at").unwrap_or_default(),
        body: match get_b(item, "body") {
            Some(stored) => decode_body(stored, get_s(item, "body_encoding"))?,
            None => Vec::new(),
        },
        body_sha256: get_s(item, "body_sha256").unwrap_or_default().to_owned(),
    };
    Some(ExistingDelivery {
        delivery,
        state: DeliveryState::parse(get_s(item, "state").unwrap_or_default()),
        lease_until_ms: get_u64(item, "lease_until").unwrap_or_default(),
    })
}

/// A body item's raw body, restored (`None` for an encoding we do not know: never a guess).
fn body_of(item: &Item) -> Option<Vec<u8>> {
    decode_body(get_b(item, "body")?, get_s(item, "body_encoding"))
}

impl DynamoLedger {
    /// The record `item` as the domain reads it, its body included: inline in a record written
    /// before bodies were kept apart, else from its body item (a consistent `GetItem`). A body
    /// item that has expired reads as an empty body; `None` as for [`existing_of`], or for a
    /// body item we cannot restore.
    async fn with_body(&self, item: &Item) -> Result<Option<ExistingDelivery>, PortError> {
        let Some(mut existing) = existing_of(item) else {
            return Ok(None);
        };
        if item.contains_key("body") {
            return Ok(Some(existing));
        }
        let key = LedgerSchema::body_key(
            get_s(item, LedgerSchema::KEY).unwrap_or_default(),
            &existing.delivery.body_sha256,
        );
        match get(&self.client, &self.table, (LedgerSchema::KEY, &key)).await? {
            None => {}
            Some(kept) => match body_of(&kept) {
                Some(body) => existing.delivery.body = body,
                None => return Ok(None),
            },
        }
        Ok(Some(existing))
    }
}

/// A delivery's record as a payment's story shows it ([`DynamoLedger::entry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The delivery as recorded (without its body) and its state.
    pub recorded: ExistingDelivery,
    /// How it ended, once processed.
    pub outcome: Option<String>,
    /// Why, when recorded.
    pub reason: Option<String>,
    /// When it was processed (Unix ms).
    pub processed_at_ms: Option<u64>,
}

/// What the ledger keeps of one delivery's raw body ([`DynamoLedger::kept_body`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptBody {
    /// The exact bytes Paymos sent, restored from their stored form.
    Kept(Vec<u8>),
    /// The record is there, its body no longer: removed (or due to be removed) by the table's
    /// TTL after `BodyRetentionDays`, or a week after its resolution.
    Expired {
        /// When the delivery was received (Unix ms).
        received_at_ms: u64,
    },
    /// No record under that key.
    NoRecord,
}

impl DynamoLedger {
    /// The raw body of the record under `key` (`delivery_key`: `evt_…`, `test#evt_…` for a
    /// sandbox delivery), as a person reads it: inline in a record written before bodies were
    /// kept apart, else its body item `body#<key>#<body_sha256>`, decompressed byte-exact. A
    /// body item past its `expires_at` at `now_s` (Unix s) counts as gone, as DynamoDB's TTL
    /// may take days to remove it. Two consistent `GetItem`s.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails, or a stored body cannot be restored (an encoding this
    /// version does not know).
    pub async fn kept_body(&self, key: &str, now_s: u64) -> Result<KeptBody, PortError> {
        let Some(record) = get(&self.client, &self.table, (LedgerSchema::KEY, key)).await? else {
            return Ok(KeptBody::NoRecord);
        };
        if is_body_item(&record) {
            return Ok(KeptBody::NoRecord);
        }
        let unreadable = || {
            PortError::new(
                "the deliveries table",
                format!(
                    "the body of {key} cannot be restored (body_encoding {:?})",
                    get_s(&record, "body_encoding")
                ),
            )
        };
        if get_b(&record, "body").is_some() {
            return body_of(&record).map(KeptBody::Kept).ok_or_else(unreadable);
        }
        let expired = KeptBody::Expired {
            received_at_ms: get_u64(&record, "received_at").unwrap_or_default(),
        };
        let Some(sha) = get_s(&record, "body_sha256") else {
            return Ok(expired);
        };
        let body_key = LedgerSchema::body_key(key, sha);
        match get(&self.client, &self.table, (LedgerSchema::KEY, &body_key)).await? {
            Some(item) if get_u64(&item, LedgerSchema::TTL).is_none_or(|at| at > now_s) => {
                body_of(&item).map(KeptBody::Kept).ok_or_else(unreadable)
            }
            _ => Ok(expired),
        }
    }
}

impl DynamoLedger {
    /// Deliveries recorded but not processed, oldest first (at most `limit`), read from the
    /// sparse index: one query per shard, merged.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn pending(&self, limit: usize) -> Result<Vec<PendingDelivery>, PortError> {
        let items = self
            .query_pending_index("pending_shard = :shard", None, Vec::new(), limit)
            .await?;
        let mut all: Vec<PendingDelivery> = items
            .iter()
            .map(|i| PendingDelivery {
                event_id: get_s(i, "event_id").unwrap_or_default().to_owned(),
                event_type: get_s(i, "event_type").unwrap_or_default().to_owned(),
                resource_id: get_s(i, "resource_id").map(str::to_owned),
                received_at_ms: get_u64(i, "received_at").unwrap_or_default(),
                enqueue_attempts: get_u64(i, "enqueue_attempts").unwrap_or_default(),
                lease_until_ms: get_u64(i, "lease_until").unwrap_or_default(),
            })
            .collect();
        all.sort_by_key(|p| p.received_at_ms);
        all.truncate(limit);
        Ok(all)
    }
}

impl DynamoLedger {
    /// Up to `limit` items of each shard of the sparse `pending-by-age` index, oldest first per
    /// shard (one query per shard, in parallel): `key_condition` names the shard as `:shard`.
    async fn query_pending_index(
        &self,
        key_condition: &str,
        filter: Option<&str>,
        values: Vec<(&str, AttributeValue)>,
        limit: usize,
    ) -> Result<Vec<Item>, PortError> {
        let limit_i32 = i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000);
        let queries = (0..LedgerSchema::PENDING_SHARDS).map(|shard| {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(LedgerSchema::PENDING_INDEX)
                .key_condition_expression(key_condition)
                .set_filter_expression(filter.map(str::to_owned))
                .expression_attribute_values(":shard", s(format!("p{shard}")))
                .scan_index_forward(true)
                .limit(limit_i32);
            for (name, value) in &values {
                query = query.expression_attribute_values(*name, value.clone());
            }
            query.send()
        });
        let mut items = Vec::new();
        for page in futures::future::join_all(queries).await {
            let page = page.map_err(|e| port_error("DynamoDB Query", e))?;
            items.extend(page.items.unwrap_or_default());
        }
        Ok(items)
    }
}

impl DynamoLedger {
    /// Polls the ledger (a consistent scan: a tool's read, the soak's and the benchmark's; the
    /// stragglers' index holds only what a check or a retry listed) until no delivery is left
    /// unprocessed or `within` runs out, calling `between` after each look (e.g. to redrive a
    /// DLQ). Returns whether it drained.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails, or the error `between` returns.
    pub async fn wait_until_processed<F, Fut>(
        &self,
        within: std::time::Duration,
        mut between: F,
    ) -> Result<bool, PortError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), PortError>>,
    {
        let deadline = std::time::Instant::now() + within;
        loop {
            let received = [(":r", DeliveryState::Received.as_str())];
            if scan(&self.client, &self.table, Some(("#state = :r", &received)))
                .await?
                .is_empty()
            {
                return Ok(true);
            }
            between().await?;
            if std::time::Instant::now() > deadline {
                return Ok(false);
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}

impl paymos_inbox_core::roads::sweep::StrandedDeliveries for DynamoLedger {
    /// Reads the sparse `pending-by-age` index (one query per shard, keys only up to
    /// `received_before_ms`), then each candidate whole with a consistent read, and its body
    /// item (what the sweep sends again).
    async fn stranded(
        &self,
        received_before_ms: u64,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<ExistingDelivery>, PortError> {
        let items = self
            .query_pending_index(
                "pending_shard = :shard AND received_at < :before",
                Some("lease_until < :now"),
                vec![(":before", n(received_before_ms)), (":now", n(now_ms))],
                limit,
            )
            .await?;
        let mut candidates: Vec<(u64, String)> = items
            .iter()
            .filter_map(|i| {
                Some((
                    get_u64(i, "received_at").unwrap_or_default(),
                    get_s(i, "event_id")?.to_owned(),
                ))
            })
            .collect();
        candidates.sort();
        candidates.truncate(limit);
        let mut found = Vec::with_capacity(candidates.len());
        for (_, key) in candidates {
            let Some(item) = get(&self.client, &self.table, ("event_id", &key)).await? else {
                continue;
            };
            if item_state(&item) != Some(DeliveryState::Received) {
                continue;
            }
            if let Some(record) = self.with_body(&item).await?
                && record.state == DeliveryState::Received
                && record.lease_until_ms < now_ms
            {
                found.push(record);
            }
        }
        Ok(found)
    }

    /// A record whose delivery is not processed never expires (`DeliveryRetentionDays` counts
    /// from the last sweep that found it stranded): one `UpdateItem` of the record, only while
    /// it is `received` and its expiry is earlier; then one of the body item: `expires_at` =
    /// now + the body retention (never after the record's own expiry); a body item already
    /// gone stays gone.
    async fn keep_unprocessed_body(&self, d: &Delivery, now_ms: u64) -> Result<(), PortError> {
        let mut until = now_ms / 1000 + self.body_retention_secs;
        if let Some(record) = self.retention_secs {
            let record_until = now_ms / 1000 + record;
            until = until.min(record_until);
            let kept = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(LedgerSchema::KEY, s(d.key()))
                .update_expression("SET expires_at = :until")
                .condition_expression("#state = :received AND expires_at < :until")
                .expression_attribute_names("#state", "state")
                .expression_attribute_values(":received", s(DeliveryState::Received.as_str()))
                .expression_attribute_values(":until", n(record_until))
                .send()
                .await;
            // Refused: processed meanwhile, or kept already (or lifted: it waits for a person).
            conditional(kept, "DynamoDB UpdateItem")?;
        }
        let done = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(
                LedgerSchema::KEY,
                s(LedgerSchema::body_key(&d.key(), &d.body_sha256)),
            )
            .update_expression("SET expires_at = :until")
            .condition_expression("attribute_exists(event_id)")
            .expression_attribute_values(":until", n(until))
            .send()
            .await;
        match done {
            Err(e)
                if !e
                    .as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
            {
                Err(port_error("DynamoDB UpdateItem", e))
            }
            _ => Ok(()),
        }
    }
}

impl DeliveryLedger for DynamoLedger {
    /// Two puts (the body item, then the record's conditional put, listed where the sweep reads
    /// the stragglers); when the record exists and is not processed yet, one consistent
    /// `GetItem` of its body item, the body a resend sends.
    async fn record(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
    ) -> Result<Recorded, PortError> {
        DeliveryLedger::keep_body(self, delivery).await?;
        self.record_listed(delivery, lease_until_ms, Listing::Listed)
            .await
    }

    /// The body first, as an item of its own, so a record never exists without its body. A
    /// crash before the record leaves only a body item that expires, and the sender retries.
    /// Put only if absent: the same key is the same bytes, and a retry or a replay must not give
    /// back an expiry that the sweep lifted while the delivery waits for a person
    /// (`keep_waiting_bodies`).
    async fn keep_body(&self, delivery: &Delivery) -> Result<BodyKept, PortError> {
        let body = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.body_item_of(delivery)))
            .condition_expression("attribute_not_exists(event_id)")
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        Ok(match conditional(body, "DynamoDB PutItem")? {
            Conditional::Done(out) => {
                self.units.add(out.consumed_capacity());
                BodyKept::New
            }
            // Written by an earlier attempt: the same bytes, kept as they are.
            Conditional::Refused(_) => BodyKept::Seen,
        })
    }

    /// The record's conditional put, with `pending_shard` only when `listing` says so. Fulfil
    /// applies a work item only once its record exists (`Fulfil::apply_queued`), so no mark
    /// is written before the put.
    async fn record_listed(
        &self,
        delivery: &Delivery,
        lease_until_ms: u64,
        listing: Listing,
    ) -> Result<Recorded, PortError> {
        let item = self.item_of(delivery, lease_until_ms, listing == Listing::Listed);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(event_id)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match conditional(result, "DynamoDB PutItem")? {
            Conditional::Done(out) => {
                self.units.add(out.consumed_capacity());
                Ok(Recorded::New)
            }
            Conditional::Refused(PutItemError::ConditionalCheckFailedException(c)) => {
                let old = c.item.unwrap_or_default();
                // Only a record not processed yet may be sent again: only its body is read.
                let existing = if item_state(&old) == Some(DeliveryState::Processed) {
                    existing_of(&old)
                } else {
                    self.with_body(&old).await?
                };
                existing
                    .map(|x| Recorded::Existing(Box::new(x)))
                    .ok_or_else(|| {
                        PortError::new("DynamoDB PutItem", "condition failed without the old item")
                    })
            }
            Conditional::Refused(_) => Err(PortError::new(
                "DynamoDB PutItem",
                "condition failed without the old item",
            )),
        }
    }

    /// An eventually consistent `GetItem`: it only counts (see the port), so a body kept apart
    /// is not read (the record comes with an empty body).
    async fn find(&self, key: &str) -> Result<Option<ExistingDelivery>, PortError> {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("event_id", s(key))
            .send()
            .await
            .map_err(|e| port_error("DynamoDB GetItem", e))?
            .item;
        Ok(item.as_ref().and_then(existing_of))
    }

    async fn take_over(
        &self,
        key: &str,
        seen_lease_ms: u64,
        new_lease_ms: u64,
    ) -> Result<TakeOver, PortError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("event_id", s(key))
            .update_expression("SET lease_until = :new ADD enqueue_attempts :one")
            .condition_expression("#state = :received AND lease_until = :seen")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":new", n(new_lease_ms))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":seen", n(seen_lease_ms))
            .expression_attribute_values(":received", s(DeliveryState::Received.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match conditional(result, "DynamoDB UpdateItem")? {
            Conditional::Done(_) => Ok(TakeOver::Won),
            Conditional::Refused(e) => Ok(TakeOver::Lost(match e {
                UpdateItemError::ConditionalCheckFailedException(c) => c
                    .item
                    .as_ref()
                    .and_then(|i| get_s(i, "state"))
                    .map(DeliveryState::parse),
                _ => None,
            })),
        }
    }

    async fn release(&self, key: &str, lease_ms: u64) -> Result<(), PortError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("event_id", s(key))
            .update_expression("SET lease_until = :zero")
            .condition_expression("lease_until = :mine")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":mine", n(lease_ms))
            .send()
            .await;
        // Refused: someone took it over or processed it meanwhile, nothing to release.
        conditional(result, "DynamoDB UpdateItem").map(|_| ())
    }

    async fn mark_conflict(
        &self,
        key: &str,
        body_sha256: &str,
        at_ms: u64,
    ) -> Result<(), PortError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("event_id", s(key))
            .update_expression(
                "SET last_conflict_sha256 = :sha, last_conflict_at = :at ADD body_conflicts :one",
            )
            .condition_expression("attribute_exists(event_id)")
            .expression_attribute_values(":sha", s(body_sha256))
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":one", n(1))
            .send()
            .await
            .map_err(|e| port_error("DynamoDB UpdateItem", e))?;
        Ok(())
    }
}

/// By queries on the sparse `waiting` index: what is read is what waits.
impl ReviewLedger for DynamoLedger {
    async fn with_outcomes(
        &self,
        outcomes: &[Applied],
        resource_id: Option<&str>,
    ) -> Result<Vec<OutcomeRecord>, PortError> {
        // One query per shard of the sparse `waiting` index, together (the outcomes and the
        // resource as a filter): what is read is what waits, never the history.
        let wanted: Vec<&str> = outcomes.iter().map(|o| o.as_str()).collect();
        let shards = write::waiting_shards();
        let found: Vec<Vec<Item>> = futures::future::try_join_all(
            shards
                .iter()
                .map(|shard| self.waiting_in(shard, &wanted, resource_id, None)),
        )
        .await?;
        let items: Vec<Item> = found.into_iter().flatten().collect();
        let mut out = Vec::new();
        // Each body from its body item (a few reads at a time), what `exceptions` reads.
        for chunk in items.chunks(8) {
            let read = futures::future::join_all(chunk.iter().map(|i| self.with_body(i))).await;
            for (item, existing) in chunk.iter().zip(read) {
                let outcome = get_s(item, "outcome").and_then(Applied::parse);
                if let (Some(existing), Some(outcome)) = (existing?, outcome) {
                    out.push(OutcomeRecord {
                        delivery: existing.delivery,
                        outcome,
                        reason: get_s(item, "outcome_reason").map(str::to_owned),
                        processed_at_ms: get_u64(item, "processed_at").unwrap_or_default(),
                    });
                }
            }
        }
        out.sort_by_key(|r| r.processed_at_ms);
        Ok(out)
    }

    /// Sets `outcome_reason` of a delivery that still waits (on the `waiting` index); one
    /// resolved meanwhile is left as it is.
    async fn note_reason(&self, event_id: &str, reason: &str, at_ms: u64) -> Result<(), PortError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("event_id", s(event_id))
            .update_expression("SET outcome_reason = :r, outcome_reason_at = :at")
            .condition_expression("attribute_exists(waiting)")
            .expression_attribute_values(":r", s(reason))
            .expression_attribute_values(":at", n(at_ms))
            .send()
            .await;
        // Refused: resolved meanwhile, nothing waits to be said.
        conditional(result, "DynamoDB UpdateItem").map(|_| ())
    }

    /// Sets `resolved_by`, `resolved_at` and the new outcome; the delivery leaves the index of
    /// what waits unless it still waits ([`Resolution::still_waits`]).
    async fn mark_resolved(
        &self,
        event_id: &str,
        resolution: Resolution,
        by: &str,
        at_ms: u64,
    ) -> Result<(), PortError> {
        // What still waits stays on the `waiting` index, under its shard; anything else leaves it.
        let still = resolution.still_waits();
        let mut values = HashMap::from([
            (":o".to_owned(), s(resolution.name())),
            (":by".to_owned(), s(by)),
            (":at".to_owned(), n(at_ms)),
        ]);
        let update = if still.is_some() {
            values.insert(":w".to_owned(), s(write::waiting_shard(event_id)));
            "SET outcome = :o, resolved_by = :by, resolved_at = :at, waiting = :w"
        } else {
            "SET outcome = :o, resolved_by = :by, resolved_at = :at REMOVE waiting"
        };
        let record = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("event_id", s(event_id))
            .update_expression(update)
            .condition_expression("attribute_exists(event_id)")
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| port_error("DynamoDB UpdateItem", e))?
            .attributes
            .unwrap_or_default();
        if still.is_none() {
            self.restore_expiry(event_id, &record, at_ms).await?;
        }
        Ok(())
    }
}

impl DynamoLedger {
    /// Once a delivery no longer waits for a person: its record's own expiry back (the one it
    /// had before it was lifted, `DeliveryRetentionDays` from its receipt: a record that waited
    /// longer goes soon after its resolution), and its body a week from the resolution, never
    /// after its record. `record` is the resolved record as written.
    async fn restore_expiry(&self, key: &str, record: &Item, at_ms: u64) -> Result<(), PortError> {
        let lifted = get_u64(record, "lifted_expires_at");
        if lifted.is_some() {
            let done = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(LedgerSchema::KEY, s(key))
                .update_expression("SET expires_at = lifted_expires_at REMOVE lifted_expires_at")
                .condition_expression(
                    "attribute_not_exists(waiting) AND attribute_exists(lifted_expires_at)",
                )
                .send()
                .await;
            // Refused: waits again, or restored meanwhile.
            conditional(done, "DynamoDB UpdateItem")?;
        }
        let (true, Some(sha)) = (
            record.contains_key("body_kept"),
            get_s(record, "body_sha256"),
        ) else {
            return Ok(());
        };
        let week = at_ms / 1000 + LedgerSchema::MIN_BODY_RETENTION_DAYS * 86_400;
        let until = lifted.map_or(week, |l| l.min(week));
        let done = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(LedgerSchema::KEY, s(LedgerSchema::body_key(key, sha)))
            .update_expression("SET expires_at = :until")
            .condition_expression("attribute_exists(event_id)")
            .expression_attribute_values(":until", n(until))
            .send()
            .await;
        // Refused: the body is gone already (an inline body has no item of its own).
        conditional(done, "DynamoDB UpdateItem")?;
        Ok(())
    }

    /// Keeps every delivery that waits for a person (the sparse `waiting` index), its record
    /// and its body, for as long as it waits: its body item loses its expiry, then the record
    /// puts its own aside (`lifted_expires_at`) and is marked `body_kept`. A person acts on
    /// what the delivery said (`recheck` reads its order, `exceptions` shows it), so neither may
    /// expire while it waits, however long; `BodyRetentionDays` and `DeliveryRetentionDays`
    /// (each at least 7) leave the scheduled sweep, which runs this every few minutes, days to
    /// do it. The resolution gives both an expiry back ([`Self::restore_expiry`]). Idempotent;
    /// returns how many records it marked.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn keep_waiting_bodies(&self) -> Result<usize, PortError> {
        let filter = "attribute_not_exists(body_kept) OR attribute_exists(expires_at)";
        let shards = write::waiting_shards();
        let found: Vec<Vec<Item>> = futures::future::try_join_all(
            shards
                .iter()
                .map(|shard| self.waiting_in(shard, &[], None, Some(filter))),
        )
        .await?;
        let mut kept = 0;
        for item in found.iter().flatten() {
            kept += usize::from(self.keep_body(item).await?);
        }
        Ok(kept)
    }

    /// Every record under one key of the sparse `waiting` index, every page: of `outcomes`
    /// (any, when empty), of `resource_id` when given, and passing `filter` when given.
    async fn waiting_in(
        &self,
        shard: &str,
        outcomes: &[&str],
        resource_id: Option<&str>,
        filter: Option<&str>,
    ) -> Result<Vec<Item>, PortError> {
        let mut values = HashMap::from([(":k".to_owned(), s(shard))]);
        let mut filters: Vec<String> = filter.map(|f| format!("({f})")).into_iter().collect();
        if !outcomes.is_empty() {
            let names: Vec<String> = (0..outcomes.len()).map(|i| format!(":o{i}")).collect();
            for (name, outcome) in names.iter().zip(outcomes) {
                values.insert(name.clone(), s(*outcome));
            }
            filters.push(format!("outcome IN ({})", names.join(", ")));
        }
        if let Some(r) = resource_id {
            values.insert(":r".to_owned(), s(r));
            filters.push("resource_id = :r".to_owned());
        }
        let filter = (!filters.is_empty()).then(|| filters.join(" AND "));
        query_all(
            self.client
                .query()
                .table_name(&self.table)
                .index_name(LedgerSchema::WAITING_INDEX)
                .key_condition_expression("waiting = :k")
                .set_filter_expression(filter)
                .set_expression_attribute_values(Some(values)),
        )
        .await
    }

    /// One waiting record's body kept (an inline body, from before bodies were kept apart, has
    /// no expiry of its own; a body item already gone is gone), then the record's own expiry
    /// lifted and the record marked, unless it was resolved meanwhile.
    async fn keep_body(&self, record: &Item) -> Result<bool, PortError> {
        let (Some(key), Some(sha)) = (get_s(record, "event_id"), get_s(record, "body_sha256"))
        else {
            return Ok(false);
        };
        if get_b(record, "body").is_none() {
            let done = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(LedgerSchema::KEY, s(LedgerSchema::body_key(key, sha)))
                .update_expression("REMOVE expires_at")
                .condition_expression("attribute_exists(event_id)")
                .send()
                .await;
            // Refused: the body item is gone already.
            conditional(done, "DynamoDB UpdateItem")?;
        }
        // The record's own expiry is kept aside (`lifted_expires_at`) for its resolution.
        let done = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(LedgerSchema::KEY, s(key))
            .update_expression(if record.contains_key(LedgerSchema::TTL) {
                "SET body_kept = :t, lifted_expires_at = expires_at REMOVE expires_at"
            } else {
                "SET body_kept = :t"
            })
            .condition_expression("attribute_exists(waiting)")
            .expression_attribute_values(":t", AttributeValue::Bool(true))
            .send()
            .await;
        // Refused: resolved meanwhile, and its retention given back.
        Ok(matches!(
            conditional(done, "DynamoDB UpdateItem")?,
            Conditional::Done(_)
        ))
    }

    /// Once, after updating a stack from a version without the `waiting` index or with one
    /// keyed by the outcome: marks every processed delivery whose outcome waits for a person
    /// (and that no person resolved) as waiting, and moves each one waiting under its outcome
    /// (a payment a recheck left waiting for its order included) to its shard
    /// ([`write::waiting_shard`]), so the index lists it where the readers read. One scan of
    /// the table; idempotent. Returns how many were marked or moved.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn reindex_waiting(&self) -> Result<usize, PortError> {
        let waits: Vec<String> = paymos_inbox_core::roads::exceptions::DELIVERY_OUTCOMES
            .iter()
            .map(|o| o.as_str().to_owned())
            .collect();
        let names: Vec<String> = (0..waits.len()).map(|i| format!(":o{i}")).collect();
        let names = names.join(", ");
        let filter = format!(
            "(outcome IN ({names}) AND attribute_not_exists(waiting) AND attribute_not_exists(resolved_by)) OR waiting IN ({names})"
        );
        let values: Vec<(String, &str)> = (0..waits.len())
            .map(|i| format!(":o{i}"))
            .zip(waits.iter().map(String::as_str))
            .collect();
        let values: Vec<(&str, &str)> = values.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        // Body items have no outcome: the filter leaves them out.
        let found = scan(&self.client, &self.table, Some((&filter, &values))).await?;
        let mut marked = 0;
        for item in &found {
            let (Some(key), Some(outcome)) = (get_s(item, "event_id"), get_s(item, "outcome"))
            else {
                continue;
            };
            // Unmarked, unresolved and of its outcome still; or still under the outcome key.
            let (condition, was) = match get_s(item, LedgerSchema::WAITING) {
                Some(was) => ("waiting = :was", was),
                None => (
                    "outcome = :was AND attribute_not_exists(waiting) AND attribute_not_exists(resolved_by)",
                    outcome,
                ),
            };
            let done = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(LedgerSchema::KEY, s(key))
                .update_expression("SET waiting = :w")
                .condition_expression(condition)
                .expression_attribute_values(":was", s(was))
                .expression_attribute_values(":w", s(write::waiting_shard(key)))
                .send()
                .await;
            // Refused: resolved, changed or moved meanwhile.
            if let Conditional::Done(_) = conditional(done, "DynamoDB UpdateItem")? {
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// Every delivery, as the tools read it (a consistent scan: the soak's check); body items
    /// are skipped.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn deliveries(&self) -> Result<Vec<DeliveryRecord>, PortError> {
        Ok(scan(&self.client, &self.table, None)
            .await?
            .iter()
            .filter(|item| !is_body_item(item))
            .map(delivery_record)
            .collect())
    }

    /// The record under `key` as a payment's story shows it: the delivery as recorded (its
    /// body left out), its state, and once processed its outcome, why and when; `None` when
    /// there is no record. One consistent `GetItem`.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn entry(&self, key: &str) -> Result<Option<LedgerEntry>, PortError> {
        let item = get(&self.client, &self.table, (LedgerSchema::KEY, key)).await?;
        Ok(item.and_then(|i| {
            let mut recorded = existing_of(&i)?;
            recorded.delivery.body = Vec::new();
            Some(LedgerEntry {
                recorded,
                outcome: get_s(&i, "outcome").map(str::to_owned),
                reason: get_s(&i, "outcome_reason").map(str::to_owned),
                processed_at_ms: get_u64(&i, "processed_at"),
            })
        }))
    }

    /// The processing state and outcome of the record under `key` (`delivery_key`: a live
    /// delivery's is its `event_id`), `None` when there is no record.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn state_of(
        &self,
        key: &str,
    ) -> Result<Option<(DeliveryState, Option<String>)>, PortError> {
        Ok(self
            .outcome_of(key)
            .await?
            .map(|(state, outcome, _)| (state, outcome)))
    }

    /// [`Self::state_of`], and why its outcome is what it is (`outcome_reason`, the latest a
    /// re-check found), when one was recorded.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn outcome_of(
        &self,
        key: &str,
    ) -> Result<Option<(DeliveryState, Option<String>, Option<String>)>, PortError> {
        let item = get(&self.client, &self.table, ("event_id", key)).await?;
        Ok(item.map(|i| {
            (
                get_s(&i, "state").map_or(DeliveryState::Received, DeliveryState::parse),
                get_s(&i, "outcome").map(str::to_owned),
                get_s(&i, "outcome_reason").map(str::to_owned),
            )
        }))
    }
}
