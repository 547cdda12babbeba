//! Operator actions against real destinations: each permitted action does what the recovery
//! decision table says (asserted against the destination's own ledger), and every refused
//! one — by role, by contract, by a stale page or a second operator — changes nothing.

use std::time::Duration;

use crate::support::Harness;
use destinations::{Fault, FaultPlan, FaultRule, Kind, Match, Operation};
use engine::domain::Disposition;
use engine::domain::{OperatorAction, Role, permitted_actions, refusal};
use engine::operators::Operator;
use engine::recovery::incident;
use engine::recovery::{self, Action, ActionError, Request};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

pub(crate) fn person(name: &str, role: Role) -> Operator {
    Operator {
        id: Uuid::nil(),
        username: name.to_owned(),
        role,
        via: engine::operators::Via::Console,
        adapters: None,
    }
}

/// A harness whose adapter sends every unknown outcome to review, so a person decides.
/// An operator account `name` with `role`, created in `pool`: one whose standing the engine
/// reads again (a bulk run's author).
pub(crate) async fn enrolled(pool: &PgPool, name: &str, role: Role) -> Operator {
    engine::operators::add(pool, name, role).await.unwrap();
    engine::operators::named(pool, name).await.unwrap().unwrap()
}

pub(crate) async fn reviewing(
    pool: PgPool,
    kind: Kind,
    deadline_ms: u64,
    window_ms: u64,
) -> Harness {
    reviewing_declaring(pool, kind, deadline_ms, window_ms, window_ms).await
}

/// [`reviewing`], with a contract that declares a visibility window of `declared_window_ms`
/// over a destination whose status index lags `index_lag_ms`.
pub(crate) async fn reviewing_declaring(
    pool: PgPool,
    kind: Kind,
    deadline_ms: u64,
    index_lag_ms: u64,
    declared_window_ms: u64,
) -> Harness {
    let mut h = Harness::new(pool, kind, deadline_ms, index_lag_ms).await;
    let contract = crate::support::declared(kind.as_str(), deadline_ms, declared_window_ms, true);
    engine::adapter::apply::register_trusted(&h.pool, "docs", &h.destination.base_url(), &contract)
        .await
        .unwrap();
    h.worker = h.another_worker("worker-r").await;
    h
}

/// Starts a delivery whose answer comes after the deadline (any deadline these tests use, up
/// to a second): the destination has the document, Z29C does not know it. Returns the
/// workflow and its `deliver` step.
pub(crate) async fn unknown_delivery(h: &Harness, key: &str, expected: &str) -> (Uuid, Uuid) {
    let w = h.start(key).await;
    h.faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::ClientReference(Harness::key(w, "deliver")),
        Fault::DelayResponse { ms: 2_500 },
    )
    .times(1)]));
    h.drive_until(w, "deliver", expected).await;
    (w, deliver_step(h, w).await)
}

pub(crate) async fn deliver_step(h: &Harness, w: Uuid) -> Uuid {
    sqlx::query_scalar(
        "select id from step where workflow_id = $1 and logical = 'deliver' and generation = 0",
    )
    .bind(w)
    .fetch_one(&h.pool)
    .await
    .unwrap()
}

pub(crate) async fn version(h: &Harness, step: Uuid) -> i64 {
    let mut conn = h.pool.acquire().await.unwrap();
    engine::store::action::read_facts(&mut conn, step)
        .await
        .unwrap()
        .unwrap()
        .version
}

pub(crate) async fn act(
    h: &Harness,
    who: &Operator,
    step: Uuid,
    action: Action,
) -> Result<recovery::Done, ActionError> {
    act_at(h, who, step, action, None).await
}

/// [`act`], with the visibility window judged `later` than now instead of waiting for it.
pub(crate) async fn act_later(
    h: &Harness,
    who: &Operator,
    step: Uuid,
    action: Action,
    later: Duration,
) -> Result<recovery::Done, ActionError> {
    let at = chrono::Utc::now() + chrono::Duration::from_std(later).unwrap();
    act_at(h, who, step, action, Some(at)).await
}

