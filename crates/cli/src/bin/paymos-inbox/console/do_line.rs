//! The console's "Do:" lines. The way out of each thing that waits is said once, by the list
//! `exceptions` prints (the domain's sentence, each command in backticks); the terminal prints
//! it as it is, and the console says each command its page has a button for as that button, so
//! the operator is never sent to a terminal beside the button that does it. A command the page
//! has no action for (`exceptions --body`, `reconcile --apply`, an action on another resource
//! than the item's) stays the command line.
//!
//! Which button the page shows where is `actions()` and the jobs of `console.js`: change both
//! together.

use paymos_inbox_core::roads::exceptions::Exception;

/// Where a command starts in the way out.
const COMMAND: &str = "`paymos-inbox ";

/// `e.action` as the console's page says it: each command it has a button for, as that button.
pub(crate) fn on_the_page(e: &Exception) -> String {
    let mut out = String::with_capacity(e.action.len());
    let mut rest = e.action.as_str();
    while let Some(start) = rest.find(COMMAND) {
        let after = &rest[start + COMMAND.len()..];
        let Some(end) = after.find('`') else { break };
        let words: Vec<&str> = after[..end].split_whitespace().collect();
        let before = &rest[..start];
        match button(e, &words) {
            // "ship with `paymos-inbox release …`" reads "ship: press Release".
            Some(press) => {
                match before.strip_suffix(" with ") {
                    Some(verb) => {
                        out.push_str(verb);
                        out.push_str(": ");
                    }
                    None => out.push_str(before),
                }
                out.push_str(press);
            }
            None => out.push_str(&rest[..start + COMMAND.len() + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The button of the page that does `paymos-inbox <words>` for `e`, if the page shows one
/// there: the invoice's story (the item's link opens it) or the jobs above the list.
fn button(e: &Exception, words: &[&str]) -> Option<&'static str> {
    // The story's actions are an invoice's, on the invoice the item names.
    let invoice = e.resource_id.as_deref().filter(|r| r.starts_with("inv_"));
    let of_item = |id: &str| invoice == Some(id);
    let has = |flag: &str| words.contains(&flag);
    match words {
        ["release", id, ..]
            if of_item(id) && matches!(e.kind, "held" | "paid_late" | "after_refund") =>
        {
            Some(if has("--override-amount") {
                "press Override the amount… (beside Release; a reason is required)"
            } else if has("--project") {
                "choose its project under Release, then press Release (a reason is required)"
            } else {
                "press Release (a reason is required)"
            })
        }
        ["mark-paid", id, ..] if of_item(id) => Some(if has("--project") {
            "press Mark paid, naming its project and its order"
        } else if has("--order-id") {
            "press Mark paid, naming its order"
        } else {
            "press Mark paid"
        }),
        // An invoice's, a withdrawal's or a deposit's story: each offers it for what waits on
        // Paymos' word.
        ["recheck", id]
            if e.resource_id.as_deref() == Some(*id)
                && matches!(e.kind, "unconfirmed" | "project_unknown") =>
        {
            Some("press Recheck with Paymos")
        }
        ["exceptions", "--resolve", id, ..]
            if invoice.is_some()
                && e.event_id.as_deref() == Some(id)
                && matches!(e.kind, "order_conflict" | "unusable" | "unconfirmed") =>
        {
            Some("press Resolved, saying how you settled it")
        }
        ["redrive", ..] if e.kind == "dead_letter" => {
            Some("press Move them back… under Dead letters")
        }
        ["events", "redrive", ..] if e.kind == crate::exceptions::PARKED_HANDOFF => {
            Some("press Move them back… under Parked hand-off events")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::on_the_page;
    use paymos_inbox_core::roads::exceptions::Exception;

    fn waiting(
        kind: &'static str,
        resource: Option<&str>,
        event: Option<&str>,
        action: &str,
    ) -> Exception {
        Exception {
            kind,
            resource_id: resource.map(str::to_owned),
            event_id: event.map(str::to_owned),
            project: None,
            since_ms: 0,
            why: "why".into(),
            action: action.into(),
        }
    }

    // The domain's sentences, as `exceptions` prints them: each command the page does is its
    // button on the page; the terminal's text is not changed.
    #[test]
    fn a_command_the_page_has_a_button_for_is_said_as_that_button() {
        for (kind, resource, event, terminal, page) in [
            (
                "held",
                Some("inv_1"),
                None,
                "check the order; ship with `paymos-inbox release inv_1 --actor <you> --override-amount --reason …`, or refund in full",
                "check the order; ship: press Override the amount… (beside Release; a reason is required), or refund in full",
            ),
            (
                "held",
                Some("inv_1"),
                None,
                "check at Paymos which project's invoice it is; ship with `paymos-inbox release inv_1 --project <its project> --actor <you> --reason …`, or refund in full",
                "check at Paymos which project's invoice it is; ship: choose its project under Release, then press Release (a reason is required), or refund in full",
            ),
            (
                "paid_late",
                Some("inv_1"),
                None,
                "ship anyway with `paymos-inbox release inv_1 --actor <you> --reason …`, or refund in full",
                "ship anyway: press Release (a reason is required), or refund in full",
            ),
            (
                "order_unknown",
                Some("inv_1"),
                Some("evt_1"),
                "find the order this payment is for, then `paymos-inbox mark-paid inv_1 --order-id <order> --actor <you>` (`reconcile --apply` does it once Paymos' invoice names its order)",
                "find the order this payment is for, then press Mark paid, naming its order (`reconcile --apply` does it once Paymos' invoice names its order)",
            ),
            (
                "unconfirmed",
                Some("inv_1"),
                Some("evt_1"),
                "`paymos-inbox recheck inv_1`: applies it once Paymos shows it paid as this delivery says; if Paymos shows it paid otherwise (another order, price or project), apply Paymos' own payment with `paymos-inbox mark-paid inv_1 --actor <you>`, given the API's key; if Paymos shows it was never paid (forged: rotate the webhook secret), or once applied, `paymos-inbox exceptions --resolve evt_1 --actor <you> --reason \"…\"`",
                "press Recheck with Paymos: applies it once Paymos shows it paid as this delivery says; if Paymos shows it paid otherwise (another order, price or project), apply Paymos' own payment: press Mark paid, given the API's key; if Paymos shows it was never paid (forged: rotate the webhook secret), or once applied, press Resolved, saying how you settled it",
            ),
            (
                "order_conflict",
                Some("inv_1"),
                Some("evt_1"),
                "find which order inv_1 paid: if it is not the one shipped, ship the paid one by hand and recover the other; then `paymos-inbox exceptions --resolve evt_1 --actor <you> --reason \"…\"`",
                "find which order inv_1 paid: if it is not the one shipped, ship the paid one by hand and recover the other; then press Resolved, saying how you settled it",
            ),
            (
                "after_refund",
                Some("inv_1"),
                None,
                "check at Paymos when this payment was made: after the full refund (the customer paid again), ship it with `paymos-inbox release inv_1 --actor <you> --reason …`; at or before it, that refund returned it and nothing ships: `paymos-inbox exceptions --resolve inv_1 --actor <you> --reason \"…\"`",
                "check at Paymos when this payment was made: after the full refund (the customer paid again), ship it: press Release (a reason is required); at or before it, that refund returned it and nothing ships: `paymos-inbox exceptions --resolve inv_1 --actor <you> --reason \"…\"`",
            ),
            (
                "unconfirmed",
                Some("wdr_1"),
                Some("evt_1"),
                "`paymos-inbox recheck wdr_1`: records the refund on inv_1 if Paymos confirms it",
                "press Recheck with Paymos: records the refund on inv_1 if Paymos confirms it",
            ),
            (
                "project_unknown",
                Some("pcd_1"),
                Some("evt_1"),
                "configure the reverse check (PaymosApiSecretName), then `paymos-inbox recheck pcd_1`: credits the payer of the project Paymos names, once",
                "configure the reverse check (PaymosApiSecretName), then press Recheck with Paymos: credits the payer of the project Paymos names, once",
            ),
            (
                "dead_letter",
                None,
                None,
                "read the fulfil logs for the cause, fix it, then `paymos-inbox redrive`",
                "read the fulfil logs for the cause, fix it, then press Move them back… under Dead letters",
            ),
            (
                "parked_handoff",
                None,
                None,
                "fix the endpoint, then `paymos-inbox events redrive --per-second 5`",
                "fix the endpoint, then press Move them back… under Parked hand-off events",
            ),
        ] {
            assert_eq!(on_the_page(&waiting(kind, resource, event, terminal)), page);
        }
    }

    // Where the page has no such action, the line keeps the command (and its backticks).
    #[test]
    fn a_command_the_page_does_not_do_stays_the_command_line() {
        for (kind, resource, event, terminal) in [
            // The body as Paymos sent it: the page shows it redacted only.
            (
                "unusable",
                Some("pcd_1"),
                Some("evt_1"),
                "print its body with `paymos-inbox exceptions --body evt_1 --environment live`, apply it by hand",
            ),
            // The invoice's story has no Recheck of its refund: the refund's own story has.
            (
                "held",
                Some("inv_1"),
                None,
                "a refund of it (wdr_1) waits unconfirmed, so the order may have been paid back: `paymos-inbox recheck wdr_1` first, then see what is left",
            ),
            // Recheck is offered where a delivery waits for Paymos' word.
            (
                "duplicate_payment",
                Some("inv_1"),
                None,
                "`paymos-inbox recheck inv_1`",
            ),
            // A release names the item's own invoice, never another.
            (
                "held",
                Some("inv_1"),
                None,
                "ship with `paymos-inbox release inv_2 --actor <you> --reason …`",
            ),
        ] {
            assert_eq!(
                on_the_page(&waiting(kind, resource, event, terminal)),
                terminal,
                "{kind}"
            );
        }
        // Both in one line, each said as its button.
        let line = waiting(
            "project_unknown",
            Some("inv_1"),
            Some("evt_1"),
            "find the project, then `paymos-inbox mark-paid inv_1 --project <prj_…> --order-id <order> --actor <you>`; or, with the reverse check configured, apply Paymos' word with `paymos-inbox recheck inv_1`",
        );
        assert_eq!(
            on_the_page(&line),
            "find the project, then press Mark paid, naming its project and its order; or, with the reverse check configured, apply Paymos' word: press Recheck with Paymos"
        );
    }
}
