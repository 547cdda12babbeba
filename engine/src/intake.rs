//! Starting work: intent, initial steps and an outbox event, committed in one transaction. A
//! pure step that depends on nothing is settled there too, its output rendered from the input
//! (docs/DESIGN.md §4).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::definition::{Catalog, CatalogError, Definition, InputError};
use crate::domain::AuditAction;
use crate::domain::StepKind;
use crate::domain::words::{DuplicateStatus, status_sentence};
use crate::domain::{EventKind, InputDigest, StepState, WorkflowState, event};
use crate::store::journal::{self, Actor, AuditEntry};
use crate::store::step::{self, NewStep};
use crate::store::workflow::{self, NewWorkflowRow, WorkflowRow};

/// A request to start a workflow.
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    /// Client-supplied; the same key with the same input returns the existing workflow.
    pub creation_key: String,
    pub definition: String,
    /// The definition version; the newest applied when absent.
    pub version: Option<i32>,
    pub input: Value,
}

/// What starting did.
#[derive(Debug, Clone)]
pub enum Started {
    /// A new workflow was recorded.
    Created(WorkflowRow),
    /// The creation key was known and the input the same: the existing workflow.
    Existing(WorkflowRow),
    /// The creation key started a workflow since archived, with the same input: its
    /// tombstone (docs/DESIGN.md §21). A key is never taken twice.
    Archived(crate::store::archive::Tombstone),
}

impl Started {
    /// The workflow's id, whichever way it was answered.
    pub fn id(&self) -> Uuid {
        match self {
            Started::Created(w) | Started::Existing(w) => w.id,
            Started::Archived(t) => t.id,
        }
    }
}

/// Why a workflow was not started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Definition(CatalogError),
    #[error(
        "creation key `{key}` already started a workflow with input {existing}; this input has digest {requested}"
    )]
    CreationKeyConflict {
        key: String,
        existing: String,
        requested: String,
    },
    #[error("adapter `{0}` is not registered")]
    UnknownAdapter(String),
    #[error(
        "this client may start only workflows that call {allowed}; this one would call `{adapter}`"
    )]
    AdapterNotAllowed { adapter: String, allowed: String },
    #[error("creation key must be 1 to 200 characters, without NUL")]
    BadCreationKey,
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// Records the intent, its steps and a `workflow.started` event atomically, with the pure steps
/// that depend on nothing settled and announced. Idempotent on the creation key: same key and
/// input digest → the existing workflow; another digest → conflict.
pub async fn start_workflow(
    pool: &PgPool,
    new: NewWorkflow,
    actor: Actor<'_>,
) -> Result<Started, StartError> {
    start_workflow_within(pool, new, actor, None).await
}

