//! A database of its own for a destination, on the server that holds Z29C's: what the tests
//! stand their destinations on. A destination never shares Z29C's database.

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// Creates, migrates and opens a fresh database for a destination beside `z29c`'s, its name
/// marking whose it is: `z29c_dest_<12 hex digits of the md5 of z29c's name>_<random>`
/// (test databases' names take PostgreSQL's whole 63 bytes, too long to carry). First drops
/// the destination databases whose Z29C database is gone — a test database `#[sqlx::test]`
/// dropped after its test passed — so a development server running the tests again and again
/// does not collect them; those of a failed test stay beside its database, for a look.
pub async fn database_beside(z29c: &PgPool) -> sqlx::Result<PgPool> {
    sweep(z29c).await?;
    let owner: String = sqlx::query_scalar("select left(md5(current_database()), 12)")
        .fetch_one(z29c)
        .await?;
    let random = crate::random::id("").to_lowercase();
    let name = format!("z29c_dest_{owner}_{random}");
    sqlx::query(&format!("create database {name}"))
        .execute(z29c)
        .await?;
    let options = z29c.connect_options().as_ref().clone().database(&name);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await?;
    crate::migrate(&pool)
        .await
        .map_err(|e| sqlx::Error::Migrate(Box::new(e)))?;
    Ok(pool)
}

/// Drops every destination database whose owner no longer exists.
async fn sweep(z29c: &PgPool) -> sqlx::Result<()> {
    let orphans: Vec<String> = sqlx::query_scalar(
        r#"select d.datname::text from pg_database d
           where d.datname ~ '^z29c_dest_[0-9a-f]{12}_[0-9a-z]+$'
             and not exists (select 1 from pg_database o
                             where left(md5(o.datname), 12) = substr(d.datname, 11, 12))"#,
    )
    .fetch_all(z29c)
    .await?;
    for name in orphans {
        // Another test may sweep the same one at the same moment.
        sqlx::query(&format!("drop database if exists {name} with (force)"))
            .execute(z29c)
            .await?;
    }
    Ok(())
}
