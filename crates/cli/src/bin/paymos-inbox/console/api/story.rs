//! A payment's story from an id: an invoice, a withdrawal or deposit, an order or a delivery,
//! from the reads that exist, with what of it waits; a kept body shown with its personal text
//! redacted.

use hyper::StatusCode;
use paymos_inbox_aws::dynamodb::{KeptBody, LedgerEntry, OrderOnRecord};
use paymos_inbox_core::money::change::DELIVERY_OUTCOMES;
use paymos_inbox_core::money::invoice::Standing;
use paymos_inbox_core::money::record::StateRecord;
use paymos_inbox_core::roads::exceptions::ReviewLedger as _;
use paymos_inbox_core::roads::ingest::Delivery;
use paymos_inbox_core::roads::release::ReleaseStore as _;
use paymos_inbox_core::wire::signature::Environment;
use paymos_inbox_core::wire::work::{delivery_key, event_id_of_key};
use paymos_inbox_lambda::now_ms;
use serde_json::{Value, json};

use crate::exit::Failure;

use super::home::item;
use super::{Answered, Console};

/// What a story cannot show of the hand-off.
const HANDOFF_ATTEMPTS: &str = "the hand-off's attempts to post each fact: they are messages of the deliver function's queue, and only those it parked are kept (the home page lists them)";

