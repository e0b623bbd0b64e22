//! The console's JSON answers: the home page from `exceptions`' own reads, a payment's story
//! from the reads that exist, and the actions through the command line's own functions (so a
//! rule lives once, and a refusal is the domain's own sentence). A bulk job runs in the
//! background, one at a time, and is read back while it runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hyper::StatusCode;
use paymos_inbox::counted;
use paymos_inbox::tools::alarms::{Alarm, AlarmState};
use paymos_inbox_aws::dynamodb::{
    DynamoLedger, DynamoResources, KeptBody, LedgerEntry, OrderOnRecord, WriteGrant,
};
use paymos_inbox_core::money::change::DELIVERY_OUTCOMES;
use paymos_inbox_core::money::invoice::Standing;
use paymos_inbox_core::money::record::StateRecord;
use paymos_inbox_core::roads::exceptions::{Exception, ReviewLedger as _};
use paymos_inbox_core::roads::ingest::Delivery;
use paymos_inbox_core::roads::release::{ReleaseBy, ReleaseStore as _};
use paymos_inbox_core::wire::signature::Environment;
use paymos_inbox_core::wire::work::{delivery_key, event_id_of_key};
use paymos_inbox_lambda::now_ms;
use serde_json::{Value, json};

use crate::exit::Failure;
use crate::stack::{NamedBy, Stack, StackArgs};

/// The order the home page shows what waits in: the payments first, then the deliveries.
pub const KINDS: [&str; 10] = [
    "held",
    "paid_late",
    "duplicate_payment",
    "unconfirmed",
    "order_unknown",
    "project_unknown",
    "order_conflict",
    "unusable",
    "dead_letter",
    crate::exceptions::PARKED_HANDOFF,
];

/// A dead-letter queue the console moves back as a job, through the command line's
/// [`crate::ops::redrive_in`]: the action, the queue its audit entry names, the two queues'
/// options (as the command line names them) and where they are in the stack, the pace, and
/// whether a stack may lack both queues (not offered then).
#[derive(Clone, Copy)]
struct Redrive {
    action: &'static str,
    id: &'static str,
    names: (&'static str, &'static str),
    queues: fn(&Stack) -> (Option<String>, Option<String>),
    from_to: &'static str,
    per_second: Option<u16>,
    optional: bool,
}

/// `redrive` (the work queue's dead letters) and `events redrive` (the hand-off's parked
/// events, paced as the command line paces them by default).
const REDRIVES: [Redrive; 2] = [
    Redrive {
        action: "redrive",
        id: "work-queue",
        names: ("queue-url", "dlq-url"),
        queues: |s| (s.queue.clone(), s.dlq.clone()),
        from_to: "the dead-letter queue back to the work queue",
        per_second: None,
        optional: false,
    },
    Redrive {
        action: "events-redrive",
        id: "webhook-queue",
        names: ("webhook-queue-url", "webhook-dlq-url"),
        queues: |s| (s.webhook_queue.clone(), s.webhook_dlq.clone()),
        from_to: "the hand-off's dead-letter queue back to the queue the deliver function posts from",
        per_second: Some(crate::handoff::REDRIVE_PER_SECOND),
        // Only a stack with a `WebhookTargetUrl` has the hand-off's queues.
        optional: true,
    },
];

/// What a story cannot show of the hand-off.
const HANDOFF_ATTEMPTS: &str = "the hand-off's attempts to post each fact: they are messages of the deliver function's queue, and only those it parked are kept (the home page lists them)";

/// The most a job moves at once, and the most stranded deliveries it counts.
const JOB_LIMIT: usize = 1000;

/// The pace a person may choose for a redrive: SQS's move task's own bounds.
const PACE: std::ops::RangeInclusive<u16> = 1..=500;

/// How many of the audit trail's newest entries the console shows.
const AUDIT_LIMIT: usize = 100;

/// An answer: its status and its JSON.
pub struct Answered {
    pub status: StatusCode,
    pub body: Value,
}

impl Answered {
    fn ok(body: Value) -> Self {
        Self {
            status: StatusCode::OK,
            body,
        }
    }

    /// A refusal in the domain's (or the command line's) own words: 409 for a state that does
    /// not allow it, 400 for input.
    fn refused(status: StatusCode, why: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({"refused": why.into()}),
        }
    }

    /// A failure, with the HTTP status its kind decides ([`crate::exit::Kind::answer`], the
    /// exit code's table): 400 for input, 502/503 for a store or an API that failed or asked us
    /// to slow down, 500 for a stack configured wrong.
    fn failed(f: &Failure) -> Self {
        let status = f.status();
        tracing::warn!(status = status.as_u16(), "console: {}", f.message);
        Self::refused(status, said(f))
    }
}

/// A failure's sentence and what to do next, on one line.
fn said(f: &Failure) -> String {
    match &f.next {
        Some(next) => format!("{}: {next}", f.message),
        None => f.message.clone(),
    }
}

