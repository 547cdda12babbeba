//! `z29c token list` and `z29c user list`: a table for people, one JSON object per line for
//! programs.

use std::io::{self, Write};

use engine::operators::Listed;
use engine::store::token::TokenRow;
use serde_json::json;

use super::print::{self, Table};

/// Every token: name, role, scope, created, revoked (never a secret).
pub fn tokens(tokens: &[TokenRow], json: bool, out: &mut dyn Write) -> io::Result<()> {
    if json {
        return print::json_lines(
            out,
            tokens.iter().map(|t| {
                json!({ "name": t.name, "role": t.role, "creation_key_prefix": t.creation_key_prefix,
                        "may_configure": t.may_configure, "adapters": t.adapters,
                        "created_at": t.created_at, "revoked_at": t.revoked_at })
            }),
        );
    }
    let mut table = Table::new(&[
        "name",
        "role",
        "configures",
        "creation key prefix",
        "adapters",
        "created",
        "revoked",
    ]);
    for t in tokens {
        table.row(vec![
            t.name.clone(),
            t.role.as_str().to_owned(),
            if t.may_configure { "yes" } else { "no" }.to_owned(),
            print::or_dash(t.creation_key_prefix.as_deref()),
            print::or_dash(t.adapters.as_ref().map(|a| a.join(",")).as_deref()),
            print::time(t.created_at),
            print::maybe_time(t.revoked_at),
        ]);
    }
    table.write(out)
}

/// Every operator account: name, role, created, disabled.
pub fn users(users: &[Listed], json: bool, out: &mut dyn Write) -> io::Result<()> {
    if json {
        return print::json_lines(
            out,
            users.iter().map(|a| {
                json!({ "name": a.username, "role": a.role, "created_at": a.created_at,
                        "disabled_at": a.disabled_at, "enabled": a.disabled_at.is_none() })
            }),
        );
    }
    let mut table = Table::new(&["name", "role", "created", "disabled"]);
    for a in users {
        table.row(vec![
            a.username.clone(),
            a.role.as_str().to_owned(),
            print::time(a.created_at),
            print::maybe_time(a.disabled_at),
        ]);
    }
    table.write(out)
}

/// Failed sign-ins per name and window: name, window, failures (throttled among them), last
/// address, last attempt.
pub fn failures(
    rows: &[engine::store::sign_in::FailureRow],
    json: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    if json {
        return print::json_lines(
            out,
            rows.iter().map(|f| {
                json!({ "name": f.username, "window_start": f.window_start, "failures": f.failures,
                        "throttled": f.throttled, "last_address": f.last_address, "last_at": f.last_at })
            }),
        );
    }
    let mut table = Table::new(&[
        "name",
        "window",
        "failures",
        "throttled",
        "last address",
        "last",
    ]);
    for f in rows {
        table.row(vec![
            f.username.clone(),
            print::time(f.window_start),
            f.failures.to_string(),
            f.throttled.to_string(),
            f.last_address.clone(),
            print::time(f.last_at),
        ]);
    }
    table.write(out)
}
