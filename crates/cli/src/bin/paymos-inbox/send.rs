//! `paymos-inbox send`.

use std::process::ExitCode;

use paymos_inbox::tools::send::{
    EVENT_TYPES, SENDER_TIMEOUT, data_for, envelope, new_event_id, post, with_retries,
};
use paymos_inbox_core::wire::envelope::Category;
use paymos_inbox_core::wire::signature::{Environment, WebhookSecret};
use paymos_inbox_lambda::now_ms;

use crate::exit::Failure;
use crate::{DEFAULT_PORT, FIXTURE_SECRET};

#[derive(clap::Args)]
pub struct SendArgs {
    /// Where to POST (a `dev` URL, a staging receiver, or your deployed function URL; default:
    /// the ingest URL in --dev-info, else in ./dev.json that `dev` writes, else
    /// http://127.0.0.1:8787/).
    #[arg(long)]
    url: Option<String>,
    /// The event type (one of the 16 Paymos sends).
    #[arg(long = "type", default_value = "invoice.paid", value_parser = clap::builder::PossibleValuesParser::new(EVENT_TYPES))]
    event_type: String,
    /// The resource id (inv_…, wdr_…, pcd_…); default: a new one of the type's kind.
    #[arg(long)]
    resource: Option<String>,
    /// A JSON file whose fields are merged into `data`.
    #[arg(long)]
    data: Option<std::path::PathBuf>,
    /// Secret(s) to sign with, as `dev --secret` takes them: `label=whsec_…` or a bare
    /// `whsec_…`; two give a rotation header with two v1 (default: posting to `dev`, a secret
    /// it holds of the event's environment (`--live` or sandbox), else its first; otherwise
    /// the fixture sandbox secret).
    #[arg(
        long = "secret",
        env = "PAYMOS_WEBHOOK_SECRET",
        value_delimiter = ',',
        hide_env_values = true
    )]
    secrets: Vec<String>,
    /// Send a live event (`data.is_test = false`); sandbox by default.
    #[arg(long)]
    live: bool,
    /// Follow Paymos' retry ladder (11 attempts over ~16 h) until a 2xx, re-signing each time.
    #[arg(long)]
    retry_ladder: bool,
    /// Divide every ladder gap by this (3600 turns an hour into a second).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Resend an event with this original event id (a dashboard replay).
    #[arg(long)]
    replay: Option<String>,
    /// Fan the same payment out as this many different event ids (several endpoints).
    #[arg(long, default_value_t = 1)]
    endpoints: usize,
    /// Print one JSON object per attempt instead of text.
    #[arg(long)]
    json: bool,
    /// Then wait (up to 60 s) for each delivery's outcome in the stack's deliveries table and
    /// print it: exit 0 when the stack applied it, whatever the rules made of it (`held` and
    /// `duplicate_payment` wait for a person, as they should); exit 1 when it applied nothing:
    /// `other_environment` (the stack applies another environment than the secret you signed
    /// with), `other_project` (the stack applies other projects: `--project` of `dev`,
    /// PaymosProjectIds), `unusable`, `unconfirmed` (the reverse check: Paymos does not show it
    /// so), `order_unknown`, `project_unknown`. Needs the stack (--stack-name, --dev-info or
    /// --deliveries-table).
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    stack: crate::stack::StackArgs,
}

/// Waits for the outcome of `event_id` signed by a secret of `environment` and prints it (a
/// JSON object with --json); whether it was applied as a webhook should be.
async fn outcome_of(
    ledger: &paymos_inbox_aws::dynamodb::DynamoLedger,
    environment: Option<paymos_inbox_core::wire::signature::Environment>,
    event_id: &str,
    json: bool,
) -> Result<bool, Failure> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let key = paymos_inbox_core::roads::ingest::delivery_key(environment, event_id);
    loop {
        match ledger.outcome_of(&key).await {
            Ok(Some((
                paymos_inbox_core::roads::ingest::DeliveryState::Processed,
                outcome,
                why,
            ))) => {
                let outcome = outcome.unwrap_or_default();
                let applied = !matches!(
                    outcome.as_str(),
                    "other_environment"
                        | "other_project"
                        | "unusable"
                        | "unconfirmed"
                        | "order_unknown"
                        | "project_unknown"
                );
                let said = match outcome.as_str() {
                    "other_environment" => {
                        " (a mistake: the stack's PaymosEnvironment is not the environment of the secret this was signed with; deploy with the matching --config-env, or sign with the stack's secret)".to_owned()
                    }
                    "other_project" => {
                        " (the stack applies other projects: send with --data naming one of them in project_id, or run dev without --project)".to_owned()
                    }
                    "unconfirmed" => format!(
                        " (the reverse check: {}; `paymos-inbox exceptions` lists it)",
                        why.as_deref()
                            .unwrap_or("Paymos did not confirm it as this delivery says")
                    ),
                    _ => String::new(),
                };
                if json {
                    say!(
                        "{}",
                        serde_json::json!({"event_id": event_id, "outcome": outcome, "applied": applied})
                    );
                } else {
                    say!("{event_id} outcome: {outcome}{said}");
                }
                return Ok(applied);
            }
            Ok(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Ok(_) => {
                if json {
                    say!(
                        "{}",
                        serde_json::json!({"event_id": event_id, "outcome": null, "applied": false, "waited_secs": 60})
                    );
                } else {
                    say!("{event_id} outcome: not processed within 60 s (read the fulfil logs)");
                }
                return Ok(false);
            }
            Err(e) => return Err(Failure::from(e.context(format!("reading {event_id}")))),
        }
    }
}

