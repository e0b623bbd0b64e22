//! `events pause`, `events resume`, `events test`: the health of the hand-off's destination
//! (`WebhookTargetUrl`), each recorded in the audit trail. Pause and resume switch the deliver
//! function's event source mapping (the events wait in their queue, none is lost); test asks
//! the deployed deliver function to post a signed test event and says what the endpoint
//! answered.

use std::process::ExitCode;

use paymos_inbox_aws::lambda::{EventSourceSwitch, test_endpoint};
use paymos_inbox_core::money::record::ActionKind;
use paymos_inbox_core::roads::endpoint::DeliverySwitch as _;
use serde_json::{Value, json};

use crate::exit::Failure;
use crate::failed as fail;
use crate::stack::{Stack, StackArgs};

/// The audit entry's subject: the destination, named as the template names it.
const SUBJECT: &str = "WebhookTargetUrl";

#[derive(clap::Args)]
pub struct SwitchArgs {
    /// Who acts, on `dev` (the audit trail's actor; on AWS it is your credentials' identity).
    #[arg(value_parser = crate::exit::named, long)]
    actor: Option<String>,
    /// Why (kept in the audit trail).
    #[arg(value_parser = crate::exit::named, long)]
    reason: Option<String>,
    #[command(flatten)]
    stack: StackArgs,
}

