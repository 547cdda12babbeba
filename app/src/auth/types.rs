use engine::domain::Role;
use serde::{Deserialize, Serialize};

/// The signed-in person, as pages show them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentOperator {
    pub username: String,
    pub role: Role,
    /// Why the last sign-out this session posted was refused, if it was.
    pub refusal: Option<String>,
}
