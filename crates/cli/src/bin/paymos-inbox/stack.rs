//! Finding a receiver's tables and queues: the JSON line `dev` prints, or names and endpoints
//! given as flags or environment variables (a deployed stack's outputs).

use paymos_inbox_local::dev::{DevInfo, clients};

use crate::exit::Failure;

/// Where `dev` writes its JSON line unless told otherwise, and where the tools look for it.
pub const DEV_INFO_FILE: &str = "dev.json";

#[derive(clap::Args, Debug, Clone)]
pub struct StackArgs {
    /// A file holding the JSON line `paymos-inbox dev` printed (or `-` for stdin).
    #[arg(long)]
    dev_info: Option<std::path::PathBuf>,
    /// A deployed stack: its outputs name the tables and queues (uses the usual AWS
    /// credentials: a profile, `aws sso login`, credential_process, environment variables).
    #[arg(long, env = "PAYMOS_INBOX_STACK_NAME", conflicts_with = "dev_info")]
    stack_name: Option<String>,
    /// The samconfig.toml config environment whose stack to use when no --stack-name is given
    /// (`sandbox`, `live`; default: `default`, when ./samconfig.toml exists and nothing else
    /// names the stack or its tables), read from ./samconfig.toml.
    #[arg(long, env = "PAYMOS_INBOX_CONFIG_ENV", conflicts_with_all = ["dev_info", "stack_name"])]
    config_env: Option<String>,
    /// The AWS region (default: the profile's or AWS_REGION).
    #[arg(long, env = "AWS_REGION")]
    region: Option<String>,
    /// The AWS profile (default: AWS_PROFILE, else the default profile).
    #[arg(long, env = "AWS_PROFILE")]
    profile: Option<String>,
    /// The deliveries table (stack output DeliveriesTableName).
    #[arg(long, env = "DELIVERIES_TABLE")]
    deliveries_table: Option<String>,
    /// The state table (stack output StateTableName).
    #[arg(long, env = "STATE_TABLE")]
    state_table: Option<String>,
    /// The work queue URL (stack output WorkQueueUrl).
    #[arg(long, env = "WORK_QUEUE_URL")]
    queue_url: Option<String>,
    /// The dead-letter queue URL (stack output DeadLetterQueueUrl).
    #[arg(long, env = "DEAD_LETTER_QUEUE_URL")]
    dlq_url: Option<String>,
    /// The queue that receives the hand-off's events (stack output EventsQueueUrl).
    #[arg(long, env = "EVENTS_QUEUE_URL")]
    events_queue_url: Option<String>,
    /// The signed hand-off's queue (stack output WebhookDeliveryQueueUrl).
    #[arg(long, env = "WEBHOOK_QUEUE_URL")]
    webhook_queue_url: Option<String>,
    /// The signed hand-off's dead-letter queue (stack output WebhookTargetDeadLetterQueueUrl).
    #[arg(long, env = "WEBHOOK_DLQ_URL")]
    webhook_dlq_url: Option<String>,
    /// A DynamoDB endpoint other than AWS's (an emulator, LocalStack).
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB")]
    dynamodb_endpoint: Option<String>,
    /// An SQS endpoint other than AWS's.
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
    sqs_endpoint: Option<String>,
    /// Whether the stack runs the reverse check (stack output ReverseCheckOutput, or `dev`'s):
    /// on such a stack a person's word without the API ships nothing.
    #[arg(long, env = "PAYMOS_INBOX_REVERSE_CHECK", value_parser = ["on", "off"])]
    reverse_check: Option<String>,
}

/// What named a stack's tables and queues: where to look when one is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamedBy {
    /// `--dev-info FILE`: the JSON line a `dev` wrote.
    DevInfo(std::path::PathBuf),
    /// `--stack-name` (or `--config-env`): the deployed stack's outputs.
    Stack(String),
    /// Only flags and environment variables.
    Flags,
}

impl NamedBy {
    /// `--dev-info`'s file over the stack's name (`--stack-name`, `--config-env`).
    fn of(dev_info: Option<&std::path::Path>, stack_name: Option<String>) -> Self {
        match (dev_info, stack_name) {
            (Some(file), _) => Self::DevInfo(file.to_owned()),
            (None, Some(name)) => Self::Stack(name),
            (None, None) => Self::Flags,
        }
    }

