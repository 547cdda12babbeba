//! Adapter files: what `AdapterSpec::parse` refuses (with the line, where it can place it), and
//! what a file that parses declares — its contract, receipt fields and secrets.

use std::time::Duration;

use engine::adapter::spec::{AdapterSpec, REPLAY_MARGIN};
use engine::adapter::{DataAdapter, SecretRef};
use engine::domain::{Compensation, ContractKind, UnknownOutcomePolicy};

const PAYMENTS: &str = include_str!("../../../adapters/payments.yaml");
const WEBHOOK: &str = include_str!("../../../adapters/partner-webhook.yaml");

/// A small valid file, to break one line at a time.
const MINIMAL: &str = r#"name: notes
base_url: http://127.0.0.1:9
deliver:
  method: POST
  path: /notes
  json:
    text: "{{ request.text }}"
  outcomes:
    - when: "status == 201"
      succeeded: { reference: "body.id" }
verify:
  probe: { text: probe }
"#;

fn refused(source: &str) -> engine::file_error::FileError {
    AdapterSpec::parse(source).expect_err("the file should be refused")
}

#[test]
fn a_minimal_file_parses_as_an_opaque_adapter_without_compensation() {
    let spec = AdapterSpec::parse(MINIMAL).unwrap();
    let contract = spec.contract();
    assert_eq!(contract.kind(), ContractKind::Opaque);
    assert_eq!(contract.compensation, Compensation::None);
    assert_eq!(contract.deadline_ms, 2_000);
    assert_eq!(contract.unknown_outcome_policy, UnknownOutcomePolicy::Query);
}

#[test]
fn an_unknown_field_is_refused_with_its_line() {
    let source = MINIMAL.replace("  path: /notes\n", "  path: /notes\n  retries: 3\n");
    let error = refused(&source);
    assert_eq!(error.line, Some(6), "{error}");
    assert!(error.message.contains("unknown field `retries`"), "{error}");
    assert!(error.to_string().starts_with("line 6"), "{error}");
}

#[test]
fn a_template_that_does_not_compile_is_refused_with_its_line() {
    let source = MINIMAL.replace("  path: /notes\n", "  path: \"/notes/{{ request.id \"\n");
    let error = refused(&source);
    assert_eq!(error.line, Some(5), "{error}");
    assert!(error.message.contains("/notes/{{ request.id"), "{error}");
}

#[test]
fn an_expression_that_does_not_compile_is_refused_with_its_line() {
    let source = MINIMAL.replace("status == 201", "status === 201");
    let error = refused(&source);
    assert_eq!(error.line, Some(9), "{error}");
    assert!(error.message.contains("does not compile"), "{error}");
}

#[test]
fn a_request_template_reading_what_its_context_lacks_is_refused_with_its_line() {
    let source = MINIMAL.replace("{{ request.text }}", "{{ body.text }}");
    let error = refused(&source);
    assert_eq!(error.line, Some(7), "{error}");
    assert!(error.message.contains("reads `body`"), "{error}");
}

#[test]
fn a_lookup_without_a_visibility_window_is_refused() {
    let source = PAYMENTS.replace("  visibility_window_ms: 1500\n", "");
    let error = refused(&source);
    assert!(
        error.message.contains("visibility_window_ms is required"),
        "{error}"
    );
    assert!(error.line.is_some(), "{error}");
}

#[test]
fn an_idempotent_adapter_whose_request_ignores_the_digest_is_refused() {
    let source = PAYMENTS.replace("    \"metadata[z29c_digest]\": \"{{ digest }}\"\n", "");
    let error = refused(&source);
    assert!(
        error.message.contains("must carry `{{ digest }}`"),
        "{error}"
    );
}

#[test]
fn an_idempotency_retention_within_twice_the_replay_margin_is_refused() {
    assert_eq!(REPLAY_MARGIN, Duration::from_secs(600));
    let error = refused(&PAYMENTS.replace("retention: 24h", "retention: 20m"));
    assert!(error.message.contains("`20m` is too short"), "{error}");
    assert_eq!(error.line, Some(12), "{error}");
    AdapterSpec::parse(&PAYMENTS.replace("retention: 24h", "retention: 21m")).unwrap();
    let error = refused(&PAYMENTS.replace("retention: 24h", "retention: a day"));
    assert!(error.message.contains("is not a retention"), "{error}");
}

#[test]
fn a_withdrawal_without_limits_is_refused() {
    let source = PAYMENTS.replace(
        "  limits: \"A refund returns the money; the card statement still shows the charge.\"\n",
        "",
    );
    let error = refused(&source);
    assert!(
        error.message.contains("withdraw.limits is required"),
        "{error}"
    );
}

