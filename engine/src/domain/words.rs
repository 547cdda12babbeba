//! The words people see on the status page (docs/DESIGN.md §14).

use serde::{Deserialize, Serialize};

use super::state::StepState;

/// How a duplicate-effect incident on the delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicateStatus {
    None,
    Open,
    /// The duplicate's withdrawal was requested and has not been confirmed yet.
    WithdrawalRequested,
    Withdrawn,
    AcceptedUnresolved,
}

/// The words a definition gives one step (docs/DESIGN.md §14): a noun and who makes the
/// effect, and any of the five status sentences written out in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepWords {
    /// "Payment": reads "Payment may have completed; checking its status".
    pub noun: String,
    /// "the payment service": reads "Waiting for the payment service".
    pub service: String,
    pub waiting: Option<String>,
    pub in_flight: Option<String>,
    pub unknown: Option<String>,
    /// `{reference}` stands for the external reference.
    pub succeeded: Option<String>,
    pub review: Option<String>,
}

impl StepWords {
    /// Words for a step its definition gave none: its own name, and "the destination".
    pub fn named(logical: &str) -> Self {
        let mut noun: Vec<char> = logical.replace('_', " ").chars().collect();
        if let Some(first) = noun.first_mut() {
            *first = first.to_ascii_uppercase();
        }
        StepWords {
            noun: noun.into_iter().collect(),
            service: "the destination".to_owned(),
            waiting: None,
            in_flight: None,
            unknown: None,
            succeeded: None,
            review: None,
        }
    }
}

/// The one sentence the user-facing status page shows for a step, in its definition's words.
pub fn status_sentence(
    words: &StepWords,
    state: StepState,
    external_reference: Option<&str>,
    duplicate: DuplicateStatus,
) -> String {
    let noun = &words.noun;
    let or = |given: &Option<String>, made: String| given.clone().unwrap_or(made);
    match (state, duplicate) {
        (_, DuplicateStatus::Open) => {
            format!("{noun} happened more than once; an operator is reviewing the duplicate")
        }
        (_, DuplicateStatus::WithdrawalRequested) => {
            "Completed with duplicate effect; withdrawal of the duplicate requested".to_owned()
        }
        (_, DuplicateStatus::Withdrawn) => {
            "Completed with duplicate effect; duplicate withdrawn".to_owned()
        }
        (_, DuplicateStatus::AcceptedUnresolved) => {
            "Completed with unresolved duplicate".to_owned()
        }
        (StepState::Blocked | StepState::Ready, DuplicateStatus::None) => or(
            &words.waiting,
            format!("Request recorded; {} has not started", noun.to_lowercase()),
        ),
        (StepState::Held, DuplicateStatus::None) => {
            format!("{noun} is waiting: sending to {} is paused", words.service)
        }
        (StepState::Unsent, DuplicateStatus::None) => format!(
            "{noun} was not sent: {} could not take the request; review required",
            words.service
        ),
        (StepState::Running | StepState::Invoking, DuplicateStatus::None) => {
            or(&words.in_flight, format!("Waiting for {}", words.service))
        }
        (StepState::OutcomeUnknown, DuplicateStatus::None) => or(
            &words.unknown,
            format!("{noun} may have completed; checking its status"),
        ),
        (StepState::Succeeded, DuplicateStatus::None) => match external_reference {
            Some(reference) => match &words.succeeded {
                Some(sentence) => sentence.replace("{reference}", &displayable(reference)),
                None => format!(
                    "{noun} verified from external reference {}",
                    displayable(reference)
                ),
            },
            None => format!("{noun} verified"),
        },
        (StepState::ReviewRequired, DuplicateStatus::None) => or(
            &words.review,
            format!("{noun} status cannot be verified automatically; review required"),
        ),
        (StepState::Rejected, DuplicateStatus::None) => {
            format!(
                "{} rejected the request; review required",
                capitalized(&words.service)
            )
        }
        (StepState::Waived, DuplicateStatus::None) => {
            format!("{noun} accepted by an operator without proof; the uncertainty is recorded")
        }
        (StepState::Cancelled, DuplicateStatus::None) => format!("{noun} cancelled"),
    }
}

