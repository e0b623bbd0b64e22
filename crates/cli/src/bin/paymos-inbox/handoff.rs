//! `events tail`, `events since`, `events resend` (what was committed since a time, or one
//! resource's facts, audited): the hand-off's events for a person.

use std::process::ExitCode;
use std::time::Duration;

use paymos_inbox::tools::handoff;
use paymos_inbox::tools::handoff::Follow;
use paymos_inbox::tools::when::parse_when;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_aws::events::{EventBridgePublisher, QueuePublisher, envelope};
use paymos_inbox_core::money::record::ActionKind;
use paymos_inbox_core::roads::handoff::DomainEvent;
use paymos_inbox_core::wire::signature::Environment;
use paymos_inbox_lambda::now_ms;

use crate::exit::Failure;
use crate::failed as fail;
use crate::stack::{Stack, StackArgs};

fn environment(name: &str) -> Result<Environment, String> {
    paymos_inbox_lambda::config::environment(&|_: &str| Some(name.to_owned()))
        .map_err(|e| e.to_string())
}

#[derive(clap::Args)]
pub struct TailArgs {
    /// From when (as for `since`; default: the last 10 minutes).
    #[arg(long, default_value = "10m")]
    since: String,
    /// Keep printing new events as they are committed, read from the state table's stream
    /// (what is new, never the table again).
    #[arg(long)]
    follow: bool,
    /// Read from the stack's events queue instead, DELETING what it reads: the queue your own
    /// worker consumes. Only for a queue nobody else reads.
    #[arg(long)]
    consume: bool,
    /// The environment the stack applies (default: the stack's).
    #[arg(long)]
    environment: Option<String>,
    #[command(flatten)]
    stack: StackArgs,
}

