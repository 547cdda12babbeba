//! `z29c step show|check|retry|evidence|waive|authorize|cancel|replace`: a step's evidence and
//! the recovery actions, through `engine::recovery::perform` as the console takes them.

use engine::domain::OperatorAction;
use engine::read::evidence::Evidence;
use engine::recovery::{self, Action, Request};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use super::print::{self, Table};
use super::{Io, Stop, operator, refusal};
use crate::cli::ops::{Acting, StepCommand};

/// Runs one `z29c step` command.
pub(super) async fn run(pool: &PgPool, command: StepCommand, io: &mut Io<'_>) -> Result<(), Stop> {
    let (id, acting, action) = match command {
        StepCommand::Show {
            id,
            operator,
            output,
            ..
        } => return show(pool, id, operator.as_deref(), output.json, io).await,
        StepCommand::Check { id, acting } => (id, acting, Action::CheckDestination),
        StepCommand::Retry { id, acting } => (id, acting, Action::RetrySameKey),
        StepCommand::Evidence {
            id,
            external_reference,
            evidence,
            acting,
        } => (
            id,
            acting,
            Action::AttachEvidence {
                external_reference,
                evidence,
            },
        ),
        StepCommand::Waive {
            id,
            residual_uncertainty,
            acting,
        } => (
            id,
            acting,
            Action::Waive {
                residual_uncertainty,
            },
        ),
        StepCommand::Authorize {
            id,
            acknowledge_duplicate_risk,
            acting,
        } => (
            id,
            acting,
            Action::AuthorizeAnotherAttempt {
                acknowledged_duplicate_risk: acknowledge_duplicate_risk,
            },
        ),
        StepCommand::Cancel { id, acting } => (id, acting, Action::Cancel),
        StepCommand::Replace {
            id,
            corrected_input,
            acting,
        } => (id, acting, replacement(corrected_input.as_deref())?),
    };
    act(pool, id, &acting, action, io).await
}

/// *Replace*, with the corrected input parsed as JSON.
fn replacement(corrected_input: Option<&str>) -> Result<Action, Stop> {
    let corrected_input = match corrected_input.map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| Stop::Usage(format!("The corrected input is not JSON: {e}.")))?,
        ),
    };
    Ok(Action::Replace { corrected_input })
}

fn no_step(id: Uuid) -> String {
    format!("No step has the id {id}.")
}

/// Takes `action` as the operator `--as` names, and prints what it did (with the step's state
/// and version after it, in JSON).
async fn act(
    pool: &PgPool,
    id: Uuid,
    acting: &Acting,
    action: Action,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    let operator = operator(pool, &acting.operator).await?;
    let done = recovery::perform(
        pool,
        Request {
            operator: &operator,
            step: id,
            seen_version: acting.if_version,
            reason: &acting.reason,
            action,
        },
    )
    .await
    .map_err(|e| refusal(e, &no_step(id)))?;
    if acting.output.json {
        let mut conn = pool.acquire().await?;
        let after = engine::store::action::read_facts(&mut conn, done.step).await?;
        let document = json!({
            "message": done.message,
            "step": done.step,
            "state": after.as_ref().map(|f| f.state),
            "version": after.as_ref().map(|f| f.version),
        });
        print::json(io.out, &document)?;
    } else {
        writeln!(io.out, "{}", done.message)?;
        if done.step != id {
            writeln!(io.out, "next: z29c step show {}", done.step)?;
        }
    }
    Ok(())
}

fn action_json(action: OperatorAction) -> Value {
    json!({
        "action": action.name(), "label": action.label(),
        "required_role": action.required_role().as_str(),
    })
}

/// Prints the evidence and the permitted actions: with `--as`, those the operator's role
/// allows and, apart, those beyond it. JSON: the evidence's fields, `permitted_actions` and
/// `beyond_role`.
async fn show(
    pool: &PgPool,
    id: Uuid,
    name: Option<&str>,
    json: bool,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    let role = match name {
        Some(name) => Some(operator(pool, name).await?.role),
        None => None,
    };
    let e = engine::read::evidence::evidence(pool, id)
        .await?
        .ok_or_else(|| Stop::Refused(no_step(id)))?;
    let (permitted, beyond_role): (Vec<_>, Vec<_>) = e
        .permitted_actions()
        .into_iter()
        .partition(|a| role.is_none_or(|role| role.may(*a)));
    if json {
        let mut document =
            serde_json::to_value(&e).map_err(|error| Stop::Failed(anyhow::Error::new(error)))?;
        document["permitted_actions"] = permitted.iter().copied().map(action_json).collect();
        document["beyond_role"] = beyond_role.iter().copied().map(action_json).collect();
        print::json(io.out, &document)?;
        return Ok(());
    }
    write_facts(io, &e)?;
    write_claims(io, &e)?;
    write_attempts(io, &e)?;
    write_timeline(io, &e)?;
    writeln!(
        io.out,
        "\nactions permitted now (z29c step ACTION {id} --reason …):"
    )?;
    if permitted.is_empty() {
        writeln!(io.out, "  none")?;
    }
    for a in &permitted {
        let needs = a.required_role().as_str();
        writeln!(io.out, "  {:<26} {:<28} {needs}", a.name(), a.label())?;
    }
    for a in &beyond_role {
        let needs = a.required_role().as_str();
        writeln!(io.out, "  ({} needs the {needs} role)", a.name())?;
    }
    Ok(())
}

