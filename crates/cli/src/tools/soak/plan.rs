//! The deliveries a soak sends: invoices (some paid twice, through two endpoints, without
//! their order, refunded in part, forged with the sandbox secret, with hostile fields),
//! withdrawals and deposits (some reorganised), each with what the tables must hold at the end.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Expect, Planned, Rng, Send, body, hostile};

const T0: u64 = 1_760_000_000;

/// Plans resources and their deliveries until `n` deliveries exist.
pub(super) fn plan(
    n: usize,
    rng: &mut Rng,
    run: u64,
) -> (BTreeMap<String, Expect>, Vec<Send>, Planned) {
    let mut planner = Planner {
        rng,
        run,
        next: 0,
        expect: BTreeMap::new(),
        sends: Vec::new(),
        planned: Planned::default(),
    };
    let mut r = 0;
    while planner.sends.len() < n {
        r += 1;
        match planner.rng.below(10) {
            0..6 => planner.invoice(r),
            6..8 => planner.withdrawal(r),
            _ => planner.deposit(r),
        }
    }
    (planner.expect, planner.sends, planner.planned)
}

struct Planner<'r> {
    rng: &'r mut Rng,
    run: u64,
    next: u64,
    expect: BTreeMap<String, Expect>,
    sends: Vec<Send>,
    planned: Planned,
}

