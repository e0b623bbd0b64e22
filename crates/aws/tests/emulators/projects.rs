//! Issue 49, defects 4 and 7, where a condition decides: on DynamoDB Local, a record of the home
//! project keeps `home_project`, so no other project's order ships from it; and a record the
//! previous release wrote (which names no project) on a stack of two projects ships no one's
//! order on a payment naming none, until a person names its project.

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::change::{Applied, OrderRef, Projects};
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::roads::fulfil::Fulfil;
use serde_json::json;

use paymos_inbox_testkit::*;

fn event(event_id: &str, event_type: &str, invoice_id: &str, project: Option<&str>) -> String {
    let mut data = json!({"invoice_id": invoice_id,
        "order": {"external_id": "1001", "amount": "10.00", "currency": "USD"}});
    if let Some(p) = project {
        data["project_id"] = p.into();
    }
    envelope(event_id, event_type, data)
}

fn order_of(project: Option<&str>) -> OrderRef {
    OrderRef {
        external_id: Some("1001".into()),
        amount: Amount::parse("10.00"),
        currency: Some("USD".into()),
        project: project.map(str::to_owned),
        home: false,
        unlisted: false,
    }
}

#[tokio::test]
async fn a_home_record_ships_no_other_projects_order_and_an_unnamed_one_waits_for_its_project() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a,prj_b"));

    // The home project's open event: its record says so.
    let open = event(
        "evt_open",
        "invoice.awaiting_payment",
        "inv_home",
        Some("prj_a"),
    );
    let (_, applied) = fulfil.apply(&live(&open), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::Updated);
    let record = aws.item(state, "pk", "inv_home").await.unwrap();
    assert_eq!(
        record.get("home_project"),
        Some(&AttributeValue::Bool(true))
    );
    // A person's word naming project B: refused by the command's rule, and by the write's.
    let why = fulfil
        .refuses_person("inv_home", Some("prj_b"))
        .await
        .unwrap();
    assert!(why.is_some_and(|w| w.contains("of project prj_a, not prj_b")));
    let marked = fulfil
        .mark_paid("inv_home", order_of(Some("prj_b")), "support:eve", NOW_MS)
        .await
        .unwrap();
    assert_eq!(marked, Applied::Held);
    for claim in ["order_paid#prj_b#1001", "order_paid#1001"] {
        assert!(aws.item(state, "pk", claim).await.is_none(), "{claim}");
    }

    // An invoice the previous release wrote: no project on record.
    aws.dynamodb
        .put_item()
        .table_name(state)
        .item("pk", AttributeValue::S("inv_old".into()))
        .item("kind", AttributeValue::S("invoice".into()))
        .item("status", AttributeValue::S("awaiting_payment".into()))
        .item("status_at", AttributeValue::N((NOW - 600).to_string()))
        .item("order_id", AttributeValue::S("1001".into()))
        .send()
        .await
        .unwrap();
    let silent = event("evt_silent", "invoice.paid", "inv_old", None);
    let (_, applied) = fulfil.apply(&live(&silent), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::ProjectUnknown);
    assert!(!resources.is_fulfilled("inv_old").await.unwrap());
    let why = fulfil.refuses_person("inv_old", None).await.unwrap();
    assert!(why.is_some_and(|w| w.contains("--project")));
    // The person names project B: B's order ships, once.
    let marked = fulfil
        .mark_paid("inv_old", order_of(Some("prj_b")), "support:eve", NOW_MS)
        .await
        .unwrap();
    assert_eq!(marked, Applied::Fulfilled);
    assert!(
        aws.item(state, "pk", "order_paid#prj_b#1001")
            .await
            .is_some()
    );
    assert!(aws.item(state, "pk", "order_paid#1001").await.is_none());
}

