//! The six destinations a scenario runs against: the three kinds of the destination protocol,
//! registered as the harness always has, and the payments API and the partner webhook receiver
//! (destinations/PAYMENTS.md), each driven by its adapter file from `adapters/` exactly as a
//! user would: the file applied with its base URL and secret pointed at the spawned
//! destination, then verified against it so its declared capabilities are trusted.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use destinations::{Kind, Ledger, RunningDestination, Secret};
use sqlx::PgPool;
use uuid::Uuid;

use super::setup::{database, destination};
use crate::lab::bench::BenchDatabase;

/// The payments adapter file as shipped.
const PAYMENTS_ADAPTER: &str = include_str!("../../../../adapters/payments.yaml");
/// The adapter file for a payments provider that promises less, as shipped.
const BASIC_PAYMENTS_ADAPTER: &str = include_str!("../../../../adapters/payments-basic.yaml");
/// The partner webhook adapter file as shipped.
const WEBHOOK_ADAPTER: &str = include_str!("../../../../adapters/partner-webhook.yaml");
/// A payment followed by a receipt e-mail.
const PAYMENT_RECEIPT: &str = include_str!("../../../../definitions/payment_receipt.v1.yaml");
/// One event posted to a partner's webhook receiver.
const PARTNER_EVENT: &str = include_str!("../../../../definitions/partner_event.v1.yaml");

/// The adapters the receipt step of `payment_receipt` sends its e-mail through: an idempotent
/// protocol destination, whose delivery takes exactly the receipt's `recipient` and `summary`;
/// one for each payments target, since the soak runs both at once, each with its own mail
/// destination (the two names the definition lets the step call).
const MAIL: &str = "mail";
const BASIC_MAIL: &str = "mailer";

/// A destination a scenario runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// A destination of the protocol, under adapter `docs` (matrix) or its kind's name (soak).
    Protocol(Kind),
    /// The Stripe-style payments API: idempotent by `Idempotency-Key`, queryable by a search.
    Payments,
    /// A payments API that promises less (the dishonest provider): it ignores
    /// `Idempotency-Key`, has no search and lists charges oldest first; its honest adapter
    /// (`adapters/payments-basic.yaml`) claims only a lookup, which walks the customer's list.
    BasicPayments,
    /// The partner webhook receiver: HMAC-signed, deduplicating nothing, opaque.
    Webhook,
}

impl Target {
    /// Every target, the protocol's kinds first.
    pub(super) const ALL: [Target; 6] = [
        Target::Protocol(Kind::Idempotent),
        Target::Protocol(Kind::Queryable),
        Target::Protocol(Kind::Opaque),
        Target::Payments,
        Target::BasicPayments,
        Target::Webhook,
    ];

    pub(super) fn parse(name: &str) -> anyhow::Result<Target> {
        match name {
            "payments" => Ok(Target::Payments),
            "payments-basic" => Ok(Target::BasicPayments),
            "webhook" => Ok(Target::Webhook),
            other => other
                .parse::<Kind>()
                .map(Target::Protocol)
                .map_err(|e| anyhow::anyhow!("{e}; or payments, payments-basic, webhook")),
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Target::Protocol(kind) => kind.as_str(),
            Target::Payments => "payments",
            Target::BasicPayments => "payments-basic",
            Target::Webhook => "webhook",
        }
    }

