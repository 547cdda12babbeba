//! The demo `make run` serves: five destination services as separate processes, each with its
//! own private PostgreSQL — the three of the destination protocol, a Stripe-style payments API
//! and a partner webhook receiver — adapters registered for them (the payments, webhook and
//! mail adapters applied from the files in `adapters/` and verified against the live
//! destinations), and workflows of two definitions, `document_delivery` and `payment_receipt`,
//! driven through the real engine with scripted faults, so a new user sees every kind of
//! uncertainty, under APIs of different shapes, on first start.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use destinations::{ControlToken, FaultPlan, FaultRule, Kind, Service};
use engine::domain::{ContractKind, RequestKey, StepKey};
use sqlx::PgPool;
use tokio::process::{Child, Command};
use uuid::Uuid;

mod control;
mod documents;
mod files;
mod payments;

use control::{CONTROL_TOKEN, bearer, write_control_token};
pub use control::{CONTROL_TOKEN_ENV, control_token, wait_until_up};
pub use files::Secrets;

/// The demo's destinations, on consecutive ports from `Z29C_DEMO_PORT` (3101 unless set) in
/// this order.
const SERVICES: [Service; 5] = Service::ALL;

/// The demo's protocol adapters, registered with the contract each destination kind declares:
/// the idempotent and queryable ones also under a contract whose `unknown_outcome_policy` is
/// `review`, so the review queue shows unknown outcomes under every adapter kind (the others
/// recover on their own).
const PROTOCOL_ADAPTERS: [(Kind, &str, bool); 5] = [
    (Kind::Idempotent, "idempotent-docs", false),
    (Kind::Queryable, "queryable-docs", false),
    (Kind::Opaque, "opaque-docs", false),
    (Kind::Idempotent, "idempotent-reviewed", true),
    (Kind::Queryable, "queryable-reviewed", true),
];

/// Deadline of the demo's protocol adapters; the scripted delays exceed it.
const DEADLINE_MS: u64 = 1_000;
/// Status-index lag of the queryable demo destination and of the payments search (the
/// adapter files declare the same window).
const WINDOW_MS: u64 = 1_500;

/// Where the demo's destinations listen: a base URL per destination.
#[derive(Debug, Clone)]
pub struct Endpoints {
    base_urls: BTreeMap<&'static str, String>,
}

impl Endpoints {
    /// The destinations at `base_urls`, one per service in `Service::ALL` order.
    pub fn new(base_urls: [String; 5]) -> Self {
        Endpoints {
            base_urls: SERVICES.iter().map(|s| s.as_str()).zip(base_urls).collect(),
        }
    }

    /// Consecutive loopback ports from `Z29C_DEMO_PORT` (3101 unless set).
    pub fn from_env() -> Self {
        Self::new(ports().map(base_url))
    }

    /// The base URL of `service`.
    pub fn of(&self, service: Service) -> &str {
        &self.base_urls[service.as_str()]
    }

    /// The base URL of the destination the demo adapter `adapter` reaches.
    fn of_adapter(&self, adapter: &str) -> &str {
        let service = match adapter {
            "payments" | "payments-reviewed" => Service::Payments,
            "partner-webhook" => Service::Webhook,
            "mailer" => Service::Protocol(Kind::Queryable),
            _ => {
                let (kind, _, _) = PROTOCOL_ADAPTERS
                    .iter()
                    .find(|(_, name, _)| *name == adapter)
                    .expect("a demo adapter");
                Service::Protocol(*kind)
            }
        };
        self.of(service)
    }
}

/// The demo destinations' ports, in `SERVICES` order.
fn ports() -> [u16; 5] {
    let base = std::env::var("Z29C_DEMO_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3101_u16);
    std::array::from_fn(|index| base + u16::try_from(index).expect("five destinations"))
}

/// The destination processes; stopped with SIGTERM so each stops its own cluster.
pub struct Demo {
    children: Vec<Child>,
}

impl Demo {
    /// Starts the destinations (each with a private cluster under `data_dir`), waits until they
    /// answer, and registers the adapters once their contract suites pass.
    pub async fn start(pool: &PgPool, data_dir: &Path) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("finding the z29c binary")?;
        write_control_token(data_dir)?;
        let secrets = Secrets::in_dir(data_dir)?;
        let mut children = Vec::new();
        for (service, port) in SERVICES.into_iter().zip(ports()) {
            let dir: PathBuf = data_dir.join(service.as_str());
            let mut command = Command::new(&exe);
            command
                .args(["destinations", "--kind", service.as_str(), "--addr"])
                .arg(format!("127.0.0.1:{port}"))
                .arg("--visibility-window-ms")
                .arg(WINDOW_MS.to_string())
                .arg("--pg-data-dir")
                .arg(&dir)
                .env_remove("DATABASE_URL")
                // In the environment, not the arguments: `ps` shows arguments to every user.
                .env(CONTROL_TOKEN_ENV, CONTROL_TOKEN.expose())
                .kill_on_drop(true);
            match service {
                Service::Payments => command.env(PAYMENTS_API_KEY_ENV, secrets.payments_key()?),
                Service::Webhook => command.env(WEBHOOK_SECRET_ENV, secrets.webhook_secret()?),
                Service::Protocol(_) => &mut command,
            };
            let child = command
                .spawn()
                .with_context(|| format!("starting the {service} destination"))?;
            children.push(child);
        }
        let mut demo = Self { children };
        for ((service, port), child) in SERVICES.into_iter().zip(ports()).zip(&mut demo.children) {
            wait_until_up(port, child)
                .await
                .with_context(|| format!("the {service} destination did not start"))?;
        }
        register(pool, &Endpoints::from_env(), &secrets).await?;
        Ok(demo)
    }

    /// Stops every destination process and waits for it.
    pub async fn stop(mut self) {
        for child in &mut self.children {
            if let Some(pid) = child.id() {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(0));
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
            let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
        }
    }
}

