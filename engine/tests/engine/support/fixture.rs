//! Rows a test starts from that no engine call can produce on demand: what a worker that died
//! mid-call, another worker, an operator or an older system left in the database. Each fixture
//! names the situation it stands for and fills the rest with one consistent set of defaults;
//! the SQL for each is written here once, so a test reads as the situation, not as columns.

use chrono::Duration;
use sqlx::PgPool;
use uuid::Uuid;

/// The adapter every `Harness` registers.
const ADAPTER: &str = "docs";

/// A well-formed digest standing for the bytes a request was bound to.
fn digest_of(hex: char) -> String {
    format!("sha256:{}", hex.to_string().repeat(64))
}

/// A step the engine created, to be put in a situation the engine alone would not leave it in.
pub struct Step<'p> {
    pool: &'p PgPool,
    id: Uuid,
}

impl<'p> Step<'p> {
    /// The step with `id`.
    pub fn of(pool: &'p PgPool, id: Uuid) -> Self {
        Self { pool, id }
    }

    /// The step `logical` of `workflow`.
    pub async fn named(pool: &'p PgPool, workflow: Uuid, logical: &str) -> Self {
        let id = sqlx::query_scalar("select id from step where workflow_id = $1 and logical = $2")
            .bind(workflow)
            .bind(logical)
            .fetch_one(pool)
            .await
            .unwrap();
        Self { pool, id }
    }

    /// As a restore leaves a step whose worker was in the middle of the call: the request bound
    /// and sent under `key`, attempt 1 open and invoked, and the step invoking under `holder`'s
    /// lease, which has an hour to run.
    pub async fn caught_invoking(&self, key: &str, holder: &str) {
        request(self.pool, self.id, key).sent().insert().await;
        attempt(self.pool, self.id)
            .by(holder)
            .invoked()
            .insert()
            .await;
        self.taken_up("invoking", Some(key), holder).await;
    }

    /// As a backup saw a step whose worker had leased it and opened attempt 1 but had persisted
    /// no request identity yet: running under `holder`'s lease, which has an hour to run.
    pub async fn caught_running(&self, holder: &str) {
        attempt(self.pool, self.id).by(holder).insert().await;
        self.taken_up("running", None, holder).await;
    }

    /// The step row of a worker that took the step up for its first attempt: `state`, leased to
    /// `holder` for an hour, and under `key` once a request identity is persisted.
    async fn taken_up(&self, state: &str, key: Option<&str>, holder: &str) {
        self.leased_to(holder, Duration::hours(1)).await;
        sqlx::query(
            "update step set state = $2::step_state, request_key = coalesce($3, request_key),
                             attempt_count = 1
             where id = $1",
        )
        .bind(self.id)
        .bind(state)
        .bind(key)
        .execute(self.pool)
        .await
        .unwrap();
    }

    /// Another worker took the step over: `holder` now holds its lease, for `period` from now.
    pub async fn leased_to(&self, holder: &str, period: Duration) {
        sqlx::query(
            "with leased as (
                 insert into lease (id, holder, expires_at, steps)
                 values (gen_random_uuid(), $2, now() + $3, array[$1::uuid]) returning id
             )
             update step set lease_holder = $2, lease_id = (select id from leased) where id = $1",
        )
        .bind(self.id)
        .bind(holder)
        .bind(period)
        .execute(self.pool)
        .await
        .unwrap();
    }

    /// The worker holding the lease is gone and its lease ran out a second ago: any worker may
    /// now take the step up.
    pub async fn lease_expired(&self) {
        sqlx::query(
            "update lease set expires_at = now() - interval '1 second'
             where id = (select lease_id from step where id = $1)",
        )
        .bind(self.id)
        .execute(self.pool)
        .await
        .unwrap();
    }

    /// An attempt the engine never made: a worker outside it (`rogue`) took attempt `number`,
    /// called and ended it with `outcome`, all at once and without any authorization.
    pub async fn rogue_attempt(&self, number: i32, outcome: &str) {
        attempt(self.pool, self.id)
            .number(number)
            .by("rogue")
            .invoked()
            .ended(outcome)
            .insert()
            .await;
    }

    /// As older code left it before a crash: `key` bound to this step with bytes other than the
    /// ones the engine regenerates, and never sent.
    pub async fn bound_by_a_previous_system(&self, key: &str) {
        request(self.pool, self.id, key)
            .input_digest(digest_of('b'))
            .insert()
            .await;
    }

    /// As a restore to a backup taken while the step was ready leaves it, though the destination
    /// kept what was done since: no receipt, observation, attempt or request identity, ready
    /// with no attempts counted, and the steps depending on it blocked again. Written past the
    /// append-only triggers, as a restore is.
    pub async fn rewound_to_ready(&self) {
        let mut rewind = self.pool.begin().await.unwrap();
        sqlx::query("set local session_replication_role = replica")
            .execute(&mut *rewind)
            .await
            .unwrap();
        for statement in [
            "update step set receipt_id = null, state = 'ready', request_key = null, attempt_count = 0
             where id = $1",
            "update step set state = 'blocked'
             where depends_on @> array[(select logical from step where id = $1)]
               and workflow_id = (select workflow_id from step where id = $1)",
            "delete from receipt where step_id = $1",
            "delete from observation where step_id = $1",
            "delete from attempt_start where step_id = $1",
            "delete from external_request where step_id = $1",
            // The claim queue as the backup held it, with the step ready.
            "insert into step_ready (step_id, run_after) values ($1, now()) on conflict do nothing",
        ] {
            sqlx::query(statement)
                .bind(self.id)
                .execute(&mut *rewind)
                .await
                .unwrap();
        }
        rewind.commit().await.unwrap();
    }
}

