//! The resource table (`StateTable`, hash key `pk`) and the ledger's processed mark: each plan
//! as one conditional write, a `TransactWriteItems` only where items move together.
//!
//! | `pk` | `kind` | attributes |
//! |---|---|---|
//! | `inv_…` | `invoice` | `status`, `status_at` (event time, s), `status_rank`, `order_id`, `amount` (N), `amount_text`, `currency` (the first complete price; order and price set once), `held`, `duplicate_of`, `paid_late_at`, `released_at`, `refunds` (list of `withdrawal_id`, `amount`, `currency`, `full`), `applied` (SS of the deliveries and actors whose change it holds), `last_event_id`, `updated_at` (ms), `step_<status>` (`<time>\|<who>`, set once per status reached: [`DynamoResources::story`]) |
//! | `fulfilment#inv_…` | `fulfilment` | `invoice_id`, `order_id`, `amount` (N), `amount_text`, `currency`, `status`, `won_by` (event id or `manual:…`), `fulfilled_at` (ms) |
//! | `order#<external_id>` | `expected_order` | `amount` (N), `currency`: registered by the merchant for the amount guard |
//! | `order_paid#<external_id>` | `order_payment` | `order_id`, `invoice_id`, `won_by`, `paid_at` (ms): the order's claim, by the first invoice that fulfils it |
//! | `wdr_…` | `withdrawal` | `status`, `status_rank`, `type` (`payout`/`refund`), `invoice_id`, `amount` (N), `amount_text`, `currency`, `last_event_id`, `step_<status>` |
//! | `pcd_…` | `deposit` | `status`, `status_at`, `credited` (true once), `payer`, `net` (N), `net_text`, `currency`, `credited_by`, `step_<status>` |
//! | `balance#<payer>#<currency>` | `balance` | `balance` (N, exact), `payer`, `currency` |

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnConsumedCapacity, Update};

use std::collections::{BTreeMap, HashMap};

use futures::{StreamExt as _, TryStreamExt as _};

use super::item::{
    Conditional, Item, WriteUnits, conditional, get, get_s, get_u64, n, query_all, s, scan,
};
use super::records::{OrderOnRecord, invoice_seen, order_claim, registered_order, state_record};
use super::render::{Tables, fields_of, item_of, transact_item, update};
use crate::aws::{kind_of_code, port_error};
use paymos_inbox_core::money::invoice::InvoiceSeen;
use paymos_inbox_core::money::record::OperatorAction;
use paymos_inbox_core::money::record::{FulfilmentRecord, InvoiceRecord, StateRecord, StoryStep};
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::money::write::{self, Fields, Key, Refused, Stored, Write};
use paymos_inbox_core::roads::exceptions::ExceptionStore;
use paymos_inbox_core::roads::fulfil::ResourceStore;
use paymos_inbox_core::roads::handoff::StateRecords;
use paymos_inbox_core::roads::ingest::{PortError, PortErrorKind};
use paymos_inbox_core::roads::reconcile::ReconcileStore;
use paymos_inbox_core::roads::release::ReleaseStore;

pub use paymos_inbox_core::money::write::{balance_key, order_key, order_paid_key};

/// Names the code relies on; `template.yaml` must create the table with the same.
pub struct ResourceSchema;

impl ResourceSchema {
    /// The hash key.
    pub const KEY: &'static str = "pk";
}

/// A [`ResourceStore`] on DynamoDB: the domain's writes rendered as one conditional update
/// (half a transaction's units), or one `TransactWriteItems` where items move together.
#[derive(Debug, Clone)]
pub struct DynamoResources {
    client: Client,
    tables: Tables,
    units: WriteUnits,
    /// Whether open invoices are listed `open` (only the reconciliation reads that list).
    open_list: bool,
}

impl DynamoResources {
    /// The state in `state_table`, marking deliveries processed in `ledger_table`.
    #[must_use]
    pub fn new(
        client: Client,
        state_table: impl Into<String>,
        ledger_table: impl Into<String>,
    ) -> Self {
        Self {
            client,
            tables: Tables {
                state: state_table.into(),
                ledger: ledger_table.into(),
            },
            units: WriteUnits::default(),
            open_list: true,
        }
    }

