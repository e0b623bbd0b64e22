//! `check`, `pending`, `redrive` and `mark-paid`: operating a receiver.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use paymos_inbox::tools::check::{self, CheckOptions, MarkPaid, Probe, Tables};
use paymos_inbox_aws::dynamodb::DynamoLedger;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::money::change::OrderRef;
use paymos_inbox_core::money::record::ActionKind;
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::ingest::{Delivery, WorkQueue};
use paymos_inbox_core::wire::signature::WebhookSecret;
use paymos_inbox_lambda::now_ms;

use crate::FIXTURE_SECRET;
use crate::exit::Failure;
use crate::failed as fail;
use crate::stack::{ApiArgs, OptionalApiArgs, Stack, StackArgs};

/// Runs `work`, showing `label` and the elapsed seconds on stderr while it runs, when stderr is
/// a terminal (never in pipes, files or CI logs).
pub(crate) async fn with_progress<T>(label: &str, work: impl std::future::Future<Output = T>) -> T {
    let label = label.to_owned();
    with_progress_of(move || label.clone(), false, work).await
}

/// Runs `work`, showing `line()` and the elapsed seconds on stderr while it runs: rewritten in
/// place on a terminal; every 10 s as plain lines elsewhere when `also_plain`, else nothing.
pub(crate) async fn with_progress_of<T>(
    line: impl Fn() -> String + Send + 'static,
    also_plain: bool,
    work: impl std::future::Future<Output = T>,
) -> T {
    use std::io::{IsTerminal, Write};
    let terminal = std::io::stderr().is_terminal();
    if !terminal && !also_plain {
        return work.await;
    }
    let started = std::time::Instant::now();
    let ticker = tokio::spawn(async move {
        loop {
            if terminal {
                eprint!(
                    "\r\x1b[2K{}: {} s",
                    crate::shown::shown(&line()),
                    started.elapsed().as_secs()
                );
                let _ = std::io::stderr().flush();
                tokio::time::sleep(Duration::from_secs(1)).await;
            } else {
                tokio::time::sleep(Duration::from_secs(10)).await;
                tell!("{}: {} s", line(), started.elapsed().as_secs());
            }
        }
    });
    let out = work.await;
    ticker.abort();
    if terminal {
        eprint!("\r\x1b[2K");
    }
    out
}

/// Bad usage or input, found before any I/O (exit 2).
fn usage(e: impl Into<String>) -> ExitCode {
    crate::exit::Failure::usage(e).report()
}

/// Whether anyone listens at the receiver's address: a receiver nobody answers for is not a
/// failed step (nothing was proven or disproven), it is unreachable (exit 4).
async fn answers(receiver: &reqwest::Url) -> Result<(), crate::exit::Failure> {
    let Some(address) = receiver
        .socket_addrs(|| None)
        .ok()
        .and_then(|a| a.first().copied())
    else {
        return Ok(());
    };
    let reached = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect(address),
    )
    .await;
    if matches!(reached, Ok(Ok(_))) {
        Ok(())
    } else {
        Err(crate::exit::Failure::unreachable(format!(
            "could not reach the receiver at {receiver}"
        ))
        .next("is it running? for `dev`, its URL is in dev.json (`paymos-inbox dev` prints it)"))
    }
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The receiver to check.
    url: String,
    /// The secret the receiver holds.
    #[arg(long, env = "PAYMOS_WEBHOOK_SECRET", hide_env_values = true, default_value = FIXTURE_SECRET, hide_default_value = true)]
    secret: String,
    /// Send live events (data.is_test = false) instead of sandbox ones.
    #[arg(long)]
    live: bool,
    /// How many copies collide in step 3.
    #[arg(long, default_value_t = 5)]
    collisions: usize,
    /// Seconds to keep retrying a 503 or a timeout, and to wait for a row to appear.
    #[arg(long, default_value_t = 40)]
    patience: u64,
    /// Seconds to wait after a 2xx before counting rows (time to ship twice, if it would).
    #[arg(long, default_value_t = 3.0)]
    settle: f64,
    /// A shell command printing how many order rows the receiver holds; {invoice_id},
    /// {order_id} and {event_id} are filled in. Example:
    /// psql -tA -c "select count(*) from orders where paymos_invoice_id = '{invoice_id}'"
    #[arg(long, conflicts_with = "orders_url")]
    orders_cmd: Option<String>,
    /// A URL answering that count (a number, or JSON with "count"); same placeholders.
    #[arg(long)]
    orders_url: Option<String>,
    /// A shell command that marks an order paid by hand, as support would (step 4).
    #[arg(long, conflicts_with = "mark_paid_url")]
    mark_paid_cmd: Option<String>,
    /// A URL to POST to that marks an order paid by hand (step 4).
    #[arg(long)]
    mark_paid_url: Option<String>,
    #[command(flatten)]
    api: OptionalApiArgs,
    /// Step 5 with the API: how many hours of paid invoices to compare.
    #[arg(long, default_value_t = 48)]
    since_hours: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The project the receiver applies (prj_…), which steps 1 to 5 pay in (default: `dev`'s
    /// home project with --dev-info, else prj_local, what `send` names)
    #[arg(long, value_parser = crate::exit::id)]
    project: Option<String>,
    #[command(flatten)]
    stack: StackArgs,
}

