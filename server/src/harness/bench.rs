//! `z29c bench engine` and `z29c bench console`: throughput and page latency, measured on this
//! machine and printed as tables. Nothing here asserts a speed; the figures go in the README.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use engine::adapter::{Adapter, BoxFuture, LookupObservation, WithdrawalObservation};
use engine::definition::PreparedRequest;
use engine::domain::{RequestKey, SideEffectContract, TransportObservation};
use engine::embedded_pg::{Durability, EmbeddedPostgres};
use engine::worker::{Adapters, Worker, WorkerConfig};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// A destination that answers at once, in process: what remains is Z29C's own cost.
struct InstantDestination {
    contract: SideEffectContract,
}

impl Adapter for InstantDestination {
    fn contract(&self) -> &SideEffectContract {
        &self.contract
    }

    fn deliver<'a>(
        &'a self,
        key: &'a RequestKey,
        _: &'a PreparedRequest,
    ) -> BoxFuture<'a, TransportObservation> {
        Box::pin(async move {
            TransportObservation::Accepted {
                status: 201,
                external_reference: format!("x-{}", key.as_str()),
                replayed: false,
            }
        })
    }

    fn lookup<'a>(&'a self, _: &'a RequestKey, _: &'a str) -> BoxFuture<'a, LookupObservation> {
        Box::pin(async { LookupObservation::NotFound })
    }

    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        _: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation> {
        Box::pin(async move {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference: format!("w-{}", key.as_str()),
                limits: String::new(),
            }
        })
    }
}

/// The database a bench runs on: `DATABASE_URL` when set, else a fresh private cluster with
/// PostgreSQL's durable defaults, removed afterwards.
pub struct BenchDatabase {
    pub url: String,
    cluster: Option<(EmbeddedPostgres, tempfile::TempDir)>,
}

impl BenchDatabase {
    pub async fn open() -> anyhow::Result<Self> {
        if let Ok(url) = std::env::var("DATABASE_URL") {
            return Ok(Self { url, cluster: None });
        }
        let dir = tempfile::Builder::new().prefix("z29c-bench-").tempdir()?;
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        let data = dir.path().join("pg");
        let cluster = EmbeddedPostgres::start(&data, Durability::Durable).await?;
        // Statement counts (round trips per step) need pg_stat_statements loaded at start.
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&cluster.url("postgres"))
            .await?;
        sqlx::query("alter system set shared_preload_libraries = 'pg_stat_statements'")
            .execute(&admin)
            .await?;
        admin.close().await;
        cluster.stop().await?;
        let cluster = EmbeddedPostgres::start(&data, Durability::Durable).await?;
        let url = cluster.ensure_database("z29c").await?;
        let setup = PgPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await?;
        if let Err(error) = sqlx::query("create extension if not exists pg_stat_statements")
            .execute(&setup)
            .await
        {
            eprintln!(
                "pg_stat_statements unavailable ({error}); statements per step will read n/a"
            );
        }
        setup.close().await;
        Ok(Self {
            url,
            cluster: Some((cluster, dir)),
        })
    }

    /// The private cluster this process started; `None` when `DATABASE_URL` named a server.
    pub fn cluster(&self) -> Option<&EmbeddedPostgres> {
        self.cluster.as_ref().map(|(cluster, _)| cluster)
    }

    /// A pool of `size` connections, with `synchronous_commit` off when `async_commit`.
    pub async fn pool(&self, size: u32, async_commit: bool) -> anyhow::Result<PgPool> {
        let mut options: PgConnectOptions = self.url.parse()?;
        if async_commit {
            options = options.options([("synchronous_commit", "off")]);
        }
        Ok(PgPoolOptions::new()
            .max_connections(size)
            .connect_with(options)
            .await?)
    }

    pub async fn close(self) -> anyhow::Result<()> {
        if let Some((cluster, _dir)) = self.cluster {
            cluster.stop().await?;
        }
        Ok(())
    }
}

