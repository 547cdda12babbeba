//! The fault points the harness itself provides beside the failpoints compiled into the
//! engine (the timing sweep and the named scenarios), and how a scenario is brought to each.

use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use super::processes::{
    kill_on_acceptance, run_archiver, run_program, run_publisher, run_worker, stop, until_settled,
    worker_command, worker_until_first_delivery,
};
use super::setup::delay_deliveries;
use super::target::Running;
use crate::lab::bench::BenchDatabase;

/// Answers delayed to around the adapter's 1,000 ms deadline: no kill, only timing.
pub(super) const TIMING: &str = "response_at_";
pub(super) const TIMINGS_MS: [u64; 5] = [500, 900, 1_000, 1_100, 1_500];

/// Killed by the harness once the destination committed, before any answer.
pub(super) const AFTER_ACCEPTANCE: &str = "after_acceptance_before_response";

/// PostgreSQL crashes and restarts under a running worker, which carries on.
pub(super) const DATABASE_RESTART: &str = "database_restart";

/// A backup taken mid-run, the live system carried on, then the backup restored,
/// `z29c check --before-resume`, and workers resumed.
pub(super) const RESTORE: &str = "restore_from_backup";

/// Workflows started under definition v1, the worker killed after the destination accepted,
/// and recovery by code whose newest definition is v2.
pub(super) const RECOVERED_BY_V2: &str = "recovered_by_v2";

/// The first duplicate delivery (docs/DESIGN.md §13): the destination accepts and answers
/// after the worker's deadline, while a second worker process stands by.
pub(super) const SEEDS_DUPLICATE: &str = "seeds_duplicate_delivery";

/// The archiver killed once its batch is durable in the archive (a failpoint of its own).
pub(super) const ARCHIVE_WRITE: &str = "after_archive_write";

/// A backup taken before any workflow started; the workflows delivered and archived; the
/// backup restored and checked with the archive (`check --before-resume --archive-dir`).
/// Reached when the restored database, which never saw them, has each one's tombstone again.
pub(super) const RESTORE_ARCHIVED: &str = "restore_after_archiving";

/// A backup taken while calls are in flight; the live system finishing and its workflows
/// archived; the backup restored and checked with the archive. The restore rewinds steps the
/// live system finished, and their workflows are hot again with the archive's copy of each noted
/// (docs/DESIGN.md §21, "After a restore"). Reached when a rewound step's receipt, which the
/// restored database lacks, is in its workflow's copy.
pub(super) const RESTORE_MID_FLIGHT_ARCHIVED: &str = "restore_mid_flight_after_archiving";

/// Where a scenario's archiver writes.
pub(super) fn archive_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{name}-archive"))
}

/// The named scenarios beyond the fault points and the timing sweep.
pub(super) const NAMED: [&str; 6] = [
    DATABASE_RESTART,
    RESTORE,
    RESTORE_ARCHIVED,
    RESTORE_MID_FLIGHT_ARCHIVED,
    RECOVERED_BY_V2,
    SEEDS_DUPLICATE,
];

/// A `pg_dump` of a scenario's database, in a directory of its own.
pub(super) struct Backup {
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
}

/// Backs up the database at `url` with the programs of the harness's own cluster.
pub(super) async fn backup(db: &BenchDatabase, url: &str) -> anyhow::Result<Backup> {
    let cluster = db.cluster().context(
        "a restore needs the harness's own cluster (pg_dump, pg_restore): unset DATABASE_URL",
    )?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("backup.dump");
    run_program(
        cluster.program("pg_dump"),
        &["--format=custom", "--file", &file.to_string_lossy(), url],
    )
    .await?;
    Ok(Backup { _dir: dir, file })
}

/// One scenario on its way to its fault point: its databases, its destination and the
/// settings every way of reaching a point reads.
pub(super) struct Stage<'a> {
    pub(super) db: &'a BenchDatabase,
    pub(super) admin: &'a PgPool,
    pub(super) name: &'a str,
    pub(super) url: String,
    /// Replaced when a restore recreates the database.
    pub(super) pool: PgPool,
    /// The destination under test, and what else its workflows reach.
    pub(super) running: Running,
    pub(super) point: &'a str,
    /// Workflows in the scenario.
    pub(super) workflows: usize,
    /// The recovery rule broken on purpose, if any (`--break-rule`).
    pub(super) rule: Option<&'a str>,
    /// Taken before the workflows started ([`RESTORE_ARCHIVED`]).
    pub(super) backup: Option<Backup>,
}

