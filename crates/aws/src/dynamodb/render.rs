//! The domain's writes ([`paymos_inbox_core::money::write`]) as DynamoDB requests, mechanically: each
//! field has one attribute name, each value one attribute value, each guard kind one condition
//! form, each set one update clause. Nothing here decides: what to write, under which guard,
//! and what a refusal means are the domain's.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::item::Item;
use paymos_inbox_core::money::invoice::{Refund, RefundMode};
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::money::write::{Field, Fields, Guard, Key, Set, Table, Value, Write};

/// Every field with an attribute name of its own (a merchant's named ones aside).
const FIELDS: [(Field, &str); 71] = [
    (Field::Kind, "kind"),
    (Field::Status, "status"),
    (Field::StatusAt, "status_at"),
    (Field::StatusRank, "status_rank"),
    (Field::OrderId, "order_id"),
    (Field::Amount, "amount"),
    (Field::AmountText, "amount_text"),
    (Field::Currency, "currency"),
    (Field::Held, "held"),
    (Field::DuplicateOf, "duplicate_of"),
    (Field::PaidLateAt, "paid_late_at"),
    (Field::ReleasedAt, "released_at"),
    (Field::ReleasedBy, "released_by"),
    (Field::ReleaseReason, "release_reason"),
    (Field::AmountOverridden, "amount_overridden"),
    (Field::Refunds, "refunds"),
    (Field::RefundedInFullBy, "refunded_in_full_by"),
    (Field::RefundedInFullAt, "refunded_in_full_at"),
    (Field::RefundOfUnknownModeBy, "refund_of_unknown_mode_by"),
    (Field::RefundOfUnknownModeAt, "refund_of_unknown_mode_at"),
    (Field::PaymentAt, "payment_at"),
    (Field::ProjectId, "project_id"),
    (Field::HomeProject, "home_project"),
    (Field::AwaitsOrder, "awaits_order"),
    (Field::AfterRefund, "after_refund"),
    (Field::OtherProject, "other_project"),
    (Field::ProjectsDisagree, "projects_disagree"),
    (Field::OrderDisputed, "order_disputed"),
    (Field::ShippedOtherwise, "shipped_otherwise"),
    (
        Field::ShippedOtherwiseSettledBy,
        "shipped_otherwise_settled_by",
    ),
    (Field::PaymosOrderShippedWith, "paymos_order_shipped_with"),
    (Field::PaymosProjectElsewhere, "paymos_project_elsewhere"),
    (Field::PaymosOrderUnnamed, "paymos_order_unnamed"),
    (Field::AfterRefundReturnedBy, "after_refund_returned_by"),
    (Field::Applied, "applied"),
    (Field::LastEventId, "last_event_id"),
    (Field::UpdatedAt, "updated_at"),
    (Field::InvoiceId, "invoice_id"),
    (Field::WonBy, "won_by"),
    (Field::FulfilledAt, "fulfilled_at"),
    (Field::PaidAt, "paid_at"),
    (Field::Type, "type"),
    (Field::Credited, "credited"),
    (Field::Payer, "payer"),
    (Field::Net, "net"),
    (Field::NetText, "net_text"),
    (Field::CreditedBy, "credited_by"),
    (Field::Balance, "balance"),
    (Field::Reason, "reason"),
    (Field::EventId, "event_id"),
    (Field::Why, "why"),
    (Field::CreatedAt, "created_at"),
    (Field::ResourceId, "resource_id"),
    (Field::State, "state"),
    (Field::Outcome, "outcome"),
    (Field::OutcomeReason, "outcome_reason"),
    (Field::ProcessedAt, "processed_at"),
    (Field::PendingShard, "pending_shard"),
    (Field::BodySha256, "body_sha256"),
    (Field::Waiting, "waiting"),
    (Field::ListedIn, "listed_in"),
    (Field::Actor, "actor"),
    (Field::Count, "count"),
    (Field::CleanUntil, "clean_until"),
    (Field::ReadUntil, "read_until"),
    (Field::WindowFrom, "window_from"),
    (Field::WindowTo, "window_to"),
    (Field::DoneUntil, "done_until"),
    (Field::ForAPerson, "for_a_person"),
    (Field::Found, "found"),
    (Field::Traceparent, crate::trace::TRACEPARENT),
];