    /// The adapter its workflows call in the soak (the protocol's under a name the shipped
    /// `document_delivery` definition lets its step call).
    pub(super) fn adapter(self) -> &'static str {
        match self {
            Target::Protocol(Kind::Idempotent) => "idempotent-docs",
            Target::Protocol(Kind::Queryable) => "queryable-docs",
            Target::Protocol(Kind::Opaque) => "opaque-docs",
            Target::Webhook => "partner-webhook",
            other => other.as_str(),
        }
    }

    /// The adapter the receipts of its workflows are mailed through (payments targets).
    fn mail_adapter(self) -> &'static str {
        match self {
            Target::BasicPayments => BASIC_MAIL,
            _ => MAIL,
        }
    }

    /// Whether an outcome can be settled without a person: by replay or lookup.
    pub(super) fn provable(self) -> bool {
        !matches!(self, Target::Protocol(Kind::Opaque) | Target::Webhook)
    }

    /// Whether recovery looks the outcome up. Not for payments, though its search is a lookup:
    /// an adapter that is idempotent as well replays under the key inside the retention, and
    /// past it a person decides (the lookup is the operator's *Check destination*).
    pub(super) fn recovers_by_lookup(self) -> bool {
        matches!(
            self,
            Target::Protocol(Kind::Queryable) | Target::BasicPayments
        )
    }

    /// Whether the adapter withdraws (a provider without keys cannot prove a refund once).
    pub(super) fn has_withdrawal(self) -> bool {
        !matches!(self, Target::Webhook | Target::BasicPayments)
    }

    /// Whether a definition of this target's workflows has a v1 and a newer v2.
    pub(super) fn has_v2(self) -> bool {
        matches!(self, Target::Protocol(_))
    }

    /// The workflows' first external step: the one faults aim at.
    pub(super) fn first_step(self) -> &'static str {
        match self {
            Target::Protocol(_) => "deliver",
            Target::Payments | Target::BasicPayments => "charge",
            Target::Webhook => "post",
        }
    }

    /// Workflow `n` of a scenario named `name`, under the creation key `{name}-{n}`, through
    /// `adapter` (protocol targets only; the others use their files' names).
    pub(super) fn workflow(
        self,
        name: &str,
        n: usize,
        adapter: &str,
    ) -> engine::intake::NewWorkflow {
        let (definition, input) = self.definition_and_input(name, n, adapter);
        engine::intake::NewWorkflow {
            creation_key: format!("{name}-{n}"),
            definition,
            version: None,
            input,
        }
    }

    fn definition_and_input(
        self,
        name: &str,
        n: usize,
        adapter: &str,
    ) -> (String, serde_json::Value) {
        match self {
            Target::Protocol(_) => (
                "document_delivery".into(),
                serde_json::json!({"adapter": adapter, "recipient": format!("r-{n}"),
                    "document": {"title": format!("Scenario {n}"), "body": "fault"}}),
            ),
            Target::Payments | Target::BasicPayments => (
                "payment_receipt".into(),
                serde_json::json!({"order": format!("{name}-{n}"), "customer": format!("cus_{n}"),
                    "email": format!("r-{n}@z29c.invalid"), "amount": 100 + n, "currency": "eur",
                    "payments_adapter": self.as_str(), "mail_adapter": self.mail_adapter()}),
            ),
            Target::Webhook => (
                "partner_event".into(),
                serde_json::json!({"channel": "orders", "event": format!("{name}-{n} shipped"),
                    "adapter": "partner-webhook"}),
            ),
        }
    }
}

/// A running target: the destination faults aim at, and what else its workflows reach.
pub(super) struct Running {
    pub(super) target: Target,
    /// The destination under test.
    pub(super) main: RunningDestination,
    /// Payments only: the mail destination the receipts go to.
    pub(super) mail: Option<RunningDestination>,
    /// Holds the secret file the adapter reads for as long as workers run.
    _secrets: Option<tempfile::TempDir>,
}

/// The side effects one step left at its destination, as that destination's ledger records
/// them: a compensation's withdrawals, or the step's deliveries, charges or events.
pub(super) struct Ledgers {
    main: Ledger,
    mail: Option<Ledger>,
}

impl Running {
    pub(super) async fn ledgers(&self) -> anyhow::Result<Ledgers> {
        let mail = match &self.mail {
            Some(mail) => Some(mail.ledger().await?),
            None => None,
        };
        Ok(Ledgers {
            main: self.main.ledger().await?,
            mail,
        })
    }

