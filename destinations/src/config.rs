//! How one destination is set up: its name, API and kind, status-index lag, clock and secrets.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::kind::{Kind, Service};

/// The status-index lag of a queryable destination unless configured otherwise.
pub const DEFAULT_VISIBILITY_WINDOW: Duration = Duration::from_millis(1500);

/// How long the payments destination keeps an idempotency key unless configured otherwise
/// (Stripe's 24 hours).
pub const DEFAULT_IDEMPOTENCY_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// Which API a destination serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Api {
    /// Z29C's destination protocol (`PROTOCOL.md`), under [`Config::kind`].
    #[default]
    Protocol,
    /// A payments API in the style of Stripe's (`PAYMENTS.md`).
    Payments,
    /// A partner webhook receiver checking an HMAC signature (`PAYMENTS.md`).
    Webhook,
}

/// The set-up of one destination.
#[derive(Clone, Debug)]
pub struct Config {
    /// Names the destination's rows. Several destinations may share one database (and its
    /// `destination` schema); each reads and writes only the rows carrying its own name.
    pub name: String,
    /// Which API the destination serves.
    pub api: Api,
    /// What a destination of the destination protocol offers after a lost answer. The other
    /// APIs say what they offer themselves; their constructors set the nearest kind (payments:
    /// idempotent, webhook: opaque) and nothing reads it.
    pub kind: Kind,
    /// How long after acceptance a delivery stays invisible to lookups (queryable kind), or a
    /// charge to the search (payments): a "not found" inside this window is not proof of
    /// absence.
    pub visibility_window: Duration,
    /// Where acceptance times and lookup times come from.
    pub clock: Clock,
    /// What a request to a test-only endpoint (`/control/…`, `/ledger`) must present as
    /// `Authorization: Bearer <token>`.
    pub control_token: ControlToken,
    /// Payments only: the key a request must present as `Authorization: Bearer <key>`; `None`
    /// lets every request in.
    pub api_key: Option<Secret>,
    /// Payments only: whether `Idempotency-Key` deduplicates. `false` ignores the header (every
    /// request makes a new effect), to prove that a dishonoured idempotency claim is caught.
    pub honours_idempotency: bool,
    /// Payments only: how long a key's first answer is kept; past it the key is forgotten.
    pub idempotency_retention: Duration,
    /// Payments only: whether `GET /v1/charges/search` exists (some providers have none).
    pub payments_search: bool,
    /// Payments only: whether `GET /v1/charges` lists oldest first (Stripe lists newest first).
    pub list_oldest_first: bool,
    /// Webhook only: the HMAC-SHA256 key of `X-Signature`; `None` refuses every delivery.
    pub signing_secret: Option<Secret>,
}

impl Config {
    /// A destination of `kind`, named after it, with the default visibility window, the
    /// database's clock and a random control token.
    pub fn new(kind: Kind) -> Self {
        Config {
            name: kind.as_str().to_owned(),
            api: Api::Protocol,
            kind,
            visibility_window: DEFAULT_VISIBILITY_WINDOW,
            clock: Clock::Database,
            control_token: ControlToken::random(),
            api_key: None,
            honours_idempotency: true,
            idempotency_retention: DEFAULT_IDEMPOTENCY_RETENTION,
            payments_search: true,
            list_oldest_first: false,
            signing_secret: None,
        }
    }

    /// A payments destination named `payments`, without an API key, honouring idempotency keys
    /// for [`DEFAULT_IDEMPOTENCY_RETENTION`], its search lagging by the default visibility
    /// window.
    pub fn payments() -> Self {
        Config {
            name: Service::Payments.as_str().to_owned(),
            api: Api::Payments,
            ..Config::new(Kind::Idempotent)
        }
    }

