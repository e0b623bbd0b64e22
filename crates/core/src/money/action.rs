//! An operator's action, as the audit trail keeps it: who did what to which resource, when,
//! why, and what it changed. The command line and the console record one after each action
//! ([`OperatorAction::write`]); the hand-off publishes it as an `Operator Action`.

use crate::write::{ACTIONS, Field, Fields, Guard, Key, Set, Value, What, Write};

/// Which action a person took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActionKind {
    /// `release`: a held or late-paid payment fulfilled on a person's word.
    Release,
    /// `mark-paid`: an invoice marked paid by hand.
    MarkPaid,
    /// `recheck`: unconfirmed deliveries re-read at Paymos.
    Recheck,
    /// `redrive` / `events redrive`: dead letters moved back to their queue.
    Redrive,
    /// `pending --resend`: stranded deliveries sent to the work queue again.
    Resend,
    /// `events resend`: the hand-off's facts of one resource, or of what was committed since a
    /// time, published again with their idempotency keys (nothing in the tables changes).
    EventsResend,
    /// `exceptions --resolve`: a delivery a person settled outside the stack (an order
    /// conflict, an unusable delivery applied by hand) taken off what waits.
    Resolve,
}

impl ActionKind {
    /// Every kind, in the order the command line lists them.
    pub const ALL: [Self; 7] = [
        Self::Release,
        Self::MarkPaid,
        Self::Recheck,
        Self::Redrive,
        Self::Resend,
        Self::EventsResend,
        Self::Resolve,
    ];

    /// Its name, as the command line spells it (`mark-paid`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::MarkPaid => "mark-paid",
            Self::Recheck => "recheck",
            Self::Redrive => "redrive",
            Self::Resend => "resend",
            Self::EventsResend => "events-resend",
            Self::Resolve => "resolve",
        }
    }

    /// The kind named `name` ([`ActionKind::as_str`]).
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorAction {
    /// What was done.
    pub kind: ActionKind,
    /// Who: the caller's AWS identity (an ARN), or the `--actor` named on `dev`. Never a secret.
    pub actor: String,
    /// When it began (Unix ms).
    pub at_ms: u64,
    /// Why, as the person said (a release's reason; none where the action asks for none).
    pub reason: Option<String>,
    /// What it was done to: an invoice or resource id, `all-unconfirmed`, a queue's name, or
    /// (`events resend --since`) `since <time>`.
    pub subject: String,
    /// What it changed, in a few words (`fulfilled`, `already_final`, `2 rechecked: …`), why
    /// it failed, or [`BEGUN`] until its action has answered.
    pub result: String,
    /// For a job, how many it moved; for a recheck, how many deliveries it re-read; for an
    /// `events resend`, how many facts it published.
    pub count: Option<u64>,
}

impl OperatorAction {
    /// The entry's key: when, what, to which resource and by whom, so that two entries of one
    /// action never share a key, and the key alone says what happened.
    #[must_use]
    pub fn key(&self) -> String {
        action_key(self.at_ms, self.kind, &self.subject, &self.actor)
    }
}

/// What an entry says from before its action until the action answers; for good, if the
/// action was cut short.
pub const BEGUN: &str = "begun: no result recorded";

impl OperatorAction {
    /// The entry of an action about to be taken, written before it (record before work): an
    /// action whose entry cannot be written is not taken, and one cut short still says who
    /// began it, when, to what and why.
    #[must_use]
    pub fn begun(
        kind: ActionKind,
        (actor, at_ms): (&str, u64),
        subject: &str,
        reason: Option<&str>,
    ) -> Self {
        Self {
            kind,
            actor: actor.to_owned(),
            at_ms,
            reason: reason.map(str::to_owned),
            subject: subject.to_owned(),
            result: BEGUN.to_owned(),
            count: None,
        }
    }

    /// Whether its action has answered.
    #[must_use]
    pub fn finished(&self) -> bool {
        self.result != BEGUN
    }

    /// What its action answered, as a write: only an entry still [`BEGUN`] takes it, once.
    #[must_use]
    pub fn finish(&self, result: &str, count: Option<u64>) -> Write {
        let mut set = vec![Set::Put(Field::Outcome, Value::text(result))];
        set.extend(count.map(|n| Set::Put(Field::Count, Value::Int(n))));
        Write {
            what: What::OperatorAction,
            key: Key::state(self.key()),
            guard: Guard::Is(Field::Outcome, Value::text(BEGUN)),
            set,
        }
    }
}

impl OperatorAction {
    /// The entry as a write: a new item only (a second write of one key is refused, never an
    /// overwrite of what was recorded), listed under [`ACTIONS`] by its time.
    #[must_use]
    pub fn write(&self) -> Write {
        let mut set = vec![
            Set::Put(Field::Kind, Value::text(KIND)),
            Set::Put(Field::Type, Value::text(self.kind.as_str())),
            Set::Put(Field::Actor, Value::text(&self.actor)),
            Set::Put(Field::ResourceId, Value::text(&self.subject)),
            Set::Put(Field::Outcome, Value::text(&self.result)),
            Set::Put(Field::CreatedAt, Value::Int(self.at_ms)),
            Set::Put(Field::UpdatedAt, Value::Int(self.at_ms)),
            Set::Put(Field::ListedIn, Value::text(ACTIONS)),
        ];
        if let Some(reason) = &self.reason {
            set.push(Set::Put(Field::Reason, Value::text(reason)));
        }
        if let Some(n) = self.count {
            set.push(Set::Put(Field::Count, Value::Int(n)));
        }
        Write {
            what: What::OperatorAction,
            key: Key::state(self.key()),
            guard: Guard::Absent,
            set,
        }
    }

