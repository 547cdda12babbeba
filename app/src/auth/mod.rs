//! Signing in and out. Sessions live in PostgreSQL (tower-sessions) and exist only once someone
//! signs in; every signed-in request re-reads the account (role, disabled) and a session ends
//! 12 hours after its sign-in. Every state-changing server function checks the session's CSRF
//! token, and the role, on the server; the sign-in form carries a stateless signed token instead
//! (`engine::operators::form_token`), and sign-in is throttled (`engine::operators::sign_in`).

pub mod api;
pub mod components;
pub mod types;
