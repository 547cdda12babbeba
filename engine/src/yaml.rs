//! Reading definition and adapter files within a bound (docs/DESIGN.md §15). YAML aliases
//! replay what their anchor holds: the parser bounds how many times an alias is followed, not
//! how much each one replays, so a file of a few hundred kilobytes can stand for billions of
//! nodes. Every file is walked first, counting the nodes it stands for and keeping none of
//! them; one past [`MAX_NODES`] is refused before anything is built.

use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::file_error::FileError;

/// The most nodes a file may stand for once its aliases are expanded: far more than any
/// definition or adapter needs, and little memory when it is all built.
pub const MAX_NODES: usize = 100_000;

/// Parses `source` as a `T`, refusing a file that stands for more than [`MAX_NODES`] nodes.
pub fn from_str<T: DeserializeOwned>(source: &str) -> Result<T, serde_yaml_ng::Error> {
    let mut left = MAX_NODES;
    Counter { left: &mut left }.deserialize(serde_yaml_ng::Deserializer::from_str(source))?;
    serde_yaml_ng::from_str(source)
}

/// [`from_str`], its error as a file's.
pub fn parse<T: DeserializeOwned>(source: &str) -> Result<T, FileError> {
    from_str(source).map_err(|e| FileError::from_yaml(&e))
}

/// Counts the nodes it is shown, and stops the walk at the budget.
struct Counter<'a> {
    left: &'a mut usize,
}

impl Counter<'_> {
    fn take<E: de::Error>(&mut self) -> Result<(), E> {
        match self.left.checked_sub(1) {
            Some(left) => {
                *self.left = left;
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "the file stands for more than {MAX_NODES} values once its aliases are expanded"
            ))),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(mut self, _: bool) -> Result<(), E> {
        self.take()
    }

    fn visit_i64<E: de::Error>(mut self, _: i64) -> Result<(), E> {
        self.take()
    }

    fn visit_u64<E: de::Error>(mut self, _: u64) -> Result<(), E> {
        self.take()
    }

    fn visit_i128<E: de::Error>(mut self, _: i128) -> Result<(), E> {
        self.take()
    }

    fn visit_u128<E: de::Error>(mut self, _: u128) -> Result<(), E> {
        self.take()
    }

    fn visit_f64<E: de::Error>(mut self, _: f64) -> Result<(), E> {
        self.take()
    }

    fn visit_str<E: de::Error>(mut self, _: &str) -> Result<(), E> {
        self.take()
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.take()
    }

    fn visit_none<E: de::Error>(mut self) -> Result<(), E> {
        self.take()
    }

    fn visit_some<D: de::Deserializer<'de>>(mut self, inner: D) -> Result<(), D::Error> {
        self.take()?;
        Counter { left: self.left }.deserialize(inner)
    }

    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, inner: D) -> Result<(), D::Error> {
        Counter { left: self.left }.deserialize(inner)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.take()?;
        while seq
            .next_element_seed(Counter {
                left: &mut *self.left,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.take()?;
        while map
            .next_key_seed(Counter {
                left: &mut *self.left,
            })?
            .is_some()
        {
            map.next_value_seed(Counter {
                left: &mut *self.left,
            })?;
        }
        Ok(())
    }

    fn visit_enum<A: de::EnumAccess<'de>>(mut self, data: A) -> Result<(), A::Error> {
        use de::VariantAccess;
        self.take()?;
        let ((), variant) = data.variant_seed(Counter {
            left: &mut *self.left,
        })?;
        variant.newtype_variant_seed(Counter { left: self.left })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of a few kilobytes whose aliases stand for about `width` to the `depth` nodes.
    fn laughs(width: usize, depth: usize) -> String {
        let mut source = format!("l0: &l0 [{}]\n", vec!["lol"; width].join(", "));
        for level in 1..=depth {
            let previous = format!("*l{}", level - 1);
            source.push_str(&format!(
                "l{level}: &l{level} [{}]\n",
                vec![previous.as_str(); width].join(", ")
            ));
        }
        source
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_is_built() {
        let source = laughs(10, 9);
        assert!(source.len() < 4096, "{}", source.len());
        let error = parse::<serde_json::Value>(&source).unwrap_err();
        assert!(
            error.message.contains("once its aliases are expanded")
                || error.message.contains("repetition limit"),
            "{error}"
        );
    }

    #[test]
    fn one_large_anchor_replayed_many_times_is_refused_though_each_alias_is_followed_once() {
        // 20,000 values, replayed 2,000 times: 40 million nodes from under 100 KiB, within
        // the parser's own limit on alias jumps.
        let anchor = vec!["1"; 20_000].join(",");
        let aliases = vec!["*a"; 2_000].join(",");
        let source = format!("a: &a [{anchor}]\nb: [{aliases}]\n");
        assert!(source.len() < 100 * 1024);
        let error = parse::<serde_json::Value>(&source).unwrap_err();
        assert!(
            error.message.contains("once its aliases are expanded"),
            "{error}"
        );
    }

    #[test]
    fn a_file_within_the_budget_reads_as_without_it() {
        let source = "a: &a {x: 1}\nb: *a\nc: [1, 2, ~]\n";
        let parsed: serde_json::Value = parse(source).unwrap();
        assert_eq!(parsed["b"]["x"], 1);
    }
}
