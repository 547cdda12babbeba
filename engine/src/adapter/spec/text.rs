//! The scalar kinds of an adapter file, each checked as it is read so a problem carries the
//! parser's line: templates and expressions compile, durations and names are well formed.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use super::Auth;
use crate::adapter::secret::SecretRef;
use crate::template;

/// A template string (`/v1/charges/{{ reference | urlencode }}`), compiled when read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Template(pub String);

/// A bare expression (`body.error.code`, `status == 402`), compiled when read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Expression(pub String);

/// How long a provider keeps idempotency keys: `90s`, `30m`, `24h`, `7d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Duration);

/// A span of time in a file: `250ms`, `2s`, `5m`, `1h`, `1d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

/// Sub-expressions a lookup names once (`let: { mine: "items | selectattr(…) | list" }`), in the
/// order the file writes them: each reads the answer and the names before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lets(pub Vec<(String, Expression)>);

thread_local! {
    /// The text of the last scalar refused while reading a file on this thread: serde places
    /// such an error at its enclosing map, so [`super::AdapterSpec::parse`] finds the line of
    /// the text itself.
    static REFUSED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Remembers `text` as the scalar just refused, and passes `error` on.
fn refusing<E>(text: &str, error: E) -> E {
    REFUSED.with(|r| *r.borrow_mut() = Some(text.to_owned()));
    error
}

/// The text of the scalar refused since the last call, if any.
pub(super) fn take_refused() -> Option<String> {
    REFUSED.with(|r| r.borrow_mut().take())
}

impl Template {
    /// The variable paths the template reads.
    pub fn variables(&self) -> BTreeSet<String> {
        template::variables_of_text(&self.0).unwrap_or_default()
    }
}

impl Expression {
    /// The expression as a `{{ … }}` block, the form the template engine reads.
    fn block(text: &str) -> String {
        format!("{{{{ {text} }}}}")
    }

    /// The variable paths the expression reads.
    pub fn variables(&self) -> BTreeSet<String> {
        template::variables_of_text(&Self::block(&self.0)).unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        template::variables_of_text(&text)
            .map_err(|e| refusing(&text, serde::de::Error::custom(e)))?;
        Ok(Template(text))
    }
}

impl<'de> Deserialize<'de> for Expression {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.contains("{{") || text.contains("{%") {
            return Err(refusing(
                &text,
                serde::de::Error::custom(format!(
                    "`{text}` is a template; rule fields are bare expressions (`body.id`, `status == 200`)"
                )),
            ));
        }
        template::variables_of_text(&Expression::block(&text)).map_err(|e| {
            refusing(
                &text,
                serde::de::Error::custom(format!(
                    "expression `{text}` does not compile: {}",
                    e.detail
                )),
            )
        })?;
        Ok(Expression(text))
    }
}

impl Retention {
    /// `90s`, `30m`, `24h` or `7d`.
    pub fn parse(text: &str) -> Result<Retention, String> {
        crate::domain::retention::parse(text).map(Retention)
    }

    /// The retention as written in files (`24h`).
    pub fn text(&self) -> String {
        crate::domain::retention::text(self.0)
    }
}

impl<'de> Deserialize<'de> for Retention {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Retention::parse(&text).map_err(|e| refusing(&text, serde::de::Error::custom(e)))
    }
}

impl Serialize for Retention {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text())
    }
}

impl Span {
    /// `250ms`, `2s`, `5m`, `1h` or `1d`.
    pub fn parse(text: &str) -> Result<Span, String> {
        let refused = || {
            format!(
                "`{text}` is not a span of time: write a whole number and ms, s, m, h or d (`200ms`)"
            )
        };
        let (count, per_ms) = if let Some(count) = text.strip_suffix("ms") {
            (count, 1)
        } else {
            let unit = text.chars().last().ok_or_else(refused)?;
            let per_ms = match unit {
                's' => 1_000,
                'm' => 60_000,
                'h' => 3_600_000,
                'd' => 86_400_000,
                _ => return Err(refused()),
            };
            (&text[..text.len() - 1], per_ms)
        };
        let count: u64 = count.parse().map_err(|_| refused())?;
        Ok(Span(Duration::from_millis(
            count.checked_mul(per_ms).ok_or_else(refused)?,
        )))
    }

