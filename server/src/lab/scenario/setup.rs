//! What every scenario stands on: its own databases on the harness's server, and destination
//! services registered with Z29C as adapters.

use anyhow::Context;
use destinations::{Fault, FaultPlan, FaultRule, Kind, Match, Operation, RunningDestination};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::lab::bench::BenchDatabase;

/// Creates database `name` on the harness's server (quoted: a destination's name may hold a
/// hyphen, as `payments-basic` does); returns its URL and a pool.
pub(super) async fn database(
    db: &BenchDatabase,
    admin: &PgPool,
    name: &str,
) -> anyhow::Result<(String, PgPool)> {
    sqlx::query(&format!("create database \"{name}\""))
        .execute(admin)
        .await?;
    let options: PgConnectOptions = db.url.parse::<PgConnectOptions>()?.database(name);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await?;
    let url = {
        let (base, _) = db.url.rsplit_once('/').context("a database URL")?;
        format!("{base}/{name}")
    };
    Ok((url, pool))
}

/// Drops scenario `name`'s databases: its own and its destinations' (named after it). A cluster
/// that kept every scenario's comes back ever more slowly from the matrix's crash-restarts: it
/// fsyncs each file of each database before recovery and again at its end-of-recovery
/// checkpoint (thirty scenarios in, on two busy cores: 80 s, longer than a scenario waits).
pub(super) async fn drop_databases(admin: &PgPool, name: &str) -> anyhow::Result<()> {
    let names: Vec<String> = sqlx::query_scalar(
        "select datname::text from pg_database
         where datname = $1 or starts_with(datname, $1 || '_')",
    )
    .bind(name)
    .fetch_all(admin)
    .await?;
    for database in names {
        sqlx::query(&format!("drop database \"{database}\" with (force)"))
            .execute(admin)
            .await?;
    }
    Ok(())
}

/// Delays the destination's answer to the next `times` deliveries by `ms`.
pub(super) fn delay_deliveries(
    destination: &RunningDestination,
    ms: u64,
    times: usize,
) -> anyhow::Result<()> {
    destination.set_faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::Any,
        Fault::DelayResponse { ms },
    )
    .times(u32::try_from(times).unwrap_or(u32::MAX))]))?;
    Ok(())
}

/// A destination service of `kind` on its own database `name`, registered with Z29C as
/// `adapter`: a 1,000 ms deadline and a 300 ms visibility window.
pub(super) async fn destination(
    db: &BenchDatabase,
    admin: &PgPool,
    z29c: &PgPool,
    name: &str,
    kind: Kind,
    adapter: &str,
) -> anyhow::Result<RunningDestination> {
    let (_, pool) = database(db, admin, name).await?;
    destinations::migrate(&pool).await?;
    let destination = destinations::spawn(
        pool,
        destinations::Config {
            visibility_window: std::time::Duration::from_millis(300),
            ..destinations::Config::new(kind)
        },
    )
    .await?;
    let contract =
        engine::adapter::contracts::declared(crate::demo::contract_kind(kind), 1_000, 300, false);
    engine::adapter::apply::register_trusted(z29c, adapter, &destination.base_url(), &contract)
        .await?;
    Ok(destination)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[sqlx::test(migrations = false)]
    async fn a_scenarios_own_databases_are_dropped_and_one_whose_name_merely_begins_alike_is_kept(
        pool: PgPool,
    ) {
        let name = format!(
            "scenario_9_1_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        let other = format!("{name}0");
        for database in [
            &name,
            &format!("{name}_dest"),
            &format!("{name}_mail"),
            &other,
        ] {
            sqlx::query(&format!("create database {database}"))
                .execute(&pool)
                .await
                .unwrap();
        }

        drop_databases(&pool, &name).await.unwrap();

        let left: Vec<String> = sqlx::query_scalar(
            "select datname::text from pg_database where starts_with(datname, $1)",
        )
        .bind(&name)
        .fetch_all(&pool)
        .await
        .unwrap();
        sqlx::query(&format!("drop database if exists {other}"))
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(left, [other]);
    }
}
