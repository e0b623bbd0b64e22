//! The hand-off's published contract: one JSON Schema (draft 2020-12) per detail type in
//! `schemas/v<DETAIL_VERSION>/`, every event `events_of` emits valid against it (checked with
//! the `jsonschema` crate), one id per fact, and no schema edited without a version bump.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::money::change::OrderRef;
use crate::money::invoice::InvoiceSeen;
use crate::money::record::{
    DepositRecord, FulfilmentRecord, InvoiceRecord, ReviewRecord, StateRecord, WithdrawalRecord,
};
use crate::money::status::{Amount, InvoiceStatus, WithdrawalStatus};
use crate::roads::handoff::{DETAIL_TYPES, DETAIL_VERSION, events_of, slug};
use crate::testkit::schemas::{assert_valid, path, validator};
use crate::wire::signature::Environment;

/// The published schemas: (version, detail type slug, SHA-256 of the file). A schema is never
/// edited once published: change it under a new version (bump `DETAIL_VERSION`, add
/// `schemas/v<N>/`, list its hashes here) so consumers see a new version, never a silent change.
const PUBLISHED: [(u64, &str, &str); 31] = [
    (
        2,
        "deposit-credited",
        "cde3faac10956dc5f368522a258e04d6ef5b636dff409e66379ece0053050f78",
    ),
    (
        2,
        "invoice-closed",
        "921f723490f40c48d27783b82324242768921493adadac1c45bd6faa048752bc",
    ),
    (
        2,
        "order-paid",
        "92dbfafaebe3ba050ae1a223d2c5e4e39f32dc8ece5c15a0e7505569248b54eb",
    ),
    (
        2,
        "payment-needs-review",
        "447157e5e2c1dcaa8228ac54133f368221049caaf819e222af9cb5691c7b4ab3",
    ),
    (
        2,
        "refund-completed",
        "d69c9cd8ba7cdb1e5a2749a9fe6288ffc8ce6ee59d9b4d771740168217f74a28",
    ),
    (
        2,
        "withdrawal-completed",
        "4f760079bd3f1f55cbf697b64e59d2537049b71086cb4ccd734f98dbd2dd3a0a",
    ),
    (
        2,
        "withdrawal-failed",
        "6b5fb49cda21500ba6815e21cd3fee8e5034b341c9828e0b58984ee873ef3ddd",
    ),
    (
        3,
        "deposit-credited",
        "e119ab769010b3ae5958422cae323ae4f53846323d23876d9575c2e731056164",
    ),
    (
        3,
        "invoice-closed",
        "b4a45c501ce11906515843d9d39de46d56e60dcb371235953b602c608a494099",
    ),
    (
        3,
        "order-paid",
        "00abd7f5951d37b01641e96c6e914e042c8a7cfc25f36f44a15b11888fb8ed35",
    ),
    (
        3,
        "payment-needs-review",
        "17b6d9bee90bf37bf8e91e037837407d37e3d851f68cccaefa8582c506da53b4",
    ),
    (
        3,
        "refund-completed",
        "8bb671228b684c6d90db7c79f34b10c5a4d0f6980e510c3228af8717aadde38e",
    ),
    (
        3,
        "withdrawal-completed",
        "e4b9d9dbec82e410a77ea6e7c04e3efcbc44085ef206e82e119f13731c2dbbaf",
    ),
    (
        3,
        "withdrawal-failed",
        "ab00f9bb13f607dd315f72431bfc7d8133ef5cece9a1caba634a5a118b8732aa",
    ),
    (
        4,
        "deposit-credited",
        "d7b9ee5518809381c209f4b5600838ce2c259bb5947212e6a1fabb3d76e3e7a2",
    ),
    (
        4,
        "invoice-closed",
        "9b82fb3fc848e46d0b28260d79dd76e9d4a54d9884b57d98b51046bd23da04b3",
    ),
    (
        4,
        "operator-action",
        "9c821273199e35a1f8ae5e7b90ea1d4d02505bb2fd61284890a2fab936c3e4fc",
    ),
    (
        4,
        "order-paid",
        "813542c38851882525bc547761f9b560a1d614127c44d9ab5afa56359d742ba5",
    ),
    (
        4,
        "payment-needs-review",
        "b104bd2b0ca11ccaad09ad55860088e5e07cf8355ab34a185a48b3d879202ec3",
    ),
    (
        4,
        "refund-completed",
        "557253f764fee126dcf98cf7a38679793625d6193a046b3e0f2f9a7144b33fed",
    ),
    (
        4,
        "withdrawal-completed",
        "577c0ac6828d87325aaf63199354ca09e5e3118f757404df5a3a2ec13ddd63d8",
    ),
    (
        4,
        "withdrawal-failed",
        "1199ce0d83efbf5136a958c5ffa5c0f2eecc4c8cf9df48018149b0457f86f4c5",
    ),
    (
        5,
        "deposit-credited",
        "ee9b4b10b7ae532093eb231b19585649b139fb610d0180558a9c59bcd8907b97",
    ),
    (
        5,
        "endpoint-paused",
        "e0f7aadd6a2da8f2042029f9e695e350ffc18aef55c613ccc09b665f4b19cdc1",
    ),
    (
        5,
        "invoice-closed",
        "a80f76e2f0dd39d20fff13f18585f83d3c5c6a6a3d6c168d5e34402181c8b7b6",
    ),
    (
        5,
        "operator-action",
        "dbb0f1f63ff579bb096bc710144d1b8e05879413162316964f37c38107ff666b",
    ),
    (
        5,
        "order-paid",
        "2f332cb793e6d0f377046ca46c69d9aebace7d03a5a5a747f8ca435b80749533",
    ),
    (
        5,
        "payment-needs-review",
        "3ad956e60efbdca749e3657c927e8c48fc52892ddb23724b50f1350c9a80a9dd",
    ),
    (
        5,
        "refund-completed",
        "c5ac41fd853ae60cf4bc32a4c3bce026fa46316e4c09c26aaf92f08d404d0a15",
    ),
    (
        5,
        "withdrawal-completed",
        "a7739b761a233a2a17fa167347e8c3612778647aead6cc375d7ed22da72b7124",
    ),
    (
        5,
        "withdrawal-failed",
        "14437c95b29d23327197758b645257c9acd3a6609ff14f101b650cff84e20c2c",
    ),
];

