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
        let key = crate::money::write::Key::state(invoice_id);
        // What a person's naming settles, a refused release puts back: it writes nothing.
        let before = match (by.project, by.order) {
            (None, None) => None,
            _ => self.store().read(&key).await?,
        };
        // Nothing recorded: nothing to name (the release refuses it as unknown).
        let released = async {
            if let (Some(project), Some(fields)) = (by.project, &before) {
                self.name_project(invoice_id, fields, project, now_ms)
                    .await?;
            }
            if let Some(order) = by.order {
                // Read again only where naming the project may have moved the record.
                let fields = match by.project {
                    Some(_) => self.store().read(&key).await?,
                    None => before.clone(),
                };
                if let Some(fields) = &fields {
                    self.name_order(invoice_id, fields, order, now_ms).await?;
                }
            }
            self.shipped_before_projects(invoice_id).await?;
            release(self.store(), ledger, invoice_id, by, self.effect(), now_ms).await
        }
        .await;
        if let (Err(ReleaseError::NotReleasable(_)), Some(before)) = (&released, &before) {
            let undo = crate::money::write::as_before(invoice_id, before, now_ms);
            // Refused, the record moved since (a webhook, another release): it stands.
            let _ = self.store().write(&[undo]).await?;
        }
        released
    }

    /// On a stack that lists no projects, an order shipped before orders were keyed by project
    /// (its claim under `order_paid#<id>`, which nothing writes since: read once, it cannot
    /// move) ships no second time by a release, as the webhook's road refuses it
    /// ([`crate::money::write::claimed_before_projects`]).
    async fn shipped_before_projects(&self, invoice_id: &str) -> Result<(), ReleaseError> {
        use crate::money::write::{Field, Key, order_of, order_paid_key};
        let Some(fields) = self.store().read(&Key::state(invoice_id)).await? else {
            return Ok(());
        };
        let order = self.projects().scoped(order_of(&fields));
        let Some(id) = order
            .external_id
            .filter(|_| order.unlisted && order.project.is_some())
        else {
            return Ok(());
        };
        let Some(claim) = self
            .store()
            .read(&Key::state(order_paid_key(None, &id)))
            .await?
        else {
            return Ok(());
        };
        match claim.get(&Field::InvoiceId).and_then(|v| v.as_text()) {
            Some(shipped) if shipped != invoice_id => Err(ReleaseError::NotReleasable(format!(
                "order {id} shipped before this stack kept each project's orders apart, paid by {shipped}: {invoice_id} is a second payment for it, or another project's order {id} that only Paymos' record can tell apart: check it at Paymos, then refund it or ship it outside the stack"
            ))),
            _ => Ok(()),
        }
    }

    /// The order a person's release names: refused where it is not the record's, unless the
    /// invoice's events named two orders and it is one of them, which settles them, or the
    /// record knows none (a payment whose order no delivery of its project named): the record
    /// takes it, its price kept, while nothing shipped.
    async fn name_order(
        &self,
        invoice_id: &str,
        fields: &crate::money::write::Fields,
        order: &str,
        now_ms: u64,
    ) -> Result<(), ReleaseError> {
        let seen = crate::money::write::invoice_seen(fields);
        let recorded = seen.order.external_id.as_deref();
        let disputed = seen.order_disputed.as_deref();
        if recorded == Some(order) && disputed.is_none() {
            return Ok(());
        }
        if recorded.is_some() && recorded != Some(order) && disputed != Some(order) {
            return Err(ReleaseError::NotReleasable(format!(
                "{invoice_id} is recorded for order {}{}, not {order}: nothing released",
                recorded.unwrap_or("(none)"),
                disputed.map_or(String::new(), |d| format!(" (its payment named {d})")),
            )));
        }
        let named = OrderRef {
            external_id: Some(order.to_owned()),
            amount: seen.order.amount.clone(),
            currency: seen.order.currency.clone(),
            ..OrderRef::none()
        };
        let mut settle =
            crate::money::write::paymos_order(invoice_id, &named, (&seen.order, false), now_ms);
        settle.set.push(crate::money::write::Set::Remove(
            crate::money::write::Field::OrderDisputed,
        ));
        // Refused, the record moved since it was read: the release reads it again and decides.
        let _ = self.store().write(&[settle]).await?;
        Ok(())
    }

    /// The project a person's release names: refused where the stack does not apply it or the
    /// record names another; where the invoice's events named two projects, it settles them
    /// (the record takes it, as it takes Paymos', while nothing shipped).
    async fn name_project(
        &self,
        invoice_id: &str,
        fields: &crate::money::write::Fields,
        project: &str,
        now_ms: u64,
    ) -> Result<(), ReleaseError> {
        let seen = crate::money::write::invoice_seen(fields);
        if !seen.projects_disagree {
            return match self.projects().refuses_person(Some(project), &seen.order) {
                Some(why) => Err(ReleaseError::NotReleasable(why)),
                None => Ok(()),
            };
        }
        if !self.projects().applies(Some(project)) {
            return Err(ReleaseError::NotReleasable(format!(
                "{project} is not a project this stack applies ({}): pass one of them",
                self.projects().listed()
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

    /// [`Fulfil::release`] as Paymos has the invoice: refused where Paymos does not have it
    /// paid as recorded ([`Self::paid_as_recorded`]), under Paymos' project where the person
    /// named none, once Paymos' completed full refunds of it are recorded (each dated by
    /// Paymos, as the reconciliation records them): a refund whose webhook was lost returns the
    /// payment before a person ships it, by the refund-in-time rule.
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
        let project = self.paid_as_recorded(paymos, invoice_id, by).await?;
        let by = &ReleaseBy {
            project: by.project.or(project.as_deref()),
            ..*by
        };
        let refunds = paymos.refunds_of(invoice_id).await?;
        for refund in &refunds {
            if let (Some(crate::money::invoice::RefundMode::Full), Some(at)) =
                (refund.mode, refund.completed_at)
            {
                self.apply_refund_confirmed(invoice_id, (refund, at), by.actor, now_ms)
                    .await?;
            }
        }
        self.shipped_as_paymos_has_it(paymos, invoice_id).await?;
        // Settled here by a refund Paymos does not list (a delivery Paymos never made): not
        // released, which ships a payment that waits; applying Paymos' own payment is
        // `mark-paid`'s with the API (and `reconcile --apply`'s).
        if let (Some(seen), false) = self.store().invoice_seen(invoice_id).await?
            && seen.standing() == crate::money::invoice::Standing::Refunded
            && let Some(unlisted) = seen.refunds.iter().find(|r| {
                r.mode != Some(crate::money::invoice::RefundMode::Overpayment)
                    && !refunds.iter().any(|p| p.withdrawal_id == r.withdrawal_id)
            })
        {
            return Err(ReleaseError::NotReleasable(format!(
                "{invoice_id} was settled here by {}, a refund Paymos does not list: nothing released. `paymos-inbox mark-paid {invoice_id} --actor <you>` with the API applies the payment as Paymos has it",
                unlisted.withdrawal_id
            )));
        }
        // Recorded under a project only a delivery named, not Paymos' (nothing confirmed it):
        // not released here; `mark-paid` with the API puts Paymos' record on it first.
        if let (Some(p), Some(fields)) = (
            project.as_deref(),
            self.store()
                .read(&crate::money::write::Key::state(invoice_id))
                .await?,
        ) {
            let seen = crate::money::write::invoice_seen(&fields);
            if !seen.projects_disagree
                && self
                    .projects()
                    .refuses_person(Some(p), &seen.order)
                    .is_some()
            {
                return Err(ReleaseError::NotReleasable(format!(
                    "{invoice_id} is recorded under {}, as a delivery named it; Paymos has it in {p}: nothing released. `paymos-inbox mark-paid {invoice_id} --actor <you>` with the API (or `reconcile --apply`) puts Paymos' record on it; then release it",
                    seen.order.project.as_deref().unwrap_or("the home project")
                )));
            }
        }
        self.release(ledger, invoice_id, by, now_ms).await
    }

    /// Refused where `invoice_id` shipped here under another order, or another project's, than
    /// Paymos' invoice names: nothing is left to release, and shipping Paymos' order is a
    /// person's (an order conflict, which `mark-paid` with the API, or `reconcile --apply`,
    /// lists for them).
    ///
    /// # Errors
    /// [`ReleaseError::NotReleasable`] naming both orders; [`ReleaseError::Port`] when Paymos or
    /// the store cannot be read.
    async fn shipped_as_paymos_has_it<P: crate::roads::reconcile::PaymosLedger>(
        &self,
        paymos: &P,
        invoice_id: &str,
    ) -> Result<(), ReleaseError> {
        let (Some(seen), true) = self.store().invoice_seen(invoice_id).await? else {
            return Ok(());
        };
        let crate::roads::confirm::AtSource::Found(at) = paymos.invoice(invoice_id).await? else {
            return Ok(());
        };
        let words = |order: Option<&str>, project: Option<&str>| {
            let order = order.unwrap_or("(none)");
            project.map_or(format!("order {order}"), |p| {
                format!("order {order} of {p}")
            })
        };
        let recorded = self.projects().scoped(seen.order.clone());
        let theirs = self.projects().scoped(OrderRef {
            external_id: at.order_id.clone().filter(|o| !o.is_empty()),
            project: at.project_id.clone().filter(|p| !p.is_empty()),
            ..OrderRef::none()
        });
        let other_order =
            theirs.external_id.is_some() && theirs.external_id != recorded.external_id;
        let other_project = theirs.project.is_some() && theirs.project != recorded.project;
        if other_order || other_project {
            return Err(ReleaseError::NotReleasable(format!(
                "{invoice_id} shipped here as {}, but Paymos' invoice is of {}: nothing to release. It is an order conflict: `paymos-inbox mark-paid {invoice_id} --actor <you>` with the API lists it (order_conflict); ship Paymos' order by hand, recover the other, then `paymos-inbox exceptions --resolve {invoice_id}`",
                words(
                    seen.order.external_id.as_deref(),
                    seen.order.project.as_deref()
                ),
                words(at.order_id.as_deref(), at.project_id.as_deref())
            )));
        }
        Ok(())
    }

    /// Paymos' project of `invoice_id` where the stack lists several, once Paymos has the
    /// invoice paid (or paid late) in this environment, in a project the stack applies and the
    /// person named (if they did), for the order the person named (`--order-id`), else the one
    /// its record names.
    ///
    /// # Errors
    /// [`ReleaseError::NotReleasable`] saying what Paymos has; [`ReleaseError::Port`] when
    /// Paymos or the store cannot be read, or Paymos answers for the other environment.
    async fn paid_as_recorded<P: crate::roads::reconcile::PaymosLedger>(
        &self,
        paymos: &P,
        invoice_id: &str,
        by: &ReleaseBy<'_>,
    ) -> Result<Option<String>, ReleaseError> {
        use crate::roads::confirm::AtSource;
        let refused = |why: String| {
            Err(ReleaseError::NotReleasable(format!(
                "{why}: nothing released"
            )))
        };
        let at = match paymos.invoice(invoice_id).await? {
            AtSource::Found(at) => at,
            AtSource::NotFound => {
                return refused(format!(
                    "Paymos does not know {invoice_id} with this API key (forged, or of a project the key does not read)"
                ));
            }
        };
        crate::roads::confirm::same_environment(at.is_test, self.environment())?;
        let project = at.project_id.as_deref().filter(|p| !p.is_empty());
        if let Some(p) = project.filter(|p| !self.projects().applies(Some(p))) {
            return refused(format!(
                "Paymos has {invoice_id} in project {p}, which this stack does not apply"
            ));
        }
        if let (Some(g), Some(p)) = (by.project, project)
            && g != p
        {
            return refused(format!("you named project {g}, Paymos has {p}"));
        }
        let paid = crate::money::status::InvoiceStatus::parse(&at.status)
            .is_some_and(crate::money::status::InvoiceStatus::fulfils);
        if !paid && !at.paid_late {
            return refused(format!("Paymos has {invoice_id} {}, not paid", at.status));
        }
        let recorded = self
            .store()
            .read(&crate::money::write::Key::state(invoice_id))
            .await?
            .map(|fields| crate::money::write::invoice_seen(&fields).order);
        // The order the person names (`--order-id`: one of two the events named, which the
        // release checks), else the record's.
        if let (Some(r), Some(p)) = (
            by.order
                .or_else(|| recorded.as_ref().and_then(|o| o.external_id.as_deref())),
            at.order_id.as_deref().filter(|o| !o.is_empty()),
        ) && r != p
        {
            // Shipped under that other order: an order conflict, said so.
            self.shipped_as_paymos_has_it(paymos, invoice_id).await?;
            return refused(format!(
                "the payment waits under order {r}, Paymos has order {p}"
            ));
        }
        Ok(project
            .filter(|_| self.projects().several())
            .map(str::to_owned))
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
