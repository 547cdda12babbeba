//! The worker processes a scenario runs, watches and kills.

use std::time::{Duration, Instant};

use anyhow::Context;
use destinations::RunningDestination;
use engine::adapter::policy::Egress;
use sqlx::PgPool;

/// Runs a PostgreSQL client program to completion.
pub(super) async fn run_program(program: std::path::PathBuf, args: &[&str]) -> anyhow::Result<()> {
    let output = tokio::process::Command::new(&program)
        .args(args)
        .output()
        .await
        .with_context(|| format!("running {}", program.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} failed: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

/// Waits, with `child` running, until every workflow in `settled_in` has settled or `limit`
/// passes; returns how the child ended if it did meanwhile.
pub(super) async fn until_settled(
    child: &mut tokio::process::Child,
    settled_in: Option<&PgPool>,
    limit: Duration,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        // Right after a restart the harness's own connections may still be failing.
        if let Some(pool) = settled_in
            && settled(pool).await.unwrap_or(false)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(None)
}

pub(super) fn worker_command(
    url: &str,
    failpoint: Option<&str>,
    break_rule: Option<&str>,
) -> anyhow::Result<tokio::process::Command> {
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command
        .args(["worker", "--lease-secs", "2", "--concurrency", "4"])
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .env_remove("Z29C_FAILPOINT")
        .kill_on_drop(true);
    // The harness's destinations are on loopback, its secret files in the temporary directory.
    inherited(&mut command);
    if let Some(point) = failpoint {
        command.env("Z29C_FAILPOINT", point);
    }
    if let Some(rule) = break_rule {
        command.env("Z29C_BREAK_RULE", rule);
    }
    Ok(command)
}

/// Runs a worker process: with a failpoint, until it is killed there (true) or `limit` passes
/// (false); without one, until every workflow has settled (`settled_in` given) or `limit`.
pub(super) async fn run_worker(
    url: &str,
    failpoint: Option<&str>,
    break_rule: Option<&str>,
    limit: Duration,
    settled_in: Option<&PgPool>,
) -> anyhow::Result<bool> {
    let mut child = worker_command(url, failpoint, break_rule)?.spawn()?;
    supervise(&mut child, settled_in, limit).await
}

/// Watches `child` until it ends (true when by SIGKILL, as a failpoint ends it), or until
/// every workflow in `settled_in` has settled or `limit` passes (false, and it is stopped).
pub(super) async fn supervise(
    child: &mut tokio::process::Child,
    settled_in: Option<&PgPool>,
    limit: Duration,
) -> anyhow::Result<bool> {
    Ok(match until_settled(child, settled_in, limit).await? {
        Some(status) => std::os::unix::process::ExitStatusExt::signal(&status) == Some(9),
        None => {
            stop(child).await;
            false
        }
    })
}

/// Runs `z29c serve --no-workers` (the outbox publisher) for a while, or until killed.
pub(super) async fn run_publisher(
    url: &str,
    failpoint: Option<&str>,
    limit: Duration,
) -> anyhow::Result<bool> {
    let args = ["serve", "--no-workers", "--addr", "127.0.0.1:0"].map(std::ffi::OsStr::new);
    run_z29c(url, &args, failpoint, limit).await
}

/// Runs `z29c archive run` keeping nothing settled hot, its archive in `dir`: with a
/// failpoint, until it is killed there (true); without one, to its end.
pub(super) async fn run_archiver(
    url: &str,
    dir: &std::path::Path,
    failpoint: Option<&str>,
) -> anyhow::Result<bool> {
    let args = ["archive", "run", "--retain-settled", "0s", "--archive-dir"]
        .map(std::ffi::OsStr::new)
        .into_iter()
        .chain([dir.as_os_str()])
        .collect::<Vec<_>>();
    run_z29c(url, &args, failpoint, Duration::from_secs(60)).await
}

/// Runs this `z29c` with `args` on `url`, armed at `failpoint` if given: until it is killed
/// there (true), it ends, or `limit` passes.
async fn run_z29c(
    url: &str,
    args: &[&std::ffi::OsStr],
    failpoint: Option<&str>,
    limit: Duration,
) -> anyhow::Result<bool> {
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command
        .args(args)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .env_remove("Z29C_FAILPOINT")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(point) = failpoint {
        command.env("Z29C_FAILPOINT", point);
    }
    let mut child = command.spawn()?;
    supervise(&mut child, None, limit).await
}

/// Starts a worker process and waits, up to 30 s, until the destination has committed a
/// delivery; says whether it did.
pub(super) async fn worker_until_first_delivery(
    url: &str,
    break_rule: Option<&str>,
    destination: &RunningDestination,
) -> anyhow::Result<(tokio::process::Child, bool)> {
    let mut accepted = destination.effects();
    let child = worker_command(url, None, break_rule)?.spawn()?;
    let seen = tokio::time::timeout(Duration::from_secs(30), accepted.recv()).await;
    Ok((child, matches!(seen, Ok(Ok(_)))))
}

/// SIGKILLs a worker process as soon as the destination has committed a delivery.
pub(super) async fn kill_on_acceptance(
    url: &str,
    break_rule: Option<&str>,
    destination: &RunningDestination,
) -> anyhow::Result<bool> {
    let (mut child, seen) = worker_until_first_delivery(url, break_rule, destination).await?;
    child.start_kill()?;
    let _ = child.wait().await;
    Ok(seen)
}

pub(super) async fn stop(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(0));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// Nothing is left to do or in flight: every step settled or waits for a person.
pub(super) async fn settled(pool: &PgPool) -> anyhow::Result<bool> {
    let busy: i64 = sqlx::query_scalar(
        "select count(*) from step s
         where s.state in ('ready', 'running', 'invoking', 'outcome_unknown')
            or (s.state = 'blocked' and not exists (
                   select 1 from step p where p.workflow_id = s.workflow_id and p.logical = any(s.depends_on)
                   and p.state in ('review_required', 'rejected', 'cancelled', 'waived')))",
    )
    .fetch_one(pool)
    .await?;
    Ok(busy == 0)
}

/// The environment a process this one starts (a worker, a destination) needs to run under
/// the same policy: its flags travel as variables, as `ps` would show arguments to anyone.
fn inherited(command: &mut tokio::process::Command) {
    let policy = engine::adapter::policy::current();
    if let Egress::Only(entries) = &policy.egress {
        let list: Vec<String> = entries.iter().map(ToString::to_string).collect();
        command.env("Z29C_EGRESS_ALLOW", list.join(","));
    }
    if let Some(dir) = &policy.secrets_dir {
        command.env("Z29C_SECRETS_DIR", dir);
    }
    command.env("Z29C_SECRET_ENV_PREFIX", &policy.env_prefix);
}
