//! The adapters of one stack created on local AWS, wired once: `dev`, `bench-e2e` and `soak`
//! run the same ingest and fulfil on the same tables and queue (the soak wraps the adapters in
//! its fault injector first).

use crate::template::Created;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::Verifier;

/// The ports of a created stack: the deliveries ledger, the work queue and the resource table.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// `DeliveriesTable`.
    pub ledger: DynamoLedger,
    /// `WorkQueue`.
    pub queue: SqsQueue,
    /// `StateTable`, marking deliveries processed in `DeliveriesTable`.
    pub resources: DynamoResources,
}

impl Pipeline {
    /// The adapters on `created`'s tables and queue.
    #[must_use]
    pub fn on(
        created: &Created,
        dynamodb: &aws_sdk_dynamodb::Client,
        sqs: &aws_sdk_sqs::Client,
    ) -> Self {
        let deliveries = created.table("DeliveriesTable");
        Self {
            ledger: DynamoLedger::new(dynamodb.clone(), deliveries, None),
            queue: SqsQueue::new(sqs.clone(), created.queue("WorkQueue")),
            resources: DynamoResources::new(
                dynamodb.clone(),
                created.table("StateTable"),
                deliveries,
            ),
        }
    }

    /// Ingest on this stack.
    #[must_use]
    pub fn ingest(
        &self,
        verifier: Verifier,
        settings: IngestSettings,
    ) -> Ingest<DynamoLedger, SqsQueue> {
        Ingest::new(verifier, self.ledger.clone(), self.queue.clone(), settings)
    }

    /// Fulfil on this stack (live, with the default effect and no reverse check).
    #[must_use]
    pub fn fulfil(&self) -> Fulfil<DynamoResources> {
        Fulfil::new(self.resources.clone())
    }
}
