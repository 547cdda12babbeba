//! Classifying an answer with the adapter file's rules: the first rule whose condition holds
//! decides; an answer no rule recognizes is outcome unknown (docs/DESIGN.md §3).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Answer, first_match, scalar_text};
use crate::adapter::spec::{Expression, Lookup, Withdraw};
use crate::adapter::{LookupObservation, WithdrawalObservation};
use crate::domain::TransportObservation;
use crate::template;

/// Evaluates `expression` to text, or says why it could not.
fn text_of(expression: &Expression, context: &Value) -> Result<String, String> {
    let value = template::eval(&expression.0, context).map_err(|e| e.to_string())?;
    scalar_text(value).ok_or_else(|| {
        format!(
            "`{}` gave a list, a map or null where text belongs",
            crate::domain::words::displayable(&expression.0)
        )
    })
}

/// A rule matched but its mapping could not be read: the answer proves nothing.
fn unreadable(status: u16, why: String) -> TransportObservation {
    TransportObservation::UnreadableResponse {
        status,
        detail: format!("the answer matched an outcome rule, but {why}"),
    }
}

fn unmatched(answer: &Answer) -> TransportObservation {
    TransportObservation::Unmatched {
        status: answer.status,
        excerpt: answer.excerpt(),
    }
}

/// An answer the first matching rule reads as "nothing happened", when verification never
/// proved that rule: the outcome is unknown (docs/DESIGN.md §5).
fn unproven(
    operation: &str,
    index: usize,
    answer: &Answer,
    seen: &TransportObservation,
) -> TransportObservation {
    let reads_as = match seen {
        TransportObservation::Rejected { code, .. } => format!("rejected `{code}`"),
        TransportObservation::NotAccepted { code, .. } => {
            format!("failed before effect `{code}`")
        }
        other => return other.clone(),
    };
    TransportObservation::Unproven {
        status: answer.status,
        rule: format!("{operation}.outcomes[{index}]"),
        reads_as,
        excerpt: answer.excerpt(),
    }
}

/// What a delivery's answer means under `rules`, counting a conclusion that nothing happened
/// only from a rule `proven` accepts; with the index of the rule that matched.
pub(super) fn delivery(
    rules: &[crate::adapter::spec::Rule],
    answer: &Answer,
    (key, digest): (&str, &str),
    proven: &dyn Fn(usize) -> bool,
) -> (TransportObservation, Option<usize>) {
    let context = answer.context(key, digest);
    let Some(index) = first_match(rules, &context) else {
        return (unmatched(answer), None);
    };
    let seen = read_delivery(&rules[index], answer, &context);
    if rules[index].says_nothing_happened() && !proven(index) {
        return (unproven("deliver", index, answer, &seen), Some(index));
    }
    (seen, Some(index))
}

