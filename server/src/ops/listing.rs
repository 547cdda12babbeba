//! `z29c token list` and `z29c user list`: a table for people, one JSON object per line for
//! programs.

use std::io::{self, Write};

use engine::operators::Listed;
use engine::store::token::TokenRow;
use serde_json::json;

use super::print::{self, Table};

/// Every token: name, role, creation-key prefix, created, revoked (never a secret).
pub fn tokens(tokens: &[TokenRow], json: bool, out: &mut dyn Write) -> io::Result<()> {
    if json {
        return print::json_lines(
            out,
            tokens.iter().map(|t| {
                json!({ "name": t.name, "role": t.role, "creation_key_prefix": t.creation_key_prefix,
                        "created_at": t.created_at, "revoked_at": t.revoked_at })
            }),
        );
    }
    let mut table = Table::new(&["name", "role", "creation key prefix", "created", "revoked"]);
    for t in tokens {
        table.row(vec![
            t.name.clone(),
            t.role.as_str().to_owned(),
            print::or_dash(t.creation_key_prefix.as_deref()),
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
