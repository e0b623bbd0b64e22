//! `exceptions`, `release`, `recheck` and `orders register`: a way out for every payment that
//! waits for a person.

use std::process::ExitCode;
use std::time::Duration;

use paymos_inbox::counted;
use paymos_inbox::tools::exceptions as orders;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::paymos_api::PaymosApi;
use paymos_inbox_aws::sqs::approximate_messages;
use paymos_inbox_core::money::record::ActionKind;
use paymos_inbox_core::roads::exceptions;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::release::{ReleaseBy, ReleaseError};
use paymos_inbox_lambda::now_ms;

use crate::exit::Failure;
use crate::failed as fail;
use crate::stack::{ApiArgs, Stack, StackArgs};

/// Bad usage or input, found before any I/O (exit 2).
fn usage(e: impl Into<String>) -> ExitCode {
    crate::exit::Failure::usage(e).report()
}

pub(crate) async fn tables(
    stack: &StackArgs,
) -> Result<(Stack, DynamoResources, DynamoLedger), Failure> {
    let stack = stack.resolve().await?;
    let store = stack.resources()?;
    let ledger = stack.ledger()?;
    Ok((stack, store, ledger))
}

#[derive(clap::Args)]
pub struct ExceptionsArgs {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Once, after updating a stack from a version without the `waiting` and `listed`
    /// indexes: index the deliveries that waited, and list every fact of the state table
    /// (invoices open or waiting, and each fact by its day), and flag every invoice refunded
    /// in full before the flag existed, so its late payment never ships (one scan of each
    /// table, idempotent); then list what waits.
    #[arg(long)]
    reindex: bool,
    /// Print the raw body of the delivery evt_… (what Paymos sent, byte for byte, on stdout
    /// only: it holds personal data) instead of the list: exit 0 printed, 4 no such delivery,
    /// 1 its body expired (`BodyRetentionDays`).
    #[arg(long, value_name = "EVENT_ID", value_parser = crate::exit::named, conflicts_with_all = ["json", "reindex"])]
    body: Option<String>,
    /// With --body or --resolve: the delivery's environment (default: either; a sandbox
    /// delivery is kept under `test#evt_…`).
    #[arg(long, value_enum)]
    environment: Option<BodyEnvironment>,
    /// Take the delivery evt_… off the list once you settled it yourself: an order conflict
    /// (you shipped the paid order, or found the shipped one right), an unusable delivery you
    /// applied by hand, or an unconfirmed payment Paymos shows was never paid (forged: rotate
    /// the secret); or the invoice inv_… of an order conflict Paymos' word found (shipped
    /// under another order than Paymos' invoice names: you shipped Paymos' order and
    /// recovered the other), or of a payment waiting after_refund that you found the full
    /// refund returned (paid before it: settled as refunded, nothing ships) (with --actor and
    /// --reason; recorded in the audit trail). Exit 0 resolved, 2 when nothing of that id
    /// waits so.
    #[arg(long, value_name = "EVENT_ID", value_parser = crate::exit::named, conflicts_with_all = ["json", "reindex", "body"], requires_all = ["actor", "reason"])]
    resolve: Option<String>,
    /// With --resolve: who settled it (on dev; on AWS the caller's identity is recorded).
    #[arg(long, value_parser = crate::exit::named)]
    actor: Option<String>,
    /// With --resolve: how it was settled (kept in the audit trail).
    #[arg(long, value_parser = crate::exit::named)]
    reason: Option<String>,
    #[command(flatten)]
    stack: StackArgs,
}

/// The environment whose delivery `--body` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BodyEnvironment {
    Live,
    Sandbox,
}