/// Prints the events committed from `since` on, read from the state table: nothing is taken
/// from any queue, so the merchant's consumer misses nothing.
pub async fn tail(args: TailArgs) -> ExitCode {
    if args.consume {
        return consume(args).await;
    }
    let (since_ms, given) = match window(&args.since, args.environment.as_deref()) {
        Ok(w) => w,
        Err(e) => return e.report(),
    };
    let stack = match args.stack.resolve().await {
        Ok(s) => s,
        Err(e) => return e.report(),
    };
    let environment = match environment_of(&stack, given) {
        Ok(e) => e,
        Err(e) => return e.report(),
    };
    // With --follow, the stream is opened before the table is read, so nothing committed in
    // between is missed (an event seen twice is printed once: its idempotency key); then only
    // the stream is read, what is new, never the table again.
    let mut follow = None;
    if args.follow {
        let table = match stack.require(&stack.state, "state-table") {
            Ok(t) => t.to_owned(),
            Err(e) => return e.report(),
        };
        match Follow::open(&stack.dynamodb, stack.streams.clone(), &table, environment).await {
            Ok(f) => follow = Some(f),
            Err(e) => return fail(e),
        }
    }
    let mut printed = std::collections::HashSet::new();
    let mut print = |events: &[(u64, DomainEvent)]| {
        for (at, e) in events {
            if printed.insert(e.idempotency_key.clone()) {
                say!("{}", envelope(e, *at));
            }
        }
    };
    match read_since(&stack, since_ms, environment).await {
        Ok(events) => print(&events),
        Err(e) => return e.report(),
    }
    let Some(mut follow) = follow else {
        return ExitCode::SUCCESS;
    };
    loop {
        match follow.next().await {
            Ok(events) => print(&events),
            Err(e) => return fail(e),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `events tail --consume`: receives and deletes from the events queue.
async fn consume(args: TailArgs) -> ExitCode {
    let stack = match args.stack.resolve().await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let queue = match stack.require(&stack.events_queue, "events-queue-url") {
        Ok(q) => q.to_owned(),
        Err(e) => return fail(e),
    };
    loop {
        let got = match stack
            .sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .wait_time_seconds(if args.follow { 5 } else { 1 })
            .send()
            .await
        {
            Ok(got) => got.messages.unwrap_or_default(),
            Err(e) => return fail(paymos_inbox_aws::aws::port_error("SQS ReceiveMessage", e)),
        };
        if got.is_empty() && !args.follow {
            return ExitCode::SUCCESS;
        }
        for m in got {
            say!("{}", m.body().unwrap_or_default());
            if let Some(handle) = m.receipt_handle() {
                let _ = stack
                    .sqs
                    .delete_message()
                    .queue_url(&queue)
                    .receipt_handle(handle)
                    .send()
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[derive(clap::Args)]
pub struct SinceArgs {
    /// From when: a date (2026-11-01), a UTC time, a span back from now (48h) or Unix seconds.
    since: String,
    /// The environment the stack applies (every detail says it; default: the stack's own,
    /// from its outputs or `dev`).
    #[arg(long)]
    environment: Option<String>,
    #[command(flatten)]
    stack: StackArgs,
}

/// `--since` as Unix ms, and `--environment` when given: the caller's input, read before any I/O.
fn window(
    since: &str,
    environment_name: Option<&str>,
) -> Result<(u64, Option<Environment>), Failure> {
    let now = i64::try_from(now_ms() / 1000).unwrap_or(i64::MAX);
    let since_ms =
        u64::try_from(parse_when(since, now).map_err(|e| Failure::usage(format!("--since {e}")))?)
            .unwrap_or(0)
            * 1000;
    let given = environment_name
        .map(environment)
        .transpose()
        .map_err(Failure::usage)?;
    Ok((since_ms, given))
}

/// The environment the events are of: the one given, else the stack's.
pub(crate) fn environment_of(
    stack: &Stack,
    given: Option<Environment>,
) -> Result<Environment, Failure> {
    given
        .or_else(|| {
            stack
                .environment
                .as_deref()
                .and_then(|n| environment(n).ok())
        })
        .ok_or_else(|| {
            Failure::usage("no environment: nothing says which one the stack applies").next(
                "pass --environment live or sandbox, or --stack-name / --dev-info (their outputs say it)",
            )
        })
}

/// The events the facts committed since `since_ms` stand for, read from the state table.
async fn read_since(
    stack: &Stack,
    since_ms: u64,
    environment: Environment,
) -> Result<Vec<(u64, DomainEvent)>, Failure> {
    let resources = state_records(stack)?;
    paymos_inbox_core::roads::handoff::since(&resources, since_ms, applying(stack, environment))
        .await
        .map_err(Failure::from)
}

/// The state table, read as records (the deliveries table is not needed).
fn state_records(stack: &Stack) -> Result<DynamoResources, Failure> {
    let table = stack.require(&stack.state, "state-table")?.to_owned();
    Ok(DynamoResources::new(
        stack.dynamodb.clone(),
        table,
        stack.deliveries.clone().unwrap_or_default(),
    ))
}

/// What the facts are derived under: the environment, and the stack's projects.
fn applying(stack: &Stack, environment: Environment) -> paymos_inbox_core::money::change::Applying {
    paymos_inbox_core::money::change::Applying {
        environment,
        projects: stack.projects.clone(),
    }
}

async fn committed_since(
    stack: &StackArgs,
    since: &str,
    environment_name: Option<&str>,
) -> Result<(Stack, Vec<(u64, DomainEvent)>), Failure> {
    let (since_ms, given) = window(since, environment_name)?;
    let stack = stack.resolve().await?;
    let environment = environment_of(&stack, given)?;
    let events = read_since(&stack, since_ms, environment).await?;
    Ok((stack, events))
}

pub async fn since(args: SinceArgs) -> ExitCode {
    match committed_since(&args.stack, &args.since, args.environment.as_deref()).await {
        Ok((_, events)) => {
            for (at, e) in &events {
                say!("{}", envelope(e, *at));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["since", "resource"])))]
pub struct ResendArgs {
    /// The facts committed from when (as for `since`).
    #[arg(long)]
    since: Option<String>,
    /// One resource's facts only: an invoice's (inv_…: its reviews, its closing, its Order
    /// Paid), a withdrawal's (wdr_…) or a deposit's (pcd_…), read by key.
    #[arg(value_parser = crate::exit::named, long)]
    resource: Option<String>,
    /// The EventBridge bus to publish to (default: the stack's, output EventBusNameOutput);
    /// without one (`dev`), the events queue.
    #[arg(long)]
    event_bus: Option<String>,
    /// The environment the stack applies (default: the stack's).
    #[arg(long)]
    environment: Option<String>,
    /// Who acts, on `dev` (the audit trail's actor; on AWS it is your credentials' identity).
    #[arg(value_parser = crate::exit::named, long)]
    actor: Option<String>,
    #[command(flatten)]
    stack: StackArgs,
}

/// Which facts `events resend` publishes again.
pub(crate) enum Facts {
    /// Those committed since this time (Unix ms).
    Since(u64),
    /// One resource's ([`handoff::keys_of`]).
    Resource(String),
}

impl Facts {
    /// What the audit entry says it was done to: the resource, or `since <time>`.
    fn subject(&self) -> String {
        match self {
            Self::Resource(id) => id.clone(),
            Self::Since(ms) => {
                let at = i64::try_from(*ms)
                    .ok()
                    .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                    .map_or_else(|| ms.to_string(), |t| t.to_string());
                format!("since {at}")
            }
        }
    }
}

/// `resource` when it names a resource whose facts can be read by key; else why not (exit 2).
pub(crate) fn a_resource(resource: &str) -> Result<&str, Failure> {
    match handoff::keys_of(resource) {
        Some(_) => Ok(resource),
        None => Err(Failure::usage(format!(
            "{resource}: not an invoice, withdrawal or deposit id (inv_…, wdr_…, pcd_…), whose facts can be published again"
        ))),
    }
}

/// Where `events resend` publishes: a bus, or (`dev`, a stack without one) its events queue.
pub(crate) enum Target {
    Bus(EventBridgePublisher),
    Queue(QueuePublisher),
}

/// The stack's target: `event_bus` when given, else the stack's bus, else its events queue.
///
/// # Errors
/// No bus and no events queue named (exit 2), or no AWS configuration for the bus.
pub(crate) async fn target(
    stack: &Stack,
    args: &StackArgs,
    event_bus: Option<&str>,
) -> Result<Target, Failure> {
    match event_bus.or(stack.event_bus.as_deref()) {
        Some(bus) => {
            let shared = args.aws().await?;
            Ok(Target::Bus(EventBridgePublisher::new(
                aws_sdk_eventbridge::Client::new(&shared),
                bus,
            )))
        }
        None => {
            let queue = stack.require(&stack.events_queue, "events-queue-url")?;
            Ok(Target::Queue(QueuePublisher::new(
                stack.sqs.clone(),
                queue,
                paymos_inbox_lambda::now_ms,
            )))
        }
    }
}

/// The events one resource's items stand for, each read by its key, derived as
/// [`read_since`] derives every record it reads (`handoff::committed`).
///
/// # Errors
/// Not a resource's id, or no item of it in the state table (exit 2); the read's failure.
pub(crate) async fn read_resource(
    stack: &Stack,
    resource: &str,
    environment: Environment,
) -> Result<Vec<(u64, DomainEvent)>, Failure> {
    let keys = handoff::keys_of(a_resource(resource)?).unwrap_or_default();
    let resources = state_records(stack)?;
    let mut records = Vec::new();
    for key in &keys {
        if let Some(record) = resources.record(key).await.map_err(Failure::from)? {
            records.push(record);
        }
    }
    if records.is_empty() {
        return Err(Failure::usage(format!(
            "{resource}: no record of it in the state table, so no fact of it to publish again"
        ))
        .next("check the id (`paymos-inbox exceptions` lists what waits), or the stack"));
    }
    Ok(paymos_inbox_core::roads::handoff::committed(
        &records,
        applying(stack, environment),
    ))
}

/// `events resend`, as the command and the console run it: the facts `which` names, read from
/// the state table, published again to `target` with their original idempotency keys, in the
/// order they were committed; recorded in the audit trail with how many were published (the
/// resource, or `since <time>`).
///
/// # Errors
/// No state table named, not a resource's id or no record of it (exit 2); a read's, STS's, the
/// publication's or the audit entry's failure.
pub(crate) async fn resend_in(
    stack: &Stack,
    target: &Target,
    which: &Facts,
    environment: Environment,
    actor: Option<&str>,
) -> Result<Vec<DomainEvent>, Failure> {
    crate::audit::recordable(stack)?;
    let events: Vec<DomainEvent> = match which {
        Facts::Since(since_ms) => read_since(stack, *since_ms, environment).await?,
        Facts::Resource(id) => read_resource(stack, id, environment).await?,
    }
    .into_iter()
    .map(|(_, e)| e)
    .collect();
    let actor = crate::audit::who(stack, actor).await?;
    let begun = crate::audit::begin(
        stack,
        ActionKind::EventsResend,
        &actor,
        &which.subject(),
        None,
    )
    .await?;
    let done = match target {
        Target::Bus(publisher) => handoff::resend(publisher, &events).await,
        Target::Queue(publisher) => handoff::resend(publisher, &events).await,
    }
    .map_err(Failure::from);
    crate::audit::finish(stack, &begun, done, |sent| {
        (format!("published {sent}"), u64::try_from(*sent).ok())
    })
    .await?;
    Ok(events)
}

pub async fn resend(args: ResendArgs) -> ExitCode {
    let run = async {
        let given = args
            .environment
            .as_deref()
            .map(environment)
            .transpose()
            .map_err(Failure::usage)?;
        let which = match (&args.since, &args.resource) {
            (Some(since), _) => Facts::Since(window(since, None)?.0),
            (None, Some(resource)) => Facts::Resource(a_resource(resource)?.to_owned()),
            (None, None) => return Err(Failure::usage("which facts: --since or --resource")),
        };
        let stack = args.stack.resolve().await?;
        let environment = environment_of(&stack, given)?;
        let target = target(&stack, &args.stack, args.event_bus.as_deref()).await?;
        resend_in(&stack, &target, &which, environment, args.actor.as_deref()).await
    };
    match run.await {
        Ok(events) => {
            for e in &events {
                say!("{}  {}", e.detail_type, e.idempotency_key);
            }
            say!(
                "{} published again, each with its original idempotency key",
                paymos_inbox::counted(events.len(), "event")
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// How many parked events `events redrive` moves back a second unless told (the console's job
/// too).
pub const REDRIVE_PER_SECOND: u16 = 10;

#[derive(clap::Args)]
pub struct RedriveArgs {
    /// At most this many messages a second (1 to 500), so an endpoint that just came back is
    /// not flooded.
    #[arg(long, default_value_t = REDRIVE_PER_SECOND, value_parser = clap::value_parser!(u16).range(1..=500))]
    per_second: u16,
    /// Move at most this many messages.
    #[arg(long, default_value_t = 10_000)]
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

/// Moves the signed hand-off's parked events (WebhookTargetDeadLetterQueue) back to the queue
/// the deliver function posts from, paced: after the endpoint is fixed. Each is posted again
/// with its own `webhook-id`, so a consumer that deduplicates ships nothing twice.
pub async fn redrive(args: RedriveArgs) -> ExitCode {
    crate::ops::move_back(
        &args.stack,
        ("webhook-queue-url", "webhook-dlq-url"),
        |stack| (stack.webhook_queue.clone(), stack.webhook_dlq.clone()),
        (args.max, Some(args.per_second)),
        (args.json, args.actor.as_deref()),
        "the hand-off's queue",
    )
    .await
}
