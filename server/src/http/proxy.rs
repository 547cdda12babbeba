//! How the console is reached: directly, or through a TLS-terminating reverse proxy
//! (`z29c serve --behind-tls-proxy`, docs/DESIGN.md §15).
//!
//! Behind a proxy, every connection comes from the proxy, so the client's address (which
//! sign-in throttling counts per address) is the one the proxy appends to `X-Forwarded-For`,
//! and the session cookie takes the `__Host-` prefix: browsers then accept it only over HTTPS,
//! for this host alone, on every path.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;

/// Where the console's connections come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Exposure {
    /// Browsers connect to Z29C itself (plain HTTP, as on 127.0.0.1).
    #[default]
    Direct,
    /// A reverse proxy terminates TLS and forwards every request.
    BehindTlsProxy,
}

impl Exposure {
    /// The session cookie's name.
    pub fn session_cookie(self) -> &'static str {
        match self {
            Exposure::Direct => "z29c_session",
            Exposure::BehindTlsProxy => "__Host-z29c_session",
        }
    }
}

/// Makes the request's peer address the client the proxy names: the last `X-Forwarded-For`
/// entry, the one the proxy itself appended (earlier entries are the client's word). Without
/// one, the address stays unknown rather than the proxy's, which would make every client wait
/// for one client's failed sign-ins.
pub async fn client_from_proxy(mut request: Request, next: Next) -> Response {
    let forwarded = request
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .last()
        .and_then(|last| last.trim().parse::<IpAddr>().ok());
    let extensions = request.extensions_mut();
    extensions.remove::<ConnectInfo<SocketAddr>>();
    if let Some(ip) = forwarded {
        extensions.insert(ConnectInfo(SocketAddr::new(ip, 0)));
    }
    next.run(request).await
}
