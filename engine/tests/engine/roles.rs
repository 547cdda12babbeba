//! A role that never allows an action is refused before anything is locked: a viewer's post
//! cannot queue behind a worker or another operator, nor hold a lock of its own.

use std::time::Duration;

use destinations::Kind;
use engine::domain::{Disposition, Role};
use engine::recovery::{Action, ActionError, incident};
use sqlx::PgPool;

use crate::operate::{act, person, reviewing, unknown_delivery};

/// How long a refusal may take before the test reads it as waiting for the lock (the lock is
/// held far longer than this).
const NO_WAIT: Duration = Duration::from_secs(5);

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_viewers_action_on_a_locked_step_is_refused_without_waiting_for_the_lock(pool: PgPool) {
    let h = reviewing(pool, Kind::Opaque, 300, 0).await;
    let (_, step) = unknown_delivery(&h, "viewer-lock", "review_required").await;
    let mut holder = h.pool.begin().await.unwrap();
    sqlx::query("select 1 from step where id = $1 for update")
        .bind(step)
        .execute(&mut *holder)
        .await
        .unwrap();

    let viewer = person("vera", Role::Viewer);
    let answer = tokio::time::timeout(NO_WAIT, act(&h, &viewer, step, Action::RetrySameKey))
        .await
        .expect("the viewer's refusal waited for another transaction's row lock");

    assert!(
        matches!(&answer, Err(ActionError::Forbidden(why)) if why.contains("operator role")),
        "{answer:?}"
    );
    holder.rollback().await.unwrap();
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operators_incident_resolution_is_refused_for_its_role_before_anything_is_read(
    pool: PgPool,
) {
    let operator = person("otto", Role::Operator);
    // No such incident: the role decides before the incident is looked up (or locked).
    let answer = incident::resolve_incident(
        &pool,
        &operator,
        uuid::Uuid::now_v7(),
        "ref-1",
        Disposition::AcceptUnresolved,
        "both deliveries were the same document",
    )
    .await;

    assert!(
        matches!(&answer, Err(ActionError::Forbidden(why)) if why.contains("approver role")),
        "{answer:?}"
    );
}
