//! The resource table (`StateTable`, hash key `pk`) and the ledger's processed mark: each plan
//! as one conditional write, a `TransactWriteItems` only where items move together.
//!
//! | `pk` | `kind` | attributes |
//! |---|---|---|
//! | `inv_…` | `invoice` | `status`, `status_at` (event time, s), `status_rank`, `order_id`, `amount` (N), `amount_text`, `currency` (the first complete price; order and price set once), `held`, `duplicate_of`, `paid_late_at`, `released_at`, `refunds` (list of `withdrawal_id`, `amount`, `currency`, `full`), `applied` (SS of the deliveries and actors whose change it holds), `last_event_id`, `updated_at` (ms) |
//! | `fulfilment#inv_…` | `fulfilment` | `invoice_id`, `order_id`, `amount` (N), `amount_text`, `currency`, `status`, `won_by` (event id or `manual:…`), `fulfilled_at` (ms) |
//! | `order#<external_id>` | `expected_order` | `amount` (N), `currency`: registered by the merchant for the amount guard |
//! | `wdr_…` | `withdrawal` | `status`, `status_rank`, `type` (`payout`/`refund`), `invoice_id`, `amount` (N), `amount_text`, `currency`, `last_event_id` |
//! | `pcd_…` | `deposit` | `status`, `status_at`, `credited` (true once), `payer`, `net` (N), `net_text`, `currency`, `credited_by` |
//! | `balance#<payer>#<currency>` | `balance` | `balance` (N, exact), `payer`, `currency` |

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnConsumedCapacity,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::item::{Conditional, Item, WriteUnits, conditional, get, get_s, get_u64, n, s, scan};
use super::records::{fulfilment_item, invoice_seen, state_record};
use crate::aws::{kind_of_code, port_error};
use paymos_inbox_core::change::{Applied, Change, OrderRef, Source};
use paymos_inbox_core::effect::{EffectValue, FulfilmentEffect, PaidInvoice};
use paymos_inbox_core::exceptions::ExceptionStore;
use paymos_inbox_core::fulfil::ResourceStore;
use paymos_inbox_core::handoff::StateRecords;
use paymos_inbox_core::ingest::{PortError, PortErrorKind};
use paymos_inbox_core::invoice::{InvoiceSeen, RefundMode, Standing};
use paymos_inbox_core::outcome::{Found, Mark, Plan, Refusal, Write, Written};
use paymos_inbox_core::reconcile::ReconcileStore;
use paymos_inbox_core::record::{FulfilmentRecord, InvoiceRecord, StateRecord};
use paymos_inbox_core::release::{Release, ReleaseStore, Waiting};
use paymos_inbox_core::status::{Amount, InvoiceStatus, WithdrawalStatus, invoice_accepts};

/// Names the code relies on; `template.yaml` must create the table with the same.
pub struct ResourceSchema;

impl ResourceSchema {
    /// The hash key.
    pub const KEY: &'static str = "pk";
}

/// The key of a registered expected order.
#[must_use]
pub fn order_key(external_id: &str) -> String {
    format!("order#{external_id}")
}

/// The key of an order's payment claim: written once, by the first invoice that fulfils the
/// order, so a second paid invoice for the same order is a `duplicate_payment`, not a second
/// fulfilment.
#[must_use]
pub fn order_paid_key(external_id: &str) -> String {
    format!("order_paid#{external_id}")
}

/// The key of a payer's balance in one currency.
#[must_use]
pub fn balance_key(payer: &str, currency: &str) -> String {
    format!("balance#{payer}#{currency}")
}

/// A [`ResourceStore`] on DynamoDB.
#[derive(Debug, Clone)]
pub struct DynamoResources {
    client: Client,
    state_table: String,
    ledger_table: String,
    units: WriteUnits,
}

/// A transaction under construction: its items and what each one guards.
struct Tx {
    items: Vec<TransactWriteItem>,
    roles: Vec<Role>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Resource,
    Effect,
    OrderClaim,
    OrderGuard,
    Balance,
    /// An unconditional note on another item (a refund on its invoice): never refused.
    Note,
    Ledger,
}

