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
use crate::steps::components::StepPage;
use crate::workflow_list::components::WorkflowListPage;
use crate::workflows::components::{StatusPage, WorkflowPage};

/// The whole HTML document, rendered on the server around [`App`]. On a page that can hold an
/// island the scripts load the wasm that hydrates it (`islands=true`), under the response's
/// nonce; any other page loads no wasm, and one line of script says it is live once parsed, as
/// the wasm would have (docs/DESIGN.md §18).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    content_security_policy();
    let scripts = if asked_for_islands() {
        #[cfg(feature = "ssr")]
        let preloads = island_preloads(&options);
        #[cfg(not(feature = "ssr"))]
        let preloads = ();
        view! { <HydrationScripts options=options.clone() islands=true /> {preloads} }.into_any()
    } else {
        view! { <script nonce=leptos::nonce::use_nonce() inner_html=live_without_wasm()></script> }
            .into_any()
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

/// The island a page at `path` can hold (`#[island]`), by its component's name in snake case,
/// which the split wasm's manifest uses: the overview's live counts, a step's action forms and a
/// bulk run's progress. A page elsewhere that held one would stay inert, so
/// `islands::only_the_pages_that_hold_islands_load_the_wasm` renders both kinds.
#[cfg(feature = "ssr")]
fn island_of(path: &str) -> Option<&'static str> {
    if path == "/overview" {
        Some("live_overview")
    } else if path.starts_with("/steps/") {
        Some("step_action_form")
    } else if path.starts_with("/bulk/") {
        Some("live_progress")
    } else {
        None
    }
}

#[cfg(feature = "ssr")]
fn holds_islands(path: &str) -> bool {
    island_of(path).is_some()
}

/// Links that fetch, beside the main wasm, the split wasm's loader and the chunks of the island
/// this page can hold; the main module would otherwise ask for them only once it runs, a second
/// round of fetches before the page is live (docs/DESIGN.md §18).
#[cfg(feature = "ssr")]
fn island_preloads(options: &LeptosOptions) -> impl IntoView + use<> {
    static SPLIT: std::sync::OnceLock<crate::assets::Split> = std::sync::OnceLock::new();
    let split = SPLIT.get_or_init(|| crate::assets::Split::of(options));
    let pkg = format!("/{}", options.site_pkg_dir);
    let chunks = use_context::<http::request::Parts>()
        .and_then(|parts| island_of(parts.uri.path()))
        .and_then(|island| split.chunks.get(island))
        .cloned()
        .unwrap_or_default();
    let loader = split.loader.as_ref().map(|loader| {
        view! { <link rel="modulepreload" href=format!("{pkg}/{loader}") crossorigin="anonymous" /> }
    });
    let chunks = chunks
        .into_iter()
        .map(|chunk| {
            view! {
                <link rel="preload" href=format!("{pkg}/{chunk}") r#as="fetch" r#type="application/wasm" crossorigin="anonymous" />
            }
        })
        .collect_view();
    view! { {loader} {chunks} }
}

/// Whether the page being rendered can hold an island (yes where no request is known).
fn asked_for_islands() -> bool {
    #[cfg(feature = "ssr")]
    {
        use_context::<http::request::Parts>().is_none_or(|parts| holds_islands(parts.uri.path()))
    }
    #[cfg(not(feature = "ssr"))]
    true
}

/// What [`crate::live`] does once the wasm has started on a page without islands, for a page
/// that loads none: the body's `data-hydrated` and the performance mark, once parsed.
fn live_without_wasm() -> String {
    format!(
        "document.addEventListener('DOMContentLoaded', () => {{ \
         document.body.setAttribute('data-hydrated', 'true'); \
         performance.mark('{}'); }});",
        crate::live::HYDRATED_MARK
    )
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
