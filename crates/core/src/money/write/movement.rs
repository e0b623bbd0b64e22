//! Money that moves without an order: withdrawals (refunds and payouts) and deposits.

use super::*;

/// A withdrawal's status by `source` at `now_ms` (forward only: [`withdrawal_transition`]),
/// with what the event says of it.
#[must_use]
pub fn withdrawal(w: &WithdrawalChange<'_>, source: &Source, now_ms: u64) -> Write {
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("withdrawal")),
        Set::Put(Field::Status, Value::text(w.status.as_str())),
        Set::Put(Field::StatusRank, Value::Int(u64::from(w.status.rank()))),
        Set::Put(Field::Type, Value::text(w.kind)),
        Set::Put(Field::LastEventId, Value::Text(source.id())),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        step(w.at, w.status.as_str(), source),
        Set::Put(
            Field::ListedIn,
            Value::Text(day_list(w.withdrawal_id, now_ms)),
        ),
    ];
    if let Some(v) = w.invoice_id {
        set.push(Set::Put(Field::InvoiceId, Value::text(v)));
    }
    if let Some(v) = w.amount {
        set.push(Set::Put(Field::Amount, Value::Amount(v.clone())));
        set.push(Set::Put(Field::AmountText, Value::text(v.as_str())));
    }
    if let Some(v) = w.currency {
        set.push(Set::Put(Field::Currency, Value::text(v)));
    }
    Write {
        what: What::Withdrawal,
        key: Key::state(w.withdrawal_id),
        guard: withdrawal_transition(w.status),
        set,
    }
}

/// What a withdrawal's write needs of its change.
#[derive(Debug, Clone, Copy)]
pub struct WithdrawalChange<'a> {
    /// `wdr_…`.
    pub withdrawal_id: &'a str,
    /// The status it moves to.
    pub status: WithdrawalStatus,
    /// When Paymos says it moved (Unix seconds).
    pub at: u64,
    /// `refund` or `payout`.
    pub kind: &'a str,
    /// A refund's invoice.
    pub invoice_id: Option<&'a String>,
    /// Its amount, when given.
    pub amount: Option<&'a Amount>,
    /// Its currency, when given.
    pub currency: Option<&'a String>,
}

/// A deposit's status by `source` at `now_ms` ([`deposit_transition`]) and, for a final
/// confirmation, its credit with the payer's balance, in one transaction.
#[must_use]
pub fn deposit(
    deposit_id: &str,
    (status, at): (DepositStatus, u64),
    credit: Option<&Credit>,
    source: &Source,
    now_ms: u64,
) -> Vec<Write> {
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("deposit")),
        Set::Put(Field::Status, Value::text(status.as_str())),
        Set::Put(Field::StatusAt, Value::Int(at)),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        Set::Put(Field::ListedIn, Value::Text(day_list(deposit_id, now_ms))),
        step(at, status.as_str(), source),
    ];
    let Some(credit) = credit else {
        return vec![Write {
            what: What::Deposit,
            key: Key::state(deposit_id),
            guard: deposit_transition(false, at),
            set,
        }];
    };
    set.extend([
        Set::Put(Field::Credited, Value::Bool(true)),
        Set::Put(Field::Payer, Value::text(&credit.payer)),
        Set::Put(Field::Net, Value::Amount(credit.net.clone())),
        Set::Put(Field::NetText, Value::text(credit.net.as_str())),
        Set::Put(Field::Currency, Value::text(&credit.currency)),
        Set::Put(Field::CreditedBy, Value::Text(source.id())),
    ]);
    let project = credit
        .project
        .as_ref()
        .map(|p| Set::Put(Field::ProjectId, Value::text(p)));
    set.extend(project.clone());
    vec![
        Write {
            what: What::Deposit,
            key: Key::state(deposit_id),
            guard: deposit_transition(true, at),
            set,
        },
        Write {
            what: What::Balance,
            key: Key::state(balance_key(
                credit.project.as_deref(),
                &credit.payer,
                &credit.currency,
            )),
            guard: Guard::Always,
            set: vec![
                Set::Put(Field::Kind, Value::text("balance")),
                Set::Put(Field::Payer, Value::text(&credit.payer)),
                Set::Put(Field::Currency, Value::text(&credit.currency)),
                Set::Add(Field::Balance, Value::Amount(credit.net.clone())),
            ]
            .into_iter()
            .chain(project)
            .collect(),
        },
    ]
}

/// What a final confirmation's `credit` says otherwise than the credit the deposit `found`
/// holds (its net, currency, payer or project), with both values, if anything: `data` is a
/// snapshot of the deposit, so one that contradicts the credit made is no copy of it, and only a
/// person (or Paymos) says which is right. A field the record lacks contradicts nothing; a
/// credit of the home project's scope (naming it, or none) contradicts no project either.
#[must_use]
pub fn credit_differs(found: &Fields, credit: &Credit) -> Option<String> {
    let text = |field: Field| found.get(&field).and_then(Value::as_text);
    let mut differs = Vec::new();
    if let Some(Value::Amount(net)) = found.get(&Field::Net)
        && let Some(currency) = text(Field::Currency)
        && !(net.same_value(&credit.net) && currency.eq_ignore_ascii_case(&credit.currency))
    {
        differs.push(format!(
            "net {} {}, credited {} {}",
            credit.net.as_str(),
            credit.currency,
            net.as_str(),
            currency
        ));
    }
    if let Some(payer) = text(Field::Payer)
        && payer != credit.payer
    {
        differs.push(format!("payer {}, credited to payer {payer}", credit.payer));
    }
    if let Some(project) = &credit.project
        && text(Field::ProjectId) != Some(project.as_str())
    {
        differs.push(format!(
            "project {project}, credited in {}",
            text(Field::ProjectId).unwrap_or("the home project")
        ));
    }
    // (Only a credited deposit refuses a credit, and only a credit sets these fields.)
    (!differs.is_empty()).then(|| {
        format!(
            "this final confirmation says {}, by {}: nothing more credited; check the deposit at Paymos",
            differs.join("; "),
            text(Field::CreditedBy).unwrap_or("an earlier delivery")
        )
    })
}

/// Whether a withdrawal takes `incoming`: forward only, nothing leaves a final status.
#[must_use]
pub fn withdrawal_transition(incoming: WithdrawalStatus) -> Guard {
    let from = incoming.allowed_from();
    if from.is_empty() {
        return Guard::Absent;
    }
    Guard::Any(vec![
        Guard::Absent,
        Guard::In(
            Field::Status,
            from.iter().map(|s| Value::text(s.as_str())).collect(),
        ),
    ])
}

/// Whether a deposit takes a change (at `at`): a credit only once, an advisory status only
/// before the credit and not older than the last one recorded.
#[must_use]
pub fn deposit_transition(credits: bool, at: u64) -> Guard {
    let not_credited = Guard::Lacks(Field::Credited);
    Guard::Any(vec![
        Guard::Absent,
        if credits {
            not_credited
        } else {
            Guard::All(vec![
                not_credited,
                Guard::AtMost(Field::StatusAt, Value::Int(at)),
            ])
        },
    ])
}