/// The attribute a field is stored as.
#[must_use]
pub fn attribute(field: &Field) -> &str {
    if let Field::Named(name) = field {
        return name;
    }
    FIELDS
        .iter()
        .find(|(f, _)| f == field)
        .map(|(_, name)| *name)
        .expect("every field has an attribute name")
}

/// The tables a store writes to.
#[derive(Debug, Clone)]
pub struct Tables {
    /// The state table (hash key `pk`).
    pub state: String,
    /// The deliveries ledger (hash key `event_id`).
    pub ledger: String,
}

impl Tables {
    /// The table and hash key attribute of `key`.
    pub(crate) fn of(&self, key: &Key) -> (&str, &'static str) {
        match key.table {
            Table::State => (&self.state, "pk"),
            Table::Ledger => (&self.ledger, "event_id"),
        }
    }
}

/// A value as DynamoDB stores it.
#[must_use]
pub fn value(v: &Value) -> AttributeValue {
    match v {
        Value::Text(t) => AttributeValue::S(t.clone()),
        Value::Int(n) => AttributeValue::N(n.to_string()),
        Value::Amount(a) => AttributeValue::N(a.as_str().to_owned()),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Texts(set) => AttributeValue::Ss(set.iter().cloned().collect()),
        Value::Refunds(list) => AttributeValue::L(list.iter().map(refund).collect()),
        Value::Counts(counts) => AttributeValue::M(
            counts
                .iter()
                .map(|(name, n)| (name.clone(), AttributeValue::N(n.to_string())))
                .collect(),
        ),
    }
}

/// A refund in an invoice's `refunds` list: its mode and, for readers of older items, `full`.
fn refund(r: &Refund) -> AttributeValue {
    let mut m = HashMap::from([
        (
            "withdrawal_id".to_owned(),
            AttributeValue::S(r.withdrawal_id.clone()),
        ),
        (
            "full".to_owned(),
            AttributeValue::Bool(r.mode == Some(RefundMode::Full)),
        ),
    ]);
    if let Some(mode) = r.mode {
        m.insert("mode".into(), AttributeValue::S(mode.as_str().to_owned()));
    }
    if let Some(a) = &r.amount {
        m.insert("amount".into(), AttributeValue::N(a.as_str().to_owned()));
    }
    if let Some(c) = &r.currency {
        m.insert("currency".into(), AttributeValue::S(c.clone()));
    }
    if let Some(at) = r.completed_at {
        m.insert("completed_at".into(), AttributeValue::N(at.to_string()));
    }
    AttributeValue::M(m)
}

fn refund_of(m: &HashMap<String, AttributeValue>) -> Refund {
    let text = |k: &str| m.get(k).and_then(|v| v.as_s().ok()).cloned();
    Refund {
        withdrawal_id: text("withdrawal_id").unwrap_or_default(),
        amount: m
            .get("amount")
            .and_then(|v| v.as_n().ok())
            .and_then(|a| Amount::parse(a)),
        currency: text("currency"),
        // A refund written before modes were kept says only whether it was full.
        mode: text("mode")
            .as_deref()
            .and_then(RefundMode::parse)
            .or_else(|| {
                (m.get("full") == Some(&AttributeValue::Bool(true))).then_some(RefundMode::Full)
            }),
        // A refund written before times were kept knows none.
        completed_at: m
            .get("completed_at")
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok()),
    }
}

/// An item's fields, as the domain reads them (attributes it does not name are left out).
#[must_use]
pub fn fields_of(item: &Item) -> Fields {
    FIELDS
        .iter()
        .filter_map(|(field, name)| {
            let v = item.get(*name)?;
            let read = match v {
                AttributeValue::S(t) => Value::Text(t.clone()),
                AttributeValue::N(n) => match field {
                    Field::Amount | Field::Net | Field::Balance => Value::Amount(Amount::parse(n)?),
                    _ => Value::Int(n.parse().ok()?),
                },
                AttributeValue::Bool(b) => Value::Bool(*b),
                AttributeValue::Ss(set) => Value::Texts(set.iter().cloned().collect()),
                AttributeValue::L(list) => Value::Refunds(
                    list.iter()
                        .filter_map(|r| r.as_m().ok())
                        .map(refund_of)
                        .collect(),
                ),
                AttributeValue::M(m) => Value::Counts(
                    m.iter()
                        .filter_map(|(name, n)| Some((name.clone(), n.as_n().ok()?.parse().ok()?)))
                        .collect(),
                ),
                _ => return None,
            };
            Some((field.clone(), read))
        })
        .collect()
}

