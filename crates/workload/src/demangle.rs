//! The C++ name of a kernel from its Itanium-mangled PTX name, so a scenario can launch
//! `_Z6vecaddPfS_S_i` as `vecadd` (or `ns::vecadd`).
//!
//! Only the function's qualified name is read: `_Z` and an optional `L`, then a plain name
//! (`6vecadd`), `St` and a name (`std::`), or a nested name (`N2ns6vecaddE`, CV and ref
//! qualifiers skipped). Template arguments and the parameter types are not part of the
//! result (`_Z6kernelIfEvPT_` is `kernel`); names this does not read (operators, local
//! names, substitutions inside the name) have no C++ name here and are launched by their
//! PTX name.

/// The qualified C++ name (`ns::vecadd`) of a mangled name, or `None`.
pub fn cxx_name(mangled: &str) -> Option<String> {
    let mut r = mangled.strip_prefix("_Z")?.as_bytes();
    if let Some(rest) = r.strip_prefix(b"L") {
        r = rest;
    }
    let mut parts: Vec<String> = Vec::new();
    if let Some(rest) = r.strip_prefix(b"N") {
        r = rest;
        while let Some((b'r' | b'V' | b'K' | b'R' | b'O', rest)) = r.split_first() {
            r = rest;
        }
        loop {
            match r.first()? {
                b'E' | b'I' => break,
                b'S' if r.get(1) == Some(&b't') => {
                    parts.push("std".into());
                    r = &r[2..];
                }
                _ => {
                    let (name, rest) = source_name(r)?;
                    parts.push(name);
                    r = rest;
                }
            }
        }
    } else {
        if let Some(rest) = r.strip_prefix(b"St") {
            parts.push("std".into());
            r = rest;
        }
        parts.push(source_name(r)?.0);
    }
    Some(parts.join("::"))
}

/// `<length><identifier>`, and what follows it.
fn source_name(r: &[u8]) -> Option<(String, &[u8])> {
    let digits = r.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || r[0] == b'0' {
        return None;
    }
    let len: usize = std::str::from_utf8(&r[..digits]).ok()?.parse().ok()?;
    let name = r.get(digits..digits.checked_add(len)?)?;
    let name = std::str::from_utf8(name).ok()?;
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let name = if name.starts_with("_GLOBAL__N") {
        "(anonymous namespace)".to_string()
    } else {
        name.to_string()
    };
    Some((name, &r[digits + len..]))
}

#[cfg(test)]
mod tests {
    use super::cxx_name;

    #[test]
    fn plain_nested_static_and_template_names() {
        assert_eq!(cxx_name("_Z6vecaddPfS_S_i").as_deref(), Some("vecadd"));
        assert_eq!(
            cxx_name("_Z9bfs_levelPKiS0_Piiii").as_deref(),
            Some("bfs_level")
        );
        assert_eq!(cxx_name("_ZN2ns6kernelEPf").as_deref(), Some("ns::kernel"));
        assert_eq!(cxx_name("_ZN1a1b1cEv").as_deref(), Some("a::b::c"));
        assert_eq!(cxx_name("_ZL6kernelPf").as_deref(), Some("kernel"));
        assert_eq!(cxx_name("_Z6kernelIfEvPT_").as_deref(), Some("kernel"));
        assert_eq!(
            cxx_name("_ZN2ns6kernelIiEEvPT_").as_deref(),
            Some("ns::kernel")
        );
        assert_eq!(
            cxx_name("_ZN12_GLOBAL__N_16kernelEPf").as_deref(),
            Some("(anonymous namespace)::kernel")
        );
        assert_eq!(cxx_name("_ZSt4swapv").as_deref(), Some("std::swap"));
    }

    #[test]
    fn what_is_not_mangled_or_not_read_has_no_cxx_name() {
        for m in [
            "vecadd",
            "_Z",
            "_Z0a",
            "_Z99abc",
            "_ZN3abc",
            "_ZplRK1aS1_",
            "_Z3a-b",
        ] {
            assert_eq!(cxx_name(m), None, "{m}");
        }
    }
}
