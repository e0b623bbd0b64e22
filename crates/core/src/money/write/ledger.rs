//! The delivery ledger: a delivery's processed mark, its listing as a straggler and its review
//! note.

use super::*;

/// How many lists the deliveries that strand are spread over (the `pending-by-age` index's
/// hash key, `p0`…`p63`). Before issue 51 every delivery was listed at its receipt and removed
/// by its mark, 2 index writes each; 64 lists kept each partition under 700 writes a second at
/// 20,000 deliveries a second. Records of releases with 8 lists are in `p0`…`p7`.
pub const PENDING_SHARDS: u8 = 64;

/// The list of the stragglers (`pending-by-age`) the delivery under `key` goes to.
#[must_use]
pub fn pending_shard(key: &str) -> String {
    format!("p{}", shard_of(key, u32::from(PENDING_SHARDS)))
}

/// A delivery still not processed when its delayed check comes due, listed where the sweep
/// reads the stragglers (`pending-by-age`): only while it is `received` and not listed yet. A
/// refusal means it was processed meanwhile, or is listed already: nothing to do either way.
#[must_use]
pub fn straggler(key: &str) -> Write {
    Write {
        what: What::Straggler,
        key: Key::delivery(key),
        guard: Guard::All(vec![
            Guard::Is(Field::State, Value::text("received")),
            Guard::Lacks(Field::PendingShard),
        ]),
        set: vec![Set::Put(
            Field::PendingShard,
            Value::Text(pending_shard(key)),
        )],
    }
}

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
