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
    let refusal = refusal_in_address(SignIn::PATH).filter(|e| {
        matches!(
            e,
            ConsoleError::SignIn { .. }
                | ConsoleError::Throttled { .. }
                | ConsoleError::Conflict { .. }
                | ConsoleError::Invalid { .. }
        )
    });
    view! {
        <section class="page narrow">
            <h1>"Sign in"</h1>
            {refusal.map(|e| view! { <p class="error" role="alert" data-testid="refusal">{e.to_string()}</p> })}
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