/// `events pause` (`on` false) and `events resume` (`on` true).
pub async fn switch(args: SwitchArgs, on: bool) -> ExitCode {
    let run = async {
        let stack = args.stack.resolve().await?;
        crate::audit::recordable(&stack)?;
        let switch = switch_of(&stack, &args.stack).await?;
        let actor = crate::audit::who(&stack, args.actor.as_deref()).await?;
        let kind = if on {
            ActionKind::EventsResume
        } else {
            ActionKind::EventsPause
        };
        let begun =
            crate::audit::begin(&stack, kind, &actor, SUBJECT, args.reason.as_deref()).await?;
        let turned = switch.turn(on).await.map_err(Failure::from);
        crate::audit::finish(&stack, &begun, turned, |changed| {
            let said = match (on, changed) {
                (true, true) => "resumed",
                (true, false) => "already delivering",
                (false, true) => "paused",
                (false, false) => "already paused",
            };
            (said.to_owned(), Some(u64::from(*changed)))
        })
        .await
    };
    match run.await {
        Ok(changed) => {
            let said = match (on, changed) {
                (true, true) => {
                    "resumed: the deliver function takes the queue's events again, each on its own retry schedule"
                }
                (true, false) => "already delivering: nothing changed",
                (false, true) => {
                    "paused: the events wait in their queue (kept 14 days); `paymos-inbox events resume` delivers them"
                }
                (false, false) => "already paused: nothing changed",
            };
            say!("{said}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// Whether the signed hand-off delivers or is paused, for `status`: `{"state": "delivering"}`
/// or `{"state": "paused"}`, `{"unavailable": why}` when it cannot be read, null when the stack
/// hands off to no endpoint (no `WebhookTargetUrl`; `dev` without `--forward-to`).
pub async fn hand_off(stack: &Stack, args: &StackArgs) -> Value {
    let dev = matches!(stack.named_by, crate::stack::NamedBy::DevInfo(_));
    if stack.webhook_queue.is_none() || (dev && stack.lambda_endpoint.is_none()) {
        return Value::Null;
    }
    let on = match switch_of(stack, args).await {
        Ok(switch) => switch.is_on().await.map_err(Failure::from),
        Err(e) => Err(e),
    };
    match on {
        Ok(true) => json!({"state": "delivering"}),
        Ok(false) => json!({"state": "paused"}),
        Err(e) => json!({"unavailable": e.message}),
    }
}

/// The deliver function's event source mapping: on AWS, Lambda's, found by the delivery
/// queue's ARN; on `dev`, its stand-in.
async fn switch_of(stack: &Stack, args: &StackArgs) -> Result<EventSourceSwitch, Failure> {
    let queue = stack.require(&stack.webhook_queue, "webhook-queue-url")?;
    let arn = stack
        .sqs
        .get_queue_attributes()
        .queue_url(queue)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| paymos_inbox_aws::aws::port_error("SQS GetQueueAttributes", e))?
        .attributes
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
        .unwrap_or_default();
    Ok(EventSourceSwitch::new(lambda(stack, args).await?, arn))
}

/// Lambda's client: `dev`'s stand-in when `dev` serves one, else AWS's.
async fn lambda(stack: &Stack, args: &StackArgs) -> Result<aws_sdk_lambda::Client, Failure> {
    if let Some(endpoint) = &stack.lambda_endpoint {
        let config = aws_sdk_lambda::Config::builder()
            .behavior_version(aws_sdk_lambda::config::BehaviorVersion::latest())
            .region(aws_sdk_lambda::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_lambda::config::Credentials::new(
                "dev", "dev", None, None, "dev",
            ))
            .endpoint_url(endpoint)
            .build();
        return Ok(aws_sdk_lambda::Client::from_conf(config));
    }
    if matches!(stack.named_by, crate::stack::NamedBy::DevInfo(_)) {
        return Err(Failure::usage(
            "this `dev` runs no hand-off to an endpoint, so nothing to pause, resume or test",
        )
        .next("start it with `make dev FORWARD_TO=http://localhost:3000/hooks`"));
    }
    Ok(aws_sdk_lambda::Client::new(&args.aws().await?))
}

#[derive(clap::Args)]
pub struct TestArgs {
    /// Who acts, on `dev` (the audit trail's actor; on AWS it is your credentials' identity).
    #[arg(value_parser = crate::exit::named, long)]
    actor: Option<String>,
    /// Print the answer as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
}

/// `events test`: a signed `Endpoint Test` event posted to `WebhookTargetUrl` from the
/// deployed stack (its deliver function: its network, its secret), or from `dev` to its
/// `--forward-to`; exit 0 when the endpoint answered 2xx, 1 otherwise.
pub async fn test(args: TestArgs) -> ExitCode {
    let run = async {
        let stack = args.stack.resolve().await?;
        crate::audit::recordable(&stack)?;
        let actor = crate::audit::who(&stack, args.actor.as_deref()).await?;
        let begun =
            crate::audit::begin(&stack, ActionKind::EventsTest, &actor, SUBJECT, None).await?;
        let answered = post_test(&stack, &args.stack).await;
        crate::audit::finish(&stack, &begun, answered, |a| (summary(a), None)).await
    };
    match run.await {
        Ok(answer) => {
            if args.json {
                say!("{answer}");
            } else {
                say!("{}", summary(&answer));
            }
            if accepted(&answer) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => fail(e),
    }
}

async fn post_test(stack: &Stack, args: &StackArgs) -> Result<Value, Failure> {
    if let Some((url, secret)) = &stack.dev_forward {
        let secret = paymos_inbox_core::roads::outbound::OutboundSecret::parse(secret)
            .map_err(|e| Failure::usage(format!("dev's signing secret: {e}")))?;
        let target = paymos_inbox_aws::webhook::HttpWebhookTarget::new(
            url,
            std::time::Duration::from_secs(10),
        )
        .map_err(Failure::from)?;
        let environment = crate::handoff::environment_of(stack, None)?;
        return Ok(paymos_inbox_lambda::deliver::test_post(
            &target,
            &secret,
            environment,
            paymos_inbox_lambda::now_ms(),
        )
        .await);
    }
    let function = stack.require(&stack.deliver_function, "deliver-function")?;
    let client = lambda(stack, args).await?;
    test_endpoint(&client, function)
        .await
        .map_err(Failure::from)
}

/// Whether the endpoint took the test event (2xx).
fn accepted(answer: &Value) -> bool {
    answer["status"]
        .as_u64()
        .is_some_and(|s| (200..300).contains(&s))
}

/// The answer in a few words: `200 in 41 ms (webhook-id endpoint-test:…)`.
fn summary(answer: &Value) -> String {
    let id = answer["webhook_id"].as_str().unwrap_or("-");
    let took = answer["took_ms"].as_u64().unwrap_or(0);
    match (answer["status"].as_u64(), answer["error"].as_str()) {
        (Some(status), _) => {
            format!("the endpoint answered {status} in {took} ms (webhook-id {id})")
        }
        (None, Some(error)) => format!("no answer from the endpoint: {error} (webhook-id {id})"),
        (None, None) => format!("no answer from the endpoint: {}", json!(answer)),
    }
}
