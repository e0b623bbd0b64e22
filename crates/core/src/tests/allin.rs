//! Issue 39, the cost counted whole: a million deliveries of the heat test's mix, every item
//! AWS bills for them counted from that second (`heat.rs`) and priced at us-east-1's list
//! prices, on-demand and with `TableBillingMode=PROVISIONED`, with the default parameters and
//! with `LogLevel=WARN` (and each with `Tracing=Active`); what each guarantee's write units cost; and
//! whether the targets are reached. And (issue 51) what a stack with no traffic pays a
//! month, counted from what `template.yaml` makes with each column's parameters and each
//! `Monitoring` setting. docs/performance.md shows the tables this generates, and a test holds
//! them to it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::heat::{
    DOLLARS_PER_MILLION_RRU, DOLLARS_PER_MILLION_WRU, GUARANTEES, Second, Took, the_second,
};

/// Bytes written to CloudWatch Logs, measured by `crates/lambda/tests/log_bytes.rs` (which
/// fails when these differ from what the functions write): ingest's and fulfil's per delivery
/// (ten deliveries shaped like the mix, fulfil's as one batch of ten), at `INFO` and at `WARN`,
/// and the publisher's per event published (`events/publish-stream.json`; none at `WARN`).
struct Logged {
    ingest: u64,
    fulfil: u64,
    ingest_warn: u64,
    fulfil_warn: u64,
    publish: u64,
}

const LOG_BYTES: Logged = Logged {
    ingest: 261,
    fulfil: 283,
    ingest_warn: 0,
    fulfil_warn: 0,
    publish: 199,
};

/// Messages in a fulfil invocation: the work queue's event source takes `BatchSize: 10` and
/// waits up to `MaximumBatchingWindowInSeconds: 1` (template.yaml), so its batches are full
/// from some ten deliveries a second per poller, the busy merchant this prices. A quiet stack's
/// batches are of one (the table's last line reprices SQS, Lambda and X-Ray for it, not the
/// log bytes, measured in batches of ten).
const FULFIL_BATCH: f64 = 10.0;
/// Stream records in a publisher invocation: the state table's stream event source takes
/// `BatchSize: 100` within `MaximumBatchingWindowInSeconds: 1` (template.yaml).
const PUBLISH_BATCH: f64 = 100.0;
/// Ingest's billed duration: three sequential round trips in one region, 20–35 ms
/// (docs/performance.md, *On AWS*: paper figures, no account to measure on).
const INGEST_MS: f64 = 25.0;
/// A fulfil batch's: its ten messages applied at once (`fulfil::CONCURRENCY`), each two or
/// three sequential DynamoDB calls of single-digit milliseconds (paper figures, as above).
const FULFIL_BATCH_MS: f64 = 30.0;
/// A batch of delayed checks' (issue 51): each check one strongly consistent `GetItem` of its
/// record, ten at once (a paper figure, as above). Checks share fulfil's queue and batches:
/// a delivery's work and its check are two messages, so twice the batches of before.
const CHECK_BATCH_MS: f64 = 10.0;
/// The publisher's, per event: counted as if each event took one `PutEvents` of its own, one
/// after the other, an upper bound (`handoff::publish_changes` puts up to ten a call, four
/// calls at once; under a cent a million deliveries either way; paper figure, as above).
const PUT_EVENTS_MS: f64 = 20.0;
/// Every function's memory (template.yaml, `Globals`: `MemorySize: 256`), in GB.
const MEMORY_GB: f64 = 0.25;
/// X-Ray's sampling of a Lambda function with `Tracing: Active`, which the function cannot
/// change: the first request each second, then 5 % of the rest (AWS X-Ray Developer Guide,
/// *Configuring sampling rules*; AWS Lambda Developer Guide, *Visualize Lambda function
/// invocations using AWS X-Ray*: "You cannot configure the X-Ray sampling rate for your
/// functions"). At a busy merchant's rates the first-a-second part is nothing; each traced
/// function's invocations are sampled on their own. Under a delivery a second (a quiet stack,
/// the table's last line) the first a second is every invocation.
const SAMPLED: f64 = 0.05;