/// Settings of `z29c bench engine`.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineBenchArgs {
    /// Workflows to run (each: one pure step, two external steps).
    #[arg(long, default_value_t = 2_000)]
    pub workflows: usize,
    /// Worker tasks (each a `Worker` with its own lease holder).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Steps in flight per worker.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Steps claimed per transaction.
    #[arg(long, default_value_t = 64)]
    pub batch: i64,
    /// Call the real HTTP idempotent destination on loopback instead of the in-process one.
    #[arg(long)]
    pub http: bool,
    /// Seconds the single-row ceiling is measured for.
    #[arg(long, default_value_t = 5)]
    pub ceiling_secs: u64,
}

/// One measured run.
struct EngineRun {
    label: &'static str,
    external_steps_per_sec: f64,
    steps_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    xacts_per_step: f64,
    /// Statements (each a round trip) per step, when `pg_stat_statements` is loaded.
    statements_per_step: Option<f64>,
    ceiling_tps: f64,
}

pub async fn engine(args: EngineBenchArgs) -> anyhow::Result<()> {
    let db = BenchDatabase::open().await?;
    let size = u32::try_from(args.workers * args.concurrency + 8).unwrap_or(64);
    {
        let pool = db.pool(size, false).await?;
        engine::db::MIGRATOR
            .run(&pool)
            .await
            .context("migrating the bench database")?;
    }
    let destination = if args.http {
        let setup = db.pool(4, false).await?;
        sqlx::query("drop database if exists z29c_bench_destination")
            .execute(&setup)
            .await?;
        sqlx::query("create database z29c_bench_destination")
            .execute(&setup)
            .await?;
        let mut options: PgConnectOptions = db.url.parse()?;
        options = options.database("z29c_bench_destination");
        let dpool = PgPoolOptions::new()
            .max_connections(16)
            .connect_with(options)
            .await?;
        destinations::migrate(&dpool).await?;
        Some(
            destinations::spawn(
                dpool,
                destinations::Config::new(destinations::Kind::Idempotent),
            )
            .await?,
        )
    } else {
        None
    };
    let mut runs = Vec::new();
    for (label, async_commit) in [
        ("durable commits (default)", false),
        ("synchronous_commit=off", true),
    ] {
        let pool = db.pool(size, async_commit).await?;
        runs.push(
            engine_run(
                &pool,
                &args,
                label,
                destination.as_ref().map(|d| d.base_url()),
            )
            .await?,
        );
        pool.close().await;
    }
    println!();
    println!(
        "z29c bench engine: {} workflows ({} external steps), {} worker task(s) × {} in flight, batch {}, destination {}",
        args.workflows,
        args.workflows * 2,
        args.workers,
        args.concurrency,
        args.batch,
        if args.http {
            "HTTP on loopback"
        } else {
            "in process"
        }
    );
    println!(
        "{:<28} {:>12} {:>10} {:>9} {:>9} {:>10} {:>10} {:>12} {:>8}",
        "",
        "ext steps/s",
        "steps/s",
        "p50 ms",
        "p99 ms",
        "xacts/step",
        "stmts/step",
        "ceiling tps",
        "ratio"
    );
    for r in &runs {
        println!(
            "{:<28} {:>12.0} {:>10.0} {:>9.1} {:>9.1} {:>10.2} {:>10} {:>12.0} {:>7.2}×",
            r.label,
            r.external_steps_per_sec,
            r.steps_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.xacts_per_step,
            r.statements_per_step
                .map_or("n/a".to_owned(), |s| format!("{s:.1}")),
            r.ceiling_tps,
            r.external_steps_per_sec / r.ceiling_tps.max(1.0)
        );
    }
    println!(
        "latency: from the moment a step's dependency settled (it became ready) to its receipt"
    );
    println!(
        "stmts/step: statements per step by pg_stat_statements (each a round trip; BEGIN/COMMIT included); n/a when not loaded"
    );
    println!(
        "ratio: full-protocol (external) steps per second ÷ single-row UPDATE transactions per second, same pool, same concurrency"
    );
    db.close().await
}

