//! What the console sends and how long browsers keep it: every answer compressed when the
//! browser accepts it, a static file named by its content's hash kept for a year (its
//! precompressed copy sent as it is), a page never kept.

use axum::body::Body;
use http::{HeaderMap, Request, StatusCode};
use leptos::prelude::LeptosOptions;
use server::http::router;
use server::state::AppState;
use sqlx::PgPool;
use tower::ServiceExt;

/// A hashed file name, as cargo-leptos writes them (22 characters of URL-safe base64 MD5).
const HASHED: &str = "z29c.AbCdEfGhIjKlMnOpQrStUv.wasm";

/// A built site in a temporary directory: one hashed wasm with its brotli copy, one unhashed file.
fn site() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let pkg = root.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(pkg.join(HASHED), vec![b'w'; 4096]).unwrap();
    std::fs::write(pkg.join(format!("{HASHED}.br")), b"brotli bytes").unwrap();
    std::fs::write(pkg.join("notes.txt"), "x".repeat(4096)).unwrap();
    root
}

async fn get(
    pool: &PgPool,
    root: &std::path::Path,
    uri: &str,
    encodings: &str,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let app = router(AppState::new(
        pool.clone(),
        LeptosOptions::builder()
            .output_name("z29c")
            .site_root(root.to_string_lossy().into_owned())
            .build(),
    ));
    let response = app
        .oneshot(
            Request::get(uri)
                .header("accept-encoding", encodings)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, headers, body.to_vec())
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .map_or("", |v| v.to_str().unwrap_or_default())
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn pages_are_compressed_with_brotli_or_gzip_and_never_cached(pool: PgPool) {
    let root = site();
    for (accepted, encoding) in [("br, gzip", "br"), ("gzip", "gzip"), ("identity", "")] {
        let (status, headers, _) = get(&pool, root.path(), "/sign-in", accepted).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(header(&headers, "content-encoding"), encoding, "{accepted}");
        assert_eq!(header(&headers, "cache-control"), "no-store", "{accepted}");
    }
    let (_, headers, _) = get(&pool, root.path(), "/sign-in", "gzip").await;
    assert!(
        header(&headers, "vary")
            .to_lowercase()
            .contains("accept-encoding")
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_hashed_static_file_is_kept_for_a_year_and_sent_precompressed(pool: PgPool) {
    let root = site();
    let uri = format!("/pkg/{HASHED}");
    let (status, headers, body) = get(&pool, root.path(), &uri, "br, gzip").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, "cache-control"),
        "public, max-age=31536000, immutable"
    );
    assert_eq!(header(&headers, "content-encoding"), "br");
    assert_eq!(body, b"brotli bytes", "the precompressed copy was not sent");
    assert_eq!(header(&headers, "content-type"), "application/wasm");
    // Without a precompressed copy for gzip, it is compressed as it is sent.
    let (_, headers, body) = get(&pool, root.path(), &uri, "gzip").await;
    assert_eq!(header(&headers, "content-encoding"), "gzip");
    assert!(body.len() < 4096, "{} bytes", body.len());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_static_file_without_a_hash_in_its_name_is_revalidated(pool: PgPool) {
    let root = site();
    let (status, headers, _) = get(&pool, root.path(), "/pkg/notes.txt", "identity").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "cache-control"), "no-cache");
    let (status, _, _) = get(&pool, root.path(), "/pkg/missing.js", "identity").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