#[test]
fn no_published_schema_changes_without_a_version_bump() {
    for (version, slug, hash) in PUBLISHED {
        let bytes = std::fs::read(path(version, slug)).unwrap();
        let got = hex::encode(Sha256::digest(&bytes));
        assert_eq!(
            got,
            hash,
            "schemas/v{version}/{slug}.json changed: published schemas never change; bump DETAIL_VERSION and add schemas/v{}/",
            version + 1
        );
    }
    let current: BTreeSet<String> = PUBLISHED
        .iter()
        .filter(|(v, ..)| *v == DETAIL_VERSION)
        .map(|(_, s, _)| (*s).to_owned())
        .collect();
    let expected: BTreeSet<String> = DETAIL_TYPES.iter().map(|(t, _)| slug(t)).collect();
    assert_eq!(
        current, expected,
        "one schema per detail type at version {DETAIL_VERSION}"
    );
}

#[test]
fn every_schema_lists_exactly_the_documented_fields() {
    for (detail_type, fields) in DETAIL_TYPES {
        let text = std::fs::read_to_string(path(DETAIL_VERSION, &slug(detail_type))).unwrap();
        let schema: Value = serde_json::from_str(&text).unwrap();
        let required: BTreeSet<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let documented: BTreeSet<&str> = fields
            .iter()
            .copied()
            .chain(crate::roads::handoff::COMMON_FIELDS)
            .collect();
        assert_eq!(required, documented, "{detail_type}");
        assert_eq!(schema["additionalProperties"], false, "{detail_type}");
    }
}