    /// The store of a stack without the reconciliation: it keeps no `open` list
    /// ([`write::without_open_list`]); `exceptions --reindex` lists the open invoices when the
    /// reconciliation is turned on.
    #[must_use]
    pub fn without_open_list(mut self) -> Self {
        self.open_list = false;
        self
    }

    /// The write units DynamoDB reported for this store's committed writes so far.
    #[must_use]
    pub fn write_units(&self) -> &WriteUnits {
        &self.units
    }

    /// The state table name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.tables.state
    }

    /// The state table's item of key `key` (`inv_…`, `wdr_…`, `pcd_…`) as its typed record:
    /// one consistent `GetItem`.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn record(&self, key: &str) -> Result<Option<StateRecord>, PortError> {
        Ok(
            get(&self.client, &self.tables.state, (ResourceSchema::KEY, key))
                .await?
                .as_ref()
                .and_then(state_record),
        )
    }

    /// The story the item of key `key` keeps ([`paymos_inbox_core::money::write::story`]): each
    /// status it reached, when and by whom, oldest first; one consistent `GetItem`.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn story(&self, key: &str) -> Result<Vec<StoryStep>, PortError> {
        let item = get(&self.client, &self.tables.state, (ResourceSchema::KEY, key)).await?;
        Ok(item.map_or_else(Vec::new, |item| {
            StoryStep::story(
                item.iter()
                    .filter_map(|(name, v)| Some((name.as_str(), v.as_s().ok()?.as_str()))),
            )
        }))
    }

    /// The order `order_id` of the project scope `scope` (`None`: the home project) as the
    /// table keeps it: its claim ([`order_paid_key`]) and its registration ([`order_key`]),
    /// two consistent `GetItem`s.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn order_on_record(
        &self,
        scope: Option<&str>,
        order_id: &str,
    ) -> Result<OrderOnRecord, PortError> {
        let table = &self.tables.state;
        let (claim_key, order_key) = (order_paid_key(scope, order_id), order_key(scope, order_id));
        let (claim, registered) = futures::try_join!(
            get(&self.client, table, (ResourceSchema::KEY, &claim_key)),
            get(&self.client, table, (ResourceSchema::KEY, &order_key)),
        )?;
        Ok(OrderOnRecord {
            claim: claim.as_ref().and_then(order_claim),
            registered: registered.as_ref().map(registered_order),
        })
    }

    /// Registers the amount an order of the project scope `scope` must be paid with (the
    /// amount guard; `None`: the home project, [`paymos_inbox_core::money::change::Projects::scope`]).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn register_order(
        &self,
        (scope, external_id): (Option<&str>, &str),
        amount: &Amount,
        currency: &str,
    ) -> Result<(), PortError> {
        let order = write::expected_order((scope, external_id), amount, currency);
        self.client
            .put_item()
            .table_name(&self.tables.state)
            .set_item(Some(item_of(&order)))
            .send()
            .await
            .map_err(|e| port_error("DynamoDB PutItem", e))?;
        Ok(())
    }

    /// All of `writes` in one transaction: committed, or the writes whose condition failed
    /// with the items they found.
    async fn transact(&self, writes: &[Write]) -> Result<Stored, PortError> {
        const OPERATION: &str = "DynamoDB TransactWriteItems";
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(
                writes
                    .iter()
                    .map(|w| transact_item(&self.tables, w))
                    .collect(),
            ))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let cancelled = match result {
            Ok(out) => {
                self.units.add(out.consumed_capacity());
                self.units.add_transaction_items(writes.len());
                return Ok(Stored::Committed);
            }
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
                    c.cancellation_reasons.clone().unwrap_or_default()
                }
                _ => return Err(port_error(OPERATION, e)),
            },
        };
        let refused: Vec<Refused> = writes
            .iter()
            .zip(&cancelled)
            .filter(|(_, r)| r.code.as_deref() == Some("ConditionalCheckFailed"))
            .map(|(w, r)| Refused {
                write: w.what,
                found: r.item.as_ref().map(fields_of).unwrap_or_default(),
            })
            .collect();
        if !refused.is_empty() {
            return Ok(Stored::Refused(refused));
        }
        // Not a condition: throttling or a conflicting transaction on one of the items.
        let codes: Vec<&str> = cancelled
            .iter()
            .filter_map(|r| r.code.as_deref())
            .filter(|c| *c != "None")
            .collect();
        let kind = codes
            .iter()
            .map(|c| kind_of_code(Some(c)))
            .find(|k| *k != PortErrorKind::Unavailable)
            .unwrap_or(PortErrorKind::Unavailable);
        Err(PortError::of_kind(
            OPERATION,
            kind,
            format!("cancelled: {codes:?}"),
        ))
    }

    /// One conditional update on its own (no transaction): done, or refused with the old item.
    async fn update_alone(
        &self,
        update: &Update,
    ) -> Result<Conditional<(), Option<Item>>, PortError> {
        let result = self
            .client
            .update_item()
            .table_name(update.table_name())
            .set_key(Some(update.key().clone()))
            .update_expression(update.update_expression())
            .set_condition_expression(update.condition_expression().map(str::to_owned))
            .set_expression_attribute_names(update.expression_attribute_names().cloned())
            .set_expression_attribute_values(update.expression_attribute_values().cloned())
            .set_return_values_on_condition_check_failure(
                update.return_values_on_condition_check_failure().cloned(),
            )
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        Ok(match conditional(result, "DynamoDB UpdateItem")? {
            Conditional::Done(out) => {
                self.units.add(out.consumed_capacity());
                Conditional::Done(())
            }
            Conditional::Refused(UpdateItemError::ConditionalCheckFailedException(c)) => {
                Conditional::Refused(c.item)
            }
            Conditional::Refused(_) => Conditional::Refused(None),
        })
    }
}

