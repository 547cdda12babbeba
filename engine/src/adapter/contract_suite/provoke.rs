//! Declines and errors (`verify.provoke`): each request must be answered as the file says. A
//! rule that reads such an answer as `rejected` is proven by it; one that reads it as
//! `failed_before_effect` only once a lookup proved nothing happened (`lookup.rs`).

use super::*;
use crate::adapter::spec::Expected;
use crate::domain::Operation;

/// One provocation as sent: where it went, and which rule read its answer as expected.
pub(super) struct Provoked {
    pub name: String,
    pub key: RequestKey,
    pub digest: InputDigest,
    pub request: Value,
    /// The rule that read the answer as the file expects, and whether it reads it as
    /// `failed_before_effect` (a lookup must then prove that nothing happened).
    pub proven_by: Option<(usize, bool)>,
}

/// Every provocation's checks, and what the lookup checks need of each.
pub(super) struct Provocations {
    pub checks: Vec<ClaimCheck>,
    pub sent: Vec<Provoked>,
}

/// What one provocation's answer was, as the suite judges it.
type Answered = (
    RequestKey,
    InputDigest,
    (TransportObservation, Option<usize>),
);

impl Run<'_> {
    /// Sends every `verify.provoke` request once.
    pub(super) async fn provoke(&self) -> Provocations {
        let provocations = self.adapter.spec().provocations();
        let sends = provocations
            .iter()
            .enumerate()
            .map(|(index, provocation)| {
                Box::pin(async move {
                    let label = format!("provoke/{index}");
                    let key = self.key(&label);
                    let digest = self.digest(&label);
                    let seen = self.deliver(&key, &digest, &provocation.request).await;
                    (key, digest, seen)
                }) as BoxFuture<'_, Answered>
            })
            .collect();
        let answers = join_all(sends).await;
        let mut provoked = Provocations {
            checks: Vec::new(),
            sent: Vec::new(),
        };
        for ((index, provocation), answered) in provocations.iter().enumerate().zip(answers) {
            judge(index, provocation, answered, &mut provoked);
        }
        provoked
    }

    /// Without a lookup, nothing proves that an answer read as `failed_before_effect` left
    /// nothing behind: each such rule stays unverified.
    pub(super) fn no_lookup(&self, provoked: &Provocations) -> Vec<ClaimCheck> {
        provoked
            .sent
            .iter()
            .filter_map(|p| match p.proven_by {
                Some((rule, true)) => Some(check(
                    Claim::Rule {
                        operation: Operation::Deliver,
                        index: rule,
                    },
                    NOTHING_HAPPENED,
                    Verdict::Inconclusive,
                    format!(
                        "`{}` was read as failed before effect, but without a lookup nothing proves that nothing happened",
                        p.name
                    ),
                )),
                _ => None,
            })
            .collect()
    }
}

/// Whether provocation `index` was answered as its file expects; the rule that read a rejection
/// as expected is proven by it, one that read "failed before effect" waits for a lookup.
fn judge(
    index: usize,
    provocation: &crate::adapter::spec::Provocation,
    (key, digest, (seen, rule)): Answered,
    provoked: &mut Provocations,
) {
    let name = provocation.name.as_str();
    let (wanted, met) = match (&provocation.expect, &seen) {
        (Expected::Rejected(want), TransportObservation::Rejected { code, .. }) => {
            (format!("rejected `{want}`"), want == code)
        }
        (Expected::FailedBeforeEffect(want), TransportObservation::NotAccepted { code, .. }) => {
            (format!("failed before effect `{want}`"), want == code)
        }
        (Expected::Rejected(want), _) => (format!("rejected `{want}`"), false),
        (Expected::FailedBeforeEffect(want), _) => {
            (format!("failed before effect `{want}`"), false)
        }
    };
    let before_effect = matches!(provocation.expect, Expected::FailedBeforeEffect(_));
    let claim = Claim::Provocation { index };
    let proven_by = if met {
        let detail = format!("`{name}` {}", describe(&seen));
        provoked
            .checks
            .push(check(claim, "answered as expected", Verdict::Held, detail));
        rule.map(|rule| (rule, before_effect))
    } else {
        let verdict = match seen {
            TransportObservation::ConnectFailed { .. } | TransportObservation::NotSent { .. } => {
                Verdict::Inconclusive
            }
            _ => Verdict::Contradicted,
        };
        let detail = format!(
            "`{name}` {}, where the file expects {wanted}",
            describe(&seen)
        );
        provoked
            .checks
            .push(check(claim, "answered as expected", verdict, detail));
        None
    };
    if let Some((rule, false)) = proven_by {
        let rule = Claim::Rule {
            operation: Operation::Deliver,
            index: rule,
        };
        let detail = format!("`{name}` {}", describe(&seen));
        provoked
            .checks
            .push(check(rule, "provoked", Verdict::Held, detail));
    }
    provoked.sent.push(Provoked {
        name: provocation.name.clone(),
        key,
        digest,
        request: provocation.request.clone(),
        proven_by,
    });
}
