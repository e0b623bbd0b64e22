use super::*;

// Missed mutant (`>` in `payment_awaiting_order`): a payment that teaches nothing (no
// project, no time) writes nothing, not a bare record of an invoice.
#[test]
fn a_payment_awaiting_its_order_writes_only_what_it_teaches() {
    assert_eq!(
        payment_awaiting_order("inv_1", &OrderRef::none(), None),
        None
    );
    let timed = payment_awaiting_order("inv_1", &OrderRef::none(), Some(3)).unwrap();
    assert!(
        timed
            .set
            .contains(&Set::Once(Field::PaymentAt, Value::Int(3)))
    );
    let named = OrderRef {
        project: Some("prj_b".into()),
        ..OrderRef::none()
    };
    assert!(payment_awaiting_order("inv_1", &named, None).is_some());
}

// An invoice is listed `open` while its status is open (the reconciliation
// re-reads it), `review` from what makes its payment wait until a release (exceptions
// lists it), and otherwise under the day it changed (events since): one list at a time.
// Only a dated payment takes an undated word's `after_refund` off (its time judges the
// refund); a close carrying a time is no payment, and the mark's own write keeps it. A
// payment naming another project than its record is held and marked so, for review.
#[test]
fn a_dated_payment_alone_lifts_after_refund_and_two_projects_hold_for_review() {
    let source = Source::Manual { actor: "a".into() };
    let order = OrderRef::default();
    let set = |status, paid_at, mark: Option<&Mark>| {
        invoice_transition("inv_1", (status, 1, paid_at), &order, mark, &source, 5).set
    };
    let lifted = |sets: &[Set]| sets.contains(&Set::Remove(Field::AfterRefund));
    assert!(lifted(&set(InvoiceStatus::Paid, Some(3), None)));
    assert!(!lifted(&set(InvoiceStatus::Paid, None, None)));
    assert!(!lifted(&set(InvoiceStatus::Expired, Some(3), None)));
    assert!(!lifted(&set(
        InvoiceStatus::Paid,
        Some(3),
        Some(&Mark::AfterRefund)
    )));
    let two = set(InvoiceStatus::Paid, None, Some(&Mark::ProjectsDisagree));
    assert!(two.contains(&Set::Put(Field::Held, Value::Bool(true))));
    assert!(two.contains(&Set::Put(Field::ProjectsDisagree, Value::Bool(true))));
    assert!(two.contains(&Set::Put(
        Field::ListedIn,
        Value::Text(review_list("inv_1"))
    )));
    let held = set(InvoiceStatus::Paid, None, Some(&Mark::Held));
    assert!(!held.contains(&Set::Put(Field::ProjectsDisagree, Value::Bool(true))));
}

#[test]
fn an_invoice_is_listed_open_while_open_review_while_it_waits_and_else_by_its_day() {
    const DEC_1: u64 = 1_796_169_600_000; // 2026-12-02T00:00:00Z, the first sharded day
    let put = |v: &str| Set::Put(Field::ListedIn, Value::text(v));
    let source = Source::Manual { actor: "a".into() };
    let order = OrderRef::default();
    let set = |status, mark: Option<&Mark>| {
        invoice_transition("inv_1", (status, 1, None), &order, mark, &source, DEC_1 + 5).set
    };
    let (open, day) = (open_list("inv_1"), day_list("inv_1", DEC_1));
    assert!(open.starts_with("open#") && day.starts_with("day#2026-12-02#"));
    let review = review_list("inv_1");
    assert!(review.starts_with("review#"));
    for status in InvoiceStatus::OPEN {
        assert!(set(status, None).contains(&put(&open)), "{status:?}");
    }
    for status in [
        InvoiceStatus::Paid,
        InvoiceStatus::Expired,
        InvoiceStatus::Cancelled,
    ] {
        assert!(set(status, None).contains(&put(&day)), "{status:?}");
    }
    assert!(set(InvoiceStatus::Paid, Some(&Mark::Held)).contains(&put(&review)));
    let twice = Mark::DuplicateOf("inv_0".into());
    assert!(set(InvoiceStatus::Paid, Some(&twice)).contains(&put(&review)));
    assert!(set(InvoiceStatus::Paid, Some(&Mark::Refunded)).contains(&put(&day)));
    assert!(set(InvoiceStatus::Paid, Some(&Mark::AfterRefund)).contains(&put(&review)));
    let late = paid_late(
        "inv_1",
        InvoiceStatus::Expired,
        (3, None),
        (false, false),
        DEC_1 - 1,
    )
    .set;
    assert!(late.contains(&put(&review)));
    assert!(late.contains(&Set::Put(Field::UpdatedAt, Value::Int(DEC_1 - 1))));
    let held = set(InvoiceStatus::Paid, Some(&Mark::Held));
    let listed: Vec<&Set> = held
        .iter()
        .filter(|s| {
            matches!(
                s,
                Set::Put(Field::ListedIn, _) | Set::Remove(Field::ListedIn)
            )
        })
        .collect();
    assert_eq!(listed.len(), 1, "one clause per attribute: {listed:?}");
}

