//! After a restore (docs/DESIGN.md §21, "After a restore"): a workflow the restored database
//! holds hot again while the archive keeps a copy of it shows that copy, on its page and its
//! steps', once reconciling has noted it.

use axum::body::Body;
use engine::archive::{ArchiveDir, FORMAT, reconcile};
use engine::domain::Role;
use http::{Request, StatusCode, header};
use serde_json::json;
use sqlx::PgPool;
use tower::ServiceExt;
use uuid::Uuid;

use crate::api::{call, token};
use crate::console::{signed_in, step_under_review, workflow_of};

/// What the console at `archive` answers `cookie`'s session for `path`.
async fn page(pool: &PgPool, archive: &ArchiveDir, cookie: &str, path: &str) -> String {
    let state = server::state::AppState::new(
        pool.clone(),
        leptos::prelude::LeptosOptions::builder()
            .output_name("z29c")
            .build(),
    )
    .with_archive(archive.clone());
    let request = Request::get(path)
        .header(header::COOKIE, cookie)
        .body(Body::empty())
        .unwrap();
    let response = server::http::router(state).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(body.to_vec()).unwrap()
}

/// What the archiver writes of `workflow` as the database holds it now, written to `archive`
/// as a batch the restored database never saw end.
async fn copied_to_the_archive(pool: &PgPool, archive: &ArchiveDir, workflow: Uuid) {
    let mut conn = pool.acquire().await.unwrap();
    let evidence = engine::store::archive::evidence(&mut conn, &[workflow])
        .await
        .unwrap();
    let now = chrono::Utc::now();
    let line = json!({ "format": FORMAT, "kind": "workflow", "id": workflow,
                       "archived_at": now, "evidence": evidence[0].1 });
    archive
        .append(now.date_naive(), &[line.to_string()])
        .unwrap();
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_workflow_back_hot_after_a_restore_shows_the_archives_copy_on_its_page_and_its_steps(
    pool: PgPool,
) {
    let step = step_under_review(&pool).await;
    let workflow = workflow_of(&pool, step).await;
    let viewer = signed_in(&pool, Role::Viewer).await;
    let cookie = viewer.cookie.clone().expect("a session");
    let dir = tempfile::tempdir().unwrap();
    let archive = ArchiveDir::open(dir.path()).unwrap();
    copied_to_the_archive(&pool, &archive, workflow).await;
    let (workflow_page, step_page) = (format!("/workflows/{workflow}"), format!("/steps/{step}"));
    for path in [&workflow_page, &step_page] {
        let before = page(&pool, &archive, &cookie, path).await;
        assert!(
            !before.contains("archived-copy"),
            "no copy is shown before reconciling noted it: {path}"
        );
    }
    let dashboard = token(&pool, "dashboard", Role::Viewer, None).await;
    let api = format!("/api/v1/workflows/{workflow}");
    let (status, read) = call(&pool, "GET", &api, Some(&dashboard), None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert!(read["archive_copy_at"].is_null(), "{read}");

    let reconciled = reconcile(&pool, &archive).await.unwrap();
    assert_eq!(reconciled.hot_again, vec![workflow]);
    let shown = page(&pool, &archive, &cookie, &workflow_page).await;
    assert!(
        shown.contains(r#"data-testid="archived-copy""#)
            && shown.contains("The archive holds a copy of this workflow, written on"),
        "{shown}"
    );
    assert!(
        shown.contains(r#"data-testid="evidence""#),
        "its evidence, read back from the archive"
    );
    let (_, read) = call(&pool, "GET", &api, Some(&dashboard), None).await;
    assert!(
        read["archive_copy_at"].is_string() && read["archived_at"].is_null(),
        "the API says the copy is there, of a workflow still hot: {read}"
    );
    let step_shown = page(&pool, &archive, &cookie, &step_page).await;
    assert!(
        step_shown.contains(r#"data-testid="archived-copy""#)
            && step_shown.contains(&format!(r#"href="/workflows/{workflow}""#)),
        "{step_shown}"
    );

    // A copy that cannot be read back is said so; the page still shows the database's steps.
    drop(dir);
    let lost = page(&pool, &archive, &cookie, &workflow_page).await;
    assert!(lost.contains("it cannot be read back"), "{lost}");
    assert!(lost.contains(r#"data-testid="steps""#), "{lost}");
}