/// Exit 0 when nothing waits, 1 when something does (so a cron job can alert on it).
pub async fn list(args: ExceptionsArgs) -> ExitCode {
    if let Some(event_id) = &args.body {
        return print_body(&args.stack, event_id, args.environment).await;
    }
    if let Some(event_id) = &args.resolve {
        return resolve(&args, event_id).await;
    }
    if args.environment.is_some() {
        return usage("--environment goes with --body or --resolve");
    }
    let (stack, state, ledger) = match tables(&args.stack).await {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    if args.reindex {
        let indexed = async {
            Ok::<_, paymos_inbox_core::port::PortError>((
                ledger.reindex_waiting().await?,
                state.reindex_listed().await?,
                state.flag_full_refunds().await?,
            ))
        };
        match indexed.await {
            Ok((d, i, r)) => {
                tell!(
                    "indexed {} that waited for a person and {} of the state table; flagged {} refunded in full",
                    counted(d, "delivery"),
                    counted(i, "fact"),
                    counted(r, "invoice")
                );
            }
            Err(e) => return fail(e),
        }
    }
    let found = match waiting(&stack, &state, &ledger).await {
        Ok(f) => f,
        Err(e) => return e.report(),
    };
    if args.json {
        for e in &found {
            say!("{}", serde_json::to_string(e).expect("serialises"));
        }
    } else {
        say!("{} waiting for a person", found.len());
        let now = now_ms();
        for e in &found {
            let age = if e.since_ms == 0 {
                String::new()
            } else {
                format!(" ({} min ago)", now.saturating_sub(e.since_ms) / 60_000)
            };
            let age = match &e.project {
                Some(p) => format!("{age} of {p}"),
                None => age,
            };
            say!(
                "{:<17} {}{age}\n{:<17} why:  {}\n{:<17} do:   {}",
                e.kind.to_uppercase(),
                e.resource_id
                    .as_deref()
                    .or(e.event_id.as_deref())
                    .unwrap_or("-"),
                "",
                e.why,
                "",
                e.action
            );
        }
    }
    if found.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
    }
}

/// Everything waiting for a person, as `exceptions` and the console list it: the domain's
/// list, with the work queue's dead letters and the hand-off's parked events counted (no scan:
/// the `waiting` index, the review list and one attribute of each dead-letter queue).
///
/// # Errors
/// The failure of a read, as the command line says it.
pub(crate) async fn waiting(
    stack: &Stack,
    state: &DynamoResources,
    ledger: &DynamoLedger,
) -> Result<Vec<exceptions::Exception>, Failure> {
    let depth = async |queue: Option<&str>| match queue {
        Some(url) => approximate_messages(&stack.sqs, url)
            .await
            .map_err(Failure::from),
        None => Ok(0),
    };
    let dead_letters = depth(stack.dlq.as_deref()).await?;
    // Only a stack with a `WebhookTargetUrl` has the hand-off's queues (and names them).
    let parked = depth(stack.webhook_dlq.as_deref()).await?;
    let mut found = exceptions::list(state, ledger, dead_letters)
        .await
        .map_err(Failure::from)?;
    if parked > 0 {
        found.insert(0, parked_handoff(parked));
    }
    Ok(found)
}

/// The signed hand-off's parked events: `parked` messages in its dead-letter queue.
fn parked_handoff(parked: u64) -> exceptions::Exception {
    exceptions::Exception {
        kind: PARKED_HANDOFF,
        resource_id: None,
        event_id: None,
        project: None,
        since_ms: 0,
        why: format!(
            "{} of the signed hand-off parked in its dead-letter queue: your endpoint answered 410 Gone or a redirect, or failed through the whole retry schedule (about 27 h)",
            counted(parked, "event")
        ),
        action: "fix the endpoint (the deliver function's log lines and WebhookAttempts say what it answered), then `paymos-inbox events redrive --per-second 5`".into(),
    }
}

/// The kind under which [`waiting`] lists the hand-off's parked events.
pub(crate) const PARKED_HANDOFF: &str = "parked_handoff";