pub async fn run(args: SendArgs) -> ExitCode {
    let prefix = Category::of(&args.event_type)
        .resource_field()
        .map_or("id_", |(_, p)| p);
    let resource = args
        .resource
        .clone()
        .unwrap_or_else(|| format!("{prefix}{}", &new_event_id()[4..]));
    let overrides = match &args.data {
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(v) => Some(v),
            Err(e) => return Failure::usage(format!("--data {}: {e}", path.display())).report(),
        },
        None => None,
    };
    // The grammar `dev --secret` takes: `label=whsec_…`, or a bare secret.
    let signing = match signing_secrets(&args).await {
        Ok(pairs) => pairs,
        Err(e) => return e.report(),
    };
    let secrets: Vec<WebhookSecret> = signing.iter().map(|(_, s)| s.clone()).collect();
    if secrets.is_empty() || secrets.len() > 2 {
        return Failure::usage("give one --secret, or two for a rotation header").report();
    }
    // Without --url, `send` posts to `dev` (its --dev-info, else ./dev.json): --wait then reads
    // that `dev`'s tables, never a stack samconfig.toml names.
    let (url, stack) = match &args.url {
        Some(url) => (url.clone(), args.stack.clone()),
        None => match args.stack.dev_ingest_url() {
            Some(url) => (
                url,
                args.stack
                    .or_dev_info(std::path::Path::new(crate::stack::DEV_INFO_FILE)),
            ),
            None => (
                format!("http://127.0.0.1:{DEFAULT_PORT}/"),
                args.stack.clone(),
            ),
        },
    };
    if let Err(e) = receiver_url(&url) {
        return e.report();
    }
    let occurred_at = now_ms() / 1000;
    let data = data_for(
        &args.event_type,
        &resource,
        !args.live,
        occurred_at,
        overrides.as_ref(),
    );
    let ids: Vec<String> = match &args.replay {
        Some(id) => vec![id.clone()],
        None => (0..args.endpoints.max(1)).map(|_| new_event_id()).collect(),
    };
    let client = reqwest::Client::new();
    let mut last = Vec::new();
    for event_id in &ids {
        let body = envelope(event_id, &args.event_type, occurred_at, &data);
        let one = One {
            args: &args,
            url: &url,
            client: &client,
            secrets: &secrets,
            event_id,
            resource: &resource,
        };
        last.push(one.send(&body).await);
    }
    if last.contains(&0) {
        return Failure::unreachable(format!("could not reach the receiver at {url}"))
            .next(if args.url.is_some() {
                "check --url: is the receiver up?"
            } else {
                "start `paymos-inbox dev` (it writes dev.json, which send reads), or pass --url"
            })
            .report();
    }
    if last.iter().any(|s| !(200..300).contains(s)) {
        return ExitCode::from(crate::EXIT_NEEDS_A_PERSON);
    }
    if args.wait {
        match wait_for_outcomes(&args, &signing, &stack, &ids).await {
            Ok(true) => {}
            Ok(false) => return ExitCode::from(crate::EXIT_NEEDS_A_PERSON),
            Err(e) => return e.report(),
        }
    }
    ExitCode::SUCCESS
}

/// A receiver's URL: http or https with a host (exit 2 otherwise, before anything is sent).
fn receiver_url(url: &str) -> Result<reqwest::Url, Failure> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(u),
        Ok(u) => Err(Failure::usage(format!(
            "--url {url}: a receiver is reached over http or https, not {}",
            u.scheme()
        ))),
        Err(e) => Err(Failure::usage(format!("--url {url}: not a URL ({e})"))
            .next("pass it whole, like http://127.0.0.1:8787/ or https://….lambda-url.eu-west-1.on.aws/")),
    }
}

/// One event sent as the command line asked: once, or on Paymos' retry ladder.
struct One<'a> {
    args: &'a SendArgs,
    url: &'a str,
    client: &'a reqwest::Client,
    secrets: &'a [WebhookSecret],
    event_id: &'a str,
    resource: &'a str,
}

