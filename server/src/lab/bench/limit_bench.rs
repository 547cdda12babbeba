//! `z29c bench engine --http --limit-rps R`: the outbound limit (docs/DESIGN.md §20) measured
//! where it matters, at the destination. Before each run the bench's adapter gets an
//! approver's override of R requests a second; after it, the destination's own ledger says how
//! many calls it accepted in its busiest one-second window. Without `--limit-rps` the same bench
//! measures what the limiter costs a deployment that sets no limit.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use engine::domain::Limits;

/// Overrides `adapter`'s limits to `rps` requests a second, as an approver would.
pub(super) async fn impose(pool: &PgPool, adapter: &str, rps: f64) -> anyhow::Result<()> {
    let limits = Limits {
        requests_per_second: Some(rps),
        in_flight: None,
    };
    let mut conn = pool.acquire().await?;
    engine::store::pace::set(
        &mut conn,
        adapter,
        limits,
        "bench",
        "z29c bench engine --limit-rps",
    )
    .await?
    .map_err(|()| anyhow::anyhow!("the bench's adapter {adapter} is not registered"))?;
    Ok(())
}

/// The most calls the destination accepted within any one second since `since`.
pub(super) async fn busiest_second(
    destination: &destinations::RunningDestination,
    since: DateTime<Utc>,
) -> anyhow::Result<usize> {
    let mut accepted: Vec<DateTime<Utc>> = destination
        .ledger()
        .await?
        .deliveries
        .into_iter()
        .map(|d| d.accepted_at)
        .filter(|at| *at >= since)
        .collect();
    accepted.sort();
    Ok(most_within_a_second(&accepted))
}

/// The most of the sorted moments `at` that fall in any half-open second.
fn most_within_a_second(at: &[DateTime<Utc>]) -> usize {
    let second = chrono::Duration::seconds(1);
    let mut most = 0;
    let mut first = 0;
    for (last, moment) in at.iter().enumerate() {
        while *moment - at[first] >= second {
            first += 1;
        }
        most = most.max(last - first + 1);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_second_counts_the_moments_of_one_half_open_second() {
        let t0 = DateTime::parse_from_rfc3339("2026-12-06T00:00:00Z")
            .unwrap()
            .to_utc();
        let at = |ms: i64| t0 + chrono::Duration::milliseconds(ms);
        let moments = [
            at(0),
            at(400),
            at(999),
            at(1_000),
            at(1_200),
            at(1_300),
            at(3_000),
        ];
        assert_eq!(
            most_within_a_second(&moments),
            5,
            "400, 999, 1000, 1200, 1300"
        );
        assert_eq!(most_within_a_second(&[]), 0);
    }
}