/// us-east-1 list prices, dollars per million of each unit.
mod price {
    /// SQS standard queue, per request (each 64 KB of a message is one).
    pub const SQS_REQUEST: f64 = 0.40;
    /// Lambda, per request.
    pub const LAMBDA_REQUEST: f64 = 0.20;
    /// Lambda arm64, per GB-second ($0.0000133334 each).
    pub const LAMBDA_GB_S: f64 = 13.3334;
    /// CloudWatch Logs, per byte ingested: $0.50 per GB (standard class, the first 10 TB of
    /// Lambda's logs a month), a GB read as 10^9 bytes (the dearer reading).
    pub const LOG_BYTE: f64 = 0.50 / 1_000.0;
    /// X-Ray, per trace recorded ($5.00 per million).
    pub const TRACE: f64 = 5.00;
    /// EventBridge, per custom event published ($1.00 per million).
    pub const EVENT: f64 = 1.00;
    /// DynamoDB provisioned capacity: a write unit for an hour costs $0.00065 and takes 3,600
    /// writes; auto scaling keeps use near 70 %.
    pub const PROVISIONED_WRU: f64 = 0.000_65 / 3_600.0 / 0.70 * 1e6;
    /// And a read unit for an hour, $0.00013.
    pub const PROVISIONED_RRU: f64 = 0.000_13 / 3_600.0 / 0.70 * 1e6;
}

/// A month as CloudWatch, Secrets Manager and DynamoDB bill one by the hour.
const HOURS: f64 = 730.0;

/// us-east-1 list prices of what a stack pays a month, traffic or none
/// (`shared/reference/aws-scale-and-cost.md`, from AWS's CloudWatch, Secrets Manager and
/// EventBridge pricing pages), in dollars.
mod monthly {
    /// A standard-resolution alarm's metric: a metric-math alarm is billed per metric it reads.
    pub const ALARM_METRIC: f64 = 0.10;
    /// A dashboard (beyond the account's free three, which its other uses may take).
    pub const DASHBOARD: f64 = 3.00;
    /// A custom metric series (each distinct set of dimension values is one), EMF included.
    pub const SERIES: f64 = 0.30;
    /// A secret.
    pub const SECRET: f64 = 0.40;
    /// An EventBridge Scheduler invocation, priced as the reference's EventBridge event ($1.00
    /// a million; counted without any free tier).
    pub const SCHEDULED_RUN: f64 = 1.00 / 1e6;
}

/// What one run of the sweep on an idle stack takes (paper figures, as the durations above):
/// 100 ms; the 64 shards of `pending-by-age` queried twice (the stranded, then the oldest), the
/// eight keys of `waiting` twice (the bodies kept, what waits) and the eight review lists: 152
/// queries of an empty page (counted by `an_idle_sweep_queries_each_shard_of_what_waits_once_a_read`
/// in the command line's tests), each counted a whole read unit (the
/// most it can be); 700 bytes logged at `INFO` (its `sweep done` line and its metrics
/// document), 300 at `WARN` (the document alone).
struct IdleRun {
    ms: f64,
    read_units: f64,
    bytes: f64,
    bytes_warn: f64,
}

const IDLE_SWEEP: IdleRun = IdleRun {
    ms: 100.0,
    read_units: 152.0,
    bytes: 700.0,
    bytes_warn: 300.0,
};
/// The requests an SQS event source makes of an empty queue in a month: five long polls of
/// 20 s at a time (a paper figure: Lambda does not document how many pollers wait on an empty
/// queue).
const IDLE_POLLS: f64 = 5.0 * 3.0 * 60.0 * HOURS;
/// The custom metric series an idle stack writes: the sweep's `PaymentsWaiting` alone
/// (`lambda/src/sweep.rs` writes `OldestPendingSeconds` and `StrandedResent` only when
/// something is pending or sent again, and the sweep counts no cold start).
const IDLE_SERIES: f64 = 1.0;