fn order(id: &str, amount: &str, currency: &str) -> OrderRef {
    OrderRef {
        external_id: Some(id.into()),
        amount: Amount::parse(amount),
        currency: Some(currency.into()),
        project: None,
        home: false,
        unlisted: false,
    }
}

/// Committed changes (old, new) of every fact type, including one invoice that expired, was
/// paid late and was then released.
fn history() -> Vec<(Option<StateRecord>, StateRecord)> {
    let mut seen = InvoiceSeen::with_status(Some(InvoiceStatus::AwaitingPayment));
    seen.order = order("o-x", "10.50", "USD");
    let open = InvoiceRecord {
        invoice_id: "inv_x".into(),
        seen,
        updated_at_ms: Some(1000),
    };
    let mut expired = open.clone();
    expired.seen.status = Some(InvoiceStatus::Expired);
    let mut late = expired.clone();
    late.seen.paid_late = true;
    let mut released = late.clone();
    released.seen.released = true;
    let fulfilment = StateRecord::Fulfilment(FulfilmentRecord {
        invoice_id: "inv_x".into(),
        order: order("o-x", "10.50", "USD"),
        status: Some(InvoiceStatus::Paid),
        won_by: "manual:alice".into(),
        fulfilled_at_ms: Some(3000),
    });
    let mut held = InvoiceSeen::with_status(Some(InvoiceStatus::Paid));
    held.held = true;
    held.duplicate_of = Some("inv_x".into());
    let held = StateRecord::Invoice(InvoiceRecord {
        invoice_id: "inv_h".into(),
        seen: held,
        updated_at_ms: Some(4000),
    });
    let review = StateRecord::Review(ReviewRecord {
        event_id: "evt_9".into(),
        reason: "unconfirmed".into(),
        resource_id: Some("inv_9".into()),
        why: Some("invoice: Paymos does not know it".into()),
        created_at_ms: Some(5000),
    });
    // A payment whose order is known nowhere waits for a person (version 3).
    let order_unknown = StateRecord::Review(ReviewRecord {
        event_id: "evt_10".into(),
        reason: "order_unknown".into(),
        resource_id: None,
        why: None,
        created_at_ms: Some(5500),
    });
    // A payment naming no project on a stack of several without the check (version 5).
    let project_unknown = StateRecord::Review(ReviewRecord {
        event_id: "evt_11".into(),
        reason: "project_unknown".into(),
        resource_id: Some("inv_11".into()),
        why: None,
        created_at_ms: Some(5600),
    });
    // A payment naming another order than the one its invoice shipped (version 5).
    let order_conflict = StateRecord::Review(ReviewRecord {
        event_id: "evt_12".into(),
        reason: "order_conflict".into(),
        resource_id: Some("inv_12".into()),
        why: Some("it pays order o-B, but this invoice shipped order o-A".into()),
        created_at_ms: Some(5700),
    });
    let withdrawal = |id: &str, status: WithdrawalStatus, kind: &str| {
        StateRecord::Withdrawal(WithdrawalRecord {
            withdrawal_id: id.into(),
            status: Some(status),
            kind: Some(kind.into()),
            invoice_id: Some("inv_x".into()),
            amount: Amount::parse("1.00"),
            currency: Some("USDT".into()),
            updated_at_ms: Some(6000),
        })
    };
    let deposit = StateRecord::Deposit(DepositRecord {
        deposit_id: "pcd_1".into(),
        status: Some(crate::money::status::DepositStatus::Confirmed),
        credited: true,
        payer: Some("c-1".into()),
        net: Amount::parse("99.00"),
        currency: Some("TRX".into()),
        updated_at_ms: Some(7000),
        project: None,
    });
    let [open, expired, late, released] = [open, expired, late, released].map(StateRecord::Invoice);
    vec![
        (None, open.clone()),
        (Some(open), expired.clone()),
        (Some(expired), late.clone()),
        (Some(late), released),
        (None, fulfilment),
        (None, held),
        (None, review),
        (None, order_unknown),
        (None, project_unknown),
        (None, order_conflict),
        (
            None,
            withdrawal("wdr_r", WithdrawalStatus::Completed, "refund"),
        ),
        (
            None,
            withdrawal("wdr_p", WithdrawalStatus::Completed, "payout"),
        ),
        (
            None,
            withdrawal("wdr_f", WithdrawalStatus::Failed, "payout"),
        ),
        (None, deposit),
        (None, StateRecord::Action(operator_action())),
    ]
}

