//! Applying adapter files and verifying them (docs/DESIGN.md §5, §16): a file is stored as a
//! new version that sends nothing; verification against a sandbox the user names provokes the
//! failure paths of its claims, and records each claim's trust; the version sends once its
//! probe succeeded and nothing was refuted, and only its verified claims count.

use sqlx::PgPool;

use super::contract_suite::{self, SuiteReport};
use super::{AdapterSpec, DataAdapter};
use crate::domain::AuditAction;
use crate::domain::SideEffectContract;
use crate::file_error::FileError;
use crate::store::adapter::{self as store, AdapterFile, ClaimRecord, FileStored};
use crate::store::journal::{self, Actor, AuditEntry};

/// Why an adapter file was not applied. Nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum AdapterApplyError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// Every adapter's outbound limits in force (docs/DESIGN.md §20), by name: what its current
/// file declares, with any override; adapters without a limit are left out.
pub async fn limits_in_force(pool: &PgPool) -> sqlx::Result<Vec<(String, crate::domain::Limits)>> {
    let rows = crate::store::pace::declared_and_overridden(pool).await?;
    Ok(rows
        .into_iter()
        .filter_map(|(name, source, over)| {
            let declared = source
                .as_deref()
                .and_then(|s| AdapterSpec::parse(s).ok())
                .and_then(|spec| spec.limits)
                .unwrap_or_default();
            let limits = declared.overridden_by(over);
            (!limits.is_unlimited()).then_some((name, limits))
        })
        .collect())
}

/// What adapter `name`'s current file says about four eyes (docs/DESIGN.md §20).
pub async fn four_eyes_of<'e, E>(
    executor: E,
    name: &str,
) -> sqlx::Result<Option<super::spec::FourEyes>>
where
    E: sqlx::Executor<'e, Database = sqlx::Postgres>,
{
    Ok(store::current_file(executor, name)
        .await?
        .and_then(|(source, _)| AdapterSpec::parse(&source).ok())
        .and_then(|spec| spec.four_eyes))
}

/// Every registered adapter ([`store::all`]), its `base_url` as its file wrote it: a version
/// stored before references were kept as written holds what its variable held, so what is
/// shown is read from its file again.
pub async fn registered(pool: &PgPool) -> sqlx::Result<Vec<store::AdapterRow>> {
    let mut rows = store::all(pool).await?;
    for row in &mut rows {
        if let Some(spec) = row
            .source
            .as_deref()
            .and_then(|s| AdapterSpec::parse(s).ok())
        {
            row.base_url = spec.base_url.as_written();
        }
    }
    Ok(rows)
}

/// A registered adapter with what the console's adapters page and the API's adapter list show
/// of it.
pub struct Listed {
    pub adapter: store::AdapterRow,
    /// Its current version's claims, in the order a file makes them.
    pub claims: Vec<store::ClaimRow>,
    pub hold: Option<crate::store::hold::AdapterHold>,
    /// Its outbound limits in force; none when it has none ([`limits_in_force`]).
    pub limits: Option<crate::domain::Limits>,
    pub limit_override: Option<crate::store::pace::LimitOverride>,
}

/// Every registered adapter ([`registered`]) with its claims, hold, limits and override: five
/// reads at once, each on a connection of its own, whatever the number of adapters.
pub async fn listed(pool: &PgPool) -> sqlx::Result<Vec<Listed>> {
    let (registered, claims, holds, limits, overrides) = tokio::try_join!(
        registered(pool),
        store::claims_by_adapter(pool, None),
        crate::store::hold::all(pool),
        limits_in_force(pool),
        crate::store::pace::overrides(pool, None),
    )?;
    Ok(registered
        .into_iter()
        .map(|adapter| {
            let name = adapter.name.as_str();
            let claims = claims
                .iter()
                .filter(|(of, _)| of == name)
                .map(|(_, claim)| claim.clone())
                .collect();
            let hold = holds.iter().find(|h| h.adapter == name).cloned();
            let limits = limits.iter().find_map(|(of, l)| (of == name).then_some(*l));
            let limit_override = overrides
                .iter()
                .find(|(of, _)| of == name)
                .and_then(|(_, over)| over.clone());
            Listed {
                adapter,
                claims,
                hold,
                limits,
                limit_override,
            }
        })
        .collect())
}