impl Console {
    /// One payment's story from an id: `inv_…`, `evt_…`, `wdr_…`, `pcd_…`, or an order id,
    /// read in `project` where one is named (an order id means something only within its
    /// project).
    pub async fn search(&self, id: &str, project: Option<&str>) -> Answered {
        if id.is_empty() || id.len() > 200 {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                "an id: inv_…, evt_…, wdr_…, pcd_… or an order id",
            );
        }
        if let Some(p) = project
            && let Err(why) = crate::exit::id(p)
        {
            return Answered::refused(StatusCode::BAD_REQUEST, format!("project {why}"));
        }
        let story = if id.starts_with("evt_") {
            self.event(id).await
        } else if id.starts_with("inv_") {
            self.invoice(id).await
        } else if id.starts_with("wdr_") || id.starts_with("pcd_") {
            self.movement(id).await
        } else {
            self.order(id, project).await
        };
        match story {
            Ok(story) => Answered::ok(story),
            Err(f) => Answered::failed(&f),
        }
    }

    /// An invoice: its record (status, standing, order, refunds), its fulfilment, what of it
    /// waits, and the deliveries of it that wait.
    async fn invoice(&self, invoice_id: &str) -> Result<Value, Failure> {
        let (seen, fulfilled) = self
            .state
            .invoice_seen(invoice_id)
            .await
            .map_err(Failure::from)?;
        let deliveries = self.waiting_of(invoice_id).await?;
        let mut timeline = self.steps(invoice_id).await?;
        let waits = crate::exceptions::waiting(&self.stack, &self.state, &self.ledger)
            .await?
            .into_iter()
            .filter(|e| e.resource_id.as_deref() == Some(invoice_id))
            .map(|e| item(&e, now_ms()))
            .collect::<Vec<_>>();
        if let Some(s) = &seen {
            timeline.extend(s.refunds.iter().map(|r| {
                json!({
                    "at_ms": r.completed_at.map(|t| t * 1000),
                    "what": format!(
                        "refunded {} {} ({}) by {}",
                        r.amount.as_ref().map_or_else(|| "?".to_owned(), ToString::to_string),
                        r.currency.as_deref().unwrap_or_default(),
                        r.mode.map_or("mode unknown", |m| m.as_str()),
                        r.withdrawal_id,
                    ),
                })
            }));
            timeline.sort_by_key(|t| t["at_ms"].as_u64());
        }
        let record = seen.map(|s| {
            json!({
                "status": s.status.map(|st| st.to_string()),
                "standing": standing(&s.standing()),
                "held": s.held,
                "paid_late": s.paid_late,
                "duplicate_of": s.duplicate_of,
                "released": s.released,
                "awaits_order": s.awaits_order,
                "payment_at_ms": s.payment_at.map(|t| t * 1000),
                "order": {
                    "id": s.order.external_id,
                    "amount": s.order.amount.map(|a| a.to_string()),
                    "currency": s.order.currency,
                    // The record's project, the home project's by its id.
                    "project": s.order.project.clone().or_else(|| s
                        .order
                        .home
                        .then(|| self.stack.projects.ids().first().cloned())
                        .flatten()),
                },
                "refunds": s.refunds.iter().map(|r| json!({
                    "id": r.withdrawal_id,
                    "amount": r.amount.as_ref().map(ToString::to_string),
                    "currency": r.currency,
                    "mode": r.mode.map(|m| m.as_str()),
                    "completed_at_ms": r.completed_at.map(|t| t * 1000),
                })).collect::<Vec<_>>(),
            })
        });
        Ok(json!({
            "id": invoice_id,
            "kind": "invoice",
            "invoice": record,
            "fulfilled": fulfilled,
            "timeline": timeline,
            "facts": self.facts(invoice_id).await?,
            "waits": waits,
            "deliveries": deliveries,
            "not_read": [
                "the deliveries of it that changed nothing (a copy, a late event) and no longer wait: the ledger lists by resource only what waits",
                HANDOFF_ATTEMPTS,
            ],
        }))
    }

    /// A withdrawal or a deposit: its record (one `GetItem` by its id) and the deliveries of it
    /// that wait.
    async fn movement(&self, id: &str) -> Result<Value, Failure> {
        let kind = if id.starts_with("wdr_") {
            "withdrawal"
        } else {
            "deposit"
        };
        let record = self.state.record(id).await.map_err(Failure::from)?;
        Ok(json!({
            "id": id,
            "kind": kind,
            "record": record.as_ref().map(movement),
            "timeline": self.steps(id).await?,
            "facts": self.facts(id).await?,
            "deliveries": self.waiting_of(id).await?,
            "not_read": [
                "the deliveries of it that changed nothing (a copy, a late event) and no longer wait: the ledger lists by resource only what waits",
                HANDOFF_ATTEMPTS,
            ],
        }))
    }

    /// An order id, in the project named or each project the stack lists (an order id is the
    /// merchant's, so one id may name an order in each): its claim (which invoice fulfilled it,
    /// and when) and the registered order's amount guard, two `GetItem`s a project; and the
    /// deliveries that wait of each invoice that claimed it. A stack that lists no projects
    /// keys each project's orders apart, so it is read in the project named; without one, only
    /// its claims of before projects (`order_paid#<id>`), and the answer asks for the project.
    async fn order(&self, order_id: &str, named: Option<&str>) -> Result<Value, Failure> {
        let projects = &self.stack.projects;
        let unlisted = projects.ids().is_empty();
        if named.is_some() {
            self.stack.scope_of(named)?;
        }
        let read: Vec<Option<&str>> = match named {
            Some(p) => vec![Some(p)],
            None if unlisted => vec![None],
            None => projects.ids().iter().map(|p| Some(p.as_str())).collect(),
        };
        // Its invoices whose payment waits for a person (held, paid twice, paid late): the
        // `review` list, the read `exceptions` makes.
        let under_review = self
            .state
            .invoices_under_review()
            .await
            .map_err(Failure::from)?;
        let mut orders = Vec::new();
        let mut deliveries = Vec::new();
        let mut waiting = Vec::new();
        for project in read {
            let scope = projects.scope(project);
            // Read without a project, a stack of every project lists them from every project:
            // each names its own, the project to ask the order in.
            let every = unlisted && project.is_none();
            waiting.extend(
                under_review
                    .iter()
                    .filter(|r| {
                        r.seen.order.external_id.as_deref() == Some(order_id)
                            && (every || projects.scope(r.seen.order.project.as_deref()) == scope)
                    })
                    .map(|r| {
                        json!({
                            "invoice_id": r.invoice_id,
                            "standing": standing(&r.seen.standing()),
                            "project": project.or(r.seen.order.project.as_deref()),
                        })
                    }),
            );
            let mut on_record = self
                .state
                .order_on_record(scope.as_deref(), order_id)
                .await
                .map_err(Failure::from)?;
            // An order shipped before this stack kept projects apart is claimed under its id
            // alone, and ships no second time in any project
            // (`paymos_inbox_core::money::write::claimed_before_projects`).
            let mut before_projects = unlisted && scope.is_none();
            if unlisted && scope.is_some() && on_record.claim.is_none() {
                on_record.claim = self
                    .state
                    .order_on_record(None, order_id)
                    .await
                    .map_err(Failure::from)?
                    .claim;
                before_projects = on_record.claim.is_some();
            }
            if let Some(claim) = &on_record.claim {
                deliveries.extend(self.waiting_of(&claim.invoice_id).await?);
            }
            orders.push(order(project, &on_record, before_projects));
        }
        let project_needed = (unlisted && named.is_none()).then(|| {
            format!(
                "this stack applies {} and keeps each project's orders apart: name the order's project to read its claim (only claims of before projects were read)",
                projects.listed()
            )
        });
        Ok(json!({
            "id": order_id,
            "kind": "order",
            "project_needed": project_needed,
            "orders": orders,
            "waiting_invoices": waiting,
            "deliveries": deliveries,
            "not_read": [
                "its invoices that did not fulfil it and wait for no one (unpaid, expired, refunded): the state table is read by order id only through its claim and the review list",
            ],
        }))
    }

    /// A delivery: its state and outcome in the ledger (live and sandbox keys), its body as
    /// kept (redacted), and the story of the invoice it names.
    async fn event(&self, event_id: &str) -> Result<Value, Failure> {
        let mut found = Vec::new();
        for environment in [Environment::Live, Environment::Test] {
            let key = delivery_key(Some(environment), event_id);
            let Some(entry) = self.ledger.entry(&key).await.map_err(Failure::from)? else {
                continue;
            };
            let body = match self
                .ledger
                .kept_body(&key, now_ms() / 1000)
                .await
                .map_err(Failure::from)?
            {
                KeptBody::Kept(bytes) => serde_json::from_slice::<Value>(&bytes).map_or_else(
                    |_| json!("[not JSON: `exceptions --body` prints it]"),
                    |v| redact(&v, ""),
                ),
                KeptBody::Expired { .. } => json!("[expired: only its record is kept]"),
                KeptBody::NoRecord => Value::Null,
            };
            let resource = body
                .pointer("/data/invoice_id")
                .or_else(|| body.pointer("/data/withdrawal_id"))
                .or_else(|| body.pointer("/data/id"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            let mut found_one = delivered(&entry);
            found_one["environment"] = json!(environment_name(environment));
            found_one["state"] = json!(format!("{:?}", entry.recorded.state).to_lowercase());
            found_one["resource_id"] = json!(resource);
            found_one["body"] = body;
            found.push(found_one);
        }
        let invoice = match found
            .iter()
            .find_map(|d| d["resource_id"].as_str().filter(|r| r.starts_with("inv_")))
        {
            Some(inv) => Some(Box::pin(self.invoice(inv)).await?),
            None => None,
        };
        Ok(json!({
            "id": event_id,
            "kind": "event",
            "deliveries_of_id": found,
            "invoice": invoice,
        }))
    }

    /// Each status `id` reached, when (Paymos' clock), and what moved it there: a delivery as
    /// the ledger recorded it, or a person's road (`manual:…`). One `GetItem` for the story,
    /// one a delivery.
    async fn steps(&self, id: &str) -> Result<Vec<Value>, Failure> {
        let story = self.state.story(id).await.map_err(Failure::from)?;
        let mut out = Vec::with_capacity(story.len());
        for step in story {
            let delivery = if step.by.starts_with("manual:") {
                None
            } else {
                self.ledger.entry(&step.by).await.map_err(Failure::from)?
            };
            out.push(json!({
                "at_ms": step.at * 1000,
                "what": format!("reached {}", step.status),
                "status": step.status,
                "by": event_id_of_key(&step.by),
                "delivery": delivery.as_ref().map(delivered),
            }));
        }
        Ok(out)
    }

    /// The facts the hand-off published of `id`, as its records stand for them now (what
    /// `events resend --resource` would publish again, with the same idempotency keys), in
    /// the order they were committed; none when it has no record.
    async fn facts(&self, id: &str) -> Result<Vec<Value>, Failure> {
        let Ok(environment) = crate::handoff::environment_of(&self.stack, None) else {
            return Ok(Vec::new());
        };
        let facts = match crate::handoff::read_resource(&self.stack, id, environment).await {
            Ok(facts) => facts,
            Err(f) if f.kind == crate::exit::Kind::Usage => Vec::new(),
            Err(f) => return Err(f),
        };
        Ok(facts
            .into_iter()
            .map(|(at_ms, e)| {
                json!({
                    "committed_at_ms": at_ms,
                    "detail_type": e.detail_type,
                    "idempotency_key": e.idempotency_key,
                })
            })
            .collect())
    }

    /// The deliveries of a resource that wait for a person (the `waiting` index).
    async fn waiting_of(&self, resource_id: &str) -> Result<Vec<Value>, Failure> {
        let records = self
            .ledger
            .with_outcomes(&DELIVERY_OUTCOMES, Some(resource_id))
            .await
            .map_err(Failure::from)?;
        Ok(records
            .iter()
            .map(|r| {
                delivery(
                    &r.delivery,
                    Some(r.processed_at_ms),
                    Some(r.outcome.as_str()),
                    r.reason.as_deref(),
                )
            })
            .collect())
    }
}

/// Where a paid invoice stands, in the page's words.
fn standing(standing: &Standing) -> String {
    match standing {
        Standing::Clear => "clear: nothing waits".to_owned(),
        Standing::Held => "held: paid, but not as the registered order says".to_owned(),
        Standing::DuplicateOf(winner) => format!("a second payment: {winner} fulfilled its order"),
        Standing::PaidLate => "its payment arrived after the invoice closed".to_owned(),
        Standing::Released => "released by a person".to_owned(),
        Standing::Refunded => "refunded in full".to_owned(),
        Standing::OrderUnknown => "paid, its order known nowhere".to_owned(),
        Standing::AfterRefund => "paid after a full refund? a person decides".to_owned(),
        Standing::ShippedOtherwise(paymos) => {
            format!("shipped, but Paymos' invoice is of {paymos}: a person settles it")
        }
    }
}

/// A delivery's record for a story: what it was, where from, and how it ended.
fn delivered(entry: &LedgerEntry) -> Value {
    delivery(
        &entry.recorded.delivery,
        entry.processed_at_ms,
        entry.outcome.as_deref(),
        entry.reason.as_deref(),
    )
}

/// A delivery as every story shows it: what it was, where from, and how it ended.
fn delivery(
    d: &Delivery,
    processed_at_ms: Option<u64>,
    outcome: Option<&str>,
    reason: Option<&str>,
) -> Value {
    json!({
        "event_id": d.event_id,
        "event_type": d.event_type,
        "environment": d.environment.map(environment_name),
        "secret_label": d.secret_label,
        "received_at_ms": d.received_at_ms,
        "processed_at_ms": processed_at_ms,
        "outcome": outcome,
        "reason": reason,
    })
}

/// An environment as the console names it.
fn environment_name(environment: Environment) -> &'static str {
    if environment.is_test() {
        "sandbox"
    } else {
        "live"
    }
}

