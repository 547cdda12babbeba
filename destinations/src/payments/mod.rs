//! The payments destination, in the style of Stripe's API (`PAYMENTS.md`): form-encoded
//! charges and refunds, an `Idempotency-Key` whose first answer is saved and replayed byte for
//! byte, `402` declines, and a search by metadata whose index lags by the visibility window.
//!
//! Like every destination it commits before it answers: a fault that drops the answer leaves
//! a real charge.

mod answer;
mod error;
mod params;
mod store;
mod wire;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, StatusCode};
use sqlx::PgConnection;

use self::answer::Answer;
use self::error::PaymentError;
use self::params::{ChargeParams, Params, RefundParams};
use self::store::{NewCharge, SavedAnswer};
pub use self::wire::{
    Charge, ChargeList, DECLINED_CUSTOMER, ErrorBody, ErrorDetail, IDEMPOTENCY_KEY_HEADER,
    IDEMPOTENT_REPLAYED_HEADER, INSUFFICIENT_FUNDS_CUSTOMER, KEY_IN_USE_MESSAGE,
    MAX_IDEMPOTENCY_KEY_LEN, Refund, SearchResult,
};
use crate::config::Config;
use crate::disrupt::{FaultWords, disrupted};
use crate::faults::{Operation, Request};
use crate::ledger::Effect;
use crate::state::AppState;

/// The most charges a search answers.
const SEARCH_LIMIT: usize = 100;

/// The payments API's endpoints, behind its API key.
pub(crate) fn routes(state: &AppState) -> Router<AppState> {
    let charges = Router::new().route("/v1/charges", post(create_charge).get(list));
    let charges = if state.config.payments_search {
        charges.route("/v1/charges/search", get(search))
    } else {
        charges
    };
    charges
        .route("/v1/charges/{id}", get(retrieve))
        .route("/v1/refunds", post(create_refund))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_api_key,
        ))
        .fallback(|| async { PaymentError::NoSuchEndpoint })
}

/// Lets a request in only with `Authorization: Bearer <api key>`, when the destination has one.
async fn require_api_key(
    State(app): State<AppState>,
    request: axum::extract::Request,
    next: Next,
) -> Response {
    let Some(expected) = &app.config.api_key else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        Some(key) if expected.admits(key.trim()) => next.run(request).await,
        _ => PaymentError::ApiKey.into_response(),
    }
}

/// What a write asks for, once its parameters are read. Invalid parameters are work too: their
/// answer is saved under the request's key like any other.
enum Work {
    Charge(ChargeParams),
    Refund(RefundParams),
    Invalid(PaymentError),
}

async fn create_charge(State(app): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let (key, params) = match read_write(&headers, &body) {
        Ok(read) => read,
        Err(error) => return error.into_response(),
    };
    let subject = ChargeParams::subject(&params);
    let request = Request::by_subject(Operation::Deliver, subject, key, None);
    let work = ChargeParams::read(&params).map_or_else(Work::Invalid, Work::Charge);
    let fingerprint = params.fingerprint("POST /v1/charges");
    disrupted(
        &app.faults,
        request,
        &PaymentWords,
        perform(&app, key, fingerprint, work),
    )
    .await
}

async fn create_refund(State(app): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let (key, params) = match read_write(&headers, &body) {
        Ok(read) => read,
        Err(error) => return error.into_response(),
    };
    let charge = params.get("charge");
    let request = Request::by_subject(Operation::Withdraw, None, key, charge);
    let work = RefundParams::read(&params).map_or_else(Work::Invalid, Work::Refund);
    let fingerprint = params.fingerprint("POST /v1/refunds");
    disrupted(
        &app.faults,
        request,
        &PaymentWords,
        perform(&app, key, fingerprint, work),
    )
    .await
}

async fn retrieve(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let work = async {
        let mut conn = app.pool.acquire().await?;
        match store::charge(&mut conn, &app.config.name, &id).await? {
            Some(charge) => Ok(Answer::json(StatusCode::OK, &Charge::from(charge))),
            None => Err(PaymentError::NoSuchCharge {
                id: id.clone(),
                param: "id",
            }),
        }
    };
    let request = Request::by_subject(Operation::Lookup, None, None, Some(&id));
    disrupted(&app.faults, request, &PaymentWords, work).await
}