/// The stack's release of `invoice_id` (its store and its effect, as its webhooks have them),
/// as `release` and the console run it; recorded in the audit trail under the caller
/// ([`crate::audit::who`]; `by.actor` on `dev`) once it ran.
///
/// # Errors
/// [`Unreleased::Refused`] with the domain's sentence (recorded as refused: nothing changed), or
/// [`Unreleased::Failed`]: STS's, the store's or the audit entry's failure.
pub(crate) async fn release_in(
    (stack, ledger): (&Stack, &DynamoLedger),
    api: Option<paymos::PaymosClient>,
    invoice_id: &str,
    by: &ReleaseBy<'_>,
) -> Result<paymos_inbox_core::money::change::Applied, Unreleased> {
    let actor = crate::audit::who(stack, Some(by.actor))
        .await
        .map_err(Unreleased::Failed)?;
    let begun = crate::audit::begin(stack, ActionKind::Release, &actor, invoice_id, by.reason)
        .await
        .map_err(Unreleased::Failed)?;
    // The release is kept under who acts as the audit entry names them (`released_by`).
    let by = &ReleaseBy {
        actor: &actor,
        ..*by
    };
    // The stack's projects and environment (a key of the other one is refused).
    let fulfil = stack.fulfil().map_err(Unreleased::Failed)?;
    // With the API, Paymos' invoice first (nothing ships that Paymos does not have paid as
    // recorded), then its full refunds: one whose webhook was lost returns the payment.
    let released = match api {
        Some(client) => {
            let api = PaymosApi::patient(client);
            fulfil
                .release_asking(ledger, &api, invoice_id, by, now_ms())
                .await
        }
        None => fulfil.release(ledger, invoice_id, by, now_ms()).await,
    };
    let (done, refused) = match released {
        Ok(applied) => (Ok(applied), None),
        // Recorded as refused, in the domain's words: someone tried.
        Err(ReleaseError::NotReleasable(why)) => (Err(Failure::usage(why.clone())), Some(why)),
        Err(ReleaseError::Port(e)) => (Err(e.into()), None),
    };
    let done = crate::audit::finish(stack, &begun, done, |applied| {
        let overridden = if by.override_amount
            && *applied == paymos_inbox_core::money::change::Applied::Fulfilled
        {
            " (amount overridden)"
        } else {
            ""
        };
        let named = by
            .project
            .filter(|_| *applied == paymos_inbox_core::money::change::Applied::Fulfilled)
            .map(|p| format!(" (as project {p})"))
            .unwrap_or_default();
        (format!("{}{overridden}{named}", applied.as_str()), None)
    })
    .await;
    match (done, refused) {
        (Ok(applied), _) => Ok(applied),
        (Err(_), Some(why)) => Err(Unreleased::Refused(why)),
        (Err(f), None) => Err(Unreleased::Failed(f)),
    }
}

