//! Any bytes: the envelope parser and the change decision never panic; an accepted envelope of
//! a known category names a resource with its category's prefix; and whatever ingest accepts,
//! fulfil decides: the work item carries the body through unchanged and the same parse gives
//! the same envelope, from which the decision is total (never an error, never the DLQ).
#![no_main]

use libfuzzer_sys::fuzz_target;
use paymos_inbox_core::wire::envelope::Envelope;
use paymos_inbox_core::money::change::change_of;
use paymos_inbox_core::wire::signature::Environment;
use paymos_inbox_core::wire::work::WorkItem;

fuzz_target!(|body: &[u8]| {
    let Ok(e) = Envelope::parse(body) else {
        return;
    };
    if let Some((_, prefix)) = e.category.resource_field() {
        assert!(e.resource_id.as_deref().is_some_and(|r| r.starts_with(prefix)));
    }
    assert!(e.version >= 1);
    let item = WorkItem {
        event_id: e.event_id.clone(),
        environment: Some(Environment::Live),
        body: body.to_vec(),
        received_at_ms: Some(1),
    };
    let message = item.encode();
    assert!(message.is_ascii(), "a work item travels through SQS's character set");
    let received = WorkItem::decode(&message).expect("fulfil reads what ingest sent");
    assert_eq!(received, item);
    let again = Envelope::parse(&received.body).expect("fulfil parses what ingest parsed");
    assert_eq!(again, e);
    let _ = change_of(&again);
});
