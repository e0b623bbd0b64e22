//! The manual roads of a stack, with the same store, effect and environment as its webhooks.

use crate::money::change::{Applied, OrderRef};
use crate::roads::confirm::PaymentConfirmation;
use crate::roads::fulfil::Fulfil;
use crate::roads::ingest::PortError;
use crate::roads::release::{ReleaseBy, ReleaseError};

use super::rechecking::{Rechecked, recheck};
use super::settle::release;
use super::{Applying, ExceptionStore, ReviewLedger};

/// The manual roads of a stack: the same store, effect and environment as its webhooks.
impl<S: ExceptionStore, C: PaymentConfirmation> Fulfil<S, C> {
    /// [`release`] with this stack's store and effect.
    ///
    /// # Errors
    /// As [`release`].
    pub async fn release<L: ReviewLedger>(
        &self,
        ledger: &L,
        invoice_id: &str,
        by: &ReleaseBy<'_>,
        now_ms: u64,
    ) -> Result<Applied, ReleaseError> {
        if let Some(project) = by.project {
            self.name_project(invoice_id, project, now_ms).await?;
        }
        release(self.store(), ledger, invoice_id, by, self.effect(), now_ms).await
    }

    /// The project a person's release names: refused where the stack does not apply it or the
    /// record names another; where the invoice's events named two projects, it settles them
    /// (the record takes it, as it takes Paymos', while nothing shipped).
    async fn name_project(
        &self,
        invoice_id: &str,
        project: &str,
        now_ms: u64,
    ) -> Result<(), ReleaseError> {
        let Some(fields) = self
            .store()
            .read(&crate::money::write::Key::state(invoice_id))
            .await?
        else {
            return Ok(()); // nothing recorded: the release refuses it as unknown
        };
        let seen = crate::money::write::invoice_seen(&fields);
        if !seen.projects_disagree {
            return match self.projects().refuses_person(Some(project), &seen.order) {
                Some(why) => Err(ReleaseError::NotReleasable(why)),
                None => Ok(()),
            };
        }
        if !self.projects().applies(Some(project)) {
            return Err(ReleaseError::NotReleasable(format!(
                "{project} is not a project this stack applies ({}): pass one of them",
                self.projects().ids().join(", ")
            )));
        }
        let named = self.projects().scoped(OrderRef {
            project: Some(project.to_owned()),
            ..OrderRef::none()
        });
        let order = OrderRef {
            project: named.project,
            home: named.home,
            ..seen.order.clone()
        };
        let settle =
            crate::money::write::paymos_order(invoice_id, &order, (&seen.order, false), now_ms);
        // Refused, the record moved since it was read: the release reads it again and decides.
        let _ = self.store().write(&[settle]).await?;
        Ok(())
    }

    /// [`Fulfil::release`], once Paymos' completed full refunds of the invoice are recorded
    /// (each dated by Paymos, as the reconciliation records them): a refund whose webhook was
    /// lost returns the payment before a person ships it, by the refund-in-time rule.
    ///
    /// # Errors
    /// As [`release`]; [`ReleaseError::Port`] when Paymos cannot be read (nothing released).
    pub async fn release_asking<L: ReviewLedger, P: crate::roads::reconcile::PaymosLedger>(
        &self,
        ledger: &L,
        paymos: &P,
        invoice_id: &str,
        by: &ReleaseBy<'_>,
        now_ms: u64,
    ) -> Result<Applied, ReleaseError> {
        for refund in paymos.refunds_of(invoice_id).await? {
            if let (Some(crate::money::invoice::RefundMode::Full), Some(at)) =
                (refund.mode, refund.completed_at)
            {
                self.apply_refund_confirmed(invoice_id, (&refund, at), by.actor, now_ms)
                    .await?;
            }
        }
        self.release(ledger, invoice_id, by, now_ms).await
    }

    /// [`recheck`] with this stack's store, effect and environment, asking `api`.
    ///
    /// # Errors
    /// As [`recheck`].
    pub async fn recheck<L: ReviewLedger, A: PaymentConfirmation>(
        &self,
        ledger: &L,
        api: &A,
        resource_id: Option<&str>,
        now_ms: u64,
    ) -> Result<Vec<Rechecked>, PortError> {
        recheck(
            self.store(),
            ledger,
            api,
            self.effect(),
            Applying {
                environment: self.environment(),
                projects: self.projects().clone(),
            },
            resource_id,
            now_ms,
        )
        .await
    }
}
