//! The console's front end as a browser gets it. Each page is loaded cold (a new browser
//! context, nothing cached) in headless Chromium — Debian's, driven by `playwright-core` from
//! `end2end/` through `end2end/bench/page-load.mjs` — and the browser's own timeline says what
//! arrived and when: the bytes of the HTML, JS, wasm and CSS as sent (compressed), from its
//! resource timing, and the time until the page is interactive, the performance mark the
//! console sets once every island of the page is live (`app::live`). Nothing is downloaded:
//! the browser and the npm packages are those `scripts/ensure-tools.sh test` installs.

use std::path::PathBuf;

use anyhow::Context;
use sqlx::PgPool;
use tokio::io::AsyncWriteExt;

/// Where the browser and its driver are.
#[derive(Debug, Clone, clap::Args)]
pub struct BrowserArgs {
    /// Cold loads of each page in headless Chromium (0 skips the browser).
    #[arg(long, default_value_t = 5)]
    pub loads: usize,
    /// The browser tests' directory, whose npm packages drive Chromium.
    #[arg(long, default_value = "end2end")]
    pub end2end_dir: PathBuf,
    /// The Chromium to drive.
    #[arg(long, env = "CHROMIUM", default_value = "/usr/bin/chromium")]
    pub chromium: PathBuf,
}

/// A page to load: its name in the table, its path, and whether it needs the session.
pub(super) struct BrowserPage {
    pub name: &'static str,
    pub path: String,
    pub signed_in: bool,
}

/// The pages loaded in the browser, with ids picked from the loaded data.
pub(super) async fn browser_pages(pool: &PgPool) -> anyhow::Result<Vec<BrowserPage>> {
    let (step, workflow): (uuid::Uuid, uuid::Uuid) = sqlx::query_as(
        "select id, workflow_id from step where state = 'review_required' order by unknown_since desc limit 1",
    )
    .fetch_one(pool)
    .await?;
    let settled: uuid::Uuid =
        sqlx::query_scalar("select id from step where state = 'succeeded' limit 1")
            .fetch_one(pool)
            .await?;
    let incident: uuid::Uuid =
        sqlx::query_scalar("select id from integrity_incident order by id limit 1")
            .fetch_one(pool)
            .await?;
    let page = |name, path: String| BrowserPage {
        name,
        path,
        signed_in: true,
    };
    Ok(vec![
        page("review queue", "/".into()),
        page("step evidence", format!("/steps/{step}")),
        page("settled step", format!("/steps/{settled}")),
        page("incident", format!("/incidents/{incident}")),
        page("workflow", format!("/workflows/{workflow}")),
        page("overview", "/overview".into()),
        page("audit log", "/audit".into()),
        page("bulk recovery", "/bulk".into()),
        page("adapters", "/adapters".into()),
        BrowserPage {
            name: "sign-in (anonymous)",
            path: "/sign-in".into(),
            signed_in: false,
        },
    ])
}

/// One page's figures over its loads.
pub(super) struct PageLoad {
    name: String,
    /// HTML, JS, wasm, CSS and anything else, in bytes as sent (the first load's).
    bytes: [u64; 5],
    /// Everything with headers, in bytes.
    transfer: u64,
    /// Milliseconds after navigation start, sorted.
    interactive: Vec<f64>,
    dom_content_loaded: Vec<f64>,
}

