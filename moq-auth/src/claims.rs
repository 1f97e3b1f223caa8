//! The claims a token carries.

use serde::{Deserialize, Deserializer, Serialize};

/// The claims of a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The prefix `put` and `get` are relative to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root: String,
    /// What the holder may publish, relative to `root`.
    #[serde(
        default,
        rename = "put",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub publish: Vec<String>,
    /// What the holder may subscribe to, relative to `root`.
    #[serde(
        default,
        rename = "get",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subscribe: Vec<String>,
    /// When the token expires, in seconds since the Unix epoch.
    #[serde(default, rename = "exp", skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// When it was issued, in seconds since the Unix epoch.
    #[serde(default, rename = "iat", skip_serializing_if = "Option::is_none")]
    pub issued: Option<u64>,
    /// When it starts working, in seconds since the Unix epoch.
    #[serde(default, rename = "nbf", skip_serializing_if = "Option::is_none")]
    pub not_before: Option<u64>,
    /// The relays it is for (`aud`: a string or a list); checked only by a relay given an
    /// audience ([`Authorizer::with_audience`](crate::Authorizer::with_audience)).
    #[serde(
        default,
        rename = "aud",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub audience: Vec<String>,
}

/// A string is a list of one.
fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployed_claims_parse_with_a_string_or_a_list() {
        let one: Claims =
            serde_json::from_str(r#"{"root":"r","put":"a","get":["b","c"],"aud":"relay.example"}"#)
                .unwrap();
        assert_eq!(one.publish, ["a"]);
        assert_eq!(one.subscribe, ["b", "c"]);
        assert_eq!(one.audience, ["relay.example"]);
        assert_eq!(one.expires, None);
    }
}
