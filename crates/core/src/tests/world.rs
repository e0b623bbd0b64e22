//! The model test of Paymos' whole world on the in-memory store: every generated history ends
//! where the oracle (`crate::testkit::oracle`, written from Paymos' contract) says it must; and fixed
//! histories of refunds in time (Paymos' clock, not arrival order) and of projects (one order
//! or payer id in two projects, another project's events, an event leaving its project out),
//! each under the reverse check and without.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use crate::money::status::Amount;
use crate::testkit::memory::{MemoryResources, MemoryReviews};
use crate::testkit::oracle::{self as o, Status};
use crate::testkit::world::{
    Act, Ids, PAID_AGAIN_AT, PAID_AT, REFUNDED_AT, REGISTERED, RETURNED_AT, TrueDeposit,
    TrueInvoice, TrueRefund, Truth, judge, oracle_case, run, world,
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

/// The generator walks every road and every shape the rules differ on: of 3,000 histories
/// (as many as a run judges), each road (the webhook with the check on and off, `recheck`,
/// `reconcile --apply`, `mark-paid`, `release`), stacks of two and three projects, forged
/// events (some naming another project), refund events apart from Paymos' clock and rule 19's payments naming no project on
/// a stack of several projects without the check each come up in at least one in twenty.
/// Prints the census (`--nocapture`).
#[test]
fn the_generator_walks_every_road() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = world();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let n = 3_000;
    for _ in 0..n {
        let (t, acts) = strategy.new_tree(&mut runner).unwrap().current();
        let mut count = |shape: &'static str, yes: bool| {
            *seen.entry(shape).or_default() += usize::from(yes);
        };
        let any = |f: &dyn Fn(&Act) -> bool| acts.iter().any(f);
        let webhook = any(&|a| matches!(a, Act::Invoice { .. }));
        count("webhook, check on", webhook && t.reverse_check);
        count("webhook, check off", webhook && !t.reverse_check);
        count("recheck", any(&|a| matches!(a, Act::Recheck(_))));
        count("reconcile --apply", any(&|a| matches!(a, Act::Reconcile)));
        count("mark-paid", any(&|a| matches!(a, Act::MarkPaid { .. })));
        count(
            "mark-paid with the API",
            any(&|a| matches!(a, Act::MarkPaid { api: true, .. })),
        );
        count("release", any(&|a| matches!(a, Act::Release { .. })));
        count(
            "release with the API",
            any(&|a| matches!(a, Act::Release { api: true, .. })),
        );
        count(
            "two or more projects",
            t.projects.as_ref().is_none_or(|p| p.len() > 1),
        );
        count(
            "forged",
            any(&|a| matches!(a, Act::Invoice { forged: true, .. })),
        );
        count(
            "forged, naming another project",
            any(&|a| {
                matches!(
                    a,
                    Act::Invoice {
                        elsewhere: true,
                        project: true,
                        ..
                    }
                )
            }),
        );
        count(
            "refund event apart from Paymos' clock",
            t.refund_skew != 0 && any(&|a| matches!(a, Act::Refund { .. })),
        );
        count(
            "paid after a full refund",
            t.invoices.iter().any(|i| i.paid_at == Some(PAID_AGAIN_AT)),
        );
        count(
            "unnamed project on several projects without the check",
            unnamed_project(&t, &acts),
        );
    }
    println!("of {n} histories: {seen:#?}");
    for (shape, k) in &seen {
        assert!(*k * 20 >= n, "{shape}: {k} of {n}");
    }
    assert_eq!(seen.len(), 14);
}

/// Rule 19's shape: on a stack of two or more listed projects without the reverse check, a
/// live payment event naming no project of an invoice no earlier live event named one for, or
/// a live final deposit confirmation naming none.
fn unnamed_project(t: &Truth, acts: &[Act]) -> bool {
    if t.reverse_check || t.projects.as_ref().is_none_or(|p| p.len() < 2) {
        return false;
    }
    let mut named = BTreeSet::new();
    acts.iter().any(|a| match *a {
        Act::Invoice {
            invoice,
            status,
            project,
            sandbox: false,
            ..
        } => {
            let unnamed = !project && status.pays() && !named.contains(&invoice);
            if project {
                named.insert(invoice);
            }
            unnamed
        }
        Act::Deposit {
            confirmed: true,
            project: false,
            sandbox: false,
            ..
        } => true,
        _ => false,
    })
}

/// An invoice of a fixed world (its order is set by [`truth`]), priced as registered, paid (its
/// paying status, or `paid_late`) at `paid_at` by Paymos' clock.
fn invoice(status: Status, paid_late: bool, paid_at: Option<u64>) -> TrueInvoice {
    TrueInvoice {
        project: 0,
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
        payouts: 0,
        projects: Some(vec![0]),
        reverse_check,
        refund_skew: 0,
    }
}

