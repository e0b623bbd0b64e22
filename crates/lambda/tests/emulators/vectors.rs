//! The 69 official signature vectors (copied from the shared reference into the test kit),
//! run through the verifier and the envelope parser as one table.

use paymos_inbox_core::wire::envelope::Envelope;
use paymos_inbox_core::wire::signature::Verifier;
use paymos_inbox_lambda::config::parse_secrets;
use paymos_inbox_testkit::vectors::vectors;

#[test]
fn all_official_vectors_give_the_expected_verdict() {
    let mut failures = Vec::new();
    for v in vectors() {
        let keys = parse_secrets(&v.secret, "secret", false).unwrap();
        let verifier = Verifier::new(keys, v.tolerance_seconds);
        let verdict = verifier.verify(Some(&v.header), v.raw_body.as_bytes(), v.now);
        let got = match (&verdict, v.expect_error.as_deref()) {
            (Ok(_), Some("invalid_payload")) => match Envelope::parse(v.raw_body.as_bytes()) {
                Ok(_) => Some("valid envelope".to_owned()),
                Err(_) => None,
            },
            (Ok(_), None) if v.expect_valid => None,
            (Err(e), Some(code)) if !v.expect_valid && e.code() == code => None,
            (other, _) => Some(format!("{other:?}")),
        };
        if let Some(got) = got {
            failures.push(format!(
                "{}: expected {:?}, got {got}",
                v.name, v.expect_error
            ));
        }
        if v.expect_envelope_valid == Some(false) {
            assert!(
                Envelope::parse(v.raw_body.as_bytes()).is_err(),
                "{}",
                v.name
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} vector(s) disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