/// Attempt 1 of `step` by a worker that is `gone`: open, never invoked. Each setter changes one
/// of these.
pub fn attempt(pool: &PgPool, step: Uuid) -> Attempt<'_> {
    Attempt {
        pool,
        step,
        number: 1,
        worker: "gone".to_owned(),
        invoked: false,
        outcome: None,
    }
}

/// An `attempt` row to insert; see [`attempt`].
pub struct Attempt<'p> {
    pool: &'p PgPool,
    step: Uuid,
    number: i32,
    worker: String,
    invoked: bool,
    outcome: Option<String>,
}

impl Attempt<'_> {
    /// The attempt's number on its step.
    pub fn number(mut self, number: i32) -> Self {
        self.number = number;
        self
    }

    /// The worker that took the attempt.
    pub fn by(mut self, worker: &str) -> Self {
        self.worker = worker.to_owned();
        self
    }

    /// The adapter call began (checkpoint 3 committed), now.
    pub fn invoked(mut self) -> Self {
        self.invoked = true;
        self
    }

    /// The attempt ended now with `outcome` (an `attempt_outcome`).
    pub fn ended(mut self, outcome: &str) -> Self {
        self.outcome = Some(outcome.to_owned());
        self
    }

    /// The attempt, and the observation that ended it if it ended.
    pub async fn insert(self) {
        sqlx::query(
            "with begun as (
                 insert into attempt_start (id, step_id, number, worker, invoked_at)
                 values ($1, $2, $3, $4, case when $5 then now() end)
                 returning id
             )
             insert into observation (step_id, attempt_id, kind, body, outcome)
             select $2, id, 'transport', '{}', $6::attempt_outcome from begun
             where $6::attempt_outcome is not null",
        )
        .bind(Uuid::now_v7())
        .bind(self.step)
        .bind(self.number)
        .bind(&self.worker)
        .bind(self.invoked)
        .bind(self.outcome.as_deref())
        .execute(self.pool)
        .await
        .unwrap();
    }
}

/// `key` bound to `step` through `docs` under contract version 1, with placeholder bytes (an
/// empty summary and a digest of `a`s), prepared now and never sent. Each setter changes one.
pub fn request<'p>(pool: &'p PgPool, step: Uuid, key: &str) -> Request<'p> {
    Request {
        pool,
        step,
        key: key.to_owned(),
        input_digest: digest_of('a'),
        sent: false,
    }
}

/// An `external_request` row to insert; see [`request`].
pub struct Request<'p> {
    pool: &'p PgPool,
    step: Uuid,
    key: String,
    input_digest: String,
    sent: bool,
}

impl Request<'_> {
    /// The digest of the bytes bound to the key.
    pub fn input_digest(mut self, digest: String) -> Self {
        self.input_digest = digest;
        self
    }

    /// The request went out, last now.
    pub fn sent(mut self) -> Self {
        self.sent = true;
        self
    }

    pub async fn insert(self) {
        sqlx::query(
            "insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version, last_sent_at)
             values ($1, $2, $3, '{}', $4, 1, case when $5 then now() end)",
        )
        .bind(&self.key)
        .bind(self.step)
        .bind(&self.input_digest)
        .bind(ADAPTER)
        .bind(self.sent)
        .execute(self.pool)
        .await
        .unwrap();
    }
}

/// An operator suspended authority for `scope` (`adapter` or `subject`) `value` with `reason`:
/// no attempt under it is granted until the suspension is lifted.
pub async fn suspend_authority(pool: &PgPool, scope: &str, value: &str, reason: &str) {
    sqlx::query("insert into authority_suspension (scope, value, reason) values ($1, $2, $3)")
        .bind(scope)
        .bind(value)
        .bind(reason)
        .execute(pool)
        .await
        .unwrap();
}

/// An administrator disabled the account `username`, now.
pub async fn disable_operator(pool: &PgPool, username: &str) {
    sqlx::query("update operator set disabled_at = now() where username = $1")
        .bind(username)
        .execute(pool)
        .await
        .unwrap();
}

/// A workflow row created under `creation_key`: a `document_delivery` v1 with an empty input
/// and a placeholder digest, pending, with no steps. For tests of storage, not of running it.
pub fn workflow<'p>(pool: &'p PgPool, creation_key: &str) -> Workflow<'p> {
    Workflow {
        pool,
        creation_key: creation_key.to_owned(),
    }
}

/// A `workflow` row to insert; see [`workflow`].
pub struct Workflow<'p> {
    pool: &'p PgPool,
    creation_key: String,
}

impl Workflow<'_> {
    pub async fn insert(self) {
        sqlx::query(
            "insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest)
             values (gen_random_uuid(), $1, 'document_delivery', 1, '{}', $2)",
        )
        .bind(&self.creation_key)
        .bind(digest_of('0'))
        .execute(self.pool)
        .await
        .unwrap();
    }
}