// The attack on `dev`: tables kept from a stack that listed prj_a first, opened by one listing
// prj_b first, would read prj_a's records as prj_b's. The pin is a condition on DynamoDB.
#[tokio::test]
async fn the_home_project_is_pinned_once_and_another_first_is_refused_on_dynamodb() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let stack_of = |ids: &str| Fulfil::new(resources.clone()).for_projects(Projects::parse(ids));
    stack_of("prj_a,prj_b").pin_home_project().await.unwrap();
    stack_of("prj_a").pin_home_project().await.unwrap();
    let err = stack_of("prj_b,prj_a")
        .pin_home_project()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("keep prj_a first"), "{err}");
}

// The attack on `dev` (issue 49): `mark-paid --order-id A` shipped A from an invoice whose
// payment named no order; a later delivery naming order B was `already_final`, listed
// nowhere. On DynamoDB Local, the invoice's condition answers with its record's order, the
// delivery waits as `order_conflict` on the `waiting` index although the invoice is
// fulfilled, and a person's resolution takes it off.
#[tokio::test]
async fn a_delivery_naming_another_order_than_the_one_shipped_waits_until_resolved() {
    use paymos_inbox_aws::dynamodb::DynamoLedger;
    use paymos_inbox_core::roads::exceptions::{self, ReviewLedger as _};
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let fulfil = Fulfil::new(resources.clone()).for_projects(crate::one_project());
    let environment = paymos_inbox_core::wire::signature::Environment::Live;
    let unnamed = envelope("evt_none", "invoice.paid", json!({"invoice_id": "inv_c"}));
    let (_, applied) = fulfil.apply(&live(&unnamed), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::OrderUnknown);
    let a = OrderRef {
        external_id: Some("o-A".into()),
        ..OrderRef::none()
    };
    let marked = fulfil
        .mark_paid("inv_c", a, "support", NOW_MS)
        .await
        .unwrap();
    assert_eq!(marked, Applied::Fulfilled);
    let naming_b = envelope(
        "evt_b",
        "invoice.paid",
        json!({"invoice_id": "inv_c", "order": {"external_id": "o-B"}}),
    );
    ledger
        .record(&recorded_delivery(&naming_b, environment, NOW_MS), NOW_MS)
        .await
        .unwrap();
    let (_, applied) = fulfil.apply(&live(&naming_b), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::OrderConflict);
    assert!(aws.item(state, "pk", "order_paid#o-B").await.is_none());
    let waiting = ledger
        .with_outcomes(&[Applied::OrderConflict], Some("inv_c"))
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0].delivery.event_id, "evt_b");
    let resolved = exceptions::resolve(&ledger, "evt_b", None, "alice", NOW_MS).await;
    assert_eq!(resolved, Ok(Applied::OrderConflict));
    let waiting = ledger
        .with_outcomes(&[Applied::OrderConflict], Some("inv_c"))
        .await
        .unwrap();
    assert!(waiting.is_empty(), "{waiting:?}");
}