/// Loads each page `args.loads` times, cold, signed in with `cookie` where the page needs it.
/// `Ok(None)` says why the browser could not run here.
pub(super) async fn page_loads(
    args: &BrowserArgs,
    base: &str,
    cookie: &str,
    pages: &[BrowserPage],
) -> anyhow::Result<Result<Vec<PageLoad>, String>> {
    let script = args.end2end_dir.join("bench/page-load.mjs");
    let driver = args.end2end_dir.join("node_modules/playwright-core");
    if args.loads == 0 {
        return Ok(Err("skipped (--loads 0)".into()));
    }
    if !args.chromium.exists() || !driver.exists() || !script.exists() {
        return Ok(Err(format!(
            "skipped: needs {}, {} and {} (scripts/ensure-tools.sh test installs them)",
            args.chromium.display(),
            driver.display(),
            script.display()
        )));
    }
    let input = serde_json::json!({
        "base": base,
        "cookie": cookie,
        "chromium": args.chromium,
        "loads": args.loads,
        "pages": pages.iter().map(|p| serde_json::json!({
            "name": p.name, "path": p.path, "signedIn": p.signed_in,
        })).collect::<Vec<_>>(),
    });
    let mut node = tokio::process::Command::new("node")
        .arg("bench/page-load.mjs")
        .current_dir(&args.end2end_dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting node for the browser loads")?;
    let mut stdin = node.stdin.take().context("node's standard input")?;
    stdin.write_all(input.to_string().as_bytes()).await?;
    drop(stdin);
    let output = node.wait_with_output().await?;
    anyhow::ensure!(
        output.status.success(),
        "the browser loads failed ({})",
        output.status
    );
    Ok(Ok(collect(
        pages,
        &String::from_utf8_lossy(&output.stdout),
    )?))
}

/// The loads' JSON lines, gathered per page in `pages`' order.
fn collect(pages: &[BrowserPage], lines: &str) -> anyhow::Result<Vec<PageLoad>> {
    let mut loads: Vec<PageLoad> = pages
        .iter()
        .map(|p| PageLoad {
            name: p.name.to_owned(),
            bytes: [0; 5],
            transfer: 0,
            interactive: Vec::new(),
            dom_content_loaded: Vec::new(),
        })
        .collect();
    for line in lines.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let name = v["name"].as_str().unwrap_or_default();
        let status = v["status"].as_u64().unwrap_or_default();
        anyhow::ensure!(status == 200, "{name} answered {status} in the browser");
        let Some(load) = loads.iter_mut().find(|l| l.name == name) else {
            continue;
        };
        if load.interactive.is_empty() {
            for (i, kind) in ["html", "js", "wasm", "css", "other"].iter().enumerate() {
                load.bytes[i] = v["bytes"][kind].as_u64().unwrap_or_default();
            }
            load.transfer = v["transfer"].as_u64().unwrap_or_default();
        }
        load.interactive
            .push(v["interactive"].as_f64().unwrap_or_default());
        load.dom_content_loaded
            .push(v["domContentLoaded"].as_f64().unwrap_or_default());
    }
    for load in &mut loads {
        anyhow::ensure!(
            !load.interactive.is_empty(),
            "{} was never loaded",
            load.name
        );
        load.interactive.sort_by(f64::total_cmp);
        load.dom_content_loaded.sort_by(f64::total_cmp);
    }
    Ok(loads)
}

/// The table of bytes and times per page.
pub(super) fn print_loads(size: usize, loads: usize, table: &Result<Vec<PageLoad>, String>) {
    println!();
    let table = match table {
        Ok(table) => table,
        Err(why) => {
            println!("front end in the browser: {why}");
            return;
        }
    };
    println!(
        "front end, cold loads in headless Chromium at {size} workflows ({loads} per page): \
         KB as sent (compressed), ms after navigation start"
    );
    println!(
        "{:<22} {:>6} {:>6} {:>7} {:>6} {:>9} {:>9} {:>18} {:>12}",
        "page", "HTML", "JS", "wasm", "CSS", "JS+wasm", "all", "interactive p50/max", "DCL p50"
    );
    let kb = |bytes: u64| format!("{:.1}", bytes as f64 / 1024.0);
    for l in table {
        let [html, js, wasm, css, other] = l.bytes;
        println!(
            "{:<22} {:>6} {:>6} {:>7} {:>6} {:>9} {:>9} {:>18} {:>12}",
            l.name,
            kb(html),
            kb(js),
            kb(wasm),
            kb(css),
            kb(js + wasm),
            kb(html + js + wasm + css + other),
            format!(
                "{:.0} / {:.0}",
                super::quantile::percentile(&l.interactive, 0.5),
                l.interactive.last().copied().unwrap_or_default()
            ),
            format!(
                "{:.0}",
                super::quantile::percentile(&l.dom_content_loaded, 0.5)
            ),
        );
    }
    if let Some(heaviest) = table.iter().max_by_key(|l| l.bytes[1] + l.bytes[2]) {
        println!(
            "heaviest page for JS + wasm: {} at {} KB as sent ({} KB with headers, everything)",
            heaviest.name,
            kb(heaviest.bytes[1] + heaviest.bytes[2]),
            kb(heaviest.transfer)
        );
    }
}
