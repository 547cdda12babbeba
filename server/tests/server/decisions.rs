//! One table of decisions drives two tests: every recovery action, by every role, on a step
//! under review behind each contract kind, taken once through the API and once through the
//! console's form, must meet the same decision (done, or refused with the same sentence).

use engine::domain::{ContractKind, OperatorAction, Role};
use http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::api::{call, token};
use crate::console::{action_form, fixture_review_step, input_value, signed_in};

/// What the contract permits on a step under review whose request was never sent (no key
/// bound, no lookup yet), by kind: the rest of the actions are refused by the contract.
const PERMITTED: [(ContractKind, &[OperatorAction]); 3] = [
    (
        ContractKind::Opaque,
        &[
            OperatorAction::Waive,
            OperatorAction::AuthorizeAnotherAttempt,
            OperatorAction::Cancel,
        ],
    ),
    (
        ContractKind::Idempotent,
        &[
            OperatorAction::RetrySameKey,
            OperatorAction::Waive,
            OperatorAction::Cancel,
        ],
    ),
    (
        ContractKind::Queryable,
        &[
            OperatorAction::CheckDestination,
            OperatorAction::Waive,
            OperatorAction::Cancel,
        ],
    ),
];

const ACTIONS: [OperatorAction; 7] = [
    OperatorAction::CheckDestination,
    OperatorAction::RetrySameKey,
    OperatorAction::AttachEvidence,
    OperatorAction::Waive,
    OperatorAction::AuthorizeAnotherAttempt,
    OperatorAction::Cancel,
    OperatorAction::Replace,
];

/// What the table says must happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    /// Done; for *Check destination*, the lookup went out and its answer (none: nobody listens
    /// at the destination's address) is on the step's timeline.
    Done,
    /// Refused by the role, before anything is read.
    Role,
    /// Refused by the contract in this state.
    Contract,
}

fn expected(kind: ContractKind, role: Role, action: OperatorAction) -> Expected {
    let permitted = PERMITTED.iter().find(|(k, _)| *k == kind).unwrap().1;
    if !role.may(action) {
        Expected::Role
    } else if !permitted.contains(&action) {
        Expected::Contract
    } else {
        Expected::Done
    }
}

/// What one channel answered: done, or refused with a sentence.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Done,
    Refused(String),
}

/// The fields every action's form carries, for `action`.
fn fields(action: OperatorAction) -> Value {
    match action {
        OperatorAction::AttachEvidence => {
            json!({"external_reference": "ext-1", "evidence": "the provider's dashboard shows it"})
        }
        OperatorAction::Waive => json!({"residual_uncertainty": "the letter may have been sent"}),
        OperatorAction::AuthorizeAnotherAttempt => json!({"acknowledge_duplicate_risk": true}),
        OperatorAction::CheckDestination
        | OperatorAction::RetrySameKey
        | OperatorAction::Cancel
        | OperatorAction::Replace
        | OperatorAction::ResolveIncident => json!({}),
    }
}

async fn by_api(pool: &PgPool, role: Role, step: Uuid, action: OperatorAction) -> (Answer, String) {
    let name = format!("tok-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let secret = token(pool, &name, role, None).await;
    let mut body = fields(action);
    body["reason"] = json!("decided by the table");
    let (status, answer) = call(
        pool,
        "POST",
        &format!("/api/v1/steps/{step}/actions/{}", action.name()),
        Some(&secret),
        Some(body.to_string()),
    )
    .await;
    let code = answer["code"].as_str().unwrap_or("done").to_owned();
    if status == StatusCode::OK {
        (Answer::Done, code)
    } else {
        let sentence = answer["error"].as_str().unwrap_or_default().to_owned();
        assert!(!sentence.is_empty(), "{status}: {answer}");
        (Answer::Refused(sentence), code)
    }
}

async fn by_console(pool: &PgPool, role: Role, step: Uuid, action: OperatorAction) -> Answer {
    // The form's address from an approver's page (a viewer's page draws no action form), the
    // version as the page carries it, and this session's own CSRF token.
    let mut approver = signed_in(pool, Role::Approver).await;
    let (uri, version, _) = action_form(&mut approver, step).await;
    let mut browser = signed_in(pool, role).await;
    let (_, page) = browser.get(&format!("/steps/{step}")).await;
    let csrf = input_value(&page, "csrf");
    let extra = fields(action);
    let mut form: Vec<(String, String)> = vec![
        ("step".into(), step.to_string()),
        ("version".into(), version),
        ("csrf".into(), csrf),
        ("action".into(), action.name().into()),
        ("reason".into(), "decided by the table".into()),
    ];
    for (k, v) in extra.as_object().unwrap() {
        let v = match v {
            Value::Bool(true) => "on".to_owned(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        form.push((k.clone(), v));
    }
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, body) = browser.post(&uri, &form).await;
    if status.is_success() || status.is_redirection() {
        return Answer::Done;
    }
    // The console answers `{"Variant": {"reason" | "why": sentence}}`.
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let sentence = parsed
        .as_object()
        .and_then(|o| o.values().next())
        .and_then(|v| v.as_object())
        .and_then(|o| o.values().next())
        .and_then(Value::as_str)
        .unwrap_or(&body)
        .to_owned();
    Answer::Refused(sentence)
}

/// The audit entries of `step` for `action`: (actor, actor kind).
async fn audited(pool: &PgPool, step: Uuid, action: OperatorAction) -> Vec<(String, String)> {
    sqlx::query_as("select actor, actor_kind from audit where step_id = $1 and action = $2")
        .bind(step)
        .bind(action.name())
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_action_by_every_role_on_every_contract_kind_meets_the_same_decision_over_the_api_as_in_the_console(
    pool: PgPool,
) {
    let mut n = 0;
    for (kind, _) in PERMITTED {
        for role in [Role::Viewer, Role::Operator, Role::Approver] {
            for action in ACTIONS {
                n += 1;
                let want = expected(kind, role, action);
                let through_api = fixture_review_step(&pool, kind, &format!("api-{n}")).await;
                let (api, code) = by_api(&pool, role, through_api, action).await;
                let through_console =
                    fixture_review_step(&pool, kind, &format!("console-{n}")).await;
                let console = by_console(&pool, role, through_console, action).await;
                let case = format!("{kind:?} {role:?} {}", action.name());
                assert_eq!(api, console, "{case}: the API and the console disagree");
                let got = match (&api, code.as_str()) {
                    (Answer::Done, _) => Expected::Done,
                    (Answer::Refused(_), "forbidden") => Expected::Role,
                    (Answer::Refused(_), "not_permitted") => Expected::Contract,
                    (Answer::Refused(why), other) => panic!("{case}: {other}: {why}"),
                };
                assert_eq!(got, want, "{case}: {api:?}");
                let api_audit = audited(&pool, through_api, action).await;
                if want == Expected::Done {
                    assert!(
                        api_audit.iter().any(|(_, kind)| kind == "api"),
                        "{case}: the audit log does not name the token: {api_audit:?}"
                    );
                }
                if want == Expected::Role || want == Expected::Contract {
                    assert!(
                        api_audit.is_empty(),
                        "{case}: a refusal was audited as done"
                    );
                }
            }
        }
    }
}
