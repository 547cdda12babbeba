//! Held steps (docs/DESIGN.md §5, §20): claimed steps that may not start now wait here, unsent
//! and uncounted: their adapter's current version is not verified, an operator holds their
//! adapter, or an operator paused their workflow. The trigger that keeps the claim queue keeps
//! `step_held` too.

use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use super::conclusion::{Announcing, announce, lock_workflows};
use crate::domain::EventKind;

/// Which held steps a release looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Releasing<'a> {
    /// Every held step.
    All,
    /// Those of one adapter (its hold ended, or its new version passed verification).
    Adapter(&'a str),
    /// Those of one workflow (an operator resumed it).
    Workflow(Uuid),
}

impl Releasing<'_> {
    fn adapter(&self) -> Option<&str> {
        match self {
            Releasing::Adapter(name) => Some(name),
            _ => None,
        }
    }

    fn workflow(&self) -> Option<Uuid> {
        match self {
            Releasing::Workflow(id) => Some(*id),
            _ => None,
        }
    }
}

/// Sends the held steps `scope` names that may start again (their adapter may send, their
/// workflow is not paused) back to the claim queue, announcing each (their workflows are locked
/// first, as a flush locks them): all at once, or oldest first at `per_second` (a resume's
/// ramp). Returns how many it released.
pub async fn release(
    conn: &mut PgConnection,
    scope: Releasing<'_>,
    per_second: Option<f64>,
) -> sqlx::Result<usize> {
    let (name, workflow) = (scope.adapter(), scope.workflow());
    let owners = sqlx::query_scalar!(
        r#"select distinct s.workflow_id
           from step_held h join step s on s.id = h.step_id
           join workflow w on w.id = s.workflow_id
           left join adapter a on a.name = h.adapter
           where s.state = 'held' and w.paused_at is null
             and (h.adapter is null or (a.verified_version = a.contract_version and a.held_at is null))
             and ($1::text is null or h.adapter = $1) and ($2::uuid is null or s.workflow_id = $2)
           order by 1"#,
        name,
        workflow
    )
    .fetch_all(&mut *conn)
    .await?;
    if owners.is_empty() {
        return Ok(0);
    }
    lock_workflows(conn, &owners).await?;
    let released = sqlx::query!(
        r#"with going as (
               select s.id, row_number() over (order by s.updated_at, s.id) - 1 as place
               from step s join step_held h on h.step_id = s.id
               join workflow w on w.id = s.workflow_id
               left join adapter a on a.name = s.adapter
               where s.workflow_id = any($1) and s.state = 'held' and w.paused_at is null
                 and (s.adapter is null
                      or (a.verified_version = a.contract_version and a.held_at is null))
                 and ($2::text is null or s.adapter = $2)
           )
           update step s set state = 'ready', updated_at = now(),
                  run_after = now() + make_interval(secs => coalesce(g.place / $3::float8, 0))
           from going g
           where g.id = s.id
           returning s.id, s.workflow_id, s.logical, s.adapter"#,
        &owners,
        name,
        per_second
    )
    .fetch_all(&mut *conn)
    .await?;
    let events: Vec<Announcing> = released
        .iter()
        .map(|r| Announcing {
            event_id: Uuid::now_v7(),
            workflow: r.workflow_id,
            kind: EventKind::StepReleased.as_str(),
            payload: serde_json::json!({ "step": r.id, "logical": r.logical, "adapter": r.adapter }),
        })
        .collect();
    let spare: Vec<Uuid> = owners.iter().map(|_| Uuid::now_v7()).collect();
    announce(conn, &events, &owners, &spare).await?;
    Ok(released.len())
}

