//! Withdrawal: an effect can be withdrawn under its own key, and withdrawing again under that
//! key returns the original withdrawal.

use super::*;

impl Run<'_> {
    pub(super) async fn withdrawal(&self) -> Vec<ClaimCheck> {
        let delivery_key = self.key("withdrawn");
        let (seen, _) = self
            .deliver(
                &delivery_key,
                &self.digest("withdrawn"),
                &self.probe_request(),
            )
            .await;
        let reference = match seen {
            TransportObservation::Accepted {
                external_reference, ..
            } => external_reference,
            other => {
                let detail = format!("the delivery to withdraw {}", describe(&other));
                return vec![check(
                    Claim::Withdrawal,
                    "withdraw",
                    Verdict::Inconclusive,
                    detail,
                )];
            }
        };
        let key = self.key("withdrawal");
        let original = match self.adapter.withdraw(&key, &reference).await {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } => withdrawal_reference,
            other => {
                let detail = format!(
                    "withdrawing {reference} under `{key}` {}",
                    describe_withdrawal(&other)
                );
                return vec![check(
                    Claim::Withdrawal,
                    "withdraw",
                    Verdict::Contradicted,
                    detail,
                )];
            }
        };
        let first = check(
            Claim::Withdrawal,
            "withdraw",
            Verdict::Held,
            format!("withdrawing {reference} under `{key}` recorded withdrawal {original}"),
        );
        let again = match self.adapter.withdraw(&key, &reference).await {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } if withdrawal_reference == original => Ok(format!(
                "withdrawing {reference} again under `{key}` returned {original} again"
            )),
            other => Err(format!(
                "withdrawing {reference} again under `{key}` {} instead of returning {original}",
                describe_withdrawal(&other)
            )),
        };
        vec![
            first,
            held_or_contradicted(Claim::Withdrawal, "withdraw again", again),
        ]
    }
}
