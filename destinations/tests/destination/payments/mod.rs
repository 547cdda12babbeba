//! The payments destination, in the style of Stripe's API: each test asserts the destination's
//! own ledger, not only what the client was told.

mod charges;
mod idempotency;
mod lookup;

use chrono::{TimeZone, Utc};
use destinations::payments::{ErrorBody, ErrorDetail};
use destinations::{Config, ManualClock, RunningDestination, Secret};
use sqlx::PgPool;

use crate::client::{Client, Reply, Response};

pub const API_KEY: &str = "sk_test_4eC39HqLyjWDarjtT1zdp7dc";
pub const FORM: &str = "application/x-www-form-urlencoded";

/// Talks to a payments destination with its API key.
#[derive(Clone, Copy)]
pub struct Payments {
    pub client: Client,
    pub authorization: &'static str,
}

impl Payments {
    pub async fn post(&self, path: &str, key: Option<&str>, form: &str) -> Reply {
        let mut headers = vec![("Authorization", self.authorization)];
        headers.extend(key.map(|key| ("Idempotency-Key", key)));
        let target = ("POST", path);
        self.client
            .send_with(target, FORM, &headers, form.as_bytes())
            .await
    }

    pub async fn charge(&self, key: Option<&str>, form: &str) -> Response {
        self.post("/v1/charges", key, form).await.response()
    }

    pub async fn refund(&self, key: Option<&str>, form: &str) -> Response {
        self.post("/v1/refunds", key, form).await.response()
    }

    pub async fn get(&self, path: &str) -> Response {
        let headers = [("Authorization", self.authorization)];
        self.client
            .send_with(("GET", path), FORM, &headers, b"")
            .await
            .response()
    }
}

pub async fn start(pool: PgPool, config: Config) -> (RunningDestination, Payments) {
    let config = Config {
        api_key: Some(Secret::new(API_KEY)),
        ..config
    };
    let destination = destinations::spawn(pool, config).await.unwrap();
    let payments = Payments {
        client: Client::new(&destination),
        authorization: String::leak(format!("Bearer {API_KEY}")),
    };
    (destination, payments)
}

pub fn error(response: &Response) -> ErrorDetail {
    response.json::<ErrorBody>().error
}

pub fn manual_clock() -> ManualClock {
    ManualClock::starting_at(Utc.with_ymd_and_hms(2026, 12, 2, 9, 0, 0).unwrap())
}