// Issue 49 (attack F3), where a condition decides: an invoice whose open event named project B
// and whose payment named A is held with `projects_disagree`; a release names the project the
// person checked, which the record takes in the same conditional write as Paymos' order, and
// that project's order ships, once.
#[tokio::test]
async fn a_release_names_the_project_of_an_invoice_whose_events_named_two_on_dynamodb() {
    use paymos_inbox_aws::dynamodb::DynamoLedger;
    use paymos_inbox_core::roads::release::ReleaseBy;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a,prj_b"));
    let open = event("evt_o", "invoice.confirming", "inv_x", Some("prj_b"));
    let paid = event("evt_p", "invoice.paid", "inv_x", Some("prj_a"));
    let (_, applied) = fulfil.apply(&live(&open), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::Updated);
    let (_, applied) = fulfil.apply(&live(&paid), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::Held);
    let record = aws.item(state, "pk", "inv_x").await.unwrap();
    assert_eq!(
        record.get("projects_disagree"),
        Some(&AttributeValue::Bool(true))
    );
    // The hold keeps the record's project and takes none of the payment's.
    assert_eq!(
        record.get("project_id"),
        Some(&AttributeValue::S("prj_b".into()))
    );
    assert!(!record.contains_key("home_project"), "{record:?}");
    let by = |project| ReleaseBy {
        actor: "alice",
        reason: Some("checked at Paymos"),
        override_amount: true,
        project,
        order: None,
    };
    let refused = fulfil.release(&ledger, "inv_x", &by(None), NOW_MS).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("two projects")),
        "{refused:?}"
    );
    assert!(!resources.is_fulfilled("inv_x").await.unwrap());
    let released = fulfil
        .release(&ledger, "inv_x", &by(Some("prj_a")), NOW_MS)
        .await;
    assert_eq!(released, Ok(Applied::Fulfilled));
    assert!(aws.item(state, "pk", "order_paid#1001").await.is_some());
    assert!(
        aws.item(state, "pk", "order_paid#prj_b#1001")
            .await
            .is_none()
    );
    let record = aws.item(state, "pk", "inv_x").await.unwrap();
    assert_eq!(
        record.get("home_project"),
        Some(&AttributeValue::Bool(true))
    );
    assert!(!record.contains_key("projects_disagree"));
    assert!(!record.contains_key("project_id"));
}

// Issue 49 (the last attack's F4, no reverse check), where the mark's condition decides: an
// open event naming a project this stack does not apply marked inv_x; the payment naming the
// home project waits `project_unknown` (it answered `other_project`, listed nowhere), and a
// person naming the project lifts the mark (a condition on the mark as read) and ships once.
#[tokio::test]
async fn a_payment_of_this_shop_on_an_invoice_another_projects_event_marked_waits_on_dynamodb() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a"));
    let forged = event("evt_f", "invoice.awaiting_payment", "inv_x", Some("prj_z"));
    let paid = event("evt_p", "invoice.paid", "inv_x", Some("prj_a"));
    let mut outcomes = Vec::new();
    for body in [&forged, &paid] {
        outcomes.push(fulfil.apply(&live(body), NOW_MS).await.unwrap().1);
    }
    assert_eq!(outcomes, [Applied::OtherProject, Applied::ProjectUnknown]);
    assert!(!resources.is_fulfilled("inv_x").await.unwrap());
    let marked = |project: Option<&'static str>| {
        fulfil.mark_paid("inv_x", order_of(project), "support:eve", NOW_MS)
    };
    assert_eq!(marked(None).await.unwrap(), Applied::OtherProject);
    assert_eq!(marked(Some("prj_a")).await.unwrap(), Applied::Fulfilled);
    assert_eq!(marked(Some("prj_a")).await.unwrap(), Applied::AlreadyFinal);
    assert!(resources.is_fulfilled("inv_x").await.unwrap());
    assert!(aws.item(state, "pk", "order_paid#1001").await.is_some());
}

// Issue 49 (the model's rule 20, class F), where the conditions decide: a payment naming the
// home project and no order waits for its order; shop B's open event of the invoice names
// order 1001; then its payment naming no project. It shipped the home project's order 1001
// for shop B's invoice. The record names one project (the open event's transition is
// refused, then moves the status alone and marks the record), and a payment of a marked
// record ships nothing on an event's word.
#[tokio::test]
async fn an_order_learned_from_another_projects_event_ships_no_ones_order_on_dynamodb() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a,prj_b"));
    let pending = envelope(
        "evt_f",
        "invoice.paid",
        json!({"invoice_id": "inv_f", "project_id": "prj_a"}),
    );
    let opened = event("evt_o", "invoice.confirming", "inv_f", Some("prj_b"));
    let silent = event("evt_p", "invoice.paid", "inv_f", None);
    let mut outcomes = Vec::new();
    for body in [&pending, &opened, &silent] {
        outcomes.push(fulfil.apply(&live(body), NOW_MS).await.unwrap().1);
    }
    assert_eq!(
        outcomes,
        [Applied::OrderUnknown, Applied::Updated, Applied::Held]
    );
    assert!(!resources.is_fulfilled("inv_f").await.unwrap());
    let record = aws.item(state, "pk", "inv_f").await.unwrap();
    assert_eq!(
        record.get("projects_disagree"),
        Some(&AttributeValue::Bool(true))
    );
    assert!(!record.contains_key("project_id"), "{record:?}");
    for claim in ["order_paid#1001", "order_paid#prj_b#1001"] {
        assert!(aws.item(state, "pk", claim).await.is_none(), "{claim}");
    }
}

