//! The state table's and the ledger's items as the domain's typed records: the one conversion
//! of their attributes, for a read, a scan and a stream image alike (a stream image is first
//! turned into the SDK's attribute values, so every road reads through the same functions).

use aws_sdk_dynamodb::types::AttributeValue;

use super::item::{Item, get_s, get_u64};
#[cfg(test)]
use super::item::{n, s};
use super::render::fields_of;
use paymos_inbox_core::money::change::OrderRef;
use paymos_inbox_core::money::invoice::InvoiceSeen;
use paymos_inbox_core::money::record::{
    BalanceRecord, DeliveryRecord, DepositRecord, FulfilmentRecord, InvoiceRecord, ReviewRecord,
    StateRecord, WithdrawalRecord,
};
use paymos_inbox_core::money::status::{Amount, DepositStatus, InvoiceStatus, WithdrawalStatus};
use paymos_inbox_core::roads::handoff::ItemChange;
use paymos_inbox_core::roads::ingest::{DeliveryState, event_id_of_key};

fn text(item: &Item, name: &str) -> Option<String> {
    get_s(item, name).map(str::to_owned)
}

fn flag(item: &Item, name: &str) -> bool {
    item.get(name).and_then(|v| v.as_bool().ok()) == Some(&true)
}

fn number(item: &Item, name: &str) -> Option<Amount> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|a| Amount::parse(a))
}

/// An amount as Paymos sent it (`<name>_text`, trailing zeros kept), else the stored number.
fn money(item: &Item, name: &str) -> Option<Amount> {
    text(item, &format!("{name}_text"))
        .and_then(|a| Amount::parse(&a))
        .or_else(|| number(item, name))
}

fn order(item: &Item) -> OrderRef {
    OrderRef {
        external_id: text(item, "order_id"),
        amount: money(item, "amount"),
        currency: text(item, "currency"),
        project: text(item, "project_id"),
        home: item.get("home_project").and_then(|v| v.as_bool().ok()) == Some(&true),
        unlisted: false,
    }
}

/// An item of the state table as its typed record (`None` for an empty image: a removal).
#[must_use]
pub fn state_record(item: &Item) -> Option<StateRecord> {
    let key = text(item, "pk")?;
    let record = match get_s(item, "kind") {
        Some("invoice") => StateRecord::Invoice(InvoiceRecord {
            invoice_id: key,
            seen: invoice_seen(item),
            updated_at_ms: get_u64(item, "updated_at"),
        }),
        Some("fulfilment") => StateRecord::Fulfilment(FulfilmentRecord {
            invoice_id: text(item, "invoice_id").unwrap_or_default(),
            order: order(item),
            status: get_s(item, "status").and_then(InvoiceStatus::parse),
            won_by: text(item, "won_by").unwrap_or_default(),
            fulfilled_at_ms: get_u64(item, "fulfilled_at"),
        }),
        Some("review") => StateRecord::Review(ReviewRecord {
            // The note names its delivery by key (a sandbox one's is `test#evt_…`).
            event_id: text(item, "event_id")
                .map(|key| event_id_of_key(&key).to_owned())
                .unwrap_or_default(),
            reason: text(item, "reason").unwrap_or_default(),
            resource_id: text(item, "resource_id"),
            why: text(item, "why"),
            created_at_ms: get_u64(item, "created_at"),
        }),
        Some("withdrawal") => StateRecord::Withdrawal(WithdrawalRecord {
            withdrawal_id: key,
            status: get_s(item, "status").and_then(WithdrawalStatus::parse),
            kind: text(item, "type"),
            invoice_id: text(item, "invoice_id"),
            amount: money(item, "amount"),
            currency: text(item, "currency"),
            updated_at_ms: get_u64(item, "updated_at"),
        }),
        Some("deposit") => StateRecord::Deposit(DepositRecord {
            deposit_id: key,
            status: get_s(item, "status").and_then(DepositStatus::parse),
            credited: flag(item, "credited"),
            payer: text(item, "payer"),
            net: money(item, "net"),
            currency: text(item, "currency"),
            updated_at_ms: get_u64(item, "updated_at"),
            project: text(item, "project_id"),
        }),
        Some("balance") => match (
            text(item, "payer"),
            text(item, "currency"),
            number(item, "balance"),
        ) {
            (Some(payer), Some(currency), Some(balance)) => StateRecord::Balance(BalanceRecord {
                payer,
                currency,
                balance,
                project: text(item, "project_id"),
            }),
            _ => StateRecord::Other {
                key,
                kind: Some("balance".into()),
            },
        },
        Some(paymos_inbox_core::money::action::KIND) => {
            paymos_inbox_core::money::record::OperatorAction::read(&fields_of(item)).map_or_else(
                || StateRecord::Other {
                    key: key.clone(),
                    kind: Some(paymos_inbox_core::money::action::KIND.to_owned()),
                },
                StateRecord::Action,
            )
        }
        kind => StateRecord::Other {
            key,
            kind: kind.map(str::to_owned),
        },
    };
    Some(record)
}