/// `GET /v1/charges`: a page of the charges (of one `customer`), newest first as Stripe lists
/// them, or oldest first where the destination is configured so; `starting_after` a charge id
/// names where the page begins. No lag: the list reads the table.
async fn list(State(app): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let params = Params::decode(query.unwrap_or_default().as_bytes());
    let page = match params::list_query(&params) {
        Ok(page) => page,
        Err(error) => return error.into_response(),
    };
    let work = async {
        let config = &app.config;
        let mut conn = app.pool.acquire().await?;
        let found = store::list(
            &mut conn,
            &config.name,
            page.customer.as_deref(),
            page.starting_after.as_deref(),
            config.list_oldest_first,
            page.limit + 1,
        )
        .await?;
        let has_more = found.len() > usize::try_from(page.limit).unwrap_or(usize::MAX);
        let data = found
            .into_iter()
            .take(usize::try_from(page.limit).unwrap_or(usize::MAX))
            .map(Charge::from)
            .collect();
        Ok::<_, PaymentError>(Answer::json(
            StatusCode::OK,
            &ChargeList {
                object: "list".to_owned(),
                data,
                has_more,
                url: "/v1/charges".to_owned(),
            },
        ))
    };
    let request = Request::by_subject(Operation::Lookup, None, None, None);
    disrupted(&app.faults, request, &PaymentWords, work).await
}

async fn search(State(app): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let params = Params::decode(query.unwrap_or_default().as_bytes());
    let (key, value) = match params::search_query(&params) {
        Ok(query) => query,
        Err(error) => return error.into_response(),
    };
    let work = async {
        let config = &app.config;
        let window_ms = i64::try_from(config.visibility_window.as_millis()).unwrap_or(i64::MAX);
        let mut conn = app.pool.acquire().await?;
        let limit = i64::try_from(SEARCH_LIMIT + 1).unwrap_or(i64::MAX);
        let now = config.clock.fixed_now();
        let found = store::search(
            &mut conn,
            &config.name,
            (&key, &value),
            window_ms,
            now,
            limit,
        )
        .await?;
        let has_more = found.len() > SEARCH_LIMIT;
        let data = found.into_iter().take(SEARCH_LIMIT).map(Charge::from);
        Ok::<_, PaymentError>(Answer::json(
            StatusCode::OK,
            &SearchResult {
                object: "search_result".to_owned(),
                data: data.collect(),
                has_more,
                url: "/v1/charges/search".to_owned(),
            },
        ))
    };
    let subject = (key == "subject").then_some(value.as_str());
    let request = Request::by_subject(Operation::Lookup, subject, None, None);
    disrupted(&app.faults, request, &PaymentWords, work).await
}

/// A write's idempotency key and parameters, or why it is refused before anything (never
/// saved under the key): a body that is not form-encoded, an unreadable key.
fn read_write<'h>(
    headers: &'h HeaderMap,
    body: &[u8],
) -> Result<(Option<&'h str>, Params), PaymentError> {
    let declared_form = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| {
            essence
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !declared_form {
        return Err(PaymentError::NotForm);
    }
    let key = match headers.get(IDEMPOTENCY_KEY_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .filter(|key| (1..=MAX_IDEMPOTENCY_KEY_LEN).contains(&key.len()))
                .ok_or(PaymentError::Invalid {
                    param: "Idempotency-Key".to_owned(),
                    message: "must be 1 to 255 visible ASCII characters",
                })?,
        ),
    };
    Ok((key, Params::decode(body)))
}

/// Does a write once per idempotency key (when the destination honours keys): the first
/// request under a key does the work and saves its answer in the same transaction; a later one
/// with the same parameters gets that answer again, byte for byte; one with other parameters
/// gets `idempotency_key_in_use`. A transaction-scoped lock on the key makes concurrent
/// requests wait for the first.
async fn perform(app: &AppState, key: Option<&str>, fingerprint: String, work: Work) -> Response {
    match try_perform(app, key, fingerprint, work).await {
        Ok(response) => response,
        Err(error) => PaymentError::Database(error).into_response(),
    }
}