#[test]
fn a_day_list_is_the_utc_day_and_the_days_run_from_the_first_to_the_last() {
    const DEC_1: u64 = 1_796_083_200_000;
    assert_eq!(day_listing(DEC_1), "day#2026-12-01");
    assert_eq!(day_listing(DEC_1 - 1), "day#2026-11-30");
    assert_eq!(day_listing(0), "day#1970-01-01");
    // Each day: its unsharded list (of releases before), then, from the first sharded day
    // on, its shards.
    assert_eq!(SHARDED_FROM_MS, DEC_1 + 86_400_000, "2026-12-02");
    let days = days_listing(DEC_1 - 1, DEC_1 + 86_400_000);
    let shards = LIST_SHARDS as usize + 1;
    assert_eq!(days.len(), 2 + shards);
    assert_eq!(
        [&days[0], &days[1], &days[2]],
        ["day#2026-11-30", "day#2026-12-01", "day#2026-12-02"]
    );
    assert_eq!(days[3], "day#2026-12-02#0");
    assert_eq!(
        day_list("inv_1", DEC_1 + 5),
        "day#2026-12-01",
        "dated before: one list"
    );
    assert!(days.contains(&day_list("inv_1", SHARDED_FROM_MS + 5)));
    assert!(day_list("inv_1", SHARDED_FROM_MS).starts_with("day#2026-12-02#"));
    assert_eq!(days_listing(DEC_1 + 1, DEC_1 + 2).len(), 1);
    assert_eq!(
        days_listing(SHARDED_FROM_MS + 1, SHARDED_FROM_MS + 2).len(),
        shards
    );
    assert!(days_listing(DEC_1 + 86_400_000, DEC_1).is_empty());
    assert_eq!(open_lists()[0], OPEN);
    assert!(open_lists().contains(&open_list("inv_1")));
}

// The lists spread each busy day's and the open invoices' writes over
// LIST_SHARDS partitions, every shard used, each key always in the same one.
#[test]
fn lists_spread_keys_over_every_shard_and_keep_each_key_in_one() {
    let mut counts = vec![0u32; LIST_SHARDS as usize];
    for i in 0..32_000 {
        let key = format!("inv_{i:08x}");
        let k = shard_of(&key, LIST_SHARDS);
        assert_eq!(k, shard_of(&key, LIST_SHARDS));
        counts[k as usize] += 1;
    }
    // About 1,000 each: none more than a quarter above the mean.
    assert!(counts.iter().all(|c| (750..1250).contains(c)), "{counts:?}");
}

// The shard is part of what is stored: an item listed (and a delivery's `pending-by-age`
// entry) under `#k` must be found there by every later release. These keys keep their
// shards; a change of the hash would move every list under the readers' feet.
#[test]
fn a_keys_shard_is_a_stored_format_and_never_changes() {
    let shards: Vec<u32> = ["inv_1", "inv_2", "pcd_1", "wdr_1", "evt_1", "test#evt_1"]
        .iter()
        .flat_map(|k| [shard_of(k, LIST_SHARDS), shard_of(k, 64)])
        .collect();
    assert_eq!(shards, [13, 13, 7, 39, 13, 13, 8, 8, 27, 59, 27, 59]);
}