/// [`start_workflow`] for a client limited to `adapters` (names or patterns with one `*`, a
/// token's limit): a workflow that would call another adapter is refused before anything is
/// stored.
pub async fn start_workflow_within(
    pool: &PgPool,
    new: NewWorkflow,
    actor: Actor<'_>,
    adapters: Option<&[String]>,
) -> Result<Started, StartError> {
    let limit = adapters;
    refuse_unstorable(&new)?;
    let definition = definition_of(pool, &new).await?;
    let version = definition.version();
    let input = definition.normalize(&new.input)?;
    refuse_inexact(&new.input)?;
    refuse_inexact(&input)?;
    definition.subject(&input)?;
    let digest = InputDigest::of_json(&input);
    let adapters = adapters_of(&definition, &input)?;
    refuse_outside(&adapters, limit)?;
    let id = Uuid::now_v7();
    let steps = new_steps(
        id,
        &definition,
        &adapters,
        &settled_at_admission(&definition, &input),
    );
    let started = json!({ "creation_key": new.creation_key, "definition": new.definition, "version": version });

    let mut tx = pool.begin().await?;
    let known = crate::store::adapter::names(&mut *tx).await?;
    if let Some(missing) = adapters
        .iter()
        .flat_map(|(_, a)| a)
        .find(|a| !known.contains(a))
    {
        return Err(StartError::UnknownAdapter(missing.clone()));
    }
    let row = NewWorkflowRow {
        id,
        creation_key: &new.creation_key,
        definition_name: &new.definition,
        definition_version: version,
        input: &input,
        input_digest: digest.as_str(),
        all_settled: !steps.is_empty() && steps.iter().all(|s| s.output.is_some()),
        any_settled: steps.iter().any(|s| s.output.is_some()),
        revision: 1 + steps.iter().filter(|s| s.output.is_some()).count() as i64,
    };
    let Some((state, revision)) = workflow::insert_unless_exists(&mut tx, &row).await? else {
        let existing = workflow::by_creation_key(&mut tx, &new.creation_key)
            .await?
            .ok_or(sqlx::Error::RowNotFound)?;
        return same_or_conflict(Started::Existing(existing), new, version, &digest);
    };
    // Checked after the insert: an archiver committing meanwhile is seen here.
    if let Some(archived) =
        crate::store::archive::tombstone(&mut *tx, None, Some(&new.creation_key)).await?
    {
        tx.rollback().await?;
        return same_or_conflict(Started::Archived(archived), new, version, &digest);
    }
    let events = opening(&steps, started, state);
    let sentence = opening_sentence(&definition, &steps);
    record_opening(&mut tx, id, (state, revision), &steps, &events, sentence).await?;
    journal::audit(
        &mut tx,
        &AuditEntry {
            actor,
            action: AuditAction::StartWorkflow,
            workflow: Some(id),
            step: None,
            reason: None,
            details: json!({ "creation_key": new.creation_key, "input_digest": digest }),
        },
    )
    .await?;
    let created = workflow::by_id(&mut *tx, id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    tx.commit().await?;
    Ok(Started::Created(created))
}

/// What a new workflow starts with beside its row: its steps, its opening events, and its
/// status projection as it starts (the status consumer then finds it current).
async fn record_opening(
    tx: &mut sqlx::PgConnection,
    id: Uuid,
    (state, revision): (WorkflowState, i64),
    steps: &[NewStep<'_>],
    events: &[(EventKind, Value)],
    sentence: String,
) -> sqlx::Result<()> {
    debug_assert_eq!(i64::try_from(events.len()), Ok(revision));
    step::insert_all(&mut *tx, steps).await?;
    journal::emit_all(&mut *tx, id, events).await?;
    crate::store::projection::upsert_statuses(tx, &[id], &[revision], &[state], &[sentence]).await
}

/// The definition `new` names: the version it asks for, else the newest.
async fn definition_of(pool: &PgPool, new: &NewWorkflow) -> Result<Arc<Definition>, StartError> {
    match new.version {
        Some(version) => Catalog::get(pool, &new.definition, version).await,
        None => Catalog::newest(&mut *pool.acquire().await?, &new.definition).await,
    }
    .map_err(|e| match e {
        CatalogError::Unknown(input) => StartError::Input(input),
        CatalogError::Sqlx(e) => StartError::Sqlx(e),
        other => StartError::Definition(other),
    })
}

/// Refuses what PostgreSQL could not store, before anything is written: a creation key out of
/// bounds, or a NUL character anywhere in the input.
fn refuse_unstorable(new: &NewWorkflow) -> Result<(), StartError> {
    if new.creation_key.is_empty()
        || new.creation_key.chars().count() > 200
        || new.creation_key.contains('\0')
    {
        return Err(StartError::BadCreationKey);
    }
    // No definition is named so: answered without asking the database (which stores no NUL).
    if !crate::domain::names::is_name(&new.definition) {
        return Err(
            InputError::UnknownDefinition(crate::domain::words::displayable(&new.definition))
                .into(),
        );
    }
    // PostgreSQL stores no NUL character in text or jsonb; refuse it here, clearly.
    if new.input.to_string().contains("\\u0000") {
        return Err(
            InputError::Invalid("strings must not contain the NUL character".into()).into(),
        );
    }
    Ok(())
}

/// A creation key seen before, on a workflow in the hot tables or an archived one: that
/// workflow if definition and input digest agree, else a conflict that names both digests.
fn same_or_conflict(
    seen: Started,
    new: NewWorkflow,
    version: i32,
    digest: &InputDigest,
) -> Result<Started, StartError> {
    let (kept_digest, kept_definition, kept_version) = match &seen {
        Started::Created(w) | Started::Existing(w) => {
            (&w.input_digest, &w.definition_name, w.definition_version)
        }
        Started::Archived(t) => (&t.input_digest, &t.definition_name, t.definition_version),
    };
    if kept_digest == digest.as_str()
        && *kept_definition == new.definition
        && kept_version == version
    {
        return Ok(seen);
    }
    Err(StartError::CreationKeyConflict {
        existing: kept_digest.clone(),
        key: new.creation_key,
        requested: digest.to_string(),
    })
}

/// Refuses an input holding an integer JSON does not carry exactly: rounded on the wire and
/// in its digest, two inputs could share one.
fn refuse_inexact(input: &Value) -> Result<(), StartError> {
    match crate::domain::identity::inexact_integer(input) {
        None => Ok(()),
        Some(path) => {
            let at = if path.is_empty() {
                "the input".to_owned()
            } else {
                format!("`{path}`")
            };
            Err(InputError::Invalid(format!(
                "{at} is an integer beyond ±2^53, which JSON does not carry exactly (two such inputs could share a digest): send it as a string"
            ))
            .into())
        }
    }
}

/// Refuses a workflow that would call an adapter outside `limit` (a token's), when there is one.
fn refuse_outside(
    adapters: &[(String, Option<String>)],
    limit: Option<&[String]>,
) -> Result<(), StartError> {
    let Some(limit) = limit else { return Ok(()) };
    let mut called = adapters.iter().flat_map(|(_, a)| a);
    match called.find(|a| !crate::domain::names::within(Some(limit), a)) {
        None => Ok(()),
        Some(outside) => Err(StartError::AdapterNotAllowed {
            adapter: outside.clone(),
            allowed: limit
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The adapter each step of a workflow with `input` calls (none for a pure step).
fn adapters_of(
    definition: &Definition,
    input: &Value,
) -> Result<Vec<(String, Option<String>)>, InputError> {
    definition
        .steps()
        .iter()
        .map(|spec| {
            let adapter = match spec.kind {
                StepKind::Pure => None,
                _ => Some(definition.adapter_for(&spec.logical, input)?),
            };
            Ok((spec.logical.clone(), adapter))
        })
        .collect()
}

/// The outputs of the pure steps that depend on nothing, by name: their templates read the
/// normalized input alone, so a worker would render the same output later (docs/DESIGN.md §4).
/// A step whose output does not render is left out: it stays `ready`, and the worker that claims
/// it sends it to review with the reason, as any pure step that fails.
fn settled_at_admission(definition: &Definition, input: &Value) -> BTreeMap<String, Value> {
    let nothing = json!({});
    definition
        .steps()
        .iter()
        .filter(|spec| spec.kind == StepKind::Pure && spec.depends_on.is_empty())
        .filter_map(|spec| {
            let output = definition.run_pure(&spec.logical, input, &nothing).ok()?;
            Some((spec.logical.clone(), output))
        })
        .collect()
}

/// The definition's steps for a new workflow: the pure steps in `outputs` succeeded, those whose
/// dependencies are all among them (or who have none) ready, the rest blocked until their
/// dependencies' receipts exist.
fn new_steps<'a>(
    workflow: Uuid,
    definition: &'a Definition,
    adapters: &'a [(String, Option<String>)],
    outputs: &BTreeMap<String, Value>,
) -> Vec<NewStep<'a>> {
    definition
        .steps()
        .iter()
        .zip(adapters)
        .map(|(spec, (_, adapter))| {
            let output = outputs.get(&spec.logical).cloned();
            let state = if output.is_some() {
                StepState::Succeeded
            } else if spec.depends_on.iter().all(|d| outputs.contains_key(d)) {
                StepState::Ready
            } else {
                StepState::Blocked
            };
            NewStep {
                id: Uuid::now_v7(),
                workflow,
                logical: &spec.logical,
                definition_version: definition.version(),
                kind: spec.kind,
                adapter: adapter.as_deref(),
                state,
                depends_on: spec.depends_on.clone(),
                required_fields: spec.required_fields.clone(),
                accepts_waiver: spec.accepts_waiver,
                output,
            }
        })
        .collect()
}

/// The customer's sentence for a new workflow of `steps`: its status step's, in the state it
/// starts in (no receipt, no incident, nothing withdrawn yet), as the projection would say it.
fn opening_sentence(definition: &Definition, steps: &[NewStep<'_>]) -> String {
    let status_step = definition.status_step();
    let state = steps
        .iter()
        .rfind(|s| s.logical == status_step)
        .map_or(StepState::Ready, |s| s.state);
    status_sentence(
        &definition.words(status_step),
        state,
        None,
        DuplicateStatus::None,
    )
}

/// A new workflow's events in revision order: started, each step settled at admission, and the
/// change to `state` (the one the database derived as it recorded the workflow) unless it is
/// still `pending`. The database's rule runs in the insert itself, from what admission knows,
/// not through `conclusion::announce`'s statement: planning that cost each admission more than
/// the rest of its transaction.
fn opening(steps: &[NewStep<'_>], started: Value, state: WorkflowState) -> Vec<(EventKind, Value)> {
    let settled: Vec<&NewStep> = steps.iter().filter(|s| s.output.is_some()).collect();
    let mut events = vec![(EventKind::WorkflowStarted, started)];
    events.extend(settled.iter().map(|s| {
        let payload = event::pure_step_succeeded(s.id, s.logical);
        (EventKind::StepSucceeded, payload)
    }));
    if state != WorkflowState::Pending {
        let change = event::state_changed(WorkflowState::Pending, state);
        events.push((EventKind::WorkflowStateChanged, change));
    }
    events
}