/// A job started from the console: which, the count confirmed, how many have moved so far (as
/// the mover reports it), and how it ended: how many moved and its sentence, or its failure.
struct Job {
    action: &'static str,
    of: &'static str,
    count: usize,
    moved: AtomicUsize,
    ended: Mutex<Option<Result<(usize, String), String>>>,
}

impl Job {
    /// `{job, action, of, count, moved, done, result | error}`, as `GET /api/jobs/<id>` answers.
    fn view(&self, id: usize) -> Value {
        let mut view = json!({
            "job": id,
            "action": self.action,
            "of": self.of,
            "count": self.count,
            "moved": self.moved.load(Ordering::Relaxed),
            "done": false,
        });
        match &*lock(&self.ended) {
            None => {}
            Some(Ok((moved, sentence))) => {
                view["done"] = json!(true);
                view["moved"] = json!(moved);
                view["result"] = json!(sentence);
            }
            Some(Err(why)) => {
                view["done"] = json!(true);
                view["error"] = json!(why);
            }
        }
        view
    }
}

/// The jobs this console started (job `n` is `started[n - 1]`), and the one running, if any.
#[derive(Default)]
struct Jobs {
    started: Vec<Arc<Job>>,
    running: Option<usize>,
}

/// A lock that a panicked holder did not spoil (what it guards is written whole, or not).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The resolved stack the console reads and acts on, and who acts.
pub struct Console {
    stack: Stack,
    state: DynamoResources,
    ledger: DynamoLedger,
    actor: String,
    /// Who the audit trail records for this console's actions ([`crate::audit::who`]), or why
    /// it is not known (each action asks again, and is not taken without it).
    identity: String,
    api: Option<paymos::PaymosClient>,
    /// Whether this identity may write the state table (every action writes there, its audit
    /// entry at least), learnt once at start ([`paymos_inbox_aws::dynamodb::may_update`]).
    write: WriteGrant,
    /// Where `events resend` publishes (the stack's bus, or `dev`'s events queue), or why it
    /// cannot (said when the action is asked for).
    publish_to: Result<crate::handoff::Target, Failure>,
    jobs: Mutex<Jobs>,
}

impl Console {
    /// Resolves the stack as every operator command does (`--dev-info`, `--stack-name`, …).
    ///
    /// # Errors
    /// What the command line says when the stack cannot be resolved.
    pub async fn open(
        args: &StackArgs,
        actor: String,
        api: Option<paymos::PaymosClient>,
    ) -> Result<Self, Failure> {
        let stack = args.resolve().await?;
        let state = stack.resources()?;
        let deliveries = stack.require(&stack.deliveries, "deliveries-table")?;
        let ledger = DynamoLedger::new(stack.dynamodb.clone(), deliveries, None);
        let identity = crate::audit::who(&stack, Some(&actor))
            .await
            .unwrap_or_else(|f| format!("unknown ({})", f.message));
        let table = stack.require(&stack.state, "state-table")?;
        let write = paymos_inbox_aws::dynamodb::may_update(&stack.dynamodb, table).await;
        match &write {
            WriteGrant::Granted => {}
            WriteGrant::Denied(why) => tracing::warn!("console: read-only: {why}"),
            WriteGrant::Unknown(why) => {
                tracing::warn!("console: whether this identity may write is not known: {why}");
            }
        }
        let publish_to = crate::handoff::target(&stack, args, None).await;
        Ok(Self {
            stack,
            state,
            ledger,
            actor,
            identity,
            api,
            write,
            publish_to,
            jobs: Mutex::default(),
        })
    }

    /// Why this console only reads (the identity lacks the state table's write grant), the
    /// sentence its page shows and every action is refused with; `None` when it may act.
    pub fn read_only(&self) -> Option<String> {
        match &self.write {
            WriteGrant::Denied(why) => Some(format!(
                "read-only: this identity may not write the state table (dynamodb:UpdateItem): {why}"
            )),
            WriteGrant::Granted | WriteGrant::Unknown(_) => None,
        }
    }

    /// Why it is not known whether this console may act (the probe's write could not say);
    /// its actions are offered, and a refused one says so.
    pub fn write_unknown(&self) -> Option<String> {
        match &self.write {
            WriteGrant::Unknown(why) => Some(format!(
                "whether this identity may write the state table is not known ({why}): an action it may not take is refused by AWS"
            )),
            WriteGrant::Granted | WriteGrant::Denied(_) => None,
        }
    }

    /// What waits for a person, grouped by kind: `exceptions`' list, read as it reads it; and
    /// a header of the queues' depths and the oldest pending delivery (`pending`'s read).
    pub async fn home(&self) -> Answered {
        match crate::exceptions::waiting(&self.stack, &self.state, &self.ledger).await {
            Ok(found) => {
                let mut page = home(&found, now_ms(), self.about());
                page["header"] = self.header().await;
                Answered::ok(page)
            }
            Err(f) => Answered::failed(&f),
        }
    }

    async fn header(&self) -> Value {
        header(&self.stack, &self.state, &self.ledger).await
    }