impl Stage<'_> {
    /// Brings the scenario to its fault point; says whether it got there, and what went wrong
    /// on the way that the verdict must show.
    pub(super) async fn reach_point(
        &mut self,
        workflows: &[Uuid],
    ) -> anyhow::Result<(bool, Vec<String>)> {
        let mut violations = Vec::new();
        let reached = match self.point {
            "during_compensation_acceptance" | "during_outbox_publication" => {
                self.after_deliveries(workflows).await?
            }
            DATABASE_RESTART => {
                let (reached, ended) = self.restart_database().await?;
                violations.extend(ended);
                reached
            }
            RESTORE => self.restore_from_backup().await?,
            RESTORE_ARCHIVED => {
                let (reached, answered) = self.restore_after_archiving(workflows).await?;
                violations.extend(answered);
                reached
            }
            RESTORE_MID_FLIGHT_ARCHIVED => {
                let (reached, unshown) = self.restore_mid_flight_after_archiving().await?;
                violations.extend(unshown);
                reached
            }
            ARCHIVE_WRITE => self.archive_killed().await?,
            SEEDS_DUPLICATE => self.answer_late().await?,
            p if p.starts_with(TIMING) => {
                let ms: u64 = p[TIMING.len()..]
                    .trim_end_matches("ms")
                    .parse()
                    .context("a timing point is response_at_<ms>ms")?;
                delay_deliveries(&self.running.main, ms, self.workflows * 2)?;
                // Nothing to kill: every answer lands around the deadline, and the workers settle it.
                true
            }
            _ => self.kill_at_point().await?,
        };
        Ok((reached, violations))
    }

    /// Deliveries first, without faults, then the part under test: withdrawing them all
    /// (compensation) or publishing the outbox.
    async fn after_deliveries(&self, workflows: &[Uuid]) -> anyhow::Result<bool> {
        let (url, pool, point, rule) = (&self.url, &self.pool, self.point, self.rule);
        run_worker(url, None, rule, Duration::from_secs(60), Some(pool)).await?;
        if point == "during_compensation_acceptance" {
            let approver = engine::operators::Operator {
                id: Uuid::nil(),
                username: "scenario".into(),
                role: engine::domain::Role::Approver,
                via: engine::operators::Via::Console,
                adapters: None,
            };
            for w in workflows {
                let step: Uuid = sqlx::query_scalar(
                    "select id from step where workflow_id = $1 and logical = $2",
                )
                .bind(w)
                .bind(self.running.target.first_step())
                .fetch_one(pool)
                .await?;
                engine::recovery::perform(
                    pool,
                    engine::recovery::Request {
                        operator: &approver,
                        step,
                        seen_version: None,
                        reason: "scenario: withdraw",
                        action: engine::recovery::Action::Cancel,
                    },
                )
                .await?;
            }
            run_worker(url, Some(point), rule, Duration::from_secs(30), None).await
        } else {
            let reached = run_publisher(url, Some(point), Duration::from_secs(20)).await?;
            run_publisher(url, None, Duration::from_secs(3)).await?;
            Ok(reached)
        }
    }

    /// Deliveries first, without faults, and their events published; then an archiver keeping
    /// nothing settled hot is killed once its batch is durable in the archive, and run again.
    /// The verdict reads archived workflows back from the archive, which must verify.
    async fn archive_killed(&self) -> anyhow::Result<bool> {
        let (url, pool) = (&self.url, &self.pool);
        let dir = self.delivered_to_archive().await?;
        let reached = run_archiver(url, &dir, Some(self.point)).await?;
        run_archiver(url, &dir, None).await?;
        let verified =
            engine::archive::verify(pool, &engine::archive::ArchiveDir::at(&dir)).await?;
        anyhow::ensure!(
            verified.findings.is_empty(),
            "the archive does not verify: {:?}",
            verified.findings
        );
        Ok(reached)
    }

    /// PostgreSQL crashes and restarts while calls are in flight; the same worker process must
    /// carry on. Returns whether a call was in flight, and a violation if the worker ended.
    async fn restart_database(&self) -> anyhow::Result<(bool, Vec<String>)> {
        let cluster = self
            .db
            .cluster()
            .context("a database restart needs the harness's own cluster: unset DATABASE_URL")?;
        // Slow answers, so calls are in flight when the server goes down.
        delay_deliveries(&self.running.main, 400, self.workflows * 2)?;
        let (mut child, seen) =
            worker_until_first_delivery(&self.url, self.rule, &self.running.main).await?;
        cluster.crash_restart().await?;
        // The same worker process carries on once the server is back.
        let exited = until_settled(&mut child, Some(&self.pool), Duration::from_secs(60)).await?;
        stop(&mut child).await;
        let mut violations = Vec::new();
        if let Some(status) = exited {
            violations.push(format!(
                "the worker process ended ({status}) when the database restarted"
            ));
        }
        Ok((seen, violations))
    }

    /// A backup taken mid-run, the live system finishing, the backup restored over it, then
    /// `z29c check --before-resume`; reached when the restore rewound finished steps.
    async fn restore_from_backup(&mut self) -> anyhow::Result<bool> {
        let backup = self.backup_mid_flight().await?;
        self.restore(&backup).await?;
        // The restore rewound steps the live system had finished.
        let rewound: i64 = sqlx::query_scalar(
            "select count(*) from step where kind <> 'pure' and state <> 'succeeded'",
        )
        .fetch_one(&self.pool)
        .await?;
        self.check_before_resume(None).await?;
        Ok(rewound > 0)
    }

    /// Every workflow delivered and archived after a backup that predates them all, the backup
    /// restored and checked with the archive; then each creation key submitted again, which must
    /// answer its archived workflow. Reached when each has its tombstone back; says which
    /// creation keys started something instead.
    async fn restore_after_archiving(
        &mut self,
        workflows: &[Uuid],
    ) -> anyhow::Result<(bool, Vec<String>)> {
        let backup = self
            .backup
            .take()
            .context("no backup before the workflows started")?;
        let dir = self.delivered_to_archive().await?;
        run_archiver(&self.url, &dir, None).await?;
        self.restore(&backup).await?;
        self.check_before_resume(Some(&dir)).await?;
        let tombstones: i64 =
            sqlx::query_scalar("select count(*) from archived_workflow where id = any($1)")
                .bind(workflows)
                .fetch_one(&self.pool)
                .await?;
        let mut started = Vec::new();
        for (n, &id) in workflows.iter().enumerate() {
            let new = self.running.target.workflow(self.name, n, "docs");
            let actor = engine::store::journal::Actor::Engine("scenario");
            match engine::intake::start_workflow(&self.pool, new, actor).await? {
                engine::intake::Started::Archived(t) if t.id == id => {}
                other => started.push(format!(
                    "the creation key of archived workflow {id} answered {} after the restore",
                    other.id()
                )),
            }
        }
        Ok((tombstones == i64::try_from(workflows.len())?, started))
    }

    /// A backup taken while calls are in flight, the live system finishing and its workflows
    /// archived, then the backup restored and checked with the archive. Reached when a step the
    /// restore rewound has its receipt in the archive's copy of its workflow; says which rewound
    /// steps of archived workflows have no copy noted, or a settled copy without their receipt.
    async fn restore_mid_flight_after_archiving(&mut self) -> anyhow::Result<(bool, Vec<String>)> {
        let backup = self.backup_mid_flight().await?;
        let dir = self.delivered_to_archive().await?;
        run_archiver(&self.url, &dir, None).await?;
        let archived: Vec<Uuid> = sqlx::query_scalar("select id from archived_workflow")
            .fetch_all(&self.pool)
            .await?;
        self.restore(&backup).await?;
        self.check_before_resume(Some(&dir)).await?;
        let rewound: Vec<(Uuid, Uuid)> = sqlx::query_as(
            "select id, workflow_id from step where kind <> 'pure' and state <> 'succeeded'
             and workflow_id = any($1)",
        )
        .bind(&archived)
        .fetch_all(&self.pool)
        .await?;
        let archive = engine::archive::ArchiveDir::at(&dir);
        let (mut shown, mut unshown) = (0, Vec::new());
        for (step, workflow) in rewound {
            match receipt_in_copy(&self.pool, &archive, step, workflow).await? {
                Ok(true) => shown += 1,
                Ok(false) => {}
                Err(why) => unshown.push(why),
            }
        }
        Ok((shown > 0, unshown))
    }

    /// A backup taken while calls are in flight; then the live system finishes everything it
    /// can and stops, and the destination keeps it all.
    async fn backup_mid_flight(&self) -> anyhow::Result<Backup> {
        delay_deliveries(&self.running.main, 300, self.workflows * 2)?;
        let (mut child, _) =
            worker_until_first_delivery(&self.url, self.rule, &self.running.main).await?;
        let backup = backup(self.db, &self.url).await?;
        until_settled(&mut child, Some(&self.pool), Duration::from_secs(60)).await?;
        stop(&mut child).await;
        Ok(backup)
    }

    /// Every delivery made without faults and its events published, so every workflow may
    /// leave; returns the scenario's archive directory, emptied.
    async fn delivered_to_archive(&self) -> anyhow::Result<std::path::PathBuf> {
        let (url, pool) = (&self.url, &self.pool);
        run_worker(url, None, self.rule, Duration::from_secs(60), Some(pool)).await?;
        run_publisher(url, None, Duration::from_secs(3)).await?;
        let dir = archive_dir(self.name);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(dir)
    }

    /// Replaces the scenario's database with `backup`; the destinations keep what they hold.
    async fn restore(&mut self, backup: &Backup) -> anyhow::Result<()> {
        let cluster = self
            .db
            .cluster()
            .context("a restore needs the harness's own cluster")?;
        let (url, name, admin) = (&self.url, self.name, self.admin);
        self.pool.close().await;
        sqlx::query(&format!("drop database {name} with (force)"))
            .execute(admin)
            .await?;
        sqlx::query(&format!("create database {name}"))
            .execute(admin)
            .await?;
        run_program(
            cluster.program("pg_restore"),
            &[
                "--no-owner",
                "--exit-on-error",
                "--dbname",
                url,
                &backup.file.to_string_lossy(),
            ],
        )
        .await?;
        self.pool = PgPoolOptions::new().max_connections(8).connect(url).await?;
        Ok(())
    }

    /// `z29c check --before-resume`, given `archive`; fails unless it passes.
    async fn check_before_resume(&self, archive: Option<&std::path::Path>) -> anyhow::Result<()> {
        let mut check = tokio::process::Command::new(std::env::current_exe()?);
        check
            .args(["check", "--before-resume"])
            .env("DATABASE_URL", &self.url)
            .env("RUST_LOG", "warn")
            .env_remove("Z29C_ARCHIVE_DIR")
            .stdout(std::process::Stdio::null());
        if let Some(dir) = archive {
            check.arg("--archive-dir").arg(dir);
        }
        if let Some(rule) = self.rule {
            check.env("Z29C_BREAK_RULE", rule);
        }
        let status = check.status().await?;
        anyhow::ensure!(
            status.success(),
            "`z29c check --before-resume` found violations in the restored database ({status})"
        );
        Ok(())
    }

    /// Accepted, then answered well after the 1,000 ms deadline, with two worker processes;
    /// reached when an attempt ended unknown.
    async fn answer_late(&self) -> anyhow::Result<bool> {
        let (url, rule) = (&self.url, self.rule);
        delay_deliveries(&self.running.main, 2_500, self.workflows)?;
        let mut first = worker_command(url, None, rule)?.spawn()?;
        let mut second = worker_command(url, None, rule)?.spawn()?;
        until_settled(&mut first, Some(&self.pool), Duration::from_secs(60)).await?;
        stop(&mut first).await;
        stop(&mut second).await;
        let unknown: i64 =
            sqlx::query_scalar("select count(*) from attempt where outcome = 'outcome_unknown'")
                .fetch_one(&self.pool)
                .await?;
        Ok(unknown > 0)
    }

    /// A worker killed at the point: by the harness once the destination accepted, or by the
    /// failpoint itself.
    async fn kill_at_point(&self) -> anyhow::Result<bool> {
        let (url, point, rule) = (&self.url, self.point, self.rule);
        let delay = match point {
            AFTER_ACCEPTANCE | RECOVERED_BY_V2 => Some(10_000),
            // A lookup happens only after an unknown outcome.
            "during_status_query" => Some(1_500),
            _ => None,
        };
        if let Some(ms) = delay {
            delay_deliveries(&self.running.main, ms, self.workflows)?;
        }
        if matches!(point, AFTER_ACCEPTANCE | RECOVERED_BY_V2) {
            let reached = kill_on_acceptance(url, rule, &self.running.main).await?;
            self.running.main.clear_faults();
            Ok(reached)
        } else {
            run_worker(url, Some(point), rule, Duration::from_secs(30), None).await
        }
    }
}

/// Whether the archive's noted copy of `workflow` holds `step`'s receipt (false when the copy's
/// step did not succeed either); an error naming what is missing when no copy is noted, or when
/// the copy's step succeeded without its receipt.
async fn receipt_in_copy(
    pool: &PgPool,
    archive: &engine::archive::ArchiveDir,
    step: Uuid,
    workflow: Uuid,
) -> anyhow::Result<Result<bool, String>> {
    let Some(copy) = engine::archive::copy_of(pool, archive, workflow).await? else {
        return Ok(Err(format!(
            "step {step} of workflow {workflow}, archived after the backup, is back hot with no \
             copy of it noted"
        )));
    };
    let rows = |table: &str| copy.evidence[table].as_array().cloned().unwrap_or_default();
    let id = step.to_string();
    let succeeded = rows("steps")
        .iter()
        .any(|s| s["id"] == id.as_str() && s["state"] == "succeeded");
    let receipted = rows("receipts").iter().any(|r| r["step_id"] == id.as_str());
    Ok(match (succeeded, receipted) {
        (true, false) => Err(format!(
            "the archive's copy of workflow {workflow} has step {step} succeeded without its receipt"
        )),
        (_, receipted) => Ok(receipted),
    })
}