    /// Why nothing gave the name `what` (a flag's name without its dashes), and the next step:
    /// what would give it, never what was given already (exit 2).
    pub fn missing(&self, what: &str) -> Failure {
        match self {
            Self::DevInfo(file) => Failure::usage(format!(
                "no {what}: {} names none (a `dev` of another version wrote it?)",
                file.display()
            ))
            .next(format!(
                "restart `paymos-inbox dev` (it writes the file again with every table and queue), or pass --{what}"
            )),
            Self::Stack(name) => Failure::usage(format!(
                "no {what}: the outputs of stack '{name}' name none (deployed from an older template?)"
            ))
            .next(format!(
                "update the stack (`sam deploy`: this version's template outputs it), or pass --{what}"
            )),
            Self::Flags => Failure::usage(format!("no {what}: nothing named it")).next(format!(
                "pass --stack-name (a deployed stack), --dev-info dev.json (a running `dev`), or --{what}"
            )),
        }
    }
}

pub struct Stack {
    /// What named its tables and queues.
    pub named_by: NamedBy,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// The state table's stream (`events tail --follow`).
    pub streams: aws_sdk_dynamodbstreams::Client,
    /// Who calls (the audit trail's actor): STS, for a stack on AWS; none on emulators, where
    /// `--actor` names the person.
    pub sts: Option<aws_sdk_sts::Client>,
    pub deliveries: Option<String>,
    pub state: Option<String>,
    pub queue: Option<String>,
    pub dlq: Option<String>,
    /// The queue the hand-off's events reach (`dev`'s stand-in for the bus and its rule).
    pub events_queue: Option<String>,
    /// The environment the stack applies (`live`/`sandbox`), from its outputs or `dev`.
    pub environment: Option<String>,
    /// The projects the stack applies, the first its home project (output
    /// `PaymosProjectIdsOutput`, or `dev`'s; none: every project).
    pub projects: paymos_inbox_core::money::change::Projects,
    /// Whether the stack runs the reverse check (`--reverse-check`, output
    /// `ReverseCheckOutput`, or `dev`'s): only Paymos' word then makes an invoice paid.
    pub reverse_check: bool,
    /// The bus the stack publishes to (stack output EventBusNameOutput).
    pub event_bus: Option<String>,
    /// The signed hand-off's queue and its dead-letter queue.
    pub webhook_queue: Option<String>,
    pub webhook_dlq: Option<String>,
    /// The deliver function (output `DeliverFunctionName`): `events test` asks it to post.
    pub deliver_function: Option<String>,
    /// `dev`'s stand-in of Lambda's API for the deliverer's event source mapping.
    pub lambda_endpoint: Option<String>,
    /// `dev`'s hand-off: where it posts and the secret it signs with (`events test` on `dev`).
    pub dev_forward: Option<(String, String)>,
    /// The deployed stack's alarms (its resources, read through CloudFormation and CloudWatch);
    /// none when no stack is named (`dev` has no CloudWatch; tables named by flags, no stack).
    pub alarms: Option<paymos_inbox::tools::alarms::StackAlarms>,
}

