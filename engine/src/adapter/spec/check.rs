//! The static checks of an adapter file beyond its shape: what each template may read, the
//! conclusions of each rule, and the claims that need more than the file's word.

use std::collections::{BTreeMap, BTreeSet};

use super::{AdapterSpec, Expression, REPLAY_MARGIN, Rule, Template};
use crate::file_error::{FileError, line_of};
use crate::template;

/// What deliver request templates may read.
const DELIVER_CONTEXT: [&str; 3] = ["request", "key", "digest"];
/// What withdraw request templates may read.
const WITHDRAW_CONTEXT: [&str; 3] = ["key", "reference", "digest"];
/// What lookup request templates may read: the key, the bound digest, the step's request as it
/// was rendered when its identity was bound, and the page (`page.size`, `page.after`).
const LOOKUP_CONTEXT: [&str; 4] = ["key", "digest", "request", "page"];
/// What outcome rules may read.
const ANSWER_CONTEXT: [&str; 5] = ["status", "headers", "body", "key", "digest"];
/// What a lookup's mappings read besides the answer: the request, and with `pages` the items.
const LOOKUP_ANSWER_EXTRA: [&str; 2] = ["request", "items"];
/// The most attempts a retry schedule may allow.
const MAX_RETRY_ATTEMPTS: u32 = 50;
/// The most troubled attempts a breaker may wait for, and its longest window.
const MAX_BREAKER_TRIPS: u32 = 10_000;
const MAX_BREAKER_WINDOW: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// A request's templates: path, query, headers and body, as strings and trees.
struct RequestTemplates<'a> {
    path: &'a Template,
    query: &'a BTreeMap<String, Template>,
    headers: &'a BTreeMap<String, Template>,
    json: Option<&'a serde_json::Value>,
    form: Option<&'a BTreeMap<String, serde_json::Value>>,
}

pub(super) fn check(spec: &AdapterSpec, source: &str) -> Result<(), FileError> {
    let deliver = &spec.deliver;
    if deliver.json.is_some() && deliver.form.is_some() {
        return Err(FileError::at(
            line_of(source, "deliver:"),
            "deliver has both `json` and `form`: a request has one body",
        ));
    }
    let read = request_variables(
        source,
        "deliver",
        &DELIVER_CONTEXT,
        &RequestTemplates {
            path: &deliver.path,
            query: &deliver.query,
            headers: &deliver.headers,
            json: deliver.json.as_ref(),
            form: deliver.form.as_ref(),
        },
    )?;
    rules(source, "deliver", &deliver.outcomes, false)?;
    idempotency(spec, source, &read)?;
    lookup(spec, source)?;
    withdraw(spec, source)?;
    if spec.probe().is_none() {
        return Err(FileError::at(
            None,
            "verify.probe is required: an adapter delivers nothing until verification has sent it and read its answer as a success",
        ));
    }
    provocations(spec, source)?;
    if let Some(retry) = spec.retry
        && !(1..=MAX_RETRY_ATTEMPTS).contains(&retry.attempts)
    {
        return Err(FileError::at(
            line_of(source, "attempts:"),
            format!("retry.attempts must be between 1 and {MAX_RETRY_ATTEMPTS}"),
        ));
    }
    if let Some(breaker) = spec.breaker {
        if !(1..=MAX_BREAKER_TRIPS).contains(&breaker.trips_after) {
            return Err(FileError::at(
                line_of(source, "trips_after:"),
                format!("breaker.trips_after must be between 1 and {MAX_BREAKER_TRIPS}"),
            ));
        }
        let within = breaker.within.0;
        if within < std::time::Duration::from_secs(1) || within > MAX_BREAKER_WINDOW {
            return Err(FileError::at(
                line_of(source, "within:"),
                "breaker.within must be between 1s and 24h",
            ));
        }
    }
    if let Some(four_eyes) = &spec.four_eyes {
        four_eyes_check(four_eyes, source)?;
    }
    if let Some(problem) = spec.limits.and_then(|l| l.problem()) {
        return Err(FileError::at(
            line_of(source, "limits:"),
            format!("limits.{problem}"),
        ));
    }
    Ok(())
}

/// Only the actions that move money without proof may need two approvers, and a proposal
/// waits between a minute and a week.
fn four_eyes_check(four_eyes: &super::FourEyes, source: &str) -> Result<(), FileError> {
    use crate::domain::OperatorAction;
    const TWO_APPROVERS: [OperatorAction; 3] = [
        OperatorAction::Waive,
        OperatorAction::AuthorizeAnotherAttempt,
        OperatorAction::ResolveIncident,
    ];
    if four_eyes.actions.is_empty() {
        return Err(FileError::at(
            line_of(source, "four_eyes:"),
            "four_eyes.actions names no action",
        ));
    }
    if let Some(other) = four_eyes
        .actions
        .iter()
        .find(|a| !TWO_APPROVERS.contains(a))
    {
        return Err(FileError::at(
            line_of(source, "actions:"),
            format!(
                "four_eyes.actions: {} cannot need two approvers; waive, authorize_another_attempt and resolve_incident can",
                other.name()
            ),
        ));
    }
    let expiry = four_eyes.expires_after.0;
    if expiry < std::time::Duration::from_secs(60)
        || expiry > std::time::Duration::from_secs(7 * 86_400)
    {
        return Err(FileError::at(
            line_of(source, "expires_after:"),
            "four_eyes.expires_after must be between 1m and 7d",
        ));
    }
    Ok(())
}