// What waits for a person was one list (`review`) and one `waiting` key an outcome,
// each heated by a storm of its outcome. Both are spread over eight keys by the item's own key,
// whatever its outcome; the keys are stored, and pinned.
#[test]
fn review_and_waiting_keys_are_eight_shards_of_the_items_key_whatever_its_outcome() {
    assert_eq!(REVIEW_SHARDS, 8);
    let review: Vec<String> = ["inv_1", "inv_2", "inv_3"].map(review_list).into();
    assert_eq!(review, ["review#5", "review#7", "review#0"]);
    assert_eq!(review_lists().len(), 8);
    assert!(review.iter().all(|r| review_lists().contains(r)));
    let keys: Vec<Option<Value>> = crate::money::change::DELIVERY_OUTCOMES
        .iter()
        .map(|outcome| {
            let mark = processed("evt_1", *outcome, None, 5);
            mark.set.iter().find_map(|s| match s {
                Set::Put(Field::Waiting, v) => Some(v.clone()),
                _ => None,
            })
        })
        .collect();
    assert_eq!(keys, vec![Some(Value::text(waiting_shard("evt_1"))); 5]);
    assert_eq!(
        ["evt_1", "test#evt_1", "evt_2"].map(waiting_shard),
        ["w3", "w3", "w7"]
    );
    assert_eq!(waiting_shards().len(), 8);
    let settled = processed("evt_1", crate::money::change::Applied::Fulfilled, None, 5);
    assert!(
        !settled
            .set
            .iter()
            .any(|s| matches!(s, Set::Put(Field::Waiting, _)))
    );
}

// Every item that stands for an event is listed under the day it changed, with
// the time the index ranges by, so `events since` and the reconciliation's window find it.
#[test]
fn every_item_that_stands_for_an_event_is_listed_by_the_time_it_changed() {
    const AT: u64 = SHARDED_FROM_MS + 42;
    let listed_by_day = |w: &Write| {
        let key = w.key.id.as_str();
        w.set
            .contains(&Set::Put(Field::ListedIn, Value::text(day_list(key, AT))))
            && day_list(key, AT).starts_with("day#2026-12-02#")
    };
    let when = Set::Put(Field::UpdatedAt, Value::Int(AT));
    let source = Source::Manual { actor: "a".into() };
    let order = OrderRef::default();
    let paid = PaidInvoice {
        invoice_id: "inv_1",
        status: InvoiceStatus::Paid,
        order: &order,
        source: &source,
        at_ms: AT,
    };
    let writes = payment(&paid, (1, Some(1)), Vec::new());
    for w in writes
        .iter()
        .filter(|w| matches!(w.what, What::Payment | What::Fulfilment))
    {
        assert!(listed_by_day(w) && w.set.contains(&when), "{:?}", w.what);
    }
    let withdrawal = withdrawal(
        &WithdrawalChange {
            withdrawal_id: "wdr_1",
            status: WithdrawalStatus::Completed,
            at: 1,
            kind: "refund",
            invoice_id: None,
            amount: None,
            currency: None,
        },
        &source,
        AT,
    );
    let review = review_note("evt_1", Applied::Unusable, None, "why", AT);
    let deposits = deposit("pcd_1", (DepositStatus::Confirmed, 1), None, &source, AT);
    for w in [&withdrawal, &review, &deposits[0]] {
        assert!(listed_by_day(w) && w.set.contains(&when), "{:?}", w.what);
    }
}