/// A release by a person (version 4's `Operator Action`), as the audit trail recorded it.
fn operator_action() -> crate::money::record::OperatorAction {
    crate::money::record::OperatorAction {
        kind: crate::money::record::ActionKind::Release,
        actor: "arn:aws:iam::123456789012:user/alice".into(),
        at_ms: 8000,
        reason: Some("price confirmed by email".into()),
        subject: "inv_x".into(),
        result: "fulfilled".into(),
        count: None,
    }
}

#[test]
fn every_fact_has_its_own_id_valid_against_its_schema_and_the_same_id_when_published_again() {
    let mut ids: BTreeMap<String, &'static str> = BTreeMap::new();
    let mut types = BTreeSet::new();
    for environment in [Environment::Live, Environment::Test] {
        for (old, new) in history() {
            let once = events_of(old.as_ref(), Some(&new), environment);
            let again = events_of(old.as_ref(), Some(&new), environment);
            assert_eq!(
                once, again,
                "a re-publication is the same event, the same id"
            );
            for e in once {
                assert_valid(e.detail_type, &e.detail);
                if environment == Environment::Live {
                    let before = ids.insert(e.idempotency_key.clone(), e.detail_type);
                    assert!(before.is_none(), "two facts share {}", e.idempotency_key);
                }
                types.insert(e.detail_type);
            }
        }
    }
    let paused = crate::roads::endpoint::endpoint_paused(Environment::Live, 1_000, "503", 9_000);
    assert_valid(paused.detail_type, &paused.detail);
    types.insert(paused.detail_type);
    assert_eq!(
        types.len(),
        DETAIL_TYPES.len(),
        "every type covered: {types:?}"
    );
    // The invoice that expired, was paid late and released: three facts, three ids.
    for id in [
        "invoice-closed:inv_x",
        "payment-needs-review:inv_x:paid_late",
        "order-paid:inv_x",
        "payment-needs-review:evt_10:order_unknown",
    ] {
        assert!(ids.contains_key(id), "{id} in {ids:#?}");
    }
    // Money is the text Paymos sent.
    let paid = events_of(None, Some(&history()[4].1), Environment::Live);
    assert_eq!(paid[0].detail["amount"], "10.50");
}

// A kind added to the audit trail is a kind its `Operator Action` schema accepts: the `kind`
// enum and the key's pattern list every one the command line records.
#[test]
fn every_operator_action_kind_is_valid_against_its_schema() {
    for kind in crate::money::record::ActionKind::ALL {
        let action = crate::money::record::OperatorAction {
            kind,
            ..operator_action()
        };
        let events = events_of(None, Some(&StateRecord::Action(action)), Environment::Live);
        if !kind.published() {
            assert!(events.is_empty(), "{kind}: in the audit trail alone");
            continue;
        }
        assert_eq!(events.len(), 1, "{kind}");
        assert_eq!(events[0].detail["kind"], kind.as_str());
        assert_valid(events[0].detail_type, &events[0].detail);
    }
}

#[test]
fn a_detail_missing_a_field_or_with_a_float_amount_is_refused_by_its_schema() {
    let (_, fulfilment) = history().swap_remove(4);
    let good = events_of(None, Some(&fulfilment), Environment::Live)
        .remove(0)
        .detail;
    let v = validator("Order Paid");
    assert!(v.is_valid(&good));
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("event_id");
    assert!(!v.is_valid(&missing));
    let mut float = good.clone();
    float["amount"] = serde_json::json!(10.5);
    assert!(!v.is_valid(&float));
    let mut other_id = good;
    other_id["idempotency_key"] = serde_json::json!("inv_x");
    assert!(!v.is_valid(&other_id));
}