/// An order's claim (`order_paid#…`): the invoice that fulfilled the order, whose write won
/// (its delivery, or `manual:…`), and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderClaim {
    /// The invoice that fulfilled the order.
    pub invoice_id: String,
    /// The delivery (`evt_…`) or the person or job (`manual:…`) whose write claimed it.
    pub won_by: Option<String>,
    /// When the claiming payment was made (Unix ms).
    pub paid_at_ms: Option<u64>,
}

/// An order the merchant registered (`order#…`): what the amount guard holds a payment to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredOrder {
    /// The amount it must be paid with.
    pub amount: Option<Amount>,
    /// In which currency.
    pub currency: Option<String>,
}

/// An order as the state table keeps it, in one project's key scope: its claim and its
/// registration, each when it has one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OrderOnRecord {
    /// Which invoice fulfilled it; none: no payment fulfilled it yet.
    pub claim: Option<OrderClaim>,
    /// Its amount guard; none: the merchant registered no price for it.
    pub registered: Option<RegisteredOrder>,
}

/// An order's claim item as its record (none without the invoice it names).
pub(crate) fn order_claim(item: &Item) -> Option<OrderClaim> {
    Some(OrderClaim {
        invoice_id: text(item, "invoice_id")?,
        won_by: text(item, "won_by"),
        paid_at_ms: get_u64(item, "paid_at"),
    })
}

/// A registered order's item as its record.
pub(crate) fn registered_order(item: &Item) -> RegisteredOrder {
    RegisteredOrder {
        amount: number(item, "amount"),
        currency: text(item, "currency"),
    }
}

/// An invoice item as the rules read it: the domain's reading of its fields.
pub(crate) fn invoice_seen(item: &Item) -> InvoiceSeen {
    paymos_inbox_core::money::write::invoice_seen(&fields_of(item))
}

/// The fulfilment record's item, as the payment's transaction writes it.
#[cfg(test)]
pub(crate) fn fulfilment_item(f: &FulfilmentRecord) -> Item {
    use paymos_inbox_core::money::change::Source;
    use paymos_inbox_core::money::effect::PaidInvoice;
    let source = Source::Delivery {
        event_id: f.won_by.clone(),
    };
    let paid = PaidInvoice {
        invoice_id: &f.invoice_id,
        status: f.status.unwrap_or(InvoiceStatus::Paid),
        order: &f.order,
        source: &source,
        at_ms: f.fulfilled_at_ms.unwrap_or_default(),
    };
    let writes = paymos_inbox_core::money::write::fulfilment(&paid, Vec::new(), false);
    super::render::item_of(&writes[0])
}

/// A ledger item as the tools read it.
#[must_use]
pub fn delivery_record(item: &Item) -> DeliveryRecord {
    DeliveryRecord {
        event_id: text(item, "event_id")
            .map(|key| event_id_of_key(&key).to_owned())
            .unwrap_or_default(),
        state: get_s(item, "state").map_or(DeliveryState::Received, DeliveryState::parse),
        outcome: text(item, "outcome"),
    }
}

/// One change of the state table's stream as the hand-off reads it: its images as records, and
/// the trace it continues: the `traceparent` its write set. A new image holding the old image's
/// was changed by a write that set none (a person's road): that trace is not this change's.
#[must_use]
pub fn item_change(sequence: String, old: Option<&Item>, new: Option<&Item>) -> ItemChange {
    let traceparent = |image: Option<&Item>| image.and_then(|i| text(i, crate::trace::TRACEPARENT));
    let carried = traceparent(new).filter(|t| traceparent(old).as_ref() != Some(t));
    ItemChange {
        sequence,
        old: old.and_then(state_record),
        new: new.and_then(state_record),
        traceparent: carried,
    }
}

