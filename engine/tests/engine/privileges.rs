//! The role Z29C runs as (docs/DESIGN.md §15): what the engine writes it may write, and no
//! record that is never changed can it rewrite, empty or drop.

use engine::embedded_pg::{APP_ROLE, Durability, EmbeddedPostgres};
use sqlx::{Connection, PgConnection, PgPool};

/// Statements the application role is refused, each with what it would have done.
const REFUSED: [&str; 13] = [
    "truncate audit",
    "truncate step",
    "delete from audit",
    "update outbox set payload = payload",
    "delete from receipt",
    "update definition set source = source",
    "update adapter_version set source = source",
    "alter table step add column smuggled integer",
    "drop table audit",
    // A tombstone only the archiver's function writes, so no evidence leaves without one.
    "insert into archived_workflow select * from archived_workflow",
    "delete from archived_workflow",
    // Where the archive keeps a copy of a workflow back hot: only reconciling notes it.
    "insert into archived_copy select * from archived_copy",
    "delete from archived_copy",
];

/// Each statement of [`REFUSED`] is refused on `conn` for want of a privilege.
async fn refused_everything(conn: &mut PgConnection) {
    for statement in REFUSED {
        let error = sqlx::query(statement)
            .execute(&mut *conn)
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("permission denied") || text.contains("must be owner"),
            "{statement}: {text}"
        );
    }
}

/// A new role granted what the role Z29C runs as is granted (`z29c_grant_application`); its
/// name.
pub(crate) async fn application_role(pool: &PgPool) -> String {
    let role = format!("z29c_app_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("create role {role}"))
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("select z29c_grant_application($1)")
        .bind(&role)
        .execute(pool)
        .await
        .unwrap();
    role
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_application_role_cannot_truncate_update_or_delete_what_is_never_changed(pool: PgPool) {
    let role = application_role(&pool).await;
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query(&format!("set role {role}"))
        .execute(&mut *conn)
        .await
        .unwrap();
    refused_everything(&mut conn).await;
    // What the engine does, it may still do.
    sqlx::query(
        "insert into audit (actor, actor_kind, action) values ('t', 'engine', 'privileges')",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query("update step set updated_at = now() where false")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("delete from status_projection where false")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("reset role").execute(&mut *conn).await.unwrap();
}

#[tokio::test]
async fn on_the_private_cluster_the_processes_connect_as_the_application_role() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cluster = EmbeddedPostgres::start(dir.path().join("pg"), Durability::Throwaway)
        .await
        .unwrap();
    let owner = cluster.ensure_database("z29c").await.unwrap();
    let migrated = engine::db::connect_and_migrate(&owner, 2).await.unwrap();
    migrated.close().await;
    cluster.ensure_app_role("z29c").await.unwrap();
    // Again, as the next process to start does: nothing changes.
    cluster.ensure_app_role("z29c").await.unwrap();

    let mut app = PgConnection::connect(&cluster.app_url("z29c"))
        .await
        .unwrap();
    let who: String = sqlx::query_scalar("select current_user::text")
        .fetch_one(&mut app)
        .await
        .unwrap();
    assert_eq!(who, APP_ROLE);
    refused_everything(&mut app).await;
    app.close().await.unwrap();
    let wrong = cluster
        .app_url("z29c")
        .replace(&format!("{APP_ROLE}:"), &format!("{APP_ROLE}:x"));
    assert!(
        PgConnection::connect(&wrong).await.is_err(),
        "a wrong password is refused"
    );
    cluster.stop().await.unwrap();
}