enum TxResult {
    Committed,
    /// Cancelled: the first role whose condition failed, and the old item it returned.
    Refused(Role, Option<Item>),
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
            state_table: state_table.into(),
            ledger_table: ledger_table.into(),
            units: WriteUnits::default(),
        }
    }

    /// The write units DynamoDB reported for this store's committed writes so far.
    #[must_use]
    pub fn write_units(&self) -> &WriteUnits {
        &self.units
    }

    /// The state table name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.state_table
    }

    /// Registers the amount an order must be paid with (the amount guard).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn register_order(
        &self,
        external_id: &str,
        amount: &Amount,
        currency: &str,
    ) -> Result<(), PortError> {
        self.client
            .put_item()
            .table_name(&self.state_table)
            .item("pk", s(order_key(external_id)))
            .item("kind", s("expected_order"))
            .item("amount", n(amount))
            .item("currency", s(currency.to_ascii_uppercase()))
            .send()
            .await
            .map_err(|e| port_error("DynamoDB PutItem", e))?;
        Ok(())
    }

    fn update(
        &self,
        key: &str,
        expr: &str,
        condition: &str,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        Update::builder()
            .table_name(&self.state_table)
            .key("pk", s(key))
            .update_expression(expr)
            .condition_expression(condition)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    }

    /// The ledger's processed mark on the record under `key` (the delivery's key, as its
    /// [`Source::Delivery`] names it): once only, and out of the pending index. The same update
    /// goes inside a transaction or, when nothing else is written, on its own.
    fn ledger_update(
        &self,
        key: &str,
        outcome: Applied,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Update {
        let mut update = Update::builder()
            .table_name(&self.ledger_table)
            .key("event_id", s(key))
            .condition_expression("attribute_not_exists(#state) OR #state <> :processed")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":processed", s("processed"))
            .expression_attribute_values(":outcome", s(outcome.as_str()))
            .expression_attribute_values(":now", n(now_ms));
        update = match reason {
            Some(reason) => update
                .update_expression("SET #state = :processed, outcome = :outcome, outcome_reason = :reason, processed_at = :now REMOVE pending_shard")
                .expression_attribute_values(":reason", s(reason)),
            None => update.update_expression(
                "SET #state = :processed, outcome = :outcome, processed_at = :now REMOVE pending_shard",
            ),
        };
        update.build().expect("ledger update is complete")
    }

    /// The processed mark of `plan` for a delivery (a manual source has none).
    fn mark_of(&self, source: &Source, plan: &Plan, now_ms: u64) -> Option<Update> {
        match source {
            Source::Delivery { event_id: key } => {
                Some(self.ledger_update(key, plan.outcome, plan.reason.as_deref(), now_ms))
            }
            Source::Manual { .. } => None,
        }
    }

    /// `items` as one transaction, with the ledger's processed `mark` when there is one.
    fn tx(items: Vec<(Role, TransactWriteItem)>, mark: Option<Update>) -> Tx {
        let (mut roles, mut items): (Vec<_>, Vec<_>) = items.into_iter().unzip();
        if let Some(mark) = mark {
            roles.push(Role::Ledger);
            items.push(TransactWriteItem::builder().update(mark).build());
        }
        Tx { items, roles }
    }

    async fn run(&self, tx: Tx) -> Result<TxResult, PortError> {
        const OPERATION: &str = "DynamoDB TransactWriteItems";
        let items = tx.items.len();
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(tx.items))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let cancelled = match result {
            Ok(out) => {
                self.units.add(out.consumed_capacity());
                self.units.add_transaction_items(items);
                return Ok(TxResult::Committed);
            }
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
                    c.cancellation_reasons.clone().unwrap_or_default()
                }
                _ => return Err(port_error(OPERATION, e)),
            },
        };
        // The ledger first: a second message for a processed delivery changes nothing.
        let failed = |role: Role| {
            tx.roles.iter().zip(&cancelled).find(|(r, reason)| {
                **r == role && reason.code.as_deref() == Some("ConditionalCheckFailed")
            })
        };
        for role in [
            Role::Ledger,
            Role::Resource,
            Role::Effect,
            Role::OrderClaim,
            Role::OrderGuard,
            Role::Balance,
            Role::Note,
        ] {
            if let Some((_, reason)) = failed(role) {
                return Ok(TxResult::Refused(role, reason.item.clone()));
            }
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
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
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

    /// The processed mark alone, when nothing else is written (a manual source has none).
    async fn mark_only(
        &self,
        source: &Source,
        plan: &Plan,
        now_ms: u64,
    ) -> Result<Written, PortError> {
        let Some(mark) = self.mark_of(source, plan, now_ms) else {
            return Ok(Written::Committed);
        };
        Ok(match self.update_alone(&mark).await? {
            Conditional::Done(()) => Written::Committed,
            Conditional::Refused(_) => Written::AlreadyProcessed,
        })
    }

    /// What fulfils an invoice, for the webhook's transition and a release alike: the effect's
    /// items (each only if absent) and the order's once-only claim (only if absent, returning
    /// the claim that won when it is refused).
    fn fulfilment_writes(
        &self,
        effect: &dyn FulfilmentEffect,
        paid: &PaidInvoice<'_>,
    ) -> Vec<(Role, TransactWriteItem)> {
        let record = Put::builder()
            .table_name(&self.state_table)
            .set_item(Some(fulfilment_item(&FulfilmentRecord::of(paid))))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .expect("fulfilment put is complete");
        let mut items = vec![(
            Role::Effect,
            TransactWriteItem::builder().put(record).build(),
        )];
        for write in effect.writes(paid) {
            let mut put = Put::builder()
                .table_name(&self.state_table)
                .item("pk", s(&write.key))
                .condition_expression("attribute_not_exists(pk)");
            for (name, value) in write.attributes {
                put = put.item(
                    name,
                    match value {
                        EffectValue::Text(t) => s(t),
                        EffectValue::Number(a) => n(a),
                    },
                );
            }
            let put = put.build().expect("effect put is complete");
            items.push((Role::Effect, TransactWriteItem::builder().put(put).build()));
        }
        if let Some(external_id) = &paid.order.external_id {
            let claim = Put::builder()
                .table_name(&self.state_table)
                .item("pk", s(order_paid_key(external_id)))
                .item("kind", s("order_payment"))
                .item("order_id", s(external_id))
                .item("invoice_id", s(paid.invoice_id))
                .item("won_by", s(paid.source.id()))
                .item("paid_at", n(paid.at_ms))
                .condition_expression("attribute_not_exists(pk)")
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .expect("order claim is complete");
            items.push((
                Role::OrderClaim,
                TransactWriteItem::builder().put(claim).build(),
            ));
        }
        items
    }

    /// The invoice's conditional transition to `status`, with `mark` (why a paid invoice is not
    /// fulfilled) when there is one. The condition is [`invoice_accepts`] as an expression and,
    /// for a change that fulfils, the order on the invoice's record: the same order id (or none
    /// yet), and a price where the record has one. The order and the price are set once.
    fn invoice_update(
        &self,
        source: &Source,
        change: &InvoiceChange<'_>,
        mark: Option<&Mark>,
        now_ms: u64,
    ) -> TransactWriteItem {
        let InvoiceChange {
            invoice_id,
            status,
            occurred_at,
            order,
        } = *change;
        let open_condition = "#status IN (:o0, :o1, :o2, :o3)";
        // A record with refunds only has no status yet: it takes any.
        let mut condition = if status.is_final() {
            format!("(attribute_not_exists(#status) OR {open_condition})")
        } else {
            format!(
                "(attribute_not_exists(#status) OR ({open_condition} AND (status_at < :at OR (status_at = :at AND status_rank < :rank))))"
            )
        };
        let mut update = self.update(invoice_id, "", "");
        if status.fulfils() && mark.is_none() {
            // A payment refunded in full before it is applied never ships.
            condition.push_str(" AND attribute_not_exists(refunded_in_full_by)");
            condition.push_str(match order.external_id {
                Some(_) => " AND (attribute_not_exists(order_id) OR order_id = :order_id)",
                // No order: never written. The refusal returns the record, whose order the
                // change adopts, or says none is known (the domain's `order_unknown`).
                None => " AND attribute_exists(order_id) AND attribute_not_exists(order_id)",
            });
            if !order.has_price() {
                // The record's price is a complete pair or none (as `OrderRef::has_price`):
                // a record written before prices were pairs may hold an amount alone.
                condition.push_str(
                    " AND (attribute_not_exists(amount) OR attribute_not_exists(currency))",
                );
            }
        }
        let mut expr = String::from(
            "SET kind = :kind, #status = :status, status_at = :at, status_rank = :rank, last_event_id = :by, updated_at = :now",
        );
        update = order_set_once(update, &mut expr, order);
        match mark {
            Some(Mark::Held) => {
                expr.push_str(", held = :mark");
                update = update.expression_attribute_values(":mark", AttributeValue::Bool(true));
            }
            Some(Mark::DuplicateOf(winner)) => {
                expr.push_str(", duplicate_of = :mark");
                update = update.expression_attribute_values(":mark", s(winner));
            }
            // The refund on the record says it all.
            Some(Mark::Refunded) | None => {}
        }
        expr.push_str(" ADD applied :applied");
        for (i, open) in InvoiceStatus::OPEN.iter().enumerate() {
            update = update.expression_attribute_values(format!(":o{i}"), s(open.as_str()));
        }
        let update = update
            .update_expression(expr)
            .condition_expression(condition)
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":kind", s("invoice"))
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(":at", n(occurred_at))
            .expression_attribute_values(":rank", n(status.rank()))
            .expression_attribute_values(":by", s(source.id()))
            .expression_attribute_values(":applied", AttributeValue::Ss(vec![source.id()]))
            .expression_attribute_values(":now", n(now_ms))
            .build()
            .expect("invoice update is complete");
        TransactWriteItem::builder().update(update).build()
    }

    /// The registered order's amount guard: an order registered here is paid with its amount
    /// and currency (exact decimals), or the check fails.
    fn order_guard(&self, order: &OrderRef) -> Option<(Role, TransactWriteItem)> {
        let external_id = order.external_id.as_ref()?;
        let check = ConditionCheck::builder()
            .table_name(&self.state_table)
            .key("pk", s(order_key(external_id)));
        let check = match (&order.amount, &order.currency) {
            (Some(amount), Some(currency)) => check
                .condition_expression(
                    "attribute_not_exists(pk) OR (amount = :amount AND currency = :currency)",
                )
                .expression_attribute_values(":amount", n(amount))
                .expression_attribute_values(":currency", s(currency)),
            // No complete price: only an order nobody registered passes.
            _ => check.condition_expression("attribute_not_exists(pk)"),
        };
        let check = check.build().expect("order check is complete");
        Some((
            Role::OrderGuard,
            TransactWriteItem::builder().condition_check(check).build(),
        ))
    }

    /// A paid invoice's transition with everything that fulfils it: the effect's items, the
    /// order's claim, and the registered order's guard (exact decimals).
    fn invoice_writes(
        &self,
        source: &Source,
        change: &InvoiceChange<'_>,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> Vec<(Role, TransactWriteItem)> {
        let mut items = vec![(
            Role::Resource,
            self.invoice_update(source, change, None, now_ms),
        )];
        if !change.status.fulfils() {
            return items;
        }
        let paid = PaidInvoice {
            invoice_id: change.invoice_id,
            status: change.status,
            order: change.order,
            source,
            at_ms: now_ms,
        };
        items.extend(self.fulfilment_writes(effect, &paid));
        items.extend(self.order_guard(change.order));
        items
    }

    /// `paid_late_at` on an invoice that is still `closed`.
    fn paid_late_update(
        &self,
        invoice_id: &str,
        closed: InvoiceStatus,
        occurred_at: u64,
    ) -> TransactWriteItem {
        let update = self
            .update(
                invoice_id,
                "SET paid_late_at = if_not_exists(paid_late_at, :at)",
                "#status = :current",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":at", n(occurred_at))
            .expression_attribute_values(":current", s(closed.as_str()))
            .build()
            .expect("paid late update is complete");
        TransactWriteItem::builder().update(update).build()
    }

    /// A review note beside the processed mark: what the state table's stream, and so the
    /// hand-off, sees of a delivery that needs a person and changes no resource.
    fn review_note(
        &self,
        event_id: &str,
        outcome: Applied,
        resource_id: Option<&str>,
        reason: &str,
        now_ms: u64,
    ) -> TransactWriteItem {
        let mut put = Put::builder()
            .table_name(&self.state_table)
            .item("pk", s(format!("review#{event_id}")))
            .item("kind", s("review"))
            .item("reason", s(outcome.as_str()))
            .item("event_id", s(event_id))
            .item("why", s(reason))
            .item("created_at", n(now_ms))
            .condition_expression("attribute_not_exists(pk)");
        if let Some(r) = resource_id {
            put = put.item("resource_id", s(r));
        }
        TransactWriteItem::builder()
            .put(put.build().expect("review item is complete"))
            .build()
    }

    /// A withdrawal's forward move ([`paymos_inbox_core::status::withdrawal_accepts`] as a
    /// condition) and, for a completed refund, the refund's note on its invoice.
    fn withdrawal_writes(
        &self,
        source: &Source,
        change: &Change,
        now_ms: u64,
    ) -> Vec<(Role, TransactWriteItem)> {
        let Change::Withdrawal {
            withdrawal_id,
            status,
            kind,
            invoice_id,
            amount,
            currency,
            mode,
            ..
        } = change
        else {
            return Vec::new();
        };
        let allowed = status.allowed_from();
        let mut condition = String::from("attribute_not_exists(pk)");
        if !allowed.is_empty() {
            let names: Vec<String> = (0..allowed.len()).map(|i| format!(":f{i}")).collect();
            condition.push_str(&format!(" OR #status IN ({})", names.join(", ")));
        }
        let mut expr = String::from(
            "SET kind = :kind, #status = :status, status_rank = :rank, #type = :type, last_event_id = :by, updated_at = :now",
        );
        let mut update = self.update(withdrawal_id, "", &condition);
        for (i, from) in allowed.iter().enumerate() {
            update = update.expression_attribute_values(format!(":f{i}"), s(from.as_str()));
        }
        if let Some(v) = invoice_id {
            expr.push_str(", invoice_id = :invoice_id");
            update = update.expression_attribute_values(":invoice_id", s(v));
        }
        if let Some(v) = amount {
            expr.push_str(", amount = :amount, amount_text = :amount_text");
            update = update
                .expression_attribute_values(":amount", n(v))
                .expression_attribute_values(":amount_text", s(v.as_str()));
        }
        if let Some(v) = currency {
            expr.push_str(", currency = :currency");
            update = update.expression_attribute_values(":currency", s(v));
        }
        let update = update
            .update_expression(expr)
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#type", "type")
            .expression_attribute_values(":kind", s("withdrawal"))
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(":rank", n(status.rank()))
            .expression_attribute_values(":type", s(kind))
            .expression_attribute_values(":by", s(source.id()))
            .expression_attribute_values(":now", n(now_ms))
            .build()
            .expect("withdrawal update is complete");
        let mut items = vec![(
            Role::Resource,
            TransactWriteItem::builder().update(update).build(),
        )];
        if let (true, WithdrawalStatus::Completed, Some(invoice)) =
            (kind == "refund", status, invoice_id)
        {
            // A completed refund is recorded beside its invoice, in the same transaction (the
            // withdrawal completes once, so it is appended once). It gives the invoice no
            // status; the domain decides what the refunds settle.
            let refunded = self.refund_note(withdrawal_id, invoice, amount, currency, mode, now_ms);
            items.push((
                Role::Note,
                TransactWriteItem::builder().update(refunded).build(),
            ));
        }
        items
    }

    /// A completed refund's note on its invoice: appended to `refunds` with its mode and, for a
    /// `full` one, the flag a paid change's condition reads.
    fn refund_note(
        &self,
        withdrawal_id: &str,
        invoice: &str,
        amount: &Option<Amount>,
        currency: &Option<String>,
        mode: &Option<String>,
        now_ms: u64,
    ) -> Update {
        let mode = mode.as_deref().and_then(RefundMode::parse);
        let mut refund = HashMap::from([
            ("withdrawal_id".to_owned(), s(withdrawal_id)),
            (
                "full".to_owned(),
                AttributeValue::Bool(mode == Some(RefundMode::Full)),
            ),
        ]);
        if let Some(v) = mode {
            refund.insert("mode".into(), s(v.as_str()));
        }
        if let Some(v) = amount {
            refund.insert("amount".into(), n(v));
        }
        if let Some(v) = currency {
            refund.insert("currency".into(), s(v));
        }
        let mut expr = String::from(
            "SET kind = if_not_exists(kind, :kind), refunds = list_append(if_not_exists(refunds, :none), :refund), updated_at = :now",
        );
        let mut refunded = Update::builder();
        if mode == Some(RefundMode::Full) {
            // The flag a paid change's condition reads: a payment refunded in full before
            // it shipped never ships (the list itself is not a condition DynamoDB can read).
            expr.push_str(
                ", refunded_in_full_by = if_not_exists(refunded_in_full_by, :withdrawal)",
            );
            refunded = refunded.expression_attribute_values(":withdrawal", s(withdrawal_id));
        }
        refunded
            .table_name(&self.state_table)
            .key("pk", s(invoice))
            .update_expression(expr)
            .expression_attribute_values(":kind", s("invoice"))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
            .expression_attribute_values(
                ":refund",
                AttributeValue::L(vec![AttributeValue::M(refund)]),
            )
            .build()
            .expect("refund note is complete")
    }

    /// A deposit's status ([`paymos_inbox_core::status::deposit_accepts`] as a condition) and, for
    /// a final confirmation, the payer's balance in the same transaction.
    fn deposit_writes(
        &self,
        source: &Source,
        change: &Change,
        now_ms: u64,
    ) -> Vec<(Role, TransactWriteItem)> {
        let Change::Deposit {
            deposit_id,
            status,
            occurred_at,
            credit,
        } = change
        else {
            return Vec::new();
        };
        let Some(credit) = credit else {
            // Advisory: records the latest status of a deposit not yet credited.
            let deposit = self
                .update(
                    deposit_id,
                    "SET kind = :kind, #status = :status, status_at = :at, updated_at = :now",
                    "attribute_not_exists(pk) OR (attribute_not_exists(credited) AND status_at <= :at)",
                )
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":kind", s("deposit"))
                .expression_attribute_values(":status", s(status.as_str()))
                .expression_attribute_values(":at", n(occurred_at))
                .expression_attribute_values(":now", n(now_ms))
                .build()
                .expect("deposit update is complete");
            return vec![(
                Role::Resource,
                TransactWriteItem::builder().update(deposit).build(),
            )];
        };
        let deposit = self
            .update(
                deposit_id,
                "SET kind = :kind, #status = :status, status_at = :at, credited = :true, payer = :payer, net = :net, net_text = :net_text, currency = :currency, credited_by = :by, updated_at = :now",
                "attribute_not_exists(pk) OR attribute_not_exists(credited)",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":kind", s("deposit"))
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(":at", n(occurred_at))
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":payer", s(&credit.payer))
            .expression_attribute_values(":net", n(&credit.net))
            .expression_attribute_values(":net_text", s(credit.net.as_str()))
            .expression_attribute_values(":currency", s(&credit.currency))
            .expression_attribute_values(":by", s(source.id()))
            .expression_attribute_values(":now", n(now_ms))
            .build()
            .expect("deposit update is complete");
        let balance = Update::builder()
            .table_name(&self.state_table)
            .key("pk", s(balance_key(&credit.payer, &credit.currency)))
            .update_expression(
                "SET kind = :kind, payer = :payer, currency = :currency ADD balance :net",
            )
            .expression_attribute_values(":kind", s("balance"))
            .expression_attribute_values(":payer", s(&credit.payer))
            .expression_attribute_values(":currency", s(&credit.currency))
            .expression_attribute_values(":net", n(&credit.net))
            .build()
            .expect("balance update is complete");
        vec![
            (
                Role::Resource,
                TransactWriteItem::builder().update(deposit).build(),
            ),
            (
                Role::Balance,
                TransactWriteItem::builder().update(balance).build(),
            ),
        ]
    }
}