/// A stream image (Lambda's DynamoDB event) as the SDK's item, so it reads through
/// [`state_record`] like any other (`None` when the image is absent).
#[must_use]
pub fn stream_image(image: &serde_dynamo::Item) -> Option<Item> {
    let map = image.inner();
    (!map.is_empty()).then(|| {
        map.iter()
            .map(|(k, v)| (k.clone(), AttributeValue::from(v.clone())))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 54: a change continues the trace its own write set; a change by a write that set
    // none (a person's road) keeps the last delivery's on the item, and is not of that trace.
    #[test]
    fn a_change_carries_the_trace_its_write_set_and_no_older_one() {
        let item = |traceparent: Option<&str>| {
            let mut item: Item = [("pk", s("inv_1")), ("kind", s("invoice"))]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            if let Some(t) = traceparent {
                item.insert("traceparent".into(), s(t));
            }
            item
        };
        let (a, b) = (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-53995c3f42cd8ad8-01",
        );
        let change = |old: Option<Item>, new: Item| {
            item_change("1".into(), old.as_ref(), Some(&new)).traceparent
        };
        assert_eq!(change(None, item(Some(a))).as_deref(), Some(a));
        assert_eq!(
            change(Some(item(Some(a))), item(Some(b))).as_deref(),
            Some(b)
        );
        assert_eq!(change(Some(item(Some(a))), item(Some(a))), None);
        assert_eq!(change(Some(item(None)), item(None)), None);
        assert!(matches!(
            item_change("1".into(), None, Some(&item(Some(a)))).new,
            Some(StateRecord::Invoice(_))
        ));
    }

    #[test]
    fn an_amount_reads_as_paymos_sent_it_and_a_fulfilment_round_trips() {
        let f = FulfilmentRecord {
            invoice_id: "inv_1".into(),
            order: OrderRef {
                external_id: Some("o-1".into()),
                amount: Amount::parse("10.50"),
                currency: Some("USDT".into()),
                project: None,
                home: false,
                unlisted: false,
            },
            status: Some(InvoiceStatus::Paid),
            won_by: "evt_1".into(),
            fulfilled_at_ms: Some(7),
        };
        let mut item = fulfilment_item(&f);
        assert_eq!(item["amount"], n("10.50"));
        assert_eq!(
            state_record(&item),
            Some(StateRecord::Fulfilment(f.clone()))
        );
        // Without the text, the number (DynamoDB gives "10.5" back for 10.50).
        item.remove("amount_text");
        item.insert("amount".into(), n("10.5"));
        let Some(StateRecord::Fulfilment(read)) = state_record(&item) else {
            panic!("a fulfilment")
        };
        assert_eq!(read.order.amount.unwrap().as_str(), "10.5");
    }

    #[test]
    fn each_kind_reads_as_its_record_and_an_unknown_kind_as_other() {
        let item = |pairs: &[(&str, AttributeValue)]| -> Item {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect()
        };
        let deposit = item(&[
            ("pk", s("pcd_1")),
            ("kind", s("deposit")),
            ("status", s("confirmed")),
            ("credited", AttributeValue::Bool(true)),
            ("net", n("99")),
            ("net_text", s("99.00")),
            ("updated_at", n("5")),
        ]);
        let Some(StateRecord::Deposit(d)) = state_record(&deposit) else {
            panic!("a deposit")
        };
        assert!(d.credited);
        assert_eq!(d.status, Some(DepositStatus::Confirmed));
        assert_eq!(d.net.unwrap().as_str(), "99.00");
        assert_eq!(d.updated_at_ms, Some(5));
        let invoice = item(&[
            ("pk", s("inv_1")),
            ("kind", s("invoice")),
            ("status", s("expired")),
            ("paid_late_at", n("3")),
            ("held", AttributeValue::Bool(true)),
        ]);
        let Some(StateRecord::Invoice(i)) = state_record(&invoice) else {
            panic!("an invoice")
        };
        assert!(i.seen.paid_late && i.seen.held);
        assert_eq!(i.seen.status, Some(InvoiceStatus::Expired));
        let claim = item(&[("pk", s("order_paid#o-1")), ("kind", s("order_payment"))]);
        assert_eq!(
            state_record(&claim),
            Some(StateRecord::Other {
                key: "order_paid#o-1".into(),
                kind: Some("order_payment".into())
            })
        );
        assert_eq!(state_record(&Item::new()), None);
    }
    // The console's search by order id reads the order's claim and registration.
    #[test]
    fn an_orders_claim_and_its_registration_read_as_written() {
        let registered =
            super::super::render::item_of(&paymos_inbox_core::money::write::expected_order(
                (None, "o-1"),
                &Amount::parse("25.50").unwrap(),
                "usdt",
            ));
        assert_eq!(
            registered_order(&registered),
            RegisteredOrder {
                amount: Amount::parse("25.50"),
                currency: Some("USDT".into())
            }
        );
        let claim: Item = [
            ("pk", s("order_paid#o-1")),
            ("kind", s("order_payment")),
            ("order_id", s("o-1")),
            ("invoice_id", s("inv_1")),
            ("won_by", s("evt_1")),
            ("paid_at", n("7000")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(
            order_claim(&claim),
            Some(OrderClaim {
                invoice_id: "inv_1".into(),
                won_by: Some("evt_1".into()),
                paid_at_ms: Some(7000),
            })
        );
        assert_eq!(order_claim(&Item::new()), None, "a claim names its invoice");
    }

    // An audit entry, as its write renders it, reads back as the entry (the stream's
    // image and the `audit` read alike).
    #[test]
    fn an_operator_action_as_written_reads_back_as_its_record() {
        use paymos_inbox_core::money::record::{ActionKind, OperatorAction};
        let entry = OperatorAction {
            kind: ActionKind::Redrive,
            actor: "arn:aws:sts::123456789012:assumed-role/ops/alice".into(),
            at_ms: 1_796_169_600_000,
            reason: None,
            subject: "work-queue".into(),
            result: "moved 3".into(),
            count: Some(3),
        };
        let mut item = super::super::render::item_of(&entry.write());
        assert_eq!(item["actor"], s(&entry.actor));
        assert_eq!(item["listed_in"], s("actions"));
        assert_eq!(state_record(&item), Some(StateRecord::Action(entry)));
        item.remove("actor");
        assert!(matches!(
            state_record(&item),
            Some(StateRecord::Other { kind: Some(k), .. }) if k == "operator_action"
        ));
    }
}
