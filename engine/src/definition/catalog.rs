//! The definitions this process has compiled, and applying new ones.
//!
//! A stored definition never changes (docs/DESIGN.md §16), so a compiled one is cached for the
//! life of the process under its name and version: every worker, page and API handler shares
//! one compilation, and a definition applied by another process is found on first use, with
//! no restart and no invalidation.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use serde_json::json;
use sqlx::{Executor, PgConnection, PgPool, Postgres};

use super::{Definition, InputError};
use crate::domain::AuditAction;
use crate::file_error::FileError;
use crate::store::definition as store;
use crate::store::journal::{self, Actor, AuditEntry};

/// Compiled definitions by name and version.
type Compiled = HashMap<(String, i32), Arc<Definition>>;

static COMPILED: LazyLock<RwLock<Compiled>> = LazyLock::new(Default::default);

/// Why a definition could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Unknown(#[from] InputError),
    /// A stored file that no longer compiles: this engine is older or newer than the one that
    /// applied it.
    #[error("stored definition `{name}` v{version} does not compile here: {error}")]
    Broken {
        name: String,
        version: i32,
        error: FileError,
    },
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// The definitions applied to this database, compiled on first use.
pub struct Catalog;

impl Catalog {
    /// Definition `name` version `version`.
    pub async fn get<'e, E>(
        executor: E,
        name: &str,
        version: i32,
    ) -> Result<Arc<Definition>, CatalogError>
    where
        E: Executor<'e, Database = Postgres>,
    {
        let key = (name.to_owned(), version);
        if let Some(found) = COMPILED
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(found.clone());
        }
        let Some(source) = store::source(executor, name, version).await? else {
            return Err(if version_known(name) {
                InputError::UnknownVersion {
                    name: name.to_owned(),
                    version,
                }
            } else {
                InputError::UnknownDefinition(name.to_owned())
            }
            .into());
        };
        let compiled = Definition::from_source(&source).map_err(|error| CatalogError::Broken {
            name: name.to_owned(),
            version,
            error,
        })?;
        let compiled = Arc::new(compiled);
        COMPILED
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, compiled.clone());
        Ok(compiled)
    }

    /// The newest version of `name` applied.
    pub async fn newest(
        conn: &mut PgConnection,
        name: &str,
    ) -> Result<Arc<Definition>, CatalogError> {
        let version = store::newest_version(&mut *conn, name)
            .await?
            .ok_or_else(|| InputError::UnknownDefinition(name.to_owned()))?;
        Self::get(conn, name, version).await
    }
}

/// Whether some version of `name` is compiled here (to tell "no such version" from "no such
/// definition" without another query).
fn version_known(name: &str) -> bool {
    COMPILED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .any(|(n, _)| n == name)
}

/// What applying a definition file did (or, with `dry_run`, would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Stored as a new name or version.
    Added { name: String, version: i32 },
    /// The very same file was already stored.
    Unchanged { name: String, version: i32 },
}

/// Why a definition file was not applied. Nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    File(#[from] FileError),
    /// The name and version are taken by another file: definitions are immutable.
    #[error(
        "definition `{name}` v{version} is already applied with other content; give the change a new version.\n{diff}"
    )]
    Changed {
        name: String,
        version: i32,
        diff: String,
    },
    /// A step names an adapter that is not registered (and the caller did not allow it).
    #[error(
        "step `{step}` names adapter `{adapter}`, which is not registered: apply the adapter file first (or allow missing adapters; the workflows then refuse to start until it is)"
    )]
    MissingAdapter { step: String, adapter: String },
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// How a definition file is applied.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyOptions {
    /// Check the file and answer as applying would, storing nothing.
    pub dry_run: bool,
    /// Store the file even when a step names an adapter that is not registered yet.
    pub allow_missing_adapters: bool,
}

/// [`apply`] where the caller named the definition too (an API path): a file of another name
/// or version is refused before anything is stored.
pub async fn apply_as(
    pool: &PgPool,
    source: &str,
    name: &str,
    version: i32,
    by: Actor<'_>,
    options: ApplyOptions,
) -> Result<Applied, ApplyError> {
    let definition = Definition::from_source(source)?;
    if definition.name() != name || definition.version() != version {
        return Err(FileError::at(
            None,
            format!(
                "the file defines `{}` v{}, not `{name}` v{version} as the path says",
                definition.name(),
                definition.version()
            ),
        )
        .into());
    }
    checked_for_apply(pool, &definition, source, options).await?;
    store_compiled(pool, &definition, source, by, options.dry_run).await
}