impl ResourceStore for DynamoResources {
    async fn write(&self, writes: &[Write]) -> Result<Stored, PortError> {
        let (unlisted, traced);
        let writes = if self.open_list {
            writes
        } else {
            unlisted = write::without_open_list(writes);
            &unlisted[..]
        };
        let writes = match crate::trace::carried() {
            Some(traceparent) => {
                traced = write::traced(writes, &traceparent);
                &traced[..]
            }
            None => writes,
        };
        match writes {
            // One item alone: a plain conditional update, half a transaction's units.
            [one] if !one.set.is_empty() => {
                Ok(match self.update_alone(&update(&self.tables, one)).await? {
                    Conditional::Done(()) => Stored::Committed,
                    Conditional::Refused(old) => Stored::Refused(vec![Refused {
                        write: one.what,
                        found: old.as_ref().map(fields_of).unwrap_or_default(),
                    }]),
                })
            }
            _ => self.transact(writes).await,
        }
    }

    async fn read(&self, key: &Key) -> Result<Option<Fields>, PortError> {
        let (table, name) = self.tables.of(key);
        let out = self
            .client
            .get_item()
            .table_name(table)
            .key(name, AttributeValue::S(key.id.clone()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| port_error("DynamoDB GetItem", e))?;
        Ok(out.item.as_ref().map(fields_of))
    }
}

/// The state table's one index (`template.yaml`): hash `listed_in`, range `updated_at`; each
/// item that stands for an event is in one list at a time ([`write::listing`]): `review#k`,
/// `open#k`, or the UTC day it last changed.
pub const LISTED_INDEX: &str = "listed";

/// No item is dated earlier than this (2020-01-01): where a read of every day list since a
/// time starts, at the latest.
pub const FIRST_DAY_MS: u64 = 1_577_836_800_000;

/// How many day lists are read, or items listed by a reindex, at once.
const DAYS_AT_ONCE: usize = 16;

/// Today's list is read up to a day ahead of this host's clock (the writers' clocks may run
/// ahead of it).
const DAY_MARGIN_MS: u64 = 86_400_000;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl DynamoResources {
    /// Invoices whose payment waits for a person ([`Standing::waits_for_person`]): held, paid
    /// late or paid twice, and neither released nor refunded in full.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn invoices_under_review(&self) -> Result<Vec<InvoiceRecord>, PortError> {
        // The `review` lists, every shard (and, rarely, one refunded in full or marked again
        // by a late replay after its release): the standing decides.
        Ok(self
            .lists(write::review_lists(), None)
            .await?
            .into_iter()
            .filter_map(|i| {
                let seen = invoice_seen(&i);
                seen.standing().waits_for_person().then(|| InvoiceRecord {
                    invoice_id: get_s(&i, "pk").unwrap_or_default().to_owned(),
                    seen,
                    updated_at_ms: get_u64(&i, "updated_at"),
                })
            })
            .collect())
    }