impl Stack {
    /// The value of a name the command needs, `value` read from this stack (exit 2 when nothing
    /// gave it: the hint says what would, from what named the stack: [`NamedBy::missing`]).
    pub fn require<'a>(&self, value: &'a Option<String>, what: &str) -> Result<&'a str, Failure> {
        value.as_deref().ok_or_else(|| self.named_by.missing(what))
    }

    /// The stack's fulfil use case for a person's road: its tables, of its projects.
    pub fn fulfil(
        &self,
    ) -> Result<
        paymos_inbox_core::roads::fulfil::Fulfil<paymos_inbox_aws::dynamodb::DynamoResources>,
        Failure,
    > {
        let fulfil = paymos_inbox_core::roads::fulfil::Fulfil::new(self.resources()?)
            .for_projects(self.projects.clone());
        // The stack's environment where it is known (its outputs, `dev`): what reads Paymos
        // (reconcile) refuses a key of the other one.
        let environment = self.environment.as_deref().and_then(|named| {
            paymos_inbox_lambda::config::environment(&|_: &str| Some(named.to_owned())).ok()
        });
        Ok(match environment {
            Some(environment) => fulfil.for_environment(environment),
            None => fulfil,
        })
    }

    /// The key scope of the project a person names (`--project`; none: the home project), or
    /// why it is not this stack's.
    pub fn scope_of(&self, project: Option<&str>) -> Result<Option<String>, Failure> {
        match project {
            Some(p) if !self.projects.applies(Some(p)) => Err(Failure::usage(format!(
                "--project {p} is not a project this stack applies ({})",
                self.projects.ids().join(", ")
            ))
            .next("pass one of the stack's PaymosProjectIds, or none for its first")),
            p => Ok(self.projects.scope(p)),
        }
    }

    /// The deliveries table's ledger: what waits for a person, each delivery's outcome.
    pub fn ledger(&self) -> Result<paymos_inbox_aws::dynamodb::DynamoLedger, Failure> {
        let deliveries = self.require(&self.deliveries, "deliveries-table")?;
        Ok(paymos_inbox_aws::dynamodb::DynamoLedger::new(
            self.dynamodb.clone(),
            deliveries,
            None,
        ))
    }

    /// The state table with its deliveries table, as the operator's commands write them.
    pub fn resources(&self) -> Result<paymos_inbox_aws::dynamodb::DynamoResources, Failure> {
        let state = self.require(&self.state, "state-table")?;
        let deliveries = self.require(&self.deliveries, "deliveries-table")?;
        Ok(paymos_inbox_aws::dynamodb::DynamoResources::new(
            self.dynamodb.clone(),
            state,
            deliveries,
        ))
    }
}

impl StackArgs {
    /// The ingest URL of a running `dev`: from --dev-info, else from ./dev.json (which `dev`
    /// writes while it runs).
    pub fn dev_ingest_url(&self) -> Option<String> {
        self.running_dev().map(|info| info.ingest_url)
    }

    /// What a running `dev` wrote: --dev-info, else ./dev.json.
    pub fn running_dev(&self) -> Option<DevInfo> {
        let path = self
            .dev_info
            .clone()
            .unwrap_or_else(|| std::path::PathBuf::from(DEV_INFO_FILE));
        let text = std::fs::read_to_string(path).ok()?;
        let line = text.lines().find(|l| l.trim_start().starts_with('{'))?;
        serde_json::from_str::<DevInfo>(line).ok()
    }

    /// These arguments reading `dev`'s JSON line from `file` when nothing else names the
    /// receiver: where `send` posted after finding `dev` by that file, `--wait` reads.
    #[must_use]
    pub fn or_dev_info(&self, file: &std::path::Path) -> Self {
        let mut args = self.clone();
        if !self.given() {
            args.dev_info = Some(file.to_owned());
        }
        args
    }

    pub fn given(&self) -> bool {
        self.dev_info.is_some()
            || self.stack_name.is_some()
            || self.config_env.is_some()
            || self.deliveries_table.is_some()
            || self.state_table.is_some()
    }

    /// The AWS configuration: --profile and --region over the usual chain. An unknown profile
    /// and a missing region are the caller's to fix (exit 2), found before any call.
    pub async fn aws(&self) -> Result<aws_config::SdkConfig, Failure> {
        let mut loader = aws_config::from_env().app_name(paymos_inbox_aws::aws::app_name());
        if let Some(profile) = &self.profile {
            if !profile_exists(profile) {
                return Err(Failure::usage(format!(
                    "unknown AWS profile '{profile}': not in ~/.aws/config or ~/.aws/credentials"
                ))
                .next(
                    "`aws configure list-profiles` lists them; or drop --profile and AWS_PROFILE",
                ));
            }
            loader = loader.profile_name(profile);
        }
        if let Some(region) = &self.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        let config = loader.load().await;
        if config.region().is_none() {
            let failure = Failure::usage(
                "no AWS region: neither --region, AWS_REGION nor the profile names one",
            );
            // A `dev` runs here, and nothing named a receiver: the person meant it, likely.
            if !self.given() && std::path::Path::new(DEV_INFO_FILE).is_file() {
                return Err(failure.next(format!(
                    "for the `dev` that runs here, pass --dev-info {DEV_INFO_FILE}; for a deployed stack, --region eu-west-1 (its region) or AWS_REGION"
                )));
            }
            return Err(
                failure.next("pass --region eu-west-1 (the stack's region), or set AWS_REGION")
            );
        }
        Ok(config)
    }