// Issue 49, the attack's F7, where a condition decides: pcd_x credited 49 to payer 42; final
// confirmations of it saying net 99, payer 43 or project prj_b were `already_final`, listed
// nowhere. On DynamoDB Local the deposit's condition answers with the credit it holds (ALL_OLD):
// each contradicting snapshot credits nothing more and waits `unconfirmed` on the `waiting`
// index, with both values; a plain copy is `already_final` and waits for no one.
#[tokio::test]
async fn a_final_confirmation_contradicting_the_credit_waits_on_dynamodb() {
    use paymos_inbox_aws::dynamodb::{DynamoLedger, balance_key};
    use paymos_inbox_core::roads::exceptions::ReviewLedger as _;
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a,prj_b"));
    let environment = paymos_inbox_core::wire::signature::Environment::Live;
    let confirmed = |event_id: &str, net: &str, payer: &str, project: &str| {
        envelope(
            event_id,
            "payment_channel.deposit.confirmed",
            json!({"id": "pcd_x", "is_final": true, "payment_channel_external_id": payer,
                   "net": net, "currency": "USDT", "project_id": project}),
        )
    };
    for (body, expected) in [
        (
            confirmed("evt_1", "49.00", "42", "prj_a"),
            Applied::Credited,
        ),
        (
            confirmed("evt_copy", "49", "42", "prj_a"),
            Applied::AlreadyFinal,
        ),
        (
            confirmed("evt_net", "99.00", "42", "prj_a"),
            Applied::Unconfirmed,
        ),
        (
            confirmed("evt_payer", "49.00", "43", "prj_a"),
            Applied::Unconfirmed,
        ),
        (
            confirmed("evt_project", "49.00", "42", "prj_b"),
            Applied::Unconfirmed,
        ),
    ] {
        ledger
            .record(&recorded_delivery(&body, environment, NOW_MS), NOW_MS)
            .await
            .unwrap();
        let (_, applied) = fulfil.apply(&live(&body), NOW_MS).await.unwrap();
        assert_eq!(applied, expected, "{body}");
    }
    let balance = aws
        .item(state, "pk", &balance_key(None, "42", "USDT"))
        .await
        .unwrap();
    assert!(
        Amount::parse(balance["balance"].as_n().unwrap())
            .unwrap()
            .same_value(&Amount::parse("49").unwrap()),
        "credited once: {balance:?}"
    );
    let waiting = ledger
        .with_outcomes(&[Applied::Unconfirmed], Some("pcd_x"))
        .await
        .unwrap();
    let mut ids: Vec<_> = waiting
        .iter()
        .map(|w| w.delivery.event_id.as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["evt_net", "evt_payer", "evt_project"], "{waiting:?}");
    let why = |id: &str| {
        waiting
            .iter()
            .find(|w| w.delivery.event_id == id)
            .and_then(|w| w.reason.clone())
            .unwrap_or_default()
    };
    assert!(why("evt_net").contains("99.00") && why("evt_net").contains("49.00"));
    assert!(why("evt_payer").contains("43") && why("evt_payer").contains("payer 42"));
    assert!(why("evt_project").contains("prj_b"));
}

