//! Four eyes where money moves (docs/DESIGN.md §20): when an adapter's file says waiving or
//! authorizing another attempt needs two approvers, the first approver's action is a proposal;
//! only a different person — never the proposer, nor a token issued to them — confirms it
//! before it expires, and the waiver or authorization it makes names both people and reasons.

use destinations::Kind;
use engine::adapter::spec::{FourEyes, Span};
use engine::domain::{OperatorAction, Role};
use engine::operators::Operator;
use engine::recovery::four_eyes::{confirm, decline};
use engine::recovery::{Action, ActionError};
use engine::store::journal::Actor;
use engine::store::token::NewToken;
use sqlx::PgPool;
use uuid::Uuid;

use crate::operate::{act, person, reviewing, unknown_delivery};
use crate::support::Harness;

/// Stamps `docs`'s current version with a file that says `actions` need two approvers: the
/// same protocol adapter, declared in a file as a team would write it.
async fn needing_two_approvers(h: &Harness, kind: Kind, actions: Vec<OperatorAction>) {
    let contract = crate::support::declared(kind.as_str(), 300, 0, true);
    let mut spec =
        engine::adapter::protocol::protocol_spec_claiming(&h.destination.base_url(), &contract);
    spec.four_eyes = Some(FourEyes {
        actions,
        expires_after: Span(std::time::Duration::from_secs(3600)),
    });
    let file = serde_json::to_string(&spec).unwrap();
    engine::adapter::AdapterSpec::parse(&file).expect("the file is valid");
    sqlx::query("update adapter set source = $1 where name = 'docs'")
        .bind(file)
        .execute(&h.pool)
        .await
        .unwrap();
}

fn waive() -> Action {
    Action::Waive {
        residual_uncertainty: "the customer confirmed receipt by phone".into(),
    }
}

async fn state(h: &Harness, step: Uuid) -> String {
    sqlx::query_scalar("select state::text from step where id = $1")
        .bind(step)
        .fetch_one(&h.pool)
        .await
        .unwrap()
}

