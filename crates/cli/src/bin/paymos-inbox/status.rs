//! `status`: the console's header as one command, for a person at a terminal or a script. The
//! stack's alarms, the work queue's and the dead-letter queue's depths, the oldest pending
//! delivery, what waits for a person by outcome and the last reconciliation's verdict, from
//! the same bounded reads (no scan), and whether the signed hand-off delivers or is paused; its
//! exit code says healthy or not.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::stack::StackArgs;

/// A delivery recorded but not processed for longer than this is stranded: what
/// `OldestPendingAlarm` alarms on (the sweep re-sends after 10 minutes).
const STRANDED_SECS: u64 = 1800;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// One JSON object: the header's reads, what waits by outcome, and the verdict.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
}

/// The verdict: healthy, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Health {
    Healthy,
    /// Something waits for a person: an alarm in `ALARM`, a payment or a dead letter listed, a
    /// stranded delivery, a paused hand-off (exit 1).
    NeedsAPerson(Vec<String>),
    /// Nothing found waiting, but a read failed, so nothing can be said (exit 4).
    NotRead(Vec<String>),
}

impl Health {
    fn word(&self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::NeedsAPerson(_) => "needs a person",
            Self::NotRead(_) => "not read",
        }
    }

    fn code(&self) -> u8 {
        match self {
            Self::Healthy => 0,
            Self::NeedsAPerson(_) => crate::EXIT_NEEDS_A_PERSON,
            Self::NotRead(_) => crate::exit::UNREACHABLE,
        }
    }

    fn why(&self) -> &[String] {
        match self {
            Self::Healthy => &[],
            Self::NeedsAPerson(why) | Self::NotRead(why) => why,
        }
    }
}

/// Judges the header's reads and what waits (`waiting`: each outcome and how many).
fn judge(header: &Value, waiting: &BTreeMap<String, usize>) -> Health {
    let mut person = Vec::new();
    let mut unread = Vec::new();
    for (part, read) in header.as_object().into_iter().flatten() {
        if let Some(why) = read["unavailable"].as_str() {
            unread.push(format!("{part}: {why}"));
        }
    }
    let alarms = &header["alarms"];
    if alarms["in_alarm"].as_u64().is_some_and(|n| n > 0) {
        let names: Vec<&str> = alarms["alarms"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "ALARM")
            .filter_map(|a| a["name"].as_str())
            .collect();
        person.push(format!("in ALARM: {}", names.join(", ")));
    }
    let listed: usize = waiting.values().sum();
    if listed > 0 {
        person.push(format!(
            "{listed} waiting for a person (exceptions lists them)"
        ));
    }
    if let Some(age) = header["oldest_pending"]["age_secs"].as_u64()
        && age > STRANDED_SECS
    {
        person.push(format!(
            "a delivery pending for {} min (pending lists it)",
            age / 60
        ));
    }
    if header["hand_off"]["state"] == "paused" {
        person.push(
            "the hand-off to WebhookTargetUrl is paused: its events wait in their queue (events resume)"
                .to_owned(),
        );
    }
    if !person.is_empty() {
        Health::NeedsAPerson(person)
    } else if !unread.is_empty() {
        Health::NotRead(unread)
    } else {
        Health::Healthy
    }
}

pub async fn run(args: StatusArgs) -> ExitCode {
    let (stack, state, ledger) = match crate::exceptions::tables(&args.stack).await {
        Ok(t) => t,
        Err(e) => return e.report(),
    };
    let found = match crate::exceptions::waiting(&stack, &state, &ledger).await {
        Ok(found) => found,
        Err(e) => return e.report(),
    };
    let mut waiting: BTreeMap<String, usize> = BTreeMap::new();
    for e in &found {
        *waiting.entry(e.kind.to_owned()).or_default() += 1;
    }
    let mut header = crate::console::api::header(&stack, &state, &ledger).await;
    header["hand_off"] = crate::endpoint::hand_off(&stack, &args.stack).await;
    let health = judge(&header, &waiting);
    if args.json {
        say!(
            "{}",
            json!({"health": health.word(), "why": health.why(), "waiting": waiting, "header": header})
        );
    } else {
        for line in lines(&header, &waiting, &health) {
            say!("{line}");
        }
    }
    ExitCode::from(health.code())
}

