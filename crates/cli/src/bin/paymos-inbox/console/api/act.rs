//! The console's actions (`release`, `mark-paid`, `recheck`, `resolve`, `events-resend`)
//! through the command line's own functions, so a rule lives once and a refusal is the
//! domain's own sentence; the jobs are started from here too.

use std::sync::Arc;

use hyper::StatusCode;
use paymos_inbox_core::roads::release::ReleaseBy;
use serde_json::{Value, json};

use super::{Answered, Console};

impl Console {
    /// A state-changing action (`release`, `mark-paid`, `recheck`, `resolve`, `events-resend`, and the
    /// jobs `redrive`, `events-redrive`, `resend`), its fields in `body`.
    pub async fn act(self: &Arc<Self>, action: &str, body: &[u8]) -> Answered {
        // Refused before any use case runs: none could write its change, or its audit entry.
        if let Some(why) = self.read_only() {
            tracing::warn!(action, "console: refused: {why}");
            return Answered::refused(StatusCode::FORBIDDEN, why);
        }
        let Ok(fields) = serde_json::from_slice::<Value>(body) else {
            return Answered::refused(StatusCode::BAD_REQUEST, "the body is a JSON object");
        };
        let text = |name: &str| {
            fields[name]
                .as_str()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        // An id given is one exactly, as on the command line ([`crate::exit::id`]): never blank
        // (which would mark a payment with no order), never with spaces around it.
        for name in ["id", "order_id", "project"] {
            if let Some(given) = fields[name].as_str()
                && let Err(why) = crate::exit::id(given)
            {
                return Answered::refused(StatusCode::BAD_REQUEST, format!("{name} {why}"));
            }
        }
        let Some(resource) = text("id") else {
            return Answered::refused(StatusCode::BAD_REQUEST, "which one: an id is needed");
        };
        let answered = match action {
            "release" => {
                let project = text("project");
                self.release(
                    &resource,
                    (text("reason"), project.as_deref()),
                    fields["override_amount"] == true,
                )
                .await
            }
            "mark-paid" => {
                let given = crate::ops::OrderGiven {
                    order_id: text("order_id"),
                    project: text("project"),
                    amount: text("amount"),
                    currency: text("currency"),
                };
                match crate::ops::refused_project(&self.stack, &resource, given.project.as_deref())
                    .await
                {
                    // The record is another project's, or the stack needs one named: 409.
                    Ok(Some(why)) => Answered::refused(StatusCode::CONFLICT, why),
                    Ok(None) => self.mark_paid(&resource, given).await,
                    Err(f) => Answered::failed(&f),
                }
            }
            "recheck" => self.recheck(&resource).await,
            "resolve" => self.resolve(&resource, text("reason")).await,
            "events-resend" => self.events_resend(&resource).await,
            "redrive" | "events-redrive" | "resend" => self.start(
                action,
                fields["count"].as_u64(),
                fields["per_second"].as_u64(),
            ),
            _ => Answered::refused(StatusCode::NOT_FOUND, format!("no action {action}")),
        };
        tracing::info!(
            action,
            resource = %resource,
            actor = %self.actor,
            status = answered.status.as_u16(),
            "console: action"
        );
        answered
    }

    /// A delivery a person settled outside the stack, off what waits (`exceptions --resolve`).
    async fn resolve(&self, event_id: &str, reason: Option<String>) -> Answered {
        let Some(reason) = reason else {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                "resolving from the console needs a reason: say how it was settled",
            );
        };
        match crate::exceptions::resolve_in(
            (&self.stack, &self.state, &self.ledger),
            event_id,
            None,
            (&self.actor, &reason),
        )
        .await
        {
            Ok(was) => {
                Answered::ok(json!({"id": event_id, "outcome": "resolved", "was": was.as_str()}))
            }
            Err(f) if f.kind == crate::exit::Kind::Usage => {
                Answered::refused(StatusCode::CONFLICT, f.message)
            }
            Err(f) => Answered::failed(&f),
        }
    }

    async fn mark_paid(&self, invoice_id: &str, given: crate::ops::OrderGiven) -> Answered {
        let asked = (self.actor.as_str(), self.api.as_ref());
        match crate::ops::mark_paid_in(&self.stack, invoice_id, given, asked).await {
            Ok(applied) => Answered::ok(json!({"id": invoice_id, "outcome": applied.as_str(),
                "waits": applied.waits_for_person()})),
            Err(f) => Answered::failed(&f),
        }
    }

    async fn release(
        &self,
        invoice_id: &str,
        (reason, project): (Option<String>, Option<&str>),
        override_amount: bool,
    ) -> Answered {
        if let Err(e) = crate::exceptions::an_invoice_id(invoice_id) {
            return Answered::refused(StatusCode::BAD_REQUEST, e);
        }
        let Some(reason) = reason else {
            return Answered::refused(
                StatusCode::BAD_REQUEST,
                "a release from the console needs a reason: say why this payment ships",
            );
        };
        let by = ReleaseBy {
            actor: &self.actor,
            reason: Some(&reason),
            override_amount,
            project,
            order: None,
        };
        match crate::exceptions::release_in(
            (&self.stack, &self.ledger),
            self.api.clone(),
            invoice_id,
            &by,
        )
        .await
        {
            Ok(applied) => Answered::ok(json!({"id": invoice_id, "outcome": applied.as_str()})),
            Err(crate::exceptions::Unreleased::Refused(why)) => {
                Answered::refused(StatusCode::CONFLICT, why)
            }
            Err(crate::exceptions::Unreleased::Failed(f)) => Answered::failed(&f),
        }
    }

    /// One resource's facts published again, through the command line's
    /// [`crate::handoff::resend_in`]: what `events resend --resource` publishes and records.
    async fn events_resend(&self, resource_id: &str) -> Answered {
        if let Err(f) = crate::handoff::a_resource(resource_id) {
            return Answered::failed(&f);
        }
        let target = match &self.publish_to {
            Ok(target) => target,
            Err(f) => return Answered::failed(f),
        };
        let environment = match crate::handoff::environment_of(&self.stack, None) {
            Ok(e) => e,
            Err(f) => return Answered::failed(&f),
        };
        let which = crate::handoff::Facts::Resource(resource_id.to_owned());
        match crate::handoff::resend_in(&self.stack, target, &which, environment, Some(&self.actor))
            .await
        {
            Ok(events) => Answered::ok(json!({
                "id": resource_id,
                "count": events.len(),
                "published": events.iter().map(|e| json!({
                    "detail_type": e.detail_type,
                    "idempotency_key": e.idempotency_key,
                })).collect::<Vec<_>>(),
            })),
            Err(f) => Answered::failed(&f),
        }
    }

    async fn recheck(&self, resource_id: &str) -> Answered {
        let Some(client) = self.api.clone() else {
            return Answered::refused(
                StatusCode::CONFLICT,
                "recheck asks Paymos' API: start the console with PAYMOS_API_KEY and PAYMOS_API_SECRET (or --api-key, --api-secret)",
            );
        };
        match crate::exceptions::recheck_in(
            (&self.stack, self.state.clone(), &self.ledger),
            client,
            (None, Some(&self.actor)),
            Some(resource_id),
        )
        .await
        {
            Ok(results) => Answered::ok(json!({"id": resource_id, "rechecked": results})),
            Err(f) => Answered::failed(&f),
        }
    }
}
