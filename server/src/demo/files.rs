//! The demo's adapters applied from the files in `adapters/`, as a team applies its own
//! (`z29c apply -f`, then `z29c adapter verify`): the payments API, the partner webhook and a
//! mail service for receipts. The copy applied differs from the shipped file only where the
//! demo must: its name (for the mailer), its port, and its secrets read from 0600 files in the
//! demo's data directory rather than from the environment (the server is multi-threaded, so it
//! never sets environment variables).

use std::path::{Path, PathBuf};

use anyhow::Context;
use sqlx::PgPool;

use super::Endpoints;

/// `adapters/payments.yaml`.
const PAYMENTS: &str = include_str!("../../../adapters/payments.yaml");
/// `adapters/partner-webhook.yaml`.
const PARTNER_WEBHOOK: &str = include_str!("../../../adapters/partner-webhook.yaml");
/// `adapters/queryable-docs.yaml`: the mail service is the queryable protocol destination.
const QUERYABLE_DOCS: &str = include_str!("../../../adapters/queryable-docs.yaml");

/// The environment variables the shipped files name for their secrets.
const PAYMENTS_KEY_ENV: &str = "Z29C_PAYMENTS_API_KEY";
const WEBHOOK_SECRET_ENV: &str = "Z29C_WEBHOOK_SECRET";

/// The secrets of the payments and webhook destinations: generated once per data directory
/// and kept there (0600), so a restarted demo reuses them.
pub struct Secrets {
    payments_key: PathBuf,
    webhook_secret: PathBuf,
}

impl Secrets {
    /// The secrets kept in `data_dir`, generated where absent.
    pub fn in_dir(data_dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        let dir = std::fs::canonicalize(data_dir)
            .with_context(|| format!("finding {}", data_dir.display()))?;
        let secrets = Secrets {
            payments_key: dir.join("payments-api-key"),
            webhook_secret: dir.join("webhook-secret"),
        };
        keep(&secrets.payments_key, "sk_test_")?;
        keep(&secrets.webhook_secret, "whsec_")?;
        Ok(secrets)
    }

    /// The payments destination's API key.
    pub fn payments_key(&self) -> anyhow::Result<String> {
        read(&self.payments_key)
    }

    /// The webhook receiver's signing secret.
    pub fn webhook_secret(&self) -> anyhow::Result<String> {
        read(&self.webhook_secret)
    }
}

/// Writes a new random secret with `prefix` to `path` unless one is there already.
fn keep(path: &Path, prefix: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        return Ok(());
    }
    let secret = format!(
        "{prefix}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(secret.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}

fn read(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.trim_end().to_owned())
}

/// One adapter the demo applies from a shipped file.
struct DemoFile {
    /// The shipped file's path in the repository, and its text.
    path: &'static str,
    source: &'static str,
    /// The name it is applied under, when not the file's.
    rename: Option<(&'static str, &'static str)>,
    /// Unknown outcomes go to a person even once verified.
    review: bool,
}

/// The adapters the demo applies from files, and the destination each reaches.
fn files() -> [(DemoFile, destinations::Service); 4] {
    use destinations::Service;
    let file = |path, source, rename, review| DemoFile {
        path,
        source,
        rename,
        review,
    };
    [
        (
            file("adapters/payments.yaml", PAYMENTS, None, false),
            Service::Payments,
        ),
        (
            file(
                "adapters/payments.yaml",
                PAYMENTS,
                Some((
                    "payments-reviewed",
                    "Charges cards through a Stripe-style API; every unknown outcome goes to a person.",
                )),
                true,
            ),
            Service::Payments,
        ),
        (
            file(
                "adapters/partner-webhook.yaml",
                PARTNER_WEBHOOK,
                None,
                false,
            ),
            Service::Webhook,
        ),
        (
            file(
                "adapters/queryable-docs.yaml",
                QUERYABLE_DOCS,
                Some((
                    "mailer",
                    "Sends receipt e-mails through a mail service that can be asked about a client reference.",
                )),
                false,
            ),
            Service::Protocol(destinations::Kind::Queryable),
        ),
    ]
}

/// Applies the demo's adapter files and verifies each against its live destination, so their
/// declared claims are trusted. Applying an unchanged file again changes nothing.
pub async fn apply_and_verify(
    pool: &PgPool,
    endpoints: &Endpoints,
    secrets: &Secrets,
) -> anyhow::Result<()> {
    use engine::adapter::apply::{Verified, apply, verify};
    for (file, service) in files() {
        let base_url = endpoints.of(service);
        let source = demo_copy(&file, base_url, secrets)?;
        let (name, _) = apply(
            pool,
            &source,
            engine::store::journal::Actor::Engine("demo"),
            false,
        )
        .await
        .map_err(|e| anyhow::anyhow!("{} (the demo's copy): {e}", file.path))?;
        match verify(pool, &name, base_url).await? {
            Verified::Passed { .. } => {}
            Verified::Failed { report, .. } => anyhow::bail!("{}", report.summary()),
        }
    }
    Ok(())
}

/// The demo's copy of `file`: renamed, at `base_url`, its secrets read from `secrets`' files.
fn demo_copy(file: &DemoFile, base_url: &str, secrets: &Secrets) -> anyhow::Result<String> {
    let quoted = |path: &Path| serde_json::to_string(&path.to_string_lossy()).expect("a string");
    let mut changed = vec!["its port"];
    if file.source.contains("{ env: ") {
        changed.push("its secrets from files in the demo's data directory");
    }
    if file.rename.is_some() {
        changed.push("its name");
    }
    let mut copy = format!(
        "# The demo's copy of {}, but for {}.\n",
        file.path,
        changed.join(", ")
    );
    let mut replaced = 0;
    for line in file.source.lines() {
        let line = match (line.split_once(": "), file.rename) {
            (Some(("name", _)), Some((name, _))) => format!("name: {name}"),
            (Some(("description", _)), Some((_, description))) => {
                format!("description: {description}")
            }
            (Some(("base_url", _)), _) => {
                replaced += 1;
                format!("base_url: {base_url}")
            }
            (Some(("unknown_outcome_policy", _)), _) if file.review => {
                "unknown_outcome_policy: review".to_owned()
            }
            _ => line
                .replace(
                    &format!("{{ env: {PAYMENTS_KEY_ENV} }}"),
                    &format!("{{ file: {} }}", quoted(&secrets.payments_key)),
                )
                .replace(
                    &format!("{{ env: {WEBHOOK_SECRET_ENV} }}"),
                    &format!("{{ file: {} }}", quoted(&secrets.webhook_secret)),
                ),
        };
        copy.push_str(&line);
        copy.push('\n');
    }
    anyhow::ensure!(
        replaced == 1 && !copy.contains("{ env:"),
        "{}: the demo could not point its copy at the demo's port and secret files",
        file.path
    );
    Ok(copy)
}
