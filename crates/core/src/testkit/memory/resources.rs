//! The resource store's twin: items by key, each write's guard evaluated as the domain states
//! it, the list committed all or nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::money::change::{Applied, OrderRef};
use crate::money::effect::fulfilment_key;
use crate::money::invoice::Refund;
use crate::money::record::{self, FulfilmentRecord, StateRecord};
use crate::money::status::{Amount, InvoiceStatus, WithdrawalStatus};
use crate::money::write::{self, Field, Fields, Key, Refused, Set, Stored, Table, Value, Write};
use crate::roads::exceptions::ExceptionStore;
use crate::roads::fulfil::ResourceStore;
use crate::roads::handoff::StateRecords;
use crate::roads::ingest::PortError;
use crate::roads::reconcile::ReconcileStore;
use crate::roads::release::{InvoiceSeen, ReleaseStore};

/// An invoice as [`MemoryResources`] holds it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredInvoice {
    /// Its status and the event time (s) that set it; `None` while only refunds are recorded.
    pub status: Option<(InvoiceStatus, u64)>,
    /// The order it pays for, set once by the first change that names it (the price likewise).
    pub order: OrderRef,
    /// Paid, but not as the registered order says.
    pub held: bool,
    /// Why it is held, where the rule said.
    pub held_why: Option<String>,
    /// Held because its payment named another project than its record.
    pub projects_disagree: bool,
    /// Held because its payment named another order than its record: the order it named.
    pub order_disputed: Option<String>,
    /// Shipped under another order than Paymos' invoice names (Paymos' order, in words).
    pub shipped_otherwise: Option<String>,
    /// A person settled [`Self::shipped_otherwise`].
    pub otherwise_settled: bool,
    /// The invoice that shipped Paymos' order of [`Self::shipped_otherwise`] first.
    pub paymos_order_shipped_with: Option<String>,
    /// Paymos has that invoice in a project this stack does not apply.
    pub paymos_project_elsewhere: bool,
    /// Paymos has that invoice in another project here and names no order of it.
    pub paymos_order_unnamed: bool,
    /// Paid after it closed (event time, s).
    pub paid_late_at: Option<u64>,
    /// When its payment was made by Paymos' clock, where a delivery said so.
    pub payment_at: Option<u64>,
    /// Paid by a person's road with its order known nowhere.
    pub awaits_order: bool,
    /// Paid undated after a full refund ([`crate::money::invoice::Standing::AfterRefund`]).
    pub after_refund: bool,
    /// The invoice that fulfilled its order first.
    pub duplicate_of: Option<String>,
    /// Completed refunds.
    pub refunds: Vec<Refund>,
    /// The deliveries and actors whose change it holds.
    pub applied: std::collections::BTreeSet<String>,
    /// Released by a person (`released_by`).
    pub released_by: Option<String>,
    /// Why, as they said.
    pub release_reason: Option<String>,
}

impl StoredInvoice {
    fn of(fields: &Fields) -> Self {
        let seen = write::invoice_seen(fields);
        let int = |f: Field| fields.get(&f).and_then(Value::as_int);
        let text = |f: Field| fields.get(&f).and_then(Value::as_text).map(str::to_owned);
        Self {
            status: seen
                .status
                .map(|s| (s, int(Field::StatusAt).unwrap_or_default())),
            order: seen.order,
            held: seen.held,
            held_why: seen.held_why,
            projects_disagree: seen.projects_disagree,
            order_disputed: seen.order_disputed,
            shipped_otherwise: seen.shipped_otherwise,
            otherwise_settled: seen.otherwise_settled,
            paymos_order_shipped_with: seen.paymos_order_shipped_with,
            paymos_project_elsewhere: seen.paymos_project_elsewhere,
            paymos_order_unnamed: seen.paymos_order_unnamed,
            paid_late_at: int(Field::PaidLateAt),
            payment_at: seen.payment_at,
            awaits_order: seen.awaits_order,
            after_refund: seen.after_refund,
            duplicate_of: seen.duplicate_of,
            refunds: seen.refunds,
            applied: match fields.get(&Field::Applied) {
                Some(Value::Texts(set)) => set.clone(),
                _ => std::collections::BTreeSet::new(),
            },
            released_by: text(Field::ReleasedBy),
            release_reason: text(Field::ReleaseReason),
        }
    }

