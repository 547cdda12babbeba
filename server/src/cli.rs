//! Command-line interface of `z29c`: the arguments each command takes, and nothing else.
//! What the commands do is in `commands` (and `startup` for the long-running ones).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::database::DatabaseArgs;

pub mod archive;
pub mod incident;
pub mod ops;
pub mod shared;

/// Z29C: durable workflows whose side effects cross a boundary no transaction covers.
#[derive(Debug, Parser)]
#[command(name = "z29c", version)]
pub struct Cli {
    #[command(flatten)]
    pub(crate) telemetry: crate::telemetry::TelemetryArgs,
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the recovery console and API.
    Serve(ServeArgs),
    /// Run one synthetic destination service (its own database; a private cluster by default).
    Destinations(DestinationArgs),
    /// Run workers only (many processes may share one database).
    Worker(WorkerArgs),
    /// Retention and the archive: status, run now, show an archived workflow, verify.
    #[command(subcommand)]
    Archive(archive::ArchiveCommand),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    /// Check the semantic invariants; exits 1 when one is violated that no incident records.
    Check(CheckArgs),
    /// API bearer tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Console operators.
    #[command(subcommand)]
    User(UserCommand),
    /// Adapters Z29C may call.
    #[command(subcommand)]
    Adapter(AdapterCommand),
    /// Check definition and adapter files and store them: a definition's name and version
    /// once, immutable after; an adapter file as the adapter's next version, unverified.
    Apply(ApplyArgs),
    /// Workflow definitions applied to the database.
    #[command(subcommand)]
    Definitions(DefinitionsCommand),
    /// Print the request every step of a definition file renders for an input, as canonical
    /// bytes with their digest and the content digest, before an adapter shapes it for the
    /// wire: golden tests of a definition in your own repository. Reads no database.
    Render(RenderArgs),
    /// Private PostgreSQL clusters for development and tests.
    #[command(subcommand)]
    Db(DbCommand),
    /// Print the HTTP API's OpenAPI document (JSON), as `GET /api/v1/openapi.json` serves it.
    Openapi,
    /// Drop every projection (status, metrics, notification revisions) and rebuild it from
    /// durable state.
    RebuildProjections(DatabaseArgs),
    /// Measure throughput and page latency on this machine (a build with `--features lab`).
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Kill workers between commits and judge recovery against the destinations' ledgers
    /// (a build with `--features lab,failpoints`).
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Scenario(ScenarioCommand),
    #[command(flatten)]
    Ops(ops::OpsCommand),
    /// Print a completion script for a shell, e.g. `z29c completions bash > ~/.local/share/bash-completion/completions/z29c`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

#[cfg(feature = "lab")]
#[derive(Debug, Subcommand)]
pub(crate) enum ScenarioCommand {
    /// Every fault point × every destination kind.
    Matrix(crate::lab::scenario::MatrixArgs),
    /// Many workflows, several worker processes, random SIGKILLs; reproducible from a seed.
    Soak(crate::lab::scenario::SoakArgs),
}

#[cfg(feature = "lab")]
#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Full-protocol steps per second, as a ratio to single-row UPDATE transactions per second.
    Engine(crate::lab::bench::EngineBenchArgs),
    /// Console page latency at 10k, 100k and 1M workflows, and the front-end's weight.
    Console(crate::lab::bench::ConsoleBenchArgs),
    /// Simulated days of traffic with the archiver keeping a retention policy: hot-table
    /// sizes, the archiver's throughput and the console's pages at the end.
    Retention(crate::lab::bench::RetentionBenchArgs),
    /// One worker process of `bench engine` (started by it, not by hand).
    #[command(hide = true)]
    EngineWorker(crate::lab::bench::EngineWorkerArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
    /// Address the console listens on.
    #[arg(long, env = "Z29C_ADDR", default_value = "127.0.0.1:3000")]
    pub(crate) addr: SocketAddr,
    /// Directory holding the built console assets (`pkg/`), as cargo-leptos writes it.
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub(crate) site_root: PathBuf,
    /// Served through a TLS-terminating reverse proxy: the session cookie becomes
    /// `__Host-z29c_session`, and the client's address is the last `X-Forwarded-For` entry.
    #[arg(long, env = "Z29C_BEHIND_TLS_PROXY")]
    pub(crate) behind_tls_proxy: bool,
    /// Connections of the console's and the API's own, beside the DB_MAX_CONNECTIONS the
    /// workers and the maintenance services share.
    #[arg(long, env = "Z29C_DB_CONSOLE_CONNECTIONS", default_value_t = 8)]
    pub(crate) db_console_connections: u32,
    /// Serve only: run no workers in this process.
    #[arg(long)]
    pub(crate) no_workers: bool,
    /// Also start the three demo destinations and seed demo workflows (what `make run` does).
    #[arg(long)]
    pub(crate) demo: bool,
    /// Where the demo destinations keep their private clusters.
    #[arg(long, env = "Z29C_DEMO_DATA", default_value = ".z29c/destinations")]
    pub(crate) demo_data_dir: PathBuf,
    #[command(flatten)]
    pub(crate) workers: WorkerTuning,
    #[command(flatten)]
    pub(crate) observer: ObserverArgs,
    #[command(flatten)]
    pub(crate) retention: archive::RetentionArgs,
}

/// The outbox publisher, alerts and notifications every serving process runs.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ObserverArgs {
    /// POST alerts (and notification candidates) here, each with its event id as
    /// `Idempotency-Key`.
    #[arg(long, env = "Z29C_WEBHOOK")]
    pub(crate) webhook: Option<String>,
    /// The key every webhook post is signed with (`Z29C-Signature`, see
    /// docs/security.md); required with --webhook.
    #[arg(long, env = "Z29C_WEBHOOK_SIGNING_SECRET", hide_env_values = true)]
    pub(crate) webhook_secret: Option<String>,
    /// Raise an alert for an outcome unknown longer than this many seconds.
    #[arg(long, env = "Z29C_ALERT_UNKNOWN_AGE_SECS", default_value_t = 900)]
    pub(crate) alert_unknown_age_secs: u64,
    /// How often alert rules are evaluated and webhooks sent, in seconds.
    #[arg(long, env = "Z29C_OBSERVE_EVERY_SECS", default_value_t = 10)]
    pub(crate) observe_every_secs: u64,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DestinationArgs {
    /// idempotent, queryable or opaque (see destinations/PROTOCOL.md), payments or webhook
    /// (destinations/PAYMENTS.md; their secrets from Z29C_PAYMENTS_API_KEY, Z29C_WEBHOOK_SECRET).
    #[arg(long)]
    pub(crate) kind: destinations::Service,
    /// Where the service listens.
    #[arg(long, default_value = "127.0.0.1:3101")]
    pub(crate) addr: SocketAddr,
    /// How long the status index lags acceptance (queryable kind, payments search).
    #[arg(long, default_value_t = 1_500)]
    pub(crate) visibility_window_ms: u64,
    /// Payments only: promise less, as some real providers do — ignore `Idempotency-Key`,
    /// offer no search, list charges oldest first (destinations/PAYMENTS.md).
    #[arg(long)]
    pub(crate) basic: bool,
    /// The destination's own database: DATABASE_URL, or a private cluster in --pg-data-dir.
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
    #[command(flatten)]
    pub(crate) workers: WorkerTuning,
    /// Serve this process's latency histograms at `http://ADDR/metrics`, to an API token without
    /// a creation-key prefix (off when unset).
    #[arg(long, env = "Z29C_WORKER_METRICS_ADDR")]
    pub(crate) metrics_addr: Option<SocketAddr>,
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WorkerTuning {
    /// Name recorded in leases and attempts (default: host and process id).
    #[arg(long, env = "Z29C_WORKER_NAME")]
    pub(crate) worker_name: Option<String>,
    /// Steps in flight at once in this process.
    #[arg(long, env = "Z29C_WORKER_CONCURRENCY", default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// Steps claimed per transaction.
    #[arg(long, env = "Z29C_WORKER_BATCH", default_value_t = 32)]
    pub(crate) batch: i64,
    /// Lease length in seconds (renewed while a call is in flight).
    #[arg(long, env = "Z29C_LEASE_SECS", default_value_t = 30)]
    pub(crate) lease_secs: u64,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
    /// After a restore, before workers resume: hand every step caught mid-call to recovery.
    #[arg(long)]
    pub(crate) before_resume: bool,
    /// With `--before-resume`: the archive `z29c serve` writes (its `--archive-dir`), whose
    /// records of workflows archived after the backup get their tombstones back.
    #[arg(long, env = "Z29C_ARCHIVE_DIR")]
    pub(crate) archive_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum UserCommand {
    /// Create an operator; the password is printed once.
    Add {
        /// Sign-in name (lowercase letters, digits, `.`, `_`, `-`).
        name: String,
        /// viewer (reads), operator (checks, same-key retries, evidence) or approver (all).
        #[arg(long)]
        role: engine::domain::Role,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List operators: name, role, created, disabled.
    List {
        #[command(flatten)]
        output: ops::Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Disable an operator: nothing is deleted, and their open sessions end on the next request.
    Disable {
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Enable a disabled operator again.
    Enable {
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Change an operator's role; open sessions follow on their next request.
    SetRole {
        name: String,
        /// viewer, operator or approver.
        #[arg(long)]
        role: engine::domain::Role,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Failed sign-ins, counted per name and 15-minute window (kept 90 days), newest first.
    Failures {
        /// How many windows to print.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        #[command(flatten)]
        output: ops::Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Give an operator a new generated password; it is printed once.
    ResetPassword {
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Create a bearer token for an API client; the token is printed once.
    Create {
        /// Who the token is for (recorded in the audit log).
        name: String,
        /// viewer (reads workflow status) or operator/approver (also starts workflows).
        #[arg(long, default_value = "operator")]
        role: engine::domain::Role,
        /// Start and read only workflows whose creation key begins with this; such a token
        /// reads no configuration, queue counts or incidents, which span every team.
        #[arg(long)]
        creation_key_prefix: Option<String>,
        /// May change configuration (`PUT /api/v1/definitions`, `/api/v1/adapters`), which any
        /// token without a prefix reads: a privilege apart from the role, for the pipeline
        /// that deploys files.
        #[arg(long)]
        configure: bool,
        /// It changes nothing beyond these adapters (comma-separated names, or patterns with
        /// one `*`): the workflows it starts, the steps it acts on, what it holds and configures.
        #[arg(long, value_delimiter = ',')]
        adapters: Option<Vec<String>>,
        /// The person (an operator's username) the token is issued to: four eyes counts its
        /// actions as theirs, so they cannot confirm their own proposals through it.
        #[arg(long = "for", value_name = "USERNAME")]
        on_behalf_of: Option<String>,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List every token: name, role, whether it configures, creation-key prefix, adapters,
    /// created, revoked.
    List {
        #[command(flatten)]
        output: ops::Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Revoke the live token NAME: its next request is refused.
    Revoke {
        /// The token's name, as `z29c token list` shows it.
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct ApplyArgs {
    /// Definition or adapter files (YAML); a directory applies every `*.yaml` in it.
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
    /// Check and print what would be added, storing nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Store a definition even when a step names an adapter that is not registered yet (its
    /// workflows refuse to start until it is): for applying files in any order.
    #[arg(long)]
    pub allow_missing_adapters: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum DefinitionsCommand {
    /// List applied definitions.
    List {
        /// One JSON object per definition, for programs.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Every version of a definition: who applied it, when, and its diff from the one before.
    History {
        /// The definition's name.
        name: String,
        /// One JSON object per version, for programs.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct RenderArgs {
    /// The definition file (YAML).
    #[arg(long)]
    pub definition: PathBuf,
    /// The workflow input (JSON).
    #[arg(long)]
    pub input: PathBuf,
    /// Stand-in receipts of the dependencies, as JSON `{"step": {"field": value}}`: an
    /// external step's receipt is not known before its call.
    #[arg(long)]
    pub receipts: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AdapterCommand {
    /// Register (or update) an HTTP adapter speaking the destination protocol.
    Add {
        /// The name workflows use in their input.
        name: String,
        /// Base URL of the destination service.
        #[arg(long)]
        url: String,
        /// The contract it declares: idempotent, queryable or opaque.
        #[arg(long)]
        contract: String,
        /// How long a call may take before its outcome is unknown.
        #[arg(long, default_value_t = 2_000)]
        deadline_ms: u64,
        /// For queryable: how long a "not found" may still turn into "found".
        #[arg(long, default_value_t = 1_500)]
        visibility_window_ms: u64,
        /// Ask a person to review every unknown outcome, whatever the capabilities.
        #[arg(long)]
        review_unknown: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List registered adapters, their contracts and how each was verified.
    List {
        /// One JSON object per adapter, for programs.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Verify an applied adapter against a sandbox (most APIs have a test mode; verification
    /// makes real, labelled probe calls there): it provokes every claim's failure path — lost
    /// answers, the file's `verify.provoke` declines and errors — and records each claim as
    /// verified, unverified or refuted. The version sends once its probe succeeded and nothing
    /// was refuted; only verified claims count. Exits 1 when the version does not pass.
    Verify {
        /// The adapter's name.
        name: String,
        /// The base URL to verify against, instead of the file's.
        #[arg(long)]
        sandbox: String,
        /// Every check and what it saw, not only each claim's verdict.
        #[arg(long)]
        verbose: bool,
        /// One JSON object: the version, whether it passed, and every claim with its checks.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Every version of an adapter's file: who applied it, when, and its diff from the one
    /// before.
    History {
        /// The adapter's name.
        name: String,
        /// One JSON object per version, for programs.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Each claim of an adapter's current version: its trust and the evidence.
    Claims {
        /// The adapter's name.
        name: String,
        /// One JSON object per claim, for programs.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum DbCommand {
    /// Run COMMAND with DATABASE_URL pointing at a fresh private cluster, removed afterwards.
    Exec {
        /// Keep PostgreSQL's durable defaults (fsync on); the default trades them for speed.
        #[arg(long)]
        durable: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

/// What the deployment lets adapter files reach (docs/DESIGN.md §15); `crate::policy` makes
/// the process's policy of it.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PolicyArgs {
    /// The hosts and networks adapters may send requests to, comma-separated: `api.stripe.com`,
    /// `*.example.com`, `10.0.0.0/8`, `127.0.0.1`. None when unset (the demo and the harness
    /// add loopback). Link-local and cloud-metadata addresses only when named one by one.
    #[arg(long, env = "Z29C_EGRESS_ALLOW", value_delimiter = ',', global = true)]
    pub(crate) egress_allow: Vec<String>,
    /// The directory a `{ file: PATH }` secret must be in. When unset no file may be named
    /// (the demo uses its data directory).
    #[arg(long, env = "Z29C_SECRETS_DIR", global = true)]
    pub(crate) secrets_dir: Option<PathBuf>,
    /// What every environment variable an adapter file names (a secret, a base URL) must
    /// begin with; Z29C's own settings are refused whatever their name.
    #[arg(
        long,
        env = "Z29C_SECRET_ENV_PREFIX",
        default_value = "Z29C_",
        global = true
    )]
    pub(crate) secret_env_prefix: String,
}