    /// The stack to read: --stack-name, else the stack of the --config-env in ./samconfig.toml
    /// (the one `sam deploy --config-env` deployed).
    fn stack_name(&self) -> Result<Option<String>, Failure> {
        self.stack_name_in(std::path::Path::new("samconfig.toml"))
            .map_err(|e| {
                Failure::usage(e).next("name the stack with --stack-name, or fix samconfig.toml")
            })
    }

    /// [`Self::stack_name`] with the samconfig file at `samconfig`.
    fn stack_name_in(&self, samconfig: &std::path::Path) -> Result<Option<String>, String> {
        if self.stack_name.is_some() {
            return Ok(self.stack_name.clone());
        }
        let implicit = self.config_env.is_none();
        let env = match self.config_env.as_deref() {
            Some(env) => env,
            // Nothing else names the stack: the documented default, when ./samconfig.toml has
            // one (`sam deploy` with no --config-env deploys it).
            None if !self.given()
                && self.queue_url.is_none()
                && self.dlq_url.is_none()
                && self.events_queue_url.is_none()
                && samconfig.exists() =>
            {
                "default"
            }
            None => return Ok(None),
        };
        let text = std::fs::read_to_string(samconfig)
            .map_err(|e| format!("--config-env {env}: samconfig.toml: {e}"))?;
        let config: toml::Table =
            toml::from_str(&text).map_err(|e| format!("samconfig.toml: {e}"))?;
        let name = config
            .get(env)
            .and_then(|e| e.get("global"))
            .and_then(|g| g.get("parameters"))
            .and_then(|p| p.get("stack_name"))
            .and_then(|n| n.as_str())
            .map(str::to_owned);
        match name {
            Some(name) => Ok(Some(name)),
            None if implicit => Ok(None),
            None => Err(format!(
                "samconfig.toml has no stack_name in [{env}.global.parameters]"
            )),
        }
    }

    /// The outputs and the alarms of the deployed stack `name`, when one is named.
    async fn deployed(
        &self,
        name: Option<&str>,
    ) -> Result<
        (
            std::collections::HashMap<String, String>,
            Option<paymos_inbox::tools::alarms::StackAlarms>,
        ),
        Failure,
    > {
        let Some(name) = name else {
            return Ok((std::collections::HashMap::new(), None));
        };
        let shared = self.aws().await?;
        Ok((
            self.outputs(&shared, name).await?,
            Some(paymos_inbox::tools::alarms::StackAlarms::new(&shared, name)),
        ))
    }

    /// The outputs of the deployed stack `name`.
    async fn outputs(
        &self,
        shared: &aws_config::SdkConfig,
        name: &str,
    ) -> Result<std::collections::HashMap<String, String>, Failure> {
        let region = shared
            .region()
            .map_or_else(String::new, ToString::to_string);
        let not_found = || {
            Failure::unreachable(format!("stack '{name}' not found in {region}")).next(
                "check --stack-name (or --config-env) and --region: `aws cloudformation describe-stacks --region REGION` lists them",
            )
        };
        let described = aws_sdk_cloudformation::Client::new(shared)
            .describe_stacks()
            .stack_name(name)
            .send()
            .await
            .map_err(|e| {
                let port = paymos_inbox_aws::aws::port_error("CloudFormation DescribeStacks", e);
                // CloudFormation names a missing stack only in its message.
                if port.message.contains("does not exist") {
                    Failure {
                        detail: Some(port.to_string()),
                        ..not_found()
                    }
                } else {
                    let failed = Failure::from(port);
                    Failure {
                        message: format!("--stack-name {name}: {}", failed.message),
                        ..failed
                    }
                }
            })?;
        let stack = described.stacks().first().ok_or_else(not_found)?;
        Ok(stack
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
            .collect())
    }

