//! RFC 9110 section 5.6.2 `token`: the grammar of HTTP field names.

/// Whether `s` is a non-empty RFC 9110 token:
/// `1*( "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~"
/// / DIGIT / ALPHA )`.
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_tchar)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_grammar() {
        for ok in ["X-Session-ID", "a", "x_y", "!#$%&'*+-.^_`|~09azAZ"] {
            assert!(is_token(ok), "{ok}");
        }
        for bad in [
            "", "a b", "a:b", "a\"b", "é", "a/b", "(x)", "a,b", "a\tb", "a;b", "a=b",
        ] {
            assert!(!is_token(bad), "{bad}");
        }
    }
}
