//! What the soak requires of the tables once it is over: every acknowledged delivery recorded
//! and processed with a named outcome, every resource at its final status, every paid order
//! fulfilled exactly once by one of its own paid events, every balance the exact sum.

use std::collections::{BTreeMap, HashMap, HashSet};

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_core::money::record::{DeliveryRecord, FulfilmentRecord, StateRecord};
use paymos_inbox_core::money::status::DepositStatus;
use paymos_inbox_core::roads::handoff::StateRecords;
use paymos_inbox_core::roads::ingest::DeliveryState;

use super::{Expect, SoakReport};
use paymos_inbox_local::template;

/// The tables as the soak left them, as typed records.
struct Found {
    deliveries: Vec<DeliveryRecord>,
    /// Resource id → its status (`""` when absent).
    statuses: HashMap<String, String>,
    /// Invoice id → the invoice it duplicates.
    duplicate_of: HashMap<String, String>,
    /// Invoice id → its fulfilment.
    fulfilments: HashMap<String, FulfilmentRecord>,
    /// How many fulfilment records exist (one per invoice, or a double under another key).
    fulfilment_records: usize,
    /// Deposits credited.
    credited: HashSet<String>,
    /// Payer → balance in USDT, in cents.
    balances: HashMap<String, Option<u64>>,
}

impl Found {
    async fn read(
        dynamodb: &aws_sdk_dynamodb::Client,
        created: &template::Created,
    ) -> Result<Self, String> {
        let deliveries = created.table("DeliveriesTable");
        let mut found = Self {
            deliveries: DynamoLedger::new(dynamodb.clone(), deliveries, None)
                .deliveries()
                .await
                .map_err(|e| e.to_string())?,
            statuses: HashMap::new(),
            duplicate_of: HashMap::new(),
            fulfilments: HashMap::new(),
            fulfilment_records: 0,
            credited: HashSet::new(),
            balances: HashMap::new(),
        };
        let state = DynamoResources::new(dynamodb.clone(), created.table("StateTable"), deliveries);
        for record in state.records().await.map_err(|e| e.to_string())? {
            found.add(record);
        }
        Ok(found)
    }

    fn add(&mut self, record: StateRecord) {
        match record {
            StateRecord::Invoice(i) => {
                let status = i.seen.status.map(|s| s.as_str().to_owned());
                if let Some(first) = i.seen.duplicate_of {
                    self.duplicate_of.insert(i.invoice_id.clone(), first);
                }
                self.statuses
                    .insert(i.invoice_id, status.unwrap_or_default());
            }
            StateRecord::Fulfilment(f) => {
                self.fulfilment_records += 1;
                self.fulfilments.insert(f.invoice_id.clone(), f);
            }
            StateRecord::Withdrawal(w) => {
                let status = w.status.map(|s| s.as_str().to_owned());
                self.statuses
                    .insert(w.withdrawal_id, status.unwrap_or_default());
            }
            StateRecord::Deposit(d) => {
                if d.credited && d.status == Some(DepositStatus::Confirmed) {
                    self.credited.insert(d.deposit_id.clone());
                }
                let status = d.status.map(|s| s.as_str().to_owned());
                self.statuses
                    .insert(d.deposit_id, status.unwrap_or_default());
            }
            StateRecord::Balance(b) if b.currency == "USDT" => {
                self.balances.insert(b.payer, cents(b.balance.as_str()));
            }
            _ => {}
        }
    }

    fn status(&self, resource: &str) -> &str {
        self.statuses.get(resource).map_or("", String::as_str)
    }
}

pub(super) async fn verify(
    dynamodb: &aws_sdk_dynamodb::Client,
    created: &template::Created,
    expect: &BTreeMap<String, Expect>,
    acknowledged: &HashSet<String>,
    sandbox_ids: &[String],
    report: &mut SoakReport,
) -> Result<(), String> {
    let found = Found::read(dynamodb, created).await?;
    deliveries(&found, acknowledged, sandbox_ids, report);
    let mut balances: BTreeMap<&str, u64> = BTreeMap::new();
    for (resource, e) in expect {
        match e {
            Expect::Invoice {
                final_status,
                paid_events,
                pair,
                silent,
                refunded_in_full,
            } => invoice(
                &found,
                resource,
                (final_status, paid_events),
                pair.as_deref(),
                (*silent, *refunded_in_full),
                report,
            ),
            Expect::Withdrawal { final_status } => {
                let status = found.status(resource);
                if status != *final_status {
                    report.violations.push(format!(
                        "{resource}: status {status:?}, expected final {final_status}"
                    ));
                }
            }
            Expect::Deposit { payer, net_cents } => {
                *balances.entry(payer.as_str()).or_default() += net_cents;
                if found.credited.contains(resource) {
                    report.credited += 1;
                } else {
                    let status = found.status(resource);
                    report.violations.push(format!(
                        "{resource}: confirmed but not credited (status {status:?})"
                    ));
                }
            }
        }
    }
    once_per_order(&found, report);
    for (payer, expected) in &balances {
        report.balances_checked += 1;
        let got = found.balances.get(*payer).copied().flatten();
        if got != Some(*expected) {
            report.violations.push(format!(
                "{payer}: balance {got:?} cents, expected the exact sum {expected}"
            ));
        }
    }
    Ok(())
}

