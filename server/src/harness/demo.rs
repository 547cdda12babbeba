//! The demo `make run` serves: three destination services as separate processes, each with its
//! own private PostgreSQL, adapters registered for them, and workflows driven through the real
//! engine with scripted faults, so a new user sees every kind of uncertainty on first start.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use destinations::{ControlToken, Fault, FaultPlan, FaultRule, Kind, Match, Operation};
use engine::domain::{RequestKey, StepKey};
use engine::intake::{NewWorkflow, Started, start_workflow};
use engine::store::journal::Actor;
use serde_json::json;
use sqlx::PgPool;
use tokio::process::{Child, Command};
use uuid::Uuid;

mod control;

use control::{CONTROL_TOKEN, bearer, write_control_token};
pub use control::{CONTROL_TOKEN_ENV, control_token, wait_until_up};

/// The demo destinations and the adapters that reach them; they listen on consecutive ports
/// from `Z29C_DEMO_PORT` (3101 unless set).
const DESTINATIONS: [(Kind, &str); 3] = [
    (Kind::Idempotent, "idempotent-docs"),
    (Kind::Queryable, "queryable-docs"),
    (Kind::Opaque, "opaque-docs"),
];

/// The demo's adapters: each destination as declared, and the idempotent and queryable ones
/// again under a contract whose `unknown_outcome_policy` is `review`, so the review queue
/// shows unknown outcomes under every adapter kind (the others recover on their own).
const ADAPTERS: [(Kind, &str, bool); 5] = [
    (Kind::Idempotent, "idempotent-docs", false),
    (Kind::Queryable, "queryable-docs", false),
    (Kind::Opaque, "opaque-docs", false),
    (Kind::Idempotent, "idempotent-reviewed", true),
    (Kind::Queryable, "queryable-reviewed", true),
];

