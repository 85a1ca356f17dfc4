//! Host names in delegation sets: one long-term key, one directory of
//! delegations per host (`gnomon delegate --hosts`), so that a stolen host's
//! online keys are limited to that host and can be revoked by not renewing
//! them.
//!
//! A host name becomes a directory name on the signing machine, part of
//! every file name and a label in `/metrics`, so it is held to a small
//! alphabet: it can never be `.`, `..`, hold a `/`, start with `-` (an
//! option to the tools that copy it) or carry quotes and newlines into the
//! exposition format.

/// Longest host name accepted.
pub const MAX_HOST_LEN: usize = 64;

/// Whether `name` is a host name a delegation set may carry: 1 to
/// [`MAX_HOST_LEN`] of ASCII letters, digits, `.`, `-` and `_`, starting
/// with a letter or digit.
pub fn check_host_name(name: &str) -> Result<(), &'static str> {
    let first = name.bytes().next().ok_or("a host name must not be empty")?;
    if name.len() > MAX_HOST_LEN {
        return Err("a host name must be at most 64 characters");
    }
    if !first.is_ascii_alphanumeric() {
        return Err("a host name must start with a letter or a digit");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err("a host name may hold only letters, digits, `.`, `-` and `_`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_path_components_are_host_names() {
        for good in ["a", "ams-1", "host_2.example.net", "0", &"x".repeat(64)] {
            assert_eq!(check_host_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "-rf",
            "a/b",
            "/",
            "a\\b",
            "a b",
            "a\"b",
            "a\nb",
            "é",
            &"x".repeat(65),
        ] {
            assert!(check_host_name(bad).is_err(), "{bad:?}");
        }
    }
}
