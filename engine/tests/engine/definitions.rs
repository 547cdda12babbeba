//! Definitions as data: applied once, immutable after, and a new one runs without a restart.

use engine::definition::{Applied, ApplyError, ApplyOptions, apply};
use sqlx::PgPool;

const V1: &str = include_str!("../../../definitions/document_delivery.v1.yaml");

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn reapplying_the_same_file_changes_nothing(pool: PgPool) {
    let first = apply(
        &pool,
        V1,
        engine::store::journal::Actor::Engine("test"),
        ApplyOptions::default(),
    )
    .await
    .unwrap();
    let again = apply(
        &pool,
        V1,
        engine::store::journal::Actor::Engine("test"),
        ApplyOptions::default(),
    )
    .await
    .unwrap();

    assert!(
        matches!(first, Applied::Added { version: 1, .. }),
        "{first:?}"
    );
    assert!(
        matches!(again, Applied::Unchanged { version: 1, .. }),
        "{again:?}"
    );
    let stored: i64 = sqlx::query_scalar("select count(*) from definition")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn another_file_under_an_applied_name_and_version_is_refused_with_the_difference(
    pool: PgPool,
) {
    apply(
        &pool,
        V1,
        engine::store::journal::Actor::Engine("test"),
        ApplyOptions::default(),
    )
    .await
    .unwrap();
    let changed = V1.replace(
        "recipient: { type: string, minLength: 1 }",
        "recipient: { type: string, minLength: 3 }",
    );

    let refused = apply(
        &pool,
        &changed,
        engine::store::journal::Actor::Engine("test"),
        ApplyOptions::default(),
    )
    .await
    .unwrap_err();

    let ApplyError::Changed { diff, .. } = &refused else {
        panic!("expected a refusal with a diff, got {refused}");
    };
    assert!(
        diff.contains("-    recipient: { type: string, minLength: 1 }"),
        "{diff}"
    );
    assert!(
        diff.contains("+    recipient: { type: string, minLength: 3 }"),
        "{diff}"
    );
    let source: String = sqlx::query_scalar("select source from definition")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(source, V1, "the stored file is untouched");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_file_with_an_unknown_field_is_refused_with_its_line_and_nothing_is_stored(pool: PgPool) {
    let broken = V1.replace("status_step: deliver", "status_step: deliver\nretries: 3");

    let refused = apply(
        &pool,
        &broken,
        engine::store::journal::Actor::Engine("test"),
        ApplyOptions::default(),
    )
    .await
    .unwrap_err();

    let ApplyError::File(error) = &refused else {
        panic!("expected a file error, got {refused}");
    };
    assert!(error.message.contains("unknown field `retries`"), "{error}");
    assert!(error.line.is_some(), "{error:?}");
    let stored: i64 = sqlx::query_scalar("select count(*) from definition")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_workflow_of_a_definition_applied_after_start_up_starts_without_a_restart(pool: PgPool) {
    let new = engine::intake::NewWorkflow {
        creation_key: "late".into(),
        definition: "document_delivery".into(),
        version: None,
        input: serde_json::json!({"adapter": "docs", "recipient": "r", "document": {"title": "t", "body": "b"}}),
    };
    let before = engine::intake::start_workflow(
        &pool,
        new.clone(),
        engine::store::journal::Actor::Api("test"),
    )
    .await;
    assert!(before.is_err(), "no definition applied yet");

    apply(
        &pool,
        V1,
        engine::store::journal::Actor::Engine("test"),
        ApplyOptions::default(),
    )
    .await
    .unwrap();
    let contract = crate::support::declared("opaque", 1_000, 0, false);
    engine::adapter::apply::register_trusted(&pool, "docs", "http://127.0.0.1:9", &contract)
        .await
        .unwrap();
    let after =
        engine::intake::start_workflow(&pool, new, engine::store::journal::Actor::Api("test"))
            .await;

    assert!(after.is_ok(), "{:?}", after.err());
}
