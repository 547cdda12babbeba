//! Templates in definition and adapter files (docs/DESIGN.md §16): minijinja, configured so two
//! renderings of the same inputs can never differ — no clock, no randomness, no I/O, no
//! environment, a strict undefined (a missing field is an error, never an empty string) and a
//! bounded amount of work per rendering.
//!
//! A *template tree* is a JSON value whose strings are templates: a string that is exactly one
//! `{{ expression }}` evaluates to the expression's value, keeping its type (a number stays a
//! number); any other string containing `{{` or `{%` renders to a string; everything else is
//! taken as written.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use minijinja::value::Serde;
use minijinja::value::ValueKind;
use minijinja::{Environment, UndefinedBehavior, Value as Jinja};
use serde_json::Value;

use crate::domain::InputDigest;

/// The most work one rendering may do, in minijinja's units (an instruction, a byte written or
/// allocated): templates describe requests, not programs.
const FUEL: u64 = 50_000;

/// The most one template may write, and the most a whole tree may render to: what fuel
/// already bounds, held again where the bytes land, whatever a filter allocates.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Why a template could not be compiled or rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template `{template}`: {detail}")]
pub struct TemplateError {
    /// The template as written (cut to a readable length).
    pub template: String,
    /// What went wrong, in minijinja's words.
    pub detail: String,
}

impl TemplateError {
    fn new(template: &str, error: &minijinja::Error) -> Self {
        let mut detail = error.kind().to_string();
        if let Some(more) = error.detail() {
            detail = format!("{detail}: {more}");
        }
        TemplateError {
            template: crate::domain::words::displayable(template),
            detail,
        }
    }
}

static ENVIRONMENT: LazyLock<Environment<'static>> = LazyLock::new(|| {
    // minijinja's own filters, tests and functions (trim, lower, replace, default, join, range,
    // dict, …): none of them reads a clock, draws a random number or touches the outside world.
    // The clock and randomness live in minijinja-contrib, which Z29C does not use.
    let mut env = Environment::new();
    env.remove_global("debug");
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(32);
    env.add_filter("digest", digest);
    env
});

/// `value | digest`: `sha256:<hex>` of the value's RFC 8785 canonical JSON.
fn digest(value: Jinja) -> Result<String, minijinja::Error> {
    let json = to_json(&value)?;
    Ok(InputDigest::of_json(&json).to_string())
}

/// Whether `value` holds an undefined value anywhere: strict mode refuses to print one, but a
/// list or map literal can carry one inside, and a digest over it must not pass for a value.
fn holds_undefined(value: &Jinja) -> bool {
    if value.is_undefined() {
        return true;
    }
    match value.kind() {
        ValueKind::Map => value.try_iter().is_ok_and(|keys| {
            keys.into_iter()
                .any(|key| value.get_item(&key).map_or(true, |v| holds_undefined(&v)))
        }),
        ValueKind::Seq => value
            .try_iter()
            .is_ok_and(|mut items| items.any(|item| holds_undefined(&item))),
        _ => false,
    }
}

fn to_json(value: &Jinja) -> Result<Value, minijinja::Error> {
    if holds_undefined(value) {
        return Err(minijinja::Error::new(
            minijinja::ErrorKind::UndefinedError,
            "a value it reads is undefined",
        ));
    }
    serde_json::to_value(value)
        .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e.to_string()))
}

/// The expression inside `{{ … }}` when `text` is exactly one such block.
fn whole_expression(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then_some(inner.trim())
}

fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%")
}

/// Evaluates one expression (`status == 402`, `body.error.code`) against `context`.
pub fn eval(expression: &str, context: &Value) -> Result<Value, TemplateError> {
    let compiled = ENVIRONMENT
        .compile_expression_owned(expression.to_owned())
        .map_err(|e| TemplateError::new(expression, &e))?;
    let value = compiled
        .eval(Jinja::from(Serde(context)))
        .map_err(|e| TemplateError::new(expression, &e))?;
    if value.is_undefined() {
        return Err(TemplateError {
            template: crate::domain::words::displayable(expression),
            detail: "it names nothing".to_owned(),
        });
    }
    to_json(&value).map_err(|e| TemplateError::new(expression, &e))
}

