//! UCC's configuration file (`ucc.conf`): lines `NAME=value`, `#` comments.
//!
//! Which file, as UCC decides it: `UCC_CONFIG_FILE` names it; unset or
//! `auto` means `$HOME/ucc.conf` if it exists; empty means none. Values from
//! the environment win over the file's. A file that is named but missing is
//! a warning (as in UCC), one that exists but cannot be read or parsed is an
//! error naming the file and line. `ferrocoll-tune` writes such a file.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The variable that names the configuration file.
pub const CONFIG_FILE_VAR: &str = "UCC_CONFIG_FILE";

/// The most bytes read from a configuration file: far above any real one,
/// low enough that a wrong path (a device, a huge log) fails at once.
const MAX_BYTES: u64 = 1 << 20;

/// The file `UCC_CONFIG_FILE=value` designates (`value` None when unset), or
/// None for no file. For `auto` (and unset) the file is `$HOME/ucc.conf`, only
/// if it exists.
pub fn config_file_path(value: Option<&str>, home: Option<&Path>) -> Option<PathBuf> {
    match value.map(str::trim) {
        Some("") => None,
        Some(v) if !v.eq_ignore_ascii_case("auto") => Some(PathBuf::from(v)),
        _ => home.map(|h| h.join("ucc.conf")).filter(|p| p.is_file()),
    }
}

/// The `(NAME, value)` pairs of a configuration file's text, names as written
/// (callers add the `UCC_` prefix where missing). `origin` names the file in errors.
pub fn parse_config_text(text: &str, origin: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("config file {origin} line {}", n + 1);
        let (name, value) =
            line.split_once('=').ok_or_else(|| Error::invalid_param(format!("{}: no '=' in {line:?}", at())))?;
        let name = name.trim();
        let bare = name.strip_prefix("UCC_").unwrap_or(name);
        if bare.is_empty() || !bare.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
            return Err(Error::invalid_param(format!(
                "{}: {name:?} is not a configuration variable name (A-Z, 0-9, _)",
                at()
            )));
        }
        pairs.push((name.to_string(), value.trim().to_string()));
    }
    Ok(pairs)
}

/// Read and parse the file at `path`: None when it does not exist.
pub fn read_config_file(path: &Path) -> Result<Option<Vec<(String, String)>>> {
    let shown = path.display().to_string();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::invalid_param(format!("config file {shown}: {e}"))),
    };
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return Err(Error::invalid_param(format!(
            "config file {shown}: not a regular file of at most {MAX_BYTES} bytes ({} bytes)",
            meta.len()
        )));
    }
    // The size checked above may not be the size read: a file that grows
    // meanwhile, or one of /proc that says 0 bytes and holds gigabytes
    // (/proc/self/pagemap). Read one byte past the limit, and no more.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| Error::invalid_param(format!("config file {shown}: {e}")))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Error::invalid_param(format!("config file {shown}: more than {MAX_BYTES} bytes")));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| Error::invalid_param(format!("config file {shown}: not UTF-8 text ({e})")))?;
    parse_config_text(&text, &shown).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_comments_and_names() {
        let text = "# tuned\n\nUCC_TL_SHM_TUNE = allreduce:0-4k:@onestep:inf\nCOLL_TRACE=info\n  # indented comment\n";
        let pairs = parse_config_text(text, "t.conf").unwrap();
        assert_eq!(
            pairs,
            [
                ("UCC_TL_SHM_TUNE".to_string(), "allreduce:0-4k:@onestep:inf".to_string()),
                ("COLL_TRACE".to_string(), "info".to_string())
            ]
        );
        // The value may itself hold '='.
        assert_eq!(parse_config_text("A=b=c", "t").unwrap()[0].1, "b=c");
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let e = parse_config_text("A=1\nno equals\n", "t.conf").unwrap_err();
        assert!(e.context().contains("t.conf line 2") && e.context().contains("no equals"), "{e}");
        let e = parse_config_text("lower=1", "t.conf").unwrap_err();
        assert!(e.context().contains("\"lower\""), "{e}");
        let e = parse_config_text("=1", "t.conf").unwrap_err();
        assert!(e.context().contains("line 1"), "{e}");
    }

    #[test]
    fn a_file_larger_than_it_says_is_refused_after_the_limit() {
        // A regular file whose size says 0 and that reads as megabytes (as
        // /proc/self/pagemap, which reads as hundreds of GiB, does too).
        let p = Path::new("/proc/kallsyms");
        match std::fs::metadata(p) {
            Ok(m) if m.is_file() && m.len() == 0 => {}
            _ => return eprintln!("skipped: {} is not a regular file that says 0 bytes here", p.display()),
        }
        let e = read_config_file(p).unwrap_err();
        assert!(e.context().contains("kallsyms") && e.context().contains(&MAX_BYTES.to_string()), "{e}");
    }

    #[test]
    fn binary_content_is_an_error_naming_the_file() {
        let p = std::env::temp_dir().join(format!("ferrocoll-cfgbin-{}.conf", std::process::id()));
        std::fs::write(&p, b"A=1\n\xff\xfe\x00B=2\n").unwrap();
        let e = read_config_file(&p).unwrap_err();
        std::fs::remove_file(&p).unwrap();
        assert!(e.context().contains("ferrocoll-cfgbin") && e.context().contains("UTF-8"), "{e}");
    }

    #[test]
    fn which_file() {
        let dir = std::env::temp_dir().join(format!("ferrocoll-cfgfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(config_file_path(Some(""), Some(&dir)), None, "empty disables");
        assert_eq!(config_file_path(Some("/x/y.conf"), Some(&dir)), Some(PathBuf::from("/x/y.conf")));
        assert_eq!(config_file_path(None, Some(&dir)), None, "no $HOME/ucc.conf");
        std::fs::write(dir.join("ucc.conf"), "A=1\n").unwrap();
        assert_eq!(config_file_path(None, Some(&dir)), Some(dir.join("ucc.conf")));
        assert_eq!(config_file_path(Some("AUTO"), Some(&dir)), Some(dir.join("ucc.conf")));
        assert_eq!(config_file_path(None, None), None);
        assert_eq!(read_config_file(&dir.join("ucc.conf")).unwrap().unwrap().len(), 1);
        assert_eq!(read_config_file(&dir.join("missing.conf")).unwrap(), None);
        let e = read_config_file(&dir).unwrap_err();
        assert!(e.context().contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Never-panic property of the configuration-file parser (outside input).
#[cfg(test)]
mod parser_props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn config_text_never_panics_and_names_only_variables(
            text in "((UCC_)?[A-Z_0-9a-z ]{0,12}(=[^\\n]{0,12})?|#[^\\n]{0,8}|\\PC{0,10})(\\n((UCC_)?[A-Z_0-9]{0,12}=[^\\n]{0,12}|\\PC{0,10})){0,6}",
        ) {
            if let Ok(pairs) = parse_config_text(&text, "fuzz") {
                for (name, _) in pairs {
                    let bare = name.strip_prefix("UCC_").unwrap_or(&name);
                    prop_assert!(!bare.is_empty() && bare.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
                }
            }
        }
    }
}