    /// The record as the domain reads it.
    #[must_use]
    pub fn seen(&self) -> InvoiceSeen {
        InvoiceSeen {
            status: self.status.map(|(s, _)| s),
            held: self.held,
            held_why: self.held_why.clone(),
            projects_disagree: self.projects_disagree,
            order_disputed: self.order_disputed.clone(),
            shipped_otherwise: self.shipped_otherwise.clone(),
            otherwise_settled: self.otherwise_settled,
            paymos_order_shipped_with: self.paymos_order_shipped_with.clone(),
            paymos_project_elsewhere: self.paymos_project_elsewhere,
            paymos_order_unnamed: self.paymos_order_unnamed,
            paid_late: self.paid_late_at.is_some(),
            duplicate_of: self.duplicate_of.clone(),
            released: self.released_by.is_some(),
            refunds: self.refunds.clone(),
            payment_at: self.payment_at,
            order: self.order.clone(),
            awaits_order: self.awaits_order,
            after_refund: self.after_refund,
        }
    }
}

/// A [`ResourceStore`] in memory: items by key, each write's guard evaluated with
/// [`crate::money::write::Guard::holds`] and the list committed all or nothing under one lock, as
/// DynamoDB's transactions do. `crates/aws/tests/emulators` runs the same histories against DynamoDB and asserts
/// the same outcomes.
#[derive(Debug, Default)]
pub struct MemoryResources {
    items: Mutex<HashMap<Key, Fields>>,
    /// Reconciliation's reads: each bulk read once, each order's claim read alone once.
    reconcile_reads: std::sync::atomic::AtomicUsize,
    /// No `open` list kept ([`crate::money::write::without_open_list`]).
    no_open_list: bool,
}

impl MemoryResources {
    /// The store of a stack without the reconciliation: it keeps no `open` list.
    #[must_use]
    pub fn without_open_list(mut self) -> Self {
        self.no_open_list = true;
        self
    }