impl Planner<'_> {
    fn id(&mut self) -> String {
        self.next += 1;
        format!(
            "evt_soak_{:x}_{}_{:x}",
            self.run,
            self.next,
            self.rng.below(1 << 20)
        )
    }

    fn send(&mut self, event_type: &str, at: u64, data: &Value) -> Send {
        let e = self.id();
        let text = body(&e, event_type, at, data);
        Send::new(e, text)
    }

    fn invoice(&mut self, r: u64) {
        let inv = format!("inv_soak_{:x}_{r}", self.run);
        let order = format!("order-{inv}");
        let final_status = match self.rng.below(20) {
            0..=11 => "paid",
            12..=13 => "paid_over",
            14..=16 => "expired",
            17 => "cancelled",
            _ => "underpaid",
        };
        let data = |invoice: &str, status: &str| {
            json!({"invoice_id": invoice, "status": status, "is_test": false,
            "order": {"external_id": order, "amount": "25.00", "currency": "USDT"}})
        };
        // A second checkout for the order (paid too, fulfilled never twice), or a paid event
        // that leaves the order out. Not both: with neither event naming the order before the
        // payment, nothing anywhere could tell the two invoices belong together.
        let paid = final_status.starts_with("paid");
        let second_checkout = paid && self.rng.chance(0.05);
        let silent = paid && !second_checkout && self.rng.chance(0.3);
        self.planned.silent += usize::from(silent);
        for (i, status) in ["awaiting_payment", "confirming"].iter().enumerate() {
            let mut send = self.send(
                &format!("invoice.{status}"),
                T0 + i as u64,
                &data(&inv, status),
            );
            send.gives_up = self.rng.chance(0.05);
            self.sends.push(send);
        }
        if paid && self.rng.chance(0.05) {
            self.refund(&inv, r, "overpayment");
        }
        // A full refund, in any order with the payment: applied first, the payment never ships.
        let refunded_in_full = paid && !second_checkout && !silent && self.rng.chance(0.04);
        if refunded_in_full {
            self.refund(&inv, r, "full");
        }
        let paid_data = if silent {
            json!({"invoice_id": inv, "status": final_status, "is_test": false,
                "payment": {"network": "TON", "currency": "USDT", "expected": "25.00"}})
        } else {
            data(&inv, final_status)
        };
        let paid_events = self.paid_events(final_status, &paid_data);
        // A sandbox-signed paid event for this live invoice, claiming nothing (no is_test).
        if self.rng.chance(0.05) {
            let forged = json!({"invoice_id": inv, "status": "paid",
                "order": {"external_id": order, "amount": "25.00", "currency": "USDT"}});
            let mut send = self.send("invoice.paid", T0 + 5, &forged);
            // Now and then it reuses the live paid event's id: a delivery is its environment
            // and its id, so the live one is applied whatever the sandbox one did.
            if self.rng.chance(0.4) {
                let reused = paid_events[0].clone();
                send = Send::new(
                    reused.clone(),
                    body(&reused, "invoice.paid", T0 + 5, &forged),
                );
                self.planned.sandbox_reused += 1;
            }
            send.sandbox = true;
            self.sends.push(send);
            self.planned.sandbox_signed += 1;
        }
        let pair = second_checkout
            .then(|| self.second_checkout(&inv, &data(&format!("{inv}_again"), "paid")));
        self.expect.insert(
            inv,
            Expect::Invoice {
                final_status,
                paid_events,
                pair,
                silent,
                refunded_in_full,
            },
        );
    }

    /// A refund of `mode`, in any order with the payment: an overpayment refund leaves the
    /// payment to be fulfilled; a full one recorded first keeps it from shipping.
    fn refund(&mut self, inv: &str, r: u64, mode: &str) {
        let wdr = format!("wdr_soak_{:x}_{r}_{mode}", self.run);
        let amount = if mode == "full" { "25.00" } else { "0.10" };
        let refund = json!({"withdrawal_id": wdr, "status": "completed", "is_test": false,
            "type": "refund", "mode": mode, "invoice_id": inv,
            "amount": amount, "currency": "USDT"});
        let send = self.send("withdrawal.completed", T0 + 12, &refund);
        self.sends.push(send);
        let final_status = "completed";
        self.expect.insert(wdr, Expect::Withdrawal { final_status });
        self.planned.refunds += 1;
    }

    /// The paid event, through one endpoint or two (two event ids for one payment), now and
    /// then with hostile fields.
    fn paid_events(&mut self, final_status: &str, paid_data: &Value) -> Vec<String> {
        let two = final_status.starts_with("paid") && self.rng.chance(0.2);
        self.planned.two_endpoints += usize::from(two);
        let mut paid_events = Vec::new();
        for _ in 0..1 + usize::from(two) {
            let e = self.id();
            paid_events.push(e.clone());
            let mut text = body(&e, &format!("invoice.{final_status}"), T0 + 10, paid_data);
            if self.rng.chance(0.05) {
                text = hostile(&text);
                self.planned.hostile += 1;
            }
            self.sends.push(Send::new(e, text));
        }
        paid_events
    }

    /// A second checkout for an order that gets paid: paid too, fulfilled never twice.
    fn second_checkout(&mut self, inv: &str, data: &Value) -> String {
        let second = format!("{inv}_again");
        let send = self.send("invoice.paid", T0 + 11, data);
        let paid_events = vec![send.event_id.clone()];
        self.sends.push(send);
        self.planned.second_invoices += 1;
        self.expect.insert(
            second.clone(),
            Expect::Invoice {
                final_status: "paid",
                paid_events,
                pair: Some(inv.to_owned()),
                silent: false,
                refunded_in_full: false,
            },
        );
        second
    }

    fn withdrawal(&mut self, r: u64) {
        let wdr = format!("wdr_soak_{:x}_{r}", self.run);
        let final_status = if self.rng.chance(0.8) {
            "completed"
        } else {
            "failed"
        };
        for (i, status) in ["created", "processing", final_status].iter().enumerate() {
            let data = json!({"withdrawal_id": wdr, "status": status, "is_test": false,
                "amount": "5.00", "currency": "USDT"});
            let mut send = self.send(&format!("withdrawal.{status}"), T0 + i as u64, &data);
            send.gives_up = i < 2 && self.rng.chance(0.05);
            self.sends.push(send);
        }
        self.expect.insert(wdr, Expect::Withdrawal { final_status });
    }

    fn deposit(&mut self, r: u64) {
        let pcd = format!("pcd_soak_{:x}_{r}", self.run);
        let payer = format!("payer-{}", self.rng.below(40));
        let net_cents = 1 + self.rng.below(100_000);
        let net = format!("{}.{:02}", net_cents / 100, net_cents % 100);
        let mut statuses = vec!["confirming"];
        if self.rng.chance(0.3) {
            statuses.push("reorged");
        }
        statuses.push("confirmed");
        for (i, status) in statuses.iter().enumerate() {
            let e = self.id();
            let data = json!({"id": pcd, "status": status, "is_final": *status == "confirmed",
                "is_test": false, "payment_channel_external_id": payer, "currency": "USDT",
                "gross": net, "fee": "0", "net": net});
            let event_type = format!("payment_channel.deposit.{status}");
            let mut text = body(&e, &event_type, T0 + i as u64, &data);
            if *status == "confirmed" && self.rng.chance(0.05) {
                text = hostile(&text);
                self.planned.hostile += 1;
            }
            let mut send = Send::new(e, text);
            send.gives_up = *status != "confirmed" && self.rng.chance(0.05);
            self.sends.push(send);
        }
        self.expect
            .insert(pcd, Expect::Deposit { payer, net_cents });
    }
}