/// Registers the demo's adapters for the destinations at `endpoints`: the protocol adapters
/// (as `z29c adapter add` does: verified against their destinations before they are stored),
/// then the payments, webhook and mail adapters applied from their files and verified.
pub async fn register(
    pool: &PgPool,
    endpoints: &Endpoints,
    secrets: &Secrets,
) -> anyhow::Result<()> {
    for (kind, adapter, review) in PROTOCOL_ADAPTERS {
        let base_url = endpoints.of(Service::Protocol(kind));
        let contract = engine::adapter::contracts::declared(
            crate::demo::contract_kind(kind),
            DEADLINE_MS,
            WINDOW_MS,
            review,
        );
        engine::adapter::apply::add_protocol(
            pool,
            adapter,
            base_url,
            &contract,
            engine::store::journal::Actor::Engine("demo"),
        )
        .await
        .with_context(|| format!("registering the demo adapter `{adapter}`"))?;
    }
    files::apply_and_verify(pool, endpoints, secrets).await
}

fn base_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// Fault rules to install, by the base URL of the destination they script.
type Plans = BTreeMap<String, Vec<FaultRule>>;

/// Starts the demo workflows (once: creation keys make this idempotent) and scripts their
/// faults at the destinations `Z29C_DEMO_PORT` names. Call it before workers start, so no
/// delivery outruns its fault.
pub async fn seed(pool: &PgPool) -> anyhow::Result<usize> {
    seed_at(pool, &Endpoints::from_env()).await
}

/// [`seed`], for the destinations at `endpoints`.
pub async fn seed_at(pool: &PgPool, endpoints: &Endpoints) -> anyhow::Result<usize> {
    super::shipped::apply_definitions(pool).await?;
    let mut plans = Plans::new();
    let created = documents::seed(pool, endpoints, &mut plans).await?
        + payments::seed(pool, endpoints, &mut plans).await?;
    let client = reqwest::Client::new();
    for (base_url, rules) in plans {
        client
            .put(format!("{base_url}/control/faults"))
            .header(reqwest::header::AUTHORIZATION, bearer())
            .json(&FaultPlan::rules(rules))
            .send()
            .await?
            .error_for_status()?;
    }
    Ok(created)
}

/// The request key of step `logical` of `workflow`, as the engine derives it.
fn step_key(workflow: Uuid, logical: &str, version: i32) -> String {
    RequestKey::derive(workflow, &StepKey::new(logical, version)).to_string()
}

/// Serves one destination until SIGINT/SIGTERM (`z29c destinations`).
pub async fn serve_destination(
    kind: destinations::Service,
    addr: SocketAddr,
    visibility_window: Duration,
    basic: bool,
    database: &crate::database::DatabaseArgs,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !basic || kind == destinations::Service::Payments,
        "--basic applies to the payments destination only"
    );
    let secrets = destination_secrets(kind)?;
    let db = crate::database::Database::connect(database, "destination").await?;
    destinations::migrate(&db.pool)
        .await
        .context("applying the destination's migrations")?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    println!("{kind} destination: http://{}", listener.local_addr()?);
    // Without a token given, the test-only endpoints stay closed: the random one is never shown.
    let control_token = match std::env::var(CONTROL_TOKEN_ENV) {
        Ok(token) if !token.is_empty() => ControlToken::new(&token),
        _ => {
            eprintln!(
                "{kind} destination: /control/faults and /ledger refuse every request; set \
                 {CONTROL_TOKEN_ENV} to a secret to open them to whoever holds it"
            );
            ControlToken::random()
        }
    };
    let config = destinations::Config {
        visibility_window,
        control_token,
        honours_idempotency: !basic,
        payments_search: !basic,
        list_oldest_first: basic,
        ..secrets
    };
    destinations::serve(listener, db.pool.clone(), config, crate::shutdown::signal()).await?;
    db.close().await
}

/// The API key of the payments destination.
const PAYMENTS_API_KEY_ENV: &str = "Z29C_PAYMENTS_API_KEY";
/// The signing secret of the webhook receiver.
const WEBHOOK_SECRET_ENV: &str = "Z29C_WEBHOOK_SECRET";

/// The configuration of `kind`, with its secrets from the environment: the payments API key
/// (optional), the webhook signing secret (required).
fn destination_secrets(kind: destinations::Service) -> anyhow::Result<destinations::Config> {
    let secret = |name| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.is_empty())
            .map(|value| destinations::Secret::new(&value))
    };
    let mut config = kind.config();
    match kind {
        destinations::Service::Protocol(_) => {}
        destinations::Service::Payments => {
            config.api_key = secret(PAYMENTS_API_KEY_ENV);
            if config.api_key.is_none() {
                eprintln!(
                    "payments destination: no API key required; set {PAYMENTS_API_KEY_ENV} to require one"
                );
            }
        }
        destinations::Service::Webhook => {
            config.signing_secret = Some(secret(WEBHOOK_SECRET_ENV).with_context(|| {
                format!("the webhook destination needs its signing secret in {WEBHOOK_SECRET_ENV}")
            })?);
        }
    }
    Ok(config)
}

/// The contract a synthetic destination of `kind` lets its adapter declare.
pub fn contract_kind(kind: destinations::Kind) -> ContractKind {
    match kind {
        destinations::Kind::Idempotent => ContractKind::Idempotent,
        destinations::Kind::Queryable => ContractKind::Queryable,
        destinations::Kind::Opaque => ContractKind::Opaque,
    }
}