    /// The span as written in files (`200ms`, `30s`).
    pub fn text(&self) -> String {
        let ms = u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX);
        if ms % 1_000 == 0 && ms > 0 {
            format!("{}s", ms / 1_000)
        } else {
            format!("{ms}ms")
        }
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Span::parse(&text).map_err(|e| refusing(&text, serde::de::Error::custom(e)))
    }
}

impl Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text())
    }
}

impl Lets {
    /// Whether no name is given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_str())
    }
}

impl<'de> Deserialize<'de> for Lets {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Ordered;
        impl<'de> serde::de::Visitor<'de> for Ordered {
            type Value = Lets;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of names to expressions")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Lets, A::Error> {
                let mut lets: Vec<(String, Expression)> = Vec::new();
                while let Some((name, expression)) = map.next_entry::<String, Expression>()? {
                    let identifier = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                        && name
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                    if !identifier || lets.iter().any(|(n, _)| *n == name) {
                        return Err(refusing(
                            &name,
                            serde::de::Error::custom(format!(
                                "`{}` is not a name `let` can give: use lowercase letters, digits and `_`, each name once",
                                crate::domain::words::displayable(&name)
                            )),
                        ));
                    }
                    lets.push((name, expression));
                }
                Ok(Lets(lets))
            }
        }
        deserializer.deserialize_map(Ordered)
    }
}

impl Serialize for Lets {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, expression) in &self.0 {
            map.serialize_entry(name, expression)?;
        }
        map.end()
    }
}

/// An adapter's name: `^[a-z0-9][a-z0-9_-]{0,62}$`.
pub fn name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let name = String::deserialize(deserializer)?;
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if first_ok && rest_ok && name.len() <= 63 {
        Ok(name)
    } else {
        Err(refusing(
            &name,
            serde::de::Error::custom(format!(
                "`{}` is not an adapter name: use 1 to 63 lowercase letters, digits, `_` or `-`, starting with a letter or digit",
                crate::domain::words::displayable(&name)
            )),
        ))
    }
}

/// `auth` as files write it: a map with exactly one of its four kinds.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bearer: Option<SecretRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    basic: Option<BasicFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    header: Option<HeaderFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hmac_sha256: Option<HmacFile>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BasicFile {
    username: SecretRef,
    password: SecretRef,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderFile {
    name: String,
    value: SecretRef,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HmacFile {
    header: String,
    #[serde(default)]
    prefix: String,
    secret: SecretRef,
}

impl TryFrom<AuthFile> for Auth {
    type Error = &'static str;

    fn try_from(written: AuthFile) -> Result<Self, Self::Error> {
        match written {
            AuthFile {
                bearer: Some(secret),
                basic: None,
                header: None,
                hmac_sha256: None,
            } => Ok(Auth::Bearer(secret)),
            AuthFile {
                bearer: None,
                basic: Some(BasicFile { username, password }),
                header: None,
                hmac_sha256: None,
            } => Ok(Auth::Basic { username, password }),
            AuthFile {
                bearer: None,
                basic: None,
                header: Some(HeaderFile { name, value }),
                hmac_sha256: None,
            } => Ok(Auth::Header { name, value }),
            AuthFile {
                bearer: None,
                basic: None,
                header: None,
                hmac_sha256:
                    Some(HmacFile {
                        header,
                        prefix,
                        secret,
                    }),
            } => Ok(Auth::HmacSha256 {
                header,
                prefix,
                secret,
            }),
            _ => Err("auth is exactly one of `bearer`, `basic`, `header` and `hmac_sha256`"),
        }
    }
}

impl From<Auth> for AuthFile {
    fn from(auth: Auth) -> Self {
        let mut file = AuthFile {
            bearer: None,
            basic: None,
            header: None,
            hmac_sha256: None,
        };
        match auth {
            Auth::Bearer(secret) => file.bearer = Some(secret),
            Auth::Basic { username, password } => {
                file.basic = Some(BasicFile { username, password })
            }
            Auth::Header { name, value } => file.header = Some(HeaderFile { name, value }),
            Auth::HmacSha256 {
                header,
                prefix,
                secret,
            } => {
                file.hmac_sha256 = Some(HmacFile {
                    header,
                    prefix,
                    secret,
                })
            }
        }
        file
    }
}