/// Each provocation has a name and expects a code.
fn provocations(spec: &AdapterSpec, source: &str) -> Result<(), FileError> {
    for provocation in spec.provocations() {
        let code = match &provocation.expect {
            super::Expected::Rejected(code) | super::Expected::FailedBeforeEffect(code) => code,
        };
        if provocation.name.trim().is_empty() || code.trim().is_empty() {
            return Err(FileError::at(
                line_of(source, "provoke:"),
                "every verify.provoke entry needs a `name` and the code its `expect` names",
            ));
        }
    }
    Ok(())
}

/// An idempotent deliver request carries the digest, and the retention outlasts the margin.
fn idempotency(spec: &AdapterSpec, source: &str, read: &BTreeSet<String>) -> Result<(), FileError> {
    let Some(idempotency) = &spec.idempotency else {
        return Ok(());
    };
    if !read.contains("digest") {
        return Err(FileError::at(
            line_of(source, "deliver:"),
            "an idempotent adapter's deliver request must carry `{{ digest }}`: without it the same key with other content could not be told apart",
        ));
    }
    if let Some(retention) = idempotency.retention
        && retention.0 <= 2 * REPLAY_MARGIN
    {
        return Err(FileError::at(
            line_of(source, "retention:"),
            format!(
                "idempotency.retention `{}` is too short: it must be longer than twice the {}-minute replay margin",
                retention.text(),
                REPLAY_MARGIN.as_secs() / 60
            ),
        ));
    }
    Ok(())
}

/// A lookup reads only what its context has and names its visibility window.
fn lookup(spec: &AdapterSpec, source: &str) -> Result<(), FileError> {
    let Some(lookup) = &spec.lookup else {
        return Ok(());
    };
    let read = request_variables(
        source,
        "lookup",
        &LOOKUP_CONTEXT,
        &RequestTemplates {
            path: &lookup.path,
            query: &lookup.query,
            headers: &lookup.headers,
            json: None,
            form: None,
        },
    )?;
    let reads_page_size = std::iter::once(&lookup.path)
        .chain(lookup.query.values())
        .chain(lookup.headers.values())
        .any(|t| t.variables().contains("page.size"));
    match (&lookup.pages, read.contains("page"), reads_page_size) {
        (None, true, _) => {
            return Err(FileError::at(
                line_of(source, "lookup:"),
                "lookup: its request reads `page`, but the lookup declares no `pages`",
            ));
        }
        (Some(_), _, false) => {
            return Err(FileError::at(
                line_of(source, "pages:"),
                "lookup.pages: the request must read `{{ page.size }}` (as the list's limit), so verification can walk more than one page",
            ));
        }
        _ => {}
    }
    if lookup.visibility_window_ms.is_none() {
        return Err(FileError::at(
            line_of(source, "lookup:"),
            "lookup.visibility_window_ms is required: without it a `not found` could never be told from a delivery the index does not show yet",
        ));
    }
    let mut context: Vec<&str> = ANSWER_CONTEXT.to_vec();
    context.push(LOOKUP_ANSWER_EXTRA[0]);
    if let Some(pages) = &lookup.pages {
        for expression in [&pages.items, &pages.next] {
            reads_only(source, "lookup.pages", expression, &context)?;
        }
        context.push(LOOKUP_ANSWER_EXTRA[1]);
    }
    for (name, expression) in &lookup.lets.0 {
        if context.contains(&name.as_str()) {
            return Err(FileError::at(
                line_of(source, name),
                format!("lookup.let: `{name}` is a name the lookup already has; choose another"),
            ));
        }
        reads_only(source, "lookup.let", expression, &context)?;
        context.push(name);
    }
    let mut expressions = vec![
        &lookup.found.when,
        &lookup.found.reference,
        &lookup.found.digest,
        &lookup.not_found,
    ];
    expressions.extend(lookup.found.all.as_ref());
    expressions.extend(lookup.processing.as_ref());
    for expression in expressions {
        reads_only(source, "lookup", expression, &context)?;
    }
    Ok(())
}

/// A withdrawal has one body, reads only its context, says what it cannot undo.
fn withdraw(spec: &AdapterSpec, source: &str) -> Result<(), FileError> {
    let Some(withdraw) = &spec.withdraw else {
        return Ok(());
    };
    if withdraw.json.is_some() && withdraw.form.is_some() {
        return Err(FileError::at(
            line_of(source, "withdraw:"),
            "withdraw has both `json` and `form`: a request has one body",
        ));
    }
    request_variables(
        source,
        "withdraw",
        &WITHDRAW_CONTEXT,
        &RequestTemplates {
            path: &withdraw.path,
            query: &withdraw.query,
            headers: &withdraw.headers,
            json: withdraw.json.as_ref(),
            form: withdraw.form.as_ref(),
        },
    )?;
    if withdraw
        .limits
        .as_deref()
        .is_none_or(|l| l.trim().is_empty())
    {
        return Err(FileError::at(
            line_of(source, "withdraw:"),
            "withdraw.limits is required: say what a withdrawal cannot undo",
        ));
    }
    rules(source, "withdraw", &withdraw.outcomes, true)
}