    /// The clients: for `dev`'s emulators (named by its info file, or both endpoints on
    /// loopback) with local credentials and no STS; else for AWS with the profile and region,
    /// at the endpoints given (a VPC or FIPS endpoint is still AWS: STS names who acts).
    async fn clients(
        &self,
        dynamodb_endpoint: Option<String>,
        sqs_endpoint: Option<String>,
        from_dev_info: bool,
    ) -> Result<
        (
            aws_sdk_dynamodb::Client,
            aws_sdk_sqs::Client,
            aws_sdk_dynamodbstreams::Client,
            Option<aws_sdk_sts::Client>,
        ),
        Failure,
    > {
        Ok(match (dynamodb_endpoint, sqs_endpoint) {
            (Some(d), Some(s)) if from_dev_info || (loopback(&d) && loopback(&s)) => {
                let (dynamodb, sqs) = clients(&d, &s).await;
                // DynamoDB Local serves the streams' API on its own endpoint.
                let streams = aws_sdk_dynamodbstreams::config::Builder::from(
                    &paymos_inbox_local::dev::shared_config().await,
                )
                .endpoint_url(d)
                .build();
                (
                    dynamodb,
                    sqs,
                    aws_sdk_dynamodbstreams::Client::from_conf(streams),
                    None,
                )
            }
            (d, s) => {
                let shared = self.aws().await?;
                let mut dc = aws_sdk_dynamodb::config::Builder::from(&shared);
                let mut tc = aws_sdk_dynamodbstreams::config::Builder::from(&shared);
                if let Some(d) = d {
                    dc = dc.endpoint_url(&d);
                    tc = tc.endpoint_url(d);
                }
                let mut sc = aws_sdk_sqs::config::Builder::from(&shared);
                if let Some(s) = s {
                    sc = sc.endpoint_url(s);
                }
                (
                    aws_sdk_dynamodb::Client::from_conf(dc.build()),
                    aws_sdk_sqs::Client::from_conf(sc.build()),
                    aws_sdk_dynamodbstreams::Client::from_conf(tc.build()),
                    Some(aws_sdk_sts::Client::new(&shared)),
                )
            }
        })
    }

    /// `dev`'s info file (`--dev-info`, `-` for standard input), if named: the JSON line
    /// `dev` prints.
    fn dev_info(&self) -> Result<Option<DevInfo>, Failure> {
        let Some(path) = &self.dev_info else {
            return Ok(None);
        };
        let text = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(|e| Failure::usage(format!("--dev-info -: {e}")))?
        } else {
            std::fs::read_to_string(path).map_err(|e| {
                Failure::usage(format!("--dev-info {}: {e}", path.display())).next(
                    "`paymos-inbox dev` writes dev.json while it runs: start it, or pass the file it wrote (--info-file)",
                )
            })?
        };
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with('{'))
            .unwrap_or_default();
        serde_json::from_str(line).map(Some).map_err(|e| {
            Failure::usage(format!("--dev-info: not the JSON line `dev` prints ({e})"))
        })
    }

    pub async fn resolve(&self) -> Result<Stack, Failure> {
        let info = self.dev_info()?;
        let stack_name = self.stack_name()?;
        let (outputs, alarms) = self.deployed(stack_name.as_deref()).await?;
        let named_by = NamedBy::of(self.dev_info.as_deref(), stack_name);
        let output = |key: &str| outputs.get(key).cloned();
        let pick = |flag: &Option<String>, from_info: Option<&String>| {
            flag.clone().or_else(|| from_info.cloned())
        };
        let dynamodb_endpoint = pick(
            &self.dynamodb_endpoint,
            info.as_ref().map(|i| &i.dynamodb_endpoint),
        );
        let sqs_endpoint = pick(&self.sqs_endpoint, info.as_ref().map(|i| &i.sqs_endpoint));
        let from_dev_info = info.as_ref().is_some_and(|i| {
            Some(&i.dynamodb_endpoint) == dynamodb_endpoint.as_ref()
                && Some(&i.sqs_endpoint) == sqs_endpoint.as_ref()
        });
        let (dynamodb, sqs, streams, sts) = self
            .clients(dynamodb_endpoint, sqs_endpoint, from_dev_info)
            .await?;
        Ok(Stack {
            named_by,
            dynamodb,
            sqs,
            streams,
            sts,
            deliveries: pick(
                &self.deliveries_table,
                info.as_ref().and_then(|i| i.tables.get("DeliveriesTable")),
            )
            .or_else(|| output("DeliveriesTableName")),
            state: pick(
                &self.state_table,
                info.as_ref().and_then(|i| i.tables.get("StateTable")),
            )
            .or_else(|| output("StateTableName")),
            queue: pick(
                &self.queue_url,
                info.as_ref().and_then(|i| i.queues.get("WorkQueue")),
            )
            .or_else(|| output("WorkQueueUrl")),
            dlq: pick(
                &self.dlq_url,
                info.as_ref().and_then(|i| i.queues.get("DeadLetterQueue")),
            )
            .or_else(|| output("DeadLetterQueueUrl")),
            events_queue: pick(
                &self.events_queue_url,
                info.as_ref()
                    .and_then(|i| i.queues.get("EventsDeliveryQueue")),
            )
            .or_else(|| output("EventsQueueUrl")),
            environment: info
                .as_ref()
                .and_then(|i| i.environment.clone())
                .or_else(|| output("PaymosEnvironmentOutput")),
            projects: info.as_ref().map_or_else(
                || {
                    paymos_inbox_core::money::change::Projects::parse(
                        &output("PaymosProjectIdsOutput").unwrap_or_default(),
                    )
                },
                |i| paymos_inbox_core::money::change::Projects::only(i.projects.clone()),
            ),
            reverse_check: self.reverse_check.as_deref().map_or_else(
                || {
                    info.as_ref().map_or_else(
                        || output("ReverseCheckOutput").as_deref() == Some("on"),
                        |i| i.reverse_check,
                    )
                },
                |flag| flag == "on",
            ),
            event_bus: output("EventBusNameOutput"),
            webhook_queue: pick(
                &self.webhook_queue_url,
                info.as_ref()
                    .and_then(|i| i.queues.get("WebhookDeliveryQueue")),
            )
            .or_else(|| output("WebhookDeliveryQueueUrl")),
            webhook_dlq: pick(
                &self.webhook_dlq_url,
                info.as_ref()
                    .and_then(|i| i.queues.get("WebhookTargetDeadLetterQueue")),
            )
            .or_else(|| output("WebhookTargetDeadLetterQueueUrl")),
            deliver_function: output("DeliverFunctionName"),
            lambda_endpoint: info.as_ref().and_then(|i| i.lambda_endpoint.clone()),
            dev_forward: info
                .as_ref()
                .and_then(|i| Some((i.forward_to.clone()?, i.webhook_signing_secret.clone()?))),
            alarms,
        })
    }
}

