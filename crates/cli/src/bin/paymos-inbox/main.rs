//! The `paymos-inbox` command line: the merchant's tools around the receiver.

use std::io::{Read, Write as _};
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use paymos_inbox_core::wire::signature::{DEFAULT_TOLERANCE_SECS, SignatureError, Verifier};
use paymos_inbox_lambda::config::parse_secrets;

/// `println!` of a human-readable line, its control characters escaped ([`shown::shown`]).
macro_rules! say {
    () => {
        println!()
    };
    ($($arg:tt)*) => {
        println!("{}", $crate::shown::shown(&format!($($arg)*)))
    };
}

/// `eprintln!` of a human-readable line, its control characters escaped ([`shown::shown`]).
macro_rules! tell {
    () => {
        eprintln!()
    };
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::shown::shown(&format!($($arg)*)))
    };
}

#[derive(Parser)]
#[command(
    name = "paymos-inbox",
    version,
    about = "Tools for the paymos-inbox webhook receiver",
    long_about = None,
    after_help = exit::TABLE
)]
struct Cli {
    /// Say more: the detail behind an error (the SDK's), and debug logs.
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Colour in logs: auto (a terminal, no NO_COLOR), always, never.
    #[arg(long, global = true, value_enum, default_value_t = Colour::Auto, hide_possible_values = true)]
    color: Colour,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Colour {
    Auto,
    Always,
    Never,
}

/// The command line with the exit-code table at the end of every command's help.
fn command_line() -> clap::Command {
    fn with_table(command: clap::Command) -> clap::Command {
        command.mut_subcommands(|c| with_table(c).after_help(exit::TABLE))
    }
    with_table(Cli::command())
}

#[derive(Subcommand)]
enum Command {
    /// Check a delivery's signature against your secret(s)
    ///
    /// Says which secret matched, or precisely why the X-Webhook-Signature does not verify.
    /// Reads the raw body from stdin (or --body-file). Exit 1 when it does not verify.
    ///
    /// Example:
    ///   paymos-inbox verify --secret live=whsec_live_… --header 't=1700000000,v1=…' < body.json   # exit 1 unless it verifies
    #[command(verbatim_doc_comment)]
    Verify(VerifyArgs),
    /// Run the whole pipeline locally (emulators, tables, ingest URL, fulfil)
    ///
    /// Emulators (unless endpoints are given: --dynamodb-endpoint, AWS_ENDPOINT_URL_DYNAMODB…),
    /// the stack's tables and queues (from template.yaml), the ingest handler on
    /// http://127.0.0.1:PORT exactly as a function URL delivers it, and a poller that feeds
    /// fulfil real SQS batches. Prints one JSON line with the URL, endpoints, tables and queues
    /// (also written to dev.json, which the other commands read), then a log per delivery.
    /// With --api-key and --api-secret, it also reconciles with Paymos every minute.
    ///
    /// Examples:
    ///   paymos-inbox dev
    ///   paymos-inbox dev --port 0 --forward-to http://localhost:3000/hooks
    /// then, in another terminal:  paymos-inbox send --type invoice.paid --wait
    #[command(verbatim_doc_comment)]
    Dev(dev::DevArgs),
    /// Send a signed Paymos delivery, as Paymos would
    ///
    /// Any of the 16 event types, one or two v1 signatures, its retry ladder, replays and
    /// fan-out to several event ids. Posts to --url, else to the URL in dev.json (`dev`).
    /// Exit 1 when the receiver answers other than 2xx (or, with --wait, did not apply it).
    ///
    /// Examples:
    ///   paymos-inbox send --type invoice.paid --resource inv_42 --wait
    ///   paymos-inbox send --type invoice.paid --replay evt_123 --resource inv_42
    ///   paymos-inbox send --retry-ladder --time-scale 3600 --url https://staging.example/hook
    #[command(verbatim_doc_comment)]
    Send(send::SendArgs),
    /// The six-step idempotency proof against a receiver
    ///
    /// (1) one delivery, (2) the same event again, (3) colliding attempts, (4) a failed event
    /// replayed after recovery, (5) reconcile, (6) another project's payment ships nothing.
    /// HTTP answers are checked for any receiver; the orders are counted through a probe (--orders-cmd, --orders-url, or our tables with
    /// --dev-info / --stack-name). With --api-key and --api-secret, step 5 compares with
    /// Paymos' paid invoices. Exit 1 if a step fails, 3 if none failed but one is unproven
    /// (no probe of the orders, no API key), 4 if nothing answers at the receiver's address.
    ///
    /// Example, against `dev --slow 11` (so retries collide with a first attempt past 10 s):
    ///   paymos-inbox check http://127.0.0.1:8787/ --dev-info dev.json
    #[command(verbatim_doc_comment)]
    Check(ops::CheckArgs),
    /// List deliveries recorded but not processed, oldest first
    ///
    /// Read from a sparse index, not a scan: a delivery enters it when its delayed check
    /// (10 minutes after receipt, by default) finds it not processed; before that, one fulfil
    /// has not applied yet is a message in flight on the work queue (`status` counts them).
    /// --resend sends the stranded ones again, as the scheduled sweep does.
    ///
    /// Examples:
    ///   paymos-inbox pending --stack-name paymos-inbox-live
    ///   paymos-inbox pending --dev-info dev.json --resend --older-than 60
    #[command(verbatim_doc_comment)]
    Pending(ops::PendingArgs),
    /// Move the work queue's dead letters back to the work queue
    ///
    /// Example:
    ///   paymos-inbox redrive --stack-name paymos-inbox-live --max 100
    #[command(verbatim_doc_comment)]
    Redrive(ops::RedriveArgs),
    /// Mark an invoice paid by hand, as support does
    ///
    /// Through the same conditional transition as a webhook, so a later webhook or replay for
    /// it fulfils nothing.
    ///
    /// Example:
    ///   paymos-inbox mark-paid inv_42 --actor alice --order-id order-7 --amount 10.50 --currency USD
    #[command(verbatim_doc_comment)]
    MarkPaid(ops::MarkPaidArgs),
    /// Everything waiting for a person, with why and what to do
    ///
    /// Held, paid-late and duplicate-payment invoices, payments whose order (order_unknown)
    /// or project (project_unknown) is known nowhere, payments naming another order than the
    /// one their invoice shipped, and invoices shipped under another order than Paymos'
    /// (order_conflict), unconfirmed and unusable deliveries, dead letters. Exit 1 when something waits (a cron job can alert on it). Once after an
    /// upgrade that adds the indexes: --reindex. --body prints what Paymos sent for one
    /// delivery (an unusable one is applied by hand from it); --resolve takes an
    /// order_conflict (a delivery, or an invoice Paymos' word found), unusable or forged
    /// unconfirmed delivery you settled off the list, or an after_refund payment the full
    /// refund returned (settled as refunded, nothing ships) (audited).
    ///
    /// Examples:
    ///   paymos-inbox exceptions --stack-name paymos-inbox-live --json
    ///   paymos-inbox exceptions --body evt_… --environment live --stack-name paymos-inbox-live > body.json
    ///   paymos-inbox exceptions --resolve evt_… --actor alice --reason "shipped order 1002 by hand" --stack-name paymos-inbox-live
    #[command(verbatim_doc_comment)]
    Exceptions(exceptions::ExceptionsArgs),
    /// The stack at a glance: alarms, queues, what waits, the last reconciliation
    ///
    /// The console's header as one command, from the same bounded reads (no scan). Exit 0
    /// healthy; 1 when something needs a person (an alarm in ALARM, anything `exceptions`
    /// lists, a delivery pending over 30 minutes); 4 when nothing waits but a read failed.
    ///
    /// Examples:
    ///   paymos-inbox status --config-env live
    ///   paymos-inbox status --stack-name paymos-inbox-live --json
    #[command(verbatim_doc_comment)]
    Status(status::StatusArgs),
    /// Fulfil a held or paid-late payment on a person's word
    ///
    /// Through the same conditional writes as a webhook (a racing webhook or a second release
    /// changes nothing); leaves released_by, released_at and release_reason on the invoice.
    /// An invoice only an unconfirmed delivery names (a forgery would look alike) is refused
    /// with the `recheck` to run, and so are unknown and open invoices, invoices with no known
    /// order and those whose refund waits unconfirmed. Exit 1 when refused.
    ///
    /// Example:
    ///   paymos-inbox release inv_42 --actor alice --reason "customer confirmed by email"
    #[command(verbatim_doc_comment)]
    Release(exceptions::ReleaseArgs),
    /// Ask Paymos again about unconfirmed deliveries and apply what it confirms
    ///
    /// One resource (inv_…, wdr_…, pcd_…) or all. The environment is the stack's (its outputs,
    /// or `dev`), unless --environment names it. Paymos' API key from --api-key/--api-secret
    /// or PAYMOS_API_KEY/PAYMOS_API_SECRET. Exit 1 while something still waits.
    ///
    /// Examples:
    ///   PAYMOS_API_KEY=… PAYMOS_API_SECRET=… paymos-inbox recheck inv_42 --stack-name paymos-inbox-live
    ///   PAYMOS_API_KEY=… PAYMOS_API_SECRET=… paymos-inbox recheck --all-unconfirmed --dev-info dev.json
    #[command(verbatim_doc_comment)]
    Recheck(exceptions::RecheckArgs),
    /// Register orders for the amount guard
    ///
    /// Example:
    ///   paymos-inbox orders register order-7 --amount 10.50 --currency USD --dev-info dev.json
    #[command(verbatim_doc_comment)]
    #[command(subcommand)]
    Orders(exceptions::OrdersCommand),
    /// Compare Paymos' paid invoices with the fulfilments here
    ///
    /// Through its API (the official paymos crate): MISSING, PAID_LATE, REFUNDED, DOUBLE (per
    /// order), DUPLICATE PAYMENT, UNKNOWN; and re-reads invoices still open here. --apply
    /// fulfils the missing ones through the same conditional transition as a webhook (late ones
    /// wait as paid_late, refunded ones are never fulfilled). Exit 1 if anything needs a
    /// person.
    ///
    /// Example:
    ///   PAYMOS_API_KEY=… PAYMOS_API_SECRET=… paymos-inbox reconcile --from 48h --stack-name paymos-inbox-live
    #[command(verbatim_doc_comment)]
    Reconcile(ops::ReconcileArgs),
    /// The fault soak: thousands of deliveries while calls fail, then the books checked
    ///
    /// A simulated Paymos sends deliveries (duplicates, collisions, two endpoints, out of
    /// order, rotation headers, retried until 2xx) through the local pipeline while DynamoDB
    /// and SQS calls fail, lose replies or crash the invocation; then checks that every
    /// acknowledged delivery was processed, every paid invoice fulfilled exactly once, every
    /// deposit credited once with exact balances, no status regressed. Shows its progress and
    /// counts the faults it injects (their logs only with --verbose). Exit 1 on any violation.
    ///
    /// Example:
    ///   paymos-inbox soak --deliveries 2000 --seed 7
    #[command(verbatim_doc_comment)]
    Soak(ops::SoakArgs),
    /// Throughput of the local pipeline against a raw loop of the same calls
    ///
    /// Deliveries per second and latency through the local pipeline (HTTP, ingest handler,
    /// emulators, fulfil polling) against a raw loop of the same put and send calls issued
    /// directly to the same emulators; prints the ratio (target ≥ 0.8).
    ///
    /// Example:
    ///   paymos-inbox bench-e2e --deliveries 500 --json
    #[command(verbatim_doc_comment)]
    BenchE2e(ops::BenchE2eArgs),
    /// The hand-off's events: tail, since, resend, redrive; refresh the fixtures
    ///
    /// Example:
    ///   paymos-inbox events since 1h --stack-name paymos-inbox-live
    #[command(verbatim_doc_comment)]
    #[command(subcommand)]
    Events(EventsCommand),
    /// A page on loopback: what waits, one payment's story, the operator's actions
    ///
    /// Listens on 127.0.0.1 only (a free port unless --port) and prints its URL; acts with your
    /// AWS credentials on the stack the other commands resolve (--stack-name, --config-env,
    /// --dev-info). The printed URL logs one browser in, once. Ctrl-C stops it.
    ///
    /// Example:
    ///   paymos-inbox console --dev-info dev.json --open
    #[command(verbatim_doc_comment)]
    Console(console::ConsoleArgs),
    /// Who acted, when, why and what it changed: the audit trail of the operators' actions
    ///
    /// Newest first, from the state table's `actions` list (one query). Each entry names the
    /// caller (its AWS identity; --actor on dev), the reason given and what the action changed.
    ///
    /// Example:
    ///   paymos-inbox audit --stack-name paymos-inbox-live --limit 20
    #[command(verbatim_doc_comment)]
    Audit(audit::AuditArgs),
    /// Print a shell completion script
    ///
    /// For bash, zsh, fish, elvish or powershell.
    ///
    /// Example:
    ///   paymos-inbox completions bash > ~/.local/share/bash-completion/completions/paymos-inbox
    #[command(verbatim_doc_comment)]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum EventsCommand {
    /// Print the hand-off's events committed since a time, then (--follow) as they commit
    ///
    /// Read from the state table: nothing is taken from any queue, so your consumer misses
    /// nothing (--consume reads the events queue instead, deleting what it reads). One JSON
    /// envelope per line.
    ///
    /// Example:
    ///   paymos-inbox events tail --dev-info dev.json --follow
    #[command(verbatim_doc_comment)]
    Tail(handoff::TailArgs),
    /// Print the events the facts committed since a time stand for
    ///
    /// Read from the state table (not the 24-hour stream): for a consumer that was down. One
    /// JSON envelope per line. It reads the review list, the audit trail and the day lists
    /// since the time; it needs no `open` list (a stack without the reconciliation writes none):
    /// an invoice still open has published no event.
    ///
    /// Example:
    ///   paymos-inbox events since 2026-11-01 --stack-name paymos-inbox-live
    #[command(verbatim_doc_comment)]
    Since(handoff::SinceArgs),
    /// Publish again the events committed since a time, or one resource's (same idempotency keys)
    ///
    /// To the bus (--event-bus, default the stack's) or to the events queue: after a publish
    /// failure, or for a consumer that lost one payment's facts (--resource inv_…, wdr_…,
    /// pcd_…: its items read by key). Prints each event published (detail type, idempotency
    /// key); recorded in the audit trail with how many.
    ///
    /// Examples:
    ///   paymos-inbox events resend --since 2h --stack-name paymos-inbox-live
    ///   paymos-inbox events resend --resource inv_42 --stack-name paymos-inbox-live
    #[command(verbatim_doc_comment)]
    Resend(handoff::ResendArgs),
    /// Move the signed hand-off's parked events back to its queue, paced
    ///
    /// From its dead-letter queue to the queue the deliver function posts from, at most
    /// --per-second a second: after the endpoint is fixed.
    ///
    /// Example:
    ///   paymos-inbox events redrive --stack-name my-shop --per-second 5
    #[command(verbatim_doc_comment)]
    Redrive(handoff::RedriveArgs),
    /// Pause the signed hand-off to WebhookTargetUrl: the events wait in their queue
    ///
    /// Switches the deliver function's event source mapping off (on `dev`, its stand-in): no
    /// event is taken from the queue, none is lost (the queue keeps them 14 days), each keeps
    /// its place on its retry schedule. Recorded in the audit trail.
    ///
    /// Example:
    ///   paymos-inbox events pause --stack-name my-shop --reason "shop migrating"
    #[command(verbatim_doc_comment)]
    Pause(endpoint::SwitchArgs),
    /// Resume the signed hand-off: the events waiting in the queue are delivered
    ///
    /// Switches the deliver function's event source mapping on again (after `events pause`,
    /// or the automatic pause of WebhookPauseAfterHours). Recorded in the audit trail.
    ///
    /// Example:
    ///   paymos-inbox events resume --stack-name my-shop
    #[command(verbatim_doc_comment)]
    Resume(endpoint::SwitchArgs),
    /// Post a signed test event to WebhookTargetUrl from the deployed stack, and say the answer
    ///
    /// The deliver function signs an `Endpoint Test` event with the stack's key and posts it
    /// once (no retry); exit 0 when the endpoint answered 2xx, 1 otherwise. On `dev`, to its
    /// --forward-to. Recorded in the audit trail.
    ///
    /// Example:
    ///   paymos-inbox events test --stack-name my-shop
    #[command(verbatim_doc_comment)]
    Test(endpoint::TestArgs),
    /// Re-sign events/ingest-*.json at a time (default: now)
    ///
    /// So a local invoke (`sam local invoke -e`, `cargo lambda invoke`) passes the timestamp
    /// tolerance. The tests use the fixture secret at 1760000000.
    ///
    /// Example:
    ///   paymos-inbox events refresh --at 1760000000
    #[command(verbatim_doc_comment)]
    Refresh {
        /// The folder of events.
        #[arg(long, default_value = "events")]
        dir: std::path::PathBuf,
        /// The secret to sign with (default: the fixture secret the tests use).
        #[arg(long, env = "PAYMOS_WEBHOOK_SECRET", hide_env_values = true, default_value = FIXTURE_SECRET)]
        secret: String,
        /// When to sign at: a UTC time (2026-11-01T10:00:00Z), a date, a span back from now
        /// (5m) or Unix seconds (default: now).
        #[arg(long)]
        at: Option<String>,
    },
}

/// The sandbox secret the committed events are signed with (a fixture, not a real secret).
pub(crate) const FIXTURE_SECRET: &str = "whsec_test_paymos_inbox_fixture";

#[derive(clap::Args)]
struct VerifyArgs {
    /// A secret, as `label=whsec_…` or a bare `whsec_…` (labelled by its prefix). Repeat for
    /// several (e.g. during a rotation). Also read from PAYMOS_WEBHOOK_SECRET (comma-separated).
    #[arg(
        long = "secret",
        env = "PAYMOS_WEBHOOK_SECRET",
        value_delimiter = ',',
        required = true,
        hide_env_values = true
    )]
    secrets: Vec<String>,
    /// The X-Webhook-Signature header value exactly as received.
    #[arg(long)]
    header: String,
    /// Check the timestamp as if now were this Unix time (default: the clock).
    #[arg(long)]
    now: Option<u64>,
    /// Allowed |now - t| in seconds.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE_SECS)]
    tolerance: u64,
    /// Read the raw body from this file instead of stdin.
    #[arg(long)]
    body_file: Option<std::path::PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

