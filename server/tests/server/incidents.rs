//! Open incidents a page at a time, wherever they are listed: the review queue shows the oldest
//! few and how many are open, `/incidents`, `GET /api/v1/incidents` and `z29c incident list`
//! page through all of them, oldest first.

use engine::domain::{ContractKind, Role};
use http::StatusCode;
use sqlx::PgPool;
use uuid::Uuid;

use crate::api::{call, token};
use crate::cli::z29c;
use crate::console::{fixture_review_step, signed_in};

/// `n` workflows keyed `{prefix}-{i}`, each with a duplicate-effect incident open on its
/// delivery step, opened in that order; their incident ids.
async fn incidents(pool: &PgPool, prefix: &str, n: usize) -> Vec<Uuid> {
    fixture_review_step(pool, ContractKind::Idempotent, &format!("{prefix}-review")).await;
    let mut opened = Vec::new();
    for i in 0..n {
        let started = engine::intake::start_workflow(
            pool,
            engine::intake::NewWorkflow {
                creation_key: format!("{prefix}-{i}"),
                definition: "document_delivery".into(),
                version: None,
                input: serde_json::json!({"adapter": "letters-idempotent", "recipient": "r",
                    "document": {"title": "t", "body": "b"}}),
            },
            engine::store::journal::Actor::Api("test"),
        )
        .await
        .unwrap();
        let step: Uuid = sqlx::query_scalar(
            "select id from step where workflow_id = $1 and logical = 'deliver'",
        )
        .bind(started.id())
        .fetch_one(pool)
        .await
        .unwrap();
        let mut tx = pool.begin().await.unwrap();
        let reference = format!("x-{prefix}-{i}");
        opened.push(
            engine::store::incident::open_duplicate_incident(&mut tx, step, &[(&reference, None)])
                .await
                .unwrap(),
        );
        tx.commit().await.unwrap();
    }
    opened
}

/// The incident ids of a page, in the order the page lists them.
fn listed(page: &serde_json::Value) -> Vec<Uuid> {
    page["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["incident_id"].as_str().unwrap().parse().unwrap())
        .collect()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_pages_through_every_open_incident_oldest_first_and_counts_them(pool: PgPool) {
    let opened = incidents(&pool, "desk", 12).await;
    let shop = incidents(&pool, "shop", 2).await;
    let viewer = token(&pool, "viewer", Role::Viewer, None).await;
    let mut seen = Vec::new();
    let mut uri = "/api/v1/incidents?limit=5".to_owned();
    let mut pages = 0;
    loop {
        let (status, page) = call(&pool, "GET", &uri, Some(&viewer), None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["open"], 14, "{page}");
        seen.extend(listed(&page));
        pages += 1;
        match page["next"].as_str() {
            Some(next) => {
                uri = format!(
                    "/api/v1/incidents?limit=5&after={}",
                    engine::domain::identity::percent_encode(next)
                )
            }
            None => break,
        }
    }
    assert_eq!(pages, 3, "5, 5 and 4");
    assert_eq!(
        seen,
        [opened, shop.clone()].concat(),
        "each once, oldest first"
    );

    let mine = token(&pool, "shop", Role::Viewer, Some("shop-")).await;
    let (_, page) = call(&pool, "GET", "/api/v1/incidents", Some(&mine), None).await;
    assert_eq!(listed(&page), shop, "a prefix pages its own");
    assert_eq!(page["open"], 2, "and counts its own");

    let (status, refused) = call(
        &pool,
        "GET",
        "/api/v1/incidents?after=yesterday",
        Some(&viewer),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("not a page cursor"),
        "{refused}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_queue_shows_the_ten_oldest_incidents_and_the_incidents_page_lists_them_all(
    pool: PgPool,
) {
    let opened = incidents(&pool, "desk", 52).await;
    let mut viewer = signed_in(&pool, Role::Viewer).await;
    let (status, queue) = viewer.get("/").await;
    assert_eq!(status, StatusCode::OK);
    let rows = |html: &str| -> Vec<Uuid> {
        html.split("data-incident=\"")
            .skip(1)
            .map(|rest| rest[..36].parse().unwrap())
            .collect()
    };
    assert_eq!(rows(&queue), opened[..10], "the ten oldest");
    assert!(queue.contains("the 10 oldest of 52 open"), "{queue}");
    assert!(queue.contains("href=\"/incidents\""), "{queue}");

    let (status, first) = viewer.get("/incidents").await;
    assert_eq!(status, StatusCode::OK);
    assert!(first.contains("52 open."), "{first}");
    assert_eq!(rows(&first), opened[..50]);
    let next = first
        .split("href=\"/incidents?after=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a next page link");
    let (_, second) = viewer.get(&format!("/incidents?after={next}")).await;
    assert_eq!(rows(&second), opened[50..]);
    assert!(!second.contains("/incidents?after="), "the last page");

    let mut anonymous = crate::console::Browser::anonymous(&pool);
    let (_, page) = anonymous.get("/incidents").await;
    assert!(
        !page.contains("data-incident"),
        "signed out, nothing is listed"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_lists_the_open_incidents_a_page_at_a_time(pool: PgPool) {
    let opened = incidents(&pool, "desk", 3).await;
    let first = z29c(&pool, &["incident", "list", "--limit", "2", "--json"]).await;
    let page: serde_json::Value = serde_json::from_str(&first.out).unwrap();
    assert_eq!(listed(&page), opened[..2]);
    assert_eq!(page["open"], 3);
    let next = page["next"].as_str().unwrap();
    let second = z29c(&pool, &["incident", "list", "--after", next]).await;
    assert!(
        second.out.contains(&opened[2].to_string()),
        "{}",
        second.out
    );
    assert!(
        !second.out.contains(&opened[0].to_string()),
        "{}",
        second.out
    );
    let queue = z29c(&pool, &["queue"]).await;
    assert!(queue.out.contains("the 3 oldest of 3"), "{}", queue.out);
}