/// The project `check` pays steps 1 to 5 in: a receiver that applies only its own projects
/// takes them in one of them (--project, else `dev`'s home project, else `send`'s prj_local).
fn check_project(args: &CheckArgs) -> String {
    args.project
        .clone()
        .or_else(|| {
            args.stack
                .given()
                .then(|| args.stack.running_dev())
                .flatten()
                .and_then(|d| d.projects.first().cloned())
        })
        .unwrap_or_else(|| "prj_local".to_owned())
}

pub async fn check(args: CheckArgs) -> ExitCode {
    let receiver = match reqwest::Url::parse(&args.url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
        _ => {
            return crate::exit::Failure::usage(format!("{}: not an http(s) URL", args.url))
                .next("pass the receiver's URL whole, like http://127.0.0.1:8787/")
                .report();
        }
    };
    if let Err(e) = answers(&receiver).await {
        return e.report();
    }
    let api = match args.api.client() {
        Ok(client) => client.map(|c| {
            (
                std::sync::Arc::new(c),
                Duration::from_secs(args.since_hours * 3600),
            )
        }),
        Err(e) => return usage(e),
    };
    let tables = if args.stack.given() {
        match args.stack.resolve().await {
            Ok(s) => match (s.deliveries, s.state) {
                (Some(deliveries), Some(state)) => Some(Tables {
                    dynamodb: s.dynamodb,
                    deliveries,
                    state,
                    projects: s.projects,
                }),
                _ => {
                    return usage(
                        "the business checks need both the deliveries and the state table",
                    );
                }
            },
            Err(e) => return fail(e),
        }
    } else {
        None
    };
    let probe = match (&args.orders_cmd, &args.orders_url, &tables) {
        (Some(cmd), _, _) => Some(Probe::Command(cmd.clone())),
        (_, Some(url), _) => Some(Probe::Url(url.clone())),
        (_, _, Some(t)) => Some(Probe::Tables(t.clone())),
        _ => None,
    };
    let mark_paid = match (&args.mark_paid_cmd, &args.mark_paid_url, &tables) {
        (Some(cmd), _, _) => Some(MarkPaid::Command(cmd.clone())),
        (_, Some(url), _) => Some(MarkPaid::Url(url.clone())),
        (_, _, Some(t)) => Some(MarkPaid::Tables(t.clone())),
        _ => None,
    };
    let project = check_project(&args);
    let options = CheckOptions {
        url: args.url,
        project,
        secret: WebhookSecret::new(args.secret),
        wrong_secret: WebhookSecret::new("whsec_test_paymos_inbox_check_wrong_secret"),
        live: args.live,
        collisions: args.collisions,
        patience: Duration::from_secs(args.patience),
        timeout: paymos_inbox::tools::send::SENDER_TIMEOUT,
        settle: Duration::from_secs_f64(args.settle.max(0.0)),
        probe,
        mark_paid,
        api,
    };
    let steps = with_progress("checking (6 steps)", check::run(options)).await;
    if args.json {
        for s in &steps {
            say!("{}", serde_json::to_string(s).expect("steps serialise"));
        }
    } else {
        say!("step  result   what it proves / evidence");
        for s in &steps {
            say!("{:<5} {:<8} {}", s.number, s.verdict.to_uppercase(), s.name);
            for e in &s.evidence {
                say!("{:<14} {e}", "");
            }
            if let Some(m) = &s.missing {
                say!("{:<14} UNPROVEN: {m}", "");
            }
        }
    }
    if steps.iter().any(|s| s.verdict == "fail") {
        ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
    } else if steps.iter().any(|s| s.verdict == "unproven") {
        ExitCode::from(crate::exit::UNPROVEN)
    } else {
        ExitCode::SUCCESS
    }
}

/// A count of at least one (`pending --limit`): bad input otherwise (exit 2).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("0 would list nothing: give 1 or more".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

#[derive(clap::Args)]
pub struct PendingArgs {
    /// At most this many, oldest first (1 or more: 0 would list nothing and say all is well).
    #[arg(long, default_value_t = 50, value_parser = at_least_one)]
    limit: usize,
    /// Send again every pending delivery received more than --older-than seconds ago whose
    /// lease is over (what the scheduled sweep does), through the same conditional take-over
    /// a retry uses; needs --queue-url.
    #[arg(long)]
    resend: bool,
    /// With --resend: only deliveries received at least this many seconds ago.
    #[arg(long, default_value_t = paymos_inbox_core::roads::sweep::DEFAULT_SWEEP_AFTER_SECS)]
    older_than: u64,
    /// With --resend, who acts, on `dev` (the audit trail's actor; on AWS it is your
    /// credentials' identity).
    #[arg(value_parser = crate::exit::named, long, requires = "resend")]
    actor: Option<String>,
    /// Print JSON lines.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
}

