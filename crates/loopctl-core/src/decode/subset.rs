//! Some keys of a payload, decoded as `serde_json::Value` decodes them, the rest only checked.
//! A stop or a `run_started` reads a handful of keys: building the whole payload as a `Value`
//! (a map, a string per text) was most of what such an event cost the reducer and the trace.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Which keys to keep: `keys` whole, and of the object at `nested.0` only `nested.1`'s keys.
#[derive(Clone, Copy)]
pub struct Keys<'k> {
    pub keys: &'k [&'k str],
    pub nested: Option<(&'k str, &'k [&'k str])>,
}

/// The object `text` holds with only `keys` in it (the last of a repeated key, as `Value`
/// keeps), or `Null` when `text` is no JSON object or is not one `Value` would read (bad
/// syntax, nesting over serde_json's limit): `get` on the result answers as on the whole.
pub fn subset(text: &str, keys: Keys<'_>) -> Value {
    let mut de = serde_json::Deserializer::from_str(text);
    let top = Subset { keys, top: true };
    match top.deserialize(&mut de) {
        Ok(v) if de.end().is_ok() => v,
        _ => Value::Null,
    }
}

struct Subset<'k> {
    keys: Keys<'k>,
    /// A non-object payload is `Null`; a non-object nested value too, but it must still be read.
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Subset<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Subset<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(Key(k)) = map.next_key()? {
            if self.keys.keys.contains(&&*k) {
                out.insert(k.into_owned(), map.next_value()?);
            } else if let Some((_, keys)) = self.keys.nested.filter(|n| n.0 == k) {
                let keys = Keys { keys, nested: None };
                let v = map.next_value_seed(Subset { keys, top: false })?;
                out.insert(k.into_owned(), v);
            } else {
                map.next_value::<Skip>()?;
            }
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if self.top {
            return Err(serde::de::Error::custom("not an object"));
        }
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Value::Null)
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Value, E> {
        self.scalar()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Value, E> {
        self.scalar()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Value, E> {
        self.scalar()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Value, E> {
        self.scalar()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Value, E> {
        self.scalar()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.scalar()
    }
}

impl Subset<'_> {
    fn scalar<E: serde::de::Error>(self) -> Result<Value, E> {
        match self.top {
            true => Err(E::custom("not an object")),
            false => Ok(Value::Null),
        }
    }
}

/// A key, borrowed when written without escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A value read and dropped. Unlike `IgnoredAny` it goes through `deserialize_any`, so
/// serde_json holds it to the nesting limit `Value` is held to.
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
}

#[cfg(test)]
mod tests;
