//! `z29c bench console`: server-side page latency over loopback as the history grows, the
//! front end's weight as built, and each page's cold load in headless Chromium (`page_load`).

use std::time::Instant;

use sqlx::PgPool;

use super::cluster::BenchDatabase;
use super::load::{load, register_adapters};
use super::page_load::{BrowserArgs, browser_pages, page_loads, print_loads};
use super::quantile::percentile;
use super::session::Session;

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
    #[command(flatten)]
    pub browser: BrowserArgs,
    #[command(flatten)]
    pub load: super::under_load::UnderLoadArgs,
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

/// Says what is wrong with the site before anything is loaded, loads each size in turn and
/// prints its figures as soon as they are measured, then the whole table, then the browser's
/// loads (or why there are none: a part that fails takes nothing printed before with it).
pub async fn console(args: ConsoleBenchArgs) -> anyhow::Result<()> {
    let site = super::front_end::weight(&args.site_root);
    if let Err(why) = &site {
        println!("front end: {why}; the browser loads are skipped");
    }
    let db = BenchDatabase::open().await?;
    let pool = db.pool(16, false).await?;
    engine::db::MIGRATOR.run(&pool).await?;
    crate::shipped::apply_definitions(&pool).await?;
    register_adapters(&pool).await?;
    let (base, server) = serve(&pool, &args.site_root).await?;
    let session = Session::sign_in(&base, &pool).await?;
    let table = measure(&pool, &session, &args).await?;
    print_table(&args, &table);
    if let (Some(workflows), Some(idle)) = (args.load.under_load, table.last()) {
        let pages = pages(&pool).await?;
        let load =
            super::under_load::under_load(&db, &session, &pages, &args.load, workflows).await?;
        super::under_load::print(&idle.pages, &load, args.load.under_load_processes);
    }
    let loads = match site {
        Ok(()) => {
            let pages = browser_pages(&pool).await?;
            page_loads(&args.browser, &base, session.cookie(), &pages)
                .await
                .unwrap_or_else(|error| Err(format!("failed: {error:#}")))
        }
        Err(why) => Err(format!("skipped: {why}")),
    };
    server.abort();
    let size = args.sizes.last().copied().unwrap_or_default();
    print_loads(size, args.browser.loads, &loads);
    pool.close().await;
    db.close().await
}

/// The console's router on a loopback port, serving the site under `site_root`; returns its
/// base URL and the serving task.
pub(super) async fn serve(
    pool: &PgPool,
    site_root: &std::path::Path,
) -> anyhow::Result<(String, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let base = format!("http://{address}");
    let app = crate::http::router(crate::state::AppState::new(
        pool.clone(),
        crate::http::assets::options(site_root, address),
    ));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((base, server))
}

/// Each size loaded on top of the last, then every page timed at it.
async fn measure(
    pool: &PgPool,
    session: &Session,
    args: &ConsoleBenchArgs,
) -> anyhow::Result<Vec<Measured>> {
    let mut loaded = 0;
    let mut table: Vec<Measured> = Vec::new();
    for &size in &args.sizes {
        let started = Instant::now();
        load(pool, loaded, size).await?;
        let load_secs = started.elapsed().as_secs_f64();
        loaded = size;
        eprintln!("console bench: {size} workflows loaded ({load_secs:.0} s)");
        let before = seq_scans(pool).await?;
        let figures = time_pages(pool, session, args.requests).await?;
        let after = seq_scans(pool).await?;
        let scanned: Vec<String> = after
            .iter()
            .zip(&before)
            .filter(|((_, a), (_, b))| a > b)
            .map(|((t, a), (_, b))| format!("{t} ×{}", a - b))
            .collect();
        let measured = Measured {
            size,
            load_secs,
            pages: figures,
            scanned,
        };
        measured.print();
        table.push(measured);
    }
    Ok(table)
}

/// Every page timed `requests` times after three to warm up: name, p50 and p99 in ms.
pub(super) async fn time_pages(
    pool: &PgPool,
    session: &Session,
    requests: usize,
) -> anyhow::Result<Vec<(&'static str, f64, f64)>> {
    let mut figures = Vec::new();
    for (name, path) in &pages(pool).await? {
        for _ in 0..3 {
            session.time(path).await?;
        }
        let mut times = Vec::with_capacity(requests);
        for _ in 0..requests {
            times.push(session.time(path).await?);
        }
        times.sort_by(f64::total_cmp);
        figures.push((*name, percentile(&times, 0.5), percentile(&times, 0.99)));
    }
    Ok(figures)
}

/// The latency table, the load times, the sequential scans seen and the worst p99's growth.
fn print_table(args: &ConsoleBenchArgs, table: &[Measured]) {
    println!();
    println!(
        "z29c bench console: server-side latency over loopback (full SSR page), {} requests per page",
        args.requests
    );
    print!("{:<26}", "page (p50 / p99 ms)");
    for m in table {
        print!(" {:>18}", format!("{} workflows", m.size));
    }
    println!();
    let names: Vec<&str> = table
        .first()
        .map(|m| m.pages.iter().map(|p| p.0).collect())
        .unwrap_or_default();
    for (i, name) in names.iter().enumerate() {
        print!("{name:<26}");
        for m in table {
            print!(
                " {:>18}",
                format!("{:.1} / {:.1}", m.pages[i].1, m.pages[i].2)
            );
        }
        println!();
    }
    print!("{:<26}", "load time (s)");
    for m in table {
        print!(" {:>18}", format!("{:.0}", m.load_secs));
    }
    println!();
    for m in table {
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
    /// This size's figures, printed as soon as they are measured.
    fn print(&self) {
        println!(
            "\nat {} workflows (loaded in {:.0} s): p50 / p99 ms",
            self.size, self.load_secs
        );
        for (name, p50, p99) in &self.pages {
            println!("{name:<26} {p50:>8.1} / {p99:.1}");
        }
        std::io::Write::flush(&mut std::io::stdout()).ok();
    }

    fn worst_p99(&self) -> f64 {
        self.pages.iter().map(|p| p.2).fold(0.0, f64::max)
    }
}

/// The pages timed, every page of the console an operator reads and the API's main reads, with
/// ids picked from the loaded data.
async fn pages(pool: &PgPool) -> anyhow::Result<Vec<(&'static str, String)>> {
    let waiting: i64 = sqlx::query_scalar(
        "select count(*) from step where waiting in ('outcome_unknown', 'review_required')",
    )
    .fetch_one(pool)
    .await?;
    let (at, id): (String, uuid::Uuid) = sqlx::query_as(
        r#"select to_char(unknown_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'), id
           from step where waiting in ('outcome_unknown', 'review_required')
           order by unknown_since, id offset $1 limit 1"#,
    )
    .bind(waiting * 4 / 5)
    .fetch_one(pool)
    .await?;
    let (unknown_step, unknown_key, workflow): (uuid::Uuid, String, uuid::Uuid) = sqlx::query_as(
        "select id, request_key, workflow_id from step where state = 'review_required' order by unknown_since desc limit 1",
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
        ("open incidents", "/incidents".to_owned()),
        ("workflow", format!("/workflows/{workflow}")),
        ("workflows", "/workflows".to_owned()),
        ("overview", "/overview".to_owned()),
        ("audit log", "/audit".to_owned()),
        ("adapters", "/adapters".to_owned()),
        ("bulk recovery", "/bulk".to_owned()),
        ("API: workflow", format!("/api/v1/workflows/{workflow}")),
        (
            "API: by request key",
            format!(
                "/api/v1/workflows?request_key={}",
                engine::domain::identity::percent_encode(&unknown_key)
            ),
        ),
    ])
}
