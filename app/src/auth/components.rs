use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;

use super::api::{SignIn, SignOut, csrf_token, who_is_signed_in};
use crate::error::ConsoleError;
use crate::forms::refusal_in_address;

/// The sign-in page: a plain form, with or without JavaScript. A refused sign-in comes back
/// here with the username typed and the refusal's sentence in the address (a visitor has no
/// session to keep them in; the password is never kept).
#[component]
pub fn SignInPage() -> impl IntoView {
    let csrf = Resource::new(|| (), |_| csrf_token());
    let username = use_query_map()
        .read_untracked()
        .get("username")
        .unwrap_or_default();
    let refusal = refusal_in_address(SignIn::PATH).and_then(|e| shown_refusal(&e));
    view! {
        <section class="page narrow">
            <h1>"Sign in"</h1>
            {refusal.map(|e| view! { <p class="error" role="alert" data-testid="refusal">{e}</p> })}
            <Suspense fallback=|| ()>
                {move || {
                    let username = username.clone();
                    Suspend::new(async move {
                        let token = csrf.await.unwrap_or_default();
                        view! {
                            <form method="post" action=SignIn::url() class="stack">
                                <input type="hidden" name="csrf" value=token />
                                <label>
                                    "Username"
                                    <input type="text" name="username" value=username autocomplete="username" required />
                                </label>
                                <label>
                                    "Password"
                                    <input type="password" name="password" autocomplete="current-password" required />
                                </label>
                                <button type="submit">"Sign in"</button>
                            </form>
                        }
                    })
                }}
            </Suspense>
        </section>
    }
}

/// What the sign-in page says of a refusal its address carries. Anyone can write a link with
/// any text in it, so the page shows only the server's own sentences: a throttling or a wrong
/// password exactly as the server words them, an expired or forged form in the server's words
/// for it, anything else not at all.
fn shown_refusal(error: &ConsoleError) -> Option<String> {
    match error {
        ConsoleError::SignIn { reason } | ConsoleError::Throttled { reason } => {
            own_refusal(reason).then(|| reason.clone())
        }
        ConsoleError::Conflict { .. } | ConsoleError::Invalid { .. } => Some(
            "This form has expired or did not come from this console; reload the page and try again."
                .to_owned(),
        ),
        _ => None,
    }
}

/// Whether `reason` is a sentence the server's sign-in writes (checked where the page is
/// rendered; in the browser the server's rendering stands).
#[cfg(feature = "ssr")]
fn own_refusal(reason: &str) -> bool {
    engine::operators::SignIn::is_own_refusal(reason)
}

#[cfg(not(feature = "ssr"))]
fn own_refusal(_: &str) -> bool {
    false
}

/// Who is signed in, and the way out; or the way in.
#[component]
pub fn OperatorMenu() -> impl IntoView {
    let operator = Resource::new(|| (), |_| who_is_signed_in());
    let csrf = Resource::new(|| (), |_| csrf_token());
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match operator.await {
                    Ok(Some(who)) => {
                        let token = csrf.await.unwrap_or_default();
                        view! {
                            <div class="operator">
                                <span data-testid="signed-in">
                                    {format!(
                                        "Signed in as {} ({})",
                                        who.username,
                                        format!("{:?}", who.role).to_lowercase(),
                                    )}
                                </span>
                                <form method="post" action=SignOut::url() class="inline">
                                    <input type="hidden" name="csrf" value=token />
                                    <button type="submit" class="link">"Sign out"</button>
                                </form>
                                {who.refusal.map(|r| view! { <span class="error" role="alert" data-testid="refusal">{r}</span> })}
                            </div>
                        }
                            .into_any()
                    }
                    _ => view! { <A href="/sign-in" attr:class="operator">"Sign in"</A> }.into_any(),
                }
            })}
        </Suspense>
    }
}