    /// Effects the destination committed for workflows (deliveries, charges or events): all
    /// but the probes of the contract suite `adapter verify` ran.
    pub(super) async fn effect_count(&self) -> anyhow::Result<usize> {
        const PROBE: &str = "contract-suite";
        let ledger = self.main.ledger().await?;
        Ok(match self.target {
            Target::Protocol(_) => ledger.deliveries.len(),
            Target::Payments | Target::BasicPayments => {
                ledger.charges.len() - ledger.charges_for(PROBE).count()
            }
            Target::Webhook => ledger.events.len() - ledger.events_for(PROBE).count(),
        })
    }
}

impl Ledgers {
    /// The references of the effects made under `key` by step `logical` (a compensation when
    /// `compensation`) of a workflow against `target`, and whether that step's outcome is
    /// provable without a person.
    pub(super) fn effects(
        &self,
        target: Target,
        logical: &str,
        compensation: bool,
        key: &str,
    ) -> (Vec<String>, bool) {
        let protocol = |ledger: &Ledger| -> Vec<String> {
            if compensation {
                ledger
                    .withdrawals
                    .iter()
                    .filter(|w| w.idempotency_key == key)
                    .map(|w| w.withdrawal_reference.clone())
                    .collect()
            } else {
                ledger
                    .deliveries
                    .iter()
                    .filter(|d| d.client_reference == key)
                    .map(|d| d.external_reference.clone())
                    .collect()
            }
        };
        match (target, &self.mail) {
            (Target::Protocol(_), _) => (protocol(&self.main), target.provable()),
            (Target::Payments | Target::BasicPayments, Some(mail))
                if !logical.starts_with("charge") =>
            {
                (protocol(mail), true)
            }
            // No key is sent: the charge carries it in its metadata.
            (Target::BasicPayments, _) => (
                self.main
                    .charges
                    .iter()
                    .filter(|c| c.metadata.get("z29c_key").map(String::as_str) == Some(key))
                    .map(|c| c.id.clone())
                    .collect(),
                true,
            ),
            (Target::Payments, _) if compensation => (
                self.main
                    .refunds
                    .iter()
                    .filter(|r| r.idempotency_key.as_deref() == Some(key))
                    .map(|r| r.id.clone())
                    .collect(),
                true,
            ),
            (Target::Payments, _) => (
                self.main
                    .charges_with_key(key)
                    .map(|c| c.id.clone())
                    .collect(),
                true,
            ),
            // The adapter's event subject defaults to the step's key.
            (Target::Webhook, _) => (
                self.main.events_for(key).map(|e| e.id.clone()).collect(),
                false,
            ),
        }
    }
}

/// Starts `target`'s destination (database `name`) and registers it with Z29C: protocol kinds
/// as adapter `adapter`, the others from their adapter files, applied and verified.
pub(super) async fn start(
    db: &BenchDatabase,
    admin: &PgPool,
    z29c: &PgPool,
    name: &str,
    target: Target,
    adapter: &str,
) -> anyhow::Result<Running> {
    let (main, mail, secrets) = match target {
        Target::Protocol(kind) => (
            destination(db, admin, z29c, name, kind, adapter).await?,
            None,
            None,
        ),
        Target::Payments | Target::BasicPayments => {
            let mail = destination(
                db,
                admin,
                z29c,
                &format!("{name}_mail"),
                Kind::Idempotent,
                target.mail_adapter(),
            )
            .await?;
            let (main, dir) = from_file(db, admin, z29c, name, target).await?;
            (main, Some(mail), Some(dir))
        }
        Target::Webhook => {
            let (main, dir) = from_file(db, admin, z29c, name, target).await?;
            (main, None, Some(dir))
        }
    };
    Ok(Running {
        target,
        main,
        mail,
        _secrets: secrets,
    })
}