async fn engine_run(
    pool: &PgPool,
    args: &EngineBenchArgs,
    label: &'static str,
    http: Option<String>,
) -> anyhow::Result<EngineRun> {
    let contract = engine::contracts::declared("idempotent", 5_000, 0, false).expect("a kind");
    let adapter = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let url = http.clone().unwrap_or_else(|| "http://127.0.0.1:9".into());
    let version = engine::store::adapter::upsert(pool, &adapter, &url, &contract).await?;
    let mut adapters = Adapters::default();
    let destination: Arc<dyn Adapter> = match &http {
        Some(url) => Arc::new(engine::adapter::HttpAdapter::new(url, contract.clone())),
        None => Arc::new(InstantDestination { contract }),
    };
    adapters.insert(adapter.clone(), destination, version);

    // Seed: intake is not what is measured.
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let started = Instant::now();
    let mut seeding = tokio::task::JoinSet::new();
    let per_task = args.workflows.div_ceil(8);
    for t in 0..8 {
        let (pool, adapter, tag) = (pool.clone(), adapter.clone(), tag.clone());
        let range = (t * per_task)..((t + 1) * per_task).min(args.workflows);
        seeding.spawn(async move {
            for i in range {
                engine::intake::start_workflow(
                    &pool,
                    engine::intake::NewWorkflow {
                        creation_key: format!("bench-{tag}-{i}"),
                        definition: engine::definition::DOCUMENT_DELIVERY.into(),
                        version: None,
                        input: serde_json::json!({"adapter": adapter, "recipient": format!("r-{i}"),
                            "document": {"title": format!("Document {i}"), "body": "benchmark"}}),
                    },
                    engine::store::journal::Actor::Engine("bench"),
                )
                .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = seeding.join_next().await {
        done??;
    }
    eprintln!(
        "{label}: seeded {} workflows in {:.1} s",
        args.workflows,
        started.elapsed().as_secs_f64()
    );

    let completed_before = completed(pool).await?;
    let xacts_before = xacts(pool).await?;
    let calls_before = statement_calls(pool).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    let started = Instant::now();
    for w in 0..args.workers {
        let mut config = WorkerConfig::named(format!("bench-{w}"));
        config.batch = args.batch;
        config.concurrency = args.concurrency;
        config.idle_poll = Duration::from_millis(5);
        config.invariant_interval = Duration::from_secs(3_600);
        let worker = Worker::new(pool.clone(), config, adapters.clone());
        let mut stopped = stopped.clone();
        workers.push(tokio::spawn(worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })));
    }
    // Done when every bench workflow completed; counted through `workflow_state_idx`, so the
    // watching costs the database next to nothing.
    let total = i64::try_from(args.workflows)? + completed_before;
    loop {
        let done = completed(pool).await?;
        if done >= total {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "the bench did not finish in 15 minutes ({} of {} workflows)",
            done - completed_before,
            args.workflows
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = stop.send(true);
    for w in workers {
        w.await?;
    }
    let xacts_after = xacts(pool).await?;
    let calls_after = statement_calls(pool).await;
    let (p50, p99): (f64, f64) = sqlx::query_as(
        r#"with lat as (
               select extract(epoch from r.created_at - coalesce(dr.created_at, pa.ended_at)) * 1000 as ms
               from step s
               join workflow w on w.id = s.workflow_id and w.creation_key like $1
               join receipt r on r.step_id = s.id
               join step d on d.workflow_id = s.workflow_id and d.logical = any(s.depends_on)
               left join receipt dr on dr.step_id = d.id
               left join attempt pa on pa.step_id = d.id and d.kind = 'pure'
           )
           select percentile_cont(0.5) within group (order by ms)::float8,
                  percentile_cont(0.99) within group (order by ms)::float8 from lat"#,
    )
    .bind(format!("bench-{tag}-%"))
    .fetch_one(pool)
    .await?;
    let ceiling_tps = ceiling(pool, args.workers * args.concurrency, args.ceiling_secs).await?;
    Ok(EngineRun {
        label,
        external_steps_per_sec: (args.workflows * 2) as f64 / elapsed,
        steps_per_sec: (args.workflows * 3) as f64 / elapsed,
        p50_ms: p50,
        p99_ms: p99,
        xacts_per_step: (xacts_after - xacts_before) as f64 / (args.workflows * 3) as f64,
        statements_per_step: calls_before
            .zip(calls_after)
            .map(|(before, after)| (after - before) as f64 / (args.workflows * 3) as f64),
        ceiling_tps,
    })
}

async fn completed(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("select count(*) from workflow where state = 'completed'")
            .fetch_one(pool)
            .await?,
    )
}

/// Statements executed so far, by `pg_stat_statements` (when the server loads it).
async fn statement_calls(pool: &PgPool) -> Option<i64> {
    sqlx::query_scalar("select sum(calls)::bigint from pg_stat_statements")
        .fetch_one(pool)
        .await
        .ok()
}

async fn xacts(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "select (xact_commit + xact_rollback)::bigint from pg_stat_database where datname = current_database()",
    )
    .fetch_one(pool)
    .await?)
}