/// `rate(N minutes|hours|days)` → runs a month.
fn runs_a_month(rate: &str) -> f64 {
    let inner = rate
        .strip_prefix("rate(")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{rate}: price a cron schedule here"));
    let (n, unit) = inner.split_once(' ').expect("rate(N unit)");
    let n: f64 = n.parse().expect("a number of units");
    let minutes = match unit.trim_end_matches('s') {
        "minute" => 1.0,
        "hour" => 60.0,
        "day" => 1_440.0,
        other => panic!("a rate in {other}"),
    };
    HOURS * 60.0 / (n * minutes)
}

/// What a stack with no traffic pays a month with `monitoring`, each item as (item, how much,
/// dollars): counted from what `template.yaml` makes with the column's parameters.
#[allow(clippy::cast_precision_loss, reason = "counts of a few dozen")]
fn floor(
    template: &yaml_serde::Value,
    column: Stack,
    monitoring: &str,
) -> Vec<(String, String, f64)> {
    let stack = super::conditions::Stack::new(
        template,
        &[
            ("Monitoring", monitoring),
            (
                "TableBillingMode",
                if column.provisioned {
                    "PROVISIONED"
                } else {
                    "PAY_PER_REQUEST"
                },
            ),
            ("LogLevel", if column.warn { "WARN" } else { "INFO" }),
            (
                "Tracing",
                if column.traced {
                    "Active"
                } else {
                    "PassThrough"
                },
            ),
        ],
    );
    let alarms = stack.resources("AWS::CloudWatch::Alarm");
    let read: usize = alarms
        .iter()
        .map(|(_, a)| {
            a["Properties"]["Metrics"].as_sequence().map_or(1, |m| {
                m.iter().filter(|m| !m["MetricStat"].is_null()).count()
            })
        })
        .sum();
    let dashboards = stack.resources("AWS::CloudWatch::Dashboard").len();
    // The webhook secrets ingest reads, the API key's when set, and those the stack makes.
    let secrets = 1
        + usize::from(!stack.parameter("PaymosApiSecretName").is_empty())
        + stack.resources("AWS::SecretsManager::Secret").len();
    let keys = stack.resources("AWS::KMS::Key").len()
        + usize::from(!stack.parameter("KmsKeyArn").is_empty());
    assert_eq!(keys, 0, "price the KMS keys of the stack here");
    let events = |kind: &'static str| {
        stack
            .resources("AWS::Serverless::Function")
            .into_iter()
            .flat_map(|(_, f)| f["Properties"]["Events"].as_mapping().into_iter().flatten())
            .filter(move |(_, e)| e["Type"].as_str() == Some(kind))
            .map(|(_, e)| e)
            .collect::<Vec<_>>()
    };
    let schedules = events("ScheduleV2");
    assert_eq!(
        schedules.len(),
        1,
        "the sweep's schedule alone: price the others' runs here"
    );
    let rate = schedules[0]["Properties"]["ScheduleExpression"].clone();
    let rate = match &rate {
        yaml_serde::Value::Tagged(r) => stack.parameter(r.value.as_str().unwrap()).to_owned(),
        other => other.as_str().unwrap().to_owned(),
    };
    let runs = runs_a_month(&rate);
    let run = IDLE_SWEEP;
    let per_run = monthly::SCHEDULED_RUN
        + price::LAMBDA_REQUEST / 1e6
        + MEMORY_GB * run.ms / 1_000.0 * price::LAMBDA_GB_S / 1e6
        + if column.provisioned {
            0.0
        } else {
            run.read_units * DOLLARS_PER_MILLION_RRU / 1e6
        }
        + if column.warn {
            run.bytes_warn
        } else {
            run.bytes
        } * price::LOG_BYTE
            / 1e6
        + if column.traced {
            price::TRACE / 1e6
        } else {
            0.0
        };
    let polled = events("SQS").len();
    let (mut write_units, mut read_units) = (0.0, 0.0);
    for (_, target) in stack.resources("AWS::ApplicationAutoScaling::ScalableTarget") {
        let p = &target["Properties"];
        let min = p["MinCapacity"].as_f64().expect("a MinCapacity");
        if p["ScalableDimension"]
            .as_str()
            .unwrap_or_default()
            .contains("Write")
        {
            write_units += min;
        } else {
            read_units += min;
        }
    }
    vec![
        (
            "CloudWatch alarms, $0.10 a metric each reads".into(),
            format!("{} alarms, {read} metrics", alarms.len()),
            read as f64 * monthly::ALARM_METRIC,
        ),
        (
            "CloudWatch dashboard".into(),
            format!("{dashboards}"),
            dashboards as f64 * monthly::DASHBOARD,
        ),
        (
            "custom metrics an idle stack writes (the sweep's `PaymentsWaiting`)".into(),
            format!("{IDLE_SERIES:.0} series"),
            IDLE_SERIES * monthly::SERIES,
        ),
        (
            "Secrets Manager: the webhook secrets' (and the API key's when set)".into(),
            format!("{secrets}"),
            secrets as f64 * monthly::SECRET,
        ),
        (
            "KMS: no key of the stack's own (`KmsKeyArn` empty)".into(),
            format!("{keys}"),
            0.0,
        ),
        (
            format!("the sweep's runs, `{rate}`: the schedule, Lambda, its reads, logs and traces"),
            format!("{runs:.0} runs"),
            runs * per_run,
        ),
        (
            "SQS: the event sources' polls of an empty queue".into(),
            format!(
                "{polled} queues, {:.0} requests",
                polled as f64 * IDLE_POLLS
            ),
            polled as f64 * IDLE_POLLS * price::SQS_REQUEST / 1e6,
        ),
        (
            "DynamoDB: provisioned capacity's minimum (auto scaling's `MinCapacity`)".into(),
            format!("{write_units:.0} write units, {read_units:.0} read units"),
            HOURS * (write_units * 0.000_65 + read_units * 0.000_13),
        ),
        (
            "storage at rest: the tables, their backups, the logs".into(),
            "a few MB".into(),
            0.0,
        ),
    ]
}

