//! The delivery ledger: a delivery's processed mark and its review note.

use super::*;

/// The delivery's processed mark, with its outcome: once only.
#[must_use]
pub fn processed(key: &str, outcome: Applied, reason: Option<&str>, now_ms: u64) -> Write {
    let mut set = vec![
        Set::Put(Field::State, Value::text("processed")),
        Set::Put(Field::Outcome, Value::text(outcome.as_str())),
        Set::Put(Field::ProcessedAt, Value::Int(now_ms)),
        Set::Remove(Field::PendingShard),
    ];
    // A delivery whose outcome waits for a person is marked so, and only such a delivery: the
    // index of what waits holds what `exceptions` lists, whatever the history. Its key is a
    // shard of the delivery's, not its outcome: a storm of one outcome heats no key.
    if crate::money::change::DELIVERY_OUTCOMES.contains(&outcome) {
        set.push(Set::Put(Field::Waiting, Value::Text(waiting_shard(key))));
    }
    if let Some(reason) = reason {
        set.push(Set::Put(Field::OutcomeReason, Value::text(reason)));
    }
    Write {
        what: What::Processed,
        key: Key::delivery(key),
        guard: Guard::Any(vec![
            Guard::Lacks(Field::State),
            Guard::Not(Box::new(Guard::Is(Field::State, Value::text("processed")))),
        ]),
        set,
    }
}

/// A delivery that waits for a person: its review note, once (what the state table's stream,
/// and so the hand-off, sees of a delivery that changes no resource).
#[must_use]
pub fn review_note(
    event_id: &str,
    outcome: Applied,
    resource_id: Option<&str>,
    why: &str,
    now_ms: u64,
) -> Write {
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("review")),
        Set::Put(Field::Reason, Value::text(outcome.as_str())),
        Set::Put(Field::EventId, Value::text(event_id)),
        Set::Put(Field::Why, Value::text(why)),
        Set::Put(Field::CreatedAt, Value::Int(now_ms)),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        Set::Put(
            Field::ListedIn,
            Value::Text(day_list(&review_key(event_id), now_ms)),
        ),
    ];
    if let Some(r) = resource_id {
        set.push(Set::Put(Field::ResourceId, Value::text(r)));
    }
    Write {
        what: What::Review,
        key: Key::state(review_key(event_id)),
        guard: Guard::Absent,
        set,
    }
}

// ---- Reading an item back. ----