/// Whether `expression` holds for `context`: a rule's condition. An error counts as false, so
/// a rule about a field an answer lacks simply does not match.
pub fn holds(expression: &str, context: &Value) -> bool {
    ENVIRONMENT
        .compile_expression_owned(expression.to_owned())
        .and_then(|e| e.eval(Jinja::from(Serde(context))))
        .is_ok_and(|v| v.is_true())
}

/// Renders one string: an expression keeps its type, a template gives a string.
pub fn render_text(text: &str, context: &Value) -> Result<Value, TemplateError> {
    if let Some(expression) = whole_expression(text) {
        return eval(expression, context);
    }
    if !is_template(text) {
        return Ok(Value::String(text.to_owned()));
    }
    let template = ENVIRONMENT
        .template_from_str(text)
        .map_err(|e| TemplateError::new(text, &e))?;
    let mut out = Capped(Vec::new());
    match template.render_captured_to(Jinja::from(Serde(context)), &mut out) {
        Ok(_) => String::from_utf8(out.0)
            .map(Value::String)
            .map_err(|_| TemplateError {
                template: crate::domain::words::displayable(text),
                detail: "it rendered bytes that are not UTF-8".to_owned(),
            }),
        Err(_) if out.0.len() >= MAX_OUTPUT_BYTES => Err(too_large(text)),
        Err(e) => Err(TemplateError::new(text, &e)),
    }
}

fn too_large(text: &str) -> TemplateError {
    TemplateError {
        template: crate::domain::words::displayable(text),
        detail: format!("it renders more than {MAX_OUTPUT_BYTES} bytes"),
    }
}

/// Where a rendering writes: refuses a byte past [`MAX_OUTPUT_BYTES`].
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + bytes.len() > MAX_OUTPUT_BYTES {
            self.0.resize(MAX_OUTPUT_BYTES, 0);
            return Err(std::io::Error::other("the output passed its cap"));
        }
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// About how many bytes `value` holds: what a tree's renderings are charged.
fn weight(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len(),
        Value::Array(items) => items.iter().map(weight).sum::<usize>() + 1,
        Value::Object(fields) => {
            fields
                .iter()
                .map(|(k, v)| k.len() + weight(v))
                .sum::<usize>()
                + 1
        }
        _ => 8,
    }
}

/// Renders every string of `tree` (see the module documentation); keys are taken as written.
/// The whole tree renders to at most [`MAX_OUTPUT_BYTES`], however many strings it has.
pub fn render_tree(tree: &Value, context: &Value) -> Result<Value, TemplateError> {
    let mut left = MAX_OUTPUT_BYTES;
    render_within(tree, context, &mut left)
}

fn render_within(tree: &Value, context: &Value, left: &mut usize) -> Result<Value, TemplateError> {
    Ok(match tree {
        Value::String(text) => {
            let rendered = render_text(text, context)?;
            *left = left
                .checked_sub(weight(&rendered))
                .ok_or_else(|| too_large(text))?;
            rendered
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| render_within(item, context, left))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| Ok((k.clone(), render_within(v, context, left)?)))
                .collect::<Result<_, TemplateError>>()?,
        ),
        other => other.clone(),
    })
}

/// Every variable path a string reads (`input.document.title`), compiling it on the way, so a
/// file can be refused for a syntax error or a field nobody provides before it is stored.
pub fn variables_of_text(text: &str) -> Result<BTreeSet<String>, TemplateError> {
    if let Some(expression) = whole_expression(text) {
        let compiled = ENVIRONMENT
            .compile_expression_owned(expression.to_owned())
            .map_err(|e| TemplateError::new(text, &e))?;
        return Ok(compiled.undeclared_variables(true).into_iter().collect());
    }
    if !is_template(text) {
        return Ok(BTreeSet::new());
    }
    let compiled = ENVIRONMENT
        .template_from_str(text)
        .map_err(|e| TemplateError::new(text, &e))?;
    Ok(compiled.undeclared_variables(true).into_iter().collect())
}