fn floor_total(template: &yaml_serde::Value, column: Stack, monitoring: &str) -> f64 {
    floor(template, column, monitoring)
        .iter()
        .map(|i| i.2)
        .sum()
}

/// The parameters a column prices.
#[derive(Clone, Copy)]
struct Stack {
    provisioned: bool,
    /// `LogLevel=WARN` (else `INFO`, the default).
    warn: bool,
    /// `Tracing=Active` (else `PassThrough`, the default).
    traced: bool,
}

impl Stack {
    /// This column with `Tracing=Active`.
    fn traced(self) -> Self {
        Self {
            traced: true,
            ..self
        }
    }
}

/// The table's columns: on-demand and provisioned, each with the defaults and `LogLevel=WARN`.
const STACKS: [Stack; 4] = [
    Stack {
        provisioned: false,
        warn: false,
        traced: false,
    },
    Stack {
        provisioned: false,
        warn: true,
        traced: false,
    },
    Stack {
        provisioned: true,
        warn: false,
        traced: false,
    },
    Stack {
        provisioned: true,
        warn: true,
        traced: false,
    },
];

/// What one delivery of `took` takes of each item: (item, how much, its unit, dollars per
/// million deliveries), on a busy stack or a `quiet` one (under a delivery a second).
#[allow(clippy::cast_precision_loss, reason = "counts of a few thousand")]
fn items(took: &Took, stack: Stack, quiet: bool) -> Vec<(&'static str, f64, &'static str, f64)> {
    let (batch, sampled) = if quiet {
        (1.0, 1.0)
    } else {
        (FULFIL_BATCH, SAMPLED)
    };
    let per = |n: u64| n as f64 / took.deliveries as f64;
    let (wru, rru, changes, events) = (
        per(took.wru),
        per(took.rru),
        per(took.changes),
        per(took.events),
    );
    let (wru_price, rru_price) = if stack.provisioned {
        (price::PROVISIONED_WRU, price::PROVISIONED_RRU)
    } else {
        (DOLLARS_PER_MILLION_WRU, DOLLARS_PER_MILLION_RRU)
    };
    // Ingest's one `SendMessageBatch` of the work and its check; fulfil's receive and delete
    // of each, a batch at a time.
    let sqs = 1.0 + 4.0 / batch;
    let invocations = 1.0 + 2.0 / batch + changes / PUBLISH_BATCH;
    // A change of the mix makes one event at most; a `PutEvents` per event, counted high.
    let gb_s = MEMORY_GB
        * (INGEST_MS + (FULFIL_BATCH_MS + CHECK_BATCH_MS) / batch + events * PUT_EVENTS_MS)
        / 1_000.0;
    // A batch of checks writes fulfil's metrics document too (`fulfil_warn` is that document
    // a delivery, alone at `WARN`); a check that finds its delivery processed logs no line.
    let logged = if stack.warn {
        (LOG_BYTES.ingest_warn + 2 * LOG_BYTES.fulfil_warn) as f64
    } else {
        (LOG_BYTES.ingest + LOG_BYTES.fulfil + LOG_BYTES.fulfil_warn) as f64
            + events * LOG_BYTES.publish as f64
    };
    let traces = if stack.traced {
        sampled * invocations
    } else {
        0.0
    };
    vec![
        ("DynamoDB writes", wru, "write units", wru * wru_price),
        ("DynamoDB reads", rru, "read units", rru * rru_price),
        (
            "SQS: ingest's send of the work and its check, fulfil's receive and delete a batch",
            sqs,
            "requests",
            sqs * price::SQS_REQUEST,
        ),
        (
            "Lambda requests: ingest, fulfil a batch (of work or checks), the publisher a stream batch",
            invocations,
            "invocations",
            invocations * price::LAMBDA_REQUEST,
        ),
        (
            "Lambda duration (256 MB)",
            gb_s,
            "GB-s",
            gb_s * price::LAMBDA_GB_S,
        ),
        (
            "CloudWatch Logs: ingest's, fulfil's and the publisher's lines",
            logged,
            "bytes",
            logged * price::LOG_BYTE,
        ),
        ("X-Ray", traces, "traces", traces * price::TRACE),
        (
            "EventBridge: the hand-off's events",
            events,
            "events",
            events * price::EVENT,
        ),
        (
            "Secrets Manager: one call a cold start, none a delivery",
            0.0,
            "calls",
            0.0,
        ),
    ]
}