/// The human-readable lines: the verdict, then one line a read.
fn lines(header: &Value, waiting: &BTreeMap<String, usize>, health: &Health) -> Vec<String> {
    let shown = |read: &Value, none: &str| match read {
        Value::Null => none.to_owned(),
        Value::Object(o) if o.contains_key("unavailable") => {
            format!(
                "not read: {}",
                read["unavailable"].as_str().unwrap_or_default()
            )
        }
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    };
    let alarms = &header["alarms"];
    let alarms = if let Some(n) = alarms["in_alarm"].as_u64() {
        let of = alarms["alarms"].as_array().map_or(0, Vec::len);
        format!("{n} in ALARM of {of}")
    } else {
        alarms["none"]
            .as_str()
            .map_or_else(|| shown(alarms, "none"), str::to_owned)
    };
    let oldest = &header["oldest_pending"];
    let oldest = match oldest["event_id"].as_str() {
        Some(id) => format!(
            "{id} {} {} ({} s)",
            oldest["event_type"].as_str().unwrap_or_default(),
            oldest["resource_id"].as_str().unwrap_or("-"),
            oldest["age_secs"]
        ),
        None => shown(oldest, "none"),
    };
    let listed = if waiting.is_empty() {
        "nothing".to_owned()
    } else {
        waiting
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let reconciliation = &header["reconciliation"];
    let reconciliation = reconciliation["verdict"]
        .as_str()
        .map_or_else(|| shown(reconciliation, "none"), str::to_owned);
    let mut out = vec![
        health.word().to_owned(),
        format!("alarms:          {alarms}"),
        format!("work queue:      {}", shown(&header["work_queue"], "-")),
        format!("dead letters:    {}", shown(&header["dead_letters"], "-")),
        format!("oldest pending:  {oldest}"),
        format!("waiting:         {listed}"),
        format!("reconciliation:  {reconciliation}"),
        format!(
            "hand-off:        {}",
            header["hand_off"]["state"]
                .as_str()
                .map_or_else(|| shown(&header["hand_off"], "none"), str::to_owned)
        ),
    ];
    out.extend(
        health
            .why()
            .iter()
            .map(|why| format!("why:             {why}")),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(alarms: Value, oldest: Value, dead_letters: Value) -> Value {
        json!({
            "work_queue": 0,
            "dead_letters": dead_letters,
            "oldest_pending": oldest,
            "reconciliation": {"verdict": "never run clean"},
            "alarms": alarms,
        })
    }

    fn quiet() -> Value {
        header(json!({"none": "no alarms on dev"}), Value::Null, json!(0))
    }

    #[test]
    fn a_quiet_stack_is_healthy_and_exits_0() {
        let health = judge(&quiet(), &BTreeMap::new());
        assert_eq!((health.clone(), health.code()), (Health::Healthy, 0));
        let lines = lines(&quiet(), &BTreeMap::new(), &health);
        assert_eq!(lines[0], "healthy");
        assert!(
            lines.contains(&"waiting:         nothing".to_owned()),
            "{lines:?}"
        );
    }

    #[test]
    fn anything_waiting_an_alarm_or_a_stranded_delivery_needs_a_person() {
        let waiting = BTreeMap::from([("held".to_owned(), 2), ("dead_letter".to_owned(), 1)]);
        let health = judge(&quiet(), &waiting);
        assert_eq!(
            health,
            Health::NeedsAPerson(vec![
                "3 waiting for a person (exceptions lists them)".into()
            ])
        );
        assert_eq!(health.code(), 1);
        let alarmed = header(
            json!({"in_alarm": 1, "alarms": [
                {"name": "DeadLetterAlarm", "state": "ALARM"},
                {"name": "IngestErrorsAlarm", "state": "OK"}]}),
            Value::Null,
            json!(0),
        );
        assert_eq!(
            judge(&alarmed, &BTreeMap::new()),
            Health::NeedsAPerson(vec!["in ALARM: DeadLetterAlarm".into()])
        );
        let stranded = |age: u64| {
            header(
                json!({"none": "no alarms on dev"}),
                json!({"event_id": "evt_1", "event_type": "invoice.paid", "resource_id": "inv_1", "age_secs": age}),
                json!(0),
            )
        };
        assert_eq!(
            judge(&stranded(STRANDED_SECS), &BTreeMap::new()),
            Health::Healthy
        );
        assert_eq!(
            judge(&stranded(STRANDED_SECS + 1), &BTreeMap::new()),
            Health::NeedsAPerson(vec![
                "a delivery pending for 30 min (pending lists it)".into()
            ])
        );
    }

    #[test]
    fn a_read_that_failed_is_not_healthy_unless_something_waits_anyway() {
        let unread = header(
            json!({"none": "no alarms on dev"}),
            Value::Null,
            json!({"unavailable": "AccessDenied"}),
        );
        let health = judge(&unread, &BTreeMap::new());
        assert_eq!(
            health,
            Health::NotRead(vec!["dead_letters: AccessDenied".into()])
        );
        assert_eq!(health.code(), 4);
        let lines = lines(&unread, &BTreeMap::new(), &health);
        assert!(
            lines.contains(&"dead letters:    not read: AccessDenied".to_owned()),
            "{lines:?}"
        );
        let waiting = BTreeMap::from([("held".to_owned(), 1)]);
        assert_eq!(judge(&unread, &waiting).code(), 1);
    }

    #[test]
    fn a_paused_hand_off_needs_a_person_and_says_so() {
        let with = |hand_off: Value| {
            let mut h = quiet();
            h["hand_off"] = hand_off;
            h
        };
        let paused = with(json!({"state": "paused"}));
        let health = judge(&paused, &BTreeMap::new());
        assert_eq!(health.code(), 1);
        assert!(health.why()[0].contains("paused"), "{health:?}");
        assert!(
            lines(&paused, &BTreeMap::new(), &health)
                .contains(&"hand-off:        paused".to_owned())
        );
        let delivering = with(json!({"state": "delivering"}));
        assert_eq!(judge(&delivering, &BTreeMap::new()), Health::Healthy);
        assert_eq!(judge(&quiet(), &BTreeMap::new()), Health::Healthy);
        assert!(
            lines(&quiet(), &BTreeMap::new(), &Health::Healthy)
                .contains(&"hand-off:        none".to_owned())
        );
    }
}