    fn about(&self) -> Value {
        let named = match &self.stack.named_by {
            crate::stack::NamedBy::DevInfo(file) => format!("dev ({})", file.display()),
            crate::stack::NamedBy::Stack(name) => format!("stack {name}"),
            crate::stack::NamedBy::Flags => "tables named by flags".to_owned(),
        };
        json!({
            "stack": named,
            "environment": self.stack.environment,
            "projects": self.stack.projects.ids(),
            "actor": self.actor,
            "identity": self.identity,
            "recheck": self.api.is_some(),
            "read_only": self.read_only(),
            "write_unknown": self.write_unknown(),
        })
    }

    /// One payment's story from an id: `inv_…`, `evt_…`, `wdr_…`, `pcd_…`, or an order id.
    pub async fn search(&self, id: &str) -> Answered {
        if id.is_empty() || id.len() > 200 {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                "an id: inv_…, evt_…, wdr_…, pcd_… or an order id",
            );
        }
        let story = if id.starts_with("evt_") {
            self.event(id).await
        } else if id.starts_with("inv_") {
            self.invoice(id).await
        } else if id.starts_with("wdr_") || id.starts_with("pcd_") {
            self.movement(id).await
        } else {
            self.order(id).await
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

    /// An order id, in each project the stack applies (an order id is the merchant's, so one
    /// id may name an order in each): its claim (which invoice fulfilled it, and when) and the
    /// registered order's amount guard, two `GetItem`s a project; and the deliveries that wait
    /// of each invoice that claimed it.
    async fn order(&self, order_id: &str) -> Result<Value, Failure> {
        let projects: Vec<Option<&str>> = if self.stack.projects.ids().is_empty() {
            vec![None]
        } else {
            self.stack
                .projects
                .ids()
                .iter()
                .map(|p| Some(p.as_str()))
                .collect()
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
        for project in projects {
            let scope = self.stack.projects.scope(project);
            waiting.extend(
                under_review
                    .iter()
                    .filter(|r| {
                        r.seen.order.external_id.as_deref() == Some(order_id)
                            && self.stack.projects.scope(r.seen.order.project.as_deref()) == scope
                    })
                    .map(|r| {
                        json!({
                            "invoice_id": r.invoice_id,
                            "standing": standing(&r.seen.standing()),
                            "project": project,
                        })
                    }),
            );
            let on_record = self
                .state
                .order_on_record(scope.as_deref(), order_id)
                .await
                .map_err(Failure::from)?;
            if let Some(claim) = &on_record.claim {
                deliveries.extend(self.waiting_of(&claim.invoice_id).await?);
            }
            orders.push(order(project, &on_record));
        }
        Ok(json!({
            "id": order_id,
            "kind": "order",
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

    /// What each job would move, counted before anything moves: each dead-letter queue's
    /// messages (`redrive`, `events redrive`) and the stranded deliveries (`pending --resend`),
    /// by the reads those commands make.
    pub async fn jobs(&self) -> Answered {
        use paymos_inbox_core::roads::sweep::StrandedDeliveries as _;
        let mut jobs = serde_json::Map::new();
        for r in &REDRIVES {
            let (queue, dlq) = (r.queues)(&self.stack);
            if r.optional && queue.is_none() && dlq.is_none() {
                jobs.insert(r.action.to_owned(), Value::Null);
                continue;
            }
            let offer = match self.stack.require(&dlq, r.names.1) {
                Ok(dlq) if queue.is_some() => {
                    match paymos_inbox_aws::sqs::approximate_messages(&self.stack.sqs, dlq).await {
                        Ok(n) => {
                            let pace = r
                                .per_second
                                .map_or(String::new(), |p| format!(", at most {p} a second"));
                            json!({"count": n, "sentence": format!(
                                "{} will move from {}{pace}", counted(n, "message"), r.from_to
                            )})
                        }
                        Err(e) => json!({"unavailable": e.to_string()}),
                    }
                }
                Ok(_) => json!({"unavailable": self.stack.named_by.missing(r.names.0).message}),
                Err(f) => json!({"unavailable": f.message}),
            };
            jobs.insert(r.action.to_owned(), offer);
        }
        let now = now_ms();
        let after = paymos_inbox_core::roads::sweep::DEFAULT_SWEEP_AFTER_SECS;
        let resend = match self
            .ledger
            .stranded(now.saturating_sub(after * 1000), now, JOB_LIMIT)
            .await
        {
            Ok(found) => json!({"count": found.len(), "sentence": format!(
                "{} recorded over {} min ago and never processed will be sent to the work queue again",
                counted(found.len(), "delivery"),
                after / 60
            )}),
            Err(e) => json!({"unavailable": e.to_string()}),
        };
        jobs.insert("resend".to_owned(), resend);
        let running = {
            let all = lock(&self.jobs);
            all.running
                .map_or(Value::Null, |id| all.started[id - 1].view(id))
        };
        jobs.insert("running".to_owned(), running);
        Answered::ok(Value::Object(jobs))
    }

    /// The audit trail's newest entries (`audit`'s read: one query of the `actions` list).
    pub async fn audit(&self) -> Answered {
        match crate::audit::recent(&self.stack, AUDIT_LIMIT).await {
            Ok(found) => Answered::ok(json!({
                "actions": found.iter().map(crate::audit::to_json).collect::<Vec<_>>(),
            })),
            Err(f) => Answered::failed(&f),
        }
    }

    /// Where a job this console started stands (`GET /api/jobs/<id>`).
    pub fn job(&self, id: &str) -> Answered {
        let all = lock(&self.jobs);
        match id
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=all.started.len()).contains(n))
        {
            Some(n) => Answered::ok(all.started[n - 1].view(n)),
            None => Answered::refused(StatusCode::NOT_FOUND, format!("no job {id}")),
        }
    }

    /// A job started in the background, at most `count` moved (the count the person saw and
    /// confirmed), a redrive at `per_second` when given (else its command's pace): answered at
    /// once (202) with the job's id, or refused while another of this console's jobs runs.
    fn start(
        self: &Arc<Self>,
        action: &str,
        count: Option<u64>,
        per_second: Option<u64>,
    ) -> Answered {
        let Some(count) = count
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=JOB_LIMIT).contains(n))
        else {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                format!("a job moves the count you confirmed: 1 to {JOB_LIMIT}"),
            );
        };
        let redrive = REDRIVES.iter().find(|r| r.action == action).copied();
        let pace = match (redrive, per_second) {
            (r, None) => r.and_then(|r| r.per_second),
            (Some(_), Some(n)) => match u16::try_from(n).ok().filter(|n| PACE.contains(n)) {
                Some(n) => Some(n),
                None => {
                    return Answered::refused(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "a redrive's pace is {} to {} messages a second",
                            PACE.start(),
                            PACE.end()
                        ),
                    );
                }
            },
            (None, Some(_)) => {
                return Answered::refused(
                    StatusCode::BAD_REQUEST,
                    "pending --resend sends each stranded delivery at once: it takes no pace",
                );
            }
        };
        let (id, job) = {
            let mut all = lock(&self.jobs);
            if let Some(running) = all.running {
                return Answered::refused(
                    StatusCode::CONFLICT,
                    format!(
                        "job {running} ({}) is still running: this console runs one job at a time; start this one when it ends",
                        all.started[running - 1].action
                    ),
                );
            }
            let job = Arc::new(Job {
                action: redrive.map_or("resend", |r| r.action),
                of: redrive.map_or("stranded", |r| r.id),
                count,
                moved: AtomicUsize::new(0),
                ended: Mutex::new(None),
            });
            all.started.push(job.clone());
            let id = all.started.len();
            all.running = Some(id);
            (id, job)
        };
        let console = Arc::clone(self);
        let running = job.clone();
        tokio::spawn(async move {
            let work = {
                let (console, job) = (console.clone(), job.clone());
                tokio::spawn(async move { console.run(redrive, (count, pace), &job.moved).await })
            };
            let ended = work
                .await
                .unwrap_or_else(|e| Err(format!("the job stopped: {e}")));
            match &ended {
                Ok((moved, _)) => tracing::info!(job = id, moved, "console: job ended"),
                Err(why) => tracing::warn!(job = id, "console: job failed: {why}"),
            }
            let mut all = lock(&console.jobs);
            *lock(&job.ended) = Some(ended);
            all.running = None;
        });
        tracing::info!(
            job = id,
            action = running.action,
            count,
            "console: job started"
        );
        Answered {
            status: StatusCode::ACCEPTED,
            body: running.view(id),
        }
    }