fn total(took: &Took, stack: Stack, quiet: bool) -> f64 {
    items(took, stack, quiet).iter().map(|i| i.3).sum()
}

fn amount(x: f64, unit: &str) -> String {
    match unit {
        "bytes" => format!("{x:.0} B"),
        "GB-s" => format!("{x:.4} GB-s"),
        _ if x == 0.0 => format!("0 {unit}"),
        _ => format!("{x:.3} {unit}"),
    }
}

/// The all-in table, the per-path totals, and what each guarantee costs.
fn all_in(second: &Second, template: &yaml_serde::Value) -> String {
    let mix = second.mix();
    let mut out = String::from(
        "| item | a delivery of the mix | on-demand | on-demand, `LogLevel=WARN` | provisioned | provisioned, `WARN` |\n|---|---|---|---|---|---|\n",
    );
    let columns: Vec<_> = STACKS.iter().map(|s| items(&mix, *s, false)).collect();
    for (row, (item, n, unit, _)) in columns[0].iter().enumerate() {
        let (warn, traced) = (
            &columns[1][row],
            &items(&mix, STACKS[0].traced(), false)[row],
        );
        let shown = if (warn.1 - n).abs() > f64::EPSILON {
            format!("{} (`WARN`: {})", amount(*n, unit), amount(warn.1, warn.2))
        } else if (traced.1 - n).abs() > f64::EPSILON {
            format!(
                "{} (`Tracing=Active`: {})",
                amount(*n, unit),
                amount(traced.1, traced.2)
            )
        } else {
            amount(*n, unit)
        };
        let _ = write!(out, "| {item} | {shown} |");
        for column in &columns {
            let _ = write!(out, " ${:.2} |", column[row].3);
        }
        out.push('\n');
    }
    let totals: Vec<f64> = STACKS.iter().map(|s| total(&mix, *s, false)).collect();
    out.push_str("| **total, per million deliveries** | |");
    for t in &totals {
        let _ = write!(out, " **${t:.2}** |");
    }
    for (row, quiet, traced) in [
        ("with `Tracing=Active`", false, true),
        (
            "total under a delivery a second: fulfil's batches of one",
            true,
            false,
        ),
        (
            "under a delivery a second, with `Tracing=Active`: every invocation traced",
            true,
            true,
        ),
    ] {
        let _ = write!(out, "\n| {row} | |");
        for s in STACKS {
            let s = if traced { s.traced() } else { s };
            let _ = write!(out, " ${:.2} |", total(&mix, s, quiet));
        }
    }
    for monitoring in ["essential", "full"] {
        let _ = write!(
            out,
            "\n| **a month with no traffic**, `Monitoring={monitoring}`{} | |",
            if monitoring == "essential" {
                " (the default)"
            } else {
                ""
            }
        );
        for s in STACKS {
            let _ = write!(out, " ${:.2} |", floor_total(template, s, monitoring));
        }
    }
    out.push_str(&floor_table(template));
    out.push_str("\n\nPer path, all-in (the mix's log bytes a delivery), per million deliveries of that outcome:\n\n| outcome | on-demand | provisioned | the hand-off's events a delivery |\n|---|---|---|---|\n");
    for (outcome, took) in &second.by_outcome {
        #[allow(clippy::cast_precision_loss, reason = "counts of a few thousand")]
        let events = took.events as f64 / took.deliveries as f64;
        let _ = writeln!(
            out,
            "| `{outcome}` | ${:.2} | ${:.2} | {events:.2} |",
            total(took, STACKS[0], false),
            total(took, STACKS[2], false)
        );
    }
    out.push_str(&guarantees(&mix, &totals));
    let quiet = floor_total(template, STACKS[0], "essential");
    let _ = writeln!(
        out,
        "\n**a month with no traffic**: ${quiet:.2} with the defaults (`Monitoring=essential`, on-demand); the target is $3.00. {}",
        if quiet <= 3.0 { "Reached." } else { "Missed." }
    );
    out
}