    /// The newest `limit` entries of the audit trail, newest first: one query of the
    /// [`write::ACTIONS`] list, read backwards (never a scan).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn recent_actions(&self, limit: usize) -> Result<Vec<OperatorAction>, PortError> {
        let page = self
            .client
            .query()
            .table_name(&self.tables.state)
            .index_name(LISTED_INDEX)
            .key_condition_expression("listed_in = :list")
            .expression_attribute_values(":list", s(write::ACTIONS))
            .scan_index_forward(false)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| port_error("DynamoDB Query", e))?;
        Ok(page
            .items
            .unwrap_or_default()
            .iter()
            .filter_map(|i| OperatorAction::read(&fields_of(i)))
            .collect())
    }

    /// The items of one list of the `listed` index, changed at or after `since_ms` when given,
    /// of `kind` when given: a query that examines the list (from that time), never the table.
    async fn listed(&self, list: &str, since_ms: Option<u64>) -> Result<Vec<Item>, PortError> {
        self.listed_of(list, (since_ms, None), None).await
    }

    /// [`Self::listed`], changed until `until_ms` too when given.
    async fn listed_of(
        &self,
        list: &str,
        (since_ms, until_ms): (Option<u64>, Option<u64>),
        kind: Option<&str>,
    ) -> Result<Vec<Item>, PortError> {
        let mut values = HashMap::from([(":list".to_owned(), s(list))]);
        let mut condition = "listed_in = :list".to_owned();
        match (since_ms, until_ms) {
            (Some(at), Some(until)) => {
                condition.push_str(" AND updated_at BETWEEN :since AND :until");
                values.insert(":since".to_owned(), n(at));
                values.insert(":until".to_owned(), n(until));
            }
            (Some(at), None) => {
                condition.push_str(" AND updated_at >= :since");
                values.insert(":since".to_owned(), n(at));
            }
            (None, Some(until)) => {
                condition.push_str(" AND updated_at <= :until");
                values.insert(":until".to_owned(), n(until));
            }
            (None, None) => {}
        }
        if let Some(kind) = kind {
            values.insert(":kind".to_owned(), s(kind));
        }
        query_all(
            self.client
                .query()
                .table_name(&self.tables.state)
                .index_name(LISTED_INDEX)
                .key_condition_expression(condition)
                .set_filter_expression(kind.map(|_| "kind = :kind".to_owned()))
                .set_expression_attribute_values(Some(values)),
        )
        .await
    }

    /// The items of every day list (each day's shards, and its unsharded list of releases
    /// before) from `since_ms`'s day to today (`FIRST_DAY_MS` at the earliest) changed at or
    /// after it, of `kind` when given, a few lists at once.
    async fn days_since(&self, since_ms: u64, kind: Option<&str>) -> Result<Vec<Item>, PortError> {
        let from = since_ms.max(FIRST_DAY_MS);
        let days = write::days_listing(from, now_ms().saturating_add(DAY_MARGIN_MS));
        self.lists_of(days, (Some(since_ms), None), kind).await
    }

    /// The items of each of `lists` (the shards of one list), changed at or after `since_ms`
    /// when given, a few lists at once.
    async fn lists(
        &self,
        lists: Vec<String>,
        since_ms: Option<u64>,
    ) -> Result<Vec<Item>, PortError> {
        self.lists_of(lists, (since_ms, None), None).await
    }

    async fn lists_of(
        &self,
        lists: Vec<String>,
        range: (Option<u64>, Option<u64>),
        kind: Option<&str>,
    ) -> Result<Vec<Item>, PortError> {
        let pages: Vec<Vec<Item>> = futures::stream::iter(
            lists
                .into_iter()
                .map(|list| async move { self.listed_of(&list, range, kind).await }),
        )
        .buffered(DAYS_AT_ONCE)
        .try_collect()
        .await?;
        Ok(pages.into_iter().flatten().collect())
    }

    /// Once, after updating a stack from a version without the `listed` index, or with one
    /// `review` list: lists every item that stands for an event and is not listed yet, or is
    /// in that one list, as its next write would (an invoice in its `review#k` while its
    /// payment waits, `open` while its status is open, else by its day; a fulfilment, a
    /// withdrawal, a deposit and a review note by theirs), dating a fulfilment or a review
    /// note that has no `updated_at` by its own time. One scan of the state table;
    /// idempotent. Returns how many were listed.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn reindex_listed(&self) -> Result<usize, PortError> {
        let filter = (
            "(attribute_not_exists(listed_in) OR listed_in = :one) AND kind IN (:i, :f, :w, :d, :r)",
            &[
                (":one", write::REVIEW),
                (":i", "invoice"),
                (":f", "fulfilment"),
                (":w", "withdrawal"),
                (":d", "deposit"),
                (":r", "review"),
            ][..],
        );
        let unlisted: Vec<(String, (String, u64))> =
            scan(&self.client, &self.tables.state, Some(filter))
                .await?
                .iter()
                .filter_map(|i| Some((get_s(i, "pk")?.to_owned(), listing_of(i)?)))
                .collect();
        // A few updates at once: a table of a million facts is minutes, not hours.
        let listed: Vec<bool> = futures::stream::iter(
            unlisted
                .iter()
                .map(|(pk, list)| async move { self.list_unlisted(pk, list).await }),
        )
        .buffer_unordered(DAYS_AT_ONCE)
        .try_collect()
        .await?;
        Ok(listed.into_iter().filter(|l| *l).count())
    }

    /// Once, after updating a stack whose invoices were refunded in full before a full
    /// refund's note flagged its invoice: flags every such invoice from the refunds it records
    /// ([`write::refund_flags`]), so its late payment settles as it would on a new stack and
    /// never ships. One scan of the state table; idempotent. Returns how many were flagged.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn flag_full_refunds(&self) -> Result<usize, PortError> {
        let filter = (
            "kind = :i AND attribute_exists(refunds) AND attribute_not_exists(refunded_in_full_by)",
            &[(":i", "invoice")][..],
        );
        let flags: Vec<Write> = scan(&self.client, &self.tables.state, Some(filter))
            .await?
            .iter()
            .filter_map(|i| write::refund_flags(get_s(i, "pk")?, &invoice_seen(i).refunds))
            .collect();
        let written: Vec<bool> = futures::stream::iter(flags.iter().map(|w| async move {
            // Refused: flagged meanwhile by a refund's own note.
            Ok::<_, PortError>(matches!(
                self.write(std::slice::from_ref(w)).await?,
                Stored::Committed
            ))
        }))
        .buffer_unordered(DAYS_AT_ONCE)
        .try_collect()
        .await?;
        Ok(written.into_iter().filter(|w| *w).count())
    }

    /// Lists one item written before the index (or in the one `review` list of releases
    /// before), unless it was listed (or moved) meanwhile.
    async fn list_unlisted(&self, pk: &str, (list, at): &(String, u64)) -> Result<bool, PortError> {
        let done = self
            .client
            .update_item()
            .table_name(&self.tables.state)
            .key("pk", s(pk))
            .update_expression("SET listed_in = :list, updated_at = if_not_exists(updated_at, :at)")
            .condition_expression("attribute_not_exists(listed_in) OR listed_in = :one")
            .expression_attribute_values(":one", s(write::REVIEW))
            .expression_attribute_values(":list", s(list))
            .expression_attribute_values(":at", n(*at))
            .send()
            .await;
        match done {
            Ok(_) => Ok(true),
            // Written meanwhile, with its list: nothing to add.
            Err(e)
                if e.as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
            {
                Ok(false)
            }
            Err(e) => Err(port_error("DynamoDB UpdateItem", e)),
        }
    }

    /// Every invoice record, as the domain reads it (a consistent scan: for the model test and
    /// the tools).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn invoice_records(&self) -> Result<Vec<(String, InvoiceSeen)>, PortError> {
        let filter = ("kind = :i", &[(":i", "invoice")][..]);
        Ok(scan(&self.client, &self.tables.state, Some(filter))
            .await?
            .iter()
            .map(|i| {
                (
                    get_s(i, "pk").unwrap_or_default().to_owned(),
                    invoice_seen(i),
                )
            })
            .collect())
    }

    /// Whether an invoice has its fulfilment item.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn is_fulfilled(&self, invoice_id: &str) -> Result<bool, PortError> {
        let key = paymos_inbox_core::money::effect::fulfilment_key(invoice_id);
        Ok(get(&self.client, &self.tables.state, ("pk", &key))
            .await?
            .is_some())
    }

    /// Every key of the table (a consistent scan: the model test's check that every item is of
    /// its kind).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn keys(&self) -> Result<Vec<String>, PortError> {
        Ok(scan(&self.client, &self.tables.state, None)
            .await?
            .iter()
            .filter_map(|i| get_s(i, "pk").map(str::to_owned))
            .collect())
    }

    /// Every fulfilment record, whatever its key (one per invoice: more is a defect).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn fulfilments(&self) -> Result<Vec<FulfilmentRecord>, PortError> {
        let filter = ("kind = :f", &[(":f", "fulfilment")][..]);
        Ok(fulfilments_in(
            scan(&self.client, &self.tables.state, Some(filter)).await?,
        ))
    }

    /// The fulfilment records written at or after `since_ms`: the day lists since then,
    /// never the books.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn fulfilments_since(
        &self,
        since_ms: u64,
    ) -> Result<Vec<FulfilmentRecord>, PortError> {
        Ok(fulfilments_in(
            self.days_since(since_ms, Some("fulfilment")).await?,
        ))
    }

    /// The fulfilment records of one invoice written at or after `since_ms`, whatever their
    /// key: more than one is a defect. The day lists since then (what changed, never the
    /// books), filtered by the invoice.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn fulfilments_of(
        &self,
        invoice_id: &str,
        since_ms: u64,
    ) -> Result<Vec<FulfilmentRecord>, PortError> {
        let mut found = self.fulfilments_since(since_ms).await?;
        found.retain(|f| f.invoice_id == invoice_id);
        Ok(found)
    }

    /// Invoices whose status is still open, with their order id.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn open_invoices(&self) -> Result<Vec<(String, Option<String>)>, PortError> {
        // The `open` lists: what is open, not the books.
        Ok(self
            .lists(write::open_lists(), None)
            .await?
            .iter()
            .map(|i| {
                (
                    get_s(i, "pk").unwrap_or_default().to_owned(),
                    get_s(i, "order_id").map(str::to_owned),
                )
            })
            .collect())
    }
}