/// Every acknowledged delivery is recorded, and every record (acknowledged, or recorded by an
/// attempt whose sender then gave up) is processed, with a named outcome.
fn deliveries(
    found: &Found,
    acknowledged: &HashSet<String>,
    sandbox_ids: &[String],
    report: &mut SoakReport,
) {
    let v = &mut report.violations;
    let processed = |d: &&DeliveryRecord| d.state == DeliveryState::Processed;
    report.processed = found.deliveries.iter().filter(processed).count();
    let outcomes: HashMap<&str, Option<&str>> = found
        .deliveries
        .iter()
        .map(|d| (d.event_id.as_str(), d.outcome.as_deref()))
        .collect();
    for id in acknowledged {
        if !outcomes.contains_key(id.as_str()) {
            v.push(format!("{id} acknowledged but never recorded"));
        }
    }
    if found.deliveries.len() > report.deliveries {
        v.push(format!(
            "ledger holds {} for {}",
            crate::counted(found.deliveries.len(), "record"),
            crate::counted(report.deliveries, "planned delivery")
        ));
    }
    for d in found.deliveries.iter().filter(|d| !processed(d)) {
        v.push(format!("{} recorded but not processed", d.event_id));
    }
    for id in sandbox_ids {
        // Its own record (a reused live id has two: the live one applies as planned).
        let ended: Vec<Option<&str>> = found
            .deliveries
            .iter()
            .filter(|d| d.event_id == *id)
            .map(|d| d.outcome.as_deref())
            .collect();
        if !ended.contains(&Some("other_environment")) {
            v.push(format!(
                "{id}: sandbox-signed delivery for a live invoice ended {ended:?}, expected other_environment"
            ));
        }
    }
}

/// An invoice ends at its final status; a paid one is fulfilled by one of its own paid events,
/// and of two paid invoices for one order exactly one is fulfilled while the other names it as
/// the payment it duplicates.
fn invoice(
    found: &Found,
    resource: &str,
    (final_status, paid_events): (&str, &[String]),
    pair: Option<&str>,
    (silent, refunded_in_full): (bool, bool),
    report: &mut SoakReport,
) {
    report.invoices += 1;
    let ended = |e: &String, outcome: &str| {
        found
            .deliveries
            .iter()
            .any(|d| d.event_id == *e && d.outcome.as_deref() == Some(outcome))
    };
    // Refunded in full before its payment was applied: the payment is recorded, never shipped.
    if refunded_in_full
        && !found.fulfilments.contains_key(resource)
        && paid_events.iter().any(|e| ended(e, "refunded"))
    {
        report.refunded_first += 1;
        return;
    }
    // A payment naming no order, applied before any event named it: it waits for its order
    // (every copy recorded `order_unknown` for a person), the invoice stays open, nothing ships.
    let waits_for_order = silent
        && !found.fulfilments.contains_key(resource)
        && paid_events.iter().all(|e| ended(e, "order_unknown"));
    if waits_for_order {
        report.order_unknown += 1;
        return;
    }
    let v = &mut report.violations;
    let status = found.status(resource);
    if status != final_status {
        v.push(format!(
            "{resource}: status {status:?}, expected final {final_status}"
        ));
    }
    let fulfilment = found.fulfilments.get(resource);
    if let Some(other) = pair {
        let other_fulfilled = found.fulfilments.contains_key(other);
        let duplicate_of = found.duplicate_of.get(resource).map_or("", String::as_str);
        match (fulfilment.is_some(), other_fulfilled) {
            (true, false) => report.fulfilled += 1,
            (false, true) if duplicate_of == other => {}
            (false, true) => v.push(format!(
                "{resource}: second payment of a fulfilled order not marked duplicate_of {other} (got {duplicate_of:?})"
            )),
            (true, true) => {
                if resource < other {
                    v.push(format!("{resource} and {other}: one order fulfilled twice"));
                }
                report.fulfilled += 1;
            }
            (false, false) => {
                if resource < other {
                    v.push(format!("{resource} and {other}: paid order never fulfilled"));
                }
            }
        }
        return;
    }
    match (fulfilment, final_status.starts_with("paid")) {
        (Some(f), true) => {
            report.fulfilled += 1;
            if !paid_events.contains(&f.won_by) {
                v.push(format!(
                    "{resource}: fulfilled by {} which is not one of its paid events",
                    f.won_by
                ));
            }
        }
        (None, true) => v.push(format!("{resource}: paid but never fulfilled")),
        (Some(_), false) => v.push(format!(
            "{resource}: fulfilled although it ended {final_status}"
        )),
        (None, false) => {}
    }
}

/// An order is fulfilled once, by whichever road and whichever invoice; fulfilments for
/// invoices the plan never had would be doubles under another key.
fn once_per_order(found: &Found, report: &mut SoakReport) {
    let mut per_order: BTreeMap<&str, usize> = BTreeMap::new();
    for f in found.fulfilments.values() {
        if let Some(order) = &f.order.external_id {
            *per_order.entry(order).or_default() += 1;
        }
    }
    for (order, n) in per_order.iter().filter(|(_, n)| **n > 1) {
        report
            .violations
            .push(format!("order {order} fulfilled {n} times"));
    }
    if found.fulfilment_records != report.fulfilled {
        report.violations.push(format!(
            "{} fulfilment items for {} fulfilled invoices",
            found.fulfilment_records, report.fulfilled
        ));
    }
}

fn cents(decimal: &str) -> Option<u64> {
    let (int, frac) = decimal.split_once('.').unwrap_or((decimal, ""));
    let frac = format!("{frac:0<2}");
    if frac.len() > 2 && frac[2..].bytes().any(|b| b != b'0') {
        return None;
    }
    Some(int.parse::<u64>().ok()? * 100 + frac[..2].parse::<u64>().ok()?)
}