/// What a month with no traffic pays, item by item, with the default parameters.
fn floor_table(template: &yaml_serde::Value) -> String {
    let mut out = String::from(
        "\n\nA month with no traffic, item by item, with the default parameters (on-demand, `INFO`, `PassThrough`):\n\n| item | `Monitoring=essential` | | `Monitoring=full` | |\n|---|---|---|---|---|\n",
    );
    let (essential, full) = (
        floor(template, STACKS[0], "essential"),
        floor(template, STACKS[0], "full"),
    );
    for ((item, n, cost), (_, n_full, cost_full)) in essential.iter().zip(&full) {
        let _ = writeln!(
            out,
            "| {item} | {n} | ${cost:.2} | {n_full} | ${cost_full:.2} |"
        );
    }
    let _ = write!(
        out,
        "| **total, a month** | | **${:.2}** | | **${:.2}** |",
        floor_total(template, STACKS[0], "essential"),
        floor_total(template, STACKS[0], "full")
    );
    out
}

/// What each guarantee's write units cost in the mix, and what reaching the targets takes.
fn guarantees(mix: &Took, totals: &[f64]) -> String {
    #[allow(clippy::cast_precision_loss, reason = "counts of a few thousand")]
    let per = |n: u64| n as f64 / mix.deliveries as f64;
    let mut out = String::from(
        "\nWhat each guarantee's write units cost, per million deliveries of the mix:\n\n| guarantee | write units a delivery | on-demand | provisioned |\n|---|---|---|---|\n",
    );
    let mut costs: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for g in GUARANTEES {
        let units = per(mix.guarantees.get(g).copied().unwrap_or(0));
        let cost = (
            units * DOLLARS_PER_MILLION_WRU,
            units * price::PROVISIONED_WRU,
        );
        costs.insert(g, cost);
        let _ = writeln!(
            out,
            "| {g} | {units:.2} | ${:.2} | ${:.2} |",
            cost.0, cost.1
        );
    }
    for (name, target, default, warn, pick) in [
        ("on-demand", 6.5, totals[0], totals[1], 0),
        ("provisioned", 3.5, totals[2], totals[3], 1),
    ] {
        let _ = write!(
            out,
            "\n**{name}**: ${default:.2} with the defaults, ${warn:.2} with `LogLevel=WARN`; the target is ${target:.2}. "
        );
        if default <= target {
            out.push_str("Reached with the defaults, every guarantee kept.\n");
            continue;
        }
        if warn <= target {
            out.push_str("Reached with `LogLevel=WARN`, every guarantee kept.\n");
            continue;
        }
        let mut dearest: Vec<(&str, f64)> = costs
            .iter()
            .map(|(g, c)| (*g, if pick == 0 { c.0 } else { c.1 }))
            .collect();
        dearest.sort_by(|a, b| b.1.total_cmp(&a.1));
        let (mut left, mut gone) = (warn, Vec::new());
        for (g, cost) in dearest {
            if left <= target {
                break;
            }
            left -= cost;
            gone.push(format!("{g} (−${cost:.2})"));
        }
        let _ = writeln!(
            out,
            "Not reachable with every guarantee kept: it would take giving up {} as well, to ${left:.2}.",
            gone.join(", then ")
        );
    }
    out
}