#[test]
fn a_file_without_a_probe_is_refused_since_it_could_never_send() {
    let at = PAYMENTS.find("verify:").unwrap();
    let error = refused(&PAYMENTS[..at]);
    assert!(
        error.message.contains("verify.probe is required"),
        "{error}"
    );
    let at = MINIMAL.find("verify:").unwrap();
    let error = refused(&MINIMAL[..at]);
    assert!(
        error.message.contains("verify.probe is required"),
        "{error}"
    );
}

#[test]
fn a_bad_name_is_refused_with_its_line() {
    let error = refused(&MINIMAL.replace("name: notes", "name: Notes!"));
    assert_eq!(error.line, Some(1), "{error}");
    assert!(error.message.contains("is not an adapter name"), "{error}");
}

#[test]
fn a_rule_with_two_conclusions_is_refused() {
    let source = MINIMAL.replace(
        "      succeeded: { reference: \"body.id\" }\n",
        "      succeeded: { reference: \"body.id\" }\n      rejected: { code: \"body.code\" }\n",
    );
    let error = refused(&source);
    assert!(error.message.contains("exactly one of"), "{error}");
}

#[test]
fn the_payments_file_declares_the_contract_its_api_keeps() {
    let spec = AdapterSpec::parse(PAYMENTS).unwrap();
    let contract = spec.contract();
    assert!(contract.accepts_idempotency_key);
    assert!(contract.query_by_client_reference);
    assert_eq!(contract.visibility_window_ms, 1_500);
    assert!(contract.create_after_authoritative_absence);
    assert_eq!(contract.idempotency_retention_ms, Some(24 * 3_600 * 1_000));
    assert_eq!(contract.deadline_ms, 5_000);
    assert!(contract.rejection_is_retryable("rate_limit"));
    assert_eq!(
        contract.compensation,
        Compensation::SupportedWithLimits(
            "A refund returns the money; the card statement still shows the charge.".into()
        )
    );
    assert_eq!(
        spec.receipt_fields(),
        [
            "external_reference",
            "input_digest",
            "request_key",
            "amount",
            "currency"
        ]
    );
    assert_eq!(
        spec.secrets(),
        vec![SecretRef::Env("Z29C_PAYMENTS_API_KEY".into())]
    );
}

#[test]
fn the_webhook_file_is_opaque_and_names_its_signing_secret() {
    let spec = AdapterSpec::parse(WEBHOOK).unwrap();
    let contract = spec.contract();
    assert_eq!(contract.kind(), ContractKind::Opaque);
    assert_eq!(contract.compensation, Compensation::None);
    assert_eq!(
        spec.secrets(),
        vec![SecretRef::Env("Z29C_WEBHOOK_SECRET".into())]
    );
}

#[test]
fn a_secret_that_is_not_set_is_refused_naming_it() {
    let source = PAYMENTS.replace("Z29C_PAYMENTS_API_KEY", "Z29C_TEST_SECRET_NOBODY_SETS");
    let spec = AdapterSpec::parse(&source).unwrap();
    let error = DataAdapter::new(spec).unwrap_err();
    assert_eq!(
        error.to_string(),
        "secret `Z29C_TEST_SECRET_NOBODY_SETS` (environment variable) is not set"
    );
}

#[test]
fn the_shipped_protocol_files_declare_the_contracts_of_their_kinds() {
    for kind in ContractKind::ALL {
        let contract =
            engine::adapter::protocol::protocol_spec(kind, "http://127.0.0.1:9", 2_000, 300, false)
                .contract();
        assert_eq!(contract.kind(), kind);
        assert_eq!(
            contract.visibility_window_ms,
            if kind == ContractKind::Queryable {
                300
            } else {
                0
            }
        );
        assert_eq!(contract.idempotency_retention_ms, None);
        assert!(matches!(
            contract.compensation,
            Compensation::SupportedWithLimits(_)
        ));
    }
}

/// The basic payments file: a lookup that walks the customer's list of charges.
const BASIC: &str = include_str!("../../../adapters/payments-basic.yaml");

#[test]
fn the_basic_payments_file_claims_no_key_and_a_lookup_that_walks_pages() {
    let spec = AdapterSpec::parse(BASIC).unwrap();
    let contract = spec.contract();
    assert_eq!(contract.kind(), ContractKind::Queryable);
    assert_eq!(contract.visibility_window_ms, 0);
    assert_eq!(
        contract
            .retry
            .map(|r| (r.attempts, r.backoff_ms, r.max_backoff_ms)),
        Some((5, 500, 30_000))
    );
    let lookup = spec.lookup.as_ref().unwrap();
    assert_eq!(
        lookup.pages.as_ref().map(|p| (p.size, p.max)),
        Some((100, 20))
    );
    assert_eq!(lookup.lets.names().collect::<Vec<_>>(), ["mine", "paid"]);
}