// What waits for a person is marked at its processed mark, and nothing else is,
// so the index `exceptions` reads holds exactly what it lists.
#[test]
fn a_delivery_is_marked_waiting_exactly_when_its_outcome_waits_for_a_person() {
    let every = [
        Applied::Fulfilled,
        Applied::Updated,
        Applied::Credited,
        Applied::AlreadyFinal,
        Applied::Stale,
        Applied::Held,
        Applied::PaidLate,
        Applied::Ignored,
        Applied::Unconfirmed,
        Applied::AlreadyProcessed,
        Applied::Unusable,
        Applied::OtherEnvironment,
        Applied::DuplicatePayment,
        Applied::Refunded,
        Applied::OrderUnknown,
    ];
    for outcome in every {
        let mark = processed("evt_1", outcome, None, 7);
        let waiting: Vec<&Set> = mark
            .set
            .iter()
            .filter(|s| matches!(s, Set::Put(Field::Waiting, _)))
            .collect();
        let waits = matches!(
            outcome,
            Applied::Unconfirmed | Applied::Unusable | Applied::OrderUnknown
        );
        if waits {
            assert_eq!(
                waiting,
                [&Set::Put(
                    Field::Waiting,
                    Value::text(waiting_shard("evt_1"))
                )],
                "{outcome:?}"
            );
        } else {
            assert!(waiting.is_empty(), "{outcome:?} does not wait");
        }
    }
}

fn invoice(status: InvoiceStatus, at: u64) -> Fields {
    Fields::from([
        (Field::Status, Value::text(status.as_str())),
        (Field::StatusAt, Value::Int(at)),
        (Field::StatusRank, Value::Int(u64::from(status.rank()))),
    ])
}

#[test]
fn an_invoice_moves_forward_only_and_never_leaves_a_final_status() {
    use InvoiceStatus as I;
    let takes =
        |current: Option<Fields>, incoming: I, at| transition(incoming, at).holds(current.as_ref());
    assert!(takes(None, I::Paid, 1));
    assert!(takes(Some(Fields::new()), I::Confirming, 1), "refunds only");
    assert!(takes(Some(invoice(I::Confirming, 9)), I::Paid, 1));
    assert!(!takes(Some(invoice(I::Paid, 1)), I::Expired, 9));
    assert!(!takes(Some(invoice(I::Paid, 1)), I::Confirming, 9));
    assert!(takes(
        Some(invoice(I::AwaitingPayment, 1)),
        I::Confirming,
        2
    ));
    assert!(!takes(
        Some(invoice(I::Confirming, 2)),
        I::AwaitingPayment,
        1
    ));
    assert!(takes(
        Some(invoice(I::AwaitingPayment, 2)),
        I::Confirming,
        2
    ));
    assert!(!takes(
        Some(invoice(I::Confirming, 2)),
        I::AwaitingPayment,
        2
    ));
    assert!(!takes(Some(invoice(I::Confirming, 2)), I::Confirming, 2));
    // A later reorg's `awaiting_payment` applies.
    assert!(takes(
        Some(invoice(I::Confirming, 2)),
        I::AwaitingPayment,
        3
    ));
}

#[test]
fn a_missing_field_compares_false_and_numbers_compare_by_value() {
    let empty = Fields::new();
    for guard in [
        Guard::Is(Field::Held, Value::Bool(true)),
        Guard::Below(Field::StatusAt, Value::Int(9)),
        Guard::AtMost(Field::StatusAt, Value::Int(9)),
        Guard::In(Field::Status, vec![Value::text("paid")]),
        Guard::Count(Field::Refunds, 0),
    ] {
        assert!(!guard.holds(Some(&empty)), "{guard:?}");
        assert!(Guard::Not(Box::new(guard)).holds(Some(&empty)));
    }
    let order = Fields::from([
        (Field::Amount, Value::Amount(Amount::parse("10.5").unwrap())),
        (Field::Currency, Value::text("USDT")),
    ]);
    let guard = amount_guard(&OrderRef {
        external_id: Some("o".into()),
        amount: Amount::parse("10.50"),
        currency: Some("USDT".into()),
        project: None,
        home: false,
        unlisted: false,
    })
    .unwrap()
    .guard;
    assert!(guard.holds(Some(&order)));
    assert!(guard.holds(None), "an order nobody registered");
    let other = amount_guard(&OrderRef {
        external_id: Some("o".into()),
        amount: Amount::parse("10.51"),
        currency: Some("USDT".into()),
        project: None,
        home: false,
        unlisted: false,
    })
    .unwrap()
    .guard;
    assert!(!other.holds(Some(&order)));
    assert!(!Guard::Never.holds(None));
    assert!(
        Guard::AtMost(Field::StatusAt, Value::Int(3)).holds(Some(&invoice(InvoiceStatus::Paid, 3)))
    );
    assert!(
        !Guard::Below(Field::StatusAt, Value::Int(3)).holds(Some(&invoice(InvoiceStatus::Paid, 3)))
    );
}

