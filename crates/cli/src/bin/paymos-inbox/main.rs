//! The `paymos-inbox` command line: the merchant's tools around the receiver.

use std::io::Read;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use paymos_inbox_core::signature::{DEFAULT_TOLERANCE_SECS, SignatureError, Verifier};
use paymos_inbox_lambda::config::parse_secrets;

#[derive(Parser)]
#[command(name = "paymos-inbox", version, about = "Tools for the paymos-inbox webhook receiver", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a delivery's X-Webhook-Signature against your secret(s): says which secret matched,
    /// or precisely why the signature does not verify. Reads the raw body from stdin.
    ///
    /// Example:
    ///   paymos-inbox verify --secret live=whsec_live_… --header 't=1700000000,v1=…' < body.json
    Verify(VerifyArgs),
    /// Run the whole pipeline locally: emulators (unless endpoints are given), the stack's
    /// tables and queues (from template.yaml), the ingest handler on http://127.0.0.1:PORT
    /// exactly as a function URL delivers it, and a poller that feeds fulfil real SQS batches.
    /// Prints one JSON line with the URL, endpoints, tables and queues, then a log per delivery.
    /// With --api-key and --api-secret, it also reconciles with Paymos every minute (report only).
    ///
    /// Then, in another terminal:  paymos-inbox send --type invoice.paid
    Dev(dev::DevArgs),
    /// Send a signed Paymos delivery, like Paymos would: any of the 16 event types, one or two
    /// v1 signatures, its retry ladder, replays and fan-out to several event ids.
    ///
    /// Examples:
    ///   paymos-inbox send --type invoice.paid --resource inv_42
    ///   paymos-inbox send --type invoice.paid --replay evt_123 --resource inv_42
    ///   paymos-inbox send --retry-ladder --time-scale 3600 --url https://staging.example/hook
    Send(send::SendArgs),
    /// The five-step idempotency proof against a receiver: (1) one delivery, (2) the same event
    /// again, (3) colliding attempts, (4) a failed event replayed after recovery, (5) reconcile.
    /// HTTP answers are checked for any receiver; with its tables (--dev-info, or
    /// --deliveries-table and --state-table) also one record and one fulfilment each.
    /// With --api-key and --api-secret, step 5 compares with Paymos' paid invoices.
    /// Exit 1 if any step fails.
    ///
    /// Example, against `dev --slow 11` (so retries collide with a first attempt past 10 s):
    ///   paymos-inbox check http://127.0.0.1:8787/ --dev-info dev.json
    Check(ops::CheckArgs),
    /// List deliveries recorded but not processed, oldest first (a sparse index, not a scan).
    Pending(ops::PendingArgs),
    /// Move messages from the dead-letter queue back to the work queue.
    Redrive(ops::RedriveArgs),
    /// Support's manual path: mark an invoice paid through the same conditional transition as
    /// a webhook, so a later webhook or replay for it fulfils nothing.
    MarkPaid(ops::MarkPaidArgs),
    /// Everything waiting for a person, with why and what to do: held, paid-late and
    /// duplicate-payment invoices, unconfirmed and unusable deliveries, DLQ messages.
    /// Exit 1 when something waits.
    Exceptions(exceptions::ExceptionsArgs),
    /// Fulfil a held, paid-late or unconfirmed invoice on a person's word, through the same
    /// conditional writes as a webhook (a racing webhook or a second release changes nothing);
    /// leaves released_by, released_at and release_reason on the invoice.
    Release(exceptions::ReleaseArgs),
    /// Run the reverse check again for unconfirmed deliveries (one invoice, or all) and apply
    /// those Paymos now confirms.
    Recheck(exceptions::RecheckArgs),
    /// Orders for the amount guard.
    #[command(subcommand)]
    Orders(exceptions::OrdersCommand),
    /// Compare the invoices Paymos says were paid (its API, through the official paymos crate)
    /// with the fulfilments here: MISSING, DOUBLE (per order), DUPLICATE PAYMENT, UNKNOWN; and
    /// re-reads invoices still open here. --apply fulfils the missing ones
    /// through the same conditional transition as a webhook. Exit 1 if anything needs a person.
    ///
    /// Example:  PAYMOS_API_KEY=… PAYMOS_API_SECRET=… paymos-inbox reconcile --from 2026-11-01
    ///             --deliveries-table … --state-table …
    Reconcile(ops::ReconcileArgs),
    /// The fault soak: a simulated Paymos sends thousands of deliveries (duplicates, collisions,
    /// two endpoints, out of order, rotation headers, retried until 2xx) through the local
    /// pipeline while DynamoDB and SQS calls fail, lose replies or crash the invocation; then
    /// checks that every acknowledged delivery was processed, every paid invoice fulfilled
    /// exactly once, every deposit credited once with exact balances, no status regressed.
    /// Exit 1 on any violation.
    Soak(ops::SoakArgs),
    /// Deliveries per second and latency through the local pipeline (HTTP, ingest handler,
    /// emulators, fulfil polling) against a raw loop of the same put and send calls issued
    /// directly to the same emulators; prints the ratio (target ≥ 0.8).
    BenchE2e(ops::BenchE2eArgs),
    /// The hand-off's events (tail, since, resend), and the function-URL events in events/
    /// (refresh: inputs for `sam local invoke -e` and `cargo lambda invoke`, and the tests'
    /// fixtures).
    #[command(subcommand)]
    Events(EventsCommand),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    ///
    /// Example:  paymos-inbox completions bash > ~/.local/share/bash-completion/completions/paymos-inbox
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum EventsCommand {
    /// Print the hand-off's events as they reach the events queue (`dev`'s stand-in for the
    /// EventBridge bus, or the stack's EventsQueueUrl), one JSON envelope per line, consuming
    /// them. --follow keeps waiting.
    Tail(handoff::TailArgs),
    /// The events the facts committed since a time stand for, read from the state table (not
    /// the 24-hour stream): for a consumer that was down. One JSON envelope per line.
    Since(handoff::SinceArgs),
    /// Publish again the events committed since a time (same idempotency keys), to the bus
    /// (--event-bus) or to the events queue: after a publish failure.
    Resend(handoff::ResendArgs),
    /// Move the signed hand-off's parked events (its dead-letter queue) back to the queue the
    /// deliver function posts from, at most --per-second a second: after the endpoint is fixed.
    ///   paymos-inbox events redrive --stack-name my-shop --per-second 5
    Redrive(handoff::RedriveArgs),
    /// Re-sign events/ingest-*.json at a time (default: now), so a local invoke passes the
    /// timestamp tolerance. The tests use the fixture secret at 1760000000:
    ///   paymos-inbox events refresh --at 1760000000
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

mod dev;
#[cfg(test)]
mod doc_commands;
mod exceptions;
mod handoff;
mod ops;
mod send;
mod stack;

/// Where `dev` listens and `send` posts by default.
pub(crate) const DEFAULT_PORT: u16 = 8787;

/// Exit code: something waits for a person (a finding, a failed `check` step, a refused
/// `release`, an invalid signature).
pub const EXIT_NEEDS_A_PERSON: u8 = 1;
/// Exit code: the command failed (AWS, the API, a file): nothing was decided.
pub const EXIT_FAILED: u8 = 4;

/// Prints `e` and answers [`EXIT_FAILED`].
pub fn failed(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(EXIT_FAILED)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        // Exactly what the functions print on Lambda: flat JSON lines and EMF documents.
        Command::Dev(args) if args.json_logs() => {
            paymos_inbox_lambda::telemetry::init_json();
            paymos_inbox_lambda::telemetry::init_metrics("dev");
        }
        _ => paymos_inbox_lambda::telemetry::init_human(),
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
        Command::Release(args) => runtime().block_on(exceptions::release(args)),
        Command::Recheck(args) => runtime().block_on(exceptions::recheck(args)),
        Command::Orders(command) => runtime().block_on(exceptions::orders(command)),
        Command::Soak(args) => runtime().block_on(ops::soak(args)),
        Command::BenchE2e(args) => runtime().block_on(ops::bench_e2e(args)),
        Command::Verify(args) => verify(&args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "paymos-inbox",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        Command::Events(EventsCommand::Tail(args)) => runtime().block_on(handoff::tail(args)),
        Command::Events(EventsCommand::Since(args)) => runtime().block_on(handoff::since(args)),
        Command::Events(EventsCommand::Resend(args)) => runtime().block_on(handoff::resend(args)),
        Command::Events(EventsCommand::Redrive(args)) => runtime().block_on(handoff::redrive(args)),
        Command::Events(EventsCommand::Refresh { dir, secret, at }) => {
            let now = paymos_inbox_lambda::now_ms() / 1000;
            let at = match at.as_deref().map(|a| {
                paymos_inbox::tools::when::parse_when(a, i64::try_from(now).unwrap_or(i64::MAX))
            }) {
                None => now,
                Some(Ok(secs)) => u64::try_from(secs).unwrap_or(0),
                Some(Err(e)) => {
                    eprintln!("error: --at {e}");
                    return ExitCode::from(2);
                }
            };
            let secret = paymos_inbox_core::signature::WebhookSecret::new(secret);
            match paymos_inbox::local::events::refresh(&dir, &secret, at) {
                Ok(files) => {
                    for f in files {
                        println!("signed {} at t={at}", dir.join(f).display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
    }
}

fn verify(args: &VerifyArgs) -> ExitCode {
    let keys = match parse_secrets(&args.secrets.join("\n"), "--secret", false) {
        Ok(keys) => keys,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut body = Vec::new();
    let read = match &args.body_file {
        Some(path) => std::fs::read(path).map(|b| body = b),
        None => std::io::stdin().read_to_end(&mut body).map(|_| ()),
    };
    if let Err(e) = read {
        eprintln!("error: could not read the body: {e}");
        return ExitCode::from(2);
    }
    let now = args
        .now
        .unwrap_or_else(|| paymos_inbox_lambda::now_ms() / 1000);
    let verifier = Verifier::new(keys, args.tolerance);
    match verifier.verify(Some(&args.header), &body, now) {
        Ok(ok) => {
            let env = ok.key.environment().map_or("unknown", |e| e.as_str());
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({"valid": true, "secret": ok.key.label(), "environment": env,
                        "timestamp": ok.timestamp, "skew_secs": now.abs_diff(ok.timestamp)})
                );
            } else {
                println!(
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
                println!(
                    "{}",
                    serde_json::json!({"valid": false, "error": e.code(), "reason": e.to_string()})
                );
            } else {
                println!("invalid: {}: {e}", e.code());
                if let Some(hint) = hint(&e) {
                    println!("hint: {hint}");
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
