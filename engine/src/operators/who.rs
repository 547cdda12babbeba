//! Who acts: a person in the console or on the command line, or an API client with its
//! token's role, and whom the audit log names for it.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::Role;
use crate::store::journal::Actor;

/// Whoever takes a recovery action: a person signed in to the console, a person named on the
/// command line, or an API client acting with its token's role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operator {
    /// The account's id, or the token's.
    pub id: Uuid,
    /// The account's username, or the token's name.
    pub username: String,
    pub role: Role,
    #[serde(default)]
    pub via: Via,
    /// The adapters a token made with `--adapters` may use; `None`: any (every person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapters: Option<Vec<String>>,
}

/// Through what an [`Operator`] acts; the audit log names a token's actions as the API's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Via {
    #[default]
    Console,
    Cli,
    Token,
}

impl Operator {
    /// An API client acting with the role its token carries.
    pub fn token(grant: &crate::store::token::Grant) -> Operator {
        Operator {
            id: grant.id,
            username: grant.name.clone(),
            role: grant.role,
            via: Via::Token,
            adapters: grant.adapters.clone(),
        }
    }

    /// Whether this operator may act on the steps of adapter `name`.
    pub fn may_use(&self, name: &str) -> bool {
        crate::domain::names::within(self.adapters.as_deref(), name)
    }

    /// Who the audit log names for this operator's actions.
    pub fn actor(&self) -> Actor<'_> {
        match self.via {
            Via::Console | Via::Cli => Actor::Operator(&self.username),
            Via::Token => Actor::Api(&self.username),
        }
    }
}
