//! The words people see on the status page (docs/DESIGN.md §14).

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

/// The one sentence the user-facing status page shows for a document delivery.
pub fn delivery_sentence(
    deliver: StepState,
    external_reference: Option<&str>,
    duplicate: DuplicateStatus,
) -> String {
    match (deliver, duplicate) {
        (_, DuplicateStatus::Open) => {
            "Delivery happened more than once; an operator is reviewing the duplicate".to_owned()
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
        (StepState::Blocked | StepState::Ready, DuplicateStatus::None) => {
            "Request recorded; delivery has not started".to_owned()
        }
        (StepState::Running | StepState::Invoking, DuplicateStatus::None) => {
            "Waiting for the delivery service".to_owned()
        }
        (StepState::OutcomeUnknown, DuplicateStatus::None) => {
            "Delivery may have completed; checking its status".to_owned()
        }
        (StepState::Succeeded, DuplicateStatus::None) => match external_reference {
            Some(reference) => format!(
                "Delivery verified from external reference {}",
                displayable(reference)
            ),
            None => "Delivery verified".to_owned(),
        },
        (StepState::ReviewRequired, DuplicateStatus::None) => {
            "Delivery status cannot be verified automatically; review required".to_owned()
        }
        (StepState::Rejected, DuplicateStatus::None) => {
            "The delivery service rejected the request; review required".to_owned()
        }
        (StepState::Waived, DuplicateStatus::None) => {
            "Delivery accepted by an operator without proof; the uncertainty is recorded".to_owned()
        }
        (StepState::Cancelled, DuplicateStatus::None) => "Delivery cancelled".to_owned(),
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
pub fn withdrawal_sentence(withdrawn: bool) -> String {
    if withdrawn {
        "Delivery withdrawn after cancellation".to_owned()
    } else {
        "Delivery cancelled after it was made; withdrawal requested".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
