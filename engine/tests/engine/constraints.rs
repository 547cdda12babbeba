//! The database itself refuses what the engine would never write: a digest that is not `sha256:`
//! and 64 lowercase hex digits, on every table that keeps one.

use sqlx::PgPool;
use uuid::Uuid;

const WELL_FORMED: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Digests a check must refuse, each with what is wrong with it.
fn malformed() -> Vec<(&'static str, String)> {
    let hex = &WELL_FORMED["sha256:".len()..];
    vec![
        (
            "upper-case digits",
            format!("sha256:{}", hex.to_uppercase()),
        ),
        ("63 digits", format!("sha256:{}", &hex[1..])),
        ("65 digits", format!("sha256:{hex}0")),
        ("another algorithm", format!("sha512:{hex}")),
        ("no prefix", hex.to_owned()),
        ("a trailing newline", format!("{WELL_FORMED}\n")),
        ("a letter past f", format!("sha256:g{}", &hex[1..])),
        ("a non-ASCII digit", format!("sha256:٣{}", &hex[1..])),
        ("empty", String::new()),
    ]
}

/// The SQLSTATE `statement` failed with, or `None` if it succeeded.
async fn refusal(pool: &PgPool, statement: &str, id: Uuid, digest: &str) -> Option<String> {
    sqlx::query(statement)
        .bind(id)
        .bind(digest)
        .execute(pool)
        .await
        .err()
        .map(|e| e.as_database_error().unwrap().code().unwrap().into_owned())
}

/// `statement`, binding a fresh id and a digest, accepts the well-formed digest and refuses
/// each malformed one as a check violation (23514).
async fn assert_only_well_formed_digests(pool: &PgPool, statement: &str) {
    for (what, digest) in malformed() {
        assert_eq!(
            refusal(pool, statement, Uuid::new_v4(), &digest)
                .await
                .as_deref(),
            Some("23514"),
            "{what}: {digest:?}"
        );
    }
    assert_eq!(
        refusal(pool, statement, Uuid::new_v4(), WELL_FORMED).await,
        None
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_workflows_input_digest_must_be_sha256_and_64_lowercase_hex_digits(pool: PgPool) {
    assert_only_well_formed_digests(
        &pool,
        "insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest)
         values ($1, $1::text, 'document_delivery', 1, '{}', $2)",
    )
    .await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_request_identitys_digest_must_be_sha256_and_64_lowercase_hex_digits(pool: PgPool) {
    assert_only_well_formed_digests(
        &pool,
        "insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version)
         values ($1::text, $1, $2, '{}', 'docs', 1)",
    )
    .await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_corrected_steps_input_digest_must_be_sha256_and_64_lowercase_hex_digits(pool: PgPool) {
    assert_only_well_formed_digests(
        &pool,
        "with w as (
             insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest)
             values (gen_random_uuid(), $1::text, 'document_delivery', 1, '{}',
                     'sha256:' || repeat('0', 64))
             returning id
         )
         insert into step (id, workflow_id, logical, definition_version, kind, state, input, input_digest)
         select $1, w.id, 'render', 1, 'pure', 'ready', '{}', $2 from w",
    )
    .await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_steps_version_counts_its_changes_even_two_made_at_one_instant(pool: PgPool) {
    let h = crate::support::Harness::new(pool, destinations::Kind::Idempotent, 1_000, 0).await;
    let w = h.start("versions").await;
    let step: uuid::Uuid =
        sqlx::query_scalar("select id from step where workflow_id = $1 and logical = 'deliver'")
            .bind(w)
            .fetch_one(&h.pool)
            .await
            .unwrap();
    let version = || async {
        sqlx::query_scalar::<_, i64>("select version from step where id = $1")
            .bind(step)
            .fetch_one(&h.pool)
            .await
            .unwrap()
    };
    let before = version().await;
    // One transaction: `now()` is the same instant for both changes.
    let mut tx = h.pool.begin().await.unwrap();
    for _ in 0..2 {
        sqlx::query("update step set updated_at = now() where id = $1")
            .bind(step)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    assert_eq!(version().await, before + 2);
}
