//! The home page: what waits for a person, by kind, under a header of the queues' depths,
//! the oldest pending delivery, the last reconciliation and the alarms; and the audit trail.

use paymos_inbox::tools::alarms::{Alarm, AlarmState};
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_core::roads::exceptions::Exception;
use paymos_inbox_lambda::now_ms;
use serde_json::{Value, json};

use crate::stack::{NamedBy, Stack};

use super::{Answered, Console};

/// The order the home page shows what waits in: the payments first, then the deliveries.
pub const KINDS: [&str; 10] = [
    "held",
    "paid_late",
    "duplicate_payment",
    "unconfirmed",
    "order_unknown",
    "project_unknown",
    "order_conflict",
    "unusable",
    "dead_letter",
    crate::exceptions::PARKED_HANDOFF,
];

/// How many of the audit trail's newest entries the console shows.
const AUDIT_LIMIT: usize = 100;

impl Console {
    /// What waits for a person, grouped by kind: `exceptions`' list, read as it reads it; and
    /// a header of the queues' depths and the oldest pending delivery (`pending`'s read).
    pub async fn home(&self) -> Answered {
        match crate::exceptions::waiting(&self.stack, &self.state, &self.ledger).await {
            Ok(found) => {
                let mut page = home(&found, now_ms(), self.about());
                page["header"] = self.header().await;
                Answered::ok(page)
            }
            Err(f) => Answered::failed(&f),
        }
    }

    async fn header(&self) -> Value {
        header(&self.stack, &self.state, &self.ledger).await
    }

    fn about(&self) -> Value {
        let named = match &self.stack.named_by {
            crate::stack::NamedBy::DevInfo(file) => format!("dev ({})", file.display()),
            crate::stack::NamedBy::Stack(name) => format!("stack {name}"),
            crate::stack::NamedBy::Flags => "tables named by flags".to_owned(),
        };
        json!({
            "stack": named,
            "environment": self.stack.environment,
            "projects": self.stack.projects.ids(),
            "actor": self.actor,
            "identity": self.identity,
            "recheck": self.api.is_some(),
            "read_only": self.read_only(),
            "write_unknown": self.write_unknown(),
        })
    }

    /// The audit trail's newest entries (`audit`'s read: one query of the `actions` list).
    pub async fn audit(&self) -> Answered {
        match crate::audit::recent(&self.stack, AUDIT_LIMIT).await {
            Ok(found) => Answered::ok(json!({
                "actions": found.iter().map(crate::audit::to_json).collect::<Vec<_>>(),
            })),
            Err(f) => Answered::failed(&f),
        }
    }
}

/// The home page's JSON: the total, then each kind's items in [`KINDS`]' order (a kind this
/// version does not know comes last, never dropped).
fn home(found: &[Exception], now: u64, about: Value) -> Value {
    let mut kinds: Vec<&str> = KINDS.to_vec();
    for e in found {
        if !kinds.contains(&e.kind) {
            kinds.push(e.kind);
        }
    }
    let groups: Vec<Value> = kinds
        .iter()
        .map(|kind| {
            let items: Vec<Value> = found
                .iter()
                .filter(|e| e.kind == *kind)
                .map(|e| item(e, now))
                .collect();
            json!({"kind": kind, "count": items.len(), "items": items})
        })
        .collect();
    json!({"total": found.len(), "groups": groups, "about": about})
}