impl ReleaseStore for DynamoResources {
    async fn invoice_seen(
        &self,
        invoice_id: &str,
    ) -> Result<(Option<InvoiceSeen>, bool), PortError> {
        let fulfilled = self.is_fulfilled(invoice_id).await?;
        let item = get(&self.client, &self.tables.state, ("pk", invoice_id)).await?;
        Ok((item.as_ref().map(invoice_seen), fulfilled))
    }
}

/// The list an unlisted item belongs in, and the time it is listed by (its `updated_at`, or a
/// fulfilment's or a review note's own time): `None` for an item with no time.
fn listing_of(i: &Item) -> Option<(String, u64)> {
    let at = get_u64(i, "updated_at")
        .or_else(|| get_u64(i, "fulfilled_at"))
        .or_else(|| get_u64(i, "created_at"))?;
    let key = get_s(i, "pk")?;
    if get_s(i, "kind") != Some("invoice") {
        return Some((write::day_list(key, at), at));
    }
    let seen = invoice_seen(i);
    let waits = seen.standing().waits_for_person();
    Some((write::invoice_list(key, seen.status, waits, at), at))
}

fn fulfilments_in(items: Vec<Item>) -> Vec<FulfilmentRecord> {
    items
        .iter()
        .filter_map(state_record)
        .filter_map(|r| match r {
            StateRecord::Fulfilment(f) => Some(f),
            _ => None,
        })
        .collect()
}