/// What `rule` makes of a delivery's answer.
fn read_delivery(
    rule: &crate::adapter::spec::Rule,
    answer: &Answer,
    context: &Value,
) -> TransportObservation {
    let status = answer.status;
    let mapped = || -> Result<TransportObservation, String> {
        if let Some(s) = &rule.succeeded {
            let external_reference = text_of(&s.reference, context)?;
            let replayed = s
                .replayed
                .as_ref()
                .is_some_and(|r| template::holds(&r.0, context));
            let fields = s
                .fields
                .iter()
                .map(|(name, e)| {
                    template::eval(&e.0, context)
                        .map(|v| (name.clone(), v))
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<BTreeMap<_, _>, _>>()?;
            return Ok(TransportObservation::Accepted {
                status,
                external_reference,
                replayed,
                fields,
            });
        }
        if let Some(r) = &rule.rejected {
            let code = text_of(&r.code, context)?;
            return Ok(TransportObservation::Rejected { status, code });
        }
        if let Some(f) = &rule.failed_before_effect {
            let code = text_of(&f.code, context)?;
            return Ok(TransportObservation::NotAccepted { status, code });
        }
        Ok(unmatched(answer))
    };
    mapped().unwrap_or_else(|why| unreadable(status, why))
}

/// What a withdrawal's answer means under `withdraw`'s rules, counting a conclusion that
/// nothing happened only from a rule `proven` accepts.
pub(super) fn withdrawal(
    withdraw: &Withdraw,
    answer: &Answer,
    (key, digest): (&str, &str),
    proven: &dyn Fn(usize) -> bool,
) -> WithdrawalObservation {
    let context = answer.context(key, digest);
    let status = answer.status;
    let Some(index) = first_match(&withdraw.outcomes, &context) else {
        return WithdrawalObservation::Transport(unmatched(answer));
    };
    let rule = &withdraw.outcomes[index];
    let mapped = || -> Result<WithdrawalObservation, String> {
        if let Some(w) = &rule.withdrawn {
            return Ok(WithdrawalObservation::Withdrawn {
                withdrawal_reference: text_of(&w.reference, &context)?,
                limits: withdraw.limits.clone().unwrap_or_default(),
            });
        }
        if let Some(r) = &rule.rejected {
            let code = text_of(&r.code, &context)?;
            return Ok(WithdrawalObservation::Transport(
                TransportObservation::Rejected { status, code },
            ));
        }
        if let Some(f) = &rule.failed_before_effect {
            let code = text_of(&f.code, &context)?;
            return Ok(WithdrawalObservation::Transport(
                TransportObservation::NotAccepted { status, code },
            ));
        }
        Ok(WithdrawalObservation::Transport(unmatched(answer)))
    };
    match mapped().unwrap_or_else(|why| WithdrawalObservation::Transport(unreadable(status, why))) {
        WithdrawalObservation::Transport(seen)
            if rule.says_nothing_happened() && !proven(index) =>
        {
            WithdrawalObservation::Transport(unproven("withdraw", index, answer, &seen))
        }
        seen => seen,
    }
}

/// What a lookup's answer says, comparing a found request's digest with `digest`. `context`
/// is what the mappings read: the (last) answer, the request and, for a walk, the items of
/// every page; the file's `let` names are added to it here, in order.
pub(super) fn lookup(
    lookup: &Lookup,
    status: u16,
    mut context: Value,
    digest: &str,
) -> LookupObservation {
    for (name, expression) in &lookup.lets.0 {
        match template::eval(&expression.0, &context) {
            Ok(value) => context[name.as_str()] = value,
            Err(error) => {
                return LookupObservation::Unavailable {
                    detail: format!("the lookup's answer ({status}): `let {name}`: {error}"),
                };
            }
        }
    }
    if template::holds(&lookup.found.when.0, &context) {
        let found = || -> Result<LookupObservation, String> {
            let external_reference = text_of(&lookup.found.reference, &context)?;
            let held = text_of(&lookup.found.digest, &context)?;
            if held != digest {
                return Ok(LookupObservation::FoundWithConflictingDigest {
                    external_reference,
                    digest: held,
                });
            }
            let mut all = match &lookup.found.all {
                None => Vec::new(),
                Some(e) => match template::eval(&e.0, &context).map_err(|e| e.to_string())? {
                    Value::Array(items) => items.into_iter().filter_map(scalar_text).collect(),
                    _ => return Err("`all` is not a list".to_owned()),
                },
            };
            if all.is_empty() {
                all.push(external_reference.clone());
            }
            Ok(LookupObservation::Found {
                external_reference,
                digest: held,
                all,
            })
        };
        return found().unwrap_or_else(|why| LookupObservation::Unavailable {
            detail: format!("the lookup's answer ({status}) matched `found`, but {why}"),
        });
    }
    if lookup
        .processing
        .as_ref()
        .is_some_and(|p| template::holds(&p.0, &context))
    {
        return LookupObservation::Processing;
    }
    if template::holds(&lookup.not_found.0, &context) {
        return LookupObservation::NotFound;
    }
    LookupObservation::Unavailable {
        detail: format!("lookup answered {status}"),
    }
}
