//! Overriding an adapter's outbound limits (docs/DESIGN.md §20) from every surface: the adapters
//! page's plain form (an approver's; an operator sees none and a forged post changes nothing),
//! `PUT /api/v1/adapters/{name}/limits`, `z29c limit`, the listing and `/metrics`.

use engine::domain::{ContractKind, Role};
use http::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::api::{call, token};
use crate::cli::z29c;
use crate::console::{fixture_review_step, form_action, input_value, signed_in};
use crate::kept_forms::post_plain;
use server::ops::Exit;

/// The override on `adapter`: requests a second, calls in flight, who set it.
async fn override_of(pool: &PgPool, adapter: &str) -> (Option<f64>, Option<i32>, Option<String>) {
    sqlx::query_as(
        "select limit_requests_per_second, limit_in_flight, limited_by from adapter where name = $1",
    )
    .bind(adapter)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_approver_limits_an_adapter_on_its_page_and_clears_the_override_without_javascript(
    pool: PgPool,
) {
    fixture_review_step(&pool, ContractKind::Opaque, "page-limit").await;
    let mut ana = signed_in(&pool, Role::Approver).await;
    let (_, page) = ana.get("/adapters").await;
    assert!(page.contains("data-testid=\"limit-form\""), "{page}");
    let (limit, csrf) = (
        form_action(&page, "limit_adapter"),
        input_value(&page, "csrf"),
    );
    let form = |more: &[(&'static str, &'static str)]| {
        let mut all = vec![
            ("csrf", csrf.clone()),
            ("adapter", "letters-opaque".to_owned()),
        ];
        all.extend(more.iter().map(|(k, v)| (*k, (*v).to_owned())));
        all
    };
    for (fields, what) in [
        (
            form(&[("reason", "their 429s"), ("per_second", "lots")]),
            "refused",
        ),
        (
            form(&[
                ("reason", "their 429s"),
                ("per_second", "2.5"),
                ("in_flight", "3"),
            ]),
            "set",
        ),
    ] {
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = post_plain(&mut ana, &limit, "/adapters", &fields).await;
        assert!(answer.status.is_redirection(), "{what}: {}", answer.body);
        let (_, page) = ana.get("/adapters").await;
        if what == "refused" {
            assert!(page.contains("not `lots`"), "the refusal is said: {page}");
            assert_eq!(
                override_of(&pool, "letters-opaque").await,
                (None, None, None)
            );
        } else {
            let limited = override_of(&pool, "letters-opaque").await;
            assert_eq!((limited.0, limited.1), (Some(2.5), Some(3)));
            assert!(
                page.contains("Limited to 2.5 requests a second and 3 call(s) in flight"),
                "{page}"
            );
            assert!(page.contains("their 429s"), "the reason is on the page");
        }
    }
    let clear = form(&[("reason", "they recovered"), ("clear", "yes")]);
    let fields: Vec<(&str, &str)> = clear.iter().map(|(k, v)| (*k, v.as_str())).collect();
    post_plain(&mut ana, &limit, "/adapters", &fields).await;
    assert_eq!(
        override_of(&pool, "letters-opaque").await,
        (None, None, None)
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_operator_sees_no_limit_form_and_a_forged_limit_changes_nothing(pool: PgPool) {
    fixture_review_step(&pool, ContractKind::Opaque, "page-limit-forged").await;
    let (_, approvers) = signed_in(&pool, Role::Approver)
        .await
        .get("/adapters")
        .await;
    let limit = form_action(&approvers, "limit_adapter");
    let mut olga = signed_in(&pool, Role::Operator).await;
    let (_, page) = olga.get("/adapters").await;
    assert!(!page.contains("data-testid=\"limit-form\""), "{page}");
    let csrf = input_value(&page, "csrf");
    let fields = [
        ("csrf", csrf.as_str()),
        ("adapter", "letters-opaque"),
        ("reason", "forged"),
        ("per_second", "0.1"),
    ];
    let (status, refused) = olga.post(&limit, &fields).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(
        override_of(&pool, "letters-opaque").await,
        (None, None, None)
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_api_limits_for_approver_tokens_and_the_listing_and_metrics_show_the_limits(
    pool: PgPool,
) {
    fixture_review_step(&pool, ContractKind::Opaque, "api-limit").await;
    let uri = "/api/v1/adapters/letters-opaque/limits";
    let operator = token(&pool, "day-shift", Role::Operator, None).await;
    let body = json!({"reason": "their 429s", "requests_per_second": 5}).to_string();
    let (status, _) = call(&pool, "PUT", uri, Some(&operator), Some(body.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let approver = token(&pool, "oncall", Role::Approver, None).await;
    let bad = json!({"reason": "x", "in_flight": 0}).to_string();
    let (status, _) = call(&pool, "PUT", uri, Some(&approver), Some(bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, set) = call(&pool, "PUT", uri, Some(&approver), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{set}");
    assert_eq!(set["override"]["set_by"], "token:oncall");
    assert_eq!(set["override"]["limits"]["requests_per_second"], 5.0);

    let (_, listed) = call(&pool, "GET", "/api/v1/adapters", Some(&approver), None).await;
    let letters = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "letters-opaque")
        .unwrap();
    assert_eq!(letters["limits"]["requests_per_second"], 5.0, "{letters}");
    let scraped = crate::support::scrape_metrics(&pool).await;
    assert!(
        scraped.contains(
            "z29c_adapter_limit{adapter=\"letters-opaque\",limit=\"requests_per_second\"} 5"
        ),
        "{scraped}"
    );

    let clear = json!({"reason": "fine again"}).to_string();
    let (status, cleared) = call(&pool, "PUT", uri, Some(&approver), Some(clear)).await;
    assert_eq!(
        (status, &cleared["override"]),
        (StatusCode::OK, &serde_json::Value::Null)
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_command_line_limits_an_adapter_as_the_approver_it_names(pool: PgPool) {
    fixture_review_step(&pool, ContractKind::Opaque, "cli-limit").await;
    engine::operators::add(&pool, "ana", Role::Approver)
        .await
        .unwrap();
    engine::operators::add(&pool, "olga", Role::Operator)
        .await
        .unwrap();
    let limit = |who: &'static str, extra: &'static [&'static str]| {
        let mut args = vec![
            "limit",
            "letters-opaque",
            "--as",
            who,
            "--reason",
            "their 429s",
        ];
        args.extend_from_slice(extra);
        args
    };
    let refused = z29c(&pool, &limit("olga", &["--in-flight", "2"])).await;
    assert_eq!(refused.exit, Exit::Refused, "{}", refused.out);
    let set = z29c(&pool, &limit("ana", &["--in-flight", "2", "--json"])).await;
    assert_eq!(set.exit, Exit::Done, "{}", set.err);
    let answer: serde_json::Value = serde_json::from_str(&set.out).unwrap();
    assert_eq!(answer["override"]["limits"]["in_flight"], 2);
    assert_eq!(override_of(&pool, "letters-opaque").await.1, Some(2));
    let cleared = z29c(&pool, &limit("ana", &["--clear"])).await;
    assert!(
        cleared
            .out
            .contains("the limits its file declares apply again"),
        "{}",
        cleared.out
    );
    assert_eq!(
        override_of(&pool, "letters-opaque").await,
        (None, None, None)
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_limit_posted_from_a_page_drawn_before_another_approvers_change_is_refused(pool: PgPool) {
    fixture_review_step(&pool, ContractKind::Opaque, "page-limit-stale").await;
    let mut ana = signed_in(&pool, Role::Approver).await;
    let mut bo = signed_in(&pool, Role::Approver).await;
    let (_, anas_page) = ana.get("/adapters").await;
    let (_, bos_page) = bo.get("/adapters").await;
    let limit = form_action(&bos_page, "limit_adapter");
    let post = |page: &str, per_second: &'static str, reason: &'static str| {
        vec![
            ("csrf", input_value(page, "csrf")),
            ("adapter", "letters-opaque".to_owned()),
            ("shown", input_value(page, "shown")),
            ("per_second", per_second.to_owned()),
            ("reason", reason.to_owned()),
        ]
    };
    let fields = post(&bos_page, "2", "their 429s");
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    post_plain(&mut bo, &limit, "/adapters", &fields).await;
    assert_eq!(override_of(&pool, "letters-opaque").await.0, Some(2.0));

    // Ana's page still shows no override: her post would undo Bo's without her knowing.
    let fields = post(&anas_page, "50", "back to normal");
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = post_plain(&mut ana, &limit, "/adapters", &fields).await;
    assert!(answer.status.is_redirection(), "{}", answer.body);
    let (_, page) = ana.get("/adapters").await;
    assert!(page.contains("changed since your page was drawn"), "{page}");
    assert_eq!(override_of(&pool, "letters-opaque").await.0, Some(2.0));

    // Drawn again, her page shows Bo's override, and her post counts.
    let fields = post(&page, "1", "slower still");
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    post_plain(&mut ana, &limit, "/adapters", &fields).await;
    assert_eq!(override_of(&pool, "letters-opaque").await.0, Some(1.0));
}
