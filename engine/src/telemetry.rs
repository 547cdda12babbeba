//! The figures `/metrics` exposes: the metrics projection's counters, and gauges read from
//! durable state at scrape time (each an index-served aggregate).

use sqlx::PgPool;

/// One figure: name, labels, value.
pub type Figure = (String, Vec<(String, String)>, f64);

/// Counters (monotonic, from the metrics projection) and gauges (current state).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub counters: Vec<Figure>,
    pub gauges: Vec<Figure>,
}

fn labelled(name: &str, labels: &[(&str, &str)], value: f64) -> Figure {
    (
        name.to_owned(),
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        value,
    )
}

/// Reads every figure.
pub async fn figures(pool: &PgPool) -> sqlx::Result<Figures> {
    let mut f = Figures::default();
    for r in sqlx::query!(r#"select name, labels, value from metric_counter order by name, labels"#)
        .fetch_all(pool)
        .await?
    {
        let labels: Vec<(String, String)> = serde_json::from_str(&r.labels).unwrap_or_default();
        f.counters.push((r.name, labels, r.value as f64));
    }
    let waiting = sqlx::query!(
        r#"select state::text as "state!", count(*) as "n!",
                  coalesce(extract(epoch from now() - min(unknown_since)), 0)::float8 as "oldest!"
           from step where state in ('outcome_unknown', 'review_required', 'rejected') group by state"#
    )
    .fetch_all(pool)
    .await?;
    let mut oldest = 0.0_f64;
    for r in &waiting {
        f.gauges.push(labelled(
            "z29c_steps_waiting",
            &[("state", &r.state)],
            r.n as f64,
        ));
        if r.state != "rejected" {
            oldest = oldest.max(r.oldest);
        }
    }
    f.gauges
        .push(labelled("z29c_unknown_outcome_oldest_seconds", &[], oldest));
    for r in sqlx::query!(
        r#"select kind::text as "kind!", count(*) filter (where resolved_at is null) as "open!"
           from integrity_incident group by kind"#
    )
    .fetch_all(pool)
    .await?
    {
        f.gauges.push(labelled(
            "z29c_incidents_open",
            &[("kind", &r.kind)],
            r.open as f64,
        ));
    }
    for r in sqlx::query!(r#"select kind, count(*) as "n!" from invariant_violation group by kind"#)
        .fetch_all(pool)
        .await?
    {
        f.counters.push(labelled(
            "z29c_invariant_violations_total",
            &[("kind", &r.kind)],
            r.n as f64,
        ));
    }
    let lease_expiries = sqlx::query_scalar!(
        r#"select count(*) as "n!" from attempt
           where observation ->> 'observed' = 'worker_lost' and observation ->> 'during_call' = 'true'"#
    )
    .fetch_one(pool)
    .await?;
    f.counters.push(labelled(
        "z29c_lease_expiries_after_request_began_total",
        &[],
        lease_expiries as f64,
    ));
    for r in sqlx::query!(
        r#"select rule, count(*) as "n!" from alert where resolved_at is null group by rule"#
    )
    .fetch_all(pool)
    .await?
    {
        f.gauges.push(labelled(
            "z29c_alerts_open",
            &[("rule", &r.rule)],
            r.n as f64,
        ));
    }
    let backlog =
        sqlx::query_scalar!(r#"select count(*) as "n!" from outbox where published_at is null"#)
            .fetch_one(pool)
            .await?;
    f.gauges
        .push(labelled("z29c_outbox_unpublished", &[], backlog as f64));
    f.gauges.push(labelled(
        "z29c_db_pool_connections",
        &[],
        f64::from(pool.size()),
    ));
    f.gauges.push(labelled(
        "z29c_db_pool_idle_connections",
        &[],
        pool.num_idle() as f64,
    ));
    Ok(f)
}