/// Parses, checks and builds the adapter `source` describes (its secrets must be set here).
pub fn build(source: &str) -> Result<DataAdapter, FileError> {
    let spec = check(source)?;
    DataAdapter::new(spec).map_err(|e| FileError::at(None, e.to_string()))
}

/// Parses and checks `source` against the deployment's policy (docs/DESIGN.md §15) without
/// reading a secret: each reference must be one the deployment lets files name, and the base
/// URL a host it lets requests reach. Applying a file therefore says nothing of which
/// variables are set or which files exist.
pub fn check(source: &str) -> Result<AdapterSpec, FileError> {
    let spec = AdapterSpec::parse(source)?;
    for secret in spec.secrets() {
        secret.allowed().map_err(|e| {
            let near = match &secret {
                super::SecretRef::Env(name) => name.clone(),
                super::SecretRef::File(path) => path.display().to_string(),
            };
            FileError::about(near, e.to_string()).placed_in(source)
        })?;
    }
    let base_url = match &spec.base_url {
        super::spec::BaseUrl::Literal(url) => super::data::reachable(url),
        super::spec::BaseUrl::Env { env } => super::policy::current()
            .allows_env(env)
            .map_err(super::SecretError::NotAllowed),
    };
    base_url.map_err(|e| FileError::about("base_url:", e.to_string()).placed_in(source))?;
    Ok(spec)
}

/// Checks `source` and stores it as the adapter's next version (unless `dry_run`, or it is the
/// current version already). A new version sends nothing until [`verify`] passes.
pub async fn apply(
    pool: &PgPool,
    source: &str,
    by: Actor<'_>,
    dry_run: bool,
) -> Result<(String, FileStored), AdapterApplyError> {
    let spec = check(source)?;
    let name = spec.name.clone();
    if dry_run {
        let current = store::current_file(pool, &name).await?;
        return Ok((
            name,
            match current {
                Some((stored, version)) if stored == source => FileStored::Unchanged { version },
                Some((_, version)) => FileStored::Changed {
                    version: version + 1,
                },
                None => FileStored::Added { version: 1 },
            },
        ));
    }
    let mut tx = pool.begin().await?;
    let (stored, previous) = store::store_file(
        &mut tx,
        &AdapterFile {
            name: &name,
            base_url: &spec.base_url.as_written(),
            source,
            declared: &spec.contract(),
            applied_by: &by.label(),
        },
    )
    .await?;
    audit_stored(&mut tx, by, &name, &stored, previous, source).await?;
    tx.commit().await?;
    Ok((name, stored))
}

/// Records who stored which version of adapter `name` and what changed from the version it
/// replaced (docs/DESIGN.md §15); nothing for a file that was the current version already.
async fn audit_stored(
    conn: &mut sqlx::PgConnection,
    by: Actor<'_>,
    name: &str,
    stored: &FileStored,
    previous: Option<String>,
    source: &str,
) -> sqlx::Result<()> {
    let version = match stored {
        FileStored::Unchanged { .. } => return Ok(()),
        FileStored::Added { version } | FileStored::Changed { version } => *version,
    };
    let diff = crate::diff::unified_off_thread(
        previous.unwrap_or_default(),
        source.to_owned(),
        format!("{name} v{}", version - 1),
        format!("{name} v{version}"),
    )
    .await;
    journal::audit(
        conn,
        &AuditEntry {
            actor: by,
            action: AuditAction::AdapterApply,
            workflow: None,
            step: None,
            reason: None,
            details: serde_json::json!({ "adapter": name, "version": version, "diff": diff }),
        },
    )
    .await
}

/// What `z29c adapter verify` found.
#[derive(Debug)]
pub enum Verified {
    /// The probe succeeded and no claim was refuted: the version sends, and its verified
    /// claims count from now on.
    Passed { version: i32, report: SuiteReport },
    /// The probe failed or a claim was refuted: what was found of each claim is recorded. A
    /// version that never passed still sends nothing; one that passed before keeps sending
    /// (`sends`), and what this run refuted counts for nothing from now on.
    Failed {
        version: i32,
        report: SuiteReport,
        sends: bool,
    },
}

