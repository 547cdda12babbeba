//! The evidence of one step, evidence first: what the console's step page shows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::{SideEffectContract, StepState};

/// Everything known about one step, evidence first: what the console's step page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub logical: String,
    pub definition_version: i32,
    pub state: StepState,
    pub adapter: Option<String>,
    /// The trusted contract as it speaks for this step's request, as the action reads it
    /// (`store::action::StepFacts::contract`).
    pub contract: Option<SideEffectContract>,
    /// The adapter version the request was sent under, once it was.
    #[serde(default)]
    pub sent_version: Option<i32>,
    /// How far the adapter's contract is trusted (docs/DESIGN.md §16).
    pub trust: Option<AdapterTrust>,
    /// The digest the destination compares under the request key, once the request is bound.
    pub content_digest: Option<String>,
    /// Whom the workflow acts on and what the step's effect is called, from its definition.
    pub subject: String,
    pub noun: String,
    pub request_key: Option<String>,
    pub input_digest: Option<String>,
    pub request_summary: Option<serde_json::Value>,
    pub first_sent_at: Option<DateTime<Utc>>,
    /// How long ago the request was first sent, in milliseconds (the provider's key retention
    /// runs from then).
    pub key_first_sent_ms_ago: Option<u64>,
    pub last_sent_at: Option<DateTime<Utc>>,
    pub unknown_since: Option<DateTime<Utc>>,
    pub receipt: Option<(String, String, DateTime<Utc>)>,
    pub attempts: Vec<AttemptEvidence>,
    pub timeline: Vec<TimelineEntry>,
    pub last_lookup: Option<crate::domain::LookupAnswer>,
    pub open_incident: bool,
    /// The step's version (its last change); action forms carry it back.
    pub version: i64,
    /// Until when a worker (or an operator's lookup) holds the step.
    pub leased_until: Option<DateTime<Utc>>,
    pub request_prepared: bool,
    /// The normalized input the step runs on, and its digest (a replacement's may be corrected).
    pub input: serde_json::Value,
    pub step_input_digest: String,
    /// Lineage: the step this one replaces, and the step that replaced it.
    pub replaces: Option<Uuid>,
    pub replaced_by: Option<Uuid>,
    /// For a compensation step: the external reference it withdraws.
    pub withdraws: Option<String>,
    /// Every integrity incident of this step, open ones first.
    pub incidents: Vec<Uuid>,
    /// The workflow's other steps: id, logical name, generation, state.
    pub siblings: Vec<(Uuid, String, i32, StepState)>,
    /// The proposal waiting on this step for a second approver (docs/DESIGN.md §20).
    pub proposal: Option<crate::store::proposal::Proposal>,
}

impl Evidence {
    /// The facts the recovery decision table reads; `None` for a pure step.
    pub fn decision_facts(&self) -> Option<crate::domain::StepFacts<'_>> {
        Some(crate::domain::StepFacts {
            state: self.state,
            contract: self.contract.as_ref()?,
            last_lookup: self.last_lookup.as_ref(),
            request_prepared: self.request_prepared,
            open_incident: self.open_incident,
            key_first_sent_ms_ago: self.key_first_sent_ms_ago,
        })
    }

    /// What the step's contract and state permit now, whatever the caller's role (the page
    /// and the API filter by role); nothing for a pure step. The same decision table the
    /// action applies again under the row lock.
    pub fn permitted_actions(&self) -> Vec<crate::domain::OperatorAction> {
        self.decision_facts()
            .map(|facts| crate::domain::permitted_actions(&facts))
            .unwrap_or_default()
    }
}