/// The work queue's and the dead-letter queue's depths (one attribute each), the oldest
/// delivery recorded but not processed (the `pending-by-age` index, one item), the last
/// reconciliation's verdict (the checkpoint a clean scheduled run keeps, and what the last
/// window read whole found: one item each) and the stack's alarms: the console's header and
/// `status`. A read that fails is said in its place.
pub(crate) async fn header(stack: &Stack, state: &DynamoResources, ledger: &DynamoLedger) -> Value {
    use aws_sdk_sqs::types::QueueAttributeName::{
        ApproximateNumberOfMessages as Visible, ApproximateNumberOfMessagesNotVisible as InFlight,
    };
    use paymos_inbox_core::roads::reconcile::ReconcileCheckpoint as _;
    let depth = async |queue: &Option<String>, counted| match queue.as_deref() {
        Some(url) => paymos_inbox_aws::sqs::count(&stack.sqs, url, counted)
            .await
            .map_or_else(|e| json!({"unavailable": e.to_string()}), |n| json!(n)),
        None => Value::Null,
    };
    let now = now_ms();
    let oldest = match ledger.pending(1).await {
        Ok(list) => list.first().map_or(Value::Null, |p| {
            json!({"event_id": p.event_id, "event_type": p.event_type,
                   "resource_id": p.resource_id,
                   "age_secs": now.saturating_sub(p.received_at_ms) / 1000})
        }),
        Err(e) => json!({"unavailable": e.to_string()}),
    };
    let last = paymos_inbox_core::roads::reconcile::LastWindow::kept(state).await;
    let reconciled = match (state.clean_until().await, last) {
        (Ok(until), Ok(last)) => {
            let mut verdict = reconciliation(until, now);
            verdict["last_run"] = last.as_ref().map_or(Value::Null, |l| last_run(l, now));
            verdict
        }
        (Err(e), _) | (_, Err(e)) => json!({"unavailable": e.to_string()}),
    };
    let read = match &stack.alarms {
        Some(alarms) => Some(alarms.read().await.map_err(|e| e.to_string())),
        None => None,
    };
    json!({
        "work_queue": depth(&stack.queue, Visible).await,
        // Being applied, or failed and waiting their retry: a delivery fulfil cannot apply yet
        // is there, minutes before its check lists it pending.
        "work_queue_in_flight": depth(&stack.queue, InFlight).await,
        "dead_letters": depth(&stack.dlq, Visible).await,
        "oldest_pending": oldest,
        "reconciliation": reconciled,
        "alarms": alarms(&stack.named_by, read),
    })
}

/// The last reconciliation's verdict from what the scheduled run keeps
/// ([`paymos_inbox_core::money::write::reconciled`]): only a run that found nothing for a person keeps
/// where its window ended (a failed run, or one with findings, alarms and keeps no clean end:
/// what it found is [`last_run`]'s).
fn reconciliation(clean_until: Option<u64>, now_ms: u64) -> Value {
    let Some(until) = clean_until else {
        return json!({"verdict": "never run clean: no scheduled reconciliation has yet ended finding nothing for a person"});
    };
    let at = i64::try_from(until)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| format!("{until} (Unix seconds)"), |t| t.to_string());
    json!({
        "clean_until_ms": until.saturating_mul(1000),
        "age_secs": (now_ms / 1000).saturating_sub(until),
        "verdict": format!("clean through {at}: nothing for a person in Paymos' invoices up to then"),
    })
}

/// What the last window a scheduled run read whole found ([`LastWindow`]), for `status` and
/// the console: the window, when, how far behind the runs are, each kind found and how many,
/// and whether any of it is for a person.
///
/// [`LastWindow`]: paymos_inbox_core::roads::reconcile::LastWindow
fn last_run(last: &paymos_inbox_core::roads::reconcile::LastWindow, now_ms: u64) -> Value {
    let found: serde_json::Map<String, Value> = last
        .found
        .iter()
        .map(|(kind, n)| (kind.as_str().to_owned(), json!(n)))
        .collect();
    json!({
        "window_from_ms": last.window.0.map(|s| s.saturating_mul(1000)),
        "read_until_ms": last.window.1.saturating_mul(1000),
        "at_ms": last.at_ms,
        "age_secs": now_ms.saturating_sub(last.at_ms) / 1000,
        "behind_secs": last.behind(now_ms),
        "found": found,
        "for_a_person": last.for_a_person,
    })
}

/// The header's alarms: how many are in ALARM, then each alarm (as [`states`] orders them:
/// ALARM, INSUFFICIENT_DATA, OK); a read that failed, said in its place; or why the stack has
/// none to read (`dev` has no CloudWatch).
///
/// [`states`]: paymos_inbox::tools::alarms::states
fn alarms(named_by: &NamedBy, read: Option<Result<Vec<Alarm>, String>>) -> Value {
    match read {
        Some(Ok(alarms)) => json!({
            "in_alarm": alarms.iter().filter(|a| a.state == AlarmState::Alarm).count(),
            "alarms": alarms.iter().map(|a| json!({
                "name": a.name,
                "state": a.state.as_str(),
                "reason": a.reason,
                "since_ms": a.since_ms,
            })).collect::<Vec<_>>(),
        }),
        Some(Err(why)) => json!({"unavailable": why}),
        None => match named_by {
            NamedBy::DevInfo(_) => json!({"none": "no alarms on dev"}),
            NamedBy::Stack(_) | NamedBy::Flags => json!({
                "none": "no stack named: the alarms are read from a deployed stack's resources (--stack-name or --config-env)"
            }),
        },
    }
}