/// `exceptions --resolve`: the delivery (or the invoice) off what waits, through
/// [`resolve_in`].
async fn resolve(args: &ExceptionsArgs, event_id: &str) -> ExitCode {
    let (stack, store, ledger) = match tables(&args.stack).await {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let environment = args.environment.map(|e| match e {
        BodyEnvironment::Live => paymos_inbox_core::wire::signature::Environment::Live,
        BodyEnvironment::Sandbox => paymos_inbox_core::wire::signature::Environment::Test,
    });
    let (actor, reason) = (
        args.actor.as_deref().unwrap_or_default(),
        args.reason.as_deref().unwrap_or_default(),
    );
    match resolve_in(
        (&stack, &store, &ledger),
        event_id,
        environment,
        (actor, reason),
    )
    .await
    {
        Ok(was) => {
            say!("{event_id}: resolved (was {was})");
            ExitCode::SUCCESS
        }
        Err(f) => f.report(),
    }
}

/// Takes the delivery `event_id` off what waits once a person settled it outside the stack
/// (an order conflict, an unusable delivery applied by hand), recorded in the audit trail
/// first: the command line's and the console's door. Its outcome until then. An invoice id
/// (`inv_…`) is an order conflict a road asking Paymos found (shipped under another order
/// than Paymos' invoice names).
///
/// # Errors
/// A usage failure (exit 2, the console's 409) when nothing of that id waits so; the ledger's,
/// the store's or the audit trail's failure otherwise.
pub(crate) async fn resolve_in(
    (stack, store, ledger): (&Stack, &DynamoResources, &DynamoLedger),
    event_id: &str,
    environment: Option<paymos_inbox_core::wire::signature::Environment>,
    (actor, reason): (&str, &str),
) -> Result<paymos_inbox_core::money::change::Applied, Failure> {
    let actor = crate::audit::who(stack, Some(actor)).await?;
    let begun =
        crate::audit::begin(stack, ActionKind::Resolve, &actor, event_id, Some(reason)).await?;
    let done = if event_id.starts_with("inv_") {
        exceptions::resolve_invoice(store, event_id, &actor, now_ms()).await
    } else {
        exceptions::resolve(ledger, event_id, environment, &actor, now_ms()).await
    }
    .map_err(|e| match e {
        exceptions::ResolveError::NotResolvable(why) => Failure::usage(why),
        exceptions::ResolveError::Port(e) => Failure::from(e),
    });
    crate::audit::finish(stack, &begun, done, |was| {
        (format!("resolved (was {was})"), None)
    })
    .await
}

/// Why `release_in` did not release.
#[derive(Debug)]
pub(crate) enum Unreleased {
    /// The domain's refusal, in its own sentence: nothing changed (exit 1, the console's 409).
    Refused(String),
    /// A failure, as the command line says it.
    Failed(Failure),
}

/// `exceptions --body`: the kept raw body of `event_id`, written to stdout as it is (never
/// logged). Without `environment`, the live key and the sandbox key are both read; a delivery
/// under both is for the person to name.
async fn print_body(
    stack: &StackArgs,
    event_id: &str,
    environment: Option<BodyEnvironment>,
) -> ExitCode {
    use paymos_inbox_aws::dynamodb::KeptBody;
    use paymos_inbox_core::wire::signature::Environment;
    use paymos_inbox_core::wire::work::delivery_key;
    use std::io::Write as _;
    if event_id.contains('#') {
        return usage(format!(
            "--body {event_id}: an event id as `exceptions` lists it (evt_…), with --environment sandbox for a sandbox delivery"
        ));
    }
    // Only the deliveries table: a body needs no state table.
    let ledger = match stack.resolve().await.and_then(|stack| stack.ledger()) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let environments: &[Environment] = match environment {
        Some(BodyEnvironment::Live) => &[Environment::Live],
        Some(BodyEnvironment::Sandbox) => &[Environment::Test],
        None => &[Environment::Live, Environment::Test],
    };
    let now_s = now_ms() / 1000;
    let mut found = Vec::new();
    for &env in environments {
        match ledger
            .kept_body(&delivery_key(Some(env), event_id), now_s)
            .await
        {
            Ok(KeptBody::NoRecord) => {}
            Ok(kept) => found.push((env, kept)),
            Err(e) => return fail(e),
        }
    }
    let name = |env: Environment| if env.is_test() { "sandbox" } else { "live" };
    match found.as_slice() {
        [] => Failure::unreachable(format!("no delivery {event_id} in the deliveries table"))
            .next("check the event id (`paymos-inbox exceptions` lists it), --environment and the stack")
            .report(),
        [(_, KeptBody::Kept(body))] => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(body).and_then(|()| stdout.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Failure::unreachable(format!("could not write the body: {e}")).report()
                }
                _ => ExitCode::SUCCESS,
            }
        }
        [(env, KeptBody::Expired { received_at_ms })] => {
            let received = i64::try_from(*received_at_ms)
                .ok()
                .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                .map_or_else(|| "?".to_owned(), |t| t.to_string());
            Failure {
                kind: crate::exit::Kind::NeedsAPerson,
                message: format!(
                    "the body of {event_id} ({}, received {received}) has expired: only its record is kept",
                    name(*env)
                ),
                next: Some(format!(
                    "replay {event_id} from Paymos' dashboard (ingest keeps the same bytes again), or read the resource from Paymos' API"
                )),
                detail: None,
            }
            .report()
        }
        _ => Failure::usage(format!(
            "--body {event_id}: a live and a sandbox delivery both have this id"
        ))
        .next("name one with --environment live or --environment sandbox")
        .report(),
    }
}