/// The machine's commit ceiling as pgbench measures it with a one-row script: single-row
/// `UPDATE` transactions per second, `clients` at once, through `pool`.
async fn ceiling(pool: &PgPool, clients: usize, secs: u64) -> anyhow::Result<f64> {
    sqlx::query("create table if not exists bench_ceiling (id int primary key, n bigint not null)")
        .execute(pool)
        .await?;
    sqlx::query("insert into bench_ceiling select g, 0 from generate_series(1, $1) g on conflict do nothing")
        .bind(i32::try_from(clients)?)
        .execute(pool)
        .await?;
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = tokio::task::JoinSet::new();
    for id in 1..=clients {
        let pool = pool.clone();
        tasks.spawn(async move {
            let mut n = 0_u64;
            while Instant::now() < until {
                sqlx::query("update bench_ceiling set n = n + 1 where id = $1")
                    .bind(i32::try_from(id).unwrap_or(1))
                    .execute(&pool)
                    .await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut total = 0;
    while let Some(n) = tasks.join_next().await {
        total += n??;
    }
    Ok(total as f64 / secs as f64)
}

/// Settings of `z29c bench console`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConsoleBenchArgs {
    /// Workflow counts to measure at, ascending (each load adds to the previous one).
    #[arg(long, value_delimiter = ',', default_values_t = [10_000_usize, 100_000, 1_000_000])]
    pub sizes: Vec<usize>,
    /// Timed requests per page and size.
    #[arg(long, default_value_t = 40)]
    pub requests: usize,
    /// The built console assets, for the front-end weight.
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: std::path::PathBuf,
}

/// Loads workflows `from..to` with the mix of a long-running system: most succeeded with one
/// to two attempts, about 1 % outcome unknown or waiting for review across the three adapter
/// kinds (one to five attempts), 0.1 % with a duplicate-effect incident. Set-based SQL, with
/// foreign-key triggers off for the load (`session_replication_role = replica`, superuser only).
async fn load(pool: &PgPool, from: usize, to: usize) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("set local session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    sqlx::query("set local synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    let (from, to) = (i64::try_from(from)?, i64::try_from(to)?);
    let statements = [
        // Workflows: needs_review for the 1 % unknown and the 0.1 % duplicates.
        r#"insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest, state, revision, created_at, updated_at)
           select md5('w' || n)::uuid, 'bench-c-' || n, 'document_delivery', 2,
                  jsonb_build_object('adapter', 'bench-' || (array['idempotent','queryable','opaque'])[n % 3 + 1],
                                     'notify_adapter', 'bench-' || (array['idempotent','queryable','opaque'])[n % 3 + 1],
                                     'recipient', 'customer-' || (n % 5000),
                                     'document', jsonb_build_object('title', 'Document ' || n, 'body', 'benchmark')),
                  'sha256:' || encode(sha256(('w' || n)::bytea), 'hex'),
                  case when n % 100 = 7 or n % 1000 = 3 then 'needs_review' else 'completed' end::workflow_state,
                  6, now() - make_interval(mins => (n % 20000)::int), now() - make_interval(mins => (n % 20000)::int)
           from generate_series($1::bigint, $2::bigint - 1) n"#,
        // Steps: render (pure), deliver, notify.
        r#"insert into step (id, workflow_id, logical, definition_version, kind, adapter, state, depends_on, required_fields,
                             output, receipt_id, request_key, attempt_count, unknown_since, run_after, created_at, updated_at)
           select md5('s' || n || l.logical)::uuid, md5('w' || n)::uuid, l.logical, 2, l.kind::step_kind,
                  case when l.logical = 'render' then null else 'bench-' || (array['idempotent','queryable','opaque'])[n % 3 + 1] end,
                  (case when l.logical = 'render' then 'succeeded'
                        when n % 100 = 7 and l.logical = 'deliver' then (array['outcome_unknown','review_required'])[n % 2 + 1]
                        when n % 100 = 7 then 'blocked'
                        else 'succeeded' end)::step_state,
                  l.depends_on, '{}',
                  case when l.logical = 'render' then jsonb_build_object('document_digest', 'sha256:' || encode(sha256(('d' || n)::bytea), 'hex')) end,
                  case when l.logical <> 'render' and not (n % 100 = 7) then md5('r' || n || l.logical)::uuid end,
                  case when l.logical = 'render' or (n % 100 = 7 and l.logical = 'notify') then null
                       else 'w-' || replace(md5('w' || n)::uuid::text, '-', '') || '/' || l.logical || '-v2' end,
                  case when n % 100 = 7 and l.logical = 'deliver' then (n % 5 + 1)
                       when n % 100 = 7 and l.logical = 'notify' then 0
                       when n % 10 = 1 and l.logical = 'deliver' then 2 else 1 end,
                  case when n % 100 = 7 and l.logical = 'deliver' then now() - make_interval(mins => (n % 2880)::int) end,
                  now(), now() - make_interval(mins => (n % 20000)::int), now()
           from generate_series($1::bigint, $2::bigint - 1) n,
                (values ('render', 'pure', '{}'::text[]), ('deliver', 'external', '{render}'), ('notify', 'external', '{deliver}'))
                    as l(logical, kind, depends_on)"#,
        // Request identities of every external step that was sent.
        r#"insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version, prepared_at, first_sent_at, last_sent_at)
           select s.request_key, s.id, 'sha256:' || encode(sha256(s.request_key::bytea), 'hex'),
                  jsonb_build_object('client_reference', s.request_key, 'digest', 'sha256:' || encode(sha256(('d' || s.request_key)::bytea), 'hex')),
                  s.adapter, 1, s.created_at, s.created_at, s.created_at
           from step s where s.request_key is not null and s.kind = 'external'
             and s.workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)"#,
        // Attempts: one per attempt counted; all but the last of a retried step ended unknown.
        r#"insert into attempt (id, step_id, number, worker, lease_expires_at, started_at, invoked_at, ended_at, outcome, observation)
           select md5('a' || s.id || k)::uuid, s.id, k, 'bench-worker', s.created_at, s.created_at, s.created_at, s.created_at,
                  (case when k < s.attempt_count or s.state in ('outcome_unknown', 'review_required') then 'outcome_unknown'
                        else 'succeeded' end)::attempt_outcome,
                  case when k < s.attempt_count or s.state in ('outcome_unknown', 'review_required')
                       then '{"observed": "deadline_exceeded", "deadline_ms": 1000}'::jsonb
                       else '{"observed": "accepted", "status": 201, "replayed": false, "external_reference": "x"}'::jsonb end
           from step s, generate_series(1, s.attempt_count) k
           where s.workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)"#,
        // Receipts of every succeeded external step.
        r#"insert into receipt (id, step_id, workflow_id, definition_version, input_digest, request_key, adapter, contract_version,
                                external_reference, completion_state, method, observed_at, result_summary)
           select s.receipt_id, s.id, s.workflow_id, 2, q.input_digest, s.request_key, s.adapter, 1,
                  'x-' || substr(md5(s.id::text), 1, 12), 'accepted',
                  (case when s.attempt_count > 1 then 'idempotent_replay' else 'direct_response' end)::receipt_method,
                  s.created_at, '{}'
           from step s join external_request q on q.request_key = s.request_key
           where s.receipt_id is not null
             and s.workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)"#,
        // Duplicate-effect incidents, each holding the receipt's reference and another.
        r#"insert into integrity_incident (id, step_id, kind, opened_at)
           select md5('i' || n)::uuid, md5('s' || n || 'deliver')::uuid, 'duplicate_effect', now() - make_interval(mins => (n % 600)::int)
           from generate_series($1::bigint, $2::bigint - 1) n where n % 1000 = 3"#,
        r#"insert into incident_reference (incident_id, external_reference, request_key)
           select md5('i' || n)::uuid, r.ref, 'w-' || replace(md5('w' || n)::uuid::text, '-', '') || '/deliver-v2'
           from generate_series($1::bigint, $2::bigint - 1) n,
                lateral (values ('x-' || substr(md5(md5('s' || n || 'deliver')::uuid::text), 1, 12)), ('x-dup-' || n)) r(ref)
           where n % 1000 = 3"#,
    ];
    for statement in statements {
        sqlx::query(statement)
            .bind(from)
            .bind(to)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    // What autovacuum does to a system's mostly settled history: statistics, and pages marked
    // all-visible (index-only scans).
    sqlx::query("vacuum analyze").execute(pool).await?;
    Ok(())
}