#[test]
fn a_deposit_is_credited_once_and_an_advisory_never_goes_back() {
    let credited = Fields::from([
        (Field::Credited, Value::Bool(true)),
        (Field::StatusAt, Value::Int(1)),
    ]);
    let advisory = Fields::from([(Field::StatusAt, Value::Int(5))]);
    assert!(deposit_transition(true, 1).holds(None));
    assert!(!deposit_transition(true, 9).holds(Some(&credited)));
    assert!(deposit_transition(true, 1).holds(Some(&advisory)));
    assert!(!deposit_transition(false, 9).holds(Some(&credited)));
    assert!(deposit_transition(false, 5).holds(Some(&advisory)));
    assert!(!deposit_transition(false, 4).holds(Some(&advisory)));
}

#[test]
fn a_withdrawal_moves_forward_only() {
    let at = |s: WithdrawalStatus| Fields::from([(Field::Status, Value::text(s.as_str()))]);
    use WithdrawalStatus as W;
    assert!(withdrawal_transition(W::Created).holds(None));
    assert!(!withdrawal_transition(W::Created).holds(Some(&at(W::Created))));
    assert!(withdrawal_transition(W::Completed).holds(Some(&at(W::Processing))));
    assert!(!withdrawal_transition(W::Processing).holds(Some(&at(W::Completed))));
    assert!(!withdrawal_transition(W::Failed).holds(Some(&at(W::Completed))));
}

#[test]
fn a_release_holds_only_on_the_invoice_as_it_was_read() {
    let mut held = invoice(InvoiceStatus::Paid, 1);
    held.insert(Field::Held, Value::Bool(true));
    let guard = release_guard(Waiting::Held(InvoiceStatus::Paid), 0);
    assert!(guard.holds(Some(&held)));
    let mut released = held.clone();
    released.insert(Field::ReleasedAt, Value::Int(1));
    assert!(!guard.holds(Some(&released)));
    let refund = Refund {
        withdrawal_id: "wdr_1".into(),
        amount: None,
        currency: None,
        mode: Some(RefundMode::Overpayment),
        completed_at: None,
    };
    let mut refunded = held.clone();
    refunded.insert(Field::Refunds, Value::Refunds(vec![refund]));
    assert!(!guard.holds(Some(&refunded)));
    assert!(release_guard(Waiting::Held(InvoiceStatus::Paid), 1).holds(Some(&refunded)));
    assert!(!release_guard(Waiting::PaidLate(InvoiceStatus::Paid), 0).holds(Some(&held)));
}

#[test]
fn an_amount_reads_as_sent_else_as_the_stored_number() {
    let number = Fields::from([(Field::Amount, Value::Amount(Amount::parse("10.5").unwrap()))]);
    assert_eq!(
        money(&number, &Field::Amount, &Field::AmountText).map(|a| a.as_str().to_owned()),
        Some("10.5".into())
    );
    let mut both = number.clone();
    both.insert(Field::AmountText, Value::text("10.50"));
    assert_eq!(
        order_of(&both).amount.map(|a| a.as_str().to_owned()),
        Some("10.50".into()),
        "the text Paymos sent wins"
    );
    assert_eq!(money(&Fields::new(), &Field::Net, &Field::NetText), None);
}