pub async fn pending(args: PendingArgs) -> ExitCode {
    let stack = match args.stack.resolve().await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let ledger = match stack.ledger() {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if args.resend {
        let job = (args.older_than, args.limit);
        return match resend_in(&stack, &ledger, job, args.actor.as_deref(), None).await {
            Ok(swept) if args.json => {
                say!("{}", serde_json::json!({ "resend": swept }));
                ExitCode::SUCCESS
            }
            Ok(swept) => {
                say!(
                    "{} stranded, {} sent again, {} taken by someone else meanwhile, {} failed (try again), {} without a body (replay them from Paymos' dashboard)",
                    swept.found,
                    swept.resent,
                    swept.skipped,
                    swept.failed,
                    swept.bodiless
                );
                if swept.failed > 0 || swept.bodiless > 0 {
                    ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(e) => e.report(),
        };
    }
    match ledger.pending(args.limit).await {
        Ok(list) => {
            let now = now_ms();
            if !args.json {
                // Listed by their delayed check (issue 51): a younger delivery that fulfil has not
                // applied yet is a message in flight on the work queue, which `status` counts.
                say!(
                    "{} recorded but not processed, as their delayed check found them ({} min after receipt, by default; younger ones are not listed yet: `paymos-inbox status` counts the work queue's messages in flight)",
                    paymos_inbox::counted(list.len(), "delivery"),
                    paymos_inbox_core::roads::ingest::DEFAULT_CHECK_AFTER_SECS / 60
                );
            }
            for p in list {
                let age = now.saturating_sub(p.received_at_ms) / 1000;
                if args.json {
                    say!("{}", serde_json::json!({"pending": p, "age_secs": age}));
                } else {
                    let sweep_after = paymos_inbox_core::roads::sweep::DEFAULT_SWEEP_AFTER_SECS;
                    let lease = if p.lease_until_ms > now {
                        "in flight: an attempt holds it"
                    } else if age < sweep_after {
                        "lease over: a retry from Paymos or the next sweep sends it again"
                    } else {
                        "stranded: the scheduled sweep sends it again (or run pending --resend now)"
                    };
                    say!(
                        "{}  {:<34} {:<12} age {age}s  sent {}x  {lease}",
                        p.event_id,
                        p.event_type,
                        p.resource_id.as_deref().unwrap_or("-"),
                        p.enqueue_attempts
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `pending --resend`, as the command and the console run it: every delivery received more
/// than `older_than` seconds ago whose lease is over (at most `limit`) sent again through the
/// same conditional take-over a retry uses; recorded in the audit trail with its counts.
/// `sent`, when given, counts each one sent again as it goes (a console job's progress).
///
/// # Errors
/// No work queue or state table named (exit 2), or a read's, take-over's, send's, STS's or
/// the audit entry's failure.
pub(crate) async fn resend_in(
    stack: &Stack,
    ledger: &DynamoLedger,
    (older_than, limit): (u64, usize),
    actor: Option<&str>,
    sent: Option<&AtomicUsize>,
) -> Result<paymos_inbox_core::roads::sweep::Swept, crate::exit::Failure> {
    let unseen = AtomicUsize::new(0);
    let queue = Counting {
        queue: SqsQueue::new(stack.sqs.clone(), stack.require(&stack.queue, "queue-url")?),
        sent: sent.unwrap_or(&unseen),
    };
    crate::audit::recordable(stack)?;
    let actor = crate::audit::who(stack, actor).await?;
    let begun = crate::audit::begin(stack, ActionKind::Resend, &actor, "stranded", None).await?;
    let now = now_ms();
    let done = paymos_inbox_core::roads::sweep::resend_stranded(
        ledger,
        &queue,
        paymos_inbox_core::roads::ingest::DEFAULT_LEASE_SECS,
        now.saturating_sub(older_than * 1000),
        now,
        limit,
    )
    .await
    .map_err(Failure::from);
    crate::audit::finish(stack, &begun, done, |swept| {
        let result = format!(
            "{} stranded, {} sent again, {} taken by someone else, {} failed, {} without a body",
            swept.found, swept.resent, swept.skipped, swept.failed, swept.bodiless
        );
        (result, u64::try_from(swept.resent).ok())
    })
    .await
}

/// The work queue, counting each send that succeeded.
struct Counting<'a> {
    queue: SqsQueue,
    sent: &'a AtomicUsize,
}

impl WorkQueue for Counting<'_> {
    async fn enqueue(&self, delivery: &Delivery) -> Result<(), PortError> {
        let sent = self.queue.enqueue(delivery).await;
        if sent.is_ok() {
            self.sent.fetch_add(1, Ordering::Relaxed);
        }
        sent
    }
}

#[derive(clap::Args)]
pub struct RedriveArgs {
    /// Move at most this many messages.
    #[arg(long, default_value_t = 1000)]
    max: usize,
    /// Who acts, on `dev` (the audit trail's actor; on AWS it is your credentials' identity).
    #[arg(value_parser = crate::exit::named, long)]
    actor: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
}

pub async fn redrive(args: RedriveArgs) -> ExitCode {
    move_back(
        &args.stack,
        ("queue-url", "dlq-url"),
        |stack| (stack.queue.clone(), stack.dlq.clone()),
        (args.max, None),
        (args.json, args.actor.as_deref()),
        "the work queue",
    )
    .await
}

/// Moves a dead-letter queue's messages back to its queue (the two named by `queues` of the
/// resolved stack; their options' names in `names`), at most `max`, `per_second` when given,
/// by `actor` (on `dev`), and says how many moved.
pub async fn move_back(
    stack: &StackArgs,
    names: (&str, &str),
    queues: impl Fn(&Stack) -> (Option<String>, Option<String>),
    (max, per_second): (usize, Option<u16>),
    (json, actor): (bool, Option<&str>),
    to: &str,
) -> ExitCode {
    let stack = match stack.resolve().await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match redrive_in(&stack, names, queues, (max, per_second), actor, None).await {
        Ok(done) => {
            let how = match done {
                paymos_inbox_local::redrive::Redriven::ByTask(_) => "sqs_message_move_task",
                paymos_inbox_local::redrive::Redriven::OneByOne(_) => "one_by_one",
            };
            if json {
                say!(
                    "{}",
                    serde_json::json!({"moved": done.moved(), "how": how, "per_second": per_second})
                );
            } else {
                let pace = per_second.map_or(String::new(), |n| format!(", at most {n} a second"));
                say!(
                    "moved {} from the DLQ back to {to} ({how}{pace})",
                    paymos_inbox::counted(done.moved(), "message")
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => e.report(),
    }
}

/// A dead-letter queue's messages moved back to its queue, as `redrive`, `events redrive` and
/// the console run it: the two queues `queues` names of `stack` (their options' names in
/// `names`), at most `max`, `per_second` when given; recorded in the audit trail, under the
/// queue's name (`queue`, `webhook-queue`), with how many moved. `moved`, when given, keeps
/// how many have moved so far while it runs (a console job's progress).
///
/// # Errors
/// A queue or the state table not named (exit 2), or SQS's, STS's or the audit entry's
/// failure.
pub(crate) async fn redrive_in(
    stack: &Stack,
    names: (&str, &str),
    queues: impl Fn(&Stack) -> (Option<String>, Option<String>),
    (max, per_second): (usize, Option<u16>),
    actor: Option<&str>,
    moved: Option<&AtomicUsize>,
) -> Result<paymos_inbox_local::redrive::Redriven, crate::exit::Failure> {
    let (queue, dlq) = queues(stack);
    let queue = stack.require(&queue, names.0)?;
    let dlq = stack.require(&dlq, names.1)?;
    crate::audit::recordable(stack)?;
    let actor = crate::audit::who(stack, actor).await?;
    let subject = names.0.trim_end_matches("-url");
    let begun = crate::audit::begin(stack, ActionKind::Redrive, &actor, subject, None).await?;
    let unseen = AtomicUsize::new(0);
    let done = paymos_inbox_local::redrive::redrive_counted(
        &stack.sqs,
        dlq,
        queue,
        (max, per_second),
        moved.unwrap_or(&unseen),
    )
    .await
    .map_err(Failure::from);
    crate::audit::finish(stack, &begun, done, |done| {
        let moved = done.moved();
        (format!("moved {moved}"), u64::try_from(moved).ok())
    })
    .await
}

#[derive(clap::Args)]
pub struct MarkPaidArgs {
    /// The invoice (inv_…).
    #[arg(value_parser = crate::exit::id)]
    invoice_id: String,
    /// Who is doing this (kept on the fulfilment as manual:<actor>).
    #[arg(value_parser = crate::exit::named, long)]
    actor: String,
    /// The merchant's order id, exactly as the shop wrote it.
    #[arg(value_parser = crate::exit::id, long)]
    order_id: Option<String>,
    /// The project the order belongs to (prj_…): needed where the stack applies several
    /// projects and the invoice's record names none. An order id is unique only within its
    /// project.
    #[arg(value_parser = crate::exit::id, long)]
    project: Option<String>,
    /// The amount paid (exact decimal), with --currency.
    #[arg(long, requires = "currency")]
    amount: Option<String>,
    /// The currency of --amount.
    #[arg(long, requires = "amount")]
    currency: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// With the Paymos API, the invoice is asked of Paymos first and applied as Paymos has it
    /// (its order, price, project and payment time, its refunds recorded before it); nothing
    /// ships where Paymos does not have it paid, or has another order than the one you name.
    /// Without it, on a stack with the reverse check (ReverseCheckOutput, `dev` given the API's
    /// key, --reverse-check on) nothing ships: only Paymos' word makes an invoice paid there;
    /// elsewhere an invoice whose payment or refund delivery Paymos did not confirm (it waits
    /// `unconfirmed`) is refused: only Paymos' word ships it (`recheck`, or this with the API).
    #[command(flatten)]
    api: OptionalApiArgs,
    #[command(flatten)]
    stack: StackArgs,
}

/// What a person says of the order an invoice paid (`mark-paid`'s options, the console's
/// form): checked here, before any I/O.
pub(crate) struct OrderGiven {
    pub order_id: Option<String>,
    pub project: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
}

/// The stack's `mark-paid` of `invoice_id` by `actor`, as the command and the console run it:
/// the same conditional transition as a webhook; recorded in the audit trail once it ran.
///
/// # Errors
/// Bad input (exit 2: the id, the amount, a project not the stack's), or the store's failure.
pub(crate) async fn mark_paid_in(
    stack: &Stack,
    invoice_id: &str,
    given: OrderGiven,
    (actor, api): (&str, Option<&paymos::PaymosClient>),
) -> Result<paymos_inbox_core::money::change::Applied, crate::exit::Failure> {
    crate::exceptions::an_invoice_id(invoice_id).map_err(Failure::usage)?;
    let amount = terms(&given).map_err(Failure::usage)?;
    let fulfil = stack.fulfil()?;
    // Asked of Paymos, its project decides (a --project contradicting it is refused there).
    if api.is_none() {
        if let Some(why) = refused_project(stack, invoice_id, given.project.as_deref()).await? {
            return Err(Failure::usage(why));
        }
        // Nothing Paymos was asked about and did not confirm ships on a word: refused as
        // Paymos' own refusal with the API is (nothing shipped, it stays listed: 409).
        let refused = paymos_inbox_core::roads::exceptions::refuses_word(
            &stack.resources()?,
            &stack.ledger()?,
            invoice_id,
            stack.reverse_check,
        )
        .await
        .map_err(Failure::from)?;
        if let Some(why) = refused {
            return Err(Failure::of(crate::exit::Kind::NeedsAPerson, why));
        }
    }
    stack.scope_of(given.project.as_deref())?;
    let caller = crate::audit::who(stack, Some(actor)).await?;
    let order = OrderRef {
        external_id: given.order_id,
        amount,
        currency: given.currency.map(|c| c.to_ascii_uppercase()),
        project: given.project,
        home: false,
        unlisted: false,
    };
    let named = order
        .external_id
        .as_deref()
        .map_or(String::new(), |o| format!(" (order {o})"));
    let begun = crate::audit::begin(stack, ActionKind::MarkPaid, &caller, invoice_id, None).await?;
    let done = match api {
        Some(client) => {
            let paymos = paymos_inbox_aws::paymos_api::PaymosApi::new(client.clone());
            paymos_inbox_core::roads::reconcile::as_paymos_has_it(
                &paymos,
                &fulfil,
                (invoice_id, &order),
                (&caller, now_ms()),
            )
            .await
            .map_err(asked_first)
        }
        None => fulfil
            .mark_paid(invoice_id, order, &caller, now_ms())
            .await
            .map_err(Failure::from),
    };
    crate::audit::finish(stack, &begun, done, |applied| {
        (format!("{}{named}", applied.as_str()), None)
    })
    .await
}

/// A person's word Paymos did not bear out (exit 1: nothing shipped, a person looks again; the
/// console: 409), a contradiction of what they named (exit 2), or a port's failure.
fn asked_first(e: paymos_inbox_core::roads::reconcile::AskedFirst) -> Failure {
    use paymos_inbox_core::roads::reconcile::AskedFirst;
    match e {
        AskedFirst::Port(e) => Failure::from(e),
        AskedFirst::Contradicts(_) | AskedFirst::ProjectUnnamed(_) => Failure::usage(e.to_string()),
        AskedFirst::Unknown(_) | AskedFirst::OtherProject(..) | AskedFirst::NotPaid(..) => {
            Failure::of(crate::exit::Kind::NeedsAPerson, e.to_string())
        }
    }
}

/// Why a person's word of `invoice_id` naming `project` is refused (a project not the stack's,
/// or not the record's; none named where the record knows none on a stack of several), if it
/// is: the domain's rule ([`paymos_inbox_core::money::change::Projects::refuses_person`]).
///
/// # Errors
/// A project not the stack's (exit 2), or the store's failure.
pub(crate) async fn refused_project(
    stack: &Stack,
    invoice_id: &str,
    project: Option<&str>,
) -> Result<Option<String>, crate::exit::Failure> {
    stack.scope_of(project)?;
    let why = stack
        .fulfil()?
        .refuses_person(invoice_id, project)
        .await
        .map_err(Failure::from)?;
    Ok(why.map(|why| format!("{invoice_id}: {why}")))
}

/// The amount a person gave (with its currency: clap requires both), read by the rule
/// `orders register` reads it by ([`paymos_inbox::tools::exceptions::order_terms`]).
fn terms(given: &OrderGiven) -> Result<Option<Amount>, String> {
    match (&given.amount, &given.currency) {
        (Some(amount), Some(currency)) => {
            paymos_inbox::tools::exceptions::order_terms(amount, currency).map(Some)
        }
        (Some(_), None) | (None, Some(_)) => Err("--amount and --currency go together".into()),
        (None, None) => Ok(None),
    }
}

pub async fn mark_paid(args: MarkPaidArgs) -> ExitCode {
    let given = OrderGiven {
        order_id: args.order_id,
        project: args.project,
        amount: args.amount,
        currency: args.currency,
    };
    // Bad input before any I/O.
    if let Err(e) = crate::exceptions::an_invoice_id(&args.invoice_id).and(terms(&given)) {
        return usage(e);
    }
    let stack = match args.stack.resolve().await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let api = match args.api.client() {
        Ok(api) => api,
        Err(e) => return usage(e),
    };
    match mark_paid_in(&stack, &args.invoice_id, given, (&args.actor, api.as_ref())).await {
        Ok(applied) => {
            if args.json {
                say!(
                    "{}",
                    serde_json::json!({"invoice_id": args.invoice_id, "outcome": applied.as_str()})
                );
            } else {
                say!("{}: {applied}", args.invoice_id);
            }
            if let Some(why) = shipped_nothing(applied) {
                tell!("{}: {why}", args.invoice_id);
                ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
            } else if applied.waits_for_person() {
                ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => e.report(),
    }
}

/// Why a person's `mark-paid` shipped nothing and left nothing listed, when it did: it must not
/// exit 0 as if the order shipped.
pub(crate) fn shipped_nothing(
    applied: paymos_inbox_core::money::change::Applied,
) -> Option<&'static str> {
    use paymos_inbox_core::money::change::Applied;
    match applied {
        Applied::Refunded => Some(
            "nothing shipped: a full refund returned this payment (see `paymos-inbox exceptions`, or the console's story of it)",
        ),
        Applied::OtherProject => Some(
            "nothing shipped: the invoice is another project's, which this stack does not apply (PaymosProjectIds)",
        ),
        Applied::OrderConflict => Some(
            "nothing shipped: this invoice shipped another order, and an invoice pays one order (see its story with the console, or Paymos' dashboard for the order it paid)",
        ),
        _ => None,
    }
}

#[derive(clap::Args)]
pub struct ReconcileArgs {
    /// Start of the window: invoices created at or after this time: a date (2026-11-01, UTC),
    /// a UTC time (2026-11-01T10:00:00Z), a span back from now (48h, 7d) or Unix seconds.
    #[arg(long)]
    from: String,
    /// End of the window, inclusive, in the same forms (default: now).
    #[arg(long)]
    to: Option<String>,
    /// Drive every MISSING invoice through the same conditional transition as a webhook.
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    api: ApiArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
}

pub async fn reconcile(args: ReconcileArgs) -> ExitCode {
    let now = i64::try_from(now_ms() / 1000).unwrap_or(i64::MAX);
    let when = |flag: &str, value: &str| {
        paymos_inbox::tools::when::parse_when(value, now).map_err(|e| format!("{flag} {e}"))
    };
    let window = when("--from", &args.from).and_then(|from| match &args.to {
        Some(to) => when("--to", to).map(|to| (from, to)),
        None => Ok((from, now)),
    });
    let (from, to) = match window.and_then(|(from, to)| checked_window(from, to, now)) {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    let api = match args.api.client(None) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    let stack = match args.stack.resolve().await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let fulfil = match stack.fulfil() {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let report = match with_progress(
        "reconciling",
        paymos_inbox_core::roads::reconcile::reconcile(
            &paymos_inbox_aws::paymos_api::PaymosApi::patient(api),
            &fulfil,
            (from, to),
            args.apply,
            now_ms(),
        ),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if args.json {
        say!(
            "{}",
            serde_json::to_string(&report).expect("report serialises")
        );
    } else {
        print_report(&report);
    }
    if report.clean() && report.waits_for_a_person() && !args.json {
        say!("what --apply recorded waits for a person: `paymos-inbox exceptions` lists it");
    }
    if report.waits_for_a_person() {
        ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
    } else {
        ExitCode::SUCCESS
    }
}

/// A window that reads something: it starts before it ends, and not after now (a window of
/// nothing would say "clean" of invoices it never read).
fn checked_window(from: i64, to: i64, now: i64) -> Result<(i64, i64), String> {
    if from > now {
        Err(format!(
            "--from is in the future ({from}, now {now}): a reconciliation reads invoices already created"
        ))
    } else if from >= to {
        Err(format!(
            "--from ({from}) is not before --to ({to}): the window holds no time to read"
        ))
    } else {
        Ok((from, to))
    }
}

/// The reconciliation's findings, one line each, as an operator reads them.
fn print_report(report: &paymos_inbox_core::roads::reconcile::Report) {
    say!(
        "paid at Paymos: {}, fulfilled here once as Paymos has it: {}",
        report.paid_at_paymos,
        report.matched
    );
    for m in &report.missing {
        let applied = match (report.applied_to(&m.invoice_id), m.held_by_refund()) {
            (Some(a), _) => format!(" → {a}"),
            (None, Some(refund)) => format!(
                " (a refund Paymos lists, {refund}, may have returned it: `--apply` holds it for a person, never ships it)"
            ),
            (None, None) => String::new(),
        };
        say!(
            "MISSING {} {} {} {} (order {}){applied}",
            m.invoice_id,
            m.status,
            m.amount,
            m.currency,
            m.order_id
        );
    }
    for (order, invoices) in &report.double {
        say!(
            "DOUBLE  order {order}: fulfilled {} times ({})",
            invoices.len(),
            invoices.join(", ")
        );
    }
    for d in &report.duplicate_payments {
        let applied = report
            .applied_to(&d.invoice_id)
            .map_or(String::new(), |a| format!(" → {a}"));
        say!(
            "DUPLICATE PAYMENT {} {} {} (order {} was fulfilled by another invoice: refund){applied}",
            d.invoice_id,
            d.amount,
            d.currency,
            d.order_id
        );
    }
    for o in report.shipped_otherwise.iter().filter(|o| o.not_applied) {
        say!(
            "SHIPPED OTHERWISE {}: shipped order {}{}, but Paymos has the invoice in project {}, which this stack does not apply: recover the order shipped here (that project's own stack ships its order)",
            o.paid.invoice_id,
            o.shipped_order_id.as_deref().unwrap_or("?"),
            o.shipped_project
                .as_deref()
                .map_or(String::new(), |p| format!(" of {p}")),
            o.paid.project.as_deref().unwrap_or("?"),
        );
    }
    for o in report.shipped_otherwise.iter().filter(|o| !o.not_applied) {
        say!(
            "SHIPPED OTHERWISE {}: shipped order {}{}, but Paymos' invoice is of order {}{}: `--apply` takes that order for this payment (another payment of it waits as a duplicate) and lists the invoice: `paymos-inbox exceptions` says whether to ship it by hand or to refund this payment (another invoice shipped it), and to recover the other",
            o.paid.invoice_id,
            o.shipped_order_id.as_deref().unwrap_or("?"),
            o.shipped_project
                .as_deref()
                .map_or(String::new(), |p| format!(" of {p}")),
            o.paid.order_id,
            o.paid
                .project
                .as_deref()
                .map_or(String::new(), |p| format!(" of {p}")),
        );
    }
    for invoice in &report.unknown {
        say!("UNKNOWN {invoice}: fulfilled here, not paid at Paymos");
    }
    for l in &report.paid_late {
        let applied = report
            .applied_to(&l.invoice_id)
            .map_or(String::new(), |a| format!(" → {a}"));
        say!(
            "PAID_LATE {} {} {} (order {}): paid after it closed {} at Paymos; release or refund it{applied}",
            l.invoice_id,
            l.amount,
            l.currency,
            l.order_id,
            l.status
        );
    }
    for r in &report.refunded {
        say!(
            "REFUNDED {} {} {} (order {}): paid and refunded in full at Paymos; never fulfilled",
            r.invoice_id,
            r.amount,
            r.currency,
            r.order_id
        );
    }
    for u in &report.unreadable {
        say!("{}", unreadable_line(u));
    }
}

/// A finding the run could not act on, with its own advice ([`Unreadable::why`]): what this
/// run did of it is nothing, whatever another road did before.
///
/// [`Unreadable::why`]: paymos_inbox_core::roads::reconcile::Unreadable
fn unreadable_line(u: &paymos_inbox_core::roads::reconcile::Unreadable) -> String {
    format!(
        "UNREADABLE {}: {}; this run applied nothing of it",
        u.about, u.why
    )
}

#[cfg(test)]
mod tests {
    use paymos_inbox_core::roads::reconcile::Unreadable;

    // The attack on `dev` (F4): an invoice Paymos names no project for, shipped here before
    // under the project its event named, was reported as "Paymos answered something this tool
    // cannot read (…names no project…); nothing of it applied: … update paymos-inbox": it had
    // shipped, and the advice was the decoder's. The line says what this run did, and the
    // finding its own advice.
    #[test]
    fn an_unreadable_finding_says_what_this_run_did_with_its_own_advice() {
        let line = super::unreadable_line(&Unreadable {
            about: "inv_1".into(),
            why: "Paymos' invoice names no project and this stack applies several".into(),
        });
        assert_eq!(
            line,
            "UNREADABLE inv_1: Paymos' invoice names no project and this stack applies several; this run applied nothing of it"
        );
    }
}

#[derive(clap::Args)]
pub struct SoakArgs {
    /// Distinct deliveries (event ids) to send; duplicates and retries come on top.
    #[arg(long, default_value_t = 10_000)]
    deliveries: usize,
    /// Share of DynamoDB/SQS calls that fail (half before the call, half losing the reply).
    #[arg(long, default_value_t = 0.05)]
    fail_rate: f64,
    /// Share of calls that crash the invocation (killed mid-request or mid-batch).
    #[arg(long, default_value_t = 0.01)]
    crash_rate: f64,
    /// Deliveries in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Seed of every random choice (the same seed plans the same run).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Use this DynamoDB endpoint instead of starting DynamoDB Local.
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB")]
    dynamodb_endpoint: Option<String>,
    /// Use this SQS endpoint instead of starting fauxqs.
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
    sqs_endpoint: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

type Endpoints = (String, String, Vec<paymos_inbox_local::emulators::Emulator>);

/// The given endpoints, or emulators started for the command (stopped when dropped).
fn endpoints_or_emulators(
    dynamodb: Option<String>,
    sqs: Option<String>,
) -> Result<Endpoints, String> {
    paymos_inbox_local::emulators::endpoints_or_start(dynamodb, sqs).map_err(|e| e.to_string())
}

pub async fn soak(args: SoakArgs) -> ExitCode {
    let progress = std::sync::Arc::<paymos_inbox::tools::soak::SoakProgress>::default();
    let (dynamodb_endpoint, sqs_endpoint, running) =
        match endpoints_or_emulators(args.dynamodb_endpoint, args.sqs_endpoint) {
            Ok(e) => e,
            Err(e) => return fail(e),
        };
    let options = paymos_inbox::tools::soak::SoakOptions {
        dynamodb_endpoint,
        sqs_endpoint,
        deliveries: args.deliveries,
        fail_rate: args.fail_rate,
        crash_rate: args.crash_rate,
        concurrency: args.concurrency,
        seed: args.seed,
        progress: progress.clone(),
    };
    let line = move || format!("soak: {}", progress.line());
    let report = match with_progress_of(line, true, paymos_inbox::tools::soak::run(options)).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    drop(running);
    if args.json {
        say!(
            "{}",
            serde_json::to_string(&report).expect("report serialises")
        );
    } else {
        let r = &report;
        say!(
            "deliveries {} (sends {} incl. duplicates; {} collided; {} payments via two endpoints), HTTP attempts {}",
            r.deliveries,
            r.sends,
            r.collisions,
            r.two_endpoint_payments,
            r.attempts
        );
        say!(
            "port calls {}: {} failed, {}, {}; {} redriven from the DLQ",
            r.port_calls,
            r.injected_failures,
            paymos_inbox::counted(r.injected_lost_replies, "lost reply"),
            paymos_inbox::counted(r.injected_crashes, "crash"),
            paymos_inbox::counted(r.dlq_redriven, "message")
        );
        say!(
            "edges: {} sandbox-signed for live invoices ({} reusing a live event id), {} hostile bodies, {} second invoices for paid orders, {} paid events without their order ({} came before any event named it: order_unknown, for a person), {} refunds (overpayment and full; {} payments came after their full refund: refunded, never shipped), {} senders gave up ({} sent again by the sweep)",
            r.sandbox_signed,
            r.sandbox_reused,
            r.hostile_bodies,
            r.second_invoices,
            r.silent_payments,
            r.order_unknown,
            r.refunds,
            r.refunded_first,
            r.given_up,
            paymos_inbox::counted(r.swept, "record")
        );
        say!(
            "processed {}/{} (the rest never acknowledged: their senders gave up); invoices {}: fulfilled exactly once {}; deposits credited once {}; balances exact {}",
            r.processed,
            r.deliveries,
            r.invoices,
            r.fulfilled,
            r.credited,
            r.balances_checked
        );
        say!("violations {} in {:.1} s", r.violations.len(), r.seconds);
        for v in r.violations.iter().take(50) {
            say!("  VIOLATION {v}");
        }
    }
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
    }
}

#[derive(clap::Args)]
pub struct BenchE2eArgs {
    /// Distinct deliveries.
    #[arg(long, default_value_t = 2000)]
    deliveries: usize,
    /// Share sent a second time.
    #[arg(long, default_value_t = 0.3)]
    duplicates: f64,
    /// Requests in flight.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Use this DynamoDB endpoint instead of starting DynamoDB Local.
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB")]
    dynamodb_endpoint: Option<String>,
    /// Use this SQS endpoint instead of starting fauxqs.
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
    sqs_endpoint: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn bench_e2e(args: BenchE2eArgs) -> ExitCode {
    let (dynamodb_endpoint, sqs_endpoint, running) =
        match endpoints_or_emulators(args.dynamodb_endpoint, args.sqs_endpoint) {
            Ok(e) => e,
            Err(e) => return fail(e),
        };
    let options = paymos_inbox::tools::bench_e2e::E2eOptions {
        dynamodb_endpoint,
        sqs_endpoint,
        deliveries: args.deliveries,
        duplicate_share: args.duplicates,
        concurrency: args.concurrency,
    };
    let report = match with_progress(
        "bench-e2e running",
        paymos_inbox::tools::bench_e2e::run(options),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    drop(running);
    if args.json {
        say!(
            "{}",
            serde_json::to_string(&report).expect("report serialises")
        );
    } else {
        for (name, f) in [
            ("pipeline (HTTP + ingest + emulators)", &report.pipeline),
            ("raw put + send loop", &report.raw),
        ] {
            say!(
                "{name:<38} {:>6} requests  {:>8.0}/s  p50 {:>6.2} ms  p99 {:>6.2} ms",
                f.requests,
                f.per_second,
                f.p50_ms,
                f.p99_ms
            );
        }
        say!("ratio pipeline / raw: {:.2}x (target >= 0.8)", report.ratio);
    }
    ExitCode::SUCCESS
}