/// A write's item as its sets leave an empty item: a whole item to put (a registered order,
/// a test's fixture).
#[must_use]
pub fn item_of(write: &Write) -> Item {
    let key = match write.key.table {
        Table::State => "pk",
        Table::Ledger => "event_id",
    };
    let mut item = Item::from([(key.to_owned(), AttributeValue::S(write.key.id.clone()))]);
    for set in &write.set {
        if let Set::Put(f, v) | Set::Once(f, v) | Set::Add(f, v) = set
            && !no_counts(v)
        {
            item.insert(attribute(f).to_owned(), value(v));
        }
    }
    item
}

/// Whether `v` counts nothing: stored as no attribute, which reads back as no counts. DynamoDB
/// Local's stream renders an empty map as `{}`, which the Streams API's readers cannot take
/// (`dev`'s hand-off stopped at the first reconciliation that found nothing), and an empty
/// map says nothing an absent one does not.
fn no_counts(v: &Value) -> bool {
    matches!(v, Value::Counts(counts) if counts.is_empty())
}

/// Names and values of one expression, each field and value given a placeholder once.
#[derive(Default)]
struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expr {
    fn name(&mut self, attribute: &str) -> String {
        // The same attribute keeps one placeholder (DynamoDB refuses an unused one).
        if let Some((p, _)) = self.names.iter().find(|(_, a)| *a == attribute) {
            return p.clone();
        }
        let p = format!("#a{}", self.names.len());
        self.names.insert(p.clone(), attribute.to_owned());
        p
    }

    fn field(&mut self, f: &Field) -> String {
        self.name(attribute(f))
    }

    fn value(&mut self, v: AttributeValue) -> String {
        let p = format!(":v{}", self.values.len());
        self.values.insert(p.clone(), v);
        p
    }

    /// The condition of `guard` on an item whose hash key is `key` (`None`: no condition).
    fn guard(&mut self, guard: &Guard, key: &str) -> Option<String> {
        self.part(guard, key).map(|(c, _)| c)
    }

    /// A condition, and the operator that joins it when it is a compound (`AND`, `OR`), so a
    /// parent parenthesises only what needs it (DynamoDB refuses redundant parentheses).
    fn part(&mut self, guard: &Guard, key: &str) -> Option<(String, Option<&'static str>)> {
        let simple = |c: String| Some((c, None));
        match guard {
            Guard::Always => None,
            Guard::Never => {
                let k = self.name(key);
                Some((
                    format!("attribute_exists({k}) AND attribute_not_exists({k})"),
                    Some("AND"),
                ))
            }
            Guard::Absent => simple(format!("attribute_not_exists({})", self.name(key))),
            Guard::Lacks(f) => simple(format!("attribute_not_exists({})", self.field(f))),
            Guard::Has(f) => simple(format!("attribute_exists({})", self.field(f))),
            Guard::Is(f, v) => simple(format!("{} = {}", self.field(f), self.value(value(v)))),
            Guard::In(f, vs) => {
                let f = self.field(f);
                let vs: Vec<String> = vs.iter().map(|v| self.value(value(v))).collect();
                simple(format!("{f} IN ({})", vs.join(", ")))
            }
            Guard::Below(f, v) => simple(format!("{} < {}", self.field(f), self.value(value(v)))),
            Guard::AtMost(f, v) => simple(format!("{} <= {}", self.field(f), self.value(value(v)))),
            Guard::Count(f, n) => {
                let f = self.field(f);
                simple(format!(
                    "size({f}) = {}",
                    self.value(AttributeValue::N(n.to_string()))
                ))
            }
            Guard::Not(g) => match self.part(g, key) {
                Some((c, None)) => simple(format!("NOT {c}")),
                Some((c, Some(_))) => simple(format!("NOT ({c})")),
                None => self.part(&Guard::Never, key),
            },
            Guard::All(gs) => self.join(gs, key, "AND"),
            Guard::Any(gs) if gs.contains(&Guard::Always) => None,
            Guard::Any(gs) => self.join(gs, key, "OR"),
        }
    }

    fn join(
        &mut self,
        gs: &[Guard],
        key: &str,
        op: &'static str,
    ) -> Option<(String, Option<&'static str>)> {
        let parts: Vec<(String, Option<&str>)> =
            gs.iter().filter_map(|g| self.part(g, key)).collect();
        if parts.len() < 2 {
            return parts.into_iter().next();
        }
        let parts: Vec<String> = parts
            .into_iter()
            .map(|(c, inner)| match inner {
                Some(inner) if inner != op => format!("({c})"),
                _ => c,
            })
            .collect();
        Some((parts.join(&format!(" {op} ")), Some(op)))
    }

    /// The update expression of `sets`.
    fn update(&mut self, sets: &[Set]) -> String {
        let (mut set, mut add, mut remove) = (Vec::new(), Vec::new(), Vec::new());
        for s in sets {
            match s {
                Set::Put(f, v) if no_counts(v) => remove.push(self.field(f)),
                Set::Put(f, v) => set.push(format!("{} = {}", self.field(f), self.value(value(v)))),
                Set::Once(f, v) => {
                    let f = self.field(f);
                    let v = self.value(value(v));
                    set.push(format!("{f} = if_not_exists({f}, {v})"));
                }
                Set::Append(f, r) => {
                    let f = self.field(f);
                    let none = self.value(AttributeValue::L(Vec::new()));
                    let v = self.value(AttributeValue::L(vec![refund(r)]));
                    set.push(format!(
                        "{f} = list_append(if_not_exists({f}, {none}), {v})"
                    ));
                }
                Set::Add(f, v) => add.push(format!("{} {}", self.field(f), self.value(value(v)))),
                Set::Remove(f) => remove.push(self.field(f)),
            }
        }
        let mut expr = Vec::new();
        for (verb, clauses) in [("SET", set), ("ADD", add), ("REMOVE", remove)] {
            if !clauses.is_empty() {
                expr.push(format!("{verb} {}", clauses.join(", ")));
            }
        }
        expr.join(" ")
    }
}