    /// A job's work, through the command line's own functions (each writes its audit entry
    /// when it starts and its result when it ends): how many moved and its sentence, or its
    /// failure's.
    async fn run(
        &self,
        redrive: Option<Redrive>,
        (count, pace): (usize, Option<u16>),
        moved: &AtomicUsize,
    ) -> Result<(usize, String), String> {
        if let Some(r) = redrive {
            let done = crate::ops::redrive_in(
                &self.stack,
                r.names,
                r.queues,
                (count, pace),
                Some(&self.actor),
                Some(moved),
            )
            .await
            .map_err(|f| said(&f))?;
            Ok((
                done.moved(),
                format!(
                    "moved {} from {}",
                    counted(done.moved(), "message"),
                    r.from_to
                ),
            ))
        } else {
            let after = paymos_inbox_core::roads::sweep::DEFAULT_SWEEP_AFTER_SECS;
            let s = crate::ops::resend_in(
                &self.stack,
                &self.ledger,
                (after, count),
                Some(&self.actor),
                Some(moved),
            )
            .await
            .map_err(|f| said(&f))?;
            Ok((
                s.resent,
                format!(
                    "{} stranded, {} sent again, {} taken by someone else meanwhile, {} failed (try again), {} without a body (replay them from Paymos' dashboard)",
                    s.found, s.resent, s.skipped, s.failed, s.bodiless
                ),
            ))
        }
    }