mod audit;
mod console;
mod dev;
#[cfg(test)]
mod doc_commands;
mod endpoint;
mod exceptions;
mod exit;
mod handoff;
mod ops;
mod send;
mod shown;
mod stack;
mod status;

/// Where `dev` listens and `send` posts by default.
pub(crate) const DEFAULT_PORT: u16 = 8787;

/// Exit code: something waits for a person (see [`exit`]).
pub const EXIT_NEEDS_A_PERSON: u8 = exit::NEEDS_A_PERSON;

/// Prints the failure `e` (a port error said by its kind, text from what we did not write
/// classified: [`exit::classify`]) and answers the exit code its kind decides.
pub fn failed(e: impl Into<exit::Failure>) -> ExitCode {
    e.into().report()
}

/// Logs on stderr for a person: our crates at INFO (DEBUG with --verbose), everything else only
/// when it is a warning (the SDK's credential-chain chatter never), none at all for the soak
/// unless --verbose (it counts the faults it injects instead); RUST_LOG overrides. `dev` exports
/// its functions' spans when `OTEL_EXPORTER_OTLP_ENDPOINT` names a collector, as a stack does.
fn init_logs(verbose: bool, colour: Colour, quiet: bool, dev: bool) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let ours = [
        "paymos_inbox",
        "paymos_inbox_core",
        "paymos_inbox_aws",
        "paymos_inbox_lambda",
    ];
    let directives = if quiet && !verbose {
        "off".to_owned()
    } else {
        let level = if verbose { "debug" } else { "info" };
        // The SDK's own warnings (a profile file not found, …) are said by the command, once.
        let mut d = format!(
            "{},aws_config=error,aws_runtime=error",
            if verbose { "info" } else { "warn" }
        );
        for crate_name in ours {
            d.push_str(&format!(",{crate_name}={level}"));
        }
        d
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives));
    let ansi = match colour {
        Colour::Always => true,
        Colour::Never => false,
        Colour::Auto => paymos_inbox_lambda::telemetry::colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        ),
    };
    let endpoint = std::env::var(paymos_inbox_lambda::trace::ENDPOINT).ok();
    let spans =
        paymos_inbox_lambda::trace::layer("paymos-inbox-dev", endpoint.as_deref().filter(|_| dev));
    let (spans, refused) = match spans {
        Ok(spans) => (spans, None),
        Err(e) => (None, Some(e)),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi)
        .finish()
        .with(spans)
        .try_init();
    if let Some(e) = refused {
        tracing::warn!(error = %e, "spans are not exported");
    }
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&command_line().get_matches()).unwrap_or_else(|e| e.exit());
    exit::set_verbose(cli.verbose);
    match &cli.command {
        // Exactly what the functions print on Lambda: flat JSON lines and EMF documents.
        Command::Dev(args) if args.json_logs() => {
            paymos_inbox_lambda::telemetry::init_json();
            paymos_inbox_lambda::telemetry::init_metrics("dev");
        }
        command => init_logs(
            cli.verbose,
            cli.color,
            matches!(command, Command::Soak(_)),
            matches!(command, Command::Dev(_)),
        ),
    }
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    };
    match cli.command {
        Command::Dev(args) => runtime().block_on(dev::run(args)),
        Command::Send(args) => runtime().block_on(send::run(args)),
        Command::Check(args) => runtime().block_on(ops::check(args)),
        Command::Pending(args) => runtime().block_on(ops::pending(args)),
        Command::Redrive(args) => runtime().block_on(ops::redrive(args)),
        Command::MarkPaid(args) => runtime().block_on(ops::mark_paid(args)),
        Command::Reconcile(args) => runtime().block_on(ops::reconcile(args)),
        Command::Exceptions(args) => runtime().block_on(exceptions::list(args)),
        Command::Status(args) => runtime().block_on(status::run(args)),
        Command::Release(args) => runtime().block_on(exceptions::release(args)),
        Command::Recheck(args) => runtime().block_on(exceptions::recheck(args)),
        Command::Orders(command) => runtime().block_on(exceptions::orders(command)),
        Command::Soak(args) => runtime().block_on(ops::soak(args)),
        Command::Console(args) => runtime().block_on(console::run(args)),
        Command::Audit(args) => runtime().block_on(audit::list(args)),
        Command::BenchE2e(args) => runtime().block_on(ops::bench_e2e(args)),
        Command::Verify(args) => verify(&args),
        Command::Completions { shell } => completions(shell),
        Command::Events(EventsCommand::Tail(args)) => runtime().block_on(handoff::tail(args)),
        Command::Events(EventsCommand::Since(args)) => runtime().block_on(handoff::since(args)),
        Command::Events(EventsCommand::Resend(args)) => runtime().block_on(handoff::resend(args)),
        Command::Events(EventsCommand::Redrive(args)) => runtime().block_on(handoff::redrive(args)),
        Command::Events(EventsCommand::Pause(args)) => {
            runtime().block_on(endpoint::switch(args, false))
        }
        Command::Events(EventsCommand::Resume(args)) => {
            runtime().block_on(endpoint::switch(args, true))
        }
        Command::Events(EventsCommand::Test(args)) => runtime().block_on(endpoint::test(args)),
        Command::Events(EventsCommand::Refresh { dir, secret, at }) => {
            let now = paymos_inbox_lambda::now_ms() / 1000;
            let at = match at.as_deref().map(|a| {
                paymos_inbox::tools::when::parse_when(a, i64::try_from(now).unwrap_or(i64::MAX))
            }) {
                None => now,
                Some(Ok(secs)) => u64::try_from(secs).unwrap_or(0),
                Some(Err(e)) => return exit::Failure::usage(format!("--at {e}")).report(),
            };
            let secret = paymos_inbox_core::wire::signature::WebhookSecret::new(secret);
            if !dir.is_dir() {
                return exit::Failure::usage(format!("--dir {}: no such folder", dir.display()))
                    .next("run it from the clone's top folder (events/ is there), or name the folder with --dir")
                    .report();
            }
            match paymos_inbox_local::events::refresh(&dir, &secret, at) {
                Ok(files) => {
                    for f in files {
                        say!("signed {} at t={at}", dir.join(f).display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
    }
}

/// Prints the completion script. A reader that stops early (`| head`) is not a failure: the
/// script is written whole, and a closed pipe ends the command with 0.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command_line(), "paymos-inbox", &mut script);
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&script).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            exit::Failure::unreachable(format!("could not write the script: {e}")).report()
        }
        _ => ExitCode::SUCCESS,
    }
}