async fn act_at(
    h: &Harness,
    who: &Operator,
    step: Uuid,
    action: Action,
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<recovery::Done, ActionError> {
    let seen = version(h, step).await;
    let request = Request {
        operator: who,
        step,
        seen_version: Some(seen),
        reason: "the customer asked where the document is",
        action,
    };
    recovery::perform_at(&h.pool, request, at).await
}

pub(crate) async fn audit_actions(h: &Harness, step: Uuid) -> Vec<(String, String)> {
    sqlx::query_as("select actor, action from audit where step_id = $1 order by id")
        .bind(step)
        .fetch_all(&h.pool)
        .await
        .unwrap()
}

/// A request lost before it reached the destination: the destination closes the connection
/// without doing anything (`Fault::LoseRequest`), so Z29C cannot know. The adapter stays the
/// version the request was sent under, whose lookup may then speak for it.
pub(crate) async fn lost_request(h: &Harness, key: &str) -> (Uuid, Uuid) {
    let w = h.start(key).await;
    h.faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::ClientReference(Harness::key(w, "deliver")),
        Fault::LoseRequest {},
    )
    .times(1)]));
    h.drive_until(w, "deliver", "review_required").await;
    (w, deliver_step(h, w).await)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_same_key_retry_after_an_unknown_outcome_delivers_once(pool: PgPool) {
    let h = reviewing(pool, Kind::Idempotent, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "retry", "review_required").await;
    let alice = person("alice", Role::Operator);

    act(&h, &alice, step, Action::RetrySameKey).await.unwrap();
    h.drive_until(w, "deliver", "succeeded").await;

    assert_eq!(
        h.receipt(w, "deliver").await.unwrap().0,
        "idempotent_replay"
    );
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
    assert_eq!(
        h.outcomes(w, "deliver").await,
        vec!["outcome_unknown", "succeeded"]
    );
    assert_eq!(
        audit_actions(&h, step).await,
        vec![("alice".to_owned(), "retry_same_key".to_owned())]
    );
    h.drive_until(w, "notify", "succeeded").await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn two_operators_retrying_at_once_make_one_attempt(pool: PgPool) {
    let h = reviewing(pool, Kind::Idempotent, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "race", "review_required").await;
    let seen = version(&h, step).await;
    let (alice, bob) = (
        person("alice", Role::Operator),
        person("bob", Role::Operator),
    );
    let request = |who| Request {
        operator: who,
        step,
        seen_version: Some(seen),
        reason: "retrying",
        action: Action::RetrySameKey,
    };
    let (a, b) = tokio::join!(
        recovery::perform(&h.pool, request(&alice)),
        recovery::perform(&h.pool, request(&bob))
    );

    assert_eq!(
        u8::from(a.is_ok()) + u8::from(b.is_ok()),
        1,
        "{a:?} / {b:?}"
    );
    let refused = if a.is_ok() { b } else { a };
    assert!(
        matches!(&refused, Err(ActionError::Stale(why)) if why.contains("changed since")),
        "{refused:?}"
    );
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(h.outcomes(w, "deliver").await.len(), 2);
    assert_eq!(audit_actions(&h, step).await.len(), 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_stale_page_changes_nothing(pool: PgPool) {
    let h = reviewing(pool, Kind::Idempotent, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "stale", "review_required").await;
    let before = version(&h, step).await;
    let result = recovery::perform(
        &h.pool,
        Request {
            operator: &person("alice", Role::Approver),
            step,
            seen_version: Some(before - 1),
            reason: "from an old tab",
            action: Action::Waive {
                residual_uncertainty: "the document may have been delivered".into(),
            },
        },
    )
    .await;

    assert!(matches!(result, Err(ActionError::Stale(_))), "{result:?}");
    assert_eq!(version(&h, step).await, before);
    assert_eq!(h.step(w, "deliver").await.0, "review_required");
    assert!(audit_actions(&h, step).await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn checking_inside_the_visibility_window_is_not_proof_and_after_it_verifies(pool: PgPool) {
    // The index shows the delivery at once, but the contract promises only 1.5 s: found inside
    // the window is no proof that no second delivery exists.
    let h = reviewing_declaring(pool, Kind::Queryable, 300, 0, 1_500).await;
    let (w, step) = unknown_delivery(&h, "check", "review_required").await;
    let alice = person("alice", Role::Operator);

    let early = act(&h, &alice, step, Action::CheckDestination)
        .await
        .unwrap();
    assert!(
        early.message.contains("Check again after"),
        "{}",
        early.message
    );
    assert_eq!(h.step(w, "deliver").await.0, "review_required");
    let retry = act(&h, &alice, step, Action::RetrySameKey).await;
    assert!(
        matches!(retry, Err(ActionError::NotPermitted(_))),
        "a not-found inside the window unlocked a retry: {retry:?}"
    );

    let late = act_later(
        &h,
        &alice,
        step,
        Action::CheckDestination,
        Duration::from_millis(1_600),
    )
    .await
    .unwrap();
    assert!(
        late.message.contains("Verified from external reference"),
        "{}",
        late.message
    );
    let (method, reference) = h.receipt(w, "deliver").await.unwrap();
    assert_eq!(method, "status_query");
    assert_eq!(h.ledger().await.deliveries[0].external_reference, reference);
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
    assert_eq!(
        audit_actions(&h, step).await,
        vec![
            ("alice".to_owned(), "check_destination".to_owned()),
            ("alice".to_owned(), "check_destination".to_owned())
        ]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn authoritative_absence_unlocks_a_retry_under_the_same_reference(pool: PgPool) {
    let h = reviewing(pool, Kind::Queryable, 300, 200).await;
    let (w, step) = lost_request(&h, "lost").await;
    let alice = person("alice", Role::Operator);

    let checked = act_later(
        &h,
        &alice,
        step,
        Action::CheckDestination,
        Duration::from_millis(600),
    )
    .await
    .unwrap();
    assert!(
        checked.message.contains("authoritative"),
        "{}",
        checked.message
    );
    act(&h, &alice, step, Action::RetrySameKey).await.unwrap();
    h.drive_until(w, "deliver", "succeeded").await;

    assert_eq!(h.receipt(w, "deliver").await.unwrap().0, "direct_response");
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_opaque_adapter_allows_another_attempt_only_by_an_approver_who_acknowledges_the_risk(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Opaque, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "opaque", "review_required").await;
    let (alice, carol) = (
        person("alice", Role::Operator),
        person("carol", Role::Approver),
    );
    let unacknowledged = Action::AuthorizeAnotherAttempt {
        acknowledged_duplicate_risk: false,
    };
    let acknowledged = Action::AuthorizeAnotherAttempt {
        acknowledged_duplicate_risk: true,
    };

    assert!(matches!(
        act(&h, &carol, step, Action::RetrySameKey).await,
        Err(ActionError::NotPermitted(_))
    ));
    assert!(matches!(
        act(&h, &alice, step, acknowledged.clone()).await,
        Err(ActionError::Forbidden(_))
    ));
    assert!(matches!(
        act(&h, &carol, step, unacknowledged).await,
        Err(ActionError::Invalid(_))
    ));
    act(&h, &carol, step, acknowledged).await.unwrap();
    h.drive_until(w, "deliver", "succeeded").await;

    let authorized: Vec<Option<Uuid>> = sqlx::query_scalar(
        "select authorization_id from attempt where step_id = $1 order by number",
    )
    .bind(step)
    .fetch_all(&h.pool)
    .await
    .unwrap();
    assert!(
        authorized[0].is_none() && authorized[1].is_some(),
        "{authorized:?}"
    );
    // The risk the approver acknowledged is real: the destination holds two documents.
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 2);
    let violations = engine::watch::invariants::check(&h.pool).await.unwrap();
    assert!(
        !violations
            .iter()
            .any(|v| v.kind == "opaque_retry_without_authorization"),
        "{violations:?}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn manual_evidence_becomes_a_receipt_that_releases_the_dependant(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "evidence", "review_required").await;
    let reference = h.ledger().await.deliveries[0].external_reference.clone();

    act(
        &h,
        &person("alice", Role::Operator),
        step,
        Action::AttachEvidence {
            external_reference: reference.clone(),
            evidence: "the destination's support desk confirmed it by phone".into(),
        },
    )
    .await
    .unwrap();
    h.drive_until(w, "notify", "succeeded").await;

    let (method, attached): (String, String) = sqlx::query_as(
        "select method::text, external_reference from receipt where step_id = $1 and author = 'alice'",
    )
    .bind(step)
    .fetch_one(&h.pool)
    .await
    .unwrap();
    assert_eq!((method.as_str(), attached), ("manual_evidence", reference));
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
    assert_eq!(h.workflow_state(w).await, "completed");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_waiver_names_the_residual_uncertainty_and_satisfies_no_dependant_that_refuses_one(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Opaque, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "waive", "review_required").await;
    let waive = Action::Waive {
        residual_uncertainty: "the document may or may not have reached the customer".into(),
    };

    assert!(matches!(
        act(&h, &person("alice", Role::Operator), step, waive.clone()).await,
        Err(ActionError::Forbidden(_))
    ));
    act(&h, &person("carol", Role::Approver), step, waive)
        .await
        .unwrap();
    h.drive_for(Duration::from_millis(200)).await;

    assert_eq!(h.step(w, "deliver").await.0, "waived");
    let residual: String =
        sqlx::query_scalar("select residual_uncertainty from waiver where step_id = $1")
            .bind(step)
            .fetch_one(&h.pool)
            .await
            .unwrap();
    assert!(residual.contains("may or may not"));
    assert_eq!(h.step(w, "notify").await.0, "blocked");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn cancelling_during_an_unknown_outcome_stops_all_further_work(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "cancel", "review_required").await;

    let done = act(&h, &person("carol", Role::Approver), step, Action::Cancel)
        .await
        .unwrap();
    h.drive_for(Duration::from_millis(200)).await;

    assert!(
        done.message.contains("may still have happened"),
        "{}",
        done.message
    );
    assert_eq!(h.step(w, "deliver").await, ("cancelled".to_owned(), 1));
    assert_eq!(h.step(w, "notify").await.0, "cancelled");
    assert_eq!(h.workflow_state(w).await, "cancelled");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn cancelling_after_a_receipt_requests_withdrawal_as_a_step_of_its_own(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("withdraw").await;
    h.drive_until(w, "notify", "succeeded").await;
    let step = deliver_step(&h, w).await;
    let (_, reference) = h.receipt(w, "deliver").await.unwrap();

    act(&h, &person("carol", Role::Approver), step, Action::Cancel)
        .await
        .unwrap();
    let requested = engine::read::status::project(&h.pool, w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        requested.status,
        "Delivery cancelled after it was made; withdrawal requested"
    );
    h.drive_until(w, "deliver.withdrawal", "succeeded").await;
    let done = engine::read::status::project(&h.pool, w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, "Delivery withdrawn after cancellation");

    let ledger = h.ledger().await;
    assert_eq!(ledger.withdrawals.len(), 1);
    assert_eq!(ledger.withdrawals[0].external_reference, reference);
    let (state, withdrawal): (String, String) = sqlx::query_as(
        "select r.completion_state, r.external_reference from receipt r join step s on s.id = r.step_id
         where s.workflow_id = $1 and s.kind = 'compensation'",
    )
    .bind(w)
    .fetch_one(&h.pool)
    .await
    .unwrap();
    assert_eq!(state, "withdrawn");
    assert_eq!(withdrawal, ledger.withdrawals[0].withdrawal_reference);
    assert_eq!(
        h.step(w, "deliver").await.0,
        "succeeded",
        "the original receipt stays"
    );
}

/// A queryable destination that already holds one delivery under the request's reference
/// (an earlier system sent it), then Z29C's own delivery times out: the lookup finds two.
pub(crate) async fn duplicate(h: &Harness, key: &str) -> (Uuid, Uuid, Vec<String>) {
    let w = h.start(key).await;
    let reference = Harness::key(w, "deliver");
    h.drive_until(w, "deliver", "ready").await;
    let digest: String = sqlx::query_scalar(
        "select output ->> 'document_digest' from step where workflow_id = $1 and logical = 'render'",
    )
    .bind(w)
    .fetch_one(&h.pool)
    .await
    .unwrap();
    reqwest::Client::new()
        .post(format!("{}/deliveries", h.destination.base_url()))
        .json(&json!({"client_reference": reference, "digest": digest, "recipient": "r-1", "summary": "sent by the previous system"}))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    h.faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::ClientReference(reference.clone()),
        Fault::DelayResponse { ms: 800 },
    )
    .times(1)]));
    h.drive_until(w, "deliver", "succeeded").await;
    let step = deliver_step(h, w).await;
    let incident: Uuid = sqlx::query_scalar(
        "select id from integrity_incident where step_id = $1 and resolved_at is null",
    )
    .bind(step)
    .fetch_one(&h.pool)
    .await
    .unwrap();
    let references = h
        .ledger()
        .await
        .deliveries
        .into_iter()
        .map(|d| d.external_reference)
        .collect();
    (w, incident, references)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_duplicate_resolved_by_withdrawal_reads_completed_with_the_duplicate_withdrawn(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Queryable, 300, 0).await;
    let (w, incident, references) = duplicate(&h, "dup").await;
    assert_eq!(references.len(), 2);
    assert_eq!(
        h.step(w, "notify").await.0,
        "blocked",
        "ran past an open incident"
    );
    let carol = person("carol", Role::Approver);

    let refused = incident::resolve_incident(
        &h.pool,
        &person("alice", Role::Operator),
        incident,
        &references[0],
        Disposition::Withdraw,
        "the first one stands",
    )
    .await;
    assert!(
        matches!(refused, Err(ActionError::Forbidden(_))),
        "{refused:?}"
    );
    incident::resolve_incident(
        &h.pool,
        &carol,
        incident,
        &references[0],
        Disposition::Withdraw,
        "the first one stands",
    )
    .await
    .unwrap();
    let again = incident::resolve_incident(
        &h.pool,
        &carol,
        incident,
        &references[1],
        Disposition::AcceptUnresolved,
        "changed my mind",
    )
    .await;
    assert!(matches!(again, Err(ActionError::Conflict(_))), "{again:?}");
    let pending = engine::read::status::project(&h.pool, w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        pending.status,
        "Completed with duplicate effect; withdrawal of the duplicate requested"
    );
    h.drive_until(w, "deliver.withdrawal", "succeeded").await;
    h.drive_until(w, "notify", "succeeded").await;

    let ledger = h.ledger().await;
    assert_eq!(ledger.withdrawals.len(), 1);
    assert_eq!(ledger.withdrawals[0].external_reference, references[1]);
    let status = engine::read::status::project(&h.pool, w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status.status,
        "Completed with duplicate effect; duplicate withdrawn"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_duplicate_accepted_as_unresolved_never_reads_as_plain_success(pool: PgPool) {
    let h = Harness::new(pool, Kind::Queryable, 300, 0).await;
    let (w, incident, references) = duplicate(&h, "dup-kept").await;

    let bogus = incident::resolve_incident(
        &h.pool,
        &person("carol", Role::Approver),
        incident,
        "x-not-one-of-them",
        Disposition::AcceptUnresolved,
        "keep both",
    )
    .await;
    assert!(matches!(bogus, Err(ActionError::Invalid(_))), "{bogus:?}");
    incident::resolve_incident(
        &h.pool,
        &person("carol", Role::Approver),
        incident,
        &references[1],
        Disposition::AcceptUnresolved,
        "the customer keeps both copies",
    )
    .await
    .unwrap();
    h.drive_until(w, "notify", "succeeded").await;

    assert!(h.ledger().await.withdrawals.is_empty());
    let status = engine::read::status::project(&h.pool, w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.status, "Completed with unresolved duplicate");
}

/// Every action × role on an unknown and a settled step under `kind`'s contract: whatever the
/// decision table refuses is refused by `perform` with the same reason, and changes nothing.
async fn refusals_are_enforced(kind: Kind, pool: PgPool) {
    let roles = [Role::Viewer, Role::Operator, Role::Approver];
    let actions = [
        Action::CheckDestination,
        Action::RetrySameKey,
        Action::AttachEvidence {
            external_reference: "x-1".into(),
            evidence: "seen".into(),
        },
        Action::Waive {
            residual_uncertainty: "unknown".into(),
        },
        Action::AuthorizeAnotherAttempt {
            acknowledged_duplicate_risk: true,
        },
        Action::Cancel,
        Action::Replace {
            corrected_input: None,
        },
    ];
    let mut refused = 0;
    let h = reviewing(pool, kind, 300, 60_000).await;
    let (_, unknown) = unknown_delivery(&h, "matrix", "review_required").await;
    let w = h.start("matrix-done").await;
    h.drive_until(w, "notify", "succeeded").await;
    let settled = deliver_step(&h, w).await;
    {
        for step in [unknown, settled] {
            let mut conn = h.pool.acquire().await.unwrap();
            let locked = engine::store::action::read_facts(&mut conn, step)
                .await
                .unwrap()
                .unwrap();
            drop(conn);
            let facts = locked.decision_facts().unwrap();
            for role in roles {
                for action in &actions {
                    let kind_of = action.kind();
                    let Some(why) = refusal(&facts, role, kind_of) else {
                        continue;
                    };
                    let result = act(&h, &person("someone", role), step, action.clone()).await;
                    match result {
                        Err(ActionError::Forbidden(_)) => assert!(!role.may(kind_of)),
                        Err(ActionError::NotPermitted(text)) => assert_eq!(text, why),
                        other => panic!(
                            "{kind:?} {role:?} {kind_of:?} on {:?}: {other:?}",
                            facts.state
                        ),
                    }
                    assert_eq!(version(&h, step).await, locked.version);
                    refused += 1;
                }
            }
            assert!(audit_actions(&h, step).await.is_empty());
            // What remains permitted is exactly what the page offers.
            let offered = permitted_actions(&facts);
            assert!(!offered.contains(&OperatorAction::ResolveIncident));
        }
    }
    assert!(refused >= 20, "only {refused} refusals exercised");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_refusal_under_an_idempotent_contract_is_enforced_by_the_server(pool: PgPool) {
    refusals_are_enforced(Kind::Idempotent, pool).await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_refusal_under_a_queryable_contract_is_enforced_by_the_server(pool: PgPool) {
    refusals_are_enforced(Kind::Queryable, pool).await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_refusal_under_an_opaque_contract_is_enforced_by_the_server(pool: PgPool) {
    refusals_are_enforced(Kind::Opaque, pool).await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_database_refusal_during_an_action_answers_a_sentence_without_driver_text(pool: PgPool) {
    let h = reviewing(pool, Kind::Queryable, 300, 0).await;
    let (w, step) = unknown_delivery(&h, "refused", "review_required").await;
    // Any lookup's observation now violates a constraint, as a schema drift or a full disk would.
    sqlx::query(
        "alter table observation add constraint observation_refused check (false) not valid",
    )
    .execute(&h.pool)
    .await
    .unwrap();
    let alice = person("alice", Role::Operator);

    let refused = act(&h, &alice, step, Action::CheckDestination)
        .await
        .unwrap_err();

    let sentence = refused.to_string();
    assert!(matches!(refused, ActionError::Destination), "{refused:?}");
    for driver_text in [
        "observation_refused",
        "constraint",
        "violates",
        "error returned",
    ] {
        assert!(!sentence.contains(driver_text), "{sentence}");
    }
    assert!(sentence.ends_with('.'), "{sentence}");
    assert_eq!(h.step(w, "deliver").await.0, "review_required");
}
