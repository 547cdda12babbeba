//! Reading the form-encoded parameters of the payments API, and the fingerprint that tells
//! whether two requests under one idempotency key asked the same thing.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::error::PaymentError;

/// The most `metadata[KEY]` pairs a charge may carry (Stripe's limits, as the next three).
const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY_LEN: usize = 40;
const MAX_METADATA_VALUE_LEN: usize = 500;
const MAX_DESCRIPTION_LEN: usize = 1000;
const MAX_CUSTOMER_LEN: usize = 200;
const MAX_AMOUNT: i64 = 99_999_999;

/// The parameters of a request, in the order sent.
#[derive(Clone, Debug, Default)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// Decodes a form-encoded body or query string.
    pub fn decode(bytes: &[u8]) -> Self {
        Params(
            form_urlencoded::parse(bytes)
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect(),
        )
    }

    /// The value of `name`, if sent (the first, if sent more than once).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(sent, _)| sent == name)
            .map(|(_, value)| value.as_str())
    }

    /// sha256 of the method and path and of the parameters, sorted: the same parameters in
    /// another order are the same request.
    pub fn fingerprint(&self, endpoint: &str) -> String {
        let mut sorted: Vec<_> = self.0.iter().collect();
        sorted.sort();
        let mut hash = Sha256::new().chain_update(endpoint).chain_update([0]);
        for (name, value) in sorted {
            hash = hash
                .chain_update(name)
                .chain_update([0])
                .chain_update(value)
                .chain_update([0]);
        }
        hex::encode(hash.finalize())
    }

    /// Refuses a parameter outside `known` (or `metadata[…]` when `metadata` is allowed), and a
    /// parameter sent twice.
    fn check_names(&self, known: &[&str], metadata: bool) -> Result<(), PaymentError> {
        for (index, (name, _)) in self.0.iter().enumerate() {
            let allowed =
                known.contains(&name.as_str()) || (metadata && name.starts_with("metadata["));
            if !allowed {
                return Err(PaymentError::Unknown(name.clone()));
            }
            if self.0[..index].iter().any(|(earlier, _)| earlier == name) {
                return Err(PaymentError::Invalid {
                    param: name.clone(),
                    message: "sent more than once",
                });
            }
        }
        Ok(())
    }
}

/// A valid `POST /v1/charges`.
#[derive(Clone, Debug)]
pub(crate) struct ChargeParams {
    pub amount: i64,
    pub currency: String,
    pub description: Option<String>,
    pub customer: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

impl ChargeParams {
    pub fn read(params: &Params) -> Result<Self, PaymentError> {
        params.check_names(&["amount", "currency", "description", "customer"], true)?;
        let amount = params
            .get("amount")
            .ok_or(PaymentError::Missing("amount"))?;
        let amount = Some(amount)
            .filter(|amount| amount.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|amount| amount.parse::<i64>().ok())
            .filter(|amount| (1..=MAX_AMOUNT).contains(amount))
            .ok_or_else(|| invalid("amount", "must be a whole number from 1 to 99999999"))?;
        let currency = params
            .get("currency")
            .ok_or(PaymentError::Missing("currency"))?;
        if !(currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_lowercase())) {
            return Err(invalid("currency", "must be three lowercase letters"));
        }
        let description = optional(params, "description", MAX_DESCRIPTION_LEN, true)?;
        let customer = optional(params, "customer", MAX_CUSTOMER_LEN, false)?;
        Ok(ChargeParams {
            amount,
            currency: currency.to_owned(),
            description,
            customer,
            metadata: metadata(params)?,
        })
    }

    /// Its `metadata[subject]`, which fault scripts match.
    pub fn subject(params: &Params) -> Option<&str> {
        params.get("metadata[subject]")
    }
}

/// A valid `POST /v1/refunds`.
#[derive(Clone, Debug)]
pub(crate) struct RefundParams {
    pub charge: String,
    pub reason: Option<String>,
}

