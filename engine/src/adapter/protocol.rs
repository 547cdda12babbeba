//! The three destination kinds of `destinations/PROTOCOL.md` as adapter files
//! (`adapters/{idempotent,queryable,opaque}-docs.yaml`), embedded so `z29c adapter add
//! --contract KIND`, the harness and the registry build them without reading the disk.

use super::DataAdapter;
use super::spec::{AdapterSpec, BaseUrl, Retention};
use crate::domain::{Compensation, ContractKind, SideEffectContract, UnknownOutcomePolicy};

/// `adapters/idempotent-docs.yaml`.
pub const IDEMPOTENT_DOCS: &str = include_str!("../../../adapters/idempotent-docs.yaml");
/// `adapters/queryable-docs.yaml`.
pub const QUERYABLE_DOCS: &str = include_str!("../../../adapters/queryable-docs.yaml");
/// `adapters/opaque-docs.yaml`.
pub const OPAQUE_DOCS: &str = include_str!("../../../adapters/opaque-docs.yaml");

/// The shipped file of `kind`, parsed.
pub fn shipped(kind: ContractKind) -> AdapterSpec {
    let source = match kind {
        ContractKind::Idempotent => IDEMPOTENT_DOCS,
        ContractKind::Queryable => QUERYABLE_DOCS,
        ContractKind::Opaque => OPAQUE_DOCS,
    };
    AdapterSpec::parse(source).expect("the shipped protocol adapter files parse")
}

/// The protocol adapter of `kind` at `base_url`, with the given deadline, visibility window
/// (for the queryable kind) and policy.
pub fn protocol_spec(
    kind: ContractKind,
    base_url: &str,
    deadline_ms: u64,
    visibility_window_ms: u64,
    review_unknown: bool,
) -> AdapterSpec {
    let mut spec = shipped(kind);
    spec.base_url = BaseUrl::Literal(base_url.to_owned());
    spec.deadline_ms = deadline_ms;
    if let Some(lookup) = &mut spec.lookup {
        lookup.visibility_window_ms = Some(visibility_window_ms);
    }
    if review_unknown {
        spec.unknown_outcome_policy = UnknownOutcomePolicy::Review;
    }
    spec
}

/// A protocol adapter at `base_url` declaring exactly `contract`, true or not: built from the
/// shipped files' parts (the idempotency header, the lookup, the withdrawal), so a stored or
/// deliberately false contract is reproduced and the contract suite can check it.
pub fn protocol_spec_claiming(base_url: &str, contract: &SideEffectContract) -> AdapterSpec {
    let mut spec = shipped(contract.kind());
    spec.base_url = BaseUrl::Literal(base_url.to_owned());
    spec.deadline_ms = contract.deadline_ms;
    spec.unknown_outcome_policy = contract.unknown_outcome_policy;
    spec.deliver.retryable = contract.retryable_rejections.clone();
    spec.idempotency = if contract.accepts_idempotency_key {
        shipped(ContractKind::Idempotent).idempotency.map(|mut i| {
            i.retention = contract
                .idempotency_retention_ms
                .map(|ms| Retention(std::time::Duration::from_millis(ms)));
            i
        })
    } else {
        None
    };
    spec.lookup = if contract.query_by_client_reference {
        shipped(ContractKind::Queryable).lookup.map(|mut l| {
            l.visibility_window_ms = Some(contract.visibility_window_ms);
            l.create_after_authoritative_absence = contract.create_after_authoritative_absence;
            l
        })
    } else {
        None
    };
    spec.withdraw = match &contract.compensation {
        Compensation::None => None,
        Compensation::SupportedWithLimits(limits) => spec.withdraw.map(|mut w| {
            w.limits = Some(limits.clone());
            w
        }),
    };
    spec
}

/// [`protocol_spec_claiming`], built: protocol files name no secrets, so this cannot fail.
pub fn protocol_adapter(base_url: &str, contract: &SideEffectContract) -> DataAdapter {
    DataAdapter::new(protocol_spec_claiming(base_url, contract))
        .expect("protocol adapter files name no secret and a literal base URL")
}
