//! `ferrocoll-ucc-install` lays out a prefix as UCC's install does, and a C
//! program built with the installed `ucc.pc` runs against the installed
//! `libucc.so.1` found through `LD_LIBRARY_PATH`, as UCC's users run theirs.

use std::path::PathBuf;
use std::process::Command;

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Say that `what` skipped and why; under `REQUIRE_CC=1` (as `.ci/run`
/// sets) a missing C toolchain or pkg-config is a failure instead.
fn skip(what: &str, why: &str) {
    assert!(!std::env::var("REQUIRE_CC").is_ok_and(|v| v == "1"), "REQUIRE_CC=1 but {what} cannot run: {why}");
    println!("skipped {what}: {why}");
}

#[test]
fn installs_library_headers_pkg_config_and_cmake_package() {
    let prefix = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-prefix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&prefix);
    let installer = env!("CARGO_BIN_EXE_ferrocoll-ucc-install");
    // Twice: a second install over the first replaces it.
    for _ in 0..2 {
        run(Command::new(installer).arg("--prefix").arg(&prefix));
    }
    let lib = prefix.join("lib");
    assert!(lib.join("libucc.so.1").is_file());
    assert_eq!(std::fs::read_link(lib.join("libucc.so")).expect("libucc.so is a link"), PathBuf::from("libucc.so.1"));
    for h in ["ucc.h", "ucc_def.h", "ucc_status.h", "ucc_version.h"] {
        assert!(prefix.join("include/ucc/api").join(h).is_file(), "{h}");
    }
    let cmake = std::fs::read_to_string(lib.join("cmake/ucc/ucc-config.cmake")).expect("the CMake package");
    assert!(cmake.contains("add_library(ucc::ucc SHARED IMPORTED)") && cmake.contains("lib/libucc.so.1"), "{cmake}");
    assert!(lib.join("cmake/ucc/ucc-config-version.cmake").is_file());
    let bad = Command::new(installer).output().expect("run the installer");
    assert_eq!(bad.status.code(), Some(2), "no --prefix is a usage error");
    let help = Command::new(installer).arg("--help").output().expect("run the installer");
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--prefix"), "{help:?}");

    let pkg = Command::new("pkg-config")
        .args(["--cflags", "--libs", "ucc"])
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
        .output();
    let Ok(pkg) = pkg.map_err(|e| skip("the pkg-config half", &format!("no pkg-config ({e})"))) else { return };
    assert!(pkg.status.success(), "pkg-config: {}", String::from_utf8_lossy(&pkg.stderr));
    let flags = String::from_utf8_lossy(&pkg.stdout).into_owned();
    assert!(flags.contains("-lucc"), "{flags}");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let src = prefix.join("version.c");
    std::fs::write(
        &src,
        "#include <ucc/api/ucc.h>\n#include <stdio.h>\n#include <string.h>\n\
         int main(void) { unsigned a, b, c; ucc_get_version(&a, &b, &c);\n\
         printf(\"%u.%u.%u %s\\n\", a, b, c, ucc_status_string(UCC_ERR_NOT_FOUND));\n\
         return strcmp(ucc_get_version_string(), UCC_VERSION_STRING) != 0; }\n",
    )
    .expect("write the program");
    let exe = prefix.join("version");
    let built = Command::new(&cc).arg(&src).arg("-o").arg(&exe).args(flags.split_whitespace()).output();
    let Ok(built) = built.map_err(|e| skip("the compile half", &format!("no C compiler ({e})"))) else { return };
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    // No rpath: the loader finds libucc.so.1 through LD_LIBRARY_PATH, as for UCC's users.
    let out = run(Command::new(&exe).env("LD_LIBRARY_PATH", &lib));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1.4.0 Not found\n");
    std::fs::remove_dir_all(&prefix).expect("clean up");
}