    /// A payments destination that promises less, as some real providers do: it ignores
    /// `Idempotency-Key` (every request makes a charge), has no search, and lists charges oldest
    /// first. An honest adapter for it has no idempotency key and looks charges up by walking
    /// the customer's list (`adapters/payments-basic.yaml`).
    pub fn basic_payments() -> Self {
        Config {
            honours_idempotency: false,
            payments_search: false,
            list_oldest_first: true,
            ..Config::payments()
        }
    }

    /// A webhook receiver named `webhook`, checking signatures made with `signing_secret`.
    pub fn webhook(signing_secret: Secret) -> Self {
        Config {
            name: Service::Webhook.as_str().to_owned(),
            api: Api::Webhook,
            signing_secret: Some(signing_secret),
            ..Config::new(Kind::Opaque)
        }
    }

    /// What the destination is, by the name `z29c destinations --kind` takes.
    pub fn service(&self) -> Service {
        match self.api {
            Api::Protocol => Service::Protocol(self.kind),
            Api::Payments => Service::Payments,
            Api::Webhook => Service::Webhook,
        }
    }

    /// The visibility window in milliseconds when the kind has a status index, else `None`.
    pub fn visibility_window_ms(&self) -> Option<u64> {
        self.kind
            .supports_lookup()
            .then(|| u64::try_from(self.visibility_window.as_millis()).unwrap_or(u64::MAX))
    }

    /// The idempotency retention in milliseconds.
    pub(crate) fn idempotency_retention_ms(&self) -> i64 {
        i64::try_from(self.idempotency_retention.as_millis()).unwrap_or(i64::MAX)
    }
}

/// The source of "now" for acceptance times and for the visibility window.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The database's `now()`: what a real service would use.
    #[default]
    Database,
    /// A clock that moves only when told to, so tests can cross the visibility window without
    /// waiting for it.
    Manual(ManualClock),
}

impl Clock {
    /// The time to record instead of the database's `now()`, if any.
    pub(crate) fn fixed_now(&self) -> Option<DateTime<Utc>> {
        match self {
            Clock::Database => None,
            Clock::Manual(clock) => Some(clock.now()),
        }
    }
}

impl From<ManualClock> for Clock {
    fn from(clock: ManualClock) -> Self {
        Clock::Manual(clock)
    }
}

/// A shared clock that tests move by hand. Clones share the same time.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        ManualClock(Arc::new(Mutex::new(start)))
    }

    /// The time the clock shows.
    pub fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = chrono::TimeDelta::from_std(by).expect("a clock advance fits in a TimeDelta");
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }
}

/// The secret that opens a destination's test-only endpoints. Its `Debug` output hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct ControlToken(Arc<str>);

impl ControlToken {
    /// The token `secret`, as the harness that starts a destination chose it.
    pub fn new(secret: &str) -> Self {
        ControlToken(secret.into())
    }

    /// 32 bytes from the operating system's random source, hex-encoded.
    pub fn random() -> Self {
        use std::io::Read;
        let mut bytes = [0_u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut source| source.read_exact(&mut bytes))
            .expect("the operating system's random source is readable");
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        ControlToken(hex.into())
    }

    /// The secret, to send as `Authorization: Bearer <secret>`.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, compared in time that does not depend on where they
    /// first differ.
    pub(crate) fn admits(&self, presented: &str) -> bool {
        let (expected, presented) = (self.0.as_bytes(), presented.as_bytes());
        expected.len() == presented.len()
            && expected
                .iter()
                .zip(presented)
                .fold(0_u8, |differ, (a, b)| differ | (a ^ b))
                == 0
    }
}

impl std::fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlToken(…)")
    }
}

/// A secret a client presents or signs with (an API key, a signing secret). Its `Debug` output
/// hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// The secret `value`.
    pub fn new(value: &str) -> Self {
        Secret(value.into())
    }

    /// The secret itself, to send or to sign with.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this secret, compared in constant time.
    pub(crate) fn admits(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(self.0.as_bytes().ct_eq(presented.as_bytes()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}