/// Whether `profile` is declared in the shared AWS config or credentials file (`[profile x]`,
/// `[x]`; the files AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE name, else ~/.aws/). The
/// default profile needs no file: environment variables may hold its keys.
/// Whether an endpoint's host is this machine (`localhost`, `127.0.0.0/8`, `::1`): an
/// emulator's, never AWS's.
fn loopback(endpoint: &str) -> bool {
    reqwest::Url::parse(endpoint).is_ok_and(|url| {
        url.host_str().is_some_and(|host| {
            host.eq_ignore_ascii_case("localhost")
                || host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        })
    })
}

fn profile_exists(profile: &str) -> bool {
    if profile == "default" {
        return true;
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let file = |var: &str, name: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let declares = |path: Option<std::path::PathBuf>, headers: &[String]| {
        path.and_then(|p| std::fs::read_to_string(p).ok())
            .is_some_and(|text| {
                text.lines().any(|l| {
                    let l = l.trim();
                    headers.iter().any(|h| {
                        l.strip_prefix('[')
                            .and_then(|l| l.strip_suffix(']'))
                            .is_some_and(|inner| {
                                inner.split_whitespace().collect::<Vec<_>>().join(" ") == *h
                            })
                    })
                })
            })
    };
    declares(
        file("AWS_CONFIG_FILE", "config"),
        &[format!("profile {profile}"), profile.to_owned()],
    ) || declares(
        file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        &[profile.to_owned()],
    )
}

/// Paymos API credentials, for the commands that read the API (reconcile, recheck).
#[derive(clap::Args)]
pub struct ApiArgs {
    /// The Paymos API key.
    #[arg(long, env = "PAYMOS_API_KEY", hide_env_values = true)]
    api_key: String,
    /// The Paymos API secret.
    #[arg(long, env = "PAYMOS_API_SECRET", hide_env_values = true)]
    api_secret: String,
    /// The API base URL (plain http only for loopback, for tests).
    #[arg(
        long,
        env = "PAYMOS_API_BASE_URL",
        default_value = "https://api.paymos.io"
    )]
    api_base_url: String,
}

