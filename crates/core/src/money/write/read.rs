//! A record as the domain reads it back.

use super::*;

pub(super) fn text(fields: &Fields, f: &Field) -> Option<String> {
    fields.get(f).and_then(Value::as_text).map(str::to_owned)
}

/// An amount as Paymos sent it (`text`, trailing zeros kept), else the stored number.
#[must_use]
pub fn money(fields: &Fields, number: &Field, text_field: &Field) -> Option<Amount> {
    text(fields, text_field)
        .and_then(|a| Amount::parse(&a))
        .or_else(|| match fields.get(number) {
            Some(Value::Amount(a)) => Some(a.clone()),
            _ => None,
        })
}

/// The order an item names (an invoice's record, a fulfilment).
#[must_use]
pub fn order_of(fields: &Fields) -> OrderRef {
    OrderRef {
        external_id: text(fields, &Field::OrderId),
        amount: money(fields, &Field::Amount, &Field::AmountText),
        currency: text(fields, &Field::Currency),
        project: text(fields, &Field::ProjectId),
        home: fields.get(&Field::HomeProject) == Some(&Value::Bool(true)),
        unlisted: false,
    }
}

/// An invoice item as the rules read it.
#[must_use]
pub fn invoice_seen(fields: &Fields) -> InvoiceSeen {
    InvoiceSeen {
        status: text(fields, &Field::Status)
            .as_deref()
            .and_then(InvoiceStatus::parse),
        held: fields.get(&Field::Held) == Some(&Value::Bool(true)),
        held_why: text(fields, &Field::Why),
        projects_disagree: fields.get(&Field::ProjectsDisagree) == Some(&Value::Bool(true)),
        order_disputed: text(fields, &Field::OrderDisputed),
        shipped_otherwise: text(fields, &Field::ShippedOtherwise),
        otherwise_settled: fields.contains_key(&Field::ShippedOtherwiseSettledBy),
        paymos_order_shipped_with: text(fields, &Field::PaymosOrderShippedWith),
        paymos_project_elsewhere: fields.get(&Field::PaymosProjectElsewhere)
            == Some(&Value::Bool(true)),
        paymos_order_unnamed: fields.get(&Field::PaymosOrderUnnamed) == Some(&Value::Bool(true)),
        paid_late: fields.contains_key(&Field::PaidLateAt),
        duplicate_of: text(fields, &Field::DuplicateOf),
        released: fields.contains_key(&Field::ReleasedAt),
        refunds: match fields.get(&Field::Refunds) {
            Some(Value::Refunds(list)) => list.clone(),
            _ => Vec::new(),
        },
        payment_at: fields.get(&Field::PaymentAt).and_then(Value::as_int),
        awaits_order: fields.get(&Field::AwaitsOrder) == Some(&Value::Bool(true)),
        after_refund: fields.get(&Field::AfterRefund) == Some(&Value::Bool(true)),
        order: order_of(fields),
    }
}

/// The story an item's fields keep, oldest first ([`step`]).
#[must_use]
pub fn story(fields: &Fields) -> Vec<crate::money::record::StoryStep> {
    crate::money::record::StoryStep::story(fields.iter().filter_map(|(f, v)| match f {
        Field::Named(name) => Some((name.as_str(), v.as_text()?)),
        _ => None,
    }))
}

/// Whether `source`'s own change is among what the item holds (a delivery applied, then
/// crashed before its mark).
#[must_use]
pub fn holds_change_of(fields: &Fields, source: &Source) -> bool {
    let id = source.id();
    let is = |f: Field| fields.get(&f).and_then(Value::as_text) == Some(id.as_str());
    is(Field::LastEventId)
        || is(Field::CreditedBy)
        || matches!(fields.get(&Field::Applied), Some(Value::Texts(set)) if set.contains(&id))
}