#[derive(clap::Args)]
pub struct ReleaseArgs {
    /// The invoice (inv_…) whose payment waits: held, paid late, or an unconfirmed
    /// invoice.paid/paid_over (an unconfirmed closure or refund is for `recheck`).
    #[arg(value_parser = crate::exit::named)]
    invoice_id: String,
    /// Who decides (kept on the invoice as released_by and on the fulfilment as won_by).
    #[arg(value_parser = crate::exit::named, long)]
    actor: String,
    /// Why (kept on the invoice as release_reason; required with --override-amount).
    #[arg(value_parser = crate::exit::named, long)]
    reason: Option<String>,
    /// Fulfil although the payment differs from the registered order's amount (a held
    /// payment); kept on the invoice as amount_overridden.
    #[arg(long, requires = "reason")]
    override_amount: bool,
    /// The project whose order ships, as you checked it at Paymos: required where the
    /// invoice's events named two projects; refused where the record names another.
    #[arg(value_parser = crate::exit::id, long)]
    project: Option<String>,
    /// The order this payment is for, as you checked it at Paymos: required where the
    /// invoice's events named two orders (one of them); refused where the record names another.
    #[arg(value_parser = crate::exit::id, long)]
    order_id: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// With the Paymos API, the invoice is asked of Paymos first: nothing ships that Paymos
    /// does not know, has unpaid, has in another project (than the stack's or --project) or
    /// for another order; its project is taken where you name none; and its completed full
    /// refunds are recorded first: a refund whose webhook was lost returns the payment.
    #[command(flatten)]
    api: crate::stack::OptionalApiArgs,
    #[command(flatten)]
    stack: StackArgs,
}

/// `id`, when it is an invoice's (`inv_…`), else the sentence that says so.
///
/// # Errors
/// The sentence.
pub(crate) fn an_invoice_id(id: &str) -> Result<&str, String> {
    if paymos_inbox_core::wire::envelope::is_resource_id("inv_", id) {
        Ok(id)
    } else {
        Err(format!(
            "{id:?}: an invoice id is inv_ followed by letters, digits, _ or -"
        ))
    }
}