impl StateRecords for DynamoResources {
    async fn records(&self) -> Result<Vec<StateRecord>, PortError> {
        Ok(scan(&self.client, &self.tables.state, None)
            .await?
            .iter()
            .filter_map(state_record)
            .collect())
    }

    /// The short lists (what waits, the audit trail, the open invoices) and the day lists
    /// since `since_ms`, from that time: what changed since, never the books.
    async fn changed_since(&self, since_ms: u64) -> Result<Vec<StateRecord>, PortError> {
        let mut items = self.lists(write::review_lists(), Some(since_ms)).await?;
        items.extend(self.listed(write::ACTIONS, Some(since_ms)).await?);
        items.extend(self.lists(write::open_lists(), Some(since_ms)).await?);
        items.extend(self.days_since(since_ms, None).await?);
        Ok(items.iter().filter_map(state_record).collect())
    }
}

/// How many keys one `BatchGetItem` reads (DynamoDB's most).
const KEYS_PER_BATCH: usize = 100;

impl DynamoResources {
    /// The claims of one batch of orders (`(claim, key)`), read by key ([`Self::batch`]).
    async fn claims(
        &self,
        batch: Vec<(String, String)>,
    ) -> Result<Vec<(String, String)>, PortError> {
        let claim_of: HashMap<String, String> =
            batch.into_iter().map(|(claim, key)| (key, claim)).collect();
        let keys = claim_of.keys().cloned().collect();
        Ok(self
            .batch(keys, Some("pk, invoice_id"))
            .await?
            .iter()
            .filter_map(|item| {
                let claim = claim_of.get(get_s(item, "pk")?)?;
                Some((claim.clone(), get_s(item, "invoice_id")?.to_owned()))
            })
            .collect())
    }

