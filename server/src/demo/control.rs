//! The demo's control token: handed to the destination processes it starts, used to script
//! them, and the proof that what answers on a demo port is one of them.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use destinations::ControlToken;
use tokio::process::Child;

use super::base_url;

/// The environment variable that hands a destination process its control token.
pub const CONTROL_TOKEN_ENV: &str = "Z29C_DESTINATION_CONTROL_TOKEN";

/// The control token this process gives the destinations it starts, and scripts them with: it
/// also proves that what answers on a demo port is one of ours.
pub(super) static CONTROL_TOKEN: std::sync::LazyLock<ControlToken> =
    std::sync::LazyLock::new(ControlToken::random);

/// The control token this process gives the destinations it starts.
pub fn control_token() -> &'static ControlToken {
    &CONTROL_TOKEN
}

pub(super) fn bearer() -> String {
    format!("Bearer {}", CONTROL_TOKEN.expose())
}

/// Leaves the control token where only this user can read it, for a person who wants to look
/// at a destination's `/ledger` (`curl -H "Authorization: Bearer $(cat …)"`).
pub(super) fn write_control_token(data_dir: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join("control-token");
    let _ = std::fs::remove_file(&path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| file.write_all(CONTROL_TOKEN.expose().as_bytes()))
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "demo destinations: /ledger and /control/faults need `Authorization: Bearer $(cat {})`",
        path.display()
    );
    Ok(())
}

/// Waits until the destination `child` answers on `port`, and makes sure it is `child` that
/// answers: only a process given this demo's control token opens `/control/faults` to it. A
/// port held by anything else (an earlier demo still running, another program) is refused, not
/// trusted with the demo's deliveries.
pub async fn wait_until_up(port: u16, child: &mut Child) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let taken = || {
        format!(
            "port {port} is held by a process this demo did not start (an earlier `make run` \
             still running, or another program): stop it, or set Z29C_DEMO_PORT to move the \
             demo's destinations"
        )
    };
    loop {
        let answer = client
            .get(format!("{}/control/faults", base_url(port)))
            .header(reqwest::header::AUTHORIZATION, bearer())
            .send()
            .await;
        match answer.map(|r| r.status()) {
            Ok(status) if status.is_success() => {
                // One of ours also shuts the door on a request without the token.
                let open = client
                    .get(format!("{}/control/faults", base_url(port)))
                    .send()
                    .await
                    .map(|r| r.status());
                anyhow::ensure!(
                    open.is_ok_and(|s| s == reqwest::StatusCode::UNAUTHORIZED),
                    "{}",
                    taken()
                );
                return Ok(());
            }
            Ok(_) => anyhow::bail!("{}", taken()),
            Err(_) => {}
        }
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("it exited ({status}) before answering; {}", taken());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "no answer on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
