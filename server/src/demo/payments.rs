//! The demo's payments (`payment_receipt`): a card charge through the Stripe-style payments
//! API, then a receipt e-mail through the mail service, so the review queue shows unknown
//! outcomes under an API of another shape next to the documents: a lost answer the same-key
//! replay recovers on its own, a card decline with its code, a lost answer left for a person,
//! a receipt whose answer was lost (found by asking the mail service) and a receipt refused.

use destinations::{Fault, FaultRule, Match, Operation};
use engine::intake::{NewWorkflow, Started, start_workflow};
use engine::store::journal::Actor;
use serde_json::json;
use sqlx::PgPool;

use super::{Endpoints, Plans, step_key};

/// Which step of a payment a scene's fault hits.
#[derive(Clone, Copy)]
enum At {
    Charge,
    Receipt,
}

/// One demo payment: the order, who pays, through which payments adapter, with which fault.
struct Payment {
    key: &'static str,
    order: &'static str,
    customer: &'static str,
    amount: u32,
    adapter: &'static str,
    fault: Option<(At, Fault)>,
}

/// Every demo payment, in the order they are started.
fn payments() -> [Payment; 5] {
    let payment = |key, order, customer, amount, adapter, fault| Payment {
        key,
        order,
        customer,
        amount,
        adapter,
        fault,
    };
    [
        // The charge's answer is lost; the replay under its key returns the saved answer.
        payment(
            "demo-payment-1",
            "A-1001",
            "cus_ada",
            4_990,
            "payments",
            Some((At::Charge, Fault::DropResponse {})),
        ),
        // The card is declined: 402 `card_declined`, rejected, nothing charged.
        payment(
            "demo-payment-2",
            "A-1002",
            "cus_declined",
            12_000,
            "payments",
            None,
        ),
        // The charge's answer is lost under the adapter that sends unknown outcomes to review:
        // a person checks (the search by metadata) or retries with the same key.
        payment(
            "demo-payment-3",
            "A-1003",
            "cus_grace",
            2_500,
            "payments-reviewed",
            Some((At::Charge, Fault::DropResponse {})),
        ),
        // Charged; the receipt's answer is lost, and asking the mail service finds it sent.
        payment(
            "demo-payment-4",
            "A-1004",
            "cus_alan",
            899,
            "payments",
            Some((At::Receipt, Fault::DropResponse {})),
        ),
        // Charged; the mail service refuses the receipt: the money is taken, the e-mail is not
        // sent, and a person replaces it with a corrected address.
        payment(
            "demo-payment-5",
            "A-1005",
            "cus_barbara",
            15_000,
            "payments",
            Some((
                At::Receipt,
                Fault::Reject {
                    code: "mailbox_unavailable".into(),
                    retryable: false,
                },
            )),
        ),
    ]
}

/// Starts the payment workflows not started yet and adds each scene's fault to `plans`;
/// returns how many it started.
pub(super) async fn seed(
    pool: &PgPool,
    endpoints: &Endpoints,
    plans: &mut Plans,
) -> anyhow::Result<usize> {
    let mut created = 0;
    for payment in payments() {
        let input = json!({
            "order": payment.order,
            "customer": payment.customer,
            "email": format!("{}@example.com", payment.customer.trim_start_matches("cus_")),
            "amount": payment.amount,
            "currency": "eur",
            "payments_adapter": payment.adapter,
            "mail_adapter": "mailer",
        });
        let started = start_workflow(
            pool,
            NewWorkflow {
                creation_key: payment.key.to_owned(),
                definition: "payment_receipt".to_owned(),
                version: None,
                input,
            },
            Actor::Engine("demo"),
        )
        .await?;
        let Started::Created(workflow) = started else {
            continue;
        };
        created += 1;
        let Some((at, fault)) = payment.fault else {
            continue;
        };
        let version = workflow.definition_version;
        let (base_url, matching) = match at {
            // The payments API deduplicates by key: its faults match the key.
            At::Charge => (
                endpoints.of_adapter(payment.adapter),
                Match::IdempotencyKey(step_key(workflow.id, "charge", version)),
            ),
            At::Receipt => (
                endpoints.of_adapter("mailer"),
                Match::ClientReference(step_key(workflow.id, "receipt", version)),
            ),
        };
        plans
            .entry(base_url.to_owned())
            .or_default()
            .push(FaultRule::new(Operation::Deliver, matching, fault).times(1));
    }
    Ok(created)
}
