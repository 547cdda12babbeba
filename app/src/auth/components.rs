use leptos::prelude::*;
use leptos_router::components::A;

use super::api::{SignIn, SignOut, csrf_token, who_is_signed_in};

/// The sign-in and sign-out actions, shared so the header follows them without a reload.
#[derive(Clone, Copy)]
pub struct AuthActions {
    pub sign_in: ServerAction<SignIn>,
    pub sign_out: ServerAction<SignOut>,
}

/// Provides [`AuthActions`] to the whole console.
pub fn provide_auth_actions() {
    provide_context(AuthActions {
        sign_in: ServerAction::<SignIn>::new(),
        sign_out: ServerAction::<SignOut>::new(),
    });
}

/// The sign-in page: a plain form that posts without JavaScript and hydrates with it.
#[component]
pub fn SignInPage() -> impl IntoView {
    let sign_in = expect_context::<AuthActions>().sign_in;
    let csrf = Resource::new(|| (), |_| csrf_token());
    view! {
        <section class="page narrow">
            <h1>"Sign in"</h1>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let token = csrf.await.unwrap_or_default();
                    view! {
                        <ActionForm action=sign_in attr:class="stack">
                            <input type="hidden" name="csrf" value=token />
                            <label>
                                "Username"
                                <input type="text" name="username" autocomplete="username" required />
                            </label>
                            <label>
                                "Password"
                                <input type="password" name="password" autocomplete="current-password" required />
                            </label>
                            <button type="submit">"Sign in"</button>
                        </ActionForm>
                    }
                })}
            </Suspense>
            {move || {
                sign_in
                    .value()
                    .get()
                    .and_then(Result::err)
                    .map(|error| view! { <p class="error" role="alert">{error.to_string()}</p> })
            }}
        </section>
    }
}

/// Who is signed in, and the way out; or the way in.
#[component]
pub fn OperatorMenu() -> impl IntoView {
    let AuthActions { sign_in, sign_out } = expect_context::<AuthActions>();
    // Asked again whenever someone signs in or out in this page.
    let changes = move || (sign_in.version().get(), sign_out.version().get());
    let operator = Resource::new(changes, |_| who_is_signed_in());
    let csrf = Resource::new(changes, |_| csrf_token());
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
                                <ActionForm action=sign_out attr:class="inline">
                                    <input type="hidden" name="csrf" value=token />
                                    <button type="submit" class="link">"Sign out"</button>
                                </ActionForm>
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