/// Holds `steps`, ready and found unable to start (their adapter may send nothing: its current
/// version is not verified, or an operator holds it; or an operator paused their workflow):
/// they leave the claim queue unsent, with no attempt counted, and each is announced. The
/// caller holds their workflows' locks. Returns how many it held.
pub async fn hold(conn: &mut PgConnection, steps: &[Uuid]) -> sqlx::Result<usize> {
    let held = sqlx::query_as!(
        HeldRow,
        r#"update step s set state = 'held', updated_at = now()
           from workflow w
           where s.id = any($1) and w.id = s.workflow_id and s.state = 'ready'
             and s.lease_holder is null
             and (w.paused_at is not null
                  or (s.adapter is not null
                      and not exists (select 1 from adapter a where a.name = s.adapter
                                      and a.verified_version = a.contract_version
                                      and a.held_at is null)))
           returning s.id, s.workflow_id, s.logical, s.adapter"#,
        steps
    )
    .fetch_all(&mut *conn)
    .await?;
    announce_held(conn, &held).await?;
    Ok(held.len())
}

/// Holds `steps`, claimed by `holder` and not yet sent, whose adapter an operator (or its
/// breaker) held, or whose workflow an operator paused, since the claim: checkpoint 3 does not
/// send them (docs/DESIGN.md §20). Their lease is let go and no attempt was counted; each is
/// announced. The caller holds their workflows' locks. Returns how many it held.
pub async fn withhold(
    conn: &mut PgConnection,
    holder: &str,
    steps: &[Uuid],
) -> sqlx::Result<usize> {
    let held = sqlx::query_as!(
        HeldRow,
        r#"update step s set state = 'held', lease_holder = null, lease_id = null,
                             updated_at = now()
           from workflow w
           where s.id = any($2) and w.id = s.workflow_id and s.lease_holder = $1
             and s.state = 'running'
             and (w.paused_at is not null
                  or exists (select 1 from adapter a where a.name = s.adapter
                             and a.held_at is not null))
           returning s.id, s.workflow_id, s.logical, s.adapter"#,
        holder,
        steps
    )
    .fetch_all(&mut *conn)
    .await?;
    announce_held(conn, &held).await?;
    Ok(held.len())
}

/// A step just held.
struct HeldRow {
    id: Uuid,
    workflow_id: Uuid,
    logical: String,
    adapter: Option<String>,
}

/// Announces each step just held on its workflow.
async fn announce_held(conn: &mut PgConnection, held: &[HeldRow]) -> sqlx::Result<()> {
    if held.is_empty() {
        return Ok(());
    }
    let events: Vec<Announcing> = held
        .iter()
        .map(|r| Announcing {
            event_id: Uuid::now_v7(),
            workflow: r.workflow_id,
            kind: EventKind::StepHeld.as_str(),
            payload: serde_json::json!({ "step": r.id, "logical": r.logical, "adapter": r.adapter }),
        })
        .collect();
    let mut owners: Vec<Uuid> = held.iter().map(|r| r.workflow_id).collect();
    owners.sort_unstable();
    owners.dedup();
    let spare: Vec<Uuid> = owners.iter().map(|_| Uuid::now_v7()).collect();
    announce(conn, &events, &owners, &spare).await
}

/// The ready steps of `workflow` not leased to a worker: those a pause holds at once.
pub async fn ready_of(conn: &mut PgConnection, workflow: Uuid) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!(
        "select id from step where workflow_id = $1 and state = 'ready' and lease_holder is null",
        workflow
    )
    .fetch_all(conn)
    .await
}

/// How many steps wait held, by adapter (pure steps of paused workflows name none).
pub async fn counts<'e, E>(executor: E) -> sqlx::Result<Vec<(String, i64)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select adapter as "adapter!", count(*) as "n!" from step_held
           where adapter is not null group by adapter"#
    )
    .fetch_all(executor)
    .await?;
    Ok(rows.into_iter().map(|r| (r.adapter, r.n)).collect())
}

/// Whether a new request for a step of `workflow` to `adapter` must wait: an operator holds
/// the adapter or paused the workflow.
pub async fn stopped<'e, E>(executor: E, adapter: &str, workflow: Uuid) -> sqlx::Result<bool>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select exists (select 1 from adapter where name = $1 and held_at is not null)
               or exists (select 1 from workflow where id = $2 and paused_at is not null)
           as "stopped!""#,
        adapter,
        workflow
    )
    .fetch_one(executor)
    .await
}