#[test]
fn a_paged_lookup_whose_request_does_not_read_the_page_size_is_refused() {
    let error = refused(&BASIC.replace("limit: \"{{ page.size }}\"", "limit: \"100\""));
    assert!(error.message.contains("page.size"), "{error}");
}

#[test]
fn a_lookup_reading_the_page_without_pages_is_refused() {
    let source = PAYMENTS.replace(
        "query: { query: \"metadata['z29c_key']:'{{ key }}'\" }",
        "query: { query: \"metadata['z29c_key']:'{{ key }}'\", after: \"{{ page.after }}\" }",
    );
    let error = refused(&source);
    assert!(error.message.contains("declares no `pages`"), "{error}");
}

#[test]
fn a_let_name_the_lookup_already_has_is_refused() {
    let error = refused(&PAYMENTS.replace("    paid: \"body.data", "    body: \"body.data"));
    assert!(
        error
            .message
            .contains("`body` is a name the lookup already has"),
        "{error}"
    );
}

#[test]
fn a_let_may_read_the_names_before_it_but_not_after() {
    let source = BASIC.replace(
        "    mine: \"items | selectattr('metadata.z29c_key', 'equalto', key) | list\"\n    paid: \"mine",
        "    paid: \"mine | list\"\n    mine: \"items",
    );
    let error = refused(&source);
    assert!(error.message.contains("reads `mine`"), "{error}");
}

#[test]
fn a_provocation_expecting_two_conclusions_is_refused() {
    let error = refused(&PAYMENTS.replace(
        "expect: { rejected: card_declined }",
        "expect: { rejected: card_declined, failed_before_effect: card_declined }",
    ));
    assert!(error.message.contains("exactly one of"), "{error}");
}

#[test]
fn a_yaml_syntax_error_is_refused_with_its_line_and_column() {
    let error = refused(&MINIMAL.replace("  path: /notes\n", "  path: [/notes\n"));
    assert!(error.line.is_some() && error.column.is_some(), "{error:?}");
    assert!(error.to_string().starts_with("line "), "{error}");
    assert!(error.to_string().contains(", column "), "{error}");
}

#[test]
fn a_retry_budget_outside_its_bounds_is_refused() {
    let error = refused(&BASIC.replace("attempts: 5", "attempts: 0"));
    assert!(error.message.contains("retry.attempts"), "{error}");
    let error = refused(&BASIC.replace("backoff: 500ms", "backoff: soon"));
    assert!(error.message.contains("is not a span of time"), "{error}");
}

#[test]
fn a_breaker_that_trips_after_no_attempt_or_counts_for_a_week_is_refused_with_its_line() {
    let declared = MINIMAL.to_owned() + "breaker:\n  trips_after: 5\n  within: 2m\n";
    let breaker = AdapterSpec::parse(&declared).unwrap().breaker.unwrap();
    assert_eq!(
        (breaker.trips_after, breaker.within.0),
        (5, Duration::from_secs(120))
    );
    let never = refused(&(MINIMAL.to_owned() + "breaker:\n  trips_after: 0\n"));
    assert_eq!(never.line, Some(14), "{never}");
    assert!(never.message.contains("breaker.trips_after"), "{never}");
    let week = refused(&(MINIMAL.to_owned() + "breaker:\n  trips_after: 5\n  within: 168h\n"));
    assert_eq!(week.line, Some(15), "{week}");
}

#[test]
fn limits_of_no_request_a_second_or_no_call_in_flight_are_refused_with_their_line() {
    let declared = MINIMAL.to_owned() + "limits:\n  requests_per_second: 2.5\n  in_flight: 4\n";
    let limits = AdapterSpec::parse(&declared).unwrap().limits.unwrap();
    assert_eq!(
        (limits.requests_per_second, limits.in_flight),
        (Some(2.5), Some(4))
    );
    let none = refused(&(MINIMAL.to_owned() + "limits:\n  requests_per_second: 0\n"));
    assert_eq!(none.line, Some(13), "{none}");
    assert!(
        none.message.contains("limits.requests_per_second"),
        "{none}"
    );
    let stuck = refused(&(MINIMAL.to_owned() + "limits:\n  in_flight: 0\n"));
    assert!(stuck.message.contains("limits.in_flight"), "{stuck}");
    let typo = refused(&(MINIMAL.to_owned() + "limits:\n  rps: 5\n"));
    assert!(typo.message.contains("rps"), "{typo}");
}