async fn try_perform(
    app: &AppState,
    key: Option<&str>,
    fingerprint: String,
    work: Work,
) -> sqlx::Result<Response> {
    let config = &app.config;
    let now = config.clock.fixed_now();
    let Some(honoured) = key.filter(|_| config.honours_idempotency) else {
        let mut conn = app.pool.acquire().await?;
        let (answer, effect) = execute(&mut conn, config, key, work).await?;
        if let Some(effect) = effect {
            app.publish(effect);
        }
        return Ok(answer.into_response());
    };
    let mut tx = app.pool.begin().await?;
    store::lock_key(&mut tx, &config.name, honoured).await?;
    let retention = config.idempotency_retention_ms();
    if let Some(saved) =
        store::saved_answer(&mut tx, &config.name, honoured, retention, now).await?
    {
        tx.commit().await?;
        if saved.fingerprint != fingerprint {
            return Ok(PaymentError::KeyInUse.into_response());
        }
        let status = u16::try_from(saved.status)
            .ok()
            .and_then(|status| StatusCode::from_u16(status).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Ok(Answer {
            status,
            body: saved.body,
        }
        .replayed());
    }
    let (answer, effect) = execute(&mut tx, config, key, work).await?;
    let saved = SavedAnswer {
        fingerprint,
        status: i16::try_from(answer.status.as_u16()).unwrap_or(500),
        body: answer.body.clone(),
    };
    store::save_answer(&mut tx, &config.name, honoured, &saved, now).await?;
    tx.commit().await?;
    if let Some(effect) = effect {
        app.publish(effect);
    }
    Ok(answer.into_response())
}

/// Does the work of a write on `conn`: what to answer, and the effect it committed, if any.
async fn execute(
    conn: &mut PgConnection,
    config: &Config,
    key: Option<&str>,
    work: Work,
) -> sqlx::Result<(Answer, Option<Effect>)> {
    match work {
        Work::Invalid(error) => Ok((error.answer(), None)),
        Work::Charge(params) => charge(conn, config, key, params).await,
        Work::Refund(params) => refund(conn, config, key, params).await,
    }
}

async fn charge(
    conn: &mut PgConnection,
    config: &Config,
    key: Option<&str>,
    params: ChargeParams,
) -> sqlx::Result<(Answer, Option<Effect>)> {
    let new = NewCharge {
        destination: &config.name,
        amount: params.amount,
        currency: &params.currency,
        description: params.description.as_deref(),
        customer: params.customer.as_deref(),
        metadata: &params.metadata,
        idempotency_key: key,
        now: config.clock.fixed_now(),
    };
    let decline_code = match params.customer.as_deref() {
        Some(DECLINED_CUSTOMER) => Some("generic_decline"),
        Some(INSUFFICIENT_FUNDS_CUSTOMER) => Some("insufficient_funds"),
        _ => None,
    };
    if let Some(decline_code) = decline_code {
        // Kept as a failed charge under the request's metadata, as Stripe keeps a decline.
        let charge = crate::random::id("ch_");
        store::insert_failed_charge(conn, &charge, &new, decline_code).await?;
        return Ok((
            PaymentError::Declined {
                decline_code,
                charge,
            }
            .answer(),
            None,
        ));
    }
    let charge = Charge::from(store::insert_charge(conn, &crate::random::id("ch_"), &new).await?);
    let effect = Effect::Charged {
        id: charge.id.clone(),
        subject: charge.metadata.get("subject").cloned(),
        idempotency_key: key.map(str::to_owned),
    };
    Ok((Answer::json(StatusCode::OK, &charge), Some(effect)))
}

async fn refund(
    conn: &mut PgConnection,
    config: &Config,
    key: Option<&str>,
    params: RefundParams,
) -> sqlx::Result<(Answer, Option<Effect>)> {
    let destination = config.name.as_str();
    let id = crate::random::id("re_");
    let reason = params.reason.as_deref();
    let now = config.clock.fixed_now();
    let ids = (id.as_str(), params.charge.as_str());
    let Some(row) = store::insert_refund(conn, destination, ids, reason, key, now).await? else {
        let error = match store::charge(conn, destination, &params.charge).await? {
            Some(charge) if charge.status == "failed" => PaymentError::NotRefundable(params.charge),
            Some(_) => PaymentError::AlreadyRefunded(params.charge),
            None => PaymentError::NoSuchCharge {
                id: params.charge,
                param: "charge",
            },
        };
        return Ok((error.answer(), None));
    };
    let effect = Effect::Refunded {
        id: row.id.clone(),
        charge: row.charge.clone(),
    };
    let refund = Refund {
        id: row.id,
        object: "refund".to_owned(),
        charge: row.charge,
        amount: row.amount,
        status: "succeeded".to_owned(),
        reason: row.reason,
        created: row.created_at.timestamp(),
    };
    Ok((Answer::json(StatusCode::OK, &refund), Some(effect)))
}

/// How the payments API answers faults: a refusal is Stripe's rate limit, a rejection a
/// decline (of a charge) or an invalid request (of anything else), a lost lookup a 503.
struct PaymentWords;

impl FaultWords for PaymentWords {
    fn refused(&self, _operation: Operation) -> Response {
        PaymentError::RateLimited.into_response()
    }

    fn rejected(&self, operation: Operation, code: String, _retryable: bool) -> Response {
        let card = operation == Operation::Deliver;
        PaymentError::Rejected { code, card }.into_response()
    }

    fn lookup_unavailable(&self) -> Response {
        PaymentError::LookupUnavailable.into_response()
    }

    fn lookup_processing(&self) -> Response {
        // Refused when the plan is installed (`FaultPlan::validate_for`).
        PaymentError::LookupUnavailable.into_response()
    }

    fn server_error(&self, status: StatusCode) -> Response {
        PaymentError::AfterCommit(status).into_response()
    }
}
