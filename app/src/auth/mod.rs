//! Signing in and out. Sessions live in PostgreSQL (tower-sessions); every state-changing
//! server function checks the session's CSRF token, and the role, on the server.

pub mod api;
pub mod components;
pub mod types;