    /// A state-changing action (`release`, `mark-paid`, `recheck`, `resolve`, `events-resend`, and the
    /// jobs `redrive`, `events-redrive`, `resend`), its fields in `body`.
    pub async fn act(self: &Arc<Self>, action: &str, body: &[u8]) -> Answered {
        // Refused before any use case runs: none could write its change, or its audit entry.
        if let Some(why) = self.read_only() {
            tracing::warn!(action, "console: refused: {why}");
            return Answered::refused(StatusCode::FORBIDDEN, why);
        }
        let Ok(fields) = serde_json::from_slice::<Value>(body) else {
            return Answered::refused(StatusCode::BAD_REQUEST, "the body is a JSON object");
        };
        let text = |name: &str| {
            fields[name]
                .as_str()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        // An id given is one exactly, as on the command line ([`crate::exit::id`]): never blank
        // (which would mark a payment with no order), never with spaces around it.
        for name in ["id", "order_id", "project"] {
            if let Some(given) = fields[name].as_str()
                && let Err(why) = crate::exit::id(given)
            {
                return Answered::refused(StatusCode::BAD_REQUEST, format!("{name} {why}"));
            }
        }
        let Some(resource) = text("id") else {
            return Answered::refused(StatusCode::BAD_REQUEST, "which one: an id is needed");
        };
        let answered = match action {
            "release" => {
                let project = text("project");
                self.release(
                    &resource,
                    (text("reason"), project.as_deref()),
                    fields["override_amount"] == true,
                )
                .await
            }
            "mark-paid" => {
                let given = crate::ops::OrderGiven {
                    order_id: text("order_id"),
                    project: text("project"),
                    amount: text("amount"),
                    currency: text("currency"),
                };
                match crate::ops::refused_project(&self.stack, &resource, given.project.as_deref())
                    .await
                {
                    // The record is another project's, or the stack needs one named: 409.
                    Ok(Some(why)) => Answered::refused(StatusCode::CONFLICT, why),
                    Ok(None) => self.mark_paid(&resource, given).await,
                    Err(f) => Answered::failed(&f),
                }
            }
            "recheck" => self.recheck(&resource).await,
            "resolve" => self.resolve(&resource, text("reason")).await,
            "events-resend" => self.events_resend(&resource).await,
            "redrive" | "events-redrive" | "resend" => self.start(
                action,
                fields["count"].as_u64(),
                fields["per_second"].as_u64(),
            ),
            _ => Answered::refused(StatusCode::NOT_FOUND, format!("no action {action}")),
        };
        tracing::info!(
            action,
            resource = %resource,
            actor = %self.actor,
            status = answered.status.as_u16(),
            "console: action"
        );
        answered
    }

    /// A delivery a person settled outside the stack, off what waits (`exceptions --resolve`).
    async fn resolve(&self, event_id: &str, reason: Option<String>) -> Answered {
        let Some(reason) = reason else {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                "resolving from the console needs a reason: say how it was settled",
            );
        };
        match crate::exceptions::resolve_in(
            (&self.stack, &self.ledger),
            event_id,
            None,
            (&self.actor, &reason),
        )
        .await
        {
            Ok(was) => {
                Answered::ok(json!({"id": event_id, "outcome": "resolved", "was": was.as_str()}))
            }
            Err(f) if f.kind == crate::exit::Kind::Usage => {
                Answered::refused(StatusCode::CONFLICT, f.message)
            }
            Err(f) => Answered::failed(&f),
        }
    }

    async fn mark_paid(&self, invoice_id: &str, given: crate::ops::OrderGiven) -> Answered {
        match crate::ops::mark_paid_in(&self.stack, invoice_id, given, &self.actor).await {
            Ok(applied) => Answered::ok(json!({"id": invoice_id, "outcome": applied.as_str(),
                "waits": crate::ops::waits_for_person(applied)})),
            Err(f) => Answered::failed(&f),
        }
    }