#[test]
fn each_item_has_its_key() {
    assert_eq!(order_key(None, "o-1"), "order#o-1");
    assert_eq!(order_paid_key(None, "o-1"), "order_paid#o-1");
    assert_eq!(balance_key(None, "c-1", "TRX"), "balance#c-1#TRX");
    // Another project's: its own keys, never the home project's.
    assert_eq!(order_key(Some("prj_b"), "o-1"), "order#prj_b#o-1");
    assert_eq!(order_paid_key(Some("prj_b"), "o-1"), "order_paid#prj_b#o-1");
    assert_eq!(
        balance_key(Some("prj_b"), "c-1", "TRX"),
        "balance#prj_b#c-1#TRX"
    );
    assert_eq!(review_key("evt_1"), "review#evt_1");
    let credit = Credit {
        payer: "c-1".into(),
        net: Amount::parse("2").unwrap(),
        currency: "TRX".into(),
        project: None,
    };
    let source = Source::Manual { actor: "a".into() };
    let writes = deposit(
        "pcd_1",
        (DepositStatus::Confirmed, 1),
        Some(&credit),
        &source,
        1,
    );
    assert_eq!(writes[1].key, Key::state("balance#c-1#TRX"));
    assert_eq!(Key::delivery("evt_1").table, Table::Ledger);
}

#[test]
fn only_a_full_refund_flags_the_invoice() {
    let refund = |mode| Refund {
        withdrawal_id: "wdr_1".into(),
        amount: None,
        currency: None,
        mode,
        completed_at: None,
    };
    let flags = |r: &Refund| {
        refund_note("inv_1", r, false, 1)
            .set
            .iter()
            .any(|s| matches!(s, Set::Once(Field::RefundedInFullBy, _)))
    };
    assert!(flags(&refund(Some(RefundMode::Full))));
    assert!(!flags(&refund(Some(RefundMode::Overpayment))));
    assert!(!flags(&refund(None)));
}

// An invoice refunded in full before the flags existed gets them from its
// recorded refunds, and then settles exactly the payments those refunds return.
#[test]
fn the_flags_of_recorded_refunds_settle_what_the_refunds_return() {
    let refund = |id: &str, mode, completed_at| Refund {
        withdrawal_id: id.into(),
        amount: None,
        currency: None,
        mode,
        completed_at,
    };
    let (full, over) = (Some(RefundMode::Full), Some(RefundMode::Overpayment));
    let histories = [
        vec![],
        vec![refund("wdr_o", over, Some(50))],
        vec![refund("wdr_n", None, None)],
        vec![refund("wdr_a", full, None)],
        vec![refund("wdr_a", full, Some(40))],
        vec![
            refund("wdr_a", full, Some(20)),
            refund("wdr_b", full, Some(40)),
        ],
        vec![
            refund("wdr_a", full, Some(40)),
            refund("wdr_b", full, Some(20)),
        ],
        vec![refund("wdr_a", full, Some(20)), refund("wdr_b", full, None)],
        vec![
            refund("wdr_o", over, Some(60)),
            refund("wdr_b", full, Some(30)),
        ],
    ];
    for refunds in histories {
        let mut item = Fields::from([(Field::Kind, Value::text("invoice"))]);
        if let Some(w) = refund_flags("inv_1", &refunds) {
            assert!(w.guard.holds(Some(&item)), "{refunds:?}");
            assert!(!w.guard.holds(None), "never creates an invoice");
            for set in &w.set {
                if let Set::Put(f, v) | Set::Once(f, v) = set {
                    item.insert(f.clone(), v.clone());
                }
            }
            assert!(!w.guard.holds(Some(&item)), "once");
        }
        for paid_at in [None, Some(10), Some(20), Some(30), Some(40), Some(41)] {
            assert_eq!(
                refunded_in_full(paid_at).holds(Some(&item)),
                refunds.iter().any(|r| r.returns_payment_at(paid_at)),
                "{refunds:?} paid at {paid_at:?}"
            );
        }
    }
}

