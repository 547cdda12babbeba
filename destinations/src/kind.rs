//! The three kinds of destination, told apart by what they can prove after a lost answer.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a destination offers a client that does not know whether its request took effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Deduplicates creation by `Idempotency-Key`: resending the same key and digest returns
    /// the original result.
    Idempotent,
    /// No deduplication, but deliveries can be looked up by client reference once the status
    /// index has caught up (after the visibility window).
    Queryable,
    /// Neither: nothing the destination says after a lost answer can prove the outcome.
    Opaque,
}

impl Kind {
    /// Every kind, in the order the protocol lists them.
    pub const ALL: [Kind; 3] = [Kind::Idempotent, Kind::Queryable, Kind::Opaque];

    /// The name used on the wire and on command lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Idempotent => "idempotent",
            Kind::Queryable => "queryable",
            Kind::Opaque => "opaque",
        }
    }

    /// Whether creation is deduplicated by `Idempotency-Key`.
    pub fn accepts_idempotency_key(self) -> bool {
        match self {
            Kind::Idempotent => true,
            Kind::Queryable | Kind::Opaque => false,
        }
    }

    /// Whether deliveries can be looked up by client reference.
    pub fn supports_lookup(self) -> bool {
        match self {
            Kind::Queryable => true,
            Kind::Idempotent | Kind::Opaque => false,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`Kind`].
#[derive(Debug, thiserror::Error)]
#[error("unknown destination kind {0:?} (expected idempotent, queryable or opaque)")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

/// A destination to start by name (`z29c destinations --kind NAME`): one of the three kinds
/// of the destination protocol, `payments` or `webhook`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    /// The destination protocol under this kind.
    Protocol(Kind),
    /// The payments API in the style of Stripe's.
    Payments,
    /// The partner webhook receiver.
    Webhook,
}

impl Service {
    /// Every destination, the protocol's kinds first.
    pub const ALL: [Service; 5] = [
        Service::Protocol(Kind::Idempotent),
        Service::Protocol(Kind::Queryable),
        Service::Protocol(Kind::Opaque),
        Service::Payments,
        Service::Webhook,
    ];

    /// The name used on command lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Protocol(kind) => kind.as_str(),
            Service::Payments => "payments",
            Service::Webhook => "webhook",
        }
    }

    /// Its default configuration (a webhook receiver without a signing secret refuses every
    /// delivery until one is set).
    pub fn config(self) -> crate::Config {
        match self {
            Service::Protocol(kind) => crate::Config::new(kind),
            Service::Payments => crate::Config::payments(),
            Service::Webhook => crate::Config {
                signing_secret: None,
                ..crate::Config::webhook(crate::Secret::new(""))
            },
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`Service`].
#[derive(Debug, thiserror::Error)]
#[error("unknown destination {0:?} (expected idempotent, queryable, opaque, payments or webhook)")]
pub struct UnknownService(pub String);

impl FromStr for Service {
    type Err = UnknownService;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Service::ALL
            .into_iter()
            .find(|service| service.as_str() == s)
            .ok_or_else(|| UnknownService(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_from_its_own_name() {
        for kind in Kind::ALL {
            assert_eq!(kind.as_str().parse::<Kind>().unwrap(), kind);
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
    }

    #[test]
    fn every_service_parses_from_its_own_name() {
        for service in Service::ALL {
            assert_eq!(service.as_str().parse::<Service>().unwrap(), service);
            assert_eq!(service.config().service(), service);
        }
    }

    #[test]
    fn an_unknown_kind_is_refused_with_its_name() {
        let error = "flaky".parse::<Kind>().unwrap_err();
        assert!(error.to_string().contains("\"flaky\""));
    }
}