    async fn release(
        &self,
        invoice_id: &str,
        (reason, project): (Option<String>, Option<&str>),
        override_amount: bool,
    ) -> Answered {
        if let Err(e) = crate::exceptions::an_invoice_id(invoice_id) {
            return Answered::refused(StatusCode::BAD_REQUEST, e);
        }
        let Some(reason) = reason else {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                "a release from the console needs a reason: say why this payment ships",
            );
        };
        let by = ReleaseBy {
            actor: &self.actor,
            reason: Some(&reason),
            override_amount,
            project,
        };
        match crate::exceptions::release_in(
            (&self.stack, self.state.clone(), &self.ledger),
            self.api.clone(),
            invoice_id,
            &by,
        )
        .await
        {
            Ok(applied) => Answered::ok(json!({"id": invoice_id, "outcome": applied.as_str()})),
            Err(crate::exceptions::Unreleased::Refused(why)) => {
                Answered::refused(StatusCode::CONFLICT, why)
            }
            Err(crate::exceptions::Unreleased::Failed(f)) => Answered::failed(&f),
        }
    }

    /// One resource's facts published again, through the command line's
    /// [`crate::handoff::resend_in`]: what `events resend --resource` publishes and records.
    async fn events_resend(&self, resource_id: &str) -> Answered {
        if let Err(f) = crate::handoff::a_resource(resource_id) {
            return Answered::failed(&f);
        }
        let target = match &self.publish_to {
            Ok(target) => target,
            Err(f) => return Answered::failed(f),
        };
        let environment = match crate::handoff::environment_of(&self.stack, None) {
            Ok(e) => e,
            Err(f) => return Answered::failed(&f),
        };
        let which = crate::handoff::Facts::Resource(resource_id.to_owned());
        match crate::handoff::resend_in(&self.stack, target, &which, environment, Some(&self.actor))
            .await
        {
            Ok(events) => Answered::ok(json!({
                "id": resource_id,
                "count": events.len(),
                "published": events.iter().map(|e| json!({
                    "detail_type": e.detail_type,
                    "idempotency_key": e.idempotency_key,
                })).collect::<Vec<_>>(),
            })),
            Err(f) => Answered::failed(&f),
        }
    }

    async fn recheck(&self, resource_id: &str) -> Answered {
        let Some(client) = self.api.clone() else {
            return Answered::refused(
                StatusCode::CONFLICT,
                "recheck asks Paymos' API: start the console with PAYMOS_API_KEY and PAYMOS_API_SECRET (or --api-key, --api-secret)",
            );
        };
        match crate::exceptions::recheck_in(
            (&self.stack, self.state.clone(), &self.ledger),
            client,
            (None, Some(&self.actor)),
            Some(resource_id),
        )
        .await
        {
            Ok(results) => Answered::ok(json!({"id": resource_id, "rechecked": results})),
            Err(f) => Answered::failed(&f),
        }
    }
}

/// The home page's JSON: the total, then each kind's items in [`KINDS`]' order (a kind this
/// version does not know comes last, never dropped).
fn home(found: &[Exception], now: u64, about: Value) -> Value {
    let mut kinds: Vec<&str> = KINDS.to_vec();
    for e in found {
        if !kinds.contains(&e.kind) {
            kinds.push(e.kind);
        }
    }
    let groups: Vec<Value> = kinds
        .iter()
        .map(|kind| {
            let items: Vec<Value> = found
                .iter()
                .filter(|e| e.kind == *kind)
                .map(|e| item(e, now))
                .collect();
            json!({"kind": kind, "count": items.len(), "items": items})
        })
        .collect();
    json!({"total": found.len(), "groups": groups, "about": about})
}

/// The work queue's and the dead-letter queue's depths (one attribute each), the oldest
/// delivery recorded but not processed (the `pending-by-age` index, one item), the last
/// reconciliation's verdict (the checkpoint a clean scheduled run keeps, one item) and the
/// stack's alarms: the console's header and `status`. A read that fails is said in its place.
pub(crate) async fn header(stack: &Stack, state: &DynamoResources, ledger: &DynamoLedger) -> Value {
    use paymos_inbox_core::roads::reconcile::ReconcileCheckpoint as _;
    let depth = async |queue: &Option<String>| match queue.as_deref() {
        Some(url) => paymos_inbox_aws::sqs::approximate_messages(&stack.sqs, url)
            .await
            .map_or_else(|e| json!({"unavailable": e.to_string()}), |n| json!(n)),
        None => Value::Null,
    };
    let now = now_ms();
    let oldest = match ledger.pending(1).await {
        Ok(list) => list.first().map_or(Value::Null, |p| {
            json!({"event_id": p.event_id, "event_type": p.event_type,
                   "resource_id": p.resource_id,
                   "age_secs": now.saturating_sub(p.received_at_ms) / 1000})
        }),
        Err(e) => json!({"unavailable": e.to_string()}),
    };
    let reconciled = match state.clean_until().await {
        Ok(until) => reconciliation(until, now),
        Err(e) => json!({"unavailable": e.to_string()}),
    };
    let read = match &stack.alarms {
        Some(alarms) => Some(alarms.read().await.map_err(|e| e.to_string())),
        None => None,
    };
    json!({
        "work_queue": depth(&stack.queue).await,
        "dead_letters": depth(&stack.dlq).await,
        "oldest_pending": oldest,
        "reconciliation": reconciled,
        "alarms": alarms(&stack.named_by, read),
    })
}

/// The last reconciliation's verdict from what the scheduled run keeps
/// ([`paymos_inbox_core::money::write::reconciled`]): only a run that found nothing for a person keeps
/// where its window ended (a failed run, or one with findings, alarms and keeps nothing).
fn reconciliation(clean_until: Option<u64>, now_ms: u64) -> Value {
    let Some(until) = clean_until else {
        return json!({"verdict": "never run clean: no scheduled reconciliation has yet ended finding nothing for a person"});
    };
    let at = i64::try_from(until)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| format!("{until} (Unix seconds)"), |t| t.to_string());
    json!({
        "clean_until_ms": until.saturating_mul(1000),
        "age_secs": (now_ms / 1000).saturating_sub(until),
        "verdict": format!("clean through {at}: nothing for a person in Paymos' invoices up to then"),
    })
}

