//! The private cluster Z29C starts when no DATABASE_URL is given.

use crate::support::fixture;
use engine::db::{Readiness, connect_and_migrate, readiness};
use engine::embedded_pg::{Durability, EmbeddedPostgres, PgBinaries};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;

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
    let conn = PgConnection::connect(&joiner.url("postgres"))
        .await
        .expect("the joiner does not know the cluster's password");
    conn.close().await.unwrap();
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

/// The uid and gid the cluster runs as: `postgres` when the tests run as root.
fn cluster_account() -> Option<(u32, u32)> {
    nix::unistd::Uid::effective().is_root().then(|| {
        let user = nix::unistd::User::from_name("postgres")
            .unwrap()
            .expect("a postgres system user");
        (user.uid.as_raw(), user.gid.as_raw())
    })
}

async fn connect_as_postgres(
    port: u16,
    password: Option<&str>,
) -> Result<PgConnection, sqlx::Error> {
    let mut options = PgConnectOptions::new()
        .host("127.0.0.1")
        .port(port)
        .username("postgres")
        .database("postgres");
    if let Some(password) = password {
        options = options.password(password);
    }
    PgConnection::connect_with(&options).await
}

#[tokio::test]
async fn a_connection_without_the_clusters_password_is_refused() {
    let dir = cluster_dir();
    let cluster = EmbeddedPostgres::start(dir.path().join("pg"), Durability::Throwaway)
        .await
        .unwrap();

    let without = connect_as_postgres(cluster.port(), None).await;
    assert!(without.is_err(), "a connection with no password was let in");
    let wrong = connect_as_postgres(cluster.port(), Some("not-the-password")).await;
    assert!(
        wrong.is_err(),
        "a connection with a wrong password was let in"
    );
    let mut conn = PgConnection::connect(&cluster.url("postgres"))
        .await
        .expect("the cluster's own URL is refused");
    let one: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(one, 1);
    conn.close().await.unwrap();
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn the_password_file_is_readable_only_by_the_clusters_owner() {
    let dir = cluster_dir();
    let cluster = EmbeddedPostgres::start(dir.path().join("pg"), Durability::Throwaway)
        .await
        .unwrap();

    let file = std::fs::metadata(cluster.data_dir().join("z29c-password"))
        .expect("the cluster keeps its password in <data-dir>/z29c-password");
    let data_dir = std::fs::metadata(cluster.data_dir()).unwrap();
    assert_eq!(
        file.mode() & 0o777,
        0o600,
        "the password file is open to others"
    );
    assert_eq!(
        file.uid(),
        data_dir.uid(),
        "the password file belongs to someone else"
    );
    assert_eq!(data_dir.mode() & 0o777, 0o700);
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn a_trusting_cluster_made_by_an_earlier_version_is_given_a_password_when_started() {
    let dir = cluster_dir();
    let data = dir.path().join("pg");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut initdb = std::process::Command::new(PgBinaries::locate().unwrap().program("initdb"));
    initdb.current_dir("/").arg("-D").arg(&data).args([
        "-U",
        "postgres",
        "--auth=trust",
        "--encoding=UTF8",
        "--locale=C",
    ]);
    if let Some((uid, gid)) = cluster_account() {
        std::os::unix::fs::chown(&data, Some(uid), Some(gid)).unwrap();
        initdb.uid(uid).gid(gid);
    }
    let made = initdb.output().unwrap();
    assert!(
        made.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&made.stderr)
    );

    let cluster = EmbeddedPostgres::start(&data, Durability::Throwaway)
        .await
        .unwrap();
    let hba = std::fs::read_to_string(data.join("pg_hba.conf")).unwrap();
    let trusting: Vec<&str> = hba
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter(|line| line.split_whitespace().any(|word| word == "trust"))
        .collect();
    assert!(
        trusting.is_empty(),
        "pg_hba.conf still trusts: {trusting:?}"
    );
    assert!(
        connect_as_postgres(cluster.port(), None).await.is_err(),
        "the upgraded cluster still lets a connection in with no password"
    );
    let url = cluster.ensure_database("z29c").await.unwrap();
    let pool = connect_and_migrate(&url, 1).await.unwrap();
    assert_eq!(readiness(&pool).await.unwrap(), Readiness::Ready);
    pool.close().await;
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn a_cluster_asked_for_under_a_directory_postgres_cannot_traverse_starts_elsewhere_and_says_where()
 {
    if cluster_account().is_none() {
        eprintln!(
            "not root: the cluster runs as this user, who reaches every directory it asks for"
        );
        return;
    }
    // A clone under /root, or in any 0700 directory.
    let closed = tempfile::tempdir().unwrap();
    std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let asked = closed.path().join("x").join("pg");

    let cluster = EmbeddedPostgres::start(&asked, Durability::Throwaway)
        .await
        .unwrap();
    let real = cluster.data_dir().to_path_buf();
    let mut conn = PgConnection::connect(&cluster.url("postgres"))
        .await
        .unwrap();
    let one: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(one, 1);
    conn.close().await.unwrap();
    cluster.stop().await.unwrap();

    let mode = std::fs::metadata(closed.path()).unwrap().mode() & 0o777;
    let placed_apart = real.starts_with("/var/lib/z29c/clusters");
    let _ = std::fs::remove_dir_all(&real);
    let mut lock = real.clone().into_os_string();
    lock.push(".lock");
    let _ = std::fs::remove_file(lock);
    assert!(placed_apart, "the cluster was placed at {}", real.display());
    assert_eq!(mode, 0o700, "the user's directory was opened up");
}