fn verify(args: &VerifyArgs) -> ExitCode {
    let keys = match parse_secrets(&args.secrets.join("\n"), "--secret", false) {
        Ok(keys) => keys,
        Err(e) => return exit::Failure::usage(e.to_string()).report(),
    };
    let mut body = Vec::new();
    let read = match &args.body_file {
        Some(path) => std::fs::read(path).map(|b| body = b),
        None => std::io::stdin().read_to_end(&mut body).map(|_| ()),
    };
    if let Err(e) = read {
        return exit::Failure::usage(format!("could not read the body: {e}"))
            .next("pass the raw body on stdin or with --body-file FILE")
            .report();
    }
    let now = args
        .now
        .unwrap_or_else(|| paymos_inbox_lambda::now_ms() / 1000);
    let verifier = Verifier::new(keys, args.tolerance);
    match verifier.verify(Some(&args.header), &body, now) {
        Ok(ok) => {
            let env = ok.key.environment().map_or("unknown", |e| e.as_str());
            if args.json {
                say!(
                    "{}",
                    serde_json::json!({"valid": true, "secret": ok.key.label(), "environment": env,
                        "timestamp": ok.timestamp, "skew_secs": now.abs_diff(ok.timestamp)})
                );
            } else {
                say!(
                    "valid: signed with the secret labelled '{}' (environment: {env}), t={}, {}s from now",
                    ok.key.label(),
                    ok.timestamp,
                    now.abs_diff(ok.timestamp)
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if args.json {
                say!(
                    "{}",
                    serde_json::json!({"valid": false, "error": e.code(), "reason": e.to_string()})
                );
            } else {
                say!("invalid: {}: {e}", e.code());
                if let Some(hint) = hint(&e) {
                    say!("hint: {hint}");
                }
            }
            ExitCode::from(EXIT_NEEDS_A_PERSON)
        }
    }
}

fn hint(e: &SignatureError) -> Option<&'static str> {
    match e {
        SignatureError::SignatureMismatch { .. } => Some(
            "verify the exact raw bytes (no re-serialised JSON, no trailing newline from your shell: \
             use --body-file or printf), and the whole secret string including the whsec_ prefix",
        ),
        SignatureError::TimestampOutsideTolerance { .. } => Some(
            "a captured delivery expires after the tolerance; pass --now with the time it was received",
        ),
        _ => None,
    }
}