// Where the reopening's condition decides: the invoice whose events named two projects is held;
// a copy of its payment Paymos confirms for project A (the home project) takes the payment off
// the record under that condition, with nothing shipped, and ships A's order once.
#[tokio::test]
async fn paymos_confirming_the_project_ships_a_payment_held_for_two_projects_on_dynamodb() {
    use paymos_inbox_testkit::paymos_fake::{Answer, FakePaymos, invoice};
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let shops = Projects::parse("prj_a,prj_b");
    let fulfil = Fulfil::new(resources.clone()).for_projects(shops.clone());
    let open = event("evt_o", "invoice.confirming", "inv_x", Some("prj_b"));
    let paid = event("evt_p", "invoice.paid", "inv_x", Some("prj_a"));
    fulfil.apply(&live(&open), NOW_MS).await.unwrap();
    let (_, applied) = fulfil.apply(&live(&paid), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::Held);
    let api = FakePaymos::start().await;
    let mut at_paymos = invoice("inv_x", "paid", ("10.00", "USD"), ("10.00", "USDT"));
    at_paymos["project_id"] = "prj_a".into();
    at_paymos["order"]["external_id"] = "1001".into();
    api.answer("inv_x", Answer::Invoices(vec![at_paymos]));
    let checked = Fulfil::new(resources.clone())
        .for_projects(shops)
        .with_confirmation(paymos_inbox_aws::paymos_api::PaymosApi::new(api.client()));
    let copy = event("evt_p2", "invoice.paid", "inv_x", Some("prj_a"));
    let (_, applied) = checked.apply(&live(&copy), NOW_MS + 1).await.unwrap();
    assert_eq!(applied, Applied::Fulfilled);
    assert!(aws.item(state, "pk", "order_paid#1001").await.is_some());
    assert!(
        aws.item(state, "pk", "order_paid#prj_b#1001")
            .await
            .is_none()
    );
    let record = aws.item(state, "pk", "inv_x").await.unwrap();
    assert!(!record.contains_key("projects_disagree"), "{record:?}");
    assert!(!record.contains_key("held"), "{record:?}");
    assert_eq!(
        record.get("status"),
        Some(&AttributeValue::S("paid".into()))
    );
    // Once: a third copy ships nothing more.
    let again = event("evt_p3", "invoice.paid", "inv_x", Some("prj_a"));
    let (_, applied) = checked.apply(&live(&again), NOW_MS + 2).await.unwrap();
    assert_eq!(applied, Applied::AlreadyFinal);
}

/// inv_s shipped here as order o-1 of prj_b: a forged open event named that order and project,
/// and the genuine payment named none.
async fn shipped_as_planted(fulfil: &Fulfil<DynamoResources>) {
    let open = envelope(
        "evt_o",
        "invoice.awaiting_payment",
        json!({"invoice_id": "inv_s", "project_id": "prj_b", "order": {"external_id": "o-1", "amount": "10", "currency": "USD"}}),
    );
    let paid = envelope("evt_p", "invoice.paid", json!({"invoice_id": "inv_s"}));
    let mut applied = Vec::new();
    for e in [&open, &paid] {
        applied.push(fulfil.apply(&live(e), NOW_MS).await.unwrap().1);
    }
    assert_eq!(applied, [Applied::Updated, Applied::Fulfilled]);
}