// Issue 39: the all-in table was typed. Every item is counted from the heat test's second and
// priced here; the doc shows exactly this.
#[tokio::test]
async fn docs_performance_counts_every_item_of_a_million_deliveries() {
    let parsed: yaml_serde::Value =
        yaml_serde::from_str(include_str!("../../../../template.yaml")).expect("template.yaml");
    let second = the_second().await;
    let table = all_in(&second, &parsed);
    let doc = include_str!("../../../../docs/performance.md");
    let shown = super::heat::in_performance_md(
        "<!-- the all-in table (crates/core/src/tests/allin.rs): begin -->\n",
        "<!-- end of the all-in table -->",
    );
    assert_eq!(
        shown,
        Some(table.as_str()),
        "docs/performance.md's all-in table, between its markers, is:\n{table}"
    );
    // The template sets what is priced: the memory and the event sources' batches.
    let template = include_str!("../../../../template.yaml");
    for set in [
        format!("MemorySize: {}", MEMORY_GB * 1024.0),
        format!("BatchSize: {FULFIL_BATCH}\n            MaximumBatchingWindowInSeconds: 1"),
        format!("BatchSize: {PUBLISH_BATCH}\n            MaximumBatchingWindowInSeconds: 1"),
    ] {
        assert!(
            template.contains(&set),
            "template.yaml no longer sets {set:?}"
        );
    }
    // The prose before it gives the figures priced, and after it says what its last lines say.
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let l = &LOG_BYTES;
    for said in [
        format!(
            "ingest {} bytes a delivery ({} at `LogLevel=WARN`), fulfil {} ({}), the publisher {} an event",
            l.ingest, l.ingest_warn, l.fulfil, l.fulfil_warn, l.publish
        ),
        format!(
            "ingest once a delivery for {INGEST_MS} ms, fulfil once a batch for {FULFIL_BATCH_MS} ms"
        ),
        format!(
            "the publisher once a stream batch of {PUBLISH_BATCH} changes and {PUT_EVENTS_MS} ms an event"
        ),
        format!("once a batch of {FULFIL_BATCH}"),
        format!(
            "{} ms, {} queries of an empty page each counted a whole read unit",
            IDLE_SWEEP.ms, IDLE_SWEEP.read_units
        ),
        format!(
            "{} bytes of logs ({} at `WARN`)",
            IDLE_SWEEP.bytes, IDLE_SWEEP.bytes_warn
        ),
        "five long polls of 20 s at a time (a paper figure".to_owned(),
    ] {
        assert!(flat.contains(&said), "docs/performance.md says: {said}");
    }
    assert_eq!(IDLE_POLLS, 5.0 * 3.0 * 60.0 * HOURS, "five polls of 20 s");
    // The README gives the totals and the month with no traffic as the table does.
    let readme = include_str!("../../../../README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mix = second.mix();
    let totals = |quiet: bool| STACKS.map(|s| total(&mix, s, quiet));
    let (busy, quiet) = (totals(false), totals(true));
    for said in [
        format!(
            "| on-demand tables (the default) | ${:.2} | ${:.2} |",
            busy[0], busy[1]
        ),
        format!(
            "| provisioned tables (`TableBillingMode=PROVISIONED`) | ${:.2} | ${:.2} |",
            busy[2], busy[3]
        ),
        format!(
            "| on-demand, under a delivery a second | ${:.2} | ${:.2} |",
            quiet[0], quiet[1]
        ),
        format!(
            "| provisioned, under a delivery a second | ${:.2} | ${:.2} |",
            quiet[2], quiet[3]
        ),
        format!(
            "that is ${:.2} a month",
            floor_total(&parsed, STACKS[0], "essential")
        ),
        format!(
            "the early-warning alarms and the dashboard, ${:.2}",
            floor_total(&parsed, STACKS[0], "full")
        ),
    ] {
        assert!(readme.contains(&said), "README.md says: {said}");
    }
    let unreached = table
        .matches("Not reachable with every guarantee kept")
        .count();
    let defaults = table.matches("Reached with the defaults").count();
    assert_eq!(
        doc.contains(
            "**On-demand, the target is reached with the defaults; provisioned, only with"
        ),
        (defaults, unreached) == (1, 0),
        "docs/performance.md's prose on the targets disagrees with the table: {defaults} reached with the defaults, {unreached} unreached"
    );
}

// Issue 51: the targets hold with the template's default parameters, not only the cheapest
// ones: $6.50 on demand and $3.50 provisioned per million deliveries of the mix, $3 a month
// with no traffic. The defaults priced are the template's.
#[tokio::test]
async fn the_default_parameters_meet_every_cost_target() {
    let parsed: yaml_serde::Value =
        yaml_serde::from_str(include_str!("../../../../template.yaml")).expect("template.yaml");
    for (parameter, priced) in [("LogLevel", "INFO"), ("Tracing", "PassThrough")] {
        assert_eq!(
            parsed["Parameters"][parameter]["Default"].as_str(),
            Some(priced),
            "the defaults priced are not template.yaml's"
        );
    }
    let mix = the_second().await.mix();
    let defaults = |provisioned| Stack {
        provisioned,
        warn: false,
        traced: false,
    };
    let (on_demand, provisioned) = (
        total(&mix, defaults(false), false),
        total(&mix, defaults(true), false),
    );
    let quiet = floor_total(&parsed, defaults(false), "essential");
    assert!(
        on_demand <= 6.5 && provisioned <= 3.5 && quiet <= 3.0,
        "with the defaults: ${on_demand:.2} on demand (≤ $6.50), ${provisioned:.2} provisioned (≤ $3.50), ${quiet:.2} a quiet month (≤ $3.00)"
    );
}
