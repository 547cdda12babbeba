//! The figures `/metrics` exposes: the metrics projection's counters, and gauges read from
//! durable state at scrape time (each an index-served aggregate, `read::metrics`).

use sqlx::PgPool;

use crate::read::metrics;

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
    for (name, labels, value) in metrics::counters(pool).await? {
        let labels: Vec<(String, String)> = serde_json::from_str(&labels).unwrap_or_default();
        f.counters.push((name, labels, value as f64));
    }
    waiting(pool, &mut f).await?;
    incidents_and_violations(pool, &mut f).await?;
    alerts_and_outbox(pool, &mut f).await?;
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

/// The waiting steps by state, and how long the oldest has waited for an outcome (rejected
/// steps wait for a replacement, not for an outcome, so they do not count towards it).
async fn waiting(pool: &PgPool, f: &mut Figures) -> sqlx::Result<()> {
    let mut oldest = 0.0_f64;
    for (state, n, waited) in &metrics::waiting_steps(pool).await? {
        f.gauges.push(labelled(
            "z29c_steps_waiting",
            &[("state", state)],
            *n as f64,
        ));
        if state != "rejected" {
            oldest = oldest.max(*waited);
        }
    }
    f.gauges
        .push(labelled("z29c_unknown_outcome_oldest_seconds", &[], oldest));
    Ok(())
}

/// Open incidents by kind; recorded invariant violations by kind; attempts whose worker was
/// lost after the request began.
async fn incidents_and_violations(pool: &PgPool, f: &mut Figures) -> sqlx::Result<()> {
    for (kind, open) in metrics::open_incidents_by_kind(pool).await? {
        f.gauges.push(labelled(
            "z29c_incidents_open",
            &[("kind", &kind)],
            open as f64,
        ));
    }
    for (kind, n) in metrics::violations_by_kind(pool).await? {
        f.counters.push(labelled(
            "z29c_invariant_violations_total",
            &[("kind", &kind)],
            n as f64,
        ));
    }
    let lease_expiries = metrics::lease_expiries_after_request_began(pool).await?;
    f.counters.push(labelled(
        "z29c_lease_expiries_after_request_began_total",
        &[],
        lease_expiries as f64,
    ));
    Ok(())
}

/// Open alerts by rule, the outbox events not yet handed to every consumer, the adapters held
/// and limited, the proposals waiting, the workflows paused and the notes written.
async fn alerts_and_outbox(pool: &PgPool, f: &mut Figures) -> sqlx::Result<()> {
    for (rule, n) in metrics::open_alerts_by_rule(pool).await? {
        f.gauges
            .push(labelled("z29c_alerts_open", &[("rule", &rule)], n as f64));
    }
    let backlog = metrics::outbox_backlog(pool).await?;
    f.gauges
        .push(labelled("z29c_outbox_unpublished", &[], backlog as f64));
    // Each adapter an operator holds (docs/DESIGN.md §20), while the hold stands.
    for hold in crate::store::hold::all(pool).await? {
        f.gauges.push(labelled(
            "z29c_adapter_held",
            &[("adapter", &hold.adapter)],
            1.0,
        ));
    }
    // Each adapter's limits in force (docs/DESIGN.md §20): its file's, with any override.
    for (adapter, limits) in crate::adapter::apply::limits_in_force(pool).await? {
        let values = [
            ("requests_per_second", limits.requests_per_second),
            ("in_flight", limits.in_flight.map(f64::from)),
        ];
        for (limit, value) in values {
            if let Some(value) = value {
                f.gauges.push(labelled(
                    "z29c_adapter_limit",
                    &[("adapter", &adapter), ("limit", limit)],
                    value,
                ));
            }
        }
    }
    let proposals = crate::store::proposal::waiting_count(pool).await?;
    f.gauges
        .push(labelled("z29c_proposals_waiting", &[], proposals as f64));
    let paused = crate::store::pause::count(pool).await?;
    f.gauges
        .push(labelled("z29c_workflows_paused", &[], paused as f64));
    let notes = crate::store::note::count(pool).await?;
    f.counters
        .push(labelled("z29c_notes_total", &[], notes as f64));
    archive_figures(pool, f).await
}

/// The archiver's totals, its last turn, and the age of the oldest settled workflow still hot
/// (its retention subtracted, how far the archiver is behind: docs/DESIGN.md §21).
async fn archive_figures(pool: &PgPool, f: &mut Figures) -> sqlx::Result<()> {
    let mut conn = pool.acquire().await?;
    let (workflows, audit, events, bytes, _, last_secs) =
        crate::store::archive::progress(&mut conn).await?;
    for (name, value) in [
        ("z29c_archived_workflows_total", workflows),
        ("z29c_archived_audit_entries_total", audit),
        ("z29c_outbox_events_dropped_total", events),
        ("z29c_archive_bytes_total", bytes),
    ] {
        f.counters.push(labelled(name, &[], value as f64));
    }
    f.gauges
        .push(labelled("z29c_archive_last_turn_seconds", &[], last_secs));
    let oldest = crate::store::archive::oldest_settled_age_secs(&mut conn).await?;
    f.gauges.push(labelled(
        "z29c_oldest_settled_workflow_age_seconds",
        &[],
        oldest.unwrap_or(0.0),
    ));
    Ok(())
}
