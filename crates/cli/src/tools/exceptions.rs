//! The operator's commands around the exceptions (the use cases are the domain's,
//! [`paymos_inbox_core::roads::exceptions`]): registering what an order must be paid with.

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::status::Amount;

/// What an order must be paid with, as a person typed it, checked before any I/O.
///
/// # Errors
/// A message naming what is wrong: bad input.
pub fn order_terms(amount: &str, currency: &str) -> Result<Amount, String> {
    let amount = Amount::parse(amount)
        .filter(Amount::is_positive)
        .ok_or_else(|| format!("--amount {amount:?} is not an exact decimal above 0 like 10.50"))?;
    if currency.is_empty() || !currency.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(format!(
            "--currency {currency:?} is not a currency code like USD"
        ));
    }
    Ok(amount)
}

/// Registers what an order must be paid with (the amount guard), from the command line.
///
/// # Errors
/// A message naming what is wrong ([`order_terms`]), or the DynamoDB failure.
pub async fn register_order(
    state: &DynamoResources,
    (scope, order_id): (Option<&str>, &str),
    amount: &str,
    currency: &str,
) -> Result<(), String> {
    let amount = order_terms(amount, currency)?;
    state
        .register_order((scope, order_id), &amount, currency)
        .await
        .map_err(|e| e.to_string())
}