/// The fields of an invoice change the writes need.
#[derive(Clone, Copy)]
struct InvoiceChange<'a> {
    invoice_id: &'a str,
    status: InvoiceStatus,
    occurred_at: u64,
    order: &'a OrderRef,
}

impl<'a> InvoiceChange<'a> {
    fn of(change: &'a Change) -> Option<Self> {
        match change {
            Change::Invoice {
                invoice_id,
                status,
                occurred_at,
                order,
            } => Some(Self {
                invoice_id,
                status: *status,
                occurred_at: *occurred_at,
                order,
            }),
            _ => None,
        }
    }
}

/// What a refused item held, as the domain reads it: what it is, whether `source`'s own change
/// is among what it holds, and (for an invoice) where its payment stands. When the refused write
/// was a paid change (`paid`) whose status the invoice would take, the order's condition failed:
/// the invoice's record names another order, or a price the change left out.
fn refused(old: Option<&Item>, source: &Source, paid: Option<&Change>) -> Refusal {
    let id = source.id();
    let mine = old.is_some_and(|i| {
        get_s(i, "last_event_id") == Some(id.as_str())
            || get_s(i, "credited_by") == Some(id.as_str())
            || i.get("applied")
                .and_then(|v| v.as_ss().ok())
                .is_some_and(|applied| applied.contains(&id))
    });
    if old.is_none() && paid.is_some() {
        // Nothing recorded: only a payment naming no order is refused there.
        return Refusal::OrderOnRecord {
            recorded: OrderRef::none(),
        };
    }
    let Some(item) = old.filter(|i| get_s(i, "kind") == Some("invoice")) else {
        return Refusal::Resource {
            found: found(old),
            mine,
            standing: Standing::Clear,
        };
    };
    let seen = invoice_seen(item);
    if let Some(Change::Invoice {
        status,
        occurred_at,
        ..
    }) = paid
    {
        let current = seen
            .status
            .map(|st| (st, get_u64(item, "status_at").unwrap_or_default()));
        if invoice_accepts(current, *status, *occurred_at)
            && item.contains_key("refunded_in_full_by")
        {
            return Refusal::Refunded;
        }
        if invoice_accepts(current, *status, *occurred_at) {
            return Refusal::OrderOnRecord {
                recorded: seen.order,
            };
        }
    }
    Refusal::Resource {
        found: found(old),
        mine,
        standing: seen.standing(),
    }
}

