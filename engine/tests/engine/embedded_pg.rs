//! The private cluster Z29C starts when no DATABASE_URL is given.

use crate::support::fixture;
use engine::db::{Readiness, connect_and_migrate, readiness};
use engine::embedded_pg::{Durability, EmbeddedPostgres};
use std::os::unix::fs::PermissionsExt;

fn cluster_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    // When the tests run as root the cluster runs as `postgres`, which must reach the directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[tokio::test]
async fn a_private_cluster_starts_migrates_keeps_its_data_across_restarts_and_stops() {
    let dir = cluster_dir();
    let data = dir.path().join("pg");

    let cluster = EmbeddedPostgres::start(&data, Durability::Durable)
        .await
        .unwrap();
    let url = cluster.ensure_database("z29c").await.unwrap();
    let pool = connect_and_migrate(&url, 2).await.unwrap();
    assert_eq!(readiness(&pool).await.unwrap(), Readiness::Ready);
    fixture::workflow(&pool, "k-1").insert().await;
    pool.close().await;
    let first_port = cluster.port();
    cluster.stop().await.unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", first_port)).is_err(),
        "the stopped cluster still accepts connections"
    );

    let cluster = EmbeddedPostgres::start(&data, Durability::Durable)
        .await
        .unwrap();
    let url = cluster.ensure_database("z29c").await.unwrap();
    let pool = connect_and_migrate(&url, 2).await.unwrap();
    let kept: i64 = sqlx::query_scalar("select count(*) from workflow where creation_key = 'k-1'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(kept, 1, "the workflow written before the restart is gone");
    pool.close().await;
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn a_cluster_left_running_by_a_killed_process_is_adopted_and_stopped() {
    let dir = cluster_dir();
    let data = dir.path().join("pg");

    let abandoned = EmbeddedPostgres::start(&data, Durability::Throwaway)
        .await
        .unwrap();
    let port = abandoned.port();
    // A process killed without cleanup: the server keeps running, its lock is gone.
    abandoned.detach();

    let cluster = EmbeddedPostgres::start(&data, Durability::Throwaway)
        .await
        .unwrap();
    assert!(cluster.owns_server());
    assert_eq!(cluster.port(), port, "the running server was not reused");
    let url = cluster.ensure_database("z29c").await.unwrap();
    let pool = connect_and_migrate(&url, 1).await.unwrap();
    assert_eq!(readiness(&pool).await.unwrap(), Readiness::Ready);
    pool.close().await;
    cluster.stop().await.unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the adopted server still runs"
    );
}

#[tokio::test]
async fn a_second_process_joins_the_running_cluster_and_leaves_it_running() {
    let dir = cluster_dir();
    let data = dir.path().join("pg");
    let owner = EmbeddedPostgres::start(&data, Durability::Throwaway)
        .await
        .unwrap();
    let joiner = EmbeddedPostgres::start(&data, Durability::Throwaway)
        .await
        .unwrap();
    assert!(!joiner.owns_server());
    assert_eq!(joiner.port(), owner.port());
    joiner.stop().await.unwrap();

    let url = owner.ensure_database("z29c").await.unwrap();
    let pool = connect_and_migrate(&url, 1).await.unwrap();
    assert_eq!(
        readiness(&pool).await.unwrap(),
        Readiness::Ready,
        "the joiner stopped the owner's server"
    );
    pool.close().await;
    owner.stop().await.unwrap();
}
