//! Applying adapter files and verifying them (docs/DESIGN.md §16): a file is stored as a new
//! version, and its declared capabilities are used by automatic recovery only once its
//! contract suite passed against a sandbox the user names.

use sqlx::PgPool;

use super::contract_suite::{self, SuiteReport};
use super::{AdapterSpec, DataAdapter};
use crate::domain::{SideEffectContract, UnknownOutcomePolicy};
use crate::file_error::FileError;
use crate::store::adapter::{self as store, AdapterFile, FileStored};

/// Why an adapter file was not applied. Nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum AdapterApplyError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// The contract a version is trusted with before its suite passed: what it declares, with
/// every unknown outcome sent to a person.
pub fn unverified(declared: &SideEffectContract) -> SideEffectContract {
    SideEffectContract {
        unknown_outcome_policy: UnknownOutcomePolicy::Review,
        ..declared.clone()
    }
}

/// Parses, checks and builds the adapter `source` describes (its secrets must be set here).
pub fn build(source: &str) -> Result<DataAdapter, FileError> {
    let spec = AdapterSpec::parse(source)?;
    DataAdapter::new(spec).map_err(|e| FileError::at(None, e.to_string()))
}

/// Checks `source` and stores it as the adapter's next version (unless `dry_run`, or it is the
/// current version already). A new version is unverified until [`verify`] passes.
pub async fn apply(
    pool: &PgPool,
    source: &str,
    applied_by: &str,
    dry_run: bool,
) -> Result<(String, FileStored), AdapterApplyError> {
    let adapter = build(source)?;
    let name = adapter.spec().name.clone();
    let declared = adapter.spec().contract();
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
    let stored = store::store_file(
        &mut tx,
        &AdapterFile {
            name: &name,
            base_url: adapter.base_url(),
            source,
            declared: &declared,
            unverified: &unverified(&declared),
            applied_by,
        },
    )
    .await?;
    tx.commit().await?;
    Ok((name, stored))
}

/// What `z29c adapter verify` found.
#[derive(Debug)]
pub enum Verified {
    /// Every claim held: the version's declared contract is used from now on.
    Passed { version: i32, report: SuiteReport },
    /// A claim failed: nothing changed, the version stays under review.
    Failed { version: i32, report: SuiteReport },
}

/// Why an adapter could not be verified.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("adapter `{0}` was not applied from a file (`z29c apply -f`)")]
    NoFile(String),
    #[error("the stored file of `{name}` no longer builds here: {error}")]
    Broken { name: String, error: FileError },
    #[error("adapter `{0}` changed while its suite ran; verify the new version")]
    Moved(String),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// Runs the current version's contract suite against `sandbox` (the API's test mode, or the
/// live destination when it is one) and, when every claim holds, records it as verified.
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
    if !report.passed() {
        return Ok(Verified::Failed { version, report });
    }
    let claims: Vec<&str> = report.checks.iter().map(|c| c.claim).collect();
    if !store::mark_verified(pool, name, version, sandbox, &claims).await? {
        return Err(VerifyError::Moved(name.to_owned()));
    }
    Ok(Verified::Passed { version, report })
}
