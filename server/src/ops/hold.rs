//! `z29c hold ADAPTER`, `z29c resume ADAPTER` and `z29c limit ADAPTER`: the engine's
//! `recovery::hold` and `recovery::limit`, as an approver named with `--as` (docs/DESIGN.md §20).

use engine::recovery::hold::{self, Resumed};
use engine::store::hold::AdapterHold;
use engine::store::journal::Actor;
use sqlx::PgPool;

use super::{Io, Stop, operator, refusal};
use crate::cli::ops::{HoldArgs, LimitArgs, ResumeArgs};

/// Holds the adapter and says what that means.
pub(super) async fn hold(pool: &PgPool, args: &HoldArgs, io: &mut Io<'_>) -> Result<(), Stop> {
    let acting = &args.acting;
    let by = operator(pool, &acting.operator).await?;
    let held = hold::hold_adapter(
        pool,
        (Actor::Operator(&by.username), by.role),
        &args.adapter,
        &acting.reason,
        !args.lookups_go,
    )
    .await
    .map_err(|e| refusal(e, "no such adapter"))?;
    if acting.output.json {
        return Ok(writeln!(io.out, "{}", json_of(&held))?);
    }
    let lookups = if held.holds_lookups {
        "nor any lookup"
    } else {
        "though lookups still go"
    };
    Ok(writeln!(
        io.out,
        "Sending to {} is held: no new request leaves for it, {lookups}, until `z29c resume {}`. Calls already in flight settle as they would.",
        held.adapter, held.adapter
    )?)
}

/// Resumes the adapter and says how many steps went back to the queue.
pub(super) async fn resume(pool: &PgPool, args: &ResumeArgs, io: &mut Io<'_>) -> Result<(), Stop> {
    let acting = &args.acting;
    let by = operator(pool, &acting.operator).await?;
    let Resumed { hold, released } = hold::resume_adapter(
        pool,
        (Actor::Operator(&by.username), by.role),
        &args.adapter,
        &acting.reason,
        args.per_second,
    )
    .await
    .map_err(|e| refusal(e, "no such adapter"))?;
    if acting.output.json {
        let resumed = serde_json::json!({ "ended": json_of(&hold), "released": released });
        return Ok(writeln!(io.out, "{resumed}")?);
    }
    let pace = match args.per_second {
        Some(rate) => format!("{rate} a second, oldest first"),
        None => "all at once".to_owned(),
    };
    Ok(writeln!(
        io.out,
        "Sending to {} resumed (held by {} since {}); {released} held step(s) go back to the queue, {pace}.",
        hold.adapter,
        hold.held_by,
        hold.held_at.format("%Y-%m-%d %H:%M UTC")
    )?)
}

/// Sets or clears the adapter's override and says which limits apply now.
pub(super) async fn limit(pool: &PgPool, args: &LimitArgs, io: &mut Io<'_>) -> Result<(), Stop> {
    let acting = &args.acting;
    let by = operator(pool, &acting.operator).await?;
    let limits = engine::domain::Limits {
        requests_per_second: args.per_second,
        in_flight: args.in_flight,
    };
    let now = engine::recovery::limit::limit_adapter(
        pool,
        (Actor::Operator(&by.username), by.role),
        &args.adapter,
        limits,
        &acting.reason,
        None,
    )
    .await
    .map_err(|e| refusal(e, "no such adapter"))?;
    if acting.output.json {
        return Ok(writeln!(
            io.out,
            "{}",
            serde_json::json!({ "adapter": args.adapter, "override": now })
        )?);
    }
    let Some(now) = now else {
        return Ok(writeln!(
            io.out,
            "{}'s override is cleared: the limits its file declares apply again.",
            args.adapter
        )?);
    };
    Ok(writeln!(
        io.out,
        "{} is limited to {} across every worker process, until `z29c limit {} --clear`.",
        now.adapter, now.limits, now.adapter
    )?)
}

fn json_of(hold: &AdapterHold) -> serde_json::Value {
    serde_json::json!({
        "adapter": hold.adapter, "held_by": hold.held_by, "held_at": hold.held_at.to_rfc3339(),
        "reason": hold.reason, "holds_lookups": hold.holds_lookups, "tripped_by": hold.tripped_by,
    })
}
