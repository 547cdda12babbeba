//! The accept loop: hyper serving the router by hand, so a fault can close a connection
//! without sending a single byte, and graceful shutdown on a future.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;
use tower::ServiceExt;

use crate::config::Config;
use crate::faults::{FaultPlan, FaultPlanError, FaultReport};
use crate::http::routes;
use crate::kind::Kind;
use crate::ledger::{Effect, Ledger};
use crate::state::{AppState, DropConnection};

/// The router of a destination, for tests that call it without a network (`oneshot`).
///
/// Its fault plan starts empty and is reachable only through `/control/faults`. A dropped
/// connection needs [`serve`]: called directly, the router answers such a request normally.
pub fn router(pool: PgPool, config: Config) -> Router {
    routes(AppState::new(pool, config))
}

/// Serves a destination on `listener` until `shutdown` resolves, then stops accepting, lets
/// requests in flight finish and returns. The destination's migrations must have been applied
/// ([`crate::migrate`]).
pub async fn serve(
    listener: TcpListener,
    pool: PgPool,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    run(listener, routes(AppState::new(pool, config)), shutdown).await;
    Ok(())
}

/// Starts a destination on an unused loopback port in a background task.
pub async fn spawn(pool: PgPool, config: Config) -> io::Result<RunningDestination> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let state = AppState::new(pool, config);
    let (stop, stopped) = oneshot::channel::<()>();
    // Dropping `stop`, with the RunningDestination, shuts the server down too.
    let shutdown = async move {
        let _ = stopped.await;
    };
    let task = tokio::spawn(run(listener, routes(state.clone()), shutdown));
    Ok(RunningDestination {
        addr,
        state,
        stop,
        task,
    })
}

/// A destination serving in the background; dropping it shuts the server down.
#[derive(Debug)]
pub struct RunningDestination {
    addr: SocketAddr,
    state: AppState,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl RunningDestination {
    /// The address the destination listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` and the address, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The token its test-only endpoints (`/control/…`, `/ledger`) require.
    pub fn control_token(&self) -> &crate::ControlToken {
        &self.state.config.control_token
    }

    /// The destination's kind (for the payments and webhook APIs, the nearest one; see
    /// [`Config::kind`]).
    pub fn kind(&self) -> Kind {
        self.state.config.kind
    }

    /// What the destination is, by the name `z29c destinations --kind` takes.
    pub fn service(&self) -> crate::Service {
        self.state.config.service()
    }

    /// Installs a fault plan, as `PUT /control/faults` does.
    pub fn set_faults(&self, plan: FaultPlan) -> Result<(), FaultPlanError> {
        self.state.faults.install(plan, self.state.config.api)
    }

    /// Removes every fault, as `DELETE /control/faults` does.
    pub fn clear_faults(&self) {
        self.state.faults.clear();
    }

    /// The fault plan and what it has done, as `GET /control/faults` answers.
    pub fn fault_report(&self) -> FaultReport {
        self.state.faults.report()
    }

    /// Every effect the destination committed, read from its database.
    pub async fn ledger(&self) -> sqlx::Result<Ledger> {
        Ledger::read(&self.state.pool, &self.state.config.name).await
    }

    /// Effects committed from now on, each announced before its answer is sent.
    pub fn effects(&self) -> broadcast::Receiver<Effect> {
        self.state.effects.subscribe()
    }

    /// Stops accepting connections and waits for requests in flight to finish.
    pub async fn shutdown(self) -> io::Result<()> {
        drop(self.stop);
        self.task.await.map_err(io::Error::other)
    }
}

/// The accept loop. Each connection is served by hyper's HTTP/1 connection, which closes the
/// socket without a response when the service fails: the router's marked responses become such
/// failures.
async fn run(listener: TcpListener, router: Router, shutdown: impl Future<Output = ()>) {
    let service = TowerToHyperService::new(ServiceExt::<hyper::Request<Incoming>>::map_result(
        router,
        drop_marked,
    ));
    let mut connections = http1::Builder::new();
    connections.timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    pause_after_accept_error(error).await;
                    continue;
                }
            },
        };
        let connection = connections.serve_connection(TokioIo::new(stream), service.clone());
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "destination connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Why a connection was closed without a response.
#[derive(Debug, thiserror::Error)]
#[error("the fault script dropped the connection")]
struct DroppedOnPurpose;

// tower's `map_result` asks for it; the router never fails.
impl From<Infallible> for DroppedOnPurpose {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

fn drop_marked(result: Result<Response, Infallible>) -> Result<Response, DroppedOnPurpose> {
    let response = result.unwrap_or_else(|never| match never {});
    match response.extensions().get::<DropConnection>() {
        Some(DropConnection) => Err(DroppedOnPurpose),
        None => Ok(response),
    }
}

/// Errors about one connection (the peer gave up before we accepted it) cost nothing; others
/// (too many open files) are worth a pause rather than a busy loop.
async fn pause_after_accept_error(error: io::Error) {
    match error.kind() {
        io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionRefused
        | io::ErrorKind::ConnectionReset => {}
        _ => {
            tracing::error!(%error, "destination cannot accept connections");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
