//! The console's built front end: where it is, what its files are called, and how `/pkg/` is
//! served (docs/DESIGN.md §18). cargo-leptos names each file by a hash of its content
//! (`hash-files`), so a name never changes meaning: such files are cached by browsers for a
//! year without asking again, and a new build is new names. Release builds also write brotli
//! and gzip copies next to each file (`--precompress`), which are sent as they are to a browser
//! that accepts them; anything else is compressed as it is sent (`CompressionLayer`).

use std::net::SocketAddr;
use std::path::Path;

use axum::Router;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::CACHE_CONTROL;
use axum::middleware::Next;
use axum::response::Response;
use leptos::prelude::LeptosOptions;
use tower_http::services::ServeDir;

use crate::state::AppState;

/// How long a browser keeps a file whose name is its content's hash: a year, never revalidated.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// A file without a hash in its name (a development build's) is revalidated on every use.
const REVALIDATE: &str = "no-cache";

/// The console's Leptos options for the site under `site_root`, served at `addr`. File names
/// are hashed when cargo-leptos left its hash file beside this binary (every `make build`
/// does); a site that lacks the files it names is from another build, and says so in the log.
pub fn options(site_root: &Path, addr: SocketAddr) -> LeptosOptions {
    let mut options = LeptosOptions::builder()
        .output_name("z29c")
        .site_root(site_root.to_string_lossy().into_owned())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    options.hash_files = app::assets::hash_file(&options).exists();
    let wasm = app::assets::Assets::of(&options).wasm;
    let built = site_root.join("pkg").join(&wasm);
    if !built.exists() {
        tracing::warn!(
            missing = %built.display(),
            "the site is not the one this binary was built with: pages will load no script; run `make build`"
        );
    }
    options
}

/// `/pkg/`: the site's package directory, precompressed copies first, with cache lifetimes.
pub fn routes(options: &LeptosOptions) -> Router<AppState> {
    let dir = Path::new(options.site_root.as_ref()).join(options.site_pkg_dir.as_ref());
    let files = ServeDir::new(dir).precompressed_br().precompressed_gzip();
    Router::new()
        .nest_service(&format!("/{}", options.site_pkg_dir), files)
        .layer(axum::middleware::from_fn(cache_lifetime))
}

/// Lets browsers keep a hashed file for a year; others they must revalidate.
async fn cache_lifetime(request: Request, next: Next) -> Response {
    let hashed = is_hashed(request.uri().path());
    let mut response = next.run(request).await;
    if response.status().is_success() {
        let lifetime = if hashed { IMMUTABLE } else { REVALIDATE };
        response
            .headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static(lifetime));
    }
    response
}

/// Whether the file at `path` is named `<stem>.<hash>.<extension>`, the hash being the 22
/// characters of cargo-leptos's URL-safe base64 MD5.
pub fn is_hashed(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() >= 3
        && parts[parts.len() - 2].len() == 22
        && parts[parts.len() - 2]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::is_hashed;

    #[test]
    fn only_a_name_carrying_a_content_hash_counts_as_hashed() {
        assert!(is_hashed("/pkg/z29c.Xy3_-abcdefghijklmnopq.wasm"));
        assert!(!is_hashed("/pkg/z29c.wasm"));
        assert!(!is_hashed("/pkg/z29c_bg.wasm"));
        assert!(!is_hashed("/pkg/z29c.short.css"));
        assert!(!is_hashed("/pkg/z29c.Xy3_-abcdefghijklmn!pq.js"));
    }
}