/// A withdrawal's or a deposit's record for its story: its status, amounts and last change
/// (any other kind of item under its id is said to be one).
fn movement(record: &StateRecord) -> Value {
    let text = |a: Option<&paymos_inbox_core::money::status::Amount>| a.map(ToString::to_string);
    match record {
        StateRecord::Withdrawal(w) => json!({
            "status": w.status.map(|s| s.as_str()),
            "type": w.kind,
            "invoice_id": w.invoice_id,
            "amount": text(w.amount.as_ref()),
            "currency": w.currency,
            "updated_at_ms": w.updated_at_ms,
        }),
        StateRecord::Deposit(d) => json!({
            "status": d.status.map(|s| s.as_str()),
            "credited": d.credited,
            "payer": d.payer,
            "net": text(d.net.as_ref()),
            "currency": d.currency,
            "project": d.project,
            "updated_at_ms": d.updated_at_ms,
        }),
        _ => json!({"unexpected": "the item under this id is not a withdrawal or a deposit"}),
    }
}

/// One project's order for its story: which invoice claimed it (by whose write, when, and
/// whether before the stack kept projects apart), and the amount and currency it was
/// registered for.
fn order(project: Option<&str>, on_record: &OrderOnRecord, before_projects: bool) -> Value {
    json!({
        "project": project,
        "before_projects": before_projects,
        "claim": on_record.claim.as_ref().map(|c| json!({
            "invoice_id": c.invoice_id,
            "won_by": c.won_by,
            "paid_at_ms": c.paid_at_ms,
            "before_projects": before_projects,
        })),
        "registered": on_record.registered.as_ref().map(|r| json!({
            "amount": r.amount.as_ref().map(ToString::to_string),
            "currency": r.currency,
        })),
    })
}