    /// The reads reconciliation made ([`ReconcileStore`]'s calls; a batch of claims counts one).
    #[must_use]
    pub fn reconcile_reads(&self) -> usize {
        self.reconcile_reads
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn read(&self) {
        self.reconcile_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Carries out one write's sets on its item, as DynamoDB's update expressions do.
fn apply(item: &mut Fields, sets: &[Set]) {
    for set in sets {
        match set {
            Set::Put(f, v) => {
                item.insert(f.clone(), v.clone());
            }
            Set::Once(f, v) => {
                item.entry(f.clone()).or_insert_with(|| v.clone());
            }
            Set::Add(f, Value::Amount(a)) => {
                let total = match item.get(f) {
                    Some(Value::Amount(b)) => Amount::sum([a, b]).and_then(|t| Amount::parse(&t)),
                    _ => Some(a.clone()),
                };
                if let Some(total) = total {
                    item.insert(f.clone(), Value::Amount(total));
                }
            }
            Set::Add(f, Value::Texts(add)) => {
                if let Value::Texts(set) = item
                    .entry(f.clone())
                    .or_insert_with(|| Value::Texts(std::collections::BTreeSet::new()))
                {
                    set.extend(add.iter().cloned());
                }
            }
            Set::Add(f, v) => {
                item.insert(f.clone(), v.clone());
            }
            Set::Append(f, refund) => {
                if let Value::Refunds(list) = item
                    .entry(f.clone())
                    .or_insert_with(|| Value::Refunds(Vec::new()))
                {
                    list.push(refund.clone());
                }
            }
            Set::Remove(f) => {
                item.remove(f);
            }
        }
    }
}

impl MemoryResources {
    /// The fields of the item under `key`, as a store holds them (what the partition-heat
    /// test compares before and after each write).
    #[must_use]
    pub fn fields(&self, key: &Key) -> Option<Fields> {
        self.items.lock().expect("lock").get(key).cloned()
    }

    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the delivery of `item` as ingest does (`received`, its body's hash): fulfil
    /// applies a queued work item only once its delivery is recorded.
    pub fn record(&self, item: &crate::wire::work::WorkItem) {
        let key = crate::wire::work::delivery_key(item.environment, &item.event_id);
        let record = Fields::from([
            (Field::State, Value::text("received")),
            (
                Field::BodySha256,
                Value::text(crate::roads::ingest::sha256_hex(&item.body)),
            ),
        ]);
        self.lock().insert(Key::delivery(key), record);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Fields>> {
        self.items.lock().expect("lock")
    }

    /// The state table's items of `kind`, by key, sorted.
    fn of_kind(&self, kind: &str) -> Vec<(String, Fields)> {
        let mut out: Vec<_> = self
            .lock()
            .iter()
            .filter(|(k, item)| {
                k.table == Table::State
                    && item.get(&Field::Kind).and_then(Value::as_text) == Some(kind)
            })
            .map(|(k, item)| (k.id.clone(), item.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Registers the amount an order of the home project must be paid with (the amount guard).
    pub fn register_order(&self, external_id: &str, amount: &Amount, currency: &str) {
        self.register_scoped_order(None, external_id, amount, currency);
    }

    /// Registers the amount an order of the project scope `scope` must be paid with.
    pub fn register_scoped_order(
        &self,
        scope: Option<&str>,
        external_id: &str,
        amount: &Amount,
        currency: &str,
    ) {
        let w = write::expected_order((scope, external_id), amount, currency);
        apply(self.lock().entry(w.key).or_default(), &w.set);
    }

    /// The invoice, if any.
    #[must_use]
    pub fn invoice(&self, invoice_id: &str) -> Option<StoredInvoice> {
        self.lock()
            .get(&Key::state(invoice_id))
            .map(StoredInvoice::of)
    }

    /// The withdrawal's status, if any.
    #[must_use]
    pub fn withdrawal(&self, withdrawal_id: &str) -> Option<WithdrawalStatus> {
        self.lock()
            .get(&Key::state(withdrawal_id))
            .and_then(|i| i.get(&Field::Status))
            .and_then(Value::as_text)
            .and_then(WithdrawalStatus::parse)
    }

    /// Invoices with a fulfilment record, sorted.
    #[must_use]
    pub fn fulfilled(&self) -> Vec<String> {
        let mut out: Vec<_> = self
            .fulfilment_records()
            .into_iter()
            .map(|f| f.invoice_id)
            .collect();
        out.sort();
        out
    }

    fn fulfilment_records(&self) -> Vec<FulfilmentRecord> {
        self.of_kind("fulfilment")
            .iter()
            .map(|(_, f)| fulfilment_of(f))
            .collect()
    }

    /// Every invoice record, sorted by id.
    #[must_use]
    pub fn invoices(&self) -> Vec<(String, StoredInvoice)> {
        self.of_kind("invoice")
            .into_iter()
            .map(|(k, f)| (k, StoredInvoice::of(&f)))
            .collect()
    }

    /// Every fulfilment record: its invoice and the order it names, sorted.
    #[must_use]
    pub fn fulfilments(&self) -> Vec<(String, Option<String>)> {
        let mut out: Vec<_> = self
            .fulfilment_records()
            .into_iter()
            .map(|f| (f.invoice_id, f.order.external_id))
            .collect();
        out.sort();
        out
    }

    /// Every key of the state table's resources, fulfilments, claims and effect items, sorted
    /// (not the merchant's registered orders, the balances or the review notes).
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .lock()
            .iter()
            .filter(|(k, item)| {
                k.table == Table::State
                    && !matches!(
                        item.get(&Field::Kind).and_then(Value::as_text),
                        Some("expected_order" | "balance" | "review")
                    )
            })
            .map(|(k, _)| k.id.clone())
            .collect();
        out.sort();
        out
    }

    /// Each balance by its key (`balance#…`): a payer's of each project apart.
    #[must_use]
    pub fn balances_by_key(&self) -> std::collections::BTreeMap<String, String> {
        self.lock()
            .iter()
            .filter(|(k, _)| k.id.starts_with("balance#"))
            .filter_map(|(k, f)| match f.get(&Field::Balance) {
                Some(Value::Amount(total)) => Some((k.id.clone(), Amount::sum([total])?)),
                _ => None,
            })
            .collect()
    }

    /// The credits of a payer in a currency, by deposit.
    #[must_use]
    pub fn credits(&self, payer: &str, currency: &str) -> Vec<Amount> {
        let is =
            |f: &Fields, field: Field, v: &str| f.get(&field).and_then(Value::as_text) == Some(v);
        self.of_kind("deposit")
            .iter()
            .filter(|(_, f)| is(f, Field::Payer, payer) && is(f, Field::Currency, currency))
            .filter_map(|(_, f)| write::money(f, &Field::Net, &Field::NetText))
            .collect()
    }

    /// Every balance: each payer's in each currency, exact, by the project's key scope (none:
    /// the home project).
    #[must_use]
    pub fn balances(&self) -> std::collections::BTreeMap<(Option<String>, String, String), String> {
        self.of_kind("balance")
            .iter()
            .filter_map(|(_, f)| {
                let text = |field: Field| f.get(&field).and_then(Value::as_text).map(str::to_owned);
                let Some(Value::Amount(total)) = f.get(&Field::Balance) else {
                    return None;
                };
                Some((
                    (
                        text(Field::ProjectId),
                        text(Field::Payer)?,
                        text(Field::Currency)?,
                    ),
                    Amount::sum([total])?,
                ))
            })
            .collect()
    }

    /// The outcome and reason recorded on a delivery (by its ledger key), if it was processed.
    #[must_use]
    pub fn outcome(&self, event_id: &str) -> Option<(Applied, Option<String>)> {
        let items = self.lock();
        let item = items.get(&Key::delivery(event_id))?;
        let outcome = item.get(&Field::Outcome).and_then(Value::as_text)?;
        Some((
            Applied::parse(outcome)?,
            item.get(&Field::OutcomeReason)
                .and_then(Value::as_text)
                .map(str::to_owned),
        ))
    }

    /// Review notes (deliveries waiting for a person), by event id.
    #[must_use]
    pub fn reviews(&self) -> HashMap<String, Applied> {
        self.of_kind("review")
            .iter()
            .filter_map(|(_, f)| {
                let text = |field: Field| f.get(&field).and_then(Value::as_text);
                Some((
                    text(Field::EventId)?.to_owned(),
                    Applied::parse(text(Field::Reason)?)?,
                ))
            })
            .collect()
    }
}

/// A fulfilment item as its record.
fn fulfilment_of(f: &Fields) -> FulfilmentRecord {
    let text = |field: Field| f.get(&field).and_then(Value::as_text).map(str::to_owned);
    FulfilmentRecord {
        invoice_id: text(Field::InvoiceId).unwrap_or_default(),
        order: write::order_of(f),
        status: text(Field::Status)
            .as_deref()
            .and_then(InvoiceStatus::parse),
        won_by: text(Field::WonBy).unwrap_or_default(),
        fulfilled_at_ms: f.get(&Field::FulfilledAt).and_then(Value::as_int),
    }
}

impl ResourceStore for MemoryResources {
    async fn write(&self, writes: &[Write]) -> Result<Stored, PortError> {
        let unlisted;
        let writes = if self.no_open_list {
            unlisted = crate::money::write::without_open_list(writes);
            &unlisted[..]
        } else {
            writes
        };
        let mut items = self.lock();
        let refused: Vec<Refused> = writes
            .iter()
            .filter(|w| !w.guard.holds(items.get(&w.key)))
            .map(|w| Refused {
                write: w.what,
                found: items.get(&w.key).cloned().unwrap_or_default(),
            })
            .collect();
        if !refused.is_empty() {
            return Ok(Stored::Refused(refused));
        }
        for w in writes.iter().filter(|w| !w.set.is_empty()) {
            apply(items.entry(w.key.clone()).or_default(), &w.set);
        }
        Ok(Stored::Committed)
    }
    async fn read(&self, key: &Key) -> Result<Option<Fields>, PortError> {
        Ok(self.lock().get(key).cloned())
    }
}

impl ReleaseStore for MemoryResources {
    async fn invoice_seen(
        &self,
        invoice_id: &str,
    ) -> Result<(Option<InvoiceSeen>, bool), PortError> {
        let items = self.lock();
        let fulfilled = items.contains_key(&Key::state(fulfilment_key(invoice_id)));
        let seen = items.get(&Key::state(invoice_id)).map(write::invoice_seen);
        Ok((seen, fulfilled))
    }
}

impl StateRecords for MemoryResources {
    async fn records(&self) -> Result<Vec<StateRecord>, PortError> {
        let invoices = self.invoices().into_iter().map(|(id, r)| {
            StateRecord::Invoice(record::InvoiceRecord {
                invoice_id: id,
                seen: r.seen(),
                updated_at_ms: r.status.map(|(_, at)| at * 1000),
            })
        });
        let fulfilments = self
            .fulfilment_records()
            .into_iter()
            .map(StateRecord::Fulfilment);
        let withdrawals = self.of_kind("withdrawal").into_iter().map(|(id, f)| {
            StateRecord::Withdrawal(record::WithdrawalRecord {
                withdrawal_id: id,
                status: f
                    .get(&Field::Status)
                    .and_then(Value::as_text)
                    .and_then(WithdrawalStatus::parse),
                kind: None,
                invoice_id: None,
                amount: None,
                currency: None,
                updated_at_ms: None,
            })
        });
        let reviews = self
            .of_kind("review")
            .into_iter()
            .map(|(_, f)| {
                let text = |field: Field| f.get(&field).and_then(Value::as_text).map(str::to_owned);
                StateRecord::Review(record::ReviewRecord {
                    event_id: text(Field::EventId)
                        .map(|key| crate::roads::ingest::event_id_of_key(&key).to_owned())
                        .unwrap_or_default(),
                    reason: text(Field::Reason).unwrap_or_default(),
                    resource_id: text(Field::ResourceId),
                    why: text(Field::Why),
                    created_at_ms: f.get(&Field::CreatedAt).and_then(Value::as_int),
                })
            })
            .collect::<Vec<_>>();
        Ok(invoices
            .chain(fulfilments)
            .chain(withdrawals)
            .chain(reviews)
            .collect())
    }
}

impl ReconcileStore for MemoryResources {
    async fn fulfilments_between(
        &self,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<FulfilmentRecord>, PortError> {
        self.read();
        let mut out: Vec<FulfilmentRecord> = self
            .lock()
            .iter()
            .filter(|(k, item)| {
                k.table == Table::State
                    && item.get(&Field::Kind).and_then(Value::as_text) == Some("fulfilment")
                    && item
                        .get(&Field::FulfilledAt)
                        .and_then(Value::as_int)
                        .is_some_and(|at| (from_ms..=to_ms).contains(&at))
            })
            .map(|(_, item)| fulfilment_of(item))
            .collect();
        out.sort_by(|a, b| a.invoice_id.cmp(&b.invoice_id));
        Ok(out)
    }

    async fn fulfilments_of(
        &self,
        invoice_ids: &[String],
    ) -> Result<Vec<FulfilmentRecord>, PortError> {
        // One batch, as DynamoDB's adapter reads them (BatchGetItem, a hundred keys a call).
        self.read();
        let items = self.lock();
        Ok(invoice_ids
            .iter()
            .filter_map(|id| items.get(&Key::state(crate::money::effect::fulfilment_key(id))))
            .map(fulfilment_of)
            .collect())
    }

    async fn open_invoices(&self) -> Result<Vec<(String, Option<String>)>, PortError> {
        self.read();
        Ok(self
            .invoices()
            .into_iter()
            .filter(|(_, r)| {
                r.status
                    .is_some_and(|(s, _)| InvoiceStatus::OPEN.contains(&s))
            })
            .map(|(id, r)| (id, r.order.external_id))
            .collect())
    }

    async fn order_fulfilled_by(
        &self,
        scope: Option<&str>,
        order_id: &str,
    ) -> Result<Option<String>, PortError> {
        self.read();
        Ok(self.claim(scope, order_id))
    }

    async fn orders_fulfilled_by(
        &self,
        orders: &[(Option<String>, String)],
    ) -> Result<std::collections::BTreeMap<String, String>, PortError> {
        // One batch, as DynamoDB's adapter reads it (BatchGetItem, a hundred keys a call).
        self.read();
        Ok(orders
            .iter()
            .filter_map(|(scope, order)| {
                self.claim(scope.as_deref(), order)
                    .map(|winner| (write::scoped(scope.as_deref(), order), winner))
            })
            .collect())
    }
}

impl MemoryResources {
    fn claim(&self, scope: Option<&str>, order_id: &str) -> Option<String> {
        self.lock()
            .get(&Key::state(write::order_paid_key(scope, order_id)))
            .and_then(|f| f.get(&Field::InvoiceId))
            .and_then(Value::as_text)
            .map(str::to_owned)
    }
}

impl crate::roads::reconcile::ReconcileCheckpoint for MemoryResources {
    async fn clean_until(&self) -> Result<Option<u64>, PortError> {
        Ok(self
            .lock()
            .get(&Key::state(write::RECONCILED_KEY))
            .and_then(|f| match f.get(&Field::CleanUntil) {
                Some(Value::Int(until)) => Some(*until),
                _ => None,
            }))
    }

    async fn read_until(&self) -> Result<Option<u64>, PortError> {
        Ok(self
            .lock()
            .get(&Key::state(write::RECONCILE_READ_KEY))
            .and_then(|f| match f.get(&Field::ReadUntil) {
                Some(Value::Int(until)) => Some(*until),
                _ => None,
            }))
    }
}

impl ExceptionStore for MemoryResources {
    async fn invoices_under_review(&self) -> Result<Vec<record::InvoiceRecord>, PortError> {
        Ok(self
            .invoices()
            .into_iter()
            .filter(|(_, r)| r.seen().standing().waits_for_person())
            .map(|(id, r)| record::InvoiceRecord {
                invoice_id: id,
                seen: r.seen(),
                updated_at_ms: r.status.map(|(_, at)| at * 1000),
            })
            .collect())
    }
}