/// One thing that waits, as the page shows it: its way out names the page's own buttons.
pub(super) fn item(e: &Exception, now: u64) -> Value {
    let mut v = serde_json::to_value(e).expect("an exception serialises");
    v["action"] = json!(crate::console::do_line::on_the_page(e));
    v["age_secs"] = if e.since_ms == 0 {
        Value::Null
    } else {
        json!(now.saturating_sub(e.since_ms) / 1000)
    };
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exception(kind: &'static str, since_ms: u64) -> Exception {
        Exception {
            kind,
            resource_id: Some("inv_1".into()),
            event_id: None,
            project: None,
            since_ms,
            why: "why".into(),
            action: "do".into(),
        }
    }

    #[test]
    fn home_counts_each_kind_in_its_order_and_keeps_a_kind_it_does_not_know() {
        let found = [
            exception("unconfirmed", 1_000),
            exception("held", 0),
            exception("held", 1_000),
            exception("something_new", 1_000),
        ];
        let page = home(&found, 61_000, Value::Null);
        assert_eq!(page["total"], 4);
        let groups = page["groups"].as_array().unwrap();
        let counts: Vec<(&str, u64)> = groups
            .iter()
            .map(|g| (g["kind"].as_str().unwrap(), g["count"].as_u64().unwrap()))
            .collect();
        assert_eq!(counts[0], ("held", 2));
        assert_eq!(counts[3], ("unconfirmed", 1));
        assert_eq!(counts.last().unwrap(), &("something_new", 1));
        assert_eq!(counts.iter().map(|c| c.1).sum::<u64>(), 4);
        assert_eq!(groups[0]["items"][0]["age_secs"], Value::Null);
        assert_eq!(groups[0]["items"][1]["age_secs"], 60);
    }

    #[test]
    fn the_reconciliations_verdict_is_where_the_last_clean_run_ended_or_never() {
        let never = reconciliation(None, 1_000_000);
        assert!(
            never["verdict"]
                .as_str()
                .unwrap()
                .starts_with("never run clean"),
            "{never}"
        );
        assert_eq!(never["clean_until_ms"], Value::Null);
        let clean = reconciliation(Some(1_796_000_000), 1_796_003_600_000);
        assert_eq!(clean["clean_until_ms"], 1_796_000_000_000_u64);
        assert_eq!(clean["age_secs"], 3600);
        assert!(
            clean["verdict"]
                .as_str()
                .unwrap()
                .starts_with("clean through 2026-11-30T00:53:20Z"),
            "{clean}"
        );
    }

    #[test]
    fn the_header_counts_the_alarms_in_alarm_and_lists_each_with_its_state() {
        let alarm = |name: &str, state| Alarm {
            name: name.into(),
            state,
            reason: Some("Threshold Crossed".into()),
            since_ms: Some(1_000),
        };
        let stack = NamedBy::Stack("shop".into());
        let read = vec![
            alarm("shop-DeadLetters", AlarmState::Alarm),
            alarm("shop-Errors", AlarmState::Alarm),
            alarm("shop-Throttles", AlarmState::InsufficientData),
            alarm("shop-Age", AlarmState::Ok),
        ];
        let header = alarms(&stack, Some(Ok(read)));
        assert_eq!(header["in_alarm"], 2, "{header}");
        let shown: Vec<(&str, &str)> = header["alarms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["name"].as_str().unwrap(), a["state"].as_str().unwrap()))
            .collect();
        assert_eq!(
            shown,
            [
                ("shop-DeadLetters", "ALARM"),
                ("shop-Errors", "ALARM"),
                ("shop-Throttles", "INSUFFICIENT_DATA"),
                ("shop-Age", "OK"),
            ]
        );
        assert_eq!(header["alarms"][0]["since_ms"], 1_000);

        let calm = alarms(&stack, Some(Ok(vec![alarm("shop-Age", AlarmState::Ok)])));
        assert_eq!(calm["in_alarm"], 0, "{calm}");

        let failed = alarms(&stack, Some(Err("AccessDenied".into())));
        assert_eq!(failed["unavailable"], "AccessDenied", "{failed}");
        assert_eq!(failed["in_alarm"], Value::Null);

        let dev = alarms(&NamedBy::DevInfo("dev.json".into()), None);
        assert_eq!(dev["none"], "no alarms on dev", "{dev}");
        assert_eq!(dev["unavailable"], Value::Null);
        let flags = alarms(&NamedBy::Flags, None);
        assert!(
            flags["none"]
                .as_str()
                .unwrap()
                .starts_with("no stack named"),
            "{flags}"
        );
    }
}