/// Applies the definitions the non-protocol targets run.
pub(super) async fn apply_definitions(pool: &PgPool) -> anyhow::Result<()> {
    for (path, source) in [
        ("definitions/payment_receipt.v1.yaml", PAYMENT_RECEIPT),
        ("definitions/partner_event.v1.yaml", PARTNER_EVENT),
    ] {
        engine::definition::apply(
            pool,
            source,
            engine::store::journal::Actor::Engine("scenario"),
            engine::definition::ApplyOptions::default(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    }
    Ok(())
}

/// The payments or webhook destination with a generated secret, and its adapter file applied
/// with the base URL, the secret (as a 0600 file) and the harness's 1,000 ms deadline and
/// 300 ms search lag, then verified against it.
async fn from_file(
    db: &BenchDatabase,
    admin: &PgPool,
    z29c: &PgPool,
    name: &str,
    target: Target,
) -> anyhow::Result<(RunningDestination, tempfile::TempDir)> {
    let (_, pool) = database(db, admin, name).await?;
    destinations::migrate(&pool).await?;
    let random = Uuid::new_v4().simple().to_string();
    let (value, config, file, env, adapter) = match target {
        Target::Payments | Target::BasicPayments => {
            let key = format!("sk_test_{random}");
            let (base, file) = if target == Target::Payments {
                (destinations::Config::payments(), PAYMENTS_ADAPTER)
            } else {
                (
                    destinations::Config::basic_payments(),
                    BASIC_PAYMENTS_ADAPTER,
                )
            };
            let config = destinations::Config {
                api_key: Some(Secret::new(&key)),
                visibility_window: std::time::Duration::from_millis(300),
                ..base
            };
            (
                key,
                config,
                file,
                "{ env: Z29C_PAYMENTS_API_KEY }",
                target.as_str(),
            )
        }
        _ => {
            let secret = format!("whsec_{random}");
            let config = destinations::Config::webhook(Secret::new(&secret));
            (
                secret,
                config,
                WEBHOOK_ADAPTER,
                "{ env: Z29C_WEBHOOK_SECRET }",
                "partner-webhook",
            )
        }
    };
    let destination = destinations::spawn(pool, config).await?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("secret");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?
        .write_all(value.as_bytes())?;
    let base_url = destination.base_url();
    let source = pointed_at(file, &base_url, &path, env);
    anyhow::ensure!(
        source.contains(&base_url) && source.contains(&path.display().to_string()),
        "adapters/{adapter}.yaml no longer has the base_url line or the secret the harness points at its destination"
    );
    engine::adapter::apply::apply(
        z29c,
        &source,
        engine::store::journal::Actor::Engine("scenario"),
        false,
    )
    .await
    .map_err(|e| anyhow::anyhow!("adapters/{adapter}.yaml: {e}"))?;
    match engine::adapter::apply::verify(z29c, adapter, &base_url).await? {
        engine::adapter::apply::Verified::Passed { .. } => Ok((destination, dir)),
        engine::adapter::apply::Verified::Failed { report, .. } => anyhow::bail!(
            "adapter `{adapter}` failed its contract suite against its destination: {}",
            report.summary()
        ),
    }
}

/// The adapter file `file` with its base URL, its secret `env` (now the file `secret`), its
/// deadline (1,000 ms) and its lookup's visibility window (300 ms) those of the harness.
fn pointed_at(file: &str, base_url: &str, secret: &std::path::Path, env: &str) -> String {
    let mut source = String::new();
    for line in file.lines() {
        let line = if line.starts_with("base_url:") {
            format!("base_url: {base_url}")
        } else if line.starts_with("deadline_ms:") {
            "deadline_ms: 1000".to_owned()
        } else if line.trim_start().starts_with("visibility_window_ms:") {
            "  visibility_window_ms: 300".to_owned()
        } else {
            line.replace(env, &format!("{{ file: {} }}", secret.display()))
        };
        source.push_str(&line);
        source.push('\n');
    }
    source
}