pub async fn release(args: ReleaseArgs) -> ExitCode {
    if let Err(e) = an_invoice_id(&args.invoice_id) {
        return usage(e);
    }
    let api = match args.api.client() {
        Ok(api) => api,
        Err(e) => return usage(e),
    };
    let (stack, _, ledger) = match tables(&args.stack).await {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    // A project the stack does not apply is bad input: refused before the audit entry.
    if let Err(e) = stack.scope_of(args.project.as_deref()) {
        return fail(e);
    }
    // The stack's own use case: its store and its effect, as its webhooks have them.
    let by = ReleaseBy {
        actor: &args.actor,
        reason: args.reason.as_deref(),
        override_amount: args.override_amount,
        project: args.project.as_deref(),
        order: args.order_id.as_deref(),
    };
    match release_in((&stack, &ledger), api, &args.invoice_id, &by).await {
        Ok(applied) => {
            if args.json {
                say!(
                    "{}",
                    serde_json::json!({"invoice_id": args.invoice_id, "outcome": applied.as_str()})
                );
            } else {
                say!("{}: {applied}", args.invoice_id);
            }
            ExitCode::SUCCESS
        }
        Err(Unreleased::Refused(why)) => {
            if args.json {
                say!(
                    "{}",
                    serde_json::json!({"invoice_id": args.invoice_id, "outcome": "not_releasable", "why": why})
                );
            } else {
                tell!("not released: {why}");
            }
            ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
        }
        Err(Unreleased::Failed(e)) => e.report(),
    }
}

#[derive(clap::Args)]
pub struct RecheckArgs {
    /// The resource whose unconfirmed deliveries to re-check: an invoice (inv_…, with the
    /// unconfirmed refunds of it), a refund or payout (wdr_…) or a deposit (pcd_…).
    #[arg(value_parser = crate::exit::named, required_unless_present = "all_unconfirmed")]
    resource_id: Option<String>,
    /// Re-check every unconfirmed delivery.
    #[arg(long, conflicts_with = "resource_id")]
    all_unconfirmed: bool,
    #[command(flatten)]
    api: ApiArgs,
    /// The environment the stack applies (`live` or `sandbox`): the API key must read its
    /// project (default: the stack's, from its outputs or `dev`).
    #[arg(long, env = "PAYMOS_ENVIRONMENT")]
    environment: Option<String>,
    /// Who acts, on `dev` (the audit trail's actor; on AWS it is your credentials' identity).
    #[arg(value_parser = crate::exit::named, long)]
    actor: Option<String>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
}

/// The sentence for a resource id `recheck` cannot re-check, if `id` is one.
fn a_rechecked_id(id: &str) -> Result<(), Failure> {
    if ["inv_", "wdr_", "pcd_"].iter().any(|p| id.starts_with(p)) {
        Ok(())
    } else {
        Err(Failure::usage(format!(
            "{id}: the resource id starts with inv_ (an invoice), wdr_ (a refund or payout) or pcd_ (a deposit)"
        )))
    }
}

/// The environment named `named` (`live`, `sandbox`), as `--environment` gives it.
fn environment_of(named: &str) -> Result<paymos_inbox_core::wire::signature::Environment, Failure> {
    paymos_inbox_lambda::config::environment(&|_: &str| Some(named.to_owned()))
        .map_err(|e| Failure::usage(format!("--environment: {e}")))
}

/// The stack's re-check of `resource_id` (or of every unconfirmed delivery) against Paymos'
/// API, as `recheck` and the console run it. `environment` is the one given (default: the
/// stack's).
///
/// # Errors
/// Bad input (exit 2: the id, the environment, none known), or a read's or write's failure.
pub(crate) async fn recheck_in(
    (stack, state, ledger): (&Stack, DynamoResources, &DynamoLedger),
    client: paymos::PaymosClient,
    (environment, actor): (
        Option<paymos_inbox_core::wire::signature::Environment>,
        Option<&str>,
    ),
    resource_id: Option<&str>,
) -> Result<Vec<exceptions::Rechecked>, Failure> {
    if let Some(id) = resource_id {
        a_rechecked_id(id)?;
    }
    let applied = stack
        .environment
        .as_deref()
        .and_then(|n| environment_of(n).ok());
    if let (Some(given), Some(applied)) = (environment, applied)
        && given != applied
    {
        let name = |env: paymos_inbox_core::wire::signature::Environment| {
            if env.is_test() { "sandbox" } else { "live" }
        };
        return Err(Failure::usage(format!(
            "--environment {}: this stack applies {}, and its deliveries are rechecked by their own environment's key",
            name(given),
            name(applied)
        ))
        .next("drop --environment (and an unset PAYMOS_ENVIRONMENT), or name the stack of that environment"));
    }
    let Some(environment) = environment.or(applied) else {
        return Err(
            Failure::usage("no environment: nothing says which one the stack applies")
                .next("pass --environment live or sandbox (a stack's outputs and `dev` name it)"),
        );
    };
    let actor = crate::audit::who(stack, actor).await?;
    let subject = resource_id.unwrap_or("all-unconfirmed");
    let begun = crate::audit::begin(stack, ActionKind::Recheck, &actor, subject, None).await?;
    let api = PaymosApi::patient(client);
    let done = Fulfil::new(state)
        .for_environment(environment)
        .for_projects(stack.projects.clone())
        .recheck(ledger, &api, resource_id, now_ms())
        .await
        .map_err(Failure::from);
    crate::audit::finish(stack, &begun, done, |results| {
        (rechecked(results), u64::try_from(results.len()).ok())
    })
    .await
}

/// What a recheck changed, in a few words: how many were re-read, and each outcome's count.
fn rechecked(results: &[exceptions::Rechecked]) -> String {
    let mut by_outcome = std::collections::BTreeMap::<&str, usize>::new();
    for r in results {
        *by_outcome.entry(r.outcome.as_str()).or_default() += 1;
    }
    let outcomes: Vec<String> = by_outcome
        .iter()
        .map(|(outcome, n)| format!("{outcome} {n}"))
        .collect();
    if outcomes.is_empty() {
        "0 rechecked".to_owned()
    } else {
        format!("{} rechecked: {}", results.len(), outcomes.join(", "))
    }
}

pub async fn recheck(args: RecheckArgs) -> ExitCode {
    if let Some(Err(e)) = args.resource_id.as_deref().map(a_rechecked_id) {
        return e.report();
    }
    let given = match args.environment.as_deref().map(environment_of).transpose() {
        Ok(e) => e,
        Err(e) => return e.report(),
    };
    let client = match args.api.client(Some(Duration::from_secs(10))) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    let (stack, state, ledger) = match tables(&args.stack).await {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    match recheck_in(
        (&stack, state, &ledger),
        client,
        (given, args.actor.as_deref()),
        args.resource_id.as_deref(),
    )
    .await
    {
        Ok(results) => {
            for r in &results {
                if args.json {
                    say!("{}", serde_json::to_string(r).expect("serialises"));
                } else {
                    say!(
                        "{} {}: {}{}",
                        r.resource_id,
                        r.event_id,
                        r.outcome.as_str(),
                        r.outcome
                            .reason()
                            .map_or(String::new(), |w| format!(" ({w})"))
                    );
                }
            }
            if !args.json && results.is_empty() {
                say!("no unconfirmed delivery to re-check");
            }
            if results.iter().any(|r| r.outcome.waits()) {
                ExitCode::from(crate::EXIT_NEEDS_A_PERSON)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => e.report(),
    }
}

#[derive(clap::Subcommand)]
pub enum OrdersCommand {
    /// Register what an order must be paid with
    ///
    /// A paid invoice for it that differs (as an exact decimal, or in currency) is held for
    /// review instead of fulfilled. Item: pk = order#<ORDER>, kind = expected_order, amount
    /// (N), currency.
    ///
    /// Example:
    ///   paymos-inbox orders register order-7 --amount 10.50 --currency USD --dev-info dev.json
    #[command(verbatim_doc_comment)]
    Register {
        /// The merchant's order id (Paymos' order.external_id).
        #[arg(value_parser = crate::exit::named)]
        order_id: String,
        /// The amount, an exact decimal (10.50).
        #[arg(long)]
        amount: String,
        /// The currency (USD, USDT, …).
        #[arg(long)]
        currency: String,
        /// The project the order belongs to (prj_…; default: the stack's first project): an
        /// order id is unique only within its project.
        #[arg(long, value_parser = crate::exit::named)]
        project: Option<String>,
        #[command(flatten)]
        stack: StackArgs,
    },
}

pub async fn orders(command: OrdersCommand) -> ExitCode {
    let OrdersCommand::Register {
        order_id,
        amount,
        currency,
        project,
        stack,
    } = command;
    let terms = match orders::order_terms(&amount, &currency) {
        Ok(terms) => terms,
        Err(e) => return usage(e),
    };
    let (stack, state, _) = match tables(&stack).await {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    // With no list every project is keyed by its own: an order registered under none would
    // price no project's order.
    if project.is_none() && stack.projects.ids().is_empty() {
        return usage(
            "this stack applies every project (no PaymosProjectIds), each keyed by its own: name the order's project with --project prj_…",
        );
    }
    let scope = match stack.scope_of(project.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match state
        .register_order((scope.as_deref(), &order_id), &terms, &currency)
        .await
    {
        Ok(()) => {
            say!(
                "order {order_id}: {amount} {}",
                currency.to_ascii_uppercase()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paymos_inbox_core::money::change::Applied;
    use paymos_inbox_core::roads::exceptions::{Recheck, Rechecked};

    fn rechecked_as(outcome: Recheck) -> Rechecked {
        Rechecked {
            event_id: "evt_1".into(),
            resource_id: "inv_1".into(),
            outcome,
        }
    }

    // A recheck's audit entry says what it changed, each outcome counted once.
    #[test]
    fn a_rechecks_entry_counts_each_outcome() {
        assert_eq!(rechecked(&[]), "0 rechecked");
        let results = [
            rechecked_as(Recheck::Applied(Applied::Fulfilled)),
            rechecked_as(Recheck::Applied(Applied::Fulfilled)),
            rechecked_as(Recheck::Refuted("not at Paymos".into())),
        ];
        assert_eq!(rechecked(&results), "3 rechecked: fulfilled 2, refuted 1");
    }
}