/// A genuine delivery of invoice 0's event announcing `status` (through `endpoint`).
fn said(status: Status, endpoint: u8) -> Act {
    Act::Invoice {
        invoice: 0,
        status,
        naming: 1,
        priced: true,
        project: true,
        endpoint,
        sandbox: false,
        forged: false,
        elsewhere: false,
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
            shipped: BTreeMap::from_iter(
                shipped.then(|| ((ids.project(0), ids.order(0)), inv.clone())),
            ),
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

/// Checks, under the reverse check and without and for each stack in `stacks`, that the oracle
/// says `want` for this history, then that the receiver ends where the oracle says.
fn check_projects(
    name: &str,
    world: impl Fn(bool) -> Truth,
    stacks: &[Option<Vec<u8>>],
    acts: &[Act],
    want: impl Fn(&Ids) -> o::Expected,
) {
    let mut failures = Vec::new();
    for (n, projects) in stacks.iter().enumerate() {
        for reverse_check in [false, true] {
            let run_id = format!("{name}{n}{}", u8::from(reverse_check));
            let ids = Ids {
                run: run_id.clone(),
            };
            let t = Truth {
                projects: projects.clone(),
                ..world(reverse_check)
            };
            let (w, steps) = oracle_case(&ids, &t, acts);
            let said = format!("stack {projects:?}, reverse check {reverse_check}");
            assert_eq!(o::expected(&w, &steps), want(&ids), "the oracle ({said})");
            let found = found(&run_id, &t, acts);
            if !found.is_empty() {
                failures.push(format!("{said}: {found:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Invoice `invoice`'s genuine event announcing `status`, naming its project or leaving it out.
fn said_of(invoice: u8, status: Status, project: bool) -> Act {
    Act::Invoice {
        invoice,
        status,
        naming: 1,
        priced: true,
        project,
        endpoint: 0,
        sandbox: false,
        forged: false,
        elsewhere: false,
        lagging: false,
    }
}

/// A world of three invoices: `(project, order, status)` each, priced as registered.
fn shops(invoices: [(u8, u8, Status); 3], reverse_check: bool) -> Truth {
    let invoices = invoices
        .into_iter()
        .map(|(project, order, status)| TrueInvoice {
            project,
            order: Some(order),
            ..invoice(status, false, status.pays().then_some(PAID_AT))
        })
        .collect();
    Truth {
        invoices,
        ..truth(
            invoice(Status::AwaitingPayment, false, None),
            &[],
            reverse_check,
        )
    }
}

fn expect(shipped: &[((String, String), String)], waiting: &[(String, o::Wait)]) -> o::Expected {
    o::Expected {
        shipped: shipped.iter().cloned().collect(),
        waiting: waiting.iter().cloned().collect(),
        ..o::Expected::default()
    }
}

/// A stack of two shops (projects 0 and 1), either listed first (a stack naming no projects
/// keys them together: rule 18).
fn two_shops() -> [Option<Vec<u8>>; 2] {
    [Some(vec![0, 1]), Some(vec![1, 0])]
}

#[test] // projects (a)
fn order_1001_of_two_projects_both_paid_ships_twice_once_each() {
    // o_0 of project 0 (invoice 0) and of project 1 (invoices 1 and 2), each paid; invoice 2's
    // payment is project 1's second of its o_0: a duplicate there, not in project 0.
    let world = |rc| {
        use Status::Paid;
        shops([(0, 0, Paid), (1, 0, Paid), (1, 0, Paid)], rc)
    };
    let acts = [
        said_of(0, Status::Paid, true),
        said_of(1, Status::Paid, true),
        said_of(2, Status::Paid, true),
    ];
    check_projects("pa", world, &two_shops(), &acts, |ids| {
        let key = |p| (ids.project(p), ids.order(0));
        expect(
            &[(key(0), ids.invoice(0)), (key(1), ids.invoice(1))],
            &[(ids.invoice(2), o::Wait::Duplicate)],
        )
    });
}

#[test] // projects (b)
fn another_projects_paid_event_refund_and_deposit_change_nothing() {
    // Project 2's invoice 0 is paid and refunded in full, its payer deposits; a plain payout
    // (no project) completes; a person marks invoice 0 paid naming project 2; reconciliation
    // finds it paid at Paymos. The stack applies project 0 (or projects 0 and 1).
    let world = |rc| {
        use Status::{AwaitingPayment, Paid};
        let mut t = shops(
            [
                (2, 0, Paid),
                (0, 1, AwaitingPayment),
                (0, 0, AwaitingPayment),
            ],
            rc,
        );
        t.refunds = vec![TrueRefund {
            invoice: 0,
            full: true,
            at: REFUNDED_AT,
        }];
        t.deposits = vec![TrueDeposit {
            project: 2,
            payer: 0,
            confirmed: true,
        }];
        t.payouts = 1;
        t
    };
    let acts = [
        said_of(0, Status::Paid, true),
        refund(0),
        Act::Deposit {
            deposit: 0,
            confirmed: true,
            project: true,
            sandbox: false,
            lagging: false,
        },
        Act::Payout {
            payout: 0,
            sandbox: false,
            lagging: false,
        },
        Act::MarkPaid {
            invoice: 0,
            with_order: true,
            api: false,
        },
        Act::Reconcile,
        Act::Recheck(0),
    ];
    let stacks = [Some(vec![0]), Some(vec![0, 1])];
    check_projects("pb", world, &stacks, &acts, |_| o::Expected::default());
}

#[test] // projects (c)
fn payer_42_of_two_projects_has_two_balances() {
    // Payer 0 deposits 5 TRX in project 0 and twice 5 in project 1.
    let world = |rc| {
        let mut t = truth(invoice(Status::AwaitingPayment, false, None), &[], rc);
        t.deposits = [0, 1, 1]
            .into_iter()
            .map(|project| TrueDeposit {
                project,
                payer: 0,
                confirmed: true,
            })
            .collect();
        t
    };
    let acts: Vec<Act> = (0..3)
        .map(|deposit| Act::Deposit {
            deposit,
            confirmed: true,
            project: true,
            sandbox: false,
            lagging: false,
        })
        .collect();
    check_projects("pc", world, &two_shops(), &acts, |ids| {
        let key = |p| (ids.project(p), ids.payer_of(0), "TRX".to_owned());
        o::Expected {
            balances: BTreeMap::from([(key(0), "5".into()), (key(1), "10".into())]),
            ..o::Expected::default()
        }
    });
}

#[test] // projects (d)
fn an_invoices_later_event_without_project_id_belongs_to_its_invoices_project() {
    // Invoice 0 (project 1's o_0) announces `confirming` naming its project, then `paid`
    // leaving it out. The stack applies projects 0 and 1 (either home): it ships project 1's o_0.
    let world = |rc| {
        use Status::{AwaitingPayment, Paid};
        shops(
            [
                (1, 0, Paid),
                (0, 1, AwaitingPayment),
                (0, 0, AwaitingPayment),
            ],
            rc,
        )
    };
    let acts = [
        said_of(0, Status::Confirming, true),
        said_of(0, Status::Paid, false),
    ];
    let stacks = [Some(vec![0, 1]), Some(vec![1, 0])];
    check_projects("pd", world, &stacks, &acts, |ids| {
        expect(&[((ids.project(1), ids.order(0)), ids.invoice(0))], &[])
    });
}

#[test] // projects (d), another project's invoice
fn another_projects_later_event_without_project_id_changes_nothing() {
    // Invoice 2 (project 2's o_0) announces `confirming` naming project 2, then `paid` leaving
    // it out. The stack applies projects 0 and 1: it is another project's and changes nothing.
    let world = |rc| {
        use Status::{AwaitingPayment, Paid};
        shops(
            [
                (0, 0, AwaitingPayment),
                (0, 1, AwaitingPayment),
                (2, 0, Paid),
            ],
            rc,
        )
    };
    let acts = [
        said_of(2, Status::Confirming, true),
        said_of(2, Status::Paid, false),
    ];
    let stacks = [Some(vec![0, 1])];
    check_projects("pe", world, &stacks, &acts, |_| o::Expected::default());
}

#[test] // (d)
fn a_persons_word_refunded_undated_then_dated_after_the_refund_by_its_delivery_waits_as_judged() {
    // A person marks invoice 0 paid with no order (it waits for one), the full refund Paymos
    // completed at RETURNED_AT (120) is delivered (it returns that undated word), the person
    // names the order (no price), then the payment's own delivery: Paymos paid it at
    // PAID_AGAIN_AT (130), after the refund. A new payment, never returned: judged as the
    // person's word was (no price, so held), listed; before, it stood paid, unshipped and
    // listed nowhere. A stack without the reverse check, where a person's word ships (rule 21).
    let world = |_| {
        let paid = invoice(Status::Paid, false, Some(PAID_AGAIN_AT));
        truth(paid, &[(true, RETURNED_AT)], false)
    };
    let acts = [
        Act::MarkPaid {
            invoice: 0,
            with_order: false,
            api: false,
        },
        refund(0),
        Act::MarkPaid {
            invoice: 0,
            with_order: true,
            api: false,
        },
        said(Status::Paid, 0),
    ];
    check("d", world, &acts, false, Some(o::Wait::Held), false);
}

#[test] // rule 2: of a closure Paymos confirms the status, whatever project the event names
fn a_forged_closure_naming_another_project_closes_as_paymos_has_it_and_waits_for_no_one() {
    // Paymos has invoice 1 expired, project 0's; a forged `invoice.expired` names project 1,
    // which the stack applies too.
    let t = Truth {
        projects: Some(vec![0, 1]),
        ..shops(
            [
                (0, 0, Status::AwaitingPayment),
                (0, 1, Status::Expired),
                (0, 0, Status::AwaitingPayment),
            ],
            true,
        )
    };
    let acts = [Act::Invoice {
        invoice: 1,
        status: Status::Expired,
        naming: 0,
        priced: false,
        project: true,
        endpoint: 0,
        sandbox: false,
        forged: true,
        elsewhere: true,
        lagging: false,
    }];
    let ids = Ids { run: "fc".into() };
    let (w, steps) = oracle_case(&ids, &t, &acts);
    assert_eq!(o::expected(&w, &steps), o::Expected::default());
    assert_eq!(found("fc", &t, &acts), Vec::<String>::new());
}