/// Every variable `templates` read, refusing one outside `context`.
fn request_variables(
    source: &str,
    operation: &str,
    context: &[&str],
    templates: &RequestTemplates<'_>,
) -> Result<BTreeSet<String>, FileError> {
    let mut strings: Vec<&Template> = vec![templates.path];
    strings.extend(templates.query.values());
    strings.extend(templates.headers.values());
    let mut read = BTreeSet::new();
    for text in strings {
        read.extend(allowed(
            source,
            operation,
            &text.0,
            text.variables(),
            context,
        )?);
    }
    let trees = templates
        .json
        .cloned()
        .into_iter()
        .chain(templates.form.map(|f| serde_json::json!(f)));
    for tree in trees {
        read.extend(tree_variables(source, operation, &tree, context)?);
    }
    Ok(read)
}

fn tree_variables(
    source: &str,
    operation: &str,
    tree: &serde_json::Value,
    context: &[&str],
) -> Result<BTreeSet<String>, FileError> {
    let mut read = BTreeSet::new();
    match tree {
        serde_json::Value::String(text) => {
            let variables = template::variables_of_text(text)
                .map_err(|e| FileError::at(line_of(source, text), format!("{operation}: {e}")))?;
            read.extend(allowed(source, operation, text, variables, context)?);
        }
        serde_json::Value::Array(items) => {
            for item in items {
                read.extend(tree_variables(source, operation, item, context)?);
            }
        }
        serde_json::Value::Object(fields) => {
            for value in fields.values() {
                read.extend(tree_variables(source, operation, value, context)?);
            }
        }
        _ => {}
    }
    Ok(read)
}

/// The roots of `variables`, refusing any outside `context`.
fn allowed(
    source: &str,
    operation: &str,
    text: &str,
    variables: BTreeSet<String>,
    context: &[&str],
) -> Result<BTreeSet<String>, FileError> {
    let mut roots = BTreeSet::new();
    for variable in variables {
        let root = variable
            .split(['.', '['])
            .next()
            .unwrap_or_default()
            .to_owned();
        if !context.contains(&root.as_str()) {
            return Err(FileError::at(
                line_of(source, text),
                format!(
                    "{operation}: `{}` reads `{root}`, which {operation} templates do not see (they see {})",
                    crate::domain::words::displayable(text),
                    context
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        roots.insert(root);
    }
    Ok(roots)
}

fn reads_only(
    source: &str,
    operation: &str,
    expression: &Expression,
    context: &[&str],
) -> Result<(), FileError> {
    allowed(
        source,
        operation,
        &expression.0,
        expression.variables(),
        context,
    )
    .map(|_| ())
}

/// Each rule reads only the answer and draws exactly one conclusion its operation allows.
fn rules(source: &str, operation: &str, rules: &[Rule], withdraw: bool) -> Result<(), FileError> {
    for rule in rules {
        let line = line_of(source, &rule.when.0);
        let conclusions = [
            rule.succeeded.is_some(),
            rule.rejected.is_some(),
            rule.failed_before_effect.is_some(),
            rule.withdrawn.is_some(),
        ];
        if conclusions.iter().filter(|c| **c).count() != 1 {
            return Err(FileError::at(
                line,
                format!(
                    "{operation}: the rule `{}` must conclude exactly one of {}",
                    rule.when.0,
                    if withdraw {
                        "`withdrawn`, `rejected` or `failed_before_effect`"
                    } else {
                        "`succeeded`, `rejected` or `failed_before_effect`"
                    }
                ),
            ));
        }
        if (withdraw && rule.succeeded.is_some()) || (!withdraw && rule.withdrawn.is_some()) {
            return Err(FileError::at(
                line,
                format!(
                    "{operation}: the rule `{}` concludes `{}`, which {operation} cannot",
                    rule.when.0,
                    if withdraw { "succeeded" } else { "withdrawn" }
                ),
            ));
        }
        let mut expressions = vec![&rule.when];
        if let Some(s) = &rule.succeeded {
            expressions.push(&s.reference);
            expressions.extend(s.replayed.as_ref());
            expressions.extend(s.fields.values());
        }
        expressions.extend(rule.rejected.as_ref().map(|c| &c.code));
        expressions.extend(rule.failed_before_effect.as_ref().map(|c| &c.code));
        expressions.extend(rule.withdrawn.as_ref().map(|w| &w.reference));
        for expression in expressions {
            reads_only(source, operation, expression, &ANSWER_CONTEXT)?;
        }
    }
    Ok(())
}