impl RefundParams {
    pub fn read(params: &Params) -> Result<Self, PaymentError> {
        params.check_names(&["charge", "reason"], false)?;
        let charge = params
            .get("charge")
            .ok_or(PaymentError::Missing("charge"))?;
        if charge.is_empty() || charge.len() > MAX_CUSTOMER_LEN {
            return Err(invalid("charge", "must be a charge id"));
        }
        let reason = params.get("reason").map(str::to_owned);
        if reason.as_deref().is_some_and(|reason| {
            !["duplicate", "fraudulent", "requested_by_customer"].contains(&reason)
        }) {
            return Err(invalid(
                "reason",
                "must be duplicate, fraudulent or requested_by_customer",
            ));
        }
        Ok(RefundParams {
            charge: charge.to_owned(),
            reason,
        })
    }
}

/// The one search query understood: `metadata['KEY']:'VALUE'`.
pub(crate) fn search_query(params: &Params) -> Result<(String, String), PaymentError> {
    params.check_names(&["query"], false)?;
    let query = params.get("query").ok_or(PaymentError::Missing("query"))?;
    let unsupported = || invalid("query", "only metadata['KEY']:'VALUE' is supported");
    let rest = query.strip_prefix("metadata['").ok_or_else(unsupported)?;
    let (key, rest) = rest.split_once("']:'").ok_or_else(unsupported)?;
    let value = rest.strip_suffix('\'').ok_or_else(unsupported)?;
    if key.is_empty() || key.contains('\'') || value.contains('\'') {
        return Err(unsupported());
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// A page of `GET /v1/charges`: whose charges, where the page begins, how many.
pub(crate) struct ListQuery {
    pub customer: Option<String>,
    pub starting_after: Option<String>,
    pub limit: i64,
}

/// `customer`, `starting_after` (a charge id) and `limit` (1 to 100, default 10), as Stripe's
/// list takes them.
pub(crate) fn list_query(params: &Params) -> Result<ListQuery, PaymentError> {
    params.check_names(&["customer", "starting_after", "limit"], false)?;
    let limit = match params.get("limit") {
        None => 10,
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| invalid("limit", "must be a whole number from 1 to 100"))?,
    };
    Ok(ListQuery {
        customer: optional(params, "customer", 200, false)?,
        starting_after: optional(params, "starting_after", 100, false)?,
        limit,
    })
}

fn optional(
    params: &Params,
    name: &'static str,
    max_len: usize,
    empty_allowed: bool,
) -> Result<Option<String>, PaymentError> {
    match params.get(name) {
        None => Ok(None),
        Some("") if !empty_allowed => Err(invalid(name, "must not be empty")),
        Some(value) if value.chars().count() > max_len => Err(invalid(name, "is too long")),
        Some(value) => Ok(Some(value.to_owned())),
    }
}

/// The `metadata[KEY]=VALUE` pairs; an empty value sets nothing (as Stripe unsets a key).
fn metadata(params: &Params) -> Result<BTreeMap<String, String>, PaymentError> {
    let mut metadata = BTreeMap::new();
    for (name, value) in &params.0 {
        let Some(key) = name.strip_prefix("metadata[") else {
            continue;
        };
        let key = key
            .strip_suffix(']')
            .filter(|key| {
                !key.is_empty()
                    && key.chars().count() <= MAX_METADATA_KEY_LEN
                    && !key.contains(['[', ']'])
            })
            .ok_or_else(|| invalid(name, "a metadata key is 1 to 40 characters"))?;
        if value.chars().count() > MAX_METADATA_VALUE_LEN {
            return Err(invalid(name, "a metadata value is at most 500 characters"));
        }
        if !value.is_empty() {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    if metadata.len() > MAX_METADATA_KEYS {
        return Err(invalid("metadata", "at most 50 keys"));
    }
    Ok(metadata)
}

fn invalid(param: &str, message: &'static str) -> PaymentError {
    PaymentError::Invalid {
        param: param.to_owned(),
        message,
    }
}