/// A session on the console, as a browser holds one.
struct Session {
    client: reqwest::Client,
    base: String,
    cookie: String,
}

impl Session {
    async fn sign_in(base: &str, pool: &PgPool) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let name = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let password = engine::operators::add(pool, &name, engine::domain::Role::Viewer).await?;
        let page = client.get(format!("{base}/sign-in")).send().await?;
        let cookie = cookie_of(&page).context("no session cookie")?;
        let html = page.text().await?;
        let action = between(&html, r#"action="/fn/sign_in"#, "\"").context("no sign-in form")?;
        let csrf = between(&html, r#"name="csrf" value=""#, "\"").context("no csrf token")?;
        let answer = client
            .post(format!("{base}/fn/sign_in{action}"))
            .header("cookie", &cookie)
            .header("accept", "application/json")
            .form(&[
                ("username", name.as_str()),
                ("password", password.as_str()),
                ("csrf", csrf.as_str()),
            ])
            .send()
            .await?;
        let cookie = cookie_of(&answer).unwrap_or(cookie);
        anyhow::ensure!(
            answer.status().is_success() || answer.status().is_redirection(),
            "sign-in answered {}",
            answer.status()
        );
        Ok(Self {
            client,
            base: base.to_owned(),
            cookie,
        })
    }

    /// Milliseconds to the last byte of `path`, checked to answer 200.
    async fn time(&self, path: &str) -> anyhow::Result<f64> {
        let started = Instant::now();
        let answer = self
            .client
            .get(format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .send()
            .await?;
        let status = answer.status();
        let _ = answer.bytes().await?;
        anyhow::ensure!(status.is_success(), "{path} answered {status}");
        Ok(started.elapsed().as_secs_f64() * 1000.0)
    }
}

fn cookie_of(answer: &reqwest::Response) -> Option<String> {
    answer
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}

fn between(text: &str, start: &str, end: &str) -> Option<String> {
    let at = text.find(start)? + start.len();
    let rest = &text[at..];
    Some(rest[..rest.find(end)?].to_owned())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Sequential scans of the large tables so far.
async fn seq_scans(pool: &PgPool) -> anyhow::Result<Vec<(String, i64)>> {
    Ok(sqlx::query_as(
        "select relname::text, seq_scan from pg_stat_user_tables
         where relname in ('workflow', 'step', 'attempt', 'receipt', 'external_request', 'observation', 'audit', 'incident_reference')
         order by relname",
    )
    .fetch_all(pool)
    .await?)
}

pub async fn console(args: ConsoleBenchArgs) -> anyhow::Result<()> {
    let db = BenchDatabase::open().await?;
    let pool = db.pool(16, false).await?;
    engine::db::MIGRATOR.run(&pool).await?;
    for kind in ["idempotent", "queryable", "opaque"] {
        let contract = engine::contracts::declared(kind, 1_000, 1_500, false).expect("a kind");
        engine::store::adapter::upsert(
            &pool,
            &format!("bench-{kind}"),
            "http://127.0.0.1:9",
            &contract,
        )
        .await?;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = crate::http::router(crate::state::AppState {
        pool: pool.clone(),
        leptos_options: leptos::prelude::LeptosOptions::builder()
            .output_name("z29c")
            .build(),
    });
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let session = Session::sign_in(&base, &pool).await?;

    let mut loaded = 0;
    let mut table: Vec<Measured> = Vec::new();
    for &size in &args.sizes {
        let started = Instant::now();
        load(&pool, loaded, size).await?;
        let load_secs = started.elapsed().as_secs_f64();
        loaded = size;
        eprintln!("console bench: {size} workflows loaded ({load_secs:.0} s)");
        let pages = pages(&pool).await?;
        let before = seq_scans(&pool).await?;
        let mut figures = Vec::new();
        for (name, path) in &pages {
            for _ in 0..3 {
                session.time(path).await?;
            }
            let mut times = Vec::with_capacity(args.requests);
            for _ in 0..args.requests {
                times.push(session.time(path).await?);
            }
            times.sort_by(f64::total_cmp);
            figures.push((*name, percentile(&times, 0.5), percentile(&times, 0.99)));
        }
        let after = seq_scans(&pool).await?;
        let scanned: Vec<String> = after
            .iter()
            .zip(&before)
            .filter(|((_, a), (_, b))| a > b)
            .map(|((t, a), (_, b))| format!("{t} ×{}", a - b))
            .collect();
        table.push(Measured {
            size,
            load_secs,
            pages: figures,
            scanned,
        });
    }
    server.abort();

    println!();
    println!(
        "z29c bench console: server-side latency over loopback (full SSR page), {} requests per page",
        args.requests
    );
    print!("{:<26}", "page (p50 / p99 ms)");
    for m in &table {
        print!(" {:>18}", format!("{} workflows", m.size));
    }
    println!();
    let names: Vec<&str> = table
        .first()
        .map(|m| m.pages.iter().map(|p| p.0).collect())
        .unwrap_or_default();
    for (i, name) in names.iter().enumerate() {
        print!("{name:<26}");
        for m in &table {
            print!(
                " {:>18}",
                format!("{:.1} / {:.1}", m.pages[i].1, m.pages[i].2)
            );
        }
        println!();
    }
    print!("{:<26}", "load time (s)");
    for m in &table {
        print!(" {:>18}", format!("{:.0}", m.load_secs));
    }
    println!();
    for m in &table {
        println!(
            "sequential scans of large tables while serving at {}: {}",
            m.size,
            if m.scanned.is_empty() {
                "none".to_owned()
            } else {
                m.scanned.join(", ")
            }
        );
    }
    if let (Some(first), Some(last)) = (table.first(), table.last()) {
        println!(
            "worst p99: {:.1} ms at {} workflows, {:.1} ms at {} ({:.2}×)",
            first.worst_p99(),
            first.size,
            last.worst_p99(),
            last.size,
            last.worst_p99() / first.worst_p99().max(0.001)
        );
    }
    front_end_weight(&args.site_root);
    pool.close().await;
    db.close().await
}

/// The figures at one size.
struct Measured {
    size: usize,
    load_secs: f64,
    /// Page, p50 ms, p99 ms.
    pages: Vec<(&'static str, f64, f64)>,
    /// Large tables scanned sequentially while serving.
    scanned: Vec<String>,
}

impl Measured {
    fn worst_p99(&self) -> f64 {
        self.pages.iter().map(|p| p.2).fold(0.0, f64::max)
    }
}

/// The pages timed, with ids picked from the loaded data.
async fn pages(pool: &PgPool) -> anyhow::Result<Vec<(&'static str, String)>> {
    let waiting: i64 = sqlx::query_scalar(
        "select count(*) from step where state in ('outcome_unknown', 'review_required')",
    )
    .fetch_one(pool)
    .await?;
    let (at, id): (String, uuid::Uuid) = sqlx::query_as(
        r#"select to_char(unknown_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'), id
           from step where state in ('outcome_unknown', 'review_required')
           order by unknown_since, id offset $1 limit 1"#,
    )
    .bind(waiting * 4 / 5)
    .fetch_one(pool)
    .await?;
    let (unknown_step, unknown_key): (uuid::Uuid, String) = sqlx::query_as(
        "select id, request_key from step where state = 'review_required' order by unknown_since desc limit 1",
    )
    .fetch_one(pool)
    .await?;
    let reference: String =
        sqlx::query_scalar("select external_reference from receipt order by id limit 1")
            .fetch_one(pool)
            .await?;
    let incident: uuid::Uuid =
        sqlx::query_scalar("select id from integrity_incident order by id limit 1")
            .fetch_one(pool)
            .await?;
    let cursor = format!("{at}|{id}");
    Ok(vec![
        ("review queue, first page", "/".to_owned()),
        (
            "queue filtered",
            "/?adapter=bench-opaque&state=review_required".to_owned(),
        ),
        (
            "queue, deep keyset page",
            format!(
                "/?after={}",
                engine::domain::identity::percent_encode(&cursor)
            ),
        ),
        (
            "search by request key",
            format!(
                "/?q={}",
                engine::domain::identity::percent_encode(&unknown_key)
            ),
        ),
        (
            "search by external ref",
            format!(
                "/?q={}",
                engine::domain::identity::percent_encode(&reference)
            ),
        ),
        ("step evidence", format!("/steps/{unknown_step}")),
        ("incident", format!("/incidents/{incident}")),
    ])
}

/// Prints the gzipped size of the console's wasm and JavaScript, as built.
fn front_end_weight(site_root: &std::path::Path) {
    let gz = |path: std::path::PathBuf| -> Option<(u64, u64)> {
        let raw = std::fs::metadata(&path).ok()?.len();
        let out = std::process::Command::new("gzip")
            .arg("-9")
            .arg("-c")
            .arg(&path)
            .output()
            .ok()?;
        Some((raw, out.stdout.len() as u64))
    };
    let pkg = site_root.join("pkg");
    match (
        gz(pkg.join("z29c_bg.wasm")).or_else(|| gz(pkg.join("z29c.wasm"))),
        gz(pkg.join("z29c.js")),
    ) {
        (Some((wasm, wasm_gz)), Some((js, js_gz))) => println!(
            "front end ({}): wasm {} KB ({} KB gzipped) + JS {} KB ({} KB gzipped) = {} KB gzipped",
            pkg.display(),
            wasm / 1024,
            wasm_gz / 1024,
            js / 1024,
            js_gz / 1024,
            (wasm_gz + js_gz) / 1024
        ),
        _ => println!(
            "front end: no build under {} (run `make build PROFILE=release` first)",
            pkg.display()
        ),
    }
}