fn found(old: Option<&Item>) -> Found {
    let Some(item) = old else {
        return Found::Nothing;
    };
    let status = get_s(item, "status");
    match get_s(item, "kind") {
        Some("invoice") => status
            .and_then(InvoiceStatus::parse)
            .map_or(Found::Nothing, Found::Invoice),
        Some("withdrawal") => status
            .and_then(WithdrawalStatus::parse)
            .map_or(Found::Nothing, Found::Withdrawal),
        Some("deposit") => Found::Deposit {
            credited: item.contains_key("credited"),
        },
        _ => Found::Nothing,
    }
}

impl ResourceStore for DynamoResources {
    async fn write(
        &self,
        source: &Source,
        change: &Change,
        plan: &Plan,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> Result<Written, PortError> {
        let items = match (&plan.write, change) {
            (Write::MarkOnly, _) => return self.mark_only(source, plan, now_ms).await,
            (Write::Review, _) => {
                let Source::Delivery { event_id } = source else {
                    return Ok(Written::Committed);
                };
                let resource_id = match change {
                    Change::Unconfirmed { resource_id, .. }
                    | Change::Unusable { resource_id, .. } => resource_id.as_deref(),
                    // A payment whose order is known nowhere yet.
                    Change::Invoice { invoice_id, .. } => Some(invoice_id.as_str()),
                    _ => None,
                };
                let note = self.review_note(
                    event_id,
                    plan.outcome,
                    resource_id,
                    plan.reason.as_deref().unwrap_or_default(),
                    now_ms,
                );
                vec![(Role::Note, note)]
            }
            (Write::Change, Change::Invoice { .. }) => {
                let invoice = InvoiceChange::of(change).expect("an invoice change");
                self.invoice_writes(source, &invoice, effect, now_ms)
            }
            (Write::Change, Change::Withdrawal { .. }) => {
                self.withdrawal_writes(source, change, now_ms)
            }
            (Write::Change, Change::Deposit { .. }) => self.deposit_writes(source, change, now_ms),
            (Write::Unfulfilled(mark), Change::Invoice { .. }) => {
                let invoice = InvoiceChange::of(change).expect("an invoice change");
                vec![(
                    Role::Resource,
                    self.invoice_update(source, &invoice, Some(mark), now_ms),
                )]
            }
            (
                Write::PaidLate { closed },
                Change::Invoice {
                    invoice_id,
                    occurred_at,
                    ..
                },
            ) => vec![(
                Role::Resource,
                self.paid_late_update(invoice_id, *closed, *occurred_at),
            )],
            // A plan the rules never make for this change: write the mark alone.
            _ => return self.mark_only(source, plan, now_ms).await,
        };
        let mark = if plan.with_mark {
            self.mark_of(source, plan, now_ms)
        } else {
            None
        };
        let paid = match (&plan.write, change) {
            (Write::Change, Change::Invoice { status, .. }) if status.fulfils() => Some(change),
            _ => None,
        };
        if mark.is_none()
            && let [(Role::Resource, item)] = items.as_slice()
            && let Some(update) = item.update()
        {
            // One item alone: a plain conditional update, half a transaction's units.
            return Ok(match self.update_alone(update).await? {
                Conditional::Done(()) => Written::Committed,
                Conditional::Refused(old) => Written::Refused(refused(old.as_ref(), source, paid)),
            });
        }
        Ok(match self.run(Self::tx(items, mark)).await? {
            TxResult::Committed => Written::Committed,
            TxResult::Refused(Role::Ledger, _) => Written::AlreadyProcessed,
            TxResult::Refused(Role::Resource, old) => {
                Written::Refused(refused(old.as_ref(), source, paid))
            }
            TxResult::Refused(Role::OrderClaim, old) => Written::Refused(Refusal::OrderClaimed {
                invoice_id: old
                    .as_ref()
                    .and_then(|i| get_s(i, "invoice_id"))
                    .unwrap_or("unknown")
                    .to_owned(),
            }),
            TxResult::Refused(Role::OrderGuard, _) => Written::Refused(Refusal::OrderMismatch),
            TxResult::Refused(Role::Effect, _) => Written::Refused(Refusal::Fulfilled),
            TxResult::Refused(Role::Note | Role::Balance, _) => Written::Refused(Refusal::Noted),
        })
    }
}

impl DynamoResources {
    /// Invoices whose payment waits for a person ([`Standing::waits_for_person`]): held, paid
    /// late or paid twice, and neither released nor refunded in full.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn invoices_under_review(&self) -> Result<Vec<InvoiceRecord>, PortError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.state_table)
                .filter_expression(
                    "kind = :invoice AND (held = :true OR attribute_exists(paid_late_at) OR attribute_exists(duplicate_of))",
                )
                .expression_attribute_values(":invoice", s("invoice"))
                .expression_attribute_values(":true", AttributeValue::Bool(true))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| port_error("DynamoDB Scan", e))?;
            for i in page.items.unwrap_or_default() {
                let seen = invoice_seen(&i);
                if seen.standing().waits_for_person() {
                    out.push(InvoiceRecord {
                        invoice_id: get_s(&i, "pk").unwrap_or_default().to_owned(),
                        seen,
                        updated_at_ms: get_u64(&i, "updated_at"),
                    });
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }

    /// Every invoice record, as the domain reads it (a consistent scan: for the model test and
    /// the tools).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn invoice_records(&self) -> Result<Vec<(String, InvoiceSeen)>, PortError> {
        let filter = ("kind = :i", &[(":i", "invoice")][..]);
        Ok(scan(&self.client, &self.state_table, Some(filter))
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
        let key = paymos_inbox_core::effect::fulfilment_key(invoice_id);
        Ok(get(&self.client, &self.state_table, ("pk", &key))
            .await?
            .is_some())
    }

    /// Every key of the table (a consistent scan: the model test's check that every item is of
    /// its kind).
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn keys(&self) -> Result<Vec<String>, PortError> {
        Ok(scan(&self.client, &self.state_table, None)
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
            scan(&self.client, &self.state_table, Some(filter)).await?,
        ))
    }

