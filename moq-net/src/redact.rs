//! Secrets out of logs: what a URL, a SETUP path or an error message carries of a token is
//! replaced with `<redacted>` before it is written anywhere.
//!
//! Clients put their bearer token in the connection URL's query (`?jwt=…`, the form
//! deployed relays take), and raw QUIC carries that URL's path and query in SETUP. So every
//! place that would log a URL, a path or a message quoting one formats it through
//! [`Redacted`] (or calls [`redact`]): the value of every query parameter whose name says
//! it is a credential, and anything shaped like a JSON Web Token wherever it appears.
//!
//! ```
//! use moqx_net::redact::Redacted;
//!
//! let url = "https://relay.example/room?jwt=eyJhbGciOiJFZERTQSJ9.eyJyb290Ijoicm9vbSJ9.c2ln&x=1";
//! assert_eq!(
//!     Redacted(url).to_string(),
//!     "https://relay.example/room?jwt=<redacted>&x=1"
//! );
//! ```

use std::borrow::Cow;
use std::fmt;

/// What a redacted secret reads as.
pub const REDACTED: &str = "<redacted>";

/// Query parameter names whose values are credentials (compared without case).
const SECRET_PARAMETERS: &[&str] = &[
    "jwt",
    "token",
    "access_token",
    "auth",
    "authorization",
    "key",
    "secret",
    "password",
    "signature",
    "sig",
];

/// Displays a string with its secrets redacted: see [`redact`].
#[derive(Debug, Clone, Copy)]
pub struct Redacted<'a>(pub &'a str);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(self.0))
    }
}

/// `text` with the value of every credential query parameter (`jwt`, `token`, `key`, …)
/// and every JSON-Web-Token-shaped word replaced by [`REDACTED`]. Borrows when there is
/// nothing to redact.
pub fn redact(text: &str) -> Cow<'_, str> {
    let parameters = redact_parameters(text);
    match redact_jwts(&parameters) {
        Cow::Borrowed(_) => parameters,
        Cow::Owned(owned) => Cow::Owned(owned),
    }
}

/// Replaces the values of credential parameters: `name=value` where `name` follows `?`,
/// `&` or `;` and the value runs to the next `&`, `;`, `#`, whitespace or quote.
fn redact_parameters(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut index = 0;
    while index < bytes.len() {
        let at_name = index > 0 && matches!(bytes[index - 1], b'?' | b'&' | b';');
        if !at_name {
            index += 1;
            continue;
        }
        let name_end = text[index..]
            .find(|c: char| matches!(c, '=' | '&' | ';' | '#') || c.is_whitespace())
            .map_or(bytes.len(), |offset| index + offset);
        if bytes.get(name_end) != Some(&b'=') {
            index = name_end.max(index + 1);
            continue;
        }
        let name = &text[index..name_end];
        let value_start = name_end + 1;
        let value_end = text[value_start..]
            .find(|c: char| matches!(c, '&' | ';' | '#' | '"' | '\'') || c.is_whitespace())
            .map_or(bytes.len(), |offset| value_start + offset);
        let secret = SECRET_PARAMETERS
            .iter()
            .any(|secret| secret.eq_ignore_ascii_case(name));
        if secret && value_end > value_start {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..value_start]);
            out.push_str(REDACTED);
            copied = value_end;
            index = value_end;
        } else {
            // Another parameter's value may hide a `?` that starts one of ours.
            index = value_start;
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// Replaces every word that looks like a JSON Web Token: three base64url parts joined by
/// dots, the first starting `eyJ` (the encoding of `{"`).
fn redact_jwts(text: &str) -> Cow<'_, str> {
    if !text.contains("eyJ") {
        return Cow::Borrowed(text);
    }
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(start) = rest.find("eyJ") {
        let boundary = rest[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_token_char(c));
        let end = rest[start..]
            .find(|c: char| !is_token_char(c))
            .map_or(rest.len(), |offset| start + offset);
        let word = &rest[start..end];
        if boundary && word.split('.').filter(|part| !part.is_empty()).count() >= 3 {
            out.push_str(&rest[..start]);
            out.push_str(REDACTED);
            changed = true;
        } else {
            out.push_str(&rest[..end]);
        }
        rest = &rest[end..];
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.eyJyb290IjoicGxheSJ9.MEUCIQDa-_x";

    #[test]
    fn credential_parameters_are_redacted_and_others_kept() {
        let url = format!("moqt://relay:4443/room?jwt={TOKEN}&name=alice#frag");
        assert_eq!(
            redact(&url),
            "moqt://relay:4443/room?jwt=<redacted>&name=alice#frag"
        );
        assert_eq!(
            redact("/a?TOKEN=abc;key=xyz"),
            "/a?TOKEN=<redacted>;key=<redacted>"
        );
        assert_eq!(redact("/a?name=jwt&jwt"), "/a?name=jwt&jwt");
    }

    #[test]
    fn a_jwt_anywhere_is_redacted() {
        let message = format!("the path \"/room/{TOKEN}\" is not valid");
        assert_eq!(
            redact(&message),
            "the path \"/room/<redacted>\" is not valid"
        );
        assert_eq!(redact(&format!("Bearer {TOKEN}")), "Bearer <redacted>");
    }

    #[test]
    fn text_without_secrets_is_borrowed() {
        for text in [
            "",
            "/room/alice",
            "moqt://h/p?x=1&y=2",
            "eyJ-not-a-token",
            "?",
            "&=",
        ] {
            assert!(matches!(redact(text), Cow::Borrowed(_)), "{text}");
        }
    }

    proptest::proptest! {
        /// Whatever surrounds it, a token in a `jwt` parameter never survives, and
        /// redaction never panics on arbitrary text.
        #[test]
        fn a_token_never_survives(prefix in ".{0,40}", suffix in "[&#;\" ].{0,40}") {
            let text = format!("{prefix}?jwt={TOKEN}{suffix}");
            let redacted = redact(&text);
            proptest::prop_assert!(!redacted.contains(TOKEN), "{}", redacted);
            let bare = format!("{prefix} {TOKEN}{suffix}");
            let redacted = redact(&bare);
            proptest::prop_assert!(!redacted.contains(TOKEN), "{}", redacted);
        }
    }
}