    /// The entry an item holds, if it is one ([`OperatorAction::write`] read back).
    #[must_use]
    pub fn read(fields: &Fields) -> Option<Self> {
        let text = |f: Field| fields.get(&f).and_then(Value::as_text).map(str::to_owned);
        if text(Field::Kind)? != KIND {
            return None;
        }
        Some(Self {
            kind: ActionKind::parse(&text(Field::Type)?)?,
            actor: text(Field::Actor)?,
            at_ms: fields.get(&Field::CreatedAt).and_then(Value::as_int)?,
            reason: text(Field::Reason),
            subject: text(Field::ResourceId)?,
            result: text(Field::Outcome).unwrap_or_default(),
            count: fields.get(&Field::Count).and_then(Value::as_int),
        })
    }
}

/// The `kind` of an audit entry's item.
pub const KIND: &str = "operator_action";

/// The key of an audit entry ([`OperatorAction::key`]).
#[must_use]
pub fn action_key(at_ms: u64, kind: ActionKind, subject: &str, actor: &str) -> String {
    format!("action#{at_ms:013}#{kind}#{subject}#{actor}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_name_and_nothing_else_does() {
        for kind in ActionKind::ALL {
            assert_eq!(ActionKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ActionKind::parse("mark_paid"), None);
        assert_eq!(ActionKind::parse(""), None);
    }

    fn action(reason: Option<&str>, count: Option<u64>) -> OperatorAction {
        OperatorAction {
            kind: ActionKind::Release,
            actor: "arn:aws:iam::123456789012:user/alice".into(),
            at_ms: 1_796_169_600_000,
            reason: reason.map(str::to_owned),
            subject: "inv_1".into(),
            result: "fulfilled".into(),
            count,
        }
    }

    fn commit(w: &Write) -> Fields {
        w.set
            .iter()
            .filter_map(|s| match s {
                Set::Put(f, v) => Some((f.clone(), v.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_entry_is_written_once_listed_in_the_trail_and_reads_back_as_written() {
        for entry in [
            action(Some("customer paid by phone"), None),
            action(None, Some(12)),
        ] {
            let w = entry.write();
            assert_eq!(w.what, What::OperatorAction);
            assert_eq!(w.key, Key::state(entry.key()));
            assert!(w.guard.holds(None));
            let item = commit(&w);
            assert!(
                !w.guard.holds(Some(&item)),
                "a second write of the key is refused"
            );
            assert_eq!(item[&Field::ListedIn], Value::text(ACTIONS));
            assert_eq!(OperatorAction::read(&item), Some(entry));
        }
    }

    // Record before work: the entry is written before its action, then takes the action's
    // answer once; an entry that never got one says so.
    #[test]
    fn a_begun_entry_takes_its_result_once_and_only_a_begun_one_does() {
        let begun = OperatorAction::begun(
            ActionKind::Release,
            ("alice", 7),
            "inv_1",
            Some("customer paid by phone"),
        );
        assert!(!begun.finished());
        let item = commit(&begun.write());
        assert_eq!(OperatorAction::read(&item), Some(begun.clone()));
        let finish = begun.finish("fulfilled", Some(3));
        assert_eq!(finish.key, begun.write().key);
        assert!(finish.guard.holds(Some(&item)));
        assert!(!finish.guard.holds(None), "no entry: nothing to finish");
        let mut done = item.clone();
        done.extend(commit(&finish));
        let read = OperatorAction::read(&done).unwrap();
        assert!(read.finished());
        assert_eq!((read.result.as_str(), read.count), ("fulfilled", Some(3)));
        assert_eq!(read.at_ms, 7, "when it began");
        assert!(!finish.guard.holds(Some(&done)), "finished once");
        assert!(
            action(None, None).finished(),
            "an entry written whole, before entries were begun, is finished"
        );
    }

    #[test]
    fn an_item_of_another_kind_is_no_entry() {
        let mut item = commit(&action(None, None).write());
        item.insert(Field::Kind, Value::text("review"));
        assert_eq!(OperatorAction::read(&item), None);
        assert_eq!(OperatorAction::read(&Fields::new()), None);
    }

    // An entry is its own item: two actions of one person in one millisecond on two invoices
    // are two entries, never one refused as a second write of the same key.
    #[test]
    fn an_entrys_item_is_keyed_by_its_time_kind_subject_and_actor() {
        let one = action(None, None);
        let other = OperatorAction {
            subject: "inv_2".into(),
            ..one.clone()
        };
        assert_eq!(
            one.write().key,
            Key::state("action#1796169600000#release#inv_1#arn:aws:iam::123456789012:user/alice")
        );
        assert_ne!(one.write().key, other.write().key);
    }

    #[test]
    fn two_actions_differing_in_time_kind_subject_or_actor_have_two_keys() {
        let base = action_key(7, ActionKind::Release, "inv_1", "alice");
        assert_eq!(base, "action#0000000000007#release#inv_1#alice");
        for other in [
            action_key(8, ActionKind::Release, "inv_1", "alice"),
            action_key(7, ActionKind::MarkPaid, "inv_1", "alice"),
            action_key(7, ActionKind::Release, "inv_2", "alice"),
            action_key(7, ActionKind::Release, "inv_1", "bob"),
        ] {
            assert_ne!(base, other);
        }
    }
}