/// A write as one conditional update (a condition check when it sets nothing).
#[must_use]
pub fn transact_item(tables: &Tables, write: &Write) -> TransactWriteItem {
    let (table, key) = tables.of(&write.key);
    let mut expr = Expr::default();
    let condition = expr.guard(&write.guard, key);
    let key_value = AttributeValue::S(write.key.id.clone());
    if write.set.is_empty() {
        let check = ConditionCheck::builder()
            .table_name(table)
            .key(key, key_value)
            // The domain checks only under a guard (an empty one is refused by DynamoDB).
            .condition_expression(condition.unwrap_or_default())
            .set_expression_attribute_names(given(expr.names))
            .set_expression_attribute_values(given(expr.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("a condition check is complete");
        return TransactWriteItem::builder().condition_check(check).build();
    }
    TransactWriteItem::builder()
        .update(update(tables, write))
        .build()
}

/// A write that sets something, as an update.
#[must_use]
pub fn update(tables: &Tables, write: &Write) -> Update {
    let (table, key) = tables.of(&write.key);
    let mut expr = Expr::default();
    let condition = expr.guard(&write.guard, key);
    let update_expression = expr.update(&write.set);
    Update::builder()
        .table_name(table)
        .key(key, AttributeValue::S(write.key.id.clone()))
        .update_expression(update_expression)
        .set_condition_expression(condition)
        .set_expression_attribute_names(given(expr.names))
        .set_expression_attribute_values(given(expr.values))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .expect("an update is complete")
}

/// Placeholders to send, if any: DynamoDB refuses an empty map.
fn given<V>(map: HashMap<String, V>) -> Option<HashMap<String, V>> {
    (!map.is_empty()).then_some(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use paymos_inbox_core::money::status::InvoiceStatus;
    use paymos_inbox_core::money::write::{self, What};

    fn tables() -> Tables {
        Tables {
            state: "state".into(),
            ledger: "ledger".into(),
        }
    }

    #[test]
    fn each_guard_kind_renders_as_its_condition_form() {
        let mut e = Expr::default();
        let rendered = e.guard(&write::transition(InvoiceStatus::Confirming, 7), "pk");
        assert_eq!(
            rendered.as_deref(),
            Some(
                "(attribute_not_exists(#a0) OR attribute_exists(#a1) OR attribute_exists(#a2)) AND (attribute_not_exists(#a3) OR (#a3 IN (:v0, :v1, :v2, :v3) AND (#a4 < :v4 OR (#a4 = :v5 AND #a5 < :v6))))"
            )
        );
        assert_eq!(e.names["#a0"], "other_project");
        assert_eq!(e.names["#a1"], "project_id");
        assert_eq!(e.names["#a3"], "status");
        assert_eq!(e.values[":v4"], AttributeValue::N("7".into()));
        let mut e = Expr::default();
        assert_eq!(e.guard(&Guard::Always, "pk"), None);
        assert_eq!(
            e.guard(&Guard::Never, "pk").as_deref(),
            Some("attribute_exists(#a0) AND attribute_not_exists(#a0)")
        );
        let mut e = Expr::default();
        assert_eq!(
            e.guard(&Guard::Not(Box::new(Guard::Count(Field::Refunds, 2))), "pk")
                .as_deref(),
            Some("NOT size(#a0) = :v0")
        );
        let mut e = Expr::default();
        assert_eq!(
            e.guard(&Guard::AtMost(Field::StatusAt, Value::Int(1)), "pk")
                .as_deref(),
            Some("#a0 <= :v0")
        );
    }

    #[test]
    fn sets_render_as_set_add_and_remove_clauses() {
        let mut e = Expr::default();
        let expr = e.update(&[
            Set::Put(Field::Status, Value::text("paid")),
            Set::Once(Field::OrderId, Value::text("o-1")),
            Set::Add(Field::Applied, Value::Texts(["evt_1".to_owned()].into())),
            Set::Remove(Field::Held),
        ]);
        assert_eq!(
            expr,
            "SET #a0 = :v0, #a1 = if_not_exists(#a1, :v1) ADD #a2 :v2 REMOVE #a3"
        );
    }

    #[test]
    fn a_write_reads_back_as_the_fields_it_set() {
        let refund = Refund {
            withdrawal_id: "wdr_1".into(),
            amount: Amount::parse("10.5"),
            currency: Some("USDT".into()),
            mode: Some(RefundMode::Full),
            completed_at: Some(20),
        };
        let note = write::refund_note("inv_1", &refund, false, 3);
        assert_eq!(note.what, What::RefundNote);
        let mut item = item_of(&note);
        item.insert(
            "refunds".into(),
            value(&Value::Refunds(vec![refund.clone()])),
        );
        let fields = fields_of(&item);
        assert_eq!(fields[&Field::Refunds], Value::Refunds(vec![refund]));
        assert_eq!(fields[&Field::RefundedInFullBy], Value::text("wdr_1"));
        assert_eq!(fields[&Field::RefundedInFullAt], Value::Int(20));
        assert_eq!(fields[&Field::UpdatedAt], Value::Int(3));
        // Every field's name is its own.
        let mut names: Vec<&str> = FIELDS.iter().map(|(_, n)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FIELDS.len());
    }

    #[test]
    fn each_value_has_its_attribute_type_and_reads_back_by_its_field() {
        let texts = Value::Texts(["a".to_owned(), "b".to_owned()].into());
        assert_eq!(value(&Value::text("x")), AttributeValue::S("x".into()));
        assert_eq!(value(&Value::Int(7)), AttributeValue::N("7".into()));
        let ten = Amount::parse("10.50").unwrap();
        assert_eq!(
            value(&Value::Amount(ten.clone())),
            AttributeValue::N("10.50".into())
        );
        assert_eq!(value(&Value::Bool(true)), AttributeValue::Bool(true));
        assert_eq!(
            value(&texts),
            AttributeValue::Ss(vec!["a".into(), "b".into()])
        );
        let item = Item::from([
            ("status".to_owned(), AttributeValue::S("paid".into())),
            ("status_at".to_owned(), AttributeValue::N("9".into())),
            ("amount".to_owned(), AttributeValue::N("10.5".into())),
            ("net".to_owned(), AttributeValue::N("2".into())),
            ("balance".to_owned(), AttributeValue::N("-1.25".into())),
            ("held".to_owned(), AttributeValue::Bool(true)),
            ("applied".to_owned(), value(&texts)),
            ("unnamed".to_owned(), AttributeValue::S("x".into())),
            ("paid_at".to_owned(), AttributeValue::Null(true)),
        ]);
        let fields = fields_of(&item);
        assert_eq!(fields[&Field::Status], Value::text("paid"));
        assert_eq!(fields[&Field::StatusAt], Value::Int(9));
        assert_eq!(
            fields[&Field::Amount],
            Value::Amount(Amount::parse("10.5").unwrap())
        );
        assert_eq!(
            fields[&Field::Net],
            Value::Amount(Amount::parse("2").unwrap())
        );
        assert_eq!(
            fields[&Field::Balance],
            Value::Amount(Amount::parse("-1.25").unwrap())
        );
        assert_eq!(fields[&Field::Held], Value::Bool(true));
        assert_eq!(fields[&Field::Applied], texts);
        assert_eq!(
            fields.len(),
            7,
            "unnamed attributes and other types are left out"
        );
    }

    #[test]
    fn a_refund_written_before_modes_were_kept_reads_as_full_only_when_it_said_so() {
        let old = |full: bool| {
            AttributeValue::M(HashMap::from([
                (
                    "withdrawal_id".to_owned(),
                    AttributeValue::S("wdr_1".into()),
                ),
                ("full".to_owned(), AttributeValue::Bool(full)),
                ("amount".to_owned(), AttributeValue::N("5".into())),
                ("currency".to_owned(), AttributeValue::S("USDT".into())),
            ]))
        };
        let item = Item::from([(
            "refunds".to_owned(),
            AttributeValue::L(vec![old(true), old(false)]),
        )]);
        let Value::Refunds(read) = &fields_of(&item)[&Field::Refunds] else {
            panic!("a list of refunds")
        };
        assert_eq!(read[0].mode, Some(RefundMode::Full));
        assert_eq!(read[1].mode, None);
        assert_eq!(read[0].amount, Amount::parse("5"));
        assert_eq!(read[0].currency.as_deref(), Some("USDT"));
        let overpayment = Refund {
            withdrawal_id: "wdr_2".into(),
            amount: None,
            currency: None,
            mode: Some(RefundMode::Overpayment),
            completed_at: None,
        };
        let AttributeValue::M(m) = refund(&overpayment) else {
            panic!("a map")
        };
        assert_eq!(m["full"], AttributeValue::Bool(false));
        assert_eq!(m["mode"], AttributeValue::S("overpayment".into()));
        assert_eq!(refund_of(&m), overpayment);
    }

    #[test]
    fn a_write_goes_to_its_table_as_an_update_or_a_check() {
        let refund = Refund {
            withdrawal_id: "wdr_1".into(),
            amount: None,
            currency: None,
            mode: None,
            completed_at: None,
        };
        let mut e = Expr::default();
        assert_eq!(
            e.update(&[Set::Append(Field::Refunds, refund.clone())]),
            "SET #a0 = list_append(if_not_exists(#a0, :v0), :v1)"
        );
        assert_eq!(e.values[":v0"], AttributeValue::L(Vec::new()));
        let mark = write::processed(
            "test#evt_1",
            paymos_inbox_core::money::change::Applied::Held,
            None,
            1,
        );
        let item = transact_item(&tables(), &mark);
        let update = item.update().expect("an update");
        assert_eq!(update.table_name(), "ledger");
        assert_eq!(
            update.key()["event_id"],
            AttributeValue::S("test#evt_1".into())
        );
        assert_eq!(
            update.condition_expression(),
            Some("attribute_not_exists(#a0) OR NOT #a0 = :v0")
        );
        let order = paymos_inbox_core::money::change::OrderRef {
            external_id: Some("o-1".into()),
            amount: Amount::parse("10"),
            currency: Some("USD".into()),
            project: None,
            home: false,
            unlisted: false,
        };
        let guard = write::amount_guard(&order).unwrap();
        let item = transact_item(&tables(), &guard);
        let check = item.condition_check().expect("a check only");
        assert_eq!(check.table_name(), "state");
        assert_eq!(check.key()["pk"], AttributeValue::S("order#o-1".into()));
        assert_eq!(
            check.condition_expression(),
            "attribute_not_exists(#a0) OR (#a1 = :v0 AND #a2 = :v1)"
        );
        assert_eq!(
            check.expression_attribute_names().unwrap()["#a0"],
            "pk",
            "absent is the key's absence"
        );
        let note = write::refund_note("inv_1", &refund, false, 3);
        let update = super::update(&tables(), &note);
        assert_eq!(update.condition_expression(), None, "a note has no guard");
        assert_eq!(
            item_of(&note)["pk"],
            AttributeValue::S("inv_1".into()),
            "a whole item carries its key"
        );
        assert_eq!(
            item_of(&mark)["event_id"],
            AttributeValue::S("test#evt_1".into())
        );
    }

    #[test]
    fn a_group_of_one_is_that_one_and_a_group_of_none_is_no_condition() {
        let mut e = Expr::default();
        assert_eq!(e.guard(&Guard::All(Vec::new()), "pk"), None);
        assert_eq!(
            e.guard(&Guard::Any(vec![Guard::All(vec![Guard::Always])]), "pk"),
            None
        );
        let mut e = Expr::default();
        assert_eq!(
            e.guard(
                &Guard::Any(vec![
                    Guard::All(vec![Guard::Has(Field::Held)]),
                    Guard::Lacks(Field::Status),
                ]),
                "pk"
            )
            .as_deref(),
            Some("attribute_exists(#a0) OR attribute_not_exists(#a1)"),
            "a group of one is not parenthesised"
        );
        assert_eq!(
            given(HashMap::<String, u8>::new()),
            None,
            "no empty map is sent"
        );
        assert_eq!(
            given(HashMap::from([("#a0".to_owned(), 1)])).map(|m| m.len()),
            Some(1)
        );
        let removal = Write {
            what: paymos_inbox_core::money::write::What::Release,
            key: Key::state("inv_1"),
            guard: Guard::Always,
            set: vec![Set::Remove(Field::Held)],
        };
        let u = update(&tables(), &removal);
        assert_eq!(
            u.expression_attribute_values(),
            None,
            "a removal has no values"
        );
        assert_eq!(u.update_expression(), "REMOVE #a0");
    }

    #[test]
    fn an_always_or_a_never_renders_as_no_condition_or_an_impossible_one() {
        let mut e = Expr::default();
        assert_eq!(
            e.guard(
                &Guard::Any(vec![Guard::Has(Field::Held), Guard::Always]),
                "pk"
            ),
            None
        );
        assert_eq!(
            e.guard(&Guard::Not(Box::new(Guard::Always)), "pk")
                .as_deref(),
            Some("attribute_exists(#a0) AND attribute_not_exists(#a0)")
        );
        let mut e = Expr::default();
        assert_eq!(
            e.guard(
                &Guard::All(vec![
                    Guard::Always,
                    Guard::Not(Box::new(Guard::All(vec![
                        Guard::Has(Field::Held),
                        Guard::Lacks(Field::ReleasedAt)
                    ])))
                ]),
                "pk"
            )
            .as_deref(),
            Some("NOT (attribute_exists(#a0) AND attribute_not_exists(#a1))"),
            "one part alone is not parenthesised"
        );
        let mut e = Expr::default();
        assert_eq!(
            e.guard(
                &Guard::Any(vec![
                    Guard::Any(vec![Guard::Absent, Guard::Has(Field::Held)]),
                    Guard::In(Field::Status, vec![Value::text("a"), Value::text("b")]),
                ]),
                "pk"
            )
            .as_deref(),
            Some("attribute_not_exists(#a0) OR attribute_exists(#a1) OR #a2 IN (:v0, :v1)"),
            "the same operator is not parenthesised"
        );
        assert_eq!(e.names.len(), 3);
        assert_eq!(e.name("held"), "#a1", "one placeholder per attribute");
    }
}