/// Checks `source` and stores it, unless `options.dry_run`. Re-applying the same file changes
/// nothing; another file under a stored name and version is refused with the difference. A
/// step naming an adapter that is not registered is refused unless
/// `options.allow_missing_adapters`.
pub async fn apply(
    pool: &PgPool,
    source: &str,
    by: Actor<'_>,
    options: ApplyOptions,
) -> Result<Applied, ApplyError> {
    let definition = Definition::from_source(source)?;
    checked_for_apply(pool, &definition, source, options).await?;
    store_compiled(pool, &definition, source, by, options.dry_run).await
}

/// What applying checks beyond compiling: every adapter the input may choose is listed, and
/// (unless `allow_missing_adapters`) every adapter named literally is registered.
async fn checked_for_apply(
    pool: &PgPool,
    definition: &Definition,
    source: &str,
    options: ApplyOptions,
) -> Result<(), ApplyError> {
    definition
        .choices_listed()
        .map_err(|e| e.placed_in(source))?;
    if options.allow_missing_adapters {
        return Ok(());
    }
    let known = crate::store::adapter::names(pool).await?;
    match definition
        .named_adapters()
        .into_iter()
        .find(|(_, adapter)| !known.iter().any(|k| k == adapter))
    {
        Some((step, adapter)) => Err(ApplyError::MissingAdapter {
            step: step.to_owned(),
            adapter: adapter.to_owned(),
        }),
        None => Ok(()),
    }
}

/// Stores `definition`, compiled from `source`, as [`apply`] describes, and records who
/// applied it with its diff from the newest version before it (docs/DESIGN.md §15).
async fn store_compiled(
    pool: &PgPool,
    definition: &Definition,
    source: &str,
    by: Actor<'_>,
    dry_run: bool,
) -> Result<Applied, ApplyError> {
    let (name, version) = (definition.name().to_owned(), definition.version());
    let unchanged = || Applied::Unchanged {
        name: name.clone(),
        version,
    };
    if let Some(stored) = store::source(pool, &name, version).await? {
        return if stored == source {
            Ok(unchanged())
        } else {
            Err(changed(&name, version, stored, source).await)
        };
    }
    if dry_run {
        return Ok(Applied::Added { name, version });
    }
    let digest = definition.source_digest.to_string();
    let mut tx = pool.begin().await?;
    let new = store::NewDefinition {
        name: &name,
        version,
        source,
        digest: &digest,
        applied_by: &by.label(),
        retain_settled: definition.retain_settled(),
    };
    if store::insert(&mut *tx, new).await? {
        let before = store::newest_before(&mut *tx, &name, version).await?;
        let diff = crate::diff::unified_off_thread(
            before.as_ref().map(|(_, s)| s.clone()).unwrap_or_default(),
            source.to_owned(),
            before.map_or_else(|| "(none)".to_owned(), |(v, _)| format!("{name} v{v}")),
            format!("{name} v{version}"),
        )
        .await;
        let details =
            json!({ "definition": name, "version": version, "digest": digest, "diff": diff });
        journal::audit(
            &mut tx,
            &AuditEntry {
                actor: by,
                action: AuditAction::DefinitionApply,
                workflow: None,
                step: None,
                reason: None,
                details,
            },
        )
        .await?;
        tx.commit().await?;
        return Ok(Applied::Added { name, version });
    }
    drop(tx);
    // Another apply stored this name and version between the read and the insert.
    match store::source(pool, &name, version).await? {
        Some(stored) if stored == source => Ok(unchanged()),
        Some(stored) => Err(changed(&name, version, stored, source).await),
        None => Err(sqlx::Error::RowNotFound.into()),
    }
}

/// The refusal of another file under a stored name and version, with their difference
/// (bounded, and computed off the async threads: either file may be large).
async fn changed(name: &str, version: i32, stored: String, source: &str) -> ApplyError {
    let diff = crate::diff::unified_off_thread(
        stored,
        source.to_owned(),
        "applied".to_owned(),
        "this file".to_owned(),
    )
    .await;
    ApplyError::Changed {
        name: name.to_owned(),
        version,
        diff,
    }
}