// A full refund settles only the payments made until it completed.
#[test]
fn the_latest_full_refund_decides_which_payments_it_returns() {
    let full = |at| Refund {
        withdrawal_id: format!("wdr_{at}"),
        amount: None,
        currency: None,
        mode: Some(RefundMode::Full),
        completed_at: Some(at),
    };
    let note = |r: &Refund, after_later| refund_note("inv_1", r, after_later, 1);
    let mut item = Fields::new();
    let commit = |item: &mut Fields, w: &Write| {
        assert!(
            w.guard.holds(Some(item)),
            "{:?} refused on {item:?}",
            w.guard
        );
        for set in &w.set {
            match set {
                Set::Put(f, v) => drop(item.insert(f.clone(), v.clone())),
                Set::Once(f, v) => drop(item.entry(f.clone()).or_insert_with(|| v.clone())),
                _ => {}
            }
        }
    };
    commit(&mut item, &note(&full(40), false));
    // An earlier refund arriving later never takes the later one's time back.
    assert!(!note(&full(20), false).guard.holds(Some(&item)));
    commit(&mut item, &note(&full(20), true));
    assert_eq!(item[&Field::RefundedInFullAt], Value::Int(40));
    let settled = |paid_at| refunded_in_full(paid_at).holds(Some(&item));
    assert!(settled(Some(30)), "paid before the refund at 40");
    assert!(settled(Some(40)), "paid as it completed");
    assert!(!settled(Some(41)), "paid after it: a new payment");
    assert!(settled(None), "a person's road names no time");
    assert!(
        !refunded_in_full(Some(1)).holds(Some(&Fields::new())),
        "no refund"
    );
    // A record written before times were kept: its full refund settles any payment.
    let old = Fields::from([(Field::RefundedInFullBy, Value::text("wdr_0"))]);
    assert!(refunded_in_full(Some(u64::MAX)).holds(Some(&old)));
}

// What a final confirmation says otherwise than the credit a
// deposit holds, each alone, with both values; what equals it (as a decimal, the currency in
// any case) or the record lacks contradicts nothing, nor does a credit of the home scope.
#[test]
fn a_credit_differs_by_each_thing_it_says_otherwise() {
    let credited = |project: Option<&str>| {
        let source = Source::Delivery {
            event_id: "evt_1".into(),
        };
        let credit = Credit {
            payer: "42".into(),
            net: Amount::parse("49.00").unwrap(),
            currency: "USDT".into(),
            project: project.map(str::to_owned),
        };
        let writes = deposit(
            "pcd_x",
            (DepositStatus::Confirmed, 1),
            Some(&credit),
            &source,
            1,
        );
        let mut found = Fields::new();
        for set in &writes[0].set {
            if let Set::Put(field, value) = set {
                found.insert(field.clone(), value.clone());
            }
        }
        found
    };
    let said = |payer: &str, net: &str, currency: &str, project: Option<&str>| Credit {
        payer: payer.into(),
        net: Amount::parse(net).unwrap(),
        currency: currency.into(),
        project: project.map(str::to_owned),
    };
    let home = credited(None);
    assert_eq!(credit_differs(&home, &said("42", "49", "usdt", None)), None);
    for (credit, words) in [
        (
            said("42", "99", "USDT", None),
            "net 99 USDT, credited 49.00 USDT",
        ),
        (
            said("42", "49", "TRX", None),
            "net 49 TRX, credited 49.00 USDT",
        ),
        (
            said("43", "49", "USDT", None),
            "payer 43, credited to payer 42",
        ),
        (
            said("42", "49", "USDT", Some("prj_b")),
            "project prj_b, credited in the home project",
        ),
    ] {
        let why = credit_differs(&home, &credit).unwrap_or_default();
        assert!(
            why.contains(words) && why.contains("by evt_1"),
            "{words}: {why}"
        );
    }
    let of_b = credited(Some("prj_b"));
    assert_eq!(
        credit_differs(&of_b, &said("42", "49", "USDT", Some("prj_b"))),
        None
    );
    assert!(
        credit_differs(&of_b, &said("42", "49", "USDT", Some("prj_c")))
            .is_some_and(|w| w.contains("project prj_c, credited in prj_b"))
    );
    // A record that lacks what a credit says (a deposit not credited) contradicts nothing.
    assert_eq!(
        credit_differs(&Fields::new(), &said("43", "99", "TRX", None)),
        None
    );
}

