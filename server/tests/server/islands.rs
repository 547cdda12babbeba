//! Which pages load the wasm: those that hold an island, and no other (docs/DESIGN.md §18). A
//! step's page holds one only where it draws an action's form. No page serializes its data for
//! hydration: only the islands hydrate, from their own props.

use engine::domain::Role;
use http::StatusCode;
use sqlx::PgPool;

use crate::console::{Browser, signed_in, step_under_review, workflow_of};

/// What a page's HTML says of its islands and its scripts.
#[derive(Debug, PartialEq)]
struct Page {
    islands: bool,
    wasm: bool,
    marked_live_without_wasm: bool,
    /// Whether the page serialized its data for hydration outside any island.
    resources_serialized: bool,
}

/// A page that holds an island: the wasm and nothing serialized outside the island.
const WITH_ISLAND: Page = Page {
    islands: true,
    wasm: true,
    marked_live_without_wasm: false,
    resources_serialized: false,
};

/// A page that holds none: no wasm, the line that marks it live, and nothing serialized.
const WITHOUT: Page = Page {
    islands: false,
    wasm: false,
    marked_live_without_wasm: true,
    resources_serialized: false,
};

async fn page(browser: &mut Browser, path: &str) -> Page {
    let (status, html) = browser.get(path).await;
    assert_eq!(status, StatusCode::OK, "{path}: {html}");
    scripts_of(&html)
}

fn scripts_of(html: &str) -> Page {
    Page {
        islands: html.contains("<leptos-island"),
        wasm: html.contains(".wasm"),
        marked_live_without_wasm: html.contains("setAttribute('data-hydrated', 'true')"),
        resources_serialized: html.contains("__RESOLVED_RESOURCES["),
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn only_the_pages_that_hold_islands_load_the_wasm(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let workflow = workflow_of(&pool, step).await;
    let mut approver = signed_in(&pool, Role::Approver).await;
    for path in ["/overview".to_owned(), format!("/steps/{step}")] {
        assert_eq!(page(&mut approver, &path).await, WITH_ISLAND, "{path}");
    }
    for path in [
        "/".to_owned(),
        format!("/?q={workflow}"),
        "/workflows".to_owned(),
        format!("/workflows/{workflow}"),
        "/audit".to_owned(),
        "/incidents".to_owned(),
        "/adapters".to_owned(),
        "/bulk".to_owned(),
    ] {
        assert_eq!(page(&mut approver, &path).await, WITHOUT, "{path}");
    }
    let mut visitor = Browser::anonymous(&pool);
    assert_eq!(page(&mut visitor, "/sign-in").await, WITHOUT, "/sign-in");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_page_that_offers_no_action_loads_no_wasm(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let path = format!("/steps/{step}");
    let mut viewer = signed_in(&pool, Role::Viewer).await;
    let (_, html) = viewer.get(&path).await;
    assert!(html.contains("data-testid=\"beyond-role\""), "{html}");
    assert_eq!(page(&mut viewer, &path).await, WITHOUT, "a viewer's {path}");
    let (status, html) = viewer
        .get(&format!("/steps/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{html}");
    assert_eq!(scripts_of(&html), WITHOUT, "no such step");
    let mut approver = signed_in(&pool, Role::Approver).await;
    assert_eq!(
        page(&mut approver, &path).await,
        WITH_ISLAND,
        "an approver's {path}"
    );
}
