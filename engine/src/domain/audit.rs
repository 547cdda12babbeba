//! What the audit log records was done (docs/DESIGN.md §7, §15): every kind of entry, so every
//! writer names one the compiler knows, and the audit page offers each as a filter. The column
//! `audit.action` is text: entries are never rewritten, and those of older versions are read
//! as they were written.

use serde::{Deserialize, Serialize};

use super::actions::OperatorAction;

/// One kind of audit entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "text", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    CheckDestination,
    RetrySameKey,
    AttachEvidence,
    Waive,
    AuthorizeAnotherAttempt,
    Cancel,
    Replace,
    ResolveIncident,
    BulkStop,
    StartWorkflow,
    DefinitionApply,
    AdapterApply,
    SignIn,
    OperatorListed,
    OperatorDisabled,
    OperatorEnabled,
    OperatorRoleSet,
    OperatorPasswordReset,
    TokenCreate,
    TokenRevoke,
    AdapterHold,
    AdapterResume,
    WorkflowPause,
    WorkflowResume,
    Note,
    AdapterLimit,
    Propose,
    DeclineProposal,
}

impl AuditAction {
    /// Every kind, in the order the audit page offers them.
    pub const ALL: [AuditAction; 28] = [
        AuditAction::CheckDestination,
        AuditAction::RetrySameKey,
        AuditAction::AttachEvidence,
        AuditAction::Waive,
        AuditAction::AuthorizeAnotherAttempt,
        AuditAction::Cancel,
        AuditAction::Replace,
        AuditAction::ResolveIncident,
        AuditAction::BulkStop,
        AuditAction::StartWorkflow,
        AuditAction::DefinitionApply,
        AuditAction::AdapterApply,
        AuditAction::SignIn,
        AuditAction::OperatorListed,
        AuditAction::OperatorDisabled,
        AuditAction::OperatorEnabled,
        AuditAction::OperatorRoleSet,
        AuditAction::OperatorPasswordReset,
        AuditAction::TokenCreate,
        AuditAction::TokenRevoke,
        AuditAction::AdapterHold,
        AuditAction::AdapterResume,
        AuditAction::WorkflowPause,
        AuditAction::WorkflowResume,
        AuditAction::Note,
        AuditAction::AdapterLimit,
        AuditAction::Propose,
        AuditAction::DeclineProposal,
    ];

    /// The name the audit row records and the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::CheckDestination => "check_destination",
            AuditAction::RetrySameKey => "retry_same_key",
            AuditAction::AttachEvidence => "attach_evidence",
            AuditAction::Waive => "waive",
            AuditAction::AuthorizeAnotherAttempt => "authorize_another_attempt",
            AuditAction::Cancel => "cancel",
            AuditAction::Replace => "replace",
            AuditAction::ResolveIncident => "resolve_incident",
            AuditAction::BulkStop => "bulk_stop",
            AuditAction::StartWorkflow => "start_workflow",
            AuditAction::DefinitionApply => "definition_apply",
            AuditAction::AdapterApply => "adapter_apply",
            AuditAction::SignIn => "sign_in",
            AuditAction::OperatorListed => "operator_listed",
            AuditAction::OperatorDisabled => "operator_disabled",
            AuditAction::OperatorEnabled => "operator_enabled",
            AuditAction::OperatorRoleSet => "operator_role_set",
            AuditAction::OperatorPasswordReset => "operator_password_reset",
            AuditAction::TokenCreate => "token_create",
            AuditAction::TokenRevoke => "token_revoke",
            AuditAction::AdapterHold => "adapter_hold",
            AuditAction::AdapterResume => "adapter_resume",
            AuditAction::WorkflowPause => "workflow_pause",
            AuditAction::WorkflowResume => "workflow_resume",
            AuditAction::Note => "note",
            AuditAction::AdapterLimit => "adapter_limit",
            AuditAction::Propose => "propose",
            AuditAction::DeclineProposal => "decline_proposal",
        }
    }
}

impl From<OperatorAction> for AuditAction {
    fn from(action: OperatorAction) -> Self {
        match action {
            OperatorAction::CheckDestination => AuditAction::CheckDestination,
            OperatorAction::RetrySameKey => AuditAction::RetrySameKey,
            OperatorAction::AttachEvidence => AuditAction::AttachEvidence,
            OperatorAction::Waive => AuditAction::Waive,
            OperatorAction::AuthorizeAnotherAttempt => AuditAction::AuthorizeAnotherAttempt,
            OperatorAction::Cancel => AuditAction::Cancel,
            OperatorAction::Replace => AuditAction::Replace,
            OperatorAction::ResolveIncident => AuditAction::ResolveIncident,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_under_the_name_it_serialises_as() {
        let names: std::collections::BTreeSet<&str> =
            AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(names.len(), AuditAction::ALL.len());
        for action in AuditAction::ALL {
            assert_eq!(serde_json::to_value(action).unwrap(), action.as_str());
        }
    }

    #[test]
    fn an_operator_action_is_audited_under_its_own_name() {
        use OperatorAction::*;
        let every = [
            CheckDestination,
            RetrySameKey,
            AttachEvidence,
            Waive,
            AuthorizeAnotherAttempt,
            Cancel,
            Replace,
            ResolveIncident,
        ];
        for action in every {
            assert_eq!(AuditAction::from(action).as_str(), action.name());
        }
    }
}