// The attack on `dev` (issue 49, attack F2): a forged open event named prj_b's order o-1, the
// genuine payment named none and shipped it; Paymos has the invoice prj_a's, of order o-2.
// `reconcile --apply` notes it on the invoice (under a condition: once), which the `listed`
// index lists as `order_conflict` although the invoice is fulfilled, until a person resolves
// it; a later run lists it no more.
#[tokio::test]
async fn an_invoice_paymos_has_of_another_order_than_shipped_waits_until_resolved_on_dynamodb() {
    use paymos_inbox_aws::dynamodb::DynamoLedger;
    use paymos_inbox_core::roads::exceptions;
    use paymos_inbox_core::testkit::memory::MemoryPaymos;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a,prj_b"));
    shipped_as_planted(&fulfil).await;
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_s",
        crate::paid_at_paymos("o-2", Some("prj_a"), NOW - 10),
    );
    let window = ((NOW - 3600) as i64, (NOW + 3600) as i64);
    let listed = || async {
        exceptions::list(&resources, &ledger, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.resource_id.unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    for _ in 0..2 {
        let report =
            paymos_inbox_core::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
                .await
                .unwrap();
        assert_eq!(report.shipped_otherwise.len(), 1, "{report:?}");
        assert_eq!(listed().await, [("order_conflict", "inv_s".to_owned())]);
    }
    let resolved = exceptions::resolve_invoice(&resources, "inv_s", "alice", NOW_MS).await;
    assert_eq!(resolved, Ok(Applied::OrderConflict));
    assert!(listed().await.is_empty());
    let report =
        paymos_inbox_core::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
            .await
            .unwrap();
    assert!(report.clean(), "{report:?}");
    assert!(listed().await.is_empty());
    let record = aws.item(state, "pk", "inv_s").await.unwrap();
    assert_eq!(
        record.get("shipped_otherwise"),
        Some(&AttributeValue::S("order o-2 of prj_a".into()))
    );
}

// Attack round 2, F3 on DynamoDB: once the reconciliation finds inv_s shipped as o-1 of prj_b
// while Paymos has it as o-2 of prj_a, o-2 is taken for inv_s's payment (a person ships it by
// hand): inv_t's payment of o-2 waits as a duplicate and ships nothing. The claim's
// condition decides. Before: inv_t fulfilled o-2 too.
#[tokio::test]
async fn a_payment_of_an_order_a_person_is_told_to_ship_by_hand_ships_nothing_on_dynamodb() {
    use paymos_inbox_aws::dynamodb::DynamoLedger;
    use paymos_inbox_core::roads::exceptions;
    use paymos_inbox_core::testkit::memory::MemoryPaymos;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a,prj_b"));
    shipped_as_planted(&fulfil).await;
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_s",
        crate::paid_at_paymos("o-2", Some("prj_a"), NOW - 10),
    );
    let window = ((NOW - 3600) as i64, (NOW + 3600) as i64);
    let report =
        paymos_inbox_core::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
            .await
            .unwrap();
    assert_eq!(report.shipped_otherwise.len(), 1, "{report:?}");
    let second = envelope(
        "evt_t",
        "invoice.paid",
        json!({"invoice_id": "inv_t", "project_id": "prj_a", "order": {"external_id": "o-2", "amount": "10", "currency": "USD"}}),
    );
    let (_, applied) = fulfil.apply(&live(&second), NOW_MS).await.unwrap();
    assert_eq!(applied, Applied::DuplicatePayment);
    let mut listed: Vec<_> = exceptions::list(&resources, &ledger, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.resource_id.unwrap_or_default()))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("duplicate_payment", "inv_t".to_owned()),
            ("order_conflict", "inv_s".to_owned())
        ]
    );
    let claim = aws.item(state, "pk", "order_paid#o-2").await.unwrap();
    assert_eq!(
        claim.get("invoice_id"),
        Some(&AttributeValue::S("inv_s".into()))
    );
    assert!(aws.item(state, "pk", "fulfilment#inv_t").await.is_none());
}

