//! The model test of Paymos' whole world on the in-memory store: every generated history ends
//! where the oracle (`crate::oracle`, written from Paymos' contract) says it must; and fixed
//! histories of refunds in time (Paymos' clock, not arrival order), each under the reverse check
//! and without.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use crate::memory::{MemoryResources, MemoryReviews};
use crate::oracle::{self as o, Status};
use crate::status::Amount;
use crate::world::{
    Act, Ids, PAID_AGAIN_AT, PAID_AT, REFUNDED_AT, REGISTERED, RETURNED_AT, TrueInvoice,
    TrueRefund, Truth, judge, oracle_case, run, world,
};

/// Runs `acts` of `truth` on a fresh in-memory store: where the end state differs from the
/// oracle's, in words.
fn found(run_id: &str, truth: &Truth, acts: &[Act]) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ids = Ids { run: run_id.into() };
        let store = Arc::new(MemoryResources::new());
        store.register_order(&ids.order(0), &Amount::parse(REGISTERED).unwrap(), "USD");
        let reviews = MemoryReviews::new();
        run(&store, &reviews, &ids, truth, acts)
            .await
            .expect("memory never fails");
        judge(&store, &store, &reviews, &ids, truth, acts).await
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    #[test]
    fn every_history_of_paymos_world_ends_as_the_oracle_says((truth, acts) in world()) {
        let found = found("w", &truth, &acts);
        prop_assert!(found.is_empty(), "{truth:#?}\n{acts:#?}\n{found:#?}");
    }
}

/// An invoice of a fixed world (its order is set by [`truth`]), priced as registered, paid (its
/// paying status, or `paid_late`) at `paid_at` by Paymos' clock.
fn invoice(status: Status, paid_late: bool, paid_at: Option<u64>) -> TrueInvoice {
    TrueInvoice {
        order: None,
        price: 0,
        status,
        paid_late,
        silent: false,
        paid_at,
    }
}

/// A world of invoice 0 (order 0) and `refunds` of it; invoices 1 and 2 stay open.
fn truth(inv: TrueInvoice, refunds: &[(bool, u64)], reverse_check: bool) -> Truth {
    let quiet = || invoice(Status::AwaitingPayment, false, None);
    let mut invoices = vec![inv, quiet(), quiet()];
    for (i, inv) in (0u8..).zip(&mut invoices) {
        inv.order = Some(i % 2);
    }
    Truth {
        invoices,
        refunds: refunds
            .iter()
            .map(|&(full, at)| TrueRefund {
                invoice: 0,
                full,
                at,
            })
            .collect(),
        deposits: Vec::new(),
        reverse_check,
    }
}

/// A genuine delivery of invoice 0's event announcing `status` (through `endpoint`).
fn said(status: Status, endpoint: u8) -> Act {
    Act::Invoice {
        invoice: 0,
        status,
        naming: 1,
        priced: true,
        endpoint,
        sandbox: false,
        forged: false,
        lagging: false,
    }
}

fn refund(refund: u8) -> Act {
    Act::Refund {
        refund,
        sandbox: false,
        lagging: false,
    }
}

/// Checks, under the reverse check and without, that the oracle says what the contract says
/// for this history (`shipped` under invoice 0, `waiting`, `refunded`), then that the receiver
/// ends where the oracle says.
fn check(
    name: &str,
    world: impl Fn(bool) -> Truth,
    acts: &[Act],
    shipped: bool,
    waiting: Option<o::Wait>,
    refunded: bool,
) {
    let mut failures = Vec::new();
    for reverse_check in [false, true] {
        let run_id = format!("{name}{}", u8::from(reverse_check));
        let ids = Ids {
            run: run_id.clone(),
        };
        let t = world(reverse_check);
        let (w, steps) = oracle_case(&ids, &t, acts);
        let want = o::expected(&w, &steps);
        let inv = ids.invoice(0);
        let oracle = o::Expected {
            shipped: BTreeMap::from_iter(shipped.then(|| (ids.order(0), inv.clone()))),
            waiting: BTreeMap::from_iter(waiting.map(|wait| (inv.clone(), wait))),
            balances: BTreeMap::new(),
            refunded: BTreeSet::from_iter(refunded.then(|| inv.clone())),
        };
        assert_eq!(want, oracle, "the oracle (reverse check {reverse_check})");
        let found = found(&run_id, &t, acts);
        if !found.is_empty() {
            failures.push(format!("reverse check {reverse_check}: {found:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test] // (a)
fn a_payment_after_its_partial_payment_was_returned_in_full_ships_once() {
    // Paymos: underpaid_waiting (partial payment), the full refund returns it at
    // RETURNED_AT, then invoice.paid at PAID_AGAIN_AT: a new payment, which ships once.
    let world = |rc| {
        let paid = invoice(Status::Paid, false, Some(PAID_AGAIN_AT));
        truth(paid, &[(true, RETURNED_AT)], rc)
    };
    let acts = [
        said(Status::UnderpaidWaiting, 0),
        refund(0),
        said(Status::Paid, 0),
        said(Status::Paid, 1),
    ];
    check("a", world, &acts, true, None, false);
}

#[test] // (b)
fn a_late_payment_after_a_returned_partial_payment_waits_paid_late_and_is_not_refunded() {
    // Paymos: a partial payment, the invoice closes underpaid at CLOSED_AT (110), the partial
    // payment is returned at RETURNED_AT (120), then the invoice is paid late at PAID_AGAIN_AT
    // (130).
    let world = |rc| {
        let late = invoice(Status::Underpaid, true, Some(PAID_AGAIN_AT));
        truth(late, &[(true, RETURNED_AT)], rc)
    };
    let acts = [
        said(Status::UnderpaidWaiting, 0),
        said(Status::Underpaid, 0),
        refund(0),
        said(Status::Paid, 0),
    ];
    check("b", world, &acts, false, Some(o::Wait::PaidLate), false);
}

#[test] // (c)
fn a_full_refund_delivered_before_the_payment_it_returned_keeps_it_from_shipping() {
    // Paymos: paid at PAID_AT (105), refunded in full at REFUNDED_AT (140); the refund's
    // delivery arrives first.
    let world = |rc| {
        let paid = invoice(Status::Paid, false, Some(PAID_AT));
        truth(paid, &[(true, REFUNDED_AT)], rc)
    };
    let acts = [refund(0), said(Status::Paid, 0)];
    check("c", world, &acts, false, None, true);
}
