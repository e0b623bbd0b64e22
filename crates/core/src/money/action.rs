//! An operator's action, as the audit trail keeps it: who did what to which resource, when,
//! why, and what it changed. The command line and the console record one after each action
//! ([`OperatorAction::write`]); the hand-off publishes it as an `Operator Action`. The entry
//! itself is a record ([`crate::money::record::OperatorAction`]); this is how it is written
//! and read back.

use crate::money::record::{ActionKind, BEGUN, OperatorAction};
use crate::money::write::{ACTIONS, Field, Fields, Guard, Key, Set, Value, What, Write};

impl OperatorAction {
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
}