/// What verification proved of the adapter's current version, claim by claim, and whether
/// production contradicted a claim since (docs/DESIGN.md §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterTrust {
    /// The adapter's current version (its file or registration).
    pub version: i32,
    /// The version that passed verification last; the adapter sends only when it is `version`.
    pub verified_version: Option<i32>,
    pub verified_at: Option<DateTime<Utc>>,
    /// The sandbox (or live destination) verification ran against.
    pub verified_against: Option<String>,
    /// The contradiction production saw, if it refuted a claim since.
    pub demoted: Option<String>,
    /// Each claim of the current version, with its trust and evidence.
    pub claims: Vec<crate::store::adapter::ClaimRow>,
    /// An operator's hold on the adapter, while it stands (docs/DESIGN.md §20).
    pub hold: Option<crate::store::hold::AdapterHold>,
    /// The actions on its steps that need two approvers, by its current file (§20).
    #[serde(default)]
    pub four_eyes: Vec<crate::domain::OperatorAction>,
}

impl AdapterTrust {
    /// Whether the current version may send (it passed verification).
    pub fn may_send(&self) -> bool {
        self.verified_version == Some(self.version)
    }

    /// How the version was verified, or why it sends nothing; an operator's hold first.
    pub fn sentence(&self) -> String {
        let trust = self.trust_sentence();
        match &self.hold {
            Some(hold) => format!(
                "Held: sending is paused by {} since {}: {}. {trust}",
                hold.held_by,
                hold.held_at.format("%Y-%m-%d %H:%M UTC"),
                hold.reason
            ),
            None => trust,
        }
    }

    /// One sentence: how the version was verified, or why it sends nothing.
    fn trust_sentence(&self) -> String {
        let refuted = self
            .claims
            .iter()
            .filter(|c| c.trust == crate::domain::Trust::Refuted)
            .count();
        match (self.may_send(), &self.verified_against, self.verified_at) {
            (true, against, Some(at)) => format!(
                "Verified: version {} passed verification{} at {}{}.",
                self.version,
                against
                    .as_deref()
                    .map(|a| format!(" against {a}"))
                    .unwrap_or_default(),
                at.format("%Y-%m-%d %H:%M UTC"),
                match (refuted, &self.demoted) {
                    (0, _) => String::new(),
                    (_, Some(reason)) =>
                        format!("; since then {reason}, and that claim permits nothing"),
                    (n, None) => format!("; {n} refuted claim(s) permit nothing"),
                }
            ),
            _ => format!(
                "Not verified: version {} has not passed verification, so it sends nothing and its steps wait (z29c adapter verify).",
                self.version
            ),
        }
    }
}

/// One attempt, never overwritten.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptEvidence {
    pub number: i32,
    pub id: Uuid,
    pub worker: String,
    pub started_at: DateTime<Utc>,
    pub invoked_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: Option<crate::domain::AttemptOutcome>,
    pub observation: Option<String>,
}

/// An observation or an audit entry, in time order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub what: String,
    pub detail: String,
}

