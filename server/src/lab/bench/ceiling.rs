//! The machine's single-row commit ceiling, the denominator of the engine bench's ratios.

use std::time::{Duration, Instant};

use sqlx::PgPool;

/// The machine's commit ceiling as pgbench measures it with a one-row script: single-row
/// `UPDATE` transactions per second, `clients` at once, through `pool`.
pub(super) async fn ceiling(pool: &PgPool, clients: usize, secs: u64) -> anyhow::Result<f64> {
    sqlx::query("create table if not exists bench_ceiling (id int primary key, n bigint not null)")
        .execute(pool)
        .await?;
    sqlx::query("insert into bench_ceiling select g, 0 from generate_series(1, $1) g on conflict do nothing")
        .bind(i32::try_from(clients)?)
        .execute(pool)
        .await?;
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for id in 1..=clients {
        let pool = pool.clone();
        tasks.spawn(async move {
            let mut n = 0_u64;
            while Instant::now() < until {
                sqlx::query("update bench_ceiling set n = n + 1 where id = $1")
                    .bind(i32::try_from(id).unwrap_or(1))
                    .execute(&pool)
                    .await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut total = 0;
    while let Some(n) = tasks.join_next().await {
        total += n??;
    }
    Ok(total as f64 / secs as f64)
}
