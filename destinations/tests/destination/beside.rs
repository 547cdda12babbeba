//! Destination databases beside Z29C's: each fresh, and dropped by the next one made once the
//! database it stood beside is gone, so test runs against one server do not pile them up.

use sqlx::PgPool;

/// The database `pool` is connected to.
async fn name_of(pool: &PgPool) -> String {
    sqlx::query_scalar("select current_database()::text")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn exists(pool: &PgPool, name: &str) -> bool {
    sqlx::query_scalar("select exists (select 1 from pg_database where datname = $1)")
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_destination_database_is_dropped_once_the_database_beside_it_is_gone(pool: PgPool) {
    // A Z29C database of this test's own, which it drops itself, as sqlx drops a passed test's.
    let owner = format!("{}_gone", &name_of(&pool).await[..50]);
    sqlx::query(&format!(r#"create database "{owner}""#))
        .execute(&pool)
        .await
        .unwrap();
    let owner_pool = PgPool::connect_with(pool.connect_options().as_ref().clone().database(&owner))
        .await
        .unwrap();
    let orphaned = destinations::database_beside(&owner_pool).await.unwrap();
    let orphan = name_of(&orphaned).await;
    let kept = name_of(&destinations::database_beside(&pool).await.unwrap()).await;
    orphaned.close().await;
    owner_pool.close().await;
    sqlx::query(&format!(r#"drop database "{owner}""#))
        .execute(&pool)
        .await
        .unwrap();
    assert!(exists(&pool, &orphan).await);

    let fresh = destinations::database_beside(&pool).await.unwrap();
    let fresh = name_of(&fresh).await;
    assert!(!exists(&pool, &orphan).await, "{orphan} outlived its owner");
    assert!(
        exists(&pool, &kept).await,
        "{kept} was dropped beside a live owner"
    );
    assert_ne!(fresh, kept);
}