/// The evidence of step `id`, or `None` when there is no such step.
pub async fn evidence(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<Evidence>> {
    let Some(s) = sqlx::query!(
        r#"select s.id, s.workflow_id, w.creation_key, s.logical, w.definition_name, s.definition_version,
                  s.state as "state: StepState", s.adapter, s.request_key,
                  s.unknown_since as "unknown_since: DateTime<Utc>",
                  q.summary ->> 'digest' as content_digest, q.input_digest as "input_digest?", q.summary as "summary?",
                  q.first_sent_at as "first_sent_at: DateTime<Utc>", q.last_sent_at as "last_sent_at: DateTime<Utc>",
                  (extract(epoch from now() - q.first_sent_at) * 1000)::bigint as key_age_ms,
                  rc.method::text as "receipt_method?", rc.external_reference as "receipt_reference?", rc.observed_at as "receipt_at?: DateTime<Utc>",
                  exists(select 1 from integrity_incident i where i.step_id = s.id and i.resolved_at is null) as "open_incident!"
           from step s join workflow w on w.id = s.workflow_id
           left join external_request q on q.request_key = s.request_key
           left join receipt rc on rc.id = s.receipt_id
           where s.id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    // The rest at once, each on a connection of its own: the page waits for the slowest read,
    // not for their sum (which grows fast while the engine keeps every core busy).
    let (facts, lineage, trust, attempts, timeline, siblings, proposal) = tokio::try_join!(
        facts(pool, id),
        lineage(pool, id),
        adapter_trust(pool, s.adapter.as_deref()),
        attempts(pool, id),
        timeline(pool, id),
        siblings(pool, s.workflow_id, id),
        crate::store::proposal::waiting(pool, id),
    )?;
    let (subject, noun) = subject_and_noun(
        pool,
        (&s.definition_name, s.definition_version),
        &s.logical,
        &lineage.input,
    )
    .await?;
    Ok(Some(Evidence {
        step_id: s.id,
        workflow_id: s.workflow_id,
        creation_key: s.creation_key,
        logical: s.logical,
        definition_version: s.definition_version,
        state: s.state,
        adapter: s.adapter,
        contract: facts.contract,
        sent_version: facts.sent_version,
        trust,
        receipt: (s.receipt_method.zip(s.receipt_reference).zip(s.receipt_at))
            .map(|((method, reference), at)| (method, reference, at)),
        content_digest: s.content_digest,
        subject,
        noun,
        request_key: s.request_key,
        input_digest: s.input_digest,
        request_summary: s.summary,
        first_sent_at: s.first_sent_at,
        // The database's clock, as the action's own admission reads it (store::action).
        key_first_sent_ms_ago: s.key_age_ms.map(|ms| u64::try_from(ms).unwrap_or(0)),
        last_sent_at: s.last_sent_at,
        unknown_since: s.unknown_since,
        attempts,
        timeline,
        last_lookup: facts.last_lookup,
        open_incident: s.open_incident,
        version: facts.version,
        leased_until: facts.leased_until,
        request_prepared: facts.request_prepared,
        input: lineage.input,
        step_input_digest: lineage.digest,
        replaces: lineage.replaces,
        replaced_by: lineage.replaced_by,
        withdraws: lineage.withdraws,
        incidents: lineage.incidents,
        siblings,
        proposal,
    }))
}

/// What verification proved of adapter `name`'s current version, claim by claim (none for a
/// pure step, which has no adapter).
async fn adapter_trust(pool: &PgPool, name: Option<&str>) -> sqlx::Result<Option<AdapterTrust>> {
    let Some(name) = name else {
        return Ok(None);
    };
    let (adapter, claims, hold, four_eyes) = tokio::try_join!(
        sqlx::query!(
            r#"select contract_version, verified_version, verified_at as "verified_at: DateTime<Utc>",
                      verified_against, demoted_reason
               from adapter where name = $1"#,
            name
        )
        .fetch_optional(pool),
        crate::store::adapter::claims(pool, name),
        crate::store::hold::of(pool, name),
        crate::adapter::apply::four_eyes_of(pool, name),
    )?;
    Ok(adapter.map(|a| AdapterTrust {
        version: a.contract_version,
        verified_version: a.verified_version,
        verified_at: a.verified_at,
        verified_against: a.verified_against,
        demoted: a.demoted_reason,
        claims,
        hold: hold.flatten(),
        four_eyes: four_eyes.map(|rule| rule.actions).unwrap_or_default(),
    }))
}

/// Whom the workflow acts on and what the step's effect is called, in its definition's words.
async fn subject_and_noun(
    pool: &PgPool,
    (name, version): (&str, i32),
    logical: &str,
    input: &Value,
) -> sqlx::Result<(String, String)> {
    use crate::definition::{Catalog, CatalogError};
    Ok(match Catalog::get(pool, name, version).await {
        Ok(definition) => (
            definition.subject(input).unwrap_or_default(),
            definition.words(logical).noun,
        ),
        Err(CatalogError::Sqlx(e)) => return Err(e),
        Err(_) => (
            String::new(),
            crate::domain::words::StepWords::named(logical).noun,
        ),
    })
}

/// Every attempt of step `id`, in order.
async fn attempts(pool: &PgPool, id: Uuid) -> sqlx::Result<Vec<AttemptEvidence>> {
    let rows = sqlx::query!(
        r#"select id as "id!", number as "number!", worker as "worker!",
                  started_at as "started_at!: DateTime<Utc>", invoked_at as "invoked_at: DateTime<Utc>",
                  ended_at as "ended_at: DateTime<Utc>", outcome as "outcome: crate::domain::AttemptOutcome",
                  observation
           from attempt where step_id = $1 order by number"#,
        id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|a| AttemptEvidence {
            number: a.number,
            id: a.id,
            worker: a.worker,
            started_at: a.started_at,
            invoked_at: a.invoked_at,
            ended_at: a.ended_at,
            outcome: a.outcome,
            observation: a
                .observation
                .and_then(|o| serde_json::from_value::<crate::domain::TransportObservation>(o).ok())
                .map(|o| o.describe()),
        })
        .collect())
}

/// The observations and audit entries of step `id`, with the notes on its workflow, in time
/// order.
async fn timeline(pool: &PgPool, id: Uuid) -> sqlx::Result<Vec<TimelineEntry>> {
    let rows = sqlx::query!(
        r#"select observed_at as "at!: DateTime<Utc>", kind as "what!", body::text as "detail!" from observation where step_id = $1
           union all
           select at, action || ' by ' || actor, coalesce(reason, '') from audit where step_id = $1
           union all
           select at, 'note on the workflow by ' || actor, coalesce(reason, '') from audit
           where action = 'note' and step_id is null
             and workflow_id = (select workflow_id from step where id = $1)
           order by 1"#,
        id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|t| TimelineEntry {
            at: t.at,
            what: t.what,
            detail: t.detail,
        })
        .collect())
}