/// The sentence of each state a step can be in, with no duplicate and nothing withdrawn, by the
/// state's name; a succeeded step's is the one without a reference (a pure step has no receipt).
/// What a flush needs to say a status step's sentence without reading its receipt
/// (docs/DESIGN.md §10).
pub fn sentences_by_state(words: &StepWords) -> serde_json::Value {
    let by_state: serde_json::Map<String, serde_json::Value> = StepState::ALL
        .iter()
        .map(|state| {
            let name = serde_json::to_value(state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let said = status_sentence(words, *state, None, DuplicateStatus::None);
            (name, serde_json::Value::String(said))
        })
        .collect();
    serde_json::Value::Object(by_state)
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The longest external reference a sentence quotes whole.
const MAX_QUOTED: usize = 120;

/// `text` from a destination as a sentence may quote it: control characters and the invisible
/// marks that reorder or hide text (bidi overrides and isolates, zero-width characters) become
/// U+FFFD, so a reference cannot make the sentence around it read otherwise; and a reference
/// longer than [`MAX_QUOTED`] characters is cut, with an ellipsis.
pub fn displayable(text: &str) -> String {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
    };
    let mut shown: String = text
        .chars()
        .take(MAX_QUOTED)
        .map(|c| if hidden(c) { '\u{FFFD}' } else { c })
        .collect();
    if text.chars().count() > MAX_QUOTED {
        shown.push('…');
    }
    shown
}

/// The sentence for a delivery whose cancellation, after it was delivered, asked the
/// destination to withdraw it: requested until the withdrawal's receipt, then done.
pub fn withdrawal_sentence(words: &StepWords, withdrawn: bool) -> String {
    let noun = &words.noun;
    if withdrawn {
        format!("{noun} withdrawn after cancellation")
    } else {
        format!("{noun} cancelled after it was made; withdrawal requested")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words `document_delivery` gives its delivery step.
    fn delivery() -> StepWords {
        StepWords {
            noun: "Delivery".into(),
            service: "the delivery service".into(),
            ..StepWords::named("deliver")
        }
    }

    fn delivery_sentence(
        state: StepState,
        reference: Option<&str>,
        duplicate: DuplicateStatus,
    ) -> String {
        status_sentence(&delivery(), state, reference, duplicate)
    }

    #[test]
    fn every_state_has_its_sentence_by_the_name_the_database_gives_it() {
        let by_state = sentences_by_state(&delivery());
        let by_state = by_state.as_object().unwrap();
        assert_eq!(by_state.len(), StepState::ALL.len());
        assert_eq!(
            by_state["invoking"],
            delivery_sentence(StepState::Invoking, None, DuplicateStatus::None)
        );
        assert_eq!(
            by_state["outcome_unknown"],
            "Delivery may have completed; checking its status"
        );
        assert_eq!(by_state["succeeded"], "Delivery verified");
    }

    #[test]
    fn an_external_reference_cannot_reorder_or_hide_the_sentence_around_it() {
        let sentence = delivery_sentence(
            StepState::Succeeded,
            Some("ref-1\u{202E}deifirev ton\u{2066}\u{200B}\n"),
            DuplicateStatus::None,
        );
        assert_eq!(
            sentence,
            "Delivery verified from external reference ref-1\u{FFFD}deifirev ton\u{FFFD}\u{FFFD}\u{FFFD}"
        );
        let long = "r".repeat(500);
        let quoted = delivery_sentence(StepState::Succeeded, Some(&long), DuplicateStatus::None);
        assert!(
            quoted.ends_with(&format!("{}…", "r".repeat(120))),
            "{quoted}"
        );
    }

    #[test]
    fn the_status_page_uses_the_words_of_the_design() {
        assert_eq!(
            delivery_sentence(StepState::Ready, None, DuplicateStatus::None),
            "Request recorded; delivery has not started"
        );
        assert_eq!(
            delivery_sentence(StepState::Succeeded, Some("x-82"), DuplicateStatus::None),
            "Delivery verified from external reference x-82"
        );
        assert_eq!(
            delivery_sentence(StepState::ReviewRequired, None, DuplicateStatus::None),
            "Delivery status cannot be verified automatically; review required"
        );
    }

    #[test]
    fn a_step_that_was_never_sent_never_reads_as_unknown() {
        for state in [StepState::Held, StepState::Unsent] {
            let sentence = delivery_sentence(state, None, DuplicateStatus::None);
            assert!(!sentence.contains("unknown"), "{sentence}");
            assert!(!sentence.contains("cannot be verified"), "{sentence}");
            assert!(!sentence.contains("may have"), "{sentence}");
        }
        assert_eq!(
            delivery_sentence(StepState::Unsent, None, DuplicateStatus::None),
            "Delivery was not sent: the delivery service could not take the request; review required"
        );
    }

    #[test]
    fn a_duplicate_never_reads_as_plain_success() {
        for duplicate in [
            DuplicateStatus::Open,
            DuplicateStatus::WithdrawalRequested,
            DuplicateStatus::Withdrawn,
            DuplicateStatus::AcceptedUnresolved,
        ] {
            let sentence = delivery_sentence(StepState::Succeeded, Some("x-1"), duplicate);
            assert!(sentence.to_lowercase().contains("duplicate"), "{sentence}");
        }
    }

    #[test]
    fn no_sentence_says_failed() {
        for state in StepState::ALL {
            let sentence = delivery_sentence(state, None, DuplicateStatus::None);
            assert!(!sentence.to_lowercase().contains("fail"), "{sentence}");
        }
    }
}