impl One<'_> {
    /// The status of the last attempt (0: no answer).
    async fn send(&self, body: &str) -> u16 {
        let args = self.args;
        let print = |a: &paymos_inbox::tools::send::Attempt| self.print(a);
        let attempts = if args.retry_ladder {
            with_retries(
                self.client,
                self.url,
                self.event_id,
                body,
                self.secrets,
                args.time_scale,
                || now_ms() / 1000,
                print,
            )
            .await
        } else {
            let a = post(
                self.client,
                self.url,
                self.event_id,
                body,
                self.secrets,
                now_ms() / 1000,
                1,
                SENDER_TIMEOUT,
            )
            .await;
            print(&a);
            vec![a]
        };
        attempts.last().map_or(0, |a| a.status)
    }

    fn print(&self, a: &paymos_inbox::tools::send::Attempt) {
        let (event_id, resource) = (self.event_id, self.resource);
        if self.args.json {
            say!(
                "{}",
                serde_json::json!({"event_id": event_id, "resource": resource, "attempt": a})
            );
        } else {
            say!(
                "{event_id} {} {resource} attempt {:>2} → {} {} ({} ms)",
                self.args.event_type,
                a.attempt,
                if a.status == 0 {
                    "---".into()
                } else {
                    a.status.to_string()
                },
                a.body.trim(),
                a.millis
            );
        }
    }
}

/// `--wait`: each delivery's outcome from the stack's ledger; whether all were applied.
async fn wait_for_outcomes(
    args: &SendArgs,
    signing: &[(String, WebhookSecret)],
    stack: &crate::stack::StackArgs,
    sent: &[String],
) -> Result<bool, Failure> {
    let stack = stack.resolve().await?;
    let ledger = stack.ledger()?;
    // The environment of the first secret.
    let environment = signing.first().and_then(|(l, s)| environment_of(l, s));
    let mut all_ok = true;
    for event_id in sent {
        all_ok &= outcome_of(&ledger, environment, event_id, args.json).await?;
    }
    Ok(all_ok)
}

/// A secret's environment: its label's, else its prefix's.
fn environment_of(label: &str, secret: &WebhookSecret) -> Option<Environment> {
    Environment::from_label(label).or_else(|| Environment::from_secret_prefix(secret.expose()))
}

/// The secrets to sign with, labelled: `--secret`'s; else, posting to a running `dev` (no
/// `--url`), one `dev` holds (served to its functions' INIT under `DEV_SECRET_ID`) of the
/// event's environment, else its first; else the fixture sandbox secret.
async fn signing_secrets(args: &SendArgs) -> Result<Vec<(String, WebhookSecret)>, Failure> {
    use paymos_inbox_core::wire::signature::labelled_secrets;
    if !args.secrets.is_empty() {
        return labelled_secrets(&args.secrets.join("\n"))
            .map_err(|e| Failure::usage(format!("--secret: {}", e.reason)));
    }
    let held = match (&args.url, args.stack.running_dev()) {
        (None, Some(dev)) => match dev.secrets_manager_endpoint {
            Some(endpoint) => Some(dev_secrets(&endpoint).await?),
            None => None,
        },
        _ => None,
    };
    let Some(text) = held else {
        return labelled_secrets(FIXTURE_SECRET).map_err(|e| Failure::unreachable(e.reason));
    };
    let mut pairs = labelled_secrets(&text)
        .map_err(|e| Failure::unreachable(format!("the secrets dev holds: {}", e.reason)))?;
    let wanted = if args.live {
        Environment::Live
    } else {
        Environment::Test
    };
    let first = pairs
        .iter()
        .position(|(l, s)| environment_of(l, s) == Some(wanted))
        .unwrap_or(0);
    Ok(vec![pairs.swap_remove(first)])
}

/// The webhook secrets a running `dev` holds, read as its functions read them at INIT: a
/// `GetSecretValue` to the Secrets Manager stand-in it serves on loopback.
async fn dev_secrets(endpoint: &str) -> Result<String, Failure> {
    let failed = |e: String| {
        Failure::unreachable(format!("reading the secrets dev holds at {endpoint}: {e}"))
            .next("is `paymos-inbox dev` still running? or pass --secret")
    };
    let answer = reqwest::Client::new()
        .post(endpoint)
        .header("x-amz-target", "secretsmanager.GetSecretValue")
        .header("content-type", "application/x-amz-json-1.1")
        .body(serde_json::json!({ "SecretId": paymos_inbox_local::dev::DEV_SECRET_ID }).to_string())
        .timeout(SENDER_TIMEOUT)
        .send()
        .await
        .map_err(|e| failed(e.without_url().to_string()))?;
    let status = answer.status();
    let reply: serde_json::Value = answer.json().await.map_err(|e| failed(e.to_string()))?;
    match reply["SecretString"].as_str() {
        Some(text) if status.is_success() => Ok(text.to_owned()),
        _ => Err(failed(format!("{status}: {}", reply["message"]))),
    }
}