/// Paymos API credentials for the commands that read the API only when given them (`check`'s
/// step 5; `dev`'s reverse check before every payment, as a stack with `PaymosApiSecretName`
/// runs it, and its reconciliation every minute): a key needs its secret and a secret its key.
#[derive(clap::Args)]
pub struct OptionalApiArgs {
    /// A Paymos API key (with --api-secret).
    #[arg(
        long,
        env = "PAYMOS_API_KEY",
        hide_env_values = true,
        requires = "api_secret"
    )]
    api_key: Option<String>,
    /// The Paymos API secret (with --api-key).
    #[arg(
        long,
        env = "PAYMOS_API_SECRET",
        hide_env_values = true,
        requires = "api_key"
    )]
    api_secret: Option<String>,
    /// The Paymos API base URL (a sandbox, or a stand-in).
    #[arg(
        long,
        env = "PAYMOS_API_BASE_URL",
        default_value = "https://api.paymos.io"
    )]
    api_base_url: String,
}

impl OptionalApiArgs {
    /// The official client when a key and secret were given, `None` when neither was.
    pub fn client(&self) -> Result<Option<paymos::PaymosClient>, String> {
        let (Some(key), Some(secret)) = (&self.api_key, &self.api_secret) else {
            return Ok(None);
        };
        paymos::PaymosClient::builder(key.clone(), secret.clone())
            .base_url(&self.api_base_url)
            .build()
            .map(Some)
            .map_err(|e| format!("Paymos API client: {e}"))
    }
}

impl ApiArgs {
    /// The official client, with the crate's default timeout unless `timeout` is given.
    pub fn client(
        &self,
        timeout: Option<std::time::Duration>,
    ) -> Result<paymos::PaymosClient, String> {
        let mut builder =
            paymos::PaymosClient::builder(self.api_key.clone(), self.api_secret.clone())
                .base_url(&self.api_base_url);
        if let Some(t) = timeout {
            builder = builder.timeout(t);
        }
        builder
            .build()
            .map_err(|e| format!("Paymos API client: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        stack: super::StackArgs,
    }

    fn args(line: &[&str]) -> super::StackArgs {
        Cli::parse_from(std::iter::once("x").chain(line.iter().copied())).stack
    }

    // --config-env documented a default (`default`) that was never read.
    // Both endpoint variables set made the command line take the stack for `dev`,
    // skip STS and record a self-declared actor; a VPC or FIPS endpoint is AWS.
    #[test]
    fn only_an_endpoint_on_this_machine_is_an_emulators() {
        for local in [
            "http://127.0.0.1:8000",
            "http://localhost:4566",
            "http://[::1]:9324",
            "http://127.0.0.2",
        ] {
            assert!(super::loopback(local), "{local}");
        }
        for aws in [
            "https://vpce-0a1b.dynamodb.eu-west-1.vpce.amazonaws.com",
            "https://sqs-fips.us-east-1.amazonaws.com",
            "http://10.0.0.5:8000",
            "http://localhost.example.com",
            "not a url",
        ] {
            assert!(!super::loopback(aws), "{aws}");
        }
    }

    #[test]
    fn the_default_config_env_names_the_stack_when_nothing_else_does() {
        let scratch = paymos_inbox_testkit::scratch("samconfig");
        let dir = scratch.path();
        let file = dir.join("samconfig.toml");
        std::fs::write(
            &file,
            "version = 0.1\n[default.global.parameters]\nstack_name = \"shop\"\n[live.global.parameters]\nstack_name = \"shop-live\"\n",
        )
        .unwrap();
        let name = |line: &[&str]| args(line).stack_name_in(&file);
        assert_eq!(name(&[]), Ok(Some("shop".into())));
        assert_eq!(
            name(&["--config-env", "live"]),
            Ok(Some("shop-live".into()))
        );
        assert_eq!(name(&["--stack-name", "other"]), Ok(Some("other".into())));
        assert_eq!(
            name(&["--state-table", "t"]),
            Ok(None),
            "tables named: no stack"
        );
        assert_eq!(
            args(&[]).stack_name_in(&dir.join("missing.toml")),
            Ok(None),
            "no samconfig.toml: no stack"
        );
        assert!(name(&["--config-env", "staging"]).is_err());
    }
}
