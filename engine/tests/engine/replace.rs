//! Replacement steps: a new request identity for corrected input, linked to the original and
//! refused where the original request may have had its effect.

use std::time::Duration;

use destinations::{Fault, Kind, Match};
use engine::domain::Role;
use engine::recovery::{Action, ActionError};
use serde_json::json;
use sqlx::PgPool;

use crate::operate::{act, act_later, lost_request, person, reviewing};
use crate::support::{Harness, delay_deliver, once};

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_rejected_step_is_replaced_under_a_new_key_linked_to_the_original(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("replaced").await;
    h.faults(once(Fault::Reject {
        code: "recipient_unknown".into(),
        retryable: false,
    }));
    h.drive_until(w, "deliver", "rejected").await;
    let original: uuid::Uuid =
        sqlx::query_scalar("select id from step where workflow_id = $1 and logical = 'deliver'")
            .bind(w)
            .fetch_one(&pool)
            .await
            .unwrap();

    let replacement = engine::recovery::replace::replace_step(
        &pool,
        original,
        engine::store::journal::Actor::Operator("ada"),
        "recipient corrected at the destination",
    )
    .await
    .unwrap();
    h.drive_until(w, "notify", "succeeded").await;

    let old_key = Harness::key(w, "deliver");
    let new_key = format!("{old_key}/r1");
    assert_eq!(h.effects(&old_key).await, 0);
    assert_eq!(h.effects(&new_key).await, 1);
    let (linked, state): (Option<String>, String) = sqlx::query_as(
        "select q.replaces_key, s.state::text from external_request q join step s on s.id = q.step_id where q.request_key = $1",
    )
    .bind(&new_key)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(state, "succeeded");
    assert_eq!(
        linked,
        Some(old_key),
        "the new request is not linked to the one it replaces"
    );
    let lineage: Option<uuid::Uuid> =
        sqlx::query_scalar("select replaces_step_id from step where id = $1")
            .bind(replacement)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(lineage, Some(original));
    assert!(
        matches!(
            engine::recovery::replace::replace_step(
                &pool,
                original,
                engine::store::journal::Actor::Operator("ada"),
                "again"
            )
            .await,
            Err(engine::recovery::replace::ReplaceError::AlreadyReplaced)
        ),
        "a step was replaced twice"
    );
    assert_eq!(h.workflow_state(w).await, "completed");
    let still: String = sqlx::query_scalar("select state::text from step where id = $1")
        .bind(original)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(still, "rejected", "the original's history was rewritten");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_whose_request_may_have_happened_cannot_be_replaced(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 500, 0).await;
    let w = h.start("no-replace").await;
    h.faults(delay_deliver(Match::Any, 2_000));
    h.drive_until(w, "deliver", "review_required").await;
    let original: uuid::Uuid =
        sqlx::query_scalar("select id from step where workflow_id = $1 and logical = 'deliver'")
            .bind(w)
            .fetch_one(&pool)
            .await
            .unwrap();
    let refused = engine::recovery::replace::replace_step(
        &pool,
        original,
        engine::store::journal::Actor::Operator("ada"),
        "try",
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(engine::recovery::replace::ReplaceError::MayHaveHappened(_))
        ),
        "{refused:?}"
    );
    let steps: i64 = sqlx::query_scalar(
        "select count(*) from step where workflow_id = $1 and logical = 'deliver'",
    )
    .bind(w)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(steps, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_replacement_after_authoritative_absence_runs_on_corrected_input_under_a_new_key(
    pool: PgPool,
) {
    let h = reviewing(pool, Kind::Queryable, 300, 200).await;
    let (w, step) = lost_request(&h, "corrected").await;
    let (alice, carol) = (
        person("alice", Role::Operator),
        person("carol", Role::Approver),
    );
    act_later(
        &h,
        &alice,
        step,
        Action::CheckDestination,
        Duration::from_millis(600),
    )
    .await
    .unwrap();
    let corrected = json!({"adapter": "docs", "recipient": "r-2", "document": {"title": "corrected", "body": "hello"}});

    let refused = act(
        &h,
        &alice,
        step,
        Action::Replace {
            corrected_input: Some(corrected.clone()),
        },
    )
    .await;
    assert!(
        matches!(refused, Err(ActionError::Forbidden(_))),
        "{refused:?}"
    );
    let with_nul = json!({"adapter": "docs", "recipient": "r-2", "document": {"title": "corrected\u{0}", "body": "hello"}});
    let unstorable = act(
        &h,
        &carol,
        step,
        Action::Replace {
            corrected_input: Some(with_nul),
        },
    )
    .await;
    assert!(
        matches!(&unstorable, Err(ActionError::Invalid(s)) if s.contains("NUL character")),
        "{unstorable:?}"
    );
    let done = act(
        &h,
        &carol,
        step,
        Action::Replace {
            corrected_input: Some(corrected),
        },
    )
    .await
    .unwrap();
    assert_ne!(done.step, step);
    h.drive_until(w, "deliver", "succeeded").await;

    let ledger = h.ledger().await;
    assert_eq!(ledger.deliveries.len(), 1);
    assert_eq!(ledger.deliveries[0].recipient, "r-2");
    assert!(
        ledger.deliveries[0].client_reference.ends_with("/r1"),
        "{}",
        ledger.deliveries[0].client_reference
    );
    let (old, new): (String, String) = sqlx::query_as(
        "select details ->> 'old_input_digest', details ->> 'new_input_digest' from audit where action = 'replace'",
    )
    .fetch_one(&h.pool)
    .await
    .unwrap();
    assert_ne!(old, new);
}