// Attack round 3, F1 (rule 24) on DynamoDB: inv_p's payment waits as a second payment of o-1,
// which a forged open event planted (inv_o shipped o-1). Paymos has inv_p as o-2: a person's
// `mark-paid` with the API takes the planted order and its wait off, under the record's
// conditions, and Paymos' payment of o-2 ships, once. Before: `order_conflict`, "recover o-1".
#[tokio::test]
async fn a_payment_waiting_on_a_planted_order_ships_paymos_order_on_dynamodb() {
    use paymos_inbox_core::testkit::memory::MemoryPaymos;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a"));
    let priced = json!({"external_id": "o-1", "amount": "10", "currency": "USD"});
    let first = envelope(
        "evt_o0",
        "invoice.paid",
        json!({"invoice_id": "inv_o", "order": priced}),
    );
    let planted = envelope(
        "evt_forged",
        "invoice.awaiting_payment",
        json!({"invoice_id": "inv_p", "order": priced}),
    );
    let unnamed = envelope("evt_p1", "invoice.paid", json!({"invoice_id": "inv_p"}));
    let mut outcomes = Vec::new();
    for e in [&first, &planted, &unnamed] {
        outcomes.push(fulfil.apply(&live(e), NOW_MS).await.unwrap().1);
    }
    assert_eq!(
        outcomes,
        [
            Applied::Fulfilled,
            Applied::Updated,
            Applied::DuplicatePayment
        ]
    );
    let paymos = MemoryPaymos::new();
    paymos.invoice("inv_p", crate::paid_at_paymos("o-2", None, NOW - 10));
    let asked = paymos_inbox_core::roads::reconcile::as_paymos_has_it(
        &paymos,
        &fulfil,
        ("inv_p", &OrderRef::none()),
        ("alice", NOW_MS),
    )
    .await;
    assert_eq!(asked, Ok(Applied::Fulfilled));
    let shipped = aws.item(state, "pk", "fulfilment#inv_p").await.unwrap();
    assert_eq!(
        shipped.get("order_id"),
        Some(&AttributeValue::S("o-2".into()))
    );
    let record = aws.item(state, "pk", "inv_p").await.unwrap();
    assert!(!record.contains_key("duplicate_of"), "{record:?}");
}

// Attack round 3, F4 (rule 25) on DynamoDB: inv_s shipped here as o-1 of prj_b; Paymos has it
// in prj_a, with no order named yet. `reconcile --apply` notes it (`paymos_order_unnamed`), the
// `listed` index lists it as `order_conflict`, and its line asks to recover o-1 of prj_b and
// names no order to ship; no order is taken. Before: MATCHED, nothing listed.
#[tokio::test]
async fn a_payment_paymos_has_in_another_project_with_no_order_is_listed_on_dynamodb() {
    use paymos_inbox_aws::dynamodb::DynamoLedger;
    use paymos_inbox_core::roads::exceptions;
    use paymos_inbox_core::roads::reconcile::ReconcileStore;
    use paymos_inbox_core::testkit::memory::MemoryPaymos;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (state, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let resources = DynamoResources::new(aws.dynamodb.clone(), state, deliveries);
    let ledger = DynamoLedger::new(aws.dynamodb.clone(), deliveries, None);
    let fulfil = Fulfil::new(resources.clone()).for_projects(Projects::parse("prj_a,prj_b"));
    shipped_as_planted(&fulfil).await;
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_s",
        paymos_inbox_core::roads::confirm::ConfirmedInvoice {
            order_id: None,
            ..crate::paid_at_paymos("", Some("prj_a"), NOW - 10)
        },
    );
    let window = ((NOW - 3600) as i64, (NOW + 3600) as i64);
    let report =
        paymos_inbox_core::roads::reconcile::reconcile(&paymos, &fulfil, window, true, NOW_MS)
            .await
            .unwrap();
    assert_eq!(report.shipped_otherwise.len(), 1, "{report:?}");
    let listed: Vec<_> = exceptions::list(&resources, &ledger, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.resource_id.unwrap_or_default(), e.action))
        .collect();
    assert!(
        matches!(&listed[..], [(kind, id, action)] if *kind == "order_conflict" && id == "inv_s"
            && action.contains("recover order o-1 of prj_b") && !action.contains("ship order")),
        "{listed:?}"
    );
    let record = aws.item(state, "pk", "inv_s").await.unwrap();
    assert_eq!(
        record.get("paymos_order_unnamed"),
        Some(&AttributeValue::Bool(true))
    );
    assert_eq!(
        resources
            .order_fulfilled_by(Some("prj_a"), "")
            .await
            .unwrap(),
        None
    );
}