/// Fields of a body shown as they are: ids, types, statuses, amounts, flags and times. Every
/// other text (names, e-mails, addresses, notes, URLs) is shown as `[redacted]`.
const SHOWN: [&str; 25] = [
    "event_id",
    "event_type",
    "type",
    "version",
    "id",
    "invoice_id",
    "withdrawal_id",
    "payment_channel_id",
    "external_id",
    "project_id",
    "status",
    "amount",
    "currency",
    "network",
    "expected",
    "received",
    "paid",
    "gross",
    "fee",
    "net",
    "is_test",
    "is_final",
    "kind",
    "mode",
    "reason",
];

/// `value` with every string outside [`SHOWN`] (and every time-like field, `*_at`) replaced.
fn redact(value: &Value, key: &str) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), redact(v, k))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, key)).collect()),
        Value::String(_) if SHOWN.contains(&key) || key.ends_with("_at") => value.clone(),
        Value::String(_) => json!("[redacted]"),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_body_shows_ids_and_amounts_and_hides_personal_text() {
        let body = json!({"event_id": "evt_1", "type": "invoice.paid", "created_at": "2026-01-01T00:00:00Z",
            "data": {"invoice_id": "inv_1", "status": "paid", "is_test": true,
                     "customer": {"email": "ann@example.com", "name": "Ann"},
                     "order": {"external_id": "order-7", "amount": "12.00", "currency": "USD",
                               "description": "Blue shoes, 12 Rose St"},
                     "metadata": [{"note": "call me"}]}});
        let shown = redact(&body, "");
        assert_eq!(shown["data"]["invoice_id"], "inv_1");
        assert_eq!(shown["data"]["order"]["amount"], "12.00");
        assert_eq!(shown["created_at"], "2026-01-01T00:00:00Z");
        let text = shown.to_string();
        for secret in ["ann@example.com", "Ann\"", "Rose St", "call me"] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
        assert_eq!(shown["data"]["customer"]["email"], "[redacted]");
        assert_eq!(shown["data"]["is_test"], true);
    }
}