fn write_facts(io: &mut Io<'_>, e: &Evidence) -> std::io::Result<()> {
    let capabilities = e.contract.as_ref().map(|c| c.capabilities_summary());
    let trust = e.trust.as_ref().map(|t| t.sentence());
    let receipt = e.receipt.as_ref().map(|(method, reference, at)| {
        format!(
            "{reference}, by {}, observed {}",
            method.replace('_', " "),
            print::time(*at)
        )
    });
    let lease = e.leased_until.map(|until| {
        format!(
            "held by a worker or a lookup until {}; actions wait",
            print::time(until)
        )
    });
    let incidents: Vec<String> = e.incidents.iter().map(ToString::to_string).collect();
    print::fields(
        io.out,
        &[
            ("step", e.step_id.to_string()),
            (
                "workflow",
                format!("{} ({})", e.workflow_id, e.creation_key),
            ),
            (
                "logical",
                format!("{} (v{})", e.logical, e.definition_version),
            ),
            (
                "state",
                format!("{} ({})", print::name_of(&e.state), e.state.label()),
            ),
            ("version", e.version.to_string()),
            ("adapter", print::or_dash(e.adapter.as_deref())),
            ("contract", print::or_dash(capabilities.as_deref())),
            ("trust", print::or_dash(trust.as_deref())),
            ("request key", print::or_dash(e.request_key.as_deref())),
            (
                "content digest",
                print::or_dash(e.content_digest.as_deref()),
            ),
            ("input digest", print::or_dash(e.input_digest.as_deref())),
            ("first sent", print::maybe_time(e.first_sent_at)),
            ("last sent", print::maybe_time(e.last_sent_at)),
            (
                e.state.waiting_since_label(),
                print::maybe_time(e.unknown_since),
            ),
            ("receipt", receipt.unwrap_or_else(|| "none".into())),
            ("lease", lease.unwrap_or_else(|| "-".into())),
            ("incidents", incidents.join(", ")),
        ],
    )
}

/// Each claim of the step's adapter: only verified ones count, and a refuted one says how.
fn write_claims(io: &mut Io<'_>, e: &Evidence) -> std::io::Result<()> {
    let Some(trust) = &e.trust else {
        return Ok(());
    };
    if trust.claims.is_empty() {
        return Ok(());
    }
    writeln!(
        io.out,
        "\nclaims of the adapter's version {}:",
        trust.version
    )?;
    for c in &trust.claims {
        let evidence = match c.trust {
            engine::domain::Trust::Verified => String::new(),
            engine::domain::Trust::Unverified | engine::domain::Trust::Refuted => {
                format!(" — {}", c.evidence)
            }
        };
        writeln!(
            io.out,
            "  {:<22} {}{evidence}",
            c.claim.label(),
            c.trust.label()
        )?;
    }
    Ok(())
}

fn write_attempts(io: &mut Io<'_>, e: &Evidence) -> std::io::Result<()> {
    let mut table = Table::new(&["#", "worker", "started", "call began", "ended", "outcome"]);
    for a in &e.attempts {
        table.row(vec![
            a.number.to_string(),
            a.worker.clone(),
            print::time(a.started_at),
            print::maybe_time(a.invoked_at),
            print::maybe_time(a.ended_at),
            a.outcome.map_or("in progress", |o| o.label()).to_owned(),
        ]);
    }
    writeln!(io.out, "\nattempts:")?;
    if table.is_empty() {
        return writeln!(io.out, "  none");
    }
    table.write(io.out)
}

fn write_timeline(io: &mut Io<'_>, e: &Evidence) -> std::io::Result<()> {
    let mut table = Table::new(&["at", "what", "detail"]);
    for t in &e.timeline {
        table.row(vec![print::time(t.at), t.what.clone(), t.detail.clone()]);
    }
    writeln!(io.out, "\ntimeline:")?;
    if table.is_empty() {
        return writeln!(io.out, "  none");
    }
    table.write(io.out)
}