// Issue 54: the trace of a delivery is kept on the items whose changes the hand-off publishes
// (so the stream's publisher continues it), never on the ledger's mark, a merchant's items, a
// claim or a guard, and a write that only checks its guard stays a check.
#[test]
fn a_deliverys_trace_is_kept_on_the_items_the_hand_off_reads_and_nowhere_else() {
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let write = |what, key: Key, set: Vec<Set>| Write {
        what,
        key,
        guard: Guard::Always,
        set,
    };
    let status = || vec![Set::Put(Field::Status, Value::text("paid"))];
    let writes = [
        write(What::Processed, Key::delivery("evt_1"), status()),
        write(What::Payment, Key::state("inv_1"), status()),
        write(What::Fulfilment, Key::state("fulfilment#inv_1"), status()),
        write(What::Effect, Key::state("shipment#1"), status()),
        write(What::OrderClaim, Key::state("order_paid#1"), status()),
        write(What::Balance, Key::state("balance#c#USDT"), status()),
        write(What::Review, Key::state("review#evt_1"), Vec::new()),
    ];
    let kept: Vec<What> = traced(&writes, traceparent)
        .into_iter()
        .filter(|w| {
            w.set
                .contains(&Set::Put(Field::Traceparent, Value::text(traceparent)))
        })
        .map(|w| w.what)
        .collect();
    assert_eq!(kept, [What::Payment, What::Fulfilment]);
    assert_eq!(traced(&writes, traceparent).len(), writes.len());
}

// Missed mutants (`||` and `==` in `paymos_refunds_only`): Paymos lists the genuine full
// refund at 20 and not the forged one at 150; an overpayment refund it does not list returns
// none of the price and stays. The record keeps those two, and its full-refund flags are the
// genuine one's, not a flag of the unknown mode.
#[test]
fn only_paymos_refunds_keep_their_flags_and_an_overpayment_stays() {
    let refund = |id: &str, mode, at| Refund {
        withdrawal_id: id.into(),
        amount: Amount::parse("1"),
        currency: Some("USDT".into()),
        mode,
        completed_at: Some(at),
    };
    let genuine = refund("wdr_g", Some(RefundMode::Full), 20);
    let forged = refund("wdr_f", Some(RefundMode::Full), 150);
    let over = refund("wdr_o", Some(RefundMode::Overpayment), 30);
    let seen = [genuine.clone(), forged.clone(), over.clone()];
    let w = paymos_refunds_only("inv_1", (&seen, std::slice::from_ref(&genuine)), true, 5).unwrap();
    assert!(
        w.set.contains(&Set::Put(
            Field::Refunds,
            Value::Refunds(vec![genuine.clone(), over.clone()])
        )),
        "{:?}",
        w.set
    );
    for kept in [
        Set::Put(Field::RefundedInFullBy, Value::text("wdr_g")),
        Set::Put(Field::RefundedInFullAt, Value::Int(20)),
        Set::Remove(Field::RefundOfUnknownModeBy),
        Set::Remove(Field::RefundOfUnknownModeAt),
        Set::Remove(Field::Status),
    ] {
        assert!(w.set.contains(&kept), "{kept:?} in {:?}", w.set);
    }
    assert_eq!(
        w.guard,
        Guard::All(vec![
            Guard::Count(Field::Refunds, 3),
            Guard::Lacks(Field::ReleasedAt),
            Guard::Lacks(Field::PaidLateAt),
        ])
    );
    // Every refund it holds is Paymos' as Paymos lists it: nothing to write.
    let listed = [genuine.clone(), forged.clone()];
    assert_eq!(
        paymos_refunds_only("inv_1", (&seen, &listed), true, 5),
        None
    );
    // Paymos dates the forged one's id otherwise (at 10): the record takes Paymos' time.
    let earlier = refund("wdr_f", Some(RefundMode::Full), 10);
    let w = paymos_refunds_only(
        "inv_1",
        (&seen, &[genuine.clone(), earlier.clone()]),
        true,
        5,
    )
    .unwrap();
    assert!(
        w.set.contains(&Set::Put(
            Field::Refunds,
            Value::Refunds(vec![genuine, earlier, over])
        )),
        "{:?}",
        w.set
    );
    assert!(
        w.set
            .contains(&Set::Put(Field::RefundedInFullAt, Value::Int(20)))
    );
}
