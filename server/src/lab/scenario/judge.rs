//! The verdict from outside: a destination's own ledger against Z29C's receipts and states.

use sqlx::PgPool;
use uuid::Uuid;

use super::target::Running;

/// An external step as judged: logical name, state, request key, kind, receipt's reference,
/// and where it stood when the verdict was taken.
type StepRow = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    String,
);

/// The verdict from outside: each destination's own ledger against Z29C's receipts and states.
/// No effect twice under one key (an opaque destination never gets a second one: the matrix
/// and the soak authorize none), and every step settled by a receipt naming the effect, or
/// waiting for a person — never settled without one where the outcome is provable.
pub(super) async fn judge(
    pool: &PgPool,
    running: &Running,
    workflows: &[Uuid],
    archive: Option<&engine::archive::ArchiveDir>,
) -> anyhow::Result<Vec<String>> {
    let mut violations = Vec::new();
    let ledgers = running.ledgers().await?;
    let target = running.target;
    let found: i64 = sqlx::query_scalar(
        "select (select count(*) from workflow where id = any($1))
              + (select count(*) from archived_workflow where id = any($1))",
    )
    .bind(workflows)
    .fetch_one(pool)
    .await?;
    if found != i64::try_from(workflows.len())? {
        violations.push(format!(
            "{} accepted workflow(s) lost",
            workflows.len() as i64 - found
        ));
    }
    let steps: Vec<StepRow> = sqlx::query_as(
        "select s.logical, s.state::text, s.request_key, s.kind::text, r.external_reference,
                format('%s attempt(s), next look in %s s, lease %s, last observation %s',
                       s.attempt_count,
                       round(extract(epoch from s.run_after - now())::numeric, 1),
                       coalesce(s.lease_holder, 'none'),
                       coalesce((select left(o.kind || ' ' || o.body::text, 160) from observation o
                                 where o.step_id = s.id order by o.id desc limit 1), 'none'))
         from step s left join receipt r on r.id = s.receipt_id
         where s.workflow_id = any($1) and s.kind <> 'pure'",
    )
    .bind(workflows)
    .fetch_all(pool)
    .await?;
    let archived = match archive {
        Some(dir) => archived_steps(pool, dir, workflows).await?,
        None => Vec::new(),
    };
    for (logical, state, key, step_kind, receipt, standing) in steps.into_iter().chain(archived) {
        let key = key.unwrap_or_default();
        let (effects, provable) =
            ledgers.effects(target, &logical, step_kind == "compensation", &key);
        let settled_by_receipt = state == "succeeded" && receipt.is_some();
        if provable && !settled_by_receipt && step_kind != "compensation" {
            violations.push(format!(
                "{logical} {key} is {state} without a receipt under a {} destination",
                target.as_str()
            ));
        }
        if effects.len() > 1 {
            violations.push(format!(
                "{logical} {key}: {} effects at the destination",
                effects.len()
            ));
        }
        if let Some(reference) = &receipt
            && step_kind != "compensation"
            && !effects.contains(reference)
        {
            violations.push(format!(
                "{logical} {key}: receipt names {reference}, the destination holds {effects:?}"
            ));
        }
        if !settled_by_receipt
            && !matches!(
                state.as_str(),
                "review_required" | "blocked" | "cancelled" | "waived"
            )
        {
            violations.push(format!("{logical} {key} left {state} ({standing})"));
        }
    }
    for v in engine::watch::invariants::check(pool).await? {
        violations.push(format!("invariant {}: {}", v.kind, v.subject));
    }
    Ok(violations)
}

/// The external steps of `workflows` that were archived, read back from the archive as the
/// verdict reads steps in the hot tables.
async fn archived_steps(
    pool: &PgPool,
    dir: &engine::archive::ArchiveDir,
    workflows: &[Uuid],
) -> anyhow::Result<Vec<StepRow>> {
    let archived: Vec<Uuid> =
        sqlx::query_scalar("select id from archived_workflow where id = any($1)")
            .bind(workflows)
            .fetch_all(pool)
            .await?;
    let mut rows = Vec::new();
    for id in archived {
        let record = engine::archive::show(pool, dir, id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("workflow {id} has a tombstone and no record"))?;
        let evidence = &record.evidence;
        let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        for step in evidence["steps"].as_array().into_iter().flatten() {
            if step["kind"] == "pure" {
                continue;
            }
            let receipt = evidence["receipts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["id"] == step["receipt_id"])
                .and_then(|r| text(&r["external_reference"]));
            rows.push((
                text(&step["logical"]).unwrap_or_default(),
                text(&step["state"]).unwrap_or_default(),
                text(&step["request_key"]),
                text(&step["kind"]).unwrap_or_default(),
                receipt,
                format!("archived in {}", record.tombstone.archive_file),
            ));
        }
    }
    Ok(rows)
}
