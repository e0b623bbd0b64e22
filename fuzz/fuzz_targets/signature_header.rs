//! Any header and body: parsing and verifying never panics, and a verdict of "valid" is only
//! given to a header that really carries the body's signature.
#![no_main]

use libfuzzer_sys::fuzz_target;
use paymos_inbox_core::wire::signature::{SignatureHeader, SigningKey, Verifier, WebhookSecret};

fuzz_target!(|input: (&str, &[u8], u64)| {
    let (header, body, now) = input;
    let secret = WebhookSecret::new("whsec_live_fuzz");
    let verifier = Verifier::new(vec![SigningKey::new("live", &secret)], 300);
    let _ = SignatureHeader::parse(header);
    if let Ok(ok) = verifier.verify(Some(header), body, now) {
        let expected = secret.sign(ok.timestamp, body);
        assert!(header.to_ascii_lowercase().contains(&expected), "accepted a header without the signature");
    }
});