    /// The fulfilment records of one invoice, whatever their key: more than one is a defect.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn fulfilments_of(
        &self,
        invoice_id: &str,
    ) -> Result<Vec<FulfilmentRecord>, PortError> {
        let filter = (
            "kind = :f AND invoice_id = :i",
            &[(":f", "fulfilment"), (":i", invoice_id)][..],
        );
        Ok(fulfilments_in(
            scan(&self.client, &self.state_table, Some(filter)).await?,
        ))
    }

    /// Invoices whose status is still open, with their order id.
    ///
    /// # Errors
    /// [`PortError`] when DynamoDB fails.
    pub async fn open_invoices(&self) -> Result<Vec<(String, Option<String>)>, PortError> {
        let [o0, o1, o2, o3] = InvoiceStatus::OPEN.map(InvoiceStatus::as_str);
        let filter = (
            "kind = :invoice AND #status IN (:o0, :o1, :o2, :o3)",
            &[
                (":invoice", "invoice"),
                (":o0", o0),
                (":o1", o1),
                (":o2", o2),
                (":o3", o3),
            ][..],
        );
        Ok(scan(&self.client, &self.state_table, Some(filter))
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
        let item = get(&self.client, &self.state_table, ("pk", invoice_id)).await?;
        Ok((item.as_ref().map(invoice_seen), fulfilled))
    }

    async fn write_release(
        &self,
        release: &Release<'_>,
        effect: &dyn FulfilmentEffect,
        now_ms: u64,
    ) -> Result<Written, PortError> {
        let Release {
            invoice_id,
            waiting,
            order,
            source,
            reason,
            amount_checked,
            refunds_seen,
        } = *release;
        // The invoice still waits as it was read: not released, no refund recorded since.
        let (waits, seen) = match waiting {
            Waiting::Held(st) => ("#status = :seen AND held = :true", st),
            Waiting::PaidLate(st) => ("#status = :seen AND attribute_exists(paid_late_at)", st),
        };
        let refunds = if refunds_seen == 0 {
            "attribute_not_exists(refunds)"
        } else {
            "size(refunds) = :refunds"
        };
        let condition = format!("{waits} AND attribute_not_exists(released_at) AND {refunds}");
        let mut expr = String::from(
            "SET kind = :kind, released_at = :now, released_by = :by, release_reason = :reason, amount_overridden = :overridden, last_event_id = :by, updated_at = :now",
        );
        let mut update = self
            .update(invoice_id, "", &condition)
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":kind", s("invoice"))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":by", s(source.id()))
            .expression_attribute_values(":reason", s(reason))
            .expression_attribute_values(":overridden", AttributeValue::Bool(!amount_checked))
            .expression_attribute_values(":applied", AttributeValue::Ss(vec![source.id()]));
        if refunds_seen > 0 {
            update = update.expression_attribute_values(":refunds", n(refunds_seen));
        }
        if let Waiting::Held(_) = waiting {
            update = update.expression_attribute_values(":true", AttributeValue::Bool(true));
        }
        update = update.expression_attribute_values(":seen", s(seen.as_str()));
        update = order_set_once(update, &mut expr, order);
        expr.push_str(" REMOVE held ADD applied :applied");
        let update = update
            .update_expression(expr)
            .build()
            .expect("release update is complete");
        let mut items = vec![(
            Role::Resource,
            TransactWriteItem::builder().update(update).build(),
        )];
        let paid = PaidInvoice {
            invoice_id,
            status: waiting.paid_status(),
            order,
            source,
            at_ms: now_ms,
        };
        items.extend(self.fulfilment_writes(effect, &paid));
        if amount_checked {
            items.extend(self.order_guard(order));
        }
        Ok(match self.run(Self::tx(items, None)).await? {
            TxResult::Committed => Written::Committed,
            TxResult::Refused(Role::OrderGuard, _) => Written::Refused(Refusal::OrderMismatch),
            TxResult::Refused(Role::OrderClaim, old) => Written::Refused(Refusal::OrderClaimed {
                invoice_id: old
                    .as_ref()
                    .and_then(|i| get_s(i, "invoice_id"))
                    .unwrap_or("another invoice")
                    .to_owned(),
            }),
            TxResult::Refused(_, old) => Written::Refused(refused(old.as_ref(), source, None)),
        })
    }
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
        Ok(scan(&self.client, &self.state_table, None)
            .await?
            .iter()
            .filter_map(state_record)
            .collect())
    }
}