/// Why an adapter could not be verified.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("adapter `{0}` was not applied from a file (`z29c apply -f`)")]
    NoFile(String),
    #[error("the stored file of `{name}` no longer builds here: {error}")]
    Broken { name: String, error: FileError },
    #[error("adapter `{0}` changed while it was verified; verify the new version")]
    Moved(String),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// Verifies the current version against `sandbox` (the API's test mode, or the live
/// destination when it is one) and records what was found of each claim.
pub async fn verify(pool: &PgPool, name: &str, sandbox: &str) -> Result<Verified, VerifyError> {
    let (source, version) = store::current_file(pool, name)
        .await?
        .ok_or_else(|| VerifyError::NoFile(name.to_owned()))?;
    let adapter = build(&source)
        .map_err(|error| VerifyError::Broken {
            name: name.to_owned(),
            error,
        })?
        .with_base_url(sandbox);
    let report = contract_suite::verify(name, &adapter).await;
    let passed = report.passed();
    let mut tx = pool.begin().await?;
    let kept = store::record_verification(
        &mut tx,
        name,
        version,
        sandbox,
        &records(&report, sandbox),
        passed,
    )
    .await?;
    if !kept {
        return Err(VerifyError::Moved(name.to_owned()));
    }
    tx.commit().await?;
    if passed {
        return Ok(Verified::Passed { version, report });
    }
    let sends = store::all(pool)
        .await?
        .iter()
        .any(|a| a.name == name && a.may_send());
    Ok(Verified::Failed {
        version,
        report,
        sends,
    })
}

/// Each claim's verdict as it is stored, with the checks that bore on it.
pub fn records(report: &SuiteReport, against: &str) -> Vec<ClaimRecord> {
    report
        .verdicts()
        .into_iter()
        .map(|verdict| ClaimRecord {
            checks: serde_json::Value::Array(
                report
                    .checks_of(&verdict.claim)
                    .map(|c| serde_json::json!({ "check": c.check, "verdict": c.verdict, "detail": c.detail }))
                    .collect(),
            ),
            claim: verdict.claim,
            trust: verdict.trust,
            evidence: verdict.evidence,
            against: Some(against.to_owned()),
        })
        .collect()
}

/// Applies the protocol adapter of `kind` at `base_url` as adapter `name` (`z29c adapter add`)
/// once its verification against that very destination passed; nothing is stored otherwise.
pub async fn add_protocol(
    pool: &PgPool,
    name: &str,
    base_url: &str,
    contract: &SideEffectContract,
    by: Actor<'_>,
) -> Result<(i32, SuiteReport), AdapterApplyError> {
    let mut spec = super::protocol::protocol_spec_claiming(base_url, contract);
    spec.name = name.to_owned();
    let source = serde_yaml_ng::to_string(&spec)
        .map_err(|e| FileError::at(None, format!("the protocol file does not serialize: {e}")))?;
    let adapter = build(&source)?;
    let report = contract_suite::verify(name, &adapter).await;
    if !report.passed() {
        return Err(FileError::at(None, report.refusal()).into());
    }
    let mut tx = pool.begin().await?;
    let (stored, previous) = store::store_file(
        &mut tx,
        &AdapterFile {
            name,
            base_url,
            source: &source,
            declared: &spec.contract(),
            applied_by: &by.label(),
        },
    )
    .await?;
    audit_stored(&mut tx, by, name, &stored, previous, &source).await?;
    let (FileStored::Added { version }
    | FileStored::Changed { version }
    | FileStored::Unchanged { version }) = stored;
    store::record_verification(
        &mut tx,
        name,
        version,
        base_url,
        &records(&report, base_url),
        true,
    )
    .await?;
    tx.commit().await?;
    Ok((version, report))
}

/// Registers the protocol adapter of `contract`'s kind at `base_url` as `name`, every claim of
/// it taken as verified: for tests, benches and the harness, whose destinations are proven by
/// their own suites. Returns the version.
pub async fn register_trusted(
    pool: &PgPool,
    name: &str,
    base_url: &str,
    contract: &SideEffectContract,
) -> sqlx::Result<i32> {
    let claims = super::protocol::protocol_spec_claiming(base_url, contract).claims();
    let mut tx = pool.begin().await?;
    let version = store::upsert(&mut tx, name, base_url, contract, &claims).await?;
    tx.commit().await?;
    Ok(version)
}