    /// The items of one batch of keys (at most [`KEYS_PER_BATCH`]) that exist, with the
    /// attributes of `projection` when given: one consistent `BatchGetItem`, and again for the
    /// keys DynamoDB left unprocessed (after a growing pause: it left them for want of
    /// capacity).
    async fn batch(
        &self,
        keys: Vec<String>,
        projection: Option<&str>,
    ) -> Result<Vec<Item>, PortError> {
        const OPERATION: &str = "DynamoDB BatchGetItem";
        let mut keys: Vec<Item> = keys
            .iter()
            .map(|k| HashMap::from([(ResourceSchema::KEY.to_owned(), s(k))]))
            .collect();
        let mut found = Vec::new();
        let mut pause_ms = 50;
        while !keys.is_empty() {
            let asked = KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .set_projection_expression(projection.map(str::to_owned))
                .build()
                .map_err(|e| PortError::new(OPERATION, e))?;
            let answer = self
                .client
                .batch_get_item()
                .request_items(&self.tables.state, asked)
                .send()
                .await
                .map_err(|e| port_error(OPERATION, e))?;
            found.extend(
                answer
                    .responses()
                    .and_then(|r| r.get(&self.tables.state))
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
            keys = answer
                .unprocessed_keys()
                .and_then(|u| u.get(&self.tables.state))
                .map(|k| k.keys().to_vec())
                .unwrap_or_default();
            if !keys.is_empty() {
                tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
                pause_ms = (pause_ms * 2).min(2_000);
            }
        }
        Ok(found)
    }
}

impl ReconcileStore for DynamoResources {
    /// `BatchGetItem`s of 100 claims, a few at once: a window of n orders costs n/100 calls.
    async fn orders_fulfilled_by(
        &self,
        orders: &[(Option<String>, String)],
    ) -> Result<BTreeMap<String, String>, PortError> {
        let batches: Vec<Vec<(String, String)>> = orders
            .chunks(KEYS_PER_BATCH)
            .map(|batch| {
                batch
                    .iter()
                    .map(|(scope, order)| {
                        (
                            write::scoped(scope.as_deref(), order),
                            order_paid_key(scope.as_deref(), order),
                        )
                    })
                    .collect()
            })
            .collect();
        let found: Vec<Vec<(String, String)>> =
            futures::stream::iter(batches.into_iter().map(|b| self.claims(b)))
                .buffer_unordered(DAYS_AT_ONCE)
                .try_collect()
                .await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// The day lists of the days from `from_ms` to `to_ms`, queried on that time: what changed
    /// then, never the books.
    async fn fulfilments_between(
        &self,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<FulfilmentRecord>, PortError> {
        // No item is dated after today (and a margin): a window reaching into the future (a
        // person's `--to`, the model's) reads no day lists beyond it.
        let to_ms = to_ms.min(now_ms().saturating_add(DAY_MARGIN_MS));
        let days = write::days_listing(from_ms.max(FIRST_DAY_MS), to_ms);
        Ok(fulfilments_in(
            self.lists_of(days, (Some(from_ms), Some(to_ms)), Some("fulfilment"))
                .await?,
        ))
    }

    /// `BatchGetItem`s of 100 fulfilment keys, a few at once.
    async fn fulfilments_of(
        &self,
        invoice_ids: &[String],
    ) -> Result<Vec<FulfilmentRecord>, PortError> {
        // Owned batches: a stream that borrowed the ids across its awaits would not be `Send`.
        let batches: Vec<Vec<String>> = invoice_ids
            .chunks(KEYS_PER_BATCH)
            .map(|batch| {
                batch
                    .iter()
                    .map(|id| paymos_inbox_core::money::effect::fulfilment_key(id))
                    .collect()
            })
            .collect();
        let found: Vec<Vec<Item>> =
            futures::stream::iter(batches.into_iter().map(|keys| self.batch(keys, None)))
                .buffer_unordered(DAYS_AT_ONCE)
                .try_collect()
                .await?;
        Ok(fulfilments_in(found.into_iter().flatten().collect()))
    }

    async fn open_invoices(&self) -> Result<Vec<(String, Option<String>)>, PortError> {
        DynamoResources::open_invoices(self).await
    }

    async fn order_fulfilled_by(
        &self,
        scope: Option<&str>,
        order_id: &str,
    ) -> Result<Option<String>, PortError> {
        let key = order_paid_key(scope, order_id);
        Ok(get(&self.client, &self.tables.state, ("pk", &key))
            .await?
            .and_then(|i| get_s(&i, "invoice_id").map(str::to_owned)))
    }
}

impl ExceptionStore for DynamoResources {
    async fn invoices_under_review(&self) -> Result<Vec<InvoiceRecord>, PortError> {
        DynamoResources::invoices_under_review(self).await
    }
}

impl paymos_inbox_core::roads::reconcile::ReconcileCheckpoint for DynamoResources {
    async fn clean_until(&self) -> Result<Option<u64>, PortError> {
        Ok(get(
            &self.client,
            &self.tables.state,
            ("pk", write::RECONCILED_KEY),
        )
        .await?
        .and_then(|i| get_u64(&i, "clean_until")))
    }

    async fn read_until(&self) -> Result<Option<u64>, PortError> {
        Ok(get(
            &self.client,
            &self.tables.state,
            ("pk", write::RECONCILE_READ_KEY),
        )
        .await?
        .and_then(|i| get_u64(&i, "read_until")))
    }
}