impl ReconcileStore for DynamoResources {
    async fn fulfilments(&self) -> Result<Vec<FulfilmentRecord>, PortError> {
        DynamoResources::fulfilments(self).await
    }

    async fn open_invoices(&self) -> Result<Vec<(String, Option<String>)>, PortError> {
        DynamoResources::open_invoices(self).await
    }
}

impl ExceptionStore for DynamoResources {
    async fn invoices_under_review(&self) -> Result<Vec<InvoiceRecord>, PortError> {
        DynamoResources::invoices_under_review(self).await
    }
}

/// The invoice's order and price, set once: the first change that names them records them,
/// later ones never overwrite (the record is the truth every road reads).
fn order_set_once(
    mut update: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    expr: &mut String,
    order: &OrderRef,
) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    if let Some(v) = &order.external_id {
        expr.push_str(", order_id = if_not_exists(order_id, :order_id)");
        update = update.expression_attribute_values(":order_id", s(v));
    }
    if let (Some(amount), Some(currency)) = (&order.amount, &order.currency) {
        expr.push_str(", amount = if_not_exists(amount, :amount), amount_text = if_not_exists(amount_text, :amount_text), currency = if_not_exists(currency, :currency)");
        update = update
            .expression_attribute_values(":amount", n(amount))
            .expression_attribute_values(":amount_text", s(amount.as_str()))
            .expression_attribute_values(":currency", s(currency));
    }
    update
}
