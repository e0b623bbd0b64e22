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
    person.extend(reconciliation_needs(&header["reconciliation"]["last_run"]));
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

/// Why the last reconciliation needs a person, and what to run: it found something for a person
/// (as its scheduled run fails on, and `ReconcileFindingsAlarm` fires), or its runs have not
/// read a whole window for longer than `ReconcileBehindAlarm` allows.
fn reconciliation_needs(last: &Value) -> Vec<String> {
    let mut why = Vec::new();
    if last["for_a_person"] == true {
        let from = last["window_from_ms"]
            .as_u64()
            .map_or_else(|| "48h".to_owned(), utc);
        let found = &last["found"];
        let apply = if found["missing"].as_u64().is_some_and(|n| n > 0)
            || found["paid_late"].as_u64().is_some_and(|n| n > 0)
        {
            "; `--apply` fulfils the missing ones as a webhook would and lists the late ones in `exceptions`"
        } else {
            ""
        };
        why.push(format!(
            "the last reconciliation found {}: `paymos-inbox reconcile --from {from}` lists them{apply}",
            found_said(found)
        ));
    }
    if let Some(behind) = last["behind_secs"].as_u64()
        && behind > paymos_inbox_core::roads::reconcile::BEHIND_FOR_A_PERSON_S
    {
        why.push(format!(
            "the reconciliation has read no whole window for {} h: its runs are cut short or do not run (the reconcile function's logs say why)",
            behind / 3600
        ));
    }
    why
}

/// What a reconciliation found, each kind and how many (`missing 2, refunded 1`), or nothing.
fn found_said(found: &Value) -> String {
    let said: Vec<String> = found
        .as_object()
        .into_iter()
        .flatten()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    if said.is_empty() {
        "nothing".to_owned()
    } else {
        said.join(", ")
    }
}

/// A time (Unix ms) as UTC, to the second.
fn utc(ms: u64) -> String {
    i64::try_from(ms / 1000)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| format!("{ms} (Unix ms)"), |t| t.to_string())
}

/// The reconciliation's line: what the last window read whole found and when, then the clean
/// checkpoint's verdict.
fn reconciliation_said(reconciliation: &Value, shown: impl Fn(&Value, &str) -> String) -> String {
    let Some(verdict) = reconciliation["verdict"].as_str() else {
        return shown(reconciliation, "none");
    };
    let last = &reconciliation["last_run"];
    let Some(until) = last["read_until_ms"].as_u64() else {
        return verdict.to_owned();
    };
    let found = match found_said(&last["found"]).as_str() {
        "nothing" => "nothing found".to_owned(),
        said => format!("found {said}"),
    };
    format!(
        "read through {} ({} min ago): {found}; {verdict}",
        utc(until),
        last["age_secs"].as_u64().unwrap_or(0) / 60
    )
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
    let reconciliation = reconciliation_said(&header["reconciliation"], shown);
    let mut out = vec![
        health.word().to_owned(),
        format!("alarms:          {alarms}"),
        format!(
            "work queue:      {}{}",
            shown(&header["work_queue"], "-"),
            match header["work_queue_in_flight"].as_u64() {
                Some(n) if n > 0 => format!(
                    " ({n} in flight: being applied, or not applied yet and out of sight until their retry)"
                ),
                _ => String::new(),
            }
        ),
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
    use paymos_inbox_core::roads::reconcile::BEHIND_FOR_A_PERSON_S;

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

    // Issue 49 (A3): `status` said healthy while the scheduled reconciliation found missing
    // payments every run. What the last window found for a person, or runs that have read no
    // whole window for longer than `ReconcileBehindAlarm` allows, need a person, each with what
    // to run; what needs nobody (a refund in full, what `--apply` fulfilled) is said, not judged.
    #[test]
    fn a_reconciliation_that_found_something_for_a_person_or_fell_behind_needs_a_person() {
        let with = |last_run: Value| {
            let mut h = quiet();
            h["reconciliation"]["last_run"] = last_run;
            h
        };
        let run = |found: Value, for_a_person: bool, behind_secs: u64| {
            with(json!({
                "window_from_ms": 1_796_000_000_000_u64, "read_until_ms": 1_796_172_800_000_u64,
                "age_secs": 120, "behind_secs": behind_secs,
                "found": found, "for_a_person": for_a_person,
            }))
        };
        let missing = run(json!({"missing": 182, "refunded": 1}), true, 60);
        let health = judge(&missing, &BTreeMap::new());
        assert_eq!(
            health,
            Health::NeedsAPerson(vec![
                "the last reconciliation found missing 182, refunded 1: `paymos-inbox reconcile --from 2026-11-30T00:53:20Z` lists them; `--apply` fulfils the missing ones as a webhook would and lists the late ones in `exceptions`".into()
            ])
        );
        assert_eq!(health.code(), 1);
        let said = lines(&missing, &BTreeMap::new(), &health);
        assert!(
            said.contains(
                &"reconciliation:  read through 2026-12-02T00:53:20Z (2 min ago): found missing 182, refunded 1; never run clean".to_owned()
            ),
            "{said:?}"
        );
        let double = run(json!({"double": 1}), true, 60);
        let why = judge(&double, &BTreeMap::new()).why().to_vec();
        assert_eq!(
            why,
            [
                "the last reconciliation found double 1: `paymos-inbox reconcile --from 2026-11-30T00:53:20Z` lists them"
            ]
        );

        let refunded = run(json!({"refunded": 1, "applied": 2}), false, 60);
        assert_eq!(judge(&refunded, &BTreeMap::new()), Health::Healthy);
        let clean = run(json!({}), false, BEHIND_FOR_A_PERSON_S);
        assert_eq!(judge(&clean, &BTreeMap::new()), Health::Healthy);
        let said = lines(&clean, &BTreeMap::new(), &Health::Healthy);
        assert!(said[6].contains(": nothing found; "), "{said:?}");
        let behind = run(json!({}), false, BEHIND_FOR_A_PERSON_S + 1);
        assert_eq!(
            judge(&behind, &BTreeMap::new()),
            Health::NeedsAPerson(vec![
                "the reconciliation has read no whole window for 3 h: its runs are cut short or do not run (the reconcile function's logs say why)".into()
            ])
        );
        // Never run (no reverse check, or not yet): nothing to judge.
        assert_eq!(judge(&with(Value::Null), &BTreeMap::new()), Health::Healthy);
    }
}
