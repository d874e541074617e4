//! How a choice with parameters — a preemption mechanism ([`preempt::MechanismKind`]) or a
//! scheduling policy ([`sched::PolicyKind`]) — is written, with one spelling in scenario
//! files and on the command line.
//!
//! Both are serde enums tagged by `kind` whose names are kebab-case. A scenario writes the
//! name alone, `mechanism = "chimera"` (every parameter at its default), or a table,
//! `mechanism = { kind = "chimera", deadline_us = 10 }` (or a `[scheduler.mechanism]`
//! section); [`from_value`] reads both. The command line writes `name[:key=value,...]`,
//! `--mechanism chimera:deadline_us=10`, which [`parse`] turns into the same table for
//! [`from_value`]; a list (`--mechanisms`) separates choices with commas, a `key=value`
//! item continuing the parameters of the choice before it ([`parse_list`]): names never
//! hold `=`, so `chimera:deadline_us=5,chimera:deadline_us=10,drain` is three mechanisms.
//! `Display` on either enum writes the command line's form back.

use serde::de::DeserializeOwned;

/// A choice the command line could not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("empty")]
    Empty,
    /// A parameter not written `key=value`.
    #[error("`{item}`: parameters are written key=value")]
    NotKeyValue { item: String },
    #[error("`{key}` is given twice")]
    Duplicate { key: String },
    /// The name, a parameter or a value is wrong; the message names which.
    #[error("{0}")]
    Invalid(String),
}

/// Reads `name[:key=value,...]` into `T` (a serde enum tagged by `kind`): each value is an
/// integer, else a number, else a string, and `T` decides whether it fits.
pub fn parse<T: DeserializeOwned>(spec: &str) -> Result<T, ChoiceError> {
    let (name, params) = match spec.split_once(':') {
        Some((name, params)) => (name, Some(params)),
        None => (spec, None),
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(ChoiceError::Empty);
    }
    let mut table = toml::Table::new();
    table.insert("kind".into(), toml::Value::String(name.into()));
    for item in params.into_iter().flat_map(|p| p.split(',')) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(ChoiceError::NotKeyValue { item: item.into() });
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(ChoiceError::NotKeyValue { item: item.into() });
        }
        let value = if let Ok(i) = value.parse::<i64>() {
            toml::Value::Integer(i)
        } else if let Ok(x) = value.parse::<f64>() {
            toml::Value::Float(x)
        } else if let Ok(b) = value.parse::<bool>() {
            toml::Value::Boolean(b)
        } else {
            toml::Value::String(value.into())
        };
        if table.insert(key.into(), value).is_some() {
            return Err(ChoiceError::Duplicate { key: key.into() });
        }
    }
    from_value(toml::Value::Table(table))
}

/// Reads a choice written as its name alone or as a table tagged by `kind` (a scenario's
/// value, or the command line's made into one).
pub fn from_value<T: DeserializeOwned>(value: toml::Value) -> Result<T, ChoiceError> {
    let table = match value {
        toml::Value::String(name) => {
            toml::Table::from_iter([("kind".to_string(), toml::Value::String(name))])
        }
        toml::Value::Table(table) => table,
        other => {
            return Err(ChoiceError::Invalid(format!(
                "{} `{other}`: write a name, or a table with a `kind`",
                other.type_str()
            )))
        }
    };
    T::deserialize(toml::Value::Table(table))
        .map_err(|e| ChoiceError::Invalid(e.message().trim_end().into()))
}

/// Reads a comma-separated list of choices (see the module's documentation).
pub fn parse_list<T: DeserializeOwned>(list: &str) -> Result<Vec<T>, ChoiceError> {
    let mut specs: Vec<String> = Vec::new();
    for item in list.split(',') {
        match specs.last_mut() {
            Some(spec) if item.contains('=') && !item.contains(':') => {
                spec.push(if spec.contains(':') { ',' } else { ':' });
                spec.push_str(item);
            }
            _ => specs.push(item.to_string()),
        }
    }
    specs.iter().map(|s| parse(s)).collect()
}