/// The header's alarms: how many are in ALARM, then each alarm (as [`states`] orders them:
/// ALARM, INSUFFICIENT_DATA, OK); a read that failed, said in its place; or why the stack has
/// none to read (`dev` has no CloudWatch).
///
/// [`states`]: paymos_inbox::tools::alarms::states
fn alarms(named_by: &NamedBy, read: Option<Result<Vec<Alarm>, String>>) -> Value {
    match read {
        Some(Ok(alarms)) => json!({
            "in_alarm": alarms.iter().filter(|a| a.state == AlarmState::Alarm).count(),
            "alarms": alarms.iter().map(|a| json!({
                "name": a.name,
                "state": a.state.as_str(),
                "reason": a.reason,
                "since_ms": a.since_ms,
            })).collect::<Vec<_>>(),
        }),
        Some(Err(why)) => json!({"unavailable": why}),
        None => match named_by {
            NamedBy::DevInfo(_) => json!({"none": "no alarms on dev"}),
            NamedBy::Stack(_) | NamedBy::Flags => json!({
                "none": "no stack named: the alarms are read from a deployed stack's resources (--stack-name or --config-env)"
            }),
        },
    }
}

/// Where a paid invoice stands, in the page's words.
fn standing(standing: &Standing) -> String {
    match standing {
        Standing::Clear => "clear: nothing waits".to_owned(),
        Standing::Held => "held: paid, but not as the registered order says".to_owned(),
        Standing::DuplicateOf(winner) => format!("a second payment: {winner} fulfilled its order"),
        Standing::PaidLate => "paid after it closed".to_owned(),
        Standing::Released => "released by a person".to_owned(),
        Standing::Refunded => "refunded in full".to_owned(),
        Standing::OrderUnknown => "paid, its order known nowhere".to_owned(),
        Standing::AfterRefund => "paid after a full refund? a person decides".to_owned(),
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

/// One project's order for its story: which invoice claimed it (by whose write, when), and
/// the amount and currency it was registered for.
fn order(project: Option<&str>, on_record: &OrderOnRecord) -> Value {
    json!({
        "project": project,
        "claim": on_record.claim.as_ref().map(|c| json!({
            "invoice_id": c.invoice_id,
            "won_by": c.won_by,
            "paid_at_ms": c.paid_at_ms,
        })),
        "registered": on_record.registered.as_ref().map(|r| json!({
            "amount": r.amount.as_ref().map(ToString::to_string),
            "currency": r.currency,
        })),
    })
}

/// One thing that waits, as the page shows it: its way out names the page's own buttons.
fn item(e: &Exception, now: u64) -> Value {
    let mut v = serde_json::to_value(e).expect("an exception serialises");
    v["action"] = json!(super::do_line::on_the_page(e));
    v["age_secs"] = if e.since_ms == 0 {
        Value::Null
    } else {
        json!(now.saturating_sub(e.since_ms) / 1000)
    };
    v
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

    // The console answers a failure with the HTTP status its kind decides, from the
    // exit code's own table, and says it as the command line does (its sentence and next step).
    #[test]
    fn a_failure_is_answered_with_the_status_of_its_kind() {
        use paymos_inbox_core::port::{PortError, PortErrorKind};
        for (failure, status) in [
            (Failure::usage("--id is empty"), StatusCode::BAD_REQUEST),
            (
                Failure::from(PortError::of_kind(
                    "DynamoDB Query",
                    PortErrorKind::Throttled,
                    "ProvisionedThroughputExceededException",
                )),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                Failure::from(PortError::new(
                    "DynamoDB Query",
                    "dispatch failure: User x is not authorized to perform: dynamodb:Query",
                )),
                StatusCode::BAD_GATEWAY,
            ),
            (
                Failure::from(PortError::refused_credential(
                    "DynamoDB Query",
                    "UnrecognizedClientException",
                )),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (
                Failure::from(PortError::of_kind(
                    "DynamoDB TransactWriteItems",
                    PortErrorKind::Conflict,
                    "TransactionConflict",
                )),
                StatusCode::CONFLICT,
            ),
        ] {
            let answered = Answered::failed(&failure);
            assert_eq!(answered.status, status, "{failure:?}");
            assert_eq!(answered.status, failure.status());
            assert_eq!(answered.body["refused"], json!(said(&failure)));
        }
    }

    fn exception(kind: &'static str, since_ms: u64) -> Exception {
        Exception {
            kind,
            resource_id: Some("inv_1".into()),
            event_id: None,
            project: None,
            since_ms,
            why: "why".into(),
            action: "do".into(),
        }
    }

    #[test]
    fn home_counts_each_kind_in_its_order_and_keeps_a_kind_it_does_not_know() {
        let found = [
            exception("unconfirmed", 1_000),
            exception("held", 0),
            exception("held", 1_000),
            exception("something_new", 1_000),
        ];
        let page = home(&found, 61_000, Value::Null);
        assert_eq!(page["total"], 4);
        let groups = page["groups"].as_array().unwrap();
        let counts: Vec<(&str, u64)> = groups
            .iter()
            .map(|g| (g["kind"].as_str().unwrap(), g["count"].as_u64().unwrap()))
            .collect();
        assert_eq!(counts[0], ("held", 2));
        assert_eq!(counts[3], ("unconfirmed", 1));
        assert_eq!(counts.last().unwrap(), &("something_new", 1));
        assert_eq!(counts.iter().map(|c| c.1).sum::<u64>(), 4);
        assert_eq!(groups[0]["items"][0]["age_secs"], Value::Null);
        assert_eq!(groups[0]["items"][1]["age_secs"], 60);
    }

    #[test]
    fn the_reconciliations_verdict_is_where_the_last_clean_run_ended_or_never() {
        let never = reconciliation(None, 1_000_000);
        assert!(
            never["verdict"]
                .as_str()
                .unwrap()
                .starts_with("never run clean"),
            "{never}"
        );
        assert_eq!(never["clean_until_ms"], Value::Null);
        let clean = reconciliation(Some(1_796_000_000), 1_796_003_600_000);
        assert_eq!(clean["clean_until_ms"], 1_796_000_000_000_u64);
        assert_eq!(clean["age_secs"], 3600);
        assert!(
            clean["verdict"]
                .as_str()
                .unwrap()
                .starts_with("clean through 2026-11-30T00:53:20Z"),
            "{clean}"
        );
    }

    #[test]
    fn the_header_counts_the_alarms_in_alarm_and_lists_each_with_its_state() {
        let alarm = |name: &str, state| Alarm {
            name: name.into(),
            state,
            reason: Some("Threshold Crossed".into()),
            since_ms: Some(1_000),
        };
        let stack = NamedBy::Stack("shop".into());
        let read = vec![
            alarm("shop-DeadLetters", AlarmState::Alarm),
            alarm("shop-Errors", AlarmState::Alarm),
            alarm("shop-Throttles", AlarmState::InsufficientData),
            alarm("shop-Age", AlarmState::Ok),
        ];
        let header = alarms(&stack, Some(Ok(read)));
        assert_eq!(header["in_alarm"], 2, "{header}");
        let shown: Vec<(&str, &str)> = header["alarms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["name"].as_str().unwrap(), a["state"].as_str().unwrap()))
            .collect();
        assert_eq!(
            shown,
            [
                ("shop-DeadLetters", "ALARM"),
                ("shop-Errors", "ALARM"),
                ("shop-Throttles", "INSUFFICIENT_DATA"),
                ("shop-Age", "OK"),
            ]
        );
        assert_eq!(header["alarms"][0]["since_ms"], 1_000);

        let calm = alarms(&stack, Some(Ok(vec![alarm("shop-Age", AlarmState::Ok)])));
        assert_eq!(calm["in_alarm"], 0, "{calm}");

        let failed = alarms(&stack, Some(Err("AccessDenied".into())));
        assert_eq!(failed["unavailable"], "AccessDenied", "{failed}");
        assert_eq!(failed["in_alarm"], Value::Null);

        let dev = alarms(&NamedBy::DevInfo("dev.json".into()), None);
        assert_eq!(dev["none"], "no alarms on dev", "{dev}");
        assert_eq!(dev["unavailable"], Value::Null);
        let flags = alarms(&NamedBy::Flags, None);
        assert!(
            flags["none"]
                .as_str()
                .unwrap()
                .starts_with("no stack named"),
            "{flags}"
        );
    }

    #[test]
    fn a_jobs_view_counts_what_moved_while_it_runs_then_says_how_it_ended() {
        let job = Job {
            action: "redrive",
            of: "work-queue",
            count: 3,
            moved: AtomicUsize::new(0),
            ended: Mutex::new(None),
        };
        job.moved.store(2, Ordering::Relaxed);
        let running = job.view(7);
        assert_eq!(
            running,
            json!({"job": 7, "action": "redrive", "of": "work-queue", "count": 3, "moved": 2,
                   "done": false})
        );
        *lock(&job.ended) = Some(Ok((3, "moved 3 messages".into())));
        let ended = job.view(7);
        assert_eq!((&ended["done"], &ended["moved"]), (&json!(true), &json!(3)));
        assert_eq!(ended["result"], "moved 3 messages");
        assert_eq!(ended["error"], Value::Null);
        *lock(&job.ended) = Some(Err("SendMessage: denied".into()));
        let failed = job.view(7);
        assert_eq!(
            (&failed["done"], &failed["moved"]),
            (&json!(true), &json!(2))
        );
        assert_eq!(failed["error"], "SendMessage: denied");
    }

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
