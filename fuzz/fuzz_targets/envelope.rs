//! Any bytes: the envelope parser and the change decision never panic, and an accepted
//! envelope of a known category always names a resource with its category's prefix.
#![no_main]

use libfuzzer_sys::fuzz_target;
use paymos_inbox::domain::envelope::Envelope;
use paymos_inbox::domain::fulfil::change_of;

fuzz_target!(|body: &[u8]| {
    if let Ok(e) = Envelope::parse(body) {
        if let Some((_, prefix)) = e.category.resource_field() {
            assert!(e.resource_id.as_deref().is_some_and(|r| r.starts_with(prefix)));
        }
        assert!(e.version >= 1);
    }
    let _ = change_of(body);
});