async fn waiting_proposal(h: &Harness, step: Uuid) -> Uuid {
    engine::store::proposal::waiting(&h.pool, step)
        .await
        .unwrap()
        .expect("a proposal waits")
        .id
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_waiver_needing_two_approvers_waits_as_a_proposal_until_a_second_person_confirms_it(
    pool: PgPool,
) {
    let h = reviewing(pool, Kind::Opaque, 300, 0).await;
    needing_two_approvers(&h, Kind::Opaque, vec![OperatorAction::Waive]).await;
    let (_, step) = unknown_delivery(&h, "four-eyes-waive", "review_required").await;
    let alice = person("alice", Role::Approver);

    let proposed = act(&h, &alice, step, waive()).await.unwrap();
    assert!(
        proposed.message.starts_with("Proposed"),
        "{}",
        proposed.message
    );
    assert_eq!(
        state(&h, step).await,
        "review_required",
        "nothing was waived yet"
    );
    let proposal = waiting_proposal(&h, step).await;
    let again = act(&h, &person("bob", Role::Approver), step, waive()).await;
    assert!(
        matches!(again, Err(ActionError::Conflict(_))),
        "one proposal waits at a time: {again:?}"
    );

    let own = confirm(&h.pool, &alice, proposal, "looks right").await;
    assert!(matches!(own, Err(ActionError::Forbidden(_))), "{own:?}");
    let operator = confirm(&h.pool, &person("olga", Role::Operator), proposal, "fine").await;
    assert!(
        matches!(operator, Err(ActionError::Forbidden(_))),
        "{operator:?}"
    );
    assert_eq!(state(&h, step).await, "review_required");

    confirm(
        &h.pool,
        &person("bob", Role::Approver),
        proposal,
        "checked the call log",
    )
    .await
    .unwrap();
    assert_eq!(state(&h, step).await, "waived");
    let (author, reason, proposed_by, proposal_reason): (String, String, String, String) =
        sqlx::query_as(
            "select w.author, w.reason, p.proposed_by, p.reason from waiver w
             join proposal p on p.id = w.proposal_id where w.step_id = $1",
        )
        .bind(step)
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert_eq!(
        (author.as_str(), reason.as_str(), proposed_by.as_str()),
        ("bob", "checked the call log", "alice")
    );
    assert_eq!(proposal_reason, "the customer asked where the document is");
    let audited: Vec<(String, String, serde_json::Value)> =
        sqlx::query_as("select action, actor, details from audit where step_id = $1 order by id")
            .bind(step)
            .fetch_all(&h.pool)
            .await
            .unwrap();
    let actions: Vec<(&str, &str)> = audited
        .iter()
        .map(|(a, b, _)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(actions, [("propose", "alice"), ("waive", "bob")]);
    assert_eq!(audited[1].2["four_eyes"]["proposed_by"], "alice");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_token_issued_to_the_proposer_an_expired_proposal_and_a_declined_one_change_nothing(
    pool: PgPool,
) {
    let h = reviewing(pool, Kind::Opaque, 300, 0).await;
    needing_two_approvers(&h, Kind::Opaque, vec![OperatorAction::Waive]).await;
    let (_, step) = unknown_delivery(&h, "four-eyes-token", "review_required").await;
    act(&h, &person("alice", Role::Approver), step, waive())
        .await
        .unwrap();
    let proposal = waiting_proposal(&h, step).await;

    let new = NewToken {
        name: "alices-script",
        role: Role::Approver,
        creation_key_prefix: None,
        may_configure: false,
        adapters: None,
        on_behalf_of: Some("alice"),
    };
    let secret = engine::store::token::create(&h.pool, &new, Actor::Engine("test"))
        .await
        .unwrap();
    let grant = engine::store::token::verify(&h.pool, &secret)
        .await
        .unwrap()
        .unwrap();
    let script = Operator::token(&grant);
    let refused = confirm(&h.pool, &script, proposal, "confirming my own").await;
    let Err(ActionError::Forbidden(sentence)) = refused else {
        panic!("alice's token confirmed alice's proposal: {refused:?}");
    };
    assert!(sentence.contains("alice proposed this"), "{sentence}");

    sqlx::query("update proposal set proposed_at = now() - interval '2 hours', expires_at = now() - interval '1 hour'")
        .execute(&h.pool)
        .await
        .unwrap();
    let late = confirm(&h.pool, &person("bob", Role::Approver), proposal, "late").await;
    assert!(
        matches!(late, Err(ActionError::Conflict(ref s)) if s.contains("expired")),
        "{late:?}"
    );
    assert_eq!(state(&h, step).await, "review_required");

    act(&h, &person("alice", Role::Approver), step, waive())
        .await
        .unwrap();
    let second = waiting_proposal(&h, step).await;
    assert_ne!(
        second, proposal,
        "an expired proposal gives way to a new one"
    );
    decline(
        &h.pool,
        &person("bob", Role::Approver),
        second,
        "the customer has not confirmed",
    )
    .await
    .unwrap();
    assert_eq!(state(&h, step).await, "review_required");
    let decided: Vec<(String, Option<String>)> = sqlx::query_as(
        "select decision, decided_by from proposal where step_id = $1 order by proposed_at",
    )
    .bind(step)
    .fetch_all(&h.pool)
    .await
    .unwrap();
    assert_eq!(
        decided,
        [
            ("expired".to_owned(), None),
            ("declined".to_owned(), Some("bob".to_owned()))
        ]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn another_attempt_confirmed_by_a_second_approver_is_sent_carrying_the_proposal(
    pool: PgPool,
) {
    let h = reviewing(pool, Kind::Opaque, 300, 0).await;
    needing_two_approvers(
        &h,
        Kind::Opaque,
        vec![OperatorAction::AuthorizeAnotherAttempt],
    )
    .await;
    let (w, step) = unknown_delivery(&h, "four-eyes-again", "review_required").await;
    let again = Action::AuthorizeAnotherAttempt {
        acknowledged_duplicate_risk: true,
    };
    act(&h, &person("alice", Role::Approver), step, again)
        .await
        .unwrap();
    h.drive_for(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        state(&h, step).await,
        "review_required",
        "no attempt before the second approver"
    );
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);

    let proposal = waiting_proposal(&h, step).await;
    confirm(
        &h.pool,
        &person("carol", Role::Approver),
        proposal,
        "the provider lost it, ticket 4411",
    )
    .await
    .unwrap();
    h.drive_until(w, "deliver", "succeeded").await;
    let (carried, author): (Option<Uuid>, String) = sqlx::query_as(
        "select a.proposal_id, a.author from attempt_start s
         join operator_authorization a on a.id = s.authorization_id where s.step_id = $1",
    )
    .bind(step)
    .fetch_one(&h.pool)
    .await
    .unwrap();
    assert_eq!((carried, author.as_str()), (Some(proposal), "carol"));
    assert_eq!(
        h.effects(&Harness::key(w, "deliver")).await,
        2,
        "the risk the approvers accepted"
    );

    let (_, other) = unknown_delivery(&h, "four-eyes-one", "review_required").await;
    act(&h, &person("bob", Role::Approver), other, waive())
        .await
        .unwrap();
    assert_eq!(
        state(&h, other).await,
        "waived",
        "an action the file does not name needs one approver"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn accepting_a_duplicate_as_unresolved_waits_for_a_second_approver(pool: PgPool) {
    use engine::domain::Disposition;
    use engine::recovery::incident::resolve_incident;

    let h = Harness::new(pool, Kind::Queryable, 300, 0).await;
    needing_two_approvers(&h, Kind::Queryable, vec![OperatorAction::ResolveIncident]).await;
    let (w, incident, references) = crate::operate::duplicate(&h, "four-eyes-dup").await;
    let step = crate::operate::deliver_step(&h, w).await;
    let alice = person("alice", Role::Approver);
    let accept = Disposition::AcceptUnresolved;
    let proposed = resolve_incident(
        &h.pool,
        &alice,
        incident,
        &references[0],
        accept,
        "both letters harm no one",
    )
    .await
    .unwrap();
    assert!(
        proposed.message.starts_with("Proposed"),
        "{}",
        proposed.message
    );
    let open = || async {
        sqlx::query_scalar::<_, bool>(
            "select resolved_at is null from integrity_incident where id = $1",
        )
        .bind(incident)
        .fetch_one(&h.pool)
        .await
        .unwrap()
    };
    assert!(open().await, "nothing was resolved yet");

    let proposal = waiting_proposal(&h, step).await;
    confirm(
        &h.pool,
        &person("bob", Role::Approver),
        proposal,
        "agreed with the customer",
    )
    .await
    .unwrap();
    assert!(!open().await, "resolved once a second approver confirmed");
    let (actor, details): (String, serde_json::Value) = sqlx::query_as(
        "select actor, details from audit where step_id = $1 and action = 'resolve_incident'",
    )
    .bind(step)
    .fetch_one(&h.pool)
    .await
    .unwrap();
    assert_eq!(actor, "bob");
    assert_eq!(details["four_eyes"]["proposed_by"], "alice");
    assert_eq!(details["canonical"], references[0]);
}