/// The facts the step's permitted actions depend on, read without a lock: the page only shows
/// them, and an action re-reads them under its own lock.
async fn facts(pool: &PgPool, id: Uuid) -> sqlx::Result<crate::store::action::StepFacts> {
    let mut conn = pool.acquire().await?;
    crate::store::action::read_facts(&mut conn, id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)
}

/// Where a step stands among its workflow's steps: what it runs on, what it replaces or was
/// replaced by, what it withdraws, and its incidents.
struct Lineage {
    input: Value,
    digest: String,
    replaces: Option<Uuid>,
    replaced_by: Option<Uuid>,
    withdraws: Option<String>,
    incidents: Vec<Uuid>,
}

/// The lineage of step `id`.
async fn lineage(pool: &PgPool, id: Uuid) -> sqlx::Result<Lineage> {
    let r = sqlx::query!(
        r#"select coalesce(s.input, w.input) as "input!", coalesce(s.input_digest, w.input_digest) as "digest!",
                  s.replaces_step_id, (select r.id from step r where r.replaces_step_id = s.id) as replaced_by,
                  (select c.external_reference from compensation_link c where c.compensation_step_id = s.id) as withdraws,
                  coalesce((select array_agg(i.id order by i.resolved_at desc nulls first, i.opened_at)
                            from integrity_incident i where i.step_id = s.id), '{}') as "incidents!"
           from step s join workflow w on w.id = s.workflow_id where s.id = $1"#,
        id
    )
    .fetch_one(pool)
    .await?;
    Ok(Lineage {
        input: r.input,
        digest: r.digest,
        replaces: r.replaces_step_id,
        replaced_by: r.replaced_by,
        withdraws: r.withdraws,
        incidents: r.incidents,
    })
}

/// The other steps of workflow `workflow` than `id`: id, logical name, generation, state.
async fn siblings(
    pool: &PgPool,
    workflow: Uuid,
    id: Uuid,
) -> sqlx::Result<Vec<(Uuid, String, i32, StepState)>> {
    let rows = sqlx::query!(
        r#"select id, logical, generation, state as "state: StepState" from step
           where workflow_id = $1 and id <> $2 order by created_at, generation, id"#,
        workflow,
        id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.logical, r.generation, r.state))
        .collect())
}