fn port_of_kind(kind: Kind) -> u16 {
    let base = std::env::var("Z29C_DEMO_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3101_u16);
    let index = DESTINATIONS
        .iter()
        .position(|(k, _)| *k == kind)
        .expect("a demo destination");
    base + u16::try_from(index).expect("three destinations")
}

fn port_of(adapter: &str) -> u16 {
    let (kind, _, _) = ADAPTERS
        .iter()
        .find(|(_, name, _)| *name == adapter)
        .expect("a demo adapter");
    port_of_kind(*kind)
}

/// Deadline of the demo adapters; the scripted delays exceed it.
const DEADLINE_MS: u64 = 1_000;
/// Status-index lag of the queryable demo destination.
const WINDOW_MS: u64 = 1_500;

/// The destination processes; stopped with SIGTERM so each stops its own cluster.
pub struct Demo {
    children: Vec<Child>,
}

impl Demo {
    /// Starts the destinations (each with a private cluster under `data_dir`), waits until they
    /// answer, runs each adapter's contract suite and registers the adapters.
    pub async fn start(pool: &PgPool, data_dir: &Path) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("finding the z29c binary")?;
        write_control_token(data_dir)?;
        let mut children = Vec::new();
        for (kind, adapter) in DESTINATIONS {
            let port = port_of(adapter);
            let dir: PathBuf = data_dir.join(kind.as_str());
            let child = Command::new(&exe)
                .args(["destinations", "--kind", kind.as_str(), "--addr"])
                .arg(format!("127.0.0.1:{port}"))
                .arg("--visibility-window-ms")
                .arg(WINDOW_MS.to_string())
                .arg("--pg-data-dir")
                .arg(&dir)
                .env_remove("DATABASE_URL")
                // In the environment, not the arguments: `ps` shows arguments to every user.
                .env(CONTROL_TOKEN_ENV, CONTROL_TOKEN.expose())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting the {kind} destination"))?;
            children.push(child);
        }
        let mut demo = Self { children };
        for ((kind, _), child) in DESTINATIONS.into_iter().zip(&mut demo.children) {
            wait_until_up(port_of_kind(kind), child)
                .await
                .with_context(|| format!("the {kind} destination did not start"))?;
        }
        for (kind, adapter, review) in ADAPTERS {
            let port = port_of(adapter);
            // As `z29c adapter add` does: a claim is trusted only once its suite passed.
            let contract = engine::adapter::contracts::declared(
                crate::harness::contract_kind(kind),
                DEADLINE_MS,
                WINDOW_MS,
                review,
            );
            let http = engine::adapter::protocol::protocol_adapter(&base_url(port), &contract);
            let report = engine::adapter::contract_suite::verify(adapter, &http).await;
            anyhow::ensure!(report.passed(), "{}", report.summary());
            engine::store::adapter::upsert(pool, adapter, &base_url(port), &contract).await?;
        }
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

fn base_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// One demo workflow: what to deliver, through which adapter, with which fault.
struct Scene {
    key: &'static str,
    adapter: &'static str,
    title: &'static str,
    fault: Option<Fault>,
    /// Deliver once before Z29C does, under the same client reference (an earlier system's
    /// attempt), so the lookup finds two deliveries: a duplicate-effect incident.
    predecessor: bool,
}

/// Every demo workflow, in the order they are started.
fn scenes() -> Vec<Scene> {
    [reports(), invoices(), letters(), statements(), notices()]
        .into_iter()
        .flatten()
        .collect()
}

/// One scene, by its fields in order.
fn scene(
    key: &'static str,
    adapter: &'static str,
    title: &'static str,
    fault: Option<Fault>,
    predecessor: bool,
) -> Scene {
    Scene {
        key,
        adapter,
        title,
        fault,
        predecessor,
    }
}

/// The reports, through the idempotent destination: on time, answered late, answer lost.
fn reports() -> Vec<Scene> {
    vec![
        scene(
            "demo-report-1",
            "idempotent-docs",
            "Quarterly report",
            None,
            false,
        ),
        scene(
            "demo-report-2",
            "idempotent-docs",
            "Annual report",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-report-3",
            "idempotent-docs",
            "Board minutes",
            Some(Fault::DropResponse {}),
            false,
        ),
    ]
}

/// The invoices, through the queryable destination; two were already delivered once by an
/// earlier system, so their lookups find a duplicate.
fn invoices() -> Vec<Scene> {
    vec![
        scene(
            "demo-invoice-1",
            "queryable-docs",
            "Invoice 1001",
            None,
            false,
        ),
        scene(
            "demo-invoice-2",
            "queryable-docs",
            "Invoice 1002",
            Some(Fault::DropResponse {}),
            false,
        ),
        scene(
            "demo-invoice-3",
            "queryable-docs",
            "Invoice 1003",
            Some(Fault::DropResponse {}),
            true,
        ),
        scene(
            "demo-invoice-4",
            "queryable-docs",
            "Invoice 1004",
            Some(Fault::DropResponse {}),
            true,
        ),
    ]
}

/// The letters, through the opaque destination, which offers no way to learn what happened.
fn letters() -> Vec<Scene> {
    vec![
        scene(
            "demo-letter-1",
            "opaque-docs",
            "Welcome letter",
            None,
            false,
        ),
        scene(
            "demo-letter-2",
            "opaque-docs",
            "Contract letter",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-letter-3",
            "opaque-docs",
            "Reminder letter",
            Some(Fault::ErrorAfterAccept { status: 502 }),
            false,
        ),
        scene(
            "demo-letter-4",
            "opaque-docs",
            "Renewal letter",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-letter-5",
            "opaque-docs",
            "Farewell letter",
            Some(Fault::DropResponse {}),
            false,
        ),
        scene(
            "demo-letter-6",
            "opaque-docs",
            "Holiday letter",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
    ]
}

/// The statements, through the adapters whose contract sends every unknown outcome to review.
fn statements() -> Vec<Scene> {
    vec![
        scene(
            "demo-statement-1",
            "idempotent-reviewed",
            "March statement",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-statement-3",
            "idempotent-reviewed",
            "May statement",
            Some(Fault::DelayResponse { ms: 3_000 }),
            false,
        ),
        scene(
            "demo-statement-4",
            "idempotent-reviewed",
            "June statement",
            Some(Fault::DropResponse {}),
            false,
        ),
        scene(
            "demo-statement-2",
            "queryable-reviewed",
            "April statement",
            Some(Fault::DropResponse {}),
            false,
        ),
    ]
}

/// The notices: one rejected outright by the destination.
fn notices() -> Vec<Scene> {
    vec![scene(
        "demo-notice-1",
        "idempotent-docs",
        "Price notice",
        Some(Fault::Reject {
            code: "recipient_unknown".into(),
            retryable: false,
        }),
        false,
    )]
}

/// Starts the demo workflows (once: creation keys make this idempotent) and scripts their
/// faults at the destinations. Call it before workers start, so no delivery outruns its fault.
pub async fn seed(pool: &PgPool) -> anyhow::Result<usize> {
    super::shipped::apply_definitions(pool).await?;
    let client = reqwest::Client::new();
    let mut plans: std::collections::BTreeMap<u16, Vec<FaultRule>> = Default::default();
    let mut created = 0;
    for scene in scenes() {
        let input = json!({
            "adapter": scene.adapter,
            "recipient": "customer-42",
            "document": { "title": scene.title, "body": format!("{}: generated for the Z29C demo.", scene.title) },
        });
        let started = start_workflow(
            pool,
            NewWorkflow {
                creation_key: scene.key.to_owned(),
                definition: "document_delivery".to_owned(),
                version: None,
                input,
            },
            Actor::Engine("demo"),
        )
        .await?;
        let Started::Created(workflow) = started else {
            continue;
        };
        created += 1;
        let key = deliver_key(workflow.id, workflow.definition_version);
        if scene.predecessor {
            // The same document, already delivered once under this reference.
            let definition = engine::definition::Catalog::get(
                pool,
                "document_delivery",
                workflow.definition_version,
            )
            .await?;
            let rendered = definition.run_pure("render", &workflow.input, &json!({}))?;
            client
                .post(format!("{}/deliveries", base_url(port_of(scene.adapter))))
                .json(&json!({
                    "client_reference": key,
                    "digest": rendered["document_digest"],
                    "recipient": "customer-42",
                    "summary": format!("Document \"{}\" (sent by the previous system)", scene.title),
                }))
                .send()
                .await?
                .error_for_status()?;
        }
        if let Some(fault) = scene.fault {
            let matching = if scene.adapter.starts_with("idempotent") {
                Match::IdempotencyKey(key)
            } else {
                Match::ClientReference(key)
            };
            plans
                .entry(port_of(scene.adapter))
                .or_default()
                .push(FaultRule::new(Operation::Deliver, matching, fault).times(1));
        }
    }
    for (port, rules) in plans {
        client
            .put(format!("{}/control/faults", base_url(port)))
            .header(reqwest::header::AUTHORIZATION, bearer())
            .json(&FaultPlan::rules(rules))
            .send()
            .await?
            .error_for_status()?;
    }
    Ok(created)
}

fn deliver_key(workflow: Uuid, version: i32) -> String {
    RequestKey::derive(workflow, &StepKey::new("deliver", version)).to_string()
}

/// Serves one destination until SIGINT/SIGTERM (`z29c destinations`).
pub async fn serve_destination(
    kind: destinations::Service,
    addr: SocketAddr,
    visibility_window: Duration,
    database: &crate::database::DatabaseArgs,
) -> anyhow::Result<()> {
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
