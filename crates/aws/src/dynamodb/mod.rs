//! DynamoDB: the deliveries ledger (one item per `event_id`) and the resource state table
//! (one item per `inv_…` / `wdr_…` / `pcd_…`, plus fulfilments and balances). These files are
//! the only ones that spell `AttributeValue`.

pub(crate) mod item;

pub use item::WriteUnits;
mod ledger;
mod probe;
mod records;
mod render;
mod resources;

pub use probe::{PROBE_KEY, WriteGrant, may_update};
pub use records::{
    OrderClaim, OrderOnRecord, RegisteredOrder, delivery_record, item_change, state_record,
    stream_image,
};

pub use ledger::{
    DynamoLedger, KeptBody, LedgerEntry, LedgerSchema, PendingDelivery, decode_body, encode_body,
    item_size,
};
pub use resources::{DynamoResources, ResourceSchema, balance_key, order_key, order_paid_key};
