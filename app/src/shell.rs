//! The HTML document, the layout every page shares, and the routes.

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::{SsrMode, path};

use crate::adapters::components::AdaptersPage;
use crate::audit::components::AuditLogPage;
use crate::auth::components::{OperatorMenu, SignInPage};
use crate::bulk::components::{BulkPage, BulkRunPage};
use crate::incidents::components::IncidentPage;
use crate::incidents::list::IncidentListPage;
use crate::overview::components::OverviewPage;
use crate::review::components::ReviewQueuePage;
use crate::scripts::PageScripts;
use crate::steps::components::StepPage;
use crate::workflow_list::components::WorkflowListPage;
use crate::workflows::components::{StatusPage, WorkflowPage};

/// The whole HTML document, rendered on the server around [`App`]. A page's scripts are
/// [`PageScripts`]: in the `<head>`, chosen from the request's path, except on a step's page,
/// which renders them itself once it knows whether it holds a form (docs/DESIGN.md §18).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    content_security_policy();
    // Only the islands hydrate, from the props each carries: nothing outside them is serialized
    // for the browser. Leptos's hydration script does the same, but only where a page loads it,
    // and only for what renders after it; every other page sent its data a second time, as JSON.
    if let Some(context) = Owner::current_shared_context() {
        context.set_is_hydrating(false);
    }
    provide_context(options.clone());
    let scripts = match scripts_by_path() {
        Scripts::ByPath(island) => Some(view! { <PageScripts island /> }),
        Scripts::ByPage => None,
    };
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" href="data:," />
                <link rel="stylesheet" id="leptos" href=stylesheet(&options) />
                <AutoReload options=options.clone() />
                {scripts}
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// Who chooses a page's scripts.
enum Scripts {
    /// The shell, from the path alone: the island a page there can hold, if any.
    ByPath(Option<&'static str>),
    /// The page, in its body before its content, once its data says whether it holds an island
    /// (chosen only on the server: the browser's build renders no document).
    #[cfg_attr(not(feature = "ssr"), allow(dead_code))]
    ByPage,
}

/// Who chooses this request's scripts, by the island a page at its path can hold: the
/// overview's live counts and a bulk run's progress are on every such page, a step's action forms
/// only where the contract and the role permit an action. A page elsewhere that held an island
/// would stay inert, so `islands::only_the_pages_that_hold_islands_load_the_wasm` renders every
/// kind.
fn scripts_by_path() -> Scripts {
    #[cfg(feature = "ssr")]
    if let Some(parts) = use_context::<http::request::Parts>() {
        use crate::scripts::{BULK_RUN_ISLAND, OVERVIEW_ISLAND};
        let path = parts.uri.path();
        return if path == "/overview" {
            Scripts::ByPath(Some(OVERVIEW_ISLAND))
        } else if path.starts_with("/steps/") {
            Scripts::ByPage
        } else if path.starts_with("/bulk/") {
            Scripts::ByPath(Some(BULK_RUN_ISLAND))
        } else {
            Scripts::ByPath(None)
        };
    }
    Scripts::ByPath(None)
}

/// The stylesheet's address (content-hashed in a cargo-leptos build; see [`crate::assets`]).
fn stylesheet(options: &LeptosOptions) -> String {
    #[cfg(feature = "ssr")]
    {
        static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let name = NAME.get_or_init(|| crate::assets::Assets::of(options).css);
        format!("/{}/{name}", options.site_pkg_dir)
    }
    #[cfg(not(feature = "ssr"))]
    format!("/{}/{}.css", options.site_pkg_dir, options.output_name)
}

/// Sets this page's Content-Security-Policy: only the console's own script (the hydration
/// script by its per-response nonce), style and wasm; no framing (docs/DESIGN.md §15).
#[cfg(feature = "ssr")]
fn content_security_policy() {
    let (Some(nonce), Some(response)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) else {
        return;
    };
    let policy = format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    );
    if let Ok(value) = http::HeaderValue::from_str(&policy) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
}

/// The console: layout, navigation and pages.
///
/// Pages render in `SsrMode::Async`: the server waits for their data and sends complete HTML, so
/// every page reads (and every form posts) without JavaScript. Links load whole pages; only the
/// islands inside a page hydrate.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title text="Z29C recovery console" />
        <Router>
            <header class="topbar">
                <A href="/" attr:class="brand">
                    "Z29C"
                </A>
                <nav aria-label="Console">
                    <A href="/">"Review queue"</A>
                    <A href="/overview">"Overview"</A>
                    <A href="/incidents">"Incidents"</A>
                    <A href="/bulk">"Bulk recovery"</A>
                    <A href="/workflows">"Workflows"</A>
                    <A href="/adapters">"Adapters"</A>
                    <A href="/audit">"Audit log"</A>
                </nav>
                <OperatorMenu />
            </header>
            <main>
                <Routes fallback=NotFound>
                    <Route path=path!("/") view=ReviewQueuePage ssr=SsrMode::Async />
                    <Route path=path!("/overview") view=OverviewPage ssr=SsrMode::Async />
                    <Route path=path!("/steps/:id") view=StepPage ssr=SsrMode::Async />
                    <Route path=path!("/incidents") view=IncidentListPage ssr=SsrMode::Async />
                    <Route path=path!("/incidents/:id") view=IncidentPage ssr=SsrMode::Async />
                    <Route path=path!("/workflows") view=WorkflowListPage ssr=SsrMode::Async />
                    <Route path=path!("/workflows/:id") view=WorkflowPage ssr=SsrMode::Async />
                    <Route path=path!("/status/:id") view=StatusPage ssr=SsrMode::Async />
                    <Route path=path!("/audit") view=AuditLogPage ssr=SsrMode::Async />
                    <Route path=path!("/adapters") view=AdaptersPage ssr=SsrMode::Async />
                    <Route path=path!("/bulk") view=BulkPage ssr=SsrMode::Async />
                    <Route path=path!("/bulk/:id") view=BulkRunPage ssr=SsrMode::Async />
                    <Route path=path!("/sign-in") view=SignInPage ssr=SsrMode::Async />
                </Routes>
            </main>
        </Router>
    }
}

/// Shown for any path the console does not know; answers 404 during server rendering.
#[component]
fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <section class="page">
            <h1>"Page not found"</h1>
            <p>"Nothing lives at this address. " <A href="/">"Go to the review queue"</A> "."</p>
        </section>
    }
}