/// [`variables_of_text`] over every string of `tree`.
pub fn variables_of_tree(tree: &Value) -> Result<BTreeSet<String>, TemplateError> {
    let mut found = BTreeSet::new();
    match tree {
        Value::String(text) => found.extend(variables_of_text(text)?),
        Value::Array(items) => {
            for item in items {
                found.extend(variables_of_tree(item)?);
            }
        }
        Value::Object(fields) => {
            for value in fields.values() {
                found.extend(variables_of_tree(value)?);
            }
        }
        _ => {}
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_lone_expression_keeps_its_type_and_a_template_gives_a_string() {
        let context = json!({ "input": { "amount": 1250, "name": " Ada " } });
        let tree = json!({
            "amount": "{{ input.amount }}",
            "label": "Pay {{ input.name | trim }}",
            "fixed": 3,
        });
        assert_eq!(
            render_tree(&tree, &context).unwrap(),
            json!({ "amount": 1250, "label": "Pay Ada", "fixed": 3 })
        );
    }

    #[test]
    fn a_missing_field_is_an_error_never_an_empty_string() {
        let context = json!({ "input": {} });
        assert!(render_text("{{ input.absent }}", &context).is_err());
        assert!(render_text("to {{ input.absent }}", &context).is_err());
    }

    #[test]
    fn the_digest_filter_matches_the_engines_canonical_digest() {
        let value = json!({ "b": 1, "a": "x" });
        let rendered = render_text("{{ v | digest }}", &json!({ "v": value.clone() })).unwrap();
        assert_eq!(rendered, json!(InputDigest::of_json(&value).to_string()));
    }

    #[test]
    fn nothing_reads_a_clock_or_draws_a_random_number() {
        let context = json!({});
        for forbidden in [
            "{{ now() }}",
            "{{ [1, 2] | random }}",
            "{{ env.HOME }}",
            "{{ debug() }}",
        ] {
            assert!(render_text(forbidden, &context).is_err(), "{forbidden}");
        }
    }

    #[test]
    fn a_runaway_template_runs_out_of_fuel() {
        let endless =
            "{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}";
        let error = render_text(endless, &json!({})).unwrap_err();
        assert!(error.detail.contains("fuel"), "{error}");
    }

    #[test]
    fn a_template_that_would_allocate_gigabytes_is_refused_with_a_sentence() {
        let context = json!({ "input": { "n": 1_000_000_000_u64, "s": "ab" } });
        for bomb in [
            "{{ 'x' * input.n }}",
            "{{ ('a\\nb' | indent(input.n)) }}",
            "x{{ 'x' * input.n }}",
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
            "{{ input.s | replace('a', 'x' * 100000) | replace('x', 'y' * 100000) }}",
            "{{ range(100000) | join('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx') }}",
            "{{ [input.s] * input.n }}",
        ] {
            let error = render_text(bomb, &context).unwrap_err();
            assert!(
                ["fuel", "more than", "too large"]
                    .iter()
                    .any(|why| error.detail.contains(why)),
                "{bomb}: {error}"
            );
        }
    }

    #[test]
    fn a_tree_of_many_large_strings_is_refused_as_a_whole() {
        let field = "{{ 'x' * 20000 }}";
        let tree = Value::Array(vec![json!(field); 20]);
        let error = render_tree(&tree, &json!({})).unwrap_err();
        assert!(error.detail.contains("more than"), "{error}");
    }

    #[test]
    fn the_variables_a_tree_reads_are_listed_with_their_paths() {
        let tree = json!({ "a": "{{ input.document.title }}", "b": ["{{ steps.render.digest }}"] });
        let read = variables_of_tree(&tree).unwrap();
        assert!(read.contains("input.document.title"), "{read:?}");
        assert!(read.contains("steps.render.digest"), "{read:?}");
    }

    #[test]
    fn a_condition_about_an_absent_field_does_not_hold() {
        assert!(holds("status == 402", &json!({ "status": 402 })));
        assert!(!holds("body.error.code == 'x'", &json!({ "body": {} })));
    }
}
