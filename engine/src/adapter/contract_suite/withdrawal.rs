//! The compensation claim: a delivery can be withdrawn under its own key, within stated limits.

use super::*;

impl Run<'_> {
    pub(super) async fn withdrawal(&self, checks: &mut Vec<ClaimCheck>) {
        let delivery_key = self.key("withdrawn");
        let reference = match self
            .accepted(&delivery_key, &self.digest("withdrawn"))
            .await
        {
            Ok(reference) => reference,
            Err(why) => {
                checks.push(check(claims::WITHDRAWAL, Err(why.clone())));
                checks.push(check(claims::WITHDRAWAL_REPLAY, Err(why)));
                return;
            }
        };
        let key = self.key("withdrawal");
        let first = match self.adapter.withdraw(&key, &reference).await {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } => Ok(withdrawal_reference),
            WithdrawalObservation::Transport(other) => Err(format!(
                "withdrawing {reference} under `{key}` {}",
                describe(&other)
            )),
        };
        let original = match first {
            Ok(original) => {
                checks.push(check(
                    claims::WITHDRAWAL,
                    Ok(format!(
                        "withdrawing {reference} under `{key}` recorded withdrawal {original}"
                    )),
                ));
                original
            }
            Err(why) => {
                checks.push(check(claims::WITHDRAWAL, Err(why.clone())));
                checks.push(check(claims::WITHDRAWAL_REPLAY, Err(why)));
                return;
            }
        };
        let again = match self.adapter.withdraw(&key, &reference).await {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } if withdrawal_reference == original => Ok(format!(
                "withdrawing {reference} again under `{key}` returned {original} again"
            )),
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } => Err(format!(
                "withdrawing {reference} again under `{key}` returned {withdrawal_reference} \
                 instead of {original}"
            )),
            WithdrawalObservation::Transport(other) => Err(format!(
                "withdrawing {reference} again under `{key}` {}",
                describe(&other)
            )),
        };
        checks.push(check(claims::WITHDRAWAL_REPLAY, again));
    }
}
